/*
 * viewers: the live view's viewers (docs/live-view.md), one thread each. A
 * viewer is an upgraded WebSocket: pictures of the session's display (or
 * its first page's DevTools screencast) go down, input (the computer API's
 * actions, checked by domain/computer) comes up, dropped for a read-only
 * viewer.
 *
 * What it owns: the set of connected viewers (app->viewers), each viewer's
 * thread, WebSocket state and X connection. It does not own the socket's
 * HTTP side: the caller's close function ends it (through the HTTP daemon).
 *
 * Threading: viewer_new/viewer_refused/viewer_cancel/viewer_run run on
 * HTTP threads; each viewer's loop on its own detached thread;
 * viewers_active on any thread; viewers_stop on main.c's stop, once.
 *
 * Failure: a viewer over a share (LIM_LIVE_VIEWERS_SESSION, _ORG,
 * LIM_LIVE_VIEWERS; the screen bytes LIM_LIVE_VIEW_BYTES_SESSION, _ORG,
 * LIM_LIVE_VIEW_BYTES) is refused: viewer_refused says why before the
 * upgrade, viewer_run closes it with 1013 after, and so does the viewer's
 * thread when the screen grows past a share (a forced resize). A viewer
 * without a thread is closed.
 * A session that ends closes its viewers with 4404.
 *
 * Stop: viewers_stop, before the HTTP daemon stops: every viewer ends (its
 * thread closes its connection through the daemon), waited for at most
 * VIEWERS_STOP_MS; then viewers_free.
 */
#ifndef BD_RUNTIME_VIEWERS_H
#define BD_RUNTIME_VIEWERS_H

#include <stddef.h>

#include "core/err.h"

/* How long the server's stop waits for the viewers to leave. */
#define VIEWERS_STOP_MS 10000

struct sessmgr;
struct store;
struct viewer;
struct viewers;

struct viewers *viewers_new(void);
/* NULL is a no-op; after viewers_stop. */
void viewers_free(struct viewers *set);

/* 1 while session_id has a viewer connected. */
int viewers_active(struct viewers *set, const char *session_id);

/* A viewer of session sid (of org) before its upgrade, reading the
 * session's live entry in sessions and its record in store; NULL (E_INTERNAL
 * in e) without a WebSocket context. */
struct viewer *viewer_new(struct viewers *set, struct sessmgr *sessions, struct store *store,
                          const char *sid, const char *org, int read_only, struct err *e);
/* Whether v, one more viewer of its session, would be refused: 1 with the
 * reason in why (cap bytes), else 0. Reads the session's screen size from
 * its record: a viewer is charged for a copy of its screen
 * (LIM_LIVE_VIEW_BYTES*) as well as counted (LIM_LIVE_VIEWERS*). */
int viewer_refused(struct viewer *v, char *why, size_t cap);
/* The upgrade did not happen: frees v. */
void viewer_cancel(struct viewer *v);
/* The upgrade happened: fd is the client's socket, extra the bytes read
 * after its request head; close(close_ctx) ends the connection (once, on the
 * viewer's thread or here). v is the set's from now on. */
void viewer_run(struct viewer *v, int fd, const char *extra, size_t extra_len,
                void (*close)(void *ctx), void *close_ctx);

/* What the viewers connected hold, seen by one more viewer (not counted in
 * it): in all, of its organization, of its session; bytes is the screen
 * copy the newcomer would hold. */
struct lv_held {
    int all, of_org, of_sid;
    long long all_b, org_b, sid_b;
    long long bytes;
};
/* The admission rule, alone (viewer_refused applies it to the set): 1 with
 * the reason in why when one more viewer of a w x h screen passes a share,
 * a count or its screen bytes, per session, per organization or on the
 * server, or would take the server's newcomer reserve (the last
 * SHARE_RESERVE(LIM_LIVE_VIEWERS) viewers and LIM_LIVE_VIEW_BYTES /
 * LIM_SHARE_RESERVE_DIV bytes, left to organizations with no viewer). */
int live_view_refused(const struct lv_held *held, int w, int h, char *why, size_t cap);

void viewers_stop(struct viewers *set);

#endif
