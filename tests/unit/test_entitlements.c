/* Unit tests for domain/entitlements: the built-in plans and the five
 * resolution steps of OPERATOR.md, one case per sentence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <string.h>

#include "domain/entitlements.h"

#define NOW 1800000000000LL /* a fixed "now" (ms) */

static json_t *lookup(void *ctx, const char *id)
{
    (void)ctx;
    return ent_builtin(id);
}

struct rcase {
    const char *rule;
    const char *plan, *status, *trial;
    int64_t trial_end;
    const char *overrides;
    /* expected */
    const char *effective;
    int trialing;
    long long browsers; /* limits.max_concurrent_browsers; -1 = null (unlimited) */
    int extensions_on;
};

static const struct rcase cases[] = {
    {"1. the org's plan selects the base values (developer: 5 browsers)", "developer", "active",
     NULL, 0, NULL, "developer", 0, 5, 0},
    {"built-in: hobbyist has 10 browsers and browser_extensions", "hobbyist", "active", NULL, 0,
     NULL, "hobbyist", 0, 10, 1},
    {"built-in: startup has 150 browsers", "startup", "active", NULL, 0, NULL, "startup", 0, 150,
     1},
    {"built-in: enterprise limits are null (unlimited)", "enterprise", "active", NULL, 0, NULL,
     "enterprise", 0, -1, 1},
    {"2. a future trial applies the trial plan's values", "developer", "active", "startup",
     NOW + 86400000, NULL, "startup", 1, 150, 1},
    {"2. an ended trial does not apply", "developer", "active", "startup", NOW - 1, NULL,
     "developer", 0, 5, 0},
    {"3. canceled applies developer and no trial", "startup", "canceled", "enterprise",
     NOW + 86400000, NULL, "developer", 0, 5, 0},
    {"3. unpaid applies developer", "enterprise", "unpaid", NULL, 0, NULL, "developer", 0, 5, 0},
    {"3. past_due changes nothing", "startup", "past_due", NULL, 0, NULL, "startup", 0, 150, 1},
    {"5. overrides merge last, key by key", "developer", "active", NULL, 0,
     "{\"limits\":{\"max_concurrent_browsers\":7},\"features\":{\"browser_extensions\":"
     "{\"enabled\":true}}}",
     "developer", 0, 7, 1},
    {"5. null in overrides sets a nullable limit to unlimited", "developer", "active", NULL, 0,
     "{\"limits\":{\"max_concurrent_browsers\":null}}", "developer", 0, -1, 0},
};

static void resolution(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const struct rcase *c = &cases[i];
        json_t *ov = c->overrides ? json_loads(c->overrides, 0, NULL) : NULL;
        struct ent_org org = {c->plan, c->status, c->trial, c->trial_end, ov};
        struct err e;
        err_init(&e);
        json_t *r = NULL;
        if (ent_resolve(&org, NOW, lookup, NULL, &r, &e) != 0)
            fail_msg("%s: %s", c->rule, e.message);
        json_t *plan = json_object_get(r, "plan");
        if (strcmp(json_string_value(json_object_get(plan, "id")), c->plan) != 0)
            fail_msg("%s: 4. plan.id is always the org's plan", c->rule);
        if (strcmp(json_string_value(json_object_get(plan, "effective_id")), c->effective) != 0)
            fail_msg("%s: effective_id %s", c->rule,
                     json_string_value(json_object_get(plan, "effective_id")));
        if (json_is_true(json_object_get(plan, "is_trialing")) != c->trialing)
            fail_msg("%s: is_trialing", c->rule);
        if (!c->trialing && !json_is_null(json_object_get(plan, "trial_ends_at")))
            fail_msg("%s: trial_ends_at is null when not trialing", c->rule);
        if (strcmp(json_string_value(json_object_get(plan, "status")), c->status) != 0)
            fail_msg("%s: plan.status reports the stored status", c->rule);
        int64_t lim = 0;
        int limited = ent_limit(r, "max_concurrent_browsers", &lim);
        if ((c->browsers < 0 && limited) || (c->browsers >= 0 && (!limited || lim != c->browsers)))
            fail_msg("%s: max_concurrent_browsers %s%lld", c->rule, limited ? "" : "null ",
                     (long long)lim);
        if (ent_feature_on(r, "browser_extensions") != c->extensions_on)
            fail_msg("%s: browser_extensions", c->rule);
        json_decref(r);
        json_decref(ov);
    }
}

/* "An unknown plan id in an org is a 400" (admin); resolution of a plan that
 * vanished is the server's fault, E_INTERNAL. */
static void unknown_plan(void **state)
{
    (void)state;
    struct ent_org org = {"gold", "active", NULL, 0, NULL};
    struct err e;
    err_init(&e);
    json_t *r = NULL;
    assert_int_equal(ent_resolve(&org, NOW, lookup, NULL, &r, &e), E_INTERNAL);
    assert_null(r);
    assert_null(ent_builtin("gold"));
    assert_true(ent_valid_plan_id("my-plan_2"));
    assert_false(ent_valid_plan_id("My Plan"));
}

/* "features.browser_replays.retention_days is never null". */
static void overrides_validation(void **state)
{
    (void)state;
    static const struct {
        const char *doc;
        int ok;
    } docs[] = {
        {"{\"limits\":{\"max_concurrent_browsers\":null}}", 1},
        {"{\"limits\":{\"max_concurrent_browsers\":\"5\"}}", 0},
        {"{\"features\":{\"browser_replays\":{\"retention_days\":null}}}", 0},
        {"{\"features\":{\"teleport\":{\"enabled\":true}}}", 0},
        {"{\"plan\":{}}", 0},
    };
    for (size_t i = 0; i < sizeof docs / sizeof *docs; i++) {
        json_t *v = json_loads(docs[i].doc, 0, NULL);
        struct err e;
        err_init(&e);
        if ((ent_validate_overrides("overrides", v, &e) == 0) != docs[i].ok)
            fail_msg("%s: %s", docs[i].doc, e.message);
        json_decref(v);
    }
}

/* Issue 29.12: limits.max_profiles and limits.max_profile_bytes, added to
 * the document's shape: numbers on the paid plans, null on enterprise
 * ("all numeric limits null"), and accepted in overrides. */
struct pcase {
    const char *plan;
    long long profiles, bytes; /* -1: null */
};

static void profile_limits(void **state)
{
    (void)state;
    static const struct pcase plans[] = {
        {"developer", 10, 64LL << 20},
        {"hobbyist", 50, 128LL << 20},
        {"startup", 1000, 256LL << 20},
        {"enterprise", -1, -1},
    };
    for (size_t i = 0; i < sizeof plans / sizeof *plans; i++) {
        json_t *ent = ent_builtin(plans[i].plan);
        assert_non_null(ent);
        const json_t *l = json_object_get(ent, "limits");
        const json_t *p = json_object_get(l, "max_profiles"),
                     *b = json_object_get(l, "max_profile_bytes");
        if (plans[i].profiles < 0) {
            assert_true(json_is_null(p) && json_is_null(b));
        } else {
            assert_int_equal(json_integer_value(p), plans[i].profiles);
            assert_int_equal(json_integer_value(b), plans[i].bytes);
        }
        json_decref(ent);
    }
    struct err e;
    err_init(&e);
    json_t *o = json_loads("{\"limits\":{\"max_profiles\":3,\"max_profile_bytes\":null}}", 0, NULL);
    assert_int_equal(ent_validate_overrides("overrides", o, &e), 0);
    json_decref(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(resolution),
        cmocka_unit_test(unknown_plan),
        cmocka_unit_test(overrides_validation),
        cmocka_unit_test(profile_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
