/*
 * WebDriver BiDi over webdriver_ws_url: a ChromeDriver per session, started
 * lazily by the first BiDi connection, stopped when the session ends; client
 * WebSockets relayed to the driver's BiDi socket.
 */
#include "api/webdriver.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "session/ext.h"
#include "core/clock.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/token.h"
#include "core/xalloc.h"
#include "proxy/relay.h"
#include "proxy/ws.h"
#include "runtime/chromedriver.h"
#include "runtime/chromium.h"
#include "runtime/sandbox.h"
#include "runtime/sessmgr.h"

#define DRIVER_START_TIMEOUT_MS 20000
#define CONNECT_TIMEOUT_MS      5000
#define DRIVER_STOP_GRACE_MS    1000
/* How long a new connection may take to send its first message before it is
 * relayed without the session.new interception. */
#define FIRST_MESSAGE_WAIT_MS 30000
/* A first message larger than this is relayed untouched. */
#define FIRST_MESSAGE_MAX LIM_BIDI_FIRST_MESSAGE_BYTES

/* ---- the per-session drivers ---- */

struct wd_sess {
    char id[64];
    char log_path[1300];
    char pid_path[1300];
    pthread_mutex_t lock; /* serializes starting and stopping the driver */
    int dead;             /* the session ended: never start a driver again */
    int ended;            /* a client sent session.end (atomic; set on a relay thread) */
    struct chromedriver *drv;
    int refs; /* under reg_lock */
    struct wd_sess *next;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct wd_sess *reg;

static struct wd_sess *sess_get(const char *id)
{
    pthread_mutex_lock(&reg_lock);
    struct wd_sess *s = reg;
    while (s && strcmp(s->id, id) != 0)
        s = s->next;
    if (s)
        s->refs++;
    pthread_mutex_unlock(&reg_lock);
    return s;
}

static void sess_put(struct wd_sess *s)
{
    pthread_mutex_lock(&reg_lock);
    int last = --s->refs == 0;
    pthread_mutex_unlock(&reg_lock);
    if (!last)
        return;
    chromedriver_free(s->drv);
    pthread_mutex_destroy(&s->lock);
    xfree(s);
}

/* Removes id from the registry; returns it with the registry's reference. */
static struct wd_sess *sess_unlink(const char *id)
{
    pthread_mutex_lock(&reg_lock);
    struct wd_sess **pp = &reg;
    while (*pp && strcmp((*pp)->id, id) != 0)
        pp = &(*pp)->next;
    struct wd_sess *s = *pp;
    if (s)
        *pp = s->next;
    pthread_mutex_unlock(&reg_lock);
    return s;
}

/* Beside the session folder, like Chromium's log; absolute when the folder
 * exists (the data folder may be given relative). */
static void paths_for(const char *user_data_dir, char *log, char *pid, size_t cap)
{
    char *abs = realpath(user_data_dir, NULL);
    const char *dir = abs ? abs : user_data_dir;
    snprintf(log, cap, "%s.chromedriver.log", dir);
    snprintf(pid, cap, "%s.chromedriver.pid", dir);
    xfree(abs);
}

/* "pid start_ticks": lets the ending hook of a session recovered after a
 * crash kill a driver the previous run left behind. */
static void pidfile_write(const char *path, const struct chromedriver *d)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    char buf[64];
    int n = snprintf(buf, sizeof buf, "%d %llu\n", (int)chromedriver_pid(d),
                     chromedriver_start_ticks(d));
    if (n > 0 && write(fd, buf, (size_t)n) != n)
        log_warn("cannot write %s", path);
    close(fd);
}

static void pidfile_kill_stale(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    int pid = 0;
    unsigned long long ticks = 0;
    if (fscanf(f, "%d %llu", &pid, &ticks) == 2 && pid > 0 &&
        chromium_kill_stale((pid_t)pid, ticks))
        log_info("killed chromedriver %d left by a previous run", pid);
    fclose(f);
}

/* Stops the session's driver (s->lock held). */
static void driver_drop(struct wd_sess *s)
{
    if (!s->drv)
        return;
    chromedriver_stop(s->drv, DRIVER_STOP_GRACE_MS);
    chromedriver_free(s->drv);
    s->drv = NULL;
    unlink(s->pid_path);
}

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

/* What a connection needs of the driver, copied under the lock. */
struct driver_view {
    char url[512];
    char session_id[128];
    json_t *caps; /* deep copy */
};

/* Makes sure the session has a live driver attached to debugger (restarting
 * it when restart is set, the driver exited, or the browser changed), and
 * copies what a connection needs. */
static int driver_ensure(struct wd_sess *s, const char *debugger, struct sandbox *sb, int restart,
                         struct driver_view *v, struct err *e)
{
    pthread_mutex_lock(&s->lock);
    int rc = 0;
    if (s->dead) {
        rc = err_set(e, E_NOTFOUND, "not_found", "browser session %s not found or ended", s->id);
        goto out;
    }
    /* A client's session.end ended the driver's WebDriver session; the
     * driver may still accept the old socket for a moment, so the flag (not a
     * failed handshake) is what makes the next client get a fresh session. */
    int ended = __atomic_exchange_n(&s->ended, 0, __ATOMIC_ACQ_REL);
    if (s->drv && (restart || ended || chromedriver_exited(s->drv) ||
                   strcmp(chromedriver_debugger_address(s->drv), debugger) != 0))
        driver_drop(s);
    if (!s->drv) {
        struct chromedriver_opts o = {
            .debugger_address = debugger, .log_path = s->log_path, .sandbox = sb};
        rc = chromedriver_start(&o, DRIVER_START_TIMEOUT_MS, &s->drv, e);
        if (rc) {
            log_error("session %s: chromedriver: %s", s->id, e->message);
            rc = err_set(e, E_UNAVAIL, "browser_unavailable",
                         "the WebDriver BiDi endpoint could not start: %s", e->message);
            goto out;
        }
        pidfile_write(s->pid_path, s->drv);
    }
    snprintf(v->url, sizeof v->url, "%s", chromedriver_bidi_url(s->drv));
    snprintf(v->session_id, sizeof v->session_id, "%s", chromedriver_session_id(s->drv));
    v->caps = json_deep_copy(chromedriver_capabilities(s->drv));
out:
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* ---- session hooks ---- */

static void on_started(struct session_ctx *sc, const char *browser_ws_url)
{
    (void)browser_ws_url;
    struct wd_sess *s = xcalloc(1, sizeof *s);
    snprintf(s->id, sizeof s->id, "%s", sc->rec->id);
    paths_for(sc->user_data_dir, s->log_path, s->pid_path, sizeof s->log_path);
    pthread_mutex_init(&s->lock, NULL);
    s->refs = 1; /* the registry's */
    pthread_mutex_lock(&reg_lock);
    s->next = reg;
    reg = s;
    pthread_mutex_unlock(&reg_lock);
}

static void on_ending(struct session_ctx *sc, const char *reason)
{
    (void)reason;
    char log[1300], pid[1300];
    paths_for(sc->user_data_dir, log, pid, sizeof log);
    struct wd_sess *s = sess_unlink(sc->rec->id);
    if (s) {
        pthread_mutex_lock(&s->lock);
        s->dead = 1;
        if (s->drv)
            log_info("session %s: stopping chromedriver %d", s->id, chromedriver_pid(s->drv));
        driver_drop(s);
        pthread_mutex_unlock(&s->lock);
        sess_put(s);
    }
    pidfile_kill_stale(pid); /* a driver of a previous run (recovery) */
    unlink(pid);
    unlink(log);
}

static const struct session_ext webdriver_ext = {
    .name = "webdriver",
    .started = on_started,
    .ending = on_ending,
};

/* ---- connections ---- */

static pthread_mutex_t conn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t conn_cond = PTHREAD_COND_INITIALIZER;
static int opening; /* connections in their opening exchange (threads) */
static int stopping;

struct wd_conn {
    char session_id[64];
    struct app *app;
    struct live *live;
    struct http_upgrade *up;
    int client_fd;
    int upstream_fd;
    char *leftover; /* upstream bytes after its 101 */
    size_t leftover_len;
    char *extra; /* client bytes after its request head, then of the first message */
    size_t extra_len;
    json_t *answer;        /* result of the synthetic session.new (owned) */
    uint64_t from_browser; /* set by on_counts just before on_close */
};

static void conn_free(struct wd_conn *c)
{
    json_decref(c->answer);
    xfree(c->leftover);
    xfree(c->extra);
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
    if (method && strcmp(method, "session.end") == 0) {
        struct wd_sess *ws = sess_get(c->session_id);
        if (ws) {
            __atomic_store_n(&ws->ended, 1, __ATOMIC_RELEASE);
            sess_put(ws);
        }
    }
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

static void close_client(void *ctx)
{
    struct wd_conn *c = ctx;
    http_upgrade_close(c->up);
}

/* Parses the first client frame (masked). Returns 1 when more bytes are
 * needed, 0 with *frame_len and the unmasked payload in *payload (owned) when
 * it is a complete unfragmented text frame, -1 when it is anything else
 * (relayed untouched). */
static int first_frame(const char *buf, size_t len, size_t *frame_len, char **payload,
                       size_t *payload_len)
{
    const unsigned char *b = (const unsigned char *)buf;
    if (len < 2)
        return 1;
    if (b[0] != 0x81 || !(b[1] & 0x80)) /* FIN + text, no RSV; clients must mask */
        return -1;
    size_t n = b[1] & 0x7f, at = 2;
    if (n == 126) {
        if (len < 4)
            return 1;
        n = (size_t)b[2] << 8 | b[3];
        at = 4;
    } else if (n == 127) {
        if (len < 10)
            return 1;
        unsigned long long v = 0;
        for (int i = 2; i < 10; i++)
            v = v << 8 | b[i];
        if (v > FIRST_MESSAGE_MAX)
            return -1;
        n = (size_t)v;
        at = 10;
    }
    if (n > FIRST_MESSAGE_MAX)
        return -1;
    if (len < at + 4 + n)
        return 1;
    const unsigned char *mask = b + at;
    char *p = xmalloc(n + 1);
    for (size_t i = 0; i < n; i++)
        p[i] = (char)(b[at + 4 + i] ^ mask[i % 4]);
    p[n] = '\0';
    *payload = p;
    *payload_len = n;
    *frame_len = at + 4 + n;
    return 0;
}

/* Writes all of buf to the client socket (poll on EAGAIN), within 5 s. */
static int send_all(int fd, const char *buf, size_t len)
{
    int64_t deadline = clock_mono_us() / 1000 + 5000;
    size_t off = 0;
    while (off < len) {
        ssize_t n = send(fd, buf + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return -1;
        int64_t left = deadline - clock_mono_us() / 1000;
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        if (left <= 0 || poll(&p, 1, (int)left) < 0)
            return -1;
    }
    return 0;
}

/* A server text frame (unmasked) carrying text. */
static int send_text(int fd, const char *text)
{
    size_t n = strlen(text), h = 2;
    char *f = xmalloc(n + 10);
    f[0] = (char)0x81;
    if (n < 126) {
        f[1] = (char)n;
    } else if (n <= 0xffff) {
        f[1] = 126;
        f[2] = (char)(n >> 8);
        f[3] = (char)n;
        h = 4;
    } else {
        f[1] = 127;
        for (int i = 0; i < 8; i++)
            f[2 + i] = (char)((unsigned long long)n >> (56 - 8 * i));
        h = 10;
    }
    memcpy(f + h, text, n);
    int rc = send_all(fd, f, h + n);
    xfree(f);
    return rc;
}

/* If the message is {"id":N,"method":"session.new",...}, answers it with the
 * driver's session and returns 1; 0 when it is something else. */
static int answer_session_new(struct wd_conn *c, const char *msg, size_t len)
{
    json_t *m = json_loadb(msg, len, JSON_REJECT_DUPLICATES, NULL);
    json_t *id = json_object_get(m, "id");
    const char *method = json_string_value(json_object_get(m, "method"));
    if (!json_is_integer(id) || !method || strcmp(method, "session.new") != 0) {
        json_decref(m);
        return 0;
    }
    json_t *reply = json_pack("{s:s,s:O,s:O}", "type", "success", "id", id, "result", c->answer);
    char *text = json_dumps(reply, JSON_COMPACT);
    int rc = send_text(c->client_fd, text);
    xfree(text);
    json_decref(reply);
    json_decref(m);
    log_debug("session %s: answered the client's session.new", c->session_id);
    return rc == 0 ? 1 : -1;
}

/* Hands the connection to the relay (or closes it). */
static void hand_over(struct wd_conn *c, const char *client_extra, size_t client_extra_len)
{
    struct relay_hooks hooks = {
        .on_client_message = on_client_message,
        .on_close = on_close,
        .on_counts = on_counts,
        .close_client = close_client,
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

static void fail_conn(struct wd_conn *c, const char *why)
{
    close(c->upstream_fd);
    http_upgrade_close(c->up);
    on_close(c, why);
}

/* The opening exchange: waits for the client's first message; a session.new
 * is answered here (the driver's session already exists and the driver would
 * refuse a second one), anything else goes to the driver as sent. */
static void *opening_main(void *arg)
{
    struct wd_conn *c = arg;
    int64_t deadline = clock_mono_us() / 1000 + FIRST_MESSAGE_WAIT_MS;
    size_t frame_len = 0, plen = 0;
    char *payload = NULL;
    int r;
    int gone = 0;
    while ((r = first_frame(c->extra, c->extra_len, &frame_len, &payload, &plen)) == 1) {
        pthread_mutex_lock(&conn_lock);
        int stop = stopping;
        pthread_mutex_unlock(&conn_lock);
        if (stop || clock_mono_us() / 1000 >= deadline) {
            gone = stop;
            break;
        }
        struct pollfd p = {.fd = c->client_fd, .events = POLLIN};
        if (poll(&p, 1, 200) <= 0)
            continue;
        char buf[16384];
        ssize_t n = recv(c->client_fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            gone = 1;
            break;
        }
        if (n > 0) {
            if (c->extra_len + (size_t)n > FIRST_MESSAGE_MAX + 64) {
                r = -1;
                c->extra = xrealloc(c->extra, c->extra_len + (size_t)n);
                memcpy(c->extra + c->extra_len, buf, (size_t)n);
                c->extra_len += (size_t)n;
                break;
            }
            c->extra = xrealloc(c->extra, c->extra_len + (size_t)n);
            memcpy(c->extra + c->extra_len, buf, (size_t)n);
            c->extra_len += (size_t)n;
        }
    }
    if (gone) {
        fail_conn(c, "client left before its first message");
    } else {
        size_t skip = 0;
        if (r == 0) {
            int a = answer_session_new(c, payload, plen);
            if (a < 0) {
                xfree(payload);
                fail_conn(c, "cannot answer session.new");
                goto done;
            }
            if (a == 1)
                skip = frame_len;
        }
        xfree(payload);
        /* hand_over copies the bytes; c (and c->extra) may be freed by then. */
        char *rest = c->extra;
        size_t rest_len = c->extra_len - skip;
        c->extra = NULL;
        c->extra_len = 0;
        hand_over(c, rest + skip, rest_len);
        xfree(rest);
    }
done:
    pthread_mutex_lock(&conn_lock);
    opening--;
    pthread_cond_broadcast(&conn_cond);
    pthread_mutex_unlock(&conn_lock);
    return NULL;
}

static void on_upgraded(void *ctx, int fd, const char *extra, size_t extra_len,
                        struct http_upgrade *up)
{
    struct wd_conn *c = ctx;
    c->up = up;
    c->client_fd = fd;
    if (extra_len) {
        c->extra = xmalloc(extra_len);
        memcpy(c->extra, extra, extra_len);
        c->extra_len = extra_len;
    }
    live_client_attached(c->live);
    client_hooks(c->session_id, c, 1, 0);
    pthread_mutex_lock(&conn_lock);
    int stop = stopping;
    if (!stop)
        opening++;
    pthread_mutex_unlock(&conn_lock);
    if (stop) {
        fail_conn(c, "server stopping");
        return;
    }
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &at, opening_main, c);
    pthread_attr_destroy(&at);
    if (rc != 0) {
        log_warn("webdriver: no thread for the opening exchange: %s", strerror(rc));
        pthread_mutex_lock(&conn_lock);
        opening--;
        pthread_cond_broadcast(&conn_cond);
        pthread_mutex_unlock(&conn_lock);
        char *rest = c->extra;
        size_t rest_len = c->extra_len;
        c->extra = NULL;
        c->extra_len = 0;
        hand_over(c, rest, rest_len);
        xfree(rest);
    }
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
    struct wd_sess *s = l ? sess_get(tc.sub) : NULL;
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
    }
    struct wd_conn *c = NULL;
    struct driver_view v = {0};
    /* A driver whose WebDriver session is gone (a client sent session.end)
     * refuses the handshake: restart it once. */
    for (int attempt = 0; rc == 0 && attempt < 2; attempt++) {
        json_decref(v.caps);
        v.caps = NULL;
        struct sandbox *sb = live_sandbox_ref(l);
        rc = driver_ensure(s, debugger, sb, attempt > 0, &v, &rq->err);
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
    sess_put(s);
    if (rc) {
        json_decref(v.caps);
        sessmgr_put(l);
        return rc;
    }
    snprintf(c->session_id, sizeof c->session_id, "%s", tc.sub);
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

/* ---- module life ---- */

void webdriver_init(struct app *app)
{
    (void)app;
    session_ext_register(&webdriver_ext);
}

void webdriver_fini(void)
{
    pthread_mutex_lock(&conn_lock);
    stopping = 1;
    while (opening > 0)
        pthread_cond_wait(&conn_cond, &conn_lock);
    pthread_mutex_unlock(&conn_lock);
    /* Sessions end before this (sessmgr_stop); stop whatever is left. */
    for (;;) {
        pthread_mutex_lock(&reg_lock);
        struct wd_sess *s = reg;
        if (s)
            reg = s->next;
        pthread_mutex_unlock(&reg_lock);
        if (!s)
            break;
        pthread_mutex_lock(&s->lock);
        s->dead = 1;
        driver_drop(s);
        pthread_mutex_unlock(&s->lock);
        sess_put(s);
    }
}
