/* /org/entitlements, /org/projects, /org/api_keys, /auth/context and the
 * organization's and projects' limits. */
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "api/org.h"
#include "core/clock.h"
#include "core/limits.h"
#include "core/crypto.h"
#include "core/xalloc.h"
#include "domain/entitlements.h"
#include "domain/fields.h"

int org_get_entitlements(struct req *rq, struct resp *rs)
{
    char *text;
    int rc = api_entitlements_text(rq, &text);
    if (rc)
        return rc;
    resp_text(rs, 200, "application/json", text, strlen(text));
    return 0;
}

/* {project_id} when id is set, else {}: the service omits the field of an
 * organization-wide scope. */
static json_t *scope(const char *id)
{
    return id[0] ? json_pack("{s:s}", "project_id", id) : json_object();
}

/* The caller is always an API key here (the route takes no other
 * credential): method and source api_key, the key as credential and
 * principal. credential_scope is the key's own project (none for an
 * organization-wide key); effective_scope is the project this request acts
 * on, the one X-Kernel-Project(-Id) selected or else the organization's
 * default, because every project-scoped call made the same way lands there. */
int org_auth_context(struct req *rq, struct resp *rs)
{
    const struct auth *a = api_auth(rq);
    resp_json(rs, 200,
              json_pack("{s:{s:s,s:s,s:s},s:{s:o,s:o},s:{s:s},s:{s:s,s:s}}", "authentication",
                        "method", "api_key", "source", "api_key", "credential_id", a->key.id,
                        "authorization", "credential_scope", scope(a->key.project_id),
                        "effective_scope", scope(a->project.id), "organization", "id", a->org.id,
                        "principal", "id", a->key.id, "type", "api_key"));
    return 0;
}

/* Rejects body keys outside allowed (the domain layer's rule). */
static int known_fields(struct req *rq, const json_t *body, const char *const *allowed)
{
    return fields_check_known("", body, allowed, &rq->err);
}

/* ---- projects ---- */

static int projects_on(struct req *rq)
{
    if (!api_auth(rq)->org.projects_enabled)
        return err_set(&rq->err, E_NOTFOUND, "projects_disabled",
                       "projects are disabled for this organization");
    return 0;
}

static int project_name(struct req *rq, const json_t *v, int required, char *out, size_t cap)
{
    if (!v) {
        if (required)
            return err_field(&rq->err, "name", "is required");
        return 0;
    }
    if (!json_is_string(v) || json_string_length(v) < 1 || json_string_length(v) > 255)
        return err_field(&rq->err, "name", "must be a string of 1 to 255 characters");
    snprintf(out, cap, "%s", json_string_value(v));
    return 0;
}

static int load_project(struct req *rq, struct project_rec *p)
{
    int rc = store_project_get(api_app(rq)->store, api_auth(rq)->org.id, rq->params[0], p);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "project_not_found", "project %s not found", rq->params[0]);
    return rc;
}

int org_project_create(struct req *rq, struct resp *rs)
{
    static const char *const allowed[] = {"name", NULL};
    json_t *body;
    int rc = projects_on(rq);
    if (rc || (rc = req_json_object(rq, 0, &body)))
        return rc;
    struct project_rec p;
    memset(&p, 0, sizeof p);
    rc = known_fields(rq, body, allowed);
    if (project_name(rq, json_object_get(body, "name"), 1, p.name, sizeof p.name))
        rc = E_INVALID;
    json_decref(body);
    if (rc)
        return rc;
    snprintf(p.org_id, sizeof p.org_id, "%s", api_auth(rq)->org.id);
    rc = store_project_create(api_app(rq)->store, &p, LIM_PROJECTS_PER_ORG);
    if (rc == E_LIMIT)
        return api_over_org_cap(&rq->err, "projects", LIM_PROJECTS_PER_ORG, LIM_PROJECTS_PER_ORG,
                                LIM_RECORDS_RETRY_AFTER_S);
    if (rc == E_CONFLICT)
        return err_set(&rq->err, rc, "conflict", "a project named %s already exists", p.name);
    if (rc)
        return rc;
    resp_json(rs, 200, render_project(&p));
    return 0;
}

int org_project_get(struct req *rq, struct resp *rs)
{
    struct project_rec p;
    int rc = projects_on(rq);
    if (rc || (rc = load_project(rq, &p)))
        return rc;
    resp_json(rs, 200, render_project(&p));
    return 0;
}

int org_project_update(struct req *rq, struct resp *rs)
{
    static const char *const allowed[] = {"name", "status", NULL};
    struct project_rec p;
    json_t *body;
    int rc = projects_on(rq);
    if (rc || (rc = req_json_object(rq, 0, &body)))
        return rc;
    if ((rc = load_project(rq, &p))) {
        json_decref(body);
        return rc;
    }
    rc = known_fields(rq, body, allowed);
    if (project_name(rq, json_object_get(body, "name"), 0, p.name, sizeof p.name))
        rc = E_INVALID;
    json_t *st = json_object_get(body, "status");
    if (st) {
        const char *s = json_string_value(st);
        if (!s || (strcmp(s, "active") != 0 && strcmp(s, "archived") != 0))
            rc = err_field(&rq->err, "status", "must be active or archived");
        else
            snprintf(p.status, sizeof p.status, "%s", s);
    }
    json_decref(body);
    if (rc)
        return rc;
    p.updated_at = clock_now_ms();
    rc = store_project_update(api_app(rq)->store, &p);
    if (rc == E_CONFLICT && strcmp(p.status, "archived") == 0)
        return err_set(&rq->err, rc, "conflict",
                       "the organization's last active project cannot be archived (or a "
                       "project named %s already exists)",
                       p.name);
    if (rc == E_CONFLICT)
        return err_set(&rq->err, rc, "conflict", "a project named %s already exists", p.name);
    if (rc)
        return rc;
    resp_json(rs, 200, render_project(&p));
    return 0;
}

int org_project_delete(struct req *rq, struct resp *rs)
{
    struct project_rec p;
    int rc = projects_on(rq);
    if (rc || (rc = load_project(rq, &p)))
        return rc;
    rc = store_project_delete(api_app(rq)->store, p.org_id, p.id);
    if (rc == E_CONFLICT)
        return err_set(&rq->err, rc, "conflict",
                       "the organization's last active project cannot be deleted");
    if (rc)
        return rc;
    resp_empty(rs, 204);
    return 0;
}

int org_project_list(struct req *rq, struct resp *rs)
{
    struct page pg = {0};
    int rc = projects_on(rq);
    if (rc || (rc = req_page(rq, &pg.limit, &pg.offset)))
        return rc;
    struct project_rec *rows = NULL;
    size_t n = 0;
    struct name_filter f = {req_query(rq, "name"), req_query(rq, "query"), NULL, 0, 0};
    rc = store_project_list(api_app(rq)->store, api_auth(rq)->org.id, &f, &pg, &rows, &n);
    if (rc)
        return rc;
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, render_project(&rows[i]));
    xfree(rows);
    resp_json(rs, 200, arr);
    resp_page(rs, pg.offset, n, pg.has_more);
    return 0;
}

/* ---- API keys ---- */

/* A true/false query flag (absent = false). */
static int flag_query(struct req *rq, const char *name, int *out)
{
    const char *v = req_query(rq, name);
    *out = v && (strcmp(v, "true") == 0 || strcmp(v, "1") == 0);
    if (v && !*out && strcmp(v, "false") != 0 && strcmp(v, "0") != 0)
        return err_field(&rq->err, name, "must be true or false");
    return 0;
}

static int load_key_any(struct req *rq, struct apikey_rec *k, int include_deleted)
{
    int rc = store_key_get(api_app(rq)->store, api_auth(rq)->org.id, rq->params[0], k);
    if (rc == E_NOTFOUND || (rc == 0 && k->deleted_at && !include_deleted))
        return err_set(&rq->err, E_NOTFOUND, "not_found", "API key %s not found", rq->params[0]);
    return rc;
}

static int load_key(struct req *rq, struct apikey_rec *k)
{
    int rc = store_key_get(api_app(rq)->store, api_auth(rq)->org.id, rq->params[0], k);
    if (rc == E_NOTFOUND || (rc == 0 && k->deleted_at))
        return err_set(&rq->err, E_NOTFOUND, "not_found", "API key %s not found", rq->params[0]);
    return rc;
}

int org_key_create(struct req *rq, struct resp *rs)
{
    json_t *body, *out;
    int rc = req_json_object(rq, 0, &body);
    if (rc)
        return rc;
    /* A request refused for its name creates nothing (the key would have
     * been stored, and its record leaked, while the answer was 400). */
    if (!json_object_get(body, "name"))
        rc = err_field(&rq->err, "name", "is required");
    else if (tenancy_key_create(api_app(rq)->store, api_auth(rq)->org.id, body,
                                LIM_API_KEYS_PER_ORG, &out, &rq->err))
        rc = rq->err.rc;
    json_decref(body);
    if (rc)
        return rc;
    resp_json(rs, 200, out);
    return 0;
}

int org_key_get(struct req *rq, struct resp *rs)
{
    struct apikey_rec k;
    int inc = 0;
    int rc = flag_query(rq, "include_deleted", &inc);
    if (rc == 0)
        rc = load_key_any(rq, &k, inc);
    if (rc)
        return rc;
    resp_json(rs, 200, render_key(&k));
    return 0;
}

int org_key_update(struct req *rq, struct resp *rs)
{
    static const char *const allowed[] = {"name", NULL};
    struct apikey_rec k;
    json_t *body;
    int rc = req_json_object(rq, 0, &body);
    if (rc)
        return rc;
    if ((rc = load_key(rq, &k))) {
        json_decref(body);
        return rc;
    }
    rc = known_fields(rq, body, allowed);
    if (project_name(rq, json_object_get(body, "name"), 0, k.name, sizeof k.name))
        rc = E_INVALID;
    json_decref(body);
    if (rc || (rc = store_key_update(api_app(rq)->store, &k)))
        return rc;
    resp_json(rs, 200, render_key(&k));
    return 0;
}

int org_key_delete(struct req *rq, struct resp *rs)
{
    struct apikey_rec k;
    int rc = load_key(rq, &k);
    if (rc)
        return rc;
    if (strcmp(k.id, api_auth(rq)->key.id) == 0)
        return err_set(&rq->err, E_CONFLICT, "cannot_delete_self",
                       "an API key cannot delete itself; use another key");
    k.deleted_at = clock_now_ms();
    if ((rc = store_key_update(api_app(rq)->store, &k)))
        return rc;
    resp_empty(rs, 204);
    return 0;
}

int org_key_list(struct req *rq, struct resp *rs)
{
    struct page pg = {0};
    int rc = req_page(rq, &pg.limit, &pg.offset);
    if (rc)
        return rc;
    struct apikey_rec *rows = NULL;
    size_t n = 0;
    struct name_filter f = {req_query(rq, "name"), req_query(rq, "query"), req_query(rq, "status"),
                            0, 0};
    int inc = 0;
    if (flag_query(rq, "include_deleted", &inc))
        return E_INVALID;
    if (f.status && strcmp(f.status, "active") != 0 && strcmp(f.status, "deleted") != 0 &&
        strcmp(f.status, "all") != 0)
        return err_field(&rq->err, "status", "must be active, deleted or all");
    if (inc && !f.status)
        f.status = "all";
    const char *by = req_query(rq, "sort_by"), *dir = req_query(rq, "sort_direction");
    if (by && strcmp(by, "created_at") != 0 && strcmp(by, "name") != 0 &&
        strcmp(by, "expires_at") != 0)
        return err_field(&rq->err, "sort_by", "must be created_at, name or expires_at");
    if (dir && strcmp(dir, "asc") != 0 && strcmp(dir, "desc") != 0)
        return err_field(&rq->err, "sort_direction", "must be asc or desc");
    f.sort_by = !by || strcmp(by, "created_at") == 0 ? 0 : strcmp(by, "name") == 0 ? 1 : 2;
    f.descending = dir && strcmp(dir, "desc") == 0;
    rc = store_key_list(api_app(rq)->store, api_auth(rq)->org.id, &f, &pg, &rows, &n);
    if (rc)
        return rc;
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, render_key(&rows[i]));
    xfree(rows);
    resp_json(rs, 200, arr);
    resp_page(rs, pg.offset, n, pg.has_more);
    return 0;
}

static int days(struct req *rq, const json_t *body, const char *name, long long dflt, long long min,
                long long *out)
{
    json_t *v = json_object_get(body, name);
    *out = dflt;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > 3650)
        return err_field(&rq->err, name, "must be an integer from %lld to 3650", min);
    *out = json_integer_value(v);
    return 0;
}

int org_key_rotate(struct req *rq, struct resp *rs)
{
    static const char *const allowed[] = {"days_to_expire", "expire_in_days", NULL};
    struct apikey_rec old;
    json_t *body;
    int rc = req_json_object(rq, 1, &body);
    if (rc)
        return rc;
    if ((rc = load_key(rq, &old))) {
        json_decref(body);
        return rc;
    }
    long long life, grace;
    rc = known_fields(rq, body, allowed);
    if (days(rq, body, "days_to_expire", 0, 1, &life))
        rc = E_INVALID;
    if (days(rq, body, "expire_in_days", 7, 0, &grace))
        rc = E_INVALID;
    json_decref(body);
    if (rc)
        return rc;
    int64_t now = clock_now_ms();
    char plain[CRYPTO_KEY_LEN + 1];
    crypto_new_api_key(plain);
    struct apikey_rec fresh;
    memset(&fresh, 0, sizeof fresh);
    snprintf(fresh.org_id, sizeof fresh.org_id, "%s", old.org_id);
    snprintf(fresh.project_id, sizeof fresh.project_id, "%s", old.project_id);
    snprintf(fresh.name, sizeof fresh.name, "%s", old.name);
    crypto_sha256_hex(plain, strlen(plain), fresh.key_hash);
    snprintf(fresh.masked_key, sizeof fresh.masked_key, "%.5s...%s", plain,
             plain + strlen(plain) - 4);
    fresh.expires_at = life ? now + life * 86400000LL : 0;
    /* The old key keeps working for the grace period (at least a moment, so
     * that a rotation with grace 0 still ends this request cleanly). */
    rc = store_key_rotate(api_app(rq)->store, old.org_id, old.id,
                          grace ? now + grace * 86400000LL : now + 1, &fresh, LIM_API_KEYS_PER_ORG);
    if (rc == E_LIMIT)
        return api_over_org_cap(&rq->err, "live API keys", LIM_API_KEYS_PER_ORG,
                                LIM_API_KEYS_PER_ORG, LIM_RECORDS_RETRY_AFTER_S);
    if (rc)
        return rc;
    json_t *out = render_key(&fresh);
    json_object_set_new(out, "key", json_string(plain));
    resp_json(rs, 200, out);
    return 0;
}

/* ---- limits ---- */

/* A stored cap as the service shows it: null when there is none (0). */
static json_t *cap(int64_t v)
{
    return v > 0 ? json_integer(v) : json_null();
}

/* Sets key to an entitlement limit; omitted when the plan sets none (the
 * service's OrgLimits types these fields as numbers, never null). */
static void ent_cap(json_t *out, const char *key, const json_t *ent, const char *name)
{
    int64_t v;
    if (ent_limit(ent, name, &v))
        json_object_set_new(out, key, json_integer(v));
}

/* A cap in a PATCH body: an integer from 0 (no cap) to
 * LIM_CONCURRENCY_CAP_MAX, or null (no cap). Absent: *out unchanged. */
static int cap_field(struct req *rq, const json_t *body, const char *name, int64_t *out)
{
    json_t *v = json_object_get(body, name);
    if (!v)
        return 0;
    if (json_is_null(v)) {
        *out = 0;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        json_integer_value(v) > LIM_CONCURRENCY_CAP_MAX)
        return err_field(&rq->err, name, "must be an integer from 0 (no limit) to %d",
                         LIM_CONCURRENCY_CAP_MAX);
    *out = json_integer_value(v);
    return 0;
}

/* max_concurrent_sessions is the plan's concurrent-browser limit (what
 * session admission holds the org to); the managed-auth figures are the
 * plan's, auth_connections_used the organization's managed auth connections
 * (docs/managed-auth.md). A limit the plan does not set is omitted; the
 * project default is null when unset. */
static int render_org_limits(struct req *rq, json_t **out)
{
    const json_t *ent;
    struct limits_rec l;
    *out = NULL;
    int rc = api_entitlements(rq, &ent);
    if (rc || (rc = store_limits_get(api_app(rq)->store, api_auth(rq)->org.id, "", &l)))
        return rc;
    int64_t min_interval = 0, used = 0;
    if (store_ac_count(api_app(rq)->store, api_auth(rq)->org.id, &used) != 0) {
        (void)err_set(&rq->err, E_INTERNAL, "internal", "auth connections could not be counted");
        return E_INTERNAL;
    }
    (void)ent_limit(ent, "features.managed_auth.health_check_interval_min_seconds", &min_interval);
    *out = json_pack("{s:o,s:I,s:I}", "default_project_max_concurrent_sessions",
                     cap(l.max_sessions), "auth_connections_used", (json_int_t)used,
                     "min_health_check_interval_seconds", (json_int_t)min_interval);
    ent_cap(*out, "max_concurrent_sessions", ent, "max_concurrent_browsers");
    ent_cap(*out, "max_auth_connections", ent, "features.managed_auth.max_connections");
    return 0;
}

int org_limits_get(struct req *rq, struct resp *rs)
{
    json_t *out;
    int rc = render_org_limits(rq, &out);
    if (rc)
        return rc;
    resp_json(rs, 200, out);
    return 0;
}

/* Only the project default is the organization's to set; the others come
 * from its plan (or from use). */
int org_limits_update(struct req *rq, struct resp *rs)
{
    static const char *const allowed[] = {"default_project_max_concurrent_sessions",
                                          "max_concurrent_sessions",
                                          "auth_connections_used",
                                          "max_auth_connections",
                                          "min_health_check_interval_seconds",
                                          NULL};
    json_t *body;
    int rc = req_json_object(rq, 0, &body);
    if (rc)
        return rc;
    struct limits_rec l;
    if ((rc = store_limits_get(api_app(rq)->store, api_auth(rq)->org.id, "", &l))) {
        json_decref(body);
        return rc;
    }
    rc = known_fields(rq, body, allowed);
    for (size_t i = 1; allowed[i]; i++)
        if (json_object_get(body, allowed[i]))
            rc = err_field(&rq->err, allowed[i],
                           "is read-only: set by the organization's plan (only "
                           "default_project_max_concurrent_sessions can be changed)");
    if (cap_field(rq, body, "default_project_max_concurrent_sessions", &l.max_sessions))
        rc = E_INVALID;
    json_decref(body);
    /* The default cannot exceed the organization's own limit. */
    const json_t *ent;
    int64_t org_max;
    if (rc == 0 && (rc = api_entitlements(rq, &ent)) == 0 &&
        ent_limit(ent, "max_concurrent_browsers", &org_max) && l.max_sessions > org_max)
        rc = err_field(&rq->err, "default_project_max_concurrent_sessions",
                       "must not exceed the organization's max_concurrent_sessions (%lld)",
                       (long long)org_max);
    if (rc || (rc = store_limits_put(api_app(rq)->store, &l)))
        return rc;
    return org_limits_get(rq, rs);
}

static json_t *render_project_limits(const struct limits_rec *l)
{
    return json_pack("{s:o,s:o,s:n}", "max_concurrent_sessions", cap(l->max_sessions),
                     "max_concurrent_invocations", cap(l->max_invocations), "max_pooled_sessions");
}

int org_project_limits_get(struct req *rq, struct resp *rs)
{
    struct project_rec p;
    struct limits_rec l;
    int rc = projects_on(rq);
    if (rc || (rc = load_project(rq, &p)) ||
        (rc = store_limits_get(api_app(rq)->store, p.org_id, p.id, &l)))
        return rc;
    resp_json(rs, 200, render_project_limits(&l));
    return 0;
}

/* 0 (or null) removes a cap; the project then falls under the org's
 * default. max_pooled_sessions is not the project's to set (always null). */
int org_project_limits_update(struct req *rq, struct resp *rs)
{
    static const char *const allowed[] = {"max_concurrent_sessions", "max_concurrent_invocations",
                                          "max_pooled_sessions", NULL};
    struct project_rec p;
    struct limits_rec l;
    json_t *body;
    int rc = projects_on(rq);
    if (rc || (rc = req_json_object(rq, 0, &body)))
        return rc;
    if ((rc = load_project(rq, &p)) ||
        (rc = store_limits_get(api_app(rq)->store, p.org_id, p.id, &l))) {
        json_decref(body);
        return rc;
    }
    rc = known_fields(rq, body, allowed);
    json_t *pooled = json_object_get(body, "max_pooled_sessions");
    if (pooled && !json_is_null(pooled))
        rc = err_field(&rq->err, "max_pooled_sessions",
                       "cannot be set: pooled sessions count against max_concurrent_sessions "
                       "(always null)");
    if (cap_field(rq, body, "max_concurrent_sessions", &l.max_sessions))
        rc = E_INVALID;
    if (cap_field(rq, body, "max_concurrent_invocations", &l.max_invocations))
        rc = E_INVALID;
    json_decref(body);
    if (rc || (rc = store_limits_put(api_app(rq)->store, &l)))
        return rc;
    resp_json(rs, 200, render_project_limits(&l));
    return 0;
}
