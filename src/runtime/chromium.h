/*
 * chromium: one real Chromium process per session.
 *
 * Every browser runs in its own session and process group (setsid), with its
 * own user-data folder, a DevTools endpoint on 127.0.0.1 only, optionally its
 * own Xvfb display (headful), its own view of the managed-policy folder
 * (chrome_policy) and its own cgroup v2 memory limit where the host allows it.
 * docs/runtime.md explains the flags, the lifecycle and the host requirements.
 *
 * Threading: one struct chromium must not be used by two threads at once;
 * different browsers may be launched and stopped concurrently. The server
 * must not ignore SIGCHLD nor reap children with waitpid(-1): browsers are
 * reaped here, by pid.
 */
#ifndef BD_RUNTIME_CHROMIUM_H
#define BD_RUNTIME_CHROMIUM_H

#include <sys/types.h>

#include "core/err.h"

/* Where Chromium reads managed (mandatory) enterprise policies. */
#define CHROMIUM_POLICY_DIR     "/etc/chromium/policies/managed"
#define CHROMIUM_DEFAULT_BINARY "/usr/bin/chromium"

struct chromium_opts {
    const char *binary;        /* path of chromium; NULL = CHROMIUM_DEFAULT_BINARY */
    const char *user_data_dir; /* absolute; created by chromium_launch if missing (mode 0700) */
    int headless;      /* 1: --headless=new; 0: a private Xvfb display sized to the window */
    int stealth;       /* --disable-blink-features=AutomationControlled and a user agent without
                          "HeadlessChrome" */
    int kiosk;         /* --kiosk */
    int width, height; /* window size (also the Xvfb screen for headful) */
    const char *proxy_server;      /* NULL or e.g. "http://127.0.0.1:41234" -> --proxy-server=...,
                                      with --proxy-bypass-list=<-loopback> */
    const char *policy_json;       /* NULL or a JSON object text of Chrome enterprise policies for
                                      THIS browser only */
    const char *start_url;         /* NULL = about:blank; must not start with '-' */
    const char *const *extra_args; /* NULL-terminated, may be NULL (test-mode flags such as
                                      --host-resolver-rules); trusted, passed verbatim */
    long long memory_max_bytes;    /* 0 = none; else a cgroup v2 memory.max where the host
                                      allows it (unsandboxed path; a sandbox has its own) */
    struct sandbox *sandbox;       /* NULL, or the session's sandbox (runtime/sandbox.h) the
                                      browser and its Xvfb run in; the browser takes a
                                      reference. Its DevTools URL then names the sandbox's
                                      network namespace ("ws://nsN@127.0.0.1:PORT/...") */
    /* NULL-terminated, may be NULL: unpacked extension folders as the browser
     * sees them -> --load-extension=a,b (no commas in a path). */
    const char *const *extension_dirs;
    /* NULL, or a flag read atomically while waiting for DevTools: once it is
     * non-zero the launch gives up (E_UNAVAIL) and cleans up, as after a
     * timeout (a server stopping does not wait for a spare's launch). */
    const int *cancel;
};

struct chromium; /* opaque */
struct sandbox;

/* Starts Chromium (and Xvfb when headful) and waits at most timeout_ms until
 * the DevTools endpoint is ready (the "DevTools listening on ws://..." line
 * on its stderr). Everything Chromium writes to stderr goes on being drained
 * into <user_data_dir>.log; Xvfb logs to <user_data_dir>.xvfb.log.
 * On success *out is an owned browser (release with chromium_free).
 * Failures leave nothing running: E_INVALID for bad options (with field
 * details), E_UNAVAIL when the browser did not become ready in time, exited
 * early, or when policy_json is set and the host forbids a private mount
 * namespace, E_INTERNAL for other system call failures. */
int chromium_launch(const struct chromium_opts *o, int timeout_ms, struct chromium **out,
                    struct err *e) WUR;

/* Headless only: sizes the browser's window so that its first page's
 * viewport (innerWidth x innerHeight) is width x height. New headless
 * Chromium lays pages out below the frame of a browser window it does not
 * draw (tab strip and toolbar, 87 to 143 px): a window of the asked size
 * would give a shorter page than its screenshots and the session's
 * coordinates. Called by chromium_launch for headless browsers and after a
 * headless resize. E_UNAVAIL / E_INTERNAL when DevTools cannot do it within
 * timeout_ms. */
int chromium_fit_headless(const char *ws_url, int width, int height, int timeout_ms,
                          struct err *e) WUR;

/* "ws://127.0.0.1:PORT/devtools/browser/UUID"; owned by c. */
const char *chromium_ws_url(const struct chromium *c);
/* The DevTools port on 127.0.0.1. */
int chromium_port(const struct chromium *c);
/* The browser process (a session and process group leader). */
pid_t chromium_pid(const struct chromium *c);
/* /proc/PID/stat field 22 of the browser, to identify it after a server crash. */
unsigned long long chromium_start_ticks(const struct chromium *c);
/* Xvfb process, 0 when headless. */
pid_t chromium_xvfb_pid(const struct chromium *c);
/* /proc/PID/stat field 22 of Xvfb, 0 when headless. */
unsigned long long chromium_xvfb_start_ticks(const struct chromium *c);
/* X display number, or -1 when headless. */
int chromium_display(const struct chromium *c);
/* The Xvfb screen's size as launched (a resize never grows or shrinks it);
 * 0 x 0 when headless. */
void chromium_screen_size(const struct chromium *c, int *width, int *height);
/* Real running time so far, or the total once the exit has been noticed. */
long long chromium_uptime_ms(const struct chromium *c);
/* 1 if memory.max was applied to the browser's cgroup, 0 if not. */
int chromium_memory_enforced(const struct chromium *c);
/* The sandbox the browser runs in (borrowed), or NULL. */
struct sandbox *chromium_sandbox(const struct chromium *c);
/* The browser's cgroup folder, or NULL when memory is not enforced; owned by c. */
const char *chromium_cgroup_path(const struct chromium *c);

/* Non-blocking: returns 1 if the browser process has exited (it is reaped and
 * whatever is left of its process group is killed), with its wait status in
 * *status (status may be NULL); 0 while it runs. Keeps returning 1 after. */
int chromium_exited(struct chromium *c, int *status);

/* Headful browsers: makes sure the Xvfb screen can hold a width x height
 * window. The screen size is fixed at launch (no RandR client is available),
 * so this returns 0 when the new size fits in the screen (or the browser is
 * headless) and E_NOTIMPL otherwise: relaunch the browser to grow the screen.
 * The window itself is resized by the caller over CDP. */
int chromium_resize_screen(struct chromium *c, int width, int height, struct err *e) WUR;

/* Stops it: SIGTERM to the process group, up to grace_ms for the browser to
 * exit, then SIGKILL to the group; reaps it; stops Xvfb; removes the cgroup
 * and the policy folder; removes the user-data folder and the log files when
 * remove_dir. Safe to call again and after the browser exited. A browser in
 * the background CPU class (a spare's) is lifted out of it first: processes
 * being killed must run to exit. */
void chromium_stop(struct chromium *c, int grace_ms, int remove_dir);
/* SIGKILL to the browser's process group now, without waiting (the wait,
 * the reaping and the cleanup are chromium_stop's). Out of the background
 * CPU class first, as chromium_stop. Safe after the browser exited. */
void chromium_kill(struct chromium *c);

/* Accepts NULL; stops it first (grace 0, folder kept) if still running. */
void chromium_free(struct chromium *c);

/* After a server crash: kills (SIGKILL, whole process group) the process pid
 * if and only if it is still the same process (its start ticks equal
 * start_ticks). Returns 1 if killed, 0 if gone (or a zombie) or another
 * process now has that pid. Works for Xvfb pids too. */
int chromium_kill_stale(pid_t pid, unsigned long long start_ticks);

/* A descriptor that becomes readable when the browser process exits
 * (pidfd_open), for an epoll loop to notice exits at once; -1 if the kernel
 * lacks pidfd. Owned by c (closed by chromium_free). After it fires, call
 * chromium_exited to reap. */
int chromium_exit_fd(const struct chromium *c);

/* /proc/PID/stat field 22 (start time in clock ticks after boot), or 0 when
 * the process does not exist. */
unsigned long long chromium_proc_start_ticks(pid_t pid);

#endif
