/* The count of parked process requests; runtime/procjobs.h. */
#include "runtime/procjobs.h"

#include <pthread.h>

#include "core/clock.h"
#include "core/xalloc.h"
#include "runtime/proc.h"

struct procjobs {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* monotonic clock */
    int active, draining;
};

struct procjobs *procjobs_new(void)
{
    struct procjobs *j = xcalloc(1, sizeof *j);
    pthread_mutex_init(&j->mu, NULL);
    clock_cond_init(&j->cv);
    return j;
}

void procjobs_free(struct procjobs *j)
{
    if (!j)
        return;
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    xfree(j);
}

int procjobs_enter(struct procjobs *j, struct err *e)
{
    pthread_mutex_lock(&j->mu);
    int draining = j->draining;
    if (!draining)
        j->active++;
    pthread_mutex_unlock(&j->mu);
    if (draining)
        return err_set(e, E_UNAVAIL, "unavailable", "the server is stopping");
    return 0;
}

void procjobs_leave(struct procjobs *j)
{
    pthread_mutex_lock(&j->mu);
    j->active--;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void procjobs_drain(struct procjobs *j, int timeout_ms)
{
    pthread_mutex_lock(&j->mu);
    j->draining = 1;
    pthread_mutex_unlock(&j->mu);
    proc_kill_all();
    struct timespec until = clock_deadline(timeout_ms);
    pthread_mutex_lock(&j->mu);
    while (j->active > 0)
        if (pthread_cond_timedwait(&j->cv, &j->mu, &until) != 0)
            break;
    pthread_mutex_unlock(&j->mu);
}
