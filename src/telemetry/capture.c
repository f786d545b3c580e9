/*
 * capture: one thread per session, poll(2) over the browser's DevTools
 * WebSocket (wslay, as a client) and an eventfd that stop() signals.
 *
 * Setup: Target.setDiscoverTargets at the browser level; each page target
 * is attached with Target.attachToTarget {flatten: true}, and the domains the
 * mask needs are enabled on that session. Commands we send are remembered by
 * id (struct pending) so that replies that matter (response bodies,
 * screenshots) find their context. Tables are bounded: when full, the
 * oldest entry is dropped (a response then goes out without its body).
 */
#include "telemetry/capture.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <wslay/wslay.h>

#include "core/b64.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/xalloc.h"
#include "proxy/ws.h"

#define CAP_PENDING   1024
#define CAP_PAGES     64
#define CAP_RESPONSES 1024
#define CAP_BINDING   "__browserdTelemetry"

const char capture_interaction_js[] =
    "(()=>{if(window.__browserdTel)return;window.__browserdTel=1;"
    "const send=(t,d)=>{try{" CAP_BINDING
    "(JSON.stringify(Object.assign({type:t,url:location.href},d)))}"
    "catch(e){}};"
    "const sel=el=>{if(!el||!el.tagName)return null;let s=el.tagName.toLowerCase();"
    "if(el.id)s+='#'+el.id;else if(el.classList&&el.classList.length)s+='.'+el.classList[0];"
    "return s};"
    "const tag=el=>el&&el.tagName?el.tagName.toLowerCase():null;"
    "addEventListener('click',e=>{const t=e.target;send('interaction_click',{x:e.clientX,"
    "y:e.clientY,selector:sel(t),tag:tag(t),text:t&&t.innerText?t.innerText.slice(0,100):''})},"
    "true);"
    "addEventListener('keydown',e=>{const t=e.target;const secret=t&&t.type==='password';"
    "send('interaction_key',{key:secret?'*':e.key,selector:sel(t),tag:tag(t)})},true);"
    "let st=null,fx=scrollX,fy=scrollY;addEventListener('scroll',e=>{clearTimeout(st);"
    "st=setTimeout(()=>{send('interaction_scroll_settled',{from_x:fx,from_y:fy,to_x:scrollX,"
    "to_y:scrollY,target_selector:e.target===document?'document':sel(e.target)});fx=scrollX;"
    "fy=scrollY},200)},true);})()";

enum pend_kind { P_IGNORE, P_BODY, P_SHOT };

struct pending {
    json_int_t id;
    enum pend_kind kind;
    json_t *ctx; /* P_BODY: the response event data */
};

struct cpage {
    char sid[64];
    char target[64];
    char url[512];
};

struct response {
    char sid[64];
    char request_id[64];
    json_t *data; /* network_response data waiting for loadingFinished */
};

struct capture {
    pthread_t th;
    int efd;
    char session_id[64];
    char *ws_url;
    unsigned mask;
    int shot_ms;
    capture_sink_fn sink;
    void *sink_ctx;
    /* thread-local state */
    struct ws_sock sock;
    wslay_event_context_ptr ws;
    int broken;
    json_int_t next_id;
    struct pending pend[CAP_PENDING];
    size_t npend;
    struct cpage pages[CAP_PAGES];
    size_t npages;
    struct response resp[CAP_RESPONSES];
    size_t nresp;
};

static int on(const struct capture *c, enum telem_cat k)
{
    return (c->mask >> k) & 1u;
}

/* ---- wslay plumbing ---- */

static ssize_t recv_cb(wslay_event_context_ptr ws, uint8_t *buf, size_t len, int flags, void *user)
{
    (void)flags;
    return ws_sock_recv(ws, &((struct capture *)user)->sock, buf, len);
}

static ssize_t send_cb(wslay_event_context_ptr ws, const uint8_t *data, size_t len, int flags,
                       void *user)
{
    return ws_sock_send(ws, &((struct capture *)user)->sock, data, len, flags);
}

/* Sends a command (params stolen, may be NULL). */
static void call(struct capture *c, const char *sid, const char *method, json_t *params,
                 enum pend_kind kind, json_t *ctx)
{
    json_int_t id = c->next_id++;
    json_t *m = json_object();
    json_object_set_new(m, "id", json_integer(id));
    json_object_set_new(m, "method", json_string(method));
    if (params)
        json_object_set_new(m, "params", params);
    if (sid)
        json_object_set_new(m, "sessionId", json_string(sid));
    char *text = jsonx_dump(m);
    json_decref(m);
    struct wslay_event_msg msg = {WSLAY_TEXT_FRAME, (const uint8_t *)text, strlen(text)};
    if (wslay_event_queue_msg(c->ws, &msg) != 0)
        c->broken = 1;
    xfree(text);
    if (kind == P_IGNORE) {
        json_decref(ctx);
        return;
    }
    if (c->npend == CAP_PENDING) {
        json_decref(c->pend[0].ctx);
        memmove(c->pend, c->pend + 1, (CAP_PENDING - 1) * sizeof c->pend[0]);
        c->npend--;
    }
    c->pend[c->npend++] = (struct pending){id, kind, ctx};
}

/* ---- pages ---- */

static struct cpage *page_of(struct capture *c, const char *sid)
{
    for (size_t i = 0; sid && i < c->npages; i++)
        if (strcmp(c->pages[i].sid, sid) == 0)
            return &c->pages[i];
    return NULL;
}

static void page_attached(struct capture *c, const char *sid, const json_t *info)
{
    if (c->npages == CAP_PAGES)
        return;
    struct cpage *p = &c->pages[c->npages++];
    snprintf(p->sid, sizeof p->sid, "%s", sid);
    snprintf(p->target, sizeof p->target, "%s", jsonx_str(info, "targetId") ?: "");
    snprintf(p->url, sizeof p->url, "%s", jsonx_str(info, "url") ?: "");
    if (on(c, TELEM_SYSTEM))
        call(c, sid, "Inspector.enable", NULL, P_IGNORE, NULL);
    if (on(c, TELEM_CONSOLE) || on(c, TELEM_INTERACTION))
        call(c, sid, "Runtime.enable", NULL, P_IGNORE, NULL);
    if (on(c, TELEM_NETWORK))
        call(c, sid, "Network.enable",
             json_pack("{s:i,s:i}", "maxTotalBufferSize", 16 * 1024 * 1024, "maxResourceBufferSize",
                       4 * 1024 * 1024),
             P_IGNORE, NULL);
    if (on(c, TELEM_PAGE) || on(c, TELEM_INTERACTION))
        call(c, sid, "Page.enable", NULL, P_IGNORE, NULL);
    if (on(c, TELEM_PAGE))
        call(c, sid, "PerformanceTimeline.enable",
             json_pack("{s:[s,s]}", "eventTypes", "layout-shift", "largest-contentful-paint"),
             P_IGNORE, NULL);
    if (on(c, TELEM_INTERACTION)) {
        call(c, sid, "Runtime.addBinding", json_pack("{s:s}", "name", CAP_BINDING), P_IGNORE, NULL);
        call(c, sid, "Page.addScriptToEvaluateOnNewDocument",
             json_pack("{s:s}", "source", capture_interaction_js), P_IGNORE, NULL);
        call(c, sid, "Runtime.evaluate", json_pack("{s:s}", "expression", capture_interaction_js),
             P_IGNORE, NULL);
    }
    call(c, sid, "Runtime.runIfWaitingForDebugger", NULL, P_IGNORE, NULL);
}

static void page_detached(struct capture *c, const char *sid)
{
    struct cpage *p = page_of(c, sid);
    if (!p)
        return;
    size_t i = (size_t)(p - c->pages);
    memmove(p, p + 1, (c->npages - i - 1) * sizeof *p);
    c->npages--;
}

/* ---- events ---- */

static json_t *num(const json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_incref(v) : json_null();
}

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

static json_t *copy_or_null(const json_t *v)
{
    return v ? json_deep_copy(v) : json_null();
}

/* Adds the SDK's BrowserEventContext (target, CDP session, page URL unless
 * data has one) to data; returns data. */
static json_t *with_ctx(struct capture *c, const char *sid, json_t *data)
{
    struct cpage *p = page_of(c, sid);
    if (sid)
        json_object_set_new(data, "session_id", json_string(sid));
    if (p) {
        json_object_set_new(data, "target_id", json_string(p->target));
        json_object_set_new(data, "target_type", json_string("page"));
        if (!json_object_get(data, "url"))
            json_object_set_new(data, "url", json_string(p->url));
    }
    return data;
}

/* A CDP-sourced event (source {kind: cdp, event: cdp_event}). */
static void emit_cdp(struct capture *c, enum telem_cat k, const char *type, const char *cdp_event,
                     int truncated, json_t *data)
{
    if (!on(c, k)) {
        json_decref(data);
        return;
    }
    struct telem_src src = {"cdp", cdp_event, truncated};
    c->sink(c->sink_ctx, c->session_id, k, type, &src, data);
}

/* A console argument as it prints. */
static char *arg_text(const json_t *a)
{
    const json_t *v = json_object_get(a, "value");
    if (json_is_string(v))
        return xstrdup(json_string_value(v));
    if (v && !json_is_null(v))
        return jsonx_dump(v);
    const char *d = jsonx_str(a, "description")           ? jsonx_str(a, "description")
                    : jsonx_str(a, "unserializableValue") ? jsonx_str(a, "unserializableValue")
                    : jsonx_str(a, "type")                ? jsonx_str(a, "type")
                                                          : "";
    return xstrdup(d);
}

/* A string of at most TELEM_BODY_STRUCTURED bytes (cut on a UTF-8 boundary). */
static json_t *bounded_str(const char *s, int *truncated)
{
    size_t len = strlen(s), keep = telem_utf8_cut(s, len, TELEM_BODY_STRUCTURED);
    if (keep < len)
        *truncated = 1;
    json_t *v = json_stringn(s, keep);
    return v ? v : json_string("");
}

static void console_event(struct capture *c, const char *sid, const json_t *p)
{
    const char *level = jsonx_str(p, "type");
    const json_t *args = json_object_get(p, "args");
    int trunc = 0;
    json_t *list = json_array();
    size_t cap = 256, len = 0, i;
    char *text = xcalloc(1, cap);
    const json_t *a;
    json_array_foreach(args, i, a)
    {
        char *piece = arg_text(a);
        json_array_append_new(list, bounded_str(piece, &trunc));
        size_t pl = strlen(piece);
        if (len + pl + 2 > cap) {
            cap = (len + pl + 2) * 2;
            text = xrealloc(text, cap);
        }
        if (i)
            text[len++] = ' ';
        memcpy(text + len, piece, pl + 1);
        len += pl;
        xfree(piece);
    }
    int error = level && (strcmp(level, "error") == 0 || strcmp(level, "assert") == 0);
    json_t *d = json_pack("{s:o,s:o,s:o}", "level", str_or_null(level), "text",
                          bounded_str(text, &trunc), "args", list);
    xfree(text);
    if (json_object_get(p, "stackTrace"))
        json_object_set_new(d, "stack_trace", json_deep_copy(json_object_get(p, "stackTrace")));
    emit_cdp(c, TELEM_CONSOLE, error ? "console_error" : "console_log", "Runtime.consoleAPICalled",
             trunc, with_ctx(c, sid, d));
}

static void exception_event(struct capture *c, const char *sid, const json_t *p)
{
    const json_t *d = json_object_get(p, "exceptionDetails");
    const json_t *ex = json_object_get(d, "exception");
    /* "Uncaught Error: boom": the details' text and the first line of the
     * exception's description. */
    const char *t = jsonx_str(d, "text") ? jsonx_str(d, "text") : "Uncaught";
    const char *desc = jsonx_str(ex, "description");
    char *text = desc ? xasprintf("%s %.*s", t, (int)strcspn(desc, "\n"), desc) : xstrdup(t);
    int trunc = 0;
    json_t *o = json_pack("{s:o,s:o,s:o,s:o}", "text", bounded_str(text, &trunc), "line",
                          num(d, "lineNumber"), "column", num(d, "columnNumber"), "source_url",
                          str_or_null(jsonx_str(d, "url")));
    xfree(text);
    if (json_object_get(d, "stackTrace"))
        json_object_set_new(o, "stack_trace", json_deep_copy(json_object_get(d, "stackTrace")));
    emit_cdp(c, TELEM_CONSOLE, "console_error", "Runtime.exceptionThrown", trunc,
             with_ctx(c, sid, o));
}

static void network_event(struct capture *c, const char *sid, const char *m, const json_t *p)
{
    const char *rid = jsonx_str(p, "requestId");
    if (!rid)
        return;
    if (strcmp(m, "Network.requestWillBeSent") == 0) {
        const json_t *rq = json_object_get(p, "request");
        const json_t *redirect = json_object_get(p, "redirectResponse");
        json_t *d = json_pack("{s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:b}", "request_id", rid, "url",
                              str_or_null(jsonx_str(rq, "url")), "method",
                              str_or_null(jsonx_str(rq, "method")), "resource_type",
                              str_or_null(jsonx_str(p, "type")), "document_url",
                              str_or_null(jsonx_str(p, "documentURL")), "headers",
                              copy_or_null(json_object_get(rq, "headers")), "initiator_type",
                              str_or_null(jsonx_str(json_object_get(p, "initiator"), "type")),
                              "is_redirect", redirect != NULL);
        if (redirect)
            json_object_set_new(d, "redirect_url", str_or_null(jsonx_str(redirect, "url")));
        if (jsonx_str(rq, "postData"))
            json_object_set_new(d, "post_data", json_string(jsonx_str(rq, "postData")));
        else if (jsonx_bool(rq, "hasPostData", 0))
            json_object_set_new(d, "post_data_omitted", json_true());
        emit_cdp(c, TELEM_NETWORK, "network_request", m, 0, with_ctx(c, sid, d));
    } else if (strcmp(m, "Network.responseReceived") == 0) {
        const json_t *rs = json_object_get(p, "response");
        json_t *d = json_pack("{s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "request_id", rid, "url",
                              str_or_null(jsonx_str(rs, "url")), "status", num(rs, "status"),
                              "status_text", str_or_null(jsonx_str(rs, "statusText")), "mime_type",
                              str_or_null(jsonx_str(rs, "mimeType")), "resource_type",
                              str_or_null(jsonx_str(p, "type")), "headers",
                              copy_or_null(json_object_get(rs, "headers")), "timing",
                              copy_or_null(json_object_get(rs, "timing")));
        with_ctx(c, sid, d);
        if (c->nresp == CAP_RESPONSES) {
            /* Full: the oldest goes out without its body. */
            json_object_set_new(c->resp[0].data, "body_excluded", json_string("not retained"));
            emit_cdp(c, TELEM_NETWORK, "network_response", "Network.responseReceived", 0,
                     c->resp[0].data);
            memmove(c->resp, c->resp + 1, (CAP_RESPONSES - 1) * sizeof c->resp[0]);
            c->nresp--;
        }
        struct response *r = &c->resp[c->nresp++];
        snprintf(r->sid, sizeof r->sid, "%s", sid ? sid : "");
        snprintf(r->request_id, sizeof r->request_id, "%s", rid);
        r->data = d;
    } else if (strcmp(m, "Network.loadingFinished") == 0 ||
               strcmp(m, "Network.loadingFailed") == 0) {
        int failed = strcmp(m, "Network.loadingFailed") == 0;
        for (size_t i = 0; i < c->nresp; i++) {
            if (strcmp(c->resp[i].request_id, rid) != 0)
                continue;
            json_t *d = c->resp[i].data;
            char rsid[64];
            snprintf(rsid, sizeof rsid, "%s", c->resp[i].sid);
            memmove(c->resp + i, c->resp + i + 1, (c->nresp - i - 1) * sizeof c->resp[0]);
            c->nresp--;
            json_object_set_new(d, "encoded_data_length", num(p, "encodedDataLength"));
            const char *mt = jsonx_str(d, "mime_type");
            if (!failed && (telem_body_limit(mt) > 0 || telem_mime_missing(mt))) {
                call(c, rsid[0] ? rsid : NULL, "Network.getResponseBody",
                     json_pack("{s:s}", "requestId", rid), P_BODY, d);
                return;
            }
            json_object_set_new(d, "body_excluded", json_string(failed ? "failed" : "binary"));
            emit_cdp(c, TELEM_NETWORK, "network_response", "Network.responseReceived", 0, d);
            break;
        }
        if (failed)
            emit_cdp(c, TELEM_NETWORK, "network_loading_failed", m, 0,
                     with_ctx(c, sid,
                              json_pack("{s:s,s:o,s:b,s:o}", "request_id", rid, "error_text",
                                        str_or_null(jsonx_str(p, "errorText")), "canceled",
                                        jsonx_bool(p, "canceled", 0), "resource_type",
                                        str_or_null(jsonx_str(p, "type")))));
    }
}

static void body_reply(struct capture *c, json_t *d, const json_t *reply)
{
    const json_t *res = json_object_get(reply, "result");
    const char *body = jsonx_str(res, "body");
    const char *mt = jsonx_str(d, "mime_type");
    size_t limit = telem_body_limit(mt);
    int missing = telem_mime_missing(mt);
    int truncated = 0;
    unsigned char *dec = NULL;
    size_t len = body ? strlen(body) : 0;
    /* Text or binary is the media type's call (Chromium hands form data
     * and other text over base64-encoded too); the transfer encoding is
     * undone first. A response without a type is judged by its bytes. */
    if (body && jsonx_bool(res, "base64Encoded", 0)) {
        size_t n = 0;
        if (b64_decode(body, len, &dec, &n) != 0) {
            dec = NULL;
            body = NULL;
        } else {
            body = (const char *)dec;
            len = n;
        }
    }
    if (body && missing && limit == 0 &&
        telem_bytes_are_text((const unsigned char *)body, len < 65536 ? len : 65536))
        limit = TELEM_BODY_TEXT;
    if (!body) {
        json_object_set_new(d, "body_excluded", json_string("unavailable"));
    } else if (limit == 0 || (dec && !telem_bytes_are_text((const unsigned char *)body,
                                                           len < limit ? len : limit))) {
        json_object_set_new(d, "body_excluded", json_string("binary"));
    } else {
        size_t keep = telem_utf8_cut(body, len, limit);
        json_t *s = json_stringn(body, keep);
        json_object_set_new(d, "body", s ? s : json_string(""));
        json_object_set_new(d, "body_size", json_integer((json_int_t)len));
        json_object_set_new(d, "body_truncated", json_boolean(keep < len));
        truncated = keep < len;
    }
    xfree(dec);
    emit_cdp(c, TELEM_NETWORK, "network_response", "Network.responseReceived", truncated,
             json_incref(d));
}

static void binding_called(struct capture *c, const char *sid, const json_t *p)
{
    if (!jsonx_str(p, "name") || strcmp(jsonx_str(p, "name"), CAP_BINDING) != 0)
        return;
    const char *payload = jsonx_str(p, "payload");
    json_t *d = payload ? json_loads(payload, JSON_REJECT_DUPLICATES, NULL) : NULL;
    const char *type = jsonx_str(d, "type");
    static const char *const types[] = {"interaction_click", "interaction_key",
                                        "interaction_scroll_settled"};
    const char *t = NULL;
    for (size_t i = 0; type && i < 3; i++)
        if (strcmp(type, types[i]) == 0)
            t = types[i];
    if (!json_is_object(d) || !t) {
        json_decref(d);
        return;
    }
    json_object_del(d, "type");
    emit_cdp(c, TELEM_INTERACTION, t, "Runtime.bindingCalled", 0, with_ctx(c, sid, d));
}

static void crashed(struct capture *c, const char *sid, const char *m, const char *target,
                    const char *status, json_t *code)
{
    json_t *d = json_pack("{s:s,s:s,s:o,s:o,s:o}", "phase", "running", "service_name", "renderer",
                          "target_id", str_or_null(target), "status", str_or_null(status),
                          "error_code", code ? code : json_null());
    if (status && strcmp(status, "oom") == 0)
        json_object_set_new(d, "oom", json_true());
    emit_cdp(c, TELEM_SYSTEM, "service_crashed", m, 0, with_ctx(c, sid, d));
}

static void on_event(struct capture *c, const char *sid, const char *m, const json_t *p)
{
    if (strcmp(m, "Target.targetCreated") == 0) {
        const json_t *ti = json_object_get(p, "targetInfo");
        const char *type = jsonx_str(ti, "type");
        if (type && strcmp(type, "page") == 0) {
            call(c, NULL, "Target.attachToTarget",
                 json_pack("{s:s,s:b}", "targetId", jsonx_str(ti, "targetId"), "flatten", 1),
                 P_IGNORE, NULL);
            emit_cdp(c, TELEM_PAGE, "page_tab_opened", m, 0,
                     json_pack("{s:o,s:s,s:o,s:o,s:o}", "target_id",
                               str_or_null(jsonx_str(ti, "targetId")), "target_type", "page", "url",
                               str_or_null(jsonx_str(ti, "url")), "title",
                               str_or_null(jsonx_str(ti, "title")), "opener_id",
                               str_or_null(jsonx_str(ti, "openerId"))));
        }
    } else if (strcmp(m, "Target.attachedToTarget") == 0) {
        const char *s = jsonx_str(p, "sessionId");
        if (s && !page_of(c, s))
            page_attached(c, s, json_object_get(p, "targetInfo"));
    } else if (strcmp(m, "Target.detachedFromTarget") == 0) {
        page_detached(c, jsonx_str(p, "sessionId"));
    } else if (strcmp(m, "Target.targetCrashed") == 0) {
        crashed(c, NULL, m, jsonx_str(p, "targetId"), jsonx_str(p, "status"), num(p, "errorCode"));
    } else if (strcmp(m, "Inspector.targetCrashed") == 0) {
        struct cpage *pg = page_of(c, sid);
        crashed(c, sid, m, pg ? pg->target : NULL, "crashed", NULL);
    } else if (strcmp(m, "Runtime.consoleAPICalled") == 0) {
        console_event(c, sid, p);
    } else if (strcmp(m, "Runtime.exceptionThrown") == 0) {
        exception_event(c, sid, p);
    } else if (strcmp(m, "Runtime.bindingCalled") == 0) {
        binding_called(c, sid, p);
    } else if (strncmp(m, "Network.", 8) == 0) {
        network_event(c, sid, m, p);
    } else if (strcmp(m, "Page.frameNavigated") == 0) {
        const json_t *f = json_object_get(p, "frame");
        int main_frame = json_object_get(f, "parentId") == NULL;
        struct cpage *pg = page_of(c, sid);
        if (pg && main_frame)
            snprintf(pg->url, sizeof pg->url, "%s", jsonx_str(f, "url") ?: "");
        emit_cdp(
            c, TELEM_PAGE, "page_navigation", m, 0,
            with_ctx(c, sid,
                     json_pack("{s:o,s:o,s:o,s:o,s:b}", "url", str_or_null(jsonx_str(f, "url")),
                               "frame_id", str_or_null(jsonx_str(f, "id")), "loader_id",
                               str_or_null(jsonx_str(f, "loaderId")), "parent_frame_id",
                               str_or_null(jsonx_str(f, "parentId")), "main_frame", main_frame)));
    } else if (strcmp(m, "Page.domContentEventFired") == 0 ||
               strcmp(m, "Page.loadEventFired") == 0) {
        emit_cdp(c, TELEM_PAGE, m[5] == 'd' ? "page_dom_content_loaded" : "page_load", m, 0,
                 with_ctx(c, sid, json_pack("{s:o}", "cdp_timestamp", num(p, "timestamp"))));
    } else if (strcmp(m, "PerformanceTimeline.timelineEventAdded") == 0) {
        const json_t *ev = json_object_get(p, "event");
        const char *type = jsonx_str(ev, "type");
        json_t *d =
            json_pack("{s:o,s:o,s:o}", "time", num(ev, "time"), "duration", num(ev, "duration"),
                      "source_frame_id", str_or_null(jsonx_str(ev, "frameId")));
        if (type && strcmp(type, "layout-shift") == 0) {
            json_object_set_new(d, "layout_shift_details",
                                copy_or_null(json_object_get(ev, "layoutShiftDetails")));
            emit_cdp(c, TELEM_PAGE, "page_layout_shift", m, 0, with_ctx(c, sid, d));
        } else if (type && strcmp(type, "largest-contentful-paint") == 0) {
            json_object_del(d, "duration");
            json_object_set_new(d, "lcp_details", copy_or_null(json_object_get(ev, "lcpDetails")));
            emit_cdp(c, TELEM_PAGE, "page_lcp", m, 0, with_ctx(c, sid, d));
        } else {
            json_decref(d);
        }
    }
}

static void on_reply(struct capture *c, json_int_t id, const json_t *msg)
{
    for (size_t i = 0; i < c->npend; i++) {
        if (c->pend[i].id != id)
            continue;
        struct pending pd = c->pend[i];
        memmove(c->pend + i, c->pend + i + 1, (c->npend - i - 1) * sizeof c->pend[0]);
        c->npend--;
        if (pd.kind == P_BODY) {
            body_reply(c, pd.ctx, msg);
        } else if (pd.kind == P_SHOT) {
            const char *data = jsonx_str(json_object_get(msg, "result"), "data");
            if (data)
                emit_cdp(
                    c, TELEM_SCREENSHOT, "monitor_screenshot", "Page.captureScreenshot", 0,
                    json_pack("{s:s,s:O}", "png", data, "url", json_object_get(pd.ctx, "url")));
        }
        json_decref(pd.ctx);
        return;
    }
}

static void msg_cb(wslay_event_context_ptr ws, const struct wslay_event_on_msg_recv_arg *arg,
                   void *user)
{
    (void)ws;
    struct capture *c = user;
    if (arg->opcode == WSLAY_CONNECTION_CLOSE) {
        c->broken = 1;
        return;
    }
    if (arg->opcode != WSLAY_TEXT_FRAME)
        return;
    json_t *v = json_loadb((const char *)arg->msg, arg->msg_length, 0, NULL);
    if (!json_is_object(v)) {
        json_decref(v);
        return;
    }
    const json_t *id = json_object_get(v, "id");
    const char *m = jsonx_str(v, "method");
    if (json_is_integer(id))
        on_reply(c, json_integer_value(id), v);
    else if (m)
        on_event(c, jsonx_str(v, "sessionId"), m, json_object_get(v, "params"));
    json_decref(v);
}

static const struct wslay_event_callbacks callbacks = {
    .recv_callback = recv_cb,
    .send_callback = send_cb,
    .genmask_callback = ws_genmask_cb,
    .on_msg_recv_callback = msg_cb,
};

static void take_screenshot(struct capture *c)
{
    if (c->npages == 0)
        return;
    struct cpage *p = &c->pages[c->npages - 1]; /* the newest page */
    call(c, p->sid, "Page.captureScreenshot",
         json_pack("{s:s,s:b}", "format", "png", "optimizeForSpeed", 1), P_SHOT,
         json_pack("{s:s}", "url", p->url));
}

static void *run(void *arg)
{
    struct capture *c = arg;
    struct err e;
    err_init(&e);
    c->sock.fd = -1;
    if (ws_connect(c->ws_url, 10000, &c->sock.fd, &c->sock.extra, &c->sock.extra_len, &e) != 0) {
        log_warn("telemetry %s: capture cannot connect: %s", c->session_id, e.message);
        return NULL;
    }
    if (wslay_event_context_client_init(&c->ws, &callbacks, c) != 0) {
        close(c->sock.fd);
        return NULL;
    }
    wslay_event_config_set_max_recv_msg_length(c->ws, LIM_WS_MESSAGE_BYTES);
    c->next_id = 1;
    call(c, NULL, "Target.setDiscoverTargets", json_pack("{s:b}", "discover", 1), P_IGNORE, NULL);
    int64_t next_shot = clock_mono_us() + (int64_t)c->shot_ms * 1000;
    for (;;) {
        if (c->broken)
            break;
        int64_t now = clock_mono_us();
        if (on(c, TELEM_SCREENSHOT) && now >= next_shot) {
            take_screenshot(c);
            next_shot = now + (int64_t)c->shot_ms * 1000;
        }
        if (wslay_event_send(c->ws) != 0)
            break;
        struct pollfd pf[2] = {{.fd = c->sock.fd, .events = POLLIN},
                               {.fd = c->efd, .events = POLLIN}};
        if (wslay_event_want_write(c->ws))
            pf[0].events |= POLLOUT;
        int timeout = 1000;
        if (on(c, TELEM_SCREENSHOT)) {
            int64_t left = (next_shot - now) / 1000;
            timeout = left < 0 ? 0 : left > 1000 ? 1000 : (int)left;
        }
        if (c->sock.extra_off < c->sock.extra_len)
            timeout = 0;
        int r = poll(pf, 2, timeout);
        if (r < 0 && errno != EINTR)
            break;
        if (pf[1].revents)
            break;
        if ((pf[0].revents & (POLLIN | POLLHUP | POLLERR)) ||
            c->sock.extra_off < c->sock.extra_len) {
            if (wslay_event_recv(c->ws) != 0)
                break;
        }
    }
    /* Responses still waiting for their body go out without it. */
    for (size_t i = 0; i < c->nresp; i++) {
        json_object_set_new(c->resp[i].data, "body_excluded", json_string("session ended"));
        emit_cdp(c, TELEM_NETWORK, "network_response", "Network.responseReceived", 0,
                 c->resp[i].data);
    }
    c->nresp = 0;
    for (size_t i = 0; i < c->npend; i++)
        json_decref(c->pend[i].ctx);
    c->npend = 0;
    if (!c->broken && wslay_event_queue_close(c->ws, WSLAY_CODE_NORMAL_CLOSURE, NULL, 0) == 0)
        (void)wslay_event_send(c->ws);
    wslay_event_context_free(c->ws);
    close(c->sock.fd);
    return NULL;
}

struct capture *capture_start(const char *session_id, const char *ws_url, unsigned mask,
                              int screenshot_interval_ms, capture_sink_fn sink, void *sink_ctx)
{
    struct capture *c = xcalloc(1, sizeof *c);
    c->sink = sink;
    c->sink_ctx = sink_ctx;
    snprintf(c->session_id, sizeof c->session_id, "%s", session_id);
    c->ws_url = xstrdup(ws_url);
    c->mask = mask;
    c->shot_ms = screenshot_interval_ms > 100 ? screenshot_interval_ms : 100;
    c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (c->efd < 0 || pthread_create(&c->th, NULL, run, c) != 0) {
        log_error("telemetry %s: cannot start capture", session_id);
        if (c->efd >= 0)
            close(c->efd);
        xfree(c->ws_url);
        xfree(c);
        return NULL;
    }
    return c;
}

void capture_stop(struct capture *c)
{
    if (!c)
        return;
    uint64_t one = 1;
    if (write(c->efd, &one, sizeof one) < 0)
        log_warn("telemetry %s: cannot signal capture", c->session_id);
    pthread_join(c->th, NULL);
    close(c->efd);
    xfree(c->sock.extra);
    xfree(c->ws_url);
    xfree(c);
}
