/*
 * Browser pools: warm, identically configured browsers handed over on
 * acquire (issue 5; the interface document's GET and PATCH
 * /browser_pools/{id_or_name}; KERNEL_API.md for the rest).
 *
 * A pool is a row in the store (its browser_pool_config) plus, in memory, the
 * list of its browsers and the queue of callers waiting to acquire one. Pool
 * browsers are ordinary sessions whose settings carry "pool": {id, name}. A
 * filler thread keeps each pool at `size` browsers, launching at
 * fill_rate_per_minute percent of size per minute, and serves waiters first
 * come, first served. Waiting acquirers are parked with req_suspend, so they
 * hold no HTTP thread.
 *
 * Locking: one mutex (P.mu) guards every pool's lists and queues. Nothing slow
 * (launching, CDP, the store) runs under it.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "api/pools.h"
#include "api/profiles.h"
#include "api/proxies.h"
#include "telemetry/telemetry.h"
#include "api/session_ext.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/xalloc.h"
#include "domain/entitlements.h"
#include "domain/pool_rules.h"
#include "proxy/cdp_client.h"
#include "runtime/sessmgr.h"

#define CDP_TIMEOUT_MS 5000
#define TICK_MS        200

enum pb_state { PB_WARMING, PB_AVAILABLE, PB_ACQUIRED };

struct pbrowser {
    char sid[32];
    enum pb_state state;
    struct pbrowser *next;
};

struct waiter {
    struct req *rq;
    struct pool *pool;
    int64_t deadline_ms;
    char sid[32]; /* the browser handed over; "" = none (204) */
    int resumed;
    struct poolrules_lease lease;
    char pool_id[32];
    struct waiter *next;
};

struct pool {
    char id[32], org_id[32], project_id[32];
    char name[256];
    int64_t created_at;
    json_t *config; /* browser_pool_config (owned) */
    struct pbrowser *browsers;
    struct waiter *wq; /* FIFO */
    double credit;     /* browsers the fill rate allows to start now */
    int64_t last_tick_ms;
    int deleted;
    struct pool *next;
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct pool *pools;
    struct app *app;
    pthread_t thread;
    int started, stopping;
} P = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0, 0, 0};

/* ---- in-memory state (P.mu held) ---- */

static struct pool *find_locked(const char *id)
{
    for (struct pool *p = P.pools; p; p = p->next)
        if (!p->deleted && strcmp(p->id, id) == 0)
            return p;
    return NULL;
}

static long long cfg_int(const json_t *cfg, const char *k, long long dflt)
{
    json_t *v = json_object_get(cfg, k);
    return json_is_integer(v) ? json_integer_value(v) : dflt;
}

static double cfg_num(const json_t *cfg, const char *k, double dflt)
{
    json_t *v = json_object_get(cfg, k);
    return json_is_number(v) ? json_number_value(v) : dflt;
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
    for (struct pbrowser *b = p->browsers; b; b = b->next)
        if (strcmp(b->sid, sid) == 0)
            return b;
    return NULL;
}

static void remove_browser_locked(struct pool *p, const char *sid)
{
    for (struct pbrowser **pp = &p->browsers; *pp; pp = &(*pp)->next)
        if (strcmp((*pp)->sid, sid) == 0) {
            struct pbrowser *b = *pp;
            *pp = b->next;
            xfree(b);
            return;
        }
}

/* ---- records ---- */

static json_t *render_pool(const struct pool *p)
{
    char t[40];
    json_t *r = json_object();
    json_object_set_new(r, "id", json_string(p->id));
    if (p->name[0])
        json_object_set_new(r, "name", json_string(p->name));
    json_object_set_new(r, "region", json_string(P.app->cfg.region));
    json_object_set_new(r, "created_at",
                        json_string(clock_fmt_rfc3339(p->created_at, t, sizeof t)));
    pthread_mutex_lock(&P.mu);
    json_object_set_new(r, "acquired_count", json_integer(count_locked(p, PB_ACQUIRED)));
    json_object_set_new(r, "available_count", json_integer(count_locked(p, PB_AVAILABLE)));
    json_object_set_new(r, "browser_pool_config", json_deep_copy(p->config));
    pthread_mutex_unlock(&P.mu);
    /* Extensions are not served yet (a pool with extensions is refused), so
     * the resolved list is always empty; profile_id resolves the selector. */
    json_object_set_new(r, "extension_ids", json_array());
    /* profile_id is the resolved id, whether the selector named an id or a
     * name; omitted when no profile is attached (or it was deleted since). */
    struct profile_rec pr;
    struct err e;
    err_init(&e);
    json_t *sel = json_object_get(json_object_get(r, "browser_pool_config"), "profile");
    if (sel && profiles_resolve(P.app, p->org_id, p->project_id, sel, &pr, &e) == 0)
        json_object_set_new(r, "profile_id", json_string(pr.id));
    return r;
}

/* ---- launching ---- */

/* The POST /browsers body a pool browser is launched from. */
static json_t *spawn_body(const json_t *cfg)
{
    static const char *const copied[] = {"headless",      "stealth", "kiosk_mode", "viewport",
                                         "chrome_policy", "network", "start_url",  "profile",
                                         "proxy_id",      NULL};
    json_t *b = json_object();
    for (size_t i = 0; copied[i]; i++) {
        json_t *v = json_object_get(cfg, copied[i]);
        if (v && !(json_is_string(v) && json_string_length(v) == 0))
            json_object_set(b, copied[i], v);
    }
    json_object_set_new(b, "timeout_seconds",
                        json_integer(cfg_int(cfg, "timeout_seconds", POOLRULES_TIMEOUT_DEFAULT)));
    json_t *tel = json_object_get(cfg, "telemetry");
    if (json_is_object(tel))
        json_object_set_new(b, "telemetry",
                            json_pack("{s:O}", "browser", json_object_get(tel, "browser")));
    return b;
}

/* Launches one browser for pool p (P.mu not held). Returns 0 and the
 * session id in sid, or an error (logged). */
static int launch_one(const char *pool_id, char *sid, size_t cap)
{
    pthread_mutex_lock(&P.mu);
    struct pool *p = find_locked(pool_id);
    if (!p) {
        pthread_mutex_unlock(&P.mu);
        return E_NOTFOUND;
    }
    json_t *body = spawn_body(p->config);
    json_t *extra = json_pack("{s:{s:s}}", "pool", "id", p->id);
    if (p->name[0])
        json_object_set_new(json_object_get(extra, "pool"), "name", json_string(p->name));
    char org[32], project[32];
    snprintf(org, sizeof org, "%s", p->org_id);
    snprintf(project, sizeof project, "%s", p->project_id);
    pthread_mutex_unlock(&P.mu);

    struct err e;
    err_init(&e);
    struct org_rec o;
    memset(&o, 0, sizeof o);
    json_t *ent = NULL;
    int rc = store_org_get(P.app->store, org, &o);
    if (rc == 0)
        rc = api_resolve_entitlements(P.app->store, &o, &ent, &e);
    org_rec_clear(&o);
    struct session_rec s;
    if (rc == 0)
        rc = browsers_spawn(P.app, org, project, ent, body, extra, 1, &s, &e);
    json_decref(ent);
    json_decref(body);
    json_decref(extra);
    if (rc) {
        log_warn("pool %s: a browser could not be warmed: %s", pool_id, e.message);
        return rc;
    }
    snprintf(sid, cap, "%s", s.id);
    session_rec_clear(&s);
    return 0;
}

/* ---- leases ---- */

/* Navigates the first page, or closes every page but one and clears cookies
 * (release with reuse). Best effort: a browser that does not answer is
 * reported and the caller decides. */
static int cdp_first_page(struct cdp_client *cc, char *out, size_t cap, json_t **all, struct err *e)
{
    json_t *res = NULL;
    int rc = cdp_client_call(cc, NULL, "Target.getTargets", NULL, 1, CDP_TIMEOUT_MS, &res, e);
    if (rc)
        return rc;
    json_t *infos = json_object_get(res, "targetInfos");
    size_t i;
    json_t *t;
    rc = E_NOTFOUND;
    json_array_foreach(infos, i, t)
    {
        const char *type = jsonx_str(t, "type");
        if (type && strcmp(type, "page") == 0 && rc != 0) {
            snprintf(out, cap, "%s", jsonx_str(t, "targetId"));
            rc = 0;
        }
    }
    if (all)
        *all = json_incref(infos);
    json_decref(res);
    return rc;
}

/* Navigates target to url; wait: also wait until the navigation committed. */
static void navigate(struct cdp_client *cc, const char *target, const char *url, int wait)
{
    struct err e;
    err_init(&e);
    json_t *res = NULL, *ignored = NULL;
    json_t *p = json_pack("{s:s,s:b}", "targetId", target, "flatten", 1);
    if (cdp_client_call(cc, NULL, "Target.attachToTarget", p, 1, CDP_TIMEOUT_MS, &res, &e) == 0) {
        json_t *np = json_pack("{s:s}", "url", url);
        if (cdp_client_call(cc, jsonx_str(res, "sessionId"), "Page.navigate", np, wait,
                            CDP_TIMEOUT_MS, &ignored, &e) != 0)
            log_debug("pool navigate %s: %s", url, e.message);
        json_decref(np);
    }
    json_decref(p);
    json_decref(res);
    json_decref(ignored);
}

/* The origin ("scheme://host[:port]") of an http(s) URL into out; 0 if none. */
static int origin_of(const char *url, char *out, size_t cap)
{
    const char *p = strstr(url, "://");
    if (!p || (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0))
        return 0;
    const char *end = strchr(p + 3, '/');
    size_t n = end ? (size_t)(end - url) : strlen(url);
    if (n + 1 > cap)
        return 0;
    memcpy(out, url, n);
    out[n] = '\0';
    return 1;
}

/* Resets a released browser: one page left (the first, navigated to the
 * pool's start_url or about:blank; reusing it avoids starting a renderer),
 * every other page closed, cookies cleared, and the storage of every origin
 * its pages showed cleared. Returns 0 when the browser answered. */
static int clean_browser(const char *ws, const char *start_url)
{
    struct err e;
    err_init(&e);
    struct cdp_client *cc;
    if (cdp_client_open(ws, CDP_TIMEOUT_MS, &cc, &e) != 0)
        return E_UNAVAIL;
    json_t *all = NULL;
    char keep[128];
    int rc = cdp_first_page(cc, keep, sizeof keep, &all, &e);
    if (rc == E_NOTFOUND) { /* no page at all: make one */
        json_t *res = NULL, *params = json_pack("{s:s}", "url", "about:blank");
        rc = cdp_client_call(cc, NULL, "Target.createTarget", params, 1, CDP_TIMEOUT_MS, &res, &e);
        snprintf(keep, sizeof keep, "%s", rc == 0 ? jsonx_str(res, "targetId") : "");
        json_decref(params); /* cdp_client_call borrows params */
        json_decref(res);
    }
    json_t *origins = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(all, i, t)
    {
        const char *type = jsonx_str(t, "type"), *id = jsonx_str(t, "targetId");
        const char *url = jsonx_str(t, "url");
        char origin[512];
        if (url && origin_of(url, origin, sizeof origin))
            json_array_append_new(origins, json_string(origin));
        if (!type || !id || strcmp(id, keep) == 0 || strcmp(type, "page") != 0)
            continue;
        /* Waited for: a page still open could finish a request (a favicon,
         * say) after the cookies were cleared and set one again. */
        json_t *p = json_pack("{s:s}", "targetId", id), *r = NULL;
        if (cdp_client_call(cc, NULL, "Target.closeTarget", p, 1, CDP_TIMEOUT_MS, &r, &e) != 0)
            log_debug("pool release: closeTarget: %s", e.message);
        json_decref(r);
        json_decref(p);
    }
    json_decref(all);
    if (rc == 0 && keep[0])
        navigate(cc, keep, start_url && *start_url ? start_url : "about:blank", 1);
    json_array_foreach(origins, i, t)
    {
        json_t *p = json_pack("{s:O,s:s}", "origin", t, "storageTypes", "all");
        if (cdp_client_call(cc, NULL, "Storage.clearDataForOrigin", p, 0, 0, NULL, &e) != 0)
            log_debug("pool release: clearDataForOrigin: %s", e.message);
        json_decref(p);
    }
    json_decref(origins);
    if (rc == 0) {
        /* Waiting for this answer also waits for every command sent before it:
         * a DevTools connection answers in order. */
        json_t *none = json_object();
        /* A response already on its way when the pages closed can still set
         * a cookie: clear until none is left (a few rounds at most). */
        for (int round = 0; rc == 0 && round < 3; round++) {
            json_t *r2 = NULL;
            if (round) {
                struct timespec ts = {0, 50 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
            rc =
                cdp_client_call(cc, NULL, "Storage.clearCookies", none, 1, CDP_TIMEOUT_MS, &r2, &e);
            json_decref(r2);
            r2 = NULL;
            int clean = rc == 0 &&
                        cdp_client_call(cc, NULL, "Storage.getCookies", none, 1, CDP_TIMEOUT_MS,
                                        &r2, &e) == 0 &&
                        json_array_size(json_object_get(r2, "cookies")) == 0;
            json_decref(r2);
            if (clean)
                break;
        }
        json_decref(none);
    }
    cdp_client_close(cc);
    return rc;
}

/* Loads a pool browser's session row. */
static int load_row(const struct pool *p, const char *sid, struct session_rec *s)
{
    memset(s, 0, sizeof *s);
    return store_session_get(P.app->store, p->org_id, p->project_id, sid, 0, s);
}

/* Applies a lease (name, tags, telemetry, start_url) to an acquired browser
 * and renders its record. On failure the caller puts the browser back. */
static int apply_lease(struct pool *p, const char *sid, const struct poolrules_lease *lease,
                       json_t **record, struct err *e)
{
    struct session_rec s;
    int rc = load_row(p, sid, &s);
    if (rc)
        return err_set(e, E_INTERNAL, "internal", "pool browser %s vanished", sid);
    json_t *d = json_loads(s.data, 0, NULL);
    /* The lease state itself lives in memory (a restart ends every pool
     * browser anyway); the store is written only when the lease sets
     * something a client can read back, which keeps a plain acquire fast. */
    int changed = lease->name[0] || lease->tags || lease->telemetry_given || lease->start_url[0];
    snprintf(s.name, sizeof s.name, "%s", lease->name);
    if (lease->tags)
        json_object_set(d, "tags", lease->tags);
    if (lease->telemetry_given)
        json_object_set(d, "telemetry", lease->telemetry ? lease->telemetry : json_null());
    if (lease->start_url[0])
        json_object_set_new(d, "start_url", json_string(lease->start_url));
    xfree(s.data);
    s.data = jsonx_dump(d);
    if (changed)
        rc = store_session_update(P.app->store, &s);
    if (rc == 0 && lease->telemetry_given)
        telemetry_session_configure(sid, lease->telemetry);
    if (rc == E_CONFLICT)
        err_set(e, rc, "conflict", "an active session named %s already exists", s.name);
    struct live *l = rc == 0 ? sessmgr_get(P.app->sessions, sid) : NULL;
    if (l) {
        live_set_timeout(l, (int)cfg_int(p->config, "timeout_seconds", POOLRULES_TIMEOUT_DEFAULT));
        char ws[512];
        if (lease->start_url[0] && live_ws_url(l, ws, sizeof ws) == 0) {
            struct cdp_client *cc;
            char target[128];
            if (cdp_client_open(ws, CDP_TIMEOUT_MS, &cc, e) == 0) {
                if (cdp_first_page(cc, target, sizeof target, NULL, e) == 0)
                    navigate(cc, target, lease->start_url, 0);
                cdp_client_close(cc);
            }
        }
        sessmgr_put(l);
        *record = browsers_render(P.app, &s);
    } else if (rc == 0) {
        rc = err_set(e, E_INTERNAL, "internal", "pool browser %s is not running", sid);
    }
    json_decref(d);
    session_rec_clear(&s);
    return rc;
}

/* Returns an acquired browser to the pool as available, without cleaning
 * (used when a lease could not be delivered: nothing touched the browser). */
static void put_back(const char *pool_id, const char *sid)
{
    pthread_mutex_lock(&P.mu);
    struct pool *p = find_locked(pool_id);
    struct pbrowser *b = p ? browser_locked(p, sid) : NULL;
    if (b)
        b->state = PB_AVAILABLE;
    pthread_cond_broadcast(&P.cv);
    pthread_mutex_unlock(&P.mu);
    struct live *l = sessmgr_get(P.app->sessions, sid);
    if (l) {
        live_set_timeout(l, 0);
        sessmgr_put(l);
    }
}

/* ---- the filler ---- */

struct launch_job {
    char pool_id[32];
};

static void *filler(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&P.mu);
    while (!P.stopping) {
        struct timespec ts = clock_deadline(TICK_MS);
        pthread_cond_timedwait(&P.cv, &P.mu, &ts);
        if (P.stopping)
            break;
        int64_t now = clock_mono_ms();
        struct launch_job job = {{0}};
        for (struct pool *p = P.pools; p; p = p->next) {
            if (p->deleted)
                continue;
            /* Waiters: hand over available browsers in arrival order; time
             * out or drop those whose client left. */
            for (struct waiter **wp = &p->wq; *wp;) {
                struct waiter *w = *wp;
                struct pbrowser *b = NULL;
                for (b = p->browsers; b && b->state != PB_AVAILABLE; b = b->next)
                    ;
                int gone = req_client_gone(w->rq);
                if (!gone && b) {
                    b->state = PB_ACQUIRED;
                    snprintf(w->sid, sizeof w->sid, "%s", b->sid);
                } else if (!gone && now < w->deadline_ms) {
                    break; /* first in line keeps its place; later ones wait behind */
                }
                *wp = w->next;
                w->resumed = 1;
                req_resume(w->rq); /* 200 with the browser, or 204 */
            }
            long long size = cfg_int(p->config, "size", 1);
            double rate = cfg_num(p->config, "fill_rate_per_minute", POOLRULES_FILL_RATE_DEFAULT);
            int have = count_locked(p, -1);
            p->credit += (double)(now - p->last_tick_ms) / 60000.0 * rate / 100.0 * (double)size;
            p->last_tick_ms = now;
            if (p->credit > (double)(size - have))
                p->credit = (double)(size - have) > 1 ? (double)(size - have) : 1;
            if (have < size && p->credit >= 1.0 && !job.pool_id[0]) {
                p->credit -= 1.0;
                snprintf(job.pool_id, sizeof job.pool_id, "%s", p->id);
            }
        }
        if (job.pool_id[0]) {
            struct pool *p = find_locked(job.pool_id);
            struct pbrowser *ph = xcalloc(1, sizeof *ph);
            ph->state = PB_WARMING;
            snprintf(ph->sid, sizeof ph->sid, "warming-%p", (void *)ph);
            ph->next = p->browsers;
            p->browsers = ph;
            pthread_mutex_unlock(&P.mu);
            char sid[32];
            int rc = launch_one(job.pool_id, sid, sizeof sid);
            pthread_mutex_lock(&P.mu);
            p = find_locked(job.pool_id);
            int keep = p && rc == 0;
            /* ph is still linked unless the pool was deleted meanwhile. */
            struct pool *owner = NULL;
            for (struct pool *q = P.pools; q && !owner; q = q->next)
                for (struct pbrowser *b = q->browsers; b; b = b->next)
                    if (b == ph)
                        owner = q;
            if (owner) {
                if (keep) {
                    snprintf(ph->sid, sizeof ph->sid, "%s", sid);
                    ph->state = PB_AVAILABLE;
                } else {
                    remove_browser_locked(owner, ph->sid);
                }
            } else {
                xfree(ph);
            }
            if (rc == 0 && !keep) {
                /* The pool went away while the browser warmed. */
                pthread_mutex_unlock(&P.mu);
                browsers_end(P.app, sid, "pool deleted");
                pthread_mutex_lock(&P.mu);
            }
            pthread_cond_broadcast(&P.cv); /* serve waiters at once */
        }
    }
    pthread_mutex_unlock(&P.mu);
    return NULL;
}

/* ---- the session module: pool browsers that end on their own ---- */

static void pool_ending(struct session_ctx *sc, const char *reason)
{
    (void)reason;
    const char *pool_id = jsonx_str(json_object_get(sc->doc, "pool"), "id");
    if (!pool_id)
        return;
    pthread_mutex_lock(&P.mu);
    for (struct pool *p = P.pools; p; p = p->next)
        if (strcmp(p->id, pool_id) == 0)
            remove_browser_locked(p, sc->rec->id);
    pthread_cond_broadcast(&P.cv);
    pthread_mutex_unlock(&P.mu);
}

static const struct session_ext pools_ext = {
    .name = "pools",
    .ending = pool_ending,
};

/* ---- handlers ---- */

static int load_pool(struct req *rq, struct pool_rec *out)
{
    struct auth *a = api_auth(rq);
    memset(out, 0, sizeof *out);
    int rc = store_pool_get(api_app(rq)->store, a->org.id, a->project.id, rq->params[0], out);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "browser pool %s not found", rq->params[0]);
    return rc;
}

/* Registers pool_id's size with the session manager, which checks the org's
 * limit under the same lock as session creates: 403 when the org's pools and
 * live sessions would hold more browsers than its limit (nothing changes). */
static int check_capacity(struct req *rq, const char *pool_id, long long size)
{
    const json_t *ent;
    int rc = api_entitlements(rq, &ent);
    if (rc)
        return rc;
    int64_t lim;
    long long limit = ent_limit(ent, "max_concurrent_browsers", &lim) ? lim : -1;
    long long sum = 0, live = 0;
    if (sessmgr_pool_set(api_app(rq)->sessions, api_auth(rq)->org.id, pool_id, size, limit, &sum,
                         &live) != 0)
        return err_set(&rq->err, E_FORBIDDEN, "pool_limit_exceeded",
                       "the sum of all pool sizes (%lld) and live sessions (%lld) would exceed "
                       "limits.max_concurrent_browsers (%lld)",
                       sum, live, limit);
    return 0;
}

/* Fields of a pool configuration this server cannot serve yet. */
static int unsupported_config(struct req *rq, const json_t *cfg)
{
    json_t *ext = json_object_get(cfg, "extensions");
    if (json_array_size(ext) > 0)
        return err_set(&rq->err, E_NOTIMPL, "not_implemented",
                       "extensions: extensions are not served by this server");
    /* The profile must exist now, not only when a browser is warmed. */
    json_t *prof = json_object_get(cfg, "profile");
    struct profile_rec pr;
    if (prof && profiles_resolve(api_app(rq), api_auth(rq)->org.id, api_auth(rq)->project.id, prof,
                                 &pr, &rq->err) != 0)
        return rq->err.rc;
    const char *proxy = jsonx_str(cfg, "proxy_id");
    char id[64];
    if (proxy && *proxy)
        return proxies_resolve_ref(api_auth(rq)->org.id, api_auth(rq)->project.id, proxy, id,
                                   sizeof id, &rq->err);
    return 0;
}

static struct pool *pool_new(const struct pool_rec *r)
{
    struct pool *p = xcalloc(1, sizeof *p);
    snprintf(p->id, sizeof p->id, "%s", r->id);
    snprintf(p->org_id, sizeof p->org_id, "%s", r->org_id);
    snprintf(p->project_id, sizeof p->project_id, "%s", r->project_id);
    snprintf(p->name, sizeof p->name, "%s", r->name);
    p->created_at = r->created_at;
    p->config = json_loads(r->config, 0, NULL);
    if (!p->config)
        p->config = json_object();
    p->credit = 1.0; /* the first browser starts at once */
    p->last_tick_ms = clock_mono_ms();
    return p;
}

int pools_create(struct req *rq, struct resp *rs)
{
    struct auth *a = api_auth(rq);
    int rc = api_require_feature(rq, "browser_pools");
    json_t *body = NULL, *cfg = NULL;
    if (rc || (rc = req_json_object(rq, 0, &body)))
        return rc;
    rc = poolrules_validate_create(body, &cfg, &rq->err);
    json_decref(body);
    struct pool_rec r;
    memset(&r, 0, sizeof r);
    crypto_new_id(r.id);
    if (rc == 0 && (rc = unsupported_config(rq, cfg)) == 0)
        rc = check_capacity(rq, r.id, cfg_int(cfg, "size", 1));
    if (rc) {
        json_decref(cfg);
        return rc;
    }
    snprintf(r.org_id, sizeof r.org_id, "%s", a->org.id);
    snprintf(r.project_id, sizeof r.project_id, "%s", a->project.id);
    const char *name = jsonx_str(cfg, "name");
    snprintf(r.name, sizeof r.name, "%s", name ? name : "");
    snprintf(r.status, sizeof r.status, "active");
    r.created_at = clock_now_ms();
    r.config = jsonx_dump(cfg);
    json_decref(cfg);
    rc = store_pool_insert(api_app(rq)->store, &r);
    if (rc == E_CONFLICT)
        err_set(&rq->err, rc, "conflict", "a browser pool named %s already exists", r.name);
    if (rc) {
        sessmgr_pool_drop(api_app(rq)->sessions, r.id);
        pool_rec_clear(&r);
        return rc;
    }
    struct pool *p = pool_new(&r);
    pool_rec_clear(&r);
    pthread_mutex_lock(&P.mu);
    p->next = P.pools;
    P.pools = p;
    pthread_cond_broadcast(&P.cv);
    pthread_mutex_unlock(&P.mu);
    log_info("pool %s created", p->id);
    resp_json(rs, 200, render_pool(p));
    return 0;
}

/* The in-memory pool of a stored row (P.mu not held; the pointer stays valid:
 * pools are never freed while the server runs, only marked deleted). */
static struct pool *live_pool(const struct pool_rec *r)
{
    pthread_mutex_lock(&P.mu);
    struct pool *p = find_locked(r->id);
    pthread_mutex_unlock(&P.mu);
    return p;
}

int pools_get(struct req *rq, struct resp *rs)
{
    struct pool_rec r;
    int rc = api_require_feature(rq, "browser_pools");
    if (rc || (rc = load_pool(rq, &r)))
        return rc;
    struct pool *p = live_pool(&r);
    pool_rec_clear(&r);
    if (!p)
        return err_set(&rq->err, E_NOTFOUND, "not_found", "browser pool %s not found",
                       rq->params[0]);
    resp_json(rs, 200, render_pool(p));
    return 0;
}

int pools_list(struct req *rq, struct resp *rs)
{
    struct page pg = {0};
    int rc = api_require_feature(rq, "browser_pools");
    if (rc || (rc = req_page(rq, &pg.limit, &pg.offset)))
        return rc;
    struct pool_rec *rows = NULL;
    size_t n = 0;
    struct auth *a = api_auth(rq);
    rc = store_pool_list(api_app(rq)->store, a->org.id, a->project.id, req_query(rq, "name"),
                         req_query(rq, "query"), &pg, &rows, &n);
    if (rc)
        return rc;
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        struct pool *p = live_pool(&rows[i]);
        if (p)
            json_array_append_new(arr, render_pool(p));
        pool_rec_clear(&rows[i]);
    }
    xfree(rows);
    resp_json(rs, 200, arr);
    resp_page(rs, pg.offset, n, pg.has_more);
    return 0;
}

/* Ends the listed session ids (P.mu not held). */
static void end_all(char (*ids)[32], size_t n, const char *reason)
{
    for (size_t i = 0; i < n; i++)
        browsers_end(P.app, ids[i], reason);
}

/* Takes every browser of p in a state matching mask out of the pool (P.mu
 * held); returns the ids to end. */
static size_t take_locked(struct pool *p, unsigned mask, char (**ids)[32])
{
    size_t n = 0, cap = (size_t)count_locked(p, -1) + 1;
    *ids = xcalloc(cap, sizeof **ids);
    for (struct pbrowser **pp = &p->browsers; *pp;) {
        struct pbrowser *b = *pp;
        if (b->state != PB_WARMING && (mask & (1u << b->state))) {
            snprintf((*ids)[n++], 32, "%s", b->sid);
            *pp = b->next;
            xfree(b);
        } else {
            pp = &b->next;
        }
    }
    return n;
}

int pools_update(struct req *rq, struct resp *rs)
{
    struct pool_rec r;
    json_t *body;
    int rc = api_require_feature(rq, "browser_pools");
    if (rc || (rc = req_json_object(rq, 0, &body)))
        return rc;
    if ((rc = load_pool(rq, &r))) {
        json_decref(body);
        return rc;
    }
    struct pool *p = live_pool(&r);
    json_t *cur = json_loads(r.config, 0, NULL);
    struct poolrules_plan plan;
    memset(&plan, 0, sizeof plan);
    rc = p ? poolrules_plan_update(cur, body, &plan, &rq->err)
           : err_set(&rq->err, E_NOTFOUND, "not_found", "browser pool %s not found", rq->params[0]);
    long long old_size = cfg_int(cur, "size", 0);
    json_decref(body);
    json_decref(cur);
    if (rc == 0)
        rc = unsupported_config(rq, plan.config);
    int resized = 0;
    if (rc == 0 && plan.size_changed)
        resized = (rc = check_capacity(rq, r.id, plan.size)) == 0;
    if (rc == 0) {
        const char *name = jsonx_str(plan.config, "name");
        snprintf(r.name, sizeof r.name, "%s", name ? name : "");
        xfree(r.config);
        r.config = jsonx_dump(plan.config);
        rc = store_pool_update(api_app(rq)->store, &r);
        if (rc == E_CONFLICT)
            err_set(&rq->err, rc, "conflict", "a browser pool named %s already exists", r.name);
    }
    if (rc) {
        /* Back to the stored size (no limit: it held before). */
        if (resized &&
            sessmgr_pool_set(api_app(rq)->sessions, r.org_id, r.id, old_size, -1, NULL, NULL) != 0)
            log_error("pool %s: could not restore its capacity", r.id);
        poolrules_plan_clear(&plan);
        pool_rec_clear(&r);
        return rc;
    }
    /* New browsers use the new configuration; browsers in use keep theirs
     * (interface document, related rules 2 and 3). */
    char(*ids)[32] = NULL;
    size_t n = 0;
    pthread_mutex_lock(&P.mu);
    json_decref(p->config);
    p->config = json_incref(plan.config);
    snprintf(p->name, sizeof p->name, "%s", r.name);
    if (plan.rebuild == POOLRULES_REBUILD_ALL_IDLE) {
        n = take_locked(p, 1u << PB_AVAILABLE, &ids);
        p->credit = (double)n; /* rebuilt immediately, not at the fill rate */
    } else if (count_locked(p, -1) > plan.size) {
        /* Shrunk: idle browsers beyond the new size go. */
        char(*all)[32] = NULL;
        size_t m = take_locked(p, 1u << PB_AVAILABLE, &all);
        ids = xcalloc(m + 1, sizeof *ids);
        for (size_t i = 0; i < m; i++) {
            if (count_locked(p, -1) < plan.size) {
                struct pbrowser *b = xcalloc(1, sizeof *b);
                snprintf(b->sid, sizeof b->sid, "%s", all[i]);
                b->state = PB_AVAILABLE;
                b->next = p->browsers;
                p->browsers = b;
            } else {
                snprintf(ids[n++], 32, "%s", all[i]);
            }
        }
        xfree(all);
    }
    pthread_cond_broadcast(&P.cv);
    pthread_mutex_unlock(&P.mu);
    end_all(ids, n, "pool updated");
    xfree(ids);
    poolrules_plan_clear(&plan);
    pool_rec_clear(&r);
    resp_json(rs, 200, render_pool(p));
    return 0;
}

int pools_delete(struct req *rq, struct resp *rs)
{
    struct pool_rec r;
    int rc = api_require_feature(rq, "browser_pools");
    if (rc || (rc = load_pool(rq, &r)))
        return rc;
    json_t *body = NULL;
    if ((rc = req_json_object(rq, 1, &body))) {
        pool_rec_clear(&r);
        return rc;
    }
    json_t *force = json_object_get(body, "force");
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v)
    {
        if (strcmp(k, "force") != 0)
            rc = err_field(&rq->err, k, "unknown field");
    }
    if (force && !json_is_boolean(force))
        rc = err_field(&rq->err, "force", "must be a boolean");
    int forced = json_is_true(force);
    json_decref(body);
    struct pool *p = rc ? NULL : live_pool(&r);
    if (rc == 0 && p) {
        pthread_mutex_lock(&P.mu);
        int leased = count_locked(p, PB_ACQUIRED);
        pthread_mutex_unlock(&P.mu);
        if (leased && !forced)
            rc = err_set(&rq->err, E_CONFLICT, "pool_in_use",
                         "browser pool %s has %d acquired browser(s); release them or delete "
                         "with force: true",
                         r.id, leased);
    }
    if (rc == 0) {
        snprintf(r.status, sizeof r.status, "deleted");
        rc = store_pool_update(api_app(rq)->store, &r);
    }
    if (rc == 0)
        sessmgr_pool_drop(api_app(rq)->sessions, r.id);
    pool_rec_clear(&r);
    if (rc)
        return rc;
    char(*ids)[32] = NULL;
    size_t n = 0;
    if (p) {
        pthread_mutex_lock(&P.mu);
        p->deleted = 1;
        n = take_locked(p, (1u << PB_AVAILABLE) | (1u << PB_ACQUIRED), &ids);
        for (struct waiter *w = p->wq; w; w = w->next) {
            w->resumed = 1;
            req_resume(w->rq); /* 204: nothing to hand over */
        }
        p->wq = NULL;
        pthread_mutex_unlock(&P.mu);
    }
    end_all(ids, n, "pool deleted");
    xfree(ids);
    resp_empty(rs, 204);
    return 0;
}

int pools_flush(struct req *rq, struct resp *rs)
{
    struct pool_rec r;
    int rc = api_require_feature(rq, "browser_pools");
    if (rc || (rc = load_pool(rq, &r)))
        return rc;
    struct pool *p = live_pool(&r);
    pool_rec_clear(&r);
    char(*ids)[32] = NULL;
    size_t n = 0;
    if (p) {
        pthread_mutex_lock(&P.mu);
        n = take_locked(p, 1u << PB_AVAILABLE, &ids);
        pthread_cond_broadcast(&P.cv);
        pthread_mutex_unlock(&P.mu);
    }
    end_all(ids, n, "pool flushed");
    xfree(ids);
    resp_empty(rs, 204);
    return 0;
}

/* The continuation of a parked acquire: 200 with the browser or 204. */
static void acquire_resume(struct req *rq, struct resp *rs)
{
    struct waiter *w = rq->async_ctx;
    if (!w->sid[0]) {
        resp_empty(rs, 204);
        return;
    }
    json_t *rec = NULL;
    pthread_mutex_lock(&P.mu);
    struct pool *p = find_locked(w->pool_id);
    pthread_mutex_unlock(&P.mu);
    int rc = p ? apply_lease(p, w->sid, &w->lease, &rec, &rq->err)
               : err_set(&rq->err, E_NOTFOUND, "not_found", "browser pool deleted");
    if (rc) {
        put_back(w->pool_id, w->sid);
        w->sid[0] = '\0';
        resp_json(rs, http_status_for(rc), http_error_json(&rq->err));
        return;
    }
    resp_json(rs, 200, rec);
}

/* After the exchange: a browser whose response never reached its client
 * goes back to the pool, so that no browser is leased to nobody. */
static void acquire_done(struct req *rq, int delivered)
{
    struct waiter *w = rq->async_ctx;
    if (!w)
        return;
    if (!w->resumed) {
        /* The client left while waiting and the filler never saw it. */
        pthread_mutex_lock(&P.mu);
        struct pool *p = find_locked(w->pool_id);
        for (struct waiter **wp = p ? &p->wq : NULL; wp && *wp; wp = &(*wp)->next)
            if (*wp == w) {
                *wp = w->next;
                break;
            }
        pthread_mutex_unlock(&P.mu);
    } else if (!delivered && w->sid[0]) {
        log_info("pool %s: acquire response not delivered; browser %s returns to the pool",
                 w->pool_id, w->sid);
        put_back(w->pool_id, w->sid);
    }
    poolrules_lease_clear(&w->lease);
    xfree(w);
    rq->async_ctx = NULL;
}

int pools_acquire(struct req *rq, struct resp *rs)
{
    struct pool_rec r;
    json_t *body;
    int rc = api_require_feature(rq, "browser_pools");
    if (rc || (rc = req_json_object(rq, 1, &body)))
        return rc;
    if ((rc = load_pool(rq, &r))) {
        json_decref(body);
        return rc;
    }
    struct pool *p = live_pool(&r);
    pool_rec_clear(&r);
    struct waiter *w = xcalloc(1, sizeof *w);
    rc = p ? poolrules_validate_acquire(body, p->config, &w->lease, &rq->err)
           : err_set(&rq->err, E_NOTFOUND, "not_found", "browser pool not found");
    json_decref(body);
    if (rc) {
        xfree(w);
        return rc;
    }
    w->rq = rq;
    w->pool = p;
    snprintf(w->pool_id, sizeof w->pool_id, "%s", p->id);
    pthread_mutex_lock(&P.mu);
    /* Default wait: the time the pool needs to fill at its rate. */
    double rate = cfg_num(p->config, "fill_rate_per_minute", POOLRULES_FILL_RATE_DEFAULT);
    long long wait_s = w->lease.acquire_timeout_seconds >= 0
                           ? w->lease.acquire_timeout_seconds
                           : (rate > 0 ? (long long)(6000.0 / rate) : 0);
    struct pbrowser *b = NULL;
    if (!p->wq)
        for (b = p->browsers; b && b->state != PB_AVAILABLE; b = b->next)
            ;
    if (b) {
        b->state = PB_ACQUIRED;
        snprintf(w->sid, sizeof w->sid, "%s", b->sid);
        pthread_mutex_unlock(&P.mu);
        json_t *rec = NULL;
        rc = apply_lease(p, w->sid, &w->lease, &rec, &rq->err);
        if (rc)
            put_back(w->pool_id, w->sid);
        poolrules_lease_clear(&w->lease);
        xfree(w);
        if (rc)
            return rc;
        resp_json(rs, 200, rec);
        return 0;
    }
    if (wait_s <= 0) {
        pthread_mutex_unlock(&P.mu);
        poolrules_lease_clear(&w->lease);
        xfree(w);
        resp_empty(rs, 204);
        return 0;
    }
    w->deadline_ms = clock_mono_ms() + wait_s * 1000;
    struct waiter **tail = &p->wq;
    while (*tail)
        tail = &(*tail)->next;
    *tail = w;
    rc = req_suspend(rq, acquire_resume, acquire_done, w);
    pthread_cond_broadcast(&P.cv);
    char pid[sizeof p->id];
    memcpy(pid, p->id, sizeof pid);
    pthread_mutex_unlock(&P.mu);
    log_info("pool %s: an acquire waits (up to %lld s)", pid, (long long)wait_s);
    return rc;
}

int pools_release(struct req *rq, struct resp *rs)
{
    static const char *const allowed[] = {"session_id", "reuse", NULL};
    struct pool_rec r;
    json_t *body;
    int rc = api_require_feature(rq, "browser_pools");
    if (rc || (rc = req_json_object(rq, 0, &body)))
        return rc;
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v)
    {
        int ok = 0;
        for (size_t i = 0; allowed[i]; i++)
            ok |= strcmp(allowed[i], k) == 0;
        if (!ok)
            rc = err_field(&rq->err, k, "unknown field");
    }
    const char *sid = jsonx_str(body, "session_id");
    json_t *reuse_v = json_object_get(body, "reuse");
    if (!sid || !*sid)
        rc = err_field(&rq->err, "session_id", "is required: the id of an acquired browser");
    if (reuse_v && !json_is_boolean(reuse_v))
        rc = err_field(&rq->err, "reuse", "must be a boolean");
    int reuse = reuse_v ? json_is_true(reuse_v) : 1;
    char id[32];
    snprintf(id, sizeof id, "%s", sid ? sid : "");
    json_decref(body);
    if (rc || (rc = load_pool(rq, &r)))
        return rc;
    struct pool *p = live_pool(&r);
    pool_rec_clear(&r);
    pthread_mutex_lock(&P.mu);
    struct pbrowser *b = p ? browser_locked(p, id) : NULL;
    if (!b || b->state != PB_ACQUIRED) {
        pthread_mutex_unlock(&P.mu);
        return err_set(&rq->err, E_NOTFOUND, "not_found",
                       "no browser %s is acquired from this pool", id);
    }
    if (!reuse)
        remove_browser_locked(p, id);
    else
        b->state = PB_WARMING; /* being cleaned: neither leased nor available */
    char *start_url = json_is_string(json_object_get(p->config, "start_url"))
                          ? xstrdup(jsonx_str(p->config, "start_url"))
                          : NULL;
    pthread_mutex_unlock(&P.mu);
    if (!reuse) {
        xfree(start_url);
        browsers_end(api_app(rq), id, "released");
        resp_empty(rs, 204);
        return 0;
    }
    /* Reuse: clean the browser, drop the lease's name, tags and telemetry. */
    struct live *l = sessmgr_get(api_app(rq)->sessions, id);
    char ws[512];
    int clean = l && live_ws_url(l, ws, sizeof ws) == 0 ? clean_browser(ws, start_url) : E_UNAVAIL;
    xfree(start_url);
    struct session_rec s;
    if (clean == 0 && load_row(p, id, &s) == 0) {
        json_t *d = json_loads(s.data, 0, NULL);
        int leased = s.name[0] || json_object_get(d, "tags") || json_object_get(d, "start_url");
        s.name[0] = '\0';
        json_object_del(d, "tags");
        json_object_del(d, "start_url");
        /* The lease's telemetry ends with the lease. */
        pthread_mutex_lock(&P.mu);
        json_t *ptel = json_deep_copy(json_object_get(p->config, "telemetry"));
        pthread_mutex_unlock(&P.mu);
        if (!json_equal(ptel ? ptel : json_null(), json_object_get(d, "telemetry")))
            leased = 1;
        telemetry_session_configure(id, ptel);
        json_object_set_new(d, "telemetry", ptel ? ptel : json_null());
        xfree(s.data);
        s.data = jsonx_dump(d);
        json_decref(d);
        if (leased)
            clean = store_session_update(api_app(rq)->store, &s);
        session_rec_clear(&s);
    }
    if (l) {
        live_set_timeout(l, 0);
        sessmgr_put(l);
    }
    pthread_mutex_lock(&P.mu);
    b = find_locked(p->id) ? browser_locked(p, id) : NULL;
    if (b && clean == 0)
        b->state = PB_AVAILABLE;
    else if (b)
        remove_browser_locked(p, id);
    pthread_cond_broadcast(&P.cv);
    pthread_mutex_unlock(&P.mu);
    if (clean != 0) /* a browser that cannot be cleaned is replaced */
        browsers_end(api_app(rq), id, "released (could not be cleaned)");
    resp_empty(rs, 204);
    return 0;
}

/* ---- lifecycle ---- */

void pools_init(struct app *app)
{
    P.app = app;
    clock_cond_init(&P.cv);
    session_ext_register(&pools_ext);
}

int pools_start(struct app *app)
{
    struct pool_rec *rows = NULL;
    size_t n = 0;
    if (store_pool_list_active(app->store, &rows, &n) != 0)
        return E_INTERNAL;
    pthread_mutex_lock(&P.mu);
    for (size_t i = 0; i < n; i++) {
        struct pool *p = pool_new(&rows[i]);
        if (sessmgr_pool_set(app->sessions, p->org_id, p->id, cfg_int(p->config, "size", 0), -1,
                             NULL, NULL) != 0)
            log_error("pool %s: could not register its capacity", p->id);
        p->next = P.pools;
        P.pools = p;
        pool_rec_clear(&rows[i]);
    }
    pthread_mutex_unlock(&P.mu);
    xfree(rows);
    if (n)
        log_info("pools: %zu pool(s) restored; refilling", n);
    if (pthread_create(&P.thread, NULL, filler, NULL) != 0)
        return E_INTERNAL;
    P.started = 1;
    return 0;
}

void pools_drain(void)
{
    pthread_mutex_lock(&P.mu);
    for (struct pool *p = P.pools; p; p = p->next) {
        for (struct waiter *w = p->wq; w; w = w->next) {
            w->resumed = 1;
            req_resume(w->rq); /* 204: the server is stopping */
        }
        p->wq = NULL;
    }
    pthread_mutex_unlock(&P.mu);
}

void pools_stop(void)
{
    if (!P.started)
        return;
    pthread_mutex_lock(&P.mu);
    P.stopping = 1;
    pthread_cond_broadcast(&P.cv);
    pthread_mutex_unlock(&P.mu);
    pthread_join(P.thread, NULL);
    P.started = 0;
    while (P.pools) {
        struct pool *p = P.pools;
        P.pools = p->next;
        while (p->browsers) {
            struct pbrowser *b = p->browsers;
            p->browsers = b->next;
            xfree(b);
        }
        json_decref(p->config);
        xfree(p);
    }
}
