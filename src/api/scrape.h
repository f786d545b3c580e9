/* GET /metrics (scrape.c): the Prometheus text exposition of core/metrics,
 * behind the admin token (docs/operator.md, "Metrics"). */
#ifndef BD_API_SCRAPE_H
#define BD_API_SCRAPE_H

#include "http/http.h"

/* 200 text/plain; version=0.0.4 with every family of core/metrics.h, the
 * engines' gauges read now: live sessions (the session manager's count),
 * the pools summed (one walk under the pool engine's lock, as GET
 * /browser_pools/{id} takes it), the spares ready. Takes no lock a request
 * holds for long and never queries the store. 500 when the text passes
 * LIM_METRICS_TEXT_BYTES. */
int scrape_get(struct req *rq, struct resp *rs);

#endif
