/*
 * metrics: the process's counters and histograms, rendered in the
 * Prometheus text format 0.0.4 (GET /metrics, docs/operator.md "Metrics").
 *
 * Every update is a relaxed C11 atomic add on a fixed slot: no lock, no
 * allocation, callable from any thread (HTTP threads, the relay's loop, the
 * egress workers, the supervisor). A scrape reads the same slots without a
 * lock; a histogram read while it is updated may be off by the one
 * observation in flight, which Prometheus tolerates. Labels are bounded by
 * construction: an enum, or an index into the route table given once at
 * start; never a session, organization or client value.
 *
 * Gauges that describe engines' state (sessions, pools, spares) are not
 * kept here: the caller reads them at scrape time and passes them in
 * (struct metrics_gauges), so no engine has to mirror its state.
 */
#ifndef BD_CORE_METRICS_H
#define BD_CORE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

/* Plain counters (browserd_<name>_total). */
enum metrics_counter {
    METRICS_RELAY_BYTES,    /* bytes the CDP/BiDi relay moved, both ways */
    METRICS_EGRESS_BYTES,   /* bytes the egress proxy moved, both ways */
    METRICS_OOM_KILLS,      /* sessions' processes killed by the kernel's OOM killer */
    METRICS_ORPHANS_REAPED, /* sessions of a server that died, ended by recovery */
    METRICS_KERNEL_TUNNELS, /* egress tunnels spliced in the kernel (sockmap) */
    METRICS_NCOUNTERS
};

/* How a session create got its browser. */
enum metrics_create_path {
    METRICS_CREATE_SPARE, /* a prelaunched spare (runtime/spares.c) */
    METRICS_CREATE_POOL,  /* a pool's warm browser (acquire) */
    METRICS_CREATE_COLD,  /* a launch for this create */
    METRICS_NCREATE_PATHS
};

/* The route index of a request that matched no route (404, 405). */
#define METRICS_NO_ROUTE ((size_t)-1)

/* Adds n to counter c. */
void metrics_add(enum metrics_counter c, uint64_t n);

/* A session create starts (delta 1) or ends (-1):
 * browserd_sessions{state="starting"} counts the creates in progress. */
void metrics_creating(int delta);
/* A session create got its browser by path (or failed on it, !ok) after us
 * microseconds from its request's first byte. A pool's acquire that hands
 * a browser over counts as a create by path "pool". */
void metrics_create(enum metrics_create_path path, int ok, int64_t us);

/* Sizes the request counters for a route table of n routes and labels
 * route i with its method and pattern (borrowed: static strings that outlive
 * the process's serving). Called once before requests are served; a second
 * call is ignored (the process has one server whose requests are counted).
 * Routes past LIM_METRICS_ROUTES are counted as METRICS_NO_ROUTE. */
void metrics_http_routes(size_t n, const char *const *methods, const char *const *patterns);
/* One request answered: its route index (or METRICS_NO_ROUTE), the status
 * sent, and its time from the first byte to completion. */
void metrics_http(size_t route, int status, int64_t us);

/* One store query (a call through struct store_ops) took us microseconds. */
void metrics_store_query(int64_t us);

/* The engines' state at scrape time; a negative value leaves its family out
 * (the engine is not running in this process). */
struct metrics_gauges {
    long long sessions_running; /* live browsers of sessions (sessmgr) */
    long long pool_size;        /* the pools' configured sizes, summed */
    long long pool_available;   /* warm browsers waiting in pools */
    long long pool_acquired;    /* pool browsers leased to sessions */
    long long pool_waiters;     /* acquire calls queued on pools */
    long long spares_ready;     /* prelaunched spares ready to hand out */
    long long egress_in_kernel; /* 1: egress tunnels spliced in the kernel, 0: in user space */
    /* With spares_ready: spare launches begun, creates that waited for a
     * spare being launched, and of those the ones it served (issue 39.2). */
    long long spares_launched, spares_waited, spares_waited_served;
};

/* Appends the text exposition of every family to out: 0, or -E2BIG when out
 * reached its maximum (out then holds a truncated text, to be discarded). */
int metrics_render(struct buf *out, const struct metrics_gauges *g)
    __attribute__((warn_unused_result));

#endif
