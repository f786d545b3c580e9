/* One thread waking registered entries every period; runtime/waker.h. */
#include "runtime/waker.h"

#include <pthread.h>
#include <string.h>

#include "core/clock.h"
#include "core/xalloc.h"

struct waker_entry {
    void (*wake)(void *ctx);
    void *ctx;
    struct waker_entry *next;
};

struct waker {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* monotonic clock */
    struct waker_entry *list;
    int period_ms;
    pthread_t thread;
    int running, stop;
};

struct waker *waker_new(int period_ms)
{
    struct waker *w = xcalloc(1, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    clock_cond_init(&w->cv);
    w->period_ms = period_ms;
    return w;
}

void waker_free(struct waker *w)
{
    if (!w)
        return;
    while (w->list) {
        struct waker_entry *en = w->list;
        w->list = en->next;
        xfree(en);
    }
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    xfree(w);
}

static void *waker_main(void *arg)
{
    struct waker *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        struct timespec ts = clock_deadline(w->period_ms);
        pthread_cond_timedwait(&w->cv, &w->mu, &ts);
        for (struct waker_entry *en = w->list; en; en = en->next)
            en->wake(en->ctx);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int waker_start(struct waker *w, struct err *e)
{
    w->stop = 0;
    int rc = pthread_create(&w->thread, NULL, waker_main, w);
    if (rc != 0)
        return err_set(e, E_INTERNAL, "internal", "no waker thread: %s", strerror(rc));
    w->running = 1;
    return 0;
}

void waker_stop(struct waker *w)
{
    if (!w || !w->running)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    w->running = 0;
}

struct waker_entry *waker_add(struct waker *w, void (*wake)(void *ctx), void *ctx)
{
    struct waker_entry *en = xcalloc(1, sizeof *en);
    en->wake = wake;
    en->ctx = ctx;
    pthread_mutex_lock(&w->mu);
    en->next = w->list;
    w->list = en;
    pthread_mutex_unlock(&w->mu);
    return en;
}

void waker_remove(struct waker *w, struct waker_entry *en)
{
    if (!en)
        return;
    pthread_mutex_lock(&w->mu);
    for (struct waker_entry **pp = &w->list; *pp; pp = &(*pp)->next)
        if (*pp == en) {
            *pp = en->next;
            break;
        }
    pthread_mutex_unlock(&w->mu);
    xfree(en);
}
