/* runtime/repl: see repl.h. */
#include "runtime/repl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/limits.h"
#include "core/xalloc.h"
#include "domain/replframe.h"
#include "runtime/proc.h"
#include "runtime/pwexec.h"
#include "runtime/sandbox.h"

#define REPL_READ_CHUNK 65536

struct repl {
    char session_id[64];
    char org_id[64];
    char id[REPL_ID_LEN + 1]; /* "" while no process */
    struct proc *p;
    int in_fd, out_fd; /* the process's stdin and descriptor 3; -1 when none */
    int busy;          /* an execution runs (under mu) */
    int ended;         /* the session ended during it: the execution frees the entry */
    struct repl *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct repl *table;
static int org_cap = LIM_REPL_RUNNING_PER_ORG; /* set once at start (repl_set_org_cap) */

void repl_set_org_cap(int cap)
{
    if (cap >= 1 && cap <= LIM_REPL_RUNNING_PER_ORG)
        org_cap = cap;
}

static void new_id(char out[REPL_ID_LEN + 1])
{
    static const char alpha[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    out[0] = 'c';
    size_t i = 1;
    while (i < REPL_ID_LEN) {
        unsigned char b[32];
        crypto_random(b, sizeof b);
        for (size_t k = 0; k < sizeof b && i < REPL_ID_LEN; k++)
            if (b[k] < 252) /* 7 * 36: no bias */
                out[i++] = alpha[b[k] % 36];
    }
    out[REPL_ID_LEN] = '\0';
}

/* Kills the process (its whole tree) and closes the channel. */
static void repl_kill(struct repl *r)
{
    if (r->p) {
        struct err e;
        err_init(&e);
        (void)!proc_signal(r->p, SIGKILL, &e); /* E_NOTFOUND: already gone */
        proc_put(r->p);
        r->p = NULL;
    }
    if (r->in_fd >= 0)
        close(r->in_fd);
    if (r->out_fd >= 0)
        close(r->out_fd);
    r->in_fd = r->out_fd = -1;
    r->id[0] = '\0';
}

static int repl_start(struct repl *r, const struct repl_req *q, struct err *e)
{
    const char *dir = pwexec_dir();
    char runner[PATH_MAX + 32];
    struct stat st;
    if (dir)
        snprintf(runner, sizeof runner, "%s/repl.mjs", dir);
    if (!dir || stat(runner, &st) != 0)
        return err_set(e, E_UNAVAIL, "unavailable",
                       "failed to start the REPL: runtime-js/ with repl.mjs and its packages not "
                       "found (run scripts/deps.sh, or set BROWSERD_RUNTIME_JS)");
    char url[1024], cdp_env[1100], http_env[128], https_env[128];
    pwexec_local_url(q->ws, url, sizeof url);
    snprintf(cdp_env, sizeof cdp_env, "CDP_ENDPOINT=%s", url);
    /* The session's egress proxy, for httpGet (and any tool of the tenant's
     * that honours these variables): the namespace has no other way out. */
    snprintf(http_env, sizeof http_env, "HTTP_PROXY=%s", q->egress ? q->egress : "");
    snprintf(https_env, sizeof https_env, "HTTPS_PROXY=%s", q->egress ? q->egress : "");
    const char *argv[] = {PWEXEC_NODE, "--experimental-websocket", "--no-warnings",
                          SANDBOX_RUNTIME_JS "/repl.mjs", NULL};
    const char *ro[] = {dir, SANDBOX_RUNTIME_JS, NULL};
    const char *env[] = {"NODE_OPTIONS=", cdp_env, NULL, NULL, NULL};
    if (q->egress) {
        env[2] = http_env;
        env[3] = https_env;
    }
    int chan[2] = {-1, -1};
    struct proc_spec s = {
        .session_id = q->session_id,
        .sb = q->sb,
        .sessions = NULL, /* an idle REPL does not keep its session alive */
        .argv = argv,
        .env = env,
        .display = q->display,
        .extra_ro = ro,
        .channel = chan,
    };
    int rc = proc_start(&s, &r->p, e);
    if (rc == E_CONFLICT || rc == E_UNAVAIL)
        return rc;
    if (rc) {
        char why[ERR_MSG_MAX];
        snprintf(why, sizeof why, "%s", e->message);
        return err_set(e, E_INTERNAL, "internal", "failed to start the REPL: %s", why);
    }
    r->in_fd = chan[0];
    r->out_fd = chan[1];
    (void)fcntl(r->in_fd, F_SETFL, fcntl(r->in_fd, F_GETFL) | O_NONBLOCK);
    (void)fcntl(r->out_fd, F_SETFL, fcntl(r->out_fd, F_GETFL) | O_NONBLOCK);
    new_id(r->id);
    return 0;
}

static int running(struct repl *r)
{
    if (!r->p)
        return 0;
    struct proc_status st;
    proc_status(r->p, &st);
    return st.running;
}

/* Milliseconds to wait in poll: what is left of the deadline, at most 1 s. */
static int wait_ms(int64_t deadline)
{
    int64_t left = deadline - clock_mono_ms();
    if (left <= 0)
        return 0;
    return left > 1000 ? 1000 : (int)left;
}

/* Writes the whole frame before the deadline: 0, 1 on timeout, -1 when the
 * process closed its stdin (it died). */
static int send_all(int fd, const char *p, size_t n, int64_t deadline)
{
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, p + off, n - off);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno != EAGAIN)
            return -1;
        if (clock_mono_ms() >= deadline)
            return 1;
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        (void)poll(&pf, 1, wait_ms(deadline));
    }
    return 0;
}

/* What one execution gathered. */
struct gather {
    json_t *content;
    size_t text_bytes, image_bytes;
    int images, truncated;
};

/* The longest prefix of s (n bytes) not over cap that ends on a UTF-8
 * character boundary. */
static size_t utf8_cut(const char *s, size_t n, size_t cap)
{
    if (n <= cap)
        return n;
    size_t k = cap;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
        k--;
    return k;
}

static void add_text(struct gather *g, json_t *m)
{
    const char *ch = json_string_value(json_object_get(m, "channel"));
    json_t *tv = json_object_get(m, "text");
    const char *t = json_string_value(tv);
    size_t n = json_string_length(tv);
    size_t room = LIM_REPL_TEXT_BYTES - g->text_bytes;
    size_t take = utf8_cut(t, n, room);
    if (take < n)
        g->truncated = 1;
    if (take == 0)
        return;
    g->text_bytes += take;
    /* Consecutive text on one channel is one item. */
    size_t last = json_array_size(g->content);
    json_t *prev = last ? json_array_get(g->content, last - 1) : NULL;
    const char *pch = prev ? json_string_value(json_object_get(prev, "channel")) : NULL;
    if (pch && strcmp(pch, ch) == 0) {
        json_t *ptext = json_object_get(prev, "text");
        size_t pn = json_string_length(ptext);
        char *joined = xmalloc(pn + take + 1);
        memcpy(joined, json_string_value(ptext), pn);
        memcpy(joined + pn, t, take);
        json_object_set_new(prev, "text", json_stringn(joined, pn + take));
        xfree(joined);
        return;
    }
    json_array_append_new(
        g->content, json_pack("{s:s,s:s,s:s%}", "type", "text", "channel", ch, "text", t, take));
}

static void add_image(struct gather *g, json_t *m)
{
    json_t *d = json_object_get(m, "data_b64");
    size_t n = json_string_length(d);
    if (g->images >= LIM_REPL_IMAGES || n > LIM_REPL_IMAGE_BYTES_ALL - g->image_bytes) {
        g->truncated = 1;
        return;
    }
    g->images++;
    g->image_bytes += n;
    json_array_append_new(g->content, json_pack("{s:s,s:O,s:O}", "type", "image", "mime_type",
                                                json_object_get(m, "mime_type"), "data_b64", d));
}

/* Why the process ended, once it has (bounded wait for the reaper). */
static void crash_reason(struct repl *r, char *out, size_t cap)
{
    struct proc_status st;
    for (int i = 0; i < 100; i++) {
        proc_status(r->p, &st);
        if (!st.running)
            break;
        struct timespec d = {0, 10 * 1000 * 1000};
        nanosleep(&d, NULL);
    }
    if (st.running)
        snprintf(out, cap, "the REPL process closed its channel");
    else if (st.exit_code == 128 + SIGKILL)
        snprintf(out, cap, "the REPL process was killed (out of memory, or its session's limits)");
    else
        snprintf(out, cap, "the REPL process exited (status %d)", st.exit_code);
}

/* Runs code on r's process; fills res. Returns 1 when the process must be
 * killed (timeout, crash, protocol violation: said in res). */
static int run(struct repl *r, const char *code, int timeout_s, json_t *res, struct gather *g)
{
    int64_t deadline = clock_mono_ms() + (int64_t)timeout_s * 1000;
    json_t *req = json_pack("{s:s}", "code", code);
    size_t flen = 0;
    char *frame = req ? replframe_encode(req, &flen) : NULL;
    json_decref(req);
    char why[ERR_MSG_MAX + 64] = "";
    int dead = 0, sent = frame ? send_all(r->in_fd, frame, flen, deadline) : -1;
    xfree(frame);
    if (sent == 1) {
        snprintf(why, sizeof why, "Execution timed out after %d s", timeout_s);
        dead = 1;
    } else if (sent < 0) {
        crash_reason(r, why, sizeof why);
        dead = 1;
    }
    struct buf rx;
    buf_init(&rx, LIM_REPL_FRAME_BYTES + 4 + REPL_READ_CHUNK);
    int done = 0;
    while (!dead && !done) {
        size_t used;
        json_t *m;
        enum replmsg_kind kind;
        struct err fe;
        err_init(&fe);
        int k = replframe_next(rx.p, rx.len, LIM_REPL_FRAME_BYTES, &used, &m, &kind, &fe);
        if (k < 0) {
            snprintf(why, sizeof why, "%s", fe.message);
            dead = 1;
            break;
        }
        if (k == 1) {
            if (kind == REPLMSG_TEXT)
                add_text(g, m);
            else if (kind == REPLMSG_IMAGE)
                add_image(g, m);
            else {
                done = 1;
                json_object_set(res, "success", json_object_get(m, "success"));
                json_t *er = json_object_get(m, "error"), *st = json_object_get(m, "stack");
                if (json_is_string(er))
                    json_object_set_new(res, "error",
                                        json_stringn(json_string_value(er),
                                                     utf8_cut(json_string_value(er),
                                                              json_string_length(er), 65536)));
                if (json_is_string(st))
                    json_object_set_new(res, "stack",
                                        json_stringn(json_string_value(st),
                                                     utf8_cut(json_string_value(st),
                                                              json_string_length(st), 65536)));
            }
            json_decref(m);
            memmove(rx.p, rx.p + used, rx.len - used);
            rx.len -= used;
            continue;
        }
        if (clock_mono_ms() >= deadline) {
            snprintf(why, sizeof why, "Execution timed out after %d s", timeout_s);
            dead = 1;
            break;
        }
        struct pollfd pf = {.fd = r->out_fd, .events = POLLIN};
        if (poll(&pf, 1, wait_ms(deadline)) <= 0)
            continue;
        if (buf_reserve(&rx, REPL_READ_CHUNK) != 0) {
            snprintf(why, sizeof why, "REPL protocol: a frame over %u bytes", LIM_REPL_FRAME_BYTES);
            dead = 1;
            break;
        }
        ssize_t n = read(r->out_fd, rx.p + rx.len, REPL_READ_CHUNK);
        if (n > 0)
            rx.len += (size_t)n;
        else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
            crash_reason(r, why, sizeof why);
            dead = 1;
        }
    }
    buf_free(&rx);
    if (dead) {
        json_object_set_new(res, "success", json_false());
        json_object_set_new(res, "error", json_string(why));
        json_object_set_new(res, "repl_terminated", json_true());
    }
    return dead;
}

static void entry_free(struct repl *r)
{
    repl_kill(r);
    xfree(r);
}

/* Takes the session's entry (made if missing) for one execution. */
static int enter(const struct repl_req *q, struct repl **out, struct err *e)
{
    *out = NULL;
    pthread_mutex_lock(&mu);
    struct repl *r = table;
    int org_running = 0;
    for (struct repl *x = table; x; x = x->next)
        org_running += x->busy && strcmp(x->org_id, q->org_id) == 0;
    while (r && strcmp(r->session_id, q->session_id) != 0)
        r = r->next;
    int rc = 0;
    if (r && r->busy)
        rc = err_set(e, E_CONFLICT, "conflict",
                     "this session's REPL is running another execution (one at a time)");
    else if (org_running >= org_cap) {
        rc = err_set(e, E_LIMIT, "rate_limited",
                     "this organization already runs %d REPL executions at once; retry", org_cap);
        e->retry_after = 1;
    }
    if (rc == 0 && !r) {
        r = xcalloc(1, sizeof *r);
        snprintf(r->session_id, sizeof r->session_id, "%s", q->session_id);
        snprintf(r->org_id, sizeof r->org_id, "%s", q->org_id);
        r->in_fd = r->out_fd = -1;
        r->next = table;
        table = r;
    }
    if (rc == 0) {
        r->busy = 1;
        *out = r;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

static void unlink_locked(struct repl *r)
{
    for (struct repl **pp = &table; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            return;
        }
}

static void leave(struct repl *r)
{
    pthread_mutex_lock(&mu);
    r->busy = 0;
    int ended = r->ended;
    if (ended)
        unlink_locked(r);
    pthread_mutex_unlock(&mu);
    if (ended)
        entry_free(r);
}

int repl_exec(const struct repl_req *q, json_t **out, struct err *e)
{
    *out = NULL;
    int64_t t0 = clock_mono_ms();
    struct repl *r;
    int rc = enter(q, &r, e);
    if (rc)
        return rc;
    /* A process that died between calls (out of memory while idle) is
     * replaced silently: the new repl_id says so. */
    if (r->p && (q->reset || !running(r)))
        repl_kill(r);
    if (!r->p)
        rc = repl_start(r, q, e);
    if (rc) {
        repl_kill(r);
        leave(r);
        return rc;
    }
    json_t *res = json_object();
    json_object_set_new(res, "repl_id", json_string(r->id));
    struct gather g = {json_array(), 0, 0, 0, 0};
    if (!*q->code)
        json_object_set_new(res, "success", json_true());
    else if (run(r, q->code, q->timeout_s, res, &g))
        repl_kill(r);
    if (json_array_size(g.content))
        json_object_set(res, "content", g.content);
    json_decref(g.content);
    if (g.truncated)
        json_object_set_new(res, "content_truncated", json_true());
    json_object_set_new(res, "duration_ms", json_integer(clock_mono_ms() - t0));
    leave(r);
    *out = res;
    return 0;
}

void repl_session_end(const char *session_id)
{
    pthread_mutex_lock(&mu);
    struct repl *r = table;
    while (r && strcmp(r->session_id, session_id) != 0)
        r = r->next;
    if (r && r->busy) {
        r->ended = 1; /* its process dies with the session: the execution ends */
        r = NULL;
    } else if (r) {
        unlink_locked(r);
    }
    pthread_mutex_unlock(&mu);
    if (r)
        entry_free(r);
}
