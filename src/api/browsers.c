/*
 * Browser sessions: POST/GET/PATCH/DELETE /browsers and the CDP WebSocket
 * endpoint /browser/cdp.
 *
 * A session is a row in the store (its settings in a JSON document) plus,
 * while it is active, a live browser in the session manager. The handlers
 * validate with src/domain/session_rules, launch and stop through
 * src/runtime, and relay CDP through src/proxy.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "api/browsers.h"
#include "api/extensions.h"
#include "api/proxies.h"
#include "api/replays.h"
#include "api/session_ext.h"
#include "cluster/node.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/token.h"
#include "core/xalloc.h"
#include "domain/entitlements.h"
#include "domain/session_rules.h"
#include "domain/spare_match.h"
#include "domain/telemetry_cfg.h"
#include "proxy/cdp_client.h"
#include "proxy/relay.h"
#include "proxy/ws.h"
#include "runtime/admit.h"
#include "runtime/chromium.h"
#include "runtime/profile_archive.h"
#include "runtime/sandbox.h"
#include "runtime/sessmgr.h"
#include "runtime/spares.h"

#define LAUNCH_TIMEOUT_MS   20000
#define TOKEN_LIFETIME_S    (24 * 3600)
#define CDP_CALL_TIMEOUT_MS 5000

static void remove_tree(const char *path);

/* ---- records ---- */

void api_session_dir(const struct app *app, const char *id, char *out, size_t cap)
{
    snprintf(out, cap, "%s/sessions/%s", app->cfg.data_dir, id);
}

int api_live_session(struct req *rq, struct session_rec *rec, struct live **live, char *ws,
                     size_t cap)
{
    struct app *app = api_app(rq);
    struct auth *a = api_auth(rq);
    *live = NULL;
    int rc = store_session_get(app->store, a->org.id, a->project.id, rq->params[0], 1, rec);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "browser session %s not found", rq->params[0]);
    if (rc)
        return rc;
    struct live *l = sessmgr_get(app->sessions, rec->id);
    if (!l || live_ws_url(l, ws, cap) != 0) {
        rc =
            err_set(&rq->err, E_CONFLICT, "session_ended", "browser session %s has ended", rec->id);
        sessmgr_put(l);
        session_rec_clear(rec);
        return rc;
    }
    *live = l;
    return 0;
}

char *api_public_ws_url(const struct app *app, const char *path, const char *token)
{
    const char *pub = app->cfg.public_url;
    const char *scheme = "ws://";
    if (strncmp(pub, "https://", 8) == 0) {
        scheme = "wss://";
        pub += 8;
    } else if (strncmp(pub, "http://", 7) == 0) {
        pub += 7;
    }
    size_t n = strlen(pub);
    while (n && pub[n - 1] == '/')
        n--;
    return xasprintf("%s%.*s%s?jwt=%s", scheme, (int)n, pub, path, token);
}

/* ws:// or wss:// form of the public URL plus path and a fresh token. */
static json_t *signed_url(const struct app *app, const struct session_rec *s, const char *aud,
                          const char *path)
{
    struct token_claims c = {.exp = clock_now_ms() / 1000 + (app->cfg.token_ttl_s > 0
                                                                 ? app->cfg.token_ttl_s
                                                                 : TOKEN_LIFETIME_S)};
    snprintf(c.sub, sizeof c.sub, "%s", s->id);
    snprintf(c.org, sizeof c.org, "%s", s->org_id);
    snprintf(c.aud, sizeof c.aud, "%s", aud);
    char tok[TOKEN_MAX];
    if (token_sign(app->token_key, sizeof app->token_key, &c, tok, sizeof tok) != 0)
        tok[0] = '\0';
    char *url = api_public_ws_url(app, path, tok);
    json_t *v = json_string(url);
    xfree(url);
    return v;
}

/* The Browser record of the interface document. */
static json_t *render_session(struct app *app, const struct session_rec *s)
{
    char t[40];
    json_t *d = json_loads(s->data, 0, NULL);
    if (!d)
        d = json_object();
    json_t *r = json_object();
    json_object_set_new(r, "session_id", json_string(s->id));
    json_object_set_new(r, "created_at",
                        json_string(clock_fmt_rfc3339(s->created_at, t, sizeof t)));
    json_object_set_new(r, "cdp_ws_url", signed_url(app, s, "cdp", "/browser/cdp"));
    json_object_set_new(r, "webdriver_ws_url",
                        signed_url(app, s, "webdriver", "/browser/webdriver"));
    /* The session's own API (api_session_url_rewrite), authorized by the
     * jwt of cdp_ws_url, which the official client takes from there. */
    if (strcmp(s->status, "active") == 0) {
        const char *pub = app->cfg.public_url;
        size_t n = strlen(pub);
        while (n && pub[n - 1] == '/')
            n--;
        char *base = xasprintf("%.*s/browser/sessions/%s", (int)n, pub, s->id);
        json_object_set_new(r, "base_url", json_string(base));
        xfree(base);
    }
    static const char *const copied[] = {
        "region",     "stealth", "headless", "memory",        "timeout_seconds",
        "kiosk_mode", "gpu",     "viewport", "chrome_policy", "network",
        "start_url",  "pool",    NULL};
    for (size_t i = 0; copied[i]; i++) {
        json_t *v = json_object_get(d, copied[i]);
        if (v)
            json_object_set(r, copied[i], v);
    }
    if (s->name[0])
        json_object_set_new(r, "name", json_string(s->name));
    json_t *tags = json_object_get(d, "tags");
    if (json_is_object(tags))
        json_object_set(r, "tags", tags);
    json_t *proxy = json_object_get(d, "proxy");
    if (proxy)
        json_object_set(r, "proxy", proxy);
    const char *legacy = jsonx_str(proxy, "id");
    if (legacy)
        json_object_set_new(r, "proxy_id", json_string(legacy));
    json_t *tel = json_object_get(d, "telemetry");
    json_object_set_new(r, "telemetry",
                        tel && !json_is_null(tel) ? telcfg_to_record(tel) : json_null());
    long long up = s->uptime_ms;
    if (strcmp(s->status, "active") == 0) {
        struct live *l = sessmgr_get(app->sessions, s->id);
        if (l) {
            up = live_uptime_ms(l);
            sessmgr_put(l);
        } else if (store_shared(app->store)) {
            /* Another node runs it: its time since the session began. */
            up = clock_now_ms() - s->created_at;
            up = up > 0 ? up : 0;
        }
    } else {
        json_object_set_new(r, "deleted_at",
                            json_string(clock_fmt_rfc3339(s->deleted_at, t, sizeof t)));
        json_object_set_new(r, "usage_status",
                            json_string(s->usage_status[0] ? s->usage_status : "pending"));
    }
    json_object_set_new(r, "usage", json_pack("{s:I}", "uptime_ms", (json_int_t)up));
    char dir[1200];
    api_session_dir(app, s->id, dir, sizeof dir);
    struct session_ctx sc = {app, s, d, NULL, dir, NULL};
    for (const struct session_ext *const *x = session_ext_all(); *x; x++)
        if ((*x)->render)
            (*x)->render(&sc, r);
    json_decref(d);
    return r;
}

/* ---- lookups ---- */

static int load_session(struct req *rq, int include_deleted, struct session_rec *s)
{
    struct auth *a = api_auth(rq);
    memset(s, 0, sizeof *s);
    int rc = store_session_get(api_app(rq)->store, a->org.id, a->project.id, rq->params[0],
                               include_deleted, s);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "browser session %s not found", rq->params[0]);
    return rc;
}

static int bool_query(struct req *rq, const char *name, int *out)
{
    const char *v = req_query(rq, name);
    *out = 0;
    if (!v)
        return 0;
    if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0)
        *out = 1;
    else if (strcmp(v, "false") != 0 && strcmp(v, "0") != 0)
        return err_field(&rq->err, name, "must be true or false");
    return 0;
}

/* ---- create ---- */

/* Vaults are an area this server does not serve (issue notes): a clear 501
 * naming the field, never a silent drop. The fields modules serve
 * (profile, proxy, telemetry export) are checked by their hooks;
 * extensions by api/extensions before launch. */
static int unsupported_create_fields(struct err *e, const struct sessrules_create *c)
{
    if (c->vaults && json_array_size(c->vaults) > 0)
        return err_set(e, E_NOTIMPL, "not_implemented",
                       "vaults: vaults are not served by this server");
    return 0;
}

static long long memory_bytes(const char *m)
{
    long long gib = 0;
    for (; *m >= '0' && *m <= '9'; m++)
        gib = gib * 10 + (*m - '0');
    return gib << 30;
}

static json_t *proxy_record(const struct proxysel *p)
{
    return json_pack("{s:s}", "mode", p->kind == PROXYSEL_DIRECT ? "direct" : "default");
}

/* The settings document stored with the session. */
static json_t *settings_doc(const struct sessrules_create *c)
{
    json_t *d = json_object();
    json_object_set_new(d, "headless", json_boolean(c->headless));
    json_object_set_new(d, "stealth", json_boolean(c->stealth));
    json_object_set_new(d, "kiosk_mode", json_boolean(c->kiosk_mode));
    json_object_set_new(d, "gpu", json_boolean(c->gpu));
    json_object_set_new(d, "timeout_seconds", json_integer(c->timeout_seconds));
    json_object_set_new(d, "region", json_string(c->region));
    json_object_set_new(d, "memory", json_string(c->memory));
    json_object_set_new(d, "viewport", viewport_to_json(&c->viewport));
    if (c->tags)
        json_object_set(d, "tags", c->tags);
    if (c->chrome_policy)
        json_object_set(d, "chrome_policy", c->chrome_policy);
    if (c->network)
        json_object_set(d, "network", c->network);
    if (c->start_url[0])
        json_object_set_new(d, "start_url", json_string(c->start_url));
    json_object_set(d, "telemetry", c->telemetry ? c->telemetry : json_null());
    json_object_set_new(d, "proxy", proxy_record(&c->proxy));
    return d;
}

static int check_limits(struct app *app, const json_t *ent, const struct sessrules_create *c,
                        struct err *e)
{
    if (strcmp(c->region, app->cfg.region) != 0)
        return err_field(e, "region", "this server serves only region %s", app->cfg.region);
    if (c->gpu && !ent_feature_on(ent, "gpu"))
        return err_set(e, E_FORBIDDEN, "feature_not_enabled",
                       "gpu: features.gpu is not enabled for this organization's plan");
    if (c->gpu)
        return err_field(e, "gpu", "this node has no GPU; create the session without gpu");
    return 0;
}

/* Runs the ending hooks of every module, removes the session's folders and
 * records the end in the store. The browser has stopped. */
static void session_finish(struct app *app, struct session_rec *s, json_t *doc, const char *reason,
                           long long uptime_ms);
static void remove_session_files(struct app *app, const char *id);
static void recover_rows(struct app *app, const char *node);
static void remove_orphan_folders(struct app *app);

/* A launch failure is the server's fault, never the client's: the options
 * were built by the server from settings that already passed validation, so
 * an E_INVALID from chromium_launch means the server's own configuration is
 * wrong (its data folder, its Chromium path). Answers 500 for that and for
 * system call failures, 503 when the browser did not come up (it may on a
 * retry); the field details name server settings and are not passed on. */
static int launch_failed(const char *id, const char *what, int rc, struct err *e)
{
    char why[ERR_MSG_MAX];
    snprintf(why, sizeof why, "%s", e->message);
    if (rc == E_INVALID && e->ndetails > 0)
        snprintf(why, sizeof why, "%s", e->details[0].message);
    log_error("session %s: the browser did not %s: %s%s", id, what, why,
              rc == E_INVALID ? " (a server setting is wrong: check --data / BROWSERD_DATA and "
                                "--chromium / BROWSERD_CHROMIUM)"
                              : "");
    struct err clean;
    err_init(&clean);
    if (rc == E_UNAVAIL)
        (void)err_set(&clean, E_UNAVAIL, "browser_unavailable", "the browser did not %s: %s", what,
                      why);
    else
        (void)err_set(&clean, E_INTERNAL, "browser_launch_failed",
                      "the server could not %s a browser (a fault of the server, not of the "
                      "request): %s",
                      what, why);
    *e = clean;
    return e->rc;
}

/* Standalone sessions share the org's limit with every pool's capacity,
 * checked under the session manager's one lock: 429 when it is reached. */
static int reserve_slot(struct app *app, const char *org_id, const json_t *ent, struct err *e)
{
    int64_t lim;
    long long limit = ent_limit(ent, "max_concurrent_browsers", &lim) ? lim : -1;
    long long pool_capacity = 0;
    /* On a shared store the limit is the cluster's, checked by the store
     * when the row is written (insert_session): the local reservation only
     * keeps this node's books. */
    if (store_shared(app->store))
        limit = -1;
    if (sessmgr_reserve(app->sessions, org_id, limit, &pool_capacity) == 0)
        return 0;
    e->retry_after = 5;
    return err_set(e, E_LIMIT, "rate_limited",
                   "limits.max_concurrent_browsers (%lld, of which %lld held by pools) "
                   "reached for this organization",
                   limit, pool_capacity);
}

/* Writes a new session's row, owned by this node. A standalone session on a
 * shared store is admitted by the store against the org's limit counted over
 * the whole cluster (store.h, session_admit): 429 when it is reached. */
static int insert_session(struct app *app, struct session_rec *s, const json_t *ent, int pooled,
                          struct err *e)
{
    node_id(app->node, s->node_id);
    if (pooled || !store_shared(app->store))
        return store_session_insert(app->store, s);
    int64_t lim, pools = 0;
    int64_t limit = ent_limit(ent, "max_concurrent_browsers", &lim) ? lim : -1;
    int rc = store_session_admit(app->store, s, limit, &pools);
    if (rc == E_LIMIT) {
        e->retry_after = 5;
        return err_set(e, E_LIMIT, "rate_limited",
                       "limits.max_concurrent_browsers (%lld, of which %lld held by pools) "
                       "reached for this organization",
                       (long long)limit, (long long)pools);
    }
    return rc;
}

/* What launching a spare hands back instead of a live session: the browser
 * and its settings document, owned by the caller (spare_launch). */
struct spare_out {
    struct chromium *browser;
    json_t *doc;
};

/* browsers_spawn, or with `spare` a spare's launch: no store row, no live
 * entry, no started hooks (they run at hand-out, for the session's owner). */
/* Set once the server stops: spares being launched give up (chromium.h). */
static int spares_cancel;

static int spawn(struct app *app, const char *org_id, const char *project_id, const json_t *ent,
                 const json_t *body, const json_t *extra, int pooled, struct session_rec *out,
                 struct spare_out *spare, struct err *e)
{
    memset(out, 0, sizeof *out);
    struct sessrules_create c;
    int rc = sessrules_validate_create(body, &c, e);
    if (rc)
        return rc;
    if ((rc = unsupported_create_fields(e, &c)) || (rc = check_limits(app, ent, &c, e))) {
        sessrules_create_clear(&c);
        return rc;
    }
    /* Where a launch spends its time, for the log line below; "store" is
     * the admission (reserve_slot) and the row's insert. */
    int64_t t0 = clock_mono_us();
    if (!pooled && (rc = reserve_slot(app, org_id, ent, e)) != 0) {
        sessrules_create_clear(&c);
        return rc;
    }
    struct session_rec *s = out;
    crypto_new_id(s->id);
    snprintf(s->org_id, sizeof s->org_id, "%s", org_id);
    snprintf(s->project_id, sizeof s->project_id, "%s", project_id);
    snprintf(s->name, sizeof s->name, "%s", c.name);
    snprintf(s->status, sizeof s->status, "active");
    s->created_at = clock_now_ms();
    json_t *doc = settings_doc(&c);
    if (extra)
        json_object_update(doc, (json_t *)extra);
    s->data = jsonx_dump(doc);

    char dir[1200];
    api_session_dir(app, s->id, dir, sizeof dir);
    char *policy =
        c.chrome_policy && json_object_size(c.chrome_policy) ? jsonx_dump(c.chrome_policy) : NULL;
    struct chromium_opts o = {
        .binary = app->cfg.chromium,
        .user_data_dir = dir,
        .headless = c.headless,
        .stealth = c.stealth,
        .kiosk = c.kiosk_mode,
        .width = c.viewport.width,
        .height = c.viewport.height,
        .policy_json = policy,
        .start_url = c.start_url[0] ? c.start_url : NULL,
        .memory_max_bytes = memory_bytes(c.memory),
        .cancel = spare ? &spares_cancel : NULL,
    };
    struct session_ctx sc = {app, s, doc, body, dir, &o};
    int64_t t_store, t_sandbox, t_files, t_modules;
    /* The admission (runtime/admit.h) and the name first: a create past its
     * share of the server, or a duplicate, leaves nothing behind. */
    rc = sandbox_enabled()
             ? admit_check(spare ? NULL : org_id, o.memory_max_bytes, SANDBOX_PIDS_MAX, e)
             : 0;
    if (rc == 0)
        rc = spare ? 0 : insert_session(app, s, ent, pooled, e);
    t_store = clock_mono_us();
    if (rc == E_CONFLICT)
        err_set(e, rc, "conflict", "an active session named %s already exists", s->name);
    int inserted = rc == 0 && !spare;
    /* The sandbox before the modules: the egress proxy listens inside its
     * network namespace. The browser holds its own reference. */
    struct sandbox *sb = NULL;
    const char **ext_dirs = NULL;
    if (rc == 0 && sandbox_enabled() &&
        (rc = sandbox_create(s->id, spare ? NULL : org_id, o.memory_max_bytes, &sb, e)) != 0 &&
        !e->retry_after) /* past the admission's budget: its 429 or 503 stands */
        rc = launch_failed(s->id, "sandbox", rc, e);
    /* A spare starts and waits in the background: its launch and the work
     * Chromium does after it is ready yield the CPU to the creates being
     * served (docs/spares.md); hand-out lifts it. */
    if (rc == 0 && sb && spare)
        (void)sandbox_set_background(sb, 1);
    t_sandbox = clock_mono_us();
    if (rc == 0 && sb) {
        char root[1300];
        snprintf(root, sizeof root, "%s/sessions", app->cfg.data_dir);
        (void)mkdir(root, 0700); /* chromium_launch makes the rest of the path */
        snprintf(root, sizeof root, "%s.root", dir);
        if ((rc = sandbox_root_create(sb, root, LIM_SESSION_DISK_BYTES, e)) != 0)
            rc = launch_failed(s->id, "sandbox", rc, e);
    }
    /* The profile in memory, off the server's disk (sandbox.h); removed with
     * the session's folders, after the ending hooks saved what they keep. */
    if (rc == 0 && sb && (rc = sandbox_home_mount(dir, LIM_SESSION_PROFILE_BYTES, e)) != 0)
        rc = launch_failed(s->id, "sandbox", rc, e);
    o.sandbox = sb;
    t_files = clock_mono_us();
    /* Extensions unpack into the sandbox's files (api/extensions.h). */
    if (rc == 0 && json_array_size(c.extensions))
        rc = extensions_session_prepare(app, org_id, project_id, ent, c.extensions, sb, doc, e);
    if (rc == 0)
        o.extension_dirs = ext_dirs = extensions_launch_dirs(doc);
    for (const struct session_ext *const *x = session_ext_all(); rc == 0 && *x; x++)
        if ((*x)->prepare)
            rc = (*x)->prepare(&sc, e);
    struct chromium *browser = NULL;
    t_modules = clock_mono_us();
    if (rc == 0 && (rc = chromium_launch(&o, LAUNCH_TIMEOUT_MS, &browser, e)) != 0)
        rc = launch_failed(s->id, "start", rc, e);
    if (rc == 0) {
        int64_t t1 = clock_mono_us();
        log_info("session %s launched%s in %.1f ms (store %.1f, sandbox %.1f, files %.1f, "
                 "modules %.1f, browser %.1f)",
                 s->id, spare ? " as a spare" : "", (double)(t1 - t0) / 1e3,
                 (double)(t_store - t0) / 1e3, (double)(t_sandbox - t_store) / 1e3,
                 (double)(t_files - t_sandbox) / 1e3, (double)(t_modules - t_files) / 1e3,
                 (double)(t1 - t_modules) / 1e3);
    }
    sandbox_unref(sb);
    xfree(policy);
    xfree(ext_dirs);
    if (rc) {
        if (!pooled)
            sessmgr_unreserve(app->sessions, org_id);
        if (inserted || spare) /* a spare's modules were prepared too */
            session_finish(app, s, doc, "launch failed", 0);
        json_decref(doc);
        session_rec_clear(s);
        sessrules_create_clear(&c);
        return rc;
    }
    s->pid = chromium_pid(browser);
    s->pid_start = chromium_start_ticks(browser);
    s->xvfb_pid = chromium_xvfb_pid(browser);
    s->xvfb_start = chromium_xvfb_start_ticks(browser);
    if (spare) {
        spare->browser = browser;
        spare->doc = doc;
        sessrules_create_clear(&c);
        return 0;
    }
    for (const struct session_ext *const *x = session_ext_all(); *x; x++)
        if ((*x)->started)
            (*x)->started(&sc, chromium_ws_url(browser));
    xfree(s->data);
    s->data = jsonx_dump(doc); /* with what the modules added */
    if (store_session_update(app->store, s) != 0)
        log_error("session %s: could not record the browser's pid", s->id);
    /* Pool browsers are not timed out while available: the pool sets the
     * timeout when it leases one. */
    sessmgr_add(app->sessions, s->id, s->org_id, browser, pooled ? 0 : (int)c.timeout_seconds,
                pooled);
    log_info("session %s started (pid %d)%s", s->id, s->pid, pooled ? " for a pool" : "");
    json_decref(doc);
    sessrules_create_clear(&c);
    return 0;
}

int browsers_spawn(struct app *app, const char *org_id, const char *project_id, const json_t *ent,
                   const json_t *body, const json_t *extra, int pooled, struct session_rec *out,
                   struct err *e)
{
    return spawn(app, org_id, project_id, ent, body, extra, pooled, out, NULL, e);
}

/* live_with_browser callback: a reference to the browser's sandbox. */
static int take_sandbox(void *ctx, struct chromium *c)
{
    struct sandbox *sb = chromium_sandbox(c);
    *(struct sandbox **)ctx = sb ? sandbox_ref(sb) : NULL;
    return 0;
}

/* Restarts a live session's browser with its settings (s->data): the old
 * browser closes cleanly; with replace_dir its folder is replaced by the
 * archive's contents (none: an empty profile). */
static int restart_browser(struct app *app, const struct session_rec *s, int replace_dir,
                           const char *archive_path, struct err *e)
{
    json_t *d = json_loads(s->data, 0, NULL);
    if (!d)
        return err_set(e, E_INTERNAL, "internal", "session %s has no settings", s->id);
    char dir[1200];
    api_session_dir(app, s->id, dir, sizeof dir);
    json_t *vp = json_object_get(d, "viewport");
    json_t *pol = json_object_get(d, "chrome_policy");
    char *policy = json_object_size(pol) ? jsonx_dump(pol) : NULL;
    const char *egress = jsonx_str(d, "egress_url");
    struct chromium_opts o = {
        .binary = app->cfg.chromium,
        .user_data_dir = dir,
        .headless = jsonx_bool(d, "headless", 1),
        .stealth = jsonx_bool(d, "stealth", 0),
        .kiosk = jsonx_bool(d, "kiosk_mode", 0),
        .width = (int)json_integer_value(json_object_get(vp, "width")),
        .height = (int)json_integer_value(json_object_get(vp, "height")),
        .policy_json = policy,
        .proxy_server = egress,
        .memory_max_bytes = memory_bytes(jsonx_str(d, "memory") ? jsonx_str(d, "memory") : "8"),
    };
    const char **ext_dirs = extensions_launch_dirs(d);
    o.extension_dirs = ext_dirs;
    /* The old browser closes cleanly (it may be saving to its own profile),
     * then its folder is replaced by the profile's state. */
    struct live *l = sessmgr_get(app->sessions, s->id);
    if (!l) {
        xfree(policy);
        xfree(ext_dirs);
        json_decref(d);
        return err_set(e, E_CONFLICT, "session_ended", "browser session %s has ended", s->id);
    }
    /* The same sandbox (the egress listener lives in its namespace). */
    struct sandbox *sb = NULL;
    (void)live_with_browser(l, take_sandbox, &sb);
    o.sandbox = sb;
    struct chromium *fresh = NULL;
    int rc = sessmgr_replace(app->sessions, s->id, NULL);
    if (replace_dir)
        remove_tree(dir);
    if (rc == 0 && replace_dir && archive_path)
        rc = profile_archive_extract(archive_path, dir, e);
    if (rc == 0 && (rc = chromium_launch(&o, LAUNCH_TIMEOUT_MS, &fresh, e)) != 0)
        rc = launch_failed(s->id, "restart", rc, e);
    sandbox_unref(sb);
    if (rc == 0) {
        rc = sessmgr_replace(app->sessions, s->id, fresh);
        struct session_rec row = *s;
        row.data = s->data;
        row.pid = chromium_pid(fresh);
        row.pid_start = chromium_start_ticks(fresh);
        row.xvfb_pid = chromium_xvfb_pid(fresh);
        row.xvfb_start = chromium_xvfb_start_ticks(fresh);
        if (store_session_update(app->store, &row) != 0)
            log_error("session %s: could not record the restarted browser's pid", s->id);
        for (const struct session_ext *const *x = session_ext_all(); *x; x++)
            if ((*x)->started) {
                struct session_ctx sc = {app, s, d, NULL, dir, NULL};
                (*x)->started(&sc, chromium_ws_url(fresh));
            }
    }
    sessmgr_put(l);
    xfree(policy);
    xfree(ext_dirs);
    json_decref(d);
    return rc;
}

int browsers_restart_with_profile(struct app *app, const struct session_rec *s,
                                  const char *archive_path, struct err *e)
{
    return restart_browser(app, s, 1, archive_path, e);
}

int browsers_restart(struct app *app, const struct session_rec *s, struct err *e)
{
    return restart_browser(app, s, 0, NULL, e);
}

json_t *browsers_render(struct app *app, const struct session_rec *s)
{
    return render_session(app, s);
}

/* ---- spares: pre-launched browsers (runtime/spares.h, docs/spares.md) ----
 *
 * A spare is launched like a session of nobody: a fresh id, its own sandbox,
 * cgroup, files and egress listener, all named by that id, but no store row,
 * no live entry and no started hooks. Handing it out makes the id the
 * session's: nothing is renamed, the row is inserted then (created_at the
 * hand-out time) and the started hooks run for the owner. Until then, a
 * marker file DATA/sessions/ID.spare holds its processes, so that a restart
 * after a crash ends them and removes its folders (spares_recover); the
 * reaper covers the crash itself as for any session.
 */

static void apply_navigate(const char *ws_url, const char *url);
static void teardowns_wait(void);

struct spare_item {
    struct session_rec rec; /* the id; org "" until handed out */
    int kind;
    struct chromium *browser;
    json_t *doc;
};

static char *spare_marker(const struct app *app, const char *id)
{
    return xasprintf("%s/sessions/%s.spare", app->cfg.data_dir, id);
}

static int spare_launch(void *ctx, int kind, void **item)
{
    struct app *app = ctx;
    json_t *body = json_loads(spare_kind_body((enum spare_kind)kind), 0, NULL);
    json_object_set_new(body, "region", json_string(app->cfg.region));
    json_t *ent = json_object(); /* no org: nothing entitlement-gated is asked */
    struct spare_item *sp = xcalloc(1, sizeof *sp);
    struct spare_out out = {0};
    struct err e;
    err_init(&e);
    int rc = spawn(app, "", "", ent, body, NULL, 1, &sp->rec, &out, &e);
    json_decref(body);
    json_decref(ent);
    if (rc) {
        log_warn("spares: %s", e.message);
        xfree(sp);
        return rc;
    }
    sp->kind = kind;
    sp->browser = out.browser;
    sp->doc = out.doc;
    char *path = spare_marker(app, sp->rec.id);
    FILE *f = fopen(path, "we");
    if (f) {
        fprintf(f, "%d %llu %d %llu\n", sp->rec.pid, sp->rec.pid_start, sp->rec.xvfb_pid,
                sp->rec.xvfb_start);
        fclose(f);
    }
    xfree(path);
    log_info("spares: %s spare %s launched (pid %d)", spare_kind_name((enum spare_kind)kind),
             sp->rec.id, sp->rec.pid);
    *item = sp;
    return 0;
}

static int spare_alive(void *ctx, void *item)
{
    (void)ctx;
    struct spare_item *sp = item;
    int status;
    return !chromium_exited(sp->browser, &status);
}

/* Ends a spare nobody holds: it has nothing to save, so no graceful close.
 * The ending hooks close what its prepare opened (the egress listener). */
static void spare_end(void *ctx, void *item, const char *reason)
{
    struct app *app = ctx;
    struct spare_item *sp = item;
    chromium_stop(sp->browser, 500, 0);
    chromium_free(sp->browser);
    session_finish(app, &sp->rec, sp->doc, reason, 0);
    char *path = spare_marker(app, sp->rec.id);
    unlink(path);
    xfree(path);
    log_info("spares: spare %s ended: %s", sp->rec.id, reason);
    json_decref(sp->doc);
    session_rec_clear(&sp->rec);
    xfree(sp);
}

static const struct spares_launcher spare_launcher = {
    .launch = spare_launch,
    .alive = spare_alive,
    .end = spare_end,
};

int browsers_spares_start(struct app *app, int count, struct err *e)
{
    /* Unsandboxed, a spare's DevTools port would sit on the host's loopback
     * unprotected until hand-out (the egress protects it in the started
     * hook, which runs for the owner): no spares then. */
    if (count > 0 && !sandbox_enabled()) {
        log_info("spares: none (they need the session sandbox, docs/sandbox.md)");
        return 0;
    }
    struct spares_launcher l = spare_launcher;
    l.ctx = app;
    return spares_start(&l, count, &app->spares, e);
}

void browsers_spares_stop(struct app *app)
{
    /* A spare's launch in progress gives up now rather than finish only to
     * be ended (issue 30: a stop waited up to 20 s for one on a busy host). */
    __atomic_store_n(&spares_cancel, 1, __ATOMIC_RELEASE);
    spares_stop(app->spares);
    app->spares = NULL;
    teardowns_wait();
}

/* Ends the spares a previous run left (their marker files): processes that
 * outlived a watcher killed with the server, folders, the files' mount. */
static void spares_recover(struct app *app)
{
    char *root = xasprintf("%s/sessions", app->cfg.data_dir);
    DIR *d = opendir(root);
    struct dirent *de;
    int n = 0;
    while (d && (de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len <= 6 || len - 6 >= STORE_ID || strcmp(de->d_name + len - 6, ".spare") != 0)
            continue;
        struct session_rec rec;
        memset(&rec, 0, sizeof rec);
        snprintf(rec.id, sizeof rec.id, "%.*s", (int)(len - 6), de->d_name);
        char *path = xasprintf("%s/%s", root, de->d_name);
        FILE *f = fopen(path, "re");
        if (f) {
            if (fscanf(f, "%d %llu %d %llu", &rec.pid, &rec.pid_start, &rec.xvfb_pid,
                       &rec.xvfb_start) == 4) {
                if (rec.pid > 0)
                    (void)chromium_kill_stale(rec.pid, rec.pid_start);
                if (rec.xvfb_pid > 0)
                    (void)chromium_kill_stale(rec.xvfb_pid, rec.xvfb_start);
            }
            fclose(f);
        }
        session_finish(app, &rec, NULL, "server restarted", 0);
        unlink(path);
        xfree(path);
        n++;
    }
    if (d)
        closedir(d);
    xfree(root);
    if (n)
        log_info("recovery: removed %d spare browser(s) of the previous run", n);
}

/*
 * Serves a create from a ready spare when spare_match says one fits: *served
 * 0 (and nothing done, e untouched) when none fits or none is ready, so that
 * the caller launches cold; otherwise *served 1 and the result: 0 with the
 * session in *s, or the error (the org's limit, an unknown proxy, a duplicate
 * name). The limit is checked as for any create: a spare lets nobody past
 * it. The owner's proxy and network rules are applied to the spare's egress
 * (proxies_handout_apply).
 */
static int from_spare(struct app *app, const char *org_id, const char *project_id,
                      const json_t *ent, const json_t *body, struct session_rec *s, int *served,
                      struct err *e)
{
    *served = 0;
    if (!app->spares)
        return 0;
    struct err scratch;
    err_init(&scratch);
    struct sessrules_create c;
    if (sessrules_validate_create(body, &c, &scratch) != 0)
        return 0; /* the cold path reports it */
    enum spare_kind k = spare_match(&c, NULL);
    if (k == SPARE_NONE || unsupported_create_fields(&scratch, &c) ||
        check_limits(app, ent, &c, &scratch)) {
        sessrules_create_clear(&c);
        return 0;
    }
    *served = 1;
    int64_t t0 = clock_mono_us(); /* where a hand-out spends its time, for the log */
    int rc = reserve_slot(app, org_id, ent, e);
    /* The proxy and network rules resolve in the owner's store before a
     * spare is taken: a create they refuse (an unknown proxy) keeps the
     * spares and answers what a cold create answers. */
    struct proxies_handout ph = {0};
    if (rc == 0 &&
        (rc = proxies_handout_resolve(org_id, project_id, body, c.stealth, c.network, &ph, e)) != 0)
        sessmgr_unreserve(app->sessions, org_id);
    struct spare_item *sp = rc == 0 ? spares_take(app->spares, k) : NULL;
    if (rc == 0 && !sp) {
        sessmgr_unreserve(app->sessions, org_id);
        *served = 0;
    }
    if (!sp) {
        proxies_handout_clear(&ph);
        sessrules_create_clear(&c);
        return rc;
    }
    struct sandbox *ssb = chromium_sandbox(sp->browser);
    /* Its memory and pids now count against the owner's share (admit.h). */
    if (ssb && (rc = sandbox_adopt(ssb, org_id, e)) != 0) {
        spare_end(app, sp, "its owner is at its share of the server");
        spares_handout_done(app->spares);
        sessmgr_unreserve(app->sessions, org_id);
        sessrules_create_clear(&c);
        return rc;
    }
    if (ssb)
        (void)sandbox_set_background(ssb, 0); /* the owner's browser runs at normal priority */
    memset(s, 0, sizeof *s);
    *s = sp->rec;
    s->data = NULL;
    snprintf(s->org_id, sizeof s->org_id, "%s", org_id);
    snprintf(s->project_id, sizeof s->project_id, "%s", project_id);
    snprintf(s->name, sizeof s->name, "%s", c.name);
    s->created_at = clock_now_ms(); /* the session begins at hand-out */
    json_t *doc = json_deep_copy(sp->doc);
    json_t *mine = settings_doc(&c);
    json_object_update(doc, mine);
    json_decref(mine);
    /* The egress listener becomes the owner's (its rules, its proxy): before
     * the started hooks turn its routes on and before start_url. */
    int64_t t_taken = clock_mono_us();
    rc = proxies_handout_apply(&ph, s, doc, e);
    proxies_handout_clear(&ph);
    int64_t t_egress = clock_mono_us();
    if (rc) {
        spare_end(app, sp, "its egress could not be given to its owner");
        spares_handout_done(app->spares);
        sessmgr_unreserve(app->sessions, org_id);
        json_decref(doc);
        session_rec_clear(s);
        sessrules_create_clear(&c);
        return rc;
    }
    /* The started hooks before the row, so that the row is written once
     * (the store commits every write to disk: one commit less per create). */
    char dir[1200];
    api_session_dir(app, s->id, dir, sizeof dir);
    struct session_ctx sc = {app, s, doc, body, dir, NULL};
    for (const struct session_ext *const *x = session_ext_all(); *x; x++)
        if ((*x)->started)
            (*x)->started(&sc, chromium_ws_url(sp->browser));
    int64_t t_hooks = clock_mono_us();
    s->data = jsonx_dump(doc);
    rc = insert_session(app, s, ent, 0, e);
    int64_t t_row = clock_mono_us();
    if (rc) {
        if (rc == E_CONFLICT)
            err_set(e, rc, "conflict", "an active session named %s already exists", s->name);
        else if (rc != E_LIMIT)
            err_set(e, rc, "internal", "the session could not be stored");
        /* The hooks ran for the refused owner: this spare is spent. */
        spare_end(app, sp, "its create was refused");
        spares_handout_done(app->spares);
        sessmgr_unreserve(app->sessions, org_id);
        json_decref(doc);
        session_rec_clear(s);
        sessrules_create_clear(&c);
        return rc;
    }
    sessmgr_add(app->sessions, s->id, s->org_id, sp->browser, (int)c.timeout_seconds, 0);
    struct live *l = sessmgr_get(app->sessions, s->id);
    char ws[512];
    if (l) {
        live_uptime_from_now(l);
        if (c.start_url[0] && live_ws_url(l, ws, sizeof ws) == 0)
            apply_navigate(ws, c.start_url);
        sessmgr_put(l);
    }
    char *marker = spare_marker(app, s->id);
    unlink(marker);
    xfree(marker);
    int64_t t1 = clock_mono_us();
    log_info("session %s started from a %s spare (pid %d) in %.1f ms (admission and take %.1f, "
             "egress %.1f, hooks %.1f, row %.1f, live %.1f)",
             s->id, spare_kind_name((enum spare_kind)sp->kind), s->pid, (double)(t1 - t0) / 1e3,
             (double)(t_taken - t0) / 1e3, (double)(t_egress - t_taken) / 1e3,
             (double)(t_hooks - t_egress) / 1e3, (double)(t_row - t_hooks) / 1e3,
             (double)(t1 - t_row) / 1e3);
    json_decref(doc);
    json_decref(sp->doc);
    session_rec_clear(&sp->rec);
    xfree(sp);
    sessrules_create_clear(&c);
    spares_handout_done(app->spares); /* its replacement may launch now */
    return 0;
}

int browsers_create(struct req *rq, struct resp *rs)
{
    struct app *app = api_app(rq);
    struct auth *a = api_auth(rq);
    json_t *body;
    const json_t *ent;
    int rc = req_json_object(rq, 1, &body);
    if (rc)
        return rc;
    if ((rc = api_entitlements(rq, &ent))) {
        json_decref(body);
        return rc;
    }
    struct session_rec s;
    int served = 0;
    rc = from_spare(app, a->org.id, a->project.id, ent, body, &s, &served, &rq->err);
    if (!served) {
        rc = browsers_spawn(app, a->org.id, a->project.id, ent, body, NULL, 0, &s, &rq->err);
        /* The host had no room: spares are the first thing given up. */
        if (rc == E_UNAVAIL && spares_give_up(app->spares)) {
            err_init(&rq->err);
            rc = browsers_spawn(app, a->org.id, a->project.id, ent, body, NULL, 0, &s, &rq->err);
        }
    }
    json_decref(body);
    if (rc)
        return rc;
    resp_json(rs, 200, render_session(app, &s));
    session_rec_clear(&s);
    return 0;
}

int browsers_end(struct app *app, const char *session_id, const char *reason)
{
    long long up = 0;
    int rc = sessmgr_end(app->sessions, session_id, &up, NULL);
    browsers_on_end(app, session_id, reason, up);
    return rc;
}

/* ---- read ---- */

int browsers_get(struct req *rq, struct resp *rs)
{
    int inc = 0;
    if (bool_query(rq, "include_deleted", &inc))
        return E_INVALID;
    struct session_rec s;
    int rc = load_session(rq, inc, &s);
    if (rc)
        return rc;
    resp_json(rs, 200, render_session(api_app(rq), &s));
    session_rec_clear(&s);
    return 0;
}

struct tag_filter {
    struct session_filter *f;
    int bad;
    struct req *rq;
};

static void collect_tags(void *ctx, const char *k, const char *v)
{
    struct tag_filter *tf = ctx;
    size_t n = strlen(k);
    if (strncmp(k, "tags[", 5) != 0 || n < 7 || k[n - 1] != ']')
        return;
    if (tf->f->ntags >= 16) {
        tf->bad = err_field(&tf->rq->err, "tags", "at most 16 tag filters");
        return;
    }
    /* The key is kept inside the query string MHD owns; copy it out. */
    tf->f->tag_keys[tf->f->ntags] = xstrndup(k + 5, n - 6);
    tf->f->tag_values[tf->f->ntags] = v;
    tf->f->ntags++;
}

int browsers_list(struct req *rq, struct resp *rs)
{
    struct page pg = {0};
    int rc = req_page(rq, &pg.limit, &pg.offset);
    struct session_filter f = {0};
    f.status = req_query(rq, "status");
    if (!f.status)
        f.status = "active";
    if (strcmp(f.status, "active") != 0 && strcmp(f.status, "deleted") != 0 &&
        strcmp(f.status, "all") != 0)
        rc = err_field(&rq->err, "status", "must be active, deleted or all");
    f.query = req_query(rq, "query");
    struct tag_filter tf = {&f, 0, rq};
    req_query_each(rq, collect_tags, &tf);
    if (tf.bad)
        rc = E_INVALID;
    struct session_rec *rows = NULL;
    size_t n = 0;
    struct auth *a = api_auth(rq);
    if (rc == 0)
        rc = store_session_list(api_app(rq)->store, a->org.id, a->project.id, &f, &pg, &rows, &n);
    for (size_t i = 0; i < f.ntags; i++)
        xfree((void *)f.tag_keys[i]);
    if (rc)
        return rc;
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(arr, render_session(api_app(rq), &rows[i]));
        session_rec_clear(&rows[i]);
    }
    xfree(rows);
    resp_json(rs, 200, arr);
    resp_page(rs, pg.offset, n, pg.has_more);
    return 0;
}

/* ---- end ---- */

/* Records the end of a session in the store. */
static void record_end(struct app *app, struct session_rec *s, const char *reason,
                       long long uptime_ms)
{
    snprintf(s->status, sizeof s->status, "deleted");
    if (!s->deleted_at) /* a background teardown recorded it at the delete */
        s->deleted_at = clock_now_ms();
    s->uptime_ms = uptime_ms;
    snprintf(s->usage_status, sizeof s->usage_status, "ready");
    snprintf(s->end_reason, sizeof s->end_reason, "%s", reason);
    s->pid = 0;
    s->xvfb_pid = 0;
    if (store_session_update(app->store, s) != 0)
        log_error("session %s: could not record its end (%s)", s->id, reason);
}

/*
 * Teardown off the critical path (issue 21): a deleted session's browser
 * is killed in the background (sessmgr_discard_browser: nothing of its state
 * is kept, so Chromium's orderly shutdown would only compete with the next
 * launch; the kill itself at normal priority, issue 30), so that neither
 * the DELETE nor the next create waits for it. The row says deleted, with its final usage, before
 * the 204; the session is no longer live (its CDP and API calls answer as ended). The modules'
 * ending hooks and the folders' removal follow the browser's exit on the teardown thread, as their
 * contract says (session_ext.h).
 *
 * Two kinds of sessions keep the synchronous delete, because what their
 * ending hooks write is read right after the DELETE: a profile saved at the
 * end (the next create may load it) and one with replays (an active one is
 * listed and downloaded as finished; the plan's retention applies at the
 * end).
 */
struct teardown {
    struct app *app;
    struct session_rec rec;
    json_t *doc;
    struct chromium *browser;
    long long uptime_ms;
};

static pthread_mutex_t teardown_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t teardown_cv = PTHREAD_COND_INITIALIZER;
static int teardowns; /* in flight */

static void teardown_do(struct teardown *t)
{
    sessmgr_discard_browser(t->browser);
    session_finish(t->app, &t->rec, t->doc, "deleted", t->uptime_ms);
    json_decref(t->doc);
    session_rec_clear(&t->rec);
    xfree(t);
    pthread_mutex_lock(&teardown_mu);
    if (--teardowns == 0)
        pthread_cond_broadcast(&teardown_cv);
    pthread_mutex_unlock(&teardown_mu);
}

static void *teardown_run(void *arg)
{
    /* This thread's own work (the ending hooks, removing the session's
     * folders) yields too; nice, not SCHED_IDLE, because the hooks take the
     * store's locks that a create waits for. Linux: 0 is this thread. */
    (void)setpriority(PRIO_PROCESS, 0, 19);
    teardown_do(arg);
    return NULL;
}

/* Ends session s in the background when it may (above): 1 when the teardown
 * was started (the row already says deleted), 0 when the caller ends it. */
static int teardown_in_background(struct app *app, struct session_rec *s, const json_t *doc)
{
    if (json_object_get(doc, "profile") || replays_recording_active(s->id))
        return 0;
    /* Any replay (DATA/replays/ID, api/replays.c): the ending hook applies
     * the plan's retention, read right after the DELETE. */
    char *replays = xasprintf("%s/replays/%s", app->cfg.data_dir, s->id);
    struct stat st;
    int recorded = stat(replays, &st) == 0;
    xfree(replays);
    if (recorded)
        return 0;
    struct chromium *c = NULL;
    long long up = 0;
    if (sessmgr_take(app->sessions, s->id, &c, &up) != 0)
        return 0;
    record_end(app, s, "deleted", up);
    struct teardown *t = xcalloc(1, sizeof *t);
    t->app = app;
    t->rec = *s;
    t->rec.data = s->data ? xstrdup(s->data) : NULL;
    t->doc = json_deep_copy(doc);
    t->browser = c;
    t->uptime_ms = up;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t th;
    pthread_mutex_lock(&teardown_mu);
    teardowns++;
    pthread_mutex_unlock(&teardown_mu);
    if (pthread_create(&th, &attr, teardown_run, t) != 0) {
        log_warn("session %s: no teardown thread; ending it now", s->id);
        teardown_do(t); /* at this thread's priority: it goes on serving requests */
    }
    pthread_attr_destroy(&attr);
    return 1;
}

/* Waits until every background teardown finished (server stop, before the
 * modules whose ending hooks they run). */
static void teardowns_wait(void)
{
    pthread_mutex_lock(&teardown_mu);
    while (teardowns > 0)
        pthread_cond_wait(&teardown_cv, &teardown_mu);
    pthread_mutex_unlock(&teardown_mu);
}

int browsers_delete(struct req *rq, struct resp *rs)
{
    struct app *app = api_app(rq);
    struct session_rec s;
    int rc = load_session(rq, 0, &s);
    if (rc)
        return rc;
    json_t *doc = json_loads(s.data, 0, NULL);
    if (teardown_in_background(app, &s, doc)) {
        json_decref(doc);
        session_rec_clear(&s);
        resp_empty(rs, 204);
        return 0;
    }
    long long up = 0;
    int closed = 1;
    if (sessmgr_end(app->sessions, s.id, &up, &closed) != 0)
        up = s.uptime_ms;
    /* A browser that had to be killed left its folder half-written: the
     * profile keeps what it had (the ending hook saves on "deleted" only). */
    session_finish(app, &s, doc,
                   closed ? "deleted"
                          : "deleted; the browser did not close cleanly, its state was not saved",
                   up);
    json_decref(doc);
    session_rec_clear(&s);
    resp_empty(rs, 204);
    return 0;
}

void browsers_on_end(void *ctx, const char *id, const char *reason, long long uptime_ms)
{
    struct app *app = ctx;
    /* The hook runs outside any request: look the session up by id alone. */
    struct session_rec *rows = NULL;
    size_t n = 0;
    char me[STORE_ID];
    node_id(app->node, me);
    int rc = store_shared(app->store) ? store_session_list_node(app->store, me, &rows, &n)
                                      : store_session_list_active(app->store, &rows, &n);
    if (rc != 0)
        return;
    int found = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(rows[i].id, id) == 0) {
            json_t *doc = json_loads(rows[i].data, 0, NULL);
            session_finish(app, &rows[i], doc, reason, uptime_ms);
            json_decref(doc);
            found = 1;
        }
        session_rec_clear(&rows[i]);
    }
    xfree(rows);
    /* A row another node ended already (a sweeper, after this node lost the
     * cluster): its record stands; the folders here go all the same. */
    if (!found)
        remove_session_files(app, id);
}

static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (!d) {
        unlink(path);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char *child = xasprintf("%s/%s", path, de->d_name);
        struct stat st;
        if (lstat(child, &st) == 0 && S_ISDIR(st.st_mode))
            remove_tree(child);
        else
            unlink(child);
        xfree(child);
    }
    closedir(d);
    rmdir(path);
}

static void session_finish(struct app *app, struct session_rec *s, json_t *doc, const char *reason,
                           long long uptime_ms)
{
    char dir[1200];
    api_session_dir(app, s->id, dir, sizeof dir);
    json_t *d = doc ? doc : json_object();
    struct session_ctx sc = {app, s, d, NULL, dir, NULL};
    for (const struct session_ext *const *x = session_ext_all(); *x; x++)
        if ((*x)->ending)
            (*x)->ending(&sc, reason);
    if (d != doc)
        json_decref(d);
    remove_session_files(app, s->id);
    /* A spare that was never handed out has no organization and no row. */
    if (s->org_id[0])
        record_end(app, s, reason, uptime_ms);
}

static void remove_session_files(struct app *app, const char *id)
{
    char dir[1200];
    api_session_dir(app, id, dir, sizeof dir);
    /* The profile's tmpfs first (sandbox_home_mount); a crashed server's
     * too. Then the folder it was mounted on, empty. */
    (void)sandbox_home_unmount(dir);
    remove_tree(dir);
    /* The session's own files (sandbox_root_create): a tmpfs, normally gone
     * with the sandbox; after a crash of the server it is still mounted. */
    char *root = xasprintf("%s.root", dir);
    if (umount2(root, MNT_DETACH) == 0)
        log_info("session %s: unmounted its files left by the previous run", id);
    (void)rmdir(root);
    xfree(root);
    /* Chromium writes its log beside the folder (chromium.h). */
    char *log = xasprintf("%s.log", dir);
    unlink(log);
    xfree(log);
    log = xasprintf("%s.xvfb.log", dir);
    unlink(log);
    xfree(log);
}

void browsers_recover(struct app *app)
{
    /* On a shared store the other nodes' rows are theirs: this node reaps
     * only its own earlier runs, when it registers (browsers_reap_node). */
    if (!store_shared(app->store))
        recover_rows(app, NULL);
    spares_recover(app);
    if (store_shared(app->store))
        remove_orphan_folders(app);
}

/* On a shared store the rows of this node's previous run may already have
 * been ended by another node's sweep, so no row names their folders: every
 * session folder in this node's data folder at start is a leftover (the
 * browsers died with the previous run, by its reaper). */
static void remove_orphan_folders(struct app *app)
{
    char *root = xasprintf("%s/sessions", app->cfg.data_dir);
    DIR *d = opendir(root);
    struct dirent *de;
    int n = 0;
    while (d && (de = readdir(d)) != NULL) {
        size_t len = strcspn(de->d_name, ".");
        if (len == 0 || len >= STORE_ID || strcmp(de->d_name + len, ".spare") == 0)
            continue;
        char id[STORE_ID];
        snprintf(id, sizeof id, "%.*s", (int)len, de->d_name);
        remove_session_files(app, id);
        n++;
    }
    if (d)
        closedir(d);
    xfree(root);
    if (n)
        log_info("recovery: removed %d file(s) and folder(s) left by this node's previous run", n);
}

void browsers_reap_node(void *ctx, const char *node)
{
    recover_rows(ctx, node);
}

/* Ends the rows of a previous run (all active rows, or node's), killing
 * what is left of their browsers on this host. */
static void recover_rows(struct app *app, const char *node)
{
    struct session_rec *rows = NULL;
    size_t n = 0;
    int rc = node ? store_session_list_node(app->store, node, &rows, &n)
                  : store_session_list_active(app->store, &rows, &n);
    if (rc != 0) {
        log_error("recovery: cannot list active sessions");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        struct session_rec *s = &rows[i];
        long long up = 0;
        if (s->pid > 0) {
            unsigned long long now_ticks = chromium_proc_start_ticks(s->pid);
            if (now_ticks == s->pid_start) {
                long hz = sysconf(_SC_CLK_TCK);
                struct timespec ts;
                clock_gettime(CLOCK_BOOTTIME, &ts);
                long long age_ms = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 -
                                   (long long)(s->pid_start * 1000ULL / (unsigned long long)hz);
                up = age_ms > 0 ? age_ms : 0;
            }
            if (chromium_kill_stale(s->pid, s->pid_start))
                log_info("recovery: killed browser %d of session %s", s->pid, s->id);
        }
        if (s->xvfb_pid > 0 && chromium_kill_stale(s->xvfb_pid, s->xvfb_start))
            log_info("recovery: killed Xvfb %d of session %s", s->xvfb_pid, s->id);
        if (!up)
            up = clock_now_ms() - s->created_at; /* upper bound: the browser is gone */
        json_t *doc = json_loads(s->data, 0, NULL);
        session_finish(app, s, doc, "server restarted", up);
        json_decref(doc);
        session_rec_clear(s);
    }
    if (n)
        log_info("recovery: ended %zu session(s) of the previous run", n);
    xfree(rows);
}

/* ---- update ---- */

static void state_from(const struct session_rec *s, const json_t *d, struct sessrules_state *st)
{
    memset(st, 0, sizeof *st);
    snprintf(st->name, sizeof st->name, "%s", s->name);
    json_t *tags = json_object_get(d, "tags");
    st->tags = json_is_object(tags) ? json_incref(tags) : NULL;
    json_t *tel = json_object_get(d, "telemetry");
    st->telemetry = tel && !json_is_null(tel) ? json_incref(tel) : NULL;
    json_t *vp = json_object_get(d, "viewport");
    st->viewport.width = (int)json_integer_value(json_object_get(vp, "width"));
    st->viewport.height = (int)json_integer_value(json_object_get(vp, "height"));
    st->viewport.refresh_rate = (int)json_integer_value(json_object_get(vp, "refresh_rate"));
    st->gpu = jsonx_bool(d, "gpu", 0);
    st->stealth = jsonx_bool(d, "stealth", 0);
    st->headless = jsonx_bool(d, "headless", 0);
    const char *mode = jsonx_str(json_object_get(d, "proxy"), "mode");
    st->proxy.kind = mode && strcmp(mode, "direct") == 0 ? PROXYSEL_DIRECT : PROXYSEL_DEFAULT;
    const char *su = jsonx_str(d, "start_url");
    snprintf(st->start_url, sizeof st->start_url, "%s", su ? su : "");
    st->profile_loaded = json_object_get(d, "profile") != NULL;
}

/* The first page target's id, over the browser's DevTools connection. */
static int first_page(struct cdp_client *cc, char *out, size_t cap, struct err *e)
{
    json_t *res = NULL;
    int rc = cdp_client_call(cc, NULL, "Target.getTargets", NULL, 1, CDP_CALL_TIMEOUT_MS, &res, e);
    if (rc)
        return rc;
    json_t *infos = json_object_get(res, "targetInfos");
    size_t i;
    json_t *t;
    rc = E_NOTFOUND;
    json_array_foreach(infos, i, t)
    {
        if (strcmp(jsonx_str(t, "type") ? jsonx_str(t, "type") : "", "page") == 0) {
            snprintf(out, cap, "%s", jsonx_str(t, "targetId"));
            rc = 0;
            break;
        }
    }
    json_decref(res);
    return rc;
}

/* Resizes the browser window over CDP (and the Xvfb screen when headful). */
static int apply_resize(const char *ws_url, const struct viewport *vp, struct err *e)
{
    struct cdp_client *cc;
    int rc = cdp_client_open(ws_url, CDP_CALL_TIMEOUT_MS, &cc, e);
    if (rc)
        return rc;
    char target[128];
    json_t *res = NULL;
    if ((rc = first_page(cc, target, sizeof target, e)) == 0) {
        json_t *p = json_pack("{s:s}", "targetId", target);
        rc = cdp_client_call(cc, NULL, "Browser.getWindowForTarget", p, 1, CDP_CALL_TIMEOUT_MS,
                             &res, e);
        json_decref(p);
    }
    if (rc == 0) {
        json_t *p =
            json_pack("{s:O,s:{s:i,s:i,s:s}}", "windowId", json_object_get(res, "windowId"),
                      "bounds", "width", vp->width, "height", vp->height, "windowState", "normal");
        json_t *r2 = NULL;
        rc =
            cdp_client_call(cc, NULL, "Browser.setWindowBounds", p, 1, CDP_CALL_TIMEOUT_MS, &r2, e);
        json_decref(p);
        json_decref(r2);
    }
    json_decref(res);
    cdp_client_close(cc);
    return rc;
}

/* Navigates the first page to url without waiting for the load; failures are
 * dropped, as the interface document says. */
static void apply_navigate(const char *ws_url, const char *url)
{
    struct err e;
    err_init(&e);
    struct cdp_client *cc;
    if (cdp_client_open(ws_url, CDP_CALL_TIMEOUT_MS, &cc, &e) != 0)
        return;
    char target[128];
    json_t *res = NULL;
    if (first_page(cc, target, sizeof target, &e) == 0) {
        json_t *p = json_pack("{s:s,s:b}", "targetId", target, "flatten", 1);
        if (cdp_client_call(cc, NULL, "Target.attachToTarget", p, 1, CDP_CALL_TIMEOUT_MS, &res,
                            &e) == 0) {
            json_t *np = json_pack("{s:s}", "url", url);
            json_t *ignored = NULL;
            if (cdp_client_call(cc, jsonx_str(res, "sessionId"), "Page.navigate", np, 0, 0,
                                &ignored, &e) != 0)
                log_debug("navigate %s: %s", url, e.message);
            json_decref(ignored);
            json_decref(np);
        }
        json_decref(p);
    }
    json_decref(res);
    cdp_client_close(cc);
}

struct screen_resize {
    int w, h;
    struct err *e;
    int headless; /* set: the browser has no display */
};

static int resize_screen(void *ctx, struct chromium *c)
{
    struct screen_resize *r = ctx;
    r->headless = chromium_xvfb_pid(c) <= 0;
    if (r->headless)
        return 0;
    return chromium_resize_screen(c, r->w, r->h, r->e);
}

int browsers_update(struct req *rq, struct resp *rs)
{
    struct app *app = api_app(rq);
    json_t *body;
    int rc = req_json_object(rq, 0, &body);
    if (rc)
        return rc;
    struct session_rec s;
    if ((rc = load_session(rq, 0, &s))) {
        json_decref(body);
        return rc;
    }
    json_t *d = json_loads(s.data, 0, NULL);
    struct sessrules_state cur;
    state_from(&s, d, &cur);
    cur.recording_active = replays_recording_active(s.id);
    cur.live_view_active = liveview_active(s.id);
    struct sessrules_plan plan;
    memset(&plan, 0, sizeof plan);
    rc = sessrules_plan_update(&cur, body, &plan, &rq->err);
    struct live *l = rc == 0 ? sessmgr_get(app->sessions, s.id) : NULL;
    char ws[512] = "";
    if (rc == 0 && (!l || live_ws_url(l, ws, sizeof ws) != 0))
        rc = err_set(&rq->err, E_CONFLICT, "session_ended",
                     "browser session %s has ended; its browser is not running", s.id);
    if (rc == 0 && sessrules_plan_has(&plan, SESSACT_RESIZE)) {
        struct screen_resize sr = {plan.next.viewport.width, plan.next.viewport.height, &rq->err,
                                   0};
        /* force: an active recording ends here and goes on as a new
         * segment at the new size (api/replays). */
        struct replays_segment seg = {0};
        if (plan.restart_recording)
            replays_resize_begin(s.id, &seg);
        rc = live_with_browser(l, resize_screen, &sr);
        /* Headless: the page's viewport, not the undrawn window, gets the size. */
        if (rc == 0)
            rc = sr.headless ? chromium_fit_headless(ws, sr.w, sr.h, CDP_CALL_TIMEOUT_MS, &rq->err)
                             : apply_resize(ws, &plan.next.viewport, &rq->err);
        replays_resize_end(app, s.id, &seg, plan.next.viewport.width, plan.next.viewport.height);
        if (rc)
            rc = err_set(&rq->err, E_INTERNAL, "internal", "the window could not be resized: %s",
                         rq->err.message);
    }
    if (rc == 0) {
        snprintf(s.name, sizeof s.name, "%s", plan.next.name);
        if (plan.next.tags)
            json_object_set(d, "tags", plan.next.tags);
        else
            json_object_del(d, "tags");
        json_object_set(d, "telemetry", plan.next.telemetry ? plan.next.telemetry : json_null());
        json_object_set_new(d, "viewport", viewport_to_json(&plan.next.viewport));
        json_object_set_new(d, "proxy", proxy_record(&plan.next.proxy));
        if (plan.next.start_url[0])
            json_object_set_new(d, "start_url", json_string(plan.next.start_url));
        char dir[1200];
        api_session_dir(app, s.id, dir, sizeof dir);
        struct session_ctx sc = {app, &s, d, body, dir, NULL};
        for (const struct session_ext *const *x = session_ext_all(); rc == 0 && *x; x++)
            if ((*x)->update)
                rc = (*x)->update(&sc, ws, &rq->err);
    }
    if (rc == 0) {
        xfree(s.data);
        s.data = jsonx_dump(d);
        rc = store_session_update(app->store, &s);
        if (rc == E_CONFLICT)
            err_set(&rq->err, rc, "conflict", "an active session named %s already exists", s.name);
    }
    /* A profile load restarted the browser: navigate the new one. */
    if (rc == 0 && sessrules_plan_has(&plan, SESSACT_NAVIGATE) &&
        live_ws_url(l, ws, sizeof ws) == 0)
        apply_navigate(ws, plan.next.start_url);
    if (rc == 0)
        resp_json(rs, 200, render_session(app, &s));
    sessmgr_put(l);
    json_decref(d);
    json_decref(body);
    sessrules_plan_clear(&plan);
    sessrules_state_clear(&cur);
    session_rec_clear(&s);
    return rc;
}

/* ---- the CDP WebSocket ---- */

struct cdp_conn {
    char session_id[64];
    struct app *app;
    struct live *live;
    struct http_upgrade *up;
    int upstream_fd;
    char *leftover;
    size_t leftover_len;
    uint64_t from_browser; /* set by on_counts just before on_close */
};

static void cdp_message(void *ctx, const char *method, size_t len)
{
    struct cdp_conn *cc = ctx;
    for (const struct session_ext *const *x = session_ext_all(); *x; x++)
        if ((*x)->cdp_message)
            (*x)->cdp_message(cc->session_id, cc, method, len);
}

static void cdp_client_hooks(struct cdp_conn *cc, int attached)
{
    for (const struct session_ext *const *x = session_ext_all(); *x; x++)
        if ((*x)->cdp_client)
            (*x)->cdp_client(cc->session_id, cc, attached, attached ? 0 : cc->from_browser);
}

static void cdp_on_counts(void *ctx, uint64_t from_client, uint64_t from_browser)
{
    struct cdp_conn *cc = ctx;
    (void)from_client; /* counted message by message through cdp_message */
    cc->from_browser = from_browser;
}

static void cdp_close_client(void *ctx)
{
    struct cdp_conn *cc = ctx;
    http_upgrade_close(cc->up);
}

static void cdp_on_close(void *ctx, const char *reason)
{
    struct cdp_conn *cc = ctx;
    (void)reason;
    cdp_client_hooks(cc, 0);
    live_client_detached(cc->live);
    sessmgr_put(cc->live);
    xfree(cc->leftover);
    xfree(cc);
}

static void cdp_upgraded(void *ctx, int fd, const char *extra, size_t extra_len,
                         struct http_upgrade *up)
{
    struct cdp_conn *cc = ctx;
    cc->up = up;
    struct relay_hooks hooks = {
        .on_client_message = cdp_message,
        .on_close = cdp_on_close,
        .on_counts = cdp_on_counts,
        /* Without the HTTP daemon (browsers_cdp_fd) the relay closes fd. */
        .close_client = up ? cdp_close_client : NULL,
        .ctx = cc,
    };
    struct err e;
    err_init(&e);
    live_client_attached(cc->live);
    cdp_client_hooks(cc, 1);
    if (api_relay_attach(cc->app, fd, extra, extra_len, cc->upstream_fd, cc->leftover,
                         cc->leftover_len, &hooks, &e) != 0) {
        log_warn("cdp relay: %s", e.message);
        close(cc->upstream_fd);
        if (up)
            http_upgrade_close(up);
        else
            close(fd);
        cdp_on_close(cc, "attach failed");
    }
}

static void cdp_cancel(void *ctx)
{
    struct cdp_conn *cc = ctx;
    close(cc->upstream_fd);
    sessmgr_put(cc->live);
    xfree(cc->leftover);
    xfree(cc);
}

/* Turns the browser's DevTools URL (.../devtools/browser/UUID) into one
 * page's (.../devtools/page/ID), in place. */
static int page_ws_url(char *url, size_t cap, const char *target)
{
    char *p = strstr(url, "/devtools/browser/");
    if (!p || (size_t)(p - url) + strlen("/devtools/page/") + strlen(target) + 1 > cap)
        return -1;
    snprintf(p, cap - (size_t)(p - url), "/devtools/page/%s", target);
    return 0;
}

int browsers_cdp_fd(struct app *app, const char *session_id, const char *target, int fd,
                    const char *accept, struct err *e)
{
    struct live *l = sessmgr_get(app->sessions, session_id);
    if (!l)
        return err_set(e, E_NOTFOUND, "not_found", "browser session %s not found or ended",
                       session_id);
    char url[512];
    struct cdp_conn *cc = xcalloc(1, sizeof *cc);
    cc->app = app;
    cc->live = l;
    cc->upstream_fd = -1;
    snprintf(cc->session_id, sizeof cc->session_id, "%s", session_id);
    if (live_ws_url(l, url, sizeof url) != 0 ||
        (target && page_ws_url(url, sizeof url, target) != 0) ||
        ws_connect(url, CDP_CALL_TIMEOUT_MS, &cc->upstream_fd, &cc->leftover, &cc->leftover_len,
                   e) != 0) {
        sessmgr_put(l);
        xfree(cc->leftover);
        xfree(cc);
        return err_set(e, E_UNAVAIL, "browser_unavailable",
                       "the session's browser is not answering");
    }
    char head[160];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
                     accept);
    if (send(fd, head, (size_t)n, MSG_NOSIGNAL) != n) {
        cdp_cancel(cc);
        return err_set(e, E_UNAVAIL, "unavailable", "the client went away");
    }
    cdp_upgraded(cc, fd, NULL, 0, NULL);
    return 0;
}

int browsers_cdp(struct req *rq, struct resp *rs)
{
    struct app *app = api_app(rq);
    struct token_claims c;
    int rc = token_verify(app->token_key, sizeof app->token_key, req_query(rq, "jwt"), "cdp",
                          clock_now_ms() / 1000, &c, &rq->err);
    if (rc)
        return rc;
    /* The token is ours (signed) and names the session: only a live one
     * answers; a deleted or ended session is 404. */
    struct live *l = sessmgr_get(app->sessions, c.sub);
    if (!l && (rc = api_cluster_forward(rq, rs, c.org, c.sub, 1)) != -1)
        return rc; /* another node runs it */
    if (!l)
        return err_set(&rq->err, E_NOTFOUND, "not_found", "browser session %s not found or ended",
                       c.sub);
    const char *key = req_header(rq, "Sec-WebSocket-Key");
    const char *upg = req_header(rq, "Upgrade");
    char accept[29];
    if (!upg || strcasecmp(upg, "websocket") != 0 || !key || ws_accept_key(key, accept) != 0) {
        sessmgr_put(l);
        return err_set(&rq->err, E_INVALID, "bad_request",
                       "this endpoint speaks WebSocket: send Upgrade: websocket with a "
                       "Sec-WebSocket-Key");
    }
    const char *target = req_query(rq, "target");
    if (target && !cdp_target_id_ok(target)) {
        sessmgr_put(l);
        return err_set(&rq->err, E_INVALID, "bad_request",
                       "target: must be 1 to 64 hex digits (an id of /json/list)");
    }
    char url[512];
    struct cdp_conn *cc = xcalloc(1, sizeof *cc);
    cc->app = app;
    cc->live = l;
    cc->upstream_fd = -1;
    snprintf(cc->session_id, sizeof cc->session_id, "%s", c.sub);
    if (live_ws_url(l, url, sizeof url) != 0 ||
        (target && page_ws_url(url, sizeof url, target) != 0) ||
        ws_connect(url, CDP_CALL_TIMEOUT_MS, &cc->upstream_fd, &cc->leftover, &cc->leftover_len,
                   &rq->err) != 0) {
        sessmgr_put(l);
        xfree(cc);
        return err_set(&rq->err, E_UNAVAIL, "browser_unavailable",
                       "the session's browser is not answering");
    }
    resp_upgrade(rs, accept, cdp_upgraded, cdp_cancel, cc);
    return 0;
}
