/* Unit tests for domain/telemetry_cfg: the telemetry sentences of the
 * interface document (categories, BrowserTelemetryRequestConfig, export). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>
#include <stdio.h>

#include "core/err.h"
#include "domain/telemetry_cfg.h"

static json_t *parse(const char *name, const char *s)
{
    if (s == NULL)
        return NULL;
    json_error_t je;
    json_t *v = json_loads(s, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (v == NULL)
        fail_msg("%s: bad test JSON: %s", name, je.text);
    return v;
}

static int has_detail(const struct err *e, const char *needle)
{
    for (size_t i = 0; i < e->ndetails; i++)
        if (strstr(e->details[i].message, needle))
            return 1;
    return 0;
}

/* ---- validation ---------------------------------------------------------- */

struct vcase {
    const char *name;
    enum telcfg_ctx ctx;
    const char *req;
    int ok;             /* 1 = valid */
    const char *detail; /* substring of a detail when invalid */
};

#define S  TELCFG_SESSION_CREATE
#define U  TELCFG_SESSION_UPDATE
#define PC TELCFG_POOL_CREATE
#define PU TELCFG_POOL_UPDATE
#define A  TELCFG_ACQUIRE

static const struct vcase vcases[] = {
    {"telemetry omitted is valid", S, NULL, 1, NULL},
    {"update: telemetry null leaves the configuration unchanged (valid)", U, "null", 1, NULL},
    {"update: telemetry {} leaves the configuration unchanged (valid)", U, "{}", 1, NULL},
    {"telemetry must be an object", S, "[]", 0, "telemetry: must be an object or null"},
    {"telemetry has only enabled, browser, export", S, "{\"foo\":1}", 0, "telemetry.foo"},
    {"enabled is a boolean", S, "{\"enabled\":\"yes\"}", 0, "telemetry.enabled: must be a boolean"},
    {"each category is {enabled: boolean}", S, "{\"browser\":{\"network\":{\"enabled\":true}}}", 1,
     NULL},
    {"category enabled must be boolean", S, "{\"browser\":{\"network\":{\"enabled\":1}}}", 0,
     "telemetry.browser.network.enabled"},
    {"category names are only the ten", S, "{\"browser\":{\"dom\":{\"enabled\":true}}}", 0,
     "telemetry.browser.dom: unknown telemetry category"},
    {"a category other than control has no cdp field", S,
     "{\"browser\":{\"network\":{\"cdp\":{}}}}", 0, "telemetry.browser.network.cdp: unknown field"},
    {"category value must be an object", S, "{\"browser\":{\"page\":true}}", 0,
     "telemetry.browser.page: must be an object"},
    {"browser must be an object", S, "{\"browser\":[]}", 0, "telemetry.browser: must be an object"},
    {"all ten categories accepted", S,
     "{\"browser\":{\"control\":{\"enabled\":true},\"connection\":{\"enabled\":true},"
     "\"system\":{\"enabled\":true},\"captcha\":{\"enabled\":true},\"console\":{\"enabled\":true},"
     "\"network\":{\"enabled\":true},\"page\":{\"enabled\":true},\"interaction\":{\"enabled\":"
     "true},\"screenshot\":{\"enabled\":true},\"platform\":{\"enabled\":true}}}",
     1, NULL},
    {"control has extra field cdp with excluded_methods", S,
     "{\"browser\":{\"control\":{\"cdp\":{\"excluded_methods\":[\"Page.navigate\","
     "\"Autofill.trigger\",\"Input.dispatchMouseEvent\"]}}}}",
     1, NULL},
    {"excluded_methods values are BrowserCdpCommandMethod only", S,
     "{\"browser\":{\"control\":{\"cdp\":{\"excluded_methods\":[\"Runtime.evaluate\"]}}}}", 0,
     "telemetry.browser.control.cdp.excluded_methods[0]: 'Runtime.evaluate' is not"},
    {"excluded_methods entries are strings", S,
     "{\"browser\":{\"control\":{\"cdp\":{\"excluded_methods\":[1]}}}}", 0,
     "excluded_methods[0]: must be a string"},
    {"excluded_methods is an array", S,
     "{\"browser\":{\"control\":{\"cdp\":{\"excluded_methods\":\"Page.navigate\"}}}}", 0,
     "excluded_methods: must be an array"},
    {"excluded_methods: duplicates collapse (accepted)", S,
     "{\"browser\":{\"control\":{\"cdp\":{\"excluded_methods\":[\"Page.reload\","
     "\"Page.reload\"]}}}}",
     1, NULL},
    {"cdp has only excluded_methods", S,
     "{\"browser\":{\"control\":{\"cdp\":{\"included_methods\":[]}}}}", 0,
     "control.cdp.included_methods: unknown field"},
    {"false cannot be combined with browser category settings", S,
     "{\"enabled\":false,\"browser\":{\"network\":{\"enabled\":true}}}", 0,
     "enabled=false cannot be combined with browser category settings"},
    {"false cannot be combined with browser category settings (update)", U,
     "{\"enabled\":false,\"browser\":{\"console\":{\"enabled\":false}}}", 0,
     "enabled=false cannot be combined"},
    {"false with an empty browser object carries no category settings", U,
     "{\"enabled\":false,\"browser\":{}}", 1, NULL},
    {"export: destination by id", S, "{\"export\":{\"otlp\":{\"destination\":{\"id\":\"d1\"}}}}", 1,
     NULL},
    {"export: destination by name with enabled true", S,
     "{\"export\":{\"otlp\":{\"destination\":{\"name\":\"dd\"},\"enabled\":true}}}", 1, NULL},
    {"enabled=false together with destination is rejected", S,
     "{\"export\":{\"otlp\":{\"destination\":{\"id\":\"d1\"},\"enabled\":false}}}", 0,
     "enabled=false cannot be combined with a destination"},
    {"OTLPDestinationRef: exactly one of id or name (both)", S,
     "{\"export\":{\"otlp\":{\"destination\":{\"id\":\"a\",\"name\":\"b\"}}}}", 0,
     "exactly one of id or name"},
    {"OTLPDestinationRef: exactly one of id or name (none)", S,
     "{\"export\":{\"otlp\":{\"destination\":{}}}}", 0, "exactly one of id or name"},
    {"OTLPDestinationRef: strings", S, "{\"export\":{\"otlp\":{\"destination\":{\"id\":5}}}}", 0,
     "destination.id: must be a non-empty string"},
    {"OTLPDestinationRef: no other properties", S,
     "{\"export\":{\"otlp\":{\"destination\":{\"id\":\"a\",\"url\":\"x\"}}}}", 0,
     "destination.url: unknown field"},
    {"otlp enabled=true without a destination exports nowhere (rejected)", S,
     "{\"export\":{\"otlp\":{\"enabled\":true}}}", 0, "enabled=true requires a destination"},
    {"Omit to capture without exporting: otlp {enabled:false} alone", S,
     "{\"export\":{\"otlp\":{\"enabled\":false}}}", 1, NULL},
    {"export has only otlp", S, "{\"export\":{\"http\":{}}}", 0, "telemetry.export.http"},
    {"destination requires telemetry capture to be enabled (enabled=false)", S,
     "{\"enabled\":false,\"export\":{\"otlp\":{\"destination\":{\"id\":\"d\"}}}}", 0,
     "a destination requires telemetry capture to be enabled"},
    {"destination requires capture: a configuration disabling every category", S,
     "{\"browser\":{\"control\":{\"enabled\":false},\"connection\":{\"enabled\":false},"
     "\"system\":{\"enabled\":false},\"captcha\":{\"enabled\":false}},"
     "\"export\":{\"otlp\":{\"destination\":{\"id\":\"d\"}}}}",
     0, "a destination requires telemetry capture to be enabled"},
    {"Browser pools reject export (create)", PC,
     "{\"export\":{\"otlp\":{\"destination\":{\"id\":\"d\"}}}}", 0, "browser pools reject export"},
    {"Browser pools reject export (update)", PU, "{\"export\":{}}", 0,
     "telemetry.export: browser pools reject export"},
    {"Browser pools reject export (acquire lease)", A, "{\"export\":{}}", 0,
     "browser pools reject export"},
    {"pool update: enabled true enables capture", PU, "{\"enabled\":true}", 1, NULL},
    {"Ignored on browser update: export accepted", U,
     "{\"export\":{\"otlp\":{\"destination\":{\"id\":\"d\"}}}}", 1, NULL},
    {"Ignored on browser update: destination without capture is not checked", U,
     "{\"enabled\":false,\"export\":{\"otlp\":{\"destination\":{\"id\":\"d\"}}}}", 1, NULL},
    {"update: export shape still rejected when enabled=false with destination", U,
     "{\"export\":{\"otlp\":{\"destination\":{\"id\":\"d\"},\"enabled\":false}}}", 0,
     "enabled=false cannot be combined with a destination"},
    {"every problem is reported", S,
     "{\"enabled\":1,\"browser\":{\"dom\":{},\"page\":{\"x\":1}},\"zzz\":0}", 0, "4 problems"},
};

static void validation_rules(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof vcases / sizeof vcases[0]; i++) {
        const struct vcase *c = &vcases[i];
        json_t *req = parse(c->name, c->req);
        struct err e;
        err_init(&e);
        int rc = telcfg_validate("telemetry", req, c->ctx, &e);
        if (c->ok && rc != 0)
            fail_msg("%s: expected valid, got %s", c->name, e.message);
        if (!c->ok) {
            if (rc != E_INVALID)
                fail_msg("%s: expected E_INVALID", c->name);
            if (c->detail && !has_detail(&e, c->detail) && !strstr(e.message, c->detail))
                fail_msg("%s: no detail '%s' (message: %s)", c->name, c->detail, e.message);
        }
        json_decref(req);
    }
}

/* ---- resolution ---------------------------------------------------------- */

/* Builds an active configuration: `on` lists the categories on (comma
 * separated), excl the excluded methods, exp the export JSON or NULL. */
static json_t *mkcfg(const char *on, const char *excl, const char *exp)
{
    if (on == NULL)
        return NULL;
    json_t *browser = json_object();
    for (size_t i = 0; i < TELCFG_NCATEGORIES; i++) {
        const char *n = telcfg_categories[i];
        char pat[64];
        char hay[512];
        snprintf(pat, sizeof pat, ",%s,", n);
        snprintf(hay, sizeof hay, ",%s,", on);
        json_t *cat = json_pack("{s:b}", "enabled", strstr(hay, pat) != NULL);
        if (strcmp(n, "control") == 0) {
            json_t *list = json_array();
            char buf[512];
            snprintf(buf, sizeof buf, "%s", excl ? excl : "");
            char *save = NULL;
            for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
                json_array_append_new(list, json_string(t));
            json_object_set_new(cat, "cdp", json_pack("{s:o}", "excluded_methods", list));
        }
        json_object_set_new(browser, n, cat);
    }
    json_t *cfg = json_pack("{s:o}", "browser", browser);
    if (exp)
        json_object_set_new(cfg, "export", json_loads(exp, 0, NULL));
    return cfg;
}

#define DEF "control,connection,system,captcha"
#define OFF "{\"otlp\":{\"enabled\":false}}"
#define DST "{\"otlp\":{\"destination\":\"dst1\",\"enabled\":true}}"

struct rcase {
    const char *name;
    enum telcfg_ctx ctx;
    const char *cur_on; /* current configuration (NULL = none) */
    const char *cur_excl;
    const char *cur_exp;
    const char *req;
    const char *keep_export;
    const char *want_on; /* NULL = no telemetry active */
    const char *want_excl;
    const char *want_exp;
};

static const struct rcase rcases[] = {
    /* create */
    {"create: telemetry omitted starts none", S, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL},
    {"create: telemetry null starts none", S, NULL, NULL, NULL, "null", NULL, NULL, NULL, NULL},
    {"create: true enables capture with the default set", S, NULL, NULL, NULL, "{\"enabled\":true}",
     NULL, DEF, NULL, OFF},
    {"create: true ... plus any provided categories", S, NULL, NULL, NULL,
     "{\"enabled\":true,\"browser\":{\"network\":{\"enabled\":true}}}", NULL, DEF ",network", NULL,
     OFF},
    {"create: provided categories layer onto the default set", S, NULL, NULL, NULL,
     "{\"browser\":{\"console\":{\"enabled\":true},\"captcha\":{\"enabled\":false}}}", NULL,
     "control,connection,system,console", NULL, OFF},
    {"create: browser omitted -> the default set is used", S, NULL, NULL, NULL, "{}", NULL, DEF,
     NULL, OFF},
    {"create: browser empty -> the default set is used", S, NULL, NULL, NULL, "{\"browser\":{}}",
     NULL, DEF, NULL, OFF},
    {"create: false starts none", S, NULL, NULL, NULL, "{\"enabled\":false}", NULL, NULL, NULL,
     NULL},
    {"create: a configuration disabling every category starts none", S, NULL, NULL, NULL,
     "{\"browser\":{\"control\":{\"enabled\":false},\"connection\":{\"enabled\":false},"
     "\"system\":{\"enabled\":false},\"captcha\":{\"enabled\":false}}}",
     NULL, NULL, NULL, NULL},
    {"create: excluded_methods recorded, duplicates collapse", S, NULL, NULL, NULL,
     "{\"browser\":{\"control\":{\"cdp\":{\"excluded_methods\":[\"Page.reload\",\"DOM.focus\","
     "\"Page.reload\"]}}}}",
     NULL, DEF, "Page.reload,DOM.focus", OFF},
    {"create: cdp merges independently of control.enabled (control off)", S, NULL, NULL, NULL,
     "{\"browser\":{\"control\":{\"enabled\":false,\"cdp\":{\"excluded_methods\":[\"DOM.focus\"]}}}"
     "}",
     NULL, "connection,system,captcha", "DOM.focus", OFF},
    {"pool create: same default-set rules", PC, NULL, NULL, NULL,
     "{\"browser\":{\"page\":{\"enabled\":true}}}", NULL, DEF ",page", NULL, OFF},
    /* session update */
    {"update: omit leaves the configuration unchanged", U, DEF ",page", "DOM.focus", DST, NULL,
     NULL, DEF ",page", "DOM.focus", DST},
    {"update: null leaves the configuration unchanged", U, DEF ",page", NULL, DST, "null", NULL,
     DEF ",page", NULL, DST},
    {"update: {} leaves the configuration unchanged", U, DEF, NULL, DST, "{}", NULL, DEF, NULL,
     DST},
    {"update: {} with nothing active stays none", U, NULL, NULL, NULL, "{}", NULL, NULL, NULL,
     NULL},
    {"update: enabled=true resolves afresh, replacing the current selection", U,
     "connection,page,network", NULL, DST,
     "{\"enabled\":true,\"browser\":{\"console\":{\"enabled\":true}}}", NULL, DEF ",console", NULL,
     DST},
    {"update: enabled=true keeps excluded_methods when the list is omitted", U, "page",
     "Page.navigate", DST, "{\"enabled\":true}", NULL, DEF, "Page.navigate", DST},
    {"update: omit enabled to merge categories onto the current selection", U, DEF ",page", NULL,
     OFF, "{\"browser\":{\"network\":{\"enabled\":true},\"captcha\":{\"enabled\":false}}}", NULL,
     "control,connection,system,page,network", NULL, OFF},
    {"update: if no telemetry is active the default set is the base", U, NULL, NULL, NULL,
     "{\"browser\":{\"network\":{\"enabled\":true}}}", OFF, DEF ",network", NULL, OFF},
    {"update: nothing active, export state unknown -> export omitted", U, NULL, NULL, NULL,
     "{\"enabled\":true}", NULL, DEF, NULL, NULL},
    {"update: false stops capture", U, DEF, NULL, DST, "{\"enabled\":false}", NULL, NULL, NULL,
     NULL},
    {"update: a configuration disabling every category stops capture", U, "control,page", NULL, OFF,
     "{\"browser\":{\"control\":{\"enabled\":false},\"page\":{\"enabled\":false}}}", NULL, NULL,
     NULL, NULL},
    {"update: omit the list to keep the current one", U, DEF, "Page.navigate,DOM.focus", OFF,
     "{\"browser\":{\"control\":{\"enabled\":true}}}", NULL, DEF, "Page.navigate,DOM.focus", OFF},
    {"update: an empty list reports every supported method again", U, DEF, "Page.navigate", OFF,
     "{\"browser\":{\"control\":{\"cdp\":{\"excluded_methods\":[]}}}}", NULL, DEF, NULL, OFF},
    {"update: cdp setting merges independently of control.enabled", U, DEF, "Page.navigate", OFF,
     "{\"browser\":{\"control\":{\"enabled\":false}}}", NULL, "connection,system,captcha",
     "Page.navigate", OFF},
    {"update: cdp list replaced without touching control.enabled", U, "connection", NULL, OFF,
     "{\"browser\":{\"control\":{\"cdp\":{\"excluded_methods\":[\"Browser.close\"]}}}}", NULL,
     "connection", "Browser.close", OFF},
    {"update: export ignored (the session keeps its creation-time destination)", U, DEF, NULL, DST,
     "{\"export\":{\"otlp\":{\"destination\":{\"id\":\"other\"}}},\"browser\":{\"page\":{"
     "\"enabled\":true}}}",
     NULL, DEF ",page", NULL, DST},
    {"update: restarting after stop keeps the creation-time destination", U, NULL, NULL, NULL,
     "{\"enabled\":true}", DST, DEF, NULL, DST},
    /* pool update */
    {"pool update: enabled true enables capture with the default set", PU, NULL, NULL, NULL,
     "{\"enabled\":true}", NULL, DEF, NULL, OFF},
    {"pool update: enabled false clears the pool's telemetry", PU, DEF, NULL, OFF,
     "{\"enabled\":false}", NULL, NULL, NULL, NULL},
    {"pool update: category settings merge onto the current configuration", PU, DEF ",page", NULL,
     OFF, "{\"browser\":{\"screenshot\":{\"enabled\":true}}}", NULL, DEF ",page,screenshot", NULL,
     OFF},
    {"pool update: {} leaves it unchanged", PU, DEF ",page", NULL, OFF, "{}", NULL, DEF ",page",
     NULL, OFF},
    /* acquire */
    {"lease: telemetry omitted uses the pool's", A, DEF ",page", NULL, OFF, NULL, NULL, DEF ",page",
     NULL, OFF},
    {"lease: categories merge onto the pool's for that lease", A, DEF, NULL, OFF,
     "{\"browser\":{\"network\":{\"enabled\":true}}}", NULL, DEF ",network", NULL, OFF},
    {"lease: enabled false captures nothing for the lease", A, DEF, NULL, OFF,
     "{\"enabled\":false}", NULL, NULL, NULL, NULL},
    {"lease: pool without telemetry, lease categories onto the default set", A, NULL, NULL, NULL,
     "{\"browser\":{\"console\":{\"enabled\":true}}}", NULL, DEF ",console", NULL, OFF},
};

static void resolution_rules(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rcases / sizeof rcases[0]; i++) {
        const struct rcase *c = &rcases[i];
        json_t *req = parse(c->name, c->req);
        struct err e;
        err_init(&e);
        if (telcfg_validate("telemetry", req, c->ctx, &e) != 0)
            fail_msg("%s: request invalid: %s", c->name, e.message);
        json_t *cur = mkcfg(c->cur_on, c->cur_excl, c->cur_exp);
        json_t *keep = parse(c->name, c->keep_export);
        json_t *got;
        if (c->ctx == S || c->ctx == PC)
            got = telcfg_resolve_create(req);
        else if (c->ctx == A)
            got = telcfg_resolve_lease(cur, req);
        else
            got = telcfg_resolve_update(c->ctx, cur, req, keep);
        json_t *want = mkcfg(c->want_on, c->want_excl, c->want_exp);
        if ((got == NULL) != (want == NULL) || (got && !json_equal(got, want))) {
            char *g = got ? json_dumps(got, JSON_SORT_KEYS) : NULL;
            fail_msg("%s: got %s", c->name, g ? g : "NULL");
        }
        json_decref(got);
        json_decref(want);
        json_decref(cur);
        json_decref(keep);
        json_decref(req);
    }
}

/* ---- capture-side queries, export and the record ------------------------- */

static void queries_and_record(void **state)
{
    (void)state;
    json_t *req = parse("q", "{\"browser\":{\"network\":{\"enabled\":true},\"control\":{\"cdp\":"
                             "{\"excluded_methods\":[\"Page.navigate\"]}}},"
                             "\"export\":{\"otlp\":{\"destination\":{\"name\":\"col\"}}}}");
    struct err e;
    err_init(&e);
    assert_int_equal(telcfg_validate("telemetry", req, S, &e), 0);
    json_t *cfg = telcfg_resolve_create(req);
    assert_non_null(cfg);
    /* Category table: defaults on, opt-in off unless provided. */
    assert_true(telcfg_category_on(cfg, "network"));
    assert_true(telcfg_category_on(cfg, "control"));
    assert_false(telcfg_category_on(cfg, "screenshot"));
    assert_false(telcfg_category_on(NULL, "control"));
    /* "Exclusion affects telemetry only" - the query reports the list. */
    assert_true(telcfg_method_excluded(cfg, "Page.navigate"));
    assert_false(telcfg_method_excluded(cfg, "Page.reload"));
    assert_false(telcfg_method_excluded(NULL, "Page.navigate"));
    /* "Honored when creating a browser": the selector is returned for lookup. */
    const json_t *dest = telcfg_destination(req);
    assert_non_null(dest);
    assert_string_equal(json_string_value(json_object_get(dest, "name")), "col");
    /* "Selected ... returned by stable ID": destination string ID, enabled true. */
    telcfg_set_destination(cfg, "d-123");
    json_t *rec = telcfg_to_record(cfg);
    json_t *otlp = json_object_get(json_object_get(rec, "export"), "otlp");
    assert_string_equal(json_string_value(json_object_get(otlp, "destination")), "d-123");
    assert_true(json_is_true(json_object_get(otlp, "enabled")));
    json_decref(rec);
    /* "telemetry: BrowserTelemetryConfig or null". */
    rec = telcfg_to_record(NULL);
    assert_true(json_is_null(rec));
    json_decref(rec);
    /* "Omit to capture without exporting". */
    json_t *r2 = parse("q2", "{\"enabled\":true}");
    assert_null(telcfg_destination(r2));
    assert_true(telcfg_request_is_noop(NULL));
    assert_false(telcfg_request_is_noop(r2));
    json_decref(r2);
    json_decref(cfg);
    json_decref(req);
    /* The category and method tables. */
    assert_true(telcfg_is_cdp_method("Autofill.trigger"));
    assert_true(telcfg_is_cdp_method("Input.dispatchMouseEvent"));
    assert_false(telcfg_is_cdp_method("Runtime.evaluate"));
    assert_true(telcfg_is_category("platform"));
    assert_false(telcfg_category_default("console"));
    assert_true(telcfg_category_default("captcha"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(validation_rules),
        cmocka_unit_test(resolution_rules),
        cmocka_unit_test(queries_and_record),
    };
    return cmocka_run_group_tests_name("domain/telemetry_cfg", tests, NULL, NULL);
}
