/*
 * apprun: one run of an app's code (api/apps.h) in a sandbox of its own.
 *
 * A run is the session sandbox's machinery without a browser
 * (runtime/sandbox.h, docs/sandbox.md): a uid of its own, user, mount, PID,
 * IPC, UTS and network namespaces, a cgroup (LIM_APP_MEMORY_BYTES of memory,
 * SANDBOX_PIDS_MAX tasks, CPU accounting, reserved against the org's share
 * by sandbox_create) and its own files (a tmpfs of LIM_APP_FILES_BYTES). The
 * deployment's zip is unpacked into those files at /home/kernel/app, with
 * the extension archive's checks (runtime/extpack.h); the server's files are
 * not visible (bwrap binds the system read-only and runtime-js/, nothing
 * else). The network namespace's only way out is a relay the server listens
 * with inside it on 127.0.0.1:<the server's port>, which forwards to the
 * server's API: the app reaches this server's API (as KERNEL_BASE_URL), and
 * nothing else. Before that, an app with package-lock.json and no
 * node_modules/ has its dependencies installed (npm_registry below): the
 * runner checks the lock file, then npm ci runs as the app's user with a
 * second relay, fixed to the registry's address, as its proxy; the API
 * relay starts only after it (docs/apps.md "Dependencies").
 *
 * The process is `node runtime-js/app-runner.mjs`, told on stdin what to do
 * ({mode: "discover"|"invoke", entrypoint, app_name, action_name, payload,
 * invocation_id}); it answers one JSON line on its descriptor 3 and its
 * stdout/stderr are the run's log. A deadline kills the whole cgroup tree.
 *
 * Threading: apprun_run blocks the calling thread until the run ended;
 * apprun_start runs it on a detached thread of its own. Any number of runs
 * may go at once (each has its own sandbox and relay thread); the org's
 * share of the server bounds them (sandbox_create).
 */
#ifndef BD_RUNTIME_APPRUN_H
#define BD_RUNTIME_APPRUN_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

struct apprun_spec {
    const char *name;          /* the run's cgroup name: a deployment or invocation id */
    const char *root_dir;      /* a host folder to mount the run's files on (made, then removed) */
    const char *org_id;        /* whose share of the server the sandbox takes */
    const char *zip_path;      /* the deployment's stored zip (a host path, never shown) */
    const char *input;         /* the runner's instruction (JSON text) */
    const char *const *env;    /* "K=V" pairs for the app, NULL-terminated; may be NULL */
    int api_port;              /* the server's port on 127.0.0.1, relayed inside; 0: none */
    int64_t timeout_ms;        /* the deadline of the whole run */
    long long *unpacked_bytes; /* out, may be NULL: the app's unpacked size */
    /* The registry (BROWSERD_APPS_NPM_REGISTRY) to install the app's
     * dependencies from when it has package-lock.json and no node_modules/
     * (docs/apps.md "Dependencies"); NULL: never installed. */
    const char *npm_registry;
};

/* npm inside the run (the system's, bound read-only with the rest of it). */
#define APPRUN_NPM_CLI "/usr/lib/node_modules/npm/bin/npm-cli.js"

struct apprun_result {
    int exit_code; /* the runner's, 128+N when killed by signal N */
    int timed_out; /* killed at the deadline */
    char *result;  /* what the runner wrote on descriptor 3 (owned; "" when nothing) */
    int result_truncated;
    char *log; /* stdout then stderr, at most LIM_APP_LOG_BYTES each (owned) */
};

/* Runs the runner once (see above) and fills *out (apprun_result_clear).
 * E_UNAVAIL when the server runs without the sandbox or without runtime-js,
 * E_LIMIT / E_UNAVAIL (retry_after set) past the org's or the server's
 * share (sandbox_create), E_INVALID when the zip breaks an archive rule
 * (the message names it), E_INTERNAL when a system call failed. */
int apprun_run(const struct apprun_spec *s, struct apprun_result *out, struct err *e) WUR;
void apprun_result_clear(struct apprun_result *r);

/* A background run (an async invocation): apprun_run on a thread of its
 * own, then done(ctx, rc, result, e) on that thread; result is cleared
 * after done returns (done copies what it keeps). s and everything it
 * points to must stay valid until done is called. 0, or E_UNAVAIL when no
 * thread can be had (done is then not called). */
typedef void (*apprun_done_fn)(void *ctx, int rc, struct apprun_result *r, const struct err *e);
int apprun_start(const struct apprun_spec *s, apprun_done_fn done, void *ctx, struct err *e) WUR;

/* The server's stop (main.c's "app runs" row): apprun_drain refuses new
 * runs (E_UNAVAIL) and kills every run going (its whole cgroup), so that
 * sync invocations answer and background runs reach their done callback;
 * apprun_stop then waits (bounded: 30 s) until every background run's
 * callback returned. */
void apprun_drain(void);
void apprun_stop(void);

#endif
