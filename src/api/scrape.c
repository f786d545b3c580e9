/* GET /metrics: see scrape.h. */
#include "api/scrape.h"

#include "api/api.h"
#include "api/pools.h"
#include "api/proxies.h"
#include "core/buf.h"
#include "core/limits.h"
#include "core/metrics.h"
#include "proxy/egress.h"
#include "runtime/pool.h"
#include "runtime/sessmgr.h"
#include "runtime/spares.h"

int scrape_get(struct req *rq, struct resp *rs)
{
    struct app *app = api_app(rq);
    struct metrics_gauges g = {
        .sessions_running = app->sessions ? sessmgr_running(app->sessions) : -1,
        .pool_size = -1,
        .spares_ready = -1,
        .egress_in_kernel = proxies_egress() ? egress_in_kernel(proxies_egress()) : -1,
    };
    struct pool_totals t;
    if (pools_totals(&t) == 0) {
        g.pool_size = t.size;
        g.pool_available = t.available;
        g.pool_acquired = t.acquired;
        g.pool_waiters = t.waiters;
    }
    if (app->spares) {
        g.spares_ready = spares_ready(app->spares, -1);
        uint64_t launched, waited, served;
        spares_counts(app->spares, &launched, &waited, &served);
        g.spares_launched = (long long)launched;
        g.spares_waited = (long long)waited;
        g.spares_waited_served = (long long)served;
    }
    struct buf b;
    buf_init(&b, LIM_METRICS_TEXT_BYTES);
    if (metrics_render(&b, &g) != 0) {
        buf_free(&b);
        return err_set(&rq->err, E_INTERNAL, "internal_error",
                       "the metrics text passed its cap of %u bytes (LIM_METRICS_TEXT_BYTES)",
                       LIM_METRICS_TEXT_BYTES);
    }
    resp_text(rs, 200, "text/plain; version=0.0.4; charset=utf-8", b.p, b.len);
    return 0;
}
