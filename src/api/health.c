/* GET /health and GET /ready: see health.h. */
#include "api/health.h"

#include "api/api.h"
#include "cluster/node.h"
#include "domain/launch_settings.h"
#include "domain/readiness.h"
#include "domain/session_rules.h"
#include "runtime/admit.h"
#include "runtime/sandbox.h"
#include "runtime/spares.h"

int health_get(struct req *rq, struct resp *rs)
{
    (void)rq;
    resp_json(rs, 200, json_pack("{s:s}", "status", "ok"));
    return 0;
}

int ready_get(struct req *rq, struct resp *rs)
{
    struct app *app = api_app(rq);
    struct ready_facts f = {
        .stopping = __atomic_load_n(&app->stopping, __ATOMIC_RELAXED),
        .fenced = !node_serving(app->node),
        .store_failing = node_store_failing(app->node),
        .memory_budget = -1,
        .pids_budget = -1,
        .session_memory = launch_memory_bytes(SESSRULES_MEMORY_DEFAULT),
        .session_pids = SANDBOX_PIDS_MAX,
        .tasks_used = admit_host_tasks(),
        .tasks_max = admit_host_pid_max() > 0 ? admit_host_pid_max() : -1,
        .memory_available = admit_host_available(),
        .memory_floor = (long long)SPARES_MIN_AVAIL_MB << 20,
    };
    /* The books bound sessions only when they are sandboxed (session.c). */
    if (sandbox_enabled()) {
        struct admit_budget b = admit_configured();
        f.memory_budget = b.memory;
        f.pids_budget = b.pids;
        admit_held(NULL, &f.memory_held, &f.pids_held);
    }
    int rc = ready_check(&f, &rq->err);
    if (rc)
        return rc;
    resp_json(rs, 200, json_pack("{s:s}", "status", "ready"));
    return 0;
}
