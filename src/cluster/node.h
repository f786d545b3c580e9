/*
 * node: this process as a member of a cluster of browserd nodes sharing one
 * PostgreSQL store (docs/multinode.md).
 *
 * A node registers a fresh row at start, heartbeats every lease/5 on the
 * database's clock, and sweeps: any node whose heartbeat is older than the
 * lease is declared dead by exactly one sweeper, which in the same
 * transaction ends that node's sessions ("node lost") and takes over its
 * pools (store.h, node_sweep); right after, it ends the records of the dead
 * node's background work (the lost hook), under a claim that another live
 * node takes over if the sweeper dies before it is done. A node that finds itself declared dead, or
 * that cannot reach the database for a whole lease, fences itself: its
 * browsers are killed (the fence hook) and it answers 503 until it has
 * registered again as a new node, which it tries right after the hook. There is no leader and no
 * consensus code: the row locks of the database decide.
 *
 * With an embedded store (SQLite) there is no cluster: node_start is not
 * called and the functions below accept NULL, answering as the single node
 * "local".
 */
#ifndef BD_CLUSTER_NODE_H
#define BD_CLUSTER_NODE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "store/store.h"

struct node;

struct node_hooks {
    /* This node was declared dead, or lost the database for a lease: end
     * every local browser now (their rows were or will be ended by a
     * sweeper). Called on the heartbeat thread, which registers again as
     * soon as it returns: the hook SIGKILLs and leaves the waiting to a
     * thread of its own (no graceful close: nothing of a lost node's
     * sessions is kept). */
    void (*fence)(void *ctx);
    /* Pools may have been moved to this node (a sweep found a dead node, a
     * node that stopped named this one its heir): load the pools homed here
     * that are not running yet. Heartbeat thread, every tick. */
    void (*adopt)(void *ctx);
    /* This node's sweep declared node_id dead, or took over the claim of a
     * sweeper that died before it was done (one node at a time: row locks
     * and the claim's expiry): end the records of its background work that
     * only it would have finished (docs/multinode.md "Records a node leaves
     * behind"). Must be safe to run again on records ended already (each
     * write is conditional on the state read). -1 when some records could
     * not be read (the claim is kept: the job is taken up again once it runs
     * out), else 0. Heartbeat thread. May be NULL. */
    int (*lost)(void *ctx, const char *node_id);
    /* How many browsers run here (reported with each heartbeat). */
    int64_t (*running)(void *ctx);
    void *ctx;
};

struct node_opts {
    struct store *store;   /* shared (store_shared) */
    const char *name;      /* --node-name */
    const char *advertise; /* --advertise: how the other nodes reach this one */
    int64_t lease_ms;      /* BROWSERD_NODE_LEASE_MS; default NODE_LEASE_MS */
    int64_t capacity;
    struct node_hooks hooks;
    /* Tests only (BROWSERD_TEST_SWEEP_STALL_NODE, docs/operator.md): the
     * name of a node after whose sweep the heartbeat thread stalls; NULL or
     * "" for none. */
    const char *test_stall_after_sweep;
};

#define NODE_LEASE_MS 10000

/* Registers this node, reaps its own earlier incarnations (rows with the
 * same name still up: their sessions are handed to reap(ctx, node_id)
 * before the rows are retired, so that their processes on this host can be
 * killed), and starts the heartbeat and sweep thread. */
int node_start(const struct node_opts *o, void (*reap)(void *ctx, const char *node_id), void *ctx,
               struct node **out, struct err *e) WUR;
/* Stops heartbeating and sweeping (no hook runs after it returns), before
 * the browsers are stopped at shutdown. Idempotent; accepts NULL. */
void node_halt(struct node *n);
/* Halts, then retires this node (its remaining sessions end with "server stopped", its
 * pools go to another live node) and stops the thread. Accepts NULL. */
void node_stop(struct node *n);

/* This node's id; "local" when n is NULL. The id changes after a fence. */
void node_id(struct node *n, char out[STORE_ID]);
/* 1 while this node is registered and may take work (always 1 for NULL). */
int node_serving(struct node *n);
/* 1 when this node's last heartbeat could not reach the store (the last
 * result of the periodic check: asks nothing of the store); 0 for NULL. */
int node_store_failing(struct node *n);

/*
 * Where the browser of a row owned by node_id runs:
 *   0          this node (or n is NULL, or node_id is "" / "local");
 *   1          another live node: its advertise URL is in url;
 *   E_UNAVAIL  a node that is not up (dead, or unknown): e says so.
 * Live nodes are cached for a fraction of the lease.
 */
int node_locate(struct node *n, const char *node_id, char *url, size_t cap, struct err *e) WUR;

#endif
