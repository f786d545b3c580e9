/*
 * pool: the browser pool engine (warm, identically configured browsers handed
 * over on acquire; docs/pools.md).
 *
 * What it owns: for every pool of this node, in memory, its configuration
 * (a copy of the browser_pool_config JSON), the list of its browsers (warming,
 * available, acquired, being cleaned) and the FIFO queue of its waiters; one
 * filler thread that keeps each pool at `size` browsers at its fill rate and
 * serves waiters; the pools' share of their organization's concurrent-browser
 * limit, registered in the session manager (sessmgr_pool_set) so that creates
 * and resizes are checked under one lock.
 *
 * What it does not own: browsers themselves. A pool browser is started, ended
 * and cleaned between leases through the launcher (struct pool_launcher), so
 * the engine runs without Chromium (tests/unit/test_pool.c drives it with a
 * fake). Nor the store, HTTP or sessions' records: src/api/pools.c persists
 * pools, applies a lease's settings to the session and renders records.
 *
 * Who calls what: src/api/pools.c creates the engine after the session
 * manager (pools_start), calls pool_capacity_set before a pool's row changes
 * and the rest of this API from its handlers, and pool_browser_gone from the
 * sessions' ending hook; the filler thread calls launcher.launch; whoever
 * flushes, deletes, resizes or releases calls launcher.end and .clean.
 *
 * Threading: every function is thread-safe. One mutex guards every pool; the
 * engine calls neither the launcher nor the session manager with it held, so
 * launcher callbacks may call back into the engine (pool_get,
 * pool_browser_gone). The exceptions are the waiter callbacks
 * (pool_waiter_ops), which run with the mutex held and must not call the
 * engine: wake only signals (req_resume), gone only looks at a socket.
 *
 * Pools are never freed while the engine runs (a deleted pool is marked and
 * kept), which lets the filler drop the lock around a launch safely.
 */
#ifndef BD_RUNTIME_POOL_H
#define BD_RUNTIME_POOL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

struct sessmgr;
struct pool_engine;

/* A session id of a pool browser fits in this many bytes, NUL included. */
#define POOL_SID_MAX 32

/* A snapshot of one pool, taken under the engine lock. */
struct pool_view {
    char id[32], org_id[32], project_id[32];
    char name[256];
    int64_t created_at; /* ms since the epoch, as given to pool_add */
    json_t *config;     /* browser_pool_config, owned copy */
    int warming;        /* launching, or being cleaned after a release */
    int available;
    int acquired;
};

/* Releases v->config; accepts NULL. */
void pool_view_clear(struct pool_view *v);

/*
 * How browsers are made. Every callback runs without the engine lock, on the
 * thread named, and may call back into the engine.
 */
struct pool_launcher {
    /* Starts one browser for pool (pool->config says how: every launch
     * option, such as extension ids, is read from there). Filler thread.
     * Returns 0 and the new session's id in sid (POOL_SID_MAX bytes), or an
     * error (the filler retries at the fill rate). */
    int (*launch)(void *ctx, const struct pool_view *pool, char *sid);
    /* Ends a browser the pool no longer holds (flush, delete, shrink,
     * release without reuse, a failed clean). Any thread. */
    void (*end)(void *ctx, const char *sid, const char *reason);
    /* Makes a released browser fit for its next lease (pages, cookies,
     * storage, the lease's settings). Releasing thread. Returns 0, or an
     * error: the browser is then ended and the filler replaces it. */
    int (*clean)(void *ctx, const struct pool_view *pool, const char *sid);
    void *ctx;
};

struct pool_engine_opts {
    const struct pool_launcher *launcher; /* borrowed for the engine's life */
    struct sessmgr *sessions;             /* capacity registry (borrowed) */
    int tick_ms;                          /* filler period; 0 = 200 */
    /* The monotonic clock in ms (fill rate, deadlines); NULL = clock_mono_ms.
     * Tests pass a clock they advance by hand. */
    int64_t (*now_ms)(void);
};

/* Creates the engine (no pool, filler not running). */
struct pool_engine *pool_engine_new(const struct pool_engine_opts *o);
/* Starts the filler thread. Returns 0 or E_INTERNAL. */
int pool_engine_start(struct pool_engine *g) WUR;
/* The number of passes the filler made so far: a test that checks that
 * nothing happens waits for a few passes instead of a fixed time. */
uint64_t pool_engine_ticks(struct pool_engine *g);
/* Settles every waiter with POOL_WAIT_STOPPED (the server is stopping). */
void pool_engine_drain(struct pool_engine *g);
/* Stops the filler and frees every pool; accepts NULL. Browsers are not
 * ended (the session manager ends every session when it stops). Waiters must
 * have been drained and finished (pool_waiter_finish). */
void pool_engine_free(struct pool_engine *g);

/* ---- capacity (the organization's max_concurrent_browsers) ---- */

/* Counts `size` browsers of pool_id against org_id's limit (< 0: none):
 * E_FORBIDDEN when the org's pool sizes plus its live standalone sessions
 * would pass it (nothing changes then; *pools and *sessions, may be NULL,
 * receive the figures). Called before a pool is created or resized, with the
 * old size again to undo when the change could not be stored. */
int pool_capacity_set(struct pool_engine *g, const char *org_id, const char *pool_id,
                      long long size, long long limit, long long *pools, long long *sessions) WUR;
/* Forgets pool_id's capacity (its creation failed). */
void pool_capacity_drop(struct pool_engine *g, const char *pool_id);

/* ---- pools ---- */

/* Adds a pool with config (borrowed; copied) and registers its size without
 * a limit check (the caller checked it with pool_capacity_set, or the pool
 * was restored). Its first browser starts at once, the next at the fill
 * rate. E_CONFLICT if a pool with this id exists. */
int pool_add(struct pool_engine *g, const char *id, const char *org_id, const char *project_id,
             const char *name, int64_t created_at, const json_t *config) WUR;
/* A snapshot of pool id into *out (pool_view_clear it), or E_NOTFOUND with
 * *out zeroed. */
int pool_get(struct pool_engine *g, const char *id, struct pool_view *out) WUR;
/* Applies a new configuration (borrowed; copied) and name. Browsers launched
 * from now on use it; acquired ones keep theirs (interface document, related
 * rules 2 and 3). discard_idle ends every available browser and rebuilds them
 * at once; otherwise a smaller size ends available browsers beyond it.
 * Capacity follows the new size (checked earlier by pool_capacity_set). */
int pool_configure(struct pool_engine *g, const char *id, const char *name, const json_t *config,
                   int discard_idle) WUR;
/* The number of acquired browsers of pool id (0 if unknown). */
int pool_leased(struct pool_engine *g, const char *id);
/* The engine's pools summed (GET /metrics): their configured sizes, their
 * available and acquired browsers, their queued waiters. Takes the engine
 * lock for one walk of the pools, as pool_get does. */
struct pool_totals {
    long long size, available, acquired, waiters;
};
void pool_engine_totals(struct pool_engine *g, struct pool_totals *t);
/* Deletes pool id: ends every browser it holds (acquired ones too: the
 * caller refused with pool_leased unless forced), settles its waiters with
 * POOL_WAIT_DELETED and drops its capacity. E_NOTFOUND if unknown. */
int pool_delete(struct pool_engine *g, const char *id) WUR;
/* Ends every available browser of pool id; the filler refills it at its
 * fill rate. E_NOTFOUND if unknown. */
/* Deletes every pool (a fenced cluster node: the pools' rows move to
 * another node, which fills them there). */
void pool_delete_all(struct pool_engine *g);
int pool_flush(struct pool_engine *g, const char *id) WUR;

/* ---- leases ---- */

/* Returns browser sid, acquired from pool id, to the pool. reuse: cleaned
 * through the launcher and available again (ended instead if the clean fails,
 * the pool was deleted meanwhile or holds more than its size); otherwise
 * ended, and the filler replaces it. Runs the clean on the calling thread.
 * E_NOTFOUND when sid is not acquired from this pool. */
int pool_release(struct pool_engine *g, const char *id, const char *sid, int reuse) WUR;
/* Returns an acquired browser whose lease never reached its client, without
 * cleaning it (nothing touched it). */
void pool_put_back(struct pool_engine *g, const char *id, const char *sid);
/* A pool browser ended on its own (timeout, crash, an API delete): forget it
 * and let the filler replace it. Unknown ids are ignored. */
void pool_browser_gone(struct pool_engine *g, const char *id, const char *sid);

/* ---- waiters: an acquire that waits ---- */

struct pool_waiter;

enum pool_wait_state {
    POOL_WAIT_QUEUED,  /* not settled yet */
    POOL_WAIT_GRANTED, /* a browser was handed over (pool_waiter_sid) */
    POOL_WAIT_TIMEOUT, /* its deadline passed with no browser */
    POOL_WAIT_DELETED, /* the pool was deleted */
    POOL_WAIT_STOPPED, /* the engine is stopping */
    POOL_WAIT_GONE,    /* ops->gone said the client left */
};

struct pool_waiter_ops {
    /* Called exactly once when the waiter is settled (never for a cancel
     * by pool_waiter_finish), with the engine lock held: only signal. */
    void (*wake)(void *ctx);
    /* May be NULL. 1 when the waiting client went away; polled by the
     * filler so that a departed client does not block those behind it. */
    int (*gone)(void *ctx);
};

/*
 * Acquires a browser of pool id. With nobody queued ahead and a browser
 * available, returns 0 with its id in sid (POOL_SID_MAX bytes). Otherwise,
 * when the wait is positive, queues a waiter (first come, first served) and
 * returns 0 with sid "" and *w set: the waiter is settled by a release, a
 * fill, a flush refilled, a resize, a delete, its deadline or the engine
 * stopping, and calls ops->wake(ctx) then. wait_ms < 0 means the pool's
 * default: the time it needs to fill at its rate (100 / fill_rate minutes; 0
 * when it does not refill). With no browser and no wait, returns E_LIMIT.
 * E_NOTFOUND for an unknown pool. ops (copied) and ctx are kept only for a
 * waiter; ops NULL means the caller cannot wait. The caller owns *w
 * (pool_waiter_finish).
 */
int pool_acquire(struct pool_engine *g, const char *id, int64_t wait_ms,
                 const struct pool_waiter_ops *ops, void *ctx, char *sid,
                 struct pool_waiter **w) WUR;
/* The wait in ms pool_acquire applies to wait_ms < 0 for config. */
int64_t pool_default_wait_ms(const json_t *config);
/* The waiter's state; for POOL_WAIT_GRANTED the browser's id into sid
 * (POOL_SID_MAX bytes, may be NULL). */
enum pool_wait_state pool_waiter_state(struct pool_waiter *w, char *sid);
/* Ends the owner's interest in w and frees it: a waiter still queued is
 * cancelled (its client left) and POOL_WAIT_QUEUED returned; otherwise its
 * final state, with the granted browser's id in sid (may be NULL). Checking
 * and cancelling are one step, so a browser granted at the last moment is
 * never lost: the caller pool_put_back's it if the client did not get it.
 * Accepts NULL (returns POOL_WAIT_QUEUED). */
enum pool_wait_state pool_waiter_finish(struct pool_waiter *w, char *sid);

/* ---- Chromium helpers for a launcher (DevTools; not used by the engine) ---- */

/* Resets a released browser at DevTools URL ws (runtime/pool_clean.c): one
 * new page left (navigated to start_url or about:blank), every page of the
 * lease closed, cookies, permissions and the cache cleared, and every
 * storage of each origin the lease's pages showed (now or in their history)
 * cleared, each step's answer checked and the result read back. Returns 0
 * only when all of it was verified; otherwise the browser must not be handed
 * out again (pool_release ends it). */
int pool_cdp_clean(const char *ws, const char *start_url) WUR;
/* Navigates the browser's first page to url without waiting for it. */
void pool_cdp_navigate(const char *ws, const char *url);

#endif
