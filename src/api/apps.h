/*
 * apps: deployments, apps and invocations (issue 36; docs/apps.md).
 *
 * POST /deployments takes a Node app as a zip (multipart: file,
 * entrypoint_rel_path, env_vars[NAME], version, force, region), stores it
 * under the data folder, and loads its entrypoint once in a sandbox of its
 * own (runtime/apprun.h) to read the actions it declares with the official
 * client's app framework; the deployment then is `running` (or `failed`
 * with the build log). The discovery runs inside the request, so that a
 * version that exists answers 409 there (force replaces it). GET /apps lists
 * the running versions. POST /invocations runs one action in a fresh
 * sandbox: sync (the answer carries the output) or async (202, then a
 * background thread, bounded by async_timeout_seconds). An invocation gets
 * an API key of its project, revoked when it ends; browsers created with
 * its invocation_id are listed under it and ended with it.
 *
 * Records live in the store (appobj_*); the event logs the SSE followers
 * read and the running invocations (their browsers, the PATCHed outcome,
 * the concurrency counts) live in this process.
 */
#ifndef BD_API_APPS_H
#define BD_API_APPS_H

#include "core/err.h"
#include "http/http.h"

struct app;

int deployments_create(struct req *rq, struct resp *rs);
int deployments_list(struct req *rq, struct resp *rs);
int deployments_get(struct req *rq, struct resp *rs);
int deployments_delete(struct req *rq, struct resp *rs);
int deployments_events(struct req *rq, struct resp *rs);
int apps_list(struct req *rq, struct resp *rs);
int invocations_create(struct req *rq, struct resp *rs);
int invocations_list(struct req *rq, struct resp *rs);
int invocations_get(struct req *rq, struct resp *rs);
int invocations_update(struct req *rq, struct resp *rs);
int invocations_events(struct req *rq, struct resp *rs);
int invocations_browsers_list(struct req *rq, struct resp *rs);
int invocations_browsers_delete(struct req *rq, struct resp *rs);

/* POST /browsers with invocation_id: 0 when id is a running invocation of
 * the project that may take one more browser, else E_INVALID naming the
 * field (E_LIMIT past LIM_APP_INVOCATION_BROWSERS). */
int apps_invocation_check(const char *org_id, const char *project_id, const char *id,
                          struct err *e) WUR;
/* Puts session_id under invocation id (after its create); when the
 * invocation ended meanwhile, ends the session at once. */
void apps_invocation_attach(struct app *app, const char *id, const char *session_id);

/* Ends the records no run will move on any more: the invocations queued or
 * running and the deployments queued or in_progress that node_id started
 * (NULL: any node's, the single server's start, when nothing runs yet). Each
 * becomes `failed` with status_reason reason and, for an invocation, a
 * finished_at; its followers here get the terminal state event. The write is
 * conditional on the status read (store_appobj_settle), so that a record
 * that ended meanwhile, or that another node ended, is left alone. An
 * invocation is never run again: its action may have had effects already.
 * Called at start (recovery) and by the cluster's sweeper; logs what fails.
 * -1 when the records could not be listed (some may be left), else 0. */
int apps_end_orphans(struct app *app, const char *node_id, const char *reason);

#endif
