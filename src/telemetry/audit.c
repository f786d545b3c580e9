/*
 * The audit log's writer (audit.h). One mutex guards the queue; the request
 * path holds it for a copy of one entry. The writer takes the whole queue
 * under it into its own array, then writes outside it, so that a slow store
 * makes callers wait for nothing: while a batch is being written the queue
 * fills again, and past an organization's share its entries are dropped and
 * counted (auditq.h), never waited for.
 */
#include "telemetry/audit.h"

#include <pthread.h>
#include <string.h>

#include "core/clock.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/xalloc.h"
#include "telemetry/auditq.h"

/* Entries deleted by one statement of the pruner (the store's write lock is
 * held for one statement, not for a whole backlog). */
#define AUDIT_PRUNE_ROWS 5000
/* The pruner runs this often at most, and at least once per quarter of the
 * retention (a short retention is pruned to within a quarter of itself). */
#define AUDIT_PRUNE_MS 60000

struct audit {
    struct store *st;
    int64_t retention_ms;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct auditq q;
    struct audit_rec *batch; /* the writer's: q.cap entries */
    uint64_t failed;         /* entries a failed write lost (under mu) */
    uint64_t reported;       /* drops already reported in the log */
    int stop;
    int idle; /* the writer waits for a first entry or the next prune (submit wakes it) */
    pthread_t thread;
};

void audit_submit(struct audit *a, struct audit_rec *r)
{
    if (!a) {
        audit_rec_clear(r);
        return;
    }
    pthread_mutex_lock(&a->mu);
    (void)auditq_push(&a->q, r);
    if ((a->idle && a->q.n) || a->q.n == a->q.cap / 2) {
        a->idle = 0;
        pthread_cond_signal(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
}

int64_t audit_retention_ms(const struct audit *a)
{
    return a->retention_ms;
}

uint64_t audit_dropped(struct audit *a)
{
    pthread_mutex_lock(&a->mu);
    uint64_t n = a->q.dropped + a->failed;
    pthread_mutex_unlock(&a->mu);
    return n;
}

static void write_batch(struct audit *a, size_t n)
{
    if (n == 0)
        return;
    int rc = store_audit_insert(a->st, a->batch, n);
    if (rc) {
        log_error("audit: %zu entries not written: the store failed (%d)", n, rc);
        pthread_mutex_lock(&a->mu);
        a->failed += n;
        pthread_mutex_unlock(&a->mu);
    }
    for (size_t i = 0; i < n; i++)
        audit_rec_clear(&a->batch[i]);
}

static void prune(struct audit *a)
{
    int64_t before = clock_now_ms() - a->retention_ms, deleted = 0, total = 0;
    do {
        if (store_audit_prune(a->st, before, AUDIT_PRUNE_ROWS, &deleted) != 0) {
            log_warn("audit: pruning entries older than the retention failed");
            return;
        }
        total += deleted;
    } while (deleted == AUDIT_PRUNE_ROWS);
    if (total)
        log_debug("audit: %lld entries past the retention deleted", (long long)total);
}

static void *writer(void *arg)
{
    struct audit *a = arg;
    int64_t prune_every = a->retention_ms / 4;
    if (prune_every > AUDIT_PRUNE_MS)
        prune_every = AUDIT_PRUNE_MS;
    if (prune_every < AUDIT_FLUSH_MS)
        prune_every = AUDIT_FLUSH_MS;
    int64_t next_prune = 0;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        /* Nothing queued: sleep until an entry comes or the prune is due
         * (no wake-ups while the server is idle), then gather entries for
         * AUDIT_FLUSH_MS. */
        while (!a->stop && a->q.n == 0 && clock_mono_ms() < next_prune) {
            a->idle = 1;
            struct timespec ts = clock_deadline(next_prune - clock_mono_ms());
            pthread_cond_timedwait(&a->cv, &a->mu, &ts);
        }
        a->idle = 0;
        if (!a->stop && a->q.n && a->q.n < a->q.cap / 2) {
            struct timespec ts = clock_deadline(AUDIT_FLUSH_MS);
            pthread_cond_timedwait(&a->cv, &a->mu, &ts);
        }
        int stop = a->stop;
        size_t n = auditq_take(&a->q, a->batch);
        uint64_t dropped = a->q.dropped;
        char org[STORE_ID];
        memcpy(org, a->q.last_dropped_org, sizeof org);
        pthread_mutex_unlock(&a->mu);
        if (dropped != a->reported) {
            log_warn("audit: %llu entries dropped (an organization's share of the queue was full;"
                     " the last: org \"%s\"), %llu since the start",
                     (unsigned long long)(dropped - a->reported), org, (unsigned long long)dropped);
            a->reported = dropped;
        }
        write_batch(a, n);
        int64_t now = clock_mono_ms();
        if (now >= next_prune) {
            prune(a);
            next_prune = now + prune_every;
        }
        pthread_mutex_lock(&a->mu);
        if (stop && a->q.n == 0)
            break;
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

int audit_start(struct store *st, int64_t retention_ms, struct audit **out, struct err *e)
{
    struct audit *a = xcalloc(1, sizeof *a);
    a->st = st;
    a->retention_ms = retention_ms;
    pthread_mutex_init(&a->mu, NULL);
    clock_cond_init(&a->cv);
    auditq_init(&a->q, LIM_AUDIT_QUEUE, LIM_AUDIT_QUEUE_PER_ORG);
    a->batch = xcalloc(a->q.cap, sizeof *a->batch);
    if (pthread_create(&a->thread, NULL, writer, a) != 0) {
        auditq_free(&a->q);
        xfree(a->batch);
        pthread_cond_destroy(&a->cv);
        pthread_mutex_destroy(&a->mu);
        xfree(a);
        return err_set(e, E_INTERNAL, "internal", "audit: cannot start the writer thread");
    }
    *out = a;
    return 0;
}

void audit_stop(struct audit *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    a->stop = 1;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->thread, NULL);
    auditq_free(&a->q);
    xfree(a->batch);
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
    xfree(a);
}
