/* runtime/proc: see proc.h. */
#include "runtime/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "runtime/child.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/limits.h"
#include "core/strvec.h"
#include "core/xalloc.h"
#include "runtime/reaper.h"
#include "runtime/sandbox.h"
#include "runtime/sessmgr.h"

#define PROC_CHUNK      4096
#define PROC_MAX_CHUNKS 4096 /* replay list: also bounded in count (tiny chunks) */
#define PROC_TICK_MS    250
#define PROC_TOUCH_MS   500  /* under SESSRULES_TIMEOUT_FLOOR: a process keeps its session */
#define PROC_DRAIN_MS   2000 /* output still read after the exit */
#define PROC_PATH       "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

struct chunk {
    struct chunk *next;
    uint64_t seq;
    int stream;
    size_t len;
    char data[PROC_CHUNK];
};

struct proc_sub {
    struct proc *p;
    uint64_t next_seq;
    void (*wake)(void *ctx);
    void *ctx;
    struct proc_sub *next;
};

struct proc {
    pthread_mutex_t mu;
    int refs; /* under table_mu */
    char id[PROC_ID_LEN + 1];
    char session_id[64];
    struct sessmgr *sessions;
    pid_t pid;     /* the bwrap the server started; its process group is the tree */
    pid_t cmd_pid; /* the command, as the host sees it (0 until found) */
    int cmd_pidfd; /* pidfd of cmd_pid, or -1 */
    int ns_pid;
    int reaped, exited, timed_out;
    int exit_code;
    int64_t started_mono_ms, started_wall_ms, ended_mono_ms;
    int64_t deadline_ms; /* monotonic; 0 = none */
    int tty;
    int in_fd; /* stdin pipe or the PTY master; -1 when closed (under in_mu) */
    int out_fd, err_fd, res_fd;
    pthread_mutex_t in_mu;
    int stdin_calls;  /* proc_stdin calls in flight (atomic) */
    char *stdin_data; /* pending initial stdin (the thread writes it) */
    size_t stdin_len, stdin_off;
    size_t collect;
    struct buf out, err, res;
    int out_trunc, err_trunc, res_trunc;
    struct chunk *head, *tail;
    size_t kept_bytes, kept_chunks;
    uint64_t next_seq;
    struct proc_sub *subs;
    void (*on_exit)(void *ctx, struct proc *p);
    void *ctx;
    struct proc *next; /* table */
};

static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static struct proc *table;
static int stopping; /* proc_kill_all ran: no new process (under table_mu) */
/* Bytes held in collect buffers by every process (LIM_PROC_OUTPUT_TOTAL_BYTES). */
static size_t collected_total;

/* ---- references and the table ---- */

static void proc_free(struct proc *p)
{
    if (p->in_fd >= 0)
        close(p->in_fd);
    if (p->out_fd >= 0)
        close(p->out_fd);
    if (p->err_fd >= 0)
        close(p->err_fd);
    if (p->res_fd >= 0)
        close(p->res_fd);
    if (p->cmd_pidfd >= 0)
        close(p->cmd_pidfd);
    while (p->head) {
        struct chunk *c = p->head;
        p->head = c->next;
        xfree(c);
    }
    if (p->collect) {
        size_t held = p->out.len + p->err.len;
        __atomic_sub_fetch(&collected_total, held, __ATOMIC_RELAXED);
    }
    buf_free(&p->out);
    buf_free(&p->err);
    buf_free(&p->res);
    xfree(p->stdin_data);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->in_mu);
    xfree(p);
}

void proc_put(struct proc *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&table_mu);
    int last = --p->refs == 0;
    pthread_mutex_unlock(&table_mu);
    if (last)
        proc_free(p);
}

/* Unlinks handles that exited more than LIM_PROC_KEEP_EXITED_S ago. Called
 * with table_mu held; returns them for the caller to release unlocked. */
static struct proc *expire_locked(void)
{
    struct proc *gone = NULL;
    int64_t now = clock_mono_ms();
    for (struct proc **pp = &table; *pp;) {
        struct proc *p = *pp;
        pthread_mutex_lock(&p->mu);
        int old = p->exited && now - p->ended_mono_ms > (int64_t)LIM_PROC_KEEP_EXITED_S * 1000;
        pthread_mutex_unlock(&p->mu);
        if (old) {
            *pp = p->next;
            p->next = gone;
            gone = p;
        } else {
            pp = &p->next;
        }
    }
    return gone;
}

static void put_list(struct proc *l)
{
    while (l) {
        struct proc *n = l->next;
        proc_put(l);
        l = n;
    }
}

struct proc *proc_get(const char *session_id, const char *id)
{
    pthread_mutex_lock(&table_mu);
    struct proc *gone = expire_locked();
    struct proc *found = NULL;
    for (struct proc *p = table; p; p = p->next)
        if (strcmp(p->id, id) == 0 && strcmp(p->session_id, session_id) == 0) {
            found = p;
            found->refs++;
            break;
        }
    pthread_mutex_unlock(&table_mu);
    put_list(gone);
    return found;
}

const char *proc_id(const struct proc *p)
{
    return p->id;
}

int64_t proc_started_ms(const struct proc *p)
{
    return p->started_wall_ms;
}

/* ---- the command's pid ----
 *
 * The server's child is bwrap; its child is the PID namespace's init (bwrap
 * again), whose first child is the command. Signals other than KILL go to
 * the command itself (the namespace's init ignores what it has no handler
 * for), through a pidfd so that a recycled pid is never signalled. */

static pid_t first_child(pid_t pid)
{
    char path[64], text[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0)
        return 0;
    text[n] = '\0';
    long v = strtol(text, NULL, 10);
    return v > 0 ? (pid_t)v : 0;
}

/* Finds the command's pid (p->mu held). */
static void find_cmd_locked(struct proc *p)
{
    if (p->cmd_pid || p->reaped)
        return;
    pid_t init = first_child(p->pid);
    pid_t cmd = init ? first_child(init) : 0;
    if (!cmd)
        return;
    int fd = (int)syscall(SYS_pidfd_open, cmd, 0);
    if (fd < 0)
        return;
    /* Still a grandchild of ours: the pid was not recycled in between. */
    if (first_child(first_child(p->pid)) != cmd) {
        close(fd);
        return;
    }
    p->cmd_pid = cmd;
    p->cmd_pidfd = fd;
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)cmd);
    FILE *f = fopen(path, "re");
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "NSpid:", 6) == 0) {
            char *last = strrchr(line, '\t');
            if (last)
                p->ns_pid = (int)strtol(last + 1, NULL, 10);
        }
    }
    if (f)
        fclose(f);
}

int proc_ns_pid(struct proc *p)
{
    pthread_mutex_lock(&p->mu);
    find_cmd_locked(p);
    int v = p->ns_pid;
    pthread_mutex_unlock(&p->mu);
    return v;
}

pid_t proc_host_pid(struct proc *p)
{
    pthread_mutex_lock(&p->mu);
    find_cmd_locked(p);
    pid_t v = p->cmd_pid;
    pthread_mutex_unlock(&p->mu);
    return v;
}

/* ---- launching ---- */

/* Where an absolute path of the sandbox lies: 1 for the session's own files
 * (/tmp, /home: beneath sandbox_root), 2 for the read-only system (/usr and
 * its links), 0 for what the sandbox does not show. */
static int place_of_path(const char *path)
{
    static const char *const own[] = {"/tmp", "/home"};
    static const char *const sys[] = {"/usr", "/bin", "/sbin", "/lib", "/lib64"};
    for (size_t i = 0; i < 2; i++) {
        size_t n = strlen(own[i]);
        if (strncmp(path, own[i], n) == 0 && (path[n] == '/' || path[n] == '\0'))
            return 1;
    }
    for (size_t i = 0; i < 5; i++) {
        size_t n = strlen(sys[i]);
        if (strncmp(path, sys[i], n) == 0 && (path[n] == '/' || path[n] == '\0'))
            return 2;
    }
    return 0;
}

/* stat of an absolute sandbox path as the sandbox sees it: the session's
 * files are resolved inside its root (RESOLVE_IN_ROOT: its symlinks cannot
 * name host files), the system on the host. 0 or -errno. */
static int has_dotdot(const char *path)
{
    for (const char *c = path; (c = strstr(c, "..")) != NULL; c += 2)
        if (c > path && c[-1] == '/' && (c[2] == '/' || c[2] == '\0'))
            return 1;
    return 0;
}

static int sandbox_stat(const char *root, const char *path, struct stat *st)
{
    if (strcmp(path, "/") == 0)
        return stat("/", st) == 0 ? 0 : -errno;
    int place = place_of_path(path);
    if (place == 0)
        return -ENOENT;
    /* The system folders are looked at on the host: a ".." would climb out
     * of them there (into what the sandbox does not show). */
    if (place == 2)
        return has_dotdot(path) ? -ENOENT : stat(path, st) == 0 ? 0 : -errno;
    int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rfd < 0)
        return -errno;
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = O_PATH | O_CLOEXEC;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    int fd = (int)syscall(SYS_openat2, rfd, path + 1, &how, sizeof how);
    int er = errno;
    close(rfd);
    if (fd < 0)
        return -er;
    int rc = fstat(fd, st) == 0 ? 0 : -errno;
    close(fd);
    return rc;
}

/* The 400s kernel-images gives for a command that cannot start, decided
 * before the launch (inside bwrap an exec failure is only an exit status). */
static int check_command(const char *root, const char *cmd, const char *cwd, struct err *e)
{
    struct stat st;
    memset(&st, 0, sizeof st);
    if (cwd) {
        int rc = sandbox_stat(root, cwd, &st);
        if (rc == 0 && !S_ISDIR(st.st_mode))
            rc = -ENOTDIR;
        if (rc)
            return err_field(e, "cwd", "chdir %s: %s (the sandbox shows /tmp, /home and /usr)", cwd,
                             strerror(-rc));
    }
    if (strchr(cmd, '/')) {
        if (cmd[0] != '/')
            return err_field(e, "command", "a path must be absolute: %s", cmd);
        int rc = sandbox_stat(root, cmd, &st);
        if (rc == 0 && S_ISDIR(st.st_mode))
            rc = -EISDIR;
        if (rc == 0 && !(st.st_mode & 0111))
            rc = -EACCES;
        if (rc)
            return err_field(e, "command", "fork/exec %s: %s", cmd, strerror(-rc));
        return 0;
    }
    for (const char *d = PROC_PATH; *d;) {
        size_t n = strcspn(d, ":");
        char full[4096];
        if (snprintf(full, sizeof full, "%.*s/%s", (int)n, d, cmd) < (int)sizeof full &&
            stat(full, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111))
            return 0;
        d += n;
        if (*d == ':')
            d++;
    }
    return err_field(e, "command", "exec: \"%s\": executable file not found in $PATH", cmd);
}

/* Rewrites the sandbox's bwrap options for this process: root inside the
 * user namespace (as_root), the working folder, and --die-with-parent so
 * that the namespace (and the whole tree) dies with the bwrap we started. */
struct argv_ctx {
    struct strvec *v;
    int as_root;
    const char *cwd;
    int prev_id; /* the previous argument was --uid or --gid */
    int done;
};

static void push_arg(void *ctx, char *arg)
{
    struct argv_ctx *a = ctx;
    if (a->prev_id && a->as_root) {
        xfree(arg);
        arg = xstrdup("0");
    }
    a->prev_id = !a->done && (strcmp(arg, "--uid") == 0 || strcmp(arg, "--gid") == 0);
    if (!a->done && strcmp(arg, "--") == 0) {
        a->done = 1;
        strvec_push(a->v, xstrdup("--die-with-parent"));
        strvec_push(a->v, xstrdup("--chdir"));
        strvec_push(a->v, xstrdup(a->cwd));
    }
    strvec_push(a->v, arg);
}

/* The forked child: async-signal-safe calls only until execve. */
static void child_run(const struct sandbox_exec *x, const char *const *argv,
                      const char *const *envp, int in, int out, int err, int res, int tty)
{
    (void)setsid();
    child_reset_signals();
    if (tty && ioctl(in, TIOCSCTTY, 0) != 0)
        _exit(126);
    if (sandbox_exec_enter(x) != 0)
        _exit(125);
    /* Move the descriptors above 3 first so that the dup2s cannot clobber
     * one another. */
    int fds[4] = {in, out, err, res};
    for (int i = 0; i < 4; i++)
        if (fds[i] >= 0 && fds[i] <= 3 && (fds[i] = fcntl(fds[i], F_DUPFD, 10)) < 0)
            _exit(126);
    for (int i = 0; i < 4; i++) {
        if (fds[i] < 0)
            continue;
        if (dup2(fds[i], i) < 0)
            _exit(126);
    }
    /* The seccomp program next (x->seccomp_at, set by proc_start). */
    if (sandbox_exec_seccomp(x) != 0)
        _exit(125);
    child_close_from(x->seccomp_fd >= 0 ? x->seccomp_at + 1 : res >= 0 ? 4 : 3);
    execve(argv[0], (char *const *)argv, (char *const *)envp);
    _exit(127);
}

static void *proc_thread(void *arg);

static void set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static int count_running_locked(const char *session_id)
{
    int n = 0;
    for (struct proc *p = table; p; p = p->next) {
        pthread_mutex_lock(&p->mu);
        n += !p->exited && strcmp(p->session_id, session_id) == 0;
        pthread_mutex_unlock(&p->mu);
    }
    return n;
}

static void new_uuid(char out[PROC_ID_LEN + 1])
{
    unsigned char b[16];
    crypto_random(b, sizeof b);
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(out, PROC_ID_LEN + 1,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
             b[15]);
}

int proc_start(const struct proc_spec *s, struct proc **out, struct err *e)
{
    *out = NULL;
    const char *root = sandbox_root(s->sb);
    if (!root)
        return err_set(e, E_UNAVAIL, "sandbox_required",
                       "needs the session sandbox: docs/sandbox.md");
    const char *cwd = s->cwd ? s->cwd : SANDBOX_HOME;
    int rc = check_command(root, s->argv[0], s->cwd, e);
    if (rc)
        return rc;

    /* The environment: a clean base, then the client's on top. */
    struct strvec env = {0};
    strvec_push(&env, xstrdup("PATH=" PROC_PATH));
    strvec_push(&env, xstrdup("HOME=" SANDBOX_HOME));
    strvec_push(&env, xstrdup(s->as_root ? "USER=root" : "USER=kernel"));
    strvec_push(&env, xstrdup(s->as_root ? "LOGNAME=root" : "LOGNAME=kernel"));
    strvec_push(&env, xstrdup("LANG=C.UTF-8"));
    strvec_push(&env, xstrdup(s->tty ? "TERM=xterm-256color" : "TERM=dumb"));
    if (s->display)
        strvec_push(&env, xasprintf("DISPLAY=%s", s->display));
    for (size_t i = 0; s->env && s->env[i]; i++) {
        size_t klen = strcspn(s->env[i], "=");
        for (size_t j = 0; j < env.n; j++)
            if (strncmp(env.v[j], s->env[i], klen + 1) == 0) {
                xfree(env.v[j]);
                env.v[j] = env.v[--env.n];
                env.v[env.n] = NULL;
                break;
            }
        strvec_push(&env, xstrdup(s->env[i]));
    }

    struct proc *p = xcalloc(1, sizeof *p);
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->in_mu, NULL);
    p->refs = 3; /* the table, the thread, the caller */
    snprintf(p->session_id, sizeof p->session_id, "%s", s->session_id);
    new_uuid(p->id);
    p->sessions = s->sessions;
    p->cmd_pidfd = -1;
    p->in_fd = p->out_fd = p->err_fd = p->res_fd = -1;
    p->tty = s->tty;
    p->collect = s->collect;
    buf_init(&p->out, s->collect ? s->collect : 1);
    buf_init(&p->err, s->collect ? s->collect : 1);
    buf_init(&p->res, LIM_PW_OUTPUT_BYTES);
    p->on_exit = s->on_exit;
    p->ctx = s->ctx;
    if (s->stdin_data) {
        p->stdin_data = xmalloc(s->stdin_len + 1);
        memcpy(p->stdin_data, s->stdin_data, s->stdin_len);
        p->stdin_len = s->stdin_len;
    }

    /* The child's ends: [0] stdin, [1] stdout, [2] stderr, [3] result. */
    int cfd[4] = {-1, -1, -1, -1};
    int chan[2] = {-1, -1}; /* the caller's ends (s->channel) */
    int ok = 1;
    if (s->tty && s->channel) {
        ok = 0;
        errno = EINVAL;
    } else if (s->tty) {
        int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        ok = m >= 0 && grantpt(m) == 0 && unlockpt(m) == 0;
        char name[64];
        if (ok && ptsname_r(m, name, sizeof name) == 0) {
            int sl = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
            if (sl >= 0) {
                if (s->rows > 0 && s->cols > 0) {
                    struct winsize ws = {.ws_row = (unsigned short)s->rows,
                                         .ws_col = (unsigned short)s->cols};
                    (void)ioctl(m, TIOCSWINSZ, &ws);
                }
                cfd[0] = sl;
                cfd[1] = sl;
                cfd[2] = sl;
                p->in_fd = m;
                p->out_fd = fcntl(m, F_DUPFD_CLOEXEC, 0);
                ok = p->out_fd >= 0;
            } else {
                ok = 0;
            }
        } else {
            ok = 0;
        }
        if (!ok && m >= 0 && p->in_fd < 0)
            close(m);
    } else {
        int pi[2], po[2], pe[2];
        ok = pipe2(pi, O_CLOEXEC) == 0;
        if (ok && pipe2(po, O_CLOEXEC) != 0) {
            close(pi[0]);
            close(pi[1]);
            ok = 0;
        }
        if (ok && pipe2(pe, O_CLOEXEC) != 0) {
            close(pi[0]);
            close(pi[1]);
            close(po[0]);
            close(po[1]);
            ok = 0;
        }
        if (ok) {
            cfd[0] = pi[0];
            if (s->channel)
                chan[0] = pi[1];
            else
                p->in_fd = pi[1];
            cfd[1] = po[1];
            p->out_fd = po[0];
            cfd[2] = pe[1];
            p->err_fd = pe[0];
        }
    }
    if (ok && (s->result_fd || s->channel)) {
        int pr[2];
        ok = pipe2(pr, O_CLOEXEC) == 0;
        if (ok) {
            cfd[3] = pr[1];
            if (s->channel)
                chan[1] = pr[0];
            else
                p->res_fd = pr[0];
        }
    }
    if (!ok) {
        int er = errno;
        for (int i = 0; i < 2; i++)
            if (chan[i] >= 0)
                close(chan[i]);
        for (int i = 0; i < 4; i++)
            if (cfd[i] >= 0 && (i == 0 || cfd[i] != cfd[i - 1]))
                close(cfd[i]);
        strvec_free(&env);
        p->refs = 1;
        proc_put(p);
        return err_set(e, E_INTERNAL, "internal", "failed to start process: %s", strerror(er));
    }

    struct sandbox_exec x;
    rc = sandbox_exec_open(s->sb, NULL, NULL, &x, e);
    struct strvec av = {0};
    if (rc == 0) {
        if (x.seccomp_fd >= 0)
            x.seccomp_at = s->result_fd || s->channel ? 4 : 3; /* after child_run's 0-3 */
        struct argv_ctx a = {&av, s->as_root, cwd, 0, 0};
        sandbox_bwrap_argv(&x, NULL, NULL, s->extra_ro, s->argv[0], push_arg, &a);
        for (size_t i = 1; s->argv[i]; i++)
            strvec_push(&av, xstrdup(s->argv[i]));
    }

    pthread_mutex_lock(&table_mu);
    struct proc *gone = expire_locked();
    if (rc == 0 && stopping)
        rc = err_set(e, E_UNAVAIL, "unavailable", "the server is stopping");
    if (rc == 0 && count_running_locked(s->session_id) >= LIM_PROC_PER_SESSION)
        rc = err_set(e, E_CONFLICT, "conflict",
                     "the session already runs %d processes (at most %d at once)",
                     LIM_PROC_PER_SESSION, LIM_PROC_PER_SESSION);
    pid_t pid = -1;
    int fork_errno = 0;
    if (rc == 0) {
        p->started_mono_ms = clock_mono_ms();
        p->started_wall_ms = clock_now_ms();
        p->deadline_ms = s->timeout_ms > 0 ? p->started_mono_ms + s->timeout_ms : 0;
        pid = fork();
        if (pid == 0)
            child_run(&x, (const char *const *)av.v, (const char *const *)env.v, cfd[0], cfd[1],
                      cfd[2], cfd[3], s->tty);
        fork_errno = errno;
        if (pid > 0) {
            p->pid = pid;
            p->next = table;
            table = p;
        }
    }
    pthread_mutex_unlock(&table_mu);
    put_list(gone);
    sandbox_exec_close(&x);
    strvec_free(&av);
    strvec_free(&env);
    for (int i = 0; i < 4; i++)
        if (cfd[i] >= 0 && (i == 0 || cfd[i] != cfd[i - 1]))
            close(cfd[i]);
    if (rc == 0 && pid < 0)
        rc = err_set(e, E_INTERNAL, "internal", "failed to start process: fork: %s",
                     strerror(fork_errno));
    if (rc) {
        for (int i = 0; i < 2; i++)
            if (chan[i] >= 0)
                close(chan[i]);
        p->refs = 1;
        proc_put(p);
        return rc;
    }
    if (s->channel) {
        s->channel[0] = chan[0];
        s->channel[1] = chan[1];
    }
    reaper_watch(pid);
    if (p->in_fd >= 0)
        set_nonblock(p->in_fd);
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &at, proc_thread, p) != 0) {
        /* No thread to reap it: kill it and reap here. */
        (void)kill(-pid, SIGKILL);
        (void)waitpid(pid, NULL, 0);
        reaper_forget(pid);
        pthread_mutex_lock(&p->mu);
        p->reaped = p->exited = 1;
        p->exit_code = 128 + SIGKILL;
        p->ended_mono_ms = clock_mono_ms();
        pthread_mutex_unlock(&p->mu);
        proc_put(p); /* the thread's */
        proc_put(p); /* the caller's */
        pthread_attr_destroy(&at);
        return err_set(e, E_INTERNAL, "internal", "failed to start process: no thread");
    }
    pthread_attr_destroy(&at);
    *out = p;
    return 0;
}

/* ---- the process's thread ---- */

static void wake_subs_locked(struct proc *p)
{
    for (struct proc_sub *s = p->subs; s; s = s->next)
        s->wake(s->ctx);
}

/* Output read from the process: into the collect buffers or the replay list. */
static void deliver(struct proc *p, int stream, const char *data, size_t n)
{
    pthread_mutex_lock(&p->mu);
    if (stream == PROC_RESULT) {
        if (buf_append(&p->res, data, n) != 0)
            p->res_trunc = 1;
    } else if (p->collect) {
        struct buf *b = stream == PROC_STDOUT ? &p->out : &p->err;
        int *t = stream == PROC_STDOUT ? &p->out_trunc : &p->err_trunc;
        size_t room = b->len < p->collect ? p->collect - b->len : 0;
        size_t take = n < room ? n : room;
        /* Reserve from the server-wide budget; give back what is over. */
        size_t after = __atomic_add_fetch(&collected_total, take, __ATOMIC_RELAXED);
        if (after > LIM_PROC_OUTPUT_TOTAL_BYTES) {
            size_t over = after - LIM_PROC_OUTPUT_TOTAL_BYTES;
            over = over < take ? over : take;
            __atomic_sub_fetch(&collected_total, over, __ATOMIC_RELAXED);
            take -= over;
        }
        if (take < n)
            *t = 1;
        if (take && buf_append(b, data, take) != 0) {
            __atomic_sub_fetch(&collected_total, take, __ATOMIC_RELAXED);
            *t = 1;
        }
    } else {
        struct chunk *c = xmalloc(sizeof *c);
        c->next = NULL;
        c->seq = p->next_seq++;
        c->stream = stream;
        c->len = n;
        memcpy(c->data, data, n);
        if (p->tail)
            p->tail->next = c;
        else
            p->head = c;
        p->tail = c;
        p->kept_bytes += n;
        p->kept_chunks++;
        while (p->head != p->tail &&
               (p->kept_bytes > LIM_PROC_REPLAY_BYTES || p->kept_chunks > PROC_MAX_CHUNKS)) {
            struct chunk *o = p->head;
            p->head = o->next;
            p->kept_bytes -= o->len;
            p->kept_chunks--;
            xfree(o);
        }
        wake_subs_locked(p);
    }
    pthread_mutex_unlock(&p->mu);
}

/* Reads once from *fd; closes it at end of file (or EIO: a PTY whose
 * last slave closed). */
static void pull(struct proc *p, int *fd, int stream)
{
    char b[PROC_CHUNK];
    ssize_t n = read(*fd, b, sizeof b);
    if (n > 0) {
        deliver(p, stream, b, (size_t)n);
        return;
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    close(*fd);
    *fd = -1;
}

/* Under p->mu: proc_session_end and proc_kill_all clear p->sessions under
 * it, so that no thread touches a session manager the server is freeing. */
static void touch_session(struct proc *p)
{
    pthread_mutex_lock(&p->mu);
    struct live *l = p->sessions ? sessmgr_get(p->sessions, p->session_id) : NULL;
    if (l) {
        live_touch(l);
        sessmgr_put(l);
    }
    pthread_mutex_unlock(&p->mu);
}

/* Writes the pending initial stdin; closes stdin once it is all written. */
static void feed_stdin(struct proc *p)
{
    pthread_mutex_lock(&p->in_mu);
    if (p->in_fd >= 0 && p->stdin_data) {
        ssize_t n = write(p->in_fd, p->stdin_data + p->stdin_off, p->stdin_len - p->stdin_off);
        if (n > 0)
            p->stdin_off += (size_t)n;
        if ((n < 0 && errno != EAGAIN && errno != EINTR) || p->stdin_off >= p->stdin_len) {
            xfree(p->stdin_data);
            p->stdin_data = NULL;
            if (!p->tty) {
                close(p->in_fd);
                p->in_fd = -1;
            }
        }
    }
    pthread_mutex_unlock(&p->in_mu);
}

static void *proc_thread(void *arg)
{
    struct proc *p = arg;
    int64_t last_touch = 0, drain_until = 0;
    int status = 0;
    for (;;) {
        struct pollfd pf[4];
        int kind[4], n = 0;
        int *fds[3] = {&p->out_fd, &p->err_fd, &p->res_fd};
        static const int streams[3] = {PROC_STDOUT, PROC_STDERR, PROC_RESULT};
        for (int i = 0; i < 3; i++)
            if (*fds[i] >= 0) {
                pf[n] = (struct pollfd){.fd = *fds[i], .events = POLLIN};
                kind[n++] = i;
            }
        /* stdin_data and in_fd change only on this thread while initial
         * stdin is pending (proc_stdin refuses until then): no lock, so
         * that a client's slow stdin write never stalls the output. */
        if (p->stdin_data && p->in_fd >= 0) {
            pf[n] = (struct pollfd){.fd = p->in_fd, .events = POLLOUT};
            kind[n++] = 3;
        }
        int64_t now = clock_mono_ms();
        int reaped;
        pthread_mutex_lock(&p->mu);
        reaped = p->reaped;
        pthread_mutex_unlock(&p->mu);
        int outputs_open = p->out_fd >= 0 || p->err_fd >= 0 || p->res_fd >= 0;
        if (reaped && (!outputs_open || now >= drain_until))
            break;
        int wait_ms = PROC_TICK_MS;
        if (reaped && drain_until - now < wait_ms)
            wait_ms = (int)(drain_until - now);
        if (!reaped && p->deadline_ms && p->deadline_ms - now < wait_ms)
            wait_ms = p->deadline_ms - now > 0 ? (int)(p->deadline_ms - now) : 0;
        int r = poll(pf, (nfds_t)n, wait_ms);
        if (r > 0) {
            for (int i = 0; i < n; i++) {
                if (!pf[i].revents)
                    continue;
                if (kind[i] == 3)
                    feed_stdin(p);
                else
                    pull(p, fds[kind[i]], streams[kind[i]]);
            }
        }
        now = clock_mono_ms();
        pthread_mutex_lock(&p->mu);
        if (!p->reaped) {
            find_cmd_locked(p);
            pid_t w = waitpid(p->pid, &status, WNOHANG);
            if (w == p->pid || (w < 0 && errno == ECHILD)) {
                p->reaped = 1;
                drain_until = now + PROC_DRAIN_MS;
            } else if (p->deadline_ms && now >= p->deadline_ms) {
                p->timed_out = 1;
                (void)kill(-p->pid, SIGKILL);
                p->deadline_ms = 0;
            }
        }
        pthread_mutex_unlock(&p->mu);
        if (now - last_touch >= PROC_TOUCH_MS) {
            touch_session(p);
            last_touch = now;
        }
    }
    reaper_forget(p->pid);
    for (int i = 0; i < 3; i++) {
        int *fd = i == 0 ? &p->out_fd : i == 1 ? &p->err_fd : &p->res_fd;
        if (*fd >= 0) {
            close(*fd);
            *fd = -1;
        }
    }
    pthread_mutex_lock(&p->in_mu);
    if (p->in_fd >= 0) {
        close(p->in_fd);
        p->in_fd = -1;
    }
    pthread_mutex_unlock(&p->in_mu);
    pthread_mutex_lock(&p->mu);
    if (WIFEXITED(status))
        p->exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
        p->exit_code = 128 + WTERMSIG(status);
    p->exited = 1;
    p->ended_mono_ms = clock_mono_ms();
    wake_subs_locked(p);
    pthread_mutex_unlock(&p->mu);
    touch_session(p);
    if (p->on_exit)
        p->on_exit(p->ctx, p);
    proc_put(p);
    return NULL;
}

/* ---- calls on a process ---- */

/* utime + stime (+ children's) in clock ticks and the resident set of pid. */
static void sample(pid_t pid, long long *ticks, long long *rss)
{
    char path[64], text[1024];
    *ticks = 0;
    *rss = 0;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, text, sizeof text - 1);
        close(fd);
        if (n > 0) {
            text[n] = '\0';
            char *q = strrchr(text, ')');
            /* Fields after the name: state is the 3rd, utime the 14th. */
            for (int f = 2; q && f < 14; f++)
                q = strchr(q + 1, ' ');
            if (q) {
                char *end;
                for (int i = 0; i < 4; i++) {
                    *ticks += strtoll(q + 1, &end, 10);
                    q = end;
                }
            }
        }
    }
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            *rss = strtoll(line + 6, NULL, 10) * 1024;
    if (f)
        fclose(f);
}

void proc_status(struct proc *p, struct proc_status *st)
{
    memset(st, 0, sizeof *st);
    pthread_mutex_lock(&p->mu);
    find_cmd_locked(p);
    st->running = !p->exited;
    st->exit_code = p->exit_code;
    st->timed_out = p->timed_out;
    int64_t end = p->exited ? p->ended_mono_ms : clock_mono_ms();
    st->duration_ms = end - p->started_mono_ms;
    pid_t cmd = p->reaped ? 0 : p->cmd_pid;
    pthread_mutex_unlock(&p->mu);
    if (cmd > 0 && st->running) {
        long long ticks, rss;
        sample(cmd, &ticks, &rss);
        long hz = sysconf(_SC_CLK_TCK);
        if (hz > 0 && st->duration_ms > 0)
            st->cpu_pct = (double)ticks * 1000.0 / (double)hz / (double)st->duration_ms * 100.0;
        st->mem_bytes = rss;
    }
}

int proc_stdin(struct proc *p, const void *data, size_t len, size_t *written, struct err *e)
{
    *written = 0;
    /* Calls beyond the cap are refused before they queue on in_mu: a
     * flood of stdin calls to one process holds no HTTP thread. */
    if (__atomic_add_fetch(&p->stdin_calls, 1, __ATOMIC_ACQ_REL) > LIM_PROC_STDIN_CALLS) {
        __atomic_sub_fetch(&p->stdin_calls, 1, __ATOMIC_ACQ_REL);
        int rc = err_set(e, E_LIMIT, "rate_limited",
                         "this process already has %d stdin calls in flight; retry",
                         LIM_PROC_STDIN_CALLS);
        e->retry_after = 1;
        return rc;
    }
    pthread_mutex_lock(&p->in_mu);
    int rc = 0;
    if (p->in_fd < 0 || p->stdin_data)
        rc = err_set(e, E_CONFLICT, "conflict", "process is not running or its stdin is closed");
    /* in_fd is non-blocking: what the pipe (or PTY) takes now is written,
     * and the answer says how much; a process that does not read never
     * makes the call wait. */
    while (rc == 0 && *written < len) {
        ssize_t n = write(p->in_fd, (const char *)data + *written, len - *written);
        if (n > 0) {
            *written += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        rc = err_set(e, E_INTERNAL, "internal", "failed to write to stdin: %s",
                     n < 0 ? strerror(errno) : "closed");
    }
    pthread_mutex_unlock(&p->in_mu);
    __atomic_sub_fetch(&p->stdin_calls, 1, __ATOMIC_ACQ_REL);
    return rc;
}

int proc_signal(struct proc *p, int sig, struct err *e)
{
    pthread_mutex_lock(&p->mu);
    if (p->reaped) {
        pthread_mutex_unlock(&p->mu);
        return err_set(e, E_NOTFOUND, "not_found", "process not running");
    }
    int rc = 0;
    if (sig == SIGKILL) {
        /* The whole tree: bwrap's group; its namespace dies with it. */
        if (kill(-p->pid, SIGKILL) != 0)
            rc = -errno;
    } else {
        /* Just after spawn the command may not be forked yet: wait for it
         * (bounded) rather than answer "not running". */
        find_cmd_locked(p);
        for (int i = 0; i < 200 && p->cmd_pidfd < 0 && !p->reaped; i++) {
            pthread_mutex_unlock(&p->mu);
            struct timespec d = {0, 5 * 1000 * 1000};
            nanosleep(&d, NULL);
            pthread_mutex_lock(&p->mu);
            find_cmd_locked(p);
        }
        if (p->reaped || p->cmd_pidfd < 0)
            rc = -ESRCH;
        else if (syscall(SYS_pidfd_send_signal, p->cmd_pidfd, sig, NULL, 0) != 0)
            rc = -errno;
    }
    pthread_mutex_unlock(&p->mu);
    if (rc == -ESRCH)
        return err_set(e, E_NOTFOUND, "not_found", "process not running");
    if (rc)
        return err_set(e, E_INTERNAL, "internal", "failed to signal process: %s", strerror(-rc));
    return 0;
}

int proc_resize(struct proc *p, int rows, int cols, struct err *e)
{
    if (!p->tty)
        return err_set(e, E_INVALID, "bad_request", "process is not PTY-backed");
    pthread_mutex_lock(&p->in_mu);
    int rc = 0;
    struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
    if (p->in_fd < 0)
        rc = err_set(e, E_NOTFOUND, "not_found", "process not running");
    else if (ioctl(p->in_fd, TIOCSWINSZ, &ws) != 0)
        rc = err_set(e, E_INTERNAL, "internal", "failed to resize PTY: %s", strerror(errno));
    pthread_mutex_unlock(&p->in_mu);
    return rc;
}

const char *proc_out(struct proc *p, int stream, size_t *len, int *truncated)
{
    struct buf *b = stream == PROC_STDOUT ? &p->out : stream == PROC_STDERR ? &p->err : &p->res;
    int t = stream == PROC_STDOUT   ? p->out_trunc
            : stream == PROC_STDERR ? p->err_trunc
                                    : p->res_trunc;
    if (truncated)
        *truncated = t;
    *len = b->len;
    return b->p ? b->p : "";
}

/* ---- waiting for an exit ---- */

void proc_waiter_init(struct proc_waiter *w)
{
    w->done = 0;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
}

void proc_waiter_exited(void *ctx, struct proc *p)
{
    (void)p;
    struct proc_waiter *w = ctx;
    pthread_mutex_lock(&w->mu);
    w->done = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void proc_waiter_wait(struct proc_waiter *w)
{
    pthread_mutex_lock(&w->mu);
    while (!w->done)
        pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

void proc_waiter_destroy(struct proc_waiter *w)
{
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
}

/* ---- subscribers ---- */

struct proc_sub *proc_subscribe(struct proc *p, void (*wake)(void *ctx), void *ctx)
{
    struct proc_sub *s = xcalloc(1, sizeof *s);
    pthread_mutex_lock(&table_mu);
    p->refs++;
    pthread_mutex_unlock(&table_mu);
    s->p = p;
    s->wake = wake;
    s->ctx = ctx;
    pthread_mutex_lock(&p->mu);
    s->next_seq = p->head ? p->head->seq : p->next_seq;
    s->next = p->subs;
    p->subs = s;
    pthread_mutex_unlock(&p->mu);
    return s;
}

int proc_sub_next(struct proc_sub *s, int *stream, char *buf, size_t *len, int *exit_code)
{
    struct proc *p = s->p;
    pthread_mutex_lock(&p->mu);
    struct chunk *c = p->head;
    while (c && c->seq < s->next_seq)
        c = c->next;
    int rc;
    if (c) {
        *stream = c->stream;
        memcpy(buf, c->data, c->len);
        *len = c->len;
        s->next_seq = c->seq + 1;
        rc = 1;
    } else if (p->exited) {
        *exit_code = p->exit_code;
        rc = -1;
    } else {
        rc = 0;
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void proc_unsubscribe(struct proc_sub *s)
{
    if (!s)
        return;
    struct proc *p = s->p;
    pthread_mutex_lock(&p->mu);
    for (struct proc_sub **pp = &p->subs; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    pthread_mutex_unlock(&p->mu);
    xfree(s);
    proc_put(p);
}

void proc_session_end(const char *session_id)
{
    struct proc *gone = NULL;
    pthread_mutex_lock(&table_mu);
    for (struct proc **pp = &table; *pp;) {
        struct proc *p = *pp;
        if (strcmp(p->session_id, session_id) == 0) {
            *pp = p->next;
            p->next = gone;
            gone = p;
        } else {
            pp = &p->next;
        }
    }
    pthread_mutex_unlock(&table_mu);
    for (struct proc *p = gone; p; p = p->next) {
        pthread_mutex_lock(&p->mu);
        p->sessions = NULL;
        if (!p->reaped)
            (void)kill(-p->pid, SIGKILL);
        pthread_mutex_unlock(&p->mu);
    }
    put_list(gone);
}

void proc_kill_all(void)
{
    pthread_mutex_lock(&table_mu);
    stopping = 1;
    for (struct proc *p = table; p; p = p->next) {
        pthread_mutex_lock(&p->mu);
        p->sessions = NULL;
        if (!p->reaped)
            (void)kill(-p->pid, SIGKILL);
        pthread_mutex_unlock(&p->mu);
    }
    pthread_mutex_unlock(&table_mu);
}
