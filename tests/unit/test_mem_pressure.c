/* Unit tests for domain/mem_pressure: issue 30 item 6, "memory pressure
 * inside a session must end in a prompt out-of-memory kill inside that
 * session". Every case names the sentence of the rule it checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "domain/mem_pressure.h"

#define NCASES(a) (sizeof(a) / sizeof((a)[0]))
#define GIB       (1024LL * 1024 * 1024)

struct thrash_case {
    const char *name;
    struct memp_sample prev, now;
    int want;
};

static const struct thrash_case cases[] = {
    {"PSI: full avg10 at the threshold is thrashing",
     {0, -1, -1, GIB, 12},
     {1000, -1, -1, GIB, MEMP_PSI_FULL_PCT},
     1},
    {"PSI: a little stall is not", {0, -1, -1, GIB, 0}, {1000, -1, -1, GIB, 2.5}, 0},
    {"PSI: without a limit nothing is the session's", {0, -1, -1, 0, 50}, {1000, -1, -1, 0, 50}, 0},
    {"v1: 11k major faults a second (45 MB/s) at the limit is thrashing",
     {0, 100, GIB, GIB, -1},
     {1000, 11100, GIB - 4096, GIB, -1},
     1},
    {"v1: the same faults far below the limit are not (the host's reclaim)",
     {0, 100, GIB / 2, GIB, -1},
     {1000, 11100, GIB / 2, GIB, -1},
     0},
    {"v1: a few faults a second at the limit are not",
     {0, 100, GIB, GIB, -1},
     {1000, 150, GIB, GIB, -1},
     0},
    {"v1: the rate is per second of the interval",
     {0, 0, GIB, GIB, -1},
     {2000, MEMP_MAJFAULTS_PER_S * 2, GIB, GIB, -1},
     1},
    {"v1: a counter that went back (a new cgroup) is not",
     {0, 50000, GIB, GIB, -1},
     {1000, 10, GIB, GIB, -1},
     0},
    {"v1: unknown usage is not", {0, 0, -1, GIB, -1}, {1000, 50000, -1, GIB, -1}, 0},
    {"v1: no interval is not", {1000, 0, GIB, GIB, -1}, {1000, 50000, GIB, GIB, -1}, 0},
};

static void test_thrashing(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES(cases); i++) {
        int got = memp_thrashing(&cases[i].prev, &cases[i].now);
        if (got != cases[i].want)
            fail_msg("%s: got %d, want %d", cases[i].name, got, cases[i].want);
    }
    assert_int_equal(memp_thrashing(NULL, &cases[3].now), 0); /* the first sample */
}

/* "A burst of reads is not thrashing": the kill comes after MEMP_TICKS
 * thrashing samples in a row, and a calm one starts the count again. */
static void test_kill_due(void **state)
{
    (void)state;
    int ticks = 0;
    for (int i = 1; i < MEMP_TICKS; i++)
        assert_int_equal(memp_kill_due(&ticks, 1), 0);
    assert_int_equal(memp_kill_due(&ticks, 0), 0);
    for (int i = 1; i < MEMP_TICKS; i++)
        assert_int_equal(memp_kill_due(&ticks, 1), 0);
    assert_int_equal(memp_kill_due(&ticks, 1), 1);
    assert_int_equal(ticks, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thrashing),
        cmocka_unit_test(test_kill_due),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
