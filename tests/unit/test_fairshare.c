/* Unit tests for http/fairshare: issue 29.2, "slow calls are capped per
 * session and per organization" (a tenant's share of the blocking threads),
 * one case per rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "http/fairshare.h"

/* One step against a table of per_org 3, per_session 2: take (1) or give
 * (0) one call for org/session, and what take must return. */
struct step {
    int take;
    const char *org, *session;
    int rc;
};

static const struct {
    const char *rule;
    struct step steps[8];
    size_t n;
} cases[] = {
    {"a session past its share is refused",
     {{1, "o1", "s1", 0}, {1, "o1", "s1", 0}, {1, "o1", "s1", E_LIMIT}},
     3},
    {"another session of the same org still gets the org's remaining share",
     {{1, "o1", "s1", 0}, {1, "o1", "s1", 0}, {1, "o1", "s2", 0}, {1, "o1", "s3", E_LIMIT}},
     4},
    {"an org past its share is refused, calls without a session too",
     {{1, "o1", NULL, 0}, {1, "o1", NULL, 0}, {1, "o1", "s1", 0}, {1, "o1", NULL, E_LIMIT}},
     4},
    {"another org is never refused for the first org's calls",
     {{1, "o1", "s1", 0},
      {1, "o1", "s1", 0},
      {1, "o1", "s2", 0},
      {1, "o2", "s1", 0},
      {1, "o2", NULL, 0}},
     5},
    {"a call given back frees its slot",
     {{1, "o1", "s1", 0}, {1, "o1", "s1", 0}, {0, "o1", "s1", 0}, {1, "o1", "s1", 0}},
     4},
    {"the same session name in two orgs is two sessions",
     {{1, "o1", "s", 0}, {1, "o1", "s", 0}, {1, "o2", "s", 0}, {1, "o2", "s", 0}},
     4},
    {"no org (admin or unauthenticated routes) is never charged",
     {{1, NULL, NULL, 0}, {1, "", "s1", 0}, {1, NULL, NULL, 0}, {1, NULL, NULL, 0}},
     4},
};

static void table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct fairshare *fs = fairshare_new(3, 2);
        for (size_t k = 0; k < cases[i].n; k++) {
            const struct step *st = &cases[i].steps[k];
            struct err e;
            err_init(&e);
            if (!st->take) {
                fairshare_give(fs, st->org, st->session);
                continue;
            }
            int rc = fairshare_take(fs, st->org, st->session, &e);
            if (rc != st->rc)
                fail_msg("%s: step %zu returned %d, want %d", cases[i].rule, k, rc, st->rc);
            if (rc == E_LIMIT && e.retry_after != FAIRSHARE_RETRY_AFTER_S)
                fail_msg("%s: a refusal without Retry-After", cases[i].rule);
        }
        fairshare_free(fs);
    }
}

/* A refused call charges nothing, and giving back every call empties the
 * table (entries go with their last call). */
static void counts(void **state)
{
    (void)state;
    struct fairshare *fs = fairshare_new(2, 1);
    struct err e;
    err_init(&e);
    assert_int_equal(fairshare_take(fs, "o", "s", &e), 0);
    assert_int_equal(fairshare_take(fs, "o", "s", &e), E_LIMIT);
    assert_non_null(strstr(e.message, "session"));
    assert_int_equal(fairshare_count(fs, "o", NULL), 1);
    assert_int_equal(fairshare_count(fs, "o", "s"), 1);
    assert_int_equal(fairshare_take(fs, "o", "t", &e), 0);
    assert_int_equal(fairshare_take(fs, "o", "u", &e), E_LIMIT);
    assert_non_null(strstr(e.message, "organization"));
    assert_int_equal(fairshare_count(fs, "o", "u"), 0);
    fairshare_give(fs, "o", "s");
    fairshare_give(fs, "o", "t");
    assert_int_equal(fairshare_count(fs, "o", NULL), 0);
    assert_int_equal(fairshare_count(fs, "o", "s"), 0);
    fairshare_free(fs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table),
        cmocka_unit_test(counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
