/* Unit tests for runtime/pool: the pool engine driven by a fake launcher and
 * a clock advanced by hand, without Chromium, HTTP or the store.
 *
 * Rules checked (KERNEL_API.md and the interface document's browser pools;
 * docs/pools.md): a pool fills to its size at fill_rate_per_minute percent of
 * its size per minute, the first browser at once and none with rate 0;
 * acquire hands over an available browser and release with reuse makes it
 * available again after a clean, without reuse ends it and the filler
 * replaces it; waiters are served first come, first served and get nothing
 * at their deadline; flush ends idle browsers only; a smaller size ends idle
 * browsers first, acquired ones when they come back; delete ends every
 * browser and answers every waiter; the organization's
 * max_concurrent_browsers holds under concurrent acquires and resizes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "runtime/pool.h"
#include "runtime/sessmgr.h"

/* ---- a clock the test advances ---- */

static int64_t fake_ms = 1000000;

static int64_t fake_now(void)
{
    return __atomic_load_n(&fake_ms, __ATOMIC_SEQ_CST);
}

static void advance(int64_t ms)
{
    __atomic_add_fetch(&fake_ms, ms, __ATOMIC_SEQ_CST);
}

/* ---- the fake launcher: browsers are names in a set ---- */

#define FAKE_MAX 256

static struct fake {
    pthread_mutex_t mu;
    int next;
    char live[FAKE_MAX][POOL_SID_MAX];
    int leased[FAKE_MAX]; /* by a test thread, to catch a browser leased twice */
    int nlive;
    int launches, ends, cleans;
    int bad_ends;    /* ends of a browser that was not live */
    int clean_fails; /* clean answers an error while set */
    char last_reason[64];
    /* Called inside clean (no engine lock held), e.g. to delete the pool. */
    void (*during_clean)(void);
    /* Called inside launch (no engine lock held), once, then cleared. */
    void (*during_launch)(void);
} F = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int live_index(const char *sid)
{
    for (int i = 0; i < F.nlive; i++)
        if (strcmp(F.live[i], sid) == 0)
            return i;
    return -1;
}

static int fake_launch(void *ctx, const struct pool_view *pool, char *sid)
{
    (void)ctx;
    (void)pool;
    void (*hook)(void) = __atomic_exchange_n(&F.during_launch, NULL, __ATOMIC_SEQ_CST);
    if (hook)
        hook();
    pthread_mutex_lock(&F.mu);
    if (F.nlive == FAKE_MAX) {
        pthread_mutex_unlock(&F.mu);
        return E_LIMIT;
    }
    snprintf(sid, POOL_SID_MAX, "b%d", ++F.next);
    snprintf(F.live[F.nlive], POOL_SID_MAX, "%s", sid);
    F.leased[F.nlive++] = 0;
    F.launches++;
    pthread_mutex_unlock(&F.mu);
    return 0;
}

static void fake_end(void *ctx, const char *sid, const char *reason)
{
    (void)ctx;
    pthread_mutex_lock(&F.mu);
    int i = live_index(sid);
    if (i < 0) {
        F.bad_ends++;
    } else {
        F.nlive--;
        memcpy(F.live[i], F.live[F.nlive], POOL_SID_MAX);
        F.leased[i] = F.leased[F.nlive];
    }
    F.ends++;
    snprintf(F.last_reason, sizeof F.last_reason, "%s", reason);
    pthread_mutex_unlock(&F.mu);
}

static int fake_clean(void *ctx, const struct pool_view *pool, const char *sid)
{
    (void)ctx;
    (void)pool;
    (void)sid;
    if (F.during_clean)
        F.during_clean();
    pthread_mutex_lock(&F.mu);
    F.cleans++;
    int rc = F.clean_fails ? E_UNAVAIL : 0;
    pthread_mutex_unlock(&F.mu);
    return rc;
}

static const struct pool_launcher fake_launcher = {
    .launch = fake_launch, .end = fake_end, .clean = fake_clean};

static int fake_get(int *field)
{
    pthread_mutex_lock(&F.mu);
    int v = *field;
    pthread_mutex_unlock(&F.mu);
    return v;
}

/* The reason of the last end, copied under the fake's lock. */
static const char *last_reason(void)
{
    static char r[64];
    pthread_mutex_lock(&F.mu);
    snprintf(r, sizeof r, "%s", F.last_reason);
    pthread_mutex_unlock(&F.mu);
    return r;
}

static void fake_reset(void)
{
    pthread_mutex_lock(&F.mu);
    F.next = F.nlive = F.launches = F.ends = F.cleans = F.bad_ends = F.clean_fails = 0;
    F.last_reason[0] = '\0';
    F.during_clean = NULL;
    F.during_launch = NULL;
    pthread_mutex_unlock(&F.mu);
}

/* ---- engine and waiting helpers ---- */

static struct pool_engine *G;
static struct sessmgr *M;

static int setup(void **state)
{
    (void)state;
    fake_reset();
    struct err e;
    err_init(&e);
    if (sessmgr_start(NULL, &M, &e) != 0)
        return -1;
    struct pool_engine_opts o = {
        .launcher = &fake_launcher, .sessions = M, .tick_ms = 2, .now_ms = fake_now};
    G = pool_engine_new(&o);
    return pool_engine_start(G);
}

static int teardown(void **state)
{
    (void)state;
    pool_engine_drain(G);
    pool_engine_free(G);
    sessmgr_stop(M);
    G = NULL;
    M = NULL;
    return 0;
}

static void add_pool(const char *id, long long size, double rate)
{
    json_t *cfg = json_pack("{s:I,s:f}", "size", (json_int_t)size, "fill_rate_per_minute", rate);
    assert_int_equal(pool_add(G, id, "org", "proj", id, 1, cfg), 0);
    json_decref(cfg);
}

static struct pool_view view(const char *id)
{
    struct pool_view v;
    assert_int_equal(pool_get(G, id, &v), 0);
    pool_view_clear(&v);
    return v;
}

static void pause_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
    nanosleep(&ts, NULL);
}

static void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits (up to 10 s of real time) for pool id to hold `available`
 * available and `total` browsers in all (-1: any); fails the test otherwise. */
static void wait_counts(const char *id, int available, int total)
{
    for (int i = 0; i < 10000; i++) {
        struct pool_view v = view(id);
        if ((available < 0 || v.available == available) &&
            (total < 0 || v.warming + v.available + v.acquired == total))
            return;
        pause_ms(1);
    }
    struct pool_view v = view(id);
    fail_msg("pool %s: %d available, %d warming, %d acquired; wanted %d available, %d in all", id,
             v.available, v.warming, v.acquired, available, total);
}

/* Lets the filler make n more passes: long enough to have acted if it
 * were going to. */
static void let_filler_run(int n)
{
    uint64_t t0 = pool_engine_ticks(G);
    for (int i = 0; i < 10000 && pool_engine_ticks(G) < t0 + (uint64_t)n; i++)
        pause_ms(1);
}

/* Fills pool id to n browsers, advancing the clock a second at a time. */
static void fill(const char *id, int n)
{
    for (int i = 0; i < 10000; i++) {
        struct pool_view v = view(id);
        if (v.available + v.acquired == n && v.warming == 0)
            return;
        advance(1000);
        pause_ms(1);
    }
    fail_msg("pool %s did not fill to %d", id, n);
}

static void acquire_now(const char *id, char *sid)
{
    struct pool_waiter *w = NULL;
    assert_int_equal(pool_acquire(G, id, 0, NULL, NULL, sid, &w), 0);
    assert_null(w);
    assert_true(sid[0]);
}

/* A waiting acquire as the HTTP layer holds one. */
struct client {
    struct pool_waiter *w;
    int woken; /* atomic */
    int gone;  /* atomic */
};

static void client_wake(void *ctx)
{
    struct client *c = ctx;
    __atomic_add_fetch(&c->woken, 1, __ATOMIC_SEQ_CST);
}

static int client_gone(void *ctx)
{
    struct client *c = ctx;
    return __atomic_load_n(&c->gone, __ATOMIC_SEQ_CST);
}

static const struct pool_waiter_ops client_ops = {.wake = client_wake, .gone = client_gone};

static void wait_queued(const char *id, struct client *c, int64_t wait_ms)
{
    char sid[POOL_SID_MAX];
    assert_int_equal(pool_acquire(G, id, wait_ms, &client_ops, c, sid, &c->w), 0);
    assert_non_null(c->w);
    assert_string_equal(sid, "");
}

static void wait_woken(struct client *c)
{
    for (int i = 0; i < 10000 && !__atomic_load_n(&c->woken, __ATOMIC_SEQ_CST); i++)
        pause_ms(1);
    assert_int_equal(__atomic_load_n(&c->woken, __ATOMIC_SEQ_CST), 1);
}

/* ---- the filler ---- */

/* "fill_rate_per_minute: percentage of the pool size to fill per minute":
 * 100% of 3 is one browser every 20 s; the first starts at once; the pool
 * stops at its size. */
static void fills_to_size_at_its_fill_rate(void **state)
{
    (void)state;
    add_pool("p", 3, 100);
    wait_counts("p", 1, 1);
    advance(19000);
    let_filler_run(5);
    assert_int_equal(view("p").available, 1);
    advance(1001);
    wait_counts("p", 2, 2);
    advance(19000);
    let_filler_run(5);
    assert_int_equal(view("p").available, 2);
    advance(1001);
    wait_counts("p", 3, 3);
    advance(600000);
    let_filler_run(5);
    assert_int_equal(view("p").available, 3);
    assert_int_equal(fake_get(&F.launches), 3);
}

/* fill_rate_per_minute 0: the pool never refills (its first browser still
 * starts). */
static void rate_zero_never_refills(void **state)
{
    (void)state;
    add_pool("z", 2, 0);
    wait_counts("z", 1, 1);
    advance(3600 * 1000);
    let_filler_run(5);
    assert_int_equal(view("z").available, 1);
    assert_int_equal(fake_get(&F.launches), 1);
}

/* ---- leases ---- */

/* Acquire takes an available browser; release {reuse: true} cleans it and
 * makes it available at once; release {reuse: false} ends it and the filler
 * replaces it; only an acquired browser can be released. */
static void acquire_and_release_with_and_without_reuse(void **state)
{
    (void)state;
    add_pool("p", 2, 6000);
    fill("p", 2);
    char a[POOL_SID_MAX], b[POOL_SID_MAX];
    acquire_now("p", a);
    struct pool_view v = view("p");
    assert_int_equal(v.acquired, 1);
    assert_int_equal(v.available, 1);
    assert_int_equal(pool_release(G, "p", a, 1), 0);
    assert_int_equal(fake_get(&F.cleans), 1);
    assert_int_equal(view("p").available, 2);
    assert_int_equal(pool_release(G, "p", a, 1), E_NOTFOUND); /* not acquired any more */
    assert_int_equal(pool_release(G, "p", "nosuch", 1), E_NOTFOUND);

    acquire_now("p", b);
    assert_int_equal(pool_release(G, "p", b, 0), 0);
    assert_int_equal(fake_get(&F.ends), 1);
    assert_string_equal(last_reason(), "released");
    assert_int_equal(view("p").available + view("p").warming, 1);
    fill("p", 2);
    assert_int_equal(fake_get(&F.launches), 3);
    assert_int_equal(fake_get(&F.bad_ends), 0);
}

/* A browser that cannot be cleaned is ended, not handed to the next lease;
 * the filler replaces it. */
static void a_failed_clean_ends_the_browser(void **state)
{
    (void)state;
    add_pool("p", 1, 6000);
    fill("p", 1);
    char a[POOL_SID_MAX];
    acquire_now("p", a);
    pthread_mutex_lock(&F.mu);
    F.clean_fails = 1;
    pthread_mutex_unlock(&F.mu);
    assert_int_equal(pool_release(G, "p", a, 1), 0);
    assert_int_equal(fake_get(&F.ends), 1);
    assert_string_equal(last_reason(), "released (could not be cleaned)");
    pthread_mutex_lock(&F.mu);
    F.clean_fails = 0;
    pthread_mutex_unlock(&F.mu);
    fill("p", 1);
    assert_int_equal(fake_get(&F.launches), 2);
}

/* A lease that never reached its client comes back without a clean. */
static void put_back_returns_without_cleaning(void **state)
{
    (void)state;
    add_pool("p", 1, 0);
    wait_counts("p", 1, 1);
    char a[POOL_SID_MAX];
    acquire_now("p", a);
    pool_put_back(G, "p", a);
    assert_int_equal(view("p").available, 1);
    assert_int_equal(fake_get(&F.cleans), 0);
}

/* ---- waiters ---- */

/* Waiters are served first come, first served as browsers come back; an
 * acquire that may not wait gets nothing (204) at once. */
static void waiters_are_served_in_arrival_order(void **state)
{
    (void)state;
    add_pool("p", 1, 0);
    wait_counts("p", 1, 1);
    char held[POOL_SID_MAX], sid[POOL_SID_MAX];
    acquire_now("p", held);
    struct pool_waiter *none = NULL;
    assert_int_equal(pool_acquire(G, "p", 0, NULL, NULL, sid, &none), E_LIMIT);
    assert_null(none);
    struct client c[3] = {{0}};
    for (int i = 0; i < 3; i++)
        wait_queued("p", &c[i], 60000);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pool_release(G, "p", held, 1), 0);
        wait_woken(&c[i]);
        assert_int_equal(pool_waiter_state(c[i].w, held), POOL_WAIT_GRANTED);
        for (int j = i + 1; j < 3; j++)
            assert_int_equal(pool_waiter_state(c[j].w, NULL), POOL_WAIT_QUEUED);
        assert_int_equal(pool_waiter_finish(c[i].w, sid), POOL_WAIT_GRANTED);
        assert_string_equal(sid, held);
    }
    assert_int_equal(view("p").acquired, 1);
}

/* acquire_timeout_seconds: a waiter gets nothing when its deadline passes
 * (monotonic clock), even one queued behind a waiter that waits longer. */
static void a_deadline_fires(void **state)
{
    (void)state;
    add_pool("p", 1, 0);
    wait_counts("p", 1, 1);
    char held[POOL_SID_MAX];
    acquire_now("p", held);
    struct client longer = {0}, shorter = {0};
    wait_queued("p", &longer, 60000);
    wait_queued("p", &shorter, 5000);
    advance(4999);
    let_filler_run(5);
    assert_int_equal(pool_waiter_state(shorter.w, NULL), POOL_WAIT_QUEUED);
    advance(1);
    wait_woken(&shorter);
    assert_int_equal(pool_waiter_finish(shorter.w, NULL), POOL_WAIT_TIMEOUT);
    assert_int_equal(pool_waiter_state(longer.w, NULL), POOL_WAIT_QUEUED);
    advance(55000);
    wait_woken(&longer);
    assert_int_equal(pool_waiter_finish(longer.w, NULL), POOL_WAIT_TIMEOUT);
}

/* The default wait is the time the pool needs to fill at its rate: 100 /
 * fill_rate minutes; none when it does not refill. */
static void the_default_wait_is_the_time_to_fill(void **state)
{
    (void)state;
    json_t *c25 = json_pack("{s:i}", "fill_rate_per_minute", 25);
    json_t *c0 = json_pack("{s:i}", "fill_rate_per_minute", 0);
    json_t *cdef = json_object();
    assert_int_equal(pool_default_wait_ms(c25), 240000);
    assert_int_equal(pool_default_wait_ms(c0), 0);
    assert_int_equal(pool_default_wait_ms(cdef), 240000); /* default rate 25 */
    json_decref(c25);
    json_decref(c0);
    json_decref(cdef);
}

/* A waiter whose client left is dropped without blocking the one behind
 * it; one cancelled by its owner never receives a browser. */
static void departed_and_cancelled_waiters_get_nothing(void **state)
{
    (void)state;
    add_pool("p", 1, 0);
    wait_counts("p", 1, 1);
    char held[POOL_SID_MAX], sid[POOL_SID_MAX];
    acquire_now("p", held);
    struct client left = {0}, cancelled = {0}, last = {0};
    wait_queued("p", &left, 60000);
    wait_queued("p", &cancelled, 60000);
    wait_queued("p", &last, 60000);
    __atomic_store_n(&left.gone, 1, __ATOMIC_SEQ_CST);
    wait_woken(&left);
    assert_int_equal(pool_waiter_finish(left.w, NULL), POOL_WAIT_GONE);
    assert_int_equal(pool_waiter_finish(cancelled.w, NULL), POOL_WAIT_QUEUED);
    assert_int_equal(pool_release(G, "p", held, 1), 0);
    wait_woken(&last);
    assert_int_equal(pool_waiter_finish(last.w, sid), POOL_WAIT_GRANTED);
    assert_string_equal(sid, held);
    assert_int_equal(__atomic_load_n(&cancelled.woken, __ATOMIC_SEQ_CST), 0);
}

/* ---- flush, resize, delete ---- */

/* Flush ends idle browsers only; acquired ones stay; the filler refills. */
static void flush_replaces_idle_browsers(void **state)
{
    (void)state;
    add_pool("p", 3, 6000);
    fill("p", 3);
    char a[POOL_SID_MAX];
    acquire_now("p", a);
    assert_int_equal(pool_flush(G, "p"), 0);
    assert_int_equal(fake_get(&F.ends), 2);
    assert_string_equal(last_reason(), "pool flushed");
    assert_int_equal(view("p").acquired, 1);
    fill("p", 3);
    assert_int_equal(fake_get(&F.launches), 5);
    assert_int_equal(pool_release(G, "p", a, 1), 0); /* the lease survived the flush */
}

static void flush_p(void)
{
    assert_int_equal(pool_flush(G, "p"), 0);
}

/* Issue h13.1: a browser being launched when a flush comes loaded what the
 * flush replaces (a profile re-authenticated): it is ended "pool flushed"
 * when its launch returns, never handed out, and the filler replaces it. */
static void flush_ends_a_browser_being_launched(void **state)
{
    (void)state;
    F.during_launch = flush_p;
    add_pool("p", 1, 6000);
    fill("p", 1);
    assert_int_equal(fake_get(&F.launches), 2);
    assert_int_equal(fake_get(&F.ends), 1);
    assert_string_equal(last_reason(), "pool flushed");
    char a[POOL_SID_MAX];
    acquire_now("p", a);
    assert_string_equal(a, "b2"); /* the browser launched after the flush */
}

static void configure_size(const char *id, long long size, double rate, int discard)
{
    json_t *cfg = json_pack("{s:I,s:f}", "size", (json_int_t)size, "fill_rate_per_minute", rate);
    assert_int_equal(pool_configure(G, id, id, cfg, discard), 0);
    json_decref(cfg);
}

/* A smaller size ends idle browsers first; acquired ones are ended when
 * they come back to a pool that holds more than its size. */
static void resize_down_ends_idle_browsers_first(void **state)
{
    (void)state;
    add_pool("p", 4, 6000);
    fill("p", 4);
    char a[POOL_SID_MAX], b[POOL_SID_MAX];
    acquire_now("p", a);
    acquire_now("p", b);
    configure_size("p", 1, 6000, 0);
    struct pool_view v = view("p");
    assert_int_equal(v.available, 0);
    assert_int_equal(v.acquired, 2);
    assert_int_equal(fake_get(&F.ends), 2);
    assert_int_equal(pool_release(G, "p", a, 1), 0);
    assert_int_equal(fake_get(&F.ends), 3);
    assert_string_equal(last_reason(), "pool shrunk");
    assert_int_equal(pool_release(G, "p", b, 1), 0);
    assert_int_equal(view("p").available, 1);
    assert_int_equal(sessmgr_pool_capacity(M, "org"), 1);
}

/* A bigger size lets the filler serve a waiting acquire; discard_all_idle
 * rebuilds every idle browser at once, not at the fill rate. */
static void resize_up_serves_waiters_and_discard_rebuilds(void **state)
{
    (void)state;
    add_pool("p", 1, 6000);
    fill("p", 1);
    char a[POOL_SID_MAX], sid[POOL_SID_MAX];
    acquire_now("p", a);
    struct client c = {0};
    wait_queued("p", &c, 60000);
    configure_size("p", 2, 6000, 0);
    advance(1000);
    wait_woken(&c);
    assert_int_equal(pool_waiter_finish(c.w, sid), POOL_WAIT_GRANTED);
    assert_string_not_equal(sid, a);
    assert_int_equal(pool_release(G, "p", sid, 1), 0);
    assert_int_equal(pool_release(G, "p", a, 1), 0);
    configure_size("p", 2, 0, 1); /* rate 0: only the rebuild can start them */
    assert_int_equal(fake_get(&F.ends), 2);
    wait_counts("p", 2, 2);
    assert_string_equal(last_reason(), "pool updated");
}

/* Delete ends every browser, acquired ones included, and answers every
 * waiter; the pool is gone for every call after. */
static void delete_wakes_waiters_and_ends_browsers(void **state)
{
    (void)state;
    add_pool("p", 1, 0);
    wait_counts("p", 1, 1);
    char a[POOL_SID_MAX], sid[POOL_SID_MAX];
    acquire_now("p", a);
    struct client c[2] = {{0}};
    wait_queued("p", &c[0], 60000);
    wait_queued("p", &c[1], 60000);
    assert_int_equal(pool_delete(G, "p"), 0);
    for (int i = 0; i < 2; i++) {
        wait_woken(&c[i]);
        assert_int_equal(pool_waiter_finish(c[i].w, NULL), POOL_WAIT_DELETED);
    }
    assert_int_equal(fake_get(&F.nlive), 0);
    assert_string_equal(last_reason(), "pool deleted");
    struct pool_view v;
    struct pool_waiter *w;
    assert_int_equal(pool_get(G, "p", &v), E_NOTFOUND);
    assert_int_equal(pool_acquire(G, "p", 1000, &client_ops, &c[0], sid, &w), E_NOTFOUND);
    assert_int_equal(pool_release(G, "p", a, 1), E_NOTFOUND);
    assert_int_equal(sessmgr_pool_capacity(M, "org"), 0);
}

static void delete_pool_p(void)
{
    assert_int_equal(pool_delete(G, "p"), 0);
}

/* A browser being cleaned when its pool is deleted is ended once the clean
 * is over, not left running outside any pool. */
static void a_browser_released_while_its_pool_is_deleted_is_ended(void **state)
{
    (void)state;
    add_pool("p", 1, 0);
    wait_counts("p", 1, 1);
    char a[POOL_SID_MAX];
    acquire_now("p", a);
    F.during_clean = delete_pool_p;
    assert_int_equal(pool_release(G, "p", a, 1), 0);
    assert_int_equal(fake_get(&F.nlive), 0);
    assert_int_equal(fake_get(&F.bad_ends), 0);
}

/* A browser that ends on its own leaves the pool; the filler replaces it. */
static void a_browser_that_ends_on_its_own_is_replaced(void **state)
{
    (void)state;
    add_pool("p", 1, 6000);
    fill("p", 1);
    char a[POOL_SID_MAX];
    acquire_now("p", a);
    fake_end(NULL, a, "crashed");
    pool_browser_gone(G, "p", a);
    fill("p", 1);
    assert_int_equal(fake_get(&F.launches), 2);
}

/* The server stopping answers every waiter. */
static void drain_answers_waiters(void **state)
{
    (void)state;
    add_pool("p", 1, 0);
    wait_counts("p", 1, 1);
    char a[POOL_SID_MAX];
    acquire_now("p", a);
    struct client c = {0};
    wait_queued("p", &c, 60000);
    pool_engine_drain(G);
    wait_woken(&c);
    assert_int_equal(pool_waiter_finish(c.w, NULL), POOL_WAIT_STOPPED);
}

/* ---- capacity under concurrency ---- */

#define LIMIT    6
#define ROUNDS   400
#define NPOOLS   2
#define ACQUIRER 4

static int double_leases, refused_resizes;
static int stop_clock;

static void mark_leased(const char *sid, int on)
{
    pthread_mutex_lock(&F.mu);
    int i = live_index(sid);
    if (i >= 0) {
        if (on && F.leased[i])
            double_leases++;
        F.leased[i] = on;
    }
    pthread_mutex_unlock(&F.mu);
}

static int leases;

/* Leases ROUNDS browsers (or gives up after many empty tries), releasing
 * each with or without reuse. */
static void *acquirer(void *arg)
{
    unsigned seed = (unsigned)(intptr_t)arg;
    for (int i = 0, tries = 0; i < ROUNDS && tries < 100 * ROUNDS; tries++) {
        seed = seed * 1103515245u + 12345u;
        const char *id = (seed >> 16) % 2 ? "q1" : "q0";
        char sid[POOL_SID_MAX];
        struct pool_waiter *w = NULL;
        if (pool_acquire(G, id, 0, NULL, NULL, sid, &w) != 0) {
            pause_us(100);
            continue;
        }
        i++;
        __atomic_add_fetch(&leases, 1, __ATOMIC_SEQ_CST);
        mark_leased(sid, 1);
        sched_yield();
        mark_leased(sid, 0);
        if (pool_release(G, id, sid, (seed >> 20) % 2) != 0)
            __atomic_add_fetch(&double_leases, 1, __ATOMIC_SEQ_CST);
    }
    return NULL;
}

/* Each resizer owns one pool: capacity is checked (sessmgr) before the
 * engine applies the size, as the PATCH handler does. */
static void *resizer(void *arg)
{
    char id[16];
    snprintf(id, sizeof id, "q%d", (int)(intptr_t)arg);
    unsigned seed = 7u + (unsigned)(intptr_t)arg;
    for (int i = 0; i < ROUNDS; i++) {
        seed = seed * 1103515245u + 12345u;
        long long size = 1 + (seed >> 16) % 4;
        if (pool_capacity_set(G, "org", id, size, LIMIT, NULL, NULL) != 0) {
            __atomic_add_fetch(&refused_resizes, 1, __ATOMIC_SEQ_CST);
            continue;
        }
        json_t *cfg =
            json_pack("{s:I,s:i}", "size", (json_int_t)size, "fill_rate_per_minute", 100000);
        if (pool_configure(G, id, id, cfg, (seed >> 24) % 5 == 0) != 0)
            __atomic_add_fetch(&double_leases, 1, __ATOMIC_SEQ_CST);
        json_decref(cfg);
        pause_us(200);
    }
    return NULL;
}

/* Standalone sessions of the same org, reserved and given back. */
static void *creator(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        long long pools = 0;
        if (sessmgr_reserve(M, "org", LIMIT, &pools) == 0) {
            sched_yield();
            sessmgr_unreserve(M, "org");
        }
        pause_us(200);
    }
    return NULL;
}

static void *clock_ticker(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&stop_clock, __ATOMIC_SEQ_CST)) {
        advance(100);
        pause_ms(1);
    }
    return NULL;
}

/* limits.max_concurrent_browsers: pool sizes and standalone sessions never
 * pass it, and whatever the interleaving of acquires, releases and resizes,
 * no browser is leased twice, none is leaked or ended twice, and once the
 * filler settles each pool holds at most its size. */
static void capacity_holds_under_concurrent_acquires_and_resizes(void **state)
{
    (void)state;
    for (int i = 0; i < NPOOLS; i++) {
        char id[16];
        snprintf(id, sizeof id, "q%d", i);
        assert_int_equal(pool_capacity_set(G, "org", id, 2, LIMIT, NULL, NULL), 0);
        json_t *cfg = json_pack("{s:i,s:i}", "size", 2, "fill_rate_per_minute", 100000);
        assert_int_equal(pool_add(G, id, "org", "proj", id, 1, cfg), 0);
        json_decref(cfg);
    }
    pthread_t clk, t[ACQUIRER + NPOOLS + 2];
    assert_int_equal(pthread_create(&clk, NULL, clock_ticker, NULL), 0);
    int n = 0;
    for (int i = 0; i < ACQUIRER; i++)
        assert_int_equal(pthread_create(&t[n++], NULL, acquirer, (void *)(intptr_t)(i + 1)), 0);
    for (int i = 0; i < NPOOLS; i++)
        assert_int_equal(pthread_create(&t[n++], NULL, resizer, (void *)(intptr_t)i), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[n++], NULL, creator, NULL), 0);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    __atomic_store_n(&stop_clock, 1, __ATOMIC_SEQ_CST);
    pthread_join(clk, NULL);

    assert_int_equal(double_leases, 0);
    long long sizes = 0;
    int held = 0;
    for (int i = 0; i < NPOOLS; i++) {
        char id[16];
        snprintf(id, sizeof id, "q%d", i);
        struct pool_view v;
        assert_int_equal(pool_get(G, id, &v), 0);
        long long size = json_integer_value(json_object_get(v.config, "size"));
        pool_view_clear(&v);
        v = view(id);
        assert_int_equal(v.acquired, 0);
        assert_true(v.available <= size);
        fill(id, (int)size); /* settles: warming ones finish */
        v = view(id);
        sizes += size;
        held += v.available;
    }
    assert_true(sizes <= LIMIT);
    assert_int_equal(sessmgr_pool_capacity(M, "org"), sizes);
    assert_int_equal(fake_get(&F.nlive), held); /* nothing leaked */
    assert_int_equal(fake_get(&F.bad_ends), 0); /* nothing ended twice */
    assert_true(leases > ROUNDS);               /* the engine was exercised, not just refused */
    print_message("# %d leases, %d launches, %d ends, %d resizes refused at the limit\n", leases,
                  fake_get(&F.launches), fake_get(&F.ends), refused_resizes);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(fills_to_size_at_its_fill_rate),
        T(rate_zero_never_refills),
        T(acquire_and_release_with_and_without_reuse),
        T(a_failed_clean_ends_the_browser),
        T(put_back_returns_without_cleaning),
        T(waiters_are_served_in_arrival_order),
        T(a_deadline_fires),
        T(the_default_wait_is_the_time_to_fill),
        T(departed_and_cancelled_waiters_get_nothing),
        T(flush_replaces_idle_browsers),
        T(flush_ends_a_browser_being_launched),
        T(resize_down_ends_idle_browsers_first),
        T(resize_up_serves_waiters_and_discard_rebuilds),
        T(delete_wakes_waiters_and_ends_browsers),
        T(a_browser_released_while_its_pool_is_deleted_is_ended),
        T(a_browser_that_ends_on_its_own_is_replaced),
        T(drain_answers_waiters),
        T(capacity_holds_under_concurrent_acquires_and_resizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
