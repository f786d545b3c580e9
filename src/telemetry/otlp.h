/*
 * otlp: export of telemetry events as OTLP logs over HTTP/JSON.
 *
 * Every destination has its own bounded queue and its own retry budget:
 * events are batched per destination (up to OTLP_BATCH events or
 * OTLP_LINGER_MS), POSTed to the destination's endpoint as an
 * ExportLogsServiceRequest by a small pool of sender threads, and a failed
 * batch is retried with exponential backoff (OTLP_BACKOFF_MIN_MS doubling to
 * OTLP_BACKOFF_MAX_MS) while the destination has failed for less than
 * OTLP_RETRY_FOR_MS; past that the destination drops its whole backlog. A
 * destination waiting out a backoff holds no thread, and a hung collector
 * holds one sender for one attempt (OTLP_TIMEOUT_MS): it never delays
 * another destination's export. Enqueuing never blocks: an event past the
 * queue's bound (the server's, its organization's share, its destination's
 * share: core/limits.h LIM_OTLP_*) is dropped and counted against its
 * destination (otlp_stats). Plain http:// endpoints only (no TLS library is
 * linked); connections obey the egress's address rule (proxy/netguard.h).
 */
#ifndef BD_TELEMETRY_OTLP_H
#define BD_TELEMETRY_OTLP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define OTLP_BATCH          100
#define OTLP_LINGER_MS      200
#define OTLP_BACKOFF_MIN_MS 250
#define OTLP_BACKOFF_MAX_MS 8000
#define OTLP_RETRY_FOR_MS   60000
#define OTLP_TIMEOUT_MS     5000

/* A destination as a session exports to it: a snapshot taken at session
 * start (later edits of the destination apply to new sessions). */
struct otlp_target;

/* A new target (refcount 1) of destination dest_id of organization org_id
 * (the queue shares are counted per organization). headers: object of
 * string values or NULL. */
struct otlp_target *otlp_target_new(const char *dest_id, const char *org_id, const char *endpoint,
                                    const json_t *headers);
struct otlp_target *otlp_target_ref(struct otlp_target *t);
/* Drops a reference; accepts NULL. */
void otlp_target_unref(struct otlp_target *t);

/* Starts the exporter with a bound of queue_cap events, all destinations
 * together (sender threads start as events come). */
int otlp_start(size_t queue_cap, struct err *e) WUR;
/* Sends what is queued (bounded by one attempt per batch) and stops. */
void otlp_stop(void);
/* Queues one event (event: its JSON text, copied). Never blocks; a full
 * queue (or a stopped exporter) drops the event and counts it. */
void otlp_enqueue(struct otlp_target *t, const char *session_id, uint64_t seq, int64_t ts_ms,
                  const char *category, const char *name, const char *event);
/* Waits up to timeout_ms until nothing of target t is queued or in flight.
 * Returns 0, or -1 on timeout. */
int otlp_drain(struct otlp_target *t, int timeout_ms);
/* The destination's counters {exported, dropped, failed_attempts, queued,
 * last_error?} (new reference; zeros when never used). */
json_t *otlp_stats(const char *dest_id);

/* ---- pure helpers (tests/unit/test_telemetry_otlp.c) ---- */

/* Splits an http:// URL into host (IPv6 without brackets), port (default
 * 80) and path (default "/"). Returns 0, or E_INVALID with a message in e
 * (field "endpoint"): https, userinfo, fragments, bad ports. */
int otlp_parse_endpoint(const char *url, char *host, size_t host_cap, int *port, char *path,
                        size_t path_cap, struct err *e) WUR;

/* One event of a batch. */
struct otlp_item {
    char session_id[64];
    uint64_t seq;
    int64_t ts_ms;
    char category[16];
    char name[64];
    char *event; /* JSON text */
};
/* The ExportLogsServiceRequest JSON of n events (one resourceLogs per
 * session). Owned text. */
char *otlp_logs_json(const struct otlp_item *items, size_t n);

#endif
