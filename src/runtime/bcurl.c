#include "runtime/bcurl.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/b64.h"
#include "core/clock.h"
#include "core/jsonx.h"
#include "core/xalloc.h"
#include "proxy/cdp_client.h"
#include "proxy/cdp_page.h"

#define BCURL_SETUP_MS     5000 /* connect, create and attach the target */
#define BCURL_CLEANUP_MS   2000
#define BCURL_MAX_REDIRECT 20

static void transport(struct bcurl_result *out, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void transport(struct bcurl_result *out, const char *name, const char *fmt, ...)
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

/* A call whose answer does not matter (continue, abort, close): a failure
 * shows up as the next event not arriving. */
static void send_only(struct cdp_client *c, const char *sid, const char *method, json_t *params)
{
    struct err e;
    err_init(&e);
    int rc = cdp_client_call_own(c, sid, method, params, 0, BCURL_CLEANUP_MS, NULL, &e);
    (void)rc;
}

/* Fetch's errorReason ("ConnectionRefused") as Chromium's error name
 * ("ERR_CONNECTION_REFUSED"). */
static void reason_to_name(const char *reason, char *out, size_t cap)
{
    size_t o = (size_t)snprintf(out, cap, "ERR_");
    for (const char *p = reason; *p && o + 2 < cap; p++) {
        if (isupper((unsigned char)*p) && p != reason)
            out[o++] = '_';
        out[o++] = (char)toupper((unsigned char)*p);
    }
    out[o] = '\0';
}

/* The request-stage override: the browser's own headers with the caller's
 * on top (names compared without case), the method and the body. */
static json_t *override_params(const char *request_id, const json_t *browser_headers,
                               const struct curlreq *r)
{
    json_t *hs = json_array();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)browser_headers, k, v)
    {
        int replaced = 0;
        for (size_t i = 0; i < r->nheaders; i++)
            replaced |= strcasecmp(k, r->headers[i].name) == 0;
        if (!replaced && json_is_string(v))
            json_array_append_new(hs, json_pack("{s:s,s:O}", "name", k, "value", v));
    }
    for (size_t i = 0; i < r->nheaders; i++)
        json_array_append_new(
            hs, json_pack("{s:s,s:s}", "name", r->headers[i].name, "value", r->headers[i].value));
    json_t *p =
        json_pack("{s:s,s:s,s:o}", "requestId", request_id, "method", r->method, "headers", hs);
    if (r->body) {
        char *b = b64_encode(r->body, r->body_len, NULL);
        json_object_set_new(p, "postData", json_string(b));
        xfree(b);
    }
    return p;
}

/* {name: [values]} from Fetch's [{name, value}] (Chromium joins repeated
 * Set-Cookie lines with newlines). */
static json_t *group_headers(const json_t *list)
{
    json_t *out = json_object();
    size_t i;
    json_t *h;
    json_array_foreach((json_t *)list, i, h)
    {
        const char *name = jsonx_str(h, "name"), *value = jsonx_str(h, "value");
        if (!name || !value)
            continue;
        json_t *vals = json_object_get(out, name);
        if (!vals) {
            vals = json_array();
            json_object_set_new(out, name, vals);
        }
        const char *p = value;
        for (;;) {
            size_t n = strcspn(p, "\n");
            json_array_append_new(vals, json_stringn(p, n));
            if (!p[n])
                break;
            p += n + 1;
        }
    }
    return out;
}

/* {name: [values]} from Network's raw headers {name: "v1\nv2"}. */
static json_t *split_raw(const json_t *raw)
{
    json_t *list = json_array();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)raw, k, v)
    {
        if (json_is_string(v))
            json_array_append_new(list, json_pack("{s:s,s:O}", "name", k, "value", v));
    }
    json_t *out = group_headers(list);
    json_decref(list);
    return out;
}

static const char *header_value(const json_t *list, const char *name)
{
    size_t i;
    json_t *h;
    json_array_foreach((json_t *)list, i, h)
    {
        const char *n = jsonx_str(h, "name");
        if (n && strcasecmp(n, name) == 0)
            return jsonx_str(h, "value");
    }
    return NULL;
}

static int64_t left_ms(int64_t deadline)
{
    int64_t l = deadline - clock_mono_ms();
    return l > 0 ? l : 0;
}

/* The final response: status, headers, body; the navigation is aborted. */
static int take_response(struct cdp_client *c, const char *sid, const json_t *p, const json_t *raw,
                         struct bcurl_result *out, int64_t deadline, struct err *e)
{
    const char *rid = jsonx_str(p, "requestId");
    const json_t *hl = json_object_get(p, "responseHeaders");
    const char *egress = header_value(hl, "X-Browserd-Egress");
    const char *cl = header_value(hl, "Content-Length");
    json_t *res = NULL;
    int rc = 0;
    if (egress && strcmp(egress, "refused") == 0) {
        transport(out, "ERR_ACCESS_DENIED", "%s",
                  "refused by the session's network rules (the egress proxy)");
    } else if (cl && strtoull(cl, NULL, 10) > BCURL_BODY_MAX) {
        transport(out, "ERR_FILE_TOO_BIG",
                  "the response body of %.20s bytes exceeds the limit of %u bytes", cl,
                  BCURL_BODY_MAX);
    } else {
        out->status = (int)json_integer_value(json_object_get(p, "responseStatusCode"));
        const char *final_url = jsonx_str(json_object_get(p, "request"), "url");
        out->final_url = final_url ? xstrdup(final_url) : NULL;
        out->headers = raw ? split_raw(raw) : group_headers(hl);
        struct err ge;
        err_init(&ge);
        /* A response without a body (HEAD, 204) has nothing to read. */
        if (cdp_client_call_own(c, sid, "Fetch.getResponseBody",
                                json_pack("{s:s}", "requestId", rid), 1, (int)left_ms(deadline) + 1,
                                &res, &ge) == 0) {
            const char *b = jsonx_str(res, "body");
            size_t bl = b ? strlen(b) : 0;
            if (b && jsonx_bool(res, "base64Encoded", 0)) {
                unsigned char *d;
                size_t dn;
                if (b64_decode(b, bl, &d, &dn) == 0) {
                    out->body = (char *)d;
                    out->body_len = dn;
                }
            } else if (b) {
                out->body = xstrdup(b);
                out->body_len = bl;
            }
            if (out->body_len > BCURL_BODY_MAX) {
                json_decref(out->headers);
                out->headers = NULL;
                xfree(out->body);
                out->body = NULL;
                out->body_len = 0;
                transport(out, "ERR_FILE_TOO_BIG",
                          "the response body exceeds the limit of %u bytes", BCURL_BODY_MAX);
            }
        } else if (c == NULL) {
            rc = err_set(e, E_UNAVAIL, "unavailable", "the browser did not answer");
        }
        json_decref(res);
        if (!out->body && !out->transport_error)
            out->body = xstrdup("");
    }
    /* Aborted: the hidden page never renders what it fetched. */
    send_only(c, sid, "Fetch.failRequest",
              json_pack("{s:s,s:s}", "requestId", rid, "errorReason", "Aborted"));
    return rc;
}

int bcurl_run(const char *ws_url, const struct curlreq *r, struct bcurl_result *out, struct err *e)
{
    memset(out, 0, sizeof *out);
    int64_t t0 = clock_mono_ms();
    int64_t deadline = t0 + r->timeout_ms;
    struct cdp_client *c = NULL;
    char target[128] = "", sid[128] = "";
    int rc = cdp_client_open(ws_url, BCURL_SETUP_MS, &c, e);
    if (rc)
        return err_set(e, E_UNAVAIL, "unavailable", "the browser's DevTools: %s", e->message);
    /* Fetch's pauses, and the raw response headers (Network's ExtraInfo
     * carries Set-Cookie, which Fetch leaves out), and Page.navigate's
     * answer. */
    cdp_client_keep_events(c, "");
    rc = cdp_page_create(c, "about:blank", 1, BCURL_SETUP_MS, target, sizeof target, e);
    if (rc == 0)
        rc = cdp_page_attach(c, target, BCURL_SETUP_MS, sid, sizeof sid, e);
    if (rc == 0) {
        rc = cdp_client_call_own(c, sid, "Network.enable", json_object(), 1, BCURL_SETUP_MS, NULL,
                                 e);
        if (rc == 0)
            rc = cdp_client_call_own(c, sid, "Fetch.enable",
                                     json_pack("{s:[{s:s,s:s},{s:s,s:s}]}", "patterns",
                                               "urlPattern", "*", "requestStage", "Request",
                                               "urlPattern", "*", "requestStage", "Response"),
                                     1, BCURL_SETUP_MS, NULL, e);
    }
    if (rc == 0)
        rc = cdp_client_call_own(c, sid, "Page.navigate", json_pack("{s:s}", "url", r->url), 0,
                                 BCURL_SETUP_MS, NULL, e);
    if (rc) {
        rc = err_set(e, E_UNAVAIL, "unavailable", "driving the browser: %s", e->message);
        goto done;
    }
    int first = 1, redirects = 0;
    json_t *raw = NULL; /* the newest response's raw headers {name: "v1\nv2"} */
    int raw_status = 0;
    while (!out->status && !out->transport_error) {
        json_t *ev = NULL;
        struct err we;
        err_init(&we);
        if (left_ms(deadline) == 0 || cdp_client_event(c, (int)left_ms(deadline), &ev, &we) != 0) {
            if (left_ms(deadline) == 0) {
                char ms[16];
                snprintf(ms, sizeof ms, "%d", r->timeout_ms);
                transport(out, "ERR_TIMED_OUT", "no response within timeout_ms (%s ms)", ms);
            } else {
                rc = err_set(e, E_UNAVAIL, "unavailable", "the browser stopped answering: %s",
                             we.message);
            }
            break;
        }
        json_t *p = json_object_get(ev, "params");
        const char *evsid = jsonx_str(ev, "sessionId");
        /* A navigation that failed before any response (DNS, refused, TLS,
         * tunnel) never pauses at the response stage: Page.navigate's own
         * answer carries the error. Our own abort is ERR_ABORTED. */
        const char *nav_error = jsonx_str(json_object_get(ev, "result"), "errorText");
        if (json_object_get(ev, "id") && nav_error && strcmp(nav_error, "net::ERR_ABORTED") != 0) {
            transport(out, nav_error, "the request failed: %s", nav_error);
            json_decref(ev);
            break;
        }
        const char *rid = jsonx_str(p, "requestId");
        if (evsid && strcmp(evsid, sid) == 0 &&
            strcmp(jsonx_str(ev, "method") ? jsonx_str(ev, "method") : "",
                   "Network.responseReceivedExtraInfo") == 0) {
            json_decref(raw);
            raw = json_incref(json_object_get(p, "headers"));
            raw_status = (int)json_integer_value(json_object_get(p, "statusCode"));
            json_decref(ev);
            continue;
        }
        if (!evsid || strcmp(evsid, sid) != 0 || !rid ||
            strcmp(jsonx_str(ev, "method") ? jsonx_str(ev, "method") : "", "Fetch.requestPaused") !=
                0) {
            json_decref(ev);
            continue;
        }
        const char *reason = jsonx_str(p, "responseErrorReason");
        json_t *status = json_object_get(p, "responseStatusCode");
        if (reason) {
            char name[64];
            reason_to_name(reason, name, sizeof name);
            transport(out, name, "the request failed: %s", name);
        } else if (!status) {
            /* Request stage: the first is the caller's request; later ones
             * are redirects, which Chromium has already rewritten. */
            json_t *params =
                first ? override_params(
                            rid, json_object_get(json_object_get(p, "request"), "headers"), r)
                      : json_pack("{s:s}", "requestId", rid);
            first = 0;
            send_only(c, sid, "Fetch.continueRequest", params);
        } else {
            int st = (int)json_integer_value(status);
            const json_t *hl = json_object_get(p, "responseHeaders");
            if (st >= 300 && st < 400 && header_value(hl, "Location") &&
                redirects < BCURL_MAX_REDIRECT) {
                redirects++;
                send_only(c, sid, "Fetch.continueRequest", json_pack("{s:s}", "requestId", rid));
            } else if (st >= 300 && st < 400 && header_value(hl, "Location")) {
                transport(out, "ERR_TOO_MANY_REDIRECTS", "more than %d redirects",
                          BCURL_MAX_REDIRECT);
            } else {
                rc = take_response(c, sid, p, st == raw_status ? raw : NULL, out, deadline, e);
            }
        }
        json_decref(ev);
    }
    json_decref(raw);
done:
    cdp_page_close_with(c, target, BCURL_CLEANUP_MS);
    out->duration_ms = clock_mono_ms() - t0;
    return rc;
}

void bcurl_result_clear(struct bcurl_result *res)
{
    json_decref(res->headers);
    xfree(res->body);
    xfree(res->final_url);
    memset(res, 0, sizeof *res);
}
