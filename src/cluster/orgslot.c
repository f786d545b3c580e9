#include "cluster/orgslot.h"

#include "cluster/node.h"
#include "core/limits.h"
#include "core/log.h"

int orgslot_take(struct store *st, struct node *n, const char *kind, const char *org, int limit,
                 int64_t ttl_ms, const char *what, char id[STORE_ID], struct err *e)
{
    id[0] = '\0';
    if (!n || !store_shared(st))
        return 0;
    char nid[STORE_ID];
    node_id(n, nid);
    int64_t held = 0;
    int rc = store_org_slot_take(st, kind, org, nid, limit, ttl_ms, id, &held);
    if (rc == 0)
        return 0;
    if (rc == E_LIMIT) {
        e->retry_after = LIM_ORG_SLOT_RETRY_AFTER_S;
        return err_set(e, E_LIMIT, "rate_limited",
                       "this organization already holds %lld %s across the cluster (an "
                       "organization's share is %d); retry when one ends",
                       (long long)held, what, limit);
    }
    return err_set(e, E_UNAVAIL, "unavailable",
                   "the cluster's count of this organization's %s could not be read", what);
}

void orgslot_give(struct store *st, const char *id)
{
    if (!id[0])
        return;
    if (store_org_slot_give(st, id) != 0)
        log_warn("orgslot: slot %s could not be given back; it comes back at its expiry", id);
}
