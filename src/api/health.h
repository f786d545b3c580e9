/* GET /health and GET /ready (health.c): the probes of load balancers and
 * supervisors, without a key (docs/operator.md, "Health and readiness"). */
#ifndef BD_API_HEALTH_H
#define BD_API_HEALTH_H

#include "http/http.h"

/* Liveness: 200 {"status":"ok"} while the HTTP threads answer. Touches
 * nothing but the response. */
int health_get(struct req *rq, struct resp *rs);
/* Readiness: 200 {"status":"ready"} when the server can take a new session,
 * else 503 not_ready naming each reason (domain/readiness.h). Reads only
 * flags and counters held in memory and one small /proc file: never the
 * store. */
int ready_get(struct req *rq, struct resp *rs);

#endif
