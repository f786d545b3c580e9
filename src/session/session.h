/*
 * session: a browser session's life, below the handlers (api/browsers.c
 * parses, calls this and renders). A session is a row in the store (its
 * settings in a JSON document) plus, while active, a live browser in the
 * session manager (runtime/sessmgr.h). This module creates it (from a spare
 * or a cold launch), restarts its browser, applies an update, ends it (on
 * its own thread when the delete may return first), hands out spares and
 * ends what a dead server left behind. The modules that take part in a
 * session join through the hooks of session/ext.h.
 *
 * Threads: sess_delete starts one detached teardown thread per session it
 * ends in the background (sess_spares_stop waits for all of them). Every
 * function may be called from any thread; the hooks run on the caller's.
 *
 * Failure: fallible functions return 0 or a negative E_* code with the
 * detail in e (as the API reports it: 4xx for the request's fault, 429 for
 * a limit, 5xx for the server's).
 *
 * The data folder (sess_path): DATA/sessions/ID is a session's profile (its
 * browser's home), with ID.root (its sandbox's files), ID.log and
 * ID.xvfb.log beside it and ID.spare (a spare's processes, for recovery);
 * DATA/replays/ID holds its recordings, which outlive it.
 */
#ifndef BD_SESSION_SESSION_H
#define BD_SESSION_SESSION_H

#include <jansson.h>
#include <stddef.h>

#include "core/err.h"
#include "domain/session_rules.h"
#include "runtime/chromium.h"
#include "session/app.h"
#include "store/store.h"

/* ---- the data folder ---- */

enum sess_path_kind {
    SESS_PATH_SESSIONS,    /* DATA/sessions (id ignored) */
    SESS_PATH_HOME,        /* DATA/sessions/ID: the profile, the browser's home */
    SESS_PATH_ROOT,        /* DATA/sessions/ID.root: the sandbox's files */
    SESS_PATH_LOG,         /* DATA/sessions/ID.log: the browser's output */
    SESS_PATH_XVFB_LOG,    /* DATA/sessions/ID.xvfb.log */
    SESS_PATH_SPARE,       /* DATA/sessions/ID.spare: a spare's marker */
    SESS_PATH_REPLAYS_ALL, /* DATA/replays (id ignored) */
    SESS_PATH_REPLAYS,     /* DATA/replays/ID: the session's recordings */
};

/* The one place the data folder's layout is written: the path of `kind` for
 * session id into out (cap bytes, truncated if longer; 1200 bytes hold any). */
void sess_path(const struct app *app, const char *id, enum sess_path_kind kind, char *out,
               size_t cap);

/* ---- the launcher: how a session's browser starts and is discarded ---- */

/* The real one runs Chromium (chromium_launch, sessmgr_discard_browser);
 * tests/unit/test_session.c passes a fake browser. */
struct sess_launcher {
    /* Starts a browser with o within timeout_ms. Calling thread. 0 and *out
     * (owned by the caller), or an E_* code with e set. */
    int (*launch)(void *ctx, const struct chromium_opts *o, int timeout_ms, struct chromium **out,
                  struct err *e);
    /* Kills and frees a deleted session's browser, taken out of the session
     * manager (nothing of its state is kept). Teardown thread. */
    void (*discard)(void *ctx, struct chromium *c);
    void *ctx;
};

/* Sets the launcher (copied; NULL: the real one). Before serving. */
void sess_set_launcher(const struct sess_launcher *l);

/* ---- create ---- */

/* Creates a session from a POST /browsers body for org/project: validates,
 * checks the entitlements ent (region, gpu, max_concurrent_browsers with the
 * org's pool capacity, under sessmgr's lock, for standalone sessions), runs
 * the modules' prepare hooks, launches Chromium and records the row in *out
 * (cleared by the caller). extra: keys merged into the settings document
 * (the pool reference). pooled: a pool's browser (not counted against
 * standalone sessions, no idle timeout until leased). */
int sess_spawn(struct app *app, const char *org_id, const char *project_id, const json_t *ent,
               const json_t *body, const json_t *extra, int pooled, struct session_rec *out,
               struct err *e) WUR;

/* POST /browsers: a ready spare when one fits (docs/spares.md), else a cold
 * sess_spawn (once more after giving up the spares when the host had no
 * room). The row in *out (cleared by the caller). */
int sess_create(struct app *app, const char *org_id, const char *project_id, const json_t *ent,
                const json_t *body, struct session_rec *out, struct err *e) WUR;

/* ---- restart and update ---- */

/* Restarts a live session's browser on a profile's saved state: the old
 * browser closes cleanly, the session folder is replaced by the archive's
 * contents (none: an empty profile), Chromium starts again with the session's
 * settings and modules see `started` again. The session id and cdp_ws_url
 * stay valid; clients reconnect. */
int sess_restart_with_profile(struct app *app, const struct session_rec *s,
                              const char *archive_path, struct err *e) WUR;
/* Restarts a live session's browser with the settings in s->data (which are
 * recorded), keeping its folder: used when the extensions to load changed.
 * Same sandbox; clients reconnect. */
int sess_restart(struct app *app, const struct session_rec *s, struct err *e) WUR;

/* PATCH /browsers/{id} once the domain plan accepted body: resizes the
 * window (and the screen), writes plan->next into s and doc, runs the
 * modules' update hooks, records the row and navigates. s and doc are the
 * caller's (updated in place). 409 session_ended when its browser is not
 * running, 409 conflict for a duplicate name, 500 when the resize failed. */
int sess_update(struct app *app, struct session_rec *s, json_t *doc, const json_t *body,
                const struct sessrules_plan *plan, struct err *e) WUR;

/* ---- end ---- */

/* Ends a live session now: stops its browser, runs the modules' ending hooks
 * and records the end with reason. */
int sess_end(struct app *app, const char *session_id, const char *reason);

/* DELETE /browsers/{id} of the row s (active): in the background when
 * nothing its ending hooks write is read right after (the row says deleted
 * before this returns; a teardown thread kills the browser, runs the hooks
 * and removes the folders), else at once after a graceful close. */
void sess_delete(struct app *app, struct session_rec *s);

/* sessmgr hook: a session ended on its own (timeout, browser exit, shutdown). */
void sess_on_end(void *app, const char *session_id, const char *reason, long long uptime_ms);

/* ---- recovery ---- */

/* Ends what a previous run left behind: kills browsers and Xvfb still running
 * under their recorded pid and start time, and ends their sessions with usage
 * recorded. Called once at start, before serving. */
void sess_recover(struct app *app);
/* Ends the active rows of node (an earlier run of this node on a shared
 * store), killing their browsers left on this host. ctx is the app;
 * node_start's reap hook. */
void sess_reap_node(void *ctx, const char *node);

/* ---- spares ---- */

/* Starts keeping `count` pre-launched spare browsers (0: none) that
 * POST /browsers hands out when spare_match says one fits (docs/spares.md).
 * After sessmgr_start. E_INTERNAL when the filler cannot start. */
int sess_spares_start(struct app *app, int count, struct err *e) WUR;
/* Ends every spare and waits for the background teardowns; before
 * sessmgr_stop and the modules' fini (their ending hooks run for each). */
void sess_spares_stop(struct app *app);

#endif
