/*
 * session: a browser session's life (session.h): create (a spare or a cold
 * launch), restart, update, end and teardown, spares, and the recovery of
 * what a dead server left. The HTTP half (parsing, rendering) is
 * api/browsers.c; the rules are domain/session_rules.c.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cluster/node.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/path.h"
#include "core/xalloc.h"
#include "domain/entitlements.h"
#include "domain/launch_settings.h"
#include "domain/session_rules.h"
#include "domain/spare_match.h"
#include "proxy/cdp_client.h"
#include "proxy/cdp_page.h"
#include "runtime/admit.h"
#include "runtime/chromium.h"
#include "runtime/profile_archive.h"
#include "runtime/sandbox.h"
#include "runtime/sessmgr.h"
#include "runtime/spares.h"
#include "session/ext.h"
#include "session/session.h"

#define LAUNCH_TIMEOUT_MS   20000
#define CDP_CALL_TIMEOUT_MS 5000

/* ---- the data folder ---- */

void sess_path(const struct app *app, const char *id, enum sess_path_kind kind, char *out,
               size_t cap)
{
    const char *data = app->cfg.data_dir;
    switch (kind) {
    case SESS_PATH_SESSIONS:
        snprintf(out, cap, "%s/sessions", data);
        break;
    case SESS_PATH_HOME:
        snprintf(out, cap, "%s/sessions/%s", data, id);
        break;
    case SESS_PATH_ROOT:
        snprintf(out, cap, "%s/sessions/%s.root", data, id);
        break;
    case SESS_PATH_LOG:
        snprintf(out, cap, "%s/sessions/%s.log", data, id);
        break;
    case SESS_PATH_XVFB_LOG:
        snprintf(out, cap, "%s/sessions/%s.xvfb.log", data, id);
        break;
    case SESS_PATH_SPARE:
        snprintf(out, cap, "%s/sessions/%s.spare", data, id);
        break;
    case SESS_PATH_REPLAYS_ALL:
        snprintf(out, cap, "%s/replays", data);
        break;
    case SESS_PATH_REPLAYS:
        snprintf(out, cap, "%s/replays/%s", data, id);
        break;
    }
}

/* ---- the launcher ---- */

static int real_launch(void *ctx, const struct chromium_opts *o, int timeout_ms,
                       struct chromium **out, struct err *e)
{
    (void)ctx;
    return chromium_launch(o, timeout_ms, out, e);
}

static void real_discard(void *ctx, struct chromium *c)
{
    (void)ctx;
    sessmgr_discard_browser(c);
}

static const struct sess_launcher real_launcher = {real_launch, real_discard, NULL};
static struct sess_launcher launcher = {real_launch, real_discard, NULL};

void sess_set_launcher(const struct sess_launcher *l)
{
    launcher = l ? *l : real_launcher;
}

/* ---- create ---- */

static json_t *proxy_record(const struct proxysel *p)
{
    return json_pack("{s:s}", "mode", p->kind == PROXYSEL_DIRECT ? "direct" : "default");
}

/* The launch options of a session's settings ls, for the browser whose
 * profile folder is dir. *policy receives the chrome_policy as JSON text
 * (owned, NULL when there is none), which o->policy_json points at until the
 * caller frees it. A spawn and a restart launch alike from the same stored
 * settings. */
static void launch_opts(const struct app *app, const char *dir, const struct launch_settings *ls,
                        char **policy, struct chromium_opts *o)
{
    *policy = ls->chrome_policy ? jsonx_dump(ls->chrome_policy) : NULL;
    *o = (struct chromium_opts){
        .binary = app->cfg.chromium,
        .user_data_dir = dir,
        .headless = ls->headless,
        .stealth = ls->stealth,
        .kiosk = ls->kiosk_mode,
        .width = ls->viewport.width,
        .height = ls->viewport.height,
        .policy_json = *policy,
        .memory_max_bytes = ls->memory_bytes,
    };
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

/* Writes a new session's row, owned by this node. A standalone session is
 * admitted by the store (store.h, session_admit) against its project's
 * max_concurrent_sessions (its own, else the org's default for projects),
 * and on a shared store against the org's limit too, both counted over the
 * whole cluster: 429 when one is reached. */
static int insert_session(struct app *app, struct session_rec *s, const json_t *ent, int pooled,
                          struct err *e)
{
    node_id(app->node, s->node_id);
    if (pooled)
        return store_session_insert(app->store, s);
    int64_t lim, pools = 0, plimit = -1;
    int64_t limit = ent_limit(ent, "max_concurrent_browsers", &lim) ? lim : -1;
    /* One process on an embedded store: the session manager holds the
     * org's limit (reserve_slot). */
    if (!store_shared(app->store))
        limit = -1;
    int rc = store_session_admit(app->store, s, limit, &pools, &plimit);
    if (rc == E_LIMIT && plimit >= 0) {
        e->retry_after = 5;
        return err_set(e, E_LIMIT, "rate_limited",
                       "max_concurrent_sessions (%lld, of which %lld held by pools) reached for "
                       "project %s",
                       (long long)plimit, (long long)pools, s->project_id);
    }
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
    int kind; /* enum spare_kind, set by the caller */
};

/* sess_spawn, or with `spare` a spare's launch: no store row, no live
 * entry, no started hooks (they run at hand-out, for the session's owner). */
/* Set once the server stops: spares being launched give up (chromium.h). */
static int spares_cancel;

/* The sandbox of the spare being launched, per kind, and the CPU priority
 * the spares engine wants for it (spare_priority; spares.h): a spare
 * launches in the foreground unless a cold launch runs, and waits in the
 * background once ready. */
static pthread_mutex_t starting_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sandbox *starting_sb[SPARE_KINDS];
static int starting_bg[SPARE_KINDS];

static void spare_starting(int kind, struct sandbox *sb)
{
    pthread_mutex_lock(&starting_mu);
    starting_sb[kind] = sandbox_ref(sb);
    (void)sandbox_set_background(sb, starting_bg[kind]);
    pthread_mutex_unlock(&starting_mu);
}

static void spare_started(int kind)
{
    pthread_mutex_lock(&starting_mu);
    sandbox_unref(starting_sb[kind]);
    starting_sb[kind] = NULL;
    pthread_mutex_unlock(&starting_mu);
}

/* spares_launcher.priority. */
static void spare_priority(void *ctx, int kind, int background)
{
    (void)ctx;
    pthread_mutex_lock(&starting_mu);
    starting_bg[kind] = background;
    if (starting_sb[kind])
        (void)sandbox_set_background(starting_sb[kind], background);
    pthread_mutex_unlock(&starting_mu);
}

/* The smallest timeout_seconds a create may ask for on this server. */
static long long min_timeout(const struct app *app)
{
    return app->cfg.min_timeout_s ? app->cfg.min_timeout_s : SESSRULES_TIMEOUT_MIN;
}

static int spawn(struct app *app, const char *org_id, const char *project_id, const json_t *ent,
                 const json_t *body, const json_t *extra, int pooled, struct session_rec *out,
                 struct spare_out *spare, struct err *e)
{
    memset(out, 0, sizeof *out);
    struct sessrules_create c;
    int rc = sessrules_validate_create_min(body, min_timeout(app), &c, e);
    if (rc)
        return rc;
    if ((rc = check_limits(app, ent, &c, e))) {
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
    sess_path(app, s->id, SESS_PATH_HOME, dir, sizeof dir);
    struct launch_settings ls;
    launch_settings_from_json(doc, &ls);
    char *policy;
    struct chromium_opts o;
    launch_opts(app, dir, &ls, &policy, &o);
    o.start_url = c.start_url[0] ? c.start_url : NULL;
    o.cancel = spare ? &spares_cancel : NULL;
    struct session_ctx sc = {app, s, doc, body, dir, &o, ent};
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
    const char *const *ext_dirs = NULL;
    if (rc == 0 && sandbox_enabled() &&
        (rc = sandbox_create(s->id, spare ? NULL : org_id, o.memory_max_bytes, &sb, e)) != 0 &&
        !e->retry_after) /* past the admission's budget: its 429 or 503 stands */
        rc = launch_failed(s->id, "sandbox", rc, e);
    /* A spare launches in the foreground unless a cold launch runs (on a
     * busy host a launch in the idle class never ended: issue 39.2), and
     * waits in the background once ready (docs/spares.md). */
    if (rc == 0 && sb && spare)
        spare_starting(spare->kind, sb);
    t_sandbox = clock_mono_us();
    if (rc == 0 && sb) {
        char root[1300];
        sess_path(app, NULL, SESS_PATH_SESSIONS, root, sizeof root);
        (void)mkdir(root, 0700); /* chromium_launch makes the rest of the path */
        sess_path(app, s->id, SESS_PATH_ROOT, root, sizeof root);
        if ((rc = sandbox_root_create(sb, root, LIM_SESSION_DISK_BYTES, e)) != 0)
            rc = launch_failed(s->id, "sandbox", rc, e);
    }
    /* The profile in memory, off the server's disk (sandbox.h); removed with
     * the session's folders, after the ending hooks saved what they keep. */
    if (rc == 0 && sb && (rc = sandbox_home_mount(dir, LIM_SESSION_PROFILE_BYTES, e)) != 0)
        rc = launch_failed(s->id, "sandbox", rc, e);
    o.sandbox = sb;
    t_files = clock_mono_us();
    /* Extensions unpack into the sandbox's files in their prepare hook
     * (api/extensions.h), which runs first (registered before main). */
    for (const struct session_ext *const *x = session_ext_all(); rc == 0 && *x; x++)
        if ((*x)->prepare)
            rc = (*x)->prepare(&sc, e);
    for (const struct session_ext *const *x = session_ext_all(); rc == 0 && *x; x++)
        if ((*x)->launching)
            (*x)->launching(&sc);
    ext_dirs = o.extension_dirs;
    struct chromium *browser = NULL;
    t_modules = clock_mono_us();
    if (rc == 0 && (rc = launcher.launch(launcher.ctx, &o, LAUNCH_TIMEOUT_MS, &browser, e)) != 0)
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
    if (sb && spare) {
        spare_started(spare->kind);
        /* Ready: Chromium's start-up work after it (about a second) yields
         * to the creates being served; hand-out lifts it. */
        if (rc == 0)
            (void)sandbox_set_background(sb, 1);
    }
    sandbox_unref(sb);
    xfree(policy);
    xfree((void *)ext_dirs);
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
    sessmgr_add(app->sessions, s->id, s->org_id, browser, pooled ? 0 : (int)ls.timeout_seconds,
                pooled);
    log_info("session %s started (pid %d)%s", s->id, s->pid, pooled ? " for a pool" : "");
    json_decref(doc);
    sessrules_create_clear(&c);
    return 0;
}

int sess_spawn(struct app *app, const char *org_id, const char *project_id, const json_t *ent,
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
    sess_path(app, s->id, SESS_PATH_HOME, dir, sizeof dir);
    struct launch_settings ls;
    launch_settings_from_json(d, &ls);
    char *policy;
    struct chromium_opts o;
    launch_opts(app, dir, &ls, &policy, &o);
    /* Written by the egress proxy's hook (api/proxies.c) when it started. */
    o.proxy_server = jsonx_str(d, "egress_url");
    struct session_ctx lc = {app, s, d, NULL, dir, &o, NULL};
    for (const struct session_ext *const *x = session_ext_all(); *x; x++)
        if ((*x)->launching)
            (*x)->launching(&lc);
    const char *const *ext_dirs = o.extension_dirs;
    /* The old browser closes cleanly (it may be saving to its own profile),
     * then its folder is replaced by the profile's state. */
    struct live *l = sessmgr_get(app->sessions, s->id);
    if (!l) {
        xfree(policy);
        xfree((void *)ext_dirs);
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
        path_remove_tree(dir);
    if (rc == 0 && replace_dir && archive_path)
        rc = profile_archive_extract(archive_path, dir, e);
    if (rc == 0 && (rc = launcher.launch(launcher.ctx, &o, LAUNCH_TIMEOUT_MS, &fresh, e)) != 0)
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
                struct session_ctx sc = {app, s, d, NULL, dir, NULL, NULL};
                (*x)->started(&sc, chromium_ws_url(fresh));
            }
    }
    sessmgr_put(l);
    xfree(policy);
    xfree((void *)ext_dirs);
    json_decref(d);
    return rc;
}

int sess_restart_with_profile(struct app *app, const struct session_rec *s,
                              const char *archive_path, struct err *e)
{
    return restart_browser(app, s, 1, archive_path, e);
}

int sess_restart(struct app *app, const struct session_rec *s, struct err *e)
{
    return restart_browser(app, s, 0, NULL, e);
}

/* ---- spares: pre-launched browsers (runtime/spares.h, docs/spares.md) ----
 *
 * A spare is launched like a session of nobody: a fresh id, its own sandbox,
 * cgroup, files and egress listener, all named by that id, but no store row,
 * no live entry and no started hooks. Handing it out makes the id the
 * session's: nothing is renamed, the row is inserted then (created_at the
 * hand-out time) and the started hooks run for the owner. Until then, a
 * marker file DATA/sessions/ID.spare holds its processes, so that a restart
 * after a crash ends them and removes its folders (recover_spares); the
 * reaper covers the crash itself as for any session.
 */

static void teardowns_wait(void);

struct spare_item {
    struct session_rec rec; /* the id; org "" until handed out */
    int kind;
    struct chromium *browser;
    json_t *doc;
};

static char *spare_marker(const struct app *app, const char *id)
{
    char path[1200];
    sess_path(app, id, SESS_PATH_SPARE, path, sizeof path);
    return xstrdup(path);
}

static int spare_launch(void *ctx, int kind, void **item)
{
    struct app *app = ctx;
    json_t *body = json_loads(spare_kind_body((enum spare_kind)kind), 0, NULL);
    json_object_set_new(body, "region", json_string(app->cfg.region));
    json_t *ent = json_object(); /* no org: nothing entitlement-gated is asked */
    struct spare_item *sp = xcalloc(1, sizeof *sp);
    struct spare_out out = {.kind = kind};
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
    .priority = spare_priority,
};

int sess_spares_start(struct app *app, int count, struct err *e)
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

void sess_spares_stop(struct app *app)
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
static void recover_spares(struct app *app)
{
    char root[1200];
    sess_path(app, NULL, SESS_PATH_SESSIONS, root, sizeof root);
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
    if (n)
        log_info("recovery: removed %d spare browser(s) of the previous run", n);
}

/* The modules' handout_check hooks, in order, each keeping its state in
 * states[i] (i: its place in session_ext_all); on a refusal the states kept
 * so far are released. */
static void handout_cancel_all(void **states);

static int handout_check_all(struct session_ctx *sc, void **states, struct err *e)
{
    const struct session_ext *const *all = session_ext_all();
    for (size_t i = 0; all[i]; i++) {
        if (!all[i]->handout_check)
            continue;
        int rc = all[i]->handout_check(sc, &states[i], e);
        if (rc) {
            handout_cancel_all(states);
            return rc;
        }
    }
    return 0;
}

static void handout_cancel_all(void **states)
{
    const struct session_ext *const *all = session_ext_all();
    for (size_t i = 0; all[i]; i++) {
        if (states[i] && all[i]->handout_cancel)
            all[i]->handout_cancel(states[i]);
        states[i] = NULL;
    }
}

/* The modules' handout hooks, in order, until one fails; the states of
 * those not called are released. */
static int handout_all(struct session_ctx *sc, void **states, struct err *e)
{
    const struct session_ext *const *all = session_ext_all();
    int rc = 0;
    for (size_t i = 0; all[i]; i++) {
        if (rc == 0 && all[i]->handout)
            rc = all[i]->handout(sc, states[i], e);
        else if (states[i] && all[i]->handout_cancel)
            all[i]->handout_cancel(states[i]);
        states[i] = NULL;
    }
    return rc;
}

/*
 * Serves a create from a ready spare when spare_match says one fits: *served
 * 0 (and nothing done, e untouched) when none fits or none is ready, so that
 * the caller launches cold; otherwise *served 1 and the result: 0 with the
 * session in *s, or the error (the org's limit, an unknown proxy, a duplicate
 * name). The limit is checked as for any create: a spare lets nobody past
 * it. The modules give the spare to its owner through their handout hooks
 * (the egress: the owner's proxy and network rules, api/proxies.c).
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
    if (sessrules_validate_create_min(body, min_timeout(app), &c, &scratch) != 0)
        return 0; /* the cold path reports it */
    enum spare_kind k = spare_match(&c, NULL);
    /* A create with vaults takes the cold path: api/vaults' prepare hook
     * resolves them (spares run no prepare hook). */
    if (k == SPARE_NONE || (c.vaults && json_array_size(c.vaults) > 0) ||
        check_limits(app, ent, &c, &scratch)) {
        sessrules_create_clear(&c);
        return 0;
    }
    /* One tenant holds a bounded share of a kind's spares (issue 39.2): its
     * creates past it launch cold, and the others' still find spares. */
    int share = spares_target(app->spares, k) / LIM_SPARES_ORG_SHARE;
    if (sessmgr_count_spare(app->sessions, org_id, k) >= (share > 1 ? share : 1)) {
        log_debug("spares: organization %s holds its share of the %s spares: a cold launch", org_id,
                  spare_kind_name(k));
        sessrules_create_clear(&c);
        return 0;
    }
    *served = 1;
    int64_t t0 = clock_mono_us(); /* where a hand-out spends its time, for the log */
    int rc = reserve_slot(app, org_id, ent, e);
    /* The modules' checks (the proxy and network rules, resolved in the
     * owner's store) run before a spare is taken: a create they refuse (an
     * unknown proxy) keeps the spares and answers what a cold create
     * answers. */
    void *states[SESSION_EXT_MAX + 1] = {0};
    json_t *mine = settings_doc(&c);
    struct session_rec owner;
    memset(&owner, 0, sizeof owner);
    snprintf(owner.org_id, sizeof owner.org_id, "%s", org_id);
    snprintf(owner.project_id, sizeof owner.project_id, "%s", project_id);
    struct session_ctx oc = {app, &owner, mine, body, NULL, NULL, ent};
    if (rc == 0 && (rc = handout_check_all(&oc, states, e)) != 0)
        sessmgr_unreserve(app->sessions, org_id);
    /* A spare of the kind being launched is waited for (issue 39.2): a
     * cold launch beside it would share the cores and end later. */
    struct spare_item *sp = rc == 0 ? spares_take_wait(app->spares, k, org_id) : NULL;
    if (rc == 0 && !sp) {
        sessmgr_unreserve(app->sessions, org_id);
        *served = 0;
    }
    if (!sp) {
        handout_cancel_all(states);
        json_decref(mine);
        sessrules_create_clear(&c);
        return rc;
    }
    struct sandbox *ssb = chromium_sandbox(sp->browser);
    /* Its memory and pids now count against the owner's share (admit.h). */
    if (ssb && (rc = sandbox_adopt(ssb, org_id, e)) != 0) {
        handout_cancel_all(states);
        json_decref(mine);
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
    json_object_update(doc, mine);
    json_decref(mine);
    /* The egress listener becomes the owner's (its rules, its proxy): before
     * the started hooks turn its routes on and before start_url. */
    int64_t t_taken = clock_mono_us();
    char dir[1200];
    sess_path(app, s->id, SESS_PATH_HOME, dir, sizeof dir);
    struct session_ctx sc = {app, s, doc, body, dir, NULL, ent};
    rc = handout_all(&sc, states, e);
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
        live_mark_spare(l, k);
        struct viewport dflt;
        viewport_default(0, &dflt);
        /* A headless spare was sized to the default viewport at launch: its
         * page gets the one asked for the same way (issue 39.2). Best
         * effort, as at launch. */
        if (k == SPARE_HEADLESS &&
            (c.viewport.width != dflt.width || c.viewport.height != dflt.height) &&
            live_ws_url(l, ws, sizeof ws) == 0) {
            err_init(&scratch);
            if (chromium_fit_headless(ws, c.viewport.width, c.viewport.height, CDP_CALL_TIMEOUT_MS,
                                      &scratch) != 0)
                log_warn("session %s: the headless page could not be sized to %dx%d: %s", s->id,
                         c.viewport.width, c.viewport.height, scratch.message);
        }
        if (c.start_url[0] && live_ws_url(l, ws, sizeof ws) == 0)
            cdp_page_navigate_first(ws, c.start_url, CDP_CALL_TIMEOUT_MS);
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

int sess_create(struct app *app, const char *org_id, const char *project_id, const json_t *ent,
                const json_t *body, struct session_rec *out, struct err *e)
{
    int served = 0;
    int64_t start = clock_mono_us();
    metrics_creating(1);
    int rc = from_spare(app, org_id, project_id, ent, body, out, &served, e);
    if (!served) {
        /* No spare launch starts beside it; the launch time teaches the
         * estimate a create waits for a spare at most (issue 39.2). */
        spares_cold_begin(app->spares);
        int64_t t_cold = clock_mono_us();
        rc = sess_spawn(app, org_id, project_id, ent, body, NULL, 0, out, e);
        /* The host had no room: spares are the first thing given up. */
        if (rc == E_UNAVAIL && spares_give_up(app->spares)) {
            err_init(e);
            t_cold = clock_mono_us();
            rc = sess_spawn(app, org_id, project_id, ent, body, NULL, 0, out, e);
        }
        spares_cold_end(app->spares, rc == 0 ? (clock_mono_us() - t_cold) / 1000 : -1);
    }
    metrics_creating(-1);
    metrics_create(served ? METRICS_CREATE_SPARE : METRICS_CREATE_COLD, rc == 0,
                   clock_mono_us() - start);
    return rc;
}

int sess_end(struct app *app, const char *session_id, const char *reason)
{
    long long up = 0;
    int rc = sessmgr_end(app->sessions, session_id, &up, NULL);
    sess_on_end(app, session_id, reason, up);
    return rc;
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
    int rc = store_session_update(app->store, s);
    /* A background teardown records the end a second time; by then the row
     * may be gone, pruned as one of the org's oldest ended sessions. */
    if (rc == E_NOTFOUND)
        log_info("session %s: its ended row was already pruned (%s)", s->id, reason);
    else if (rc != 0)
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
    launcher.discard(launcher.ctx, t->browser);
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
static int teardown_in_background(struct app *app, struct session_rec *s, json_t *doc)
{
    char dir[1200];
    sess_path(app, s->id, SESS_PATH_HOME, dir, sizeof dir);
    struct session_ctx sc = {app, s, doc, NULL, dir, NULL, NULL};
    for (const struct session_ext *const *x = session_ext_all(); *x; x++)
        if ((*x)->needs_graceful_end && (*x)->needs_graceful_end(&sc))
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

void sess_delete(struct app *app, struct session_rec *s)
{
    json_t *doc = json_loads(s->data, 0, NULL);
    if (teardown_in_background(app, s, doc)) {
        json_decref(doc);
        return;
    }
    long long up = 0;
    int closed = 1;
    if (sessmgr_end(app->sessions, s->id, &up, &closed) != 0)
        up = s->uptime_ms;
    /* A browser that had to be killed left its folder half-written: the
     * profile keeps what it had (the ending hook saves on "deleted" only). */
    session_finish(app, s, doc,
                   closed ? "deleted"
                          : "deleted; the browser did not close cleanly, its state was not saved",
                   up);
    json_decref(doc);
}

void sess_on_end(void *ctx, const char *id, const char *reason, long long uptime_ms)
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

static void session_finish(struct app *app, struct session_rec *s, json_t *doc, const char *reason,
                           long long uptime_ms)
{
    char dir[1200];
    sess_path(app, s->id, SESS_PATH_HOME, dir, sizeof dir);
    json_t *d = doc ? doc : json_object();
    struct session_ctx sc = {app, s, d, NULL, dir, NULL, NULL};
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
    sess_path(app, id, SESS_PATH_HOME, dir, sizeof dir);
    /* The profile's tmpfs first (sandbox_home_mount); a crashed server's
     * too. Then the folder it was mounted on, empty. */
    (void)sandbox_home_unmount(dir);
    path_remove_tree(dir);
    /* The session's own files (sandbox_root_create): a tmpfs, normally gone
     * with the sandbox; after a crash of the server it is still mounted. */
    char path[1200];
    sess_path(app, id, SESS_PATH_ROOT, path, sizeof path);
    if (umount2(path, MNT_DETACH) == 0)
        log_info("session %s: unmounted its files left by the previous run", id);
    (void)rmdir(path);
    /* Chromium writes its log beside the folder (chromium.h). */
    sess_path(app, id, SESS_PATH_LOG, path, sizeof path);
    unlink(path);
    sess_path(app, id, SESS_PATH_XVFB_LOG, path, sizeof path);
    unlink(path);
}

void sess_recover(struct app *app)
{
    /* On a shared store the other nodes' rows are theirs: this node reaps
     * only its own earlier runs, when it registers (sess_reap_node). */
    if (!store_shared(app->store))
        recover_rows(app, NULL);
    recover_spares(app);
    if (store_shared(app->store))
        remove_orphan_folders(app);
}

/* On a shared store the rows of this node's previous run may already have
 * been ended by another node's sweep, so no row names their folders: every
 * session folder in this node's data folder at start is a leftover (the
 * browsers died with the previous run, by its reaper). */
static void remove_orphan_folders(struct app *app)
{
    char root[1200];
    sess_path(app, NULL, SESS_PATH_SESSIONS, root, sizeof root);
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
    if (n)
        log_info("recovery: removed %d file(s) and folder(s) left by this node's previous run", n);
}

void sess_reap_node(void *ctx, const char *node)
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
    metrics_add(METRICS_ORPHANS_REAPED, n);
    if (n)
        log_info("recovery: ended %zu session(s) of the previous run", n);
    xfree(rows);
}

/* ---- update ---- */

/* Resizes the browser window over CDP (and the Xvfb screen when headful). */
static int apply_resize(const char *ws_url, const struct viewport *vp, struct err *e)
{
    struct cdp_client *cc;
    int rc = cdp_client_open(ws_url, CDP_CALL_TIMEOUT_MS, &cc, e);
    if (rc)
        return rc;
    char target[128];
    json_t *res = NULL;
    if ((rc = cdp_page_first(cc, CDP_CALL_TIMEOUT_MS, target, sizeof target, e)) == 0) {
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

struct screen_resize {
    int w, h;
    struct err *e;
    int headless; /* set: the browser has no display */
};

/* Whether a headful browser's screen, fixed at its launch, holds the new
 * viewport: a 400 naming viewport when it does not, before anything is
 * resized (a recording is not cut for a resize that cannot happen). */
static int screen_holds(void *ctx, struct chromium *c)
{
    struct screen_resize *r = ctx;
    int sw = 0, sh = 0;
    chromium_screen_size(c, &sw, &sh);
    if (sw <= 0 || (r->w <= sw && r->h <= sh))
        return 0;
    return err_field(r->e, "viewport",
                     "%dx%d is larger than this headful browser's screen (%dx%d, fixed when it "
                     "was launched): at most %dx%d, or create a browser with the larger viewport",
                     r->w, r->h, sw, sh, sw, sh);
}

static int resize_screen(void *ctx, struct chromium *c)
{
    struct screen_resize *r = ctx;
    r->headless = chromium_xvfb_pid(c) <= 0;
    if (r->headless)
        return 0;
    return chromium_resize_screen(c, r->w, r->h, r->e);
}

int sess_update(struct app *app, struct session_rec *s, json_t *d, const json_t *body,
                const struct sessrules_plan *plan, struct err *e)
{
    int rc = 0;
    struct live *l = sessmgr_get(app->sessions, s->id);
    char ws[512] = "";
    if (!l || live_ws_url(l, ws, sizeof ws) != 0)
        rc = err_set(e, E_CONFLICT, "session_ended",
                     "browser session %s has ended; its browser is not running", s->id);
    char dir[1200];
    sess_path(app, s->id, SESS_PATH_HOME, dir, sizeof dir);
    struct session_ctx sc = {app, s, d, body, dir, NULL, NULL};
    if (rc == 0 && sessrules_plan_has(plan, SESSACT_RESIZE)) {
        int w = plan->next.viewport.width, h = plan->next.viewport.height;
        struct screen_resize sr = {w, h, e, 0};
        rc = live_with_browser(l, screen_holds, &sr);
        if (rc == E_NOTFOUND) /* no browser now: the resize below says so */
            rc = 0;
    }
    if (rc == 0 && sessrules_plan_has(plan, SESSACT_RESIZE)) {
        int w = plan->next.viewport.width, h = plan->next.viewport.height;
        struct screen_resize sr = {w, h, e, 0};
        /* force: an active recording ends here and goes on as a new
         * segment at the new size (api/replays' resize hooks). */
        void *states[SESSION_EXT_MAX + 1] = {0};
        const struct session_ext *const *all = session_ext_all();
        for (size_t i = 0; all[i]; i++)
            if (all[i]->resizing)
                states[i] = all[i]->resizing(&sc, plan->restart_recording, w, h);
        rc = live_with_browser(l, resize_screen, &sr);
        /* Headless: the page's viewport, not the undrawn window, gets the size. */
        if (rc == 0)
            rc = sr.headless ? chromium_fit_headless(ws, sr.w, sr.h, CDP_CALL_TIMEOUT_MS, e)
                             : apply_resize(ws, &plan->next.viewport, e);
        for (size_t i = 0; all[i]; i++)
            if (all[i]->resized)
                all[i]->resized(&sc, states[i], w, h);
        if (rc) {
            /* A copy: e->message is what err_set writes. */
            char why[sizeof e->message];
            snprintf(why, sizeof why, "%s", e->message);
            rc = err_set(e, E_INTERNAL, "internal", "the window could not be resized: %s", why);
        }
    }
    if (rc == 0) {
        snprintf(s->name, sizeof s->name, "%s", plan->next.name);
        if (plan->next.tags)
            json_object_set(d, "tags", plan->next.tags);
        else
            json_object_del(d, "tags");
        json_object_set(d, "telemetry", plan->next.telemetry ? plan->next.telemetry : json_null());
        json_object_set_new(d, "viewport", viewport_to_json(&plan->next.viewport));
        json_object_set_new(d, "proxy", proxy_record(&plan->next.proxy));
        if (plan->next.start_url[0])
            json_object_set_new(d, "start_url", json_string(plan->next.start_url));
        for (const struct session_ext *const *x = session_ext_all(); rc == 0 && *x; x++)
            if ((*x)->update)
                rc = (*x)->update(&sc, ws, e);
    }
    if (rc == 0) {
        xfree(s->data);
        s->data = jsonx_dump(d);
        rc = store_session_update(app->store, s);
        if (rc == E_CONFLICT)
            err_set(e, rc, "conflict", "an active session named %s already exists", s->name);
    }
    /* A profile load restarted the browser: navigate the new one. */
    if (rc == 0 && sessrules_plan_has(plan, SESSACT_NAVIGATE) && live_ws_url(l, ws, sizeof ws) == 0)
        cdp_page_navigate_first(ws, plan->next.start_url, CDP_CALL_TIMEOUT_MS);
    sessmgr_put(l);
    return rc;
}
