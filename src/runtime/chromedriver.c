#include "runtime/chromedriver.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/child.h"
#include "core/limits.h"
#include "runtime/logcap.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/strvec.h"
#include "core/xalloc.h"
#include "runtime/chromium.h"
#include "core/netns.h"
#include "runtime/reaper.h"
#include "runtime/sandbox.h"
#include "proxy/httpc.h"

extern char **environ;

#define START_ATTEMPTS 3
#define POLL_STEP_MS   100

struct chromedriver {
    pid_t pid;
    unsigned long long start_ticks;
    int exited;
    int port;
    char prefix[24];   /* "/bd" + 16 hex digits: the --url-base */
    char debugger[64]; /* "127.0.0.1:PORT" */
    char *session_id;
    char *bidi_url;
    char *session_path; /* PREFIX/session/ID: the session's classic WebDriver commands */
    json_t *caps;
    struct sandbox *sb; /* NULL, or a reference */
    int netns;          /* core/netns id of sb's namespace, or 0 */
};

static int64_t mono_ms(void)
{
    return clock_mono_us() / 1000;
}

/* ---- the driver's loopback API ---- */

/* METHOD path on 127.0.0.1:port (in the sandbox's namespace netns) with an
 * optional JSON body. Returns 0 with the status and the parsed JSON body
 * (*reply, new reference, NULL when the body is not JSON), or -1 when the
 * driver did not answer in time or answered malformed bytes. */
static int chromedriver_call(int netns, int port, const char *method, const char *path,
                             const char *body, int64_t deadline, int *status, json_t **reply)
{
    *reply = NULL;
    int fd = netns_socket(netns, AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (httpc_connect(fd, (struct sockaddr *)&a, sizeof a, deadline) != 0) {
        close(fd);
        return -1;
    }
    char host[32];
    snprintf(host, sizeof host, "127.0.0.1:%d", port);
    struct httpc_req rq = {
        .method = method,
        .target = path,
        .host = host,
        .fields = "Content-Type: application/json; charset=utf-8\r\n",
        .body = body ? body : "",
        .body_len = body ? strlen(body) : 0,
        .tls_host = NULL,
        .body_max = LIM_DRIVER_REPLY_BYTES,
        .head_only = 0,
        .deadline_ms = deadline,
    };
    struct httpc_resp r;
    struct err e;
    err_init(&e);
    if (httpc_exchange(fd, &rq, &r, &e) != 0)
        return -1;
    *status = r.status;
    *reply = json_loadb(r.body, r.body_len, 0, NULL);
    httpc_resp_free(&r);
    return 0;
}

/* ---- process ---- */

/* A port nobody listens on right now (bind port 0, read it, close). */
static int free_port(int netns)
{
    int fd = netns_socket(netns, AF_INET, SOCK_STREAM | SOCK_CLOEXEC);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &sl) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* Forks and execs argv in a new session with default signals, stdin/stdout/
 * stderr on /dev/null and every other descriptor closed. Returns the pid or
 * -1 (errno-based message in e). */
static pid_t spawn(char *const *argv, const struct sandbox_exec *sbx, int log_fd, struct err *e)
{
    int rp[2];
    if (pipe2(rp, O_CLOEXEC) != 0) {
        (void)err_set(e, E_INTERNAL, "internal", "pipe: %s", strerror(errno));
        return -1;
    }
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0) {
        (void)err_set(e, E_INTERNAL, "internal", "open /dev/null: %s", strerror(errno));
        close(rp[0]);
        close(rp[1]);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        /* Child of a multithreaded server: async-signal-safe calls only. */
        int err_no;
        if (setsid() < 0)
            goto fail;
        if (sbx && sandbox_exec_enter(sbx) != 0)
            goto fail;
        child_reset_signals();
        if (dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(log_fd >= 0 ? log_fd : null, 2) < 0)
            goto fail;
        child_cloexec_from(3); /* rp[1] too: it reports a failure until exec */
        if (sandbox_exec_seccomp(sbx) != 0)
            goto fail;
        execve(argv[0], argv, environ);
    fail:
        err_no = errno;
        (void)!write(rp[1], &err_no, sizeof err_no);
        _exit(127);
    }
    int fork_errno = errno;
    close(rp[1]);
    close(null);
    if (pid < 0) {
        close(rp[0]);
        (void)err_set(e, E_INTERNAL, "internal", "fork: %s", strerror(fork_errno));
        return -1;
    }
    int child_errno = 0;
    ssize_t n;
    do
        n = read(rp[0], &child_errno, sizeof child_errno);
    while (n < 0 && errno == EINTR);
    close(rp[0]);
    if (n != (ssize_t)sizeof child_errno)
        return pid; /* EOF: exec succeeded */
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    (void)err_set(e, E_UNAVAIL, "unavailable", "starting %s: %s", argv[0], strerror(child_errno));
    return -1;
}

/* Reaps the driver if it exited; kills what is left of its group. */
static int reap_if_exited(struct chromedriver *d)
{
    if (d->exited)
        return 1;
    int st;
    pid_t r = waitpid(d->pid, &st, WNOHANG);
    if (r == 0)
        return 0;
    if (r < 0 && errno == EINTR)
        return 0;
    d->exited = 1; /* r == pid, or ECHILD: reaped elsewhere */
    (void)kill(-d->pid, SIGKILL);
    reaper_forget(d->pid);
    return 1;
}

int chromedriver_exited(struct chromedriver *d)
{
    return reap_if_exited(d);
}

void chromedriver_stop(struct chromedriver *d, int grace_ms)
{
    if (!d || d->pid <= 0 || reap_if_exited(d))
        return;
    (void)kill(-d->pid, SIGTERM);
    int64_t deadline = mono_ms() + (grace_ms > 0 ? grace_ms : 0);
    while (!reap_if_exited(d) && mono_ms() < deadline) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (!d->exited) {
        (void)kill(-d->pid, SIGKILL);
        (void)kill(d->pid, SIGKILL);
        while (waitpid(d->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        d->exited = 1;
        reaper_forget(d->pid);
    }
}

void chromedriver_free(struct chromedriver *d)
{
    if (!d)
        return;
    chromedriver_stop(d, 0);
    xfree(d->session_id);
    xfree(d->bidi_url);
    xfree(d->session_path);
    json_decref(d->caps);
    sandbox_unref(d->sb);
    xfree(d);
}

/* ---- start ---- */

static int validate(const struct chromedriver_opts *o, int timeout_ms, struct err *e)
{
    const char *da = o->debugger_address;
    if (!da || strncmp(da, "127.0.0.1:", 10) != 0 || strlen(da) > 20 || !da[10] ||
        strspn(da + 10, "0123456789") != strlen(da + 10))
        (void)err_field(e, "debugger_address", "must be 127.0.0.1:PORT");
    if (!o->log_path || !o->log_path[0])
        (void)err_field(e, "log_path", "is required");
    if (timeout_ms <= 0)
        (void)err_field(e, "timeout_ms", "must be > 0");
    if (err_has_fields(e))
        return err_set(e, E_INVALID, "bad_request", "invalid chromedriver options");
    return 0;
}

/* Polls GET PREFIX/status until it says ready, the driver exits (returns 1:
 * try another port) or the deadline passes (-1). */
static int wait_ready(struct chromedriver *d, int64_t deadline)
{
    char path[64];
    snprintf(path, sizeof path, "%s/status", d->prefix);
    while (mono_ms() < deadline) {
        if (reap_if_exited(d))
            return 1;
        int st = 0;
        json_t *r = NULL;
        int64_t step = mono_ms() + 1000;
        if (chromedriver_call(d->netns, d->port, "GET", path, NULL,
                              step < deadline ? step : deadline, &st, &r) == 0 &&
            st == 200) {
            int ready = json_is_true(json_object_get(json_object_get(r, "value"), "ready"));
            json_decref(r);
            if (ready)
                return 0;
        }
        json_decref(r);
        struct timespec ts = {0, POLL_STEP_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    return -1;
}

/* POST PREFIX/session attached to the browser; fills session_id, bidi_url,
 * caps. */
static int new_session(struct chromedriver *d, int64_t deadline, struct err *e)
{
    json_t *body = json_pack("{s:{s:{s:b,s:{s:s}}}}", "capabilities", "alwaysMatch", "webSocketUrl",
                             1, "goog:chromeOptions", "debuggerAddress", d->debugger);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    char path[64];
    snprintf(path, sizeof path, "%s/session", d->prefix);
    int st = 0;
    json_t *r = NULL;
    int rc = chromedriver_call(d->netns, d->port, "POST", path, text, deadline, &st, &r);
    xfree(text);
    json_t *v = json_object_get(r, "value");
    const char *sid = json_string_value(json_object_get(v, "sessionId"));
    json_t *caps = json_object_get(v, "capabilities");
    const char *ws = json_string_value(json_object_get(caps, "webSocketUrl"));
    if (rc != 0 || st != 200 || !sid || !ws) {
        const char *msg = json_string_value(json_object_get(v, "message"));
        rc = err_set(e, E_UNAVAIL, "browser_unavailable",
                     "chromedriver did not create a WebDriver session (HTTP %d): %.200s", st,
                     msg  ? msg
                     : rc ? "no answer"
                          : "no webSocketUrl in the answer");
        json_decref(r);
        return rc;
    }
    /* The driver names itself "localhost"; use the address it listens on. */
    const char *after = strncmp(ws, "ws://localhost:", 15) == 0 ? ws + 15 : NULL;
    char ns[24] = "";
    if (d->netns) /* the driver's port is on its sandbox's loopback */
        snprintf(ns, sizeof ns, "ns%d@", d->netns);
    if (after)
        d->bidi_url = xasprintf("ws://%s127.0.0.1:%s", ns, after);
    else if (strncmp(ws, "ws://", 5) == 0)
        d->bidi_url = xasprintf("ws://%s%s", ns, ws + 5);
    else
        d->bidi_url = xstrdup(ws);
    d->session_id = xstrdup(sid);
    d->session_path = xasprintf("%s/session/%s", d->prefix, sid);
    d->caps = json_incref(caps);
    json_decref(r);
    return 0;
}

int chromedriver_start(const struct chromedriver_opts *o, int timeout_ms, struct chromedriver **out,
                       struct err *e)
{
    *out = NULL;
    int rc = validate(o, timeout_ms, e);
    if (rc)
        return rc;
    int64_t deadline = mono_ms() + timeout_ms;
    const char *bin = o->binary ? o->binary : CHROMEDRIVER_DEFAULT_BINARY;
    for (int attempt = 1; attempt <= START_ATTEMPTS; attempt++) {
        struct chromedriver *d = xcalloc(1, sizeof *d);
        snprintf(d->debugger, sizeof d->debugger, "%s", o->debugger_address);
        unsigned char rnd[8];
        crypto_random(rnd, sizeof rnd);
        int off = snprintf(d->prefix, sizeof d->prefix, "/bd");
        for (size_t i = 0; i < sizeof rnd; i++)
            off += snprintf(d->prefix + off, sizeof d->prefix - (size_t)off, "%02x", rnd[i]);
        if (o->sandbox) {
            d->sb = sandbox_ref(o->sandbox);
            d->netns = sandbox_netns(o->sandbox);
        }
        d->port = free_port(d->netns);
        if (d->port <= 0) {
            int er = errno;
            sandbox_unref(d->sb);
            xfree(d);
            return err_set(e, E_INTERNAL, "internal", "no free loopback port: %s", strerror(er));
        }
        char *a_port = xasprintf("--port=%d", d->port);
        char *a_base = xasprintf("--url-base=%s", d->prefix);
        /* The driver writes its log (every command, whole) to a FIFO
         * beside the log file, which the server drains into the file with a
         * byte cap (runtime/logcap.h): a file of the driver's own would grow
         * with every BiDi command. The FIFO is removed once the driver has
         * opened it. In a sandbox it belongs to the session's user and is
         * bound into the driver's view at SANDBOX_FILE, so the driver's
         * command line names no host path (issue 29.16). */
        char *fifo = xasprintf("%s.fifo", o->log_path);
        int log_fd = -1;
        (void)unlink(fifo);
        if (mkfifo(fifo, 0600) == 0) {
            int rfd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
            /* The driver's stderr is the FIFO's first writer: the drain
             * ends when the driver (or, failing to start, its stderr) is
             * gone. */
            if (rfd >= 0 && logcap_drain(rfd, o->log_path, LIM_SESSION_LOG_BYTES) == 0 &&
                (log_fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)) >= 0)
                (void)fcntl(log_fd, F_SETFL, 0);
            if (d->sb)
                (void)!chown(fifo, sandbox_uid(d->sb), (gid_t)sandbox_uid(d->sb));
        }
        char *a_log =
            d->sb ? xstrdup("--log-path=" SANDBOX_FILE) : xasprintf("--log-path=%s", fifo);
        struct sandbox_exec sbx;
        int have_sbx = 0;
        struct strvec av = {0};
        if (log_fd < 0)
            d->pid = -1;
        if (d->sb) {
            if (log_fd >= 0 && sandbox_exec_open(d->sb, NULL, NULL, &sbx, e) == 0)
                have_sbx = 1;
            else
                d->pid = -1;
            sbx.file = fifo;
            if (have_sbx) {
                /* A binary outside /usr, bound read-only at its own path. */
                const char *outside = strncmp(bin, "/usr/", 5) != 0 ? bin : NULL;
                const char *extra[] = {outside, outside, NULL};
                sandbox_bwrap_argv(&sbx, NULL, NULL, extra, bin, strvec_push_cb, &av);
            }
        } else {
            strvec_push(&av, xstrdup(bin));
        }
        strvec_push(&av, a_port);
        strvec_push(&av, a_base);
        strvec_push(&av, a_log);
        if (log_fd >= 0 && (!d->sb || have_sbx))
            d->pid = spawn(av.v, have_sbx ? &sbx : NULL, log_fd, e);
        if (d->pid > 0)
            reaper_watch(d->pid);
        if (have_sbx)
            sandbox_exec_close(&sbx);
        if (log_fd >= 0)
            close(log_fd);
        strvec_free(&av);
        if (d->pid < 0) {
            (void)unlink(fifo);
            xfree(fifo);
            sandbox_unref(d->sb);
            xfree(d);
            return E_UNAVAIL;
        }
        d->start_ticks = chromium_proc_start_ticks(d->pid);
        int w = wait_ready(d, deadline);
        /* Ready: the driver has opened its log. */
        (void)unlink(fifo);
        xfree(fifo);
        if (w == 0 && (rc = new_session(d, deadline, e)) == 0) {
            log_info("chromedriver %d on 127.0.0.1:%d attached to %s (WebDriver session %s)",
                     d->pid, d->port, d->debugger, d->session_id);
            *out = d;
            return 0;
        }
        int port = d->port;
        chromedriver_free(d);
        if (w == 0)
            return rc;
        if (w < 0)
            return err_set(e, E_UNAVAIL, "browser_unavailable",
                           "chromedriver did not become ready within %d ms", timeout_ms);
        log_warn("chromedriver exited before it was ready (port %d taken?), attempt %d of %d", port,
                 attempt, START_ATTEMPTS);
    }
    return err_set(e, E_UNAVAIL, "browser_unavailable",
                   "chromedriver exited at start %d times (see its log)", START_ATTEMPTS);
}

const char *chromedriver_bidi_url(const struct chromedriver *d)
{
    return d->bidi_url;
}

const char *chromedriver_session_path(const struct chromedriver *d)
{
    return d->session_path;
}

const char *chromedriver_session_id(const struct chromedriver *d)
{
    return d->session_id;
}

const json_t *chromedriver_capabilities(const struct chromedriver *d)
{
    return d->caps;
}

const char *chromedriver_debugger_address(const struct chromedriver *d)
{
    return d->debugger;
}

pid_t chromedriver_pid(const struct chromedriver *d)
{
    return d->pid;
}

unsigned long long chromedriver_start_ticks(const struct chromedriver *d)
{
    return d->start_ticks;
}
