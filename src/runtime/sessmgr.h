/*
 * sessmgr: the live browsers of this node.
 *
 * Each active session with a running browser has one entry here: the
 * browser, how many CDP clients are attached, when the last one left, and its
 * idle timeout. A supervisor thread wakes every second to notice browsers that
 * exited on their own and sessions idle past their timeout, and ends them
 * through the on_end hook (which records the end in the store).
 *
 * Entries are reference counted: sessmgr_get returns a reference that stays
 * valid (its browser possibly stopped) until sessmgr_put, so a relay thread
 * can hold one for the life of a WebSocket connection.
 */
#ifndef BD_RUNTIME_SESSMGR_H
#define BD_RUNTIME_SESSMGR_H

#include "core/err.h"
#include "runtime/chromium.h"

struct sessmgr;
struct live;

struct sandbox_oom;

struct sessmgr_hooks {
    /* A session ended on its own (reason "timeout", "browser exited: ...").
     * Called on the supervisor thread after the browser was stopped and its
     * folders removed; uptime_ms is the browser's total running time. */
    void (*on_end)(void *ctx, const char *session_id, const char *reason, long long uptime_ms);
    /* The kernel killed `kills` processes of a sandboxed session at its
     * memory limit (noticed within a second; before on_end when the browser
     * itself died of it). Supervisor thread. May be NULL. */
    void (*on_oom)(void *ctx, const char *session_id, long long kills);
    /* The supervisor killed `victim` of a sandboxed session that was
     * thrashing at its memory limit (domain/mem_pressure.h: the kernel
     * reclaimed and re-read its pages instead of an OOM kill). Supervisor
     * thread. May be NULL. */
    void (*on_pressure_kill)(void *ctx, const char *session_id, const struct sandbox_oom *victim);
    void *ctx;
};

int sessmgr_start(const struct sessmgr_hooks *hooks, struct sessmgr **out, struct err *e) WUR;
/* Stops the supervisor and every browser, calling on_end for each with the
 * reason "server stopped" (a clean shutdown ends its sessions and records their
 * usage). Frees the manager. */
void sessmgr_stop(struct sessmgr *m);

/* The organization's concurrent-browser limit, under one lock: live
 * standalone sessions + reservations + the sizes of its pools (which the pool
 * engine registers here) must stay <= limit.
 *
 * Reserves a slot for org before launching a standalone session (limit < 0
 * means unlimited). Returns 0 or E_LIMIT; *pools (may be NULL) receives the
 * org's pool capacity at the time of the check. */
int sessmgr_reserve(struct sessmgr *m, const char *org_id, long long limit, long long *pools) WUR;
/* Sets pool_id's size (counted against org). A pool that grows may not
 * push the org's pool sizes plus its live standalone sessions past limit
 * (< 0: unlimited): E_FORBIDDEN then, changing nothing. *pools and *sessions
 * (may be NULL) receive the pool sizes with the new size and the live
 * sessions. */
int sessmgr_pool_set(struct sessmgr *m, const char *org_id, const char *pool_id, long long size,
                     long long limit, long long *pools, long long *sessions) WUR;
/* Forgets pool_id's size (the pool was deleted). */
void sessmgr_pool_drop(struct sessmgr *m, const char *pool_id);
/* The sum of org's pool sizes. */
long long sessmgr_pool_capacity(struct sessmgr *m, const char *org_id);
void sessmgr_unreserve(struct sessmgr *m, const char *org_id);
/* Turns a reservation into a live entry owning browser c. */
void sessmgr_add(struct sessmgr *m, const char *session_id, const char *org_id, struct chromium *c,
                 int timeout_s, int remove_dir);
/* Live sessions (not reservations) of org. */
int sessmgr_count(struct sessmgr *m, const char *org_id);

/* A reference to the live entry of session_id, or NULL. */
struct live *sessmgr_get(struct sessmgr *m, const char *session_id);
void sessmgr_put(struct live *l);
/* The browser's DevTools URL (copied into out), or -1 when it has ended. */
int live_ws_url(struct live *l, char *out, size_t cap);
/* The browser's running time so far. */
long long live_uptime_ms(struct live *l);
/* Usage starts now: a spare handed out as this session (api/browsers.c)
 * ran before the session existed, and that time is nobody's. */
void live_uptime_from_now(struct live *l);
/* The session was served by a spare of kind (runtime/spares.h), and the
 * live sessions of an organization served so, by kind: one tenant holds a
 * bounded share of the spares (issue 39.2, LIM_SPARES_ORG_SHARE). */
void live_mark_spare(struct live *l, int kind);
int sessmgr_count_spare(struct sessmgr *m, const char *org_id, int kind);
/* CDP client bookkeeping for the idle timeout. */
void live_client_attached(struct live *l);
/* Activity that is not a connection (a computer-control call, say): the idle
 * timeout starts again from now. */
void live_touch(struct live *l);
void live_client_detached(struct live *l);
/* Sets the idle timeout (0 = none) and restarts the idle clock. */
void live_set_timeout(struct live *l, int timeout_s);
/* Runs fn with the browser while holding the entry's lock (e.g. resize the
 * Xvfb screen). Returns fn's result, or E_NOTFOUND if the browser ended. */
/* A reference to the sandbox of the session's browser (sandbox_unref it),
 * or NULL when the browser is unsandboxed or gone. */
struct sandbox *live_sandbox_ref(struct live *l);
int live_with_browser(struct live *l, int (*fn)(void *ctx, struct chromium *c), void *ctx);

/* Ends session_id now (deletion): asks the browser to close (Browser.close,
 * at its own priority, up to 30 s: its state is written to its folder by the
 * time it exits), then SIGKILL for what is left, and removes it. *uptime_ms
 * receives the total running time; *closed (may be NULL) 1 when the browser
 * exited by itself (its state is whole), 0 when it had to be killed or was
 * already gone. Returns E_NOTFOUND when it is not live here. on_end is not
 * called. */
int sessmgr_end(struct sessmgr *m, const char *session_id, long long *uptime_ms, int *closed) WUR;

/* Takes session_id's browser out of the manager without stopping it (a
 * delete that stops it in the background): the session is no longer live
 * here from now on. *browser receives the browser (the caller's: pass it to
 * sessmgr_stop_browser), *uptime_ms the session's running time, which ends
 * now. E_NOTFOUND when it is not live here. on_end is not called. */
int sessmgr_take(struct sessmgr *m, const char *session_id, struct chromium **browser,
                 long long *uptime_ms) WUR;
/* Stops and frees a browser taken with sessmgr_take, as sessmgr_end would:
 * Browser.close, then SIGKILL. Any thread; blocks up to 30 s. Accepts NULL. */
void sessmgr_stop_browser(struct chromium *c);
/* The same for a browser whose state nothing will read (no profile saved
 * from it, no recording finishing): killed at once (SIGKILL to its process
 * group, its display with it) without Browser.close. Chromium's orderly
 * shutdown costs a CPU-second or more of flushing that would compete with
 * the next launch on a small machine. Never from the idle CPU class: killed
 * processes must run to exit. */
void sessmgr_discard_browser(struct chromium *c);

/* Ends every live session now (server stop), calling on_end with reason for
 * each (a longer reason saying so for a browser that did not close by
 * itself). The browsers are asked to close together and waited for together
 * (up to 30 s), then killed. Any thread but the supervisor's. */
void sessmgr_end_all(struct sessmgr *m, const char *reason);
/* The same without asking: every browser is SIGKILLed at once (a fenced
 * cluster node, whose sessions another node declared lost). Nothing is live
 * here from the call on; the kills and on_end follow on the calling thread. */
void sessmgr_kill_all(struct sessmgr *m, const char *reason);
/* How many browsers run here (standalone and pools'). */
long long sessmgr_running(struct sessmgr *m);

/* Replaces the browser of a live session (profile load restarts Chromium):
 * stops the old one (gracefully) and installs c, which may be NULL while the
 * caller prepares the next browser. Returns E_NOTFOUND if not live. */
int sessmgr_replace(struct sessmgr *m, const char *session_id, struct chromium *c) WUR;

#endif
