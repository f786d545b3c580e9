/* Unit tests for domain/session_rules: the POST /browsers body (KERNEL_API.md)
 * and every row of the PATCH /browsers table of the interface document. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "core/err.h"
#include "domain/session_rules.h"
#include "domain/telemetry_cfg.h"

static json_t *parse(const char *name, const char *s)
{
    if (s == NULL)
        return NULL;
    json_error_t je;
    json_t *v = json_loads(s, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (v == NULL)
        fail_msg("%s: bad test JSON '%s': %s", name, s, je.text);
    return v;
}

static int err_mentions(const struct err *e, const char *needle)
{
    if (strstr(e->message, needle) || strstr(e->code, needle))
        return 1;
    for (size_t i = 0; i < e->ndetails; i++)
        if (strstr(e->details[i].message, needle) || strstr(e->details[i].code, needle))
            return 1;
    return 0;
}

/* "on" categories of a configuration as "a,b,c" ("null" when none). */
static void on_list(const json_t *cfg, char *buf, size_t cap)
{
    if (cfg == NULL) {
        snprintf(buf, cap, "null");
        return;
    }
    buf[0] = '\0';
    size_t off = 0;
    for (size_t i = 0; i < TELCFG_NCATEGORIES; i++) {
        if (!telcfg_category_on(cfg, telcfg_categories[i]))
            continue;
        int n = snprintf(buf + off, cap - off, "%s%s", off ? "," : "", telcfg_categories[i]);
        if (n > 0 && (size_t)n < cap - off)
            off += (size_t)n;
    }
}

static void proxy_str(const struct proxysel *p, char *buf, size_t cap)
{
    switch (p->kind) {
    case PROXYSEL_DIRECT:
        snprintf(buf, cap, "direct");
        break;
    case PROXYSEL_DEFAULT:
        snprintf(buf, cap, "default");
        break;
    case PROXYSEL_ID:
        snprintf(buf, cap, "id:%s", p->ref);
        break;
    case PROXYSEL_NAME:
        snprintf(buf, cap, "name:%s", p->ref);
        break;
    default:
        snprintf(buf, cap, "unchanged");
    }
}

static void set_proxy(struct proxysel *p, const char *s)
{
    memset(p, 0, sizeof *p);
    if (s == NULL || strcmp(s, "default") == 0)
        p->kind = PROXYSEL_DEFAULT;
    else if (strcmp(s, "direct") == 0)
        p->kind = PROXYSEL_DIRECT;
    else if (strncmp(s, "id:", 3) == 0) {
        p->kind = PROXYSEL_ID;
        snprintf(p->ref, sizeof p->ref, "%s", s + 3);
    } else {
        p->kind = PROXYSEL_NAME;
        snprintf(p->ref, sizeof p->ref, "%s", s + 5);
    }
}

/* ---- create -------------------------------------------------------------- */

struct ccase {
    const char *name;
    const char *body;
    int ok;
    const char *err;    /* substring of the error when !ok */
    const char *expect; /* JSON of expected normalized values when ok */
};

static const struct ccase ccases[] = {
    {"create body may be {}: defaults (timeout 60, us-east, image viewport)", "{}", 1, NULL,
     "{\"timeout_seconds\":60,\"region\":\"us-east\",\"headless\":false,\"stealth\":false,"
     "\"viewport\":[1920,1080,25],\"telemetry\":null,\"proxy\":\"default\"}"},
    {"timeout_seconds 10..259200 (lower bound)", "{\"timeout_seconds\":9}", 0, "timeout_seconds",
     NULL},
    {"timeout_seconds 10..259200 (upper bound)", "{\"timeout_seconds\":259201}", 0,
     "timeout_seconds", NULL},
    {"timeout_seconds within bounds", "{\"timeout_seconds\":259200}", 1, NULL,
     "{\"timeout_seconds\":259200}"},
    {"timeout_seconds is an integer, not a real", "{\"timeout_seconds\":60.0}", 0,
     "timeout_seconds", NULL},
    {"region enum us-east|eu-west|ap-southeast", "{\"region\":\"eu-central\"}", 0, "region", NULL},
    {"region eu-west accepted", "{\"region\":\"eu-west\"}", 1, NULL, "{\"region\":\"eu-west\"}"},
    {"memory is a BrowserMemory value", "{\"memory\":\"4GiB\"}", 0, "memory", NULL},
    {"memory 16GiB accepted", "{\"memory\":\"16GiB\"}", 1, NULL, "{\"memory\":\"16GiB\"}"},
    {"gpu (headful only): gpu with headless true rejected", "{\"gpu\":true,\"headless\":true}", 0,
     "gpu: GPU acceleration is for headful sessions only", NULL},
    {"gpu on a headful browser: GPU image viewport default 1920x1080 at 60 Hz", "{\"gpu\":true}", 1,
     NULL, "{\"viewport\":[1920,1080,60]}"},
    {"viewport: refresh_rate omitted is chosen from the resolution",
     "{\"viewport\":{\"width\":1024,\"height\":768}}", 1, NULL, "{\"viewport\":[1024,768,60]}"},
    {"viewport width >= 1", "{\"viewport\":{\"width\":0,\"height\":768}}", 0, "viewport.width",
     NULL},
    {"name pattern ^[a-zA-Z0-9._-]{1,255}$", "{\"name\":\"bad name\"}", 0, "name", NULL},
    {"name accepted", "{\"name\":\"agent-1.x_y\"}", 1, NULL, "{\"name\":\"agent-1.x_y\"}"},
    {"tags: Tags record", "{\"tags\":{\"team\":\"back end\"}}", 1, NULL,
     "{\"tags\":{\"team\":\"back end\"}}"},
    {"tags: key must match the pattern", "{\"tags\":{\"t!\":\"x\"}}", 0, "tags", NULL},
    {"profile is an object, never a string", "{\"profile\":\"p1\"}", 0, "profile", NULL},
    {"profile {id|name, save_changes}", "{\"profile\":{\"name\":\"prof\",\"save_changes\":true}}",
     1, NULL, "{\"profile\":{\"name\":\"prof\"},\"save_changes\":true}"},
    {"profile: exactly one of id or name", "{\"profile\":{\"id\":\"a\",\"name\":\"b\"}}", 0,
     "profile", NULL},
    {"proxy {mode|id|name}", "{\"proxy\":{\"mode\":\"direct\"}}", 1, NULL,
     "{\"proxy\":\"direct\"}"},
    {"deprecated proxy_id", "{\"proxy_id\":\"px1\"}", 1, NULL, "{\"proxy\":\"id:px1\"}"},
    {"proxy cannot be combined with proxy_id", "{\"proxy\":{\"id\":\"a\"},\"proxy_id\":\"b\"}", 0,
     "cannot be combined with proxy_id", NULL},
    {"network: routes allowed on sessions",
     "{\"network\":{\"proxy_routes\":[{\"hosts\":[\"api.example.com\"],\"proxy\":{\"id\":\"p\"}}]}"
     "}",
     1, NULL, "{}"},
    {"network: non-canonical CIDR rejected", "{\"network\":{\"private_hosts\":[\"10.0.0.1/8\"]}}",
     0, "network.private_hosts[0]", NULL},
    {"telemetry: default set plus provided categories",
     "{\"telemetry\":{\"enabled\":true,\"browser\":{\"page\":{\"enabled\":true}}}}", 1, NULL,
     "{\"telemetry\":\"control,connection,system,captcha,page\"}"},
    {"telemetry export honored when creating a browser",
     "{\"telemetry\":{\"export\":{\"otlp\":{\"destination\":{\"name\":\"col\"}}}}}", 1, NULL,
     "{\"telemetry\":\"control,connection,system,captcha\",\"destination\":{\"name\":\"col\"}}"},
    {"telemetry: false starts none on create", "{\"telemetry\":{\"enabled\":false}}", 1, NULL,
     "{\"telemetry\":null}"},
    {"telemetry: destination requires capture",
     "{\"telemetry\":{\"enabled\":false,\"export\":{\"otlp\":{\"destination\":{\"id\":\"d\"}}}}}",
     0, "requires telemetry capture", NULL},
    {"chrome_policy: service-managed policies are blocked",
     "{\"chrome_policy\":{\"ProxySettings\":{}}}", 0, "chrome_policy.ProxySettings", NULL},
    {"extensions [{id|name}]", "{\"extensions\":[{\"id\":\"e1\"},{\"name\":\"ext\"}]}", 1, NULL,
     "{}"},
    {"extensions entries need exactly one of id or name", "{\"extensions\":[{}]}", 0,
     "extensions[0]", NULL},
    {"extensions: at most 20 (the pools' limit)",
     "{\"extensions\":[{\"id\":\"1\"},{\"id\":\"2\"},{\"id\":\"3\"},{\"id\":\"4\"},{\"id\":\"5\"},"
     "{\"id\":\"6\"},{\"id\":\"7\"},{\"id\":\"8\"},{\"id\":\"9\"},{\"id\":\"10\"},{\"id\":\"11\"},"
     "{\"id\":\"12\"},{\"id\":\"13\"},{\"id\":\"14\"},{\"id\":\"15\"},{\"id\":\"16\"},{\"id\":"
     "\"17\"},{\"id\":\"18\"},{\"id\":\"19\"},{\"id\":\"20\"},{\"id\":\"21\"}]}",
     0, "at most 20", NULL},
    {"vaults: array of VaultReference (Vaults linked at creation)",
     "{\"vaults\":[{\"name\":\"v1\"}]}", 1, NULL, "{}"},
    {"vaults: exactly one of id or name", "{\"vaults\":[{\"id\":\"a\",\"name\":\"b\"}]}", 0,
     "vaults[0]", NULL},
    {"start_url max 2048", "{\"start_url\":\"https://example.com/\"}", 1, NULL,
     "{\"start_url\":\"https://example.com/\"}"},
    {"kiosk_mode boolean", "{\"kiosk_mode\":\"yes\"}", 0, "kiosk_mode", NULL},
    {"unknown fields rejected naming the field", "{\"colour\":\"red\"}", 0, "colour: unknown field",
     NULL},
    {"every problem is reported",
     "{\"colour\":1,\"headless\":1,\"region\":\"mars\",\"timeout_seconds\":1}", 0, "4 problems",
     NULL},
};

static void check_create_expect(const char *name, const struct sessrules_create *c, const json_t *x)
{
    const char *key;
    json_t *v;
    char buf[512];
    json_object_foreach((json_t *)x, key, v)
    {
        if (strcmp(key, "timeout_seconds") == 0 && json_integer_value(v) != c->timeout_seconds)
            fail_msg("%s: timeout %lld", name, c->timeout_seconds);
        else if (strcmp(key, "region") == 0 && strcmp(json_string_value(v), c->region))
            fail_msg("%s: region %s", name, c->region);
        else if (strcmp(key, "memory") == 0 && strcmp(json_string_value(v), c->memory))
            fail_msg("%s: memory %s", name, c->memory);
        else if (strcmp(key, "headless") == 0 && json_is_true(v) != c->headless)
            fail_msg("%s: headless", name);
        else if (strcmp(key, "stealth") == 0 && json_is_true(v) != c->stealth)
            fail_msg("%s: stealth", name);
        else if (strcmp(key, "name") == 0 && strcmp(json_string_value(v), c->name))
            fail_msg("%s: name %s", name, c->name);
        else if (strcmp(key, "start_url") == 0 && strcmp(json_string_value(v), c->start_url))
            fail_msg("%s: start_url %s", name, c->start_url);
        else if (strcmp(key, "tags") == 0 && !json_equal(v, c->tags))
            fail_msg("%s: tags", name);
        else if (strcmp(key, "profile") == 0 && !json_equal(v, c->profile))
            fail_msg("%s: profile", name);
        else if (strcmp(key, "save_changes") == 0 && json_is_true(v) != c->profile_save_changes)
            fail_msg("%s: save_changes", name);
        else if (strcmp(key, "destination") == 0 && !json_equal(v, c->telemetry_destination))
            fail_msg("%s: destination", name);
        else if (strcmp(key, "viewport") == 0 &&
                 (json_integer_value(json_array_get(v, 0)) != c->viewport.width ||
                  json_integer_value(json_array_get(v, 1)) != c->viewport.height ||
                  json_integer_value(json_array_get(v, 2)) != c->viewport.refresh_rate))
            fail_msg("%s: viewport %dx%d@%d", name, c->viewport.width, c->viewport.height,
                     c->viewport.refresh_rate);
        else if (strcmp(key, "telemetry") == 0) {
            on_list(c->telemetry, buf, sizeof buf);
            const char *want = json_is_null(v) ? "null" : json_string_value(v);
            if (strcmp(buf, want))
                fail_msg("%s: telemetry %s", name, buf);
        } else if (strcmp(key, "proxy") == 0) {
            proxy_str(&c->proxy, buf, sizeof buf);
            if (strcmp(buf, json_string_value(v)))
                fail_msg("%s: proxy %s", name, buf);
        }
    }
}

static void create_rules(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof ccases / sizeof ccases[0]; i++) {
        const struct ccase *c = &ccases[i];
        json_t *body = parse(c->name, c->body);
        struct err e;
        err_init(&e);
        struct sessrules_create out;
        int rc = sessrules_validate_create(body, &out, &e);
        if (c->ok) {
            if (rc != 0)
                fail_msg("%s: expected valid, got %s", c->name, e.message);
            json_t *x = parse(c->name, c->expect);
            check_create_expect(c->name, &out, x);
            json_decref(x);
            sessrules_create_clear(&out);
        } else {
            if (rc != E_INVALID)
                fail_msg("%s: expected E_INVALID, got %d", c->name, rc);
            if (!err_mentions(&e, c->err))
                fail_msg("%s: error lacks '%s' (%s)", c->name, c->err, e.message);
        }
        json_decref(body);
    }
}

/* An operator's lower minimum (BROWSERD_MIN_SESSION_TIMEOUT_SECONDS): the
 * bound moves down to it and no further; a minimum out of
 * SESSRULES_TIMEOUT_FLOOR..SESSRULES_TIMEOUT_MIN is the API's 10. */
struct mincase {
    const char *name;
    long long min;
    long long timeout;
    int ok;
};

static const struct mincase mincases[] = {
    {"minimum 3: timeout_seconds 3 accepted", 3, 3, 1},
    {"minimum 3: timeout_seconds 2 refused", 3, 2, 0},
    {"minimum 1 (the floor): timeout_seconds 1 accepted", 1, 1, 1},
    {"minimum 0 (below the floor): the API's 10, timeout_seconds 9 refused", 0, 9, 0},
    {"minimum 11 (above 10): the API's 10, timeout_seconds 10 accepted", 11, 10, 1},
};

static void create_min_timeout(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof mincases / sizeof mincases[0]; i++) {
        const struct mincase *c = &mincases[i];
        json_t *body = json_pack("{sI}", "timeout_seconds", (json_int_t)c->timeout);
        struct err e;
        err_init(&e);
        struct sessrules_create out;
        int rc = sessrules_validate_create_min(body, c->min, &out, &e);
        if (c->ok) {
            if (rc != 0 || out.timeout_seconds != c->timeout)
                fail_msg("%s: expected %lld, got rc %d (%s)", c->name, c->timeout, rc, e.message);
            sessrules_create_clear(&out);
        } else if (rc != E_INVALID || !err_mentions(&e, "timeout_seconds")) {
            fail_msg("%s: expected E_INVALID naming timeout_seconds, got %d (%s)", c->name, rc,
                     e.message);
        }
        json_decref(body);
    }
}

/* ---- update -------------------------------------------------------------- */

/* The session before the update, as JSON for readability:
 * {name, tags, profile_loaded, proxy ("direct"|"default"|"id:X"), telemetry
 *  (a create request resolved), export, viewport [w,h,r], live_view, recording}. */
static void mkstate(const char *name, const char *js, struct sessrules_state *s)
{
    memset(s, 0, sizeof *s);
    s->viewport = (struct viewport){1920, 1080, 25};
    set_proxy(&s->proxy, "default");
    json_t *x = parse(name, js ? js : "{}");
    const json_t *v;
    if ((v = json_object_get(x, "name")))
        snprintf(s->name, sizeof s->name, "%s", json_string_value(v));
    if ((v = json_object_get(x, "tags")))
        s->tags = json_deep_copy(v);
    if ((v = json_object_get(x, "start_url")))
        snprintf(s->start_url, sizeof s->start_url, "%s", json_string_value(v));
    s->profile_loaded = json_is_true(json_object_get(x, "profile_loaded"));
    s->live_view_active = json_is_true(json_object_get(x, "live_view"));
    s->recording_active = json_is_true(json_object_get(x, "recording"));
    if ((v = json_object_get(x, "proxy")))
        set_proxy(&s->proxy, json_string_value(v));
    if ((v = json_object_get(x, "telemetry")))
        s->telemetry = telcfg_resolve_create(v);
    if ((v = json_object_get(x, "export"))) {
        s->telemetry_export = json_deep_copy(v);
        if (s->telemetry)
            json_object_set(s->telemetry, "export", (json_t *)v);
    }
    if ((v = json_object_get(x, "viewport")))
        s->viewport = (struct viewport){(int)json_integer_value(json_array_get(v, 0)),
                                        (int)json_integer_value(json_array_get(v, 1)),
                                        (int)json_integer_value(json_array_get(v, 2))};
    json_decref(x);
}

static const char *const act_names[] = {"RENAME", "RETAG",     "EGRESS",  "PROFILE",
                                        "RESIZE", "TELEMETRY", "NAVIGATE"};

static void acts_str(const struct sessrules_plan *p, char *buf, size_t cap)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < p->nactions; i++) {
        int n = snprintf(buf + off, cap - off, "%s%s", i ? "," : "", act_names[p->actions[i]]);
        if (n > 0 && (size_t)n < cap - off)
            off += (size_t)n;
    }
}

struct ucase {
    const char *name;
    const char *state;
    const char *body;
    int rc;             /* 0, E_INVALID or E_CONFLICT */
    const char *err;    /* substring of the error / code */
    const char *acts;   /* expected actions in order when rc == 0 */
    const char *expect; /* expected next state fields when rc == 0 */
};

#define TEL_ON "{\"enabled\":true}"

static const struct ucase ucases[] = {
    {"body: an empty object changes nothing", NULL, "{}", 0, NULL, "", NULL},
    {"body must be an object", NULL, "[]", E_INVALID, "body must be a JSON object", NULL, NULL},
    {"unknown fields rejected naming the field", NULL, "{\"headless\":true}", E_INVALID,
     "headless: unknown field", NULL, NULL},
    /* name */
    {"name: Omit to leave unchanged", "{\"name\":\"old\"}", "{}", 0, NULL, "",
     "{\"name\":\"old\"}"},
    {"name: an empty string clears the name", "{\"name\":\"old\"}", "{\"name\":\"\"}", 0, NULL,
     "RENAME", "{\"name\":\"\",\"check_unique\":false}"},
    {"name: null leaves it unchanged (string or null)", "{\"name\":\"old\"}", "{\"name\":null}", 0,
     NULL, "", "{\"name\":\"old\"}"},
    {"name: 1-255 chars matching ^[a-zA-Z0-9._-]{1,255}$", NULL, "{\"name\":\"has space\"}",
     E_INVALID, "name: must match", NULL, NULL},
    {"name: When set, unique among active sessions (the caller checks)", "{\"name\":\"old\"}",
     "{\"name\":\"new-1\"}", 0, NULL, "RENAME", "{\"name\":\"new-1\",\"check_unique\":true}"},
    {"name: the same name again is not a rename", "{\"name\":\"same\"}", "{\"name\":\"same\"}", 0,
     NULL, "", "{\"check_unique\":false}"},
    {"name: must be a string", NULL, "{\"name\":5}", E_INVALID, "name", NULL, NULL},
    /* profile */
    {"profile: exactly one of id or name; allowed when no profile is loaded", NULL,
     "{\"profile\":{\"id\":\"p1\"}}", 0, NULL, "PROFILE",
     "{\"profile\":{\"id\":\"p1\"},\"save_changes\":false,\"profile_loaded\":true}"},
    {"profile: optional save_changes (boolean, default false)", NULL,
     "{\"profile\":{\"name\":\"prof\",\"save_changes\":true}}", 0, NULL, "PROFILE",
     "{\"profile\":{\"name\":\"prof\"},\"save_changes\":true}"},
    {"profile: save_changes must be a boolean", NULL,
     "{\"profile\":{\"name\":\"prof\",\"save_changes\":\"y\"}}", E_INVALID, "profile.save_changes",
     NULL, NULL},
    {"profile: both id and name rejected", NULL, "{\"profile\":{\"id\":\"a\",\"name\":\"b\"}}",
     E_INVALID, "profile", NULL, NULL},
    {"profile: name 1-255 chars, pattern above", NULL, "{\"profile\":{\"name\":\"a b\"}}",
     E_INVALID, "profile.name", NULL, NULL},
    {"profile: an empty object is invalid", NULL, "{\"profile\":{}}", E_INVALID, "profile", NULL,
     NULL},
    {"profile: Allowed only if the session has no profile loaded (Errors 4)",
     "{\"profile_loaded\":true}", "{\"profile\":{\"id\":\"p2\"}}", E_CONFLICT,
     "profile_already_loaded", NULL, NULL},
    /* proxy */
    {"proxy: mode direct: no proxy regardless of stealth", NULL,
     "{\"proxy\":{\"mode\":\"direct\"}}", 0, NULL, "EGRESS", "{\"proxy\":\"direct\"}"},
    {"proxy: mode default restores the default after a selected proxy", "{\"proxy\":\"id:px\"}",
     "{\"proxy\":{\"mode\":\"default\"}}", 0, NULL, "EGRESS", "{\"proxy\":\"default\"}"},
    {"proxy: id selects that proxy", NULL, "{\"proxy\":{\"id\":\"px9\"}}", 0, NULL, "EGRESS",
     "{\"proxy\":\"id:px9\"}"},
    {"proxy: Omit to leave unchanged", "{\"proxy\":\"id:px\"}", "{}", 0, NULL, "",
     "{\"proxy\":\"id:px\"}"},
    {"proxy: an empty object is invalid (Errors 4)", NULL, "{\"proxy\":{}}", E_INVALID, "proxy",
     NULL, NULL},
    {"proxy: no other properties", NULL, "{\"proxy\":{\"id\":\"a\",\"port\":1}}", E_INVALID,
     "proxy.port", NULL, NULL},
    {"proxy: cannot be combined with proxy_id (Errors 4)", NULL,
     "{\"proxy\":{\"id\":\"a\"},\"proxy_id\":\"b\"}", E_INVALID, "proxy_id", NULL, NULL},
    {"proxy: cannot be combined with disable_default_proxy (Errors 4)", NULL,
     "{\"proxy\":{\"mode\":\"direct\"},\"disable_default_proxy\":true}", E_INVALID,
     "disable_default_proxy", NULL, NULL},
    {"disable_default_proxy: true connects directly instead of the default stealth proxy", NULL,
     "{\"disable_default_proxy\":true}", 0, NULL, "EGRESS", "{\"proxy\":\"direct\"}"},
    {"proxy_id: Omit to leave unchanged", "{\"proxy\":\"id:px\"}", "{\"name\":\"n\"}", 0, NULL,
     "RENAME", "{\"proxy\":\"id:px\"}"},
    {"proxy_id: empty string removes the proxy", "{\"proxy\":\"id:px\"}", "{\"proxy_id\":\"\"}", 0,
     NULL, "EGRESS", "{\"proxy\":\"default\"}"},
    {"proxy_id: null leaves it unchanged (string or null)", "{\"proxy\":\"id:px\"}",
     "{\"proxy_id\":null}", 0, NULL, "", "{\"proxy\":\"id:px\"}"},
    {"proxy_id: a string selects that proxy", NULL, "{\"proxy_id\":\"px2\"}", 0, NULL, "EGRESS",
     "{\"proxy\":\"id:px2\"}"},
    /* start_url */
    {"start_url: URL to navigate to after the update is applied", "{\"start_url\":\"https://a/\"}",
     "{\"start_url\":\"https://b/\"}", 0, NULL, "NAVIGATE",
     "{\"start_url\":\"https://b/\",\"overrides_tabs\":false}"},
    {"start_url: Omit leaves the page unchanged", "{\"start_url\":\"https://a/\"}", "{}", 0, NULL,
     "", "{\"start_url\":\"https://a/\"}"},
    {"start_url: empty string leaves the page unchanged", "{\"start_url\":\"https://a/\"}",
     "{\"start_url\":\"\"}", 0, NULL, "", "{\"start_url\":\"https://a/\"}"},
    {"start_url: Max 2048 chars", NULL, NULL /* filled at run time */, E_INVALID,
     "start_url: must be at most 2048", NULL, NULL},
    {"start_url: overrides the profile's restored tabs when a profile is loaded in the same "
     "update",
     NULL, "{\"profile\":{\"id\":\"p\"},\"start_url\":\"https://x/\"}", 0, NULL, "PROFILE,NAVIGATE",
     "{\"overrides_tabs\":true}"},
    {"start_url: must be a string", NULL, "{\"start_url\":null}", E_INVALID, "start_url", NULL,
     NULL},
    /* tags */
    {"tags: Omit to leave unchanged", "{\"tags\":{\"a\":\"1\"}}", "{}", 0, NULL, "",
     "{\"tags\":{\"a\":\"1\"}}"},
    {"tags: A map replaces the whole tag set (no merge)", "{\"tags\":{\"a\":\"1\",\"b\":\"2\"}}",
     "{\"tags\":{\"c\":\"3\"}}", 0, NULL, "RETAG", "{\"tags\":{\"c\":\"3\"}}"},
    {"tags: {} clears all tags", "{\"tags\":{\"a\":\"1\"}}", "{\"tags\":{}}", 0, NULL, "RETAG",
     "{\"tags\":null}"},
    {"tags: null leaves them unchanged (Tags or null)", "{\"tags\":{\"a\":\"1\"}}",
     "{\"tags\":null}", 0, NULL, "", "{\"tags\":{\"a\":\"1\"}}"},
    {"tags: value pattern ^[A-Za-z0-9 _.:/=+@-]*$", NULL, "{\"tags\":{\"a\":\"b!\"}}", E_INVALID,
     "tags.a", NULL, NULL},
    {"tags: Up to 50 pairs", NULL, NULL /* filled at run time */, E_INVALID, "tags", NULL, NULL},
    /* telemetry */
    {"telemetry: Omit leaves the configuration unchanged", "{\"telemetry\":" TEL_ON "}", "{}", 0,
     NULL, "", "{\"telemetry\":\"control,connection,system,captcha\"}"},
    {"telemetry: null leaves the configuration unchanged", "{\"telemetry\":" TEL_ON "}",
     "{\"telemetry\":null}", 0, NULL, "", "{\"telemetry\":\"control,connection,system,captcha\"}"},
    {"telemetry: {} leaves the configuration unchanged", "{\"telemetry\":" TEL_ON "}",
     "{\"telemetry\":{}}", 0, NULL, "", "{\"telemetry\":\"control,connection,system,captcha\"}"},
    {"telemetry: false stops capture on update", "{\"telemetry\":" TEL_ON "}",
     "{\"telemetry\":{\"enabled\":false}}", 0, NULL, "TELEMETRY", "{\"telemetry\":null}"},
    {"telemetry: provided categories merge onto the current configuration",
     "{\"telemetry\":" TEL_ON "}",
     "{\"telemetry\":{\"browser\":{\"network\":{\"enabled\":true},\"system\":{\"enabled\":false}}"
     "}}",
     0, NULL, "TELEMETRY", "{\"telemetry\":\"control,connection,captcha,network\"}"},
    {"telemetry: no telemetry active, the default set is the base", NULL,
     "{\"telemetry\":{\"browser\":{\"page\":{\"enabled\":true}}}}", 0, NULL, "TELEMETRY",
     "{\"telemetry\":\"control,connection,system,captcha,page\"}"},
    {"telemetry: false cannot be combined with browser category settings (Errors 4)", NULL,
     "{\"telemetry\":{\"enabled\":false,\"browser\":{\"page\":{\"enabled\":true}}}}", E_INVALID,
     "enabled=false cannot be combined", NULL, NULL},
    {"telemetry: export ignored on browser update (keeps its creation-time destination)",
     "{\"telemetry\":" TEL_ON ",\"export\":{\"otlp\":{\"destination\":\"d0\",\"enabled\":true}}}",
     "{\"telemetry\":{\"export\":{\"otlp\":{\"destination\":{\"id\":\"d9\"}}},\"browser\":{"
     "\"page\":{\"enabled\":true}}}}",
     0, NULL, "TELEMETRY", "{\"destination\":\"d0\"}"},
    {"telemetry: export enabled=false with destination rejected (Errors 4)", NULL,
     "{\"telemetry\":{\"export\":{\"otlp\":{\"destination\":{\"id\":\"d\"},\"enabled\":false}}}}",
     E_INVALID, "enabled=false cannot be combined with a destination", NULL, NULL},
    /* viewport */
    {"viewport: width and height required", NULL, "{\"viewport\":{\"width\":800}}", E_INVALID,
     "viewport.height", NULL, NULL},
    {"viewport: resize with no live view or recording", NULL,
     "{\"viewport\":{\"width\":1280,\"height\":800,\"refresh_rate\":60}}", 0, NULL, "RESIZE",
     "{\"viewport\":[1280,800,60],\"force\":false}"},
    {"viewport: refresh_rate omitted is chosen from the resolution", NULL,
     "{\"viewport\":{\"width\":1024,\"height\":768}}", 0, NULL, "RESIZE",
     "{\"viewport\":[1024,768,60]}"},
    {"viewport: force false refused while a live view is active (Errors 4)", "{\"live_view\":true}",
     "{\"viewport\":{\"width\":1280,\"height\":800}}", E_CONFLICT, "viewport_locked", NULL, NULL},
    {"viewport: force false refused while a recording is active", "{\"recording\":true}",
     "{\"viewport\":{\"width\":1280,\"height\":800,\"force\":false}}", E_CONFLICT,
     "viewport_locked", NULL, NULL},
    {"viewport: force true allowed; recordings stopped and restarted as separate segments",
     "{\"recording\":true,\"live_view\":true}",
     "{\"viewport\":{\"width\":1280,\"height\":800,\"force\":true}}", 0, NULL, "RESIZE",
     "{\"viewport\":[1280,800,60],\"force\":true,\"restart_recording\":true}"},
    {"viewport: force true with only a live view restarts no recording", "{\"live_view\":true}",
     "{\"viewport\":{\"width\":1280,\"height\":800,\"force\":true}}", 0, NULL, "RESIZE",
     "{\"restart_recording\":false}"},
    {"viewport: the current size is not a resize (not refused)", "{\"live_view\":true}",
     "{\"viewport\":{\"width\":1920,\"height\":1080,\"refresh_rate\":25}}", 0, NULL, "",
     "{\"viewport\":[1920,1080,25]}"},
    {"viewport: force must be a boolean", NULL,
     "{\"viewport\":{\"width\":1,\"height\":1,\"force\":1}}", E_INVALID, "viewport.force", NULL,
     NULL},
    /* combinations */
    {"two conflicts reported together", "{\"profile_loaded\":true,\"recording\":true}",
     "{\"profile\":{\"id\":\"p\"},\"viewport\":{\"width\":10,\"height\":10}}", E_CONFLICT,
     "viewport_locked", NULL, NULL},
    {"field errors win over conflicts", "{\"profile_loaded\":true}",
     "{\"profile\":{\"id\":\"p\"},\"name\":\"a b\"}", E_INVALID, "name", NULL, NULL},
    {"every action in runtime order", "{\"name\":\"a\"}",
     "{\"start_url\":\"https://z/\",\"telemetry\":{\"enabled\":true},\"viewport\":{\"width\":800,"
     "\"height\":600},\"profile\":{\"id\":\"p\"},\"proxy\":{\"mode\":\"direct\"},\"tags\":{\"k\":"
     "\"v\"},\"name\":\"b\"}",
     0, NULL, "RENAME,RETAG,EGRESS,PROFILE,RESIZE,TELEMETRY,NAVIGATE", NULL},
};

static void check_update_expect(const char *name, const struct sessrules_plan *p, const json_t *x)
{
    const char *key;
    json_t *v;
    char buf[512];
    json_object_foreach((json_t *)x, key, v)
    {
        if (strcmp(key, "name") == 0 && strcmp(json_string_value(v), p->next.name))
            fail_msg("%s: name '%s'", name, p->next.name);
        else if (strcmp(key, "check_unique") == 0 && json_is_true(v) != p->name_check_unique)
            fail_msg("%s: check_unique %d", name, p->name_check_unique);
        else if (strcmp(key, "tags") == 0 &&
                 (json_is_null(v) ? p->next.tags != NULL : !json_equal(v, p->next.tags)))
            fail_msg("%s: tags", name);
        else if (strcmp(key, "start_url") == 0 && strcmp(json_string_value(v), p->next.start_url))
            fail_msg("%s: start_url '%s'", name, p->next.start_url);
        else if (strcmp(key, "overrides_tabs") == 0 &&
                 json_is_true(v) != p->start_url_overrides_tabs)
            fail_msg("%s: overrides_tabs", name);
        else if (strcmp(key, "profile") == 0 && !json_equal(v, p->profile))
            fail_msg("%s: profile", name);
        else if (strcmp(key, "save_changes") == 0 && json_is_true(v) != p->profile_save_changes)
            fail_msg("%s: save_changes", name);
        else if (strcmp(key, "profile_loaded") == 0 && json_is_true(v) != p->next.profile_loaded)
            fail_msg("%s: profile_loaded", name);
        else if (strcmp(key, "force") == 0 && json_is_true(v) != p->resize_force)
            fail_msg("%s: force", name);
        else if (strcmp(key, "restart_recording") == 0 && json_is_true(v) != p->restart_recording)
            fail_msg("%s: restart_recording", name);
        else if (strcmp(key, "viewport") == 0 &&
                 (json_integer_value(json_array_get(v, 0)) != p->next.viewport.width ||
                  json_integer_value(json_array_get(v, 1)) != p->next.viewport.height ||
                  json_integer_value(json_array_get(v, 2)) != p->next.viewport.refresh_rate))
            fail_msg("%s: viewport %dx%d@%d", name, p->next.viewport.width, p->next.viewport.height,
                     p->next.viewport.refresh_rate);
        else if (strcmp(key, "proxy") == 0) {
            proxy_str(&p->next.proxy, buf, sizeof buf);
            if (strcmp(buf, json_string_value(v)))
                fail_msg("%s: proxy %s", name, buf);
        } else if (strcmp(key, "telemetry") == 0) {
            on_list(p->next.telemetry, buf, sizeof buf);
            if (strcmp(buf, json_is_null(v) ? "null" : json_string_value(v)))
                fail_msg("%s: telemetry %s", name, buf);
        } else if (strcmp(key, "destination") == 0) {
            json_t *d = json_object_get(
                json_object_get(json_object_get(p->next.telemetry, "export"), "otlp"),
                "destination");
            if (!json_equal(d, v))
                fail_msg("%s: destination", name);
        }
    }
}

static char *long_body(const char *name)
{
    if (strstr(name, "2048")) {
        char *s = test_malloc(2200);
        int n = snprintf(s, 2200, "{\"start_url\":\"https://");
        memset(s + n, 'a', 2049 - 8);
        snprintf(s + n + 2049 - 8, 2200 - (size_t)n - 2041, "\"}");
        return s;
    }
    char *s = test_malloc(2000);
    size_t off = (size_t)snprintf(s, 2000, "{\"tags\":{");
    for (int i = 0; i < 51; i++)
        off += (size_t)snprintf(s + off, 2000 - off, "%s\"k%d\":\"v\"", i ? "," : "", i);
    snprintf(s + off, 2000 - off, "}}");
    return s;
}

static void update_rules(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof ucases / sizeof ucases[0]; i++) {
        const struct ucase *c = &ucases[i];
        char *gen = c->body ? NULL : long_body(c->name);
        json_t *body = parse(c->name, c->body ? c->body : gen);
        struct sessrules_state cur;
        mkstate(c->name, c->state, &cur);
        struct err e;
        err_init(&e);
        struct sessrules_plan plan;
        int rc = sessrules_plan_update(&cur, body, &plan, &e);
        if (rc != c->rc)
            fail_msg("%s: rc %d, want %d (%s)", c->name, rc, c->rc, e.message);
        if (rc == 0) {
            char acts[256];
            acts_str(&plan, acts, sizeof acts);
            if (c->acts && strcmp(acts, c->acts))
                fail_msg("%s: actions '%s', want '%s'", c->name, acts, c->acts);
            if (c->expect) {
                json_t *x = parse(c->name, c->expect);
                check_update_expect(c->name, &plan, x);
                json_decref(x);
            }
            sessrules_plan_clear(&plan);
        } else if (c->err && !err_mentions(&e, c->err)) {
            fail_msg("%s: error lacks '%s' (%s / %s)", c->name, c->err, e.code, e.message);
        }
        sessrules_state_clear(&cur);
        json_decref(body);
        if (gen)
            test_free(gen);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(create_rules),
        cmocka_unit_test(create_min_timeout),
        cmocka_unit_test(update_rules),
    };
    return cmocka_run_group_tests_name("domain/session_rules", tests, NULL, NULL);
}
