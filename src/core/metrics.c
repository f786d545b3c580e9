/* The process's counters and histograms, and their text exposition: see
 * metrics.h. Slots are relaxed atomics: a counter needs no order with any
 * other memory, and a scrape is a snapshot of approximately one instant. */
#include "core/metrics.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#include "core/limits.h"
#include "core/xalloc.h"

/* Bucket bounds in microseconds (Prometheus's "le", in seconds, rendered
 * from them); the +Inf bucket is the histogram's count. */
static const int64_t http_bounds[] = {1000,    2500,    5000,     10000,   25000,
                                      50000,   100000,  250000,   500000,  1000000,
                                      2500000, 5000000, 10000000, 30000000};
static const int64_t create_bounds[] = {50000,   100000,  250000,   500000,   1000000,
                                        2500000, 5000000, 10000000, 30000000, 60000000};
static const int64_t store_bounds[] = {100,   250,   500,   1000,   2500,   5000,
                                       10000, 25000, 50000, 100000, 250000, 1000000};
#define HIST_MAX_BOUNDS 14
#define NBOUNDS(a)      (sizeof(a) / sizeof((a)[0]))

struct hist {
    _Atomic uint64_t le[HIST_MAX_BOUNDS]; /* observations <= bound i (not cumulative) */
    _Atomic uint64_t count;
    _Atomic uint64_t sum_us;
};

static void hist_observe(struct hist *h, const int64_t *bounds, size_t nb, int64_t us)
{
    if (us < 0)
        us = 0;
    for (size_t i = 0; i < nb; i++)
        if (us <= bounds[i]) {
            atomic_fetch_add_explicit(&h->le[i], 1, memory_order_relaxed);
            break;
        }
    atomic_fetch_add_explicit(&h->sum_us, (uint64_t)us, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
}

static const char *const counter_names[METRICS_NCOUNTERS] = {
    [METRICS_RELAY_BYTES] = "browserd_relay_bytes_total",
    [METRICS_EGRESS_BYTES] = "browserd_egress_bytes_total",
    [METRICS_OOM_KILLS] = "browserd_oom_kills_total",
    [METRICS_ORPHANS_REAPED] = "browserd_orphans_reaped_total",
    [METRICS_KERNEL_TUNNELS] = "browserd_egress_kernel_tunnels_total",
};
static const char *const counter_help[METRICS_NCOUNTERS] = {
    [METRICS_RELAY_BYTES] = "Bytes the CDP and BiDi relay moved between clients and browsers.",
    [METRICS_EGRESS_BYTES] = "Bytes the egress proxy moved between browsers and the network.",
    [METRICS_OOM_KILLS] = "Processes of sessions killed by the kernel's out-of-memory killer.",
    [METRICS_ORPHANS_REAPED] =
        ("Sessions left by a server that died (this node's previous run or another node), "
         "ended by recovery."),
    [METRICS_KERNEL_TUNNELS] = "Egress tunnels spliced in the kernel (sockmap) rather than "
                               "relayed in user space.",
};
static _Atomic uint64_t counters[METRICS_NCOUNTERS];

static const char *const path_names[METRICS_NCREATE_PATHS] = {
    [METRICS_CREATE_SPARE] = "spare",
    [METRICS_CREATE_POOL] = "pool",
    [METRICS_CREATE_COLD] = "cold",
};
static _Atomic uint64_t creates[METRICS_NCREATE_PATHS][2]; /* [path][ok] */
static struct hist create_hist[METRICS_NCREATE_PATHS];
static _Atomic long long creating;

static struct hist store_hist;

/* A route's requests: by status class (1xx..5xx) and their latency. */
struct route_slot {
    _Atomic uint64_t by_class[5];
    struct hist h;
};
struct routes {
    size_t n; /* slots[n] counts METRICS_NO_ROUTE */
    const char *const *methods, *const *patterns;
    struct route_slot *slots;
};
static _Atomic(struct routes *) routes;

void metrics_add(enum metrics_counter c, uint64_t n)
{
    if ((unsigned)c < METRICS_NCOUNTERS)
        atomic_fetch_add_explicit(&counters[c], n, memory_order_relaxed);
}

void metrics_creating(int delta)
{
    atomic_fetch_add_explicit(&creating, delta, memory_order_relaxed);
}

void metrics_create(enum metrics_create_path path, int ok, int64_t us)
{
    if ((unsigned)path >= METRICS_NCREATE_PATHS)
        return;
    atomic_fetch_add_explicit(&creates[path][ok ? 1 : 0], 1, memory_order_relaxed);
    hist_observe(&create_hist[path], create_bounds, NBOUNDS(create_bounds), us);
}

void metrics_http_routes(size_t n, const char *const *methods, const char *const *patterns)
{
    if (atomic_load_explicit(&routes, memory_order_acquire))
        return;
    if (n > LIM_METRICS_ROUTES)
        n = LIM_METRICS_ROUTES;
    struct routes *r = xcalloc(1, sizeof *r);
    r->n = n;
    r->methods = methods;
    r->patterns = patterns;
    r->slots = xcalloc(n + 1, sizeof *r->slots);
    struct routes *none = NULL;
    /* Kept for the process's life: a scrape may read it at any time. */
    if (!atomic_compare_exchange_strong(&routes, &none, r)) {
        xfree(r->slots);
        xfree(r);
    }
}

void metrics_http(size_t route, int status, int64_t us)
{
    struct routes *r = atomic_load_explicit(&routes, memory_order_acquire);
    if (!r)
        return;
    struct route_slot *s = &r->slots[route < r->n ? route : r->n];
    int cls = status / 100;
    if (cls >= 1 && cls <= 5)
        atomic_fetch_add_explicit(&s->by_class[cls - 1], 1, memory_order_relaxed);
    hist_observe(&s->h, http_bounds, NBOUNDS(http_bounds), us);
}

void metrics_store_query(int64_t us)
{
    hist_observe(&store_hist, store_bounds, NBOUNDS(store_bounds), us);
}

/* ---- the text exposition ---- */

static int put(struct buf *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int put(struct buf *out, const char *fmt, ...)
{
    char line[LIM_METRICS_LINE_BYTES];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line)
        return -E2BIG;
    return buf_append(out, line, (size_t)n);
}

static int head(struct buf *out, const char *name, const char *type, const char *help)
{
    return put(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static uint64_t ld(_Atomic uint64_t *a)
{
    return atomic_load_explicit(a, memory_order_relaxed);
}

/* One histogram's series; labels is "" or `name="value",...` without the
 * braces. */
static int hist_put(struct buf *out, const char *name, const char *labels, struct hist *h,
                    const int64_t *bounds, size_t nb)
{
    const char *sep = labels[0] ? "," : "";
    uint64_t cum = 0;
    int rc = 0;
    for (size_t i = 0; i < nb && !rc; i++) {
        cum += ld(&h->le[i]);
        rc = put(out, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, (double)bounds[i] / 1e6,
                 (unsigned long long)cum);
    }
    uint64_t count = ld(&h->count);
    /* The count is read last: it is never below the buckets' sum. */
    if (count < cum)
        count = cum;
    if (!rc)
        rc = put(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep,
                 (unsigned long long)count);
    if (!rc)
        rc = put(out, "%s_sum%s%s%s %.6f\n", name, labels[0] ? "{" : "", labels,
                 labels[0] ? "}" : "", (double)ld(&h->sum_us) / 1e6);
    if (!rc)
        rc = put(out, "%s_count%s%s%s %llu\n", name, labels[0] ? "{" : "", labels,
                 labels[0] ? "}" : "", (unsigned long long)count);
    return rc;
}

static int render_gauges(struct buf *out, const struct metrics_gauges *g)
{
    int rc = head(out, "browserd_sessions", "gauge",
                  "Sessions of this server by state: running (a live browser), starting (a "
                  "create in progress).");
    if (!rc && g->sessions_running >= 0)
        rc = put(out, "browserd_sessions{state=\"running\"} %lld\n", g->sessions_running);
    if (!rc)
        rc = put(out, "browserd_sessions{state=\"starting\"} %lld\n",
                 atomic_load_explicit(&creating, memory_order_relaxed));
    if (!rc && g->pool_size >= 0) {
        rc = head(out, "browserd_pool_size", "gauge",
                  "Browsers the pools of this server are configured to keep, summed over pools.");
        if (!rc)
            rc = put(out, "browserd_pool_size %lld\n", g->pool_size);
        if (!rc)
            rc = head(out, "browserd_pool_browsers", "gauge",
                      "Pool browsers by state, summed over pools: available (warm, waiting) "
                      "or acquired (leased to a session).");
        if (!rc)
            rc = put(out,
                     "browserd_pool_browsers{state=\"available\"} %lld\n"
                     "browserd_pool_browsers{state=\"acquired\"} %lld\n",
                     g->pool_available, g->pool_acquired);
        if (!rc)
            rc = head(out, "browserd_pool_waiters", "gauge",
                      "Acquire calls waiting for a pool browser, summed over pools.");
        if (!rc)
            rc = put(out, "browserd_pool_waiters %lld\n", g->pool_waiters);
    }
    if (!rc && g->spares_ready >= 0) {
        rc = head(out, "browserd_spares_ready", "gauge",
                  "Prelaunched spare browsers ready to hand to a create.");
        if (!rc)
            rc = put(out, "browserd_spares_ready %lld\n", g->spares_ready);
        if (!rc)
            rc = head(out, "browserd_spare_launches_total", "counter",
                      "Spare browsers the server began to launch.");
        if (!rc)
            rc = put(out, "browserd_spare_launches_total %lld\n", g->spares_launched);
        if (!rc)
            rc = head(out, "browserd_spare_waits_total", "counter",
                      "Creates that waited for a spare being launched, by outcome: served by "
                      "it, or launched cold after the wait.");
        if (!rc)
            rc = put(out,
                     "browserd_spare_waits_total{outcome=\"served\"} %lld\n"
                     "browserd_spare_waits_total{outcome=\"cold\"} %lld\n",
                     g->spares_waited_served, g->spares_waited - g->spares_waited_served);
    }
    if (!rc && g->egress_in_kernel >= 0) {
        rc = head(out, "browserd_egress_in_kernel", "gauge",
                  "1 when the egress proxy splices CONNECT tunnels in the kernel (sockmap), 0 "
                  "when it relays them in user space.");
        if (!rc)
            rc = put(out, "browserd_egress_in_kernel %lld\n", g->egress_in_kernel);
    }
    return rc;
}

static int render_creates(struct buf *out)
{
    int rc = head(out, "browserd_session_creates_total", "counter",
                  "Session creates by the way they got a browser (spare, pool, cold) and outcome.");
    for (int p = 0; p < METRICS_NCREATE_PATHS && !rc; p++)
        for (int ok = 1; ok >= 0 && !rc; ok--)
            rc = put(out, "browserd_session_creates_total{path=\"%s\",outcome=\"%s\"} %llu\n",
                     path_names[p], ok ? "ok" : "error", (unsigned long long)ld(&creates[p][ok]));
    if (!rc)
        rc = head(out, "browserd_session_create_duration_seconds", "histogram",
                  "Time of a session create, by the way it got a browser.");
    for (int p = 0; p < METRICS_NCREATE_PATHS && !rc; p++) {
        char labels[32];
        snprintf(labels, sizeof labels, "path=\"%s\"", path_names[p]);
        rc = hist_put(out, "browserd_session_create_duration_seconds", labels, &create_hist[p],
                      create_bounds, NBOUNDS(create_bounds));
    }
    return rc;
}

static int render_http(struct buf *out)
{
    static const char *const classes[5] = {"1xx", "2xx", "3xx", "4xx", "5xx"};
    struct routes *r = atomic_load_explicit(&routes, memory_order_acquire);
    int rc = head(out, "browserd_http_requests_total", "counter",
                  "HTTP requests answered, by route pattern (unmatched: none) and status class.");
    for (size_t i = 0; r && i <= r->n && !rc; i++)
        for (int c = 0; c < 5 && !rc; c++) {
            uint64_t v = ld(&r->slots[i].by_class[c]);
            if (v)
                rc = put(
                    out,
                    "browserd_http_requests_total{method=\"%s\",route=\"%s\",code=\"%s\"} %llu\n",
                    i < r->n ? r->methods[i] : "other", i < r->n ? r->patterns[i] : "unmatched",
                    classes[c], (unsigned long long)v);
        }
    if (!rc)
        rc = head(out, "browserd_http_request_duration_seconds", "histogram",
                  "Time of an HTTP request from its first byte to its completion, by route "
                  "pattern.");
    for (size_t i = 0; r && i <= r->n && !rc; i++) {
        if (!ld(&r->slots[i].h.count))
            continue;
        char labels[LIM_METRICS_LINE_BYTES / 2];
        if (snprintf(labels, sizeof labels, "method=\"%s\",route=\"%s\"",
                     i < r->n ? r->methods[i] : "other",
                     i < r->n ? r->patterns[i] : "unmatched") >= (int)sizeof labels)
            return -E2BIG;
        rc = hist_put(out, "browserd_http_request_duration_seconds", labels, &r->slots[i].h,
                      http_bounds, NBOUNDS(http_bounds));
    }
    return rc;
}

int metrics_render(struct buf *out, const struct metrics_gauges *g)
{
    int rc = render_gauges(out, g);
    if (!rc)
        rc = render_creates(out);
    for (int c = 0; c < METRICS_NCOUNTERS && !rc; c++) {
        rc = head(out, counter_names[c], "counter", counter_help[c]);
        if (!rc)
            rc = put(out, "%s %llu\n", counter_names[c], (unsigned long long)ld(&counters[c]));
    }
    if (!rc)
        rc = render_http(out);
    if (!rc)
        rc = head(out, "browserd_store_query_duration_seconds", "histogram",
                  "Time of a query to the store (SQLite or PostgreSQL).");
    if (!rc)
        rc = hist_put(out, "browserd_store_query_duration_seconds", "", &store_hist, store_bounds,
                      NBOUNDS(store_bounds));
    return rc;
}
