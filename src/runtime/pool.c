/*
 * The browser pool engine (contract in pool.h; design note docs/pools.md).
 *
 * A pool's browsers move warming -> available -> acquired -> (cleaning ->
 * available | ended). A browser in the warming or cleaning state belongs to
 * the thread working on it (the filler launching it, a release cleaning it):
 * nothing else unlinks it, and that thread looks at the pool again once it
 * holds the lock (deleted meanwhile? shrunk?) before the browser joins the
 * pool. Browsers that become available serve the queue of waiters first, in
 * arrival order, so an available browser and a queued waiter never coexist
 * once the lock is released.
 *
 * The engine ends browsers and calls the session manager only with the lock
 * released: ending a session calls back into the engine (pool_browser_gone)
 * through the session's ending hook.
 */
#include "runtime/pool.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/xalloc.h"
#include "domain/pool_rules.h"
#include "proxy/cdp_page.h"
#include "runtime/sessmgr.h"

#define TICK_MS_DEFAULT 200
#define CDP_TIMEOUT_MS  5000

enum pb_state { PB_WARMING, PB_AVAILABLE, PB_ACQUIRED, PB_CLEANING };

struct pbrowser {
    char sid[POOL_SID_MAX]; /* "" while warming */
    enum pb_state state;
    int flushed; /* flushed while warming: its launch read what the flush replaces */
    struct pbrowser *next;
};

struct pool_waiter {
    struct pool_engine *g;
    struct pool *p; /* the pool whose queue holds it; NULL once settled */
    struct pool_waiter_ops ops;
    void *ctx;
    int64_t deadline_ms;
    enum pool_wait_state state;
    char sid[POOL_SID_MAX];
    struct pool_waiter *next;
};

struct pool {
    char id[32], org_id[32], project_id[32];
    char name[256];
    int64_t created_at;
    json_t *config;              /* browser_pool_config (owned) */
    struct poolrules_config cfg; /* its values, read whenever config is set */
    struct pbrowser *browsers;
    struct pool_waiter *wq; /* FIFO */
    double credit;          /* browsers the fill rate allows to start now */
    int64_t last_tick_ms;
    int deleted;
    struct pool *next;
};

struct pool_engine {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* wakes the filler */
    struct pool *pools;
    struct pool_launcher launcher;
    struct sessmgr *sessions;
    int tick_ms;
    int64_t (*now_ms)(void);
    pthread_t thread;
    int started, stopping;
    uint64_t ticks; /* filler passes */
};

/* Session ids to end once the lock is released. */
struct endlist {
    char (*ids)[POOL_SID_MAX];
    size_t n, cap;
};

static void endlist_add(struct endlist *l, const char *sid)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 8;
        l->ids = xrealloc(l->ids, l->cap * sizeof *l->ids);
    }
    snprintf(l->ids[l->n++], POOL_SID_MAX, "%s", sid);
}

/* Ends every listed browser (lock not held) and frees the list. */
static void endlist_run(struct pool_engine *g, struct endlist *l, const char *reason)
{
    for (size_t i = 0; i < l->n; i++)
        g->launcher.end(g->launcher.ctx, l->ids[i], reason);
    xfree(l->ids);
    memset(l, 0, sizeof *l);
}

/* ---- configuration ---- */

static int64_t default_wait_ms(const struct poolrules_config *cfg)
{
    double rate = cfg->fill_rate_per_minute;
    /* 100 / rate minutes, in whole seconds as before */
    return rate > 0 ? (int64_t)(6000.0 / rate) * 1000 : 0;
}

int64_t pool_default_wait_ms(const json_t *config)
{
    struct poolrules_config cfg;
    poolrules_config_from_json(config, &cfg);
    return default_wait_ms(&cfg);
}

/* ---- pools and their browsers (g->mu held) ---- */

static struct pool *find_locked(struct pool_engine *g, const char *id)
{
    for (struct pool *p = g->pools; p; p = p->next)
        if (!p->deleted && strcmp(p->id, id) == 0)
            return p;
    return NULL;
}

static int count_locked(const struct pool *p, int state)
{
    int n = 0;
    for (const struct pbrowser *b = p->browsers; b; b = b->next)
        n += state < 0 || (int)b->state == state;
    return n;
}

static struct pbrowser *browser_locked(struct pool *p, const char *sid)
{
    if (!sid[0])
        return NULL; /* a warming browser has no id yet */
    for (struct pbrowser *b = p->browsers; b; b = b->next)
        if (strcmp(b->sid, sid) == 0)
            return b;
    return NULL;
}

static struct pbrowser *first_available_locked(struct pool *p)
{
    struct pbrowser *b = p->browsers;
    while (b && b->state != PB_AVAILABLE)
        b = b->next;
    return b;
}

static void unlink_browser_locked(struct pool *p, struct pbrowser *b)
{
    for (struct pbrowser **pp = &p->browsers; *pp; pp = &(*pp)->next)
        if (*pp == b) {
            *pp = b->next;
            xfree(b);
            return;
        }
}

/* Moves every browser of p in a state of mask to l (warming and cleaning
 * browsers belong to another thread and are never taken). */
static void take_locked(struct pool *p, unsigned mask, struct endlist *l)
{
    for (struct pbrowser **pp = &p->browsers; *pp;) {
        struct pbrowser *b = *pp;
        if ((b->state == PB_AVAILABLE || b->state == PB_ACQUIRED) && (mask & (1u << b->state))) {
            endlist_add(l, b->sid);
            *pp = b->next;
            xfree(b);
        } else {
            pp = &b->next;
        }
    }
}

static void view_locked(const struct pool *p, struct pool_view *v)
{
    memset(v, 0, sizeof *v);
    snprintf(v->id, sizeof v->id, "%s", p->id);
    snprintf(v->org_id, sizeof v->org_id, "%s", p->org_id);
    snprintf(v->project_id, sizeof v->project_id, "%s", p->project_id);
    snprintf(v->name, sizeof v->name, "%s", p->name);
    v->created_at = p->created_at;
    v->config = json_deep_copy(p->config);
    v->warming = count_locked(p, PB_WARMING) + count_locked(p, PB_CLEANING);
    v->available = count_locked(p, PB_AVAILABLE);
    v->acquired = count_locked(p, PB_ACQUIRED);
}

void pool_view_clear(struct pool_view *v)
{
    if (!v)
        return;
    json_decref(v->config);
    v->config = NULL;
}

/* ---- waiters (g->mu held) ---- */

/* Takes w out of its queue with its final state and tells its owner. */
static void settle_locked(struct pool_waiter *w, enum pool_wait_state st)
{
    struct pool *p = w->p;
    for (struct pool_waiter **wp = p ? &p->wq : NULL; wp && *wp; wp = &(*wp)->next)
        if (*wp == w) {
            *wp = w->next;
            break;
        }
    w->p = NULL;
    w->next = NULL;
    w->state = st;
    w->ops.wake(w->ctx);
}

/* Serves p's queue in arrival order: available browsers go to the first
 * waiters; waiters behind them that left or whose deadline passed are
 * settled, the others keep their place. */
static void serve_locked(struct pool_engine *g, struct pool *p)
{
    int64_t now = g->now_ms();
    for (struct pool_waiter *w = p->wq, *next; w; w = next) {
        next = w->next;
        struct pbrowser *b;
        if (w->ops.gone && w->ops.gone(w->ctx)) {
            settle_locked(w, POOL_WAIT_GONE);
        } else if ((b = first_available_locked(p))) {
            b->state = PB_ACQUIRED;
            snprintf(w->sid, sizeof w->sid, "%s", b->sid);
            settle_locked(w, POOL_WAIT_GRANTED);
        } else if (now >= w->deadline_ms) {
            settle_locked(w, POOL_WAIT_TIMEOUT);
        }
    }
}

/* A browser joins p as available unless the pool already holds its size
 * (it shrank while the browser was out): then it is listed to be ended. */
static void make_available_locked(struct pool_engine *g, struct pool *p, struct pbrowser *b,
                                  struct endlist *l)
{
    if (count_locked(p, -1) > p->cfg.size) {
        endlist_add(l, b->sid);
        unlink_browser_locked(p, b);
    } else {
        b->state = PB_AVAILABLE;
        serve_locked(g, p);
    }
}

/* ---- the filler ---- */

/* Launches one browser for p (g->mu held on entry and exit, released
 * around the launch). */
static void launch_locked(struct pool_engine *g, struct pool *p)
{
    struct pbrowser *ph = xcalloc(1, sizeof *ph);
    ph->state = PB_WARMING;
    ph->next = p->browsers;
    p->browsers = ph;
    struct pool_view v;
    view_locked(p, &v);
    pthread_mutex_unlock(&g->mu);
    char sid[POOL_SID_MAX] = "";
    int rc = g->launcher.launch(g->launcher.ctx, &v, sid);
    if (rc)
        log_warn("pool %s: a browser could not be warmed (%d)", v.id, rc);
    pool_view_clear(&v);
    pthread_mutex_lock(&g->mu);
    /* ph is still linked: only this thread unlinks a warming browser. */
    struct endlist l = {0};
    const char *reason = p->deleted ? "pool deleted" : ph->flushed ? "pool flushed" : "pool shrunk";
    if (rc) {
        unlink_browser_locked(p, ph);
    } else if (p->deleted || ph->flushed) {
        endlist_add(&l, sid);
        unlink_browser_locked(p, ph);
    } else {
        snprintf(ph->sid, sizeof ph->sid, "%s", sid);
        make_available_locked(g, p, ph, &l);
    }
    if (l.n) {
        pthread_mutex_unlock(&g->mu);
        endlist_run(g, &l, reason);
        pthread_mutex_lock(&g->mu);
    }
}

/* Every tick: serve each pool's queue (deadlines, departed clients), add
 * elapsed / 60 s * fill_rate% * size to its launch credit, and start one
 * browser for the first pool whose credit reached 1 below its size. Launches
 * run one at a time, outside the lock. */
static void *filler(void *arg)
{
    struct pool_engine *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stopping) {
        struct timespec ts = clock_deadline(g->tick_ms);
        pthread_cond_timedwait(&g->cv, &g->mu, &ts);
        if (g->stopping)
            break;
        int64_t now = g->now_ms();
        struct pool *job = NULL;
        for (struct pool *p = g->pools; p; p = p->next) {
            if (p->deleted)
                continue;
            serve_locked(g, p);
            long long size = p->cfg.size;
            double rate = p->cfg.fill_rate_per_minute;
            int have = count_locked(p, -1);
            p->credit += (double)(now - p->last_tick_ms) / 60000.0 * rate / 100.0 * (double)size;
            p->last_tick_ms = now;
            if (p->credit > (double)(size - have))
                p->credit = (double)(size - have) > 1 ? (double)(size - have) : 1;
            if (have < size && p->credit >= 1.0 && !job) {
                p->credit -= 1.0;
                job = p;
            }
        }
        if (job)
            launch_locked(g, job);
        g->ticks++;
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

static int64_t default_now(void)
{
    return clock_mono_ms();
}

struct pool_engine *pool_engine_new(const struct pool_engine_opts *o)
{
    struct pool_engine *g = xcalloc(1, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    clock_cond_init(&g->cv);
    g->launcher = *o->launcher;
    g->sessions = o->sessions;
    g->tick_ms = o->tick_ms > 0 ? o->tick_ms : TICK_MS_DEFAULT;
    g->now_ms = o->now_ms ? o->now_ms : default_now;
    return g;
}

int pool_engine_start(struct pool_engine *g)
{
    if (pthread_create(&g->thread, NULL, filler, g) != 0)
        return E_INTERNAL;
    g->started = 1;
    return 0;
}

uint64_t pool_engine_ticks(struct pool_engine *g)
{
    pthread_mutex_lock(&g->mu);
    uint64_t n = g->ticks;
    pthread_mutex_unlock(&g->mu);
    return n;
}

void pool_engine_drain(struct pool_engine *g)
{
    pthread_mutex_lock(&g->mu);
    for (struct pool *p = g->pools; p; p = p->next)
        while (p->wq)
            settle_locked(p->wq, POOL_WAIT_STOPPED);
    pthread_mutex_unlock(&g->mu);
}

void pool_engine_free(struct pool_engine *g)
{
    if (!g)
        return;
    if (g->started) {
        pthread_mutex_lock(&g->mu);
        g->stopping = 1;
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->mu);
        pthread_join(g->thread, NULL);
    }
    while (g->pools) {
        struct pool *p = g->pools;
        g->pools = p->next;
        while (p->browsers) {
            struct pbrowser *b = p->browsers;
            p->browsers = b->next;
            xfree(b);
        }
        for (struct pool_waiter *w = p->wq; w; w = w->next)
            w->p = NULL; /* pool_waiter_finish must not touch the pool */
        json_decref(p->config);
        xfree(p);
    }
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    xfree(g);
}

/* ---- capacity ---- */

int pool_capacity_set(struct pool_engine *g, const char *org_id, const char *pool_id,
                      long long size, long long limit, long long *pools, long long *sessions)
{
    if (!g->sessions)
        return 0;
    return sessmgr_pool_set(g->sessions, org_id, pool_id, size, limit, pools, sessions);
}

void pool_capacity_drop(struct pool_engine *g, const char *pool_id)
{
    if (g->sessions)
        sessmgr_pool_drop(g->sessions, pool_id);
}

/* Makes the registered capacity follow a size already checked (or
 * restored from the store): no limit. */
static void capacity_follow(struct pool_engine *g, const char *org_id, const char *pool_id,
                            long long size)
{
    if (pool_capacity_set(g, org_id, pool_id, size, -1, NULL, NULL) != 0)
        log_error("pool %s: could not register its capacity", pool_id);
}

/* ---- pools ---- */

int pool_add(struct pool_engine *g, const char *id, const char *org_id, const char *project_id,
             const char *name, int64_t created_at, const json_t *config)
{
    struct pool *p = xcalloc(1, sizeof *p);
    snprintf(p->id, sizeof p->id, "%s", id);
    snprintf(p->org_id, sizeof p->org_id, "%s", org_id);
    snprintf(p->project_id, sizeof p->project_id, "%s", project_id);
    snprintf(p->name, sizeof p->name, "%s", name ? name : "");
    p->created_at = created_at;
    p->config = config ? json_deep_copy(config) : json_object();
    poolrules_config_from_json(p->config, &p->cfg);
    p->credit = 1.0; /* the first browser starts at once */
    p->last_tick_ms = g->now_ms();
    long long size = p->cfg.size;
    pthread_mutex_lock(&g->mu);
    if (find_locked(g, id)) {
        pthread_mutex_unlock(&g->mu);
        json_decref(p->config);
        xfree(p);
        return E_CONFLICT;
    }
    p->next = g->pools;
    g->pools = p;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    capacity_follow(g, org_id, id, size);
    return 0;
}

int pool_get(struct pool_engine *g, const char *id, struct pool_view *out)
{
    pthread_mutex_lock(&g->mu);
    struct pool *p = find_locked(g, id);
    if (p)
        view_locked(p, out);
    else
        memset(out, 0, sizeof *out);
    pthread_mutex_unlock(&g->mu);
    return p ? 0 : E_NOTFOUND;
}

int pool_configure(struct pool_engine *g, const char *id, const char *name, const json_t *config,
                   int discard_idle)
{
    struct endlist l = {0};
    json_t *copy = json_deep_copy(config);
    pthread_mutex_lock(&g->mu);
    struct pool *p = find_locked(g, id);
    if (!p) {
        pthread_mutex_unlock(&g->mu);
        json_decref(copy);
        return E_NOTFOUND;
    }
    json_t *old = p->config;
    p->config = copy;
    poolrules_config_from_json(p->config, &p->cfg);
    snprintf(p->name, sizeof p->name, "%s", name ? name : "");
    long long size = p->cfg.size;
    if (discard_idle) {
        take_locked(p, 1u << PB_AVAILABLE, &l);
        p->credit = (double)l.n; /* rebuilt at once, not at the fill rate */
    } else {
        /* Shrunk: available browsers beyond the new size go, the most
         * recently warmed first (the list is newest first). */
        for (struct pbrowser *b = p->browsers, *next; b && count_locked(p, -1) > size; b = next) {
            next = b->next;
            if (b->state == PB_AVAILABLE) {
                endlist_add(&l, b->sid);
                unlink_browser_locked(p, b);
            }
        }
    }
    char org[32];
    snprintf(org, sizeof org, "%s", p->org_id);
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    json_decref(old);
    capacity_follow(g, org, id, size);
    endlist_run(g, &l, "pool updated");
    return 0;
}

int pool_leased(struct pool_engine *g, const char *id)
{
    pthread_mutex_lock(&g->mu);
    struct pool *p = find_locked(g, id);
    int n = p ? count_locked(p, PB_ACQUIRED) : 0;
    pthread_mutex_unlock(&g->mu);
    return n;
}

void pool_engine_totals(struct pool_engine *g, struct pool_totals *t)
{
    memset(t, 0, sizeof *t);
    pthread_mutex_lock(&g->mu);
    for (struct pool *p = g->pools; p; p = p->next) {
        if (p->deleted)
            continue;
        t->size += p->cfg.size;
        for (const struct pbrowser *b = p->browsers; b; b = b->next) {
            t->available += b->state == PB_AVAILABLE;
            t->acquired += b->state == PB_ACQUIRED;
        }
        for (const struct pool_waiter *w = p->wq; w; w = w->next)
            t->waiters++;
    }
    pthread_mutex_unlock(&g->mu);
}

int pool_delete(struct pool_engine *g, const char *id)
{
    struct endlist l = {0};
    pthread_mutex_lock(&g->mu);
    struct pool *p = find_locked(g, id);
    if (!p) {
        pthread_mutex_unlock(&g->mu);
        return E_NOTFOUND;
    }
    p->deleted = 1;
    take_locked(p, (1u << PB_AVAILABLE) | (1u << PB_ACQUIRED), &l);
    while (p->wq)
        settle_locked(p->wq, POOL_WAIT_DELETED);
    pthread_mutex_unlock(&g->mu);
    pool_capacity_drop(g, id);
    endlist_run(g, &l, "pool deleted");
    return 0;
}

void pool_delete_all(struct pool_engine *g)
{
    for (;;) {
        char id[POOL_SID_MAX] = "";
        pthread_mutex_lock(&g->mu);
        for (struct pool *p = g->pools; p && !id[0]; p = p->next)
            if (!p->deleted)
                snprintf(id, sizeof id, "%s", p->id);
        pthread_mutex_unlock(&g->mu);
        if (!id[0] || pool_delete(g, id) != 0)
            return;
    }
}

int pool_flush(struct pool_engine *g, const char *id)
{
    struct endlist l = {0};
    pthread_mutex_lock(&g->mu);
    struct pool *p = find_locked(g, id);
    if (p) {
        take_locked(p, 1u << PB_AVAILABLE, &l);
        /* A browser being launched loaded the profile as it was before the
         * flush: it is ended when its launch returns, not handed out (the
         * filler replaces it). */
        for (struct pbrowser *b = p->browsers; b; b = b->next)
            if (b->state == PB_WARMING)
                b->flushed = 1;
        pthread_cond_broadcast(&g->cv);
    }
    pthread_mutex_unlock(&g->mu);
    endlist_run(g, &l, "pool flushed");
    return p ? 0 : E_NOTFOUND;
}

/* ---- leases ---- */

int pool_release(struct pool_engine *g, const char *id, const char *sid, int reuse)
{
    struct endlist l = {0};
    pthread_mutex_lock(&g->mu);
    struct pool *p = find_locked(g, id);
    struct pbrowser *b = p ? browser_locked(p, sid) : NULL;
    if (!b || b->state != PB_ACQUIRED) {
        pthread_mutex_unlock(&g->mu);
        return E_NOTFOUND;
    }
    if (!reuse) {
        unlink_browser_locked(p, b);
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->mu);
        g->launcher.end(g->launcher.ctx, sid, "released");
        return 0;
    }
    b->state = PB_CLEANING; /* neither leased nor available */
    struct pool_view v;
    view_locked(p, &v);
    pthread_mutex_unlock(&g->mu);
    int clean = g->launcher.clean(g->launcher.ctx, &v, sid);
    pool_view_clear(&v);
    pthread_mutex_lock(&g->mu);
    /* Still linked unless the browser ended on its own meanwhile
     * (pool_browser_gone); a delete leaves cleaning browsers to us. */
    const char *reason = "released (could not be cleaned)";
    if ((b = browser_locked(p, sid))) {
        if (clean != 0 || p->deleted) {
            if (p->deleted)
                reason = "pool deleted";
            endlist_add(&l, sid);
            unlink_browser_locked(p, b);
        } else {
            reason = "pool shrunk";
            make_available_locked(g, p, b, &l);
        }
    }
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    endlist_run(g, &l, reason);
    return 0;
}

void pool_put_back(struct pool_engine *g, const char *id, const char *sid)
{
    struct endlist l = {0};
    pthread_mutex_lock(&g->mu);
    struct pool *p = find_locked(g, id);
    struct pbrowser *b = p ? browser_locked(p, sid) : NULL;
    if (b && b->state == PB_ACQUIRED)
        make_available_locked(g, p, b, &l);
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    endlist_run(g, &l, "pool shrunk");
}

void pool_browser_gone(struct pool_engine *g, const char *id, const char *sid)
{
    pthread_mutex_lock(&g->mu);
    for (struct pool *p = g->pools; p; p = p->next) {
        struct pbrowser *b = strcmp(p->id, id) == 0 ? browser_locked(p, sid) : NULL;
        if (b)
            unlink_browser_locked(p, b);
    }
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* ---- waiters ---- */

int pool_acquire(struct pool_engine *g, const char *id, int64_t wait_ms,
                 const struct pool_waiter_ops *ops, void *ctx, char *sid, struct pool_waiter **w)
{
    sid[0] = '\0';
    *w = NULL;
    pthread_mutex_lock(&g->mu);
    struct pool *p = find_locked(g, id);
    if (!p) {
        pthread_mutex_unlock(&g->mu);
        return E_NOTFOUND;
    }
    /* An available browser implies an empty queue (serve_locked runs
     * whenever one becomes available), so this keeps first come, first
     * served. */
    struct pbrowser *b = p->wq ? NULL : first_available_locked(p);
    if (b) {
        b->state = PB_ACQUIRED;
        snprintf(sid, POOL_SID_MAX, "%s", b->sid);
        pthread_mutex_unlock(&g->mu);
        return 0;
    }
    if (!ops)
        wait_ms = 0;
    else if (wait_ms < 0)
        wait_ms = default_wait_ms(&p->cfg);
    if (wait_ms <= 0) {
        pthread_mutex_unlock(&g->mu);
        return E_LIMIT;
    }
    struct pool_waiter *nw = xcalloc(1, sizeof *nw);
    nw->g = g;
    nw->p = p;
    nw->ops = *ops;
    nw->ctx = ctx;
    nw->deadline_ms = g->now_ms() + wait_ms;
    nw->state = POOL_WAIT_QUEUED;
    struct pool_waiter **tail = &p->wq;
    while (*tail)
        tail = &(*tail)->next;
    *tail = nw;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    *w = nw;
    return 0;
}

enum pool_wait_state pool_waiter_state(struct pool_waiter *w, char *sid)
{
    pthread_mutex_lock(&w->g->mu);
    enum pool_wait_state st = w->state;
    if (sid)
        snprintf(sid, POOL_SID_MAX, "%s", st == POOL_WAIT_GRANTED ? w->sid : "");
    pthread_mutex_unlock(&w->g->mu);
    return st;
}

enum pool_wait_state pool_waiter_finish(struct pool_waiter *w, char *sid)
{
    if (sid)
        sid[0] = '\0';
    if (!w)
        return POOL_WAIT_QUEUED;
    pthread_mutex_lock(&w->g->mu);
    struct pool *p = w->p;
    for (struct pool_waiter **wp = p ? &p->wq : NULL; wp && *wp; wp = &(*wp)->next)
        if (*wp == w) {
            *wp = w->next;
            break;
        }
    enum pool_wait_state st = w->state;
    if (sid && st == POOL_WAIT_GRANTED)
        snprintf(sid, POOL_SID_MAX, "%s", w->sid);
    pthread_mutex_unlock(&w->g->mu);
    xfree(w);
    return st;
}

/* ---- Chromium helpers (DevTools) ---- */

void pool_cdp_navigate(const char *ws, const char *url)
{
    cdp_page_navigate_first(ws, url, CDP_TIMEOUT_MS);
}
