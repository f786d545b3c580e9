/*
 * orgslot: an organization's share of something every node of a cluster
 * uses together (a search provider, the shared database), counted over the
 * cluster instead of each node's memory (docs/multinode.md "Shares per node
 * and per cluster").
 *
 * A slot is a row of the shared store (store.h org_slot_take) naming its
 * organization, its kind and the node that holds it: taken before the work,
 * given back after. The rows of a node that dies are deleted when the sweep
 * ends it (or when it restarts under its name), a slot counts only while
 * its node is up, and each expires ttl_ms after its take, so that a slot
 * whose give failed comes back too. On an embedded store (one server) there
 * is no cluster: a take takes nothing, and the node's share (core/share.h)
 * is the whole cap.
 *
 * Threading: any thread; each call is one store transaction (blocking).
 */
#ifndef BD_CLUSTER_ORGSLOT_H
#define BD_CLUSTER_ORGSLOT_H

#include <stdint.h>

#include "core/err.h"
#include "store/store.h"

struct node;

/* Takes one of org's at most `limit` slots of kind across the cluster
 * (what names them in messages: "search provider calls in flight") for up to
 * ttl_ms; its id goes to id ("" when nothing was taken: no cluster). 0, or
 * E_LIMIT with Retry-After (e set) when the org holds limit of them on the
 * nodes together, E_UNAVAIL when the store could not count them. */
int orgslot_take(struct store *st, struct node *n, const char *kind, const char *org, int limit,
                 int64_t ttl_ms, const char *what, char id[STORE_ID], struct err *e) WUR;

/* Gives back slot id (nothing when id is ""); a failure is logged (the slot
 * then comes back at its expiry). */
void orgslot_give(struct store *st, const char *id);

#endif
