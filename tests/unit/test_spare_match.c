/* Unit tests for domain/spare_match: which create a pre-launched spare can
 * serve (issue 21: "settings that can be applied to a running browser are
 * applied at hand-out; settings that need a different launch fall back to a
 * cold launch"). One case per field of POST /browsers, named after it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "core/err.h"
#include "domain/spare_match.h"

#define NCASES(a) (sizeof(a) / sizeof((a)[0]))

struct match_case {
    const char *name;
    const char *body;     /* a valid POST /browsers body */
    enum spare_kind kind; /* expected */
    const char *field;    /* the field named when SPARE_NONE */
};

static const struct match_case cases[] = {
    /* The two kinds a spare is launched as. */
    {"{} (headless defaults to false) takes a headful spare", "{}", SPARE_HEADFUL, NULL},
    {"headless true takes a headless spare", "{\"headless\":true}", SPARE_HEADLESS, NULL},
    {"headless false takes a headful spare", "{\"headless\":false}", SPARE_HEADFUL, NULL},
    /* Applied at hand-out to the running browser. */
    {"name is applied at hand-out", "{\"name\":\"n1\"}", SPARE_HEADFUL, NULL},
    {"tags are applied at hand-out", "{\"headless\":true,\"tags\":{\"a\":\"b\"}}", SPARE_HEADLESS,
     NULL},
    {"timeout_seconds is applied at hand-out", "{\"timeout_seconds\":60}", SPARE_HEADFUL, NULL},
    {"start_url is a navigation at hand-out", "{\"start_url\":\"https://example.com/\"}",
     SPARE_HEADFUL, NULL},
    {"telemetry without export is configured at hand-out", "{\"telemetry\":{\"enabled\":true}}",
     SPARE_HEADFUL, NULL},
    {"region of this server is checked like any create", "{\"region\":\"us-east\"}", SPARE_HEADFUL,
     NULL},
    /* The egress listener is given the owner's selection and rules at
     * hand-out (egress_rekey), so proxy and network are applied too. */
    {"proxy direct is applied to the egress at hand-out", "{\"proxy\":{\"mode\":\"direct\"}}",
     SPARE_HEADFUL, NULL},
    {"proxy by id is applied to the egress at hand-out",
     "{\"headless\":true,\"proxy\":{\"id\":\"p1\"}}", SPARE_HEADLESS, NULL},
    {"proxy by name is applied to the egress at hand-out", "{\"proxy\":{\"name\":\"n\"}}",
     SPARE_HEADFUL, NULL},
    {"proxy_id (legacy) is applied to the egress at hand-out", "{\"proxy_id\":\"p1\"}",
     SPARE_HEADFUL, NULL},
    {"disable_default_proxy is applied to the egress at hand-out",
     "{\"disable_default_proxy\":true}", SPARE_HEADFUL, NULL},
    {"network private_hosts are applied to the egress at hand-out",
     "{\"network\":{\"private_hosts\":[\"10.0.0.1\"]}}", SPARE_HEADFUL, NULL},
    {"network proxy_routes are applied to the egress at hand-out",
     "{\"headless\":true,\"network\":{\"proxy_routes\":[{\"hosts\":[\"a.example.com\"],"
     "\"proxy\":{\"id\":\"p1\"}}]}}",
     SPARE_HEADLESS, NULL},
    /* Equal to what a spare was launched with: still a spare. */
    {"stealth false is the launch default", "{\"stealth\":false}", SPARE_HEADFUL, NULL},
    {"kiosk_mode false is the launch default", "{\"kiosk_mode\":false}", SPARE_HEADFUL, NULL},
    {"memory 8GiB is the launch default", "{\"memory\":\"8GiB\"}", SPARE_HEADFUL, NULL},
    {"the default viewport is the launch default",
     "{\"viewport\":{\"width\":1920,\"height\":1080}}", SPARE_HEADFUL, NULL},
    {"an empty chrome_policy is no policy", "{\"chrome_policy\":{}}", SPARE_HEADFUL, NULL},
    {"an empty extensions list loads none", "{\"extensions\":[]}", SPARE_HEADFUL, NULL},
    {"proxy mode default is the launch default", "{\"proxy\":{\"mode\":\"default\"}}",
     SPARE_HEADFUL, NULL},
    /* Need a launch of their own: a cold create. */
    {"stealth changes the command line", "{\"stealth\":true}", SPARE_NONE, "stealth"},
    {"kiosk_mode changes the command line", "{\"kiosk_mode\":true}", SPARE_NONE, "kiosk_mode"},
    {"gpu changes the launch", "{\"gpu\":true}", SPARE_NONE, "gpu"},
    {"memory sets the sandbox's cgroup limit", "{\"memory\":\"2GiB\"}", SPARE_NONE, "memory"},
    {"viewport sets the window and screen size", "{\"viewport\":{\"width\":1280,\"height\":800}}",
     SPARE_NONE, "viewport"},
    {"a headless viewport is applied at hand-out (issue 39.2)",
     "{\"headless\":true,\"viewport\":{\"width\":1280,\"height\":800}}", SPARE_HEADLESS, NULL},
    {"viewport refresh_rate differs",
     "{\"viewport\":{\"width\":1920,\"height\":1080,"
     "\"refresh_rate\":60}}",
     SPARE_NONE, "viewport"},
    {"profile fills the profile folder before launch", "{\"profile\":{\"name\":\"p\"}}", SPARE_NONE,
     "profile"},
    {"telemetry export resolves a destination of the org",
     "{\"telemetry\":{\"export\":{\"otlp\":{\"destination\":{\"name\":\"d\"}}}}}", SPARE_NONE,
     "telemetry.export"},
    {"chrome_policy is written before launch",
     "{\"chrome_policy\":{\"HomepageLocation\":\"https://example.com\"}}", SPARE_NONE,
     "chrome_policy"},
    {"extensions are loaded at launch", "{\"extensions\":[{\"name\":\"e\"}]}", SPARE_NONE,
     "extensions"},
    {"vaults are not served (the cold path says 501)", "{\"vaults\":[{\"id\":\"v\"}]}", SPARE_NONE,
     "vaults"},
    {"headless plus a launch field is still cold", "{\"headless\":true,\"stealth\":true}",
     SPARE_NONE, "stealth"},
    {"a proxy with a launch field is still cold", "{\"proxy\":{\"id\":\"p1\"},\"kiosk_mode\":true}",
     SPARE_NONE, "kiosk_mode"},
};

static void test_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES(cases); i++) {
        const struct match_case *tc = &cases[i];
        json_error_t je;
        json_t *body = json_loads(tc->body, 0, &je);
        if (!body)
            fail_msg("%s: bad test body %s", tc->name, tc->body);
        struct sessrules_create c;
        struct err e;
        err_init(&e);
        if (sessrules_validate_create(body, &c, &e) != 0)
            fail_msg("%s: body not valid: %s", tc->name, e.message);
        const char *field = "unset";
        enum spare_kind k = spare_match(&c, &field);
        if (k != tc->kind)
            fail_msg("%s: kind %d, expected %d (field %s)", tc->name, k, tc->kind,
                     field ? field : "(none)");
        if (tc->field ? (!field || strcmp(field, tc->field) != 0) : field != NULL)
            fail_msg("%s: field %s, expected %s", tc->name, field ? field : "(none)",
                     tc->field ? tc->field : "(none)");
        sessrules_create_clear(&c);
        json_decref(body);
    }
}

static void test_kind_bodies(void **state)
{
    (void)state;
    /* A spare is launched from its kind's body, which must match its kind. */
    for (int k = SPARE_HEADFUL; k < SPARE_KINDS; k++) {
        json_t *body = json_loads(spare_kind_body((enum spare_kind)k), 0, NULL);
        struct sessrules_create c;
        struct err e;
        err_init(&e);
        assert_int_equal(sessrules_validate_create(body, &c, &e), 0);
        assert_int_equal(spare_match(&c, NULL), k);
        sessrules_create_clear(&c);
        json_decref(body);
    }
    assert_string_equal(spare_kind_name(SPARE_HEADLESS), "headless");
    assert_string_equal(spare_kind_name(SPARE_HEADFUL), "headful");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_kind_bodies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
