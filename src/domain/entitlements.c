#include "domain/entitlements.h"

#include <stdio.h>
#include <string.h>

#include "core/clock.h"

const char *const ent_builtin_ids[] = {"developer", "hobbyist", "startup", "enterprise", NULL};

/* The shape of the record: every feature with its fields and types. */
enum vtype { V_BOOL, V_INT, V_INT_NULL };
struct field {
    const char *name;
    enum vtype type;
};
struct feature {
    const char *name;
    struct field fields[6];
};

static const struct feature features[] = {
    {"browser_extensions", {{"enabled", V_BOOL}, {"max_stored_per_org", V_INT_NULL}}},
    {"browser_pools", {{"enabled", V_BOOL}}},
    {"browser_replays", {{"enabled", V_BOOL}, {"retention_days", V_INT}}},
    {"credential_providers", {{"enabled", V_BOOL}}},
    {"credentials", {{"enabled", V_BOOL}}},
    {"custom_proxies", {{"enabled", V_BOOL}}},
    {"file_io", {{"enabled", V_BOOL}}},
    {"gpu", {{"enabled", V_BOOL}}},
    {"managed_auth",
     {{"enabled", V_BOOL},
      {"health_check_interval_default_seconds", V_INT},
      {"health_check_interval_min_seconds", V_INT},
      {"health_check_interval_max_seconds", V_INT},
      {"max_connections", V_INT_NULL}}},
    {"managed_proxies", {{"enabled", V_BOOL}}},
    {"profiles", {{"enabled", V_BOOL}}},
    {"proxy_bypass_hosts", {{"enabled", V_BOOL}}},
    {"search", {{"enabled", V_BOOL}}},
    {"vaults", {{"enabled", V_BOOL}}},
};
#define NFEATURES (sizeof features / sizeof features[0])

static const struct field limits[] = {
    {"default_max_concurrent_invocations_per_app", V_INT},
    {"max_concurrent_browsers", V_INT_NULL},
    {"max_concurrent_invocations", V_INT_NULL},
    {"max_vaults", V_INT_NULL},
    /* Added to the document's shape (issue 29.12): profiles an organization
     * stores, and the largest saved archive of one (bytes); null: no plan
     * limit (LIM_PROFILE_ARCHIVE_BYTES still caps an archive). */
    {"max_profiles", V_INT_NULL},
    {"max_profile_bytes", V_INT_NULL},
};
#define NLIMITS (sizeof limits / sizeof limits[0])

/* A built-in plan, as the OPERATOR.md table states it. -1 stands for null. */
struct builtin {
    const char *id;
    const char *on;  /* space-separated enabled features; "*" = all */
    const char *off; /* features switched off even under "*" */
    long long browsers, invocations, per_app, vaults;
    long long ext_max, replay_days, auth_max;
    long long profiles, profile_bytes;
};

static const struct builtin builtins[] = {
    {"developer", "browser_pools profiles custom_proxies file_io search", "", 5, 5, 5, 1, 0, 0, 0,
     10, 64LL << 20},
    {"hobbyist",
     "browser_pools profiles custom_proxies file_io search browser_extensions managed_proxies "
     "proxy_bypass_hosts browser_replays",
     "", 10, 10, 10, 5, 10, 7, 0, 50, 128LL << 20},
    {"startup", "*", "gpu", 150, 50, 25, 50, 100, 30, 100, 1000, 256LL << 20},
    {"enterprise", "*", "", -1, -1, 50, -1, -1, 90, -1, -1, -1},
};

static int word_in(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; (p = strstr(p, word)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return 1;
    return 0;
}

static json_t *int_or_null(long long v)
{
    return v < 0 ? json_null() : json_integer(v);
}

json_t *ent_builtin(const char *plan_id)
{
    const struct builtin *b = NULL;
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
        if (strcmp(builtins[i].id, plan_id) == 0)
            b = &builtins[i];
    if (!b)
        return NULL;
    json_t *f = json_object();
    for (size_t i = 0; i < NFEATURES; i++) {
        const char *name = features[i].name;
        int on = (strcmp(b->on, "*") == 0 || word_in(b->on, name)) && !word_in(b->off, name);
        json_t *o = json_pack("{s:b}", "enabled", on);
        if (strcmp(name, "browser_extensions") == 0)
            json_object_set_new(o, "max_stored_per_org", int_or_null(b->ext_max));
        else if (strcmp(name, "browser_replays") == 0)
            json_object_set_new(o, "retention_days", json_integer(b->replay_days));
        else if (strcmp(name, "managed_auth") == 0) {
            json_object_set_new(o, "health_check_interval_default_seconds", json_integer(3600));
            json_object_set_new(o, "health_check_interval_min_seconds", json_integer(300));
            json_object_set_new(o, "health_check_interval_max_seconds", json_integer(86400));
            json_object_set_new(o, "max_connections", int_or_null(b->auth_max));
        }
        json_object_set_new(f, name, o);
    }
    json_t *l = json_object();
    json_object_set_new(l, "default_max_concurrent_invocations_per_app", json_integer(b->per_app));
    json_object_set_new(l, "max_concurrent_browsers", int_or_null(b->browsers));
    json_object_set_new(l, "max_concurrent_invocations", int_or_null(b->invocations));
    json_object_set_new(l, "max_vaults", int_or_null(b->vaults));
    json_object_set_new(l, "max_profiles", int_or_null(b->profiles));
    json_object_set_new(l, "max_profile_bytes", int_or_null(b->profile_bytes));
    return json_pack("{s:o,s:o}", "features", f, "limits", l);
}

static int type_ok(enum vtype t, const json_t *v)
{
    if (t == V_BOOL)
        return json_is_boolean(v);
    if (json_is_null(v))
        return t == V_INT_NULL;
    return json_is_integer(v) && json_integer_value(v) >= 0;
}

static const char *type_rule(enum vtype t)
{
    return t == V_BOOL       ? "must be a boolean"
           : t == V_INT_NULL ? "must be an integer >= 0 or null (unlimited)"
                             : "must be an integer >= 0";
}

/* Checks v against the record's shape; every key optional. */
static int check_shape(const char *path, const json_t *v, struct err *e)
{
    char p[256];
    int bad = 0;
    if (!json_is_object(v))
        return err_field(e, path, "must be an object with optional features and limits");
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)v, k, x)
    {
        snprintf(p, sizeof p, "%s%s%s", path, *path ? "." : "", k);
        if (strcmp(k, "features") == 0) {
            if (!json_is_object(x)) {
                bad = err_field(e, p, "must be an object");
                continue;
            }
            const char *fk;
            json_t *fv;
            json_object_foreach(x, fk, fv)
            {
                const struct feature *f = NULL;
                for (size_t i = 0; i < NFEATURES; i++)
                    if (strcmp(features[i].name, fk) == 0)
                        f = &features[i];
                char fp[320];
                snprintf(fp, sizeof fp, "%s.%s", p, fk);
                if (!f) {
                    bad = err_field(e, fp, "unknown feature");
                    continue;
                }
                if (!json_is_object(fv)) {
                    bad = err_field(e, fp, "must be an object");
                    continue;
                }
                const char *ak;
                json_t *av;
                json_object_foreach(fv, ak, av)
                {
                    const struct field *fd = NULL;
                    for (size_t i = 0; f->fields[i].name; i++)
                        if (strcmp(f->fields[i].name, ak) == 0)
                            fd = &f->fields[i];
                    char ap[400];
                    snprintf(ap, sizeof ap, "%s.%s", fp, ak);
                    if (!fd)
                        bad = err_field(e, ap, "unknown field");
                    else if (!type_ok(fd->type, av))
                        bad = err_field(e, ap, "%s", type_rule(fd->type));
                }
            }
        } else if (strcmp(k, "limits") == 0) {
            if (!json_is_object(x)) {
                bad = err_field(e, p, "must be an object");
                continue;
            }
            const char *lk;
            json_t *lv;
            json_object_foreach(x, lk, lv)
            {
                const struct field *fd = NULL;
                for (size_t i = 0; i < NLIMITS; i++)
                    if (strcmp(limits[i].name, lk) == 0)
                        fd = &limits[i];
                char lp[320];
                snprintf(lp, sizeof lp, "%s.%s", p, lk);
                if (!fd)
                    bad = err_field(e, lp, "unknown limit");
                else if (!type_ok(fd->type, lv))
                    bad = err_field(e, lp, "%s", type_rule(fd->type));
            }
        } else {
            bad = err_field(e, p, "unknown field (expected features or limits)");
        }
    }
    return bad ? E_INVALID : 0;
}

int ent_validate_overrides(const char *path, const json_t *v, struct err *e)
{
    return check_shape(path, v, e);
}

/* Merges src over dst two levels deep (features.x.y, limits.y). */
static void merge(json_t *dst, const json_t *src)
{
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)src, k, x)
    {
        json_t *d = json_object_get(dst, k);
        if (strcmp(k, "features") == 0) {
            const char *fk;
            json_t *fv;
            json_object_foreach(x, fk, fv)
            {
                json_t *df = json_object_get(d, fk);
                if (df)
                    json_object_update(df, fv);
            }
        } else if (strcmp(k, "limits") == 0 && d) {
            json_object_update(d, x);
        }
    }
}

int ent_complete_plan(const char *path, const json_t *v, json_t **out, struct err *e)
{
    *out = NULL;
    if (check_shape(path, v, e))
        return E_INVALID;
    json_t *base = ent_builtin("developer");
    merge(base, v);
    *out = base;
    return 0;
}

int ent_valid_plan_id(const char *id)
{
    size_t n = strlen(id);
    if (n < 1 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9') || id[i] == '_' ||
              id[i] == '-'))
            return 0;
    return 1;
}

int ent_valid_status(const char *status)
{
    static const char *const known[] = {"active", "trialing",   "past_due",           "canceled",
                                        "unpaid", "incomplete", "incomplete_expired", "paused",
                                        NULL};
    for (size_t i = 0; known[i]; i++)
        if (strcmp(known[i], status) == 0)
            return 1;
    return 0;
}

int ent_resolve(const struct ent_org *org, int64_t now_ms, ent_plan_lookup_fn lookup, void *ctx,
                json_t **out, struct err *e)
{
    *out = NULL;
    /* Step 1: the org's plan selects the base values. */
    const char *effective = org->plan;
    /* Step 2: an unexpired trial applies the trial plan instead. */
    int trialing = org->trial_plan && org->trial_plan[0] && org->trial_ends_at > now_ms;
    if (trialing)
        effective = org->trial_plan;
    /* Step 3: canceled or unpaid orgs get developer values, and no trial. */
    if (strcmp(org->plan_status, "canceled") == 0 || strcmp(org->plan_status, "unpaid") == 0) {
        effective = "developer";
        trialing = 0;
    }
    json_t *rec = lookup(ctx, effective);
    if (!rec)
        return err_set(e, E_INTERNAL, "internal", "plan %s is not defined", effective);
    /* Step 5: overrides last, key by key. */
    if (org->overrides)
        merge(rec, org->overrides);
    /* Step 4: effective_id is the plan whose values were used. */
    char ends[40];
    json_t *plan = json_pack("{s:s,s:s,s:b,s:s}", "id", org->plan, "effective_id", effective,
                             "is_trialing", trialing, "status", org->plan_status);
    json_object_set_new(plan, "trial_ends_at",
                        trialing
                            ? json_string(clock_fmt_rfc3339(org->trial_ends_at, ends, sizeof ends))
                            : json_null());
    json_object_set_new(rec, "plan", plan);
    *out = rec;
    return 0;
}

int ent_feature_on(const json_t *ent, const char *feature)
{
    json_t *f = json_object_get(json_object_get(ent, "features"), feature);
    return json_is_true(json_object_get(f, "enabled"));
}

int ent_limit(const json_t *ent, const char *name, int64_t *out)
{
    json_t *v;
    const char *dot = strchr(name, '.');
    if (dot && strncmp(name, "features.", 9) == 0) {
        char feat[64];
        const char *dot2 = strchr(name + 9, '.');
        if (!dot2 || (size_t)(dot2 - (name + 9)) >= sizeof feat)
            return 0;
        memcpy(feat, name + 9, (size_t)(dot2 - (name + 9)));
        feat[dot2 - (name + 9)] = '\0';
        v = json_object_get(json_object_get(json_object_get(ent, "features"), feat), dot2 + 1);
    } else {
        v = json_object_get(json_object_get(ent, "limits"), name);
    }
    if (!json_is_integer(v))
        return 0;
    *out = json_integer_value(v);
    return 1;
}
