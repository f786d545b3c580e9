/* Unit tests for core/metrics: the Prometheus text exposition 0.0.4 of the
 * counters and histograms (issue 37 item 2). Each case names the rule it
 * checks. The module's state is the process's: cases only add to it and
 * compare a scrape with the one before. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/limits.h"
#include "core/metrics.h"

#define NCASES(a) (sizeof(a) / sizeof((a)[0]))

static const char *const methods[] = {"GET", "POST", "DELETE"};
static const char *const patterns[] = {"/browsers", "/browsers", "/browsers/{id}"};

static char *scrape(const struct metrics_gauges *g)
{
    static const struct metrics_gauges none = {-1, -1, 0, 0, 0, -1, -1, 0, 0, 0};
    struct buf b;
    buf_init(&b, LIM_METRICS_TEXT_BYTES);
    assert_int_equal(metrics_render(&b, g ? g : &none), 0);
    return b.p;
}

/* The value of the series line that starts with series (name and labels
 * exactly), or -1 when the text has no such line. */
static double value(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, series, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return -1;
}

static void setup_routes(void)
{
    metrics_http_routes(NCASES(patterns), methods, patterns);
}

/* ---- counters ---------------------------------------------------------- */

struct counter_case {
    const char *name;
    enum metrics_counter c;
    uint64_t add;
    const char *series;
};

static const struct counter_case counter_cases[] = {
    {"counters end in _total: relay bytes", METRICS_RELAY_BYTES, 1000,
     "browserd_relay_bytes_total"},
    {"counters end in _total: egress bytes", METRICS_EGRESS_BYTES, 7,
     "browserd_egress_bytes_total"},
    {"counters end in _total: OOM kills", METRICS_OOM_KILLS, 2, "browserd_oom_kills_total"},
    {"counters end in _total: orphans reaped", METRICS_ORPHANS_REAPED, 3,
     "browserd_orphans_reaped_total"},
};

static void test_counters(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES(counter_cases); i++) {
        const struct counter_case *k = &counter_cases[i];
        char *before = scrape(NULL);
        metrics_add(k->c, k->add);
        char *after = scrape(NULL);
        double d = value(after, k->series) - value(before, k->series);
        if (d != (double)k->add)
            fail_msg("%s: moved by %g, not %llu", k->name, d, (unsigned long long)k->add);
        char type[160];
        snprintf(type, sizeof type, "# TYPE %s counter\n", k->series);
        if (!strstr(after, type))
            fail_msg("%s: no TYPE line", k->name);
        free(before);
        free(after);
    }
}

/* ---- histograms: an observation lands in every bucket from its own up --- */

struct create_case {
    const char *name;
    enum metrics_create_path path;
    int ok;
    int64_t us;
    const char *label;    /* path="..." */
    const char *in_le;    /* the first bucket that holds it */
    const char *below_le; /* the bucket just below, which does not (or NULL) */
};

static const struct create_case create_cases[] = {
    {"a 0.3 s cold create lands in le=0.5, not le=0.25", METRICS_CREATE_COLD, 1, 300000, "cold",
     "0.5", "0.25"},
    {"a 50 ms spare create lands in le=0.05 (a bound is inclusive)", METRICS_CREATE_SPARE, 1, 50000,
     "spare", "0.05", NULL},
    {"a failed pool create counts as outcome error", METRICS_CREATE_POOL, 0, 2000000, "pool", "2.5",
     "1"},
    {"a create past the last bound lands in +Inf only", METRICS_CREATE_COLD, 1, 100000000, "cold",
     "+Inf", "60"},
};

static void test_create_histogram(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES(create_cases); i++) {
        const struct create_case *k = &create_cases[i];
        char *before = scrape(NULL);
        metrics_create(k->path, k->ok, k->us);
        char *after = scrape(NULL);
        char s[256];
        snprintf(s, sizeof s, "browserd_session_creates_total{path=\"%s\",outcome=\"%s\"}",
                 k->label, k->ok ? "ok" : "error");
        if (value(after, s) - value(before, s) != 1)
            fail_msg("%s: %s did not move by 1", k->name, s);
        snprintf(s, sizeof s,
                 "browserd_session_create_duration_seconds_bucket{path=\"%s\",le=\"%s\"}", k->label,
                 k->in_le);
        if (value(after, s) - value(before, s) != 1)
            fail_msg("%s: %s did not move by 1", k->name, s);
        snprintf(s, sizeof s,
                 "browserd_session_create_duration_seconds_bucket{path=\"%s\",le=\"+Inf\"}",
                 k->label);
        if (value(after, s) - value(before, s) != 1)
            fail_msg("%s: +Inf did not move by 1", k->name);
        if (k->below_le) {
            snprintf(s, sizeof s,
                     "browserd_session_create_duration_seconds_bucket{path=\"%s\",le=\"%s\"}",
                     k->label, k->below_le);
            if (value(after, s) != value(before, s))
                fail_msg("%s: %s moved", k->name, s);
        }
        free(before);
        free(after);
    }
}

/* ---- HTTP: by route pattern and status class, never by path ---------- */

struct http_case {
    const char *name;
    size_t route;
    int status;
    const char *series; /* browserd_http_requests_total{...} */
};

static const struct http_case http_cases[] = {
    {"a 200 of route 0 counts as code 2xx of GET /browsers", 0, 200,
     "browserd_http_requests_total{method=\"GET\",route=\"/browsers\",code=\"2xx\"}"},
    {"a 429 of route 1 counts as code 4xx of POST /browsers", 1, 429,
     "browserd_http_requests_total{method=\"POST\",route=\"/browsers\",code=\"4xx\"}"},
    {"a route's label is its pattern, not the path", 2, 503,
     "browserd_http_requests_total{method=\"DELETE\",route=\"/browsers/{id}\",code=\"5xx\"}"},
    {"no route: counted as route unmatched, method other (the client's method is not a label)",
     METRICS_NO_ROUTE, 404,
     "browserd_http_requests_total{method=\"other\",route=\"unmatched\",code=\"4xx\"}"},
    {"an index past the table counts as unmatched", 99, 405,
     "browserd_http_requests_total{method=\"other\",route=\"unmatched\",code=\"4xx\"}"},
};

static void test_http(void **state)
{
    (void)state;
    setup_routes();
    for (size_t i = 0; i < NCASES(http_cases); i++) {
        const struct http_case *k = &http_cases[i];
        char *before = scrape(NULL);
        metrics_http(k->route, k->status, 1500);
        char *after = scrape(NULL);
        double b = value(before, k->series);
        double d = value(after, k->series) - (b < 0 ? 0 : b);
        if (d != 1)
            fail_msg("%s: %s moved by %g", k->name, k->series, d);
        free(before);
        free(after);
    }
    /* A second table is ignored: the labels stay those of the first. */
    static const char *const other[] = {"/other"};
    metrics_http_routes(1, methods, other);
    metrics_http(0, 200, 10);
    char *t = scrape(NULL);
    assert_null(strstr(t, "route=\"/other\""));
    free(t);
}

/* ---- gauges: passed in, left out when negative ------------------------- */

static void test_gauges(void **state)
{
    (void)state;
    struct metrics_gauges g = {3, 4, 1, 2, 5, 6, 1, 0, 0, 0};
    char *t = scrape(&g);
    assert_true(value(t, "browserd_sessions{state=\"running\"}") == 3);
    assert_true(value(t, "browserd_pool_size") == 4);
    assert_true(value(t, "browserd_pool_browsers{state=\"available\"}") == 1);
    assert_true(value(t, "browserd_pool_browsers{state=\"acquired\"}") == 2);
    assert_true(value(t, "browserd_pool_waiters") == 5);
    assert_true(value(t, "browserd_spares_ready") == 6);
    assert_true(value(t, "browserd_egress_in_kernel") == 1);
    free(t);
    metrics_creating(1);
    t = scrape(NULL);
    /* no engine: the family is left out, not shown as 0 */
    assert_null(strstr(t, "browserd_pool_size"));
    assert_null(strstr(t, "browserd_spares_ready"));
    assert_null(strstr(t, "browserd_egress_in_kernel"));
    assert_null(strstr(t, "browserd_sessions{state=\"running\"}"));
    assert_true(value(t, "browserd_sessions{state=\"starting\"}") >= 1);
    free(t);
    metrics_creating(-1);
}

/* ---- lock-free: updates from many threads all count ---------------------- */

#define THREADS 4
#define PER     20000

static void *hammer(void *arg)
{
    (void)arg;
    for (int i = 0; i < PER; i++) {
        metrics_add(METRICS_EGRESS_BYTES, 1);
        metrics_store_query(i % 3000);
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    char *before = scrape(NULL);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, hammer, NULL), 0);
    char *during = scrape(NULL); /* a scrape while they run: no lock to wait on */
    free(during);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    char *after = scrape(NULL);
    assert_true(value(after, "browserd_egress_bytes_total") -
                    value(before, "browserd_egress_bytes_total") ==
                THREADS * PER);
    assert_true(value(after, "browserd_store_query_duration_seconds_count") -
                    value(before, "browserd_store_query_duration_seconds_count") ==
                THREADS * PER);
    free(before);
    free(after);
}

/* ---- the cap: a buffer too small fails, it does not overflow ------------ */

static void test_cap(void **state)
{
    (void)state;
    static const struct metrics_gauges none = {-1, -1, 0, 0, 0, -1, -1, 0, 0, 0};
    struct buf b;
    buf_init(&b, 256);
    assert_int_not_equal(metrics_render(&b, &none), 0);
    assert_true(b.len <= 256);
    buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counters), cmocka_unit_test(test_create_histogram),
        cmocka_unit_test(test_http),     cmocka_unit_test(test_gauges),
        cmocka_unit_test(test_threads),  cmocka_unit_test(test_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
