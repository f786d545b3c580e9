/*
 * Browser sessions: POST/GET/PATCH/DELETE /browsers and the CDP WebSocket
 * endpoint /browser/cdp.
 *
 * The handlers parse the request, call the session's life (src/session:
 * create, update, end) and render the Browser record; the update's plan is
 * domain/session_rules'. CDP is relayed through src/proxy.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "api/apps.h"
#include "api/browsers.h"
#include "session/session.h"
#include "session/ext.h"
#include "cluster/node.h"
#include "core/clock.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/token.h"
#include "core/xalloc.h"
#include "domain/entitlements.h"
#include "domain/launch_settings.h"
#include "domain/session_rules.h"
#include "domain/telemetry_cfg.h"
#include "proxy/cdp_client.h"
#include "proxy/relay.h"
#include "proxy/ws.h"
#include "runtime/chromium.h"
#include "runtime/sandbox.h"
#include "runtime/sessfs.h"
#include "runtime/sessmgr.h"

#define TOKEN_LIFETIME_S    (24 * 3600)
#define CDP_CALL_TIMEOUT_MS 5000

/* ---- records ---- */

int api_live_session(struct req *rq, struct session_rec *rec, struct live **live, char *ws,
                     size_t cap)
{
    return api_live_session_id(rq, rq->params[0], rec, live, ws, cap);
}

int api_live_session_id(struct req *rq, const char *id, struct session_rec *rec, struct live **live,
                        char *ws, size_t cap)
{
    struct app *app = api_app(rq);
    struct auth *a = api_auth(rq);
    *live = NULL;
    int rc = store_session_get(app->store, a->org.id, a->project.id, id, 1, rec);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "browser session %s not found", id);
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

char *api_signed_url(const struct app *app, const struct session_rec *s, const char *aud,
                     const char *path)
{
    json_t *v = signed_url(app, s, aud, path);
    char *url = xstrdup(json_string_value(v));
    json_decref(v);
    return url;
}

/* Classic WebDriver's base URL for the session (api/wdclassic.h):
 * "http[s]://PUBLIC/browser/wd/TOKEN", the token of webdriver_ws_url in the
 * path, where clients append /session/ID/... */
static json_t *webdriver_url(const struct app *app, const struct session_rec *s)
{
    json_t *ws = signed_url(app, s, "webdriver", "/browser/webdriver");
    const char *u = json_string_value(ws);
    const char *tok = strstr(u, "?jwt=");
    const char *pub = app->cfg.public_url;
    size_t n = strlen(pub);
    while (n && pub[n - 1] == '/')
        n--;
    const char *scheme =
        strncmp(pub, "https://", 8) == 0 || strncmp(pub, "http://", 7) == 0 ? "" : "http://";
    char *url = xasprintf("%s%.*s/browser/wd/%s", scheme, (int)n, pub, tok ? tok + 5 : "");
    json_decref(ws);
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
    json_object_set_new(r, "webdriver_url", webdriver_url(app, s));
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
    sess_path(app, s->id, SESS_PATH_HOME, dir, sizeof dir);
    struct session_ctx sc = {app, s, d, NULL, dir, NULL, NULL};
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
    /* Browsers of an invocation (api/apps.h) are listed under it and end
     * with it. */
    char inv[STORE_ID] = "";
    json_t *iv = json_object_get(body, "invocation_id");
    if (iv && !json_is_null(iv)) {
        if (!json_is_string(iv) || json_string_length(iv) >= sizeof inv)
            rc = err_field(&rq->err, "invocation_id", "must be the id of a running invocation");
        else
            snprintf(inv, sizeof inv, "%s", json_string_value(iv));
        if (rc == 0)
            rc = apps_invocation_check(a->org.id, a->project.id, inv, &rq->err);
        if (rc) {
            json_decref(body);
            return rc;
        }
    }
    json_object_del(body, "invocation_id");
    struct session_rec s;
    rc = sess_create(app, a->org.id, a->project.id, ent, body, &s, &rq->err);
    json_decref(body);
    if (rc)
        return rc;
    if (inv[0])
        apps_invocation_attach(app, inv, s.id);
    resp_json(rs, 200, render_session(app, &s));
    session_rec_clear(&s);
    return 0;
}

json_t *browsers_render(struct app *app, const struct session_rec *s)
{
    return render_session(app, s);
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

int browsers_delete(struct req *rq, struct resp *rs)
{
    struct session_rec s;
    int rc = load_session(rq, 0, &s);
    if (rc)
        return rc;
    sess_delete(api_app(rq), &s);
    session_rec_clear(&s);
    resp_empty(rs, 204);
    return 0;
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
    struct launch_settings ls;
    launch_settings_from_json(d, &ls);
    st->viewport = ls.viewport;
    st->gpu = ls.gpu;
    st->stealth = ls.stealth;
    st->headless = ls.headless;
    const char *mode = jsonx_str(json_object_get(d, "proxy"), "mode");
    st->proxy.kind = mode && strcmp(mode, "direct") == 0 ? PROXYSEL_DIRECT : PROXYSEL_DEFAULT;
    const char *su = jsonx_str(d, "start_url");
    snprintf(st->start_url, sizeof st->start_url, "%s", su ? su : "");
    st->profile_loaded = json_object_get(d, "profile") != NULL;
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
    char dir[1200];
    sess_path(app, s.id, SESS_PATH_HOME, dir, sizeof dir);
    struct session_ctx sc = {app, &s, d, body, dir, NULL, NULL};
    for (const struct session_ext *const *x = session_ext_all(); *x; x++)
        if ((*x)->state)
            (*x)->state(&sc, &cur); /* an active recording, a live view viewer */
    struct sessrules_plan plan;
    memset(&plan, 0, sizeof plan);
    rc = sessrules_plan_update(&cur, body, &plan, &rq->err);
    if (rc == 0)
        rc = sess_update(app, &s, d, body, &plan, &rq->err);
    if (rc == 0)
        resp_json(rs, 200, render_session(app, &s));
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
    char org[64];
    struct app *app;
    struct live *live;
    struct http_upgrade *up;
    int upstream_fd;
    char *leftover;
    size_t leftover_len;
    uint64_t from_browser; /* set by on_counts just before on_close */
    int ext_off;           /* the org's plan has no browser_extensions: no loadUnpacked */
};

/* 1 when org's plan has features.browser_extensions off (or the plan cannot
 * be read): its CDP clients may not load extensions either. Read once per
 * connection, when it is made. */
static int cdp_ext_off(struct app *app, const char *org)
{
    struct org_rec o;
    memset(&o, 0, sizeof o);
    json_t *ent = NULL;
    struct err e;
    err_init(&e);
    int on = store_org_get(app->store, org, &o) == 0 &&
             api_resolve_entitlements(app->store, &o, &ent, &e) == 0 &&
             ent_feature_on(ent, "browser_extensions");
    json_decref(ent);
    xfree(o.overrides);
    return !on;
}

/* 1 when path (a command's params.path) is a folder of the session's own
 * files (docs/fs.md: /tmp and /home/kernel, resolved inside the session's
 * root as the fs API resolves them), the only place a client can put an
 * extension. The name alone cannot tell: a client's own folder may be under
 * /tmp too (Stagehand sends its node_modules copy). Runs on a relay thread,
 * only for Extensions.loadUnpacked: a few system calls, no waiting. */
static int ext_dir_in_session(struct cdp_conn *cc, const char *path)
{
    if (!path)
        return 0;
    struct sandbox *sb = live_sandbox_ref(cc->live);
    const char *root = sb ? sandbox_root(sb) : NULL;
    struct sessfs fs = {.rootfd = -1};
    struct stat st;
    int in = root && sessfs_open(&fs, root, sandbox_uid(sb)) == 0 &&
             sessfs_stat(&fs, path, &st) == 0 && S_ISDIR(st.st_mode);
    if (fs.rootfd >= 0)
        sessfs_close(&fs);
    if (sb)
        sandbox_unref(sb);
    return in;
}

/* The relay's refuse hook: Extensions.loadUnpacked only (issue 31, found
 * with Stagehand 4, which asks for it on connect). Chromium loads an unpacked
 * extension from any folder its sandbox shows, the session's own files
 * included (fs write_file/upload_zip), so an organization whose plan turns
 * extensions off would get them through CDP: refused. A path outside the
 * session's files is a folder of the client's machine (Stagehand sends its
 * node_modules copy), which Chromium would only call unresolvable: refused
 * with what to do instead. Everything else passes. */
static const char *cdp_refuse(void *ctx, const char *method, const uint8_t *msg, size_t len)
{
    struct cdp_conn *cc = ctx;
    if (strcmp(method, "Extensions.loadUnpacked") != 0)
        return NULL;
    if (cc->ext_off)
        return "Extensions.loadUnpacked: features.browser_extensions is not enabled for this "
               "organization's plan";
    json_t *cmd = len <= LIM_RELAY_REFUSE_PARSE_BYTES
                      ? json_loadb((const char *)msg, len, 0, NULL)
                      : NULL; /* too large to look into: refused (core/limits.h) */
    int ours = ext_dir_in_session(cc, jsonx_str(json_object_get(cmd, "params"), "path"));
    json_decref(cmd);
    if (ours)
        return NULL;
    return "Extensions.loadUnpacked: the path is not a folder of this browser's files (they are "
           "/tmp and /home/kernel, on the server): a folder of the client's machine cannot be "
           "loaded. "
           "Upload the extension (POST /extensions) and create the browser with extensions: "
           "[{name}], or write it into the session's files (fs upload_zip) and load that path";
}

static void cdp_message(void *ctx, const char *method, size_t len)
{
    struct cdp_conn *cc = ctx;
    for (const struct session_ext *const *x = session_ext_all(); *x; x++)
        if ((*x)->cdp_message)
            (*x)->cdp_message(cc->session_id, cc, method, len);
}

static void cdp_conn_hooks(struct cdp_conn *cc, int attached)
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

static int cdp_charge(void *ctx, long long delta)
{
    struct cdp_conn *cc = ctx;
    return api_relay_charge(cc->app, cc->org, cc->session_id, delta);
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
    api_relay_conn_give(cc->org, cc->session_id);
    cdp_conn_hooks(cc, 0);
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
        .charge = cdp_charge,
        .refuse = cdp_refuse,
        .ctx = cc,
    };
    struct err e;
    err_init(&e);
    live_client_attached(cc->live);
    cdp_conn_hooks(cc, 1);
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
    api_relay_conn_give(cc->org, cc->session_id);
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

int browsers_cdp_fd(struct app *app, const char *org, const char *session_id, const char *target,
                    int fd, const char *accept, struct err *e)
{
    struct live *l = sessmgr_get(app->sessions, session_id);
    if (!l)
        return err_set(e, E_NOTFOUND, "not_found", "browser session %s not found or ended",
                       session_id);
    int rc = api_relay_conn_take(org, session_id, e);
    if (rc != 0) {
        sessmgr_put(l);
        return rc;
    }
    char url[512];
    struct cdp_conn *cc = xcalloc(1, sizeof *cc);
    cc->app = app;
    cc->live = l;
    cc->upstream_fd = -1;
    snprintf(cc->session_id, sizeof cc->session_id, "%s", session_id);
    snprintf(cc->org, sizeof cc->org, "%s", org);
    cc->ext_off = cdp_ext_off(app, org);
    if (live_ws_url(l, url, sizeof url) != 0 ||
        (target && page_ws_url(url, sizeof url, target) != 0) ||
        ws_connect(url, CDP_CALL_TIMEOUT_MS, &cc->upstream_fd, &cc->leftover, &cc->leftover_len,
                   e) != 0) {
        api_relay_conn_give(org, session_id);
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

/* `GET /browser/cdp?jwt=T/json/version` (and /json/list, /json): discovery
 * asked by a client that appended the path to cdp_ws_url's http form as a
 * string (Stagehand 4). A valid T is redirected (307, relative, so a public
 * URL with a path prefix keeps it) to the path form `cdp/T/json/version`,
 * which answers it on a blocking thread; a bad T is a 401 like any other.
 * Returns 1 when it answered, 0 when the request is not such a one. */
static int cdp_disc_redirect(struct req *rq, struct resp *rs, const char *jwt, int *rc)
{
    size_t toklen = 0;
    const char *path = cdp_disc_query_suffix(jwt, &toklen);
    if (!path || toklen >= TOKEN_MAX)
        return 0;
    struct app *app = api_app(rq);
    char tok[TOKEN_MAX];
    snprintf(tok, sizeof tok, "%.*s", (int)toklen, jwt);
    struct token_claims c;
    *rc = token_verify(app->token_key, sizeof app->token_key, tok, "cdp", clock_now_ms() / 1000, &c,
                       &rq->err);
    if (*rc == 0) {
        /* A token is longer than a resp_header value: more_headers. */
        char *loc = xasprintf("cdp/%s%s", tok, path);
        json_decref(rs->more_headers);
        rs->more_headers = json_pack("[[s,s]]", "Location", loc);
        xfree(loc);
        resp_header(rs, "Cache-Control", "no-store");
        resp_empty(rs, 307);
    }
    return 1;
}

int browsers_cdp(struct req *rq, struct resp *rs)
{
    struct app *app = api_app(rq);
    struct token_claims c;
    /* Under /browser/cdp/{token} and /browser/cdp/{token}/browser/cdp the
     * path's token is the one; a jwt= beside it must be the same. */
    const char *jwt = req_query(rq, "jwt");
    int rc = 0;
    if (rq->nparams == 1) {
        if (jwt && strcmp(jwt, rq->params[0]) != 0)
            return err_set(&rq->err, E_INVALID, "bad_request",
                           "jwt: must be the token of the path (/browser/cdp/TOKEN)");
        jwt = rq->params[0];
    } else if (cdp_disc_redirect(rq, rs, jwt, &rc)) {
        return rc;
    }
    rc = token_verify(app->token_key, sizeof app->token_key, jwt, "cdp", clock_now_ms() / 1000, &c,
                      &rq->err);
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
    if ((rc = api_relay_conn_take(c.org, c.sub, &rq->err)) != 0) {
        sessmgr_put(l);
        return rc;
    }
    char url[512];
    struct cdp_conn *cc = xcalloc(1, sizeof *cc);
    cc->app = app;
    cc->live = l;
    cc->upstream_fd = -1;
    snprintf(cc->session_id, sizeof cc->session_id, "%s", c.sub);
    snprintf(cc->org, sizeof cc->org, "%s", c.org);
    cc->ext_off = cdp_ext_off(app, c.org);
    if (live_ws_url(l, url, sizeof url) != 0 ||
        (target && page_ws_url(url, sizeof url, target) != 0) ||
        ws_connect(url, CDP_CALL_TIMEOUT_MS, &cc->upstream_fd, &cc->leftover, &cc->leftover_len,
                   &rq->err) != 0) {
        api_relay_conn_give(c.org, c.sub);
        sessmgr_put(l);
        xfree(cc);
        return err_set(&rq->err, E_UNAVAIL, "browser_unavailable",
                       "the session's browser is not answering");
    }
    resp_upgrade(rs, accept, cdp_upgraded, cdp_cancel, cc);
    return 0;
}
