/*
 * GET /browsers/{id}/logs/stream (browsers.logs.stream, SESSION_API.md
 * section 4): Server-Sent Events of one of the session's own log files, one
 * frame per line: data: {"event":"log","timestamp":...,"message":...}.
 *
 * Sources (never an arbitrary host path):
 *   source=supervisor&supervisor_process=chromium|xvfb|xorg|chromedriver:
 *     the browser's stderr, its X server's output, its chromedriver's log;
 *   source=path&path=P: a regular file of the session's own files, P being
 *     the path its processes see (/tmp/x/app.log), resolved as the fs API
 *     does (runtime/sessfs.h: inside the session's root, so "..", symbolic
 *     links and magic links cannot leave it). Without a sandbox (a server
 *     not run as root) P is a path inside the browser's user-data folder,
 *     opened with openat2 RESOLVE_BENEATH. No answer names a host folder.
 * follow=true (the default) starts at the end of the file and goes on with
 * new lines until the client leaves or the session ends; follow=false sends
 * the whole file and ends.
 *
 * Streams park between lines (no thread per client); the app's log waker
 * (runtime/waker.h, one thread) wakes every stream LOGS_POLL_MS to look for
 * new bytes.
 */
#include "api/logs.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/xalloc.h"
#include "runtime/sandbox.h"
#include "runtime/sessfs.h"
#include "runtime/sessmgr.h"
#include "runtime/waker.h"

#define LOGS_LINE_MAX  4096 /* longer lines are cut (the rest is dropped) */
#define LOGS_READ_MAX  (64 * 1024)
#define LOGS_QUEUE_MAX (1u << 20) /* encoded frames not yet sent */

struct lstream {
    struct http_stream *hs; /* read by the waker's thread */
    struct live *live;      /* the session (a reference) */
    int fd;
    off_t off;
    int follow;
    int eof_sent;
    char line[LOGS_LINE_MAX + 1];
    size_t linelen; /* bytes of the current, unfinished line */
    int line_cut;   /* the current line passed LOGS_LINE_MAX */
    struct buf out; /* encoded frames waiting for the client */
    struct waker *waker;
    struct waker_entry *tick; /* the waker's entry of this stream */
};

/* Called every LOGS_POLL_MS by the app's log waker. */
static void lwake(void *ctx)
{
    struct lstream *s = ctx;
    if (s->hs)
        http_stream_wake(s->hs);
}

/* Appends one frame for the current line (invalid UTF-8 becomes '?'). */
static void emit_line(struct lstream *s)
{
    size_t n = s->linelen;
    while (n && (s->line[n - 1] == '\r'))
        n--;
    s->linelen = 0;
    int cut = s->line_cut;
    s->line_cut = 0;
    if (n == 0 && !cut)
        return; /* empty lines are skipped, as kernel-images does */
    s->line[n] = '\0';
    json_t *msg = json_stringn(s->line, n);
    if (!msg) {
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)s->line[i] >= 0x80)
                s->line[i] = '?';
        msg = json_stringn(s->line, n);
    }
    char ts[40];
    clock_fmt_rfc3339(clock_now_ms(), ts, sizeof ts);
    json_t *ev = json_pack("{s:s,s:s,s:o}", "event", "log", "timestamp", ts, "message",
                           msg ? msg : json_string(""));
    char *text = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    if (!text)
        return;
    /* A client that does not read leaves frames behind the queue's limit:
     * they are dropped rather than held without bound. */
    if (buf_append(&s->out, "data: ", 6) == 0 && buf_append(&s->out, text, strlen(text)) == 0)
        (void)!buf_append(&s->out, "\n\n", 2);
    xfree(text);
}

/* Reads what the file has beyond s->off into frames. 1 when bytes were read. */
static int pull(struct lstream *s)
{
    struct stat st;
    if (fstat(s->fd, &st) == 0 && st.st_size < s->off)
        s->off = st.st_size; /* truncated: go on from its new end */
    char chunk[LOGS_READ_MAX];
    ssize_t n = pread(s->fd, chunk, sizeof chunk, s->off);
    if (n <= 0)
        return 0;
    s->off += n;
    for (ssize_t i = 0; i < n; i++) {
        if (chunk[i] == '\n') {
            emit_line(s);
        } else if (s->linelen < LOGS_LINE_MAX) {
            s->line[s->linelen++] = chunk[i];
        } else {
            s->line_cut = 1;
        }
    }
    return 1;
}

static long lread(void *ctx, char *dst, size_t cap)
{
    struct lstream *s = ctx;
    if (s->out.len == 0) {
        while (s->out.len == 0 && pull(s))
            ;
    }
    if (s->out.len == 0) {
        char ws[512];
        int ended = live_ws_url(s->live, ws, sizeof ws) != 0;
        if (!s->follow || ended) {
            if (s->linelen || s->line_cut)
                emit_line(s); /* the last line had no newline */
            if (s->out.len == 0)
                return -1;
        } else {
            return 0; /* parked until the waker's next call */
        }
    }
    size_t n = s->out.len < cap ? s->out.len : cap;
    memcpy(dst, s->out.p, n);
    memmove(s->out.p, s->out.p + n, s->out.len - n);
    s->out.len -= n;
    return (long)n;
}

static void lfree(void *ctx)
{
    struct lstream *s = ctx;
    waker_remove(s->waker, s->tick);
    close(s->fd);
    sessmgr_put(s->live);
    buf_free(&s->out);
    xfree(s);
}

/* Opens path (absolute) if it lies inside home; -errno otherwise (-EXDEV when
 * it is outside). */
static int open_beneath(const char *home, const char *path)
{
    size_t hl = strlen(home);
    if (strncmp(path, home, hl) != 0 || (path[hl] != '/' && path[hl] != '\0'))
        return -EXDEV;
    const char *rel = path[hl] == '/' ? path + hl + 1 : ".";
    if (!*rel)
        rel = ".";
    int dfd = open(home, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -errno;
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    int fd = (int)syscall(SYS_openat2, dfd, rel, &how, sizeof how);
    int er = errno;
    close(dfd);
    return fd >= 0 ? fd : (er == EXDEV ? -EXDEV : -er);
}

/* Opens a client's source=path: the session's own files when it has them
 * (the path its processes see), else a path inside home. The errors name the
 * client's path only, never a host folder. */
static int open_session_path(struct req *rq, struct live *l, const char *home, const char *path,
                             int *fd)
{
    struct sandbox *sb = live_sandbox_ref(l);
    const char *root = sandbox_root(sb);
    int r;
    if (root) {
        struct sessfs fs = {.rootfd = -1};
        struct stat st;
        r = sessfs_open(&fs, root, sandbox_uid(sb));
        if (r == 0)
            r = sessfs_read_open(&fs, path, fd, &st);
        sessfs_close(&fs);
    } else {
        r = open_beneath(home, path);
        if (r >= 0)
            *fd = r;
        else if (r == -EXDEV)
            r = -ENOENT;
    }
    sandbox_unref(sb);
    if (r >= 0)
        return 0;
    *fd = -1;
    if (r == -ENOENT || r == -ENOTDIR || r == -ELOOP)
        return err_set(&rq->err, E_NOTFOUND, "not_found",
                       "%s: file not found (the session's own files: /tmp and /home)", path);
    if (r == -EACCES || r == -EPERM)
        return err_set(&rq->err, E_FORBIDDEN, "forbidden",
                       "permission denied: %s (read as the session's user)", path);
    if (r == -EISDIR || r == -EINVAL)
        return err_field(&rq->err, "path", "must be a regular file");
    return err_set(&rq->err, E_INTERNAL, "internal", "opening %s: %s", path, strerror(-r));
}

int logs_stream_get(struct req *rq, struct resp *rs)
{
    struct app *app = api_app(rq);
    const char *source = req_query(rq, "source");
    const char *follow = req_query(rq, "follow");
    const char *path = req_query(rq, "path");
    const char *proc = req_query(rq, "supervisor_process");
    if (!source || (strcmp(source, "path") != 0 && strcmp(source, "supervisor") != 0))
        return err_field(&rq->err, "source", "is required: path or supervisor");
    if (follow && strcmp(follow, "true") != 0 && strcmp(follow, "false") != 0)
        return err_field(&rq->err, "follow", "must be true or false");
    if (strcmp(source, "path") == 0 && (!path || path[0] != '/'))
        return err_field(&rq->err, "path", "is required with source=path (an absolute path)");
    static const struct {
        const char *name, *suffix;
    } procs[] = {{"chromium", ".log"},
                 {"xvfb", ".xvfb.log"},
                 {"xorg", ".xvfb.log"},
                 {"chromedriver", ".chromedriver.log"}};
    const char *suffix = NULL;
    if (strcmp(source, "supervisor") == 0) {
        for (size_t i = 0; proc && i < sizeof procs / sizeof *procs; i++)
            if (strcmp(proc, procs[i].name) == 0)
                suffix = procs[i].suffix;
        if (!suffix)
            return err_field(&rq->err, "supervisor_process",
                             "must be one of chromium, xvfb (or xorg), chromedriver");
    }
    struct session_rec s;
    struct live *l;
    char ws[512];
    int rc = api_live_session(rq, &s, &l, ws, sizeof ws);
    if (rc)
        return rc;
    char home[1200];
    sess_path(app, s.id, SESS_PATH_HOME, home, sizeof home);
    int fd = -1;
    if (suffix) {
        char p[1300];
        snprintf(p, sizeof p, "%s%s", home, suffix);
        fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
            rc = err_set(&rq->err, E_NOTFOUND, "not_found",
                         "session %s has no %s log (a headless session has no X server; "
                         "chromedriver starts with the first BiDi client)",
                         s.id, proc);
    } else {
        rc = open_session_path(rq, l, home, path, &fd);
    }
    struct stat st;
    if (rc == 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)))
        rc = err_field(&rq->err, "path", "must be a regular file");
    session_rec_clear(&s);
    if (rc) {
        if (fd >= 0)
            close(fd);
        sessmgr_put(l);
        return rc;
    }
    live_touch(l);
    struct lstream *x = xcalloc(1, sizeof *x);
    x->fd = fd;
    x->live = l;
    x->follow = !follow || strcmp(follow, "true") == 0;
    x->off = x->follow ? st.st_size : 0;
    buf_init(&x->out, LOGS_QUEUE_MAX);
    resp_stream(rs, 200, "text/event-stream", lread, lfree, x, &x->hs);
    resp_header(rs, "Cache-Control", "no-cache");
    resp_header(rs, "X-Accel-Buffering", "no");
    resp_header(rs, "X-SSE-Content-Type", "application/json");
    x->waker = app->log_waker;
    x->tick = waker_add(x->waker, lwake, x);
    return 0;
}
