/* Unit tests for runtime/sessmgr: the organization's concurrent-browser limit.
 * OPERATOR.md: "limits.max_concurrent_browsers bounds live sessions including
 * every pool's capacity (429 ... on create or acquire; 403 when a pool's size
 * would exceed it)". Creates and pool resizes check it under one lock, so
 * racing threads can never push an organization past it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "runtime/sessmgr.h"

#define LIMIT    5
#define CREATORS 4
#define RESIZERS 4
#define ROUNDS   2000

static struct sessmgr *M;
static int reserved; /* successful reservations, never released */
static int refused;

static void *creator(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        if (sessmgr_reserve(M, "org", LIMIT, NULL) == 0)
            __atomic_add_fetch(&reserved, 1, __ATOMIC_RELAXED);
        else
            __atomic_add_fetch(&refused, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void *resizer(void *arg)
{
    char id[16];
    snprintf(id, sizeof id, "pool%d", (int)(intptr_t)arg);
    unsigned seed = (unsigned)(intptr_t)arg;
    for (int i = 0; i < ROUNDS; i++) {
        seed = seed * 1103515245u + 12345u;
        long long size = (seed >> 16) % 4;
        (void)!sessmgr_pool_set(M, "org", id, size, LIMIT, NULL, NULL);
    }
    return NULL;
}

/* "never exceed it": live (reserved) sessions plus pool sizes stay within the
 * limit whatever the interleaving of creates and resizes. */
static void concurrent_creates_and_resizes_never_exceed_the_limit(void **state)
{
    (void)state;
    struct err e;
    err_init(&e);
    assert_int_equal(sessmgr_start(NULL, &M, &e), 0);
    pthread_t t[CREATORS + RESIZERS];
    for (int i = 0; i < RESIZERS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, resizer, (void *)(intptr_t)(i + 1)), 0);
    for (int i = 0; i < CREATORS; i++)
        assert_int_equal(pthread_create(&t[RESIZERS + i], NULL, creator, NULL), 0);
    for (int i = 0; i < CREATORS + RESIZERS; i++)
        pthread_join(t[i], NULL);
    long long pools = sessmgr_pool_capacity(M, "org");
    if (reserved + pools > LIMIT)
        fail_msg("%d reserved + %lld in pools > limit %d", reserved, pools, LIMIT);
    assert_true(refused > 0);
    sessmgr_stop(M);
}

/* A shrinking pool is always allowed; a growing one is refused (changing
 * nothing) when pools and live sessions would pass the limit. */
static void pool_growth_is_checked_against_sessions(void **state)
{
    (void)state;
    struct err e;
    err_init(&e);
    assert_int_equal(sessmgr_start(NULL, &M, &e), 0);
    long long pools = 0, live = 0;
    assert_int_equal(sessmgr_pool_set(M, "o", "a", 3, 5, &pools, &live), 0);
    assert_int_equal(sessmgr_reserve(M, "o", 5, &pools), 0);
    assert_int_equal(pools, 3);
    assert_int_equal(sessmgr_pool_set(M, "o", "b", 2, 5, &pools, &live), E_FORBIDDEN);
    assert_int_equal(pools, 5);
    assert_int_equal(live, 1);
    assert_int_equal(sessmgr_pool_capacity(M, "o"), 3);
    assert_int_equal(sessmgr_pool_set(M, "o", "a", 1, 5, NULL, NULL), 0); /* shrink */
    assert_int_equal(sessmgr_pool_set(M, "o", "b", 2, 5, NULL, NULL), 0);
    assert_int_equal(sessmgr_reserve(M, "o", 5, NULL), 0);
    assert_int_equal(sessmgr_reserve(M, "o", 5, NULL), E_LIMIT);
    sessmgr_pool_drop(M, "b");
    assert_int_equal(sessmgr_pool_capacity(M, "o"), 1);
    assert_int_equal(sessmgr_reserve(M, "o", 5, NULL), 0);
    sessmgr_stop(M);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(concurrent_creates_and_resizes_never_exceed_the_limit),
        cmocka_unit_test(pool_growth_is_checked_against_sessions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
