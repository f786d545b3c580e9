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
#include <stdlib.h>
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

/* Bytes of spool records per organization in one spool file (under mu):
 * what audit_admit counts. Cleared when the file is emptied. A short array:
 * one row per organization with records in the file. */
struct spool_org {
    char org[STORE_ID];
    int64_t bytes;
};
struct spool_acct {
    struct spool_org *v;
    size_t n, cap;
    int64_t bytes;
};

struct audit {
    struct store *st;
    int64_t spool_cap;
    char *outage_file; /* test switch: batches refused while it exists */
    char *hold_file;   /* test switch: the queue is not taken while it exists */
    struct spool_acct acct[2];
    int64_t retention_ms;
    int64_t rows_per_org; /* entries an organization keeps (LIM_AUDIT_ROWS_PER_ORG or fewer) */
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

static void acct_add(struct spool_acct *c, const char *org, int64_t bytes)
{
    size_t i = 0;
    while (i < c->n && strcmp(c->v[i].org, org) != 0)
        i++;
    if (i == c->n) {
        if (c->n == c->cap) {
            c->cap = c->cap ? c->cap * 2 : 8;
            c->v = xrealloc(c->v, c->cap * sizeof *c->v);
        }
        snprintf(c->v[i].org, sizeof c->v[i].org, "%s", org);
        c->v[i].bytes = 0;
        c->n++;
    }
    c->v[i].bytes += bytes;
    c->bytes += bytes;
}

static int64_t acct_get(const struct spool_acct *c, const char *org)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->v[i].org, org) == 0)
            return c->v[i].bytes;
    return 0;
}

/* Spool file f was emptied: its records count no more. Takes mu. */
static void acct_emptied(struct audit *a, int f)
{
    pthread_mutex_lock(&a->mu);
    a->acct[f].n = 0;
    a->acct[f].bytes = 0;
    pthread_mutex_unlock(&a->mu);
}

int64_t audit_spooled(struct audit *a, const char *org)
{
    pthread_mutex_lock(&a->mu);
    int64_t n = 0;
    for (int f = 0; f < 2; f++)
        n += org ? acct_get(&a->acct[f], org) : a->acct[f].bytes;
    pthread_mutex_unlock(&a->mu);
    return n;
}

int audit_admit(struct audit *a, const char *org, struct err *e)
{
    if (!a)
        return 0;
    org = org ? org : "";
    int64_t share = a->spool_cap / LIM_AUDIT_SPOOL_ORG_DIV;
    int64_t reserve = a->spool_cap / LIM_SHARE_RESERVE_DIV;
    pthread_mutex_lock(&a->mu);
    int64_t total = a->acct[0].bytes + a->acct[1].bytes;
    int64_t mine = acct_get(&a->acct[0], org) + acct_get(&a->acct[1], org);
    pthread_mutex_unlock(&a->mu);
    if (mine < share && total < a->spool_cap && (mine == 0 || total < a->spool_cap - reserve))
        return 0;
    e->retry_after = AUDIT_SPOOL_RETRY_S;
    if (mine >= share)
        return err_set(e, E_UNAVAIL, AUDIT_SPOOL_FULL_CODE,
                       "the audit spool holds this organization's share (%lld bytes) of entries "
                       "the audit log's store has not accepted yet; nothing was changed, retry "
                       "once the store is back",
                       (long long)share);
    return err_set(e, E_UNAVAIL, AUDIT_SPOOL_FULL_CODE,
                   "the audit spool is full (%lld bytes of entries the audit log's store has not "
                   "accepted yet; the last %lld kept for organizations with none there); nothing "
                   "was changed, retry once the store is back",
                   (long long)a->spool_cap, (long long)reserve);
}

static int cmp_org(const void *x, const void *y)
{
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* Deletes the oldest entries of each organization of the n rows just
 * stored past its a->rows_per_org newest (store_audit_trim: one walk of
 * at most that many entries of the organization's index each), so that
 * no organization grows the store past its bound; other organizations'
 * entries are never touched. A trim that fails is reported and left for
 * the organization's next batch (the entries are stored). */
static void trim(struct audit *a, const struct audit_rec *rows, size_t n)
{
    const char **orgs = xcalloc(n, sizeof *orgs);
    for (size_t i = 0; i < n; i++)
        orgs[i] = rows[i].org_id;
    qsort(orgs, n, sizeof *orgs, cmp_org);
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && strcmp(orgs[i], orgs[i - 1]) == 0)
            continue;
        int64_t deleted = 0;
        if (store_audit_trim(a->st, orgs[i], a->rows_per_org, &deleted) != 0)
            log_warn("audit: deleting org \"%s\"'s entries past its %lld newest failed", orgs[i],
                     (long long)a->rows_per_org);
        else if (deleted)
            log_debug("audit: %lld entries of org \"%s\" past its %lld newest deleted",
                      (long long)deleted, orgs[i], (long long)a->rows_per_org);
    }
    xfree(orgs);
}

/* The store's insert, then the trim of the organizations it stored
 * entries of; or E_UNAVAIL while the test switch's file exists. */
static int insert(struct audit *a, struct audit_rec *rows, size_t n)
{
    if (a->outage_file && access(a->outage_file, F_OK) == 0)
        return E_UNAVAIL;
    int rc = store_audit_insert(a->st, rows, n);
    if (rc == 0 && n)
        trim(a, rows, n);
    return rc;
}

int audit_reserve(struct audit *a, const char *org, struct err *e)
{
    if (!a)
        return 0;
    org = org ? org : "";
    int rc = audit_admit(a, org, e);
    if (rc)
        return rc;
    pthread_mutex_lock(&a->mu);
    rc = auditq_hold(&a->q, org);
    pthread_mutex_unlock(&a->mu);
    if (rc == 0)
        return 0;
    e->retry_after = AUDIT_QUEUE_RETRY_S;
    if (rc == E_LIMIT)
        return err_set(e, E_LIMIT, AUDIT_QUEUE_FULL_CODE,
                       "the audit log's queue holds this organization's share (%u entries) of "
                       "entries not yet stored; nothing was changed, retry in a moment",
                       LIM_AUDIT_QUEUE_PER_ORG);
    return err_set(e, E_UNAVAIL, AUDIT_QUEUE_FULL_CODE,
                   "the audit log's queue is full (%u entries not yet stored); nothing was "
                   "changed, retry in a moment",
                   LIM_AUDIT_QUEUE);
}

void audit_unreserve(struct audit *a, const char *org)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    auditq_unhold(&a->q, org ? org : "");
    pthread_mutex_unlock(&a->mu);
}

/* audit_submit; held: r's place was held (audit_reserve). */
static void submit(struct audit *a, struct audit_rec *r, int held)
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
    if (held || auditq_room(&a->q, r->org_id)) {
        ssize_t w = len ? write(a->spool[a->cur], rec, len) : -1;
        if (w != (ssize_t)len)
            a->unspooled++; /* queued all the same: only a crash loses it */
        else
            acct_add(&a->acct[a->cur], r->org_id, (int64_t)len);
    }
    if (held)
        auditq_push_held(&a->q, r);
    else
        (void)auditq_push(&a->q, r);
    if ((a->idle && a->q.n) || a->q.n == a->q.cap / 2) {
        a->idle = 0;
        pthread_cond_signal(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    xfree(rec);
}

void audit_submit(struct audit *a, struct audit_rec *r)
{
    submit(a, r, 0);
}

void audit_submit_held(struct audit *a, struct audit_rec *r)
{
    submit(a, r, 1);
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
    int rc = insert(rp->a, rp->a->batch, rp->n);
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
        rc = insert(a, a->batch, rp.n);
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
    int rc = insert(a, a->batch, n);
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
    if (!a->pending[f])
        acct_emptied(a, f);
}

/* While the store refuses, no new entry may come (audit_admit refuses the
 * changes), so the writer tries the spool again by itself: the file not
 * being appended to (cur is swapped first when only that one is pending),
 * committed from the file and emptied. */
static void retry_pending(struct audit *a)
{
    pthread_mutex_lock(&a->mu);
    if (!a->pending[a->cur ^ 1] && a->pending[a->cur])
        a->cur ^= 1;
    int f = a->cur ^ 1;
    pthread_mutex_unlock(&a->mu);
    if (!a->pending[f])
        return;
    size_t total = 0;
    if (replay_file(a, f, &total) != 0)
        return;
    a->pending[f] = 0;
    acct_emptied(a, f);
    log_info("audit: %zu entries of the spool stored (the store accepts them again)", total);
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
    int64_t next_prune = 0, next_retry = 0;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        /* Nothing queued: sleep until an entry comes, the prune is due or
         * (records a refused batch left) the next retry (no wake-ups while
         * the server is idle), then gather entries for AUDIT_FLUSH_MS. */
        for (;;) {
            int64_t wake = next_prune;
            if ((a->pending[0] || a->pending[1]) && next_retry < wake)
                wake = next_retry;
            if (a->stop || a->q.n || clock_mono_ms() >= wake)
                break;
            a->idle = 1;
            struct timespec ts = clock_deadline(wake - clock_mono_ms());
            pthread_cond_timedwait(&a->cv, &a->mu, &ts);
        }
        a->idle = 0;
        if (!a->stop && a->q.n && a->q.n < a->q.cap / 2) {
            struct timespec ts = clock_deadline(AUDIT_FLUSH_MS);
            pthread_cond_timedwait(&a->cv, &a->mu, &ts);
        }
        if (!a->stop && a->hold_file && access(a->hold_file, F_OK) == 0) {
            struct timespec ts = clock_deadline(AUDIT_FLUSH_MS);
            pthread_cond_timedwait(&a->cv, &a->mu, &ts);
            continue;
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
        if (n == 0 && (a->pending[0] || a->pending[1]) && now >= next_retry) {
            retry_pending(a);
            next_retry = now + AUDIT_RETRY_MS;
        }
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
    xfree(a->acct[0].v);
    xfree(a->acct[1].v);
    xfree(a->outage_file);
    xfree(a->hold_file);
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

int audit_start(struct store *st, int64_t retention_ms, int64_t rows_per_org, const char *spool_dir,
                int64_t spool_cap, const char *outage_file, struct audit **out, struct err *e)
{
    struct audit *a = xcalloc(1, sizeof *a);
    a->st = st;
    a->rows_per_org = rows_per_org > 0 && rows_per_org < LIM_AUDIT_ROWS_PER_ORG
                          ? rows_per_org
                          : LIM_AUDIT_ROWS_PER_ORG;
    a->spool_cap = spool_cap;
    a->outage_file = outage_file ? xstrdup(outage_file) : NULL;
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

void audit_test_hold(struct audit *a, const char *path)
{
    pthread_mutex_lock(&a->mu);
    xfree(a->hold_file);
    a->hold_file = path ? xstrdup(path) : NULL;
    pthread_mutex_unlock(&a->mu);
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
