/* Unit tests for domain/launch_settings: the launch settings read from a
 * session's stored settings document, their defaults, every field, and
 * documents of another shape (wrong types, missing keys), which read as the
 * defaults and never fail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "domain/launch_settings.h"
#include "domain/session_rules.h"

#define GIB (1LL << 30)

/* The settings of a document without any of them. */
#define DEFAULTS 1, 0, 0, 0, 1920, 1080, 25, 8 * GIB, SESSRULES_TIMEOUT_DEFAULT, 0, 0

struct ls_case {
    const char *name; /* the rule checked */
    const char *doc;  /* NULL: no document */
    int headless, stealth, kiosk_mode, gpu;
    int width, height, refresh_rate;
    long long memory_bytes, timeout_seconds;
    int has_policy, has_network;
};

static const struct ls_case cases[] = {
    {"no document: every default", NULL, DEFAULTS},
    {"an empty document: every default", "{}", DEFAULTS},
    {"not an object: every default", "[1,2]", DEFAULTS},
    {"a document as a create with no options writes it",
     "{\"headless\":false,\"stealth\":false,\"kiosk_mode\":false,\"gpu\":false,"
     "\"timeout_seconds\":60,\"region\":\"us-east\",\"memory\":\"8GiB\","
     "\"viewport\":{\"width\":1920,\"height\":1080,\"refresh_rate\":25},"
     "\"telemetry\":null,\"proxy\":{\"mode\":\"default\"}}",
     0, 0, 0, 0, 1920, 1080, 25, 8 * GIB, 60, 0, 0},
    {"every field set",
     "{\"headless\":true,\"stealth\":true,\"kiosk_mode\":true,\"gpu\":true,"
     "\"timeout_seconds\":259200,\"memory\":\"16GiB\","
     "\"viewport\":{\"width\":1280,\"height\":800,\"refresh_rate\":30},"
     "\"chrome_policy\":{\"HomepageLocation\":\"https://a.test/\"},"
     "\"network\":{\"allow\":[]}}",
     1, 1, 1, 1, 1280, 800, 30, 16 * GIB, 259200, 1, 1},
    {"memory: each value of the create's enum (1GiB)", "{\"memory\":\"1GiB\"}", 1, 0, 0, 0, 1920,
     1080, 25, 1 * GIB, 60, 0, 0},
    {"memory: 6GiB", "{\"memory\":\"6GiB\"}", 1, 0, 0, 0, 1920, 1080, 25, 6 * GIB, 60, 0, 0},
    {"headless missing: headless (no display assumed)", "{\"stealth\":true}", 1, 1, 0, 0, 1920,
     1080, 25, 8 * GIB, 60, 0, 0},
    {"headless false: headful", "{\"headless\":false}", 0, 0, 0, 0, 1920, 1080, 25, 8 * GIB, 60, 0,
     0},
    {"booleans of another type read as their defaults",
     "{\"headless\":0,\"stealth\":\"true\",\"kiosk_mode\":1,\"gpu\":null}", DEFAULTS},
    {"viewport without refresh_rate: the rate for its size (1280x800 -> 60)",
     "{\"viewport\":{\"width\":1280,\"height\":800}}", 1, 0, 0, 0, 1280, 800, 60, 8 * GIB, 60, 0,
     0},
    {"viewport without refresh_rate on a GPU image: the GPU rate (1920x1080 -> 60)",
     "{\"gpu\":true,\"viewport\":{\"width\":1920,\"height\":1080}}", 1, 0, 0, 1, 1920, 1080, 60,
     8 * GIB, 60, 0, 0},
    {"no viewport on a GPU image: the GPU image default (1920x1080 at 60)", "{\"gpu\":true}", 1, 0,
     0, 1, 1920, 1080, 60, 8 * GIB, 60, 0, 0},
    {"viewport not an object: the default screen", "{\"viewport\":\"1280x800\"}", DEFAULTS},
    {"viewport width a string: the default screen, both sides",
     "{\"viewport\":{\"width\":\"1280\",\"height\":800}}", DEFAULTS},
    {"viewport height 0: the default screen", "{\"viewport\":{\"width\":1280,\"height\":0}}",
     DEFAULTS},
    {"viewport width negative: the default screen", "{\"viewport\":{\"width\":-5,\"height\":800}}",
     DEFAULTS},
    {"viewport width a real: the default screen",
     "{\"viewport\":{\"width\":1280.0,\"height\":800}}", DEFAULTS},
    {"viewport width > INT_MAX: the default screen",
     "{\"viewport\":{\"width\":2147483648,\"height\":800}}", DEFAULTS},
    {"viewport height missing: the default screen", "{\"viewport\":{\"width\":1280}}", DEFAULTS},
    {"refresh_rate of another type: the rate for the size",
     "{\"viewport\":{\"width\":1280,\"height\":800,\"refresh_rate\":\"60\"}}", 1, 0, 0, 0, 1280,
     800, 60, 8 * GIB, 60, 0, 0},
    {"refresh_rate 0: the rate for the size",
     "{\"viewport\":{\"width\":2560,\"height\":1440,\"refresh_rate\":0}}", 1, 0, 0, 0, 2560, 1440,
     10, 8 * GIB, 60, 0, 0},
    {"a stored rate is kept on the default screen",
     "{\"viewport\":{\"width\":0,\"height\":0,\"refresh_rate\":60}}", 1, 0, 0, 0, 1920, 1080, 60,
     8 * GIB, 60, 0, 0},
    {"memory a number: the default", "{\"memory\":8}", DEFAULTS},
    {"memory without digits: the default", "{\"memory\":\"GiB\"}", DEFAULTS},
    {"memory too large for a long long: the default", "{\"memory\":\"99999999999999999999GiB\"}",
     DEFAULTS},
    {"timeout_seconds a string: the default", "{\"timeout_seconds\":\"600\"}", DEFAULTS},
    {"timeout_seconds below the floor: the default", "{\"timeout_seconds\":0}", DEFAULTS},
    {"timeout_seconds above the maximum: the default", "{\"timeout_seconds\":259201}", DEFAULTS},
    {"timeout_seconds at the minimum", "{\"timeout_seconds\":10}", 1, 0, 0, 0, 1920, 1080, 25,
     8 * GIB, 10, 0, 0},
    {"chrome_policy empty: none", "{\"chrome_policy\":{}}", DEFAULTS},
    {"chrome_policy not an object: none", "{\"chrome_policy\":\"x\"}", DEFAULTS},
    {"network not an object: none", "{\"network\":[1]}", DEFAULTS},
    {"network empty object: kept", "{\"network\":{}}", 1, 0, 0, 0, 1920, 1080, 25, 8 * GIB, 60, 0,
     1},
};

static void check(const struct ls_case *c, const struct launch_settings *ls, int text)
{
    int ok = ls->headless == c->headless && ls->stealth == c->stealth &&
             ls->kiosk_mode == c->kiosk_mode && ls->gpu == c->gpu &&
             ls->viewport.width == c->width && ls->viewport.height == c->height &&
             ls->viewport.refresh_rate == c->refresh_rate && ls->memory_bytes == c->memory_bytes &&
             ls->timeout_seconds == c->timeout_seconds;
    /* From the text, the borrowed objects are never kept. */
    int policy = text ? 0 : c->has_policy, network = text ? 0 : c->has_network;
    ok = ok && (ls->chrome_policy != NULL) == policy && (ls->network != NULL) == network;
    if (!ok)
        fail_msg("%s (%s): headless %d stealth %d kiosk %d gpu %d viewport %dx%d@%d memory %lld "
                 "timeout %lld policy %d network %d",
                 c->name, text ? "text" : "json", ls->headless, ls->stealth, ls->kiosk_mode,
                 ls->gpu, ls->viewport.width, ls->viewport.height, ls->viewport.refresh_rate,
                 ls->memory_bytes, ls->timeout_seconds, ls->chrome_policy != NULL,
                 ls->network != NULL);
}

static void from_json_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *doc = cases[i].doc ? json_loads(cases[i].doc, JSON_DECODE_ANY, NULL) : NULL;
        if (cases[i].doc && !doc)
            fail_msg("%s: bad test JSON", cases[i].name);
        struct launch_settings ls;
        memset(&ls, 0xa5, sizeof ls); /* every field is written */
        launch_settings_from_json(doc, &ls);
        check(&cases[i], &ls, 0);
        if (cases[i].has_policy)
            assert_ptr_equal(ls.chrome_policy, json_object_get(doc, "chrome_policy"));
        json_decref(doc);
    }
}

static void from_text_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct launch_settings ls;
        memset(&ls, 0xa5, sizeof ls);
        launch_settings_from_text(cases[i].doc, &ls);
        check(&cases[i], &ls, 1);
    }
    /* Text that does not parse reads as no document. */
    static const struct ls_case broken = {"text that does not parse", NULL, DEFAULTS};
    static const char *const texts[] = {"", "{", "{\"headless\":fals}", "null"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        struct launch_settings ls;
        launch_settings_from_text(texts[i], &ls);
        check(&broken, &ls, 1);
    }
}

static void memory_bytes_cases(void **state)
{
    (void)state;
    static const struct {
        const char *memory;
        long long bytes;
    } t[] = {
        {"1GiB", GIB},
        {"2GiB", 2 * GIB},
        {"6GiB", 6 * GIB},
        {"8GiB", 8 * GIB},
        {"16GiB", 16 * GIB},
        {"8", 8 * GIB},
        {"", 0},
        {"GiB", 0},
        {"-1GiB", 0},
        {"8589934591GiB", 8589934591LL * GIB},
        {"8589934592GiB", 0}, /* 2^33 GiB = 2^63 bytes: does not fit */
        {"99999999999999999999999GiB", 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (launch_memory_bytes(t[i].memory) != t[i].bytes)
            fail_msg("memory \"%s\": %lld, expected %lld", t[i].memory,
                     launch_memory_bytes(t[i].memory), t[i].bytes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(from_json_cases),
        cmocka_unit_test(from_text_cases),
        cmocka_unit_test(memory_bytes_cases),
    };
    return cmocka_run_group_tests_name("domain/launch_settings", tests, NULL, NULL);
}
