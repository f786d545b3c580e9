/*
 * authconn: managed auth, the /auth/connections resource (issue 35 item 4;
 * docs/managed-auth.md).
 *
 * A connection keeps a profile logged in to a domain. `login` runs a flow in
 * a headless session of the connection's own (created as POST /browsers
 * creates one, with the profile and save_changes) that browserd drives over
 * its own DevTools connection: it finds the identifier, password and code
 * fields with fixed heuristics (no language model), fills them from the
 * connection's credential (api/credentials.h: values opened only in the
 * flow's memory, never logged, never returned), answers a TOTP step with the
 * credential's secret, and when a step needs a person (an emailed code, an
 * unknown field) sets flow_step AWAITING_INPUT with the fields and waits for
 * `submit`. Success (post_login_url reached, or the login form gone) ends the
 * session, which saves the profile, and sets status AUTHENTICATED. State
 * changes reach `events` (SSE) watchers and the connection's timeline.
 * Gated by features.managed_auth; LIM_AUTHCONN_* bound what one tenant holds.
 */
#ifndef BD_API_AUTHCONN_H
#define BD_API_AUTHCONN_H

#include "http/http.h"

int authconn_create(struct req *rq, struct resp *rs);
int authconn_get(struct req *rq, struct resp *rs);
int authconn_list(struct req *rq, struct resp *rs);
int authconn_update(struct req *rq, struct resp *rs);
int authconn_delete(struct req *rq, struct resp *rs);
int authconn_login(struct req *rq, struct resp *rs);
int authconn_submit(struct req *rq, struct resp *rs);
int authconn_events(struct req *rq, struct resp *rs);
int authconn_timeline(struct req *rq, struct resp *rs);

/* The hosted page of a running flow (its hosted_url, no API key: the URL's
 * token, a MAC over the connection and the flow's interaction id, is the
 * credential): the page, the flow's state (fields pending, no value), a
 * JPEG of the flow's page, and the submit of the pending fields. 404 once
 * the flow ended. */
int authconn_hosted_page(struct req *rq, struct resp *rs);
int authconn_hosted_state(struct req *rq, struct resp *rs);
int authconn_hosted_screenshot(struct req *rq, struct resp *rs);
int authconn_hosted_submit(struct req *rq, struct resp *rs);

struct app;
/* Starts the health checker: every second it re-checks the connections
 * whose health_check_interval passed since their last check (a session on
 * the profile visits the page the last login landed on; a login form there
 * means expired) and re-authenticates them when auto_reauth allows. */
int authconn_start(struct app *app) WUR;
/* Stops the checker, cancels the running flows and waits for them. */
void authconn_stop(void);
/* Ends the login flows no thread runs any more: a connection whose stored
 * flow is IN_PROGRESS, started by node_id (NULL: by any node, at the single
 * server's start), and not running in this process, gets flow_status FAILED
 * with error_code code and error_message reason (its timeline entry too),
 * which its events stream then gives. Called at start (recovery) and by the
 * cluster's sweeper (once per dead node); logs what fails. -1 when the
 * connections could not be listed (some may be left), else 0. */
int authconn_end_orphans(struct app *app, const char *node_id, const char *code,
                         const char *reason);

#endif
