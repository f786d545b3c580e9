#include "runtime/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/path.h"
#include "core/netns.h"
#include "core/xalloc.h"
#include "domain/mem_pressure.h"
#include "runtime/cgroup.h"
#include "runtime/admit.h"
#include "runtime/child.h"
#include "runtime/reaper.h"
#include "runtime/sysfilter.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

#define CG_ROOT "/sys/fs/cgroup"
#define CG_MAX  3 /* v1: memory, pids, cpu; v2: one */

enum cg_kind { CG_NONE, CG_V1, CG_V2 };

static int enabled;
/* 1 when sysfilter_init built the seccomp programs. */
static int filtered;
static enum cg_kind cg_kind = CG_NONE;
/* v1 hierarchies in use, in the order of struct sandbox's cg[]. */
static const char *const v1_hier[CG_MAX] = {"memory", "pids", "cpu"};
static int v1_have[CG_MAX];
/* v1 cpu: a session's cpu cgroup is a child of the server's own cpu cgroup
 * (read at each create: an operator may move the server) with no folder
 * between them, so that a session's group is a sibling of the server's
 * threads (a background group yields to them, not only to other sessions)
 * and stays inside any CPU limit set on the server. */

struct sandbox {
    int refs; /* atomic */
    uid_t uid;
    int uid_lock_fd;
    char uid_lock_path[128];
    int nsfd;         /* the network namespace (our own descriptor) */
    int netns_id;     /* registered with core/netns */
    char *cg[CG_MAX]; /* cgroup folders, NULL where not used */
    int memory_enforced;
    char *root;         /* the session's own files (a tmpfs), NULL until sandbox_root_create */
    char *owner;        /* the organization whose reservation this is, NULL for a spare */
    long long reserved; /* memory bytes reserved with runtime/admit, -1 before */
    int background;     /* sandbox_set_background's last word (under weigh_mu) */
    struct sandbox *wprev, *wnext; /* the live sandboxes (under weigh_mu) */
};

/* ---- CPU per organization ----
 *
 * Each sandbox has a cpu group of its own, and groups of equal weight share
 * a busy CPU equally: an organization with N busy sessions would take N
 * parts to another's one. So the weight of an organization's foreground
 * groups is divided among them (LIM_CPU_WEIGHT_PER_ORG: 1024 cpu.shares, or
 * 100 cpu.weight on v2, split N ways, never below the kernel's minimum),
 * set again whenever one of them comes, goes, is adopted or changes
 * priority. Spares (no owner) and background groups keep their own. */
static int write_text(const char *path, const char *text);
static pthread_mutex_t weigh_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sandbox *weighed; /* the live sandboxes, newest first */

static void reweigh_locked(const char *owner)
{
    if (!owner)
        return;
    int n = 0;
    for (struct sandbox *x = weighed; x; x = x->wnext)
        n += x->owner && !x->background && strcmp(x->owner, owner) == 0;
    if (n == 0)
        return;
    char shares[32], weight[32];
    snprintf(shares, sizeof shares, "%d",
             LIM_CPU_SHARES_PER_ORG / n > 2 ? LIM_CPU_SHARES_PER_ORG / n : 2);
    snprintf(weight, sizeof weight, "%d",
             LIM_CPU_WEIGHT_PER_ORG / n > 1 ? LIM_CPU_WEIGHT_PER_ORG / n : 1);
    for (struct sandbox *x = weighed; x; x = x->wnext) {
        if (!x->owner || x->background || strcmp(x->owner, owner) != 0)
            continue;
        for (int i = 0; i < CG_MAX; i++) {
            if (!x->cg[i])
                continue;
            char p[600];
            snprintf(p, sizeof p, "%s/cpu.weight", x->cg[i]);
            if (write_text(p, weight) == 0)
                continue;
            snprintf(p, sizeof p, "%s/cpu.shares", x->cg[i]);
            (void)write_text(p, shares);
        }
    }
}

static void weigh_add(struct sandbox *sb)
{
    pthread_mutex_lock(&weigh_mu);
    sb->wprev = NULL;
    sb->wnext = weighed;
    if (weighed)
        weighed->wprev = sb;
    weighed = sb;
    reweigh_locked(sb->owner);
    pthread_mutex_unlock(&weigh_mu);
}

static void weigh_remove(struct sandbox *sb)
{
    pthread_mutex_lock(&weigh_mu);
    if (sb->wprev)
        sb->wprev->wnext = sb->wnext;
    else if (weighed == sb)
        weighed = sb->wnext;
    if (sb->wnext)
        sb->wnext->wprev = sb->wprev;
    sb->wprev = sb->wnext = NULL;
    reweigh_locked(sb->owner);
    pthread_mutex_unlock(&weigh_mu);
}

/* ---- small file helpers ---- */

static int write_text(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t n = strlen(text);
    ssize_t w = write(fd, text, n);
    int rc = w == (ssize_t)n ? 0 : (w < 0 ? -errno : -EIO);
    close(fd);
    return rc;
}

/* mkdir, or an existing folder; either way with exactly `mode` (the server
 * runs with umask 077, and these folders must be traversable by sessions'
 * users). */
static int mkdir_ok(const char *path, mode_t mode)
{
    if (mkdir(path, mode) != 0 && errno != EEXIST)
        return -errno;
    return chmod(path, mode) == 0 ? 0 : -errno;
}

static int touch_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    int rc = fchmod(fd, 0644) == 0 ? 0 : -errno; /* whatever the umask */
    close(fd);
    return rc;
}

/* "key N" in a flat-keyed cgroup file, or 0. */
static long long keyed_value(const char *path, const char *key)
{
    char buf[2048];
    if (path_read_small(path, buf, sizeof buf) <= 0)
        return 0;
    size_t kl = strlen(key);
    for (char *p = buf; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, key, kl) == 0 && p[kl] == ' ')
            return strtoll(p + kl + 1, NULL, 10);
    return 0;
}

/* ---- start ---- */

/* The folder of this process's cgroup in the v1 cpu hierarchy (the line of
 * /proc/self/cgroup whose controller list names "cpu"), into out. 0, or -1
 * when there is no such hierarchy or its folder lacks cpu.shares. */
static int v1_own_cpu_cgroup(char *out, size_t cap)
{
    char buf[4096];
    if (path_read_small("/proc/self/cgroup", buf, sizeof buf) <= 0)
        return -1;
    for (char *line = buf, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char *ctl = strchr(line, ':');
        char *path = ctl ? strchr(ctl + 1, ':') : NULL;
        if (!path)
            continue;
        *path++ = '\0';
        int cpu = 0;
        for (char *save = NULL, *tok = strtok_r(ctl + 1, ",", &save); tok;
             tok = strtok_r(NULL, ",", &save))
            cpu |= strcmp(tok, "cpu") == 0;
        if (!cpu)
            continue;
        int n = snprintf(out, cap, CG_ROOT "/cpu%s", strcmp(path, "/") == 0 ? "" : path);
        if (n < 0 || (size_t)n >= cap)
            return -1;
        char probe[600];
        snprintf(probe, sizeof probe, "%s/cpu.shares", out);
        return access(probe, W_OK) == 0 ? 0 : -1;
    }
    return -1;
}

static int cg_detect(void)
{
    struct statfs sf;
    if (statfs(CG_ROOT, &sf) != 0)
        return CG_NONE;
    if (sf.f_type == CGROUP2_SUPER_MAGIC) {
        if (mkdir_ok(CG_ROOT "/browserd", 0755) != 0)
            return CG_NONE;
        char ctl[512];
        (void)path_read_small(CG_ROOT "/cgroup.controllers", ctl, sizeof ctl);
        static const char *const want[] = {"memory", "pids", "cpu"};
        for (size_t i = 0; i < 3; i++) {
            if (!strstr(ctl, want[i]))
                continue;
            char on[16];
            snprintf(on, sizeof on, "+%s", want[i]);
            (void)write_text(CG_ROOT "/cgroup.subtree_control", on);
            (void)write_text(CG_ROOT "/browserd/cgroup.subtree_control", on);
        }
        return CG_V2;
    }
    int any = 0;
    for (int i = 0; i < CG_MAX; i++) {
        char p[256];
        if (strcmp(v1_hier[i], "cpu") == 0) {
            char own[512];
            v1_have[i] = v1_own_cpu_cgroup(own, sizeof own) == 0;
            continue; /* CPU alone does not make a sandbox: memory or pids must be there */
        }
        snprintf(p, sizeof p, CG_ROOT "/%s/browserd", v1_hier[i]);
        v1_have[i] = mkdir_ok(p, 0755) == 0;
        any |= v1_have[i];
    }
    return any ? CG_V1 : CG_NONE;
}

/*
 * cgroup v1: migrations without a grace period. A session's first process
 * joins the session's cgroups by a migration, and a migration after a quiet
 * moment waits for an RCU grace period (the kernel's cgroup_threadgroup_rwsem
 * changing hands: 6.8 ms on the 2-core build VM, 10-13 ms under load), which
 * every cold create paid. While any hierarchy is mounted with favordynmods
 * (Linux 6.0+) the kernel keeps that lock ready for writers instead: a
 * migration takes 0.2 ms, and forks and exits take the lock's slower read
 * side. The server mounts a hierarchy without controllers ("name=browserd",
 * favordynmods) in a mount namespace of its own, made by a short-lived thread
 * and kept alive by one descriptor: the host's mount table does not show it,
 * and when the last server holding it ends, the namespace, the mount and the
 * hierarchy go, and with them the option. Best effort: an older kernel
 * refuses the option and migrations keep their wait.
 */
static int dynmods_ns_fd = -1;

static void *dynmods_thread(void *arg)
{
    int *out = arg;
    /* A thread may leave the process's mount namespace alone (it unshares
     * its own filesystem context with it). */
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("cgroup", SANDBOX_STAGE "/dynmods", "cgroup", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "none,name=browserd,favordynmods") != 0) {
        *out = -errno;
        return NULL;
    }
    *out = open("/proc/thread-self/ns/mnt", O_RDONLY | O_CLOEXEC);
    if (*out < 0)
        *out = -errno;
    return NULL;
}

static void cg_favor_dynmods(void)
{
    if (dynmods_ns_fd >= 0 || mkdir_ok(SANDBOX_STAGE "/dynmods", 0700) != 0)
        return;
    int fd = -EIO;
    pthread_t t;
    if (pthread_create(&t, NULL, dynmods_thread, &fd) != 0)
        return;
    pthread_join(t, NULL);
    if (fd < 0) {
        log_info("sandbox: cgroup v1 migrations keep their grace period (favordynmods: %s)",
                 strerror(-fd));
        return;
    }
    dynmods_ns_fd = fd;
    log_info("sandbox: cgroup v1 migrations without a grace period (favordynmods)");
}

/*
 * The sessions' parent cgroup (browserd/, shared by every server of the
 * host) gets a memory limit LIM_HOST_MEMORY_RESERVE_BYTES below the host's
 * memory (half of it on a small host). Admission lets the sessions' own
 * limits add up past the host's memory (BROWSERD_MEMORY_OVERCOMMIT); if they
 * all allocate at once, the kernel's out-of-memory kill then happens inside
 * browserd/ and picks a session's process, instead of a global one that
 * stalls the host and may pick the server or anything else on it.
 */
static void cg_cap_sessions(void)
{
    long long host = admit_host_memory();
    if (host <= 0)
        return;
    long long cap =
        host > 2 * LIM_HOST_MEMORY_RESERVE_BYTES ? host - LIM_HOST_MEMORY_RESERVE_BYTES : host / 2;
    char val[32];
    snprintf(val, sizeof val, "%lld", cap);
    const char *file = cg_kind == CG_V2 ? CG_ROOT "/browserd/memory.max"
                       : v1_have[0]     ? CG_ROOT "/memory/browserd/memory.limit_in_bytes"
                                        : NULL;
    if (!file)
        return;
    int rc = write_text(file, val);
    if (rc != 0)
        log_warn("sandbox: cannot cap the sessions' memory together at %lld MiB (%s): %s",
                 cap >> 20, file, strerror(-rc));
    else
        log_info("sandbox: sessions' memory together capped at %lld MiB (the host's %lld MiB "
                 "less %lld MiB)",
                 cap >> 20, host >> 20, (host - cap) >> 20);
}

int sandbox_init(int off)
{
    enabled = 0;
    if (off) {
        log_warn("sandbox: off (BROWSERD_SANDBOX=off): browsers run as the server's user, in "
                 "its filesystem and network");
        return 0;
    }
    if (geteuid() != 0) {
        log_warn("sandbox: the server does not run as root, so sessions get reduced isolation: "
                 "browsers run as the server's user with Chromium's own sandbox, without a "
                 "private filesystem, network namespace or cgroup (docs/sandbox.md)");
        return 0;
    }
    if (access(SANDBOX_BWRAP, X_OK) != 0) {
        log_error("sandbox: %s is missing (Debian package bubblewrap): browsers run unsandboxed",
                  SANDBOX_BWRAP);
        return 0;
    }
    int rc = netns_init();
    int fd = rc == 0 ? netns_create() : rc;
    if (fd < 0) {
        log_error("sandbox: cannot make a network namespace (%s): browsers run unsandboxed",
                  strerror(-fd));
        return 0;
    }
    close(fd);
    if (mkdir_ok(SANDBOX_STAGE, 0755) != 0 || mkdir_ok(SANDBOX_STAGE "/home", 0755) != 0 ||
        mkdir_ok(SANDBOX_STAGE "/policy", 0755) != 0 || touch_file(SANDBOX_STAGE "/file") != 0 ||
        mkdir_ok(SANDBOX_STAGE "/root", 0755) != 0 || mkdir_ok(SANDBOX_STAGE "/uids", 0700) != 0) {
        log_error("sandbox: cannot create %s (%s): browsers run unsandboxed", SANDBOX_STAGE,
                  strerror(errno));
        return 0;
    }
    cg_kind = cg_detect();
    if (cg_kind == CG_V1)
        cg_favor_dynmods();
    cg_cap_sessions();
    if (cg_kind == CG_NONE)
        log_warn("sandbox: no usable cgroup hierarchy under " CG_ROOT
                 ": no memory or pids limits, and teardown relies on the PID namespace");
    filtered = sysfilter_init() == 0;
    if (!filtered)
        log_error("sandbox: sessions run without their seccomp filter (see above)");
    enabled = 1;
    log_info("sandbox: on (bubblewrap, one uid and network namespace per session, cgroup %s%s)",
             sandbox_cgroup_kind(), filtered ? ", seccomp" : "");
    return 1;
}

int sandbox_enabled(void)
{
    return enabled;
}

const char *sandbox_cgroup_kind(void)
{
    return cg_kind == CG_V2 ? "v2" : cg_kind == CG_V1 ? "v1" : "none";
}

/* ---- create / destroy ---- */

static int uid_take(struct sandbox *sb)
{
    unsigned char r[4];
    crypto_random(r, sizeof r);
    unsigned start = ((unsigned)r[0] | (unsigned)r[1] << 8) % SANDBOX_UID_COUNT;
    for (unsigned k = 0; k < 512; k++) {
        uid_t uid = SANDBOX_UID_BASE + (start + k * 7919u) % SANDBOX_UID_COUNT;
        char path[128];
        snprintf(path, sizeof path, SANDBOX_STAGE "/uids/%u", (unsigned)uid);
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0)
            return -errno;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            sb->uid = uid;
            sb->uid_lock_fd = fd;
            snprintf(sb->uid_lock_path, sizeof sb->uid_lock_path, "%s", path);
            return 0;
        }
        close(fd);
    }
    return -EAGAIN;
}

static void warn_limits_once(const char *what);

static int cg_make(struct sandbox *sb, const char *name, long long memory_max, struct err *e)
{
    char val[32];
    if (cg_kind == CG_V2) {
        sb->cg[0] = xasprintf(CG_ROOT "/browserd/%s", name);
        if (mkdir(sb->cg[0], 0755) != 0 && errno != EEXIST)
            return err_set(e, E_INTERNAL, "internal", "sandbox: mkdir %s: %s", sb->cg[0],
                           strerror(errno));
        snprintf(val, sizeof val, "%d", SANDBOX_PIDS_MAX);
        char p[512];
        snprintf(p, sizeof p, "%s/pids.max", sb->cg[0]);
        (void)write_text(p, val);
        if (memory_max > 0) {
            snprintf(val, sizeof val, "%lld", memory_max);
            snprintf(p, sizeof p, "%s/memory.max", sb->cg[0]);
            sb->memory_enforced = write_text(p, val) == 0;
            snprintf(p, sizeof p, "%s/memory.swap.max", sb->cg[0]);
            (void)write_text(p, "0");
        }
        return 0;
    }
    if (cg_kind != CG_V1)
        return 0;
    for (int i = 0; i < CG_MAX; i++) {
        if (!v1_have[i])
            continue;
        if (strcmp(v1_hier[i], "cpu") == 0) {
            char own[512];
            if (v1_own_cpu_cgroup(own, sizeof own) != 0)
                continue;
            sb->cg[i] = xasprintf("%s/browserd-%s", own, name);
            if (mkdir(sb->cg[i], 0755) != 0 && errno != EEXIST) {
                /* Optional: the session runs without its own CPU share. */
                warn_limits_once("a CPU share of their own");
                xfree(sb->cg[i]);
                sb->cg[i] = NULL;
            }
            continue;
        } else {
            sb->cg[i] = xasprintf(CG_ROOT "/%s/browserd/%s", v1_hier[i], name);
        }
        if (mkdir(sb->cg[i], 0755) != 0 && errno != EEXIST)
            return err_set(e, E_INTERNAL, "internal", "sandbox: mkdir %s: %s", sb->cg[i],
                           strerror(errno));
    }
    char p[512];
    if (sb->cg[1]) {
        snprintf(val, sizeof val, "%d", SANDBOX_PIDS_MAX);
        snprintf(p, sizeof p, "%s/pids.max", sb->cg[1]);
        (void)write_text(p, val);
    }
    if (sb->cg[0] && memory_max > 0) {
        snprintf(val, sizeof val, "%lld", memory_max);
        snprintf(p, sizeof p, "%s/memory.limit_in_bytes", sb->cg[0]);
        sb->memory_enforced = write_text(p, val) == 0;
        snprintf(p, sizeof p, "%s/memory.memsw.limit_in_bytes", sb->cg[0]);
        (void)write_text(p, val); /* absent without swap accounting */
    }
    return 0;
}

/* Said once: a host whose cgroups do not take the limits (a cgroup v2
 * container whose own cgroup holds processes cannot delegate controllers). */
static int limits_warned;

static void warn_limits_once(const char *what)
{
    if (!__atomic_exchange_n(&limits_warned, 1, __ATOMIC_RELAXED))
        log_warn("sandbox: the session cgroups do not take %s on this host; sessions run "
                 "without it",
                 what);
}

int sandbox_create(const char *name, const char *owner, long long memory_max, struct sandbox **out,
                   struct err *e)
{
    *out = NULL;
    if (!enabled)
        return err_set(e, E_INTERNAL, "internal", "sandbox: not enabled");
    int rc = admit_reserve(owner, memory_max, SANDBOX_PIDS_MAX, e);
    if (rc)
        return rc;
    struct sandbox *sb = xcalloc(1, sizeof *sb);
    sb->refs = 1;
    sb->uid_lock_fd = sb->nsfd = -1;
    sb->owner = owner ? xstrdup(owner) : NULL;
    sb->reserved = memory_max;
    rc = uid_take(sb);
    if (rc != 0) {
        admit_release(sb->owner, sb->reserved, SANDBOX_PIDS_MAX);
        xfree(sb->owner);
        xfree(sb);
        return err_set(e, E_UNAVAIL, "unavailable", "sandbox: no free session uid: %s",
                       strerror(-rc));
    }
    sb->nsfd = netns_create();
    if (sb->nsfd < 0) {
        rc = err_set(e, E_UNAVAIL, "unavailable", "sandbox: cannot make a network namespace: %s",
                     strerror(-sb->nsfd));
        sb->nsfd = -1;
        sandbox_unref(sb);
        return rc;
    }
    int dup = fcntl(sb->nsfd, F_DUPFD_CLOEXEC, 0);
    sb->netns_id = dup >= 0 ? netns_register(dup) : -errno;
    if (sb->netns_id < 0) {
        rc = err_set(e, E_UNAVAIL, "unavailable", "sandbox: cannot register the namespace: %s",
                     strerror(-sb->netns_id));
        sb->netns_id = 0;
        sandbox_unref(sb);
        return rc;
    }
    if ((rc = cg_make(sb, name, memory_max, e)) != 0) {
        sandbox_unref(sb);
        return rc;
    }
    if (memory_max > 0 && cg_kind != CG_NONE && !sb->memory_enforced)
        warn_limits_once("a memory limit");
    for (int i = 0; i < CG_MAX; i++)
        if (sb->cg[i])
            reaper_watch_cgroup(sb->cg[i]);
    weigh_add(sb);
    *out = sb;
    return 0;
}

struct sandbox *sandbox_ref(struct sandbox *sb)
{
    __atomic_add_fetch(&sb->refs, 1, __ATOMIC_RELAXED);
    return sb;
}

/* How long a cgroup that is still busy when its sandbox ends is retried:
 * on a busy host killed tasks take seconds to run to exit, and an empty
 * cgroup given up on leaks (issue 30: 22 after a day of tests). */
#define CG_REMOVE_RETRY_MS 120000

static void *cg_remover(void *arg)
{
    char *dir = arg;
    int gone = 0;
    for (int waited = 0; !gone && waited < CG_REMOVE_RETRY_MS; waited += 50) {
        (void)cgroup_kill_tasks(dir, 1);
        gone = rmdir(dir) == 0 || errno == ENOENT;
        if (!gone) {
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    if (!gone)
        log_warn("sandbox: the cgroup %s could not be removed", dir);
    else
        reaper_forget_cgroup(dir);
    xfree(dir);
    return NULL;
}

/* Hands dir (owned, on success) to a thread that goes on removing it; 0
 * when it did, -1 when dir is gone already or no thread could start. The
 * crash watcher keeps watching it until it is removed. */
static int cg_remove_later(char *dir)
{
    if (access(dir, F_OK) != 0)
        return -1;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t th;
    int rc = pthread_create(&th, &attr, cg_remover, dir) == 0 ? 0 : -1;
    pthread_attr_destroy(&attr);
    return rc;
}

void sandbox_unref(struct sandbox *sb)
{
    if (!sb || __atomic_sub_fetch(&sb->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    weigh_remove(sb);
    if (sandbox_kill_all(sb) != 0)
        log_warn("sandbox: processes of uid %u survived the kill", (unsigned)sb->uid);
    for (int i = 0; i < CG_MAX; i++) {
        if (!sb->cg[i])
            continue;
        /* A killed task leaves the cgroup a moment after it is reaped. */
        for (int t = 0; t < 200 && rmdir(sb->cg[i]) != 0 && errno == EBUSY; t++) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        if (cg_remove_later(sb->cg[i]) == 0)
            continue; /* the remover's now */
        reaper_forget_cgroup(sb->cg[i]);
        xfree(sb->cg[i]);
    }
    if (sb->root) {
        if (umount2(sb->root, MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT)
            log_warn("sandbox: unmounting %s: %s", sb->root, strerror(errno));
        (void)rmdir(sb->root);
        reaper_forget_mount(sb->root);
        xfree(sb->root);
    }
    netns_unregister(sb->netns_id);
    if (sb->nsfd >= 0)
        close(sb->nsfd);
    if (sb->uid_lock_fd >= 0) {
        (void)unlink(sb->uid_lock_path);
        close(sb->uid_lock_fd);
    }
    admit_release(sb->owner, sb->reserved, SANDBOX_PIDS_MAX);
    xfree(sb->owner);
    xfree(sb);
}

int sandbox_adopt(struct sandbox *sb, const char *owner, struct err *e)
{
    if (sb->owner)
        return 0;
    int rc = admit_adopt(owner, sb->reserved, SANDBOX_PIDS_MAX, e);
    if (rc == 0) {
        pthread_mutex_lock(&weigh_mu);
        sb->owner = xstrdup(owner);
        reweigh_locked(sb->owner);
        pthread_mutex_unlock(&weigh_mu);
    }
    return rc;
}

/* ---- the session's files ---- */

/* The folders every session starts with: (path, mode, owned by the session). */
static const struct {
    const char *path;
    mode_t mode;
    int session_owned;
} root_layout[] = {
    {"tmp", 01777, 0},        {"tmp/downloads", 0755, 1},         {"home", 0755, 0},
    {"home/kernel", 0755, 1}, {"home/kernel/Downloads", 0755, 1},
};

/* Mounts a tmpfs of bytes (nosuid, nodev, root's with mode, at most one
 * inode per 4 KiB plus 1024) on path, creating path first, and tells the
 * reaper. what names it in errors. */
static int mount_tmpfs(const char *path, const char *source, long long bytes, const char *mode,
                       const char *what, struct err *e)
{
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return err_set(e, E_INTERNAL, "internal", "sandbox: mkdir %s: %s", path, strerror(errno));
    char opts[128];
    snprintf(opts, sizeof opts, "size=%lld,nr_inodes=%lld,mode=%s,uid=0,gid=0", bytes,
             bytes / 4096 + 1024, mode);
    if (mount(source, path, "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0) {
        int er = errno;
        (void)rmdir(path);
        return err_set(e, E_INTERNAL, "internal", "sandbox: mounting %s on %s: %s", what, path,
                       strerror(er));
    }
    reaper_watch_mount(path);
    return 0;
}

int sandbox_home_mount(const char *path, long long bytes, struct err *e)
{
    return mount_tmpfs(path, "browserd-profile", bytes, "0700", "the browser's profile folder", e);
}

int sandbox_home_unmount(const char *path)
{
    int detached = umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) == 0;
    if (!detached && errno != EINVAL && errno != ENOENT)
        log_warn("sandbox: unmounting %s: %s", path, strerror(errno));
    reaper_forget_mount(path);
    return detached;
}

int sandbox_root_create(struct sandbox *sb, const char *path, long long quota_bytes, struct err *e)
{
    if (sb->root)
        return err_set(e, E_INTERNAL, "internal", "sandbox: the session already has its files");
    int rc = mount_tmpfs(path, "browserd-session", quota_bytes, "0755", "the session's files", e);
    if (rc)
        return rc;
    sb->root = xstrdup(path);
    int rfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    for (size_t i = 0; rfd >= 0 && i < sizeof root_layout / sizeof *root_layout; i++) {
        if (mkdirat(rfd, root_layout[i].path, root_layout[i].mode) != 0 ||
            fchmodat(rfd, root_layout[i].path, root_layout[i].mode, 0) != 0 ||
            (root_layout[i].session_owned && fchownat(rfd, root_layout[i].path, sb->uid,
                                                      (gid_t)sb->uid, AT_SYMLINK_NOFOLLOW) != 0)) {
            int er = errno;
            close(rfd);
            return err_set(e, E_INTERNAL, "internal", "sandbox: %s/%s: %s", path,
                           root_layout[i].path, strerror(er));
        }
    }
    if (rfd < 0)
        return err_set(e, E_INTERNAL, "internal", "sandbox: open %s: %s", path, strerror(errno));
    close(rfd);
    return 0;
}

const char *sandbox_root(const struct sandbox *sb)
{
    return sb ? sb->root : NULL;
}

uid_t sandbox_uid(const struct sandbox *sb)
{
    return sb->uid;
}

int sandbox_netns(const struct sandbox *sb)
{
    return sb->netns_id;
}

int sandbox_memory_enforced(const struct sandbox *sb)
{
    return sb->memory_enforced;
}

/* The folder whose cgroup.procs lists every task: v2's, or v1's pids (else any). */
static const char *procs_dir(const struct sandbox *sb)
{
    if (cg_kind == CG_V2)
        return sb->cg[0];
    return sb->cg[1] ? sb->cg[1] : sb->cg[0] ? sb->cg[0] : sb->cg[2];
}

int sandbox_kill_all(struct sandbox *sb)
{
    const char *dir = procs_dir(sb);
    return !dir || cgroup_kill_tasks(dir, 500) == 0 ? 0 : -EBUSY;
}

long long sandbox_oom_kills(const struct sandbox *sb)
{
    char p[512];
    if (cg_kind == CG_V2 && sb->cg[0]) {
        snprintf(p, sizeof p, "%s/memory.events", sb->cg[0]);
        return keyed_value(p, "oom_kill");
    }
    if (cg_kind == CG_V1 && sb->cg[0]) {
        snprintf(p, sizeof p, "%s/memory.oom_control", sb->cg[0]);
        return keyed_value(p, "oom_kill");
    }
    return 0;
}

/* "key=value" in a kernel log line, copied into out (cap bytes). */
static int kv(const char *line, const char *key, char *out, size_t cap)
{
    const char *p = strstr(line, key);
    if (!p)
        return -1;
    p += strlen(key);
    size_t n = strcspn(p, ",\n ");
    if (n >= cap)
        n = cap - 1;
    memcpy(out, p, n);
    out[n] = '\0';
    return 0;
}

static long long rss_field(const char *line, const char *key)
{
    const char *p = strstr(line, key);
    return p ? strtoll(p + strlen(key), NULL, 10) : 0;
}

int sandbox_oom_report(const char *name, struct sandbox_oom *out)
{
    memset(out, 0, sizeof *out);
    int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char want[160];
    snprintf(want, sizeof want, "oom_memcg=/browserd/%s", name);
    char rec[8192];
    int found = 0, pending = 0;
    /* Records come one per read, oldest first; the buffer is bounded. */
    for (int i = 0; i < 200000; i++) {
        ssize_t n = read(fd, rec, sizeof rec - 1);
        if (n < 0 && errno == EPIPE)
            continue; /* overwritten records: go on with the next */
        if (n <= 0)
            break;
        rec[n] = '\0';
        const char *msg = strchr(rec, ';');
        msg = msg ? msg + 1 : rec;
        if (strncmp(msg, "oom-kill:", 9) == 0) {
            pending = strstr(msg, want) != NULL;
            if (pending) {
                struct sandbox_oom o;
                memset(&o, 0, sizeof o);
                char v[32];
                if (kv(msg, "constraint=CONSTRAINT_", v, sizeof o.constraint) == 0) {
                    for (char *c = v; *c; c++)
                        *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
                    memcpy(o.constraint, v, strlen(v) + 1);
                }
                if (kv(msg, ",pid=", v, sizeof v) == 0)
                    o.pid = (int)strtol(v, NULL, 10);
                (void)kv(msg, ",task=", o.process_name, sizeof o.process_name);
                *out = o;
                found = 1;
            }
        } else if (pending && strstr(msg, "Killed process ")) {
            out->rss_kb = rss_field(msg, "anon-rss:") + rss_field(msg, "file-rss:") +
                          rss_field(msg, "shmem-rss:");
            pending = 0;
        }
    }
    close(fd);
    return found ? 0 : -ENOENT;
}

long long sandbox_pids_current(const struct sandbox *sb)
{
    const char *dir = cg_kind == CG_V2 ? sb->cg[0] : sb->cg[1];
    if (!dir)
        return -1;
    char p[512], buf[64];
    snprintf(p, sizeof p, "%s/pids.current", dir);
    if (path_read_small(p, buf, sizeof buf) <= 0)
        return -1;
    return strtoll(buf, NULL, 10);
}

/* cpu.idle where the kernel has it (5.15+, v1 and v2: the group is scheduled
 * like SCHED_IDLE among its siblings), else the lowest weight; and back.
 * A write to a hierarchy without the files fails harmlessly. */
int sandbox_set_background(struct sandbox *sb, int on)
{
    int done = 0;
    pthread_mutex_lock(&weigh_mu);
    sb->background = on;
    for (int i = 0; i < CG_MAX; i++) {
        if (!sb->cg[i])
            continue;
        char p[600];
        snprintf(p, sizeof p, "%s/cpu.idle", sb->cg[i]);
        if (write_text(p, on ? "1" : "0") == 0) {
            done = 1;
            continue;
        }
        snprintf(p, sizeof p, "%s/cpu.weight", sb->cg[i]);
        if (write_text(p, on ? "1" : "100") == 0) {
            done = 1;
            continue;
        }
        snprintf(p, sizeof p, "%s/cpu.shares", sb->cg[i]);
        done |= write_text(p, on ? "2" : "1024") == 0;
    }
    reweigh_locked(sb->owner);
    pthread_mutex_unlock(&weigh_mu);
    return done ? 0 : -1;
}

int sandbox_cgroup_dirs(const struct sandbox *sb, const char **out, int cap)
{
    int n = 0;
    for (int i = 0; i < CG_MAX && n < cap; i++)
        if (sb->cg[i])
            out[n++] = sb->cg[i];
    return n;
}

/* ---- launching ---- */

/* Replaces x's seccomp pipe with one holding the program of kind, whole
 * (a program is far below a pipe's 64 KiB, so the write never blocks), its
 * writing end closed: bwrap reads it to the end. The descriptor is moved to
 * 10 or above, clear of the standard ones the launchers renumber. 0, or -1
 * with errno set. */
static int filter_pipe(struct sandbox_exec *x, enum sysfilter_kind kind)
{
    size_t len;
    const void *prog = sysfilter_program(kind, &len);
    int p[2];
    if (!prog || len > 65536) {
        errno = EINVAL;
        return -1;
    }
    if (pipe2(p, O_CLOEXEC) != 0)
        return -1;
    ssize_t w = write(p[1], prog, len);
    int er = errno;
    close(p[1]);
    int fd = w == (ssize_t)len ? fcntl(p[0], F_DUPFD_CLOEXEC, 10) : -1;
    if (w >= 0 && w != (ssize_t)len)
        er = EIO;
    else if (fd < 0 && w >= 0)
        er = errno;
    close(p[0]);
    if (fd < 0) {
        errno = er;
        return -1;
    }
    if (x->seccomp_fd >= 0)
        close(x->seccomp_fd);
    x->seccomp_fd = x->seccomp_at = fd;
    return 0;
}

int sandbox_exec_browser(struct sandbox_exec *x, struct err *e)
{
    x->browser = 1;
    if (x->seccomp_fd >= 0 && filter_pipe(x, SYSFILTER_BROWSER) != 0)
        return err_set(e, E_INTERNAL, "internal", "sandbox: the browser's seccomp program: %s",
                       strerror(errno));
    return 0;
}

int sandbox_exec_seccomp(const struct sandbox_exec *x)
{
    if (!x || x->seccomp_fd < 0)
        return 0;
    if (x->seccomp_at == x->seccomp_fd)
        return fcntl(x->seccomp_fd, F_SETFD, 0) == 0 ? 0 : -1;
    return dup2(x->seccomp_fd, x->seccomp_at) < 0 ? -1 : 0;
}

int sandbox_exec_open(const struct sandbox *sb, const char *home, const char *policy,
                      struct sandbox_exec *x, struct err *e)
{
    memset(x, 0, sizeof *x);
    x->netns_fd = x->seccomp_fd = x->seccomp_at = -1;
    x->home = home;
    x->policy = policy;
    x->root = sb->root;
    x->uid = sb->uid;
    x->gid = (gid_t)sb->uid;
    x->netns_fd = fcntl(sb->nsfd, F_DUPFD_CLOEXEC, 0);
    if (x->netns_fd < 0)
        goto fail;
    for (int i = 0; i < CG_MAX; i++) {
        if (!sb->cg[i])
            continue;
        char p[512];
        snprintf(p, sizeof p, "%s/cgroup.procs", sb->cg[i]);
        int fd = open(p, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
            goto fail;
        x->cg_fds[x->ncg++] = fd;
    }
    if (filtered && filter_pipe(x, SYSFILTER_SESSION) != 0)
        goto fail;
    return 0;
fail:;
    int er = errno;
    sandbox_exec_close(x);
    return err_set(e, E_INTERNAL, "internal", "sandbox: preparing a launch: %s", strerror(er));
}

void sandbox_exec_close(struct sandbox_exec *x)
{
    if (x->netns_fd >= 0)
        close(x->netns_fd);
    for (int i = 0; i < x->ncg; i++)
        close(x->cg_fds[i]);
    if (x->seccomp_fd >= 0)
        close(x->seccomp_fd);
    x->netns_fd = x->seccomp_fd = -1;
    x->ncg = 0;
}

int sandbox_exec_enter(const struct sandbox_exec *x)
{
    /* While still root: the lowest the session may set. */
    if (x->browser)
        child_oom_score_adj_browser();
    else
        child_oom_score_adj();
    for (int i = 0; i < x->ncg; i++)
        if (write(x->cg_fds[i], "0", 1) != 1)
            return SBX_STEP_CGROUP;
    if (setns(x->netns_fd, CLONE_NEWNET) != 0)
        return SBX_STEP_NETNS;
    if (x->home || x->policy || x->file || x->root) {
        if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
            return SBX_STEP_MOUNTNS;
        if (x->home && mount(x->home, SANDBOX_STAGE "/home", NULL, MS_BIND, NULL) != 0)
            return SBX_STEP_STAGE;
        if (x->policy && mount(x->policy, SANDBOX_STAGE "/policy", NULL, MS_BIND, NULL) != 0)
            return SBX_STEP_STAGE;
        if (x->file && mount(x->file, SANDBOX_STAGE "/file", NULL, MS_BIND, NULL) != 0)
            return SBX_STEP_STAGE;
        if (x->root && mount(x->root, SANDBOX_STAGE "/root", NULL, MS_BIND, NULL) != 0)
            return SBX_STEP_STAGE;
    }
    /* Raw system calls: glibc's wrappers broadcast to threads the child
     * does not have. */
    if (syscall(SYS_setgroups, 0, NULL) != 0 ||
        syscall(SYS_setresgid, x->gid, x->gid, x->gid) != 0 ||
        syscall(SYS_setresuid, x->uid, x->uid, x->uid) != 0 ||
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return SBX_STEP_USER;
    return 0;
}

const char *sandbox_step_text(int step)
{
    switch (step) {
    case SBX_STEP_CGROUP:
        return "joining the session's cgroup";
    case SBX_STEP_NETNS:
        return "entering the session's network namespace";
    case SBX_STEP_MOUNTNS:
        return "making a private mount namespace";
    case SBX_STEP_STAGE:
        return "binding the session's folders on " SANDBOX_STAGE;
    case SBX_STEP_USER:
        return "becoming the session's user";
    case SBX_STEP_SECCOMP:
        return "passing the seccomp program to bwrap";
    }
    return "entering the sandbox";
}

/* What of the host outside /usr a browser, Xvfb and chromedriver read: libraries, fonts,
 * certificates, Chromium's own configuration. Nothing else of the host's
 * /etc (passwd, shadow, the server's configuration) is visible. */
static const char *const host_ro[] = {
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/fonts",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/chromium",
    "/etc/chromium.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/mime.types",
    "/etc/X11",
    "/etc/gtk-3.0",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    /* fontconfig's cache: without it every start rescans the fonts. */
    "/var/cache/fontconfig",
};

void sandbox_bwrap_argv(const struct sandbox_exec *x, const char *home, const char *policy,
                        const char *const *extra_ro, const char *argv0,
                        void (*push)(void *ctx, char *arg), void *ctx)
{
    static const char *const head[] = {
        SANDBOX_BWRAP,   "--unshare-user", "--unshare-pid",
        "--unshare-ipc", "--unshare-uts",  "--unshare-cgroup-try",
        "--hostname",    "browserd",       "--ro-bind",
        "/usr",          "/usr",           "--symlink",
        "usr/lib",       "/lib",           "--symlink",
        "usr/lib64",     "/lib64",         "--symlink",
        "usr/bin",       "/bin",           "--symlink",
        "usr/sbin",      "/sbin",          "--proc",
        "/proc",         "--dev",          "/dev",
        "--tmpfs",       "/dev/shm",
    };
    for (size_t i = 0; i < sizeof head / sizeof *head; i++)
        push(ctx, xstrdup(head[i]));
    push(ctx, xstrdup("--uid"));
    push(ctx, xasprintf("%u", (unsigned)x->uid));
    push(ctx, xstrdup("--gid"));
    push(ctx, xasprintf("%u", (unsigned)x->gid));
    if (x->seccomp_fd >= 0) {
        push(ctx, xstrdup("--seccomp"));
        push(ctx, xasprintf("%d", x->seccomp_at));
    }
    /* No user namespace below the sandbox's own, but for Chromium's sandbox
     * (its program still refuses the rest). */
    if (!x->browser)
        push(ctx, xstrdup("--disable-userns"));
    for (size_t i = 0; i < sizeof host_ro / sizeof *host_ro; i++) {
        push(ctx, xstrdup("--ro-bind-try"));
        push(ctx, xstrdup(host_ro[i]));
        push(ctx, xstrdup(host_ro[i]));
    }
    if (x->root) {
        /* The session's own files: the same /tmp and /home for every
         * process of the session (the browser's downloads, fs, process). */
        static const char *const binds[] = {"--bind", SANDBOX_STAGE "/root/tmp",  "/tmp",
                                            "--bind", SANDBOX_STAGE "/root/home", "/home"};
        for (size_t i = 0; i < sizeof binds / sizeof *binds; i++)
            push(ctx, xstrdup(binds[i]));
    } else {
        push(ctx, xstrdup("--tmpfs"));
        push(ctx, xstrdup("/tmp"));
    }
    if (home && x->home) {
        push(ctx, xstrdup("--bind"));
        push(ctx, xstrdup(SANDBOX_STAGE "/home"));
        push(ctx, xstrdup(home));
        push(ctx, xstrdup("--chdir"));
        push(ctx, xstrdup(home));
    }
    if (policy && x->policy) {
        push(ctx, xstrdup("--ro-bind"));
        push(ctx, xstrdup(SANDBOX_STAGE "/policy"));
        push(ctx, xstrdup(policy));
    }
    if (x->file) {
        push(ctx, xstrdup("--bind"));
        push(ctx, xstrdup(SANDBOX_STAGE "/file"));
        push(ctx, xstrdup(SANDBOX_FILE));
    }
    for (size_t i = 0; extra_ro && extra_ro[i] && extra_ro[i + 1]; i += 2) {
        push(ctx, xstrdup("--ro-bind"));
        push(ctx, xstrdup(extra_ro[i]));
        push(ctx, xstrdup(extra_ro[i + 1]));
    }
    push(ctx, xstrdup("--"));
    push(ctx, xstrdup(argv0));
}

/* ---- ownership ---- */

/* Walks the tree below the open folder dfd by descriptors only: every entry
 * is named relative to its folder's descriptor and folders are opened with
 * O_NOFOLLOW, so a folder swapped for a symbolic link mid-walk (by a process
 * of the session) is not followed out of the home. */
static int chown_dir(int dfd, uid_t uid, int depth)
{
    if (depth > 128)
        return -ELOOP;
    DIR *d = fdopendir(dfd);
    if (!d) {
        int er = errno;
        close(dfd);
        return -er;
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue; /* gone meanwhile */
        if (fchownat(dirfd(d), de->d_name, uid, (gid_t)uid, AT_SYMLINK_NOFOLLOW) != 0) {
            rc = -errno;
            break;
        }
        /* No setuid/setgid bits inside a session's folder. */
        if (S_ISREG(st.st_mode) && (st.st_mode & (S_ISUID | S_ISGID)))
            (void)fchmodat(dirfd(d), de->d_name, st.st_mode & 0777, 0);
        if (S_ISDIR(st.st_mode)) {
            int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0)
                rc = chown_dir(sub, uid, depth + 1);
        }
    }
    closedir(d);
    return rc;
}

int sandbox_chown_tree(const struct sandbox *sb, const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (fchown(fd, sb->uid, (gid_t)sb->uid) != 0) {
        int er = errno;
        close(fd);
        return -er;
    }
    return chown_dir(fd, sb->uid, 0);
}

/* ---- memory pressure (issue 30) ---- */

/* The number after "key " in a flat keyed file (memory.stat), or -1. */
static long long stat_value(const char *path, const char *key)
{
    char buf[8192];
    ssize_t n = path_read_small(path, buf, sizeof buf);
    if (n <= 0)
        return -1;
    size_t kl = strlen(key);
    for (char *p = buf; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, key, kl) == 0 && p[kl] == ' ')
            return strtoll(p + kl + 1, NULL, 10);
    return -1;
}

static long long file_number(const char *dir, const char *file)
{
    char p[600], buf[64];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    if (path_read_small(p, buf, sizeof buf) <= 0)
        return -1;
    if (strncmp(buf, "max", 3) == 0)
        return 0;
    return strtoll(buf, NULL, 10);
}

int sandbox_memory_sample(const struct sandbox *sb, struct memp_sample *out)
{
    memset(out, 0, sizeof *out);
    out->at_ms = clock_mono_ms();
    out->psi_full_avg10 = -1;
    const char *dir = sb->cg[0];
    if (!dir || (cg_kind != CG_V1 && cg_kind != CG_V2))
        return -1;
    char p[600];
    snprintf(p, sizeof p, "%s/memory.stat", dir);
    if (cg_kind == CG_V2) {
        out->majfaults = stat_value(p, "pgmajfault");
        out->usage = file_number(dir, "memory.current");
        out->limit = file_number(dir, "memory.max");
        char buf[256];
        snprintf(p, sizeof p, "%s/memory.pressure", dir);
        const char *full =
            path_read_small(p, buf, sizeof buf) > 0 ? strstr(buf, "full avg10=") : NULL;
        if (full)
            out->psi_full_avg10 = strtod(full + 11, NULL);
    } else {
        out->majfaults = stat_value(p, "total_pgmajfault");
        out->usage = file_number(dir, "memory.usage_in_bytes");
        out->limit = sb->memory_enforced ? file_number(dir, "memory.limit_in_bytes") : 0;
    }
    return 0;
}

/* A task's /proc number file (oom_score), or -1. */
static long long procfs_number(long pid, const char *file)
{
    char p[64], buf[64];
    snprintf(p, sizeof p, "/proc/%ld/%s", pid, file);
    return path_read_small(p, buf, sizeof buf) > 0 ? strtoll(buf, NULL, 10) : -1;
}

int sandbox_kill_largest(struct sandbox *sb, struct sandbox_oom *victim)
{
    memset(victim, 0, sizeof *victim);
    const char *dir = procs_dir(sb);
    char p[600], buf[16384];
    if (!dir)
        return -ENOENT;
    snprintf(p, sizeof p, "%s/cgroup.procs", dir);
    ssize_t n = path_read_small(p, buf, sizeof buf);
    if (n <= 0)
        return -ENOENT;
    long best = 0;
    long long best_score = -1;
    for (char *q = buf; *q;) {
        char *end;
        long pid = strtol(q, &end, 10);
        if (end == q)
            break;
        long long score = pid > 1 ? procfs_number(pid, "oom_score") : -1;
        if (score > best_score) {
            best_score = score;
            best = pid;
        }
        q = *end ? end + 1 : end;
    }
    if (best <= 1)
        return -ENOENT;
    victim->pid = (int)best;
    snprintf(p, sizeof p, "/proc/%ld/comm", best);
    if (path_read_small(p, victim->process_name, sizeof victim->process_name) > 0)
        victim->process_name[strcspn(victim->process_name, "\n")] = '\0';
    snprintf(p, sizeof p, "/proc/%ld/statm", best);
    char statm[128];
    if (path_read_small(p, statm, sizeof statm) > 0) {
        char *sp = strchr(statm, ' ');
        victim->rss_kb = sp ? strtoll(sp + 1, NULL, 10) * (sysconf(_SC_PAGESIZE) / 1024) : 0;
    }
    snprintf(victim->constraint, sizeof victim->constraint, "%s", "memory_pressure");
    return kill((pid_t)best, SIGKILL) == 0 ? 0 : -errno;
}
