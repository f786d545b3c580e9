/*
 * pool_rules: pool create / update / acquire over browser_pool_config.
 * See pool_rules.h for the contract and docs/domain-rules.md for the
 * readings of the interface document.
 */
#include "domain/pool_rules.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "domain/chrome_policy.h"
#include "domain/fields.h"
#include "domain/netcfg.h"
#include "domain/session_rules.h"
#include "domain/telemetry_cfg.h"
#include "domain/viewport.h"

#define POOLRULES_PROXY_ID_MAX 255

static const char *const create_fields[] = {
    "size",
    "name",
    "headless",
    "stealth",
    "kiosk_mode",
    "timeout_seconds",
    "fill_rate_per_minute",
    "viewport",
    "profile",
    "refresh_on_profile_update",
    "proxy_id",
    "network",
    "telemetry",
    "chrome_policy",
    "extensions",
    "start_url",
    "region",
    NULL,
};

static const char *const update_fields[] = {
    "chrome_policy",
    "discard_all_idle",
    "extensions",
    "fill_rate_per_minute",
    "headless",
    "kiosk_mode",
    "name",
    "network",
    "profile",
    "proxy_id",
    "refresh_on_profile_update",
    "region",
    "size",
    "start_url",
    "stealth",
    "telemetry",
    "timeout_seconds",
    "viewport",
    NULL,
};

static const char *const acquire_fields[] = {
    "acquire_timeout_seconds", "name", "start_url", "tags", "telemetry", NULL,
};

/* Validators record their problems in e; where only the record matters the
 * return code is passed here (gcc does not accept a (void) cast for WUR). */
static void recorded(int rc)
{
    (void)rc;
}

/* extensions: array of {id|name} selectors, at most 20 entries. */
static int check_extensions(const json_t *v, struct err *e)
{
    char p[FIELDS_PATH_MAX];
    int rc = 0;
    if (!json_is_array(v))
        return err_field(e, "extensions", "must be an array of {id} or {name}, not %s",
                         fields_type_name(v));
    if (json_array_size(v) > POOLRULES_EXTENSIONS_MAX)
        rc = err_field(e, "extensions", "at most %d entries (got %zu)", POOLRULES_EXTENSIONS_MAX,
                       json_array_size(v));
    size_t i;
    json_t *it;
    json_array_foreach(v, i, it)
    {
        if (fields_check_selector(fields_path_index(p, sizeof p, "extensions", i), it, 0, e) < 0)
            rc = E_INVALID;
    }
    return rc;
}

/* The {id} or {name} part of a profile selector (save_changes is ignored). */
static json_t *selector_only(const json_t *sel)
{
    const json_t *id = json_object_get(sel, "id");
    if (id)
        return json_pack("{s:O}", "id", id);
    return json_pack("{s:O}", "name", json_object_get(sel, "name"));
}

/* Sets key to a new value, or removes it when val is NULL (steals val). */
static void put(json_t *cfg, const char *key, json_t *val)
{
    if (val)
        json_object_set_new(cfg, key, val);
    else
        json_object_del(cfg, key);
}

int poolrules_validate_create(const json_t *body, json_t **config, struct err *e)
{
    *config = NULL;
    size_t before = e->ndetails + e->nmore;
    if (!json_is_object(body))
        return err_field(e, "", "the body must be a JSON object");
    recorded(fields_check_known("", body, create_fields, e));
    json_t *cfg = json_object();
    const json_t *v;

    v = json_object_get(body, "size");
    if (v == NULL)
        (void)err_field(e, "size", "is required (an integer >= 1)");
    else if (fields_check_int("size", v, 1, LLONG_MAX, e) == 0)
        json_object_set(cfg, "size", (json_t *)v);

    v = json_object_get(body, "name");
    if (v && fields_check_name("name", v, FIELDS_EMPTY_OK, e) == 0 && json_string_length(v))
        json_object_set(cfg, "name", (json_t *)v);

    static const char *const bools[] = {"headless", "stealth", "kiosk_mode"};
    for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++) {
        v = json_object_get(body, bools[i]);
        if (v == NULL)
            json_object_set_new(cfg, bools[i], json_false());
        else if (fields_check_bool(bools[i], v, e) == 0)
            json_object_set(cfg, bools[i], (json_t *)v);
    }

    v = json_object_get(body, "timeout_seconds");
    if (v == NULL)
        json_object_set_new(cfg, "timeout_seconds", json_integer(POOLRULES_TIMEOUT_DEFAULT));
    else if (fields_check_int("timeout_seconds", v, POOLRULES_TIMEOUT_MIN, POOLRULES_TIMEOUT_MAX,
                              e) == 0)
        json_object_set(cfg, "timeout_seconds", (json_t *)v);

    v = json_object_get(body, "fill_rate_per_minute");
    if (v == NULL)
        json_object_set_new(cfg, "fill_rate_per_minute", json_integer(POOLRULES_FILL_RATE_DEFAULT));
    else if (fields_check_number_min("fill_rate_per_minute", v, 0, e) == 0)
        json_object_set(cfg, "fill_rate_per_minute", (json_t *)v);

    v = json_object_get(body, "viewport");
    if (v) {
        struct viewport vp;
        if (viewport_parse("viewport", v, 0, &vp, NULL, e) == 0)
            json_object_set_new(cfg, "viewport", viewport_to_json(&vp));
    }

    const json_t *prof = json_object_get(body, "profile");
    if (prof && fields_check_selector("profile", prof, SEL_IGNORE_SAVE_CHANGES, e) == 0)
        json_object_set_new(cfg, "profile", selector_only(prof));
    v = json_object_get(body, "refresh_on_profile_update");
    if (v) {
        if (fields_check_bool("refresh_on_profile_update", v, e) == 0) {
            if (prof == NULL)
                (void)err_field(e, "refresh_on_profile_update",
                                "requires a profile to be set on the pool");
            else
                json_object_set(cfg, "refresh_on_profile_update", (json_t *)v);
        }
    } else if (prof) {
        json_object_set_new(cfg, "refresh_on_profile_update", json_true());
    }

    v = json_object_get(body, "proxy_id");
    if (v && fields_check_string("proxy_id", v, 0, POOLRULES_PROXY_ID_MAX, e) == 0 &&
        json_string_length(v))
        json_object_set(cfg, "proxy_id", (json_t *)v);

    v = json_object_get(body, "network");
    if (v && netcfg_validate("network", v, 0, e) == 0 && json_object_size(v))
        json_object_set_new(cfg, "network", json_deep_copy(v));

    v = json_object_get(body, "telemetry");
    if (telcfg_validate("telemetry", v, TELCFG_POOL_CREATE, e) == 0)
        put(cfg, "telemetry", telcfg_resolve_create(v));

    v = json_object_get(body, "chrome_policy");
    if (v && chrome_policy_validate("chrome_policy", v, e) == 0 && json_object_size(v))
        json_object_set_new(cfg, "chrome_policy", json_deep_copy(v));

    v = json_object_get(body, "extensions");
    if (v && check_extensions(v, e) == 0 && json_array_size(v))
        json_object_set_new(cfg, "extensions", json_deep_copy(v));

    v = json_object_get(body, "start_url");
    if (v && fields_check_string("start_url", v, 0, POOLRULES_START_URL_MAX, e) == 0 &&
        json_string_length(v))
        json_object_set(cfg, "start_url", (json_t *)v);

    /* region: fixed at create, SESSRULES_REGION_DEFAULT when omitted (the
     * service's default); whether this node serves it is the caller's. */
    v = json_object_get(body, "region");
    if (v && (!json_is_string(v) || !sessrules_region_known(json_string_value(v))))
        (void)err_field(e, "region", "must be one of %s", SESSRULES_REGIONS_TEXT);
    else
        json_object_set_new(cfg, "region",
                            json_string(v ? json_string_value(v) : SESSRULES_REGION_DEFAULT));

    if (e->ndetails + e->nmore != before) {
        json_decref(cfg);
        return E_INVALID;
    }
    *config = cfg;
    return 0;
}

void poolrules_plan_clear(struct poolrules_plan *p)
{
    if (p == NULL)
        return;
    json_decref(p->config);
    memset(p, 0, sizeof *p);
}

/* "Re-sending the same profile reference": the same selector key and value. */
static int same_profile(const json_t *a, const json_t *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return json_equal(a, b);
}

int poolrules_plan_update(const json_t *current, const json_t *body, struct poolrules_plan *out,
                          struct err *e)
{
    memset(out, 0, sizeof *out);
    size_t before = e->ndetails + e->nmore;
    if (!json_is_object(body))
        return err_field(e, "", "the body must be a JSON object");
    recorded(fields_check_known("", body, update_fields, e));
    json_t *cfg = json_is_object(current) ? json_deep_copy(current) : json_object();
    struct poolrules_plan p;
    memset(&p, 0, sizeof p);
    const json_t *v;

    /* chrome_policy: replaces; {} clears. */
    v = json_object_get(body, "chrome_policy");
    if (v && chrome_policy_validate("chrome_policy", v, e) == 0)
        put(cfg, "chrome_policy", json_object_size(v) ? json_deep_copy(v) : NULL);

    /* discard_all_idle: only browsers idle at update time are rebuilt. */
    v = json_object_get(body, "discard_all_idle");
    if (v && fields_check_bool("discard_all_idle", v, e) == 0 && json_is_true(v))
        p.rebuild = POOLRULES_REBUILD_ALL_IDLE;

    /* extensions: replaces, [] clears, max 20. */
    v = json_object_get(body, "extensions");
    if (v && check_extensions(v, e) == 0)
        put(cfg, "extensions", json_array_size(v) ? json_deep_copy(v) : NULL);

    /* fill_rate_per_minute: >= 0, only the lower bound. */
    v = json_object_get(body, "fill_rate_per_minute");
    if (v && fields_check_number_min("fill_rate_per_minute", v, 0, e) == 0)
        json_object_set(cfg, "fill_rate_per_minute", (json_t *)v);

    static const char *const bools[] = {"headless", "kiosk_mode", "stealth"};
    for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++) {
        v = json_object_get(body, bools[i]);
        if (v && fields_check_bool(bools[i], v, e) == 0)
            json_object_set(cfg, bools[i], (json_t *)v);
    }

    /* name: pattern; "" is a no-op; cannot be cleared. */
    v = json_object_get(body, "name");
    if (v && fields_check_name("name", v, FIELDS_EMPTY_OK, e) == 0 && json_string_length(v)) {
        p.name_changed = !json_equal(v, json_object_get(cfg, "name"));
        json_object_set(cfg, "name", (json_t *)v);
    }

    /* network: replaces; {} removes; no proxy_routes on pools. */
    v = json_object_get(body, "network");
    if (v && netcfg_validate("network", v, 0, e) == 0)
        put(cfg, "network", json_object_size(v) ? json_deep_copy(v) : NULL);

    /* profile and refresh_on_profile_update. */
    const json_t *cur_prof = json_object_get(current, "profile");
    const json_t *prof = json_object_get(body, "profile");
    int prof_ok = 0, has_profile_after = cur_prof != NULL;
    if (prof && fields_check_selector("profile", prof, SEL_IGNORE_SAVE_CHANGES | SEL_EMPTY_CLEARS,
                                      e) == 0) {
        prof_ok = 1;
        if (fields_selector_is_clear(prof)) {
            p.profile_cleared = 1;
            p.profile_changed = cur_prof != NULL;
            has_profile_after = 0;
            json_object_del(cfg, "profile");
        } else {
            json_t *sel = selector_only(prof);
            p.profile_changed = !same_profile(cur_prof, sel);
            has_profile_after = 1;
            json_object_set_new(cfg, "profile", sel);
        }
    }
    v = json_object_get(body, "refresh_on_profile_update");
    if (v) {
        if (fields_check_bool("refresh_on_profile_update", v, e) == 0) {
            if (!has_profile_after)
                (void)err_field(e, "refresh_on_profile_update",
                                "requires a profile to be set on the pool");
            else
                json_object_set(cfg, "refresh_on_profile_update", (json_t *)v);
        }
    } else if (prof_ok && p.profile_cleared && cur_prof) {
        json_object_set_new(cfg, "refresh_on_profile_update", json_false());
    } else if (prof_ok && p.profile_changed) {
        json_object_set_new(cfg, "refresh_on_profile_update", json_true());
    }

    /* proxy_id: "" clears. */
    v = json_object_get(body, "proxy_id");
    if (v && fields_check_string("proxy_id", v, 0, POOLRULES_PROXY_ID_MAX, e) == 0)
        put(cfg, "proxy_id", json_string_length(v) ? json_incref((json_t *)v) : NULL);

    /* size: >= 1; the organization sum is the caller's. */
    v = json_object_get(body, "size");
    if (v && fields_check_int("size", v, 1, LLONG_MAX, e) == 0) {
        p.size_changed = !json_equal(v, json_object_get(cfg, "size"));
        json_object_set(cfg, "size", (json_t *)v);
    }

    /* start_url: max 2048; "" clears. */
    v = json_object_get(body, "start_url");
    if (v && fields_check_string("start_url", v, 0, POOLRULES_START_URL_MAX, e) == 0)
        put(cfg, "start_url", json_string_length(v) ? json_incref((json_t *)v) : NULL);

    /* region: fixed at create; the same value again is accepted. */
    v = json_object_get(body, "region");
    if (v) {
        const char *cur = json_string_value(json_object_get(current, "region"));
        if (!cur)
            cur = SESSRULES_REGION_DEFAULT;
        if (!json_is_string(v) || !sessrules_region_known(json_string_value(v)))
            (void)err_field(e, "region", "must be one of %s", SESSRULES_REGIONS_TEXT);
        else if (strcmp(json_string_value(v), cur) != 0)
            (void)err_field(e, "region", "is fixed when the pool is created (this pool is in %s)",
                            cur);
    }

    /* telemetry: omit, null or {} unchanged; export rejected. */
    v = json_object_get(body, "telemetry");
    if (telcfg_validate("telemetry", v, TELCFG_POOL_UPDATE, e) == 0 && !telcfg_request_is_noop(v))
        put(cfg, "telemetry",
            telcfg_resolve_update(TELCFG_POOL_UPDATE, json_object_get(current, "telemetry"), v,
                                  NULL));

    /* timeout_seconds: 10..259200. */
    v = json_object_get(body, "timeout_seconds");
    if (v && fields_check_int("timeout_seconds", v, POOLRULES_TIMEOUT_MIN, POOLRULES_TIMEOUT_MAX,
                              e) == 0)
        json_object_set(cfg, "timeout_seconds", (json_t *)v);

    /* viewport: replaces; cannot be cleared. */
    v = json_object_get(body, "viewport");
    if (v && json_is_null(v)) {
        (void)err_field(e, "viewport", "cannot be cleared (omit it to leave it unchanged)");
    } else if (v) {
        struct viewport vp;
        if (viewport_parse("viewport", v, 0, &vp, NULL, e) == 0)
            json_object_set_new(cfg, "viewport", viewport_to_json(&vp));
    }

    if (e->ndetails + e->nmore != before) {
        json_decref(cfg);
        return E_INVALID;
    }
    const json_t *size = json_object_get(cfg, "size");
    p.size = json_is_integer(size) ? json_integer_value(size) : 0;
    p.config = cfg;
    *out = p;
    return 0;
}

void poolrules_lease_clear(struct poolrules_lease *l)
{
    if (l == NULL)
        return;
    json_decref(l->tags);
    json_decref(l->telemetry);
    memset(l, 0, sizeof *l);
}

int poolrules_validate_acquire(const json_t *body, const json_t *pool_config,
                               struct poolrules_lease *out, struct err *e)
{
    memset(out, 0, sizeof *out);
    out->acquire_timeout_seconds = -1;
    if (body == NULL || json_is_null(body))
        return 0;
    size_t before = e->ndetails + e->nmore;
    if (!json_is_object(body))
        return err_field(e, "", "the body must be a JSON object");
    recorded(fields_check_known("", body, acquire_fields, e));
    const json_t *v;

    v = json_object_get(body, "acquire_timeout_seconds");
    if (v &&
        fields_check_int("acquire_timeout_seconds", v, 0, POOLRULES_ACQUIRE_TIMEOUT_MAX, e) == 0)
        out->acquire_timeout_seconds = json_integer_value(v);

    v = json_object_get(body, "name");
    if (v && !json_is_null(v) && fields_check_name("name", v, FIELDS_EMPTY_OK, e) == 0)
        snprintf(out->name, sizeof out->name, "%s", json_string_value(v));

    v = json_object_get(body, "tags");
    if (v && !json_is_null(v) && fields_check_tags("tags", v, e) == 0 && json_object_size(v))
        out->tags = json_deep_copy(v);

    v = json_object_get(body, "start_url");
    if (v && fields_check_string("start_url", v, 0, POOLRULES_START_URL_MAX, e) == 0)
        snprintf(out->start_url, sizeof out->start_url, "%s", json_string_value(v));

    v = json_object_get(body, "telemetry");
    if (telcfg_validate("telemetry", v, TELCFG_ACQUIRE, e) == 0 && !telcfg_request_is_noop(v)) {
        out->telemetry_given = 1;
        out->telemetry = telcfg_resolve_lease(json_object_get(pool_config, "telemetry"), v);
    }

    if (e->ndetails + e->nmore != before) {
        poolrules_lease_clear(out);
        out->acquire_timeout_seconds = -1;
        return E_INVALID;
    }
    return 0;
}

/* Refuses every key of body not in allowed (NULL-terminated). */
static void only_fields(const json_t *body, const char *const *allowed, struct err *e)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)body, k, v)
    {
        int ok = 0;
        for (size_t i = 0; allowed[i]; i++)
            ok |= strcmp(allowed[i], k) == 0;
        if (!ok)
            (void)err_field(e, k, "unknown field");
    }
}

int poolrules_validate_release(const json_t *body, char *session_id, size_t cap, int *reuse,
                               struct err *e)
{
    static const char *const allowed[] = {"session_id", "reuse", NULL};
    session_id[0] = '\0';
    *reuse = 1;
    if (!json_is_object(body))
        return err_field(e, "", "must be a JSON object");
    only_fields(body, allowed, e);
    json_t *sid = json_object_get(body, "session_id");
    json_t *r = json_object_get(body, "reuse");
    if (!json_is_string(sid) || json_string_length(sid) == 0)
        (void)err_field(e, "session_id", "is required: the id of an acquired browser");
    else if (json_string_length(sid) >= cap)
        (void)err_field(e, "session_id", "is longer than %zu bytes", cap - 1);
    else
        snprintf(session_id, cap, "%s", json_string_value(sid));
    if (r && !json_is_boolean(r))
        (void)err_field(e, "reuse", "must be a boolean");
    else if (r)
        *reuse = json_is_true(r);
    return err_has_fields(e) ? E_INVALID : 0;
}

int poolrules_validate_delete(const json_t *body, int *force, struct err *e)
{
    static const char *const allowed[] = {"force", NULL};
    *force = 0;
    if (!body)
        return 0;
    if (!json_is_object(body))
        return err_field(e, "", "must be a JSON object");
    only_fields(body, allowed, e);
    json_t *f = json_object_get(body, "force");
    if (f && !json_is_boolean(f))
        (void)err_field(e, "force", "must be a boolean");
    else
        *force = json_is_true(f);
    return err_has_fields(e) ? E_INVALID : 0;
}

/* A string at key that fits cap (with its NUL) into out, else "". */
static void config_str(const json_t *config, const char *key, char *out, size_t cap)
{
    const json_t *v = json_object_get(config, key);
    out[0] = '\0';
    if (json_is_string(v) && json_string_length(v) < cap)
        memcpy(out, json_string_value(v), json_string_length(v) + 1);
}

void poolrules_config_from_json(const json_t *config, struct poolrules_config *out)
{
    memset(out, 0, sizeof *out);
    if (!json_is_object(config))
        config = NULL;
    const json_t *v = json_object_get(config, "size");
    out->size = json_is_integer(v) && json_integer_value(v) >= 1 ? json_integer_value(v)
                                                                 : POOLRULES_SIZE_DEFAULT;
    v = json_object_get(config, "timeout_seconds");
    out->timeout_seconds = json_is_integer(v) && json_integer_value(v) >= POOLRULES_TIMEOUT_MIN &&
                                   json_integer_value(v) <= POOLRULES_TIMEOUT_MAX
                               ? json_integer_value(v)
                               : POOLRULES_TIMEOUT_DEFAULT;
    v = json_object_get(config, "fill_rate_per_minute");
    out->fill_rate_per_minute = json_is_number(v) && json_number_value(v) >= 0
                                    ? json_number_value(v)
                                    : POOLRULES_FILL_RATE_DEFAULT;
    config_str(config, "name", out->name, sizeof out->name);
    config_str(config, "start_url", out->start_url, sizeof out->start_url);
}
