#include "runtime/recorder.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/child.h"
#include "core/limits.h"
#include "runtime/logcap.h"
#include "core/b64.h"
#include "core/clock.h"
#include "core/fdio.h"
#include "core/jsonx.h"
#include "core/strvec.h"
#include "core/xalloc.h"
#include "proxy/cdp_client.h"
#include "proxy/cdp_page.h"
#include "runtime/reaper.h"
#include "runtime/sandbox.h"
#include "telemetry/telemetry.h"

/* A DevTools screenshot slower than this is given up (the last picture is
 * repeated meanwhile). */
#define CAPTURE_MS 3000
/* Largest JPEG accepted from the browser (a 4K screen at quality 80 is a few
 * MiB). */
#define CAPTURE_MAX_BYTES (16u << 20)

struct recorder {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop_asked;
    int done;
    int first_frame; /* headless: the first picture was taken (recorder_start waits for it) */
    int64_t finished_at;
    long long bytes;

    pthread_t thread;
    pid_t pid;
    int in_fd;   /* ffmpeg's stdin: frames (headless) or the `q` command */
    int out_fd;  /* ffmpeg's stdout: the MP4 */
    int file_fd; /* the recording */
    struct sandbox *sb;
    int headless;
    char *ws_url;
    int (*ws_lookup)(void *ctx, const char *session_id, char *out, size_t cap);
    void *ws_ctx;
    char *session_id;
    int framerate;
    long long max_bytes;
};

/* Runs in the forked child: only async-signal-safe calls until execv. */
static void ffmpeg_child(const char *const *argv, int in_fd, int out_fd, int log_fd,
                         const struct sandbox_exec *sbx)
{
    (void)setsid();
    child_reset_signals();
    if (sandbox_exec_enter(sbx) != 0)
        _exit(125);
    if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(log_fd, 2) < 0)
        _exit(126);
    child_cloexec_from(3);
    if (sandbox_exec_seccomp(sbx) != 0)
        _exit(125);
    execv(argv[0], (char *const *)argv);
    _exit(127);
}

static void push(struct strvec *v, const char *s)
{
    strvec_push(v, xstrdup(s));
}

static void pushi(struct strvec *v, int n)
{
    strvec_push(v, xasprintf("%d", n));
}

/* ffmpeg's arguments after the program name. */
static void ffmpeg_args(const struct recorder_opts *o, struct strvec *v)
{
    int w = o->width & ~1, h = o->height & ~1;
    if (w < 2)
        w = 2;
    if (h < 2)
        h = 2;
    push(v, "-hide_banner");
    push(v, "-nostats");
    push(v, "-loglevel");
    push(v, "warning");
    if (o->display >= 0) {
        push(v, "-f");
        push(v, "x11grab");
        push(v, "-draw_mouse");
        push(v, "1");
        push(v, "-framerate");
        pushi(v, o->framerate);
        push(v, "-video_size");
        strvec_push(v, xasprintf("%dx%d", o->width, o->height));
        push(v, "-i");
        strvec_push(v, xasprintf(":%d+0,0", o->display));
    } else {
        push(v, "-f");
        push(v, "image2pipe");
        push(v, "-framerate");
        pushi(v, o->framerate);
        push(v, "-c:v");
        push(v, "mjpeg");
        push(v, "-i");
        push(v, "pipe:0");
    }
    push(v, "-t");
    pushi(v, o->max_seconds);
    push(v, "-vf");
    /* The picture keeps its proportions: one of another size (a headless
     * page whose viewport differs from the screen) is scaled to fit inside
     * and padded at the right and bottom, never stretched. */
    strvec_push(v, xasprintf("scale=%d:%d:force_original_aspect_ratio=decrease,pad=%d:%d:0:0,"
                             "format=yuv420p",
                             w, h, w, h));
    push(v, "-r");
    pushi(v, o->framerate);
    push(v, "-c:v");
    push(v, "libx264");
    push(v, "-preset");
    push(v, "veryfast");
    push(v, "-tune");
    push(v, "zerolatency");
    /* A keyframe every 60 s. On a static page the keyframes are the bytes:
     * a 1080p keyframe of a page of text weighs ~250 KB, and x264 spends as
     * much again refining the unchanged picture in the second after it
     * (zerolatency has no lookahead); unchanged frames then cost ~400 bytes
     * each. A 60 s recording of such a page at 10 frames/s: 2.5 MB with a
     * keyframe every 10 s, 0.88 MB every 30 s, 0.47 MB every 60 s (the
     * encoder alone; docs/replays.md "Size"). Seeking decodes up to 60 s of
     * frames. Fragments are cut every second anyway (frag_duration), so a
     * recording cut short loses at most a second. */
    push(v, "-g");
    pushi(v, o->framerate * 60);
    push(v, "-crf");
    push(v, "28");
    push(v, "-threads");
    push(v, "2");
    push(v, "-fs");
    strvec_push(v, xasprintf("%lld", o->max_bytes));
    push(v, "-f");
    push(v, "mp4");
    push(v, "-movflags");
    push(v, "+empty_moov+default_base_moof");
    push(v, "-frag_duration");
    push(v, "1000000");
    push(v, "pipe:1");
}

/* ---- headless: screenshots over DevTools ---- */

void rec_shooter_close(struct rec_shooter *s)
{
    cdp_client_close(s->cc);
    s->cc = NULL;
    s->sid[0] = '\0';
}

int rec_shooter_attach(struct rec_shooter *s, const char *ws_url, struct err *e)
{
    int rc = cdp_client_open(ws_url, CAPTURE_MS, &s->cc, e);
    if (rc)
        return rc;
    rc = cdp_page_attach_first(s->cc, CAPTURE_MS, s->sid, sizeof s->sid, e);
    if (rc == E_NOTFOUND)
        rc = err_set(e, E_CONFLICT, "no_page", "the browser has no open page");
    if (rc)
        rec_shooter_close(s);
    return rc;
}

unsigned char *rec_shooter_take(struct rec_shooter *s, const char *ws_url, int quality, size_t *len)
{
    struct err e;
    err_init(&e);
    if (!s->cc && rec_shooter_attach(s, ws_url, &e) != 0)
        return NULL;
    json_t *p = json_pack("{s:s,s:i}", "format", "jpeg", "quality", quality);
    json_t *res = NULL;
    int rc = cdp_client_call(s->cc, s->sid, "Page.captureScreenshot", p, 1, CAPTURE_MS, &res, &e);
    json_decref(p);
    const char *b64 = rc == 0 ? jsonx_str(res, "data") : NULL;
    unsigned char *out = NULL;
    size_t n = b64 ? strlen(b64) : 0;
    if (b64 && n / 4 * 3 <= CAPTURE_MAX_BYTES) {
        if (b64_decode(b64, n, &out, len) != 0) {
            out = NULL;
        } else if (*len == 0) {
            xfree(out);
            out = NULL;
        }
    }
    json_decref(res);
    if (!out)
        rec_shooter_close(s);
    return out;
}

/* ---- the page's screencast ---- */

void rec_cast_close(struct rec_cast *c)
{
    rec_shooter_close(&c->sh);
    xfree(c->frame);
    c->frame = NULL;
    json_decref(c->ack);
    c->ack = NULL;
}

int rec_cast_start(struct rec_cast *c, const char *ws, int quality)
{
    struct err e;
    err_init(&e);
    if (rec_shooter_attach(&c->sh, ws, &e) != 0)
        return -1;
    cdp_client_keep_events(c->sh.cc, "Page.screencastFrame");
    json_t *p =
        json_pack("{s:s,s:i,s:i}", "format", "jpeg", "quality", quality, "everyNthFrame", 1);
    json_t *r = NULL;
    int rc = cdp_client_call(c->sh.cc, c->sh.sid, "Page.startScreencast", p, 1, 3000, &r, &e);
    json_decref(p);
    json_decref(r);
    if (rc) {
        rec_cast_close(c);
        return -1;
    }
    return 0;
}

static void cast_ack(struct rec_cast *c)
{
    if (!c->ack || !c->sh.cc)
        return;
    struct err e;
    err_init(&e);
    json_t *p = json_pack("{s:O}", "sessionId", c->ack);
    json_t *ignored = NULL;
    /* A failed ack shows as a lost connection at the next pump. */
    (void)!cdp_client_call(c->sh.cc, c->sh.sid, "Page.screencastFrameAck", p, 0, 0, &ignored, &e);
    json_decref(p);
    json_decref(ignored);
    json_decref(c->ack);
    c->ack = NULL;
}

/* Takes the frames that arrived, waiting up to ms for the first; keeps the
 * newest (an older unsent one is acked and dropped). -1 when the browser's
 * connection is gone. */
int rec_cast_pump(struct rec_cast *c, int ms)
{
    for (;;) {
        json_t *ev = NULL;
        struct err e;
        err_init(&e);
        if (cdp_client_event(c->sh.cc, ms, &ev, &e) != 0)
            return strstr(e.message, "closed") ? -1 : 0;
        ms = 0;
        const char *m = jsonx_str(ev, "method");
        json_t *params = json_object_get(ev, "params");
        const char *b64 = jsonx_str(params, "data");
        size_t n = b64 ? strlen(b64) : 0;
        if (m && strcmp(m, "Page.screencastFrame") == 0 && n && n / 4 * 3 <= CAPTURE_MAX_BYTES) {
            unsigned char *img = NULL;
            size_t got = 0;
            if (b64_decode(b64, n, &img, &got) != 0 || got == 0) {
                xfree(img);
            } else {
                xfree(c->frame);
                c->frame = img;
                c->len = got;
            }
            json_decref(c->ack);
            c->ack = json_incref(json_object_get(params, "sessionId"));
            cast_ack(c);
        }
        json_decref(ev);
    }
}

/* ---- the recorder's thread ---- */

/* Most seconds of frames a headless recording repeats to catch up after a
 * slow capture (a few JPEGs' worth of memory per second at 10 frames/s). */
#define RECORDER_CATCHUP_S 5
/* Longest recorder_start waits for a headless recording's first picture. */
#define RECORDER_FIRST_FRAME_MS 10000

static int stop_asked(struct recorder *r)
{
    pthread_mutex_lock(&r->mu);
    int v = r->stop_asked;
    pthread_mutex_unlock(&r->mu);
    return v;
}

/* Copies what ffmpeg wrote. 0 at its end of file, -1 on error, else 1. */
static int drain_out(struct recorder *r)
{
    char buf[65536];
    ssize_t n = read(r->out_fd, buf, sizeof buf);
    if (n < 0)
        return errno == EINTR || errno == EAGAIN ? 1 : -1;
    if (n == 0)
        return 0;
    if (fdio_write_all(r->file_fd, buf, (size_t)n, FDIO_NO_DEADLINE) != 0)
        return -1;
    pthread_mutex_lock(&r->mu);
    r->bytes += n;
    if (r->bytes >= r->max_bytes)
        r->stop_asked = 1;
    pthread_mutex_unlock(&r->mu);
    return 1;
}

/* Frames waiting to go into ffmpeg's stdin (headless). */
struct pending {
    unsigned char *buf;
    size_t len, off, cap;
};

static void pending_add(struct pending *p, const unsigned char *b, size_t n)
{
    if (n == 0)
        return;
    if (p->off == p->len)
        p->off = p->len = 0;
    if (!p->buf || p->len + n > p->cap) {
        p->cap = (p->len + n) * 2;
        p->buf = xrealloc(p->buf, p->cap);
    }
    memcpy(p->buf + p->len, b, n);
    p->len += n;
}

static void close_in(struct recorder *r)
{
    if (r->in_fd >= 0) {
        close(r->in_fd);
        r->in_fd = -1;
    }
}

/* Waits up to ms for ffmpeg to exit; 1 when reaped. */
static int wait_exit(pid_t pid, int ms)
{
    int64_t deadline = clock_mono_us() + (int64_t)ms * 1000;
    for (;;) {
        int st;
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid || (w < 0 && errno == ECHILD))
            return 1;
        if (clock_mono_us() >= deadline)
            return 0;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static void *recorder_main(void *arg)
{
    struct recorder *r = arg;
    struct rec_shooter sh = {0};
    struct pending pend = {0};
    unsigned char *last = NULL;
    size_t last_len = 0;
    long long frames_sent = 0;
    int64_t t0 = clock_mono_us();
    int64_t stop_at = 0; /* monotonic us when the stop was sent to ffmpeg */
    for (;;) {
        int64_t now = clock_mono_us();
        if (!stop_at && stop_asked(r)) {
            stop_at = now;
            if (!r->headless && r->in_fd >= 0) {
                (void)!write(r->in_fd, "q", 1);
            }
            /* Headless: the end of the frames ends the input. */
            close_in(r);
        }
        if (stop_at && now - stop_at > (int64_t)RECORDER_FINISH_MS * 1000) {
            (void)kill(-r->pid, SIGKILL);
            break;
        }
        /* Headless: the frames due by now, from the newest picture. */
        if (r->headless && !stop_at && r->in_fd >= 0 && pend.off == pend.len) {
            long long due = (now - t0) * r->framerate / 1000000 + 1;
            if (due > frames_sent) {
                size_t n = 0;
                char fresh[512];
                /* Reconnecting: the browser may have been restarted. */
                if (!sh.cc && r->ws_lookup &&
                    r->ws_lookup(r->ws_ctx, r->session_id, fresh, sizeof fresh) == 0 &&
                    strcmp(fresh, r->ws_url) != 0) {
                    xfree(r->ws_url);
                    r->ws_url = xstrdup(fresh);
                }
                unsigned char *img = rec_shooter_take(&sh, r->ws_url, 80, &n);
                if (img) {
                    if (!last) {
                        pthread_mutex_lock(&r->mu);
                        r->first_frame = 1;
                        pthread_cond_broadcast(&r->cv);
                        pthread_mutex_unlock(&r->mu);
                    }
                    xfree(last);
                    last = img;
                    last_len = n;
                }
                now = clock_mono_us();
                due = (now - t0) * r->framerate / 1000000 + 1;
                /* A slow capture (the first one connects to the browser):
                 * keep wall-clock time by repeating the newest picture, but
                 * never queue more than RECORDER_CATCHUP_S seconds of frames. */
                if (due - frames_sent > (long long)r->framerate * RECORDER_CATCHUP_S)
                    frames_sent = due - (long long)r->framerate * RECORDER_CATCHUP_S;
                for (; last && frames_sent < due; frames_sent++)
                    pending_add(&pend, last, last_len);
            }
        }
        struct pollfd p[2] = {{.fd = r->out_fd, .events = POLLIN}, {.fd = -1}};
        int np = 1;
        if (r->headless && r->in_fd >= 0 && pend.off < pend.len) {
            p[1].fd = r->in_fd;
            p[1].events = POLLOUT;
            np = 2;
        }
        int timeout = 100;
        if (r->headless && !stop_at && pend.off == pend.len) {
            int64_t next = t0 + (frames_sent * 1000000) / r->framerate;
            int64_t left = (next - clock_mono_us()) / 1000;
            timeout = left < 0 ? 0 : left < 100 ? (int)left : 100;
        }
        int n = poll(p, (nfds_t)np, timeout);
        if (n < 0 && errno != EINTR)
            break;
        if (n > 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            int d = drain_out(r);
            if (d <= 0)
                break;
        }
        if (np == 2 && (p[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t w = write(r->in_fd, pend.buf + pend.off, pend.len - pend.off);
            if (w > 0)
                pend.off += (size_t)w;
            else if (w < 0 && errno != EAGAIN && errno != EINTR)
                close_in(r); /* ffmpeg stopped reading (its duration cap) */
        }
    }
    close_in(r);
    if (!wait_exit(r->pid, RECORDER_FINISH_MS)) {
        (void)kill(-r->pid, SIGKILL);
        (void)wait_exit(r->pid, 5000);
    }
    (void)kill(-r->pid, SIGKILL); /* anything left in its group */
    reaper_forget(r->pid);
    (void)fsync(r->file_fd);
    close(r->file_fd);
    r->file_fd = -1;
    close(r->out_fd);
    r->out_fd = -1;
    rec_shooter_close(&sh);
    xfree(last);
    xfree(pend.buf);
    pthread_mutex_lock(&r->mu);
    r->done = 1;
    r->finished_at = clock_now_ms();
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

int recorder_start(const struct recorder_opts *o, struct recorder **out, struct err *e)
{
    *out = NULL;
    if (!o->sb)
        return err_set(e, E_UNAVAIL, "sandbox_required",
                       "recording needs the session sandbox: docs/sandbox.md");
    if (o->framerate < 1 || o->max_seconds < 1 || o->max_bytes < 1 || o->width < 1 ||
        o->height < 1 || (o->display < 0 && !o->ws_url))
        return err_set(e, E_INTERNAL, "internal", "recorder: bad options");
    int file_fd = open(o->out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (file_fd < 0)
        return err_set(e, E_INTERNAL, "internal", "create %s: %s", o->out_path, strerror(errno));
    /* ffmpeg's log goes through a capped pipe (runtime/logcap.h). */
    int log_fd = o->log_path ? logcap_pipe(o->log_path, LIM_SESSION_LOG_BYTES)
                             : open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (log_fd < -1)
        errno = -log_fd;
    int in[2] = {-1, -1}, outp[2] = {-1, -1};
    if (log_fd < 0 || pipe2(in, O_CLOEXEC) != 0 || pipe2(outp, O_CLOEXEC) != 0) {
        int rc = err_set(e, E_INTERNAL, "internal", "recorder pipes: %s", strerror(errno));
        close(file_fd);
        if (log_fd >= 0)
            close(log_fd);
        for (int i = 0; i < 2; i++) {
            if (in[i] >= 0)
                close(in[i]);
            if (outp[i] >= 0)
                close(outp[i]);
        }
        return rc;
    }
    struct sandbox_exec sbx;
    int rc = sandbox_exec_open(o->sb, NULL, NULL, &sbx, e);
    if (rc) {
        close(file_fd);
        close(log_fd);
        close(in[0]);
        close(in[1]);
        close(outp[0]);
        close(outp[1]);
        return rc;
    }
    struct strvec av = {0};
    sandbox_bwrap_argv(&sbx, NULL, NULL, NULL, RECORDER_FFMPEG, strvec_push_cb, &av);
    ffmpeg_args(o, &av);
    pid_t pid = fork();
    if (pid == 0)
        ffmpeg_child((const char *const *)av.v, in[0], outp[1], log_fd, &sbx);
    int fork_errno = errno;
    sandbox_exec_close(&sbx);
    strvec_free(&av);
    close(in[0]);
    close(outp[1]);
    close(log_fd);
    if (pid < 0) {
        close(in[1]);
        close(outp[0]);
        close(file_fd);
        return err_set(e, E_INTERNAL, "internal", "fork ffmpeg: %s", strerror(fork_errno));
    }
    reaper_watch(pid);
    (void)fcntl(in[1], F_SETFL, O_NONBLOCK);

    struct recorder *r = xcalloc(1, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    clock_cond_init(&r->cv);
    r->pid = pid;
    r->in_fd = in[1];
    r->out_fd = outp[0];
    r->file_fd = file_fd;
    r->sb = sandbox_ref((struct sandbox *)o->sb);
    r->headless = o->display < 0;
    r->ws_url = o->ws_url ? xstrdup(o->ws_url) : NULL;
    r->ws_lookup = o->session_id ? o->ws_lookup : NULL;
    r->ws_ctx = o->ws_ctx;
    r->session_id = o->session_id ? xstrdup(o->session_id) : NULL;
    r->framerate = o->framerate;
    r->max_bytes = o->max_bytes;
    if ((errno = pthread_create(&r->thread, NULL, recorder_main, r)) != 0) {
        rc = err_set(e, E_INTERNAL, "internal", "recorder thread: %s", strerror(errno));
        (void)kill(-pid, SIGKILL);
        (void)wait_exit(pid, 5000);
        reaper_forget(pid);
        close(r->in_fd);
        close(r->out_fd);
        close(r->file_fd);
        sandbox_unref(r->sb);
        xfree(r->ws_url);
        xfree(r->session_id);
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv);
        xfree(r);
        return rc;
    }
    /* A headless recording has started once it holds its first picture (the
     * first capture connects to the browser and can take a second): what the
     * page shows after the start answers is in the recording. Headful
     * recordings capture from ffmpeg's start. */
    if (r->headless) {
        struct timespec until = clock_deadline(RECORDER_FIRST_FRAME_MS);
        pthread_mutex_lock(&r->mu);
        while (!r->first_frame && !r->done &&
               pthread_cond_timedwait(&r->cv, &r->mu, &until) != ETIMEDOUT)
            ;
        pthread_mutex_unlock(&r->mu);
    }
    *out = r;
    return 0;
}

void recorder_stop(struct recorder *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->stop_asked = 1;
    pthread_mutex_unlock(&r->mu);
}

int recorder_wait(struct recorder *r, int timeout_ms)
{
    struct timespec dl = clock_deadline(timeout_ms);
    pthread_mutex_lock(&r->mu);
    while (!r->done) {
        if (pthread_cond_timedwait(&r->cv, &r->mu, &dl) == ETIMEDOUT)
            break;
    }
    int d = r->done;
    pthread_mutex_unlock(&r->mu);
    return d;
}

int recorder_done(struct recorder *r)
{
    pthread_mutex_lock(&r->mu);
    int d = r->done;
    pthread_mutex_unlock(&r->mu);
    return d;
}

int64_t recorder_finished_at(struct recorder *r)
{
    pthread_mutex_lock(&r->mu);
    int64_t v = r->finished_at;
    pthread_mutex_unlock(&r->mu);
    return v;
}

long long recorder_bytes(struct recorder *r)
{
    pthread_mutex_lock(&r->mu);
    long long v = r->bytes;
    pthread_mutex_unlock(&r->mu);
    return v;
}

void recorder_free(struct recorder *r)
{
    if (!r)
        return;
    recorder_stop(r);
    /* The thread ends by itself within RECORDER_FINISH_MS (then kills). */
    pthread_join(r->thread, NULL);
    sandbox_unref(r->sb);
    xfree(r->ws_url);
    xfree(r->session_id);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    xfree(r);
}
