/*
 * /auth/connections (see api/authconn.h).
 *
 * Stored data document of a connection: its settings (credential,
 * login_url, allowed_domains, health_checks, ...), `status`, `flow` (the
 * state of the latest flow, shown at the top level of the record) and
 * `timeline` (newest last, LIM_AUTHCONN_TIMELINE kept). Never a value of
 * the credential: a flow opens those in its own memory only.
 */
#include "api/authconn.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "api/api.h"
#include "api/credentials.h"
#include "api/pools.h"
#include "cluster/node.h"
#include "core/b64.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/secretbox.h"
#include "core/totp.h"
#include "core/xalloc.h"
#include "domain/entitlements.h"
#include "domain/replay_rules.h"
#include "proxy/cdp_client.h"
#include "proxy/cdp_page.h"
#include "runtime/bgrun.h"
#include "runtime/loginpage.h"
#include "runtime/sessmgr.h"
#include "session/app.h"
#include "session/session.h"
#include "store/store.h"

#define FEATURE   "managed_auth"
#define URL_MAX   2048
#define NAME_MAX_ 255

/* ------------------------------------------------------------ records */

static const char *const FLOW_KEYS[] = {"flow_status",
                                        "flow_step",
                                        "flow_type",
                                        "flow_expires_at",
                                        "browser_session_id",
                                        "fields",
                                        "discovered_fields",
                                        "error_code",
                                        "error_message",
                                        "website_error",
                                        "interaction_id",
                                        "mfa_options",
                                        "choices",
                                        "sign_in_options",
                                        "pending_sso_buttons",
                                        NULL};

static json_t *render(const struct authconn_rec *c)
{
    char t[40];
    json_t *d = json_loads(c->data ? c->data : "{}", 0, NULL);
    if (!d)
        d = json_object();
    json_t *r = json_object();
    json_object_set_new(r, "id", json_string(c->id));
    json_object_set_new(r, "domain", json_string(c->domain));
    json_object_set_new(r, "profile_name", json_string(c->profile_name));
    json_object_set_new(r, "created_at",
                        json_string(clock_fmt_rfc3339(c->created_at, t, sizeof t)));
    const char *k;
    json_t *v;
    json_object_foreach(d, k, v)
    {
        if (strcmp(k, "flow") && strcmp(k, "timeline") && strcmp(k, "last_check_ms") &&
            strcmp(k, "last_login_at"))
            json_object_set(r, k, v);
    }
    json_t *flow = json_object_get(d, "flow");
    for (size_t i = 0; FLOW_KEYS[i]; i++) {
        json_t *x = json_object_get(flow, FLOW_KEYS[i]);
        json_object_set(r, FLOW_KEYS[i], x ? x : json_null());
    }
    const char *cred = jsonx_str(json_object_get(d, "credential"), "name");
    int authed_once = json_object_get(d, "last_login_at") != NULL;
    json_object_set_new(r, "can_reauth", json_boolean(cred && authed_once));
    json_object_set_new(r, "can_reauth_reason",
                        json_string(!cred          ? "no_credential"
                                    : !authed_once ? "no_prior_successful_login"
                                                   : "has_credential"));
    json_decref(d);
    return r;
}

static const char *str_field(const json_t *body, const char *name, size_t max, int required,
                             struct err *e)
{
    json_t *v = json_object_get(body, name);
    if (!v || json_is_null(v)) {
        if (required)
            err_field(e, name, "is required");
        return NULL;
    }
    if (!json_is_string(v) || json_string_length(v) < 1 || json_string_length(v) > max ||
        strlen(json_string_value(v)) != json_string_length(v)) {
        err_field(e, name, "must be a string of 1-%zu characters", max);
        return NULL;
    }
    return json_string_value(v);
}

static void bool_field(const json_t *body, const char *name, struct err *e)
{
    json_t *v = json_object_get(body, name);
    if (v && !json_is_boolean(v))
        err_field(e, name, "must be a boolean");
}

/* An http(s) URL of at most URL_MAX bytes ("" allowed when clearable). */
static void url_field(const json_t *body, const char *name, int clearable, struct err *e)
{
    json_t *v = json_object_get(body, name);
    if (!v || json_is_null(v))
        return;
    const char *s = json_string_value(v);
    if (!json_is_string(v) || json_string_length(v) > URL_MAX ||
        (!(clearable && !*s) && strncmp(s, "http://", 7) != 0 && strncmp(s, "https://", 8) != 0))
        err_field(e, name, "must be an http:// or https:// URL of at most %d bytes%s", URL_MAX,
                  clearable ? " (\"\" clears it)" : "");
}

/* The id of body's proxy ({id}, borrowed), or NULL when it is absent or
 * null; a 400 detail when it is no object with an id. */
static const char *proxy_field(const json_t *body, struct err *e)
{
    json_t *px = json_object_get(body, "proxy");
    if (!px || json_is_null(px))
        return NULL;
    const char *id = jsonx_str(px, "id");
    if (json_is_object(px) && id && *id && strlen(id) < STORE_ID)
        return id;
    err_field(e, "proxy.id", "is required: the id of a proxy of this project");
    return NULL;
}

/* The fields of a create: domain and profile_name, then the settings
 * (apply_settings), which are all an update may give. */
static const char *const CREATE_FIELDS[] = {"domain",
                                            "profile_name",
                                            "allowed_domains",
                                            "auto_reauth",
                                            "browser_telemetry",
                                            "credential",
                                            "health_check_interval",
                                            "health_checks",
                                            "login_url",
                                            "proxy",
                                            "record_session",
                                            "save_credentials",
                                            NULL};
static const char *const *const UPDATE_FIELDS = &CREATE_FIELDS[2];

/* The settings common to create and update, checked and copied into d. */
static void apply_settings(struct req *rq, const json_t *body, const json_t *ent, json_t *d)
{
    struct err *e = &rq->err;
    static const char *const bools[] = {"auto_reauth", "health_checks", "record_session",
                                        "save_credentials", NULL};
    for (size_t i = 0; bools[i]; i++) {
        bool_field(body, bools[i], e);
        json_t *v = json_object_get(body, bools[i]);
        if (json_is_boolean(v))
            json_object_set(d, bools[i], v);
    }
    json_t *ad = json_object_get(body, "allowed_domains");
    if (ad) {
        size_t i;
        json_t *x;
        int ok = json_is_array(ad) && json_array_size(ad) <= 32;
        json_array_foreach(ad, i, x) ok &=
            json_is_string(x) && json_string_length(x) >= 1 && json_string_length(x) <= NAME_MAX_;
        if (!ok)
            err_field(e, "allowed_domains", "must be an array of at most 32 domain names");
        else
            json_object_set(d, "allowed_domains", ad);
    }
    json_t *hi = json_object_get(body, "health_check_interval");
    if (hi) {
        int64_t lo = 300, hi_max = 86400;
        (void)ent_limit(ent, "features.managed_auth.health_check_interval_min_seconds", &lo);
        (void)ent_limit(ent, "features.managed_auth.health_check_interval_max_seconds", &hi_max);
        if (!json_is_integer(hi) || json_integer_value(hi) < lo || json_integer_value(hi) > hi_max)
            err_field(e, "health_check_interval",
                      "must be an integer of seconds between %lld and %lld (this plan's range)",
                      (long long)lo, (long long)hi_max);
        else
            json_object_set(d, "health_check_interval", hi);
    }
    url_field(body, "login_url", 1, e);
    json_t *lu = json_object_get(body, "login_url");
    if (json_is_string(lu)) {
        if (json_string_length(lu))
            json_object_set(d, "login_url", lu);
        else
            json_object_del(d, "login_url");
    }
    json_t *cred = json_object_get(body, "credential");
    if (cred && !json_is_null(cred)) {
        const char *name = jsonx_str(cred, "name");
        if (!json_is_object(cred))
            err_field(e, "credential", "must be an object: {name}");
        else if (json_object_get(cred, "provider"))
            err_field(e, "credential.provider",
                      "external providers are not used by this server's login flows; store "
                      "the values as a credential and give {name}");
        else if (!name || !*name || strlen(name) > LIM_CREDENTIAL_NAME_BYTES)
            err_field(e, "credential.name", "is required: the name of a credential");
        else
            json_object_set_new(d, "credential", json_pack("{s:s}", "name", name));
    }
    const char *proxy_id = proxy_field(body, e);
    if (proxy_id)
        json_object_set_new(d, "proxy_id", json_string(proxy_id));
    json_t *bt = json_object_get(body, "browser_telemetry");
    if (bt && !json_is_null(bt) && !json_is_object(bt))
        err_field(e, "browser_telemetry", "must be an object or null");
    else if (bt)
        json_object_set(d, "browser_telemetry", bt);
}

/* A named credential must exist in the project (404 naming it). */
static int check_credential(struct req *rq, const json_t *d)
{
    const char *name = jsonx_str(json_object_get(d, "credential"), "name");
    if (!name)
        return 0;
    struct auth *a = api_auth(rq);
    struct cred_rec c;
    memset(&c, 0, sizeof c);
    int rc = store_cred_get(api_app(rq)->store, a->org.id, a->project.id, name, &c);
    cred_rec_clear(&c);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found",
                       "credential.name: credential %.255s not found in this project", name);
    if (rc)
        return err_set(&rq->err, rc, "internal", "credential %.255s could not be read", name);
    return 0;
}

static int load(struct req *rq, struct authconn_rec *c)
{
    struct auth *a = api_auth(rq);
    memset(c, 0, sizeof *c);
    int rc = store_ac_get(api_app(rq)->store, a->org.id, a->project.id, rq->params[0], c);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "auth connection %.64s not found in this project",
                       rq->params[0]);
    if (rc)
        return err_set(&rq->err, rc, "internal", "auth connection %.64s could not be read",
                       rq->params[0]);
    return 0;
}

static int gate(struct req *rq, const json_t **ent)
{
    int rc = api_require_feature(rq, FEATURE);
    if (rc == 0 && ent)
        rc = api_entitlements(rq, ent);
    return rc;
}

/* The gate, then the connection the path names into c (zeroed first, so
 * that authconn_rec_clear may follow in every case). */
static int open_conn(struct req *rq, struct authconn_rec *c)
{
    memset(c, 0, sizeof *c);
    int rc = gate(rq, NULL);
    return rc ? rc : load(rq, c);
}

/* The profile of the connection, created when missing. */
static int ensure_profile(struct req *rq, const char *name)
{
    struct auth *a = api_auth(rq);
    struct profile_rec p;
    memset(&p, 0, sizeof p);
    snprintf(p.org_id, sizeof p.org_id, "%s", a->org.id);
    snprintf(p.project_id, sizeof p.project_id, "%s", a->project.id);
    snprintf(p.name, sizeof p.name, "%s", name);
    int rc = store_profile_create(api_app(rq)->store, &p);
    if (rc == E_CONFLICT || rc == 0)
        return 0;
    return err_set(&rq->err, rc, "internal", "profile %s could not be created", name);
}

/* 429 limit_exceeded: the org has count auth connections, its cap max. */
static int over_cap(struct err *e, int64_t count, int64_t max)
{
    int rc = err_set(e, E_LIMIT, "limit_exceeded",
                     "this organization has %lld auth connections, the most it may (%lld); "
                     "delete one first",
                     (long long)count, (long long)max);
    e->retry_after = LIM_AUTHCONN_RETRY_AFTER_S;
    return rc;
}

int authconn_create(struct req *rq, struct resp *rs)
{
    struct auth *a = api_auth(rq);
    struct err *e = &rq->err;
    const json_t *ent = NULL;
    json_t *body;
    int rc = req_json_object(rq, 0, &body);
    if (rc)
        return rc;
    if ((rc = gate(rq, &ent))) {
        json_decref(body);
        return rc;
    }
    credentials_check_fields(body, CREATE_FIELDS, "an auth connection", e);
    const char *domain = str_field(body, "domain", NAME_MAX_, 1, e);
    const char *profile = str_field(body, "profile_name", NAME_MAX_, 1, e);
    int64_t interval = 3600;
    (void)ent_limit(ent, "features.managed_auth.health_check_interval_default_seconds", &interval);
    json_t *d = json_pack("{s:s,s:b,s:b,s:b,s:b,s:I,s:[]}", "status", "NEEDS_AUTH", "auto_reauth",
                          1, "health_checks", 1, "record_session", 0, "save_credentials", 1,
                          "health_check_interval", (json_int_t)interval, "allowed_domains");
    apply_settings(rq, body, ent, d);
    rc = err_has_fields(e) ? E_INVALID : check_credential(rq, d);
    int64_t count = 0, max = LIM_AUTHCONN_PER_ORG;
    if (ent_limit(ent, "features.managed_auth.max_connections", &max) && max > LIM_AUTHCONN_PER_ORG)
        max = LIM_AUTHCONN_PER_ORG;
    if (rc == 0 && store_ac_count(api_app(rq)->store, a->org.id, &count) != 0)
        rc = err_set(e, E_INTERNAL, "internal", "auth connections could not be counted");
    if (rc == 0 && count >= max)
        rc = over_cap(e, count, max);
    if (rc == 0)
        rc = ensure_profile(rq, profile);
    struct authconn_rec c;
    memset(&c, 0, sizeof c);
    if (rc == 0) {
        crypto_new_id(c.id);
        snprintf(c.org_id, sizeof c.org_id, "%s", a->org.id);
        snprintf(c.project_id, sizeof c.project_id, "%s", a->project.id);
        snprintf(c.profile_name, sizeof c.profile_name, "%s", profile);
        snprintf(c.domain, sizeof c.domain, "%s", domain);
        c.created_at = c.updated_at = clock_now_ms();
        c.data = jsonx_dump(d);
        /* Counted again with the insert, as one step per org on every node:
         * creates racing on several nodes all passed the count above. */
        rc = store_ac_insert(api_app(rq)->store, &c, max);
        if (rc == E_LIMIT)
            over_cap(e, max, max);
        else if (rc == E_CONFLICT)
            err_set(e, rc, "conflict",
                    "an auth connection for profile %s and domain %s already exists in this "
                    "project",
                    c.profile_name, c.domain);
        else if (rc)
            err_set(e, rc, "internal", "the auth connection could not be stored");
    }
    if (rc == 0)
        resp_json(rs, 200, render(&c));
    authconn_rec_clear(&c);
    json_decref(d);
    json_decref(body);
    return rc;
}

int authconn_get(struct req *rq, struct resp *rs)
{
    struct authconn_rec c;
    int rc = open_conn(rq, &c);
    if (rc == 0)
        resp_json(rs, 200, render(&c));
    authconn_rec_clear(&c);
    return rc;
}

int authconn_list(struct req *rq, struct resp *rs)
{
    struct auth *a = api_auth(rq);
    size_t limit, offset;
    int rc = req_page(rq, &limit, &offset);
    if (rc == 0)
        rc = gate(rq, NULL);
    if (rc)
        return rc;
    struct page pg = {.limit = limit, .offset = offset};
    struct authconn_rec *rows = NULL;
    size_t n = 0;
    const char *domain = req_query(rq, "domain"), *profile = req_query(rq, "profile_name");
    rc = store_ac_list(api_app(rq)->store, a->org.id, a->project.id,
                       profile && *profile ? profile : NULL, domain && *domain ? domain : NULL, &pg,
                       &rows, &n);
    if (rc)
        return err_set(&rq->err, rc, "internal", "auth connections could not be listed");
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(arr, render(&rows[i]));
        authconn_rec_clear(&rows[i]);
    }
    xfree(rows);
    resp_json(rs, 200, arr);
    resp_page(rs, offset, n, pg.has_more);
    return 0;
}

int authconn_update(struct req *rq, struct resp *rs)
{
    const json_t *ent = NULL;
    json_t *body;
    int rc = req_json_object(rq, 1, &body);
    if (rc)
        return rc;
    struct authconn_rec c;
    memset(&c, 0, sizeof c);
    rc = gate(rq, &ent);
    if (rc == 0)
        rc = load(rq, &c);
    json_t *d = NULL;
    if (rc == 0) {
        d = json_loads(c.data ? c.data : "{}", 0, NULL);
        if (!d)
            d = json_object();
        credentials_check_fields(body, UPDATE_FIELDS, "an auth connection update", &rq->err);
        apply_settings(rq, body, ent, d);
        rc = err_has_fields(&rq->err) ? E_INVALID : check_credential(rq, d);
    }
    if (rc == 0) {
        xfree(c.data);
        c.data = jsonx_dump(d);
        c.updated_at = clock_now_ms();
        rc = store_ac_update(api_app(rq)->store, &c);
        if (rc)
            err_set(&rq->err, rc, rc == E_NOTFOUND ? "not_found" : "internal",
                    "auth connection %s could not be updated", c.id);
    }
    if (rc == 0)
        resp_json(rs, 200, render(&c));
    json_decref(d);
    authconn_rec_clear(&c);
    json_decref(body);
    return rc;
}

/* ------------------------------------------------------------ flows */

/* A flow in memory: the values a person submitted (wiped once used), the
 * latest state event for watchers. Kept after it ends (done) until the next
 * login of its connection or the connection's deletion, so that a watcher
 * arriving late still reads the final state. */
struct flow {
    char conn_id[STORE_ID], org_id[STORE_ID], project_id[STORE_ID];
    char id[STORE_ID];
    char interaction_id[STORE_ID]; /* the step waiting for a person (new at each) */
    char hosted[2 * STORE_ID];     /* what the hosted token binds: the first
                                      interaction id, "-NODE" on a cluster */
    char proxy_id[STORE_ID];       /* the login's proxy ("" = the connection's) */
    struct app *app;
    json_t *ent;
    json_t *input;   /* {field id: value} of the latest submit, owned */
    json_t *pending; /* the choices offered ({id, kind, sub, xpath, i}), owned */
    char picked[LIM_AUTHCONN_CHOICE_BYTES]; /* the id of the choice a person made */
    int cancel, done;
    char ws[512]; /* the flow browser's DevTools URL while it runs ("" = none) */
    int shooting; /* a hosted page's screenshot is being taken */
    int64_t seq;
    char *event; /* the latest managed_auth_state event (JSON text) */
    int terminal;
    struct flow *next;
};

struct watcher {
    char conn_id[STORE_ID], org_id[STORE_ID];
    struct http_stream *hs;
    int64_t sent_seq;
    char *out;
    size_t off, len;
    int ended;
    struct watcher *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct flow *flows;
static struct watcher *watchers;
static struct bgrun *runner; /* flows and the health checker */
static int stopping;

static struct flow *flow_find(const char *conn_id)
{
    for (struct flow *f = flows; f; f = f->next)
        if (strcmp(f->conn_id, conn_id) == 0)
            return f;
    return NULL;
}

static void flow_free(struct flow *f)
{
    if (!f)
        return;
    json_decref(f->ent);
    json_decref(f->input);
    json_decref(f->pending);
    xfree(f->event);
    xfree(f);
}

/* Unlinks and frees the finished flow of conn_id (mu held). */
static void flow_drop_done(const char *conn_id)
{
    for (struct flow **p = &flows; *p; p = &(*p)->next) {
        if (strcmp((*p)->conn_id, conn_id) == 0 && (*p)->done) {
            struct flow *f = *p;
            *p = f->next;
            flow_free(f);
            return;
        }
    }
}

static int flows_running(const char *org_id)
{
    int n = 0;
    for (struct flow *f = flows; f; f = f->next)
        n += !f->done && (!org_id || strcmp(f->org_id, org_id) == 0);
    return n;
}

static void wake_watchers(const char *conn_id)
{
    for (struct watcher *w = watchers; w; w = w->next)
        if (w->hs && strcmp(w->conn_id, conn_id) == 0)
            http_stream_wake(w->hs);
}

static void wipe_json_strings(json_t *o)
{
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        if (json_is_string(v))
            OPENSSL_cleanse((char *)json_string_value(v), json_string_length(v));
    }
}

/* ---- the connection's row, updated by a flow ---- */

static int is_terminal(const char *status)
{
    return status && strcmp(status, "IN_PROGRESS") != 0;
}

/* Reads the connection's row into c (cleared by the caller) and writes the
 * flow state st (borrowed: flow_status, flow_step, fields, ...) into its
 * data and its timeline entry, with extra settings (borrowed, may be NULL)
 * merged at the top level; nothing is stored. E_NOTFOUND when the
 * connection is gone. */
static int compose(struct flow *f, const json_t *st, const json_t *extra, struct authconn_rec *c)
{
    int rc = store_ac_get(f->app->store, f->org_id, f->project_id, f->conn_id, c);
    if (rc)
        return rc;
    char t[40];
    const char *now = clock_fmt_rfc3339(clock_now_ms(), t, sizeof t);
    json_t *d = json_loads(c->data ? c->data : "{}", 0, NULL);
    if (!d)
        d = json_object();
    json_object_set(d, "flow", (json_t *)st);
    if (extra)
        json_object_update(d, (json_t *)extra);
    json_t *tl = json_object_get(d, "timeline");
    if (!json_is_array(tl)) {
        tl = json_array();
        json_object_set_new(d, "timeline", tl);
    }
    json_t *ev = NULL;
    size_t i;
    json_t *x;
    json_array_foreach(tl, i, x) if (strcmp(jsonx_str(x, "id") ? jsonx_str(x, "id") : "", f->id) ==
                                     0) ev = x;
    if (!ev) {
        ev = json_pack("{s:s,s:b,s:s,s:s}", "id", f->id, "telemetry_captured", 0, "type",
                       strcmp(jsonx_str(st, "flow_type"), "REAUTH") == 0 ? "reauth" : "login",
                       "timestamp", now);
        json_array_append_new(tl, ev);
        while (json_array_size(tl) > LIM_AUTHCONN_TIMELINE)
            json_array_remove(tl, 0);
    }
    json_object_set_new(ev, "status", json_string(jsonx_str(st, "flow_status")));
    json_object_set_new(ev, "step", json_string(jsonx_str(st, "flow_step")));
    json_object_set_new(ev, "updated_at", json_string(now));
    static const char *const copy[] = {"browser_session_id", "error_code", "error_message",
                                       "website_error", NULL};
    for (size_t k = 0; copy[k]; k++)
        if (jsonx_str(st, copy[k]))
            json_object_set(ev, copy[k], json_object_get(st, copy[k]));
    xfree(c->data);
    c->data = jsonx_dump(d);
    c->updated_at = clock_now_ms();
    json_decref(d);
    return 0;
}

/* Publishes the state event of st (and extra) to the flow's watchers; final
 * marks the flow done (its thread then leaves it alone). */
static void announce(struct flow *f, const json_t *st, const json_t *extra, int final)
{
    char t[40];
    const char *now = clock_fmt_rfc3339(clock_now_ms(), t, sizeof t);
    json_t *e = json_pack("{s:s,s:s}", "event", "managed_auth_state", "timestamp", now);
    static const char *const evk[] = {
        "flow_status",         "flow_step",  "flow_type",     "fields",
        "discovered_fields",   "choices",    "mfa_options",   "sign_in_options",
        "pending_sso_buttons", "error_code", "error_message", "website_error",
        "post_login_url",      NULL};
    for (size_t k = 0; evk[k]; k++) {
        json_t *v = json_object_get(st, evk[k]);
        if (!v && extra)
            v = json_object_get(extra, evk[k]);
        if (v && !json_is_null(v))
            json_object_set(e, evk[k], v);
    }
    char *text = jsonx_dump(e);
    json_decref(e);
    pthread_mutex_lock(&mu);
    xfree(f->event);
    f->event = text;
    f->seq++;
    f->terminal = is_terminal(jsonx_str(st, "flow_status"));
    /* From here on a final publish's flow belongs to the next login. */
    if (final)
        f->done = 1;
    wake_watchers(f->conn_id);
    pthread_mutex_unlock(&mu);
}

/* Writes the flow state st into the connection's row (compose) and
 * publishes its event (announce). E_NOTFOUND when the connection is gone. */
static int publish(struct flow *f, const json_t *st, const json_t *extra, int final)
{
    struct authconn_rec c;
    memset(&c, 0, sizeof c);
    int rc = compose(f, st, extra, &c);
    if (rc == 0) {
        rc = store_ac_update(f->app->store, &c);
        announce(f, st, extra, final);
    }
    authconn_rec_clear(&c);
    return rc;
}

/* ---- the flow thread ---- */

/* The hosted pages' token key: HMAC-SHA256 of a label under the server's
 * token key, so that a hosted token never passes as a live view's (same
 * form, api/liveview.c) nor the other way round. */
static void hosted_key(const struct app *app, unsigned char out[32])
{
    static const char label[] = "browserd managed auth hosted page";
    unsigned int n = 32;
    if (!HMAC(EVP_sha256(), app->token_key, (int)sizeof app->token_key,
              (const unsigned char *)label, sizeof label - 1, out, &n))
        memset(out, 0, 32); /* no MAC then verifies: the hosted pages answer 404 */
}

/* PUBLIC/auth/hosted/CONN.HOSTED.MAC: the flow's hosted page, valid while
 * that flow runs (the MAC binds the connection and f->hosted, the flow's
 * first interaction id and, on a cluster, its node; nothing stored). */
static char *hosted_url(const struct flow *f)
{
    unsigned char key[32];
    char mac[LIVEVIEW_MAC_HEX + 1];
    hosted_key(f->app, key);
    liveview_token_mac(key, sizeof key, f->conn_id, f->hosted, mac);
    OPENSSL_cleanse(key, sizeof key);
    const char *pub = f->app->cfg.public_url;
    size_t n = strlen(pub);
    while (n && pub[n - 1] == '/')
        n--;
    return xasprintf("%.*s/auth/hosted/%s.%s.%s", (int)n, pub, f->conn_id, f->hosted, mac);
}

/* The flow's state document (new ref). */
static json_t *state(const struct flow *f, const char *status, const char *step, const char *type,
                     int64_t expires, const char *sid)
{
    char t[40];
    json_t *st =
        json_pack("{s:s,s:s,s:s,s:s,s:s}", "flow_status", status, "flow_step", step, "flow_type",
                  type, "flow_expires_at", clock_fmt_rfc3339(expires, t, sizeof t),
                  "interaction_id", f->interaction_id);
    if (sid && *sid)
        json_object_set_new(st, "browser_session_id", json_string(sid));
    if (f->app->node) { /* where the flow runs (never shown: FLOW_KEYS) */
        char nid[STORE_ID];
        node_id(f->app->node, nid);
        json_object_set_new(st, "node_id", json_string(nid));
    }
    if (strcmp(status, "IN_PROGRESS") == 0) {
        char *url = hosted_url(f);
        json_object_set_new(st, "hosted_url", json_string(url));
        xfree(url);
    }
    return st;
}

static const char *value_for(const json_t *vals, const char *kind)
{
    static const char *const ids[] = {"username", "email", "identifier", "login", "user", NULL};
    if (strcmp(kind, "password") == 0)
        return jsonx_str(vals, "password");
    if (strcmp(kind, "identifier") == 0)
        for (size_t i = 0; ids[i]; i++)
            if (jsonx_str(vals, ids[i]))
                return jsonx_str(vals, ids[i]);
    return NULL;
}

/* Waits for a person's submit until deadline (mono ms): the values
 * (f->input) into *input (owned), or the id of the choice made (f->picked)
 * into picked (then *input is NULL). The offered choices are withdrawn.
 * E_UNAVAIL on expiry or cancel. */
static int wait_input(struct flow *f, int64_t deadline, json_t **input,
                      char picked[LIM_AUTHCONN_CHOICE_BYTES])
{
    pthread_mutex_lock(&mu);
    while (!f->input && !f->picked[0] && !f->cancel && clock_mono_ms() < deadline) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&cv, &mu, &ts);
    }
    *input = f->input;
    f->input = NULL;
    memcpy(picked, f->picked, LIM_AUTHCONN_CHOICE_BYTES);
    f->picked[0] = '\0';
    json_decref(f->pending);
    f->pending = NULL;
    pthread_mutex_unlock(&mu);
    return *input || picked[0] ? 0 : E_UNAVAIL;
}

/* A new step waiting for a person: a new interaction id, the choices it
 * offers (pending, borrowed, NULL for fields), values or a choice given
 * for an earlier step dropped. Before the state is published, so that a
 * submit answering it finds it. */
static void new_interaction(struct flow *f, json_t *pending)
{
    pthread_mutex_lock(&mu);
    crypto_new_id(f->interaction_id);
    json_decref(f->pending);
    f->pending = json_incref(pending);
    f->picked[0] = '\0';
    if (f->input) {
        wipe_json_strings(f->input);
        json_decref(f->input);
        f->input = NULL;
    }
    pthread_mutex_unlock(&mu);
}

struct run {
    struct cdp_client *cc;
    char sid[128];
    char session_id[STORE_ID];
    json_t *vals;     /* clear credential values (wiped at the end) */
    char *totp;       /* clear TOTP secret or NULL (wiped) */
    const char *type; /* LOGIN | REAUTH */
    int64_t expires;  /* wall ms */
    int64_t deadline; /* mono ms */
    char url[URL_MAX + 1];
    char website_error[320];
    char profile_name[STORE_NAME];
    char domain[STORE_NAME];
    const json_t *allowed;             /* allowed_domains (borrowed) */
    const char *end_status, *end_code; /* static strings */
    char end_msg[512];
};

/* Records the terminal state, published once the session ended. */
static void finish(struct flow *f, struct run *r, const char *status, const char *code,
                   const char *msg)
{
    (void)f;
    r->end_status = status;
    r->end_code = code;
    snprintf(r->end_msg, sizeof r->end_msg, "%s", msg ? msg : "");
}

/* Publishes the terminal state of r as the flow's last word. */
static void the_end(struct flow *f, struct run *r)
{
    const char *status = r->end_status ? r->end_status : "FAILED";
    const char *code = r->end_status ? r->end_code : "internal";
    const char *msg = r->end_status ? r->end_msg : "the flow stopped";
    json_t *st = state(f, status, strcmp(status, "SUCCESS") == 0 ? "COMPLETED" : "SUBMITTING",
                       r->type, r->expires, r->session_id);
    json_t *extra = json_object();
    if (code) {
        json_object_set_new(st, "error_code", json_string(code));
        json_object_set_new(st, "error_message", json_string(msg));
    }
    if (r->website_error[0])
        json_object_set_new(st, "website_error", json_string(r->website_error));
    if (strcmp(status, "SUCCESS") == 0) {
        char t[40];
        const char *now = clock_fmt_rfc3339(clock_now_ms(), t, sizeof t);
        json_object_set_new(extra, "status", json_string("AUTHENTICATED"));
        json_object_set_new(extra, "post_login_url", json_string(r->url));
        json_object_set_new(extra, "last_login_at", json_string(now));
        json_object_set_new(extra, "last_auth_at", json_string(now));
        json_object_set_new(extra, "last_auth_check_at", json_string(now));
        json_object_set_new(extra, "last_check_ms", json_integer(clock_now_ms()));
    } else if (code && strcmp(code, "rejected") == 0) {
        json_object_set_new(extra, "status", json_string("NEEDS_AUTH"));
    }
    /* Pools loading the profile restart on the new state (saved: the
     * session ended). Before the final publish, after which f is not ours. */
    if (strcmp(status, "SUCCESS") == 0 && strcmp(r->type, "REAUTH") == 0)
        pools_flush_profile(f->app, f->org_id, f->project_id, r->profile_name);
    if (publish(f, st, extra, 1) != 0) {
        /* The connection is gone (deleted during the flow): so is its flow. */
        pthread_mutex_lock(&mu);
        f->done = 1;
        wake_watchers(f->conn_id);
        flow_drop_done(f->conn_id);
        pthread_mutex_unlock(&mu);
    }
    json_decref(st);
    json_decref(extra);
}

/* Identity providers a login may pass through without being listed in
 * allowed_domains (the hosted service's defaults). */
static const char *const SSO_DOMAINS[] = {"accounts.google.com",
                                          "login.microsoftonline.com",
                                          "login.live.com",
                                          "*.okta.com",
                                          "*.oktapreview.com",
                                          "*.auth0.com",
                                          "appleid.apple.com",
                                          "github.com",
                                          "www.facebook.com",
                                          "www.linkedin.com",
                                          "*.amazoncognito.com",
                                          "*.onelogin.com",
                                          "*.pingone.com",
                                          "*.pingidentity.com",
                                          NULL};

/* host is d, or under d ("*.x" and "x" both admit sub.x). */
static int host_matches(const char *host, const char *d)
{
    if (strncmp(d, "*.", 2) == 0)
        d += 2;
    size_t hl = strlen(host), dl = strlen(d);
    if (!dl || hl < dl)
        return 0;
    if (strcasecmp(host + hl - dl, d) != 0)
        return 0;
    return hl == dl || host[hl - dl - 1] == '.';
}

/* Whether url's host is the connection's domain, one of allowed (an array
 * of strings) or a known identity provider. */
static int host_allowed(const char *url, const char *domain, const json_t *allowed)
{
    const char *p = strstr(url, "://");
    if (!p)
        return 0;
    p += 3;
    size_t n = strcspn(p, "/?#");
    char auth[300];
    if (n >= sizeof auth)
        return 0;
    memcpy(auth, p, n);
    auth[n] = '\0';
    char *host = strrchr(auth, '@') ? strrchr(auth, '@') + 1 : auth;
    if (*host == '[') {
        char *e = strchr(host, ']');
        if (!e)
            return 0;
        *e = '\0';
        host++;
    } else {
        host[strcspn(host, ":")] = '\0';
    }
    if (host_matches(host, domain))
        return 1;
    size_t i;
    json_t *x;
    json_array_foreach(allowed, i, x) if (json_is_string(x) &&
                                          host_matches(host, json_string_value(x))) return 1;
    for (size_t k = 0; SSO_DOMAINS[k]; k++)
        if (host_matches(host, SSO_DOMAINS[k]))
            return 1;
    return 0;
}

/* The choice a snapshot's x is offered as: its id, and its entries in
 * st's choices and in the array of its kind (sign_in_options,
 * mfa_options or pending_sso_buttons); its internal record (the id, kind,
 * sub, xpath and the page's index i) into pending. */
static void offer_choice(const json_t *x, json_t *st, json_t *pending)
{
    static const struct {
        const char *kind, *type, *array;
    } kinds[] = {{"account", "account", "sign_in_options"},
                 {"method", "sign_in_method", "sign_in_options"},
                 {"mfa", "mfa_method", "mfa_options"},
                 {"sso", "sso_provider", "pending_sso_buttons"}};
    const char *kind = jsonx_str(x, "kind") ? jsonx_str(x, "kind") : "";
    const char *label = jsonx_str(x, "label") ? jsonx_str(x, "label") : "";
    const char *sub = jsonx_str(x, "sub") ? jsonx_str(x, "sub") : "";
    const char *target = jsonx_str(x, "target") ? jsonx_str(x, "target") : "";
    const char *xpath = jsonx_str(x, "xpath") ? jsonx_str(x, "xpath") : "";
    int i = (int)json_integer_value(json_object_get(x, "i"));
    size_t k = 0;
    while (k < sizeof kinds / sizeof kinds[0] && strcmp(kinds[k].kind, kind) != 0)
        k++;
    if (k == sizeof kinds / sizeof kinds[0])
        return;
    char id[48], sel[48];
    snprintf(id, sizeof id, "%s_%d", kind, i);
    snprintf(sel, sizeof sel, "[data-bd-choice=\"%d\"]", i);
    json_t *c = json_pack("{s:s,s:s,s:s,s:s}", "id", id, "label", label, "type", kinds[k].type,
                          "observed_selector", sel);
    if (strcmp(kind, "account") == 0 && *sub)
        json_object_set_new(c, "description", json_string(sub));
    json_array_append_new(json_object_get(st, "choices"), c);
    json_t *arr = json_object_get(st, kinds[k].array);
    if (!arr) {
        arr = json_array();
        json_object_set_new(st, kinds[k].array, arr);
    }
    if (strcmp(kind, "mfa") == 0) {
        json_t *o = json_pack("{s:s,s:s}", "label", label, "type", sub);
        if (*target)
            json_object_set_new(o, "target", json_string(target));
        json_array_append_new(arr, o);
    } else if (strcmp(kind, "sso") == 0) {
        json_array_append_new(
            arr, json_pack("{s:s,s:s,s:s}", "label", label, "provider", sub, "selector", xpath));
    } else {
        json_t *o = json_pack("{s:s,s:s}", "id", id, "label", label);
        if (*sub && strcmp(kind, "account") == 0)
            json_object_set_new(o, "description", json_string(sub));
        json_array_append_new(arr, o);
    }
    json_array_append_new(pending, json_pack("{s:s,s:s,s:s,s:s,s:i}", "id", id, "kind", kind, "sub",
                                             sub, "xpath", xpath, "i", i));
}

/* A step that offers choices only (an account picker, an MFA method menu,
 * sign-in options, SSO buttons): AWAITING_INPUT with them, then the one a
 * person picks is clicked. 0 once clicked; else the flow is finished. */
static int ask_choice(struct flow *f, struct run *r, const json_t *choices)
{
    json_t *st = state(f, "IN_PROGRESS", "AWAITING_INPUT", r->type, r->expires, r->session_id);
    json_t *pending = json_array();
    json_object_set_new(st, "choices", json_array());
    size_t i;
    json_t *x;
    json_array_foreach(choices, i, x) offer_choice(x, st, pending);
    new_interaction(f, pending);
    json_object_set_new(st, "interaction_id", json_string(f->interaction_id));
    (void)publish(f, st, NULL, 0);
    json_decref(st);
    json_t *input = NULL;
    char picked[LIM_AUTHCONN_CHOICE_BYTES];
    int rc = wait_input(f, r->deadline, &input, picked);
    json_decref(input); /* values for a choice step are refused by submit */
    if (rc != 0) {
        json_decref(pending);
        pthread_mutex_lock(&mu);
        int canceled = f->cancel;
        pthread_mutex_unlock(&mu);
        finish(f, r, canceled ? "CANCELED" : "EXPIRED", canceled ? "canceled" : "expired",
               canceled ? "the flow was canceled"
                        : "no one made the choice before the flow expired");
        return -1;
    }
    int idx = -1;
    json_array_foreach(pending, i, x) if (strcmp(jsonx_str(x, "id"), picked) == 0) idx =
        (int)json_integer_value(json_object_get(x, "i"));
    json_decref(pending);
    st = state(f, "IN_PROGRESS", "SUBMITTING", r->type, r->expires, r->session_id);
    (void)publish(f, st, NULL, 0);
    json_decref(st);
    if (idx < 0 || loginpage_choose(r->cc, r->sid, idx) != 0) {
        finish(f, r, "FAILED", "fill_failed", "the choice could not be clicked on the page");
        return -1;
    }
    return 0;
}

/* Walks the login steps; returns with the terminal state published. */
static void drive(struct flow *f, struct run *r)
{
    int submitted = 0;
    char prev[LOGINPAGE_SIGNATURE_BYTES] = "";
    for (int step = 0; step < LIM_AUTHCONN_STEPS; step++) {
        pthread_mutex_lock(&mu);
        int canceled = f->cancel;
        pthread_mutex_unlock(&mu);
        if (canceled) {
            finish(f, r, "CANCELED", "canceled", "the flow was canceled");
            return;
        }
        json_t *snap = NULL;
        if (loginpage_snapshot(r->cc, r->sid, 0, &snap) != 0 || !snap) {
            json_decref(snap);
            finish(f, r, "FAILED", "browser_unavailable", "the login page is not answering");
            return;
        }
        snprintf(r->url, sizeof r->url, "%s", jsonx_str(snap, "url") ? jsonx_str(snap, "url") : "");
        const char *err_text = jsonx_str(snap, "error");
        json_t *fields = json_object_get(snap, "fields");
        json_t *choices = json_object_get(snap, "choices");
        char sig[LOGINPAGE_SIGNATURE_BYTES];
        loginpage_signature(snap, sig, sizeof sig);
        /* No login field nor choice left (none at all on the first page:
         * the profile is logged in already). */
        if (json_array_size(fields) == 0 && json_array_size(choices) == 0) {
            json_decref(snap);
            finish(f, r, "SUCCESS", NULL, NULL);
            return;
        }
        if (submitted && ((err_text && *err_text) || strcmp(sig, prev) == 0)) {
            snprintf(r->website_error, sizeof r->website_error, "%s", err_text ? err_text : "");
            json_decref(snap);
            finish(f, r, "FAILED", "rejected",
                   "the site rejected the credentials (its login form is still there)");
            return;
        }
        /* Values go into pages of the connection's domains only. */
        if (!host_allowed(r->url, r->domain, r->allowed)) {
            json_decref(snap);
            finish(f, r, "FAILED", "domain_not_allowed",
                   "the login form is on a page outside the connection's domain and "
                   "allowed_domains: nothing was filled");
            return;
        }
        snprintf(prev, sizeof prev, "%s", sig);
        /* A step of choices only: a person picks, the flow clicks. */
        if (json_array_size(fields) == 0) {
            int rc = ask_choice(f, r, choices);
            json_decref(snap);
            if (rc != 0)
                return;
            submitted = 1;
            loginpage_wait_answer(r->cc, r->sid, prev);
            continue;
        }
        /* What the credential answers, what needs a person. */
        json_t *pending = json_array(), *discovered = json_array();
        size_t i;
        json_t *x;
        json_array_foreach(fields, i, x)
        {
            const char *kind = jsonx_str(x, "kind");
            int known =
                value_for(r->vals, kind) != NULL || (strcmp(kind, "totp_code") == 0 && r->totp);
            if (known)
                continue;
            char id[LOGINPAGE_FIELD_ID_BYTES], sel[48];
            loginpage_field_id(x, id);
            snprintf(sel, sizeof sel, "[data-bd-field=\"%d\"]",
                     (int)json_integer_value(json_object_get(x, "i")));
            json_array_append_new(pending,
                                  json_pack("{s:s,s:s,s:s,s:s,s:s,s:b}", "id", id, "ref", kind,
                                            "type", kind, "label", jsonx_str(x, "label"),
                                            "observed_selector", sel, "required", 1));
            const char *dtype = strcmp(kind, "code") == 0        ? "code"
                                : strcmp(kind, "totp_code") == 0 ? "totp"
                                : strcmp(kind, "password") == 0  ? "password"
                                                                 : "text";
            json_array_append_new(
                discovered, json_pack("{s:s,s:s,s:s,s:s,s:s,s:b}", "label", jsonx_str(x, "label"),
                                      "name", id, "selector", sel, "type", dtype, "placeholder",
                                      jsonx_str(x, "placeholder"), "required", 1));
        }
        json_t *input = NULL;
        if (json_array_size(pending)) {
            new_interaction(f, NULL);
            json_t *st =
                state(f, "IN_PROGRESS", "AWAITING_INPUT", r->type, r->expires, r->session_id);
            json_object_set(st, "fields", pending);
            json_object_set(st, "discovered_fields", discovered);
            (void)publish(f, st, NULL, 0);
            json_decref(st);
            char picked[LIM_AUTHCONN_CHOICE_BYTES];
            if (wait_input(f, r->deadline, &input, picked) != 0 || !input) {
                json_decref(input);
                input = NULL;
                json_decref(pending);
                json_decref(discovered);
                json_decref(snap);
                pthread_mutex_lock(&mu);
                canceled = f->cancel;
                pthread_mutex_unlock(&mu);
                finish(f, r, canceled ? "CANCELED" : "EXPIRED", canceled ? "canceled" : "expired",
                       canceled ? "the flow was canceled"
                                : "no one submitted the fields before the flow expired");
                return;
            }
        }
        json_t *st = state(f, "IN_PROGRESS", "SUBMITTING", r->type, r->expires, r->session_id);
        (void)publish(f, st, NULL, 0);
        json_decref(st);
        int first = -1, bad = 0;
        json_array_foreach(fields, i, x)
        {
            const char *kind = jsonx_str(x, "kind");
            int idx = (int)json_integer_value(json_object_get(x, "i"));
            const char *v = value_for(r->vals, kind);
            char code[9] = "";
            if (!v && strcmp(kind, "totp_code") == 0 && r->totp) {
                int64_t exp;
                if (totp_code(r->totp, clock_now_ms() / 1000, code, &exp) == 0)
                    v = code;
            }
            if (!v && input) {
                char id[LOGINPAGE_FIELD_ID_BYTES];
                loginpage_field_id(x, id);
                v = jsonx_str(input, id);
            }
            if (v)
                bad |= loginpage_fill(r->cc, r->sid, idx, v) != 0;
            OPENSSL_cleanse(code, sizeof code);
            if (first < 0)
                first = idx;
        }
        if (input) {
            wipe_json_strings(input);
            json_decref(input);
        }
        json_decref(pending);
        json_decref(discovered);
        json_decref(snap);
        if (bad || loginpage_submit(r->cc, r->sid, first) != 0) {
            finish(f, r, "FAILED", "fill_failed", "the login form could not be filled");
            return;
        }
        submitted = 1;
        /* Wait for the page to answer: a new URL, other fields or an error. */
        loginpage_wait_answer(r->cc, r->sid, prev);
    }
    finish(f, r, "FAILED", "too_many_steps", "the login did not finish within the step limit");
}

/* Opens the credential's values and secret into r (clear, wiped later). */
static int open_credential(struct flow *f, const char *name, struct run *r)
{
    r->vals = json_object();
    if (!name)
        return 0;
    struct cred_rec c;
    memset(&c, 0, sizeof c);
    int rc = store_cred_get(f->app->store, f->org_id, f->project_id, name, &c);
    json_t *d = rc == 0 ? json_loads(c.data ? c.data : "{}", 0, NULL) : NULL;
    cred_rec_clear(&c);
    if (!d)
        return E_NOTFOUND;
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(d, "values"), k, v)
    {
        char *clear = NULL;
        struct err e;
        err_init(&e);
        if (json_is_string(v) &&
            secretbox_open(credentials_key(), json_string_value(v), &clear, &e) == 0) {
            json_object_set_new(r->vals, k, json_string(clear));
            secretbox_wipe(clear);
        }
    }
    const char *t = jsonx_str(d, "totp");
    if (t) {
        struct err e;
        err_init(&e);
        if (secretbox_open(credentials_key(), t, &r->totp, &e) != 0)
            r->totp = NULL;
    }
    json_decref(d);
    return 0;
}

static void flow_main(void *arg)
{
    struct flow *f = arg;
    struct run r;
    memset(&r, 0, sizeof r);
    struct authconn_rec c;
    memset(&c, 0, sizeof c);
    json_t *d = NULL;
    int rc = store_ac_get(f->app->store, f->org_id, f->project_id, f->conn_id, &c);
    if (rc == 0)
        d = json_loads(c.data ? c.data : "{}", 0, NULL);
    json_t *flow0 = json_object_get(d, "flow");
    r.type = flow0 && strcmp(jsonx_str(flow0, "flow_type") ? jsonx_str(flow0, "flow_type") : "",
                             "REAUTH") == 0
                 ? "REAUTH"
                 : "LOGIN";
    r.expires = clock_now_ms() + LIM_AUTHCONN_FLOW_MS;
    snprintf(r.profile_name, sizeof r.profile_name, "%s", c.profile_name);
    snprintf(r.domain, sizeof r.domain, "%s", c.domain);
    r.allowed = json_object_get(d, "allowed_domains");
    r.deadline = clock_mono_ms() + LIM_AUTHCONN_FLOW_MS;
    if (d && open_credential(f, jsonx_str(json_object_get(d, "credential"), "name"), &r) != 0) {
        finish(f, &r, "FAILED", "credential_not_found",
               "the connection's credential is not in this project");
        goto out;
    }
    if (!d)
        goto out;
    json_t *st = state(f, "IN_PROGRESS", "DISCOVERING", r.type, r.expires, NULL);
    (void)publish(f, st, NULL, 0);
    json_decref(st);
    /* The session, created as POST /browsers creates one. */
    json_t *body =
        json_pack("{s:b,s:{s:s,s:b},s:i}", "headless", 1, "profile", "name", c.profile_name,
                  "save_changes", 1, "timeout_seconds", LIM_AUTHCONN_FLOW_MS / 1000);
    if (f->proxy_id[0])
        json_object_set_new(body, "proxy_id", json_string(f->proxy_id));
    else if (jsonx_str(d, "proxy_id"))
        json_object_set_new(body, "proxy_id", json_string(jsonx_str(d, "proxy_id")));
    struct session_rec srec;
    memset(&srec, 0, sizeof srec);
    struct err e;
    err_init(&e);
    rc = sess_create(f->app, f->org_id, f->project_id, f->ent, body, &srec, &e);
    json_decref(body);
    if (rc) {
        log_info("auth connection %s: its login session could not start: %s", f->conn_id,
                 e.message);
        finish(f, &r, "FAILED", "browser_unavailable", e.message);
        session_rec_clear(&srec);
        goto out;
    }
    snprintf(r.session_id, sizeof r.session_id, "%s", srec.id);
    struct live *l = sessmgr_get(f->app->sessions, srec.id);
    char ws[512];
    err_init(&e);
    int has_ws = l && live_ws_url(l, ws, sizeof ws) == 0;
    if (has_ws) {
        pthread_mutex_lock(&mu);
        snprintf(f->ws, sizeof f->ws, "%s", ws);
        pthread_mutex_unlock(&mu);
    }
    if (!has_ws || cdp_client_open(ws, LIM_AUTHCONN_STEP_MS, &r.cc, &e) != 0 ||
        cdp_page_attach_first(r.cc, LIM_AUTHCONN_STEP_MS, r.sid, sizeof r.sid, &e) != 0) {
        finish(f, &r, "FAILED", "browser_unavailable", "the login session is not answering");
    } else {
        char start[URL_MAX + 16];
        const char *lu = jsonx_str(d, "login_url");
        if (lu)
            snprintf(start, sizeof start, "%s", lu);
        else
            snprintf(start, sizeof start, "https://%s/", c.domain);
        json_t *p = json_pack("{s:s}", "url", start), *res = NULL;
        if (cdp_client_call(r.cc, r.sid, "Page.navigate", p, 1, LIM_AUTHCONN_STEP_MS, &res, &e))
            finish(f, &r, "FAILED", "navigation_failed", "the login page could not be opened");
        else
            drive(f, &r);
        json_decref(p);
        json_decref(res);
    }
    cdp_client_close(r.cc);
    pthread_mutex_lock(&mu);
    f->ws[0] = '\0';
    pthread_mutex_unlock(&mu);
    if (l)
        sessmgr_put(l);
    /* Ending the session saves the profile (save_changes). */
    (void)sess_end(f->app, srec.id, "deleted");
    session_rec_clear(&srec);
out:
    if (r.vals) {
        wipe_json_strings(r.vals);
        json_decref(r.vals);
    }
    secretbox_wipe(r.totp);
    json_decref(d);
    authconn_rec_clear(&c);
    the_end(f, &r);
}

/* ------------------------------------------------------------ handlers */

/* On a shared store an organization's flows are counted over the
 * cluster's rows, not this node's memory (which counts only the flows it
 * runs, so that N nodes would run N times the share): the flow's first
 * state st is written only while the org's flows in progress on every node
 * stay below LIM_AUTHCONN_FLOWS_PER_ORG (store ac_flow_admit, under the
 * org's row lock), and while no other node runs this connection's flow.
 * Then its event is published. E_LIMIT, E_CONFLICT, E_NOTFOUND (e set). */
static int admit(struct flow *f, const json_t *st, struct err *e)
{
    struct authconn_rec c;
    memset(&c, 0, sizeof c);
    char nid[STORE_ID] = "";
    if (f->app->node)
        node_id(f->app->node, nid);
    int64_t running = 0;
    int rc = compose(f, st, NULL, &c);
    if (rc == 0)
        rc = store_ac_flow_admit(f->app->store, &c, nid, LIM_AUTHCONN_FLOWS_PER_ORG, &running);
    authconn_rec_clear(&c);
    if (rc == 0) {
        announce(f, st, NULL, 0);
        return 0;
    }
    if (rc == E_LIMIT) {
        rc = err_set(e, E_LIMIT, "limit_exceeded",
                     "%lld login flows run for this organization across the cluster, the most "
                     "one organization may run at once is %d",
                     (long long)running, LIM_AUTHCONN_FLOWS_PER_ORG);
        e->retry_after = LIM_AUTHCONN_RETRY_AFTER_S;
    } else if (rc == E_CONFLICT) {
        rc = err_set(e, E_CONFLICT, "flow_in_progress",
                     "auth connection %s has a login flow in progress on another node", f->conn_id);
    } else if (rc == E_NOTFOUND) {
        rc = err_set(e, E_NOTFOUND, "not_found", "auth connection %s not found", f->conn_id);
    } else {
        rc = err_set(e, E_UNAVAIL, "unavailable",
                     "the login flow could not be recorded in the store");
    }
    return rc;
}

/* Starts a flow of type (LOGIN | REAUTH) for the connection c with the
 * org's entitlements ent (copied): E_CONFLICT when one runs, E_LIMIT over
 * the caps (e set). *expires: when it expires (wall ms). */
static int start_flow(struct app *app, const struct authconn_rec *c, const json_t *ent,
                      const char *type, const char *proxy_id, int64_t *expires, struct err *e)
{
    struct flow *f = xcalloc(1, sizeof *f);
    snprintf(f->proxy_id, sizeof f->proxy_id, "%s", proxy_id ? proxy_id : "");
    snprintf(f->conn_id, sizeof f->conn_id, "%s", c->id);
    snprintf(f->org_id, sizeof f->org_id, "%s", c->org_id);
    snprintf(f->project_id, sizeof f->project_id, "%s", c->project_id);
    crypto_new_id(f->id);
    crypto_new_id(f->interaction_id);
    snprintf(f->hosted, sizeof f->hosted, "%s", f->interaction_id);
    if (app->node) { /* a node that receives the hosted page sends it here */
        char nid[STORE_ID];
        node_id(app->node, nid);
        snprintf(f->hosted, sizeof f->hosted, "%s-%s", f->interaction_id, nid);
    }
    f->app = app;
    f->ent = json_deep_copy(ent);
    int rc = 0;
    pthread_mutex_lock(&mu);
    struct flow *old = flow_find(c->id);
    if (stopping)
        rc = err_set(e, E_UNAVAIL, "unavailable", "the server is stopping");
    else if (old && !old->done)
        rc = err_set(e, E_CONFLICT, "flow_in_progress",
                     "auth connection %s has a login flow in progress", c->id);
    else if (flows_running(c->org_id) >= LIM_AUTHCONN_FLOWS_PER_ORG ||
             flows_running(NULL) >= LIM_AUTHCONN_FLOWS) {
        rc = err_set(e, E_LIMIT, "limit_exceeded",
                     "%d login flows run for this organization and %d on this server, the most "
                     "one organization may run at once is %d (%d on the server)",
                     flows_running(c->org_id), flows_running(NULL), LIM_AUTHCONN_FLOWS_PER_ORG,
                     LIM_AUTHCONN_FLOWS);
        e->retry_after = LIM_AUTHCONN_RETRY_AFTER_S;
    } else {
        flow_drop_done(c->id);
        f->next = flows;
        flows = f;
    }
    struct bgrun *run = runner;
    pthread_mutex_unlock(&mu);
    if (rc) {
        flow_free(f);
        return rc;
    }
    /* The first state, written before answering so that a GET right after
     * the answer sees the flow; on a cluster it is also the flow's slot. */
    *expires = clock_now_ms() + LIM_AUTHCONN_FLOW_MS;
    json_t *st = state(f, "IN_PROGRESS", "DISCOVERING", type, *expires, NULL);
    if (store_shared(app->store))
        rc = admit(f, st, e);
    else
        (void)publish(f, st, NULL, 0);
    json_decref(st);
    if (rc) {
        pthread_mutex_lock(&mu);
        for (struct flow **p = &flows; *p; p = &(*p)->next)
            if (*p == f) {
                *p = f->next;
                break;
            }
        pthread_mutex_unlock(&mu);
        flow_free(f);
        return rc;
    }
    log_info("auth connection %s: %s flow %s starts (org %s)", c->id, type, f->id, c->org_id);
    if (bgrun_spawn(run, flow_main, f) != 0) {
        pthread_mutex_lock(&mu);
        f->done = 1;
        pthread_mutex_unlock(&mu);
        rc = err_set(e, E_UNAVAIL, "unavailable", "the login flow could not start");
    }
    return rc;
}

int authconn_login(struct req *rq, struct resp *rs)
{
    static const char *const known[] = {"browser", "proxy", "record_session", "browser_telemetry",
                                        NULL};
    rq->no_retry = 1;
    const json_t *ent = NULL;
    json_t *body;
    int rc = req_json_object(rq, 1, &body);
    if (rc)
        return rc;
    credentials_check_fields(body, known, "a login", &rq->err);
    bool_field(body, "record_session", &rq->err);
    json_t *bt = json_object_get(body, "browser_telemetry");
    if (bt && !json_is_null(bt) && !json_is_object(bt))
        err_field(&rq->err, "browser_telemetry", "must be an object or null");
    json_t *br = json_object_get(body, "browser");
    if (br && !json_is_null(br))
        err_field(&rq->err, "browser",
                  "login flows run in a headless session of their own: browser settings are "
                  "not taken");
    char proxy_id[STORE_ID] = "";
    const char *px = proxy_field(body, &rq->err);
    if (px)
        snprintf(proxy_id, sizeof proxy_id, "%s", px);
    rc = err_has_fields(&rq->err) ? E_INVALID : gate(rq, &ent);
    json_decref(body);
    if (rc == 0)
        rc = credentials_load_key(rq);
    struct authconn_rec c;
    memset(&c, 0, sizeof c);
    if (rc == 0)
        rc = load(rq, &c);
    if (rc)
        return rc;
    /* A login asked for is LOGIN; REAUTH is the health checker's. */
    const char *type = "LOGIN";
    int64_t expires = 0;
    rc = start_flow(api_app(rq), &c, ent, type, proxy_id, &expires, &rq->err);
    if (rc == 0) {
        char t[40];
        json_t *ans = json_pack("{s:s,s:s,s:s}", "id", c.id, "flow_type", type, "flow_expires_at",
                                clock_fmt_rfc3339(expires, t, sizeof t));
        pthread_mutex_lock(&mu);
        struct flow *f = flow_find(c.id);
        if (f) {
            char *url = hosted_url(f);
            json_object_set_new(ans, "hosted_url", json_string(url));
            xfree(url);
        }
        pthread_mutex_unlock(&mu);
        resp_json(rs, 200, ans);
    }
    authconn_rec_clear(&c);
    return rc;
}

/* Copies body[name], an object of field ids to values, into vals (copies:
 * the body's strings are wiped after use). 0, or E_INVALID with a detail
 * naming name. */
static int copy_values(const json_t *body, const char *name, json_t *vals, struct err *e)
{
    json_t *o = json_object_get(body, name);
    const char *k;
    json_t *v;
    int ok = json_is_object(o) && json_object_size(o) <= LIM_AUTHCONN_SUBMIT_FIELDS;
    json_object_foreach(o, k, v) ok &=
        json_is_string(v) && json_string_length(v) <= LIM_CREDENTIAL_VALUE_BYTES;
    if (!ok)
        return err_field(e, name, "must be an object of at most %d field ids to strings",
                         LIM_AUTHCONN_SUBMIT_FIELDS);
    json_object_foreach(o, k, v)
    {
        json_object_set_new(vals, k, json_string(json_string_value(v)));
    }
    return 0;
}

/* Zeroes the clear values a submit carried and releases vals (may be
 * NULL): vals, the body's fields and field_values, the raw body, unless
 * the request was forwarded to the flow's node (forwarded): the forward
 * sends the raw body from rq->body after the handler returned
 * (cluster/forward.h), and the owner wipes its own copy. */
static void wipe_submit(struct req *rq, json_t *body, json_t *vals, int forwarded)
{
    if (vals) {
        wipe_json_strings(vals);
        json_decref(vals);
    }
    wipe_json_strings(json_object_get(body, "fields"));
    wipe_json_strings(json_object_get(body, "field_values"));
    if (!forwarded && rq->body && rq->body_len)
        OPENSSL_cleanse(rq->body, rq->body_len);
}

/* The submit fields that make a choice: which offered choices each may
 * name (kinds: NULL = any), by which key of the choice, and the array of
 * the state that lists them. */
static const struct choice_field {
    const char *name, *kind1, *kind2, *key, *alt_key, *array;
} CHOICE_FIELDS[] = {
    {"selected_choice_id", NULL, NULL, "id", NULL, "choices"},
    {"sign_in_option_id", "account", "method", "id", NULL, "sign_in_options"},
    {"mfa_option_id", "mfa", NULL, "sub", "id", "mfa_options"},
    {"sso_button_selector", "sso", NULL, "xpath", NULL, "pending_sso_buttons"},
    {"sso_provider", "sso", NULL, "sub", NULL, "pending_sso_buttons"},
    {NULL, NULL, NULL, NULL, NULL, NULL},
};

static const struct choice_field *choice_field(const char *name)
{
    for (const struct choice_field *cf = CHOICE_FIELDS; cf->name; cf++)
        if (strcmp(cf->name, name) == 0)
            return cf;
    return NULL;
}

/* The id of the offered choice (pending, may be NULL) that field name's
 * value val names, into id; else a 400 naming the field: no choice of that
 * kind is offered, or val is none of them. */
static int match_choice(const json_t *pending, const char *name, const char *val,
                        char id[LIM_AUTHCONN_CHOICE_BYTES], struct err *e)
{
    const struct choice_field *cf = choice_field(name);
    int offered = 0;
    size_t i;
    json_t *x;
    json_array_foreach(pending, i, x)
    {
        const char *kind = jsonx_str(x, "kind");
        if (cf->kind1 && strcmp(kind, cf->kind1) != 0 && (!cf->kind2 || strcmp(kind, cf->kind2)))
            continue;
        offered = 1;
        const char *a = jsonx_str(x, cf->key), *b = cf->alt_key ? jsonx_str(x, cf->alt_key) : NULL;
        if ((a && strcasecmp(a, val) == 0) || (b && strcmp(b, val) == 0)) {
            snprintf(id, LIM_AUTHCONN_CHOICE_BYTES, "%s", jsonx_str(x, "id"));
            return 0;
        }
    }
    if (!offered)
        return err_field(e, name, "no choice of %s is pending: the flow's current step %s",
                         cf->array,
                         json_array_size(pending) ? "offers other choices (see choices)"
                                                  : "asks for field_values, not a choice");
    return err_field(e, name, "is not one of the pending %s (%s)", cf->array,
                     strcmp(cf->key, "sub") == 0 && strcmp(cf->name, "mfa_option_id") == 0
                         ? "give an mfa_options[].type"
                     : strcmp(cf->key, "xpath") == 0 ? "give a pending_sso_buttons[].selector"
                     : strcmp(cf->key, "sub") == 0   ? "give a pending_sso_buttons[].provider"
                                                     : "give an id the state lists");
}

/* Hands a person's answer to the running flow of conn_id (iid: the
 * interaction it answers, NULL = the current one): values (*vals, taken)
 * for a step asking for fields, or the choice field cname names with value
 * cval for a step offering choices. */
static int give_input(const char *conn_id, const char *iid, json_t **vals, const char *cname,
                      const char *cval, struct err *e)
{
    int rc = 0;
    char id[LIM_AUTHCONN_CHOICE_BYTES];
    pthread_mutex_lock(&mu);
    struct flow *f = flow_find(conn_id);
    if (!f || f->done)
        rc = err_set(e, E_CONFLICT, "no_flow_in_progress",
                     "auth connection %s has no login flow waiting for input", conn_id);
    else if (iid && strcmp(iid, f->interaction_id) != 0)
        rc = err_field(e, "interaction_id", "is not the flow's current interaction");
    else if (cname) {
        rc = match_choice(f->pending, cname, cval, id, e);
        if (rc == 0) {
            memcpy(f->picked, id, sizeof id);
            pthread_cond_broadcast(&cv);
        }
    } else if (json_array_size(f->pending))
        rc = err_field(e, "field_values",
                       "no field is pending: the flow's current step offers choices "
                       "(selected_choice_id: one of choices[].id)");
    else {
        if (f->input) {
            wipe_json_strings(f->input);
            json_decref(f->input);
        }
        f->input = *vals;
        *vals = NULL;
        pthread_cond_broadcast(&cv);
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

/* On a cluster, a request about a login flow that runs in another node's
 * memory (its events, a submit, a delete) goes to that node: what a handler returns,
 * or -1 to serve it here (the flow is here, ended, or its node is gone). */
static int flow_elsewhere(struct req *rq, struct resp *rs, const struct authconn_rec *c)
{
    pthread_mutex_lock(&mu);
    int here = flow_find(c->id) != NULL;
    pthread_mutex_unlock(&mu);
    if (here)
        return -1;
    json_t *d = json_loads(c->data ? c->data : "{}", 0, NULL);
    json_t *fl = json_object_get(d, "flow");
    const char *node = jsonx_str(fl, "node_id");
    int rc = -1;
    if (node && !is_terminal(jsonx_str(fl, "flow_status")))
        rc = api_cluster_forward_node(rq, rs, node);
    json_decref(d);
    return rc;
}

int authconn_submit(struct req *rq, struct resp *rs)
{
    static const char *const known[] = {"field_values",
                                        "fields",
                                        "interaction_id",
                                        "mfa_option_id",
                                        "selected_choice_id",
                                        "sign_in_option_id",
                                        "sso_button_selector",
                                        "sso_provider",
                                        NULL};
    rq->no_retry = 1;
    json_t *body;
    int rc = req_json_object(rq, 0, &body);
    if (rc)
        return rc;
    credentials_check_fields(body, known, "a submit", &rq->err);
    json_t *vals = json_object();
    static const char *const maps[] = {"fields", "field_values", NULL};
    for (size_t m = 0; maps[m]; m++)
        if (json_object_get(body, maps[m]))
            (void)copy_values(body, maps[m], vals, &rq->err);
    /* At most one choice, a string; a choice or values, not both. */
    const char *cname = NULL, *cval = NULL;
    for (const struct choice_field *cf = CHOICE_FIELDS; cf->name; cf++) {
        json_t *v = json_object_get(body, cf->name);
        if (!v || json_is_null(v))
            continue;
        if (!json_is_string(v) || json_string_length(v) < 1 ||
            json_string_length(v) >= LIM_AUTHCONN_CHOICE_BYTES ||
            strlen(json_string_value(v)) != json_string_length(v))
            err_field(&rq->err, cf->name, "must be a string of 1-%d bytes",
                      LIM_AUTHCONN_CHOICE_BYTES - 1);
        else if (cname)
            err_field(&rq->err, cf->name, "cannot be given with %s: make one choice", cname);
        else {
            cname = cf->name;
            cval = json_string_value(v);
        }
    }
    if (!err_has_fields(&rq->err) && cname && json_object_size(vals))
        err_field(&rq->err, cname,
                  "cannot be given with field values: a step asks for one or "
                  "the other");
    if (!err_has_fields(&rq->err) && !cname && json_object_size(vals) == 0)
        err_field(&rq->err, "field_values",
                  "is required: {field id: value} (or a choice: selected_choice_id)");
    rc = err_has_fields(&rq->err) ? E_INVALID : gate(rq, NULL);
    struct authconn_rec c;
    memset(&c, 0, sizeof c);
    if (rc == 0)
        rc = load(rq, &c); /* another org's connection: 404 */
    int fw = rc == 0 ? flow_elsewhere(rq, rs, &c) : -1;
    if (fw != -1)
        rc = fw; /* answered by the flow's node */
    else if (rc == 0)
        rc = give_input(c.id, jsonx_str(body, "interaction_id"), &vals, cname, cval, &rq->err);
    if (rc == 0 && fw == -1)
        resp_json(rs, 200, json_pack("{s:b}", "accepted", 1));
    wipe_submit(rq, body, vals, fw != -1);
    authconn_rec_clear(&c);
    json_decref(body);
    return rc;
}

int authconn_delete(struct req *rq, struct resp *rs)
{
    struct auth *a = api_auth(rq);
    struct authconn_rec c;
    int rc = open_conn(rq, &c);
    /* A flow in progress on another node is canceled there: that node
     * deletes the row (else the flow would wait for input until it
     * expires, its browser running). */
    int fw = rc == 0 ? flow_elsewhere(rq, rs, &c) : -1;
    if (fw != -1) {
        authconn_rec_clear(&c);
        return fw;
    }
    if (rc == 0) {
        pthread_mutex_lock(&mu);
        struct flow *f = flow_find(c.id);
        if (f)
            f->cancel = 1;
        if (f && f->done)
            flow_drop_done(c.id);
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
        rc = store_ac_delete(api_app(rq)->store, a->org.id, a->project.id, c.id);
        if (rc)
            err_set(&rq->err, rc, rc == E_NOTFOUND ? "not_found" : "internal",
                    "auth connection %s could not be deleted", c.id);
    }
    if (rc == 0)
        resp_empty(rs, 204);
    authconn_rec_clear(&c);
    return rc;
}

int authconn_timeline(struct req *rq, struct resp *rs)
{
    size_t limit, offset;
    struct authconn_rec c;
    int rc = req_page(rq, &limit, &offset);
    if (rc == 0)
        rc = open_conn(rq, &c);
    if (rc)
        return rc;
    json_t *d = json_loads(c.data ? c.data : "{}", 0, NULL);
    json_t *tl = json_object_get(d, "timeline");
    size_t n = json_array_size(tl);
    json_t *arr = json_array();
    /* Newest first. */
    for (size_t i = offset; i < n && json_array_size(arr) < limit; i++)
        json_array_append(arr, json_array_get(tl, n - 1 - i));
    size_t got = json_array_size(arr);
    resp_json(rs, 200, arr);
    resp_page(rs, offset, got, offset + got < n);
    json_decref(d);
    authconn_rec_clear(&c);
    return 0;
}

/* ---- GET .../events (SSE) ---- */

static long ev_read(void *ctx, char *buf, size_t cap)
{
    struct watcher *w = ctx;
    pthread_mutex_lock(&mu);
    if (w->off >= w->len) {
        xfree(w->out);
        w->out = NULL;
        w->off = w->len = 0;
        struct flow *f = flow_find(w->conn_id);
        if (w->ended || (!f && w->sent_seq)) {
            pthread_mutex_unlock(&mu);
            return -1;
        }
        if (f && f->event && f->seq > w->sent_seq) {
            w->out = xasprintf("data: %s\n\n", f->event);
            w->len = strlen(w->out);
            w->sent_seq = f->seq;
            w->ended = f->terminal && f->done;
        } else if (f && f->done) {
            w->ended = 1;
        }
    }
    long n = 0;
    if (w->off < w->len) {
        size_t k = w->len - w->off < cap ? w->len - w->off : cap;
        memcpy(buf, w->out + w->off, k);
        w->off += k;
        n = (long)k;
    } else if (w->ended) {
        n = -1;
    }
    pthread_mutex_unlock(&mu);
    return n;
}

static void ev_free(void *ctx)
{
    struct watcher *w = ctx;
    pthread_mutex_lock(&mu);
    for (struct watcher **p = &watchers; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            break;
        }
    pthread_mutex_unlock(&mu);
    xfree(w->out);
    xfree(w);
}

int authconn_events(struct req *rq, struct resp *rs)
{
    struct authconn_rec c;
    int rc = open_conn(rq, &c);
    if (rc)
        return rc;
    int fw = flow_elsewhere(rq, rs, &c);
    if (fw != -1) {
        authconn_rec_clear(&c);
        return fw;
    }
    struct watcher *w = xcalloc(1, sizeof *w);
    snprintf(w->conn_id, sizeof w->conn_id, "%s", c.id);
    snprintf(w->org_id, sizeof w->org_id, "%s", c.org_id);
    pthread_mutex_lock(&mu);
    int all = 0, mine = 0;
    for (struct watcher *x = watchers; x; x = x->next) {
        all++;
        mine += strcmp(x->org_id, c.org_id) == 0;
    }
    struct flow *f = flow_find(c.id);
    if (all >= LIM_AUTHCONN_WATCHERS || mine >= LIM_AUTHCONN_WATCHERS_PER_ORG) {
        rc = err_set(&rq->err, E_LIMIT, "limit_exceeded",
                     "this organization follows %d login flows, the most it may at once (%d)", mine,
                     LIM_AUTHCONN_WATCHERS_PER_ORG);
        rq->err.retry_after = LIM_AUTHCONN_RETRY_AFTER_S;
    } else if (!f) {
        /* No flow in memory: the stored state, once. */
        json_t *r = render(&c), *e = json_pack("{s:s}", "event", "managed_auth_state");
        static const char *const keys[] = {
            "flow_status",   "flow_step",     "flow_type",      "error_code",
            "error_message", "website_error", "post_login_url", NULL};
        for (size_t i = 0; keys[i]; i++) {
            json_t *v = json_object_get(r, keys[i]);
            if (v && !json_is_null(v))
                json_object_set(e, keys[i], v);
        }
        char t[40];
        json_object_set_new(e, "timestamp",
                            json_string(clock_fmt_rfc3339(clock_now_ms(), t, sizeof t)));
        char *text = jsonx_dump(e);
        w->out = xasprintf("data: %s\n\n", text);
        w->len = strlen(w->out);
        w->ended = 1;
        xfree(text);
        json_decref(e);
        json_decref(r);
    }
    if (rc == 0) {
        w->next = watchers;
        watchers = w;
    }
    pthread_mutex_unlock(&mu);
    authconn_rec_clear(&c);
    if (rc) {
        xfree(w);
        return rc;
    }
    struct http_stream *hs = NULL;
    resp_stream(rs, 200, "text/event-stream", ev_read, ev_free, w, &hs);
    pthread_mutex_lock(&mu);
    w->hs = hs;
    pthread_mutex_unlock(&mu);
    return 0;
}

/* ------------------------------------------------------------ health checks */

/* Opens a session on the connection's profile (nothing saved), visits the
 * page the last login landed on (else the login URL) and says whether a
 * login step shows there: login fields, or a page of choices a login flow
 * would stop at (an account picker, an MFA menu, sign-in methods, SSO
 * buttons: loginpage's snapshot lists them only on a page without login
 * fields). 1 expired, 0 logged in, -1 could not tell. The session's id
 * into sid. */
static int probe(struct app *app, const struct authconn_rec *c, const json_t *d, const json_t *ent,
                 char sid_out[STORE_ID])
{
    const char *url = jsonx_str(d, "post_login_url");
    if (!url)
        url = jsonx_str(d, "login_url");
    if (!url)
        return -1;
    json_t *body =
        json_pack("{s:b,s:{s:s,s:b},s:i}", "headless", 1, "profile", "name", c->profile_name,
                  "save_changes", 0, "timeout_seconds", LIM_AUTHCONN_STEP_MS / 1000 * 4);
    if (jsonx_str(d, "proxy_id"))
        json_object_set_new(body, "proxy_id", json_string(jsonx_str(d, "proxy_id")));
    struct session_rec srec;
    memset(&srec, 0, sizeof srec);
    struct err e;
    err_init(&e);
    int rc = sess_create(app, c->org_id, c->project_id, ent, body, &srec, &e);
    json_decref(body);
    if (rc) {
        log_info("auth connection %s: health check session: %s", c->id, e.message);
        session_rec_clear(&srec);
        return -1;
    }
    snprintf(sid_out, STORE_ID, "%s", srec.id);
    int out = -1;
    struct live *l = sessmgr_get(app->sessions, srec.id);
    struct cdp_client *cc = NULL;
    char ws[512], sid[128];
    if (l && live_ws_url(l, ws, sizeof ws) == 0 &&
        cdp_client_open(ws, LIM_AUTHCONN_STEP_MS, &cc, &e) == 0 &&
        cdp_page_attach_first(cc, LIM_AUTHCONN_STEP_MS, sid, sizeof sid, &e) == 0) {
        json_t *p = json_pack("{s:s}", "url", url), *res = NULL, *snap = NULL;
        if (cdp_client_call(cc, sid, "Page.navigate", p, 1, LIM_AUTHCONN_STEP_MS, &res, &e) == 0) {
            if (loginpage_snapshot(cc, sid, 300, &snap) == 0 && snap)
                out = json_array_size(json_object_get(snap, "fields")) > 0 ||
                      json_array_size(json_object_get(snap, "choices")) > 0;
        }
        json_decref(p);
        json_decref(res);
        json_decref(snap);
    }
    cdp_client_close(cc);
    if (l)
        sessmgr_put(l);
    (void)sess_end(app, srec.id, "deleted");
    session_rec_clear(&srec);
    return out;
}

/* One health check of c: records it on the timeline; an expired session is
 * re-authenticated when auto_reauth and a credential allow, else the
 * connection needs auth. */
static void check_one(struct app *app, struct authconn_rec *c)
{
    json_t *d = json_loads(c->data ? c->data : "{}", 0, NULL);
    struct org_rec org;
    memset(&org, 0, sizeof org);
    json_t *ent = NULL;
    struct err e;
    err_init(&e);
    if (!d || store_org_get(app->store, c->org_id, &org) != 0 ||
        api_resolve_entitlements(app->store, &org, &ent, &e) != 0 ||
        !ent_feature_on(ent, FEATURE)) {
        json_decref(d);
        json_decref(ent);
        return;
    }
    char sid[STORE_ID] = "";
    int expired = probe(app, c, d, ent, sid);
    /* Re-read: a flow or an update may have written the row meanwhile. */
    struct authconn_rec now_c;
    memset(&now_c, 0, sizeof now_c);
    json_t *d2 = NULL;
    if (store_ac_get(app->store, c->org_id, c->project_id, c->id, &now_c) == 0)
        d2 = json_loads(now_c.data ? now_c.data : "{}", 0, NULL);
    if (d2) {
        char t[40], id[STORE_ID];
        const char *now = clock_fmt_rfc3339(clock_now_ms(), t, sizeof t);
        const char *prev = jsonx_str(d2, "status") ? jsonx_str(d2, "status") : "NEEDS_AUTH";
        const char *status = expired == 1 ? "NEEDS_AUTH" : expired == 0 ? "AUTHENTICATED" : prev;
        crypto_new_id(id);
        json_t *ev = json_pack("{s:s,s:s,s:s,s:s,s:s}", "id", id, "type", "health_check", "status",
                               status, "previous_status", prev, "timestamp", now);
        if (*sid)
            json_object_set_new(ev, "browser_session_id", json_string(sid));
        json_t *tl = json_object_get(d2, "timeline");
        if (!json_is_array(tl)) {
            tl = json_array();
            json_object_set_new(d2, "timeline", tl);
        }
        json_array_append_new(tl, ev);
        while (json_array_size(tl) > LIM_AUTHCONN_TIMELINE)
            json_array_remove(tl, 0);
        json_object_set_new(d2, "status", json_string(status));
        json_object_set_new(d2, "last_auth_check_at", json_string(now));
        json_object_set_new(d2, "last_auth_at", json_string(now));
        json_object_set_new(d2, "last_check_ms", json_integer(clock_now_ms()));
        xfree(now_c.data);
        now_c.data = jsonx_dump(d2);
        now_c.updated_at = clock_now_ms();
        (void)store_ac_update(app->store, &now_c);
        log_info("auth connection %s: health check: %s", c->id, status);
        if (expired == 1 && jsonx_bool(d2, "auto_reauth", 1) &&
            jsonx_str(json_object_get(d2, "credential"), "name")) {
            int64_t exp;
            err_init(&e);
            if (start_flow(app, &now_c, ent, "REAUTH", NULL, &exp, &e) != 0)
                log_info("auth connection %s: re-authentication not started: %s", c->id, e.message);
        }
    }
    json_decref(d2);
    authconn_rec_clear(&now_c);
    org_rec_clear(&org);
    json_decref(ent);
    json_decref(d);
}

/* Whether the stored flow of d runs on another live node and has not
 * expired (a cluster; the flows of this node are in its memory). */
static int flow_runs_elsewhere(struct app *app, const json_t *d, int64_t now)
{
    const json_t *fl = json_object_get(d, "flow");
    const char *node = jsonx_str(fl, "node_id");
    const char *status = jsonx_str(fl, "flow_status");
    const char *expires = jsonx_str(fl, "flow_expires_at");
    int64_t until = 0;
    char url[512];
    struct err e;
    err_init(&e);
    return app->node && node && status && expires && strcmp(status, "IN_PROGRESS") == 0 &&
           clock_parse_rfc3339(expires, &until) == 0 && until > now &&
           node_locate(app->node, node, url, sizeof url, &e) == 1;
}

/* Whether c is due for a health check now (wall ms): not while a flow of
 * it runs, here or on another node. */
static int due(struct app *app, const struct authconn_rec *c, int64_t now)
{
    json_t *d = json_loads(c->data ? c->data : "{}", 0, NULL);
    int64_t every = json_integer_value(json_object_get(d, "health_check_interval"));
    int64_t last = json_integer_value(json_object_get(d, "last_check_ms"));
    int yes = d && jsonx_bool(d, "health_checks", 1) && every > 0 && last > 0 &&
              strcmp(jsonx_str(d, "status") ? jsonx_str(d, "status") : "", "AUTHENTICATED") == 0 &&
              now - last >= every * 1000 && !flow_runs_elsewhere(app, d, now);
    json_decref(d);
    if (yes) {
        pthread_mutex_lock(&mu);
        struct flow *f = flow_find(c->id);
        yes = !f || f->done;
        pthread_mutex_unlock(&mu);
    }
    return yes;
}

/* The connections due, one at a time. */
static int health_pass(void *arg)
{
    struct app *app = arg;
    struct page pg = {.limit = 100, .offset = 0};
    /* One check per organization per pass: a tenant with many connections
     * due delays the others by one check a pass at most. */
    json_t *checked = json_object();
    for (;;) {
        struct authconn_rec *rows = NULL;
        size_t n = 0;
        if (store_ac_list(app->store, NULL, NULL, NULL, NULL, &pg, &rows, &n) != 0)
            break;
        int stop = 0;
        for (size_t i = 0; i < n; i++) {
            pthread_mutex_lock(&mu);
            stop = stopping;
            pthread_mutex_unlock(&mu);
            if (!stop && !json_object_get(checked, rows[i].org_id) &&
                due(app, &rows[i], clock_now_ms())) {
                json_object_set_new(checked, rows[i].org_id, json_true());
                check_one(app, &rows[i]);
            }
            authconn_rec_clear(&rows[i]);
        }
        xfree(rows);
        if (!pg.has_more || stop)
            break;
        pg.offset += n;
    }
    json_decref(checked);
    return 0;
}

/* The checker's tick (every second). On a shared store one node at a time
 * makes a pass (the next one reads the checks recorded by the last). */
static void health_tick(void *arg)
{
    struct app *app = arg;
    if (store_shared(app->store))
        (void)store_run_exclusive(app->store, "authconn_health", health_pass, app);
    else
        (void)health_pass(app);
}

int authconn_start(struct app *app)
{
    struct bgrun *run = NULL;
    int rc = bgrun_start(health_tick, app, 1000, &run);
    pthread_mutex_lock(&mu);
    runner = run;
    pthread_mutex_unlock(&mu);
    return rc;
}

void authconn_stop(void)
{
    pthread_mutex_lock(&mu);
    stopping = 1;
    for (struct flow *f = flows; f; f = f->next)
        f->cancel = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    /* The flows end at their next step (their sessions end with them). */
    pthread_mutex_lock(&mu);
    struct bgrun *run = runner;
    runner = NULL;
    pthread_mutex_unlock(&mu);
    bgrun_stop(run);
    pthread_mutex_lock(&mu);
    while (flows) {
        struct flow *f = flows;
        flows = f->next;
        flow_free(f);
    }
    pthread_mutex_unlock(&mu);
}

/* ------------------------------------------------------------ hosted page */

static const char HOSTED_HTML[] =
    "<!doctype html><html><head><meta charset=utf-8><title>Finish signing in</title>"
    "<meta name=viewport content='width=device-width'><style>body{font:15px sans-serif;"
    "max-width:900px;margin:2em auto;padding:0 1em}label{display:block;margin:.5em 0}"
    "input{margin-left:.5em}img{max-width:100%;border:1px solid #ccc}#err{color:#b00}</style>"
    "</head><body><h1>Finish signing in</h1><p id=st>Loading...</p><p id=err></p>"
    "<form id=f hidden></form><img id=shot alt='the login page as the browser shows it'>"
    "<script>\n"
    "const base=location.pathname;let shown='';\n"
    "async function poll(){const r=await fetch(base+'/state');\n"
    " if(!r.ok){st.textContent='This sign-in has ended.';f.hidden=true;return}\n"
    " const s=await r.json();st.textContent=s.flow_status+' / '+s.flow_step;\n"
    " err.textContent=s.website_error||s.error_message||'';const "
    "key=JSON.stringify([s.interaction_id,s.fields||[],s.choices||[]]);\n"
    " if(s.flow_step==='AWAITING_INPUT'&&key!==shown){shown=key;f.textContent='';\n"
    "  for(const c of s.choices||[]){const b=document.createElement('button');b.type='button';\n"
    "   b.textContent=c.label+(c.description?' ('+c.description+')':'');b.style.display='block';\n"
    "   b.onclick=()=>send({selected_choice_id:c.id});f.append(b)}\n"
    "  for(const x of s.fields||[]){const l=document.createElement('label');\n"
    "   l.textContent=x.label||x.id;const i=document.createElement('input');i.name=x.id;\n"
    "   "
    "i.type=x.type==='password'?'password':'text';i.autocomplete='off';l.append(i);f.append(l)}\n"
    "  if((s.fields||[]).length){const "
    "b=document.createElement('button');b.textContent='Submit';f.append(b)}f.hidden=false}\n"
    " if(s.flow_step!=='AWAITING_INPUT')f.hidden=true;\n"
    " shot.src=base+'/screenshot?t='+Date.now();\n"
    " if(s.flow_status==='IN_PROGRESS')setTimeout(poll,1500)}\n"
    "async function send(body){f.hidden=true;shown='';\n"
    " await fetch(base+'/submit',{method:'POST',headers:{'content-type':'application/json'},\n"
    "  body:JSON.stringify(body)});setTimeout(poll,300)}\n"
    "f.onsubmit=e=>{e.preventDefault();const v={};\n"
    " for(const i of f.querySelectorAll('input'))v[i.name]=i.value;send({field_values:v})};\n"
    "poll();\n"
    "</script></body></html>\n";

/* The running flow a hosted token names: its connection id into conn (and
 * org/project); 404 for a bad MAC or a flow that ended. On a cluster, a
 * token of a flow that runs on another node (its node is in the MAC'd
 * part) sends the request there: *fw is then set and the return is the
 * forward's (api_cluster_forward_node). */
static int hosted_open(struct req *rq, struct resp *rs, char conn[STORE_ID], char org[STORE_ID],
                       char project[STORE_ID], int *fw)
{
    unsigned char key[32];
    char hid[2 * STORE_ID];
    *fw = 0;
    hosted_key(api_app(rq), key);
    int rc = liveview_token_parse(key, sizeof key, rq->params[0], conn, STORE_ID, hid, sizeof hid);
    OPENSSL_cleanse(key, sizeof key);
    int here = 0;
    if (rc == 0) {
        rc = E_NOTFOUND;
        pthread_mutex_lock(&mu);
        struct flow *f = flow_find(conn);
        here = f != NULL;
        if (f && !f->done && strcmp(f->hosted, hid) == 0) {
            snprintf(org, STORE_ID, "%s", f->org_id);
            snprintf(project, STORE_ID, "%s", f->project_id);
            rc = 0;
        }
        pthread_mutex_unlock(&mu);
        const char *node = strchr(hid, '-');
        if (rc && !here && node) {
            int out = api_cluster_forward_node(rq, rs, node + 1);
            if (out != -1) {
                *fw = 1;
                return out;
            }
        }
    }
    if (rc)
        return err_set(&rq->err, E_NOTFOUND, "not_found", "no sign-in in progress at this address");
    return 0;
}

int authconn_hosted_page(struct req *rq, struct resp *rs)
{
    char conn[STORE_ID], org[STORE_ID], project[STORE_ID];
    int fw;
    int rc = hosted_open(rq, rs, conn, org, project, &fw);
    if (rc || fw)
        return rc;
    resp_header(rs, "Cache-Control", "no-store");
    resp_header(rs, "Referrer-Policy", "no-referrer");
    resp_text(rs, 200, "text/html; charset=utf-8", xstrdup(HOSTED_HTML), sizeof HOSTED_HTML - 1);
    return 0;
}

int authconn_hosted_state(struct req *rq, struct resp *rs)
{
    char conn[STORE_ID], org[STORE_ID], project[STORE_ID];
    int fw;
    int rc = hosted_open(rq, rs, conn, org, project, &fw);
    if (fw)
        return rc;
    struct authconn_rec c;
    memset(&c, 0, sizeof c);
    if (rc == 0 && store_ac_get(api_app(rq)->store, org, project, conn, &c) != 0)
        rc = err_set(&rq->err, E_NOTFOUND, "not_found", "no sign-in in progress at this address");
    if (rc == 0) {
        json_t *r = render(&c), *out = json_object();
        static const char *const keys[] = {"domain",        "flow_status",   "flow_step",
                                           "fields",        "choices",       "interaction_id",
                                           "error_message", "website_error", NULL};
        for (size_t i = 0; keys[i]; i++)
            json_object_set(out, keys[i], json_object_get(r, keys[i]));
        json_decref(r);
        resp_header(rs, "Cache-Control", "no-store");
        resp_json(rs, 200, out);
    }
    authconn_rec_clear(&c);
    return rc;
}

int authconn_hosted_submit(struct req *rq, struct resp *rs)
{
    char conn[STORE_ID], org[STORE_ID], project[STORE_ID];
    rq->no_retry = 1;
    int fw;
    int rc = hosted_open(rq, rs, conn, org, project, &fw);
    json_t *body = NULL;
    if (rc == 0 && !fw)
        rc = req_json_object(rq, 0, &body);
    if (rc || fw)
        return rc;
    json_t *vals = json_object();
    json_t *pick = json_object_get(body, "selected_choice_id");
    if (pick && (!json_is_string(pick) || json_string_length(pick) < 1 ||
                 json_string_length(pick) >= LIM_AUTHCONN_CHOICE_BYTES))
        rc = err_field(&rq->err, "selected_choice_id", "must be a string of 1-%d bytes",
                       LIM_AUTHCONN_CHOICE_BYTES - 1);
    else if (!pick)
        rc = copy_values(body, "field_values", vals, &rq->err);
    if (rc == 0)
        rc = give_input(conn, NULL, &vals, pick ? "selected_choice_id" : NULL,
                        json_string_value(pick), &rq->err);
    if (rc == 0)
        resp_json(rs, 200, json_pack("{s:b}", "accepted", 1));
    wipe_submit(rq, body, vals, 0);
    json_decref(body);
    return rc;
}

/* A JPEG of the flow's page over a DevTools connection of its own (the
 * flow's is not shared); one at a time per flow. */
int authconn_hosted_screenshot(struct req *rq, struct resp *rs)
{
    char conn[STORE_ID], org[STORE_ID], project[STORE_ID], ws[512] = "";
    int fw;
    int rc = hosted_open(rq, rs, conn, org, project, &fw);
    if (rc || fw)
        return rc;
    pthread_mutex_lock(&mu);
    struct flow *f = flow_find(conn);
    int busy = !f || f->shooting || !f->ws[0];
    if (!busy) {
        f->shooting = 1;
        snprintf(ws, sizeof ws, "%s", f->ws);
    }
    pthread_mutex_unlock(&mu);
    if (busy) {
        rq->err.retry_after = 1;
        return err_set(&rq->err, E_LIMIT, "busy", "the sign-in's picture is not ready; retry");
    }
    struct err e;
    err_init(&e);
    struct cdp_client *cc = NULL;
    char sid[128];
    json_t *res = NULL;
    unsigned char *jpeg = NULL;
    size_t len = 0;
    if (cdp_client_open(ws, LIM_AUTHCONN_STEP_MS, &cc, &e) == 0 &&
        cdp_page_attach_first(cc, LIM_AUTHCONN_STEP_MS, sid, sizeof sid, &e) == 0) {
        json_t *p = json_pack("{s:s,s:i}", "format", "jpeg", "quality", 60);
        if (cdp_client_call(cc, sid, "Page.captureScreenshot", p, 1, LIM_AUTHCONN_STEP_MS, &res,
                            &e) == 0) {
            const char *data = jsonx_str(res, "data");
            if (data && b64_decode(data, strlen(data), &jpeg, &len) != 0)
                jpeg = NULL;
        }
        json_decref(p);
    }
    json_decref(res);
    cdp_client_close(cc);
    pthread_mutex_lock(&mu);
    f = flow_find(conn);
    if (f)
        f->shooting = 0;
    pthread_mutex_unlock(&mu);
    if (!jpeg)
        return err_set(&rq->err, E_UNAVAIL, "browser_unavailable",
                       "the sign-in's browser did not answer");
    resp_header(rs, "Cache-Control", "no-store");
    resp_text(rs, 200, "image/jpeg", (char *)jpeg, len);
    return 0;
}

/* Ends the stored flow of c (see authconn_end_orphans) when node ran it and
 * it is not running here: 1 when it did. No watcher here follows it (a
 * watcher of a flow that is not in this process gets the stored state once,
 * authconn_events), so the next one reads the terminal state. */
static int end_orphan(struct app *app, struct authconn_rec *c, const char *node, const char *code,
                      const char *reason)
{
    json_t *d = json_loads(c->data ? c->data : "{}", 0, NULL);
    json_t *fl = json_object_get(d, "flow");
    const char *owner = jsonx_str(fl, "node_id");
    int ours = json_is_object(fl) && !is_terminal(jsonx_str(fl, "flow_status")) &&
               (!node || (owner && strcmp(owner, node) == 0));
    pthread_mutex_lock(&mu);
    ours = ours && !flow_find(c->id);
    pthread_mutex_unlock(&mu);
    if (!ours) {
        json_decref(d);
        return 0;
    }
    char t[40];
    const char *now = clock_fmt_rfc3339(clock_now_ms(), t, sizeof t);
    json_object_set_new(fl, "flow_status", json_string("FAILED"));
    json_object_set_new(fl, "error_code", json_string(code));
    json_object_set_new(fl, "error_message", json_string(reason));
    json_object_del(fl, "hosted_url");
    json_t *tl = json_object_get(d, "timeline");
    size_t i;
    json_t *x;
    json_array_foreach(tl, i, x)
    {
        if (jsonx_str(x, "status") && !is_terminal(jsonx_str(x, "status"))) {
            json_object_set_new(x, "status", json_string("FAILED"));
            json_object_set_new(x, "error_code", json_string(code));
            json_object_set_new(x, "updated_at", json_string(now));
        }
    }
    xfree(c->data);
    c->data = jsonx_dump(d);
    c->updated_at = clock_now_ms();
    json_decref(d);
    if (store_ac_update(app->store, c) != 0) {
        log_error("auth connection %s: its orphaned login flow could not be ended", c->id);
        return 0;
    }
    return 1;
}

int authconn_end_orphans(struct app *app, const char *node, const char *code, const char *reason)
{
    struct page pg = {.limit = 100, .offset = 0};
    int ended = 0;
    for (;;) {
        struct authconn_rec *rows = NULL;
        size_t n = 0;
        if (store_ac_list(app->store, NULL, NULL, NULL, NULL, &pg, &rows, &n) != 0) {
            log_error("managed auth: the connections could not be listed to end orphaned flows");
            return -1;
        }
        for (size_t i = 0; i < n; i++) {
            ended += end_orphan(app, &rows[i], node, code, reason);
            authconn_rec_clear(&rows[i]);
        }
        xfree(rows);
        if (!pg.has_more)
            break;
        pg.offset += n;
    }
    if (ended)
        log_warn("managed auth: %d login flows ended: %s", ended, reason);
    return 0;
}
