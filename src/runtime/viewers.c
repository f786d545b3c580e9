/*
 * Live view viewers: one thread per viewer; runtime/viewers.h and
 * docs/live-view.md. A headful session's viewer shows its whole X display
 * (every window, the tab strip, dialogs: a tab the agent opened shows at
 * once), grabbed over the viewer's own X connection and sent as PNG only when
 * it changed and the previous picture has left the socket; its input goes to
 * the display (XTest), in the display's coordinates. A session without a
 * display falls back to the first page's DevTools screencast and DevTools
 * input. A slow viewer gets fewer frames, never a backlog.
 */
#include "runtime/viewers.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <wslay/wslay.h>

#include "core/clock.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/share.h"
#include "core/xalloc.h"
#include "domain/computer.h"
#include "domain/launch_settings.h"
#include "proxy/ws.h"
#include "runtime/chromium.h"
#include "runtime/computer.h"
#include "runtime/recorder.h"
#include "runtime/sandbox.h"
#include "runtime/sessmgr.h"
#include "runtime/xcapture.h"
#include "runtime/xinput.h"
#include "store/store.h"
#include "telemetry/telemetry.h"

#define LV_FPS         25
#define LV_X_FPS       12   /* display grabs per second (each ~5 ms at 1920x1080) */
#define LV_X_REPLY_MS  2000 /* the viewer's own X connection's reply limit */
#define LV_QUALITY     60
#define LV_INPUT_BYTES (COMP_TYPE_MAX_BYTES + 1024)

struct viewer {
    struct viewers *set;
    struct sessmgr *sessions;
    struct store *store;
    char sid[STORE_ID];
    char org[STORE_ID];
    int read_only;
    void (*close)(void *ctx); /* closes the upgraded connection */
    void *close_ctx;
    struct ws_sock sock;
    wslay_event_context_ptr ws;
    int width, height;
    int screen_w, screen_h; /* the display's screen (0 without one), read with ct */
    long long screen_bytes; /* charged for its screen (set->mu): bytes_of_screen */
    long long frames, inputs, dropped;
    int64_t started_us;
    int64_t clip_due_us;       /* read the session's clipboard then (a copy was sent); 0 = no */
    char *clip_sent;           /* the clipboard text last sent to the viewer */
    struct computer_target ct; /* display >= 0: a headful session's X display */
    struct viewer *next;
};

/* The browser's display and its screen's size (runtime/chromium) into the
 * viewer ctx, read under the entry's lock. */
static int display_of(void *ctx, struct chromium *c)
{
    struct viewer *v = ctx;
    struct computer_target *ct = &v->ct;
    chromium_screen_size(c, &v->screen_w, &v->screen_h);
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
static char *xview_take(struct xview *xv, const struct computer_target *ct, long long charged,
                        size_t *len)
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
    /* A screen larger than the viewer is charged for (a new display since
     * the last check) is not grabbed: the check charges it or ends the
     * viewer. */
    if ((long long)w * h * 4 > charged)
        return NULL;
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

struct viewers {
    pthread_mutex_t mu;
    pthread_cond_t gone; /* a viewer left (monotonic clock) */
    struct viewer *list;
    int closing; /* viewers_stop: every viewer ends, none starts */
};

struct viewers *viewers_new(void)
{
    struct viewers *set = xcalloc(1, sizeof *set);
    pthread_mutex_init(&set->mu, NULL);
    clock_cond_init(&set->gone);
    return set;
}

void viewers_free(struct viewers *set)
{
    if (!set)
        return;
    pthread_cond_destroy(&set->gone);
    pthread_mutex_destroy(&set->mu);
    xfree(set);
}

/* ---- viewers ---- */

int viewers_active(struct viewers *set, const char *session_id)
{
    pthread_mutex_lock(&set->mu);
    int n = 0;
    for (struct viewer *v = set->list; v; v = v->next)
        if (strcmp(v->sid, session_id) == 0)
            n++;
    pthread_mutex_unlock(&set->mu);
    return n > 0;
}

/* The bytes a viewer is charged for a screen of w x h: its copy of the
 * last picture, 4 bytes a pixel. */
static long long bytes_of_screen(int w, int h)
{
    return w > 0 && h > 0 ? (long long)w * h * 4 : 0;
}

/* Whether one more viewer of session sid (organization org), holding a
 * screen of w x h, is refused (set->mu held): 1 with the reason in why, else
 * 0. self, when in the list, is not counted (a viewer whose screen grew).
 * Each viewer holds a thread, an X connection and a copy of the screen, so
 * a tenant's share is bounded per session and per organization, below the
 * server's, in viewers and in screen bytes (the viewport has no upper
 * bound). */
static int refused_locked(struct viewers *set, const struct viewer *self, const char *sid,
                          const char *org, int w, int h, char *why, size_t cap)
{
    long long bytes = bytes_of_screen(w, h);
    struct lv_held held = {.bytes = bytes};
    for (struct viewer *v = set->list; v; v = v->next) {
        if (v == self)
            continue;
        int same_sid = strcmp(v->sid, sid) == 0, same_org = strcmp(v->org, org) == 0;
        held.all++;
        held.of_sid += same_sid;
        held.of_org += same_org;
        held.all_b += v->screen_bytes;
        held.sid_b += same_sid ? v->screen_bytes : 0;
        held.org_b += same_org ? v->screen_bytes : 0;
    }
    return live_view_refused(&held, w, h, why, cap);
}

int live_view_refused(const struct lv_held *held, int w, int h, char *why, size_t cap)
{
    const int of_sid = held->of_sid, of_org = held->of_org, all = held->all;
    const long long all_b = held->all_b + held->bytes, sid_b = held->sid_b + held->bytes,
                    org_b = held->org_b + held->bytes;
    const int reserve = SHARE_RESERVE(LIM_LIVE_VIEWERS);
    const long long reserve_b = LIM_LIVE_VIEW_BYTES / LIM_SHARE_RESERVE_DIV;
    const char *who = NULL;
    long long lim = 0, over = 0;
    if (of_sid >= LIM_LIVE_VIEWERS_SESSION || of_org >= LIM_LIVE_VIEWERS_ORG ||
        all >= LIM_LIVE_VIEWERS) {
        snprintf(why, cap, "%s has as many live view viewers as it may (%d)",
                 of_sid >= LIM_LIVE_VIEWERS_SESSION ? "this session"
                 : of_org >= LIM_LIVE_VIEWERS_ORG   ? "this organization"
                                                    : "the server",
                 of_sid >= LIM_LIVE_VIEWERS_SESSION ? LIM_LIVE_VIEWERS_SESSION
                 : of_org >= LIM_LIVE_VIEWERS_ORG   ? LIM_LIVE_VIEWERS_ORG
                                                    : LIM_LIVE_VIEWERS);
        return 1;
    }
    /* The newcomer reserve (core/share.h): an organization that has viewers
     * does not take the server's last ones, so that several organizations
     * together never leave none for an organization watching nothing. */
    if (of_org > 0 && all >= LIM_LIVE_VIEWERS - reserve) {
        snprintf(why, cap,
                 "the server has %d live view viewers; its last %d are kept for organizations "
                 "that have none",
                 all, reserve);
        return 1;
    }
    if (sid_b > LIM_LIVE_VIEW_BYTES_SESSION) {
        who = "this session's";
        lim = LIM_LIVE_VIEW_BYTES_SESSION;
        over = sid_b;
    } else if (org_b > LIM_LIVE_VIEW_BYTES_ORG) {
        who = "this organization's";
        lim = LIM_LIVE_VIEW_BYTES_ORG;
        over = org_b;
    } else if (all_b > LIM_LIVE_VIEW_BYTES) {
        who = "the server's";
        lim = LIM_LIVE_VIEW_BYTES;
        over = all_b;
    } else if (of_org > 0 && all_b > LIM_LIVE_VIEW_BYTES - reserve_b) {
        snprintf(why, cap,
                 "the server's live view viewers would hold %lld bytes of screen memory; its "
                 "last %lld are kept for organizations that have no viewer",
                 all_b, reserve_b);
        return 1;
    }
    if (!who)
        return 0;
    snprintf(why, cap,
             "%s live view viewers would hold %lld bytes of screen memory, past its share of "
             "%lld (each viewer keeps a copy of the %dx%d screen: a smaller viewport or fewer "
             "viewers fit)",
             who, over, lim, w, h);
    return 1;
}

static int count_of(struct viewers *set, const char *sid)
{
    int n = 0;
    for (struct viewer *v = set->list; v; v = v->next)
        if (strcmp(v->sid, sid) == 0)
            n++;
    return n;
}

/* The session's screen size, from its record (it changes with PATCH). */
static void refresh_size(struct viewer *v)
{
    struct session_rec rec;
    memset(&rec, 0, sizeof rec);
    struct launch_settings ls;
    /* A session that cannot be read: the default screen, as for a record
     * without a viewport. */
    launch_settings_from_text(
        store_session_get(v->store, v->org, "", v->sid, 0, &rec) == 0 ? rec.data : NULL, &ls);
    v->width = ls.viewport.width;
    v->height = ls.viewport.height;
    session_rec_clear(&rec);
}

int viewer_refused(struct viewer *v, char *why, size_t cap)
{
    /* The display's screen when there is one: a resize changes the record's
     * viewport, never the screen the viewer copies. */
    refresh_size(v);
    struct live *l = sessmgr_get(v->sessions, v->sid);
    if (l && live_with_browser(l, display_of, v) == 0 && v->ct.display >= 0 && v->screen_w > 0) {
        v->width = v->screen_w;
        v->height = v->screen_h;
    }
    sessmgr_put(l);
    pthread_mutex_lock(&v->set->mu);
    int refused = refused_locked(v->set, NULL, v->sid, v->org, v->width, v->height, why, cap);
    pthread_mutex_unlock(&v->set->mu);
    return refused;
}

/* Charges v for its screen now (width x height): 1 when it fits its
 * shares (or shrank), 0 when it grew past one. */
static int charge_screen(struct viewer *v)
{
    long long want = bytes_of_screen(v->width, v->height);
    char why[300];
    pthread_mutex_lock(&v->set->mu);
    int ok = want <= v->screen_bytes ||
             !refused_locked(v->set, v, v->sid, v->org, v->width, v->height, why, sizeof why);
    if (ok)
        v->screen_bytes = want;
    pthread_mutex_unlock(&v->set->mu);
    if (!ok)
        log_info("live view of %s: viewer closed: %s", v->sid, why);
    return ok;
}

static long long charged_of(struct viewer *v)
{
    pthread_mutex_lock(&v->set->mu);
    long long n = v->screen_bytes;
    pthread_mutex_unlock(&v->set->mu);
    return n;
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
    struct live *l = sessmgr_get(v->sessions, v->sid);
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
    struct viewers *set = v->set;
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
            struct live *l = sessmgr_get(v->sessions, v->sid);
            int alive = l && live_ws_url(l, ws, sizeof ws) == 0;
            v->ct.display = -1;
            if (alive && live_with_browser(l, display_of, v) != 0)
                v->ct.display = -1;
            sessmgr_put(l);
            pthread_mutex_lock(&set->mu);
            if (set->closing)
                alive = 0;
            pthread_mutex_unlock(&set->mu);
            if (!alive) {
                /* The session ended: the viewer's page shows it and stops. */
                (void)wslay_event_queue_close(v->ws, 4404, (const uint8_t *)"session ended", 13);
                (void)wslay_event_send(v->ws);
                break;
            }
            refresh_size(v);
            if (v->ct.display >= 0 && xv.x)
                xin_screen(xv.x, &v->width, &v->height);
            else if (v->ct.display >= 0 && v->screen_w > 0) {
                v->width = v->screen_w;
                v->height = v->screen_h;
            }
            if (!charge_screen(v)) {
                /* The screen grew past the share (a relaunched browser's
                 * larger display): this viewer leaves, the others stay. */
                (void)wslay_event_queue_close(v->ws, 1013, (const uint8_t *)"screen too large", 16);
                (void)wslay_event_send(v->ws);
                break;
            }
        }
        if (v->ct.display >= 0) {
            /* The display: a grab per tick, sent when it changed and the
             * viewer has taken the previous one. */
            rec_cast_close(&cast);
            if (now >= xv.next_us && wslay_event_get_queued_msg_count(v->ws) == 0) {
                xv.next_us = now + 1000000 / LV_X_FPS;
                size_t len = 0;
                char *png = xview_take(&xv, &v->ct, charged_of(v), &len);
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
    pthread_mutex_lock(&set->mu);
    for (struct viewer **pp = &set->list; *pp; pp = &(*pp)->next)
        if (*pp == v) {
            *pp = v->next;
            break;
        }
    int left = count_of(set, v->sid);
    pthread_mutex_unlock(&set->mu);
    struct live *l = sessmgr_get(v->sessions, v->sid);
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
    v->close(v->close_ctx);
    xfree(v);
    pthread_mutex_lock(&set->mu);
    pthread_cond_broadcast(&set->gone);
    pthread_mutex_unlock(&set->mu);
    return NULL;
}

void viewers_stop(struct viewers *set)
{
    pthread_mutex_lock(&set->mu);
    set->closing = 1;
    /* Each viewer notices within a loop turn (<= 200 ms plus a capture). */
    struct timespec dl = clock_deadline(VIEWERS_STOP_MS);
    while (set->list && pthread_cond_timedwait(&set->gone, &set->mu, &dl) != ETIMEDOUT)
        ;
    if (set->list)
        log_error("live view: viewers still connected at shutdown");
    pthread_mutex_unlock(&set->mu);
}

struct viewer *viewer_new(struct viewers *set, struct sessmgr *sessions, struct store *store,
                          const char *sid, const char *org, int read_only, struct err *e)
{
    struct viewer *v = xcalloc(1, sizeof *v);
    v->set = set;
    v->sessions = sessions;
    v->store = store;
    v->ct.display = -1;
    snprintf(v->sid, sizeof v->sid, "%s", sid);
    snprintf(v->org, sizeof v->org, "%s", org);
    v->read_only = read_only;
    if (wslay_event_context_server_init(&v->ws, &lv_callbacks, v) != 0) {
        xfree(v);
        err_set(e, E_INTERNAL, "internal", "live view: no WebSocket context");
        return NULL;
    }
    wslay_event_config_set_max_recv_msg_length(v->ws, LV_INPUT_BYTES);
    return v;
}

void viewer_cancel(struct viewer *v)
{
    wslay_event_context_free(v->ws);
    xfree(v);
}

void viewer_run(struct viewer *v, int fd, const char *extra, size_t extra_len,
                void (*close)(void *ctx), void *close_ctx)
{
    struct viewers *set = v->set;
    v->close = close;
    v->close_ctx = close_ctx;
    v->sock.fd = fd;
    if (extra_len) {
        v->sock.extra = xmalloc(extra_len);
        memcpy(v->sock.extra, extra, extra_len);
        v->sock.extra_len = extra_len;
    }
    v->started_us = clock_mono_us();
    pthread_mutex_lock(&set->mu);
    /* Checked again here, where the viewer joins the list: concurrent
     * upgrades passed the handler's check together. */
    char why[300];
    int full = refused_locked(set, NULL, v->sid, v->org, v->width, v->height, why, sizeof why);
    if (!full) {
        v->screen_bytes = bytes_of_screen(v->width, v->height);
        v->next = set->list;
        set->list = v;
    }
    int n = count_of(set, v->sid);
    pthread_mutex_unlock(&set->mu);
    if (full) {
        (void)wslay_event_queue_close(v->ws, 1013, (const uint8_t *)"too many viewers", 16);
        (void)wslay_event_send(v->ws);
        wslay_event_context_free(v->ws);
        xfree(v->sock.extra);
        close(close_ctx);
        xfree(v);
        return;
    }
    struct live *l = sessmgr_get(v->sessions, v->sid);
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
        pthread_mutex_lock(&set->mu);
        for (struct viewer **pp = &set->list; *pp; pp = &(*pp)->next)
            if (*pp == v) {
                *pp = v->next;
                break;
            }
        pthread_mutex_unlock(&set->mu);
        l = sessmgr_get(v->sessions, v->sid);
        if (l)
            live_client_detached(l);
        sessmgr_put(l);
        wslay_event_context_free(v->ws);
        xfree(v->sock.extra);
        close(close_ctx);
        xfree(v);
    }
    pthread_attr_destroy(&at);
}
