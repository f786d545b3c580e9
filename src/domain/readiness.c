/* readiness: see readiness.h. */
#include "domain/readiness.h"

#include <stdio.h>
#include <string.h>

#include "core/limits.h"

#define GIB (1024.0 * 1024 * 1024)

/* Appends ", name" (or "name" first) to the message's list of reasons. */
static void add_reason(char *list, size_t cap, const char *name)
{
    size_t n = strlen(list);
    snprintf(list + n, cap - n, "%s%s", n ? ", " : "", name);
}

int ready_check(const struct ready_facts *f, struct err *e)
{
    size_t before = e->ndetails;
    char list[128] = "";
    int passing = 1; /* every reason found is one that passes without the operator */
    if (f->stopping) {
        err_detail(e, "stopping", "the server is stopping");
        add_reason(list, sizeof list, "stopping");
        passing = 0;
    }
    if (f->fenced) {
        err_detail(e, "fenced",
                   "this cluster node is fenced (declared dead or cut off from the store) and "
                   "has not registered again");
        add_reason(list, sizeof list, "fenced");
    }
    if (f->store_failing) {
        err_detail(e, "store", "the store did not answer the last heartbeat");
        add_reason(list, sizeof list, "store");
    }
    if (f->memory_budget >= 0 && f->memory_held + f->session_memory > f->memory_budget) {
        err_detail(e, "capacity",
                   "memory: the sessions hold %.1f GiB of memory limits of the server's %.1f "
                   "GiB; a default session asks %.1f GiB",
                   (double)f->memory_held / GIB, (double)f->memory_budget / GIB,
                   (double)f->session_memory / GIB);
        add_reason(list, sizeof list, "capacity");
    }
    if (f->pids_budget >= 0 && f->pids_held + f->session_pids > f->pids_budget) {
        err_detail(e, "capacity",
                   "pids: the sessions hold %lld tasks of pids limits of the server's %lld; a "
                   "session asks %lld",
                   f->pids_held, f->pids_budget, f->session_pids);
        if (!strstr(list, "capacity"))
            add_reason(list, sizeof list, "capacity");
    }
    if (f->memory_available >= 0 && f->memory_available < f->memory_floor) {
        err_detail(e, "memory",
                   "the host has %lld MiB of memory available, below the %lld MiB a new "
                   "browser needs",
                   f->memory_available >> 20, f->memory_floor >> 20);
        add_reason(list, sizeof list, "memory");
    }
    if (f->tasks_max >= 0 && f->tasks_used >= 0 && f->tasks_max - f->tasks_used < f->session_pids) {
        err_detail(e, "pids",
                   "the host runs %lld tasks of its %lld task ids, fewer free than the %lld a "
                   "session may take",
                   f->tasks_used, f->tasks_max, f->session_pids);
        add_reason(list, sizeof list, "pids");
    }
    if (e->ndetails == before)
        return 0;
    /* Fenced passes too (the node registers again at once), but not on a
     * schedule a Retry-After could promise. */
    if (f->fenced)
        passing = 0;
    e->retry_after = passing ? LIM_ADMIT_RETRY_AFTER_S : 0;
    return err_set(e, E_UNAVAIL, "not_ready", "not ready to take a new session: %s", list);
}
