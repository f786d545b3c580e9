/* Unit tests for core/share: "Per tenant" means per organization AND per
 * session; one tenant may never fill a server-wide cap alone (issue 29.8). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "core/share.h"
#include "core/xalloc.h"

/* One step: take (or give back, when give) for (org, session), expecting
 * the result of the take. */
struct step {
    int give;
    const char *org, *session;
    enum share_full want;
};

struct scase {
    const char *name;
    int total, per_org, per_session;
    struct step steps[12];
    size_t nsteps;
};

static const struct scase cases[] = {
    {"a session takes at most its share",
     8,
     4,
     2,
     {{0, "o1", "s1", SHARE_OK}, {0, "o1", "s1", SHARE_OK}, {0, "o1", "s1", SHARE_FULL_SESSION}},
     3},
    {"an organization takes at most its share across its sessions",
     8,
     3,
     2,
     {{0, "o1", "s1", SHARE_OK},
      {0, "o1", "s1", SHARE_OK},
      {0, "o1", "s2", SHARE_OK},
      {0, "o1", "s3", SHARE_FULL_ORG}},
     4},
    {"one organization full leaves room for another",
     5,
     2,
     2,
     {{0, "o1", "s1", SHARE_OK},
      {0, "o1", "s1", SHARE_OK},
      {0, "o1", "s2", SHARE_FULL_ORG},
      {0, "o2", "s3", SHARE_OK},
      {0, "o2", "s3", SHARE_OK}},
     5},
    {"the server-wide cap still holds when every org is under its share",
     3,
     2,
     2,
     {{0, "o1", "s1", SHARE_OK},
      {0, "o2", "s2", SHARE_OK},
      {0, "o3", "s3", SHARE_OK},
      {0, "o4", "s4", SHARE_FULL_SERVER}},
     4},
    {"issue h7.1: organizations holding units fill the cap only up to its newcomer reserve; an "
     "organization holding none takes from it",
     8,
     2,
     2,
     {{0, "o1", "s1", SHARE_OK},
      {0, "o1", "s1", SHARE_OK},
      {0, "o2", "s2", SHARE_OK},
      {0, "o2", "s2", SHARE_OK},
      {0, "o3", "s3", SHARE_OK},
      {0, "o3", "s3", SHARE_OK},
      {0, "o4", "s4", SHARE_OK},
      {0, "o4", "s4", SHARE_FULL_SERVER},
      {0, "o5", "s5", SHARE_OK},
      {0, "o6", "s6", SHARE_FULL_SERVER}},
     10},
    {"issue h7.1: a share of total 2 holds one unit per organization while another may come",
     2,
     2,
     2,
     {{0, "o1", "s1", SHARE_OK},
      {0, "o1", "s1", SHARE_FULL_SERVER},
      {0, "o2", "s2", SHARE_OK},
      {0, "o3", "s3", SHARE_FULL_SERVER}},
     4},
    {"issue h7.1: a share of total 1 is all reserve: whoever holds none takes it once it is free",
     1,
     1,
     1,
     {{0, "o1", "s1", SHARE_OK},
      {0, "o2", "s2", SHARE_FULL_SERVER},
      {1, "o1", "s1", SHARE_OK},
      {0, "o2", "s2", SHARE_OK}},
     4},
    {"issue h7.1: an organization that gave back all it held is a newcomer again",
     4,
     4,
     4,
     {{0, "o1", "s1", SHARE_OK},
      {0, "o1", "s1", SHARE_OK},
      {0, "o1", "s1", SHARE_OK},
      {0, "o1", "s1", SHARE_FULL_SERVER},
      {0, "o2", "s2", SHARE_OK},
      {1, "o2", "s2", SHARE_OK},
      {0, "o2", "s2", SHARE_OK}},
     7},
    {"a unit given back can be taken again",
     4,
     2,
     1,
     {{0, "o1", "s1", SHARE_OK},
      {0, "o1", "s1", SHARE_FULL_SESSION},
      {1, "o1", "s1", SHARE_OK},
      {0, "o1", "s1", SHARE_OK}},
     4},
    {"the same session id under another org is another tenant",
     4,
     2,
     1,
     {{0, "o1", "s1", SHARE_OK}, {0, "o2", "s1", SHARE_OK}},
     2},
};

static void table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const struct scase *c = &cases[i];
        struct share s = SHARE_INIT("things", c->total, c->per_org, c->per_session);
        const struct step *held[12];
        size_t nheld = 0;
        for (size_t j = 0; j < c->nsteps; j++) {
            const struct step *st = &c->steps[j];
            if (st->give) {
                share_give(&s, st->org, st->session);
                for (size_t k = 0; k < nheld; k++)
                    if (!strcmp(held[k]->org, st->org) && !strcmp(held[k]->session, st->session)) {
                        held[k] = held[--nheld];
                        break;
                    }
                continue;
            }
            enum share_full got = share_take(&s, st->org, st->session);
            if (got != st->want)
                fail_msg("%s: step %zu: got %d, want %d", c->name, j, (int)got, (int)st->want);
            if (got == SHARE_OK)
                held[nheld++] = st;
        }
        assert_int_equal(share_used(&s, NULL, NULL), (int)nheld);
        /* Giving back everything empties the table. */
        for (size_t k = 0; k < nheld; k++)
            share_give(&s, held[k]->org, held[k]->session);
        assert_int_equal(share_used(&s, NULL, NULL), 0);
        assert_int_equal((int)s.nkeys, 0);
        xfree(s.keys);
    }
}

static void counts_and_errors(void **state)
{
    (void)state;
    struct share s = SHARE_INIT("zip streams", 4, 2, 1);
    struct err e;
    err_init(&e);
    assert_int_equal(share_take_or_err(&s, "o1", "s1", 5, &e), 0);
    assert_int_equal(share_used(&s, "o1", NULL), 1);
    assert_int_equal(share_used(&s, "o1", "s1"), 1);
    assert_int_equal(share_used(&s, "o1", "s2"), 0);
    assert_int_equal(share_take_or_err(&s, "o1", "s1", 5, &e), E_LIMIT);
    assert_int_equal(e.retry_after, 5);
    assert_non_null(strstr(e.message, "session"));
    assert_non_null(strstr(e.message, "zip streams"));
    share_give(&s, "o1", "s1");
    assert_int_equal(share_used(&s, NULL, NULL), 0);
    xfree(s.keys);

    /* issue h7.1: the reserve's refusal is the server's 429, naming it. */
    struct share r = SHARE_INIT("zip streams", 2, 2, 2);
    assert_int_equal(r.reserve, 1);
    assert_int_equal(share_take_or_err(&r, "o1", "s1", 1, &e), 0);
    assert_int_equal(share_take_or_err(&r, "o1", "s1", 3, &e), E_LIMIT);
    assert_int_equal(e.retry_after, 3);
    assert_non_null(strstr(e.message, "kept for organizations holding none"));
    share_give(&r, "o1", "s1");
    xfree(r.keys);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table),
        cmocka_unit_test(counts_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
