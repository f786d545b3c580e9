#include "runtime/xvfb.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/child.h"
#include "core/limits.h"
#include "runtime/logcap.h"
#include "core/clock.h"
#include "core/strvec.h"
#include "core/xalloc.h"
#include "runtime/reaper.h"
#include "runtime/sandbox.h"

#define XVFB_DEFAULT_BINARY "/usr/bin/Xvfb"
#define XVFB_MAX_SIDE       16384
/* Xvfb writes its display number to this descriptor in the child. */
#define XVFB_DISPLAY_FD 3

/* Runs in the forked child: only async-signal-safe calls until execv. */
static void xvfb_child(const char *const *argv, int null_fd, int log_fd, int display_fd,
                       const struct sandbox_exec *sbx)
{
    (void)setsid();
    child_reset_signals();
    if (sbx && sandbox_exec_enter(sbx) != 0)
        _exit(125);
    if (dup2(null_fd, 0) < 0 || dup2(log_fd, 1) < 0 || dup2(log_fd, 2) < 0)
        _exit(126);
    if (display_fd == XVFB_DISPLAY_FD) {
        if (fcntl(display_fd, F_SETFD, 0) < 0)
            _exit(126);
    } else if (dup2(display_fd, XVFB_DISPLAY_FD) < 0) {
        _exit(126);
    }
    child_cloexec_from(XVFB_DISPLAY_FD + 1);
    if (sandbox_exec_seccomp(sbx) != 0)
        _exit(125);
    execv(argv[0], (char *const *)argv);
    _exit(127);
}

/* Waits up to ms for pid to exit and reaps it. Returns 1 when reaped. */
static int xvfb_wait(pid_t pid, int ms)
{
    int64_t deadline = clock_mono_us() + (int64_t)ms * 1000;
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid || (r < 0 && errno == ECHILD))
            return 1;
        if (clock_mono_us() >= deadline)
            return 0;
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static void xvfb_kill(pid_t pid, int grace_ms)
{
    if (pid <= 0)
        return;
    (void)kill(-pid, SIGTERM);
    if (!xvfb_wait(pid, grace_ms)) {
        (void)kill(-pid, SIGKILL);
        (void)xvfb_wait(pid, 5000);
    }
    /* Anything Xvfb left in its group (it forks xkbcomp) goes too. */
    (void)kill(-pid, SIGKILL);
    reaper_forget(pid);
}

int xvfb_start(const char *binary, const struct sandbox *sb, int width, int height,
               const char *log_path, int timeout_ms, struct xvfb *x, struct err *e)
{
    memset(x, 0, sizeof *x);
    x->display = -1;
    if (width < 1 || height < 1 || width > XVFB_MAX_SIDE || height > XVFB_MAX_SIDE)
        return err_set(e, E_INVALID, "bad_request", "Xvfb screen %dx%d is out of range (1..%d)",
                       width, height, XVFB_MAX_SIDE);
    if (!binary)
        binary = XVFB_DEFAULT_BINARY;

    char screen[64];
    if (snprintf(screen, sizeof screen, "%dx%dx24", width, height) >= (int)sizeof screen)
        return err_set(e, E_INTERNAL, "internal", "Xvfb screen text too long");
    char fdtext[16];
    if (snprintf(fdtext, sizeof fdtext, "%d", XVFB_DISPLAY_FD) >= (int)sizeof fdtext)
        return err_set(e, E_INTERNAL, "internal", "Xvfb fd text too long");
    /* No GLX: loading Mesa for it was half of Xvfb's start (about 36 ms ->
     * 19 ms here), and Chromium does not use it (its GPU process renders with
     * SwiftShader on a display without a GPU, and presents through MIT-SHM). */
    const char *args[] = {"-displayfd", fdtext, "-screen",  "0",          screen,
                          "-nolisten",  "tcp",  "-noreset", "-extension", "GLX"};

    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0)
        return err_set(e, E_INTERNAL, "internal", "open /dev/null: %s", strerror(errno));
    /* Its log goes through a capped pipe (runtime/logcap.h). */
    int log_fd = log_path ? logcap_pipe(log_path, LIM_SESSION_LOG_BYTES)
                          : fcntl(null_fd, F_DUPFD_CLOEXEC, 0);
    if (log_fd < -1)
        errno = -log_fd;
    if (log_fd < 0) {
        int rc = err_set(e, E_INTERNAL, "internal", "open %s: %s",
                         log_path ? log_path : "/dev/null", strerror(errno));
        close(null_fd);
        return rc;
    }
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) {
        int rc = err_set(e, E_INTERNAL, "internal", "pipe: %s", strerror(errno));
        close(null_fd);
        close(log_fd);
        return rc;
    }

    /* In a sandbox: under bwrap as the session's user, in the session's
     * network namespace (the browser reaches the display through its
     * abstract socket there) with a private /tmp, so the display is :0. */
    struct strvec ab = {0};
    struct sandbox_exec sbx;
    int have_sbx = 0;
    if (sb) {
        int rc = sandbox_exec_open(sb, NULL, NULL, &sbx, e);
        if (rc) {
            close(null_fd);
            close(log_fd);
            close(pfd[0]);
            close(pfd[1]);
            return rc;
        }
        have_sbx = 1;
        sandbox_bwrap_argv(&sbx, NULL, NULL, NULL, binary, strvec_push_cb, &ab);
    } else {
        strvec_push(&ab, xstrdup(binary));
    }
    for (size_t i = 0; i < sizeof args / sizeof *args; i++)
        strvec_push(&ab, xstrdup(args[i]));
    const char *const *argv = (const char *const *)ab.v;
    pid_t pid = fork();
    if (pid == 0)
        xvfb_child(argv, null_fd, log_fd, pfd[1], have_sbx ? &sbx : NULL);
    int fork_errno = errno;
    if (have_sbx)
        sandbox_exec_close(&sbx);
    strvec_free(&ab);
    close(null_fd);
    close(log_fd);
    close(pfd[1]);
    if (pid < 0) {
        close(pfd[0]);
        return err_set(e, E_INTERNAL, "internal", "fork Xvfb: %s", strerror(fork_errno));
    }
    reaper_watch(pid);

    /* Xvfb writes "N\n" once it accepts connections. */
    char buf[32];
    size_t used = 0;
    int64_t deadline = clock_mono_us() + (int64_t)timeout_ms * 1000;
    int display = -1;
    const char *why = "did not report a display in time";
    for (;;) {
        int64_t left_ms = (deadline - clock_mono_us()) / 1000;
        if (left_ms <= 0)
            break;
        struct pollfd p = {.fd = pfd[0], .events = POLLIN};
        int n = poll(&p, 1, (int)left_ms);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        ssize_t r = read(pfd[0], buf + used, sizeof buf - 1 - used);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            why = "exited before reporting a display";
            break;
        }
        used += (size_t)r;
        buf[used] = '\0';
        if (strchr(buf, '\n')) {
            char *end;
            long v = strtol(buf, &end, 10);
            if (end != buf && *end == '\n' && v >= 0 && v < 65536)
                display = (int)v;
            else
                why = "reported an unreadable display number";
            break;
        }
        if (used == sizeof buf - 1) {
            why = "reported an unreadable display number";
            break;
        }
    }
    close(pfd[0]);
    if (display < 0) {
        xvfb_kill(pid, 0);
        return err_set(e, E_UNAVAIL, "unavailable", "Xvfb (%s) %s within %d ms%s%s", binary, why,
                       timeout_ms, log_path ? "; see " : "", log_path ? log_path : "");
    }
    x->pid = pid;
    x->display = display;
    x->width = width;
    x->height = height;
    return 0;
}

void xvfb_stop(struct xvfb *x, int grace_ms)
{
    if (!x || x->pid <= 0)
        return;
    xvfb_kill(x->pid, grace_ms);
    memset(x, 0, sizeof *x);
    x->display = -1;
}
