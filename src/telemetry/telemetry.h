/*
 * telemetry: the events of a browser session's telemetry (issue 7).
 *
 * One process-wide module, started once (telemetry_start) before sessions
 * run. Per live session it keeps the active configuration as a category mask
 * and an exclusion set, a bounded ring of the newest events, the SSE
 * subscribers, and the OTLP destination the session exports to. Every event
 * (telemetry_emit) gets the session's next sequence number and goes, without
 * blocking on I/O, to the ring, to the persister thread (SQLite, in batches;
 * kept for the operator's retention period) and, when the session exports,
 * to the bounded queue of the OTLP exporter thread (otlp.h).
 *
 * Events are JSON objects in the shape of the SDK's BrowserTelemetryEvent:
 * {type, category, ts (Unix microseconds), session_id, source {kind, event?},
 * data, truncated?}; their list and stream form is {"seq": n, "event": {...}}.
 * See docs/telemetry.md.
 *
 * Threading: every function is thread-safe. telemetry_cdp_command runs on
 * relay threads: a mutex, a hash lookup and (when reported) one small event.
 */
#ifndef BD_TELEMETRY_TELEMETRY_H
#define BD_TELEMETRY_TELEMETRY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "store/store.h"

#include "telemetry/event.h"

/* Operator settings. */
struct telemetry_opts {
    size_t ring_events;         /* newest events kept in memory per session (default 4096) */
    int64_t retention_ms;       /* persisted events are deleted this long after they
                                   happened (default 7 days) */
    int screenshot_interval_ms; /* screenshot category period (default 5000) */
    size_t export_queue;        /* events waiting for OTLP export, all sessions (default 10000) */
    int64_t org_stored_bytes;   /* stored events' data one organization keeps, its oldest
                                   deleted past it (LIM_TELEMETRY_ORG_STORED_BYTES) */
};

/* Fills the defaults. */
void telemetry_opts_defaults(struct telemetry_opts *o);
/* Defaults overridden by BROWSERD_TELEMETRY_RING_EVENTS,
 * BROWSERD_TELEMETRY_RETENTION_HOURS, BROWSERD_TELEMETRY_SCREENSHOT_MS,
 * BROWSERD_TELEMETRY_EXPORT_QUEUE and BROWSERD_TELEMETRY_ORG_MB (lowers
 * org_stored_bytes). E_INVALID names a malformed variable. */
int telemetry_opts_from_env(struct telemetry_opts *o, struct err *e) WUR;

/* Starts the module (persister, exporter and keepalive threads). st is
 * borrowed until telemetry_stop. Returns 0 or E_INTERNAL. */
int telemetry_start(struct store *st, const struct telemetry_opts *o, struct err *e) WUR;
/* Closes every session still open (flushing), ends every stream, stops the
 * threads. Safe when not started. */
void telemetry_stop(void);
/* The options in force (defaults before telemetry_start). */
const struct telemetry_opts *telemetry_options(void);

/* Where a session's events are exported (resolved from its destination id
 * at start). Strings are copied. */
struct telem_export {
    const char *dest_id;
    const char *endpoint;  /* http://host[:port]/path */
    const json_t *headers; /* object of string values, may be NULL */
};

/*
 * Opens (or reopens after a restart) the session's telemetry with its active
 * configuration cfg (borrowed; NULL = nothing captured, the session is still
 * known so that streams can attach). Sequence numbers continue after the
 * newest persisted event. exp may be NULL (no export). browser_ws_url (may
 * be NULL) is the browser's DevTools URL: when set, browser-side capture
 * (capture.h) starts for the categories that need it.
 */
void telemetry_session_open(const char *session_id, const char *org_id, const json_t *cfg,
                            const struct telem_export *exp, const char *browser_ws_url);
/* Applies a new active configuration (NULL = capture stops); browser-side
 * capture is restarted when its categories changed. */
void telemetry_session_configure(const char *session_id, const json_t *cfg);
/* Ends the session's telemetry: stops capture, waits (bounded) until its
 * events are persisted and handed to the exporter, ends its streams. */
void telemetry_session_close(const char *session_id);

/* Who produced an event (the SDK's BrowserEventSource) and whether its data
 * was cut to a size limit. */

/* Records one event of type `type` when the session captures cat. data
 * (object, stolen; NULL = {}). src may be NULL (kind "kernel_api"). Returns
 * the event's sequence number, or 0 when not recorded. */
uint64_t telemetry_emit_src(const char *session_id, enum telem_cat cat, const char *type,
                            const struct telem_src *src, json_t *data);
/* telemetry_emit_src with src NULL. */
uint64_t telemetry_emit(const char *session_id, enum telem_cat cat, const char *type, json_t *data);

/* A client CDP command through the relay: a cdp_command event when control is
 * on and method is a BrowserCdpCommandMethod not excluded; an excluded one
 * is counted for cdp_disconnect. method may be NULL (not a command). */
void telemetry_cdp_command(const char *session_id, const void *conn, const char *method,
                           size_t len);
/* A CDP client attached (1) or detached (0): cdp_connect / cdp_disconnect
 * (connection category), the latter with telemetry_excluded. */
void telemetry_cdp_client(const char *session_id, const void *conn, int attached,
                          uint64_t from_browser);

/* Waits up to timeout_ms until every event of the session emitted so far is
 * in the store. Returns 0, or -1 on timeout. */
int telemetry_flush(const char *session_id, int timeout_ms);

/* ---- Server-Sent Events ---- */

#define TELEM_KEEPALIVE_MS 15000

struct telem_sub;
/*
 * A stream reader for session_id starting after sequence after_seq (0 = from
 * the first event), for the categories in cat_mask. wake(wake_ctx) is called
 * (with module locks held: it must only signal) when new bytes may be ready,
 * and at least every TELEM_KEEPALIVE_MS. Returns the owned reader.
 */
struct telem_sub *telemetry_sub_new(const char *session_id, uint64_t after_seq, unsigned cat_mask,
                                    void (*wake)(void *), void *wake_ctx);
/* The sequence number of the session's newest event (0 when none). */
uint64_t telemetry_last_seq(const char *session_id);
/* Writes the next SSE bytes into buf: frames "id: <seq>\ndata: {...}\n\n",
 * or a ": keepalive" comment when nothing was sent for TELEM_KEEPALIVE_MS.
 * Returns the byte count, 0 when nothing is ready (wake follows), or -1 when
 * the session ended and every event was sent. */
long telemetry_sub_read(struct telem_sub *s, char *buf, size_t cap);
/* Detaches and frees (after it returns, wake is never called). NULL ok. */
void telemetry_sub_free(struct telem_sub *s);

#endif
