/* Unit tests for domain/pool_rules: the pool create body (KERNEL_API.md),
 * every row of the PATCH /browser_pools table of the interface document, its
 * "Related rules" and the acquire body. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "core/err.h"
#include "domain/pool_rules.h"
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
    if (strstr(e->message, needle))
        return 1;
    for (size_t i = 0; i < e->ndetails; i++)
        if (strstr(e->details[i].message, needle))
            return 1;
    return 0;
}

/* "on" categories of a telemetry configuration as "a,b" ("null" when none). */
static void on_list(const json_t *cfg, char *buf, size_t cap)
{
    if (cfg == NULL) {
        snprintf(buf, cap, "null");
        return;
    }
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < TELCFG_NCATEGORIES; i++) {
        if (!telcfg_category_on(cfg, telcfg_categories[i]))
            continue;
        int n = snprintf(buf + off, cap - off, "%s%s", off ? "," : "", telcfg_categories[i]);
        if (n > 0 && (size_t)n < cap - off)
            off += (size_t)n;
    }
}

/* Checks the keys of expect against config: a null value means "absent";
 * "telemetry" is compared as its list of categories on. */
static void check_config(const char *name, const json_t *config, const json_t *expect)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)expect, key, v)
    {
        json_t *got = json_object_get(config, key);
        if (strcmp(key, "telemetry") == 0 && json_is_string(v)) {
            char buf[256];
            on_list(got, buf, sizeof buf);
            if (strcmp(buf, json_string_value(v)))
                fail_msg("%s: telemetry %s", name, buf);
            continue;
        }
        if (json_is_null(v) ? got != NULL : !json_equal(got, v)) {
            char *g = got ? json_dumps(got, JSON_ENCODE_ANY) : NULL;
            fail_msg("%s: %s = %s", name, key, g ? g : "(absent)");
        }
    }
}

/* ---- create -------------------------------------------------------------- */

struct ccase {
    const char *name;
    const char *body;
    int ok;
    const char *err;
    const char *expect;
};

static const struct ccase ccases[] = {
    {"size required", "{}", 0, "size: is required", NULL},
    {"size >= 1", "{\"size\":0}", 0, "size", NULL},
    {"region: one of the known regions (issue 33.5)", "{\"size\":1,\"region\":\"mars\"}", 0,
     "region: must be one of us-east, eu-west, ap-southeast", NULL},
    {"region: stored, us-east when omitted", "{\"size\":1}", 1, NULL, "{\"region\":\"us-east\"}"},
    {"region: eu-west stored", "{\"size\":1,\"region\":\"eu-west\"}", 1, NULL,
     "{\"region\":\"eu-west\"}"},
    {"defaults: timeout 600, fill rate 25, headless/stealth/kiosk false", "{\"size\":3}", 1, NULL,
     "{\"size\":3,\"timeout_seconds\":600,\"fill_rate_per_minute\":25,\"headless\":false,"
     "\"stealth\":false,\"kiosk_mode\":false,\"profile\":null,\"refresh_on_profile_update\":null,"
     "\"telemetry\":null}"},
    {"timeout_seconds 10..259200", "{\"size\":1,\"timeout_seconds\":5}", 0, "timeout_seconds",
     NULL},
    {"fill_rate_per_minute >= 0 (real accepted)", "{\"size\":1,\"fill_rate_per_minute\":12.5}", 1,
     NULL, "{\"fill_rate_per_minute\":12.5}"},
    {"fill_rate_per_minute >= 0", "{\"size\":1,\"fill_rate_per_minute\":-1}", 0,
     "fill_rate_per_minute", NULL},
    {"refresh_on_profile_update defaults to true when a profile is given",
     "{\"size\":1,\"profile\":{\"name\":\"prof\"}}", 1, NULL,
     "{\"profile\":{\"name\":\"prof\"},\"refresh_on_profile_update\":true}"},
    {"profile save_changes is ignored",
     "{\"size\":1,\"profile\":{\"id\":\"p\",\"save_changes\":7}}", 1, NULL,
     "{\"profile\":{\"id\":\"p\"}}"},
    {"refresh_on_profile_update requires a profile",
     "{\"size\":1,\"refresh_on_profile_update\":true}", 0, "requires a profile", NULL},
    {"network without proxy_routes",
     "{\"size\":1,\"network\":{\"proxy_routes\":[{\"hosts\":[\"a.example.com\"],\"proxy\":{\"id\":"
     "\"p\"}}]}}",
     0, "network.proxy_routes", NULL},
    {"network private_hosts kept", "{\"size\":1,\"network\":{\"private_hosts\":[]}}", 1, NULL,
     "{\"network\":{\"private_hosts\":[]}}"},
    {"telemetry without export", "{\"size\":1,\"telemetry\":{\"export\":{}}}", 0,
     "browser pools reject export", NULL},
    {"telemetry resolved onto the default set",
     "{\"size\":1,\"telemetry\":{\"browser\":{\"network\":{\"enabled\":true}}}}", 1, NULL,
     "{\"telemetry\":\"control,connection,system,captcha,network\"}"},
    {"extensions max 20",
     "{\"size\":1,\"extensions\":[{\"id\":\"1\"},{\"id\":\"2\"},{\"id\":\"3\"},{\"id\":\"4\"},{"
     "\"id\":\"5\"},{\"id\":\"6\"},{\"id\":\"7\"},{\"id\":\"8\"},{\"id\":\"9\"},{\"id\":\"10\"},{"
     "\"id\":\"11\"},{\"id\":\"12\"},{\"id\":\"13\"},{\"id\":\"14\"},{\"id\":\"15\"},{\"id\":\"16\""
     "},{\"id\":\"17\"},{\"id\":\"18\"},{\"id\":\"19\"},{\"id\":\"20\"},{\"id\":\"21\"}]}",
     0, "at most 20", NULL},
    {"start_url <= 2048 stored", "{\"size\":1,\"start_url\":\"https://w/\"}", 1, NULL,
     "{\"start_url\":\"https://w/\"}"},
    {"viewport stored", "{\"size\":1,\"viewport\":{\"width\":800,\"height\":600}}", 1, NULL,
     "{\"viewport\":{\"width\":800,\"height\":600}}"},
    {"chrome_policy validated", "{\"size\":1,\"chrome_policy\":{\"NoSuchPolicy\":1}}", 0,
     "chrome_policy.NoSuchPolicy", NULL},
    {"name pattern", "{\"size\":1,\"name\":\"a/b\"}", 0, "name", NULL},
    {"proxy_id stored", "{\"size\":1,\"proxy_id\":\"px\",\"name\":\"pool-a\"}", 1, NULL,
     "{\"proxy_id\":\"px\",\"name\":\"pool-a\"}"},
    {"unknown fields rejected", "{\"size\":1,\"gpu\":true}", 0, "gpu: unknown field", NULL},
};

static void create_rules(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof ccases / sizeof ccases[0]; i++) {
        const struct ccase *c = &ccases[i];
        json_t *body = parse(c->name, c->body);
        json_t *cfg = NULL;
        struct err e;
        err_init(&e);
        int rc = poolrules_validate_create(body, &cfg, &e);
        if (c->ok) {
            if (rc != 0)
                fail_msg("%s: expected valid, got %s", c->name, e.message);
            json_t *x = parse(c->name, c->expect);
            check_config(c->name, cfg, x);
            json_decref(x);
        } else {
            if (rc != E_INVALID || cfg != NULL)
                fail_msg("%s: expected E_INVALID", c->name);
            if (!err_mentions(&e, c->err))
                fail_msg("%s: error lacks '%s' (%s)", c->name, c->err, e.message);
        }
        json_decref(cfg);
        json_decref(body);
    }
}

/* ---- update -------------------------------------------------------------- */

/* A pool config as create would have stored it. */
#define BASE                                                                                       \
    "{\"size\":5,\"timeout_seconds\":600,\"fill_rate_per_minute\":25,\"headless\":false,"          \
    "\"stealth\":false,\"kiosk_mode\":false,\"name\":\"pool-a\",\"profile\":{\"name\":\"prof\"},"  \
    "\"refresh_on_profile_update\":false,\"proxy_id\":\"px\",\"start_url\":\"https://s/\","        \
    "\"chrome_policy\":{\"BookmarkBarEnabled\":true},\"extensions\":[{\"id\":\"e1\"}],"            \
    "\"network\":{\"private_hosts\":[\"10.0.0.0/"                                                  \
    "8\"]},\"viewport\":{\"width\":800,\"height\":600}}"
#define NOPROF "{\"size\":2,\"timeout_seconds\":600,\"fill_rate_per_minute\":25}"

struct ucase {
    const char *name;
    const char *current;
    const char *body;
    int ok;
    const char *err;
    const char *expect;    /* keys of the new config; null = absent */
    const char *plan;      /* {rebuild_all, profile_changed, profile_cleared, size, ...} */
    const char *cur_teleq; /* telemetry create request resolved into current */
};

static const struct ucase ucases[] = {
    {"Omitted body fields leave existing values unchanged", BASE, "{}", 1, NULL, BASE,
     "{\"rebuild_all\":false,\"profile_changed\":false,\"size\":5}", NULL},
    {"unknown fields rejected", BASE, "{\"colour\":\"eu-west\"}", 0, "colour: unknown field", NULL,
     NULL, NULL},
    {"region is fixed at create (issue 33.5)", BASE, "{\"region\":\"eu-west\"}", 0,
     "region: is fixed when the pool is created (this pool is in us-east)", NULL, NULL, NULL},
    {"region: the same region again is accepted", BASE, "{\"region\":\"us-east\"}", 1, NULL, BASE,
     NULL, NULL},
    {"region: one of the known regions", BASE, "{\"region\":\"mars\"}", 0,
     "region: must be one of us-east, eu-west, ap-southeast", NULL, NULL, NULL},
    /* chrome_policy */
    {"chrome_policy: Replaces the custom Chrome enterprise policy overrides", BASE,
     "{\"chrome_policy\":{\"HomepageLocation\":\"https://h/\"}}", 1, NULL,
     "{\"chrome_policy\":{\"HomepageLocation\":\"https://h/\"}}", NULL, NULL},
    {"chrome_policy: Empty object clears them", BASE, "{\"chrome_policy\":{}}", 1, NULL,
     "{\"chrome_policy\":null}", NULL, NULL},
    {"chrome_policy: Service-managed policies (extensions, proxy, CDP/automation) are blocked",
     BASE, "{\"chrome_policy\":{\"ExtensionInstallForcelist\":[]}}", 0,
     "chrome_policy.ExtensionInstallForcelist", NULL, NULL, NULL},
    {"chrome_policy: values must match the expected types", BASE,
     "{\"chrome_policy\":{\"BookmarkBarEnabled\":\"yes\"}}", 0, "chrome_policy.BookmarkBarEnabled",
     NULL, NULL, NULL},
    /* discard_all_idle */
    {"discard_all_idle: Discards all idle browsers and rebuilds them with the new configuration",
     BASE, "{\"discard_all_idle\":true,\"headless\":true}", 1, NULL, "{\"headless\":true}",
     "{\"rebuild_all\":true}", NULL},
    {"discard_all_idle: default false; existing pool browsers keep theirs (Related rules 2, 3)",
     BASE, "{\"headless\":true}", 1, NULL, "{\"headless\":true}", "{\"rebuild_all\":false}", NULL},
    {"discard_all_idle: is not stored in the configuration", BASE, "{\"discard_all_idle\":false}",
     1, NULL, "{\"discard_all_idle\":null}", "{\"rebuild_all\":false}", NULL},
    {"discard_all_idle: boolean", BASE, "{\"discard_all_idle\":1}", 0, "discard_all_idle", NULL,
     NULL, NULL},
    /* extensions */
    {"extensions: Replaces the extension list", BASE,
     "{\"extensions\":[{\"name\":\"ext-b\"},{\"id\":\"e3\"}]}", 1, NULL,
     "{\"extensions\":[{\"name\":\"ext-b\"},{\"id\":\"e3\"}]}", NULL, NULL},
    {"extensions: Empty array clears all", BASE, "{\"extensions\":[]}", 1, NULL,
     "{\"extensions\":null}", NULL, NULL},
    {"extensions: Each entry provides either id or name", BASE,
     "{\"extensions\":[{\"id\":\"a\",\"name\":\"b\"}]}", 0, "extensions[0]", NULL, NULL, NULL},
    {"extensions: max 20 entries", BASE,
     "{\"extensions\":[{\"id\":\"1\"},{\"id\":\"2\"},{\"id\":\"3\"},{\"id\":\"4\"},{\"id\":\"5\"},{"
     "\"id\":\"6\"},{\"id\":\"7\"},{\"id\":\"8\"},{\"id\":\"9\"},{\"id\":\"10\"},{\"id\":\"11\"},{"
     "\"id\":\"12\"},{\"id\":\"13\"},{\"id\":\"14\"},{\"id\":\"15\"},{\"id\":\"16\"},{\"id\":\"17\""
     "},{\"id\":\"18\"},{\"id\":\"19\"},{\"id\":\"20\"},{\"id\":\"21\"}]}",
     0, "at most 20", NULL, NULL, NULL},
    /* fill_rate_per_minute */
    {"fill_rate_per_minute: >= 0", BASE, "{\"fill_rate_per_minute\":-0.5}", 0,
     "fill_rate_per_minute", NULL, NULL, NULL},
    {"fill_rate_per_minute: only the lower bound is enforced (above the cap of 25)", BASE,
     "{\"fill_rate_per_minute\":90}", 1, NULL, "{\"fill_rate_per_minute\":90}", NULL, NULL},
    {"fill_rate_per_minute: 0 accepted", BASE, "{\"fill_rate_per_minute\":0}", 1, NULL,
     "{\"fill_rate_per_minute\":0}", NULL, NULL},
    {"fill_rate_per_minute: a number, not a string", BASE, "{\"fill_rate_per_minute\":\"5\"}", 0,
     "fill_rate_per_minute", NULL, NULL, NULL},
    /* headless, kiosk_mode, stealth */
    {"headless: Replaces whether browsers launch with a headless image", BASE,
     "{\"headless\":true}", 1, NULL, "{\"headless\":true}", NULL, NULL},
    {"kiosk_mode: Replaces whether browsers launch in kiosk mode", BASE, "{\"kiosk_mode\":true}", 1,
     NULL, "{\"kiosk_mode\":true}", NULL, NULL},
    {"stealth: Replaces whether browsers launch in stealth mode", BASE, "{\"stealth\":true}", 1,
     NULL, "{\"stealth\":true}", NULL, NULL},
    {"stealth: boolean", BASE, "{\"stealth\":\"true\"}", 0, "stealth", NULL, NULL, NULL},
    /* name */
    {"name: Replaces the pool name", BASE, "{\"name\":\"pool-b\"}", 1, NULL,
     "{\"name\":\"pool-b\"}", "{\"name_changed\":true}", NULL},
    {"name: Empty string is a no-op", BASE, "{\"name\":\"\"}", 1, NULL, "{\"name\":\"pool-a\"}",
     "{\"name_changed\":false}", NULL},
    {"name: Pattern ^[a-zA-Z0-9._-]{1,255}$", BASE, "{\"name\":\"pool b\"}", 0, "name", NULL, NULL,
     NULL},
    {"name: the name cannot be cleared once assigned (null rejected)", BASE, "{\"name\":null}", 0,
     "name", NULL, NULL, NULL},
    /* network */
    {"network: Replaces the pool network configuration", BASE,
     "{\"network\":{\"private_hosts\":[\"192.168.0.0/16\"]}}", 1, NULL,
     "{\"network\":{\"private_hosts\":[\"192.168.0.0/16\"]}}", NULL, NULL},
    {"network: {} removes it", BASE, "{\"network\":{}}", 1, NULL, "{\"network\":null}", NULL, NULL},
    {"network: {private_hosts: []} sets an explicit empty list", BASE,
     "{\"network\":{\"private_hosts\":[]}}", 1, NULL, "{\"network\":{\"private_hosts\":[]}}", NULL,
     NULL},
    {"network: proxy_routes are not supported on pools", BASE,
     "{\"network\":{\"proxy_routes\":[]}}", 0, "network.proxy_routes", NULL, NULL, NULL},
    {"network: public ranges rejected (Errors 4)", BASE,
     "{\"network\":{\"private_hosts\":[\"8.8.8.0/24\"]}}", 0, "network.private_hosts[0]", NULL,
     NULL, NULL},
    /* profile + refresh_on_profile_update */
    {"profile: Replaces the profile reference; refresh defaults to true when it changes", BASE,
     "{\"profile\":{\"id\":\"p2\"}}", 1, NULL,
     "{\"profile\":{\"id\":\"p2\"},\"refresh_on_profile_update\":true}",
     "{\"profile_changed\":true,\"profile_cleared\":false}", NULL},
    {"profile: newly attached defaults refresh_on_profile_update to true", NOPROF,
     "{\"profile\":{\"name\":\"prof\"}}", 1, NULL,
     "{\"profile\":{\"name\":\"prof\"},\"refresh_on_profile_update\":true}",
     "{\"profile_changed\":true}", NULL},
    {"profile: Re-sending the same profile reference leaves refresh unchanged", BASE,
     "{\"profile\":{\"name\":\"prof\"}}", 1, NULL, "{\"refresh_on_profile_update\":false}",
     "{\"profile_changed\":false}", NULL},
    {"profile: To clear, send id as an empty string", BASE, "{\"profile\":{\"id\":\"\"}}", 1, NULL,
     "{\"profile\":null,\"refresh_on_profile_update\":false}",
     "{\"profile_changed\":true,\"profile_cleared\":true}", NULL},
    {"profile: To clear, send name as an empty string (also disables refresh)",
     "{\"size\":1,\"profile\":{\"id\":\"p\"},\"refresh_on_profile_update\":true}",
     "{\"profile\":{\"name\":\"\"}}", 1, NULL,
     "{\"profile\":null,\"refresh_on_profile_update\":false}", "{\"profile_cleared\":true}", NULL},
    {"profile: An empty object is rejected with 400 (Errors 4)", BASE, "{\"profile\":{}}", 0,
     "profile", NULL, NULL, NULL},
    {"profile: save_changes on the pool profile is ignored, not rejected", BASE,
     "{\"profile\":{\"id\":\"p3\",\"save_changes\":true}}", 1, NULL,
     "{\"profile\":{\"id\":\"p3\"}}", NULL, NULL},
    {"profile: each entry is an id or a name (not both)", BASE,
     "{\"profile\":{\"id\":\"a\",\"name\":\"b\"}}", 0, "profile", NULL, NULL, NULL},
    {"profile: clearing a pool without a profile changes nothing", NOPROF,
     "{\"profile\":{\"id\":\"\"}}", 1, NULL, NOPROF,
     "{\"profile_changed\":false,\"profile_cleared\":true}", NULL},
    {"refresh_on_profile_update: Replaces whether idle browsers are flushed", BASE,
     "{\"refresh_on_profile_update\":true}", 1, NULL, "{\"refresh_on_profile_update\":true}", NULL,
     NULL},
    {"refresh_on_profile_update: an explicit value wins over the default on a change", BASE,
     "{\"profile\":{\"id\":\"p9\"},\"refresh_on_profile_update\":false}", 1, NULL,
     "{\"refresh_on_profile_update\":false}", "{\"profile_changed\":true}", NULL},
    {"refresh_on_profile_update: Requires a profile to be set on the pool", NOPROF,
     "{\"refresh_on_profile_update\":true}", 0, "requires a profile", NULL, NULL, NULL},
    {"refresh_on_profile_update: rejected when the same update clears the profile", BASE,
     "{\"profile\":{\"id\":\"\"},\"refresh_on_profile_update\":true}", 0, "requires a profile",
     NULL, NULL, NULL},
    {"refresh_on_profile_update: accepted when the same update attaches one", NOPROF,
     "{\"profile\":{\"id\":\"p\"},\"refresh_on_profile_update\":false}", 1, NULL,
     "{\"refresh_on_profile_update\":false}", NULL, NULL},
    /* proxy_id */
    {"proxy_id: Replaces the selected proxy", BASE, "{\"proxy_id\":\"px2\"}", 1, NULL,
     "{\"proxy_id\":\"px2\"}", NULL, NULL},
    {"proxy_id: Empty string clears the selected proxy", BASE, "{\"proxy_id\":\"\"}", 1, NULL,
     "{\"proxy_id\":null}", NULL, NULL},
    {"proxy_id: a string", BASE, "{\"proxy_id\":3}", 0, "proxy_id", NULL, NULL, NULL},
    /* size */
    {"size: Replaces the number of browsers maintained (the caller checks the org sum)", BASE,
     "{\"size\":9}", 1, NULL, "{\"size\":9}", "{\"size\":9,\"size_changed\":true}", NULL},
    {"size: >= 1", BASE, "{\"size\":0}", 0, "size", NULL, NULL, NULL},
    {"size: an integer", BASE, "{\"size\":2.5}", 0, "size", NULL, NULL, NULL},
    /* start_url */
    {"start_url: Replaces the URL navigated to when a new browser is warmed", BASE,
     "{\"start_url\":\"https://n/\"}", 1, NULL, "{\"start_url\":\"https://n/\"}", NULL, NULL},
    {"start_url: Empty string clears it", BASE, "{\"start_url\":\"\"}", 1, NULL,
     "{\"start_url\":null}", NULL, NULL},
    {"start_url: max 2048", BASE, NULL /* generated */, 0, "start_url: must be at most 2048", NULL,
     NULL, NULL},
    /* telemetry */
    {"telemetry: Omit, null, or {} leaves it unchanged (null)", BASE, "{\"telemetry\":null}", 1,
     NULL, "{\"telemetry\":\"control,connection,system,captcha,page\"}", NULL,
     "{\"browser\":{\"page\":{\"enabled\":true}}}"},
    {"telemetry: Omit, null, or {} leaves it unchanged ({})", BASE, "{\"telemetry\":{}}", 1, NULL,
     "{\"telemetry\":\"control,connection,system,captcha,page\"}", NULL,
     "{\"browser\":{\"page\":{\"enabled\":true}}}"},
    {"telemetry: enabled true enables capture with the default set", BASE,
     "{\"telemetry\":{\"enabled\":true}}", 1, NULL,
     "{\"telemetry\":\"control,connection,system,captcha\"}", NULL, NULL},
    {"telemetry: enabled false clears the pool's telemetry", BASE,
     "{\"telemetry\":{\"enabled\":false}}", 1, NULL, "{\"telemetry\":null}", NULL,
     "{\"enabled\":true}"},
    {"telemetry: Category settings merge onto the current configuration", BASE,
     "{\"telemetry\":{\"browser\":{\"console\":{\"enabled\":true}}}}", 1, NULL,
     "{\"telemetry\":\"control,connection,system,captcha,console,page\"}", NULL,
     "{\"browser\":{\"page\":{\"enabled\":true}}}"},
    {"telemetry: pools reject export (Errors 4)", BASE,
     "{\"telemetry\":{\"export\":{\"otlp\":{\"enabled\":false}}}}", 0,
     "telemetry.export: browser pools reject export", NULL, NULL, NULL},
    {"telemetry: enabled false with category settings rejected", BASE,
     "{\"telemetry\":{\"enabled\":false,\"browser\":{\"page\":{\"enabled\":true}}}}", 0,
     "enabled=false cannot be combined", NULL, NULL, NULL},
    /* timeout_seconds */
    {"timeout_seconds: 10 to 259200 (72 hours), low", BASE, "{\"timeout_seconds\":9}", 0,
     "timeout_seconds", NULL, NULL, NULL},
    {"timeout_seconds: 10 to 259200 (72 hours), high", BASE, "{\"timeout_seconds\":259201}", 0,
     "timeout_seconds", NULL, NULL, NULL},
    {"timeout_seconds: Replaces the default idle timeout", BASE, "{\"timeout_seconds\":10}", 1,
     NULL, "{\"timeout_seconds\":10}", NULL, NULL},
    /* viewport */
    {"viewport: Replaces the viewport (width, height, optional refresh_rate)", BASE,
     "{\"viewport\":{\"width\":1280,\"height\":800,\"refresh_rate\":60}}", 1, NULL,
     "{\"viewport\":{\"width\":1280,\"height\":800,\"refresh_rate\":60}}", NULL, NULL},
    {"viewport: Cannot be cleared", BASE, "{\"viewport\":null}", 0, "viewport: cannot be cleared",
     NULL, NULL, NULL},
    {"viewport: no force on pools", BASE,
     "{\"viewport\":{\"width\":1280,\"height\":800,\"force\":true}}", 0, "viewport.force", NULL,
     NULL, NULL},
    {"every problem is reported", BASE, "{\"size\":0,\"name\":\"a b\",\"viewport\":null,\"x\":1}",
     0, "4 problems", NULL, NULL, NULL},
};

static void check_plan(const char *name, const struct poolrules_plan *p, const json_t *x)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)x, key, v)
    {
        int b = json_is_true(v);
        if (strcmp(key, "rebuild_all") == 0 && b != (p->rebuild == POOLRULES_REBUILD_ALL_IDLE))
            fail_msg("%s: rebuild", name);
        else if (strcmp(key, "profile_changed") == 0 && b != p->profile_changed)
            fail_msg("%s: profile_changed %d", name, p->profile_changed);
        else if (strcmp(key, "profile_cleared") == 0 && b != p->profile_cleared)
            fail_msg("%s: profile_cleared", name);
        else if (strcmp(key, "size_changed") == 0 && b != p->size_changed)
            fail_msg("%s: size_changed", name);
        else if (strcmp(key, "name_changed") == 0 && b != p->name_changed)
            fail_msg("%s: name_changed", name);
        else if (strcmp(key, "size") == 0 && json_integer_value(v) != p->size)
            fail_msg("%s: size %lld", name, p->size);
    }
}

static void update_rules(void **state)
{
    (void)state;
    char longurl[2200];
    int n = snprintf(longurl, sizeof longurl, "{\"start_url\":\"https://");
    memset(longurl + n, 'a', 2041);
    snprintf(longurl + n + 2041, sizeof longurl - (size_t)n - 2041, "\"}");
    for (size_t i = 0; i < sizeof ucases / sizeof ucases[0]; i++) {
        const struct ucase *c = &ucases[i];
        json_t *cur = parse(c->name, c->current);
        if (c->cur_teleq) {
            json_t *req = parse(c->name, c->cur_teleq);
            json_object_set_new(cur, "telemetry", telcfg_resolve_create(req));
            json_decref(req);
        }
        json_t *body = parse(c->name, c->body ? c->body : longurl);
        struct err e;
        err_init(&e);
        struct poolrules_plan plan;
        int rc = poolrules_plan_update(cur, body, &plan, &e);
        if (c->ok) {
            if (rc != 0)
                fail_msg("%s: expected success, got %s", c->name, e.message);
            json_t *x = parse(c->name, c->expect);
            check_config(c->name, plan.config, x);
            json_decref(x);
            if (c->plan) {
                x = parse(c->name, c->plan);
                check_plan(c->name, &plan, x);
                json_decref(x);
            }
            poolrules_plan_clear(&plan);
        } else {
            if (rc != E_INVALID || plan.config != NULL)
                fail_msg("%s: expected E_INVALID, got %d", c->name, rc);
            if (!err_mentions(&e, c->err))
                fail_msg("%s: error lacks '%s' (%s)", c->name, c->err, e.message);
        }
        json_decref(body);
        json_decref(cur);
    }
}

/* ---- acquire ------------------------------------------------------------- */

struct acase {
    const char *name;
    const char *body;
    int ok;
    const char *err;
    const char *tel; /* expected lease telemetry ("-" = not given) */
    long long timeout;
};

static const struct acase acases[] = {
    {"acquire: the client always sends {}", "{}", 1, NULL, "-", -1},
    {"acquire: no body", NULL, 1, NULL, "-", -1},
    {"acquire: acquire_timeout_seconds", "{\"acquire_timeout_seconds\":30}", 1, NULL, "-", 30},
    {"acquire: acquire_timeout_seconds is a non-negative integer",
     "{\"acquire_timeout_seconds\":-1}", 0, "acquire_timeout_seconds", NULL, 0},
    {"acquire: a lease's telemetry merges onto the pool's for that lease",
     "{\"telemetry\":{\"browser\":{\"network\":{\"enabled\":true}}}}", 1, NULL,
     "control,connection,system,captcha,network,page", -1},
    {"acquire: lease telemetry enabled false captures nothing",
     "{\"telemetry\":{\"enabled\":false}}", 1, NULL, "null", -1},
    {"acquire: lease telemetry {} keeps the pool's", "{\"telemetry\":{}}", 1, NULL, "-", -1},
    {"acquire: pools reject export, also per lease",
     "{\"telemetry\":{\"export\":{\"otlp\":{\"destination\":{\"id\":\"d\"}}}}}", 0,
     "browser pools reject export", NULL, 0},
    {"acquire: name, start_url, tags for this lease only",
     "{\"name\":\"lease-1\",\"start_url\":\"https://l/\",\"tags\":{\"a\":\"b\"}}", 1, NULL, "-",
     -1},
    {"acquire: name pattern", "{\"name\":\"l 1\"}", 0, "name", NULL, 0},
    {"acquire: unknown fields rejected", "{\"size\":1}", 0, "size: unknown field", NULL, 0},
};

static void acquire_rules(void **state)
{
    (void)state;
    json_t *req = parse("pool", "{\"browser\":{\"page\":{\"enabled\":true}}}");
    json_t *pool = json_pack("{s:i,s:o}", "size", 1, "telemetry", telcfg_resolve_create(req));
    json_decref(req);
    for (size_t i = 0; i < sizeof acases / sizeof acases[0]; i++) {
        const struct acase *c = &acases[i];
        json_t *body = parse(c->name, c->body);
        struct poolrules_lease l;
        struct err e;
        err_init(&e);
        int rc = poolrules_validate_acquire(body, pool, &l, &e);
        if (c->ok) {
            if (rc != 0)
                fail_msg("%s: expected success, got %s", c->name, e.message);
            char buf[256];
            if (!l.telemetry_given)
                snprintf(buf, sizeof buf, "-");
            else
                on_list(l.telemetry, buf, sizeof buf);
            if (strcmp(buf, c->tel))
                fail_msg("%s: telemetry %s", c->name, buf);
            if (l.acquire_timeout_seconds != c->timeout)
                fail_msg("%s: timeout %lld", c->name, l.acquire_timeout_seconds);
            if (strstr(c->name, "this lease only") &&
                (strcmp(l.name, "lease-1") || strcmp(l.start_url, "https://l/") || !l.tags))
                fail_msg("%s: lease fields", c->name);
            poolrules_lease_clear(&l);
        } else if (rc != E_INVALID || !err_mentions(&e, c->err)) {
            fail_msg("%s: expected E_INVALID mentioning '%s' (%s)", c->name, c->err, e.message);
        }
        json_decref(body);
    }
    json_decref(pool);
}

/* Release and delete bodies: the body, the outcome, the first detail. */
static void release_delete_rules(void **state)
{
    (void)state;
    static const struct {
        const char *body;
        int ok, reuse;
        const char *detail;
    } rel[] = {
        {"{\"session_id\":\"abc\"}", 1, 1, ""},
        {"{\"session_id\":\"abc\",\"reuse\":false}", 1, 0, ""},
        {"{\"session_id\":\"abc\",\"reuse\":true}", 1, 1, ""},
        {"{}", 0, 1, "session_id: is required"},
        {"{\"session_id\":\"\"}", 0, 1, "session_id: is required"},
        {"{\"session_id\":7}", 0, 1, "session_id: is required"},
        {"{\"session_id\":\"abc\",\"reuse\":\"no\"}", 0, 1, "reuse: must be a boolean"},
        {"{\"session_id\":\"abc\",\"keep\":true}", 0, 1, "keep: unknown field"},
        {"[]", 0, 1, "must be a JSON object"},
    };
    for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) {
        json_t *b = json_loads(rel[i].body, JSON_DECODE_ANY, NULL);
        struct err e;
        err_init(&e);
        char sid[64];
        int reuse = -1;
        int rc = poolrules_validate_release(b, sid, sizeof sid, &reuse, &e);
        json_decref(b);
        if ((rc == 0) != rel[i].ok ||
            (rel[i].ok && (reuse != rel[i].reuse || strcmp(sid, "abc"))) ||
            (!rel[i].ok &&
             (!e.ndetails || strstr(e.details[0].message, rel[i].detail) != e.details[0].message)))
            fail_msg("release %s: rc %d reuse %d detail \"%s\"", rel[i].body, rc, reuse,
                     e.ndetails ? e.details[0].message : "");
    }
    static const struct {
        const char *body; /* NULL: no body */
        int ok, force;
        const char *detail;
    } del[] = {
        {NULL, 1, 0, ""},
        {"{}", 1, 0, ""},
        {"{\"force\":true}", 1, 1, ""},
        {"{\"force\":false}", 1, 0, ""},
        {"{\"force\":1}", 0, 0, "force: must be a boolean"},
        {"{\"purge\":true}", 0, 0, "purge: unknown field"},
    };
    for (size_t i = 0; i < sizeof del / sizeof *del; i++) {
        json_t *b = del[i].body ? json_loads(del[i].body, 0, NULL) : NULL;
        struct err e;
        err_init(&e);
        int force = -1;
        int rc = poolrules_validate_delete(b, &force, &e);
        json_decref(b);
        if ((rc == 0) != del[i].ok || (del[i].ok && force != del[i].force) ||
            (!del[i].ok &&
             (!e.ndetails || strstr(e.details[0].message, del[i].detail) != e.details[0].message)))
            fail_msg("delete %s: rc %d force %d", del[i].body ? del[i].body : "(none)", rc, force);
    }
}

/* poolrules_config_from_json: the values of a stored browser_pool_config,
 * each one's default when missing, of another type or out of its rule. */
static void config_values(void **state)
{
    (void)state;
    char long_url[POOLRULES_START_URL_MAX + 20];
    memset(long_url, 'a', sizeof long_url - 1);
    long_url[sizeof long_url - 1] = '\0';
    static const struct {
        const char *name; /* the rule checked */
        const char *config;
        long long size, timeout;
        double rate;
        const char *pool_name, *start_url;
    } t[] = {
        {"no configuration: every default", NULL, 1, 600, 25, "", ""},
        {"not an object: every default", "[]", 1, 600, 25, "", ""},
        {"a create's defaults as stored",
         "{\"size\":3,\"timeout_seconds\":600,\"fill_rate_per_minute\":25,"
         "\"headless\":false,\"stealth\":false,\"kiosk_mode\":false}",
         3, 600, 25, "", ""},
        {"every field set",
         "{\"size\":7,\"timeout_seconds\":259200,\"fill_rate_per_minute\":12.5,"
         "\"name\":\"p1\",\"start_url\":\"https://a.test/\"}",
         7, 259200, 12.5, "p1", "https://a.test/"},
        {"fill_rate_per_minute 0 (no refill) is kept", "{\"fill_rate_per_minute\":0}", 1, 600, 0,
         "", ""},
        {"size missing: 1", "{\"timeout_seconds\":60}", 1, 60, 25, "", ""},
        {"size a string: 1", "{\"size\":\"4\"}", 1, 600, 25, "", ""},
        {"size a real: 1", "{\"size\":4.0}", 1, 600, 25, "", ""},
        {"size 0: 1", "{\"size\":0}", 1, 600, 25, "", ""},
        {"size negative: 1", "{\"size\":-3}", 1, 600, 25, "", ""},
        {"timeout_seconds a string: 600", "{\"timeout_seconds\":\"60\"}", 1, 600, 25, "", ""},
        {"timeout_seconds below 10: 600", "{\"timeout_seconds\":9}", 1, 600, 25, "", ""},
        {"timeout_seconds above 259200: 600", "{\"timeout_seconds\":259201}", 1, 600, 25, "", ""},
        {"fill_rate_per_minute an integer", "{\"fill_rate_per_minute\":50}", 1, 600, 50, "", ""},
        {"fill_rate_per_minute negative: 25", "{\"fill_rate_per_minute\":-1}", 1, 600, 25, "", ""},
        {"fill_rate_per_minute a string: 25", "{\"fill_rate_per_minute\":\"5\"}", 1, 600, 25, "",
         ""},
        {"fill_rate_per_minute a boolean: 25", "{\"fill_rate_per_minute\":true}", 1, 600, 25, "",
         ""},
        {"name a number: none", "{\"name\":5}", 1, 600, 25, "", ""},
        {"start_url null: none", "{\"start_url\":null}", 1, 600, 25, "", ""},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        json_t *cfg = t[i].config ? parse(t[i].name, t[i].config) : NULL;
        struct poolrules_config c;
        memset(&c, 0xa5, sizeof c);
        poolrules_config_from_json(cfg, &c);
        if (c.size != t[i].size || c.timeout_seconds != t[i].timeout ||
            c.fill_rate_per_minute != t[i].rate || strcmp(c.name, t[i].pool_name) != 0 ||
            strcmp(c.start_url, t[i].start_url) != 0)
            fail_msg("%s: size %lld timeout %lld rate %g name \"%s\" start_url \"%s\"", t[i].name,
                     c.size, c.timeout_seconds, c.fill_rate_per_minute, c.name, c.start_url);
        json_decref(cfg);
    }
    /* A string longer than its buffer reads as none, never cut short. */
    json_t *cfg = json_pack("{s:s,s:s}", "start_url", long_url, "name", long_url);
    struct poolrules_config c;
    poolrules_config_from_json(cfg, &c);
    assert_string_equal(c.start_url, "");
    assert_string_equal(c.name, "");
    json_decref(cfg);
    /* The longest of each fits. */
    cfg = json_pack("{s:s%,s:s%}", "start_url", long_url, (size_t)POOLRULES_START_URL_MAX, "name",
                    long_url, (size_t)POOLRULES_NAME_MAX);
    poolrules_config_from_json(cfg, &c);
    assert_int_equal(strlen(c.start_url), POOLRULES_START_URL_MAX);
    assert_int_equal(strlen(c.name), POOLRULES_NAME_MAX);
    json_decref(cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(create_rules),  cmocka_unit_test(update_rules),
        cmocka_unit_test(acquire_rules), cmocka_unit_test(release_delete_rules),
        cmocka_unit_test(config_values),
    };
    return cmocka_run_group_tests_name("domain/pool_rules", tests, NULL, NULL);
}
