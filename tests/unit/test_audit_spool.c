/* Unit tests for the audit spool's cap (telemetry/audit.h audit_admit,
 * issue h7.2): while the store refuses batches (the test switch's outage
 * file exists) the spool holds the entries; an organization past its share
 * of the spool, or holding some once only the newcomer reserve is left, is
 * refused E_UNAVAIL naming the audit spool; once the store accepts again
 * the writer drains the spool by itself. A real writer on SQLite. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/limits.h"
#include "core/xalloc.h"
#include "store/store.h"
#include "telemetry/audit.h"

#define CAP (64 * 1024)

static char dir[256], outage[300];

/* One change's entry of org, submitted as the request path does. */
static void submit(struct audit *a, const char *org)
{
    struct audit_rec r = {0};
    r.ts = clock_now_ms();
    snprintf(r.org_id, sizeof r.org_id, "%s", org);
    snprintf(r.method, sizeof r.method, "POST");
    snprintf(r.auth_strategy, sizeof r.auth_strategy, "api_key");
    snprintf(r.service, sizeof r.service, "profiles");
    r.status = 200;
    r.path = xstrdup("/profiles");
    r.route = xstrdup("/profiles");
    r.client_ip = xstrdup("127.0.0.1");
    r.user_agent = xstrdup("unit");
    r.user_id = xstrdup("key");
    r.domain = xstrdup("localhost");
    audit_submit(a, &r);
    audit_rec_clear(&r);
}

/* Submits entries of org while it is admitted (at most limit); how many. */
static int fill(struct audit *a, const char *org, int limit)
{
    int n = 0;
    struct err e;
    err_init(&e);
    while (n < limit && audit_admit(a, org, &e) == 0) {
        submit(a, org);
        n++;
    }
    return n;
}

static void cap_share_reserve_and_drain(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/browserd-auditcap-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(outage, sizeof outage, "%s/outage", dir);
    struct err e;
    err_init(&e);
    struct store *st;
    assert_int_equal(store_open_sqlite(dir, &st, &e), 0);
    FILE *f = fopen(outage, "w");
    assert_non_null(f);
    fclose(f);
    struct audit *a;
    assert_int_equal(audit_start(st, 86400000LL, LIM_AUDIT_ROWS_PER_ORG, dir, CAP, outage, &a, &e),
                     0);

    /* One organization takes its share (an eighth) and no more. */
    int n1 = fill(a, "o1", 100000);
    assert_true(n1 > 0);
    int64_t share = CAP / LIM_AUDIT_SPOOL_ORG_DIV;
    assert_true(audit_spooled(a, "o1") >= share);
    assert_true(audit_spooled(a, "o1") < share + LIM_AUDIT_SPOOL_RECORD_BYTES);
    err_init(&e);
    assert_int_equal(audit_admit(a, "o1", &e), E_UNAVAIL);
    assert_string_equal(e.code, AUDIT_SPOOL_FULL_CODE);
    assert_non_null(strstr(e.message, "audit spool"));
    assert_int_equal(e.retry_after, AUDIT_SPOOL_RETRY_S);

    /* Others fill theirs until only the newcomer reserve is left: then an
     * organization holding some is refused, one holding none is not. */
    char org[16];
    int orgs = 1;
    for (; audit_spooled(a, NULL) < CAP - CAP / LIM_SHARE_RESERVE_DIV && orgs < 16; orgs++) {
        snprintf(org, sizeof org, "o%d", orgs + 1);
        submit(a, org); /* a first entry: the organization holds some */
        (void)fill(a, org, 100000);
    }
    assert_true(audit_spooled(a, NULL) >= CAP - CAP / LIM_SHARE_RESERVE_DIV);
    /* The last organization may be below its share: it still holds some. */
    err_init(&e);
    assert_int_equal(audit_admit(a, org, &e), E_UNAVAIL);
    err_init(&e);
    assert_int_equal(audit_admit(a, "newcomer", &e), 0);

    /* The store is back: the writer drains the spool by itself. */
    assert_int_equal(unlink(outage), 0);
    for (int i = 0; i < 200 && audit_spooled(a, NULL) > 0; i++)
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    assert_int_equal(audit_spooled(a, NULL), 0);
    err_init(&e);
    assert_int_equal(audit_admit(a, "o1", &e), 0);
    /* Every entry admitted is stored, once. */
    struct audit_query q = {.start_ms = 0,
                            .end_ms = INT64_MAX,
                            .methods = "",
                            .exclude_methods = "",
                            .user_ids = "",
                            .service = "",
                            .auth_strategy = "",
                            .search = ""};
    struct page pg = {.limit = 1000};
    struct audit_rec *rows = NULL;
    size_t nrows = 0;
    assert_int_equal(store_audit_list(st, "o1", &q, &pg, &rows, &nrows), 0);
    assert_int_equal((int)nrows, n1);
    for (size_t i = 0; i < nrows; i++)
        audit_rec_clear(&rows[i]);
    xfree(rows);

    audit_stop(a);
    store_close(st);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cap_share_reserve_and_drain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
