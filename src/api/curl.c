#include "api/curl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api.h"
#include "core/b64.h"
#include "core/clock.h"
#include "core/limits.h"
#include "core/share.h"
#include "core/xalloc.h"
#include "domain/curlreq.h"
#include "runtime/bcurl.h"
#include "runtime/sessmgr.h"
#include "telemetry/telemetry.h"

/* Requests in flight on this server, with each organization's and each
 * session's share (LIM_CURL_INFLIGHT*). */
static struct share inflight = SHARE_INIT("curl requests in flight", LIM_CURL_INFLIGHT,
                                          LIM_CURL_INFLIGHT_PER_ORG, LIM_CURL_INFLIGHT_PER_SESSION);

/* body as a JSON string: valid UTF-8 is kept, each invalid byte becomes
 * U+FFFD (as a browser decodes text), so the record is always valid JSON. */
static json_t *utf8_string(const char *s, size_t n)
{
    json_t *v = json_stringn(s, n);
    if (v)
        return v;
    char *out = xmalloc(n * 3 + 1), *o = out;
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80                 ? 1
                     : c >= 0xC2 && c <= 0xDF ? 2
                     : (c >> 4) == 0xE        ? 3
                     : c >= 0xF0 && c <= 0xF4 ? 4
                                              : 0;
        int ok = len > 0 && i + len <= n;
        for (size_t k = 1; ok && k < len; k++)
            ok = ((unsigned char)s[i + k] >> 6) == 2;
        if (ok && len > 2) {
            unsigned char c1 = (unsigned char)s[i + 1];
            /* overlong forms, UTF-16 surrogates, past U+10FFFF */
            if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0) || (c == 0xF0 && c1 < 0x90) ||
                (c == 0xF4 && c1 >= 0x90))
                ok = 0;
        }
        if (ok) {
            memcpy(o, s + i, len);
            o += len;
            i += len;
        } else {
            memcpy(o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    v = json_stringn(out, (size_t)(o - out));
    xfree(out);
    return v ? v : json_string("");
}

static void report(const struct session_rec *rec, struct live *live, int status, int64_t t0)
{
    json_t *d = json_pack("{s:s,s:i,s:I}", "operation_id", "curl", "status", status, "duration_ms",
                          (json_int_t)((clock_mono_us() - t0) / 1000));
    struct telem_src src = {"kernel_api", "curl", 0};
    telemetry_emit_src(rec->id, TELEM_PLATFORM, "api_call", &src, d);
    live_touch(live);
}

int curl_session_run(struct req *rq, const char *session_id, const struct curlreq *cr,
                     struct bcurl_result *res)
{
    int64_t t0 = clock_mono_us();
    memset(res, 0, sizeof *res);
    struct session_rec rec;
    struct live *live = NULL;
    char ws[512];
    int rc = api_live_session_id(rq, session_id, &rec, &live, ws, sizeof ws);
    if (rc)
        return rc;
    live_touch(live);
    rc = share_take_or_err(&inflight, rec.org_id, rec.id, 1, &rq->err);
    if (rc == 0) {
        rc = bcurl_run(ws, cr, res, &rq->err);
        share_give(&inflight, rec.org_id, rec.id);
    }
    report(&rec, live, rc ? 500 : res->transport_error ? 502 : 200, t0);
    sessmgr_put(live);
    session_rec_clear(&rec);
    return rc;
}

/* Runs cr through the session's browser (the key's session rq->params[0]):
 * 0 with *res filled, a transport error already rendered into rs as the 502
 * record; or an E_* code (the session is not there, too many in flight, the
 * browser does not answer). Counts as activity and reports the call. */
static int run_curl(struct req *rq, struct resp *rs, const struct curlreq *cr,
                    struct bcurl_result *res)
{
    int rc = curl_session_run(rq, rq->params[0], cr, res);
    if (rc == 0 && res->transport_error) {
        rs->status = 502;
        rs->json = json_pack("{s:s,s:s}", "code", "transport_error", "message", res->message);
        if (res->net_error)
            json_object_set_new(rs->json, "net_error", json_integer(res->net_error));
        if (res->net_error_name[0])
            json_object_set_new(rs->json, "net_error_name", json_string(res->net_error_name));
        /* A transport failure of a request that changes things is not
         * repeated behind the caller's back; a GET may be. */
        if (rq->no_retry)
            resp_header(rs, "x-should-retry", "false");
    }
    return rc;
}

int curl_post(struct req *rq, struct resp *rs)
{
    json_t *body = NULL;
    int rc = req_json_object(rq, 0, &body);
    if (rc)
        return rc;
    struct curlreq cr;
    rc = curlreq_parse(body, &cr, &rq->err);
    json_decref(body);
    if (rc)
        return rc;
    /* Only a GET may be repeated by the client's retries. */
    rq->no_retry = strcmp(cr.method, "GET") != 0;
    struct bcurl_result res;
    rc = run_curl(rq, rs, &cr, &res);
    if (rc == 0 && !res.transport_error) { /* run_curl rendered a transport error */
        json_t *b;
        if (cr.base64) {
            char *enc = b64_encode(res.body, res.body_len, NULL);
            b = json_string(enc);
            xfree(enc);
        } else {
            b = utf8_string(res.body, res.body_len);
        }
        rs->status = 200;
        rs->json = json_pack("{s:i,s:O,s:o,s:I}", "status", res.status, "headers", res.headers,
                             "body", b, "duration_ms", (json_int_t)res.duration_ms);
    }
    bcurl_result_clear(&res);
    curlreq_clear(&cr);
    return rc;
}

/* ---- {base_url}/curl/raw: browsers.fetch ---- */

/* Request headers that are the transport's or the official client's own,
 * never the target's: dropped rather than refused (SESSION_API.md 7.2). */
static int raw_dropped(const char *name, const char *value)
{
    static const char *const names[] = {
        "host",
        "authorization",
        "content-length",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "expect",
        "accept-encoding",
        "x-kernel-project-id",
        "proxy-authorization",
        "proxy-connection",
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcasecmp(name, names[i]) == 0)
            return 1;
    if (strncasecmp(name, "x-stainless-", 12) == 0 || strncasecmp(name, "proxy-", 6) == 0)
        return 1;
    /* The client's own User-Agent: the browser's applies instead. */
    return strcasecmp(name, "user-agent") == 0 && strncmp(value, "Kernel/", 7) == 0;
}

static void collect_header(void *ctx, const char *k, const char *v)
{
    if (!raw_dropped(k, v ? v : ""))
        json_object_set_new((json_t *)ctx, k, json_string(v ? v : ""));
}

/* Response headers the server's own framing replaces (the body is the
 * decoded whole). */
static int raw_hop(const char *name)
{
    static const char *const names[] = {"content-length", "transfer-encoding", "connection",
                                        "keep-alive",     "content-encoding",  "content-type"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcasecmp(name, names[i]) == 0)
            return 1;
    return 0;
}

/* Response headers that would act on this server's origin: the relayed body
 * is a stranger's, served from the API's own host, so it may not set cookies
 * there (its Content-Security-Policy: sandbox keeps its script from running
 * with the origin's rights). */
static int raw_unsafe(const char *name)
{
    return strcasecmp(name, "set-cookie") == 0 || strcasecmp(name, "set-cookie2") == 0;
}

int curl_raw(struct req *rq, struct resp *rs)
{
    /* Never repeated by the official client: a relayed answer is the
     * target's (it would retry a target's 408, 409, 429 or 5xx, SESSION_API.md
     * 7.2), and our own 5xx and 502 carry the header through no_retry. */
    rq->no_retry = 1;
    const char *url = req_query(rq, "url");
    const char *tmo = req_query(rq, "timeout_ms");
    json_t *spec = json_pack("{s:s,s:s,s:o}", "url", url ? url : "", "method", rq->method,
                             "headers", json_object());
    req_header_each(rq, collect_header, json_object_get(spec, "headers"));
    if (tmo) {
        char *end;
        long long v = strtoll(tmo, &end, 10);
        json_object_set_new(spec, "timeout_ms", *tmo && !*end ? json_integer(v) : json_string(tmo));
    }
    struct curlreq cr;
    int rc = curlreq_parse(spec, &cr, &rq->err);
    json_decref(spec);
    if (rc)
        return rc;
    if (rq->body_len) {
        if (!curlreq_method_has_body(cr.method)) {
            curlreq_clear(&cr);
            return err_field(&rq->err, "body", "is not sent with %s", rq->method);
        }
        cr.body = xmalloc(rq->body_len + 1);
        memcpy(cr.body, rq->body, rq->body_len);
        cr.body[rq->body_len] = '\0';
        cr.body_len = rq->body_len;
    }
    struct bcurl_result res;
    rc = run_curl(rq, rs, &cr, &res);
    if (rc == 0 && !res.transport_error) { /* run_curl rendered a transport error */
        resp_header(rs, "x-should-retry", "false");
        rs->status = res.status;
        rs->more_headers = json_array();
        const char *k;
        json_t *vals;
        json_object_foreach(res.headers, k, vals)
        {
            size_t i;
            json_t *v;
            if (strcasecmp(k, "content-type") == 0 && json_array_size(vals))
                json_array_append_new(rs->more_headers,
                                      json_pack("[s,O]", "Content-Type", json_array_get(vals, 0)));
            if (raw_hop(k) || raw_unsafe(k))
                continue;
            json_array_foreach(vals, i, v)
                json_array_append_new(rs->more_headers, json_pack("[s,O]", k, v));
        }
        json_array_append_new(rs->more_headers,
                              json_pack("[s,s]", "Content-Security-Policy", "sandbox"));
        json_array_append_new(rs->more_headers,
                              json_pack("[s,s]", "X-Content-Type-Options", "nosniff"));
        rs->text = res.body;
        rs->text_len = res.body_len;
        res.body = NULL;
    }
    bcurl_result_clear(&res);
    curlreq_clear(&cr);
    return rc;
}
