/* Handlers of /browser_pools (pools.c; route table in routes.c), and the start and stop of
 * the pool engine (src/runtime/pool.h) with the Chromium launcher it is given. */
#ifndef BD_API_POOLS_H
#define BD_API_POOLS_H

#include "api/api.h"
#include "http/http.h"

int pools_create(struct req *rq, struct resp *rs);
int pools_get(struct req *rq, struct resp *rs);
int pools_list(struct req *rq, struct resp *rs);
int pools_update(struct req *rq, struct resp *rs);
int pools_delete(struct req *rq, struct resp *rs);
int pools_acquire(struct req *rq, struct resp *rs);
int pools_release(struct req *rq, struct resp *rs);
int pools_flush(struct req *rq, struct resp *rs);
/* POST /internal/pools/{token}/flush: another node asks this one, the pool's
 * home, to flush it (its profile was re-authenticated there); the token,
 * signed by a node, names the pool (docs/multinode.md). */
int pools_flush_from_node(struct req *rq, struct resp *rs);
/* Classic WebDriver (api/wdclassic.c): acquires a browser of the key's pool
 * named pool (id or name) without waiting, its lease applied as an acquire
 * without a body; its id into sid. 404 for an unknown pool, 429 when none is
 * available, 403 without the feature. */
int pools_acquire_now(struct req *rq, const char *pool, char *sid, size_t cap) WUR;
/* Releases browser sid, acquired from pool_id, with reuse (as POST
 * /browser_pools/{id}/release does). E_NOTFOUND when it is not acquired. */
int pools_release_browser(const char *pool_id, const char *sid) WUR;
/* Registers the pools' session module (before recovery). */
void pools_init(struct app *app);
/* Creates the engine, restores stored pools and starts the filler (after the session
 * manager: the engine registers pool capacity there). */
int pools_start(struct app *app);
/* Answers every parked acquire with 204 (before the HTTP server stops). */
void pools_drain(void);
/* A cluster node: loads the pools homed on this node that its engine does
 * not run yet (after registering, and after a sweep moved a dead node's
 * pools here). ctx is the app. */
void pools_adopt(void *ctx);
/* A fenced cluster node: stops running every pool (their browsers end). */
void pools_fence(void);
/* Stops the filler and frees the engine (after the HTTP server, whose parked acquires
 * hold engine waiters, and before the session manager). */
void pools_stop(void);
/* The running engine's pools summed (GET /metrics): 0 with t filled, or
 * -ESRCH when no engine runs (before pools_start, after pools_stop). */
struct pool_totals;
int pools_totals(struct pool_totals *t) __attribute__((warn_unused_result));
/* Flushes the pools of org/project whose browsers load profile_name. */
struct app;
void pools_flush_profile(struct app *app, const char *org_id, const char *project_id,
                         const char *profile_name);

#endif
