/* Unit tests for runtime/mcpreg: issue 37 item 6, the MCP sessions of /mcp
 * ("MCP sessions per org capped (429), and their number counts against the
 * org's sessions"; "another org's key cannot use the MCP session id"), one
 * test per rule. The table is process-wide: each test empties it first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/limits.h"
#include "runtime/mcpreg.h"

#define FOREVER (INT64_C(1) << 60)

static int empty(void **state)
{
    (void)state;
    struct mcpreg_entry out[LIM_MCP_SESSIONS];
    (void)mcpreg_expire(FOREVER, 0, out, LIM_MCP_SESSIONS);
    return 0;
}

static void open_ok(const char *org, long long room, char *id)
{
    struct err e;
    err_init(&e);
    assert_int_equal(mcpreg_open(org, "", room, id, &e), 0);
}

/* "MCP sessions per org capped (a limit in src/core/limits.h; 429)": past
 * LIM_MCP_SESSIONS_PER_ORG, E_LIMIT with Retry-After; another org is not
 * refused for it. */
static void per_org_cap(void **state)
{
    (void)state;
    char id[MCPREG_ID_MAX];
    for (int i = 0; i < LIM_MCP_SESSIONS_PER_ORG; i++)
        open_ok("o1", -1, id);
    struct err e;
    err_init(&e);
    assert_int_equal(mcpreg_open("o1", "", -1, id, &e), E_LIMIT);
    assert_int_equal(e.retry_after, LIM_MCP_RETRY_AFTER_S);
    assert_int_equal(mcpreg_count("o1"), LIM_MCP_SESSIONS_PER_ORG);
    open_ok("o2", -1, id);
}

/* "one tenant may never fill a server-wide cap alone": the table's
 * LIM_MCP_SESSIONS take LIM_MCP_SESSIONS / LIM_MCP_SESSIONS_PER_ORG orgs; a
 * full table refuses with E_LIMIT. */
static void table_full(void **state)
{
    (void)state;
    char id[MCPREG_ID_MAX], org[32];
    for (int i = 0; i < LIM_MCP_SESSIONS; i++) {
        snprintf(org, sizeof org, "org%d", i / LIM_MCP_SESSIONS_PER_ORG);
        open_ok(org, -1, id);
    }
    struct err e;
    err_init(&e);
    assert_int_equal(mcpreg_open("late", "", -1, id, &e), E_LIMIT);
    assert_int_equal(e.retry_after, LIM_MCP_RETRY_AFTER_S);
}

/* "their number counts against the org's sessions": MCP sessions without a
 * browser yet are bounded by room; once one has its browser (counted by the
 * session manager then) it no longer takes room. */
static void counts_against_browsers(void **state)
{
    (void)state;
    char a[MCPREG_ID_MAX], b[MCPREG_ID_MAX];
    open_ok("o", 1, a);
    struct err e;
    err_init(&e);
    assert_int_equal(mcpreg_open("o", "", 1, b, &e), E_LIMIT);
    assert_non_null(strstr(e.message, "max_concurrent_browsers"));
    err_init(&e);
    assert_int_equal(mcpreg_open("o", "", 0, b, &e), E_LIMIT);
    struct mcpreg_entry ent;
    assert_int_equal(mcpreg_acquire("o", "", a, &ent, &e), 0);
    snprintf(ent.session_id, sizeof ent.session_id, "browser1");
    mcpreg_release(&ent);
    open_ok("o", 1, b);
}

/* "another org's key cannot use the MCP session id": every lookup takes the
 * org, and another org's is E_NOTFOUND as an unknown id is. */
static void other_org_not_found(void **state)
{
    (void)state;
    char id[MCPREG_ID_MAX];
    open_ok("o1", -1, id);
    struct mcpreg_entry ent;
    struct err e;
    err_init(&e);
    assert_int_equal(mcpreg_touch("o2", "", id), E_NOTFOUND);
    assert_int_equal(mcpreg_acquire("o2", "", id, &ent, &e), E_NOTFOUND);
    assert_int_equal(mcpreg_close("o2", "", id, &ent, &e), E_NOTFOUND);
    assert_int_equal(mcpreg_touch("o1", "", "mcp_unknown"), E_NOTFOUND);
    assert_int_equal(mcpreg_touch("o1", "", id), 0);
    assert_int_equal(mcpreg_close("o1", "", id, &ent, &e), 0);
    assert_string_equal(ent.id, id);
    assert_int_equal(mcpreg_touch("o1", "", id), E_NOTFOUND);
}

/* A project's browsers are not another project's: an MCP session opened
 * with a project's key is not found with another project's key, nor with
 * an org-wide one, of the same organization. */
static void other_project_not_found(void **state)
{
    (void)state;
    char id[MCPREG_ID_MAX];
    struct err e;
    err_init(&e);
    assert_int_equal(mcpreg_open("o", "p1", -1, id, &e), 0);
    struct mcpreg_entry ent;
    assert_int_equal(mcpreg_touch("o", "p2", id), E_NOTFOUND);
    assert_int_equal(mcpreg_touch("o", "", id), E_NOTFOUND);
    assert_int_equal(mcpreg_acquire("o", "p2", id, &ent, &e), E_NOTFOUND);
    assert_int_equal(mcpreg_acquire("o", "p1", id, &ent, &e), 0);
    assert_string_equal(ent.project, "p1");
    mcpreg_release(&ent);
    assert_int_equal(mcpreg_close("o", "p1", id, &ent, &e), 0);
}

/* What a call stores on release (its browser, its tab) the next call of
 * the same MCP session finds. */
static void release_keeps_state(void **state)
{
    (void)state;
    char id[MCPREG_ID_MAX];
    open_ok("o", -1, id);
    struct mcpreg_entry ent;
    struct err e;
    err_init(&e);
    assert_int_equal(mcpreg_acquire("o", "", id, &ent, &e), 0);
    assert_string_equal(ent.session_id, "");
    snprintf(ent.session_id, sizeof ent.session_id, "s1");
    snprintf(ent.target, sizeof ent.target, "t1");
    mcpreg_release(&ent);
    assert_int_equal(mcpreg_acquire("o", "", id, &ent, &e), 0);
    assert_string_equal(ent.session_id, "s1");
    assert_string_equal(ent.target, "t1");
    mcpreg_release(&ent);
}

struct waiter {
    char id[MCPREG_ID_MAX];
    int rc;
    struct mcpreg_entry ent;
};

static void *acquire_thread(void *arg)
{
    struct waiter *w = arg;
    struct err e;
    err_init(&e);
    w->rc = mcpreg_acquire("o", "", w->id, &w->ent, &e);
    return NULL;
}

/* Calls of one MCP session run one at a time: a second call waits for the
 * first one's release and then sees what it stored. */
static void calls_run_one_at_a_time(void **state)
{
    (void)state;
    struct waiter w = {.rc = 1};
    open_ok("o", -1, w.id);
    struct mcpreg_entry ent;
    struct err e;
    err_init(&e);
    assert_int_equal(mcpreg_acquire("o", "", w.id, &ent, &e), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, acquire_thread, &w), 0);
    snprintf(ent.session_id, sizeof ent.session_id, "first");
    mcpreg_release(&ent);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, 0);
    assert_string_equal(w.ent.session_id, "first");
    mcpreg_release(&w.ent);
}

/* An MCP session unused past the idle time is removed (its browser handed
 * to the caller), unless a call holds it. */
static void expire_idle(void **state)
{
    (void)state;
    char a[MCPREG_ID_MAX], b[MCPREG_ID_MAX];
    open_ok("o", -1, a);
    open_ok("o", -1, b);
    struct mcpreg_entry ent, out[4];
    struct err e;
    err_init(&e);
    assert_int_equal(mcpreg_acquire("o", "", b, &ent, &e), 0);
    assert_int_equal(mcpreg_expire(clock_mono_ms(), 60000, out, 4), 0);
    assert_int_equal(mcpreg_expire(clock_mono_ms() + 120000, 60000, out, 4), 1);
    assert_string_equal(out[0].id, a);
    assert_int_equal(mcpreg_touch("o", "", a), E_NOTFOUND);
    mcpreg_release(&ent);
    assert_int_equal(mcpreg_count("o"), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(per_org_cap, empty),
        cmocka_unit_test_setup(table_full, empty),
        cmocka_unit_test_setup(counts_against_browsers, empty),
        cmocka_unit_test_setup(other_org_not_found, empty),
        cmocka_unit_test_setup(other_project_not_found, empty),
        cmocka_unit_test_setup(release_keeps_state, empty),
        cmocka_unit_test_setup(calls_run_one_at_a_time, empty),
        cmocka_unit_test_setup(expire_idle, empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
