/* Background ticker and counted tasks (see runtime/bgrun.h). */
#include "runtime/bgrun.h"

#include <pthread.h>
#include <time.h>

#include "core/xalloc.h"

struct bgrun {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t ticker;
    void (*tick)(void *ctx);
    void *ctx;
    int period_ms;
    int stopping;
    int tasks; /* running */
};

struct task {
    struct bgrun *r;
    void (*fn)(void *arg);
    void *arg;
};

static void *ticker_main(void *p)
{
    struct bgrun *r = p;
    pthread_mutex_lock(&r->mu);
    while (!r->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += r->period_ms / 1000;
        ts.tv_nsec += (long)(r->period_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        (void)pthread_cond_timedwait(&r->cv, &r->mu, &ts);
        if (r->stopping)
            break;
        pthread_mutex_unlock(&r->mu);
        r->tick(r->ctx);
        pthread_mutex_lock(&r->mu);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

int bgrun_start(void (*tick)(void *ctx), void *ctx, int period_ms, struct bgrun **out)
{
    struct bgrun *r = xcalloc(1, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->tick = tick;
    r->ctx = ctx;
    r->period_ms = period_ms > 0 ? period_ms : 1000;
    if (pthread_create(&r->ticker, NULL, ticker_main, r) != 0) {
        pthread_cond_destroy(&r->cv);
        pthread_mutex_destroy(&r->mu);
        xfree(r);
        return E_INTERNAL;
    }
    *out = r;
    return 0;
}

static void *task_main(void *p)
{
    struct task *t = p;
    struct bgrun *r = t->r;
    t->fn(t->arg);
    xfree(t);
    pthread_mutex_lock(&r->mu);
    r->tasks--;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

int bgrun_spawn(struct bgrun *r, void (*fn)(void *arg), void *arg)
{
    if (!r)
        return E_UNAVAIL;
    struct task *t = xcalloc(1, sizeof *t);
    t->r = r;
    t->fn = fn;
    t->arg = arg;
    pthread_mutex_lock(&r->mu);
    int stopping = r->stopping;
    if (!stopping)
        r->tasks++;
    pthread_mutex_unlock(&r->mu);
    if (stopping) {
        xfree(t);
        return E_UNAVAIL;
    }
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&th, &at, task_main, t);
    pthread_attr_destroy(&at);
    if (rc != 0) {
        xfree(t);
        pthread_mutex_lock(&r->mu);
        r->tasks--;
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->mu);
        return E_INTERNAL;
    }
    return 0;
}

void bgrun_stop(struct bgrun *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->stopping = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->ticker, NULL);
    pthread_mutex_lock(&r->mu);
    while (r->tasks > 0)
        pthread_cond_wait(&r->cv, &r->mu);
    pthread_mutex_unlock(&r->mu);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    xfree(r);
}
