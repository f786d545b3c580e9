/*
 * /browser_pools handlers (issue 5; the interface document's GET and PATCH
 * /browser_pools/{id_or_name}; KERNEL_API.md for the rest), and the Chromium
 * launcher of the pool engine.
 *
 * The engine (src/runtime/pool.h) owns what needs state: each pool's browsers,
 * the filler, leases, waiters and the pools' capacity. This file parses and
 * validates bodies (src/domain/pool_rules.h), persists pools in the store,
 * calls the engine and renders records; plus the glue the engine cannot own
 * because it is a session's business: launching a pool browser is creating a
 * session (sess_spawn), a lease writes the session's name, tags,
 * telemetry and start_url, and cleaning a released browser resets them.
 *
 * A waiting acquire is parked with req_suspend (it holds no HTTP thread);
 * its engine waiter resumes the request when it is settled.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "api/extensions.h"
#include "api/pools.h"
#include "cluster/node.h"
#include "cluster/peer.h"
#include "api/profiles.h"
#include "api/proxies.h"
#include "session/ext.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/token.h"
#include "core/xalloc.h"
#include "domain/entitlements.h"
#include "domain/pool_rules.h"
#include "domain/session_rules.h"
#include "runtime/pool.h"
#include "runtime/sessmgr.h"
#include "telemetry/telemetry.h"

static struct {
    struct app *app;
    /* Set by pools_start on the main thread while the session supervisor
     * already runs (its ending hooks read it): accessed atomically. */
    struct pool_engine *eng;
} P;

static struct pool_engine *engine(void)
{
    return __atomic_load_n(&P.eng, __ATOMIC_ACQUIRE);
}

int pools_totals(struct pool_totals *t)
{
    struct pool_engine *g = engine();
    if (!g)
        return -ESRCH;
    pool_engine_totals(g, t);
    return 0;
}

/* ---- the Chromium launcher ---- */

/* The POST /browsers body a pool browser is launched from: every launch
 * option of the pool configuration is copied here, and sess_spawn
 * validates and applies it as for a standalone session. The pool's
 * "extensions" is the same [{id} | {name}] list as POST /browsers takes,
 * resolved in sess_spawn in the order configured (api/extensions.h). */
static json_t *spawn_body(const json_t *cfg)
{
    static const char *const copied[] = {"headless",      "stealth",    "kiosk_mode", "viewport",
                                         "chrome_policy", "network",    "start_url",  "profile",
                                         "proxy_id",      "extensions", "region",     NULL};
    json_t *b = json_object();
    for (size_t i = 0; copied[i]; i++) {
        json_t *v = json_object_get(cfg, copied[i]);
        if (v && !(json_is_string(v) && json_string_length(v) == 0))
            json_object_set(b, copied[i], v);
    }
    struct poolrules_config pc;
    poolrules_config_from_json(cfg, &pc);
    json_object_set_new(b, "timeout_seconds", json_integer(pc.timeout_seconds));
    json_t *tel = json_object_get(cfg, "telemetry");
    if (json_is_object(tel))
        json_object_set_new(b, "telemetry",
                            json_pack("{s:O}", "browser", json_object_get(tel, "browser")));
    return b;
}

/* Launches one session for the pool (filler thread): the org's current
 * entitlements, pooled = 1 (counted in the pool's capacity, no idle timeout
 * until leased), settings carrying "pool": {id, name}. */
static int pooled_launch(void *ctx, const struct pool_view *pool, char *sid)
{
    struct app *app = ctx;
    json_t *body = spawn_body(pool->config);
    json_t *extra = json_pack("{s:{s:s}}", "pool", "id", pool->id);
    if (pool->name[0])
        json_object_set_new(json_object_get(extra, "pool"), "name", json_string(pool->name));
    struct err e;
    err_init(&e);
    struct org_rec o;
    memset(&o, 0, sizeof o);
    json_t *ent = NULL;
    int rc = store_org_get(app->store, pool->org_id, &o);
    if (rc == 0)
        rc = api_resolve_entitlements(app->store, &o, &ent, &e);
    org_rec_clear(&o);
    struct session_rec s;
    if (rc == 0)
        rc = sess_spawn(app, pool->org_id, pool->project_id, ent, body, extra, 1, &s, &e);
    json_decref(ent);
    json_decref(body);
    json_decref(extra);
    if (rc) {
        log_warn("pool %s: a browser could not be warmed: %s", pool->id, e.message);
        return rc;
    }
    snprintf(sid, POOL_SID_MAX, "%s", s.id);
    session_rec_clear(&s);
    return 0;
}

static void pooled_end(void *ctx, const char *sid, const char *reason)
{
    sess_end(ctx, sid, reason);
}

/* Loads a pool browser's session row. */
static int load_row(const struct pool_view *p, const char *sid, struct session_rec *s)
{
    memset(s, 0, sizeof *s);
    return store_session_get(P.app->store, p->org_id, p->project_id, sid, 0, s);
}

/* Cleans a released browser (pool_cdp_clean) and drops the lease's name,
 * tags, start_url and telemetry from its session; it waits without an idle
 * timeout again. */
static int pooled_clean(void *ctx, const struct pool_view *pool, const char *sid)
{
    struct app *app = ctx;
    struct live *l = sessmgr_get(app->sessions, sid);
    char ws[512];
    struct poolrules_config pc;
    poolrules_config_from_json(pool->config, &pc);
    int clean =
        l && live_ws_url(l, ws, sizeof ws) == 0 ? pool_cdp_clean(ws, pc.start_url) : E_UNAVAIL;
    struct session_rec s;
    if (clean == 0 && load_row(pool, sid, &s) == 0) {
        json_t *d = json_loads(s.data, 0, NULL);
        int leased = s.name[0] || json_object_get(d, "tags") || json_object_get(d, "start_url");
        s.name[0] = '\0';
        json_object_del(d, "tags");
        json_object_del(d, "start_url");
        /* The lease's telemetry ends with the lease. */
        json_t *ptel = json_deep_copy(json_object_get(pool->config, "telemetry"));
        if (!json_equal(ptel ? ptel : json_null(), json_object_get(d, "telemetry")))
            leased = 1;
        telemetry_session_configure(sid, ptel);
        json_object_set_new(d, "telemetry", ptel ? ptel : json_null());
        xfree(s.data);
        s.data = jsonx_dump(d);
        json_decref(d);
        if (leased)
            clean = store_session_update(app->store, &s);
        session_rec_clear(&s);
    }
    if (l) {
        live_set_timeout(l, 0);
        sessmgr_put(l);
    }
    return clean;
}

/* The launcher given to the engine (ctx: the app, set by pools_start). */
static struct pool_launcher chromium_launcher = {
    .launch = pooled_launch,
    .end = pooled_end,
    .clean = pooled_clean,
};

/* ---- leases ---- */

/* Applies a lease (name, tags, telemetry, start_url, the pool's idle
 * timeout) to an acquired browser and renders its record. On failure the
 * caller gives the browser back (unlease). */
static int apply_lease(const char *pool_id, const char *sid, const struct poolrules_lease *lease,
                       json_t **record, struct err *e)
{
    struct pool_view p;
    if (pool_get(engine(), pool_id, &p) != 0)
        return err_set(e, E_NOTFOUND, "not_found", "browser pool deleted");
    struct session_rec s;
    int rc = load_row(&p, sid, &s);
    if (rc) {
        pool_view_clear(&p);
        return err_set(e, E_INTERNAL, "internal", "pool browser %s vanished", sid);
    }
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
        struct poolrules_config pc;
        poolrules_config_from_json(p.config, &pc);
        live_set_timeout(l, (int)pc.timeout_seconds);
        char ws[512];
        if (lease->start_url[0] && live_ws_url(l, ws, sizeof ws) == 0)
            pool_cdp_navigate(ws, lease->start_url);
        sessmgr_put(l);
        *record = browsers_render(P.app, &s);
    } else if (rc == 0) {
        rc = err_set(e, E_INTERNAL, "internal", "pool browser %s is not running", sid);
    }
    json_decref(d);
    session_rec_clear(&s);
    pool_view_clear(&p);
    return rc;
}

/* Gives back an acquired browser whose lease never reached its client:
 * nothing touched it, so it is available again without cleaning. */
static void unlease(const char *pool_id, const char *sid)
{
    pool_put_back(engine(), pool_id, sid);
    struct live *l = sessmgr_get(P.app->sessions, sid);
    if (l) {
        live_set_timeout(l, 0);
        sessmgr_put(l);
    }
}

/* ---- the session module: pool browsers that end on their own ---- */

static void on_pool_ending(struct session_ctx *sc, const char *reason)
{
    (void)reason;
    const char *pool_id = jsonx_str(json_object_get(sc->doc, "pool"), "id");
    struct pool_engine *g = engine();
    if (pool_id && g)
        pool_browser_gone(g, pool_id, sc->rec->id);
}

static const struct session_ext pools_ext = {
    .name = "pools",
    .ending = on_pool_ending,
};

/* ---- records ---- */

static json_t *render_pool(const struct pool_view *p)
{
    char t[40];
    json_t *r = json_object();
    json_object_set_new(r, "id", json_string(p->id));
    if (p->name[0])
        json_object_set_new(r, "name", json_string(p->name));
    /* The pool's region (fixed at create); a pool from before pools had one
     * is in its node's. */
    const char *region = json_string_value(json_object_get(p->config, "region"));
    json_object_set_new(r, "region", json_string(region ? region : P.app->cfg.region));
    json_object_set_new(r, "created_at",
                        json_string(clock_fmt_rfc3339(p->created_at, t, sizeof t)));
    json_object_set_new(r, "acquired_count", json_integer(p->acquired));
    json_object_set_new(r, "available_count", json_integer(p->available));
    json_t *cfg = json_deep_copy(p->config);
    json_object_del(cfg, "region"); /* the record's own field, not a browser setting */
    json_object_set_new(r, "browser_pool_config", cfg);
    /* The configured selectors resolved, in load order (an extension a pool
     * names cannot be deleted); profile_id resolves the selector. */
    json_object_set_new(
        r, "extension_ids",
        extensions_ids(P.app, p->org_id, p->project_id, json_object_get(p->config, "extensions")));
    /* profile_id is the resolved id, whether the selector named an id or a
     * name; omitted when no profile is attached (or it was deleted since). */
    struct profile_rec pr;
    struct err e;
    err_init(&e);
    json_t *sel = json_object_get(p->config, "profile");
    if (sel && profiles_resolve(P.app, p->org_id, p->project_id, sel, &pr, &e) == 0)
        json_object_set_new(r, "profile_id", json_string(pr.id));
    return r;
}

/* Renders pool id now (its counts after the change a handler made). */
static int respond_pool(struct req *rq, struct resp *rs, const char *id)
{
    struct pool_view v;
    if (pool_get(engine(), id, &v) != 0)
        return err_set(&rq->err, E_NOTFOUND, "not_found", "browser pool %s not found", id);
    resp_json(rs, 200, render_pool(&v));
    pool_view_clear(&v);
    return 0;
}

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

/* Registers pool_id's size with the engine's capacity (kept by the session
 * manager), which checks the org's limit under the same lock as session
 * creates: 403 when the org's pools and live sessions would hold more
 * browsers than its limit (nothing changes). */
static long long org_limit(struct req *rq, int *rc)
{
    const json_t *ent;
    if ((*rc = api_entitlements(rq, &ent)) != 0)
        return -1;
    int64_t lim;
    return ent_limit(ent, "max_concurrent_browsers", &lim) ? lim : -1;
}

static int limit_exceeded(struct req *rq, long long sum, long long live, long long limit)
{
    return err_set(&rq->err, E_FORBIDDEN, "pool_limit_exceeded",
                   "the sum of all pool sizes (%lld) and live sessions (%lld) would exceed "
                   "limits.max_concurrent_browsers (%lld)",
                   sum, live, limit);
}

static int check_capacity(struct req *rq, const char *pool_id, long long size)
{
    int rc;
    long long limit = org_limit(rq, &rc);
    if (rc)
        return rc;
    /* On a shared store the cluster's limit is checked when the row is
     * written (write_pool); the engine's books here are this node's. */
    if (store_shared(api_app(rq)->store))
        limit = -1;
    long long sum = 0, live = 0;
    if (pool_capacity_set(engine(), api_auth(rq)->org.id, pool_id, size, limit, &sum, &live) != 0)
        return limit_exceeded(rq, sum, live, limit);
    return 0;
}

/* Inserts or updates a pool's row. A new pool is homed on this node; a
 * pool's size is admitted by the store (store.h, pool_admit) against its
 * project's max_concurrent_sessions (its own, else the org's default), and
 * on a shared store against the org's limit too, counted over the cluster:
 * 403 as the org's limit when one would be passed. */
static int write_pool(struct req *rq, struct pool_rec *r, int is_update, int resized)
{
    struct store *st = api_app(rq)->store;
    if (!is_update)
        node_id(api_app(rq)->node, r->node_id);
    if (is_update && !resized)
        return store_pool_update(st, r);
    int rc;
    long long limit = org_limit(rq, &rc);
    /* On an embedded store the engine's books hold the org's limit
     * (check_capacity). */
    if (!store_shared(st))
        limit = -1;
    int64_t sum = 0, live = 0, plimit = -1;
    if (rc == 0)
        rc = store_pool_admit(st, r, is_update, limit, &sum, &live, &plimit);
    if (rc == E_LIMIT && plimit >= 0)
        return err_set(&rq->err, E_FORBIDDEN, "pool_limit_exceeded",
                       "the sum of project %s's pool sizes (%lld) and live sessions (%lld) would "
                       "exceed its max_concurrent_sessions (%lld)",
                       r->project_id, (long long)sum, (long long)live, (long long)plimit);
    if (rc == E_LIMIT)
        return limit_exceeded(rq, sum, live, limit);
    return rc;
}

/* Fields of a pool configuration this server cannot serve yet. */
static int unsupported_config(struct req *rq, const json_t *cfg)
{
    /* Extensions must exist now and the plan allow them (403/404/400). */
    json_t *ext = json_object_get(cfg, "extensions");
    if (json_array_size(ext) > 0) {
        const json_t *ent = NULL;
        json_t *ids = NULL;
        int rc = api_entitlements(rq, &ent);
        if (rc == 0)
            rc = extensions_resolve(api_app(rq), api_auth(rq)->org.id, api_auth(rq)->project.id,
                                    ent, ext, &ids, &rq->err);
        json_decref(ids);
        if (rc)
            return rc;
    }
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
    struct poolrules_config pc;
    poolrules_config_from_json(cfg, &pc);
    const char *region = json_string_value(json_object_get(cfg, "region"));
    if (rc == 0 && region && strcmp(region, api_app(rq)->cfg.region) != 0)
        rc = err_field(&rq->err, "region", "this server serves only region %s",
                       api_app(rq)->cfg.region);
    if (rc == 0 && (rc = unsupported_config(rq, cfg)) == 0)
        rc = check_capacity(rq, r.id, pc.size);
    if (rc) {
        json_decref(cfg);
        return rc;
    }
    snprintf(r.org_id, sizeof r.org_id, "%s", a->org.id);
    snprintf(r.project_id, sizeof r.project_id, "%s", a->project.id);
    snprintf(r.name, sizeof r.name, "%s", pc.name);
    snprintf(r.status, sizeof r.status, "active");
    r.created_at = clock_now_ms();
    r.config = jsonx_dump(cfg);
    rc = write_pool(rq, &r, 0, 1);
    if (rc == E_CONFLICT)
        err_set(&rq->err, rc, "conflict", "a browser pool named %s already exists", r.name);
    if (rc == 0)
        rc = pool_add(engine(), r.id, r.org_id, r.project_id, r.name, r.created_at, cfg);
    json_decref(cfg);
    if (rc) {
        pool_capacity_drop(engine(), r.id);
        pool_rec_clear(&r);
        return rc;
    }
    log_info("pool %s created", r.id);
    rc = respond_pool(rq, rs, r.id);
    pool_rec_clear(&r);
    return rc;
}

int pools_get(struct req *rq, struct resp *rs)
{
    struct pool_rec r;
    int rc = api_require_feature(rq, "browser_pools");
    if (rc || (rc = load_pool(rq, &r)))
        return rc;
    struct pool_view v;
    rc = pool_get(engine(), r.id, &v);
    pool_rec_clear(&r);
    if (rc)
        return err_set(&rq->err, E_NOTFOUND, "not_found", "browser pool %s not found",
                       rq->params[0]);
    resp_json(rs, 200, render_pool(&v));
    pool_view_clear(&v);
    return 0;
}

/* A pool another node runs, for a list: that node's record of it (its live
 * counts), read through one hop with the caller's credentials. A node that
 * cannot be read holds no browser anyone can reach: the pool is listed
 * from its row, with counts of 0, until the cluster moves it. */
static json_t *render_remote_pool(struct req *rq, const struct pool_rec *r)
{
    struct app *app = api_app(rq);
    char url[512], auth[600], proj[100], path[100];
    struct err e;
    err_init(&e);
    const char *bearer = req_header(rq, "Authorization");
    snprintf(auth, sizeof auth, "Authorization: %s", bearer ? bearer : "");
    snprintf(proj, sizeof proj, "X-Kernel-Project-Id: %s", r->project_id);
    snprintf(path, sizeof path, "/browser_pools/%s", r->id);
    const char *headers[] = {auth, proj, NULL};
    int status = 0;
    json_t *got = NULL;
    if (node_locate(app->node, r->node_id, url, sizeof url, &e) == 1 &&
        peer_get_json(url, path, headers, 2000, &status, &got, &e) == 0 && status == 200 &&
        json_is_object(got))
        return got;
    json_decref(got);
    log_warn("pool %s: its node %s could not be read for a list (%s)", r->id, r->node_id,
             e.message);
    struct pool_view v;
    memset(&v, 0, sizeof v);
    snprintf(v.id, sizeof v.id, "%s", r->id);
    snprintf(v.name, sizeof v.name, "%s", r->name);
    snprintf(v.org_id, sizeof v.org_id, "%s", r->org_id);
    snprintf(v.project_id, sizeof v.project_id, "%s", r->project_id);
    v.created_at = r->created_at;
    v.config = json_loads(r->config, 0, NULL);
    json_t *out = render_pool(&v);
    pool_view_clear(&v);
    return out;
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
    const char *region = req_query(rq, "region");
    if (region && !sessrules_region_known(region))
        return err_field(&rq->err, "region", "must be one of %s", SESSRULES_REGIONS_TEXT);
    rc = store_pool_list(api_app(rq)->store, a->org.id, a->project.id, req_query(rq, "name"),
                         req_query(rq, "query"), region, api_app(rq)->cfg.region, &pg, &rows, &n);
    if (rc)
        return rc;
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        struct pool_view v;
        if (pool_get(engine(), rows[i].id, &v) == 0) {
            json_array_append_new(arr, render_pool(&v));
            pool_view_clear(&v);
        } else if (store_shared(api_app(rq)->store)) {
            json_array_append_new(arr, render_remote_pool(rq, &rows[i]));
        }
        pool_rec_clear(&rows[i]);
    }
    xfree(rows);
    resp_json(rs, 200, arr);
    resp_page(rs, pg.offset, n, pg.has_more);
    return 0;
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
    struct pool_view v;
    int live = pool_get(engine(), r.id, &v) == 0;
    pool_view_clear(&v);
    json_t *cur = json_loads(r.config, 0, NULL);
    /* A pool from before pools had a region is in its node's (render_pool). */
    if (json_is_object(cur) && !json_object_get(cur, "region"))
        json_object_set_new(cur, "region", json_string(api_app(rq)->cfg.region));
    struct poolrules_plan plan;
    memset(&plan, 0, sizeof plan);
    rc = live ? poolrules_plan_update(cur, body, &plan, &rq->err)
              : err_set(&rq->err, E_NOTFOUND, "not_found", "browser pool %s not found",
                        rq->params[0]);
    struct poolrules_config old;
    poolrules_config_from_json(cur, &old);
    json_decref(body);
    json_decref(cur);
    if (rc == 0)
        rc = unsupported_config(rq, plan.config);
    int resized = 0;
    if (rc == 0 && plan.size_changed)
        resized = (rc = check_capacity(rq, r.id, plan.size)) == 0;
    if (rc == 0) {
        struct poolrules_config next;
        poolrules_config_from_json(plan.config, &next);
        snprintf(r.name, sizeof r.name, "%s", next.name);
        xfree(r.config);
        r.config = jsonx_dump(plan.config);
        rc = write_pool(rq, &r, 1, resized);
        if (rc == E_CONFLICT)
            err_set(&rq->err, rc, "conflict", "a browser pool named %s already exists", r.name);
    }
    if (rc == 0)
        rc = pool_configure(engine(), r.id, r.name, plan.config,
                            plan.rebuild == POOLRULES_REBUILD_ALL_IDLE);
    if (rc) {
        /* Back to the stored size (no limit: it held before). */
        if (resized && pool_capacity_set(engine(), r.org_id, r.id, old.size, -1, NULL, NULL) != 0)
            log_error("pool %s: could not restore its capacity", r.id);
        poolrules_plan_clear(&plan);
        pool_rec_clear(&r);
        return rc;
    }
    poolrules_plan_clear(&plan);
    rc = respond_pool(rq, rs, r.id);
    pool_rec_clear(&r);
    return rc;
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
    int forced = 0;
    rc = poolrules_validate_delete(body, &forced, &rq->err);
    json_decref(body);
    int leased = rc == 0 ? pool_leased(engine(), r.id) : 0;
    if (leased && !forced)
        rc = err_set(&rq->err, E_CONFLICT, "pool_in_use",
                     "browser pool %s has %d acquired browser(s); release them or delete "
                     "with force: true",
                     r.id, leased);
    if (rc == 0) {
        snprintf(r.status, sizeof r.status, "deleted");
        rc = store_pool_update(api_app(rq)->store, &r);
    }
    /* Ends its browsers, answers its waiters (204) and drops its capacity;
     * a pool not in memory still had its capacity registered. */
    if (rc == 0 && pool_delete(engine(), r.id) != 0)
        pool_capacity_drop(engine(), r.id);
    pool_rec_clear(&r);
    if (rc)
        return rc;
    resp_empty(rs, 204);
    return 0;
}

int pools_flush(struct req *rq, struct resp *rs)
{
    struct pool_rec r;
    int rc = api_require_feature(rq, "browser_pools");
    if (rc || (rc = load_pool(rq, &r)))
        return rc;
    if (pool_flush(engine(), r.id) != 0)
        log_debug("pool %s: flushed while not in memory", r.id);
    pool_rec_clear(&r);
    resp_empty(rs, 204);
    return 0;
}

/* ---- acquire: granted at once, or parked as an engine waiter ---- */

struct acquire {
    char pool_id[32];
    struct poolrules_lease lease;
    struct pool_waiter *w;
    int resumed;     /* acquire_resume ran */
    int handed_back; /* the lease failed and the browser went back */
};

static void wake_req(void *ctx)
{
    req_resume(ctx);
}

static int gone_req(void *ctx)
{
    return req_client_gone(ctx);
}

static const struct pool_waiter_ops acquire_ops = {.wake = wake_req, .gone = gone_req};

/* Hands browser sid to the client of rq: the lease applied, 200 with its
 * record; on failure the browser goes back (or is ended when it is not
 * running) and the error is returned. */
static int hand_over(struct req *rq, struct resp *rs, struct acquire *a, const char *sid)
{
    json_t *rec = NULL;
    int rc = apply_lease(a->pool_id, sid, &a->lease, &rec, &rq->err);
    if (rc == E_INTERNAL) {
        /* Not running or without a row: it is ended, and replaced. */
        if (pool_release(engine(), a->pool_id, sid, 0) != 0)
            log_debug("pool %s: browser %s already gone", a->pool_id, sid);
        a->handed_back = 1;
    } else if (rc) { /* the browser is fine (a name conflict, say): back it goes */
        unlease(a->pool_id, sid);
        a->handed_back = 1;
    }
    metrics_create(METRICS_CREATE_POOL, rc == 0, clock_mono_us() - rq->start_us);
    if (rc)
        return rc;
    resp_json(rs, 200, rec);
    return 0;
}

/* The continuation of a parked acquire: 200 with the browser, or 204 (the
 * wait ended, the pool was deleted or the server is stopping). */
static void acquire_resume(struct req *rq, struct resp *rs)
{
    struct acquire *a = rq->async_ctx;
    char sid[POOL_SID_MAX];
    a->resumed = 1;
    if (pool_waiter_state(a->w, sid) != POOL_WAIT_GRANTED) {
        resp_empty(rs, 204);
        return;
    }
    int rc = hand_over(rq, rs, a, sid);
    if (rc)
        resp_json(rs, http_status_for(rc), http_error_json(&rq->err));
}

/* After the exchange: a browser whose response never reached its client
 * goes back to the pool, so that no browser is leased to nobody; a waiter
 * whose client left before it was served is cancelled. */
static void acquire_done(struct req *rq, int delivered)
{
    struct acquire *a = rq->async_ctx;
    if (!a)
        return;
    char sid[POOL_SID_MAX];
    if (pool_waiter_finish(a->w, sid) == POOL_WAIT_GRANTED && !a->handed_back &&
        (!delivered || !a->resumed)) {
        log_info("pool %s: acquire response not delivered; browser %s returns to the pool",
                 a->pool_id, sid);
        unlease(a->pool_id, sid);
    }
    poolrules_lease_clear(&a->lease);
    xfree(a);
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
    struct acquire *a = xcalloc(1, sizeof *a);
    snprintf(a->pool_id, sizeof a->pool_id, "%s", r.id);
    pool_rec_clear(&r);
    struct pool_view v;
    rc = pool_get(engine(), a->pool_id, &v);
    if (rc == 0)
        rc = poolrules_validate_acquire(body, v.config, &a->lease, &rq->err);
    else
        err_set(&rq->err, E_NOTFOUND, "not_found", "browser pool not found");
    pool_view_clear(&v);
    json_decref(body);
    char sid[POOL_SID_MAX];
    if (rc == 0) {
        int64_t wait_ms = a->lease.acquire_timeout_seconds >= 0
                              ? (int64_t)a->lease.acquire_timeout_seconds * 1000
                              : -1;
        rc = pool_acquire(engine(), a->pool_id, wait_ms, &acquire_ops, rq, sid, &a->w);
        if (rc == E_NOTFOUND)
            err_set(&rq->err, rc, "not_found", "browser pool not found");
    }
    if (rc == 0 && a->w) {
        log_info("pool %s: an acquire waits", a->pool_id);
        return req_suspend(rq, acquire_resume, acquire_done, a);
    }
    if (rc == 0)
        rc = hand_over(rq, rs, a, sid);
    else if (rc == E_LIMIT) { /* none available and no wait: 204 */
        resp_empty(rs, 204);
        rc = 0;
    }
    poolrules_lease_clear(&a->lease);
    xfree(a);
    return rc;
}

int pools_release(struct req *rq, struct resp *rs)
{
    struct pool_rec r;
    json_t *body;
    int rc = api_require_feature(rq, "browser_pools");
    if (rc || (rc = req_json_object(rq, 0, &body)))
        return rc;
    char id[POOL_SID_MAX];
    int reuse = 1;
    rc = poolrules_validate_release(body, id, sizeof id, &reuse, &rq->err);
    json_decref(body);
    if (rc || (rc = load_pool(rq, &r)))
        return rc;
    /* Reuse cleans the browser on this thread (pool_cdp_clean) before it is
     * available again. */
    rc = pool_release(engine(), r.id, id, reuse);
    pool_rec_clear(&r);
    if (rc)
        return err_set(&rq->err, E_NOTFOUND, "not_found",
                       "no browser %s is acquired from this pool", id);
    resp_empty(rs, 204);
    return 0;
}

/* ---- classic WebDriver (api/wdclassic.c) ---- */

int pools_acquire_now(struct req *rq, const char *pool, char *sid, size_t cap)
{
    struct auth *a = api_auth(rq);
    int rc = api_require_feature(rq, "browser_pools");
    if (rc)
        return rc;
    struct pool_rec r;
    memset(&r, 0, sizeof r);
    rc = store_pool_get(api_app(rq)->store, a->org.id, a->project.id, pool, &r);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "browser pool %s not found", pool);
    if (rc)
        return rc;
    char pool_id[sizeof r.id];
    snprintf(pool_id, sizeof pool_id, "%s", r.id);
    pool_rec_clear(&r);
    struct poolrules_lease lease = {.acquire_timeout_seconds = 0};
    struct pool_waiter *w = NULL;
    char got[POOL_SID_MAX];
    if (!engine())
        return err_set(&rq->err, E_UNAVAIL, "unavailable", "browser pools are not running");
    rc = pool_acquire(engine(), pool_id, 0, NULL, NULL, got, &w);
    pool_waiter_finish(w, NULL);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "browser pool %s not found", pool);
    if (rc == E_LIMIT) {
        rq->err.retry_after = 1;
        return err_set(&rq->err, rc, "rate_limited", "browser pool %s has no browser available",
                       pool);
    }
    if (rc)
        return err_set(&rq->err, rc, "internal", "browser pool %s: acquire failed", pool);
    json_t *rec = NULL;
    rc = apply_lease(pool_id, got, &lease, &rec, &rq->err);
    json_decref(rec);
    if (rc == E_INTERNAL) {
        if (pool_release(engine(), pool_id, got, 0) != 0)
            log_debug("pool %s: browser %s already gone", pool_id, got);
    } else if (rc) {
        unlease(pool_id, got);
    }
    if (rc == 0)
        snprintf(sid, cap, "%s", got);
    return rc;
}

int pools_release_browser(const char *pool_id, const char *sid)
{
    struct pool_engine *g = engine();
    return g ? pool_release(g, pool_id, sid, 1) : E_NOTFOUND;
}

/* ---- lifecycle ---- */

/* Adds the active pools (of node, or all when NULL) that the engine does
 * not run yet; *added counts them. */
static int load_pools(struct app *app, struct pool_engine *g, const char *node, size_t *added)
{
    struct pool_rec *rows = NULL;
    size_t n = 0;
    int rc = node ? store_pool_list_node(app->store, node, &rows, &n)
                  : store_pool_list_active(app->store, &rows, &n);
    if (rc != 0)
        return E_INTERNAL;
    *added = 0;
    for (size_t i = 0; i < n; i++) {
        struct pool_view v;
        if (pool_get(g, rows[i].id, &v) == 0) {
            pool_view_clear(&v);
        } else {
            json_t *cfg = json_loads(rows[i].config, 0, NULL);
            if (pool_add(g, rows[i].id, rows[i].org_id, rows[i].project_id, rows[i].name,
                         rows[i].created_at, cfg) == 0)
                ++*added;
            json_decref(cfg);
        }
        pool_rec_clear(&rows[i]);
    }
    xfree(rows);
    return 0;
}

void pools_init(struct app *app)
{
    P.app = app;
    session_ext_register(&pools_ext);
}

int pools_start(struct app *app)
{
    chromium_launcher.ctx = app;
    struct pool_engine_opts o = {.launcher = &chromium_launcher, .sessions = app->sessions};
    struct pool_engine *g = pool_engine_new(&o);
    /* On a shared store a node runs the pools homed on it, which it learns
     * once registered (pools_adopt). */
    size_t n = 0;
    if (!store_shared(app->store) && load_pools(app, g, NULL, &n) != 0) {
        pool_engine_free(g);
        return E_INTERNAL;
    }
    if (n)
        log_info("pools: %zu pool(s) restored; refilling", n);
    __atomic_store_n(&P.eng, g, __ATOMIC_RELEASE);
    return pool_engine_start(g);
}

void pools_adopt(void *ctx)
{
    struct app *app = ctx;
    struct pool_engine *g = engine();
    char me[STORE_ID];
    node_id(app->node, me);
    size_t n = 0;
    if (g && load_pools(app, g, me, &n) == 0 && n)
        log_info("pools: %zu pool(s) taken over by this node; filling", n);
}

void pools_fence(void)
{
    struct pool_engine *g = engine();
    if (g)
        pool_delete_all(g);
}

void pools_drain(void)
{
    if (engine())
        pool_engine_drain(engine());
}

void pools_stop(void)
{
    struct pool_engine *g = engine();
    __atomic_store_n(&P.eng, NULL, __ATOMIC_RELEASE);
    pool_engine_free(g);
}

/* A node asks a pool's home node to flush it (a profile re-authenticated by
 * managed auth on a node that does not run the pool) with a token of this
 * audience, signed with the key every node shares: sub the pool, org its
 * organization, obj its project. It lives FLUSH_TOKEN_S seconds, and the
 * call HOME_CALL_MS at most (a flow's thread waits for it). */
#define FLUSH_AUD     "pool_flush"
#define FLUSH_TOKEN_S 60
#define HOME_CALL_MS  2000

/* POST /internal/pools/{token}/flush: a node's request to this node, the
 * pool's home, to flush it. The token is the authorization (no API key: the
 * asking node acts for a flow, not for a caller). */
int pools_flush_from_node(struct req *rq, struct resp *rs)
{
    struct app *app = api_app(rq);
    struct token_claims c;
    int rc = token_verify(app->token_key, sizeof app->token_key, rq->params[0], FLUSH_AUD,
                          clock_now_ms() / 1000, &c, &rq->err);
    if (rc)
        return rc;
    struct pool_rec r;
    memset(&r, 0, sizeof r);
    rc = store_pool_get(app->store, c.org, c.obj, c.sub, &r);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "browser pool %s not found", c.sub);
    if (rc)
        return rc;
    char url[512];
    struct err e;
    err_init(&e);
    int here = node_locate(app->node, r.node_id, url, sizeof url, &e) == 0 && engine() &&
               pool_flush(engine(), r.id) == 0;
    if (here)
        log_info("pool %s: flushed (its profile was re-authenticated on another node)", r.id);
    else
        rc = err_set(&rq->err, E_UNAVAIL, "node_unavailable",
                     "browser pool %s does not run on this node (its node is %s)", r.id, r.node_id);
    pool_rec_clear(&r);
    if (rc)
        return rc;
    resp_empty(rs, 204);
    return 0;
}

/* Asks the node at url, the home of pool r, to flush it. */
static int flush_on_node(struct app *app, const char *url, const struct pool_rec *r, struct err *e)
{
    struct token_claims c = {.exp = clock_now_ms() / 1000 + FLUSH_TOKEN_S};
    snprintf(c.sub, sizeof c.sub, "%s", r->id);
    snprintf(c.org, sizeof c.org, "%s", r->org_id);
    snprintf(c.aud, sizeof c.aud, "%s", FLUSH_AUD);
    snprintf(c.obj, sizeof c.obj, "%s", r->project_id);
    char tok[TOKEN_MAX], path[TOKEN_MAX + 64];
    if (token_sign(app->token_key, sizeof app->token_key, &c, tok, sizeof tok) != 0)
        return err_set(e, E_INTERNAL, "internal", "the flush token did not fit");
    snprintf(path, sizeof path, "/internal/pools/%s/flush", tok);
    int status = 0;
    json_t *got = NULL;
    int rc = peer_call_json(url, "POST", path, NULL, HOME_CALL_MS, &status, &got, e);
    const char *why = jsonx_str(got, "message");
    if (rc == 0 && status != 204)
        rc = err_set(e, E_UNAVAIL, "node_unavailable", "it answered %d (%s)", status,
                     why ? why : "no message");
    json_decref(got);
    return rc;
}

/* Flushes pool r where it runs: here, or on its home node (a cluster:
 * docs/multinode.md "Pools"). */
static void flush_at_home(struct app *app, const struct pool_rec *r, const char *profile_name)
{
    char url[512];
    struct err e;
    err_init(&e);
    int at = node_locate(app->node, r->node_id, url, sizeof url, &e);
    if (at == 0) {
        if (engine() && pool_flush(engine(), r->id) == 0)
            log_info("pool %s: flushed (profile %s re-authenticated)", r->id, profile_name);
        return;
    }
    if (at == 1 && flush_on_node(app, url, r, &e) == 0) {
        log_info("pool %s: flushed (profile %s re-authenticated) on its node %s", r->id,
                 profile_name, r->node_id);
        return;
    }
    log_warn("pool %s: not flushed after profile %s was re-authenticated: its node %s: %s", r->id,
             profile_name, r->node_id, e.message);
}

/* Flushes the pools of org/project whose browsers load profile_name (a
 * profile re-authenticated by managed auth, api/authconn.c): their idle
 * browsers restart on the saved state, on whichever node each pool runs. */
void pools_flush_profile(struct app *app, const char *org_id, const char *project_id,
                         const char *profile_name)
{
    struct page pg = {.limit = 100, .offset = 0};
    for (;;) {
        struct pool_rec *rows = NULL;
        size_t n = 0;
        if (store_pool_list(app->store, org_id, project_id, NULL, NULL, NULL, NULL, &pg, &rows,
                            &n) != 0)
            return;
        for (size_t i = 0; i < n; i++) {
            json_t *cfg = json_loads(rows[i].config ? rows[i].config : "{}", 0, NULL);
            const char *name = jsonx_str(json_object_get(cfg, "profile"), "name");
            if (name && strcmp(name, profile_name) == 0)
                flush_at_home(app, &rows[i], profile_name);
            json_decref(cfg);
            pool_rec_clear(&rows[i]);
        }
        xfree(rows);
        if (!pg.has_more)
            return;
        pg.offset += n;
    }
}
