/* Unit tests for domain/viewport: BrowserViewport parsing, image defaults, the
 * refresh rate chosen from the resolution and the known-good presets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "domain/viewport.h"

struct parse_case {
    const char *name; /* the rule checked */
    const char *json;
    int allow_force;
    int rc;          /* 0 or E_INVALID */
    const char *msg; /* substring of the first detail, or NULL */
    size_t ndetails; /* 0 = not checked */
    int w, h, r, force;
};

static const struct parse_case parse_cases[] = {
    {"BrowserViewport: width, height required; refresh_rate optional",
     "{\"width\":1920,\"height\":1080}", 0, 0, NULL, 0, 1920, 1080, 0, 0},
    {"BrowserViewport: refresh_rate (integer, >= 1, optional, Hz)",
     "{\"width\":1280,\"height\":800,\"refresh_rate\":60}", 0, 0, NULL, 0, 1280, 800, 60, 0},
    {"Any positive width, height and refresh_rate are accepted (1x1@1)",
     "{\"width\":1,\"height\":1,\"refresh_rate\":1}", 0, 0, NULL, 0, 1, 1, 1, 0},
    {"Any positive width, height and refresh_rate are accepted (INT_MAX)",
     "{\"width\":2147483647,\"height\":2147483647,\"refresh_rate\":2147483647}", 0, 0, NULL, 0,
     2147483647, 2147483647, 2147483647, 0},
    {"width >= 1: 0 rejected", "{\"width\":0,\"height\":1080}", 0, E_INVALID,
     "viewport.width: must be an integer >= 1", 1, 0, 0, 0, 0},
    {"width >= 1: -1 rejected", "{\"width\":-1,\"height\":1080}", 0, E_INVALID,
     "viewport.width: must be an integer >= 1 (got -1)", 1, 0, 0, 0, 0},
    {"width integer: 1.5 rejected", "{\"width\":1.5,\"height\":1080}", 0, E_INVALID,
     "viewport.width: must be an integer", 1, 0, 0, 0, 0},
    {"width integer: 1920.0 rejected (a real)", "{\"width\":1920.0,\"height\":1080}", 0, E_INVALID,
     "viewport.width", 1, 0, 0, 0, 0},
    {"width integer: \"1\" rejected", "{\"width\":\"1\",\"height\":1080}", 0, E_INVALID,
     "not string", 1, 0, 0, 0, 0},
    {"width integer: true rejected", "{\"width\":true,\"height\":1080}", 0, E_INVALID,
     "not boolean", 1, 0, 0, 0, 0},
    {"width integer: null rejected", "{\"width\":null,\"height\":1080}", 0, E_INVALID, "not null",
     1, 0, 0, 0, 0},
    {"width: 2147483648 (> INT_MAX) rejected", "{\"width\":2147483648,\"height\":1080}", 0,
     E_INVALID, "got 2147483648", 1, 0, 0, 0, 0},
    {"height >= 1: 0 rejected", "{\"width\":1920,\"height\":0}", 0, E_INVALID,
     "viewport.height: must be an integer >= 1", 1, 0, 0, 0, 0},
    {"height >= 1: -1 rejected", "{\"width\":1920,\"height\":-1}", 0, E_INVALID, "viewport.height",
     1, 0, 0, 0, 0},
    {"height integer: 1.5 rejected", "{\"width\":1920,\"height\":1.5}", 0, E_INVALID,
     "viewport.height", 1, 0, 0, 0, 0},
    {"height integer: \"1\" rejected", "{\"width\":1920,\"height\":\"1\"}", 0, E_INVALID,
     "viewport.height", 1, 0, 0, 0, 0},
    {"height integer: true rejected", "{\"width\":1920,\"height\":true}", 0, E_INVALID,
     "viewport.height", 1, 0, 0, 0, 0},
    {"height: 2147483648 rejected", "{\"width\":1920,\"height\":2147483648}", 0, E_INVALID,
     "viewport.height", 1, 0, 0, 0, 0},
    {"refresh_rate >= 1: 0 rejected", "{\"width\":1920,\"height\":1080,\"refresh_rate\":0}", 0,
     E_INVALID, "viewport.refresh_rate: must be an integer >= 1", 1, 0, 0, 0, 0},
    {"refresh_rate >= 1: -1 rejected", "{\"width\":1920,\"height\":1080,\"refresh_rate\":-1}", 0,
     E_INVALID, "viewport.refresh_rate", 1, 0, 0, 0, 0},
    {"refresh_rate integer: 1.5 rejected", "{\"width\":1920,\"height\":1080,\"refresh_rate\":1.5}",
     0, E_INVALID, "viewport.refresh_rate", 1, 0, 0, 0, 0},
    {"refresh_rate integer: \"1\" rejected",
     "{\"width\":1920,\"height\":1080,\"refresh_rate\":\"1\"}", 0, E_INVALID,
     "viewport.refresh_rate", 1, 0, 0, 0, 0},
    {"refresh_rate integer: true rejected",
     "{\"width\":1920,\"height\":1080,\"refresh_rate\":true}", 0, E_INVALID,
     "viewport.refresh_rate", 1, 0, 0, 0, 0},
    {"refresh_rate: 2147483648 rejected",
     "{\"width\":1920,\"height\":1080,\"refresh_rate\":2147483648}", 0, E_INVALID,
     "viewport.refresh_rate", 1, 0, 0, 0, 0},
    {"width and height required: width missing", "{\"height\":1080}", 0, E_INVALID,
     "viewport.width: is required", 1, 0, 0, 0, 0},
    {"width and height required: height missing", "{\"width\":1920}", 0, E_INVALID,
     "viewport.height: is required", 1, 0, 0, 0, 0},
    {"width and height required: {} gives both problems", "{}", 0, E_INVALID, NULL, 2, 0, 0, 0, 0},
    {"viewport: an object (array rejected)", "[1920,1080]", 0, E_INVALID,
     "viewport: must be an object", 1, 0, 0, 0, 0},
    {"viewport: an object (string rejected)", "\"1920x1080\"", 0, E_INVALID,
     "viewport: must be an object", 1, 0, 0, 0, 0},
    {"viewport: cannot be cleared (null rejected)", "null", 0, E_INVALID, "not null", 1, 0, 0, 0,
     0},
    {"session update: BrowserViewport fields plus force (boolean)",
     "{\"width\":1024,\"height\":768,\"force\":true}", 1, 0, NULL, 0, 1024, 768, 0, 1},
    {"session update: force default false", "{\"width\":1024,\"height\":768}", 1, 0, NULL, 0, 1024,
     768, 0, 0},
    {"session update: force false", "{\"width\":1024,\"height\":768,\"force\":false}", 1, 0, NULL,
     0, 1024, 768, 0, 0},
    {"session update: force must be a boolean", "{\"width\":1024,\"height\":768,\"force\":\"yes\"}",
     1, E_INVALID, "viewport.force: must be a boolean", 1, 0, 0, 0, 0},
    {"pool viewport (width, height, optional refresh_rate): force is an unknown field",
     "{\"width\":1024,\"height\":768,\"force\":true}", 0, E_INVALID,
     "viewport.force: unknown field", 1, 0, 0, 0, 0},
    {"BrowserViewport: no other properties", "{\"width\":1024,\"height\":768,\"depth\":24}", 0,
     E_INVALID, "viewport.depth: unknown field", 1, 0, 0, 0, 0},
    {"every problem is reported", "{\"width\":0,\"height\":\"x\",\"refresh_rate\":1.5,\"z\":1}", 0,
     E_INVALID, NULL, 4, 0, 0, 0, 0},
};

static void parse_table(void **state)
{
    (void)state;
    int failures = 0;
    for (size_t i = 0; i < sizeof parse_cases / sizeof parse_cases[0]; i++) {
        const struct parse_case *c = &parse_cases[i];
        json_error_t je;
        json_t *v = json_loads(c->json, JSON_DECODE_ANY, &je);
        if (!v)
            fail_msg("bad test JSON in %s: %s", c->name, je.text);
        struct err e;
        err_init(&e);
        struct viewport vp;
        int force = -1;
        int rc = viewport_parse("viewport", v, c->allow_force, &vp, &force, &e);
        json_decref(v);
        const char *first = e.ndetails ? e.details[0].message : "";
        int ok = rc == c->rc && (!c->msg || strstr(first, c->msg)) &&
                 (!c->ndetails || e.ndetails == c->ndetails) && (rc != 0 || e.ndetails == 0);
        if (ok && rc == 0)
            ok = vp.width == c->w && vp.height == c->h && vp.refresh_rate == c->r &&
                 force == c->force;
        if (!ok) {
            print_error("FAIL %s: rc %d (want %d), %zu details, first \"%s\"\n", c->name, rc, c->rc,
                        e.ndetails, first);
            failures++;
        }
    }
    if (failures)
        fail_msg("%d case(s) failed", failures);
}

struct rate_case {
    const char *name;
    int w, h, gpu, want;
};

static const struct rate_case rate_cases[] = {
    {"preset 2560x1440@10", 2560, 1440, 0, 10},
    {"preset 1920x1080@25", 1920, 1080, 0, 25},
    {"preset 1920x1200@25", 1920, 1200, 0, 25},
    {"preset 1440x900@25", 1440, 900, 0, 25},
    {"preset 1280x800@60", 1280, 800, 0, 60},
    {"preset 1024x768@60", 1024, 768, 0, 60},
    {"preset 1200x800@60", 1200, 800, 0, 60},
    {"preset 768x1024@60", 768, 1024, 0, 60},
    {"preset 390x844@60", 390, 844, 0, 60},
    {"threshold: just above 1280x800 pixels gets 25", 1281, 800, 0, 25},
    {"threshold: just above 1920x1200 pixels gets 10", 1920, 1201, 0, 10},
    {"higher resolutions get lower rates: 3840x2160 gets 10", 3840, 2160, 0, 10},
    {"GPU default 1920x1080 at 60 Hz", 1920, 1080, 1, 60},
    {"GPU: 1920x1200 gets 60", 1920, 1200, 1, 60},
    {"GPU: 2560x1440 gets 30", 2560, 1440, 1, 30},
    {"GPU: 3840x2160 gets 25", 3840, 2160, 1, 25},
    {"GPU: 800x600 gets 60", 800, 600, 1, 60},
    {"huge sizes do not overflow", 2147483647, 2147483647, 0, 10},
    {"non-positive sizes get the small-size rate", 0, -5, 0, 60},
};

static void refresh_for_table(void **state)
{
    (void)state;
    int failures = 0;
    for (size_t i = 0; i < sizeof rate_cases / sizeof rate_cases[0]; i++) {
        const struct rate_case *c = &rate_cases[i];
        int got = viewport_refresh_for(c->w, c->h, c->gpu);
        if (got != c->want) {
            print_error("FAIL %s: got %d, want %d\n", c->name, got, c->want);
            failures++;
        }
    }
    if (failures)
        fail_msg("%d case(s) failed", failures);
}

struct good_case {
    const char *name;
    struct viewport vp;
    int gpu, want;
};

static const struct good_case good_cases[] = {
    {"Known-good preset 2560x1440@10", {2560, 1440, 10}, 0, 1},
    {"Known-good preset 1920x1080@25", {1920, 1080, 25}, 0, 1},
    {"Known-good preset 1920x1200@25", {1920, 1200, 25}, 0, 1},
    {"Known-good preset 1440x900@25", {1440, 900, 25}, 0, 1},
    {"Known-good preset 1280x800@60", {1280, 800, 60}, 0, 1},
    {"Known-good preset 1024x768@60", {1024, 768, 60}, 0, 1},
    {"Known-good preset 1200x800@60", {1200, 800, 60}, 0, 1},
    {"Known-good preset 768x1024@60", {768, 1024, 60}, 0, 1},
    {"Known-good preset 390x844@60", {390, 844, 60}, 0, 1},
    {"Known-good: omitted rate is chosen first (1920x1080 -> 25)", {1920, 1080, 0}, 0, 1},
    {"not a preset: 1920x1080@60 on a non-GPU image", {1920, 1080, 60}, 0, 0},
    {"not a preset: 800x600@60 on a non-GPU image", {800, 600, 60}, 0, 0},
    {"GPU recommended: 1920x1080@60", {1920, 1080, 60}, 1, 1},
    {"GPU recommended: 800x600@30", {800, 600, 30}, 1, 1},
    {"GPU recommended: 360x250@10", {360, 250, 10}, 1, 1},
    {"GPU recommended: 800x1600@25", {800, 1600, 25}, 1, 1},
    {"GPU recommended: 1368x768@60", {1368, 768, 60}, 1, 1},
    {"GPU: rate 45 is not among 60, 30, 25 or 10", {800, 600, 45}, 1, 0},
    {"GPU: 2560x1440 is not in the recommended list", {2560, 1440, 10}, 1, 0},
    {"GPU: omitted rate is chosen first (1024x576 -> 60)", {1024, 576, 0}, 1, 1},
};

static void known_good_table(void **state)
{
    (void)state;
    int failures = 0;
    for (size_t i = 0; i < sizeof good_cases / sizeof good_cases[0]; i++) {
        const struct good_case *c = &good_cases[i];
        int got = viewport_is_known_good(&c->vp, c->gpu);
        if (got != c->want) {
            print_error("FAIL %s: got %d, want %d\n", c->name, got, c->want);
            failures++;
        }
    }
    if (failures)
        fail_msg("%d case(s) failed", failures);
}

/* "when omitted at creation, the image default applies (1920x1080 at 25 Hz;
 * for GPU images 1920x1080 at 60 Hz)" */
static void image_defaults(void **state)
{
    (void)state;
    struct viewport vp;
    viewport_default(0, &vp);
    assert_int_equal(vp.width, 1920);
    assert_int_equal(vp.height, 1080);
    assert_int_equal(vp.refresh_rate, 25);
    assert_true(viewport_is_known_good(&vp, 0));
    viewport_default(1, &vp);
    assert_int_equal(vp.refresh_rate, 60);
    assert_true(viewport_is_known_good(&vp, 1));
    struct viewport r = {1280, 800, 0};
    viewport_fill_rate(&r, 0);
    assert_int_equal(r.refresh_rate, 60);
    struct viewport kept = {1280, 800, 7};
    viewport_fill_rate(&kept, 0);
    assert_int_equal(kept.refresh_rate, 7);
}

static void to_json(void **state)
{
    (void)state;
    struct viewport vp = {1024, 768, 60};
    json_t *o = viewport_to_json(&vp);
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(s, "{\"height\":768,\"refresh_rate\":60,\"width\":1024}");
    free(s);
    json_decref(o);
    struct viewport no_rate = {1024, 768, 0};
    o = viewport_to_json(&no_rate);
    s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(s, "{\"height\":768,\"width\":1024}");
    free(s);
    json_decref(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_table),      cmocka_unit_test(refresh_for_table),
        cmocka_unit_test(known_good_table), cmocka_unit_test(image_defaults),
        cmocka_unit_test(to_json),
    };
    return cmocka_run_group_tests_name("domain/viewport", tests, NULL, NULL);
}
