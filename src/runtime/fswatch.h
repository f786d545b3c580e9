/*
 * fswatch: the fs API's watches (browsers.fs.watch, docs/fs.md). One inotify
 * descriptor per watch, at most LIM_FS_WATCHES per session, a recursive one
 * covering at most LIM_FS_WATCH_DIRS folders. Events are read from inotify
 * by the events stream itself when it is woken (fswatch_read); one ticker
 * thread wakes every open stream every FSWATCH_TICK_MS and ends the watches
 * of sessions that have ended.
 *
 * What it owns: the set of watches (app->fs_watches), each one's inotify
 * descriptor, folders, queued event frames and a reference to its session's
 * live entry; the ticker thread. It does not own the events stream: the
 * caller's wake function wakes it.
 *
 * Threading: every function is thread-safe (one lock for the set); wake
 * functions are called under it (never after fswatch_detach returned). The
 * ticker starts with the first watch; fswatches_stop ends it (main.c).
 *
 * Failure: fswatch_add fails with E_LIMIT (the session's watches, or its
 * user's inotify instances), E_INVALID (a recursive watch over too many
 * folders), E_CONFLICT (the session ended), or with the path's own -errno in
 * *path_rc for the caller to explain. A client that does not read loses the
 * events past FSWATCH_EVENTS_QUEUED bytes.
 *
 * Stop: fswatches_stop, after the HTTP daemon stopped (no stream is left)
 * and before the session manager stops; then fswatches_free.
 */
#ifndef BD_RUNTIME_FSWATCH_H
#define BD_RUNTIME_FSWATCH_H

#include <stddef.h>

#include "core/crypto.h"
#include "core/err.h"

#define FSWATCH_TICK_MS       200
#define FSWATCH_EVENTS_QUEUED (256u * 1024u) /* encoded events waiting for a slow client */

struct fswatch;
struct fswatches;
struct sandbox;
struct sessfs;
struct sessmgr;

struct fswatches *fswatches_new(void);
/* NULL is a no-op; after fswatches_stop. A set with watches left (they
 * hold references to sessions) stays allocated. */
void fswatches_free(struct fswatches *set);
/* Ends the ticker (a no-op when it never started). */
void fswatches_stop(struct fswatches *set);

/* Watches path (recursive: and the folders below it) in the files fs of
 * session_id (sandbox sb; its live entry in sessions); the watch's id in id. */
int fswatch_add(struct fswatches *set, struct sessmgr *sessions, struct sessfs *fs,
                const struct sandbox *sb, const char *session_id, const char *path, int recursive,
                char id[CRYPTO_ID_LEN + 1], int *path_rc, struct err *e) WUR;
/* Ends watch id of session_id (its stream ends); E_NOTFOUND. */
int fswatch_remove(struct fswatches *set, const char *session_id, const char *id,
                   struct err *e) WUR;

/* Gives watch id of session_id its events stream: under the set's lock,
 * attach(actx, w) sets the stream up and returns what wake(...) wakes it
 * with. E_NOTFOUND, or E_CONFLICT when the watch has a stream already. */
int fswatch_attach(struct fswatches *set, const char *session_id, const char *id,
                   void (*wake)(void *wctx), void *(*attach)(void *actx, struct fswatch *w),
                   void *actx, struct err *e) WUR;
/* The stream's bytes: > 0, 0 when there is none yet (parked until woken),
 * -1 once the watch ended and everything was read. */
long fswatch_read(struct fswatch *w, char *dst, size_t cap);
/* The stream is over: no wake from now on. */
void fswatch_detach(struct fswatch *w);

#endif
