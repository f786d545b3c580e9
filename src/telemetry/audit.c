/*
 * The audit log's writer (audit.h). One mutex guards the queue and the
 * spool's active file; the request path holds it for one write() of the
 * entry's record (page cache, no fsync) and a copy of the entry. The writer
 * takes the whole queue under it into its own array, then writes outside it, so that a slow store
 * makes callers wait for nothing: while a batch is being written the queue
 * fills again, and past an organization's share its entries are dropped and
 * counted (auditq.h), never waited for.
 */
#include "telemetry/audit.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/xalloc.h"
#include "telemetry/auditq.h"
#include "telemetry/auditspool.h"

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
    uint64_t failed;         /* entries of batches the store refused (under mu) */
    uint64_t reported;       /* drops already reported in the log */
    /* The spool: two files in the data folder. Callers append to spool[cur]
     * (under mu); the writer swaps cur when it takes the queue, commits what
     * it took, then empties the file it took (spool[cur ^ 1], written by no
     * one until the next swap). pending[i]: spool[i] holds records a failed
     * commit left, committed from the file (not the queue) next time. */
    int spool[2];
    int cur;
    int pending[2];     /* the writer's */
    uint64_t unspooled; /* entries whose record could not be written (under mu) */
    uint64_t unspooled_reported;
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
    char id[16];
    crypto_random(id, sizeof id);
    for (size_t i = 0; i < sizeof id; i++)
        snprintf(r->entry_id + 2 * i, 3, "%02x", (unsigned char)id[i]);
    char *rec = xmalloc(LIM_AUDIT_SPOOL_RECORD_BYTES);
    size_t len = auditspool_encode(r, rec, LIM_AUDIT_SPOOL_RECORD_BYTES);
    pthread_mutex_lock(&a->mu);
    /* A dropped entry (its share full) is never in the spool either: it was
     * never acknowledged as audited. The record is written under mu so that
     * it lands in the file of the batch its entry is queued in. */
    if (auditq_room(&a->q, r->org_id)) {
        ssize_t w = len ? write(a->spool[a->cur], rec, len) : -1;
        if (w != (ssize_t)len)
            a->unspooled++; /* queued all the same: only a crash loses it */
    }
    (void)auditq_push(&a->q, r);
    if ((a->idle && a->q.n) || a->q.n == a->q.cap / 2) {
        a->idle = 0;
        pthread_cond_signal(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    xfree(rec);
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

/* Commits the records of a spool file in batches of q.cap entries. */
struct replay {
    struct audit *a;
    size_t n, total;
};

static int replay_one(void *ctx, struct audit_rec *r)
{
    struct replay *rp = ctx;
    rp->a->batch[rp->n++] = *r;
    if (rp->n < rp->a->q.cap)
        return 0;
    int rc = store_audit_insert(rp->a->st, rp->a->batch, rp->n);
    for (size_t i = 0; i < rp->n; i++)
        audit_rec_clear(&rp->a->batch[i]);
    rp->total += rp->n;
    rp->n = 0;
    return rc;
}

/* Every record of spool file f into the store (a record already there,
 * same entry id, is ignored), then empties the file. 0, or the store's or
 * the read's error (the file is kept). Uses a->batch: the writer's, or
 * audit_start's before the writer runs. */
static int replay_file(struct audit *a, int f, size_t *total)
{
    struct replay rp = {.a = a};
    size_t skipped = 0;
    int rc = auditspool_read(a->spool[f], replay_one, &rp, &skipped);
    if (rc == 0 && rp.n)
        rc = store_audit_insert(a->st, a->batch, rp.n);
    for (size_t i = 0; i < rp.n; i++)
        audit_rec_clear(&a->batch[i]);
    *total = rp.total + rp.n;
    if (skipped)
        log_warn("audit: %zu unreadable spool records skipped (a torn last record is one a"
                 " crash cut before its entry was acknowledged)",
                 skipped);
    if (rc == 0 && ftruncate(a->spool[f], 0) != 0)
        rc = E_INTERNAL;
    return rc;
}

/* Commits the n entries taken from the queue, whose records are in spool
 * file f, then empties f. When f still holds the records of a failed
 * commit, they are committed from f too (the n entries again among them,
 * ignored: the queue's copy also covers an entry whose record could not be
 * written). */
static void write_batch(struct audit *a, size_t n, int f)
{
    if (n == 0)
        return;
    int rc = store_audit_insert(a->st, a->batch, n);
    for (size_t i = 0; i < n; i++)
        audit_rec_clear(&a->batch[i]);
    if (rc == 0 && a->pending[f]) {
        size_t total = 0;
        rc = replay_file(a, f, &total);
    } else if (rc == 0 && ftruncate(a->spool[f], 0) != 0) {
        a->pending[f] = 1; /* committed; replayed again, ignored, next time */
    }
    if (rc) {
        log_error("audit: %zu entries not written: the store failed (%d); kept in the spool", n,
                  rc);
        a->pending[f] = 1;
        pthread_mutex_lock(&a->mu);
        a->failed += n;
        pthread_mutex_unlock(&a->mu);
    } else if (a->pending[f] && ftruncate(a->spool[f], 0) == 0) {
        a->pending[f] = 0;
    }
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
        int f = a->cur;
        if (n)
            a->cur ^= 1;
        uint64_t dropped = a->q.dropped, unspooled = a->unspooled;
        char org[STORE_ID];
        memcpy(org, a->q.last_dropped_org, sizeof org);
        pthread_mutex_unlock(&a->mu);
        if (dropped != a->reported) {
            log_warn("audit: %llu entries dropped (an organization's share of the queue was full;"
                     " the last: org \"%s\"), %llu since the start",
                     (unsigned long long)(dropped - a->reported), org, (unsigned long long)dropped);
            a->reported = dropped;
        }
        if (unspooled != a->unspooled_reported) {
            log_error("audit: %llu entries not written to the spool (%s/audit-spool.*): a crash"
                      " before they are stored loses them",
                      (unsigned long long)(unspooled - a->unspooled_reported), "<data>");
            a->unspooled_reported = unspooled;
        }
        write_batch(a, n, f);
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

static void free_audit(struct audit *a)
{
    for (int i = 0; i < 2; i++)
        if (a->spool[i] >= 0)
            close(a->spool[i]);
    auditq_free(&a->q);
    xfree(a->batch);
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
    xfree(a);
}

/* Opens both spool files in dir and commits what a crash left in them. */
static int open_spool(struct audit *a, const char *dir, struct err *e)
{
    for (int i = 0; i < 2; i++) {
        char path[4096];
        if ((size_t)snprintf(path, sizeof path, "%s/audit-spool.%d", dir, i) >= sizeof path)
            return err_set(e, E_INTERNAL, "internal", "audit: the data folder's path is too long");
        a->spool[i] = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (a->spool[i] < 0)
            return err_set(e, E_INTERNAL, "internal", "audit: cannot open the spool %s: %s", path,
                           strerror(errno));
    }
    for (int i = 0; i < 2; i++) {
        size_t total = 0;
        int rc = replay_file(a, i, &total);
        if (rc)
            return err_set(e, E_INTERNAL, "internal",
                           "audit: the spool's entries could not be stored (%d)", rc);
        if (total)
            log_info("audit: %zu entries of the spool (left by a crash) stored", total);
    }
    return 0;
}

int audit_start(struct store *st, int64_t retention_ms, const char *spool_dir, struct audit **out,
                struct err *e)
{
    struct audit *a = xcalloc(1, sizeof *a);
    a->st = st;
    a->retention_ms = retention_ms;
    a->spool[0] = a->spool[1] = -1;
    pthread_mutex_init(&a->mu, NULL);
    clock_cond_init(&a->cv);
    auditq_init(&a->q, LIM_AUDIT_QUEUE, LIM_AUDIT_QUEUE_PER_ORG);
    a->batch = xcalloc(a->q.cap, sizeof *a->batch);
    if (open_spool(a, spool_dir, e) != 0) {
        free_audit(a);
        return e->rc ? e->rc : E_INTERNAL;
    }
    if (pthread_create(&a->thread, NULL, writer, a) != 0) {
        free_audit(a);
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
    free_audit(a);
}
