/*
 * telemetry_cfg: validation and resolution of telemetry configurations.
 * See telemetry_cfg.h for the two shapes and docs/domain-rules.md for the
 * readings of the interface document made here.
 */
#include "domain/telemetry_cfg.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define TELCFG_PATH_MAX 256

const char *const telcfg_categories[TELCFG_NCATEGORIES] = {
    "control", "connection", "system",      "captcha",    "console",
    "network", "page",       "interaction", "screenshot", "platform",
};

/* "Default: on (opt-out)" rows of the category table. */
static const char *const default_on[] = {"control", "connection", "system", "captcha"};

/* BrowserCdpCommandMethod values, in the document's order. */
static const char *const cdp_methods[] = {
    "Input.dispatchMouseEvent",
    "Input.dispatchKeyEvent",
    "Input.insertText",
    "Input.imeSetComposition",
    "Input.dispatchTouchEvent",
    "Input.dispatchDragEvent",
    "Input.cancelDragging",
    "Input.emulateTouchFromMouseEvent",
    "Input.synthesizePinchGesture",
    "Input.synthesizeScrollGesture",
    "Input.synthesizeTapGesture",
    "DOM.setFileInputFiles",
    "DOM.focus",
    "DOM.scrollIntoViewIfNeeded",
    "Page.bringToFront",
    "Page.captureScreenshot",
    "Page.captureSnapshot",
    "Page.handleJavaScriptDialog",
    "Page.navigate",
    "Page.navigateToHistoryEntry",
    "Page.reload",
    "Page.printToPDF",
    "Page.startScreencast",
    "Page.stopScreencast",
    "Page.stopLoading",
    "Page.close",
    "Page.setWebLifecycleState",
    "Target.activateTarget",
    "Target.closeTarget",
    "Target.createTarget",
    "Target.createBrowserContext",
    "Target.disposeBrowserContext",
    "Target.openDevTools",
    "Browser.cancelDownload",
    "Browser.close",
    "Browser.setWindowBounds",
    "Browser.setContentsSize",
    "Autofill.trigger",
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

int telcfg_is_category(const char *name)
{
    for (size_t i = 0; i < TELCFG_NCATEGORIES; i++)
        if (strcmp(telcfg_categories[i], name) == 0)
            return 1;
    return 0;
}

int telcfg_is_cdp_method(const char *name)
{
    for (size_t i = 0; i < NELEM(cdp_methods); i++)
        if (strcmp(cdp_methods[i], name) == 0)
            return 1;
    return 0;
}

int telcfg_category_default(const char *name)
{
    for (size_t i = 0; i < NELEM(default_on); i++)
        if (strcmp(default_on[i], name) == 0)
            return 1;
    return 0;
}

/* Field paths are bounded on purpose: a truncated path in an error message is
 * acceptable, an overflow is not. */
static void field_path_fmt(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void field_path_fmt(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
}

static void field_path_key(char *buf, size_t cap, const char *path, const char *key)
{
    if (path == NULL || *path == '\0')
        field_path_fmt(buf, cap, "%s", key);
    else
        field_path_fmt(buf, cap, "%s.%s", path, key);
}

static int is_ctx_pool(enum telcfg_ctx ctx)
{
    return ctx == TELCFG_POOL_CREATE || ctx == TELCFG_POOL_UPDATE || ctx == TELCFG_ACQUIRE;
}

/* control.cdp: {excluded_methods: [BrowserCdpCommandMethod...]} only.
 * Duplicates are accepted and collapse (the list is a set). */
static void check_cdp(const char *path, const json_t *v, struct err *e)
{
    char p[TELCFG_PATH_MAX];
    if (!json_is_object(v)) {
        (void)err_field(e, path, "must be an object {excluded_methods: [...]}");
        return;
    }
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        field_path_key(p, sizeof p, path, key);
        if (strcmp(key, "excluded_methods") != 0) {
            (void)err_field(e, p, "unknown field (cdp has only excluded_methods)");
            continue;
        }
        if (!json_is_array(val)) {
            (void)err_field(e, p, "must be an array of CDP command methods");
            continue;
        }
        size_t i;
        json_t *m;
        json_array_foreach(val, i, m)
        {
            char pi[TELCFG_PATH_MAX + 24];
            field_path_fmt(pi, sizeof pi, "%s[%zu]", p, i);
            if (!json_is_string(m))
                (void)err_field(e, pi, "must be a string naming a BrowserCdpCommandMethod");
            else if (!telcfg_is_cdp_method(json_string_value(m)))
                (void)err_field(e, pi, "'%.80s' is not a supported BrowserCdpCommandMethod",
                                json_string_value(m));
        }
    }
}

/* One category object: {enabled?: bool} (plus cdp for control). */
static void check_category(const char *path, const char *name, const json_t *v, struct err *e)
{
    char p[TELCFG_PATH_MAX];
    int is_control = strcmp(name, "control") == 0;
    if (!json_is_object(v)) {
        (void)err_field(e, path, "must be an object {enabled: boolean}");
        return;
    }
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        field_path_key(p, sizeof p, path, key);
        if (strcmp(key, "enabled") == 0) {
            if (!json_is_boolean(val))
                (void)err_field(e, p, "must be a boolean");
        } else if (is_control && strcmp(key, "cdp") == 0) {
            check_cdp(p, val, e);
        } else {
            (void)err_field(e, p,
                            is_control ? "unknown field (control has enabled and cdp)"
                                       : "unknown field (a category has only enabled)");
        }
    }
}

static void check_categories(const char *path, const json_t *v, struct err *e)
{
    char p[TELCFG_PATH_MAX];
    if (!json_is_object(v)) {
        (void)err_field(e, path, "must be an object of telemetry categories");
        return;
    }
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        field_path_key(p, sizeof p, path, key);
        if (!telcfg_is_category(key))
            (void)err_field(e, p,
                            "unknown telemetry category (one of control, connection, system, "
                            "captcha, console, network, page, interaction, screenshot, platform)");
        else
            check_category(p, key, val, e);
    }
}

/* OTLPDestinationRef: exactly one of id or name, non-empty strings. */
static void check_destination(const char *path, const json_t *v, struct err *e)
{
    char p[TELCFG_PATH_MAX];
    if (!json_is_object(v)) {
        (void)err_field(e, path, "must be an object with exactly one of id or name");
        return;
    }
    int n = 0;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        field_path_key(p, sizeof p, path, key);
        if (strcmp(key, "id") != 0 && strcmp(key, "name") != 0) {
            (void)err_field(e, p, "unknown field (a destination is selected by id or name)");
            continue;
        }
        n++;
        if (!json_is_string(val) || json_string_length(val) == 0)
            (void)err_field(e, p, "must be a non-empty string");
    }
    if (n != 1)
        (void)err_field(e, path, "exactly one of id or name is required");
}

/* export: {otlp?: {destination?, enabled?}}. Sets *has_dest. */
static void check_export(const char *path, const json_t *v, int *has_dest, struct err *e)
{
    char p[TELCFG_PATH_MAX], q[TELCFG_PATH_MAX];
    *has_dest = 0;
    if (!json_is_object(v)) {
        (void)err_field(e, path, "must be an object {otlp: {...}}");
        return;
    }
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        field_path_key(p, sizeof p, path, key);
        if (strcmp(key, "otlp") != 0) {
            (void)err_field(e, p, "unknown field (export has only otlp)");
            continue;
        }
        if (!json_is_object(val)) {
            (void)err_field(e, p, "must be an object {destination, enabled}");
            continue;
        }
        const char *k2;
        json_t *v2;
        const json_t *enabled = NULL;
        json_object_foreach(val, k2, v2)
        {
            field_path_key(q, sizeof q, p, k2);
            if (strcmp(k2, "destination") == 0) {
                *has_dest = 1;
                check_destination(q, v2, e);
            } else if (strcmp(k2, "enabled") == 0) {
                enabled = v2;
                if (!json_is_boolean(v2))
                    (void)err_field(e, q, "must be a boolean");
            } else {
                (void)err_field(e, q, "unknown field (otlp has destination and enabled)");
            }
        }
        field_path_key(q, sizeof q, p, "enabled");
        if (*has_dest && json_is_false(enabled))
            (void)err_field(e, q, "enabled=false cannot be combined with a destination");
        if (!*has_dest && json_is_true(enabled))
            (void)err_field(e, q, "enabled=true requires a destination");
    }
}

int telcfg_validate(const char *path, const json_t *v, enum telcfg_ctx ctx, struct err *e)
{
    char p[TELCFG_PATH_MAX];
    size_t before = e->ndetails + e->nmore;
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_object(v))
        return err_field(e, path, "must be an object or null");

    const json_t *enabled = json_object_get(v, "enabled");
    const json_t *browser = json_object_get(v, "browser");
    const json_t *exp = json_object_get(v, "export");
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        if (strcmp(key, "enabled") && strcmp(key, "browser") && strcmp(key, "export")) {
            field_path_key(p, sizeof p, path, key);
            (void)err_field(e, p, "unknown field (telemetry has enabled, browser and export)");
        }
    }
    if (enabled && !json_is_boolean(enabled)) {
        field_path_key(p, sizeof p, path, "enabled");
        (void)err_field(e, p, "must be a boolean");
    }
    if (browser) {
        field_path_key(p, sizeof p, path, "browser");
        check_categories(p, browser, e);
        if (json_is_false(enabled) && json_is_object(browser) && json_object_size(browser) > 0)
            (void)err_field(e, p,
                            "enabled=false cannot be combined with browser category settings");
    }
    if (exp) {
        field_path_key(p, sizeof p, path, "export");
        int has_dest = 0;
        if (is_ctx_pool(ctx)) {
            (void)err_field(e, p, "browser pools reject export");
        } else {
            check_export(p, exp, &has_dest, e);
        }
        /* "destination requires telemetry capture to be enabled": only
         * meaningful where export is honored, i.e. on create. */
        if (ctx == TELCFG_SESSION_CREATE && has_dest && e->ndetails + e->nmore == before) {
            json_t *res = telcfg_resolve_create(v);
            if (res == NULL) {
                char q[TELCFG_PATH_MAX];
                field_path_key(q, sizeof q, p, "otlp.destination");
                (void)err_field(e, q, "a destination requires telemetry capture to be enabled");
            }
            json_decref(res);
        }
    }
    return e->ndetails + e->nmore == before ? 0 : E_INVALID;
}

int telcfg_request_is_noop(const json_t *req)
{
    if (req == NULL || !json_is_object(req))
        return 1;
    return json_object_get(req, "enabled") == NULL && json_object_get(req, "browser") == NULL;
}

static json_t *default_set(void)
{
    json_t *browser = json_object();
    for (size_t i = 0; i < TELCFG_NCATEGORIES; i++) {
        const char *name = telcfg_categories[i];
        json_t *cat = json_pack("{s:b}", "enabled", telcfg_category_default(name));
        if (strcmp(name, "control") == 0)
            json_object_set_new(cat, "cdp", json_pack("{s:[]}", "excluded_methods"));
        json_object_set_new(browser, name, cat);
    }
    json_t *cfg = json_object();
    json_object_set_new(cfg, "browser", browser);
    return cfg;
}

/* Copy of a method list with duplicates collapsed, first occurrence kept. */
static json_t *dedup_methods(const json_t *list)
{
    json_t *out = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(list, i, m)
    {
        if (!json_is_string(m))
            continue;
        int seen = 0;
        size_t j;
        json_t *o;
        json_array_foreach(out, j, o)
        {
            if (json_equal(o, m)) {
                seen = 1;
                break;
            }
        }
        if (!seen)
            json_array_append(out, m);
    }
    return out;
}

/* The stored exclusion list of cfg (borrowed) or NULL. */
static json_t *excluded_of(const json_t *cfg)
{
    json_t *ctl = json_object_get(json_object_get(cfg, "browser"), "control");
    json_t *list = json_object_get(json_object_get(ctl, "cdp"), "excluded_methods");
    return json_is_array(list) ? list : NULL;
}

static void set_excluded(json_t *cfg, json_t *list_new)
{
    json_t *ctl = json_object_get(json_object_get(cfg, "browser"), "control");
    json_t *cdp = json_object_get(ctl, "cdp");
    if (!json_is_object(cdp)) {
        cdp = json_object();
        json_object_set_new(ctl, "cdp", cdp);
    }
    json_object_set_new(cdp, "excluded_methods", list_new);
}

/* Layers the request's categories onto cfg. Each category's enabled is
 * replaced when given; control.cdp.excluded_methods replaces the list when
 * given and is independent of control.enabled. */
static void merge_categories(json_t *cfg, const json_t *req_browser)
{
    json_t *browser = json_object_get(cfg, "browser");
    const char *name;
    json_t *cat;
    if (!json_is_object(req_browser))
        return;
    json_object_foreach((json_t *)req_browser, name, cat)
    {
        json_t *dst = json_object_get(browser, name);
        if (dst == NULL || !json_is_object(cat))
            continue;
        json_t *en = json_object_get(cat, "enabled");
        if (json_is_boolean(en))
            json_object_set_new(dst, "enabled", json_boolean(json_is_true(en)));
        if (strcmp(name, "control") == 0) {
            json_t *list = json_object_get(json_object_get(cat, "cdp"), "excluded_methods");
            if (json_is_array(list))
                set_excluded(cfg, dedup_methods(list));
        }
    }
}

static int any_on(const json_t *cfg)
{
    for (size_t i = 0; i < TELCFG_NCATEGORIES; i++)
        if (telcfg_category_on(cfg, telcfg_categories[i]))
            return 1;
    return 0;
}

static json_t *export_off(void)
{
    return json_pack("{s:{s:b}}", "otlp", "enabled", 0);
}

json_t *telcfg_resolve_create(const json_t *req)
{
    if (req == NULL || !json_is_object(req))
        return NULL;
    if (json_is_false(json_object_get(req, "enabled")))
        return NULL;
    json_t *cfg = default_set();
    merge_categories(cfg, json_object_get(req, "browser"));
    if (!any_on(cfg)) {
        json_decref(cfg);
        return NULL;
    }
    json_object_set_new(cfg, "export", export_off());
    return cfg;
}

json_t *telcfg_resolve_update(enum telcfg_ctx ctx, const json_t *current, const json_t *req,
                              const json_t *keep_export)
{
    if (telcfg_request_is_noop(req))
        return current ? json_deep_copy(current) : NULL;
    const json_t *enabled = json_object_get(req, "enabled");
    if (json_is_false(enabled))
        return NULL;

    json_t *cfg;
    if (json_is_true(enabled) || current == NULL) {
        /* Afresh from the default set; the exclusion list is not part of the
         * category selection and survives unless the request names one. */
        cfg = default_set();
        json_t *kept = current ? excluded_of(current) : NULL;
        if (kept)
            set_excluded(cfg, dedup_methods(kept));
    } else {
        cfg = json_deep_copy(current);
        json_object_del(cfg, "export");
    }
    merge_categories(cfg, json_object_get(req, "browser"));
    if (!any_on(cfg)) {
        json_decref(cfg);
        return NULL;
    }
    const json_t *exp = current ? json_object_get(current, "export") : NULL;
    if (exp == NULL)
        exp = keep_export;
    if (exp)
        json_object_set_new(cfg, "export", json_deep_copy(exp));
    else if (is_ctx_pool(ctx))
        json_object_set_new(cfg, "export", export_off());
    return cfg;
}

json_t *telcfg_resolve_lease(const json_t *pool_cfg, const json_t *req)
{
    return telcfg_resolve_update(TELCFG_ACQUIRE, pool_cfg, req, NULL);
}

const json_t *telcfg_destination(const json_t *req)
{
    json_t *otlp = json_object_get(json_object_get(req, "export"), "otlp");
    json_t *dest = json_object_get(otlp, "destination");
    return json_is_object(dest) ? dest : NULL;
}

void telcfg_set_destination(json_t *cfg, const char *dest_id)
{
    json_object_set_new(cfg, "export",
                        json_pack("{s:{s:s,s:b}}", "otlp", "destination", dest_id, "enabled", 1));
}

int telcfg_category_on(const json_t *cfg, const char *name)
{
    if (cfg == NULL)
        return 0;
    json_t *cat = json_object_get(json_object_get(cfg, "browser"), name);
    return json_is_true(json_object_get(cat, "enabled"));
}

int telcfg_method_excluded(const json_t *cfg, const char *method)
{
    json_t *list = cfg ? excluded_of(cfg) : NULL;
    size_t i;
    json_t *m;
    if (list == NULL)
        return 0;
    json_array_foreach(list, i, m)
    {
        if (json_is_string(m) && strcmp(json_string_value(m), method) == 0)
            return 1;
    }
    return 0;
}

json_t *telcfg_to_record(const json_t *cfg)
{
    return cfg ? json_deep_copy(cfg) : json_null();
}
