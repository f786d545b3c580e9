#include "runtime/computer.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/b64.h"
#include "core/clock.h"
#include "core/jsonx.h"
#include "core/xalloc.h"
#include "proxy/cdp_client.h"
#include "proxy/cdp_page.h"
#include "runtime/xcapture.h"
#include "runtime/xinput.h"
#include "telemetry/telemetry.h"

#define CDP_MS         10000
#define WHEEL_TICK_PX  100  /* one wheel click, in CSS pixels */
#define MOVE_STEP_MS   10   /* time between two points of a smooth move */
#define NAP_SLICE_MS   20   /* a pause checks for cancellation this often */
#define X_REPLY_MS     5000 /* longest wait for the X server's answer */
#define READY_MS       1000 /* longest wait for a new page's first frames */
#define TYPE_SYNC_KEYS 32   /* headless typing awaits the browser every this many keys */

/* The browser's first page, attached over one DevTools connection. */
struct cpage {
    struct cdp_client *cc;
    char sid[128]; /* flattened session of the first page target */
};

/* ---- per-session state ---- */

struct cstate {
    char id[32];
    /* One call at a time on this session: the call that set busy owns the
     * session's input until it clears it, whichever thread it runs on then
     * (a batch parked between its steps, http.h req_defer, keeps it). */
    pthread_mutex_t mu; /* guards busy */
    pthread_cond_t freed;
    int busy;
    int x, y;          /* where the pointer is */
    int hidden;        /* setCursorVisibility */
    struct cpage page; /* kept between calls (page.cc NULL: none yet) */
    struct xin *xin;   /* headful: the display's connection, kept between calls */
    double ready_doc;  /* headful: performance.timeOrigin of the page last seen drawn */
    char *clip;        /* headless: the text the session last wrote to the clipboard */
    int x_netns, x_display;
    long x_id;
    const struct computer_target *t; /* the running call's (cancel hook) */
    int64_t deadline_ms;             /* the running call's end (monotonic), 0 = none */
    int refs;                        /* under reg_mu */
    int forgotten;                   /* under reg_mu: unlinked, freed by the last state_put */
    struct cstate *next;
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct cstate *reg;

static struct cstate *state_get(const char *id)
{
    pthread_mutex_lock(&reg_mu);
    struct cstate *s = reg;
    while (s && strcmp(s->id, id) != 0)
        s = s->next;
    if (!s) {
        s = xcalloc(1, sizeof *s);
        snprintf(s->id, sizeof s->id, "%s", id);
        pthread_mutex_init(&s->mu, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&s->freed, &ca);
        pthread_condattr_destroy(&ca);
        s->next = reg;
        reg = s;
    }
    s->refs++;
    pthread_mutex_unlock(&reg_mu);
    return s;
}

static void state_free(struct cstate *s)
{
    cdp_client_close(s->page.cc);
    xin_close(s->xin);
    xfree(s->clip);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->freed);
    xfree(s);
}

static void state_put(struct cstate *s)
{
    pthread_mutex_lock(&reg_mu);
    int last = --s->refs == 0 && s->forgotten;
    pthread_mutex_unlock(&reg_mu);
    if (last)
        state_free(s);
}

/* A state in use when its session ends is unlinked at once and freed by its
 * last user (its X connection and DevTools socket go with it). */
void computer_forget(const char *id)
{
    struct cstate *s = NULL;
    pthread_mutex_lock(&reg_mu);
    for (struct cstate **pp = &reg; *pp; pp = &(*pp)->next)
        if (strcmp((*pp)->id, id) == 0) {
            s = *pp;
            *pp = s->next;
            s->forgotten = 1;
            if (s->refs > 0)
                s = NULL;
            break;
        }
    pthread_mutex_unlock(&reg_mu);
    if (s)
        state_free(s);
}

/* Prefixes e's message with what failed, keeping its class and code
 * (copied first: e's own strings cannot be both an argument of the format
 * and its destination). */
static int failed_to(struct err *e, int rc, const char *what)
{
    char code[ERR_CODE_MAX], msg[ERR_MSG_MAX];
    snprintf(code, sizeof code, "%s", e->code[0] ? e->code : "internal");
    snprintf(msg, sizeof msg, "%s", e->message);
    return err_set(e, rc, code, "failed to %s: %s", what, msg);
}

static void sleep_ms(int ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* Takes the session's input (s->busy) when it is free: 1, else 0. */
static int state_trylock(struct cstate *s)
{
    pthread_mutex_lock(&s->mu);
    int got = !s->busy;
    s->busy = 1;
    pthread_mutex_unlock(&s->mu);
    return got;
}

static void state_unlock(struct cstate *s)
{
    pthread_mutex_lock(&s->mu);
    s->busy = 0;
    pthread_cond_signal(&s->freed);
    pthread_mutex_unlock(&s->mu);
}

/* Why a call gave up waiting for the session's input: t's client went away,
 * or another call held it past the deadline (0: neither yet). */
static int lock_wait_over(const struct computer_target *t, int64_t deadline, struct err *e)
{
    if (t && t->cancelled && t->cancelled(t->cancel_ctx))
        return err_set(e, E_INTERNAL, "internal", "cancelled: the client went away");
    if (clock_mono_ms() >= deadline) {
        int rc = err_set(e, E_LIMIT, "session_busy",
                         "another computer call has held this session's input for more than "
                         "%d ms; retry when it ends",
                         LIM_COMPUTER_LOCK_WAIT_MS);
        e->retry_after = 1;
        return rc;
    }
    return 0;
}

/* Takes the session's input for a call. While another call holds it, waits
 * at most LIM_COMPUTER_LOCK_WAIT_MS (less when t's client goes away), then
 * fails with E_LIMIT (429, Retry-After): a queue of calls on one busy
 * session does not hold server threads for as long as the running call
 * lasts. */
static int state_lock(struct cstate *s, const struct computer_target *t, struct err *e)
{
    int64_t deadline = clock_mono_ms() + LIM_COMPUTER_LOCK_WAIT_MS;
    while (!state_trylock(s)) {
        int rc = lock_wait_over(t, deadline, e);
        if (rc)
            return rc;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += NAP_SLICE_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&s->mu);
        if (s->busy)
            pthread_cond_timedwait(&s->freed, &s->mu, &ts);
        pthread_mutex_unlock(&s->mu);
    }
    return 0;
}

static int cancelled(const struct cstate *s, struct err *e)
{
    if (s->t && s->t->cancelled && s->t->cancelled(s->t->cancel_ctx))
        return err_set(e, E_INTERNAL, "internal", "cancelled: the client went away");
    return 0;
}

/* A pause within a gesture, cut short (with an error) when the call is
 * cancelled: a client that left does not keep the session's lock. */
static int nap(const struct cstate *s, int ms, struct err *e)
{
    int rc = cancelled(s, e);
    if (rc == 0 && ms > 0 && s->deadline_ms && clock_mono_ms() + ms > s->deadline_ms)
        return err_set(e, E_INVALID, "bad_request",
                       "the call would run longer than %d ms and was stopped",
                       COMPUTER_BATCH_MAX_MS);
    while (rc == 0 && ms > 0) {
        int n = ms < NAP_SLICE_MS ? ms : NAP_SLICE_MS;
        sleep_ms(n);
        ms -= n;
        rc = cancelled(s, e);
    }
    return rc;
}

/* A command to the page's session, or (browser) to the browser itself.
 * params is stolen; *res (may be NULL) receives the result. */
static int call_at(struct cpage *p, int browser, const char *method, json_t *params, json_t **res,
                   struct err *e)
{
    json_t *r = NULL;
    const char *sid = !browser && p->sid[0] ? p->sid : NULL;
    int rc = cdp_client_call(p->cc, sid, method, params, 1, CDP_MS, &r, e);
    json_decref(params);
    if (res)
        *res = r;
    else
        json_decref(r);
    return rc;
}

static int call(struct cpage *p, const char *method, json_t *params, json_t **res, struct err *e)
{
    return call_at(p, 0, method, params, res, e);
}

/* Connects and attaches to the first page (the one an agent sees). */
static int page_open(const char *ws_url, struct cpage *p, struct err *e)
{
    memset(p, 0, sizeof *p);
    int rc = cdp_client_open(ws_url, CDP_MS, &p->cc, e);
    if (rc)
        return rc;
    rc = cdp_page_attach_first(p->cc, CDP_MS, p->sid, sizeof p->sid, e);
    if (rc == E_NOTFOUND)
        rc = err_set(e, E_CONFLICT, "no_page", "the browser has no open page to act on");
    if (rc) {
        cdp_client_close(p->cc);
        p->cc = NULL; /* page_acquire would probe a closed client next time */
    }
    return rc;
}

static void page_close(struct cpage *p)
{
    cdp_client_close(p->cc);
    p->cc = NULL;
}

/* The session's page connection (s->lock held): the one kept from the last
 * call when it still answers (the browser may have restarted, or the page
 * closed), a new one otherwise. */
static int page_acquire(struct cstate *s, const char *ws_url, struct err *e)
{
    if (s->page.cc) {
        struct err probe;
        err_init(&probe);
        if (call(&s->page, "Runtime.evaluate", json_pack("{s:s}", "expression", "0"), NULL,
                 &probe) == 0)
            return 0;
        page_close(&s->page);
    }
    return page_open(ws_url, &s->page, e);
}

/* ---- input ---- */

static const char *const button_names[] = {"left", "middle", "right", "back", "forward"};
static const int button_bits[] = {1, 4, 2, 8, 16};

static int mouse(struct cpage *p, const char *type, int x, int y, int button, int clicks,
                 int modifiers, int buttons, int dx, int dy, struct err *e)
{
    json_t *m = json_pack("{s:s,s:i,s:i,s:i,s:i}", "type", type, "x", x, "y", y, "modifiers",
                          modifiers, "buttons", buttons);
    if (button >= 0) {
        json_object_set_new(m, "button", json_string(button_names[button]));
        json_object_set_new(m, "clickCount", json_integer(clicks));
    }
    if (strcmp(type, "mouseWheel") == 0) {
        json_object_set_new(m, "deltaX", json_integer(dx));
        json_object_set_new(m, "deltaY", json_integer(dy));
    }
    return call(p, "Input.dispatchMouseEvent", m, NULL, e);
}

/* One key event; when wait is 0 its answer is not awaited (the page's
 * next awaited command answers after it: DevTools runs them in order). */
static int key_event_at(struct cpage *p, const struct comp_key *k, int down, int modifiers,
                        int wait, struct err *e)
{
    /* Text only when no Ctrl/Alt/Meta is held (those make a shortcut). */
    int plain = (modifiers & 7) == 0 && k->text[0];
    const char *type = down ? (plain ? "keyDown" : "rawKeyDown") : "keyUp";
    json_t *m = json_pack("{s:s,s:s,s:s,s:i,s:i,s:i}", "type", type, "key", k->key, "code", k->code,
                          "windowsVirtualKeyCode", k->keycode, "nativeVirtualKeyCode", k->keycode,
                          "modifiers", modifiers);
    if (down && plain) {
        char text[8];
        snprintf(text, sizeof text, "%s", k->text);
        if ((modifiers & 8) && text[0] >= 'a' && text[0] <= 'z' && !text[1])
            text[0] = (char)(text[0] - 'a' + 'A');
        json_object_set_new(m, "text", json_string(text));
        json_object_set_new(m, "unmodifiedText", json_string(k->text));
    }
    if (wait)
        return call(p, "Input.dispatchKeyEvent", m, NULL, e);
    json_t *r = NULL;
    int rc = cdp_client_call(p->cc, p->sid, "Input.dispatchKeyEvent", m, 0, CDP_MS, &r, e);
    json_decref(m);
    json_decref(r);
    return rc;
}

static int key_event(struct cpage *p, const struct comp_key *k, int down, int modifiers,
                     struct err *e)
{
    return key_event_at(p, k, down, modifiers, 1, e);
}

/* Presses (down=1) or releases a held set, updating *mods. */
static int hold(struct cpage *p, const struct comp_combo *combos, int n, int down, int *mods,
                struct err *e)
{
    int rc = 0;
    for (int i = down ? 0 : n - 1; rc == 0 && (down ? i < n : i >= 0); i += down ? 1 : -1)
        for (int k = down ? 0 : combos[i].n - 1; rc == 0 && (down ? k < combos[i].n : k >= 0);
             k += down ? 1 : -1) {
            const struct comp_key *key = &combos[i].keys[k];
            if (down)
                *mods |= key->modifier;
            rc = key_event(p, key, down, *mods, e);
            if (!down)
                *mods &= ~key->modifier;
        }
    return rc;
}

/* A tap of one combination: modifiers down, the key down and up, modifiers up. */
static int tap(struct cpage *p, struct cstate *s, const struct comp_combo *c, int base_mods,
               int hold_ms, struct err *e)
{
    int mods = base_mods, rc = 0, i;
    for (i = 0; rc == 0 && i < c->n; i++) {
        mods |= c->keys[i].modifier;
        rc = key_event(p, &c->keys[i], 1, mods, e);
    }
    if (rc == 0)
        rc = nap(s, hold_ms, e);
    for (int k = i - 1; k >= 0; k--) {
        int r2 = key_event(p, &c->keys[k], 0, mods, e);
        mods &= ~c->keys[k].modifier;
        rc = rc ? rc : r2;
    }
    return rc;
}

/* Moves from the state's position to (x, y): one event, or a smooth path of
 * points MOVE_STEP_MS apart over duration_ms (eased, as a hand would). */
static int move_to(struct cpage *p, struct cstate *s, int x, int y, int smooth, int duration_ms,
                   int mods, int buttons, struct err *e)
{
    int steps = 1;
    if (smooth) {
        int dist = abs(x - s->x) + abs(y - s->y);
        steps = duration_ms > 0 ? duration_ms / MOVE_STEP_MS : dist / 40;
        steps = steps < 1 ? 1 : steps > 200 ? 200 : steps;
    }
    int x0 = s->x, y0 = s->y, rc = 0;
    for (int i = 1; rc == 0 && i <= steps; i++) {
        double t = (double)i / steps;
        double ease = t * t * (3 - 2 * t); /* smoothstep */
        int px = x0 + (int)((x - x0) * ease), py = y0 + (int)((y - y0) * ease);
        if (i == steps) {
            px = x;
            py = y;
        }
        rc = mouse(p, "mouseMoved", px, py, -1, 0, mods, buttons, 0, 0, e);
        if (rc == 0) {
            s->x = px;
            s->y = py;
        }
        if (rc == 0 && i < steps)
            rc = nap(s, MOVE_STEP_MS, e);
    }
    return rc;
}

static int do_click(struct cpage *p, struct cstate *s, const struct comp_action *a, struct err *e)
{
    int mods = 0;
    int rc = move_to(p, s, a->x, a->y, 1, 0, 0, 0, e);
    if (rc == 0)
        rc = hold(p, a->hold, a->nhold, 1, &mods, e);
    int bit = button_bits[a->button];
    for (int i = 1; rc == 0 && i <= (a->click_type == 0 ? a->num_clicks : 1); i++) {
        if (a->click_type != 2)
            rc = mouse(p, "mousePressed", a->x, a->y, a->button, i, mods, bit, 0, 0, e);
        if (rc == 0 && a->click_type != 1)
            rc = mouse(p, "mouseReleased", a->x, a->y, a->button, i, mods, 0, 0, 0, e);
    }
    int r2 = hold(p, a->hold, a->nhold, 0, &mods, e);
    return rc ? rc : r2;
}

static int do_drag(struct cpage *p, struct cstate *s, const struct comp_action *a, struct err *e)
{
    int mods = 0, bit = button_bits[a->button];
    int rc = hold(p, a->hold, a->nhold, 1, &mods, e);
    if (rc == 0)
        rc = move_to(p, s, a->path[0][0], a->path[0][1], 0, 0, mods, 0, e);
    if (rc == 0)
        rc = mouse(p, "mousePressed", s->x, s->y, a->button, 1, mods, bit, 0, 0, e);
    if (rc == 0)
        rc = nap(s, a->delay_ms, e);
    int segs = a->npath - 1;
    for (int k = 1; rc == 0 && k < a->npath; k++) {
        if (a->smooth) {
            int dur = (a->duration_ms ? a->duration_ms : 500) / segs;
            rc = move_to(p, s, a->path[k][0], a->path[k][1], 1,
                         dur < MOVE_STEP_MS ? MOVE_STEP_MS : dur, mods, bit, e);
        } else {
            int x0 = s->x, y0 = s->y, n = a->steps_per_segment;
            for (int i = 1; rc == 0 && i <= n; i++) {
                int px = x0 + (a->path[k][0] - x0) * i / n, py = y0 + (a->path[k][1] - y0) * i / n;
                rc = mouse(p, "mouseMoved", px, py, -1, 0, mods, bit, 0, 0, e);
                s->x = px;
                s->y = py;
                if (rc == 0)
                    rc = nap(s, a->step_delay_ms, e);
            }
        }
    }
    /* Released even after a failure, best effort, so no button stays down. */
    struct err ignore;
    err_init(&ignore);
    int r2 = mouse(p, "mouseReleased", s->x, s->y, a->button, 1, mods, 0, 0, 0, rc ? &ignore : e);
    int r3 = hold(p, a->hold, a->nhold, 0, &mods, rc || r2 ? &ignore : e);
    return rc ? rc : r2 ? r2 : r3;
}

static size_t utf8_next(const char *t, uint32_t *cp);

/* Types as a keyboard does: per character a keydown (with its text, so the
 * page sees keydown, keypress, input, keyup) and a keyup. Without a delay the
 * events go out back to back, the browser's answer awaited every
 * TYPE_SYNC_KEYS characters and after the last. */
static int do_type(struct cpage *p, struct cstate *s, const struct comp_action *a, struct err *e)
{
    const char *t = a->text, *last = NULL;
    int rc = 0, unsynced = 0, shift;
    uint32_t cp;
    size_t n;
    struct comp_key k;
    /* The last character that is a key: its keyup is awaited. */
    for (const char *q = t; (n = utf8_next(q, &cp)) > 0; q += n)
        if (comp_typed_key(q, n, cp, &k, &shift))
            last = q;
    while (rc == 0 && (n = utf8_next(t, &cp)) > 0) {
        int has = comp_typed_key(t, n, cp, &k, &shift);
        int wait = a->delay_ms > 0 || t == last || ++unsynced % TYPE_SYNC_KEYS == 0;
        t += n;
        if (!has)
            continue;
        int mods = shift ? 8 : 0;
        rc = key_event_at(p, &k, 1, mods, 0, e);
        if (rc == 0)
            rc = key_event_at(p, &k, 0, mods, wait, e);
        if (rc == 0 && wait)
            rc = nap(s, a->delay_ms, e);
    }
    return rc;
}

static int do_one(struct cpage *p, struct cstate *s, const struct comp_action *a, struct err *e)
{
    int mods = 0, rc = 0, r2;
    switch (a->op) {
    case COMP_CLICK:
        return do_click(p, s, a, e);
    case COMP_MOVE:
        rc = hold(p, a->hold, a->nhold, 1, &mods, e);
        if (rc == 0)
            rc = move_to(p, s, a->x, a->y, a->smooth, a->duration_ms, mods, 0, e);
        r2 = hold(p, a->hold, a->nhold, 0, &mods, e);
        return rc ? rc : r2;
    case COMP_DRAG:
        return do_drag(p, s, a, e);
    case COMP_PRESS:
        rc = hold(p, a->hold, a->nhold, 1, &mods, e);
        for (int i = 0; rc == 0 && i < a->nkeys; i++)
            rc = tap(p, s, &a->keys[i], mods, a->duration_ms, e);
        r2 = hold(p, a->hold, a->nhold, 0, &mods, e);
        return rc ? rc : r2;
    case COMP_SCROLL:
        rc = hold(p, a->hold, a->nhold, 1, &mods, e);
        if (rc == 0)
            rc = move_to(p, s, a->x, a->y, 0, 0, mods, 0, e);
        if (rc == 0)
            rc = mouse(p, "mouseWheel", a->x, a->y, -1, 0, mods, 0, a->delta_x * WHEEL_TICK_PX,
                       a->delta_y * WHEEL_TICK_PX, e);
        r2 = hold(p, a->hold, a->nhold, 0, &mods, e);
        return rc ? rc : r2;
    case COMP_TYPE:
        return do_type(p, s, a, e);
    case COMP_CURSOR:
        s->hidden = a->hidden;
        return 0;
    case COMP_SLEEP:
        return nap(s, a->duration_ms, e);
    case COMP_CLIP_WRITE:
    case COMP_SCREENSHOT:
        break;
    }
    return err_set(e, E_INTERNAL, "internal", "%s is not an input action",
                   comp_operation_id(a->op));
}

/* ---- headful: the session's X display ---- */

/* X keysyms of the keys the domain layer names (by DOM key value). */
static const struct {
    const char *key;
    uint32_t sym;
} x_named[] = {
    {"Enter", 0xff0d},      {"Tab", 0xff09},       {"Backspace", 0xff08}, {"Escape", 0xff1b},
    {"Delete", 0xffff},     {"Insert", 0xff63},    {"Home", 0xff50},      {"End", 0xff57},
    {"PageUp", 0xff55},     {"PageDown", 0xff56},  {"ArrowLeft", 0xff51}, {"ArrowUp", 0xff52},
    {"ArrowRight", 0xff53}, {"ArrowDown", 0xff54}, {"CapsLock", 0xffe5},  {"ContextMenu", 0xff67},
};

#define XK_SHIFT_L 0xffe1

/* The X keysym of one key, 0 for none. */
static uint32_t x_keysym(const struct comp_key *k)
{
    int right = strstr(k->code, "Right") != NULL && strncmp(k->code, "Arrow", 5) != 0;
    if (strcmp(k->key, "Control") == 0)
        return right ? 0xffe4 : 0xffe3;
    if (strcmp(k->key, "Shift") == 0)
        return right ? 0xffe2 : XK_SHIFT_L;
    if (strcmp(k->key, "Alt") == 0)
        return right ? 0xffea : 0xffe9;
    if (strcmp(k->key, "Meta") == 0)
        return right ? 0xffec : 0xffeb; /* Super, as xdotool's "super"/"meta" */
    if (strcmp(k->code, "NumpadEnter") == 0)
        return 0xff8d;
    for (size_t i = 0; i < sizeof x_named / sizeof *x_named; i++)
        if (strcmp(k->key, x_named[i].key) == 0)
            return x_named[i].sym;
    if (k->key[0] == 'F' && k->key[1] >= '1' && k->key[1] <= '9') {
        long f = strtol(k->key + 1, NULL, 10);
        if (f >= 1 && f <= 24)
            return 0xffbe + (uint32_t)(f - 1);
    }
    unsigned char c = (unsigned char)k->key[0];
    if (c >= 0x20 && c <= 0x7e && !k->key[1])
        return c; /* Latin-1 keysyms are the characters */
    return 0;
}

/* One call's view of the display: which Shift keys are down (held keys), so
 * that shifted characters add Shift only when it is not held already. */
struct xcall {
    struct cstate *s;
    struct xin *x;
    int shift_held;
};

/* Presses a keysym (down) with Shift added when it is on the shifted level
 * and Shift is not held; *added says so for the release. */
static int x_sym(struct xcall *c, uint32_t sym, int down, int *added, struct err *e)
{
    int shift = 0;
    int kc = xin_keycode(c->x, sym, &shift, e);
    if (kc < 0)
        return kc;
    int rc = 0;
    if (down) {
        *added = shift && !c->shift_held && sym != XK_SHIFT_L;
        if (*added) {
            int skc = xin_keycode(c->x, XK_SHIFT_L, &shift, e);
            rc = skc < 0 ? skc : xin_key(c->x, skc, 1, e);
        }
        if (rc == 0)
            rc = xin_key(c->x, kc, 1, e);
    } else {
        rc = xin_key(c->x, kc, 0, e);
        if (*added) {
            int skc = xin_keycode(c->x, XK_SHIFT_L, &shift, e);
            int r2 = skc < 0 ? skc : xin_key(c->x, skc, 0, e);
            rc = rc ? rc : r2;
        }
    }
    return rc;
}

static int x_keyev(struct xcall *c, const struct comp_key *k, int down, int *added, struct err *e)
{
    uint32_t sym = x_keysym(k);
    if (!sym)
        return err_set(e, E_INVALID, "bad_request", "key %s has no X keysym", k->key);
    int rc = x_sym(c, sym, down, added, e);
    if (rc == 0 && strcmp(k->key, "Shift") == 0)
        c->shift_held += down ? 1 : -1;
    return rc;
}

/* Presses (down=1) or releases a held set, in reverse on release. */
static int x_hold(struct xcall *c, const struct comp_combo *combos, int n, int down, int added[][6],
                  struct err *e)
{
    int rc = 0;
    for (int i = down ? 0 : n - 1; (down ? i < n : i >= 0); i += down ? 1 : -1)
        for (int k = down ? 0 : combos[i].n - 1; (down ? k < combos[i].n : k >= 0);
             k += down ? 1 : -1) {
            if (down && rc)
                return rc;
            /* Released even after a failure, so nothing stays down. */
            int r = x_keyev(c, &combos[i].keys[k], down, &added[i][k], e);
            rc = rc ? rc : r;
        }
    return rc;
}

static int x_tap(struct xcall *c, const struct comp_combo *k, int hold_ms, struct err *e)
{
    int added[1][6] = {{0}};
    int rc = x_hold(c, k, 1, 1, added, e);
    if (rc == 0)
        rc = xin_sync(c->x, e);
    if (rc == 0)
        rc = nap(c->s, hold_ms, e);
    int r2 = x_hold(c, k, 1, 0, added, e);
    return rc ? rc : r2;
}

static int x_move(struct xcall *c, int x, int y, int smooth, int duration_ms, struct err *e)
{
    struct cstate *s = c->s;
    int steps = 1;
    if (smooth) {
        int dist = abs(x - s->x) + abs(y - s->y);
        steps = duration_ms > 0 ? duration_ms / MOVE_STEP_MS : dist / 40;
        steps = steps < 1 ? 1 : steps > 200 ? 200 : steps;
    }
    int x0 = s->x, y0 = s->y, rc = 0;
    for (int i = 1; rc == 0 && i <= steps; i++) {
        double t = (double)i / steps;
        double ease = t * t * (3 - 2 * t); /* smoothstep */
        int px = i == steps ? x : x0 + (int)((x - x0) * ease);
        int py = i == steps ? y : y0 + (int)((y - y0) * ease);
        rc = xin_motion(c->x, px, py, e);
        if (rc == 0) {
            s->x = px;
            s->y = py;
        }
        if (rc == 0 && i < steps && (rc = xin_sync(c->x, e)) == 0)
            rc = nap(s, MOVE_STEP_MS, e);
    }
    return rc;
}

/* X buttons of the domain's left, middle, right, back, forward. */
static const int x_buttons[] = {1, 2, 3, 8, 9};

static int x_clicks(struct xcall *c, int button, int count, int press, int release, struct err *e)
{
    int rc = 0;
    for (int i = 0; rc == 0 && i < count; i++) {
        if (press)
            rc = xin_button(c->x, button, 1, e);
        if (rc == 0 && release)
            rc = xin_button(c->x, button, 0, e);
    }
    return rc;
}

static int x_drag(struct xcall *c, const struct comp_action *a, int added[][6], struct err *e)
{
    struct cstate *s = c->s;
    int btn = x_buttons[a->button];
    int rc = x_hold(c, a->hold, a->nhold, 1, added, e);
    if (rc == 0)
        rc = x_move(c, a->path[0][0], a->path[0][1], 0, 0, e);
    if (rc == 0)
        rc = xin_focus_under_pointer(c->x, e); /* a press focuses, as with a window manager */
    int pressed = 0;
    if (rc == 0 && (rc = xin_button(c->x, btn, 1, e)) == 0)
        pressed = 1;
    if (rc == 0 && (rc = xin_sync(c->x, e)) == 0)
        rc = nap(s, a->delay_ms, e);
    int segs = a->npath - 1;
    for (int k = 1; rc == 0 && k < a->npath; k++) {
        if (a->smooth) {
            int dur = (a->duration_ms ? a->duration_ms : 500) / segs;
            rc = x_move(c, a->path[k][0], a->path[k][1], 1, dur < MOVE_STEP_MS ? MOVE_STEP_MS : dur,
                        e);
        } else {
            int x0 = s->x, y0 = s->y, n = a->steps_per_segment;
            for (int i = 1; rc == 0 && i <= n; i++) {
                int px = x0 + (a->path[k][0] - x0) * i / n, py = y0 + (a->path[k][1] - y0) * i / n;
                rc = xin_motion(c->x, px, py, e);
                s->x = px;
                s->y = py;
                if (rc == 0 && (rc = xin_sync(c->x, e)) == 0)
                    rc = nap(s, a->step_delay_ms, e);
            }
        }
    }
    /* Released even after a failure or a cancel, so no button stays down. */
    struct err ignore;
    err_init(&ignore);
    int r2 = pressed ? xin_button(c->x, btn, 0, rc ? &ignore : e) : 0;
    int r3 = x_hold(c, a->hold, a->nhold, 0, added, rc || r2 ? &ignore : e);
    return rc ? rc : r2 ? r2 : r3;
}

/* Decodes one UTF-8 character of t into *cp; its length, 0 at the end. */
static size_t utf8_next(const char *t, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)t;
    if (!u[0])
        return 0;
    int n = u[0] < 0x80 ? 1 : (u[0] & 0xE0) == 0xC0 ? 2 : (u[0] & 0xF0) == 0xE0 ? 3 : 4;
    uint32_t v = n == 1 ? u[0] : n == 2 ? u[0] & 0x1F : n == 3 ? u[0] & 0x0F : u[0] & 0x07;
    for (int i = 1; i < n; i++) {
        if ((u[i] & 0xC0) != 0x80) {
            *cp = 0xFFFD;
            return (size_t)i;
        }
        v = (v << 6) | (u[i] & 0x3F);
    }
    *cp = v;
    return (size_t)n;
}

/* Before keys on the display: a browser window has the keyboard focus
 * (xin_focus_keyboard), and when it was given just now, the page has seen
 * it. Chromium takes a new focus from its event loop, and the keys sent
 * before then were lost (a hold's first keydowns never reached the page).
 * The wait is best effort, bounded by READY_MS / 2: a page whose document
 * does not report the focus (another window of the browser has it) gets
 * the keys anyway. */
static int x_keyboard_ready(struct xcall *c, struct err *e)
{
    int changed = 0;
    int rc = xin_focus_keyboard(c->x, &changed, e);
    if (rc || !changed || !c->s->page.cc)
        return rc;
    char expr[320];
    snprintf(expr, sizeof expr,
             "new Promise((r) => { if (document.hasFocus()) return r(true);"
             " const t = setInterval(() => { if (document.hasFocus()) { clearInterval(t); r(true); "
             "} }, 10);"
             " setTimeout(() => { clearInterval(t); r(false); }, %d); })",
             READY_MS / 2);
    json_t *res = NULL, *params = json_pack("{s:s,s:b,s:b}", "expression", expr, "awaitPromise", 1,
                                            "returnByValue", 1);
    struct err ignore;
    err_init(&ignore);
    if (cdp_client_call(c->s->page.cc, c->s->page.sid, "Runtime.evaluate", params, 1, READY_MS,
                        &res, &ignore) != 0)
        page_close(&c->s->page);
    json_decref(params);
    json_decref(res);
    return 0;
}

static int x_type(struct xcall *c, const struct comp_action *a, struct err *e)
{
    const char *t = a->text;
    int rc = x_keyboard_ready(c, e);
    uint32_t cp;
    size_t n;
    while (rc == 0 && (n = utf8_next(t, &cp)) > 0) {
        t += n;
        uint32_t sym = cp == '\n'                ? 0xff0d
                       : cp == '\t'              ? 0xff09
                       : cp < 0x20 || cp == 0x7f ? 0
                       : cp <= 0xff              ? cp
                                                 : 0x01000000u | cp;
        if (!sym)
            continue; /* other control characters have no key */
        int added = 0;
        rc = x_sym(c, sym, 1, &added, e);
        if (rc == 0)
            rc = x_sym(c, sym, 0, &added, e);
        if (rc == 0 && a->delay_ms > 0 && (rc = xin_sync(c->x, e)) == 0)
            rc = nap(c->s, a->delay_ms, e);
    }
    return rc;
}

static int x_one(struct xcall *c, const struct comp_action *a, struct err *e)
{
    int added[COMP_MAX_KEYS][6];
    memset(added, 0, sizeof added);
    int rc = 0, r2;
    switch (a->op) {
    case COMP_CLICK:
        rc = x_move(c, a->x, a->y, 1, 0, e);
        if (rc == 0 && a->click_type != 2)
            rc = xin_focus_under_pointer(c->x, e);
        if (rc == 0)
            rc = x_hold(c, a->hold, a->nhold, 1, added, e);
        if (rc == 0)
            rc = x_clicks(c, x_buttons[a->button], a->click_type == 0 ? a->num_clicks : 1,
                          a->click_type != 2, a->click_type != 1, e);
        r2 = x_hold(c, a->hold, a->nhold, 0, added, e);
        return rc ? rc : r2;
    case COMP_MOVE:
        rc = x_hold(c, a->hold, a->nhold, 1, added, e);
        if (rc == 0)
            rc = x_move(c, a->x, a->y, a->smooth, a->duration_ms, e);
        r2 = x_hold(c, a->hold, a->nhold, 0, added, e);
        return rc ? rc : r2;
    case COMP_DRAG:
        return x_drag(c, a, added, e);
    case COMP_PRESS:
        rc = x_keyboard_ready(c, e);
        if (rc == 0)
            rc = x_hold(c, a->hold, a->nhold, 1, added, e);
        for (int i = 0; rc == 0 && i < a->nkeys; i++)
            rc = x_tap(c, &a->keys[i], a->duration_ms, e);
        r2 = x_hold(c, a->hold, a->nhold, 0, added, e);
        return rc ? rc : r2;
    case COMP_SCROLL:
        rc = x_hold(c, a->hold, a->nhold, 1, added, e);
        if (rc == 0)
            rc = x_move(c, a->x, a->y, 0, 0, e);
        /* Vertical first, as xdotool: 5 down, 4 up, 7 right, 6 left. */
        if (rc == 0)
            rc = x_clicks(c, a->delta_y > 0 ? 5 : 4, abs(a->delta_y), 1, 1, e);
        if (rc == 0)
            rc = x_clicks(c, a->delta_x > 0 ? 7 : 6, abs(a->delta_x), 1, 1, e);
        r2 = x_hold(c, a->hold, a->nhold, 0, added, e);
        return rc ? rc : r2;
    case COMP_TYPE:
        return x_type(c, a, e);
    case COMP_CURSOR:
        rc = xin_cursor(c->x, a->hidden, e);
        if (rc == 0)
            c->s->hidden = a->hidden;
        return rc;
    case COMP_SLEEP:
        return nap(c->s, a->duration_ms, e);
    case COMP_CLIP_WRITE:
    case COMP_SCREENSHOT:
        break;
    }
    return err_set(e, E_INTERNAL, "internal", "%s is not an input action",
                   comp_operation_id(a->op));
}

/* Chrome drops a new document's input, all but pointer moves, until the
 * document has drawn its first frames (Blink suppresses input while it
 * defers commits): a click sent by the display a moment after a page loaded
 * reaches the page as a move alone, a drag as a bare mouseup. Before input
 * on the display, waits (s->lock held) until the first page's document has
 * run two animation frames, once per document (performance.timeOrigin names
 * it). Best effort: a page that does not answer within READY_MS (a dialog is
 * open, a script is busy, the tab is hidden) is acted on anyway, and the
 * DevTools connection is reopened next time. */
static void x_page_ready(struct cstate *s, const char *ws_url)
{
    struct err ignore;
    err_init(&ignore);
    if (!s->page.cc && page_open(ws_url, &s->page, &ignore) != 0)
        return;
    char expr[512];
    snprintf(expr, sizeof expr,
             "(() => { const t = performance.timeOrigin; if (t === %.17g) return t;"
             " return new Promise((r) => { const done = () => r(t);"
             " requestAnimationFrame(() => requestAnimationFrame(done)); setTimeout(done, %d); });"
             " })()",
             s->ready_doc, READY_MS / 2);
    json_t *res = NULL, *params = json_pack("{s:s,s:b,s:b}", "expression", expr, "awaitPromise", 1,
                                            "returnByValue", 1);
    int rc = cdp_client_call(s->page.cc, s->page.sid, "Runtime.evaluate", params, 1, READY_MS, &res,
                             &ignore);
    json_decref(params);
    json_t *v = json_object_get(json_object_get(res, "result"), "value");
    if (rc == 0 && json_is_number(v))
        s->ready_doc = json_number_value(v);
    json_decref(res);
    if (rc != 0)
        page_close(&s->page);
}

/* The session's display connection (s->lock held): the one kept from the
 * last call while it works and names the same display, a new one otherwise
 * (the browser was relaunched with a new Xvfb, or the server went away). */
static int x_acquire(struct cstate *s, const struct computer_target *t, struct err *e)
{
    if (s->xin && xin_alive(s->xin) && s->x_netns == t->netns && s->x_display == t->display &&
        s->x_id == t->display_id)
        return 0;
    xin_close(s->xin);
    s->xin = NULL;
    int rc = xin_open(t->netns, t->display, X_REPLY_MS, &s->xin, e);
    if (rc)
        return rc;
    s->x_netns = t->netns;
    s->x_display = t->display;
    s->x_id = t->display_id;
    s->hidden = 0;
    /* Actions start from where the pointer really is. */
    struct err ignore;
    err_init(&ignore);
    if (xin_pointer(s->xin, &s->x, &s->y, &ignore) != 0)
        s->x = s->y = 0;
    return 0;
}

/* ---- calls ---- */

struct computer_batch {
    const struct computer_target *t;
    const struct comp_action *acts;
    size_t n, i;
    struct cstate *s;
    int locked;           /* the session's input is this batch's */
    int started;          /* the display or page was acquired */
    int64_t lock_wait_ms; /* until when it waits for the input (monotonic) */
    int64_t deadline_ms;  /* the batch's end: COMPUTER_BATCH_MAX_MS after it took the input */
    int64_t wake_ms;      /* a sleep action's or a key hold's end, 0 = none */
    /* A press whose keys are held longer than a slice (press_parks): its
     * holds are parked like sleeps, and this is where it is. */
    int pk;                           /* the key being pressed; -1: the press has not begun */
    int pk_down;                      /* that key is down, its hold running */
    int pmods, kmods;                 /* headless: modifiers of the hold keys, and with the key's */
    int hold_added[COMP_MAX_KEYS][6]; /* headful: Shift added for the hold keys */
    int key_added[1][6];              /* and for the key */
    struct xcall xc;                  /* headful: Shift held, across the pauses */
};

struct computer_batch *computer_batch_new(const struct computer_target *t,
                                          const struct comp_action *acts, size_t n)
{
    struct computer_batch *b = xcalloc(1, sizeof *b);
    b->t = t;
    b->acts = acts;
    b->n = n;
    b->s = state_get(t->session_id);
    b->lock_wait_ms = clock_mono_ms() + LIM_COMPUTER_LOCK_WAIT_MS;
    b->pk = -1;
    return b;
}

/* A press (press_key, or a batch's) whose keys are each held longer than a
 * slice: each hold is a parked pause, as a sleep action is, so that a
 * call holding keys for seconds holds no thread meanwhile. */
static int press_parks(const struct comp_action *a)
{
    return a->op == COMP_PRESS && a->duration_ms > NAP_SLICE_MS;
}

/* Presses (down) or releases the press's hold keys. */
static int press_hold(struct computer_batch *b, const struct comp_action *a, int down,
                      struct err *e)
{
    if (b->t->display >= 0)
        return x_hold(&b->xc, a->hold, a->nhold, down, b->hold_added, e);
    return hold(&b->s->page, a->hold, a->nhold, down, &b->pmods, e);
}

/* Key b->pk of the press down, or up (tap's two halves; released in full
 * even after a failure, so that nothing stays down). */
static int press_key(struct computer_batch *b, const struct comp_action *a, int down, struct err *e)
{
    const struct comp_combo *c = &a->keys[b->pk];
    if (b->t->display >= 0) {
        int rc = x_hold(&b->xc, c, 1, down, b->key_added, e);
        return rc == 0 && down ? xin_sync(b->xc.x, e) : rc;
    }
    int rc = 0;
    if (down) {
        b->kmods = b->pmods;
        for (int i = 0; rc == 0 && i < c->n; i++) {
            b->kmods |= c->keys[i].modifier;
            rc = key_event(&b->s->page, &c->keys[i], 1, b->kmods, e);
        }
        return rc;
    }
    for (int k = c->n - 1; k >= 0; k--) {
        int r2 = key_event(&b->s->page, &c->keys[k], 0, b->kmods, e);
        b->kmods &= ~c->keys[k].modifier;
        rc = rc ? rc : r2;
    }
    return rc;
}

/* Ends a press stopped mid-way (a failure, a client that left): its keys
 * are released. */
static void press_abort(struct computer_batch *b)
{
    if (b->pk < 0 || b->i >= b->n)
        return;
    const struct comp_action *a = &b->acts[b->i];
    struct err ignore;
    err_init(&ignore);
    if (b->pk_down && b->pk < a->nkeys)
        (void)press_key(b, a, 0, &ignore);
    (void)press_hold(b, a, 0, &ignore);
    b->pk = -1;
    b->pk_down = 0;
}

/* Runs a press_parks press on from where it is: COMPUTER_PAUSE while a key
 * is held (*pause_ms), 0 once its keys are up, or an error. */
static int press_run(struct computer_batch *b, const struct comp_action *a, int *pause_ms,
                     struct err *e)
{
    int rc;
    if (b->pk < 0) {
        if (b->t->display >= 0) {
            x_page_ready(b->s, b->t->ws_url);
            if ((rc = x_keyboard_ready(&b->xc, e)) != 0)
                return rc;
        }
        b->pmods = 0;
        memset(b->hold_added, 0, sizeof b->hold_added);
        b->pk = 0;
        if ((rc = press_hold(b, a, 1, e)) != 0)
            return rc;
    }
    if (b->pk < a->nkeys) {
        if (clock_mono_ms() + a->duration_ms > b->deadline_ms)
            return err_set(e, E_INVALID, "bad_request",
                           "the call would run longer than %d ms and was stopped",
                           COMPUTER_BATCH_MAX_MS);
        memset(b->key_added, 0, sizeof b->key_added);
        b->pk_down = 1;
        if ((rc = press_key(b, a, 1, e)) != 0)
            return rc;
        b->wake_ms = clock_mono_ms() + a->duration_ms;
        *pause_ms =
            a->duration_ms < COMPUTER_PAUSE_SLICE_MS ? a->duration_ms : COMPUTER_PAUSE_SLICE_MS;
        return COMPUTER_PAUSE;
    }
    rc = press_hold(b, a, 0, e);
    b->pk = -1;
    return rc;
}

/* Ends the batch's hold of the session (rc: how it ended). */
static void batch_release(struct computer_batch *b, int rc)
{
    struct cstate *s = b->s;
    if (!b->locked)
        return;
    if (rc && b->t->display < 0 && s->page.cc)
        page_close(&s->page); /* a fresh connection next time */
    s->t = NULL;
    s->deadline_ms = 0;
    b->locked = 0;
    state_unlock(s);
}

void computer_batch_free(struct computer_batch *b)
{
    if (!b)
        return;
    if (b->locked)
        press_abort(b);
    batch_release(b, 0);
    state_put(b->s);
    xfree(b);
}

int computer_batch_step(struct computer_batch *b, int *pause_ms, size_t *failed, struct err *e)
{
    struct cstate *s = b->s;
    const struct computer_target *t = b->t;
    int headful = t->display >= 0;
    int rc = 0;
    *pause_ms = 0;
    *failed = b->i;
    if (!b->locked) {
        if (!state_trylock(s)) {
            if ((rc = lock_wait_over(t, b->lock_wait_ms, e)) != 0)
                return rc;
            *pause_ms = NAP_SLICE_MS;
            return COMPUTER_PAUSE;
        }
        b->locked = 1;
        s->t = t;
        b->deadline_ms = clock_mono_ms() + COMPUTER_BATCH_MAX_MS;
        s->deadline_ms = b->deadline_ms;
    }
    s->t = t;
    if (!b->started) {
        rc = headful ? x_acquire(s, t, e) : page_acquire(s, t->ws_url, e);
        b->started = rc == 0;
    }
    if (rc == 0 && b->wake_ms) {
        /* A sleep action in progress: parked in slices, so that a client
         * that left does not keep the session's input for long. */
        int64_t left = b->wake_ms - clock_mono_ms();
        if ((rc = cancelled(s, e)) == 0 && left > 0) {
            *pause_ms = left < COMPUTER_PAUSE_SLICE_MS ? (int)left : COMPUTER_PAUSE_SLICE_MS;
            return COMPUTER_PAUSE;
        }
        if (rc == 0) {
            b->wake_ms = 0;
            if (b->pk >= 0) {
                /* A key's hold ended: up, and the press goes on. */
                b->pk_down = 0;
                rc = press_key(b, &b->acts[b->i], 0, e);
                b->pk++;
            } else {
                b->i++;
            }
        }
    }
    struct xcall xc = {s, s->xin, 0};
    while (rc == 0 && b->i < b->n) {
        const struct comp_action *a = &b->acts[b->i];
        if (clock_mono_ms() > b->deadline_ms) {
            rc = err_set(e, E_INVALID, "bad_request",
                         "the batch ran longer than %d ms and was stopped", COMPUTER_BATCH_MAX_MS);
            break;
        }
        if ((rc = cancelled(s, e)) != 0)
            break;
        enum comp_op op = a->op;
        if (press_parks(a)) {
            b->xc.s = s;
            b->xc.x = s->xin;
            if ((rc = press_run(b, a, pause_ms, e)) == COMPUTER_PAUSE) {
                *failed = b->i;
                return rc;
            }
            if (rc == 0 && headful)
                rc = xin_sync(s->xin, e);
            if (rc)
                break;
            b->i++;
            continue;
        }
        if (op == COMP_SLEEP && a->duration_ms > NAP_SLICE_MS) {
            if (clock_mono_ms() + a->duration_ms > b->deadline_ms) {
                rc = err_set(e, E_INVALID, "bad_request",
                             "the call would run longer than %d ms and was stopped",
                             COMPUTER_BATCH_MAX_MS);
                break;
            }
            b->wake_ms = clock_mono_ms() + a->duration_ms;
            *pause_ms =
                a->duration_ms < COMPUTER_PAUSE_SLICE_MS ? a->duration_ms : COMPUTER_PAUSE_SLICE_MS;
            *failed = b->i;
            return COMPUTER_PAUSE;
        }
        if (headful && (op == COMP_CLICK || op == COMP_DRAG || op == COMP_PRESS ||
                        op == COMP_SCROLL || op == COMP_TYPE))
            x_page_ready(s, t->ws_url);
        rc = headful ? x_one(&xc, a, e) : do_one(&s->page, s, a, e);
        /* The server has taken every event before the call answers. */
        if (rc == 0 && headful)
            rc = xin_sync(s->xin, e);
        if (rc)
            break;
        b->i++;
    }
    *failed = b->i;
    if (rc)
        press_abort(b);
    batch_release(b, rc);
    return rc;
}

int computer_act(const struct computer_target *t, const struct comp_action *acts, size_t n,
                 size_t *failed, struct err *e)
{
    struct computer_batch *b = computer_batch_new(t, acts, n);
    int pause, rc;
    size_t at = 0;
    while ((rc = computer_batch_step(b, &pause, &at, e)) == COMPUTER_PAUSE)
        sleep_ms(pause);
    if (failed)
        *failed = at;
    computer_batch_free(b);
    return rc;
}

int computer_run(const char *id, const char *ws_url, const struct comp_action *acts, size_t n,
                 size_t *failed, struct err *e)
{
    struct computer_target t = {.session_id = id, .ws_url = ws_url, .display = -1};
    return computer_act(&t, acts, n, failed, e);
}

int computer_pointer(const struct computer_target *t, int *x, int *y, struct err *e)
{
    struct cstate *s = state_get(t->session_id);
    int rc = state_lock(s, t, e);
    if (rc) {
        state_put(s);
        return rc;
    }
    if (t->display >= 0 && (rc = x_acquire(s, t, e)) == 0 &&
        (rc = xin_pointer(s->xin, &s->x, &s->y, e)) != 0)
        rc = failed_to(e, rc, "get mouse position");
    *x = s->x;
    *y = s->y;
    state_unlock(s);
    state_put(s);
    return rc;
}

/* A PNG of the display's rectangle (s->lock held). */
static int x_capture(struct cstate *s, const struct computer_target *t, const struct comp_action *a,
                     int width, int height, char **png, size_t *len, struct err *e)
{
    int rc = x_acquire(s, t, e);
    if (rc)
        return rc;
    int sw, sh;
    xin_screen(s->xin, &sw, &sh);
    int rx = 0, ry = 0, rw = width < sw ? width : sw, rh = height < sh ? height : sh;
    if (a->has_region) {
        rx = a->rx;
        ry = a->ry;
        rw = a->rw;
        rh = a->rh;
    }
    const uint8_t *px = NULL;
    size_t stride = 0;
    if ((rc = xin_grab(s->xin, rx, ry, rw, rh, &px, &stride, e)) != 0)
        return rc;
    return xcapture_png(px, rw, rh, stride, png, len, e);
}

int computer_capture(const struct computer_target *t, const struct comp_action *a, int width,
                     int height, char **png, size_t *len, struct err *e)
{
    *png = NULL;
    *len = 0;
    struct cstate *s = state_get(t->session_id);
    int rc = state_lock(s, t, e);
    if (rc) {
        state_put(s);
        return rc;
    }
    if (t->display >= 0) {
        rc = x_capture(s, t, a, width, height, png, len, e);
        state_unlock(s);
        state_put(s);
        return rc;
    }
    rc = page_acquire(s, t->ws_url, e);
    json_t *res = NULL;
    if (rc == 0) {
        /* The screen: the page laid out at the session's screen size (a
         * headless window's viewport can be shorter than its window). */
        json_t *params = json_pack("{s:s,s:b}", "format", "png", "captureBeyondViewport", 1);
        json_object_set_new(params, "clip",
                            a->has_region
                                ? json_pack("{s:i,s:i,s:i,s:i,s:i}", "x", a->rx, "y", a->ry,
                                            "width", a->rw, "height", a->rh, "scale", 1)
                                : json_pack("{s:i,s:i,s:i,s:i,s:i}", "x", 0, "y", 0, "width", width,
                                            "height", height, "scale", 1));
        rc = call(&s->page, "Page.captureScreenshot", params, &res, e);
        if (rc)
            page_close(&s->page);
    }
    state_unlock(s);
    state_put(s);
    const char *b64 = jsonx_str(res, "data");
    if (rc == 0 && !b64)
        rc = err_set(e, E_INTERNAL, "internal", "the browser returned no screenshot");
    if (rc == 0) {
        unsigned char *out = NULL;
        size_t got = 0;
        if (b64_decode(b64, strlen(b64), &out, &got) != 0) {
            rc = err_set(e, E_INTERNAL, "internal", "the browser's screenshot is not base64");
        } else {
            *png = (char *)out;
            *len = got;
        }
    }
    json_decref(res);
    return rc;
}

/* Runs a clipboard expression on the first page (s->lock held) with the
 * clipboard permissions, a focused document and a user gesture (the copy
 * command and the async Clipboard API need them); *value (may be NULL) gets
 * its value. */
static int clip_eval(struct cstate *s, const char *ws_url, const char *expr, json_t **value,
                     struct err *e)
{
    int rc = page_acquire(s, ws_url, e);
    struct cpage *p = &s->page;
    json_t *res = NULL;
    /* Browser-wide, for every origin of this session's own browser. */
    if (rc == 0)
        rc = call_at(
            p, 1, "Browser.grantPermissions",
            json_pack("{s:[s,s]}", "permissions", "clipboardReadWrite", "clipboardSanitizedWrite"),
            NULL, e);
    if (rc == 0)
        rc = call(p, "Emulation.setFocusEmulationEnabled", json_pack("{s:b}", "enabled", 1), NULL,
                  e);
    if (rc == 0)
        rc = call(p, "Runtime.evaluate",
                  json_pack("{s:s,s:b,s:b,s:b}", "expression", expr, "awaitPromise", 1,
                            "userGesture", 1, "returnByValue", 1),
                  &res, e);
    if (rc == 0) {
        struct err ignore;
        err_init(&ignore);
        (void)!call(p, "Emulation.setFocusEmulationEnabled", json_pack("{s:b}", "enabled", 0), NULL,
                    &ignore);
    }
    if (rc && p->cc)
        page_close(p); /* a fresh connection next time */
    json_t *exc = json_object_get(res, "exceptionDetails");
    if (rc == 0 && exc) {
        const char *why = jsonx_str(json_object_get(exc, "exception"), "description");
        rc = err_set(e, E_INTERNAL, "internal", "%.300s",
                     why                      ? why
                     : jsonx_str(exc, "text") ? jsonx_str(exc, "text")
                                              : "exception");
    }
    if (rc == 0 && value)
        *value = json_incref(json_object_get(json_object_get(res, "result"), "value"));
    json_decref(res);
    return rc;
}

/* The session's clipboard (s->lock held). Headful: the display's CLIPBOARD
 * selection, whoever owns it. Headless: the browser's own clipboard through
 * the page when the page may read it (a secure context), else what the
 * session last wrote (docs/computer.md). */
static int clip_read(struct cstate *s, const struct computer_target *t, char **text, struct err *e)
{
    char *buf = NULL;
    size_t len = 0;
    int rc;
    if (t->display >= 0) {
        if ((rc = x_acquire(s, t, e)) == 0)
            rc = xin_clipboard_read(s->xin, COMP_CLIP_MAX_BYTES, &buf, &len, e);
    } else {
        json_t *v = NULL;
        rc = clip_eval(s, t->ws_url,
                       "isSecureContext && navigator.clipboard ? navigator.clipboard.readText() "
                       ": null",
                       &v, e);
        const char *got = json_string_value(v) ? json_string_value(v) : s->clip;
        if (rc == 0) {
            buf = xstrdup(got ? got : "");
            len = strlen(buf);
        }
        json_decref(v);
    }
    if (rc)
        return rc;
    json_t *valid = json_stringn(buf, len);
    if (!valid) {
        xfree(buf);
        return err_set(e, E_INTERNAL, "internal", "the clipboard's text is not UTF-8");
    }
    json_decref(valid);
    *text = buf;
    return 0;
}

/* Writes text as the page's copy command would (s->lock held): a copy
 * event on the first page whose data the server sets, so the browser itself
 * holds the text, on any page (about:blank and plain http:// pages have no
 * async Clipboard API). Headful, the browser then owns the display's
 * CLIPBOARD selection; headless, its own clipboard, and the server keeps the
 * text for reads on pages that cannot read the clipboard. */
static int clip_write(struct cstate *s, const struct computer_target *t, const char *text,
                      struct err *e)
{
    json_t *js = json_string(text);
    char *lit = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
    json_decref(js);
    if (!lit)
        return err_set(e, E_INVALID, "bad_request", "text: must be valid UTF-8");
    char *expr = xasprintf(
        "(() => { let put = false; const copy = (e) => { e.clipboardData.setData('text/plain', "
        "%s); e.preventDefault(); e.stopImmediatePropagation(); put = true; };"
        " addEventListener('copy', copy, true);"
        " try { document.execCommand('copy'); } finally { removeEventListener('copy', copy, true); "
        "}"
        " return put; })()",
        lit);
    xfree(lit);
    json_t *v = NULL;
    int rc = clip_eval(s, t->ws_url, expr, &v, e);
    xfree(expr);
    if (rc == 0 && !json_is_true(v))
        rc = err_set(e, E_INTERNAL, "internal", "the page did not let the copy happen");
    json_decref(v);
    if (rc == 0 && t->display < 0) {
        xfree(s->clip);
        s->clip = xstrdup(text);
    }
    return rc;
}

int computer_clipboard_get(const struct computer_target *t, char **text, struct err *e)
{
    *text = NULL;
    struct cstate *s = state_get(t->session_id);
    int rc = state_lock(s, t, e);
    if (rc) {
        state_put(s);
        return rc; /* the session is busy: 429 as it is */
    }
    rc = clip_read(s, t, text, e);
    state_unlock(s);
    state_put(s);
    return rc ? failed_to(e, rc, "read clipboard") : 0;
}

int computer_clipboard_set(const struct computer_target *t, const char *text, struct err *e)
{
    struct cstate *s = state_get(t->session_id);
    int rc = state_lock(s, t, e);
    if (rc) {
        state_put(s);
        return rc; /* the session is busy: 429 as it is */
    }
    rc = clip_write(s, t, text, e);
    state_unlock(s);
    state_put(s);
    return rc ? failed_to(e, rc, "write to clipboard") : 0;
}

int computer_clipboard_read(const char *id, const char *ws_url, char **text, struct err *e)
{
    struct computer_target t = {.session_id = id, .ws_url = ws_url, .display = -1};
    return computer_clipboard_get(&t, text, e);
}

int computer_clipboard_write(const char *id, const char *ws_url, const char *text, struct err *e)
{
    struct computer_target t = {.session_id = id, .ws_url = ws_url, .display = -1};
    return computer_clipboard_set(&t, text, e);
}
