/* node: registration, heartbeat, sweep and fencing of a cluster member. */
#include "cluster/node.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/log.h"
#include "core/xalloc.h"

/* Nodes the locate cache remembers (a cluster larger than this still works:
 * a miss reads the store). */
#define NODE_CACHE 64

struct node {
    struct node_opts o;
    char name[STORE_NAME];
    char advertise[512];
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stopping;
    int joined;         /* the thread was joined (node_halt) */
    int serving;        /* registered and not fenced */
    char id[STORE_ID];  /* the current registration */
    int64_t last_ok_ms; /* monotonic time of the last successful heartbeat */
    int hb_failed;      /* the last heartbeat could not reach the store */
    struct node_rec cache[NODE_CACHE];
    size_t ncache;
    int64_t cache_at_ms; /* monotonic; 0 = never loaded */
};

static int do_register(struct node *n)
{
    struct node_rec r;
    memset(&r, 0, sizeof r);
    crypto_new_id(r.id);
    snprintf(r.name, sizeof r.name, "%s", n->name);
    snprintf(r.advertise_url, sizeof r.advertise_url, "%s", n->advertise);
    r.capacity = n->o.capacity;
    if (store_node_register(n->o.store, &r) != 0)
        return -1;
    pthread_mutex_lock(&n->mu);
    memcpy(n->id, r.id, sizeof n->id);
    n->serving = 1;
    n->hb_failed = 0;
    n->last_ok_ms = clock_mono_ms();
    n->cache_at_ms = 0;
    pthread_mutex_unlock(&n->mu);
    log_info("cluster: node %s registered as %s (advertise %s, lease %lld ms)", n->name, r.id,
             n->advertise, (long long)n->o.lease_ms);
    return 0;
}

/* Ends every local browser and stops serving until registered again. */
static void fence(struct node *n, const char *why)
{
    pthread_mutex_lock(&n->mu);
    int was = n->serving;
    n->serving = 0;
    pthread_mutex_unlock(&n->mu);
    if (!was)
        return;
    log_error("cluster: node %s fences itself (%s): ending its browsers", n->id, why);
    if (n->o.hooks.fence)
        n->o.hooks.fence(n->o.hooks.ctx);
    /* The hook kills without waiting (node.h): serve again as a new node
     * now rather than a tick later. */
    (void)do_register(n);
}

static int stopping(struct node *n)
{
    pthread_mutex_lock(&n->mu);
    int s = n->stopping;
    pthread_mutex_unlock(&n->mu);
    return s;
}

/* The test switch BROWSERD_TEST_SWEEP_STALL_NODE (docs/operator.md): after a
 * sweep that declared the node of that name dead, this heartbeat thread
 * waits until the process stops, so that a test can kill the sweeper
 * between the sweep's commit and the end of the dead node's records.
 * 1 when it stalled. */
static int test_stall(struct node *n, const char *dead_id)
{
    if (!n->o.test_stall_after_sweep || !n->o.test_stall_after_sweep[0])
        return 0;
    struct node_rec r;
    memset(&r, 0, sizeof r);
    if (store_node_get(n->o.store, dead_id, &r) != 0 ||
        strcmp(r.name, n->o.test_stall_after_sweep) != 0)
        return 0;
    log_warn("cluster: test switch: stalling after the sweep of node %s (%s) before ending the "
             "records it left",
             r.name, dead_id);
    pthread_mutex_lock(&n->mu);
    while (!n->stopping)
        pthread_cond_wait(&n->cv, &n->mu);
    pthread_mutex_unlock(&n->mu);
    return 1;
}

/* Ends the records the dead nodes left (the lost hook), then drops each
 * one's claim (store.h node_orphans_claim). Not when stopping, nor when the
 * hook could not read them all: the claim runs out and a node takes it. */
static void end_orphans(struct node *n, char (*dead)[STORE_ID], size_t ndead)
{
    for (size_t i = 0; i < ndead && !stopping(n); i++) {
        if (n->o.hooks.lost && n->o.hooks.lost(n->o.hooks.ctx, dead[i]) != 0) {
            log_warn("cluster: node %s: some of the records it left could not be read; they are "
                     "looked at again once this claim runs out",
                     dead[i]);
            continue;
        }
        if (store_node_orphans_done(n->o.store, dead[i]) != 0)
            log_warn("cluster: node %s: the end of its records could not be recorded (another "
                     "node ends them again once this claim runs out)",
                     dead[i]);
    }
}

static void tick(struct node *n)
{
    pthread_mutex_lock(&n->mu);
    int serving = n->serving;
    char id[STORE_ID];
    memcpy(id, n->id, sizeof id);
    int64_t last_ok = n->last_ok_ms;
    pthread_mutex_unlock(&n->mu);
    if (!serving) {
        (void)do_register(n);
        return;
    }
    int64_t running = n->o.hooks.running ? n->o.hooks.running(n->o.hooks.ctx) : 0;
    int rc = store_node_heartbeat(n->o.store, id, running);
    pthread_mutex_lock(&n->mu);
    n->hb_failed = rc != 0 && rc != E_NOTFOUND;
    pthread_mutex_unlock(&n->mu);
    if (rc == E_NOTFOUND) {
        fence(n, "declared dead by the cluster");
        return;
    }
    if (rc != 0) {
        if (clock_mono_ms() - last_ok >= n->o.lease_ms)
            fence(n, "the database was unreachable for a whole lease");
        return;
    }
    pthread_mutex_lock(&n->mu);
    n->last_ok_ms = clock_mono_ms();
    pthread_mutex_unlock(&n->mu);
    char(*dead)[STORE_ID] = NULL;
    size_t ndead = 0;
    if (store_node_sweep(n->o.store, n->o.lease_ms, id, &dead, &ndead) == 0 && ndead) {
        for (size_t i = 0; i < ndead; i++)
            log_warn("cluster: node %s declared dead: its sessions ended (node lost), its pools "
                     "moved to %s",
                     dead[i], id);
        for (size_t i = 0; i < ndead; i++)
            if (test_stall(n, dead[i]))
                break;
        end_orphans(n, dead, ndead);
        pthread_mutex_lock(&n->mu);
        n->cache_at_ms = 0;
        pthread_mutex_unlock(&n->mu);
    }
    xfree(dead);
    /* Dead nodes whose sweeper died (or ran past its claim) before their
     * records were ended: any live node finishes the job. */
    dead = NULL;
    ndead = 0;
    if (!stopping(n) &&
        store_node_orphans_claim(n->o.store, id, n->o.lease_ms, &dead, &ndead) == 0 && ndead) {
        for (size_t i = 0; i < ndead; i++)
            log_warn("cluster: node %s: its sweeper did not end the records it left; %s ends them",
                     dead[i], id);
        end_orphans(n, dead, ndead);
    }
    xfree(dead);
    /* Pools reach this node by this sweep, by another sweep's stragglers, or
     * from a node that stopped cleanly and named this one its heir: look
     * every tick (one indexed query). */
    if (n->o.hooks.adopt)
        n->o.hooks.adopt(n->o.hooks.ctx);
}

static void *run(void *arg)
{
    struct node *n = arg;
    int64_t every = n->o.lease_ms / 5 > 0 ? n->o.lease_ms / 5 : 1;
    pthread_mutex_lock(&n->mu);
    while (!n->stopping) {
        struct timespec until = clock_deadline(every);
        pthread_cond_timedwait(&n->cv, &n->mu, &until);
        if (n->stopping)
            break;
        pthread_mutex_unlock(&n->mu);
        tick(n);
        pthread_mutex_lock(&n->mu);
    }
    pthread_mutex_unlock(&n->mu);
    return NULL;
}

/* Earlier incarnations of this node's name that are still up: a restart
 * after a crash. Their browsers on this host are killed (reap) and their
 * rows retired before this node takes work. */
static void reap_earlier(struct node *n, void (*reap)(void *ctx, const char *node_id), void *ctx)
{
    struct node_rec *rows = NULL;
    size_t nrows = 0;
    if (store_node_list(n->o.store, &rows, &nrows) != 0)
        return;
    for (size_t i = 0; i < nrows; i++) {
        if (strcmp(rows[i].name, n->name) != 0 || strcmp(rows[i].id, n->id) == 0)
            continue;
        if (reap)
            reap(ctx, rows[i].id);
        if (store_node_retire(n->o.store, rows[i].id, "server restarted", n->id) == 0)
            log_info("cluster: retired %s, an earlier run of node %s", rows[i].id, n->name);
    }
    xfree(rows);
}

int node_start(const struct node_opts *o, void (*reap)(void *ctx, const char *node_id), void *ctx,
               struct node **out, struct err *e)
{
    struct node *n = xcalloc(1, sizeof *n);
    n->o = *o;
    snprintf(n->name, sizeof n->name, "%s", o->name);
    snprintf(n->advertise, sizeof n->advertise, "%s", o->advertise);
    n->o.name = n->name;
    n->o.advertise = n->advertise;
    if (n->o.lease_ms <= 0)
        n->o.lease_ms = NODE_LEASE_MS;
    pthread_mutex_init(&n->mu, NULL);
    clock_cond_init(&n->cv);
    if (do_register(n) != 0) {
        pthread_mutex_destroy(&n->mu);
        pthread_cond_destroy(&n->cv);
        xfree(n);
        return err_set(e, E_INTERNAL, "internal",
                       "cluster: this node could not register in the shared store");
    }
    reap_earlier(n, reap, ctx);
    if (pthread_create(&n->thread, NULL, run, n) != 0) {
        (void)store_node_retire(n->o.store, n->id, "server stopped", "");
        pthread_mutex_destroy(&n->mu);
        pthread_cond_destroy(&n->cv);
        xfree(n);
        return err_set(e, E_INTERNAL, "internal", "cluster: cannot start the heartbeat thread");
    }
    *out = n;
    return 0;
}

void node_halt(struct node *n)
{
    if (!n)
        return;
    pthread_mutex_lock(&n->mu);
    int joined = n->joined;
    n->stopping = 1;
    n->joined = 1;
    pthread_cond_signal(&n->cv);
    pthread_mutex_unlock(&n->mu);
    if (!joined)
        pthread_join(n->thread, NULL);
}

void node_stop(struct node *n)
{
    if (!n)
        return;
    node_halt(n);
    /* Our pools go to the oldest other live node, if any. */
    char heir[STORE_ID] = "";
    struct node_rec *rows = NULL;
    size_t nrows = 0;
    if (store_node_list(n->o.store, &rows, &nrows) == 0)
        for (size_t i = 0; i < nrows && !heir[0]; i++)
            if (strcmp(rows[i].id, n->id) != 0)
                memcpy(heir, rows[i].id, sizeof heir);
    xfree(rows);
    if (n->serving && store_node_retire(n->o.store, n->id, "server stopped", heir) == 0)
        log_info("cluster: node %s left the cluster%s%s", n->id, heir[0] ? "; pools moved to " : "",
                 heir);
    pthread_mutex_destroy(&n->mu);
    pthread_cond_destroy(&n->cv);
    xfree(n);
}

void node_id(struct node *n, char out[STORE_ID])
{
    if (!n) {
        snprintf(out, STORE_ID, "local");
        return;
    }
    pthread_mutex_lock(&n->mu);
    memcpy(out, n->id, STORE_ID);
    pthread_mutex_unlock(&n->mu);
}

int node_serving(struct node *n)
{
    if (!n)
        return 1;
    pthread_mutex_lock(&n->mu);
    int s = n->serving;
    pthread_mutex_unlock(&n->mu);
    return s;
}

int node_store_failing(struct node *n)
{
    if (!n)
        return 0;
    pthread_mutex_lock(&n->mu);
    int f = n->hb_failed;
    pthread_mutex_unlock(&n->mu);
    return f;
}

/* Reloads the live nodes when the cache is older than a fifth of the
 * lease. Called with n->mu held; drops it around the store call. */
static void refresh(struct node *n, int force)
{
    int64_t now = clock_mono_ms();
    if (!force && n->cache_at_ms && now - n->cache_at_ms < n->o.lease_ms / 5)
        return;
    pthread_mutex_unlock(&n->mu);
    struct node_rec *rows = NULL;
    size_t nrows = 0;
    int rc = store_node_list(n->o.store, &rows, &nrows);
    pthread_mutex_lock(&n->mu);
    if (rc != 0)
        return;
    n->ncache = nrows < NODE_CACHE ? nrows : NODE_CACHE;
    memcpy(n->cache, rows, n->ncache * sizeof *rows);
    n->cache_at_ms = now;
    xfree(rows);
}

int node_locate(struct node *n, const char *nid, char *url, size_t cap, struct err *e)
{
    if (!n || !nid[0] || strcmp(nid, "local") == 0)
        return 0;
    pthread_mutex_lock(&n->mu);
    if (strcmp(nid, n->id) == 0) {
        pthread_mutex_unlock(&n->mu);
        return 0;
    }
    for (int pass = 0; pass < 2; pass++) {
        refresh(n, pass == 1);
        for (size_t i = 0; i < n->ncache; i++)
            if (strcmp(n->cache[i].id, nid) == 0 && strcmp(n->cache[i].state, "up") == 0) {
                snprintf(url, cap, "%s", n->cache[i].advertise_url);
                pthread_mutex_unlock(&n->mu);
                return 1;
            }
    }
    pthread_mutex_unlock(&n->mu);
    e->retry_after = 2;
    return err_set(e, E_UNAVAIL, "node_unavailable",
                   "the node running this browser (%s) is not up: its sessions end once the "
                   "cluster declares it dead",
                   nid);
}
