/*
 * Telemetry endpoints (events list, SSE stream, OTLP destinations) and the
 * telemetry module's part in a session's life (session_ext). See
 * docs/telemetry.md.
 */
#ifndef BD_API_TELEMETRY_H
#define BD_API_TELEMETRY_H

#include "session/ext.h"
#include "http/http.h"

/* GET /browsers/{id}/telemetry/events: a page of the session's events
 * (query category, order=asc|desc, since, until, limit, offset). */
int telemetry_events_get(struct req *rq, struct resp *rs);
/* GET /browsers/{id}/telemetry/stream: Server-Sent Events (Last-Event-ID,
 * replay=all, category). */
int telemetry_stream_get(struct req *rq, struct resp *rs);

/* /org/telemetry/destinations CRUD (records never show header values). */
int telemetry_dest_create(struct req *rq, struct resp *rs);
int telemetry_dest_list(struct req *rq, struct resp *rs);
int telemetry_dest_get(struct req *rq, struct resp *rs);
int telemetry_dest_update(struct req *rq, struct resp *rs);
int telemetry_dest_delete(struct req *rq, struct resp *rs);

/* The session hooks; register with session_ext_register after
 * telemetry_start. */
extern const struct session_ext telemetry_session_ext;

/* A platform event for a management action of the server on a session
 * (name e.g. "viewport_resize", data stolen, may be NULL). */
void telemetry_platform(const char *session_id, const char *name, json_t *data);
/* sessmgr's on_oom hook: a `system_oom_kill` event (category system) for each
 * out-of-memory kill in a sandboxed session, with what the kernel log says of
 * the last one (pid, process name, RSS). */
void telemetry_on_oom_kill(void *ctx, const char *session_id, long long kills);
/* sessmgr's on_pressure_kill hook: the same system_oom_kill event for a task
 * the supervisor killed because its session thrashed at its memory limit
 * (constraint "memory_pressure"). */
struct sandbox_oom;
void telemetry_on_pressure_kill(void *ctx, const char *session_id, const struct sandbox_oom *v);

#endif
