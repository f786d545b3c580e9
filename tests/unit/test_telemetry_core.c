/* Unit tests for telemetry's core (src/telemetry/telemetry.c) on a real
 * SQLite store in a temporary folder: capture only while a category is on,
 * excluded CDP methods counted in cdp_disconnect.telemetry_excluded, the
 * bounded ring with the store behind it, SSE resume without loss or
 * duplicates, persistence across a restart of the module. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/xalloc.h"
#include "telemetry/telemetry.h"

static char dir[64];
static struct store *st;

static json_t *cfg_with(const char *browser)
{
    char *s =
        xasprintf("{\"browser\":{\"control\":{\"enabled\":true,\"cdp\":{\"excluded_methods\":["
                  "\"Page.reload\"]}},"
                  "\"connection\":{\"enabled\":true},\"system\":{\"enabled\":false},"
                  "\"captcha\":{\"enabled\":false},\"console\":{\"enabled\":%s},"
                  "\"network\":{\"enabled\":false},\"page\":{\"enabled\":false},"
                  "\"interaction\":{\"enabled\":false},\"screenshot\":{\"enabled\":false},"
                  "\"platform\":{\"enabled\":true}},\"export\":{\"otlp\":{\"enabled\":false}}}",
                  browser);
    json_t *v = json_loads(s, 0, NULL);
    xfree(s);
    return v;
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/bd-telem-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    struct err e;
    err_init(&e);
    if (store_open_sqlite(dir, &st, &e) != 0)
        return -1;
    struct telemetry_opts o;
    telemetry_opts_defaults(&o);
    o.ring_events = 16; /* small: older events come from the store */
    return telemetry_start(st, &o, &e);
}

static int teardown(void **state)
{
    (void)state;
    telemetry_stop();
    store_close(st);
    char *cmd = xasprintf("rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    xfree(cmd);
    return 0;
}

static void noop_wake(void *ctx)
{
    (*(int *)ctx)++;
}

/* Reads every frame the subscriber has now; returns the seqs (count in *n). */
static size_t drain(struct telem_sub *u, uint64_t *seqs, size_t cap)
{
    char buf[4096];
    static char acc[1 << 20];
    size_t len = 0;
    long n;
    while ((n = telemetry_sub_read(u, buf, sizeof buf)) > 0) {
        memcpy(acc + len, buf, (size_t)n);
        len += (size_t)n;
    }
    acc[len] = '\0';
    size_t k = 0;
    for (char *p = acc; (p = strstr(p, "id: ")) && k < cap; p++) {
        seqs[k++] = strtoull(p + 4, NULL, 10);
    }
    return k;
}

static size_t count_events(const char *sid, const char *category)
{
    struct telem_query q;
    memset(&q, 0, sizeof q);
    if (category) {
        q.categories[0] = category;
        q.ncategories = 1;
    }
    struct page pg = {.limit = 100};
    struct telem_event_rec *rows = NULL;
    size_t n = 0;
    assert_int_equal(telemetry_flush(sid, 5000), 0);
    assert_int_equal(store_telem_events_list(st, sid, &q, &pg, &rows, &n), 0);
    for (size_t i = 0; i < n; i++)
        telem_event_rec_clear(&rows[i]);
    xfree(rows);
    return n;
}

/* Two client connections' identities. */
static int conn1, conn2;

static void test_categories_and_exclusions(void **state)
{
    (void)state;
    json_t *cfg = cfg_with("false");
    telemetry_session_open("sessA", "org", cfg, NULL, NULL);
    json_decref(cfg);
    telemetry_cdp_client("sessA", &conn1, 1, 0);
    /* "cdp_disconnect ... carrying telemetry_excluded, the number of ITS
     * commands left out": a second client's exclusions are not the first's. */
    telemetry_cdp_client("sessA", &conn2, 1, 0);
    telemetry_cdp_command("sessA", &conn2, "Page.reload", 10);
    telemetry_cdp_command("sessA", &conn1, "Page.navigate", 10); /* reported */
    telemetry_cdp_command("sessA", &conn1, "Page.reload", 10);   /* excluded: counted */
    telemetry_cdp_command("sessA", &conn1, "Page.reload", 10);   /* excluded: counted */
    telemetry_cdp_command("sessA", &conn1, "Runtime.evaluate",
                          10); /* not a BrowserCdpCommandMethod */
    telemetry_cdp_command("sessA", &conn1, NULL, 10);
    /* "only while the session's active configuration has the category on" */
    assert_int_equal(telemetry_emit("sessA", TELEM_CONSOLE, "console_message", NULL), 0);
    assert_true(telemetry_emit("sessA", TELEM_PLATFORM, "viewport_resize", NULL) > 0);
    telemetry_cdp_client("sessA", &conn1, 0, 0);
    assert_int_equal(count_events("sessA", "control"), 1);
    assert_int_equal(count_events("sessA", "console"), 0);
    assert_int_equal(count_events("sessA", "connection"), 3);

    struct telem_query q;
    memset(&q, 0, sizeof q);
    q.categories[0] = "connection";
    q.ncategories = 1;
    q.desc = 1;
    struct page pg = {.limit = 1};
    struct telem_event_rec *rows = NULL;
    size_t n = 0;
    assert_int_equal(store_telem_events_list(st, "sessA", &q, &pg, &rows, &n), 0);
    assert_int_equal(n, 1);
    json_t *ev = json_loads(rows[0].text, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(ev, "type")), "cdp_disconnect");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(ev, "data"), "telemetry_excluded")), 2);
    /* every client message relayed while attached: 5 */
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(ev, "data"), "message_count")), 5);
    json_decref(ev);
    telem_event_rec_clear(&rows[0]);
    xfree(rows);

    /* Turning console on starts its events; turning it off stops them. */
    cfg = cfg_with("true");
    telemetry_session_configure("sessA", cfg);
    json_decref(cfg);
    assert_true(telemetry_emit("sessA", TELEM_CONSOLE, "console_message", NULL) > 0);
    telemetry_session_configure("sessA", NULL);
    assert_int_equal(telemetry_emit("sessA", TELEM_CONSOLE, "console_message", NULL), 0);
    assert_int_equal(count_events("sessA", "console"), 1);
    telemetry_cdp_client("sessA", &conn2, 0, 0);
    telemetry_session_close("sessA");
}

static void test_sse_resume(void **state)
{
    (void)state;
    json_t *cfg = cfg_with("true");
    telemetry_session_open("sessB", "org", cfg, NULL, NULL);
    json_decref(cfg);
    int wakes = 0;
    uint64_t seqs[512];
    struct telem_sub *u = telemetry_sub_new("sessB", 0, (1u << TELEM_NCATS) - 1, noop_wake, &wakes);
    for (int i = 0; i < 10; i++)
        telemetry_emit("sessB", TELEM_CONSOLE, "console_message", NULL);
    assert_true(wakes >= 10);
    size_t n = drain(u, seqs, 512);
    assert_int_equal(n, 10);
    uint64_t last = seqs[n - 1];
    telemetry_sub_free(u);
    /* 100 more while nobody listens: more than the ring (16) holds. */
    for (int i = 0; i < 100; i++)
        telemetry_emit("sessB", TELEM_CONSOLE, "console_message", NULL);
    u = telemetry_sub_new("sessB", last, (1u << TELEM_NCATS) - 1, noop_wake, &wakes);
    size_t got = 0;
    for (int round = 0; round < 20 && got < 100; round++)
        got += drain(u, seqs + got, 512 - got);
    assert_int_equal(got, 100);
    for (size_t i = 0; i < got; i++)
        if (seqs[i] != last + 1 + i)
            fail_msg("Last-Event-ID resume loses nothing and repeats nothing: frame %zu is %llu", i,
                     (unsigned long long)seqs[i]);
    /* Nothing more: 0 (the stream parks), and the session's end ends it. */
    char buf[64];
    assert_int_equal(telemetry_sub_read(u, buf, sizeof buf), 0);
    telemetry_session_close("sessB");
    assert_int_equal(telemetry_sub_read(u, buf, sizeof buf), -1);
    telemetry_sub_free(u);

    /* After the end: replay from the store, filtered by category. */
    u = telemetry_sub_new("sessB", 0, 1u << TELEM_CONSOLE, noop_wake, &wakes);
    got = 0;
    for (int round = 0; round < 20; round++)
        got += drain(u, seqs + got, 512 - got);
    assert_int_equal(got, 110);
    telemetry_sub_free(u);
    u = telemetry_sub_new("sessB", 0, 1u << TELEM_PLATFORM, noop_wake, &wakes);
    assert_int_equal(drain(u, seqs, 512), 0);
    assert_int_equal(telemetry_sub_read(u, buf, sizeof buf), -1);
    telemetry_sub_free(u);
}

static void test_seq_continues_after_reopen(void **state)
{
    (void)state;
    json_t *cfg = cfg_with("true");
    telemetry_session_open("sessC", "org", cfg, NULL, NULL);
    uint64_t a = telemetry_emit("sessC", TELEM_CONSOLE, "x", NULL);
    telemetry_session_close("sessC");
    /* A server restart reopens the session: numbering continues. */
    telemetry_session_open("sessC", "org", cfg, NULL, NULL);
    uint64_t b = telemetry_emit("sessC", TELEM_CONSOLE, "x", NULL);
    json_decref(cfg);
    assert_int_equal(b, a + 1);
    telemetry_session_close("sessC");
    assert_int_equal(count_events("sessC", NULL), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_categories_and_exclusions),
        cmocka_unit_test(test_sse_resume),
        cmocka_unit_test(test_seq_continues_after_reopen),
    };
    return cmocka_run_group_tests_name("telemetry/core", tests, setup, teardown);
}
