#include "runtime/bgjobs.h"

#include <pthread.h>
#include <time.h>

#include "core/xalloc.h"

struct bgjobs {
    pthread_mutex_t mu;
    pthread_cond_t idle; /* signalled when running drops to 0 */
    unsigned running;
    int draining;
};

struct job {
    struct bgjobs *j;
    void (*fn)(void *ctx, struct bgjobs *j);
    void *ctx;
};

struct bgjobs *bgjobs_new(void)
{
    struct bgjobs *j = xcalloc(1, sizeof *j);
    pthread_mutex_init(&j->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j->idle, &ca);
    pthread_condattr_destroy(&ca);
    return j;
}

void bgjobs_free(struct bgjobs *j)
{
    if (!j)
        return;
    /* A job the drain gave up on still runs: leave it what it uses. */
    pthread_mutex_lock(&j->mu);
    unsigned running = j->running;
    pthread_mutex_unlock(&j->mu);
    if (running)
        return;
    pthread_cond_destroy(&j->idle);
    pthread_mutex_destroy(&j->mu);
    xfree(j);
}

static void *job_main(void *arg)
{
    struct job *jb = arg;
    struct bgjobs *j = jb->j;
    jb->fn(jb->ctx, j);
    xfree(jb);
    pthread_mutex_lock(&j->mu);
    if (--j->running == 0)
        pthread_cond_broadcast(&j->idle);
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

int bgjobs_start(struct bgjobs *j, void (*fn)(void *ctx, struct bgjobs *j), void *ctx,
                 struct err *e)
{
    pthread_mutex_lock(&j->mu);
    if (j->draining) {
        pthread_mutex_unlock(&j->mu);
        return err_set(e, E_UNAVAIL, "unavailable", "the server is stopping");
    }
    j->running++;
    pthread_mutex_unlock(&j->mu);
    struct job *jb = xcalloc(1, sizeof *jb);
    jb->j = j;
    jb->fn = fn;
    jb->ctx = ctx;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int rc = pthread_create(&t, &at, job_main, jb);
    pthread_attr_destroy(&at);
    if (rc == 0)
        return 0;
    xfree(jb);
    pthread_mutex_lock(&j->mu);
    if (--j->running == 0)
        pthread_cond_broadcast(&j->idle);
    pthread_mutex_unlock(&j->mu);
    return err_set(e, E_UNAVAIL, "unavailable", "no thread could be started for the job");
}

int bgjobs_stopping(struct bgjobs *j)
{
    pthread_mutex_lock(&j->mu);
    int d = j->draining;
    pthread_mutex_unlock(&j->mu);
    return d;
}

void bgjobs_drain(struct bgjobs *j, int timeout_ms)
{
    if (!j)
        return;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&j->mu);
    j->draining = 1;
    while (j->running > 0)
        if (pthread_cond_timedwait(&j->idle, &j->mu, &until) != 0)
            break;
    pthread_mutex_unlock(&j->mu);
}
