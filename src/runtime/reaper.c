#include "runtime/reaper.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <sys/mount.h>
#include <unistd.h>

#include "runtime/cgroup.h"

#define REAPER_MAX_GROUPS  65536
#define REAPER_MAX_CGROUPS 8192
#define REAPER_PATH_MAX    200
#define REAPER_MAX_MOUNTS  4096

static int wfd = -1; /* the server's end; -1: no watcher */

/* ---- the watcher process (single-threaded; a fresh fork) ---- */

/* How long the watcher goes on removing the cgroups of a dead server: a
 * killed task leaves its cgroup only once it has run to exit, which on a
 * busy host takes seconds; an empty cgroup left behind is a leak. */
#define REAPER_CGROUP_RETRY_MS 120000

/* One round over the cgroups left in cg[0..n): kills what is still in each
 * and removes the empty ones (moved out of the list). The count left. */
static size_t cgroups_round(char (*cg)[REAPER_PATH_MAX], size_t n)
{
    for (size_t k = 0; k < n;) {
        (void)cgroup_kill_tasks(cg[k], 50);
        if (rmdir(cg[k]) == 0 || errno == ENOENT)
            memcpy(cg[k], cg[--n], REAPER_PATH_MAX);
        else
            k++;
    }
    return n;
}

static void watcher_main(int rfd) __attribute__((noreturn));
static void watcher_main(int rfd)
{
    (void)prctl(PR_SET_NAME, "browserd-reaper", 0, 0, 0);
    /* A terminal's ^C or a signal to the server's group must not end the
     * watcher before the server: it ends at end of file only. */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    /* Its own session: a kill of the server's whole process group (kill -9
     * -PGID, a terminal closing) must not take the watcher with it. */
    (void)setsid();
    static pid_t groups[REAPER_MAX_GROUPS];
    static char cgroups[REAPER_MAX_CGROUPS][REAPER_PATH_MAX];
    static char mounts[REAPER_MAX_MOUNTS][REAPER_PATH_MAX];
    size_t n = 0, ncg = 0, nmnt = 0;
    char buf[4096], line[REAPER_PATH_MAX + 2];
    size_t ll = 0;
    for (;;) {
        ssize_t got = read(rfd, buf, sizeof buf);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        for (ssize_t i = 0; i < got; i++) {
            if (buf[i] != '\n') {
                if (ll + 1 < sizeof line)
                    line[ll++] = buf[i];
                continue;
            }
            line[ll] = '\0';
            ll = 0;
            if (line[0] == 'C') {
                size_t pl = strlen(line + 1);
                if (ncg < REAPER_MAX_CGROUPS && pl > 0 && pl < REAPER_PATH_MAX)
                    memcpy(cgroups[ncg++], line + 1, pl + 1);
                continue;
            }
            if (line[0] == 'M') {
                size_t pl = strlen(line + 1);
                if (nmnt < REAPER_MAX_MOUNTS && pl > 0 && pl < REAPER_PATH_MAX)
                    memcpy(mounts[nmnt++], line + 1, pl + 1);
                continue;
            }
            if (line[0] == 'm') {
                for (size_t k = 0; k < nmnt; k++)
                    if (strcmp(mounts[k], line + 1) == 0) {
                        memcpy(mounts[k], mounts[--nmnt], REAPER_PATH_MAX);
                        break;
                    }
                continue;
            }
            if (line[0] == 'c') {
                for (size_t k = 0; k < ncg; k++)
                    if (strcmp(cgroups[k], line + 1) == 0) {
                        memcpy(cgroups[k], cgroups[--ncg], REAPER_PATH_MAX);
                        break;
                    }
                continue;
            }
            long v = strtol(line + 1, NULL, 10);
            if (v <= 1)
                continue;
            if (line[0] == '+' && n < REAPER_MAX_GROUPS) {
                groups[n++] = (pid_t)v;
            } else if (line[0] == '-') {
                for (size_t k = 0; k < n; k++)
                    if (groups[k] == (pid_t)v) {
                        groups[k] = groups[--n];
                        break;
                    }
            }
        }
    }
    for (size_t k = 0; k < n; k++)
        (void)kill(-groups[k], SIGKILL);
    /* The sessions' own files (tmpfs mounts) first: a detached unmount takes
     * them out of sight at once, whatever still runs on them (issue 30: they
     * stayed up for the seconds the cgroups took to empty). */
    for (size_t k = 0; k < nmnt; k++) {
        (void)umount2(mounts[k], MNT_DETACH);
        (void)rmdir(mounts[k]);
    }
    /* Sandboxed sessions: everything in their cgroups, then the cgroups,
     * round after round until every one is gone (bounded). */
    for (size_t k = 0; k < ncg; k++)
        if (strnlen(cgroups[k], REAPER_PATH_MAX) >= REAPER_PATH_MAX)
            cgroups[k][0] = '\0';
    for (int waited = 0; (ncg = cgroups_round(cgroups, ncg)) > 0; waited += 20) {
        if (waited >= REAPER_CGROUP_RETRY_MS)
            break;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (n) {
        char msg[96];
        int len =
            snprintf(msg, sizeof msg,
                     "browserd-reaper: the server ended; killed %zu browser process group(s)\n", n);
        if (len > 0 && write(2, msg, (size_t)len) < 0) {
            /* nothing to do: stderr is gone */
        }
    }
    _exit(0);
}

int reaper_start(struct err *e)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return err_set(e, E_INTERNAL, "internal", "reaper: pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        int fe = errno;
        close(p[0]);
        close(p[1]);
        return err_set(e, E_INTERNAL, "internal", "reaper: fork: %s", strerror(fe));
    }
    if (pid == 0) {
        close(p[1]);
        /* Only the pipe and stderr stay open: the watcher must not keep
         * the server's sockets or database alive. */
        if (p[0] != 3) {
            (void)dup2(p[0], 3);
            close(p[0]);
        }
        (void)close_range(4, ~0U, 0);
        (void)close(0);
        (void)close(1);
        watcher_main(3);
    }
    close(p[0]);
    int fl = fcntl(p[1], F_GETFL);
    (void)fcntl(p[1], F_SETFL, fl | O_NONBLOCK);
    wfd = p[1];
    return 0;
}

static void tell(char op, pid_t pgid)
{
    if (wfd < 0 || pgid <= 1)
        return;
    char msg[24];
    int n = snprintf(msg, sizeof msg, "%c%d\n", op, (int)pgid);
    /* Shorter than PIPE_BUF: written whole or not at all. A full pipe (the
     * watcher is behind) or a gone watcher costs only this record. */
    if (n > 0 && write(wfd, msg, (size_t)n) < 0 && errno == EPIPE) {
        /* the watcher is gone: stop telling it */
    }
}

void reaper_watch(pid_t pgid)
{
    tell('+', pgid);
}

void reaper_forget(pid_t pgid)
{
    tell('-', pgid);
}

static void tell_path(char op, const char *path)
{
    char msg[REAPER_PATH_MAX + 4];
    int n = snprintf(msg, sizeof msg, "%c%s\n", op, path);
    if (wfd < 0 || n <= 0 || n >= (int)sizeof msg)
        return;
    if (write(wfd, msg, (size_t)n) < 0 && errno == EPIPE) {
        /* the watcher is gone */
    }
}

void reaper_watch_cgroup(const char *dir)
{
    tell_path('C', dir);
}

void reaper_forget_cgroup(const char *dir)
{
    tell_path('c', dir);
}

void reaper_watch_mount(const char *dir)
{
    tell_path('M', dir);
}

void reaper_forget_mount(const char *dir)
{
    tell_path('m', dir);
}
