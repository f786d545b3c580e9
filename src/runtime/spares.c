/*
 * spares: see spares.h and docs/spares.md.
 *
 * One mutex guards the ready lists; the filler drops it around every
 * launcher call, so a launch (hundreds of ms) never blocks spares_take, which
 * is on the create path and must stay a list operation.
 */
#include "runtime/spares.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/xalloc.h"
#include "domain/spare_match.h"

#define TICK_MS        500
#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 30000
/* Creates waiting for a spare being launched, at most (one per organization
 * and kind; past it a create launches cold). */
#define WAITERS_MAX 64

/* A create waiting for a spare being launched (spares_take_wait). */
struct waiter {
    char org[64];
    int kind;
};

struct spares {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    struct spares_launcher l;
    int target[SPARE_KINDS];
    void *ready[SPARE_KINDS][SPARES_MAX];
    int nready[SPARE_KINDS];
    int64_t holdoff_until; /* monotonic ms: no launch before (a session needs the room) */
    /* Per kind: a kind whose launches fail (Xvfb not up in time on a busy
     * host) waits alone; the other kinds keep filling. */
    int64_t failed_until[SPARE_KINDS]; /* monotonic ms: no launch of the kind before */
    int backoff_ms[SPARE_KINDS];
    uint64_t handed_out;
    int handing;           /* hand-outs in progress (spares_take .. spares_handout_done) */
    int64_t handing_until; /* monotonic ms: a hand-out that never says done stops holding */
    int stopping;
    /* Issue 39.2: creates wait for a spare being launched rather than
     * launch a second browser beside it. */
    int starting[SPARE_KINDS];       /* the filler is launching one of the kind */
    int64_t start_at[SPARE_KINDS];   /* monotonic ms: when that launch began */
    int64_t est_launch[SPARE_KINDS]; /* running average of the kind's launches, ms (0: none) */
    int64_t est_cold;                /* running average of cold launches, ms (0: none) */
    int cold;                        /* cold launches in progress (spares_cold_begin) */
    int64_t cold_until;              /* monotonic ms: they hold the filler until then */
    struct waiter waiting[WAITERS_MAX];
    int nwaiting;
    uint64_t launched;              /* spare launches begun */
    uint64_t waited, waited_served; /* creates that waited; of them, served by the spare */
};

/* A running average giving the newest launch a quarter of the weight: it
 * follows the host's load within a few launches. */
static int64_t ewma(int64_t avg, int64_t x)
{
    return avg > 0 ? (3 * avg + x) / 4 : x;
}

static int64_t cold_estimate_locked(const struct spares *s, int kind)
{
    if (s->est_cold > 0)
        return s->est_cold;
    if (kind >= 0 && s->est_launch[kind] > 0)
        return s->est_launch[kind];
    return SPARES_COLD_ESTIMATE_MS;
}

int spares_parse_count(const char *v)
{
    if (!v || !*v)
        return -1;
    char *end;
    long n = strtol(v, &end, 10);
    return *end || n < 0 || n > SPARES_MAX ? -1 : (int)n;
}

/* MemAvailable in MiB, or -1 when /proc/meminfo cannot say (then the check
 * is skipped: the launch itself fails if there is no room). */
static long long mem_available_mb(void)
{
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f)
        return -1;
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
            break;
    fclose(f);
    return kb < 0 ? -1 : kb / 1024;
}

/* The kind the filler launches next, or -1 when every kind is full or
 * waiting after its failures (*wait_ms: until the first of those may try
 * again, else unchanged). The headful kind first: it is what {} asks for. */
static int wanted_locked(struct spares *s, int64_t now, int64_t *wait_ms)
{
    for (int k = 0; k < SPARE_KINDS; k++) {
        if (s->nready[k] >= s->target[k])
            continue;
        if (now >= s->failed_until[k])
            return k;
        if (s->failed_until[k] - now < *wait_ms)
            *wait_ms = s->failed_until[k] - now;
    }
    return -1;
}

/* Takes every ready item out, checks it without the lock, puts back the live
 * ones: a create cannot take an item while it is being checked. */
static void check_alive_locked(struct spares *s)
{
    void *items[SPARE_KINDS][SPARES_MAX];
    int n[SPARE_KINDS];
    memcpy(items, s->ready, sizeof items);
    memcpy(n, s->nready, sizeof n);
    memset(s->nready, 0, sizeof s->nready);
    pthread_mutex_unlock(&s->mu);
    for (int k = 0; k < SPARE_KINDS; k++)
        for (int i = 0; i < n[k]; i++)
            if (!s->l.alive(s->l.ctx, items[k][i])) {
                s->l.end(s->l.ctx, items[k][i], "spare browser exited");
                items[k][i] = NULL;
            }
    pthread_mutex_lock(&s->mu);
    for (int k = 0; k < SPARE_KINDS; k++)
        for (int i = 0; i < n[k]; i++)
            if (items[k][i] && s->nready[k] < SPARES_MAX)
                s->ready[k][s->nready[k]++] = items[k][i];
    pthread_cond_broadcast(&s->cv); /* a create that waited meanwhile takes one */
}

static void *fill(void *arg)
{
    struct spares *s = arg;
    int64_t next_check = 0;
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        int64_t now = clock_mono_ms();
        if (now >= next_check) {
            check_alive_locked(s);
            next_check = now + TICK_MS;
            if (s->stopping)
                break;
        }
        int64_t wait = TICK_MS;
        int k = wanted_locked(s, now, &wait);
        /* A replacement waits for the hand-out that took the spare: its
         * launch would compete with the rest of that create for the CPU. */
        int held = now < s->holdoff_until || (s->handing > 0 && now < s->handing_until) ||
                   (s->cold > 0 && now < s->cold_until);
        long long avail = k >= 0 && !held ? mem_available_mb() : 0;
        if (k < 0 || held || (avail >= 0 && avail < SPARES_MIN_AVAIL_MB)) {
            if (wait < 1)
                wait = 1;
            if (s->handing > 0 && s->handing_until - now < wait)
                wait = s->handing_until > now ? s->handing_until - now : 1;
            if (s->cold > 0 && s->cold_until > now && s->cold_until - now < wait)
                wait = s->cold_until - now;
            struct timespec ts = clock_deadline((int)wait);
            pthread_cond_timedwait(&s->cv, &s->mu, &ts);
            continue;
        }
        s->starting[k] = 1;
        s->start_at[k] = now;
        s->launched++;
        pthread_mutex_unlock(&s->mu);
        void *item = NULL;
        int rc = s->l.launch(s->l.ctx, k, &item);
        pthread_mutex_lock(&s->mu);
        s->starting[k] = 0;
        pthread_cond_broadcast(&s->cv); /* a create waiting for it takes it, or launches cold */
        if (rc == 0 && item)
            s->est_launch[k] = ewma(s->est_launch[k], clock_mono_ms() - now);
        if ((rc != 0 || !item) && s->stopping)
            break; /* cancelled by the stop (sess_spares_stop) */
        if (rc != 0 || !item) {
            s->backoff_ms[k] = s->backoff_ms[k] ? s->backoff_ms[k] * 2 : BACKOFF_MIN_MS;
            if (s->backoff_ms[k] > BACKOFF_MAX_MS)
                s->backoff_ms[k] = BACKOFF_MAX_MS;
            s->failed_until[k] = clock_mono_ms() + s->backoff_ms[k];
            log_warn("spares: a %s spare could not be launched; next try in %d ms",
                     spare_kind_name((enum spare_kind)k), s->backoff_ms[k]);
            continue;
        }
        s->backoff_ms[k] = 0;
        if (s->stopping || s->nready[k] >= s->target[k]) {
            /* Stopping, or the target was met meanwhile (a put back). */
            pthread_mutex_unlock(&s->mu);
            s->l.end(s->l.ctx, item, "not needed");
            pthread_mutex_lock(&s->mu);
            continue;
        }
        s->ready[k][s->nready[k]++] = item;
        pthread_cond_broadcast(&s->cv); /* a create waiting for it */
        log_debug("spares: a %s spare is ready (%d of %d)", spare_kind_name((enum spare_kind)k),
                  s->nready[k], s->target[k]);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int spares_start(const struct spares_launcher *launcher, int count, struct spares **out,
                 struct err *e)
{
    *out = NULL;
    if (count <= 0)
        return 0;
    if (count > SPARES_MAX)
        count = SPARES_MAX;
    struct spares *s = xcalloc(1, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    clock_cond_init(&s->cv);
    s->l = *launcher;
    s->target[SPARE_HEADFUL] = (count + 1) / 2;
    s->target[SPARE_HEADLESS] = count / 2;
    if (pthread_create(&s->thread, NULL, fill, s) != 0) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
        xfree(s);
        return err_set(e, E_INTERNAL, "internal", "cannot start the spares filler");
    }
    log_info("spares: keeping %d pre-launched browser(s) (%d headful, %d headless)", count,
             s->target[SPARE_HEADFUL], s->target[SPARE_HEADLESS]);
    *out = s;
    return 0;
}

void spares_stop(struct spares *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    /* A create still waiting (woken by the broadcast) leaves before the
     * engine is freed. */
    pthread_mutex_lock(&s->mu);
    while (s->nwaiting > 0)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    for (int k = 0; k < SPARE_KINDS; k++)
        for (int i = 0; i < s->nready[k]; i++)
            s->l.end(s->l.ctx, s->ready[k][i], "server stopped");
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    xfree(s);
}

static void *take_locked(struct spares *s, int kind)
{
    void *item = NULL;
    /* The oldest first: every spare ages the same way, none is kept forever. */
    if (s->nready[kind] > 0) {
        item = s->ready[kind][0];
        memmove(&s->ready[kind][0], &s->ready[kind][1],
                (size_t)(s->nready[kind] - 1) * sizeof(void *));
        s->nready[kind]--;
        s->handed_out++;
        s->handing++;
        s->handing_until = clock_mono_ms() + SPARES_HANDOUT_HOLD_MS;
    }
    return item;
}

void *spares_take(struct spares *s, int kind)
{
    if (!s || kind < 0 || kind >= SPARE_KINDS)
        return NULL;
    pthread_mutex_lock(&s->mu);
    void *item = take_locked(s, kind);
    pthread_mutex_unlock(&s->mu);
    return item;
}

/* A spare of kind is being launched, or the filler is about to launch one
 * (the kind is short and not waiting after failures or for room). */
static int coming_locked(const struct spares *s, int kind, int64_t now)
{
    return s->starting[kind] || (!s->stopping && s->nready[kind] < s->target[kind] &&
                                 now >= s->failed_until[kind] && now >= s->holdoff_until);
}

static int waited_locked(const struct spares *s, int kind)
{
    for (int i = 0; i < s->nwaiting; i++)
        if (s->waiting[i].kind == kind)
            return 1;
    return 0;
}

static int org_waiting_locked(const struct spares *s, int kind, const char *org)
{
    for (int i = 0; i < s->nwaiting; i++)
        if (s->waiting[i].kind == kind && strcmp(s->waiting[i].org, org) == 0)
            return 1;
    return 0;
}

void *spares_take_wait(struct spares *s, int kind, const char *org_id)
{
    if (!s || kind < 0 || kind >= SPARE_KINDS)
        return NULL;
    const char *org = org_id ? org_id : "";
    pthread_mutex_lock(&s->mu);
    void *item = take_locked(s, kind);
    int64_t now = clock_mono_ms();
    int64_t cold = cold_estimate_locked(s, kind);
    /* Unknown (no launch of the kind finished yet): assume it ends in time. */
    int64_t left = s->est_launch[kind] > 0 && s->starting[kind]
                       ? s->est_launch[kind] - (now - s->start_at[kind])
                       : s->est_launch[kind];
    /* Not when it would come later than a cold launch started now (which
     * would itself share the cores with it). */
    if (item || !coming_locked(s, kind, now) || s->stopping || left > cold ||
        s->nwaiting >= WAITERS_MAX || org_waiting_locked(s, kind, org)) {
        pthread_mutex_unlock(&s->mu);
        return item;
    }
    struct waiter *w = &s->waiting[s->nwaiting++];
    snprintf(w->org, sizeof w->org, "%s", org);
    w->kind = kind;
    s->waited++;
    pthread_mutex_unlock(&s->mu);
    /* The spare now serves a create: its launch has the foreground. */
    if (s->l.priority)
        s->l.priority(s->l.ctx, kind, 0);
    pthread_mutex_lock(&s->mu);
    /* Bounded: a launch slower than SPARES_WAIT_FACTOR estimates is stuck, not late. */
    int64_t deadline = now + SPARES_WAIT_FACTOR * cold;
    for (;;) {
        int64_t t = clock_mono_ms();
        if (s->stopping || s->nready[kind] > 0 || t >= deadline || !coming_locked(s, kind, t))
            break;
        struct timespec ts = clock_deadline((int)(deadline - t));
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    item = s->stopping ? NULL : take_locked(s, kind);
    for (int i = 0; i < s->nwaiting; i++)
        if (s->waiting[i].kind == kind && strcmp(s->waiting[i].org, org) == 0) {
            s->waiting[i] = s->waiting[--s->nwaiting];
            break;
        }
    if (item)
        s->waited_served++;
    if (s->stopping)
        pthread_cond_broadcast(&s->cv); /* spares_stop waits for the last waiter */
    pthread_mutex_unlock(&s->mu);
    log_debug("spares: a create waited %lld ms for a %s spare being launched: %s",
              (long long)(clock_mono_ms() - now), spare_kind_name((enum spare_kind)kind),
              item ? "served" : "launching cold");
    return item;
}

void spares_cold_begin(struct spares *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->cold++;
    s->cold_until = clock_mono_ms() + cold_estimate_locked(s, -1);
    int bg[SPARE_KINDS];
    for (int k = 0; k < SPARE_KINDS; k++)
        bg[k] = s->starting[k] && !waited_locked(s, k);
    pthread_mutex_unlock(&s->mu);
    /* A spare's launch that no create waits for yields to this one. */
    for (int k = 0; k < SPARE_KINDS; k++)
        if (bg[k] && s->l.priority)
            s->l.priority(s->l.ctx, k, 1);
}

void spares_cold_end(struct spares *s, int64_t launch_ms)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    if (s->cold > 0)
        s->cold--;
    if (launch_ms >= 0)
        s->est_cold = ewma(s->est_cold, launch_ms);
    int last = s->cold == 0;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    for (int k = 0; last && k < SPARE_KINDS; k++)
        if (s->l.priority)
            s->l.priority(s->l.ctx, k, 0);
}

int64_t spares_cold_estimate_ms(struct spares *s)
{
    if (!s)
        return SPARES_COLD_ESTIMATE_MS;
    pthread_mutex_lock(&s->mu);
    int64_t v = cold_estimate_locked(s, -1);
    pthread_mutex_unlock(&s->mu);
    return v;
}

int spares_target(struct spares *s, int kind)
{
    if (!s || kind < 0 || kind >= SPARE_KINDS)
        return 0;
    return s->target[kind]; /* set once at the start */
}

void spares_counts(struct spares *s, uint64_t *launched, uint64_t *waited, uint64_t *served)
{
    *launched = *waited = *served = 0;
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    *launched = s->launched;
    *waited = s->waited;
    *served = s->waited_served;
    pthread_mutex_unlock(&s->mu);
}

void spares_handout_done(struct spares *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    if (s->handing > 0)
        s->handing--;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void spares_put_back(struct spares *s, int kind, void *item)
{
    if (!s || !item)
        return;
    pthread_mutex_lock(&s->mu);
    int keep = !s->stopping && s->nready[kind] < SPARES_MAX;
    if (keep) {
        s->ready[kind][s->nready[kind]++] = item;
        s->handed_out--;
    }
    pthread_mutex_unlock(&s->mu);
    if (!keep)
        s->l.end(s->l.ctx, item, "server stopped");
}

int spares_give_up(struct spares *s)
{
    if (!s)
        return 0;
    pthread_mutex_lock(&s->mu);
    void *item = NULL;
    /* The headless kind first: the default {} is the one most asked for. */
    for (int k = SPARE_KINDS - 1; k >= 0 && !item; k--)
        if (s->nready[k] > 0)
            item = s->ready[k][--s->nready[k]];
    s->holdoff_until = clock_mono_ms() + SPARES_HOLDOFF_MS;
    pthread_mutex_unlock(&s->mu);
    if (item)
        s->l.end(s->l.ctx, item, "a session needs the room");
    return item != NULL;
}

int spares_ready(struct spares *s, int kind)
{
    if (!s)
        return 0;
    pthread_mutex_lock(&s->mu);
    int n = 0;
    for (int k = 0; k < SPARE_KINDS; k++)
        if (kind < 0 || kind == k)
            n += s->nready[k];
    pthread_mutex_unlock(&s->mu);
    return n;
}

uint64_t spares_handed_out(struct spares *s)
{
    if (!s)
        return 0;
    pthread_mutex_lock(&s->mu);
    uint64_t n = s->handed_out;
    pthread_mutex_unlock(&s->mu);
    return n;
}
