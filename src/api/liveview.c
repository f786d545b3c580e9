/*
 * Live view: one thread per viewer. A headful session's viewer shows its
 * whole X display (every window, the tab strip, dialogs: a tab the agent
 * opened shows at once), grabbed over the viewer's own X connection and sent
 * as PNG only when it changed and the previous picture has left the socket;
 * its input goes to the display (XTest), in the display's coordinates. A
 * session without a display falls back to the first page's DevTools
 * screencast and DevTools input. A slow viewer gets fewer frames, never a
 * backlog. docs/live-view.md has the figures.
 */
#include "api/liveview.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <wslay/wslay.h>

#include "session/ext.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/xalloc.h"
#include "domain/computer.h"
#include "domain/replay_rules.h"
#include "proxy/cdp_client.h"
#include "proxy/ws.h"
#include "runtime/chromium.h"
#include "runtime/computer.h"
#include "runtime/recorder.h"
#include "runtime/sandbox.h"
#include "runtime/sessmgr.h"
#include "runtime/xcapture.h"
#include "runtime/xinput.h"
#include "telemetry/telemetry.h"

#define LV_FPS         25
#define LV_X_FPS       12   /* display grabs per second (each ~5 ms at 1920x1080) */
#define LV_X_REPLY_MS  2000 /* the viewer's own X connection's reply limit */
#define LV_QUALITY     60
#define LV_INPUT_BYTES (COMP_TYPE_MAX_BYTES + 1024)

struct viewer {
    struct app *app;
    char sid[STORE_ID];
    char org[STORE_ID];
    int read_only;
    struct http_upgrade *up;
    struct ws_sock sock;
    wslay_event_context_ptr ws;
    int width, height;
    long long frames, inputs, dropped;
    int64_t started_us;
    int64_t clip_due_us;       /* read the session's clipboard then (a copy was sent); 0 = no */
    char *clip_sent;           /* the clipboard text last sent to the viewer */
    struct computer_target ct; /* display >= 0: a headful session's X display */
    struct viewer *next;
};

/* The browser's display (runtime/chromium), read under the entry's lock. */
static int display_of(void *ctx, struct chromium *c)
{
    struct computer_target *ct = ctx;
    ct->display = chromium_display(c);
    ct->display_id = (long)chromium_xvfb_pid(c);
    struct sandbox *sb = chromium_sandbox(c);
    ct->netns = sb ? sandbox_netns(sb) : 0;
    return 0;
}

/* The whole display as the viewer's pictures: its own X connection (the
 * session's input lock is never taken, so a long gesture does not freeze the
 * picture), the last PNG sent, to send only changes. */
struct xview {
    struct xin *x;
    long display_id;
    int64_t next_us, retry_us;
    uint8_t *last; /* the pixels of the last picture sent (stride * height bytes) */
    size_t last_len;
};

static void xview_close(struct xview *xv)
{
    xin_close(xv->x);
    xv->x = NULL;
    xfree(xv->last);
    xv->last = NULL;
    xv->last_len = 0;
}

/* A PNG of the display when it changed since the last one (owned), else
 * NULL. Opens (or reopens, for a relaunched browser's new display) the
 * connection as needed. */
static char *xview_take(struct xview *xv, const struct computer_target *ct, size_t *len)
{
    int64_t now = clock_mono_us();
    if (xv->x && (!xin_alive(xv->x) || xv->display_id != ct->display_id))
        xview_close(xv);
    struct err e;
    err_init(&e);
    if (!xv->x) {
        if (now < xv->retry_us)
            return NULL;
        if (xin_open(ct->netns, ct->display, LV_X_REPLY_MS, &xv->x, &e) != 0) {
            xv->retry_us = now + 1000000;
            log_debug("live view of %s: display: %s", ct->session_id, e.message);
            return NULL;
        }
        xv->display_id = ct->display_id;
    }
    int w, h;
    xin_screen(xv->x, &w, &h);
    const uint8_t *px = NULL;
    size_t stride = 0;
    char *png = NULL;
    if (xin_grab(xv->x, 0, 0, w, h, &px, &stride, &e) != 0) {
        log_debug("live view of %s: grab: %s", ct->session_id, e.message);
        xview_close(xv);
        xv->retry_us = now + 1000000;
        return NULL;
    }
    /* An unchanged screen is neither encoded nor sent (a compare of the
     * pixels costs far less than the PNG). */
    size_t n = stride * (size_t)h;
    if (xv->last && xv->last_len == n && memcmp(xv->last, px, n) == 0)
        return NULL;
    if (xcapture_png(px, w, h, stride, &png, len, &e) != 0) {
        log_debug("live view of %s: encode: %s", ct->session_id, e.message);
        return NULL;
    }
    if (!xv->last || xv->last_len != n) {
        xfree(xv->last);
        xv->last = xmalloc(n);
        xv->last_len = n;
    }
    memcpy(xv->last, px, n);
    return png;
}

/* How long after a copy key the session's clipboard is read: the page's copy
 * handler runs after the key event that the input call waited for. */
#define LV_CLIP_DELAY_US 150000

/* 1 when a press_key body holds a copy or cut combination (ctrl or super
 * with c or x, ctrl+insert, shift+delete), any case. */
static int is_copy_keys(const json_t *body)
{
    json_t *keys = json_object_get(body, "keys");
    size_t i;
    json_t *k;
    json_array_foreach(keys, i, k)
    {
        const char *t = json_string_value(k);
        if (!t)
            continue;
        char low[64];
        size_t n = 0;
        for (; t[n] && n < sizeof low - 1; n++)
            low[n] = (char)(t[n] >= 'A' && t[n] <= 'Z' ? t[n] + 32 : t[n]);
        low[n] = '\0';
        int mod = strstr(low, "ctrl") || strstr(low, "control") || strstr(low, "super");
        if ((mod && n >= 2 && low[n - 2] == '+' && (low[n - 1] == 'c' || low[n - 1] == 'x')) ||
            strcmp(low, "ctrl+insert") == 0 || strcmp(low, "shift+delete") == 0)
            return 1;
    }
    return 0;
}

/* The session's clipboard back to the viewer after a copy it sent: a text
 * message {"type": "clipboard", "text"} when the text changed, which the page
 * writes to the viewer's own clipboard. */
static void send_clipboard(struct viewer *v, const char *ws)
{
    v->clip_due_us = 0;
    char *text = NULL;
    struct err e;
    err_init(&e);
    if (computer_clipboard_read(v->sid, ws, &text, &e) != 0) {
        log_debug("live view of %s: clipboard read failed: %s", v->sid, e.message);
        return;
    }
    if (v->clip_sent && strcmp(v->clip_sent, text) == 0) {
        xfree(text);
        return;
    }
    json_t *m = json_pack("{s:s,s:s}", "type", "clipboard", "text", text);
    char *out = m ? jsonx_dump(m) : NULL;
    json_decref(m);
    if (out) {
        struct wslay_event_msg msg = {WSLAY_TEXT_FRAME, (const uint8_t *)out, strlen(out)};
        if (wslay_event_queue_msg(v->ws, &msg) == 0) {
            xfree(v->clip_sent);
            v->clip_sent = text;
            text = NULL;
        }
        xfree(out);
    }
    xfree(text);
}

static pthread_mutex_t viewers_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t viewers_gone; /* monotonic (clock_cond_init) */
static pthread_once_t viewers_once = PTHREAD_ONCE_INIT;
static struct viewer *viewers;
static int closing; /* liveview_fini: every viewer ends, none starts */

static void viewers_init(void)
{
    clock_cond_init(&viewers_gone);
}

/* ---- viewers ---- */

int liveview_active(const char *session_id)
{
    pthread_mutex_lock(&viewers_mu);
    int n = 0;
    for (struct viewer *v = viewers; v; v = v->next)
        if (strcmp(v->sid, session_id) == 0)
            n++;
    pthread_mutex_unlock(&viewers_mu);
    return n > 0;
}

/* Why one more viewer of session sid (organization org) is refused, or
 * NULL (viewers_mu held): each holds a thread, an X connection and a screen
 * of pixels, so a tenant's share is bounded per session and per
 * organization, below the server's. */
static const char *viewers_full(const char *sid, const char *org)
{
    int all = 0, of_sid = 0, of_org = 0;
    for (struct viewer *v = viewers; v; v = v->next) {
        all++;
        of_sid += strcmp(v->sid, sid) == 0;
        of_org += strcmp(v->org, org) == 0;
    }
    return of_sid >= LIM_LIVE_VIEWERS_SESSION
               ? "this session has as many live view viewers as it may"
           : of_org >= LIM_LIVE_VIEWERS_ORG
               ? "this organization has as many live view viewers as it may"
           : all >= LIM_LIVE_VIEWERS ? "the server has as many live view viewers as it may"
                                     : NULL;
}

static int viewers_of(const char *sid)
{
    int n = 0;
    for (struct viewer *v = viewers; v; v = v->next)
        if (strcmp(v->sid, sid) == 0)
            n++;
    return n;
}

/* The session's screen size, from its record (it changes with PATCH). */
static void refresh_size(struct viewer *v)
{
    struct session_rec rec;
    memset(&rec, 0, sizeof rec);
    v->width = 1920;
    v->height = 1080;
    if (store_session_get(v->app->store, v->org, "", v->sid, 0, &rec) == 0) {
        json_t *d = json_loads(rec.data ? rec.data : "{}", 0, NULL);
        json_t *vp = json_object_get(d, "viewport");
        int w = (int)json_integer_value(json_object_get(vp, "width"));
        int h = (int)json_integer_value(json_object_get(vp, "height"));
        if (w > 0 && h > 0) {
            v->width = w;
            v->height = h;
        }
        json_decref(d);
    }
    session_rec_clear(&rec);
}

/* Runs one action where the viewer's pictures come from: on the display
 * (the viewer sees the screen, so its coordinates are the screen's), else
 * on the page through DevTools. */
static int viewer_act(struct viewer *v, const char *ws, const struct comp_action *a, struct err *e)
{
    if (v->ct.display < 0)
        return computer_run(v->sid, ws, a, 1, NULL, e);
    struct computer_target t = v->ct;
    t.session_id = v->sid;
    t.ws_url = ws;
    return computer_act(&t, a, 1, NULL, e);
}

/* One input message {action, body}: the computer API's action names and
 * bodies, checked by the same rules. Read-only viewers' inputs are dropped
 * here, whatever the page does. */
static void viewer_input(struct viewer *v, const uint8_t *msg, size_t len)
{
    if (v->read_only) {
        v->dropped++;
        return;
    }
    static const struct {
        const char *name;
        enum comp_op op;
    } acts[] = {{"click_mouse", COMP_CLICK},         {"drag_mouse", COMP_DRAG},
                {"move_mouse", COMP_MOVE},           {"scroll", COMP_SCROLL},
                {"press_key", COMP_PRESS},           {"type_text", COMP_TYPE},
                {"clipboard_write", COMP_CLIP_WRITE}};
    struct err e;
    err_init(&e);
    json_t *m = NULL;
    if (jsonx_parse((const char *)msg, len, LV_INPUT_BYTES, &m, &e) != 0) {
        v->dropped++;
        return;
    }
    const char *name = jsonx_str(m, "action");
    int found = -1;
    for (size_t i = 0; name && i < sizeof acts / sizeof acts[0]; i++)
        if (strcmp(name, acts[i].name) == 0)
            found = (int)i;
    struct comp_action a;
    memset(&a, 0, sizeof a);
    char ws[512];
    struct live *l = sessmgr_get(v->app->sessions, v->sid);
    if (found < 0 || !l || live_ws_url(l, ws, sizeof ws) != 0 ||
        comp_parse(acts[found].op, json_object_get(m, "body"), "body.", v->width, v->height, &a,
                   &e) != 0) {
        v->dropped++;
    } else if (a.op == COMP_CLIP_WRITE
                   ? computer_clipboard_write(v->sid, ws, a.text ? a.text : "", &e) == 0
                   : viewer_act(v, ws, &a, &e) == 0) {
        v->inputs++;
        live_touch(l);
        if (a.op == COMP_PRESS && is_copy_keys(json_object_get(m, "body")))
            v->clip_due_us = clock_mono_us() + LV_CLIP_DELAY_US;
    } else {
        log_debug("live view of %s: %s failed: %s", v->sid, name, e.message);
    }
    comp_action_clear(&a);
    sessmgr_put(l);
    json_decref(m);
}

static ssize_t lv_recv_cb(wslay_event_context_ptr ws, uint8_t *buf, size_t len, int flags,
                          void *user)
{
    (void)flags;
    return ws_sock_recv(ws, &((struct viewer *)user)->sock, buf, len);
}

static ssize_t lv_send_cb(wslay_event_context_ptr ws, const uint8_t *data, size_t len, int flags,
                          void *user)
{
    return ws_sock_send(ws, &((struct viewer *)user)->sock, data, len, flags);
}

static void lv_msg_cb(wslay_event_context_ptr ws, const struct wslay_event_on_msg_recv_arg *arg,
                      void *user)
{
    (void)ws;
    if (arg->opcode == WSLAY_TEXT_FRAME)
        viewer_input(user, arg->msg, arg->msg_length);
}

static const struct wslay_event_callbacks lv_callbacks = {
    .recv_callback = lv_recv_cb,
    .send_callback = lv_send_cb,
    .on_msg_recv_callback = lv_msg_cb,
};

static void emit(const struct viewer *v, const char *type, json_t *data)
{
    struct telem_src src = {"kernel_api", "live_view", 0};
    telemetry_emit_src(v->sid, TELEM_CONNECTION, type, &src, data);
}

static void *viewer_main(void *arg)
{
    struct viewer *v = arg;
    struct rec_cast cast;
    memset(&cast, 0, sizeof cast);
    struct xview xv;
    memset(&xv, 0, sizeof xv);
    int64_t frame_us = 1000000 / LV_FPS, sent_at = 0, check_at = 0;
    char ws[512] = "";
    for (;;) {
        int64_t now = clock_mono_us();
        if (now >= check_at) {
            check_at = now + 200000;
            struct live *l = sessmgr_get(v->app->sessions, v->sid);
            int alive = l && live_ws_url(l, ws, sizeof ws) == 0;
            v->ct.display = -1;
            if (alive && live_with_browser(l, display_of, &v->ct) != 0)
                v->ct.display = -1;
            sessmgr_put(l);
            pthread_mutex_lock(&viewers_mu);
            if (closing)
                alive = 0;
            pthread_mutex_unlock(&viewers_mu);
            if (!alive) {
                /* The session ended: the viewer's page shows it and stops. */
                (void)wslay_event_queue_close(v->ws, 4404, (const uint8_t *)"session ended", 13);
                (void)wslay_event_send(v->ws);
                break;
            }
            refresh_size(v);
            if (v->ct.display >= 0 && xv.x)
                xin_screen(xv.x, &v->width, &v->height);
        }
        if (v->ct.display >= 0) {
            /* The display: a grab per tick, sent when it changed and the
             * viewer has taken the previous one. */
            rec_cast_close(&cast);
            if (now >= xv.next_us && wslay_event_get_queued_msg_count(v->ws) == 0) {
                xv.next_us = now + 1000000 / LV_X_FPS;
                size_t len = 0;
                char *png = xview_take(&xv, &v->ct, &len);
                struct wslay_event_msg m = {WSLAY_BINARY_FRAME, (const uint8_t *)png, len};
                if (png && wslay_event_queue_msg(v->ws, &m) == 0)
                    v->frames++;
                xfree(png); /* wslay copied it */
            }
        } else if (!cast.sh.cc && now >= cast.retry_at &&
                   rec_cast_start(&cast, ws, LV_QUALITY) != 0) {
            cast.retry_at = now + 1000000;
        }
        if (v->clip_due_us && now >= v->clip_due_us && ws[0])
            send_clipboard(v, ws);
        if (cast.frame && now - sent_at >= frame_us &&
            wslay_event_get_queued_msg_count(v->ws) == 0) {
            struct wslay_event_msg m = {WSLAY_BINARY_FRAME, cast.frame, cast.len};
            if (wslay_event_queue_msg(v->ws, &m) == 0)
                v->frames++;
            xfree(cast.frame); /* wslay copied it */
            cast.frame = NULL;
            sent_at = now;
        }
        if (!wslay_event_want_read(v->ws) && !wslay_event_want_write(v->ws))
            break;
        short events = POLLIN;
        if (wslay_event_want_write(v->ws))
            events |= POLLOUT;
        struct pollfd p = {.fd = v->sock.fd, .events = events};
        int wait_ms = cast.sh.cc ? 0 : 50;
        if (v->ct.display >= 0) {
            int64_t until = (xv.next_us - clock_mono_us()) / 1000;
            wait_ms = until < 0 ? 0 : until < 50 ? (int)until + 1 : 50;
        }
        int r = poll(&p, 1, wait_ms);
        if (r < 0 && errno != EINTR)
            break;
        if ((r > 0 || v->sock.extra_off < v->sock.extra_len) &&
            (wslay_event_recv(v->ws) != 0 || wslay_event_send(v->ws) != 0))
            break;
        /* Waits for the browser's next frame (or the viewer, at most 10 ms
         * later). */
        if (cast.sh.cc && rec_cast_pump(&cast, cast.frame ? 2 : 10) < 0) {
            rec_cast_close(&cast);
            cast.retry_at = clock_mono_us() + 200000;
        }
    }
    rec_cast_close(&cast);
    xview_close(&xv);
    pthread_mutex_lock(&viewers_mu);
    for (struct viewer **pp = &viewers; *pp; pp = &(*pp)->next)
        if (*pp == v) {
            *pp = v->next;
            break;
        }
    int left = viewers_of(v->sid);
    pthread_mutex_unlock(&viewers_mu);
    struct live *l = sessmgr_get(v->app->sessions, v->sid);
    if (l)
        live_client_detached(l);
    sessmgr_put(l);
    emit(v, "live_view_disconnect",
         json_pack("{s:b,s:I,s:I,s:I,s:I,s:i}", "read_only", v->read_only, "frames",
                   (json_int_t)v->frames, "inputs", (json_int_t)v->inputs, "dropped_inputs",
                   (json_int_t)v->dropped, "duration_ms",
                   (json_int_t)((clock_mono_us() - v->started_us) / 1000), "viewers", left));
    wslay_event_context_free(v->ws);
    xfree(v->sock.extra);
    xfree(v->clip_sent);
    http_upgrade_close(v->up);
    xfree(v);
    pthread_mutex_lock(&viewers_mu);
    pthread_cond_broadcast(&viewers_gone);
    pthread_mutex_unlock(&viewers_mu);
    return NULL;
}

void liveview_fini(void)
{
    pthread_once(&viewers_once, viewers_init);
    pthread_mutex_lock(&viewers_mu);
    closing = 1;
    /* Each viewer notices within a loop turn (<= 200 ms plus a capture). */
    struct timespec dl = clock_deadline(10000);
    while (viewers && pthread_cond_timedwait(&viewers_gone, &viewers_mu, &dl) != ETIMEDOUT)
        ;
    if (viewers)
        log_error("live view: viewers still connected at shutdown");
    pthread_mutex_unlock(&viewers_mu);
}

static void lv_upgraded(void *ctx, int fd, const char *extra, size_t extra_len,
                        struct http_upgrade *up)
{
    struct viewer *v = ctx;
    v->up = up;
    v->sock.fd = fd;
    if (extra_len) {
        v->sock.extra = xmalloc(extra_len);
        memcpy(v->sock.extra, extra, extra_len);
        v->sock.extra_len = extra_len;
    }
    v->started_us = clock_mono_us();
    pthread_once(&viewers_once, viewers_init);
    pthread_mutex_lock(&viewers_mu);
    /* Checked again here, where the viewer joins the list: concurrent
     * upgrades passed liveview_ws's check together. */
    const char *full = viewers_full(v->sid, v->org);
    if (!full) {
        v->next = viewers;
        viewers = v;
    }
    int n = viewers_of(v->sid);
    pthread_mutex_unlock(&viewers_mu);
    if (full) {
        (void)wslay_event_queue_close(v->ws, 1013, (const uint8_t *)"too many viewers", 16);
        (void)wslay_event_send(v->ws);
        wslay_event_context_free(v->ws);
        xfree(v->sock.extra);
        http_upgrade_close(up);
        xfree(v);
        return;
    }
    struct live *l = sessmgr_get(v->app->sessions, v->sid);
    if (l)
        live_client_attached(l);
    sessmgr_put(l);
    emit(v, "live_view_connect", json_pack("{s:b,s:i}", "read_only", v->read_only, "viewers", n));
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &at, viewer_main, v) != 0) {
        log_error("live view of %s: no thread: %s", v->sid, strerror(errno));
        pthread_mutex_lock(&viewers_mu);
        for (struct viewer **pp = &viewers; *pp; pp = &(*pp)->next)
            if (*pp == v) {
                *pp = v->next;
                break;
            }
        pthread_mutex_unlock(&viewers_mu);
        l = sessmgr_get(v->app->sessions, v->sid);
        if (l)
            live_client_detached(l);
        sessmgr_put(l);
        wslay_event_context_free(v->ws);
        xfree(v->sock.extra);
        http_upgrade_close(up);
        xfree(v);
    }
    pthread_attr_destroy(&at);
}

static void lv_cancel(void *ctx)
{
    struct viewer *v = ctx;
    wslay_event_context_free(v->ws);
    xfree(v);
}

/* The token's session when it is live and headful; 404 otherwise (an ended
 * session's URL is dead). */
static int open_token(struct req *rq, char *org, char *sid)
{
    struct app *app = api_app(rq);
    if (liveview_token_parse(app->token_key, sizeof app->token_key, rq->params[0], org, STORE_ID,
                             sid, STORE_ID) != 0)
        return err_set(&rq->err, E_NOTFOUND, "not_found", "no live view at this address");
    struct live *l = sessmgr_get(app->sessions, sid);
    char ws[512];
    int alive = l && live_ws_url(l, ws, sizeof ws) == 0;
    sessmgr_put(l);
    if (!alive)
        return err_set(&rq->err, E_NOTFOUND, "not_found",
                       "browser session %s has ended: its live view is gone", sid);
    return 0;
}

/* A live view of a session another node runs is served by that node. */
static int lv_forward(struct req *rq, struct resp *rs, int upgrade)
{
    struct app *app = api_app(rq);
    char org[STORE_ID], sid[STORE_ID];
    if (liveview_token_parse(app->token_key, sizeof app->token_key, rq->params[0], org, STORE_ID,
                             sid, STORE_ID) != 0)
        return -1;
    struct live *l = sessmgr_get(app->sessions, sid);
    int here = l != NULL;
    sessmgr_put(l);
    return here ? -1 : api_cluster_forward(rq, rs, org, sid, upgrade);
}

int liveview_ws(struct req *rq, struct resp *rs)
{
    char org[STORE_ID], sid[STORE_ID];
    int rc = lv_forward(rq, rs, 1);
    if (rc != -1)
        return rc;
    rc = open_token(rq, org, sid);
    if (rc)
        return rc;
    const char *key = req_header(rq, "Sec-WebSocket-Key");
    const char *upg = req_header(rq, "Upgrade");
    char accept[29];
    if (!upg || strcasecmp(upg, "websocket") != 0 || !key || ws_accept_key(key, accept) != 0)
        return err_set(&rq->err, E_INVALID, "bad_request",
                       "this endpoint speaks WebSocket: send Upgrade: websocket with a "
                       "Sec-WebSocket-Key");
    pthread_once(&viewers_once, viewers_init);
    pthread_mutex_lock(&viewers_mu);
    const char *full = viewers_full(sid, org);
    pthread_mutex_unlock(&viewers_mu);
    if (full) {
        rq->err.retry_after = 5;
        return err_set(&rq->err, E_LIMIT, "rate_limited", "%s (%s)", full,
                       "close a viewer, then connect again");
    }
    struct viewer *v = xcalloc(1, sizeof *v);
    v->app = api_app(rq);
    v->ct.display = -1;
    snprintf(v->sid, sizeof v->sid, "%s", sid);
    snprintf(v->org, sizeof v->org, "%s", org);
    const char *ro = req_query(rq, "readOnly");
    if (!ro)
        ro = req_query(rq, "readonly");
    if (!ro)
        ro = req_query(rq, "ro");
    v->read_only =
        ro && (strcmp(ro, "1") == 0 || strcasecmp(ro, "true") == 0 || strcasecmp(ro, "yes") == 0);
    if (wslay_event_context_server_init(&v->ws, &lv_callbacks, v) != 0) {
        xfree(v);
        return err_set(&rq->err, E_INTERNAL, "internal", "live view: no WebSocket context");
    }
    wslay_event_config_set_max_recv_msg_length(v->ws, LV_INPUT_BYTES);
    resp_upgrade(rs, accept, lv_upgraded, lv_cancel, v);
    return 0;
}

/* The page: a canvas scaled to the window (letterboxed), pictures drawn as
 * they come, input sent unless read-only. Embeddable in an iframe. */
static const char page_html[] =
    "<!doctype html><html><head><meta charset=utf-8><title>live view</title>"
    "<meta name=viewport content='width=device-width,initial-scale=1'>"
    "<style>html,body{margin:0;height:100%;background:#111;overflow:hidden}"
    "canvas{width:100%;height:100%;object-fit:contain;display:block;outline:none}"
    "#s{position:fixed;top:4px;left:6px;color:#aaa;font:12px sans-serif}</style></head>"
    "<body><canvas id=c tabindex=0></canvas><div id=s>connecting</div><script>\n"
    "'use strict';\n"
    "const q=new URLSearchParams(location.search);\n"
    "const ro=/^(1|true|yes)$/i.test(q.get('readOnly')||q.get('readonly')||q.get('ro')||'');\n"
    "const c=document.getElementById('c'),g=c.getContext('2d'),st=document.getElementById('s');\n"
    "const u=new URL(location.href);u.protocol=u.protocol==='https:'?'wss:':'ws:';\n"
    "u.pathname=u.pathname.replace(/\\/$/,'')+'/ws';u.search=ro?'?readOnly=true':'';u.hash='';\n"
    "const ws=new WebSocket(u);ws.binaryType='blob';window.lvFrames=0;let busy=false;\n"
    "ws.onopen=()=>{st.textContent=ro?'view only':'';try{parent.postMessage({type:'KERNEL_"
    "CONNECTED',connected:true},'*')}catch(e){}};\n"
    "ws.onclose=()=>{st.textContent='disconnected'};\n"
    "ws.onmessage=async(m)=>{if(typeof m.data==='string'){try{const j=JSON.parse(m.data);\n"
    " if(j.type==='clipboard'){window.lvClipboard=j.text;navigator.clipboard&&navigator."
    "clipboard.writeText(j.text).catch(()=>{})}}catch(e){}return}\n"
    " if(busy)return;busy=true;\n"
    " try{const b=await createImageBitmap(m.data);if(c.width!==b.width||c.height!==b.height)"
    "{c.width=b.width;c.height=b.height}\n"
    " g.drawImage(b,0,0);b.close();window.lvFrames++}catch(e){}busy=false};\n"
    "function pos(e){const r=c.getBoundingClientRect(),k=Math.min(r.width/c.width,r.height/"
    "c.height);\n"
    " const x=(e.clientX-r.left-(r.width-c.width*k)/2)/k,y=(e.clientY-r.top-(r.height-c.height*"
    "k)/2)/k;\n"
    " return[Math.max(0,Math.min(c.width-1,Math.round(x))),Math.max(0,Math.min(c.height-1,"
    "Math.round(y)))]}\n"
    "function send(action,body){if(!ro&&ws.readyState===1)ws.send(JSON.stringify({action,body}))"
    "}\n"
    "const B=['left','middle','right'];let down=null;\n"
    "c.addEventListener('mousedown',e=>{c.focus();down=pos(e);e.preventDefault()});\n"
    "c.addEventListener('mouseup',e=>{if(!down)return;const p=pos(e);\n"
    " if(Math.abs(p[0]-down[0])+Math.abs(p[1]-down[1])<4)send('click_mouse',{x:p[0],y:p[1],"
    "button:B[e.button]||'left'});\n"
    " else send('drag_mouse',{path:[down,p]});down=null});\n"
    "c.addEventListener('contextmenu',e=>e.preventDefault());\n"
    "c.addEventListener('wheel',e=>{const p=pos(e);send('scroll',{x:p[0],y:p[1],delta_x:Math."
    "sign(e.deltaX)*Math.max(1,Math.round(Math.abs(e.deltaX)/100)),delta_y:Math.sign(e.deltaY)"
    "*Math.max(1,Math.round(Math.abs(e.deltaY)/100))});e.preventDefault()},{passive:false});\n"
    "const K={Enter:'Return',Backspace:'BackSpace',Tab:'Tab',Escape:'Escape',Delete:'Delete',"
    "ArrowLeft:'Left',ArrowRight:'Right',ArrowUp:'Up',ArrowDown:'Down',Home:'Home',End:'End',"
    "PageUp:'Page_Up',PageDown:'Page_Down'};\n"
    "c.addEventListener('keydown',e=>{const mods=[e.ctrlKey&&'ctrl',e.altKey&&'alt',e.metaKey&&"
    "'super'].filter(Boolean);\n"
    " if(K[e.key])send('press_key',{keys:[[...mods,e.shiftKey&&'shift',K[e.key]].filter(Boolean)"
    ".join('+')]});\n"
    " else if(mods.length&&e.key.toLowerCase()==='v')return;\n"
    " else if(e.key.length===1&&mods.length)send('press_key',{keys:[[...mods,e.key.toLowerCase()"
    "].join('+')]});\n"
    " else if(e.key.length===1)send('type_text',{text:e.key});else return;e.preventDefault()});\n"
    "document.addEventListener('paste',e=>{const t=e.clipboardData&&e.clipboardData.getData("
    "'text/plain');\n"
    " if(t){send('clipboard_write',{text:t});send('press_key',{keys:['ctrl+v']})}"
    "e.preventDefault()});\n"
    "</script></body></html>\n";

int liveview_page(struct req *rq, struct resp *rs)
{
    char org[STORE_ID], sid[STORE_ID];
    int rc = lv_forward(rq, rs, 0);
    if (rc != -1)
        return rc;
    rc = open_token(rq, org, sid);
    if (rc)
        return rc;
    resp_header(rs, "Cache-Control", "no-store");
    resp_header(rs, "Referrer-Policy", "no-referrer");
    resp_text(rs, 200, "text/html; charset=utf-8", xstrdup(page_html), sizeof page_html - 1);
    return 0;
}

/* ---- the record field ---- */

static void lv_render(struct session_ctx *sc, json_t *record)
{
    if (jsonx_bool(sc->doc, "headless", 1) || sc->rec->deleted_at)
        return;
    char mac[LIVEVIEW_MAC_HEX + 1];
    liveview_token_mac(sc->app->token_key, sizeof sc->app->token_key, sc->rec->org_id, sc->rec->id,
                       mac);
    const char *pub = sc->app->cfg.public_url;
    size_t n = strlen(pub);
    while (n && pub[n - 1] == '/')
        n--;
    char *url =
        xasprintf("%.*s/browser/live/%s.%s.%s", (int)n, pub, sc->rec->org_id, sc->rec->id, mac);
    json_object_set_new(record, "browser_live_view_url", json_string(url));
    xfree(url);
}

/* PATCH: is a viewer connected (the viewport rule's question)? */
static void lv_state(struct session_ctx *sc, struct sessrules_state *st)
{
    st->live_view_active = liveview_active(sc->rec->id);
}

static const struct session_ext liveview_ext = {
    .name = "live_view",
    .state = lv_state,
    .render = lv_render,
};

/* Registered before main() runs (main.c is not this module's to edit). */
__attribute__((constructor)) static void liveview_register(void)
{
    session_ext_register(&liveview_ext);
}
