#include "runtime/brender.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/clock.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "core/xalloc.h"
#include "domain/curlreq.h"
#include "proxy/cdp_client.h"
#include "proxy/cdp_page.h"

#define BRENDER_SETUP_MS   5000 /* connect, create and attach the target */
#define BRENDER_CLEANUP_MS 2000
#define BRENDER_READ_MS    3000 /* reading the DOM once the page is over */
/* A request still in flight this long after the page went quiet (a long
 * poll, a held stream) no longer keeps the page from being read. */
#define BRENDER_IDLE_MAX_MS (4 * BRENDER_SETTLE_MS)
/* Requests of the page tracked as in flight (past it, the quiet time alone
 * decides). */
#define BRENDER_INFLIGHT_MAX 512

static void transport(struct brender_result *out, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void transport(struct brender_result *out, const char *name, const char *fmt, ...)
{
    out->transport_error = 1;
    if (strncmp(name, "net::", 5) == 0)
        name += 5;
    snprintf(out->net_error_name, sizeof out->net_error_name, "%s", name);
    out->net_error = curlreq_net_error(name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->message, sizeof out->message, fmt, ap);
    va_end(ap);
}

static int64_t left_ms(int64_t deadline)
{
    int64_t l = deadline - clock_mono_ms();
    return l > 0 ? l : 0;
}

static int str_is(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

/* Response headers are {name: "value"} in the Network domain. */
static int has_challenge_header(const json_t *headers, int status)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)headers, k, v)
    {
        if (json_is_string(v) && siteclass_challenge_header(k, json_string_value(v), status))
            return 1;
    }
    return 0;
}

static const char *header_get(const json_t *headers, const char *name)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)headers, k, v)
    {
        if (strcasecmp(k, name) == 0)
            return json_string_value(v);
    }
    return NULL;
}

static void keep_response(struct brender_result *out, const char *url, int status, int document,
                          const json_t *headers)
{
    out->responses_seen++;
    if (out->nresponses >= LIM_RENDER_RESPONSES)
        return;
    if (!out->responses)
        out->responses = xcalloc(LIM_RENDER_RESPONSES, sizeof *out->responses);
    struct siteclass_response *r = &out->responses[out->nresponses++];
    r->url = xstrdup(url ? url : "");
    r->status = status;
    r->document = document;
    r->challenge_header = has_challenge_header(headers, status);
}

static void keep_console(struct brender_result *out, const char *text)
{
    if (out->nconsole >= LIM_RENDER_CONSOLE || !text)
        return;
    if (!out->console_errors)
        out->console_errors = xcalloc(LIM_RENDER_CONSOLE, sizeof *out->console_errors);
    size_t n = strnlen(text, LIM_RENDER_CONSOLE_BYTES);
    /* Not inside a UTF-8 sequence. */
    while (n > 0 && n == LIM_RENDER_CONSOLE_BYTES && ((unsigned char)text[n] & 0xC0) == 0x80)
        n--;
    out->console_errors[out->nconsole++] = xstrndup(text, n);
}

/* The text of a console.error call: its first argument's value or
 * description. */
static const char *console_text(const json_t *p)
{
    const json_t *a0 = json_array_get(json_object_get(p, "args"), 0);
    const char *t = jsonx_str(a0, "value");
    return t ? t : jsonx_str(a0, "description") ? jsonx_str(a0, "description") : "console.error";
}

/* The state of the load, read from the page's events. */
struct load {
    const char *frame; /* the main frame's id: the target's */
    int loading;       /* the main frame is loading */
    int load_event;    /* its load event fired since it started loading */
    int answered;      /* a main-frame document answered */
    int64_t quiet_since;
    json_t *inflight; /* {requestId: true} */
};

/* One event of the page; 1 when it ended the visit (a transport error). */
static int on_event(struct load *ld, const json_t *ev, struct brender_result *out)
{
    const char *m = jsonx_str(ev, "method");
    const json_t *p = json_object_get(ev, "params");
    if (!m)
        return 0;
    if (strncmp(m, "Network.", 8) == 0 || strncmp(m, "Page.frame", 10) == 0)
        ld->quiet_since = clock_mono_ms();
    const char *rid = jsonx_str(p, "requestId");
    if (strcmp(m, "Network.requestWillBeSent") == 0 && rid) {
        const json_t *redir = json_object_get(p, "redirectResponse");
        int doc =
            str_is(jsonx_str(p, "type"), "Document") && str_is(jsonx_str(p, "frameId"), ld->frame);
        if (redir)
            keep_response(out, jsonx_str(redir, "url"),
                          (int)json_integer_value(json_object_get(redir, "status")), doc,
                          json_object_get(redir, "headers"));
        if (json_object_size(ld->inflight) < BRENDER_INFLIGHT_MAX)
            json_object_set_new(ld->inflight, rid, json_true());
    } else if (strcmp(m, "Network.responseReceived") == 0) {
        const json_t *r = json_object_get(p, "response");
        int doc =
            str_is(jsonx_str(p, "type"), "Document") && str_is(jsonx_str(p, "frameId"), ld->frame);
        int status = (int)json_integer_value(json_object_get(r, "status"));
        const json_t *hs = json_object_get(r, "headers");
        keep_response(out, jsonx_str(r, "url"), status, doc, hs);
        if (doc) {
            const char *egress = header_get(hs, "X-Browserd-Egress");
            if (egress && strcmp(egress, "refused") == 0) {
                transport(out, "ERR_ACCESS_DENIED", "%s",
                          "refused by the session's network rules (the egress proxy)");
                return 1;
            }
            out->status = status;
            ld->answered = 1;
        }
    } else if ((strcmp(m, "Network.loadingFinished") == 0 ||
                strcmp(m, "Network.loadingFailed") == 0) &&
               rid) {
        json_object_del(ld->inflight, rid);
    } else if (strcmp(m, "Page.frameStartedLoading") == 0 &&
               str_is(jsonx_str(p, "frameId"), ld->frame)) {
        ld->loading = 1;
        ld->load_event = 0;
    } else if (strcmp(m, "Page.frameStoppedLoading") == 0 &&
               str_is(jsonx_str(p, "frameId"), ld->frame)) {
        ld->loading = 0;
    } else if (strcmp(m, "Page.loadEventFired") == 0) {
        ld->load_event = 1;
        ld->quiet_since = clock_mono_ms();
    } else if (strcmp(m, "Runtime.consoleAPICalled") == 0) {
        const char *type = jsonx_str(p, "type");
        if (str_is(type, "error") || str_is(type, "assert"))
            keep_console(out, console_text(p));
    } else if (strcmp(m, "Runtime.exceptionThrown") == 0) {
        const json_t *d = json_object_get(p, "exceptionDetails");
        const char *t = jsonx_str(json_object_get(d, "exception"), "description");
        keep_console(out, t ? t : jsonx_str(d, "text"));
    }
    return 0;
}

/* Reads location.href, document.contentType and the rendered DOM. */
static void read_page(struct cdp_client *c, const char *sid, struct brender_result *out)
{
    char expr[512];
    snprintf(expr, sizeof expr,
             "(() => { const h = document.documentElement ? "
             "document.documentElement.outerHTML : ''; "
             "return [String(location.href), String(document.contentType), h.length, "
             "h.slice(0, %u)]; })()",
             LIM_RENDER_HTML_BYTES);
    json_t *res = NULL;
    struct err e;
    err_init(&e);
    if (cdp_client_call_own(
            c, sid, "Runtime.evaluate",
            json_pack("{s:s,s:b,s:b}", "expression", expr, "returnByValue", 1, "silent", 1), 1,
            BRENDER_READ_MS, &res, &e) == 0) {
        const json_t *v = json_object_get(json_object_get(res, "result"), "value");
        const char *href = json_string_value(json_array_get(v, 0));
        const char *ct = json_string_value(json_array_get(v, 1));
        const json_t *h = json_array_get(v, 3);
        out->final_url = href ? xstrdup(href) : NULL;
        out->content_type = ct ? xstrdup(ct) : NULL;
        if (json_is_string(h)) {
            size_t n = json_string_length(h);
            const char *s = json_string_value(h);
            out->html_cut = json_integer_value(json_array_get(v, 2)) > (json_int_t)n;
            if (n > LIM_RENDER_HTML_BYTES) {
                n = LIM_RENDER_HTML_BYTES;
                while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
                    n--;
                out->html_cut = 1;
            }
            out->html = xstrndup(s, n);
            out->html_len = n;
        }
    }
    json_decref(res);
    if (!out->html)
        out->html = xstrdup("");
}

int brender_run(const char *ws_url, const char *url, int timeout_ms, struct brender_result *out,
                struct err *e)
{
    memset(out, 0, sizeof *out);
    int64_t t0 = clock_mono_ms();
    int64_t deadline = t0 + timeout_ms;
    struct cdp_client *c = NULL;
    char target[128] = "", sid[128] = "";
    int rc = cdp_client_open(ws_url, BRENDER_SETUP_MS, &c, e);
    if (rc)
        return err_set(e, E_UNAVAIL, "unavailable", "the browser's DevTools: %s", e->message);
    cdp_client_keep_events(c, "");
    rc = cdp_page_create(c, "about:blank", 1, BRENDER_SETUP_MS, target, sizeof target, e);
    if (rc == 0)
        rc = cdp_page_attach(c, target, BRENDER_SETUP_MS, sid, sizeof sid, e);
    static const char *const domains[] = {"Page.enable", "Network.enable", "Runtime.enable"};
    for (size_t i = 0; rc == 0 && i < sizeof domains / sizeof *domains; i++)
        rc = cdp_client_call_own(c, sid, domains[i], json_object(), 1, BRENDER_SETUP_MS, NULL, e);
    if (rc == 0) {
        /* A download is not content: the page never writes the session's
         * disk. Best effort (an older browser lacks the command). */
        struct err de;
        err_init(&de);
        int drc = cdp_client_call_own(c, sid, "Page.setDownloadBehavior",
                                      json_pack("{s:s}", "behavior", "deny"), 1, BRENDER_SETUP_MS,
                                      NULL, &de);
        (void)drc;
        rc = cdp_client_call_own(c, sid, "Page.navigate", json_pack("{s:s}", "url", url), 0,
                                 BRENDER_SETUP_MS, NULL, e);
    }
    if (rc) {
        rc = err_set(e, E_UNAVAIL, "unavailable", "driving the browser: %s", e->message);
        goto done;
    }
    struct load ld = {.frame = target, .loading = 1, .inflight = json_object()};
    ld.quiet_since = clock_mono_ms();
    for (;;) {
        int64_t now = clock_mono_ms();
        int64_t quiet = now - ld.quiet_since;
        if (ld.answered && ld.load_event && !ld.loading && quiet >= BRENDER_SETTLE_MS &&
            (json_object_size(ld.inflight) == 0 || quiet >= BRENDER_IDLE_MAX_MS)) {
            out->loaded = 1;
            break;
        }
        if (left_ms(deadline) == 0) {
            if (!ld.answered)
                transport(out, "ERR_TIMED_OUT", "the page did not answer within timeout_ms (%d ms)",
                          timeout_ms);
            break;
        }
        int64_t wait = left_ms(deadline);
        if (ld.answered && ld.load_event && !ld.loading) {
            int64_t settle =
                (json_object_size(ld.inflight) ? BRENDER_IDLE_MAX_MS : BRENDER_SETTLE_MS) - quiet;
            if (settle < wait)
                wait = settle > 1 ? settle : 1;
        }
        json_t *ev = NULL;
        struct err we;
        err_init(&we);
        if (cdp_client_event(c, (int)wait, &ev, &we) != 0) {
            if (strstr(we.message, "closed")) {
                rc = err_set(e, E_UNAVAIL, "unavailable", "the browser stopped answering: %s",
                             we.message);
                break;
            }
            continue; /* no event within wait */
        }
        if (!str_is(jsonx_str(ev, "sessionId"), sid) && !json_object_get(ev, "id")) {
            json_decref(ev);
            continue;
        }
        /* Page.navigate's answer: a navigation that failed before any
         * document (DNS, refused, TLS, tunnel). A 4xx or 5xx without a body
         * is ERR_HTTP_RESPONSE_CODE_FAILURE, its status already known. */
        const char *nav_error = jsonx_str(json_object_get(ev, "result"), "errorText");
        if (json_object_get(ev, "id") && nav_error &&
            strcmp(nav_error, "net::ERR_HTTP_RESPONSE_CODE_FAILURE") != 0 && !ld.answered) {
            transport(out, nav_error, "the page failed to load: %s", nav_error);
            json_decref(ev);
            break;
        }
        if (str_is(jsonx_str(ev, "method"), "Page.javascriptDialogOpening")) {
            /* Not waited for: a dialog left open shows as the page not
             * settling. */
            int hrc = cdp_client_call_own(c, sid, "Page.handleJavaScriptDialog",
                                          json_pack("{s:b}", "accept", 0), 0, BRENDER_CLEANUP_MS,
                                          NULL, &we);
            (void)hrc;
        }
        int end = on_event(&ld, ev, out);
        json_decref(ev);
        if (end)
            break;
    }
    json_decref(ld.inflight);
    if (rc == 0 && !out->transport_error)
        read_page(c, sid, out);
done:
    cdp_page_close_with(c, target, BRENDER_CLEANUP_MS);
    out->duration_ms = clock_mono_ms() - t0;
    return rc;
}

void brender_telemetry(const struct brender_result *res, struct siteclass_telemetry *t)
{
    memset(t, 0, sizeof *t);
    t->responses = res->responses;
    t->nresponses = res->nresponses;
    t->final_url = res->final_url;
    t->console_errors = (const char *const *)res->console_errors;
    t->nconsole = res->nconsole;
}

void brender_result_clear(struct brender_result *res)
{
    for (size_t i = 0; i < res->nresponses; i++)
        xfree((char *)res->responses[i].url);
    xfree(res->responses);
    for (size_t i = 0; i < res->nconsole; i++)
        xfree(res->console_errors[i]);
    xfree(res->console_errors);
    xfree(res->html);
    xfree(res->final_url);
    xfree(res->content_type);
    memset(res, 0, sizeof *res);
}
