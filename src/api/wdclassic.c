/*
 * Classic WebDriver HTTP (docs/webdriver.md): a Selenium Grid-style endpoint
 * at /session and /wd/hub/session whose sessions are browserd sessions, and
 * the signed base URL of the Browser record (webdriver_url,
 * /browser/wd/TOKEN) through which a client joins a session made by the API.
 * Commands are relayed to the session's ChromeDriver (the one WebDriver BiDi
 * uses, api/webdriver.h) over the server's HTTP client (proxy/httpc.h).
 */
#include "api/wdclassic.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include "api/pools.h"
#include "api/webdriver.h"
#include "session/ext.h"
#include "core/clock.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/netns.h"
#include "core/share.h"
#include "core/token.h"
#include "core/xalloc.h"
#include "proxy/httpc.h"
#include "runtime/sessmgr.h"
#include "runtime/wdreg.h"

/* ---- answers in WebDriver's format ---- */

/* {value: {error, message, stacktrace}} with status; returns 0 (answered). */
static int wd_error(struct resp *rs, int status, const char *error, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int wd_error(struct resp *rs, int status, const char *error, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    resp_json(
        rs, status,
        json_pack("{s:{s:s,s:s,s:s}}", "value", "error", error, "message", msg, "stacktrace", ""));
    return 0;
}

/* A browserd failure (rq->err) as a WebDriver error: its status (429 keeps
 * Retry-After); "invalid argument" for bad input, else "session not
 * created" while creating, else by status. */
static int wd_from_err(struct req *rq, struct resp *rs, int rc, int creating)
{
    int status = http_status_for(rc);
    const char *error = status == 400 || status == 413 ? "invalid argument"
                        : creating                     ? "session not created"
                        : status == 404                ? "invalid session id"
                                                       : "unknown error";
    if ((status == 429 || status == 503) && rq->err.retry_after > 0)
        resp_header(rs, "Retry-After", "%d", rq->err.retry_after);
    return wd_error(rs, status, error, "%s", rq->err.message[0] ? rq->err.message : "failed");
}

/* The one answer for a session id the key may not drive: the same for an
 * unknown, ended or foreign session. */
static int no_session(struct resp *rs, const char *id)
{
    return wd_error(rs, 404, "invalid session id", "no active session %.64s", id);
}

/* ---- the session's driver ---- */

/* The driver's capabilities as the client sees them: nothing of the
 * server's own (the driver's debugger address on the sandbox's loopback,
 * the profile's path), webSocketUrl when asked, se:cdp. Takes caps. */
static json_t *public_caps(struct app *app, const struct session_rec *rec, json_t *caps,
                           int want_bidi)
{
    if (!json_is_object(caps)) {
        json_decref(caps);
        caps = json_object();
    }
    json_object_del(caps, "goog:chromeOptions");
    json_t *chrome = json_object_get(caps, "chrome");
    if (json_is_object(chrome))
        json_object_del(chrome, "userDataDir");
    json_object_del(caps, "webSocketUrl");
    if (want_bidi) {
        char *ws = api_signed_url(app, rec, "webdriver", "/browser/webdriver");
        json_object_set_new(caps, "webSocketUrl", json_string(ws));
        xfree(ws);
    }
    char *cdp = api_signed_url(app, rec, "cdp", "/browser/cdp");
    json_object_set_new(caps, "se:cdp", json_string(cdp));
    xfree(cdp);
    const char *ver = jsonx_str(caps, "browserVersion");
    if (ver)
        json_object_set_new(caps, "se:cdpVersion", json_string(ver));
    json_object_set_new(caps, "browserd:session_id", json_string(rec->id));
    return caps;
}

/* "ws://[nsN@]127.0.0.1:PORT/..." (the driver's BiDi URL, runtime/wdreg.h)
 * into its namespace and port. */
static int driver_addr(const char *url, int *netns, int *port)
{
    const char *p = strncmp(url, "ws://", 5) == 0 ? url + 5 : NULL;
    *netns = 0;
    if (p && p[0] == 'n' && p[1] == 's') {
        char *end;
        long id = strtol(p + 2, &end, 10);
        if (*end != '@' || id < 1 || id > 65535)
            return -1;
        *netns = (int)id;
        p = end + 1;
    }
    if (!p || strncmp(p, "127.0.0.1:", 10) != 0)
        return -1;
    char *end;
    long pt = strtol(p + 10, &end, 10);
    if (pt < 1 || pt > 65535 || *end != '/')
        return -1;
    *port = (int)pt;
    return 0;
}

/* Relays rq (method, body) to tail ("" or "/url", ...) of the session's
 * WebDriver session on its driver; answers with the driver's status and
 * body. */
static int relay(struct req *rq, struct resp *rs, struct live *l, const char *id, const char *tail)
{
    struct app *app = api_app(rq);
    if (rq->body_len > LIM_WD_COMMAND_BYTES)
        return wd_error(rs, 413, "invalid argument", "a command body is limited to %u bytes",
                        LIM_WD_COMMAND_BYTES);
    struct wdreg_view v;
    int rc = webdriver_driver(app, l, id, &v, &rq->err);
    json_decref(v.caps);
    if (rc == E_NOTFOUND)
        return no_session(rs, id);
    if (rc)
        return wd_from_err(rq, rs, rc, 0);
    int netns, port;
    if (driver_addr(v.url, &netns, &port) != 0 || !v.path[0])
        return wd_error(rs, 500, "unknown error", "the session's driver has no usable address");
    char *target = xasprintf("%s%s", v.path, tail);
    int64_t deadline = clock_mono_ms() + LIM_WD_COMMAND_MS;
    int fd = netns_socket(netns, AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && httpc_connect(fd, (struct sockaddr *)&a, sizeof a, deadline) != 0) {
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        xfree(target);
        return wd_error(rs, 503, "unknown error", "the session's WebDriver is not answering");
    }
    char host[32];
    snprintf(host, sizeof host, "127.0.0.1:%d", port);
    int has_body = strcmp(rq->method, "POST") == 0;
    struct httpc_req hr = {
        .method = rq->method,
        .target = target,
        .host = host,
        .fields = "Content-Type: application/json; charset=utf-8\r\n",
        .body = has_body ? (rq->body_len ? rq->body : "{}") : NULL,
        .body_len = has_body ? (rq->body_len ? rq->body_len : 2) : 0,
        .body_max = LIM_WD_REPLY_BYTES,
        .deadline_ms = deadline,
    };
    struct httpc_resp r;
    struct err e;
    err_init(&e);
    /* Counted with the session's commands (telemetry), as a BiDi message is;
     * no method name: the event names are CDP's (domain/telemetry_cfg). */
    for (const struct session_ext *const *x = session_ext_all(); *x; x++)
        if ((*x)->cdp_message)
            (*x)->cdp_message(id, rq, NULL, rq->body_len);
    live_client_attached(l); /* a command in flight keeps the session from idling out */
    rc = httpc_exchange(fd, &hr, &r, &e);
    live_client_detached(l);
    xfree(target);
    if (rc == E_TOOBIG)
        return wd_error(rs, 500, "unknown error", "the driver's answer is larger than %u bytes",
                        LIM_WD_REPLY_BYTES);
    if (rc)
        return wd_error(rs, 502, "unknown error", "the session's WebDriver failed: %s", e.message);
    char *text = xmalloc(r.body_len + 1);
    memcpy(text, r.body, r.body_len + 1);
    resp_text(rs, r.status, "application/json; charset=utf-8", text, r.body_len);
    httpc_resp_free(&r);
    return 0;
}

/* ---- new session ---- */

static int refuse(struct wdc_refusal *why, int status, const char *error, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int refuse(struct wdc_refusal *why, int status, const char *error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why->message, sizeof why->message, fmt, ap);
    va_end(ap);
    why->status = status;
    why->error = error;
    return E_INVALID;
}

int wdc_caps_parse(const json_t *body, json_t **out, struct wdc_refusal *why)
{
    *out = NULL;
    json_t *caps = json_object_get(body, "capabilities");
    json_t *always = json_object_get(caps, "alwaysMatch");
    json_t *first = json_array_get(json_object_get(caps, "firstMatch"), 0);
    if ((caps && !json_is_object(caps)) || (always && !json_is_object(always)) ||
        (first && !json_is_object(first)))
        return refuse(why, 400, "invalid argument",
                      "capabilities must be {alwaysMatch: object, firstMatch: [object]}");
    json_t *m = always ? json_deep_copy(always) : json_object();
    if (first)
        json_object_update_missing(m, first);
    json_t *opts = json_object_get(m, "browserd:options");
    const char *browser = jsonx_str(m, "browserName");
    int rc = 0;
    if (opts && !json_is_object(opts))
        rc = refuse(why, 400, "invalid argument",
                    "capabilities: browserd:options must be an object");
    else if (opts && json_object_get(opts, "pool") &&
             !json_is_string(json_object_get(opts, "pool")))
        rc = refuse(why, 400, "invalid argument",
                    "capabilities: browserd:options.pool must be a pool's id or name");
    else if (browser && browser[0] && strcasecmp(browser, "chrome") != 0 &&
             strcasecmp(browser, "chromium") != 0)
        rc = refuse(why, 500, "session not created", "browserName %.64s: this server runs Chromium",
                    browser);
    if (rc) {
        json_decref(m);
        return rc;
    }
    *out = m;
    return 0;
}

/* The merged capabilities of the request's new-session body
 * (wdc_caps_parse; new reference), or NULL and a WebDriver error. */
static json_t *requested_caps(struct req *rq, struct resp *rs)
{
    json_t *body = NULL;
    if (req_json_object(rq, 0, &body) != 0) {
        wd_error(rs, 400, "invalid argument", "the body must be a JSON object: %s",
                 rq->err.message);
        return NULL;
    }
    json_t *m;
    struct wdc_refusal why;
    if (wdc_caps_parse(body, &m, &why) != 0)
        wd_error(rs, why.status, why.error, "%s", why.message);
    json_decref(body);
    return m;
}

/* Answers a new session on the running session rec: its driver started,
 * {value: {sessionId, capabilities}}. On failure *failed is set. */
static int answer_session(struct req *rq, struct resp *rs, const struct session_rec *rec,
                          int want_bidi, int *failed)
{
    struct app *app = api_app(rq);
    *failed = 1;
    struct live *l = sessmgr_get(app->sessions, rec->id);
    if (!l)
        return wd_error(rs, 500, "session not created", "the browser session ended at once");
    struct wdreg_view v;
    int rc = webdriver_driver(app, l, rec->id, &v, &rq->err);
    sessmgr_put(l);
    if (rc) {
        json_decref(v.caps);
        return wd_from_err(rq, rs, rc, 1);
    }
    json_t *caps = public_caps(app, rec, v.caps, want_bidi);
    resp_json(rs, 200,
              json_pack("{s:{s:s,s:o}}", "value", "sessionId", rec->id, "capabilities", caps));
    *failed = 0;
    return 0;
}

int wdc_new_session(struct req *rq, struct resp *rs)
{
    struct app *app = api_app(rq);
    struct auth *a = api_auth(rq);
    json_t *m = requested_caps(rq, rs);
    if (!m)
        return 0;
    int want_bidi = json_is_true(json_object_get(m, "webSocketUrl"));
    json_t *opts = json_object_get(m, "browserd:options");
    const char *pool = jsonx_str(opts, "pool");
    struct session_rec rec;
    memset(&rec, 0, sizeof rec);
    char pool_id[sizeof rec.id] = "";
    int rc;
    if (pool) {
        char sid[sizeof rec.id];
        rc = pools_acquire_now(rq, pool, sid, sizeof sid);
        if (rc == 0)
            rc = store_session_get(app->store, a->org.id, a->project.id, sid, 0, &rec);
        if (rc == 0) {
            json_t *d = json_loads(rec.data, 0, NULL);
            const char *pid = jsonx_str(json_object_get(d, "pool"), "id");
            snprintf(pool_id, sizeof pool_id, "%s", pid ? pid : "");
            json_decref(d);
        }
    } else {
        json_t *body = opts ? json_deep_copy(opts) : json_object();
        const json_t *ent;
        rc = api_entitlements(rq, &ent);
        if (rc == 0)
            rc = sess_create(app, a->org.id, a->project.id, ent, body, &rec, &rq->err);
        json_decref(body);
    }
    json_decref(m);
    if (rc)
        return wd_from_err(rq, rs, rc, 1);
    int failed;
    answer_session(rq, rs, &rec, want_bidi, &failed);
    if (failed) { /* nobody will drive it: end it (or give it back) */
        if (!pool_id[0] || pools_release_browser(pool_id, rec.id) != 0)
            sess_delete(app, &rec);
    }
    log_info("webdriver: session %s %s", rec.id, failed ? "not created" : "created");
    session_rec_clear(&rec);
    return 0;
}

/* ---- a session's commands ---- */

/* What follows "/session/ID" in the request's path ("" or "/..."). */
static const char *tail_of(const struct req *rq)
{
    const char *p = strstr(rq->path, "/session/");
    if (!p)
        return "";
    p += 9;
    const char *slash = strchr(p, '/');
    return slash ? slash : "";
}

/* 1 when a command's path tail stays inside the session's URL on the
 * driver: no "." or ".." segment, no empty segment, no encoded dot, slash
 * or backslash (the driver serves other endpoints beside the session's:
 * creating sessions that launch browsers, shutting down). */
static int tail_ok(const char *tail)
{
    if (strstr(tail, "//") || strchr(tail, '\\') || strcasestr(tail, "%2e") ||
        strcasestr(tail, "%2f") || strcasestr(tail, "%5c"))
        return 0;
    for (const char *p = tail; (p = strchr(p, '/')) != NULL;) {
        p++;
        size_t n = strcspn(p, "/");
        if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return 0;
    }
    return 1;
}

/* Commands relayed at once: the server's, each organization's and each
 * session's share (LIM_WD_INFLIGHT*). */
static struct share inflight = SHARE_INIT("WebDriver commands in flight", LIM_WD_INFLIGHT,
                                          LIM_WD_INFLIGHT_PER_ORG, LIM_WD_INFLIGHT_PER_SESSION);

/* Relays a command of the live session id (or forwards it to the node
 * running it); 404 invalid session id when it does not run; 429 past the
 * commands in flight of the session, its organization or the server. */
static int command(struct req *rq, struct resp *rs, const char *org, const char *id)
{
    struct app *app = api_app(rq);
    if (!tail_ok(tail_of(rq)))
        return wd_error(rs, 404, "unknown command", "no WebDriver command %s %.200s", rq->method,
                        tail_of(rq));
    struct live *l = sessmgr_get(app->sessions, id);
    if (!l) {
        int rc = api_cluster_forward(rq, rs, org, id, 0);
        return rc != -1 ? rc : no_session(rs, id);
    }
    int rc = share_take_or_err(&inflight, org, id, LIM_WD_RETRY_AFTER_S, &rq->err);
    if (rc) {
        sessmgr_put(l);
        return wd_from_err(rq, rs, rc, 0);
    }
    rc = relay(rq, rs, l, id, tail_of(rq));
    share_give(&inflight, org, id);
    sessmgr_put(l);
    return rc;
}

int wdc_command(struct req *rq, struct resp *rs)
{
    struct app *app = api_app(rq);
    struct auth *a = api_auth(rq);
    const char *id = rq->params[0];
    struct session_rec rec;
    memset(&rec, 0, sizeof rec);
    if (store_session_get(app->store, a->org.id, a->project.id, id, 0, &rec) != 0)
        return no_session(rs, id);
    int rc = -1;
    int ending = strcmp(rq->method, "DELETE") == 0 && !tail_of(rq)[0];
    if (ending) {
        struct live *l = sessmgr_get(app->sessions, rec.id);
        if (!l) /* another node runs it: it ends it there */
            rc = api_cluster_forward(rq, rs, a->org.id, rec.id, 0);
        sessmgr_put(l);
    }
    if (rc != -1) {
        /* forwarded */
    } else if (ending) {
        /* The end of the WebDriver session is the end of the browser
         * session, or its release to the pool it was acquired from. */
        rc = 0;
        json_t *d = json_loads(rec.data, 0, NULL);
        const char *pool = jsonx_str(json_object_get(d, "pool"), "id");
        if (!pool || pools_release_browser(pool, rec.id) != 0)
            sess_delete(app, &rec);
        json_decref(d);
        resp_json(rs, 200, json_pack("{s:n}", "value"));
    } else {
        rc = command(rq, rs, a->org.id, rec.id);
    }
    session_rec_clear(&rec);
    return rc;
}

/* ---- the signed base URL (webdriver_url) ---- */

/* The session the path's token names, with its row in *rec; otherwise a
 * WebDriver error was answered and 1 is returned. */
static int token_session(struct req *rq, struct resp *rs, struct token_claims *tc,
                         struct session_rec *rec)
{
    struct app *app = api_app(rq);
    memset(rec, 0, sizeof *rec);
    if (token_verify(app->token_key, sizeof app->token_key, rq->params[0], "webdriver",
                     clock_now_ms() / 1000, tc, &rq->err) != 0) {
        wd_error(rs, 401, "invalid argument", "%s", rq->err.message);
        return 1;
    }
    if (store_session_get(app->store, tc->org, "", tc->sub, 0, rec) != 0) {
        no_session(rs, tc->sub);
        return 1;
    }
    return 0;
}

int wdc_token_new_session(struct req *rq, struct resp *rs)
{
    struct token_claims tc;
    struct session_rec rec;
    if (token_session(rq, rs, &tc, &rec))
        return 0;
    json_t *m = requested_caps(rq, rs);
    if (m) {
        int failed;
        answer_session(rq, rs, &rec, json_is_true(json_object_get(m, "webSocketUrl")), &failed);
        json_decref(m);
    }
    session_rec_clear(&rec);
    return 0;
}

int wdc_token_command(struct req *rq, struct resp *rs)
{
    struct token_claims tc;
    struct session_rec rec;
    if (token_session(rq, rs, &tc, &rec))
        return 0;
    int rc = 0;
    if (strcmp(rq->params[1], rec.id) != 0) {
        rc = no_session(rs, rq->params[1]);
    } else if (strcmp(rq->method, "DELETE") == 0 && !tail_of(rq)[0]) {
        /* A joined client leaves; the browser session stays (DELETE
         * /browsers/{id} ends it). */
        resp_json(rs, 200, json_pack("{s:n}", "value"));
    } else {
        rc = command(rq, rs, tc.org, rec.id);
    }
    session_rec_clear(&rec);
    return rc;
}

/* ---- status ---- */

int wdc_status(struct req *rq, struct resp *rs)
{
    (void)rq;
    resp_json(rs, 200,
              json_pack("{s:{s:b,s:s}}", "value", "ready", 1, "message",
                        "browserd: POST /session creates a browser session"));
    return 0;
}
