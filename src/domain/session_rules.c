/*
 * session_rules: POST /browsers validation and PATCH /browsers planning.
 * See session_rules.h for the contract and docs/domain-rules.md for the
 * readings of the interface document.
 */
#include "domain/session_rules.h"

#include <stdio.h>
#include <string.h>

#include "domain/chrome_policy.h"
#include "domain/fields.h"
#include "domain/netcfg.h"
#include "domain/telemetry_cfg.h"

static const char *const regions[] = {"us-east", "eu-west", "ap-southeast", NULL};
static const char *const memories[] = {"1GiB", "2GiB", "6GiB", "8GiB", "16GiB", NULL};

static const char *const create_fields[] = {
    "headless",  "stealth",       "timeout_seconds", "name",     "tags",
    "viewport",  "profile",       "proxy",           "proxy_id", "network",
    "telemetry", "chrome_policy", "extensions",      "gpu",      "kiosk_mode",
    "region",    "memory",        "start_url",       "vaults",   "disable_default_proxy",
    NULL,
};

static const char *const update_fields[] = {
    "disable_default_proxy",
    "name",
    "profile",
    "proxy",
    "proxy_id",
    "start_url",
    "tags",
    "telemetry",
    "viewport",
    NULL,
};

/* Copies a validated JSON string into a fixed buffer (bounded by design). */
static void copy_str(char *dst, size_t cap, const json_t *v)
{
    snprintf(dst, cap, "%s", json_is_string(v) ? json_string_value(v) : "");
}

/* Validators record their problems in e; where only the record matters the
 * return code is passed here (gcc does not accept a (void) cast for WUR). */
static void recorded(int rc)
{
    (void)rc;
}

static int in_list(const char *s, const char *const *list)
{
    for (size_t i = 0; list[i]; i++)
        if (strcmp(list[i], s) == 0)
            return 1;
    return 0;
}

int sessrules_region_known(const char *region)
{
    return in_list(region, regions);
}

/* An enum string field: one of list, described by what. */
static void check_enum(const char *path, const json_t *v, const char *const *list, const char *what,
                       struct err *e)
{
    if (!json_is_string(v) || !in_list(json_string_value(v), list))
        (void)err_field(e, path, "must be one of %s", what);
}

/* An array of {id|name} selectors (extensions) or vault references. */
static void check_ref_array(const char *path, const json_t *v, size_t max, int vaults,
                            struct err *e)
{
    char p[FIELDS_PATH_MAX];
    if (!json_is_array(v)) {
        (void)err_field(e, path, "must be an array, not %s", fields_type_name(v));
        return;
    }
    if (max && json_array_size(v) > max)
        (void)err_field(e, path, "at most %zu entries (got %zu)", max, json_array_size(v));
    size_t i;
    json_t *it;
    json_array_foreach(v, i, it)
    {
        fields_path_index(p, sizeof p, path, i);
        if (vaults)
            recorded(fields_check_vault_ref(p, it, e));
        else
            recorded(fields_check_selector(p, it, 0, e));
    }
}

/* A profile selector without its save_changes flag (owned). */
static json_t *selector_only(const json_t *sel)
{
    json_t *out = json_object();
    const json_t *id = json_object_get(sel, "id");
    const json_t *name = json_object_get(sel, "name");
    if (id)
        json_object_set(out, "id", (json_t *)id);
    else if (name)
        json_object_set(out, "name", (json_t *)name);
    return out;
}

void sessrules_create_clear(struct sessrules_create *c)
{
    if (c == NULL)
        return;
    json_decref(c->tags);
    json_decref(c->profile);
    json_decref(c->network);
    json_decref(c->telemetry);
    json_decref(c->telemetry_destination);
    json_decref(c->chrome_policy);
    json_decref(c->extensions);
    json_decref(c->vaults);
    memset(c, 0, sizeof *c);
}

int sessrules_validate_create(const json_t *body, struct sessrules_create *out, struct err *e)
{
    return sessrules_validate_create_min(body, SESSRULES_TIMEOUT_MIN, out, e);
}

int sessrules_validate_create_min(const json_t *body, long long min_timeout_s,
                                  struct sessrules_create *out, struct err *e)
{
    if (min_timeout_s < SESSRULES_TIMEOUT_FLOOR || min_timeout_s > SESSRULES_TIMEOUT_MIN)
        min_timeout_s = SESSRULES_TIMEOUT_MIN;
    memset(out, 0, sizeof *out);
    size_t before = e->ndetails + e->nmore;
    if (!json_is_object(body))
        return err_field(e, "", "the body must be a JSON object");
    recorded(fields_check_known("", body, create_fields, e));

    const json_t *v;
    if ((v = json_object_get(body, "headless")) && fields_check_bool("headless", v, e) == 0)
        out->headless = json_is_true(v);
    if ((v = json_object_get(body, "stealth")) && fields_check_bool("stealth", v, e) == 0)
        out->stealth = json_is_true(v);
    if ((v = json_object_get(body, "kiosk_mode")) && fields_check_bool("kiosk_mode", v, e) == 0)
        out->kiosk_mode = json_is_true(v);
    if ((v = json_object_get(body, "gpu")) && fields_check_bool("gpu", v, e) == 0) {
        out->gpu = json_is_true(v);
        if (out->gpu && out->headless)
            (void)err_field(e, "gpu",
                            "GPU acceleration is for headful sessions only "
                            "(headless is true)");
    }
    out->timeout_seconds = SESSRULES_TIMEOUT_DEFAULT;
    if ((v = json_object_get(body, "timeout_seconds")) &&
        fields_check_int("timeout_seconds", v, min_timeout_s, SESSRULES_TIMEOUT_MAX, e) == 0)
        out->timeout_seconds = json_integer_value(v);

    snprintf(out->region, sizeof out->region, "%s", SESSRULES_REGION_DEFAULT);
    if ((v = json_object_get(body, "region"))) {
        check_enum("region", v, regions, SESSRULES_REGIONS_TEXT, e);
        copy_str(out->region, sizeof out->region, v);
    }
    snprintf(out->memory, sizeof out->memory, "%s", SESSRULES_MEMORY_DEFAULT);
    if ((v = json_object_get(body, "memory"))) {
        check_enum("memory", v, memories, "1GiB, 2GiB, 6GiB, 8GiB, 16GiB", e);
        copy_str(out->memory, sizeof out->memory, v);
    }

    v = json_object_get(body, "name");
    if (v && !json_is_null(v) && fields_check_name("name", v, 0, e) == 0)
        copy_str(out->name, sizeof out->name, v);

    v = json_object_get(body, "tags");
    if (v && !json_is_null(v) && fields_check_tags("tags", v, e) == 0 && json_object_size(v))
        out->tags = json_deep_copy(v);

    if ((v = json_object_get(body, "viewport"))) {
        if (viewport_parse("viewport", v, 0, &out->viewport, NULL, e) == 0)
            out->viewport_given = 1;
    }
    if (out->viewport_given)
        viewport_fill_rate(&out->viewport, out->gpu);
    else
        viewport_default(out->gpu, &out->viewport);

    if ((v = json_object_get(body, "profile")) &&
        fields_check_selector("profile", v, SEL_SAVE_CHANGES, e) == 0) {
        out->profile = selector_only(v);
        out->profile_save_changes = json_is_true(json_object_get(v, "save_changes"));
    }

    if (proxysel_parse(body, 0, &out->proxy, e) != 0)
        out->proxy.kind = PROXYSEL_DEFAULT;

    if ((v = json_object_get(body, "network")) && netcfg_validate("network", v, 1, e) == 0)
        out->network = json_deep_copy(v);

    v = json_object_get(body, "telemetry");
    if (telcfg_validate("telemetry", v, TELCFG_SESSION_CREATE, e) == 0) {
        out->telemetry = telcfg_resolve_create(v);
        const json_t *dest = telcfg_destination(v);
        if (dest && out->telemetry)
            out->telemetry_destination = json_deep_copy(dest);
    }

    if ((v = json_object_get(body, "chrome_policy")) &&
        chrome_policy_validate("chrome_policy", v, e) == 0)
        out->chrome_policy = json_deep_copy(v);

    if ((v = json_object_get(body, "extensions"))) {
        check_ref_array("extensions", v, SESSRULES_EXTENSIONS_MAX, 0, e);
        if (json_is_array(v) && json_array_size(v))
            out->extensions = json_deep_copy(v);
    }
    if ((v = json_object_get(body, "vaults"))) {
        check_ref_array("vaults", v, 0, 1, e);
        if (json_is_array(v) && json_array_size(v))
            out->vaults = json_deep_copy(v);
    }
    if ((v = json_object_get(body, "start_url")) &&
        fields_check_string("start_url", v, 0, SESSRULES_START_URL_MAX, e) == 0)
        copy_str(out->start_url, sizeof out->start_url, v);

    if (e->ndetails + e->nmore != before) {
        sessrules_create_clear(out);
        return E_INVALID;
    }
    return 0;
}

void sessrules_state_clear(struct sessrules_state *s)
{
    if (s == NULL)
        return;
    json_decref(s->tags);
    json_decref(s->telemetry);
    json_decref(s->telemetry_export);
    memset(s, 0, sizeof *s);
}

static json_t *copy_or_null(const json_t *v)
{
    return v ? json_deep_copy(v) : NULL;
}

void sessrules_state_copy(struct sessrules_state *dst, const struct sessrules_state *src)
{
    *dst = *src;
    dst->tags = copy_or_null(src->tags);
    dst->telemetry = copy_or_null(src->telemetry);
    dst->telemetry_export = copy_or_null(src->telemetry_export);
}

void sessrules_plan_clear(struct sessrules_plan *p)
{
    if (p == NULL)
        return;
    sessrules_state_clear(&p->next);
    json_decref(p->profile);
    memset(p, 0, sizeof *p);
}

int sessrules_plan_has(const struct sessrules_plan *plan, enum sessrules_action a)
{
    for (size_t i = 0; i < plan->nactions; i++)
        if (plan->actions[i] == a)
            return 1;
    return 0;
}

/* Equal JSON values, NULL and {} both meaning "none" for tags. */
static int same_tags(const json_t *a, const json_t *b)
{
    size_t na = a ? json_object_size(a) : 0, nb = b ? json_object_size(b) : 0;
    if (na == 0 || nb == 0)
        return na == nb;
    return json_equal(a, b);
}

static int same_json(const json_t *a, const json_t *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return json_equal(a, b);
}

static int same_viewport(const struct viewport *a, const struct viewport *b)
{
    return a->width == b->width && a->height == b->height && a->refresh_rate == b->refresh_rate;
}

int sessrules_plan_update(const struct sessrules_state *cur, const json_t *body,
                          struct sessrules_plan *out, struct err *e)
{
    memset(out, 0, sizeof *out);
    size_t before = e->ndetails + e->nmore;
    if (!json_is_object(body))
        return err_field(e, "", "the body must be a JSON object");
    recorded(fields_check_known("", body, update_fields, e));

    struct sessrules_plan p;
    memset(&p, 0, sizeof p);
    sessrules_state_copy(&p.next, cur);
    int want_rename = 0, want_retag = 0, want_profile = 0, want_resize = 0, want_nav = 0;
    int want_egress = 0, want_tel = 0;
    const json_t *v;

    /* name: omit/null unchanged; "" clears; else the name pattern. */
    v = json_object_get(body, "name");
    if (v && !json_is_null(v) && fields_check_name("name", v, FIELDS_EMPTY_OK, e) == 0) {
        copy_str(p.next.name, sizeof p.next.name, v);
        if (strcmp(p.next.name, cur->name) != 0) {
            want_rename = 1;
            p.name_check_unique = p.next.name[0] != '\0';
        }
    }

    /* tags: omit/null unchanged; a map replaces the set; {} clears. */
    v = json_object_get(body, "tags");
    if (v && !json_is_null(v) && fields_check_tags("tags", v, e) == 0) {
        if (!same_tags(v, cur->tags))
            want_retag = 1;
        json_decref(p.next.tags);
        p.next.tags = json_object_size(v) ? json_deep_copy(v) : NULL;
    }

    /* proxy / proxy_id / disable_default_proxy. */
    struct proxysel sel;
    memset(&sel, 0, sizeof sel);
    if (proxysel_parse(body, 1, &sel, e) == 0 && sel.kind != PROXYSEL_UNCHANGED) {
        proxysel_merge(&cur->proxy, &sel, &p.next.proxy);
        want_egress = 1;
    }

    /* profile: a selector with optional save_changes; only when none loaded. */
    v = json_object_get(body, "profile");
    if (v && fields_check_selector("profile", v, SEL_SAVE_CHANGES, e) == 0) {
        want_profile = 1;
        p.profile = selector_only(v);
        p.profile_save_changes = json_is_true(json_object_get(v, "save_changes"));
        p.next.profile_loaded = 1;
    }

    /* start_url: max 2048; omit or "" leaves the page unchanged. */
    v = json_object_get(body, "start_url");
    if (v && fields_check_string("start_url", v, 0, SESSRULES_START_URL_MAX, e) == 0 &&
        json_string_length(v) > 0) {
        want_nav = 1;
        copy_str(p.next.start_url, sizeof p.next.start_url, v);
    }

    /* telemetry: omit, null or {} unchanged; export ignored. */
    v = json_object_get(body, "telemetry");
    if (telcfg_validate("telemetry", v, TELCFG_SESSION_UPDATE, e) == 0 &&
        !telcfg_request_is_noop(v)) {
        json_t *next =
            telcfg_resolve_update(TELCFG_SESSION_UPDATE, cur->telemetry, v, cur->telemetry_export);
        want_tel = !same_json(next, cur->telemetry);
        json_decref(p.next.telemetry);
        p.next.telemetry = next;
    }

    /* viewport: width and height required, optional refresh_rate and force. */
    v = json_object_get(body, "viewport");
    if (v) {
        struct viewport vp;
        int force = 0;
        if (viewport_parse("viewport", v, 1, &vp, &force, e) == 0) {
            viewport_fill_rate(&vp, cur->gpu);
            p.resize_force = force;
            if (!same_viewport(&vp, &cur->viewport)) {
                want_resize = 1;
                p.next.viewport = vp;
                p.restart_recording = force && cur->recording_active;
            }
        }
    }

    if (e->ndetails + e->nmore != before) {
        sessrules_plan_clear(&p);
        return E_INVALID;
    }

    /* Conflicts with the session's state (checked once the body is valid). */
    int conflicts = 0;
    if (want_profile && cur->profile_loaded) {
        (void)err_set(e, E_CONFLICT, "profile_already_loaded",
                      "profile: the session already has a profile loaded; a profile can be "
                      "loaded by update only when none is loaded");
        conflicts++;
    }
    if (want_resize && !p.resize_force && (cur->live_view_active || cur->recording_active)) {
        const char *why = cur->live_view_active && cur->recording_active ? "a live view and a "
                                                                           "recording are"
                          : cur->live_view_active                        ? "a live view is"
                                                                         : "a recording is";
        if (conflicts == 0)
            (void)err_set(e, E_CONFLICT, "viewport_locked",
                          "viewport: the resize is refused while %s active; send force: true to "
                          "resize anyway",
                          why);
        else
            err_detail(e, "viewport_locked",
                       "viewport: the resize is refused while %s active; send force: true", why);
        conflicts++;
    }
    if (conflicts) {
        sessrules_plan_clear(&p);
        return E_CONFLICT;
    }

    /* The order the runtime runs them: store-only changes first, then egress
     * (so a profile restart already uses it), the restart, the resize,
     * telemetry, and the navigation last, after restored tabs. */
    if (want_rename)
        p.actions[p.nactions++] = SESSACT_RENAME;
    if (want_retag)
        p.actions[p.nactions++] = SESSACT_RETAG;
    if (want_egress)
        p.actions[p.nactions++] = SESSACT_SWITCH_EGRESS;
    if (want_profile)
        p.actions[p.nactions++] = SESSACT_LOAD_PROFILE;
    if (want_resize)
        p.actions[p.nactions++] = SESSACT_RESIZE;
    if (want_tel)
        p.actions[p.nactions++] = SESSACT_APPLY_TELEMETRY;
    if (want_nav) {
        p.actions[p.nactions++] = SESSACT_NAVIGATE;
        p.start_url_overrides_tabs = want_profile;
    }
    *out = p;
    return 0;
}
