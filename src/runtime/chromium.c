#include "runtime/chromium.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/child.h"
#include "core/limits.h"
#include "runtime/logcap.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/strvec.h"
#include "core/xalloc.h"
#include "core/fdio.h"
#include "core/jsonx.h"
#include "proxy/cdp_client.h"
#include "proxy/cdp_page.h"
#include "runtime/crlauncher.h"
#include "runtime/reaper.h"
#include "runtime/sandbox.h"
#include "runtime/xinput.h"
#include "runtime/xvfb.h"

extern char **environ;

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

#define CR_MAX_SIDE        16384
#define CR_CGROUP_ROOT     "/sys/fs/cgroup"
#define CR_CGROUP_PARENT   CR_CGROUP_ROOT "/browserd"
#define CR_DEVTOOLS_PREFIX "DevTools listening on "
/* Bytes of stderr kept while waiting for the DevTools line (older lines are dropped). */
#define CR_STARTUP_BUF (64 * 1024)
/* Chromium's stderr log is capped (what the file already holds, from an
 * earlier browser of the session, counts); beyond this the pipe is still
 * drained but discarded. */
#define CR_LOG_MAX          LIM_SESSION_LOG_BYTES
#define CR_XVFB_TIMEOUT_MS  10000
#define CR_PROBE_TIMEOUT_MS 10000
#define CR_FIT_MS           3000 /* longest time given to size a headless window */

/* Flags that keep Chromium quiet and predictable on a closed network: no
 * component/variations/safe-browsing/translate/metrics traffic, no first-run
 * UI, no keyring, no crash uploads, no throttling of background tabs (agents
 * drive tabs that are not focused). docs/runtime.md gives the reason for each. */
static const char *const cr_fixed_flags[] = {
    "--no-sandbox",
    "--remote-debugging-port=0",
    "--remote-debugging-address=127.0.0.1",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-breakpad",
    "--disable-field-trial-config",
    "--metrics-recording-only",
    "--no-pings",
    "--password-store=basic",
    "--use-mock-keychain",
    "--mute-audio",
    "--disable-background-timer-throttling",
    "--disable-backgrounding-occluded-windows",
    "--disable-renderer-backgrounding",
    "--disable-hang-monitor",
    /* No GPU shader caches in the profile (GPUCache, DawnGraphiteCache,
     * DawnWebGPUCache): 0.9 MB of a sandboxed session's tmpfs profile, which
     * is memory, for caches that help only a saved profile loaded again
     * (issue 39.1, docs/runtime.md). */
    "--disable-gpu-shader-disk-cache",
    /* WebMCP (document.modelContext and the DevTools WebMCP domain): docs/webmcp.md.
     * As a feature, not --enable-blink-features, which Chromium counts as an
     * unsupported flag: a headful window showed a warning bar over the page
     * (in live view, screenshots and replays).
     * NetworkServiceInProcess2: the network service runs in the browser
     * process instead of a utility process of its own (issue 39.1: 16 MB of
     * an idle session's PSS). On Linux that process is not sandboxed
     * (--service-sandbox-type=none), so no Chromium sandbox boundary moves;
     * the session's sandbox holds both alike. docs/runtime.md. */
    "--enable-features=WebMCP,NetworkServiceInProcess2",
    "--disable-features=Translate,OptimizationHints,OptimizationGuideModelDownloading,"
    "OptimizationHintsFetching,MediaRouter,DialMediaRouteProvider,AutofillServerCommunication,"
    "CertificateTransparencyComponentUpdater,InterestFeedContentSuggestions,"
    "PrivacySandboxSettings4,SafeBrowsingEnhancedProtection,NetworkTimeServiceQuerying,"
    "AcceptCHFrame,MediaEngagementBypassAutoplayPolicies,PaintHolding,"
    /* Processes an idle session does not need (issue 39.1, docs/runtime.md):
     * the omnibox popup's WebUI renderer preloaded at start, the spare
     * renderer kept for the next site, and the on-device model service. */
    "WebUIOmniboxPopup,WebUIOmniboxFullPopup,WebUIOmniboxAimPopup,PreloadTopChromeWebUI,"
    "SpareRendererForSitePerProcess,OptimizationGuideOnDeviceModel,OptimizationTargetPrediction",
};

struct chromium {
    pid_t pid;
    unsigned long long start_ticks;
    int exit_fd; /* pidfd, or -1 */
    int reaped;
    int status;
    int64_t started_us, ended_us;

    char *ws_url;
    int port;

    char *user_data_dir;
    char *policy_dir; /* NULL without policy */
    char *log_path;
    char *xvfb_log_path;

    struct xvfb xvfb;
    unsigned long long xvfb_start_ticks;

    char *frame_key;    /* headless: names the browser frame this launch's window has */
    int frame_known;    /* headless: the window was launched grown by the cached frame */
    char *cgroup_dir;   /* NULL when memory is not enforced (unsandboxed path) */
    struct sandbox *sb; /* NULL when unsandboxed; a reference */

    /* stderr drain thread */
    int err_fd;
    int stop_fd; /* eventfd */
    int log_fd;
    long long log_written;
    pthread_t drain;
    int drain_running;
};

/* ---- small helpers ---- */

/* Writes text to path (truncating). Returns 0 or -errno. */
static int write_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return -errno;
    int rc = fdio_write_all(fd, text, strlen(text), FDIO_NO_DEADLINE);
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    return rc;
}

/* mkdir -p: parents 0755, the last component `mode`. Returns 0 or -errno. */
static int mkdir_p(const char *path, mode_t mode)
{
    char *p = xstrdup(path);
    int rc = 0;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            rc = -errno;
            break;
        }
        *s = '/';
    }
    if (rc == 0 && mkdir(p, mode) != 0 && errno != EEXIST)
        rc = -errno;
    xfree(p);
    return rc;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    (void)remove(path);
    return 0;
}

/* rm -rf path (does not follow symlinks). */
static void rm_tree(const char *path)
{
    if (path && path[0] == '/' && path[1] != '\0')
        (void)nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

unsigned long long chromium_proc_start_ticks(pid_t pid)
{
    char path[64], buf[1024];
    if (pid <= 0 || snprintf(path, sizeof path, "/proc/%d/stat", (int)pid) >= (int)sizeof path)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* comm (field 2) may hold spaces and ')': fields resume after the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p)
        return 0;
    p++;
    for (int field = 3; field < 22; field++) {
        p = strchr(p + 1, ' ');
        if (!p)
            return 0;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p + 1, &end, 10);
    if (errno || end == p + 1)
        return 0;
    return v;
}

/* The state letter of /proc/PID/stat field 3, or 0 when unreadable. */
static char pid_state(pid_t pid)
{
    char path[64], buf[512];
    if (snprintf(path, sizeof path, "/proc/%d/stat", (int)pid) >= (int)sizeof path)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p[2] : 0;
}

static int pidfd_open_compat(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

/* ---- the child between fork and exec ---- */

enum spawn_stage {
    STAGE_SETSID = 1,
    STAGE_CGROUP,
    STAGE_UNSHARE,
    STAGE_PRIVATE,
    STAGE_BIND,
    STAGE_RDONLY,
    STAGE_DUP,
    STAGE_EXEC,
    STAGE_SANDBOX = 100, /* + a SBX_STEP_* of sandbox_exec_enter */
};

struct spawn {
    char *const *argv;
    char *const *envp;         /* NULL = environ */
    int in_fd, out_fd, err_fd; /* become 0, 1, 2 */
    int new_session;
    int cg_fd;                      /* -1, or an open cgroup.procs to join */
    const char *policy_src;         /* NULL, or a folder bound onto CHROMIUM_POLICY_DIR */
    const struct sandbox_exec *sbx; /* NULL, or the session's sandbox to enter */
    int report_fd;                  /* CLOEXEC pipe: {stage, errno} on failure, EOF on exec */
};

static void spawn_fail(const struct spawn *s, int stage)
{
    int msg[2] = {stage, errno};
    (void)!write(s->report_fd, msg, sizeof msg);
    _exit(127);
}

static int move_fd(int from, int to)
{
    if (from == to)
        return fcntl(to, F_SETFD, 0);
    return dup2(from, to) < 0 ? -1 : 0;
}

/* Runs in the forked child of a possibly multithreaded server: only
 * async-signal-safe system calls, every string prepared by the parent. */
static void spawn_child(const struct spawn *s)
{
    if (s->new_session && setsid() < 0)
        spawn_fail(s, STAGE_SETSID);
    child_reset_signals();

    if (s->cg_fd >= 0 && write(s->cg_fd, "0", 1) != 1)
        spawn_fail(s, STAGE_CGROUP);
    if (!s->sbx)
        child_oom_score_adj(); /* sandbox_exec_enter does it otherwise */
    if (s->sbx) {
        int step = sandbox_exec_enter(s->sbx);
        if (step)
            spawn_fail(s, STAGE_SANDBOX + step);
    } else if (s->policy_src) {
        if (unshare(CLONE_NEWNS) != 0)
            spawn_fail(s, STAGE_UNSHARE);
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
            spawn_fail(s, STAGE_PRIVATE);
        if (mount(s->policy_src, CHROMIUM_POLICY_DIR, NULL, MS_BIND, NULL) != 0)
            spawn_fail(s, STAGE_BIND);
        if (mount(NULL, CHROMIUM_POLICY_DIR, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) != 0)
            spawn_fail(s, STAGE_RDONLY);
    }
    if (move_fd(s->in_fd, 0) < 0 || move_fd(s->out_fd, 1) < 0 || move_fd(s->err_fd, 2) < 0)
        spawn_fail(s, STAGE_DUP);
    /* Everything else close-on-exec (the report pipe stays usable until exec). */
    child_cloexec_from(3);
    if (sandbox_exec_seccomp(s->sbx) != 0)
        spawn_fail(s, STAGE_SANDBOX + SBX_STEP_SECCOMP);
    execve(s->argv[0], s->argv, s->envp ? s->envp : environ);
    spawn_fail(s, STAGE_EXEC);
}

static const char *stage_text(int stage)
{
    if (stage > STAGE_SANDBOX)
        return sandbox_step_text(stage - STAGE_SANDBOX);
    switch (stage) {
    case STAGE_SETSID:
        return "setsid";
    case STAGE_CGROUP:
        return "joining the memory cgroup (write cgroup.procs)";
    case STAGE_UNSHARE:
        return "unshare(CLONE_NEWNS) for the per-session policy folder";
    case STAGE_PRIVATE:
        return "making mounts private (mount MS_REC|MS_PRIVATE /)";
    case STAGE_BIND:
        return "bind-mounting the policy folder onto " CHROMIUM_POLICY_DIR;
    case STAGE_RDONLY:
        return "remounting " CHROMIUM_POLICY_DIR " read-only";
    case STAGE_DUP:
        return "dup2 of standard descriptors";
    case STAGE_EXEC:
        return "execve";
    }
    return "spawn";
}

/* Forks and execs. Returns the pid, or -1 with e filled (the child is reaped). */
static pid_t spawn_run(struct spawn *s, struct err *e)
{
    int rp[2];
    if (pipe2(rp, O_CLOEXEC) != 0) {
        (void)err_set(e, E_INTERNAL, "internal", "pipe: %s", strerror(errno));
        return -1;
    }
    s->report_fd = rp[1];
    pid_t pid = fork();
    if (pid == 0)
        spawn_child(s);
    int fork_errno = errno;
    close(rp[1]);
    if (pid < 0) {
        close(rp[0]);
        (void)err_set(e, E_INTERNAL, "internal", "fork: %s", strerror(fork_errno));
        return -1;
    }
    int msg[2];
    size_t n = 0;
    (void)!fdio_read_all(rp[0], msg, sizeof msg, &n, FDIO_NO_DEADLINE);
    close(rp[0]);
    if (n != sizeof msg)
        return pid; /* EOF: exec succeeded */
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    int rc = (msg[0] >= STAGE_UNSHARE && msg[0] <= STAGE_RDONLY) ? E_UNAVAIL : E_INTERNAL;
    if (msg[0] > STAGE_SANDBOX)
        rc = E_INTERNAL; /* the server could not enter its own sandbox */
    (void)err_set(e, rc, rc == E_UNAVAIL ? "unavailable" : "internal", "starting %s: %s failed: %s",
                  s->argv[0], stage_text(msg[0]), strerror(msg[1]));
    return -1;
}

/* ---- stealth user agent ---- */

static pthread_mutex_t ua_lock = PTHREAD_MUTEX_INITIALIZER;
static char *ua_binary; /* binary whose version is cached */
static int ua_major;

/* Runs `binary --version` once per binary and returns the major version, or 0. */
static int chromium_major_version(const char *binary)
{
    pthread_mutex_lock(&ua_lock);
    if (ua_binary && strcmp(ua_binary, binary) == 0) {
        int v = ua_major;
        pthread_mutex_unlock(&ua_lock);
        return v;
    }
    pthread_mutex_unlock(&ua_lock);

    int major = 0;
    int out[2] = {-1, -1};
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd >= 0 && pipe2(out, O_CLOEXEC) == 0) {
        char *argv[] = {(char *)binary, (char *)"--version", NULL};
        struct spawn s = {.argv = argv,
                          .in_fd = null_fd,
                          .out_fd = out[1],
                          .err_fd = null_fd,
                          .new_session = 1,
                          .cg_fd = -1};
        struct err e;
        err_init(&e);
        pid_t pid = spawn_run(&s, &e);
        close(out[1]);
        out[1] = -1;
        if (pid > 0) {
            char buf[256];
            size_t used = 0;
            (void)!fdio_read_all(out[0], buf, sizeof buf - 1, &used,
                                 clock_mono_ms() + CR_PROBE_TIMEOUT_MS);
            buf[used] = '\0';
            (void)kill(-pid, SIGKILL);
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
            /* "Chromium 156.0.8078.79 built on ...": the first number followed by '.'. */
            for (char *p = buf; *p; p++) {
                if (*p >= '0' && *p <= '9' && (p == buf || p[-1] == ' ')) {
                    char *end;
                    long v = strtol(p, &end, 10);
                    if (*end == '.' && v > 0 && v < 100000) {
                        major = (int)v;
                        break;
                    }
                }
            }
        }
    }
    if (out[0] >= 0)
        close(out[0]);
    if (out[1] >= 0)
        close(out[1]);
    if (null_fd >= 0)
        close(null_fd);

    pthread_mutex_lock(&ua_lock);
    xfree(ua_binary);
    ua_binary = xstrdup(binary);
    ua_major = major;
    pthread_mutex_unlock(&ua_lock);
    return major;
}

/* ---- cgroup v2 memory limit ---- */

static int cg_warned;

static void cg_warn_once(const char *why, int err_no)
{
    if (__atomic_exchange_n(&cg_warned, 1, __ATOMIC_RELAXED))
        return;
    log_warn("chromium: memory limits are not enforced: %s%s%s", why, err_no ? ": " : "",
             err_no ? strerror(err_no) : "");
}

/* Enables +memory for the children of dir unless it is already on. */
static int cg_enable_memory(const char *dir)
{
    char *path = xasprintf("%s/cgroup.subtree_control", dir);
    int rc = 0;
    char buf[512];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    buf[n > 0 ? n : 0] = '\0';
    if (!strstr(buf, "memory"))
        rc = write_file(path, "+memory", 0644);
    xfree(path);
    return rc;
}

/* Creates CR_CGROUP_PARENT/<name> with memory.max and returns an open
 * cgroup.procs for the child to join, or -1 (logged once) when the host does
 * not allow it. */
static int cg_setup(struct chromium *c, long long max_bytes)
{
    struct statfs sf;
    if (statfs(CR_CGROUP_ROOT, &sf) != 0) {
        cg_warn_once("statfs " CR_CGROUP_ROOT, errno);
        return -1;
    }
    if (sf.f_type != CGROUP2_SUPER_MAGIC) {
        cg_warn_once(CR_CGROUP_ROOT " is not a cgroup v2 mount (cgroup v1 or hybrid host)", 0);
        return -1;
    }
    char ctl[512];
    int fd = open(CR_CGROUP_ROOT "/cgroup.controllers", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, ctl, sizeof ctl - 1) : -1;
    if (fd >= 0)
        close(fd);
    ctl[n > 0 ? n : 0] = '\0';
    if (!strstr(ctl, "memory")) {
        cg_warn_once("the memory controller is not available in " CR_CGROUP_ROOT, 0);
        return -1;
    }
    int rc;
    if (mkdir(CR_CGROUP_PARENT, 0755) != 0 && errno != EEXIST) {
        cg_warn_once("mkdir " CR_CGROUP_PARENT, errno);
        return -1;
    }
    if ((rc = cg_enable_memory(CR_CGROUP_ROOT)) != 0 ||
        (rc = cg_enable_memory(CR_CGROUP_PARENT)) != 0) {
        cg_warn_once("enabling +memory in cgroup.subtree_control", -rc);
        return -1;
    }

    /* Name the cgroup after the user-data folder: unique per live session,
     * and recognisable when cleaning up after a crash. */
    const char *base = strrchr(c->user_data_dir, '/');
    base = base ? base + 1 : c->user_data_dir;
    char name[128];
    size_t k = 0;
    for (; base[k] && k < sizeof name - 2; k++) {
        char ch = base[k];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '-' || ch == '_' || (ch == '.' && k > 0);
        name[k] = ok ? ch : '_';
    }
    if (k == 0)
        name[k++] = '_';
    name[k] = '\0';

    char *dir = xasprintf("%s/%s", CR_CGROUP_PARENT, name);
    if (mkdir(dir, 0755) != 0) {
        /* A leftover from a crashed server: empty cgroups can be removed. */
        if (errno != EEXIST || rmdir(dir) != 0 || mkdir(dir, 0755) != 0) {
            cg_warn_once("mkdir of the session cgroup", errno);
            xfree(dir);
            return -1;
        }
    }
    char *path = xasprintf("%s/memory.max", dir);
    char val[32];
    (void)snprintf(val, sizeof val, "%lld", max_bytes);
    rc = write_file(path, val, 0644);
    xfree(path);
    if (rc != 0) {
        cg_warn_once("writing memory.max", -rc);
        (void)rmdir(dir);
        xfree(dir);
        return -1;
    }
    /* Without this the limit only pushes the browser into swap. */
    path = xasprintf("%s/memory.swap.max", dir);
    (void)write_file(path, "0", 0644);
    xfree(path);

    path = xasprintf("%s/cgroup.procs", dir);
    fd = open(path, O_WRONLY | O_CLOEXEC);
    xfree(path);
    if (fd < 0) {
        cg_warn_once("opening cgroup.procs", errno);
        (void)rmdir(dir);
        xfree(dir);
        return -1;
    }
    c->cgroup_dir = dir;
    return fd;
}

/* Kills whatever is still in the cgroup (crashpad handlers leave the process
 * group but not the cgroup) and removes it. */
static void cg_remove(struct chromium *c)
{
    if (!c->cgroup_dir)
        return;
    char *path = xasprintf("%s/cgroup.kill", c->cgroup_dir);
    (void)write_file(path, "1", 0644);
    xfree(path);
    /* rmdir fails with EBUSY until the last member is reaped (by init for
     * orphans); give it a moment, then leave it for the next launch. */
    for (int i = 0; i < 200; i++) {
        if (rmdir(c->cgroup_dir) == 0 || errno == ENOENT)
            break;
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    xfree(c->cgroup_dir);
    c->cgroup_dir = NULL;
}

/* ---- stderr drain ---- */

static void chromium_log_append(struct chromium *c, const char *p, size_t n)
{
    if (c->log_fd < 0 || c->log_written >= CR_LOG_MAX)
        return;
    if ((long long)n > CR_LOG_MAX - c->log_written)
        n = (size_t)(CR_LOG_MAX - c->log_written);
    if (fdio_write_all(c->log_fd, p, n, FDIO_NO_DEADLINE) == 0)
        c->log_written += (long long)n;
}

/* Copies Chromium's stderr into the log until EOF or until stop_fd fires, so
 * that Chromium never blocks on a full pipe. */
static void *drain_main(void *arg)
{
    struct chromium *c = arg;
    char buf[16384];
    for (;;) {
        struct pollfd p[2] = {{.fd = c->err_fd, .events = POLLIN},
                              {.fd = c->stop_fd, .events = POLLIN}};
        int n = poll(p, 2, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || (p[1].revents & POLLIN))
            break;
        ssize_t r = read(c->err_fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        chromium_log_append(c, buf, (size_t)r);
    }
    return NULL;
}

static void drain_stop(struct chromium *c)
{
    if (c->drain_running) {
        uint64_t one = 1;
        (void)!write(c->stop_fd, &one, sizeof one);
        pthread_join(c->drain, NULL);
        c->drain_running = 0;
    }
    if (c->err_fd >= 0)
        close(c->err_fd);
    if (c->stop_fd >= 0)
        close(c->stop_fd);
    if (c->log_fd >= 0)
        close(c->log_fd);
    c->err_fd = c->stop_fd = c->log_fd = -1;
}

/* ---- exit handling ---- */

/* If the browser has exited: kills the rest of its process group while the
 * zombie leader still pins the group id (so the kill cannot reach a new
 * process that reused the number), then reaps it. Returns 1 once reaped. */
static int reap_if_exited(struct chromium *c)
{
    if (c->reaped)
        return 1;
    if (c->pid <= 0)
        return 1;
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0) {
        if (errno == EINTR)
            return 0;
        /* ECHILD: someone else reaped it (SIGCHLD ignored or waitpid(-1)). */
        c->reaped = 1;
        reaper_forget(c->pid);
        c->status = 0;
        c->ended_us = clock_mono_us();
        return 1;
    }
    if (si.si_pid == 0)
        return 0;
    (void)kill(-c->pid, SIGKILL);
    int st = 0;
    while (waitpid(c->pid, &st, 0) < 0 && errno == EINTR)
        ;
    c->status = st;
    c->reaped = 1;
    reaper_forget(c->pid);
    c->ended_us = clock_mono_us();
    return 1;
}

/* Waits up to ms (< 0: forever) for the browser to exit; 1 once reaped. */
static int wait_exit(struct chromium *c, int ms)
{
    int64_t deadline = clock_mono_us() + (int64_t)ms * 1000;
    for (;;) {
        if (reap_if_exited(c))
            return 1;
        int64_t left = ms < 0 ? 50 : (deadline - clock_mono_us()) / 1000;
        if (left <= 0)
            return 0;
        if (left > 50)
            left = 50;
        if (c->exit_fd >= 0) {
            struct pollfd p = {.fd = c->exit_fd, .events = POLLIN};
            (void)poll(&p, 1, (int)left);
        } else {
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
}

/* ---- launch ---- */

static int validate(const struct chromium_opts *o, int timeout_ms, struct err *e)
{
    const char *d = o->user_data_dir;
    if (!d || !*d)
        (void)err_field(e, "user_data_dir", "is required");
    else if (d[0] != '/' || strcmp(d, "/") == 0)
        (void)err_field(e, "user_data_dir", "must be an absolute path other than /");
    else if (strstr(d, "/../") || strstr(d, "/./") || strstr(d, "//") ||
             (strlen(d) >= 3 && strcmp(d + strlen(d) - 3, "/..") == 0) ||
             (strlen(d) >= 2 && strcmp(d + strlen(d) - 2, "/.") == 0) || d[strlen(d) - 1] == '/')
        (void)err_field(e, "user_data_dir",
                        "must be a normalized path (no ., .., // or trailing /)");
    else if (strlen(d) > PATH_MAX - 32)
        (void)err_field(e, "user_data_dir", "is longer than %d bytes", PATH_MAX - 32);
    if (o->width < 1 || o->width > CR_MAX_SIDE)
        (void)err_field(e, "width", "must be an integer from 1 to %d", CR_MAX_SIDE);
    if (o->height < 1 || o->height > CR_MAX_SIDE)
        (void)err_field(e, "height", "must be an integer from 1 to %d", CR_MAX_SIDE);
    if (o->start_url && (o->start_url[0] == '-' || o->start_url[0] == '\0'))
        (void)err_field(e, "start_url", "must be non-empty and must not start with '-'");
    if (o->proxy_server && o->proxy_server[0] == '\0')
        (void)err_field(e, "proxy_server", "must be NULL or non-empty");
    if (o->memory_max_bytes < 0)
        (void)err_field(e, "memory_max_bytes", "must be >= 0");
    if (timeout_ms < 1)
        (void)err_field(e, "timeout_ms", "must be >= 1");
    if (o->policy_json) {
        json_error_t je;
        json_t *j = json_loads(o->policy_json, JSON_REJECT_DUPLICATES, &je);
        if (!j || !json_is_object(j))
            (void)err_field(e, "policy_json", "must be a JSON object");
        json_decref(j);
    }
    return err_has_fields(e) ? E_INVALID : 0;
}

/* ---- the headless browser frame ---- */

/* What a headless window keeps around its page (the undrawn tab strip and
 * toolbar), learnt by the first launch of a kind of browser (its binary,
 * kiosk or not, Chromium's sandbox on or off: what changes its frame) and
 * used by the next ones to launch a window that size larger, so that their
 * pages are the asked size without a measurement (which waits for the first
 * renderer: about 100 ms of a create). */
#define FRAME_KINDS 8

static pthread_mutex_t frame_lock = PTHREAD_MUTEX_INITIALIZER;
/* Fits that may fail for one kind before its launches stop measuring (each
 * failure costs a create up to CR_FIT_MS): the kind is then recorded with no
 * frame, and its pages keep the size the browser gives them. Seen with an
 * unsandboxed root Chromium whose headless window does not grow past its
 * launch size. */
#define FRAME_FIT_TRIES 3

static struct {
    char *key;
    int w, h;
    int failed; /* fits that failed; the entry counts as known once w, h are set */
    int known;
} frames[FRAME_KINDS];
static int nframes;

static int frame_get(const char *key, int *w, int *h)
{
    int found = 0;
    pthread_mutex_lock(&frame_lock);
    for (int i = 0; i < nframes && !found; i++)
        if (frames[i].known && strcmp(frames[i].key, key) == 0) {
            *w = frames[i].w;
            *h = frames[i].h;
            found = 1;
        }
    pthread_mutex_unlock(&frame_lock);
    return found;
}

/* The entry of key, made when the table has room; NULL when it is full.
 * Called with frame_lock held. */
static int frame_slot(const char *key)
{
    for (int i = 0; i < nframes; i++)
        if (strcmp(frames[i].key, key) == 0)
            return i;
    if (nframes == FRAME_KINDS)
        return -1;
    frames[nframes].key = xstrdup(key);
    return nframes++;
}

/* Records a measured frame (the first of each kind is kept; a full table
 * keeps measuring). */
static void frame_put(const char *key, int w, int h)
{
    pthread_mutex_lock(&frame_lock);
    int i = frame_slot(key);
    if (i >= 0 && !frames[i].known) {
        frames[i].w = w;
        frames[i].h = h;
        frames[i].known = 1;
    }
    pthread_mutex_unlock(&frame_lock);
}

/* Records a fit that failed: past FRAME_FIT_TRIES the kind is known with no
 * frame. 1 when this failure was the last one measured. */
static int frame_failed(const char *key)
{
    int last = 0;
    pthread_mutex_lock(&frame_lock);
    int i = frame_slot(key);
    if (i >= 0 && !frames[i].known && ++frames[i].failed >= FRAME_FIT_TRIES) {
        frames[i].known = 1;
        last = 1;
    }
    pthread_mutex_unlock(&frame_lock);
    return last;
}

static int fit_headless(const char *ws_url, int width, int height, int timeout_ms, int *frame_w,
                        int *frame_h, struct err *e);

/* Headful: grows the browser's first window to the whole screen once it is
 * mapped (runtime/xinput.h xin_fill_screen: launched at the screen's size,
 * Chromium makes it 1 pixel smaller each way). Best effort within
 * timeout_ms, like the headless fit: a window that does not appear keeps
 * the size Chromium gave it. */
static void fill_headful(struct chromium *c, int timeout_ms)
{
    struct err e;
    err_init(&e);
    struct xin *x = NULL;
    int64_t deadline = clock_mono_ms() + timeout_ms;
    int grown = 0,
        rc = xin_open(c->sb ? sandbox_netns(c->sb) : 0, c->xvfb.display, timeout_ms, &x, &e);
    while (rc == 0 && (rc = xin_fill_screen(x, &grown, &e)) == 0 && grown == 0 &&
           clock_mono_ms() < deadline)
        (void)poll(NULL, 0, 10);
    xin_close(x);
    if (rc != 0)
        log_warn("chromium %d: the window could not be grown to the screen: %s", (int)c->pid,
                 e.message);
    else if (grown == 0)
        log_warn("chromium %d: no window to grow to the screen within %d ms", (int)c->pid,
                 timeout_ms);
    else
        log_debug("chromium %d: window grown to the screen in %lld ms", (int)c->pid,
                  (long long)(clock_mono_ms() - deadline + timeout_ms));
}

/* With a sandbox: bwrap's command line first, then Chromium's without
 * --no-sandbox (Chromium's own sandbox runs as the session's user). */
static void build_argv(const struct chromium_opts *o, struct chromium *c,
                       const struct sandbox_exec *x, struct strvec *av)
{
    /* Debian's launcher script is resolved once (runtime/crlauncher.h): its
     * binary runs directly, its flags first, so that the caller's win. */
    const struct crlauncher *l = crlauncher_get(o->binary ? o->binary : CHROMIUM_DEFAULT_BINARY);
    const char *bin = l->exec;
    size_t first = 0;
    /* Inside the sandbox the profile is at a neutral path: chrome://version
     * (its profile path and command line) shows nothing of the host. */
    const char *profile = x ? SANDBOX_PROFILE : c->user_data_dir;
    if (x) {
        /* A binary outside /usr, bound read-only at its own path. */
        const char *outside = strncmp(bin, "/usr/", 5) != 0 ? bin : NULL;
        const char *extra[] = {outside, outside, NULL};
        sandbox_bwrap_argv(x, profile, c->policy_dir ? CHROMIUM_POLICY_DIR : NULL, extra, bin,
                           strvec_push_cb, av);
        first = av->n - 1;
    } else {
        strvec_push(av, xstrdup(bin));
    }
    /* --no-sandbox only for an unsandboxed root server (Chromium refuses to
     * run as root with its sandbox); as any other user its sandbox is on. */
    int no_sandbox = !x && geteuid() == 0;
    for (const char *const *f = l->flags; *f; f++)
        strvec_push(av, xstrdup(*f));
    for (size_t i = 0; i < sizeof cr_fixed_flags / sizeof *cr_fixed_flags; i++)
        if (no_sandbox || strcmp(cr_fixed_flags[i], "--no-sandbox") != 0)
            strvec_push(av, xstrdup(cr_fixed_flags[i]));
    /* Without it --no-sandbox brings an "unsupported command-line flag" bar
     * a moment after the first page, which takes 56 pixels of the page's
     * height after the create answered (chromedriver passes it for the same
     * reason). */
    if (no_sandbox)
        strvec_push(av, xstrdup("--test-type"));
    strvec_push(av, xasprintf("--user-data-dir=%s", profile));
    int fw = 0, fh = 0;
    if (o->headless) {
        c->frame_key = xasprintf("%s|kiosk=%d|nosandbox=%d", bin, o->kiosk, no_sandbox);
        c->frame_known = frame_get(c->frame_key, &fw, &fh);
    }
    strvec_push(av, xasprintf("--window-size=%d,%d", o->width + fw, o->height + fh));
    if (o->headless) {
        strvec_push(av, xstrdup("--headless=new"));
    } else {
        strvec_push(av, xstrdup("--ozone-platform=x11"));
        strvec_push(av, xstrdup("--window-position=0,0"));
        /* Headful Chromium quits when its last window closes: an agent that
         * closed its last tab (@playwright/mcp's browser_tabs close) ended
         * the whole session. Kept alive, the browser opens its next tab in a
         * new window (headless Chromium already stays). */
        strvec_push(av, xstrdup("--keep-alive-for-test"));
    }
    if (o->kiosk)
        strvec_push(av, xstrdup("--kiosk"));
    if (o->stealth) {
        strvec_push(av, xstrdup("--disable-blink-features=AutomationControlled"));
        /* Headful Chromium already says "Chrome/N"; headless says "HeadlessChrome/N". */
        if (o->headless) {
            int major = chromium_major_version(av->v[first]);
            strvec_push(av, xasprintf("--user-agent=Mozilla/5.0 (X11; Linux x86_64) "
                                      "AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%d.0.0.0 "
                                      "Safari/537.36",
                                      major > 0 ? major : 156));
        }
    }
    if (o->proxy_server) {
        strvec_push(av, xasprintf("--proxy-server=%s", o->proxy_server));
        strvec_push(av, xstrdup("--proxy-bypass-list=<-loopback>"));
    }
    /* Debian's Chromium still honours --load-extension (its launcher passes
     * one for the system's extensions; this later one wins). */
    if (o->extension_dirs && o->extension_dirs[0]) {
        char *list = xstrdup("--load-extension=");
        for (size_t i = 0; o->extension_dirs[i]; i++) {
            char *next = xasprintf("%s%s%s", list, i ? "," : "", o->extension_dirs[i]);
            xfree(list);
            list = next;
        }
        strvec_push(av, list);
    }
    for (size_t i = 0; o->extra_args && o->extra_args[i]; i++)
        strvec_push(av, xstrdup(o->extra_args[i]));
    strvec_push(av, xstrdup(o->start_url ? o->start_url : "about:blank"));
}

/* The server's environment without display variables, plus DISPLAY=:N for
 * headful. A sandboxed browser gets a clean environment instead: nothing of
 * the server's (its variables may hold an admin token or a bootstrap key). */
static void build_env(const struct crlauncher *l, int display, const char *home, int sandboxed,
                      struct strvec *ev)
{
    if (l->wrapper) { /* what Debian's launcher script exports */
        strvec_push(ev, xasprintf("CHROME_WRAPPER=%s", l->wrapper));
        strvec_push(ev, xstrdup("CHROME_DESKTOP=chromium.desktop"));
        if (l->version_extra)
            strvec_push(ev, xasprintf("CHROME_VERSION_EXTRA=%s", l->version_extra));
    }
    if (sandboxed) {
        strvec_push(ev, xstrdup("PATH=/usr/bin:/bin"));
        strvec_push(ev, xasprintf("HOME=%s", home));
        strvec_push(ev, xstrdup("TMPDIR=/tmp"));
        strvec_push(ev, xstrdup("LANG=C.UTF-8"));
        const char *tz = getenv("TZ");
        if (tz)
            strvec_push(ev, xasprintf("TZ=%s", tz));
        if (display >= 0)
            strvec_push(ev, xasprintf("DISPLAY=:%d", display));
        return;
    }
    for (char **p = environ; p && *p; p++) {
        if (strncmp(*p, "DISPLAY=", 8) == 0 || strncmp(*p, "WAYLAND_DISPLAY=", 16) == 0 ||
            (l->wrapper && strncmp(*p, "CHROME_", 7) == 0))
            continue;
        strvec_push(ev, xstrdup(*p));
    }
    if (display >= 0)
        strvec_push(ev, xasprintf("DISPLAY=:%d", display));
}

/* Writes <user_data_dir>.policy/policy.json and makes sure the mount target exists. */
static int policy_prepare(struct chromium *c, const char *json, struct err *e)
{
    int rc = mkdir_p(CHROMIUM_POLICY_DIR, 0755);
    if (rc != 0)
        return err_set(e, E_INTERNAL, "internal", "mkdir %s: %s", CHROMIUM_POLICY_DIR,
                       strerror(-rc));
    c->policy_dir = xasprintf("%s.policy", c->user_data_dir);
    rm_tree(c->policy_dir); /* a leftover from a crashed server may hold other files */
    /* Readable by a sandboxed session's user, whatever the server's umask. */
    if (mkdir(c->policy_dir, 0755) != 0 || chmod(c->policy_dir, 0755) != 0)
        return err_set(e, E_INTERNAL, "internal", "mkdir %s: %s", c->policy_dir, strerror(errno));
    char *file = xasprintf("%s/policy.json", c->policy_dir);
    rc = write_file(file, json, 0644);
    if (rc == 0 && chmod(file, 0644) != 0)
        rc = -errno;
    if (rc != 0)
        (void)err_set(e, E_INTERNAL, "internal", "write %s: %s", file, strerror(-rc));
    xfree(file);
    return rc ? E_INTERNAL : 0;
}

/* Looks for the complete DevTools line in buf; fills c->ws_url and c->port. */
static int parse_devtools(struct chromium *c, const char *buf)
{
    const char *p = strstr(buf, CR_DEVTOOLS_PREFIX);
    if (!p)
        return 0;
    p += strlen(CR_DEVTOOLS_PREFIX);
    const char *nl = strchr(p, '\n');
    if (!nl)
        return 0;
    size_t len = (size_t)(nl - p);
    while (len > 0 && (p[len - 1] == '\r' || p[len - 1] == ' '))
        len--;
    static const char want[] = "ws://127.0.0.1:";
    if (len <= sizeof want - 1 || strncmp(p, want, sizeof want - 1) != 0)
        return -1;
    char *end;
    long port = strtol(p + sizeof want - 1, &end, 10);
    if (port < 1 || port > 65535 || strncmp(end, "/devtools/browser/", 18) != 0)
        return -1;
    if (c->sb)
        c->ws_url = xasprintf("ws://ns%d@%.*s", sandbox_netns(c->sb), (int)(len - 5), p + 5);
    else
        c->ws_url = xstrndup(p, len);
    c->port = (int)port;
    return 1;
}

/* Reads stderr until the DevTools line, exit, or the deadline (monotonic us). */
static int wait_devtools(struct chromium *c, int64_t deadline, int timeout_ms, const int *cancel,
                         struct err *e)
{
    char *buf = xmalloc(CR_STARTUP_BUF + 1);
    size_t used = 0;
    int rc = 0;
    for (;;) {
        int64_t left = (deadline - clock_mono_us()) / 1000;
        if (left <= 0) {
            rc = err_set(e, E_UNAVAIL, "unavailable",
                         "browser did not open its DevTools endpoint within %d ms; see %s",
                         timeout_ms, c->log_path);
            break;
        }
        if (cancel && __atomic_load_n(cancel, __ATOMIC_ACQUIRE)) {
            rc = err_set(e, E_UNAVAIL, "unavailable", "the launch was cancelled");
            break;
        }
        if (cancel && left > 50)
            left = 50; /* the flag is looked at this often */
        struct pollfd p = {.fd = c->err_fd, .events = POLLIN};
        int n = poll(&p, 1, (int)left);
        if (n < 0 && errno != EINTR) {
            rc = err_set(e, E_INTERNAL, "internal", "poll: %s", strerror(errno));
            break;
        }
        if (n <= 0)
            continue;
        if (used == CR_STARTUP_BUF) {
            /* Keep the last partial line only. */
            char *nl = memrchr(buf, '\n', used);
            size_t keep = nl ? used - (size_t)(nl + 1 - buf) : 0;
            memmove(buf, buf + used - keep, keep);
            used = keep == CR_STARTUP_BUF ? 0 : keep;
        }
        ssize_t r = read(c->err_fd, buf + used, CR_STARTUP_BUF - used);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            (void)wait_exit(c, 2000);
            buf[used] = '\0';
            char *tail = buf;
            while (strlen(tail) > 300 && strchr(tail, '\n'))
                tail = strchr(tail, '\n') + 1;
            rc = err_set(e, E_UNAVAIL, "unavailable",
                         "browser exited before its DevTools endpoint was ready (wait status %d): "
                         "%.300s",
                         c->reaped ? c->status : -1, tail);
            break;
        }
        chromium_log_append(c, buf + used, (size_t)r);
        used += (size_t)r;
        buf[used] = '\0';
        int got = parse_devtools(c, buf);
        if (got < 0) {
            rc = err_set(e, E_INTERNAL, "internal", "unexpected DevTools line from the browser");
            break;
        }
        if (got > 0)
            break;
    }
    xfree(buf);
    return rc;
}

int chromium_launch(const struct chromium_opts *o, int timeout_ms, struct chromium **out,
                    struct err *e)
{
    *out = NULL;
    int rc = validate(o, timeout_ms, e);
    if (rc)
        return rc;

    struct chromium *c = xcalloc(1, sizeof *c);
    c->exit_fd = c->err_fd = c->stop_fd = c->log_fd = -1;
    c->xvfb.display = -1;
    c->user_data_dir = xstrdup(o->user_data_dir);
    c->log_path = xasprintf("%s.log", c->user_data_dir);
    c->started_us = clock_mono_us();
    int64_t t_begin = c->started_us, t_display, t_spawned;
    int64_t deadline = c->started_us + (int64_t)timeout_ms * 1000; /* Xvfb included */
    int cg_fd = -1, null_fd = -1, ep[2] = {-1, -1};
    struct strvec av = {0}, ev = {0};
    struct sandbox_exec sbx;
    int have_sbx = 0;
    if (o->sandbox)
        c->sb = sandbox_ref(o->sandbox);

    rc = mkdir_p(c->user_data_dir, 0700);
    if (rc != 0) {
        rc = err_set(e, E_INTERNAL, "internal", "mkdir %s: %s", c->user_data_dir, strerror(-rc));
        goto fail;
    }
    c->log_fd = open(c->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    struct stat log_st;
    if (c->log_fd < 0 || fstat(c->log_fd, &log_st) != 0) {
        rc = err_set(e, E_INTERNAL, "internal", "open %s: %s", c->log_path, strerror(errno));
        goto fail;
    }
    c->log_written = log_st.st_size;
    if (o->policy_json && (rc = policy_prepare(c, o->policy_json, e)) != 0)
        goto fail;
    if (c->sb) {
        /* The home belongs to the session's user (a profile extracted into
         * it was written by the server). */
        if ((rc = sandbox_chown_tree(c->sb, c->user_data_dir)) != 0) {
            rc =
                err_set(e, E_INTERNAL, "internal", "chown %s: %s", c->user_data_dir, strerror(-rc));
            goto fail;
        }
        if ((rc = sandbox_exec_open(c->sb, c->user_data_dir, c->policy_dir, &sbx, e)) != 0)
            goto fail;
        have_sbx = 1;
        if ((rc = sandbox_exec_browser(&sbx, e)) != 0)
            goto fail;
    } else if (o->memory_max_bytes > 0) {
        cg_fd = cg_setup(c, o->memory_max_bytes);
    }
    if (!o->headless) {
        c->xvfb_log_path = xasprintf("%s.xvfb.log", c->user_data_dir);
        rc = xvfb_start(NULL, c->sb, o->width, o->height, c->xvfb_log_path,
                        timeout_ms < CR_XVFB_TIMEOUT_MS ? timeout_ms : CR_XVFB_TIMEOUT_MS, &c->xvfb,
                        e);
        if (rc)
            goto fail;
        c->xvfb_start_ticks = chromium_proc_start_ticks(c->xvfb.pid);
    }
    t_display = clock_mono_us();

    build_argv(o, c, have_sbx ? &sbx : NULL, &av);
    /* With the session's own files, HOME is the session's home: the browser
     * saves downloads to ~/Downloads, where the fs API sees them. */
    build_env(crlauncher_get(o->binary ? o->binary : CHROMIUM_DEFAULT_BINARY), c->xvfb.display,
              sandbox_root(c->sb) ? SANDBOX_HOME
              : c->sb             ? SANDBOX_PROFILE
                                  : c->user_data_dir,
              c->sb != NULL, &ev);
    null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0 || pipe2(ep, O_CLOEXEC) != 0) {
        rc = err_set(e, E_INTERNAL, "internal", "open /dev/null or pipe: %s", strerror(errno));
        goto fail;
    }
    struct spawn s = {.argv = av.v,
                      .envp = ev.v,
                      .in_fd = null_fd,
                      .out_fd = null_fd,
                      .err_fd = ep[1],
                      .new_session = 1,
                      .cg_fd = cg_fd,
                      .policy_src = c->policy_dir,
                      .sbx = have_sbx ? &sbx : NULL};
    c->started_us = clock_mono_us();
    pid_t pid = spawn_run(&s, e);
    if (have_sbx) {
        sandbox_exec_close(&sbx);
        have_sbx = 0;
    }
    close(ep[1]);
    ep[1] = -1;
    c->err_fd = ep[0];
    ep[0] = -1;
    if (pid < 0) {
        rc = e->rc ? e->rc : E_INTERNAL;
        goto fail;
    }
    c->pid = pid;
    reaper_watch(pid);
    c->start_ticks = chromium_proc_start_ticks(pid);
    c->exit_fd = pidfd_open_compat(pid);
    if (c->exit_fd >= 0)
        (void)fcntl(c->exit_fd, F_SETFD, FD_CLOEXEC);

    t_spawned = clock_mono_us();
    if ((rc = wait_devtools(c, deadline, timeout_ms, o->cancel, e)) != 0)
        goto fail;
    log_debug("chromium %d: DevTools ready %lld ms after the launch began (display %lld ms, "
              "spawn %lld ms, then DevTools)",
              (int)pid, (long long)(clock_mono_us() - t_begin) / 1000,
              (long long)(t_display - t_begin) / 1000, (long long)(t_spawned - t_display) / 1000);

    c->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (c->stop_fd < 0) {
        rc = err_set(e, E_INTERNAL, "internal", "eventfd: %s", strerror(errno));
        goto fail;
    }
    int perr = pthread_create(&c->drain, NULL, drain_main, c);
    if (perr != 0) {
        rc = err_set(e, E_INTERNAL, "internal", "pthread_create: %s", strerror(perr));
        goto fail;
    }
    c->drain_running = 1;

    /* Headless: the page's viewport is the size asked for (docs/runtime.md).
     * Best effort: a first page that does not answer (a start_url that
     * opens a dialog at once) leaves the window as launched. */
    if (o->headless && !c->frame_known) {
        struct err fe;
        err_init(&fe);
        int fw, fh;
        if (fit_headless(c->ws_url, o->width, o->height, CR_FIT_MS, &fw, &fh, &fe) != 0)
            log_warn("chromium %d: the headless page could not be sized to %dx%d: %s%s", (int)pid,
                     o->width, o->height, fe.message,
                     frame_failed(c->frame_key)
                         ? " (the last try: headless pages of this kind keep the size the "
                           "browser gives them)"
                         : "");
        else
            frame_put(c->frame_key, fw, fh);
    }

    if (!o->headless)
        fill_headful(c, CR_FIT_MS);

    if (cg_fd >= 0)
        close(cg_fd);
    close(null_fd);
    strvec_free(&av);
    strvec_free(&ev);
    *out = c;
    return 0;

fail:
    if (have_sbx)
        sandbox_exec_close(&sbx);
    if (cg_fd >= 0)
        close(cg_fd);
    if (null_fd >= 0)
        close(null_fd);
    if (ep[0] >= 0)
        close(ep[0]);
    if (ep[1] >= 0)
        close(ep[1]);
    strvec_free(&av);
    strvec_free(&ev);
    chromium_stop(c, 0, 0);
    chromium_free(c);
    return rc;
}

/* ---- headless geometry ---- */

/* Sleeps ms milliseconds (a short retry pause of the fitting below). */
static void fit_pause(int ms)
{
    struct timespec ts = {0, (long)ms * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* What is left of a deadline, at least 1 ms. */
static int fit_left(int64_t deadline)
{
    int64_t left = deadline - clock_mono_ms();
    return left < 1 ? 1 : (int)left;
}

/* One call with params stolen; *res (may be NULL) owned. */
static int fit_call(struct cdp_client *cc, const char *sid, const char *method, json_t *params,
                    int timeout_ms, json_t **res, struct err *e)
{
    json_t *r = NULL;
    int rc = cdp_client_call(cc, sid, method, params, 1, timeout_ms, &r, e);
    json_decref(params);
    if (res)
        *res = r;
    else
        json_decref(r);
    return rc;
}

/* The page's innerWidth x innerHeight. */
static int fit_viewport(struct cdp_client *cc, const char *sid, int timeout_ms, int *iw, int *ih,
                        struct err *e)
{
    json_t *m = NULL;
    int rc = fit_call(
        cc, sid, "Runtime.evaluate",
        json_pack("{s:s,s:b}", "expression", "[innerWidth, innerHeight]", "returnByValue", 1),
        timeout_ms, &m, e);
    json_t *v = json_object_get(json_object_get(m, "result"), "value");
    *iw = (int)json_integer_value(json_array_get(v, 0));
    *ih = (int)json_integer_value(json_array_get(v, 1));
    json_decref(m);
    return rc;
}

/* chromium_fit_headless, and the frame it found (*frame_w x *frame_h). */
static int fit_headless(const char *ws_url, int width, int height, int timeout_ms, int *frame_w,
                        int *frame_h, struct err *e)
{
    int64_t deadline = clock_mono_ms() + timeout_ms;
    struct cdp_client *cc = NULL;
    int rc = cdp_client_open(ws_url, timeout_ms, &cc, e);
    if (rc)
        return rc;
    /* The first page appears a moment after DevTools listens. */
    char target[128];
    while ((rc = cdp_page_first(cc, fit_left(deadline), target, sizeof target, e)) == E_NOTFOUND &&
           clock_mono_ms() < deadline)
        fit_pause(20);
    if (rc == E_NOTFOUND)
        rc = err_set(e, E_UNAVAIL, "unavailable", "the browser opened no page to size");
    json_t *win = NULL;
    char sid[128] = "";
    if (rc == 0)
        rc = fit_call(cc, NULL, "Browser.getWindowForTarget",
                      json_pack("{s:s}", "targetId", target), fit_left(deadline), &win, e);
    if (rc == 0)
        rc = cdp_page_attach(cc, target, fit_left(deadline), sid, sizeof sid, e);
    /* The frame the browser keeps around the page (window bounds less the
     * page's viewport), then the window that many pixels larger than the
     * asked size, waited for until the page has taken it (a resize reaches
     * the renderer a moment later). The frame may grow after the first
     * measurement (an unsandboxed root Chromium shows its "unsupported
     * command-line flag" bar a moment after its first page): a viewport
     * that moved after a resize and then stayed put, but not at the asked
     * size, is measured again, at most FIT_SETS times. */
    json_t *b = json_object_get(win, "bounds");
    int bw = (int)json_integer_value(json_object_get(b, "width"));
    int bh = (int)json_integer_value(json_object_get(b, "height"));
    int iw = 0, ih = 0, fw = 0, fh = 0, sets = 0, moved = 0, pw = 0, ph = 0;
    enum { FIT_SETS = 3 };
    while (rc == 0) {
        if ((rc = fit_viewport(cc, sid, fit_left(deadline), &iw, &ih, e)) != 0)
            break;
        if (iw == width && ih == height)
            break;
        if (clock_mono_ms() >= deadline) {
            rc = err_set(e, E_UNAVAIL, "unavailable", "the page's viewport stayed %dx%d, not %dx%d",
                         iw, ih, width, height);
            break;
        }
        int settled = iw > 0 && ih > 0 && (sets == 0 || (moved && iw == pw && ih == ph));
        if (sets > 0 && (iw != pw || ih != ph))
            moved = 1;
        pw = iw;
        ph = ih;
        if (!settled || sets == FIT_SETS) {
            fit_pause(20);
            continue;
        }
        fw = bw - iw;
        fh = bh - ih;
        if (fw < 0 || fh < 0 || fw > width || fh > height) {
            rc = err_set(e, E_INTERNAL, "internal", "the browser's frame %dx%d is not plausible",
                         fw, fh);
            break;
        }
        bw = width + fw;
        bh = height + fh;
        rc = fit_call(cc, NULL, "Browser.setWindowBounds",
                      json_pack("{s:O,s:{s:i,s:i,s:s}}", "windowId",
                                json_object_get(win, "windowId"), "bounds", "width", bw, "height",
                                bh, "windowState", "normal"),
                      fit_left(deadline), NULL, e);
        sets++;
        moved = 0;
    }
    if (sid[0]) {
        struct err ignore;
        err_init(&ignore);
        (void)!fit_call(cc, NULL, "Target.detachFromTarget", json_pack("{s:s}", "sessionId", sid),
                        fit_left(deadline), NULL, &ignore);
    }
    json_decref(win);
    cdp_client_close(cc);
    *frame_w = fw;
    *frame_h = fh;
    return rc;
}

int chromium_fit_headless(const char *ws_url, int width, int height, int timeout_ms, struct err *e)
{
    int fw, fh;
    return fit_headless(ws_url, width, height, timeout_ms, &fw, &fh, e);
}

/* ---- accessors ---- */

const char *chromium_ws_url(const struct chromium *c)
{
    return c->ws_url;
}

int chromium_port(const struct chromium *c)
{
    return c->port;
}

pid_t chromium_pid(const struct chromium *c)
{
    return c->pid;
}

unsigned long long chromium_start_ticks(const struct chromium *c)
{
    return c->start_ticks;
}

pid_t chromium_xvfb_pid(const struct chromium *c)
{
    return c->xvfb.pid;
}

unsigned long long chromium_xvfb_start_ticks(const struct chromium *c)
{
    return c->xvfb.pid > 0 ? c->xvfb_start_ticks : 0;
}

int chromium_display(const struct chromium *c)
{
    return c->xvfb.pid > 0 ? c->xvfb.display : -1;
}

void chromium_screen_size(const struct chromium *c, int *width, int *height)
{
    *width = c->xvfb.pid > 0 ? c->xvfb.width : 0;
    *height = c->xvfb.pid > 0 ? c->xvfb.height : 0;
}

long long chromium_uptime_ms(const struct chromium *c)
{
    int64_t end = c->reaped ? c->ended_us : clock_mono_us();
    return (long long)((end - c->started_us) / 1000);
}

int chromium_memory_enforced(const struct chromium *c)
{
    return c->sb ? sandbox_memory_enforced(c->sb) : c->cgroup_dir != NULL;
}

struct sandbox *chromium_sandbox(const struct chromium *c)
{
    return c->sb;
}

const char *chromium_cgroup_path(const struct chromium *c)
{
    return c->cgroup_dir;
}

int chromium_exit_fd(const struct chromium *c)
{
    return c->exit_fd;
}

/* ---- lifecycle ---- */

int chromium_exited(struct chromium *c, int *status)
{
    int done = reap_if_exited(c);
    if (done && status)
        *status = c->status;
    return done;
}

int chromium_resize_screen(struct chromium *c, int width, int height, struct err *e)
{
    if (width < 1 || height < 1)
        return err_set(e, E_INVALID, "bad_request", "screen size %dx%d is invalid", width, height);
    if (c->xvfb.pid <= 0)
        return 0;
    if (width <= c->xvfb.width && height <= c->xvfb.height)
        return 0;
    return err_set(e, E_NOTIMPL, "not_implemented",
                   "the Xvfb screen (%dx%d) cannot grow to %dx%d at runtime; relaunch the browser",
                   c->xvfb.width, c->xvfb.height, width, height);
}

void chromium_kill(struct chromium *c)
{
    if (!c || c->pid <= 0 || c->reaped)
        return;
    if (c->sb)
        (void)sandbox_set_background(c->sb, 0);
    /* The unreaped leader pins the group id: the kill reaches no newcomer. */
    (void)kill(-c->pid, SIGKILL);
}

void chromium_stop(struct chromium *c, int grace_ms, int remove_dir)
{
    if (!c)
        return;
    if (c->pid > 0 && !c->reaped) {
        if (!reap_if_exited(c)) {
            if (c->sb)
                (void)sandbox_set_background(c->sb, 0);
            (void)kill(-c->pid, SIGTERM);
            if (!wait_exit(c, grace_ms > 0 ? grace_ms : 0)) {
                (void)kill(-c->pid, SIGKILL);
                (void)wait_exit(c, -1);
            }
        }
    }
    cg_remove(c);
    drain_stop(c);
    xvfb_stop(&c->xvfb, grace_ms > 0 ? grace_ms : 0);
    if (c->policy_dir) {
        rm_tree(c->policy_dir);
        xfree(c->policy_dir);
        c->policy_dir = NULL;
    }
    if (remove_dir) {
        rm_tree(c->user_data_dir);
        (void)unlink(c->log_path);
        if (c->xvfb_log_path)
            (void)unlink(c->xvfb_log_path);
    }
}

void chromium_free(struct chromium *c)
{
    if (!c)
        return;
    chromium_stop(c, 0, 0);
    if (c->exit_fd >= 0)
        close(c->exit_fd);
    sandbox_unref(c->sb);
    xfree(c->ws_url);
    xfree(c->frame_key);
    xfree(c->user_data_dir);
    xfree(c->log_path);
    xfree(c->xvfb_log_path);
    xfree(c);
}

int chromium_kill_stale(pid_t pid, unsigned long long start_ticks)
{
    if (pid <= 1 || start_ticks == 0)
        return 0;
    /* The pidfd is taken before the check, so the final SIGKILL through it
     * cannot reach a newcomer that reused the number after the check. The
     * group kill keeps a tiny window (the group id is a plain number). */
    int pfd = pidfd_open_compat(pid);
    if (pfd < 0 && errno != ENOSYS)
        return 0;
    int killed = 0;
    char st = pid_state(pid);
    if (chromium_proc_start_ticks(pid) == start_ticks && st != 'Z' && st != 'X' && st != 0) {
        (void)kill(-pid, SIGKILL); /* the group: browsers are group leaders */
#ifdef SYS_pidfd_send_signal
        if (pfd < 0 || syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0) != 0)
            (void)kill(pid, SIGKILL);
#else
        (void)kill(pid, SIGKILL);
#endif
        killed = 1;
    }
    if (pfd >= 0)
        close(pfd);
    return killed;
}
