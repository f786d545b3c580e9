/*
 * zipstreams: download_dir_zip's streams (docs/fs.md). The zip is built by a
 * helper inside the session's cgroups (runtime/sesshelp.h: its CPU, a
 * sparse file's holes deflated included, is the session's); a relay thread
 * copies the helper's output into a pipe whose other end the response reads,
 * parking when it is empty and woken by the relay after each write.
 *
 * What it owns: the server's share of streams (LIM_FS_ZIP_STREAMS, per
 * organization and per session), each stream's pipe, helper and relay
 * thread. It does not own the response: the caller's wake function wakes it.
 *
 * Threading: zipstream_start, zipstream_relay, zipstream_read and
 * zipstream_close run on HTTP threads; the relay on its own detached thread, which calls wake
 * under the stream's lock (so wake is never called once zipstream_close has
 * returned). Either side may finish first; the last one frees.
 *
 * Failure: zipstream_start fails with E_LIMIT (and a Retry-After) over a
 * share, E_INTERNAL when the pipe or the helper cannot start. A client that
 * reads nothing for the set's idle deadline ends the stream: the relay stops, the
 * helper is killed and the share is given back. Without a relay thread the
 * stream ends at once (an empty body).
 *
 * Stop: streams end with their responses (the HTTP daemon's stop) and their
 * helpers with the sessions' cgroups; then zipstreams_free.
 */
#ifndef BD_RUNTIME_ZIPSTREAMS_H
#define BD_RUNTIME_ZIPSTREAMS_H

#include <stddef.h>

#include "core/err.h"

struct sandbox;
struct sessfs;
struct zipstream;
struct zipstreams;

/* idle_s: how long a stream may go unread before it ends, 1..LIM_FS_ZIP_IDLE_S
 * (BROWSERD_ZIP_IDLE_SECONDS); anything else is LIM_FS_ZIP_IDLE_S. */
struct zipstreams *zipstreams_new(int idle_s);
/* NULL is a no-op. While a relay is still ending (the server stops), the
 * set is left allocated. */
void zipstreams_free(struct zipstreams *zs);

/* Starts zipping the folder path of the session's files fs (sandbox sb),
 * for session_id of org_id; wake(ctx) will be called after each write and
 * at the end, once zipstream_relay started the relay. */
int zipstream_start(struct zipstreams *zs, const struct sandbox *sb, const struct sessfs *fs,
                    const char *path, const char *org_id, const char *session_id,
                    void (*wake)(void *ctx), void *ctx, struct zipstream **out, struct err *e) WUR;
/* Starts the relay thread (once the response that wake wakes is set up). */
void zipstream_relay(struct zipstream *z);
/* Bytes of the zip: > 0, 0 when none is ready yet (parked until wake), -1
 * at the end. */
long zipstream_read(struct zipstream *z, char *buf, size_t cap);
/* The response is over: no wake from now on; frees z (now or when the relay
 * ends). */
void zipstream_close(struct zipstream *z);

#endif
