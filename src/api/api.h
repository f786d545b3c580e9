/*
 * api: the resource handlers. Each handler reads the request through the
 * http accessors, validates with src/domain, persists through src/store, and
 * fills a response. The route table (routes.c) lists every endpoint.
 */
#ifndef BD_API_API_H
#define BD_API_API_H

#include <jansson.h>
#include <pthread.h>

#include "http/http.h"
#include "session/app.h"
#include "session/session.h"
#include "store/store.h"

/* Route flags: who may call an endpoint. */
#define AUTH_NONE       0u
#define AUTH_KEY        1u /* API key; project selected by X-Kernel-Project-Id */
#define AUTH_ADMIN      2u /* the operator's admin token */
#define AUTH_ORG_ADMIN  4u /* with AUTH_KEY: an organization-scoped key is required */
#define AUTH_NO_PROJECT 8u /* with AUTH_KEY: the project header is not consulted */

/* with AUTH_KEY: the key may also come as HTTP Basic credentials (WebDriver
 * clients send a URL's user info so) */
#define AUTH_BASIC 16u

/* What authentication established for a request (rq->auth). */
struct auth {
    struct org_rec org;
    struct apikey_rec key;
    struct project_rec project; /* the selected project (id "" with AUTH_NO_PROJECT) */
    json_t *ent;                /* resolved entitlements, loaded on first use */
    int forwarded;  /* sent to the node running its browser: that node writes its audit entry */
    int audit_held; /* a place in the audit queue is held for its entry (api_audit_admit) */
};

extern const struct route api_routes[];
extern const size_t api_nroutes;

int api_authorize(struct req *rq, unsigned flags);
/* http_config.rewrite: a session's own URL (its base_url,
 * /browser/sessions/{id}/<tail>) is routed as /browsers/{id}/<tail> and
 * authorized by the session's token instead of an API key. */
int api_session_url_rewrite(const char *path, char *out, size_t cap);
void api_cleanup(struct req *rq);
/* http_config.route_hook (cluster_route.c): on a shared store, forwards a
 * request that needs a live browser or pool to the node running it; -1 to
 * serve it here. A node that is not serving answers 503 node_unavailable,
 * except on a probe route (HTTP_ROUTE_PROBE: /health, /ready). */
int api_route_hook(struct req *rq, struct resp *rs, unsigned flags);
/* On a shared store, when session_id (of org) runs (or, ended, ran) on
 * another node that is live, forwards rq there (a WebSocket upgrade when
 * upgrade) and returns what a handler returns; -1 when it runs here, is
 * unknown, ended on a node that is gone, or there is no cluster. For
 * handlers that find their session from a token (CDP, BiDi, live view, a
 * replay's view URL). */
int api_cluster_forward(struct req *rq, struct resp *rs, const char *org, const char *session_id,
                        int upgrade);
/* On a shared store, forwards rq to node (a node id) when that is another
 * live node, and returns what a handler returns; -1 when node is this one,
 * gone, empty, or there is no cluster. For work held in one node's memory
 * that is not a session (a managed auth login flow). */
int api_cluster_forward_node(struct req *rq, struct resp *rs, const char *node);

static inline struct app *api_app(struct req *rq)
{
    return (struct app *)rq->app;
}
static inline struct auth *api_auth(struct req *rq)
{
    return (struct auth *)rq->auth;
}

/* The org's resolved entitlements (borrowed; cached for the request). */
int api_entitlements(struct req *rq, const json_t **out) WUR;
/* Resolves an org's entitlements outside a request (new reference). */
int api_resolve_entitlements(struct store *st, const struct org_rec *org, json_t **out,
                             struct err *e) WUR;
/* The same record as JSON text (owned; xfree), from a per-org cache. */
int api_entitlements_text(struct req *rq, char **text) WUR;
/* Invalidates cached entitlements after a plan document changed. */
void api_plans_changed(void);
/* 403 unless features.<feature>.enabled is true for the caller's org. */
int api_require_feature(struct req *rq, const char *feature) WUR;

/* ---- tenancy operations shared by the admin API and the admin CLI ---- */

/* Creates an org from an admin body ({name, plan?, plan_status?, trial_plan?,
 * trial_ends_at?, projects_enabled?, overrides?}); *out is the org record. */
int tenancy_org_create(struct store *st, const json_t *body, json_t **out, struct err *e) WUR;
/* Applies an admin PATCH body to org id; *out is the updated record. */
int tenancy_org_update(struct store *st, const char *id, const json_t *body, json_t **out,
                       struct err *e) WUR;
int tenancy_org_get(struct store *st, const char *id, json_t **out, struct err *e) WUR;
/* Creates an API key ({name?, project_id?, days_to_expire?}) for org_id; *out
 * is the key record including the plaintext `key`. cap: the org's live keys
 * at most (LIM_API_KEYS_PER_ORG for a tenant's own create; 0, uncounted, for
 * the operator's): past it, 429 limit_exceeded. */
int tenancy_key_create(struct store *st, const char *org_id, const json_t *body, int64_t cap,
                       json_t **out, struct err *e) WUR;
/* Stores a key with a given plaintext (bootstrap); *out gets the record. cap
 * as tenancy_key_create's (the store's E_LIMIT, no error record). */
int tenancy_key_store(struct store *st, const char *org_id, const char *project_id,
                      const char *name, const char *plaintext, int64_t expires_at, int64_t cap,
                      struct apikey_rec *out) WUR;
/* 429 limit_exceeded with Retry-After retry_s: the organization has count
 * records of what ("proxies", "credentials"), cap the most it may (records
 * counted in the insert pass cap as count). Returns E_LIMIT. */
int api_over_org_cap(struct err *e, const char *what, int64_t count, int64_t cap, int retry_s);
/* Plan documents: the built-ins unless replaced, plus the stored ones. */
json_t *tenancy_plan_lookup(void *store, const char *plan_id);
int tenancy_plan_exists(struct store *st, const char *plan_id);

/* ---- the relay gate (relaygate.c) ---- */

struct relay_hooks;
/* relay_attach unless the relay is being shut down (then E_UNAVAIL and the
 * caller closes both sockets itself). Safe against api_relay_shutdown running
 * at the same time on another thread. */
int api_relay_attach(struct app *app, int client_fd, const char *client_extra,
                     size_t client_extra_len, int upstream_fd, const char *upstream_extra,
                     size_t upstream_extra_len, const struct relay_hooks *hooks, struct err *e) WUR;
/* Makes the budgets api_relay_charge takes from (before the first attach). */
void api_relay_budgets_init(struct app *app);
/* Charges delta bytes of client WebSocket messages the relay is reassembling
 * for session of org, or gives them back when delta is negative (the
 * relay_hooks.charge of the CDP and BiDi connections). 0, or -1 when the
 * organization's share (LIM_RELAY_MSG_ORG_BYTES), the session's
 * (LIM_RELAY_MSG_SESSION_BYTES) or the server's budget
 * (LIM_RELAY_MSG_BUDGET_BYTES) would be passed: nothing is taken then. Any
 * thread. */
int api_relay_charge(struct app *app, const char *org, const char *session, long long delta);
/* Takes one of the CDP WebSockets session of org may have relayed at once
 * (LIM_RELAY_CONNS*): 0, or E_LIMIT with e filled (429 rate_limited naming
 * the share, Retry-After: 1). Give it back with api_relay_conn_give once the
 * connection ends or was never made. Any thread. */
int api_relay_conn_take(const char *org, const char *session, struct err *e) WUR;
void api_relay_conn_give(const char *org, const char *session);
/* The same for WebDriver BiDi WebSockets (LIM_BIDI_CONNS*, a share of their
 * own). Any thread. */
int api_bidi_conn_take(const char *org, const char *session, struct err *e) WUR;
void api_bidi_conn_give(const char *org, const char *session);
/* Closes every relayed connection and stops the relay, while the HTTP daemon
 * still runs (an upgraded socket is closed through it), then frees the
 * budgets. Attaches after this fail with E_UNAVAIL. */
void api_relay_shutdown(struct app *app);

/* ---- files every node reads (sharedfile.c) ---- */

/* On a shared store: publishes the file at path (under the data folder) to
 * every node. 0 without a shared store. */
int api_shared_put(struct app *app, const char *path);
/* On a shared store: refreshes path from the shared copy before a read;
 * E_NOTFOUND (and the local copy removed) when there is none. 0 without a
 * shared store. */
int api_shared_get(const struct app *app, const char *path);
/* On a shared store: removes the shared copy. */
int api_shared_delete(struct app *app, const char *path);

/* ---- browser sessions (browsers.c; their life is session/session.h) ---- */

/* "ws[s]://PUBLIC" + path + "?jwt=" + token, from the public URL (owned). */
char *api_public_ws_url(const struct app *app, const char *path, const char *token);
/* api_public_ws_url of path with a fresh token for session s and audience
 * aud ("cdp", "webdriver"), as the Browser record's URLs are (owned). */
char *api_signed_url(const struct app *app, const struct session_rec *s, const char *aud,
                     const char *path);
/* The Browser record of a session (new reference). */
json_t *browsers_render(struct app *app, const struct session_rec *s);
struct live;
/* The running session rq->params[0] names, as the key sees it: its row in
 * *rec (cleared by the caller), a reference in *live (sessmgr_put) and its
 * browser's internal DevTools URL in ws. 404 for a session that is not the
 * key's, 409 session_ended for one that has ended (nothing to release then). */
int api_live_session(struct req *rq, struct session_rec *rec, struct live **live, char *ws,
                     size_t cap) WUR;
/* The same for the session id names (a body's browser_id). */
int api_live_session_id(struct req *rq, const char *id, struct session_rec *rec, struct live **live,
                        char *ws, size_t cap) WUR;

/* Records as the API shows them (new references). */
json_t *render_org(struct store *st, const struct org_rec *o);
json_t *render_project(const struct project_rec *p);
json_t *render_key(const struct apikey_rec *k);

#endif
