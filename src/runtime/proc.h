/*
 * proc: processes a client runs inside its session's sandbox
 * (browsers.process.*, and the Node runner of playwright.execute).
 *
 * Every process is launched the way the session's browser is: the server
 * forks, the child joins the session's cgroup and network namespace and
 * becomes the session's uid (sandbox_exec_enter), then execs bwrap, which
 * gives it the session's /tmp and /home, the system read-only and a PID
 * namespace of its own. `--die-with-parent` ties that namespace to the bwrap
 * the server started, so killing that one process group ends everything the
 * command started (grandchildren included: the kernel kills a PID
 * namespace's every task when its init dies). The environment is built here
 * from nothing (PATH, HOME, USER, LANG, TERM, DISPLAY, then the client's),
 * never the server's.
 *
 * One thread per process reads its output (pipes, or a PTY master allocated
 * here), writes pending stdin, reaps it, enforces its deadline and keeps the
 * session from idling out while it runs. Output goes either to two capped
 * buffers (collect: exec) or to a bounded replay list of chunks (<= 4096
 * bytes each) that stream subscribers read from their own position; a
 * subscriber that falls behind the bound skips the dropped chunks.
 *
 * Processes live in one table keyed by (session id, process id); a handle
 * stays LIM_PROC_KEEP_EXITED_S after exit and is then forgotten.
 *
 * Threading: everything here is thread-safe. Callbacks (on_exit, wake) run
 * on the process's own thread.
 */
#ifndef BD_RUNTIME_PROC_H
#define BD_RUNTIME_PROC_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/err.h"

struct sandbox;
struct sessmgr;
struct proc;

#define PROC_ID_LEN 36 /* a UUID in text */

struct proc_spec {
    const char *session_id;
    const struct sandbox *sb; /* borrowed for the call; must have sandbox_root */
    struct sessmgr *sessions; /* touched while the process runs (idle timeout); may be NULL */
    const char *const *argv;  /* command and arguments; argv[0] is exec'd directly (no shell) */
    const char *const *env; /* "K=V" pairs on top of the clean base, NULL-terminated; may be NULL */
    const char *cwd;        /* absolute inside the sandbox; NULL: /home/kernel */
    int as_root;            /* uid 0 inside the sandbox's user namespace (no capabilities) */
    int tty, rows, cols;    /* a PTY (rows/cols 0: the kernel's default size) */
    int64_t timeout_ms;     /* killed (whole tree) after this long; 0: no deadline */
    size_t collect;         /* keep stdout/stderr whole, up to this many bytes each (exec);
                               0: the bounded replay list for stream subscribers */
    const char *display;    /* ":0" for a headful session's X server, or NULL */
    /* pairs, a host path and where the process sees it (read-only); may be NULL */
    const char *const *extra_ro;
    int result_fd; /* also capture what the process writes to its descriptor 3 */
    /* When non-NULL, the caller talks to the process itself: channel[0]
     * gets the write end of its stdin, channel[1] the read end of its
     * descriptor 3 (both close-on-exec, the caller's to close); the
     * process's thread touches neither (stdin_data and result_fd unused). */
    int *channel;
    const char *stdin_data; /* written to stdin then closed (copied); NULL: stdin stays open */
    size_t stdin_len;
    /* Called once when the process has exited and its output is drained
     * (the process's thread). */
    void (*on_exit)(void *ctx, struct proc *p);
    void *ctx;
};

/* Starts a process. *out is a reference (proc_put). E_INVALID when the
 * command cannot be found or run inside the sandbox (said in e, field
 * "command" or "cwd"), E_CONFLICT when the session already runs
 * LIM_PROC_PER_SESSION processes, E_INTERNAL when a system call failed. */
int proc_start(const struct proc_spec *s, struct proc **out, struct err *e) WUR;
/* The process of session_id with id (a reference), or NULL (unknown,
 * another session's, or forgotten after exit). */
struct proc *proc_get(const char *session_id, const char *id);
void proc_put(struct proc *p);

const char *proc_id(const struct proc *p);
/* The process's pid inside its PID namespace (what `ps` there shows), 0 if
 * not known yet; and the host's pid of the command (0 if not known). */
int proc_ns_pid(struct proc *p);
pid_t proc_host_pid(struct proc *p);
int64_t proc_started_ms(const struct proc *p); /* wall clock, for started_at */

struct proc_status {
    int running;
    int exit_code;  /* valid when !running: the command's status, 128+N when killed by signal N */
    int timed_out;  /* killed at its deadline */
    double cpu_pct; /* CPU time over wall time since start, in percent of one CPU */
    long long mem_bytes; /* resident set, while running */
    int64_t duration_ms;
};
void proc_status(struct proc *p, struct proc_status *st);

/* Writes data to the process's stdin (or PTY) without waiting: *written
 * gets what the pipe took at once (less than len, possibly 0, when the
 * process is not reading; the caller sends the rest later). E_CONFLICT when
 * the process has exited or its stdin is closed, E_LIMIT (retry_after set)
 * past LIM_PROC_STDIN_CALLS calls in flight on this process, E_INTERNAL on a
 * write error. */
int proc_stdin(struct proc *p, const void *data, size_t len, size_t *written, struct err *e) WUR;
/* Sends sig to the command (TERM, INT, HUP) or kills the whole tree (KILL).
 * E_NOTFOUND "process not running" when it has exited. */
int proc_signal(struct proc *p, int sig, struct err *e) WUR;
/* Resizes the PTY. E_INVALID when the process has none. */
int proc_resize(struct proc *p, int rows, int cols, struct err *e) WUR;

/* What exec collected (collect mode), valid after on_exit: borrowed. */
const char *proc_out(struct proc *p, int stream, size_t *len, int *truncated);
#define PROC_STDOUT 1
#define PROC_STDERR 2
#define PROC_RESULT 3

/* ---- waiting for an exit ---- */

/* For a caller that blocks until the process it started has exited (apps'
 * runner, WebMCP's): proc_waiter_init; proc_start with .on_exit =
 * proc_waiter_exited and .ctx = the waiter; proc_waiter_wait when it
 * started; proc_waiter_destroy in every case. */
struct proc_waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
};
void proc_waiter_init(struct proc_waiter *w);
/* The on_exit callback: marks the waiter (ctx) done and wakes it. */
void proc_waiter_exited(void *ctx, struct proc *p);
/* Blocks until proc_waiter_exited has run. */
void proc_waiter_wait(struct proc_waiter *w);
void proc_waiter_destroy(struct proc_waiter *w);

/* ---- stream subscribers ---- */

struct proc_sub;
/* Subscribes to the output from the oldest chunk still kept. wake(ctx) is
 * called (process thread, under the process's lock: must not block or call
 * back) whenever there is something new. */
struct proc_sub *proc_subscribe(struct proc *p, void (*wake)(void *ctx), void *ctx);
/* The next chunk: 1 with stream (PROC_STDOUT or PROC_STDERR) and up to 4096
 * bytes in buf; 0 when nothing is new yet; -1 when the process has exited
 * and everything was read (*exit_code set). */
int proc_sub_next(struct proc_sub *s, int *stream, char *buf, size_t *len, int *exit_code);
/* Ends a subscription: wake is not called after this returns. */
void proc_unsubscribe(struct proc_sub *s);

/* Kills every process of a session and forgets them (the session ended). */
void proc_session_end(const char *session_id);
/* Kills every process of every session (the server stops) and refuses new
 * ones (E_UNAVAIL); their on_exit callbacks follow on their threads, which
 * no longer touch the session manager (it may be freed after this). */
void proc_kill_all(void);

#endif
