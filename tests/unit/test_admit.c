/* Unit tests for runtime/admit: the server's books of its sessions' memory
 * and pids limits (issue 29.10: "Admission reserves each session's memory
 * against what the host has, with a configurable overcommit ratio, and
 * answers 429 or 503 past it; pids limits likewise add up against the host's
 * pid_max"). Each case is a sequence of steps on fresh books, named after the
 * rule it checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "core/err.h"
#include "core/limits.h"
#include "runtime/admit.h"

#define NCASES(a) (sizeof(a) / sizeof((a)[0]))
#define GIB       (1024LL * 1024 * 1024)

enum op { RESERVE, RELEASE, ADOPT };

struct step {
    enum op op;
    const char *org; /* NULL: a spare */
    long long gib, pids;
    int rc; /* expected */
};

struct admit_case {
    const char *name;
    long long host_gib;
    double overcommit;
    long long pid_max;
    struct step steps[6];
    int nsteps;
};

static const struct admit_case cases[] = {
    {"the sum of memory limits stays within the host's memory times the overcommit ratio",
     10,
     1.0,
     0,
     {{RESERVE, "a", 4, 0, 0}, {RESERVE, "b", 4, 0, 0}, {RESERVE, "c", 4, 0, E_UNAVAIL}},
     3},
    {"the overcommit ratio scales the budget",
     10,
     2.0,
     0,
     {{RESERVE, "a", 8, 0, 0}, {RESERVE, "b", 8, 0, 0}, {RESERVE, "c", 8, 0, E_UNAVAIL}},
     3},
    {"one organization holds at most its share: 429 before the server is full",
     16,
     1.0,
     0,
     {{RESERVE, "a", 8, 0, 0}, {RESERVE, "a", 8, 0, E_LIMIT}, {RESERVE, "b", 4, 0, 0}},
     3},
    {"a released reservation is given back",
     8,
     1.0,
     0,
     {{RESERVE, "a", 4, 0, 0},
      {RESERVE, "b", 4, 0, 0},
      {RESERVE, "c", 2, 0, E_UNAVAIL},
      {RELEASE, "a", 4, 0, 0},
      {RESERVE, "c", 2, 0, 0}},
     5},
    {"a spare counts in the totals only, until hand-out moves it to its owner",
     10,
     1.0,
     0,
     {{RESERVE, NULL, 6, 0, 0},
      {RESERVE, "a", 5, 0, E_UNAVAIL},
      {ADOPT, "a", 6, 0, 0},
      {RELEASE, "a", 6, 0, 0},
      {RESERVE, "a", 6, 0, 0}},
     5},
    {"hand-out past the owner's share is refused",
     8,
     1.0,
     0,
     {{RESERVE, NULL, 4, 0, 0}, {RESERVE, "a", 3, 0, 0}, {ADOPT, "a", 4, 0, E_LIMIT}},
     3},
    {"pids limits add up against pid_max less what the host keeps",
     0,
     1.0,
     LIM_ADMIT_HOST_PIDS + 4096,
     {{RESERVE, "a", 0, 2048, 0}, {RESERVE, "b", 0, 2048, 0}, {RESERVE, "c", 0, 2048, E_UNAVAIL}},
     3},
    {"an unknown host memory leaves memory unlimited", 0, 1.0, 0, {{RESERVE, "a", 1000, 0, 0}}, 1},
};

static void test_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES(cases); i++) {
        const struct admit_case *c = &cases[i];
        admit_configure(admit_budget_for(c->host_gib * GIB, c->overcommit, c->pid_max));
        for (int k = 0; k < c->nsteps; k++) {
            const struct step *s = &c->steps[k];
            struct err e;
            err_init(&e);
            int rc = 0;
            if (s->op == RESERVE)
                rc = admit_reserve(s->org, s->gib * GIB, s->pids, &e);
            else if (s->op == ADOPT)
                rc = admit_adopt(s->org, s->gib * GIB, s->pids, &e);
            else
                admit_release(s->org, s->gib * GIB, s->pids);
            if (rc != s->rc)
                fail_msg("%s: step %d answered %d, expected %d (%s)", c->name, k, rc, s->rc,
                         e.message);
            if (rc)
                assert_true(e.retry_after > 0);
        }
        /* Give everything back (without a budget in the way): the next case
         * starts from empty books. */
        admit_configure((struct admit_budget){-1, -1});
        struct err e;
        err_init(&e);
        for (int k = c->nsteps - 1; k >= 0; k--) {
            const struct step *s = &c->steps[k];
            if (s->rc != 0)
                continue;
            if (s->op == RESERVE)
                admit_release(s->org, s->gib * GIB, s->pids);
            else if (s->op == RELEASE)
                assert_int_equal(admit_reserve(s->org, s->gib * GIB, s->pids, &e), 0);
            else { /* an adopt moved the spare's share to its owner: move it back */
                admit_release(s->org, s->gib * GIB, s->pids);
                assert_int_equal(admit_reserve(NULL, s->gib * GIB, s->pids, &e), 0);
            }
        }
        long long m, p, am, ap;
        admit_held(NULL, &m, &p);
        admit_held("a", &am, &ap);
        if (m != 0 || p != 0 || am != 0 || ap != 0)
            fail_msg("%s: %lld bytes and %lld tasks left (org a: %lld, %lld)", c->name, m, p, am,
                     ap);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
