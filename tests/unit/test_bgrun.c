/* Unit tests for runtime/bgrun: the ticker and the counted tasks managed
 * auth's flows and health checks run on (docs/managed-auth.md). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>

#include "core/err.h"
#include "runtime/bgrun.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int ticks, started, finished, release;

static void tick(void *ctx)
{
    (void)ctx;
    pthread_mutex_lock(&mu);
    ticks++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* A task that runs until released, as a flow waits for a person. */
static void task(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    started++;
    pthread_cond_broadcast(&cv);
    while (!release)
        pthread_cond_wait(&cv, &mu);
    finished++;
    pthread_mutex_unlock(&mu);
}

static void *releaser(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    release = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    return NULL;
}

/* The ticker calls tick every period; tasks run on threads of their own;
 * stop waits for the running tasks; a spawn after stop began is refused. */
static void test_tick_spawn_stop(void **state)
{
    (void)state;
    struct bgrun *r = NULL;
    assert_int_equal(bgrun_start(tick, NULL, 10, &r), 0);
    pthread_mutex_lock(&mu);
    while (ticks < 3)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    assert_int_equal(bgrun_spawn(r, task, NULL), 0);
    assert_int_equal(bgrun_spawn(r, task, NULL), 0);
    pthread_mutex_lock(&mu);
    while (started < 2)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, releaser, NULL), 0);
    bgrun_stop(r); /* returns only once both tasks finished */
    pthread_mutex_lock(&mu);
    assert_int_equal(finished, 2);
    pthread_mutex_unlock(&mu);
    pthread_join(th, NULL);
    assert_int_equal(bgrun_spawn(NULL, task, NULL), E_UNAVAIL);
    bgrun_stop(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tick_spawn_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
