/*
 * wdreg: the registry of the sessions' ChromeDrivers behind WebDriver BiDi
 * (docs/webdriver.md). A session is registered when its browser starts;
 * its driver (runtime/chromedriver.h) is started lazily by the first BiDi
 * connection (wdreg_ensure) and stopped when the session ends.
 *
 * What it owns: one entry per live session (its id, the paths of the
 * driver's log and pid file beside the session folder, the driver). It does
 * not own browsers, sandboxes or connections.
 *
 * Threading: every function is thread-safe. wdreg_session_started and
 * wdreg_session_ending run on the session's start and end (session_ext
 * hooks, api/webdriver.c); wdreg_get/wdreg_ensure/wdreg_put on HTTP threads;
 * wdreg_mark_ended on a relay thread. Starting and stopping a session's
 * driver is serialized by the entry's own lock, never the registry's.
 *
 * Failure: wdreg_ensure fails with E_NOTFOUND for an ended session and
 * E_UNAVAIL ("browser_unavailable") when the driver cannot start.
 *
 * Stop: wdreg_stop_all (after the opening exchanges stopped; every driver
 * left is stopped, and no entry starts one again), then wdreg_free.
 */
#ifndef BD_RUNTIME_WDREG_H
#define BD_RUNTIME_WDREG_H

#include <jansson.h>

#include "core/err.h"

struct sandbox;
struct wdreg;
struct wdreg_sess;

/* What a connection needs of a session's driver, copied under its lock. */
struct wdreg_view {
    char url[512];        /* the driver's BiDi WebSocket */
    char session_id[128]; /* the WebDriver session the driver made */
    char path[192];       /* its HTTP path on the driver (classic WebDriver) */
    json_t *caps;         /* its capabilities (deep copy; the caller's) */
};

struct wdreg *wdreg_new(void);
/* NULL is a no-op; after wdreg_stop_all. */
void wdreg_free(struct wdreg *r);

/* The session id started a browser whose profile is user_data_dir. */
void wdreg_session_started(struct wdreg *r, const char *id, const char *user_data_dir);
/* The session is ending: its driver stops (and one a previous run left,
 * from its pid file), its log and pid file are removed. */
void wdreg_session_ending(struct wdreg *r, const char *id, const char *user_data_dir);

/* The entry of session id with a reference (NULL: not registered). */
struct wdreg_sess *wdreg_get(struct wdreg *r, const char *id);
void wdreg_put(struct wdreg *r, struct wdreg_sess *s);
/* A client sent session.end: the next connection gets a fresh driver. */
void wdreg_mark_ended(struct wdreg *r, const char *id);

/* Makes sure the session has a live driver attached to debugger
 * ("127.0.0.1:PORT", run in sb), restarting it when restart is set, the
 * driver exited, a client ended its session, or the browser changed; fills v. */
int wdreg_ensure(struct wdreg_sess *s, const char *debugger, struct sandbox *sb, int restart,
                 struct wdreg_view *v, struct err *e) WUR;

/* Stops every driver left (sessions end before this) and marks their
 * entries dead. */
void wdreg_stop_all(struct wdreg *r);

#endif
