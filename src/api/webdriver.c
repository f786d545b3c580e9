/*
 * WebDriver BiDi over webdriver_ws_url: a ChromeDriver per session, started
 * lazily by the first BiDi connection, stopped when the session ends (the
 * registry: runtime/wdreg.h); client WebSockets go through their opening
 * exchange (proxy/bidiopen.h), then are relayed to the driver's BiDi socket.
 */
#include "api/webdriver.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "session/ext.h"
#include "core/clock.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/token.h"
#include "core/xalloc.h"
#include "proxy/bidiopen.h"
#include "proxy/relay.h"
#include "proxy/ws.h"
#include "runtime/sandbox.h"
#include "runtime/sessmgr.h"
#include "runtime/wdreg.h"

#define CONNECT_TIMEOUT_MS 5000

/* ---- the handler ---- */

/* "127.0.0.1:PORT" of a DevTools URL "ws://[nsN@]127.0.0.1:PORT/devtools/..."
 * (the namespace prefix names the sandbox, which the driver runs in). */
static int debugger_of(const char *ws_url, char *out, size_t cap)
{
    const char *p = strncmp(ws_url, "ws://", 5) == 0 ? ws_url + 5 : NULL;
    const char *at = p ? strchr(p, '@') : NULL;
    if (at && at < strchr(p, '/'))
        p = at + 1;
    const char *slash = p ? strchr(p, '/') : NULL;
    if (!slash || (size_t)(slash - p) >= cap)
        return -1;
    snprintf(out, cap, "%.*s", (int)(slash - p), p);
    return 0;
}

/* ---- session hooks ---- */

static void on_started(struct session_ctx *sc, const char *browser_ws_url)
{
    (void)browser_ws_url;
    wdreg_session_started(sc->app->drivers, sc->rec->id, sc->user_data_dir);
}

static void on_ending(struct session_ctx *sc, const char *reason)
{
    (void)reason;
    wdreg_session_ending(sc->app->drivers, sc->rec->id, sc->user_data_dir);
}

static const struct session_ext webdriver_ext = {
    .name = "webdriver",
    .started = on_started,
    .ending = on_ending,
};

/* ---- connections ---- */

struct wd_conn {
    char session_id[64];
    char org[64];
    struct app *app;
    struct live *live;
    struct http_upgrade *up;
    int client_fd;
    int upstream_fd;
    char *leftover; /* upstream bytes after its 101 */
    size_t leftover_len;
    json_t *answer;        /* result of the synthetic session.new (owned) */
    uint64_t from_browser; /* set by on_counts just before on_close */
    int holds_share;       /* one unit of api_bidi_conn_take, given back at the free */
};

static void conn_free(struct wd_conn *c)
{
    if (c->holds_share)
        api_bidi_conn_give(c->org, c->session_id);
    json_decref(c->answer);
    xfree(c->leftover);
    xfree(c);
}

static void client_hooks(const char *session_id, const void *conn, int attached,
                         uint64_t from_browser)
{
    for (const struct session_ext *const *x = session_ext_all(); *x; x++)
        if ((*x)->cdp_client)
            (*x)->cdp_client(session_id, conn, attached, from_browser);
}

static void on_counts(void *ctx, uint64_t from_client, uint64_t from_browser)
{
    struct wd_conn *c = ctx;
    (void)from_client;
    c->from_browser = from_browser;
}

static void on_client_message(void *ctx, const char *method, size_t len)
{
    struct wd_conn *c = ctx;
    if (method && strcmp(method, "session.end") == 0)
        wdreg_mark_ended(c->app->drivers, c->session_id);
    for (const struct session_ext *const *x = session_ext_all(); *x; x++)
        if ((*x)->cdp_message)
            (*x)->cdp_message(c->session_id, c, method, len);
}

static void on_close(void *ctx, const char *reason)
{
    struct wd_conn *c = ctx;
    log_debug("session %s: BiDi client left (%s)", c->session_id, reason);
    client_hooks(c->session_id, c, 0, c->from_browser);
    live_client_detached(c->live);
    sessmgr_put(c->live);
    conn_free(c);
}

static int charge(void *ctx, long long delta)
{
    struct wd_conn *c = ctx;
    return api_relay_charge(c->app, c->org, c->session_id, delta);
}

static void close_client(void *ctx)
{
    struct wd_conn *c = ctx;
    http_upgrade_close(c->up);
}

/* Hands the connection to the relay (or closes it). */
static void hand_over(void *ctx, const char *client_extra, size_t client_extra_len)
{
    struct wd_conn *c = ctx;
    struct relay_hooks hooks = {
        .on_client_message = on_client_message,
        .on_close = on_close,
        .on_counts = on_counts,
        .close_client = close_client,
        .charge = charge,
        .ctx = c,
    };
    struct err e;
    err_init(&e);
    if (api_relay_attach(c->app, c->client_fd, client_extra, client_extra_len, c->upstream_fd,
                         c->leftover, c->leftover_len, &hooks, &e) != 0) {
        log_warn("webdriver relay: %s", e.message);
        close(c->upstream_fd);
        http_upgrade_close(c->up);
        on_close(c, "attach failed");
    }
}

static void fail_conn(void *ctx, const char *why)
{
    struct wd_conn *c = ctx;
    close(c->upstream_fd);
    http_upgrade_close(c->up);
    on_close(c, why);
}

/* The opening exchange (proxy/bidiopen.h) answers a first session.new, then
 * hands the connection to the relay. */
static void on_upgraded(void *ctx, int fd, const char *extra, size_t extra_len,
                        struct http_upgrade *up)
{
    struct wd_conn *c = ctx;
    c->up = up;
    c->client_fd = fd;
    live_client_attached(c->live);
    client_hooks(c->session_id, c, 1, 0);
    struct bidiopen_hooks hooks = {.hand_over = hand_over, .fail = fail_conn, .ctx = c};
    bidiopen_start(c->app->bidi_openings, fd, c->session_id, c->answer, extra, extra_len, &hooks);
}

static void on_cancel(void *ctx)
{
    struct wd_conn *c = ctx;
    close(c->upstream_fd);
    sessmgr_put(c->live);
    conn_free(c);
}

/* The URL the client used, as webSocketUrl of the session.new answer. */
static char *public_ws_url(const struct app *app, const char *token)
{
    return api_public_ws_url(app, "/browser/webdriver", token);
}

int webdriver_upgrade(struct req *rq, struct resp *rs)
{
    struct app *app = api_app(rq);
    struct token_claims tc;
    const char *token = req_query(rq, "jwt");
    int rc = token_verify(app->token_key, sizeof app->token_key, token, "webdriver",
                          clock_now_ms() / 1000, &tc, &rq->err);
    if (rc)
        return rc;
    struct live *l = sessmgr_get(app->sessions, tc.sub);
    if (!l && (rc = api_cluster_forward(rq, rs, tc.org, tc.sub, 1)) != -1)
        return rc; /* another node runs it */
    struct wdreg_sess *s = l ? wdreg_get(app->drivers, tc.sub) : NULL;
    if (!s) {
        sessmgr_put(l);
        return err_set(&rq->err, E_NOTFOUND, "not_found", "browser session %s not found or ended",
                       tc.sub);
    }
    const char *key = req_header(rq, "Sec-WebSocket-Key");
    const char *upg = req_header(rq, "Upgrade");
    char accept[29];
    char ws[512], debugger[64];
    if (!upg || strcasecmp(upg, "websocket") != 0 || !key || ws_accept_key(key, accept) != 0) {
        rc = err_set(&rq->err, E_INVALID, "bad_request",
                     "this endpoint speaks WebSocket (WebDriver BiDi): send Upgrade: websocket "
                     "with a Sec-WebSocket-Key");
    } else if (live_ws_url(l, ws, sizeof ws) != 0 ||
               debugger_of(ws, debugger, sizeof debugger) != 0) {
        rc = err_set(&rq->err, E_NOTFOUND, "not_found", "browser session %s not found or ended",
                     tc.sub);
    } else {
        rc = api_bidi_conn_take(tc.org, tc.sub, &rq->err);
    }
    int taken = rc == 0; /* a unit of the BiDi WebSockets' share */
    struct wd_conn *c = NULL;
    struct wdreg_view v = {0};
    /* A driver whose WebDriver session is gone (a client sent session.end)
     * refuses the handshake: restart it once. */
    for (int attempt = 0; rc == 0 && attempt < 2; attempt++) {
        json_decref(v.caps);
        v.caps = NULL;
        struct sandbox *sb = live_sandbox_ref(l);
        rc = wdreg_ensure(s, debugger, sb, attempt > 0, &v, &rq->err);
        sandbox_unref(sb);
        if (rc)
            break;
        c = xcalloc(1, sizeof *c);
        c->upstream_fd = -1;
        struct err ce;
        err_init(&ce);
        if (ws_connect(v.url, CONNECT_TIMEOUT_MS, &c->upstream_fd, &c->leftover, &c->leftover_len,
                       &ce) == 0)
            break;
        log_warn("session %s: BiDi socket %s: %s%s", tc.sub, v.url, ce.message,
                 attempt ? "" : " (restarting chromedriver)");
        conn_free(c);
        c = NULL;
        if (attempt)
            rc = err_set(&rq->err, E_UNAVAIL, "browser_unavailable",
                         "the WebDriver BiDi endpoint is not answering");
    }
    wdreg_put(app->drivers, s);
    if (rc) {
        if (taken)
            api_bidi_conn_give(tc.org, tc.sub);
        json_decref(v.caps);
        sessmgr_put(l);
        return rc;
    }
    snprintf(c->session_id, sizeof c->session_id, "%s", tc.sub);
    snprintf(c->org, sizeof c->org, "%s", tc.org);
    c->holds_share = 1;
    c->app = app;
    c->live = l;
    c->client_fd = -1;
    if (!json_is_object(v.caps))
        v.caps = json_object();
    char *pub = public_ws_url(app, token);
    json_object_set_new(v.caps, "webSocketUrl", json_string(pub));
    xfree(pub);
    c->answer = json_pack("{s:s,s:o}", "sessionId", v.session_id, "capabilities", v.caps);
    resp_upgrade(rs, accept, on_upgraded, on_cancel, c);
    return 0;
}

int webdriver_driver(struct app *app, struct live *l, const char *session_id, struct wdreg_view *v,
                     struct err *e)
{
    memset(v, 0, sizeof *v);
    char ws[512], debugger[64];
    struct wdreg_sess *s = wdreg_get(app->drivers, session_id);
    if (!s || live_ws_url(l, ws, sizeof ws) != 0 ||
        debugger_of(ws, debugger, sizeof debugger) != 0) {
        if (s)
            wdreg_put(app->drivers, s);
        return err_set(e, E_NOTFOUND, "not_found", "browser session %s not found or ended",
                       session_id);
    }
    struct sandbox *sb = live_sandbox_ref(l);
    int rc = wdreg_ensure(s, debugger, sb, 0, v, e);
    sandbox_unref(sb);
    wdreg_put(app->drivers, s);
    return rc;
}

/* ---- module life ---- */

void webdriver_init(struct app *app)
{
    (void)app;
    session_ext_register(&webdriver_ext);
}
