/*
 * Organizations, plans and keys as the operator manages them. Shared by the
 * admin API (admin.c) and the `browserd admin` commands (main.c), so both
 * validate and answer alike.
 */
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "core/xalloc.h"
#include "domain/entitlements.h"

json_t *tenancy_plan_lookup(void *store, const char *plan_id)
{
    char *doc = NULL;
    if (store_plan_get((struct store *)store, plan_id, &doc) == 0) {
        json_t *v = json_loads(doc, JSON_REJECT_DUPLICATES, NULL);
        xfree(doc);
        if (v)
            return v;
    }
    return ent_builtin(plan_id);
}

int tenancy_plan_exists(struct store *st, const char *plan_id)
{
    json_t *v = tenancy_plan_lookup(st, plan_id);
    json_decref(v);
    return v != NULL;
}

static json_t *time_or_null(int64_t ms)
{
    char buf[40];
    return ms ? json_string(clock_fmt_rfc3339(ms, buf, sizeof buf)) : json_null();
}

json_t *render_org(struct store *st, const struct org_rec *o)
{
    char buf[40];
    json_t *ov = json_loads(o->overrides ? o->overrides : "{}", 0, NULL);
    struct project_rec p;
    json_t *dp = json_null();
    if (store_project_get(st, o->id, o->default_project_id, &p) == 0)
        dp = json_pack("{s:s,s:s}", "id", p.id, "name", p.name);
    return json_pack("{s:s,s:s,s:s,s:s,s:o,s:o,s:b,s:o,s:o,s:s}", "id", o->id, "name", o->name,
                     "plan", o->plan, "plan_status", o->plan_status, "trial_plan",
                     o->trial_plan[0] ? json_string(o->trial_plan) : json_null(), "trial_ends_at",
                     time_or_null(o->trial_ends_at), "projects_enabled", o->projects_enabled,
                     "overrides", ov ? ov : json_object(), "default_project", dp, "created_at",
                     clock_fmt_rfc3339(o->created_at, buf, sizeof buf));
}

json_t *render_project(const struct project_rec *p)
{
    char c[40], u[40];
    return json_pack("{s:s,s:s,s:s,s:s,s:s}", "id", p->id, "name", p->name, "status", p->status,
                     "created_at", clock_fmt_rfc3339(p->created_at, c, sizeof c), "updated_at",
                     clock_fmt_rfc3339(p->updated_at, u, sizeof u));
}

json_t *render_key(const struct apikey_rec *k)
{
    char c[40];
    return json_pack("{s:s,s:s,s:s,s:o,s:s,s:o,s:o}", "id", k->id, "name", k->name, "masked_key",
                     k->masked_key, "project_id",
                     k->project_id[0] ? json_string(k->project_id) : json_null(), "created_at",
                     clock_fmt_rfc3339(k->created_at, c, sizeof c), "expires_at",
                     time_or_null(k->expires_at), "deleted_at", time_or_null(k->deleted_at));
}

static int check_text(const char *path, const json_t *v, size_t max, int nullable, struct err *e)
{
    if (nullable && json_is_null(v))
        return 0;
    if (!json_is_string(v) || json_string_length(v) < 1 || json_string_length(v) > max)
        return err_field(e, path, "must be a string of 1 to %zu characters%s", max,
                         nullable ? " or null" : "");
    return 0;
}

/* Validates the admin org fields present in body and applies them to o. */
static int apply_org_fields(struct store *st, const json_t *body, struct org_rec *o, int create,
                            struct err *e)
{
    static const char *const known[] = {
        "name",      "plan", "plan_status", "trial_plan", "trial_ends_at", "projects_enabled",
        "overrides", NULL};
    int bad = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)body, k, v)
    {
        int ok = 0;
        for (size_t i = 0; known[i]; i++)
            ok |= strcmp(known[i], k) == 0;
        if (!ok)
            bad = err_field(e, k, "unknown field");
    }
    json_t *name = json_object_get(body, "name");
    if (create && !name)
        bad = err_field(e, "name", "is required");
    else if (name && !check_text("name", name, 255, 0, e))
        snprintf(o->name, sizeof o->name, "%s", json_string_value(name));
    else if (name)
        bad = E_INVALID;
    json_t *plan = json_object_get(body, "plan");
    if (plan) {
        if (!json_is_string(plan) || !tenancy_plan_exists(st, json_string_value(plan)))
            bad = err_field(e, "plan", "must name a defined plan (GET /admin/plans lists them)");
        else
            snprintf(o->plan, sizeof o->plan, "%s", json_string_value(plan));
    }
    json_t *status = json_object_get(body, "plan_status");
    if (status) {
        if (!json_is_string(status) || !ent_valid_status(json_string_value(status)))
            bad = err_field(e, "plan_status",
                            "must be one of active, trialing, past_due, canceled, unpaid, "
                            "incomplete, incomplete_expired, paused");
        else
            snprintf(o->plan_status, sizeof o->plan_status, "%s", json_string_value(status));
    }
    json_t *tp = json_object_get(body, "trial_plan");
    if (json_is_null(tp) || (json_is_string(tp) && json_string_length(tp) == 0))
        o->trial_plan[0] = '\0';
    else if (tp) {
        if (!json_is_string(tp) || !tenancy_plan_exists(st, json_string_value(tp)))
            bad = err_field(e, "trial_plan", "must name a defined plan, or be null");
        else
            snprintf(o->trial_plan, sizeof o->trial_plan, "%s", json_string_value(tp));
    }
    json_t *te = json_object_get(body, "trial_ends_at");
    if (json_is_null(te))
        o->trial_ends_at = 0;
    else if (te) {
        int64_t ms;
        if (!json_is_string(te) || clock_parse_rfc3339(json_string_value(te), &ms) != 0)
            bad = err_field(e, "trial_ends_at", "must be an RFC 3339 date-time, or null");
        else
            o->trial_ends_at = ms;
    }
    json_t *pe = json_object_get(body, "projects_enabled");
    if (pe) {
        if (!json_is_boolean(pe))
            bad = err_field(e, "projects_enabled", "must be a boolean");
        else
            o->projects_enabled = json_is_true(pe);
    }
    json_t *ov = json_object_get(body, "overrides");
    if (ov) {
        if (ent_validate_overrides("overrides", ov, e))
            bad = E_INVALID;
        else {
            xfree(o->overrides);
            o->overrides = jsonx_dump(ov);
        }
    }
    return bad ? E_INVALID : 0;
}

int tenancy_org_create(struct store *st, const json_t *body, json_t **out, struct err *e)
{
    struct org_rec o;
    memset(&o, 0, sizeof o);
    snprintf(o.plan, sizeof o.plan, "developer");
    snprintf(o.plan_status, sizeof o.plan_status, "active");
    o.projects_enabled = 1;
    o.overrides = xstrdup("{}");
    int rc = apply_org_fields(st, body, &o, 1, e);
    struct project_rec p;
    memset(&p, 0, sizeof p);
    snprintf(p.name, sizeof p.name, "default");
    if (rc == 0 && (rc = store_org_create(st, &o, &p)) != 0)
        err_set(e, rc, "internal", "the organization could not be stored");
    if (rc == 0)
        *out = render_org(st, &o);
    org_rec_clear(&o);
    return rc;
}

int tenancy_org_get(struct store *st, const char *id, json_t **out, struct err *e)
{
    struct org_rec o;
    memset(&o, 0, sizeof o);
    int rc = store_org_get(st, id, &o);
    if (rc == E_NOTFOUND)
        return err_set(e, rc, "not_found", "organization %s not found", id);
    if (rc)
        return err_set(e, rc, "internal", "the organization could not be read");
    *out = render_org(st, &o);
    org_rec_clear(&o);
    return 0;
}

int tenancy_org_update(struct store *st, const char *id, const json_t *body, json_t **out,
                       struct err *e)
{
    struct org_rec o;
    memset(&o, 0, sizeof o);
    int rc = store_org_get(st, id, &o);
    if (rc == E_NOTFOUND)
        return err_set(e, rc, "not_found", "organization %s not found", id);
    if (rc == 0)
        rc = apply_org_fields(st, body, &o, 0, e);
    if (rc == 0 && (rc = store_org_update(st, &o)) != 0)
        err_set(e, rc, "internal", "the organization could not be stored");
    if (rc == 0)
        *out = render_org(st, &o);
    org_rec_clear(&o);
    return rc;
}

static void mask(const char *key, char *out, size_t cap)
{
    size_t n = strlen(key);
    snprintf(out, cap, "%.5s...%s", key, n > 4 ? key + n - 4 : "");
}

int api_over_org_cap(struct err *e, const char *what, int64_t count, int64_t cap, int retry_s)
{
    int rc = err_set(e, E_LIMIT, "limit_exceeded",
                     "this organization has %lld %s, the most one organization may (%lld); delete "
                     "one first",
                     (long long)count, what, (long long)cap);
    e->retry_after = retry_s;
    return rc;
}

int tenancy_key_store(struct store *st, const char *org_id, const char *project_id,
                      const char *name, const char *plaintext, int64_t expires_at, int64_t cap,
                      struct apikey_rec *k)
{
    memset(k, 0, sizeof *k);
    k->expires_at = expires_at;
    snprintf(k->org_id, sizeof k->org_id, "%s", org_id);
    snprintf(k->project_id, sizeof k->project_id, "%s", project_id ? project_id : "");
    snprintf(k->name, sizeof k->name, "%s", name);
    crypto_sha256_hex(plaintext, strlen(plaintext), k->key_hash);
    mask(plaintext, k->masked_key, sizeof k->masked_key);
    return store_key_create(st, k, cap);
}

int tenancy_key_create(struct store *st, const char *org_id, const json_t *body, int64_t cap,
                       json_t **out, struct err *e)
{
    static const char *const known[] = {"name", "project_id", "days_to_expire", NULL};
    int bad = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)body, k, v)
    {
        int ok = 0;
        for (size_t i = 0; known[i]; i++)
            ok |= strcmp(known[i], k) == 0;
        if (!ok)
            bad = err_field(e, k, "unknown field");
    }
    json_t *name = json_object_get(body, "name");
    if (name && check_text("name", name, 255, 0, e))
        bad = E_INVALID;
    json_t *pid = json_object_get(body, "project_id");
    struct project_rec p;
    if (pid && !json_is_null(pid)) {
        if (!json_is_string(pid))
            bad = err_field(e, "project_id", "must be a project id or null");
        else if (store_project_get(st, org_id, json_string_value(pid), &p) != 0 ||
                 strcmp(p.status, "active") != 0)
            bad = err_field(e, "project_id", "must name an active project of the organization");
    }
    json_t *days = json_object_get(body, "days_to_expire");
    int64_t expires = 0;
    if (days && !json_is_null(days)) {
        if (!json_is_integer(days) || json_integer_value(days) < 1 ||
            json_integer_value(days) > 3650)
            bad = err_field(e, "days_to_expire", "must be an integer from 1 to 3650, or null");
        else
            expires = clock_now_ms() + json_integer_value(days) * 86400000LL;
    }
    if (bad)
        return E_INVALID;
    char plain[CRYPTO_KEY_LEN + 1];
    crypto_new_api_key(plain);
    struct apikey_rec rec;
    int rc =
        tenancy_key_store(st, org_id, pid && json_is_string(pid) ? p.id : "",
                          name ? json_string_value(name) : "api key", plain, expires, cap, &rec);
    if (rc == E_LIMIT)
        return api_over_org_cap(e, "live API keys", cap, cap, LIM_RECORDS_RETRY_AFTER_S);
    if (rc)
        return err_set(e, rc, "internal", "the API key could not be stored");
    *out = render_key(&rec);
    json_object_set_new(*out, "key", json_string(plain));
    return 0;
}
