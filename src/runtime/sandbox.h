/*
 * sandbox: each browser session's own machine on a shared host.
 *
 * A session's processes (Chromium, its Xvfb, its chromedriver) run:
 *  - as an unprivileged user of their own (a uid from a reserved range, one
 *    per live session, never the server's and never root), with Chromium's
 *    own sandbox on;
 *  - in their own network namespace (core/netns.h) whose only interface is
 *    loopback; the one way out is the session's egress proxy, whose listening
 *    socket the server creates inside that namespace;
 *  - under bubblewrap (Debian's bwrap): their own user, mount, PID, IPC and
 *    UTS namespaces, the system read-only (/usr, fonts, certificates, the
 *    Chromium configuration), a private /tmp and /dev/shm, /proc of their own
 *    PID namespace, and one writable folder: the session's home;
 *  - in a cgroup of their own (v1 or v2, whichever the host has): a memory
 *    limit, a pids limit, CPU accounting; ending the session kills
 *    everything in it.
 *
 * docs/sandbox.md gives the threat model and what each layer stops.
 *
 * A sandbox belongs to a session, not to one browser: a browser restarted
 * with a profile or a new screen size runs in the same sandbox (the egress
 * listener inside its namespace stays). It is reference counted.
 *
 * Threading: sandbox_create / _ref / _unref are thread-safe; the rest reads
 * fields fixed at creation.
 */
#ifndef BD_RUNTIME_SANDBOX_H
#define BD_RUNTIME_SANDBOX_H

#include <sys/types.h>

#include "core/err.h"

#define SANDBOX_BWRAP "/usr/bin/bwrap"
/* Root-owned mount points, bound in a launcher's private mount namespace to
 * the session's home and policy folders, so that bwrap (running as the
 * session's user) can reach them whatever the modes of the data folder's
 * parents (a data folder under /root, say). */
#define SANDBOX_STAGE "/run/browserd-sandbox"
/* A session's tasks (threads count): Chromium with a few dozen tabs takes a
 * few hundred. Admission adds them up against the host's pid_max
 * (runtime/admit.h): 1024 lets 27 sessions share the 28672 task ids a
 * default pid_max of 32768 leaves them. */
#define SANDBOX_PIDS_MAX  1024
#define SANDBOX_UID_BASE  1100000
#define SANDBOX_UID_COUNT 65536

struct sandbox;

/* Decides, once at start, whether sessions are sandboxed: the server runs as
 * root, bwrap exists, network namespaces can be made. Returns 1 when they
 * are, 0 when not (logged once, with what is missing: a server run as
 * non-root runs browsers as its own user with Chromium's sandbox on and
 * nothing else; docs/sandbox.md). `off` (tests and benchmarks of the
 * unsandboxed path: BROWSERD_SANDBOX=off) forces 0. */
int sandbox_init(int off);
/* The decision of sandbox_init (0 before it). */
int sandbox_enabled(void);
/* "v1", "v2" or "none": the cgroup layout found by sandbox_init. */
const char *sandbox_cgroup_kind(void);

/* Makes a session's sandbox: a uid, a network namespace (loopback up), and
 * a cgroup named after `name` with memory_max bytes (0: no memory limit) and
 * SANDBOX_PIDS_MAX tasks, both first reserved for organization owner (NULL:
 * a spare, the server's own) against the server's budget (runtime/admit.h),
 * released by the last sandbox_unref. E_LIMIT past owner's share, E_UNAVAIL
 * past the server's budget (both with e->retry_after) or when the host ran
 * out of uids or namespaces, E_INTERNAL for other system call failures. */
int sandbox_create(const char *name, const char *owner, long long memory_max, struct sandbox **out,
                   struct err *e) WUR;
/* A spare's sandbox handed to organization owner: its reservation becomes
 * owner's (admit_adopt). 0, or E_LIMIT past owner's share. */
int sandbox_adopt(struct sandbox *sb, const char *owner, struct err *e) WUR;
/* Another reference (returns sb). */
struct sandbox *sandbox_ref(struct sandbox *sb);
/* Drops a reference; the last one kills every process left in the cgroup,
 * removes it, closes the namespace and frees the uid. Accepts NULL. */
void sandbox_unref(struct sandbox *sb);

uid_t sandbox_uid(const struct sandbox *sb);
/* The core/netns id of the session's network namespace. */
int sandbox_netns(const struct sandbox *sb);
/* 1 when the cgroup's memory limit is in force. */
int sandbox_memory_enforced(const struct sandbox *sb);
/* Kills every process in the session's cgroup (SIGKILL), waiting until it is
 * empty (bounded: a few seconds). 0, or -errno when processes remain. */
int sandbox_kill_all(struct sandbox *sb);
/* How many processes the kernel killed for exceeding the memory limit. */
long long sandbox_oom_kills(const struct sandbox *sb);
/* What the kernel said of the last out-of-memory kill in a session's cgroup
 * (its kernel log, /dev/kmsg). */
struct sandbox_oom {
    int pid;               /* as the host sees it */
    char process_name[16]; /* the task's comm */
    long long rss_kb;      /* anon + file + shmem RSS */
    char constraint[16];   /* "memcg", "none", ...; "" when not said */
};
/* Fills out from the newest kill the kernel log attributes to the cgroup of
 * session `name`. 0, -ENOENT when there is none, -errno when the kernel log
 * cannot be read (a container without /dev/kmsg). */
int sandbox_oom_report(const char *name, struct sandbox_oom *out) WUR;
/* Memory pressure (issue 30; the rule is domain/mem_pressure.h): a sample
 * of the session's memory cgroup now (major faults, usage, limit, PSI "full
 * avg10" where the host has it). 0, or -1 without a memory cgroup. */
struct memp_sample;
int sandbox_memory_sample(const struct sandbox *sb, struct memp_sample *out);
/* SIGKILLs the task of the session the kernel's OOM killer would pick (the
 * highest oom_score: Chromium makes its renderers the likeliest), describing
 * it in *victim (constraint "memory_pressure"). 0, or -errno / -ENOENT when
 * the cgroup holds no task. */
int sandbox_kill_largest(struct sandbox *sb, struct sandbox_oom *victim) WUR;
/* Tasks now in the cgroup (the pids controller's count), or -1. */
long long sandbox_pids_current(const struct sandbox *sb);
/* Background (on) or normal CPU priority for every task of the sandbox: a
 * background session gets the CPU only when its siblings (v1: the server's
 * threads and the other sessions; v2: the other sessions) leave it idle. For
 * spares until hand-out and for browsers being torn down. 0, or -1 where no
 * cpu controller holds the sandbox. */
int sandbox_set_background(struct sandbox *sb, int on);
/* The cgroup folders (one per v1 hierarchy, one for v2), for the reaper:
 * fills up to cap paths (owned by sb), returns how many. */
int sandbox_cgroup_dirs(const struct sandbox *sb, const char **out, int cap);

/* ---- the session's files ---- */

/* Mounts a tmpfs of bytes (nosuid, nodev, mode 0700, root's until the
 * launch hands the folder to the session's user) on path, the session's
 * Chromium user-data folder, creating path first. A browser's profile then
 * never touches the server's disk: its writes and Chromium's own fsyncs on
 * its databases would share the disk's journal with the store's commits, and
 * a profile on tmpfs starts faster. Its pages are charged to the memory
 * cgroup of whoever writes them (the session's browser, or the server when it
 * loads a saved profile). The mount is not the sandbox's: a profile is saved
 * from it after the browser ended, so sandbox_home_unmount removes it; the
 * reaper detaches it if the server dies. */
int sandbox_home_mount(const char *path, long long bytes, struct err *e) WUR;
/* Detaches a mount on path if there is one (sandbox_home_mount's, or one a
 * crashed server left) and forgets it; the folder itself stays for the
 * caller to remove. 1 when a mount was detached, 0 when there was none. */
int sandbox_home_unmount(const char *path);

/* Gives the session its own files: a tmpfs of quota_bytes mounted on path
 * (nosuid, nodev), holding /tmp (1777), /tmp/downloads, /home,
 * /home/kernel and /home/kernel/Downloads (the last three and downloads
 * owned by the session's user). Every process launched afterwards sees
 * <path>/tmp as its /tmp and <path>/home as its /home; the fs and process
 * APIs resolve client paths beneath path (RESOLVE_IN_ROOT). Unmounted by the
 * last sandbox_unref. Call once, before the first launch. */
int sandbox_root_create(struct sandbox *sb, const char *path, long long quota_bytes,
                        struct err *e) WUR;
/* The host path of the session's files, NULL when it has none (sandbox
 * off, or created without). Accepts NULL. */
const char *sandbox_root(const struct sandbox *sb);
/* What a client sees: the session's home and the folder the browser saves
 * downloads to. */
#define SANDBOX_HOME "/home/kernel"
/* Where a process of a session sees runtime-js/ (the runners, the REPL and
 * their packages; bound read-only from its host folder, pwexec_dir()): a
 * neutral path, so that no stack trace, error or import.meta.url shows the
 * host's. */
#define SANDBOX_RUNTIME_JS "/opt/browserd/runtime-js"
#define SANDBOX_DOWNLOADS  "/home/kernel/Downloads"
/* Where the browser sees its profile (its user-data folder, bound from the
 * host's): a neutral path, outside the session's own files. */
#define SANDBOX_PROFILE "/profile"
/* Where a process sees the one writable file of sandbox_exec.file (bwrap
 * makes a bind's mount point in the sandbox's view, and at a host path that
 * would put the host's folders into the session's own /tmp). */
#define SANDBOX_FILE "/var/log/session.log"

/* ---- launching a process inside ---- */

/* What a forked child needs to enter the sandbox: descriptors and ids only,
 * prepared by the parent (the server is multithreaded: between fork and exec
 * the child makes system calls and nothing else). */
struct sandbox_exec {
    int netns_fd;  /* setns(CLONE_NEWNET) */
    int cg_fds[4]; /* cgroup.procs files to join */
    int ncg;
    uid_t uid;
    gid_t gid;
    const char *home;   /* NULL, or the home folder, bound on SANDBOX_STAGE/home (borrowed) */
    const char *policy; /* NULL, or the policy folder, bound on SANDBOX_STAGE/policy */
    const char *file;   /* NULL, or one writable file (a log) bound on SANDBOX_STAGE/file and
                           seen inside at SANDBOX_FILE; set by the caller after _open */
    const char *root;   /* the session's files (sandbox_root), bound on SANDBOX_STAGE/root; seen
                           inside as /tmp and /home (set by _open) */
    int seccomp_fd;     /* -1, or a pipe (CLOEXEC, >= 10) holding the process's seccomp program
                           (runtime/sysfilter.h), read by bwrap's --seccomp */
    int seccomp_at;     /* the descriptor bwrap reads it from: seccomp_fd, unless a launcher
                           that renumbers its descriptors sets another before building argv */
    int browser;        /* set by sandbox_exec_browser */
};

/* Prepares x for one launch (opens the descriptors; close with
 * sandbox_exec_close in the parent after the fork). home and policy may be
 * NULL; they are borrowed and must outlive the fork. The bind mounts are made
 * by path in the child's new mount namespace (a descriptor opened before the
 * unshare names a mount of the old namespace, which the kernel refuses to
 * bind). */
int sandbox_exec_open(const struct sandbox *sb, const char *home, const char *policy,
                      struct sandbox_exec *x, struct err *e) WUR;
void sandbox_exec_close(struct sandbox_exec *x);
/* Marks x as Chromium's launch: the browser's seccomp program replaces the
 * session's (Chromium's own sandbox makes a user namespace for its
 * renderers), and bwrap leaves user namespaces enabled. 0, or E_INTERNAL. */
int sandbox_exec_browser(struct sandbox_exec *x, struct err *e) WUR;
/* Child side, the last step before exec (after the launcher closed or
 * marked close-on-exec its other descriptors): puts the seccomp program on
 * x->seccomp_at, open across exec. Async-signal-safe; accepts NULL and an x
 * without a program. 0, or -1 (errno set). */
int sandbox_exec_seccomp(const struct sandbox_exec *x);

/* Child side, after fork and before exec: joins the cgroup, enters the
 * network namespace, stages the home and policy folders in a private mount
 * namespace, and becomes the session's user. Async-signal-safe. Returns 0,
 * or a SANDBOX_STAGE_* step (errno set) that failed. */
enum {
    SBX_STEP_CGROUP = 1,
    SBX_STEP_NETNS,
    SBX_STEP_MOUNTNS,
    SBX_STEP_STAGE,
    SBX_STEP_USER,
    SBX_STEP_SECCOMP /* sandbox_exec_seccomp */
};
int sandbox_exec_enter(const struct sandbox_exec *x);
/* Text for a step of sandbox_exec_enter. */
const char *sandbox_step_text(int step);

/* The bwrap command line that runs `argv0` inside: pushes each argument
 * (owned, xmalloc'd) through push(ctx, arg), ending with "--" and argv0; the
 * caller then pushes argv0's own arguments. home (read-write) and policy
 * (read-only, on Chromium's managed policy folder) are the paths the process
 * sees, NULL when absent; extra_ro is a NULL-terminated list of pairs, a
 * host path and the path the process sees it at (read-only; runtime-js/ at
 * SANDBOX_RUNTIME_JS), may be NULL. */
void sandbox_bwrap_argv(const struct sandbox_exec *x, const char *home, const char *policy,
                        const char *const *extra_ro, const char *argv0,
                        void (*push)(void *ctx, char *arg), void *ctx);

/* Gives path and everything below it to the session's user (lchown, no
 * symlinks followed). 0 or -errno. */
int sandbox_chown_tree(const struct sandbox *sb, const char *path) WUR;

#endif
