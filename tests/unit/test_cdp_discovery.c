/* Unit tests for api/cdp_discovery's cdp_disc_query_suffix: the DevTools
 * discovery path a client appended to cdp_ws_url's ?jwt= value as a string
 * (issue 31, Stagehand 4's `${cdpUrl}/json/version`; docs/cdp-relay.md). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "api/browsers.h"

struct suffix_case {
    const char *name; /* the rule checked */
    const char *jwt;
    const char *path; /* NULL: not a discovery request */
    size_t toklen;
};

static const struct suffix_case cases[] = {
    {"Stagehand's ${cdpUrl}/json/version", "a.b.c/json/version", "/json/version", 5},
    {"Playwright's json/version/ shape, trailing slash dropped", "a.b.c/json/version/",
     "/json/version", 5},
    {"/json/list", "a.b.c/json/list", "/json/list", 5},
    {"/json/list/", "a.b.c/json/list/", "/json/list", 5},
    {"/json (the list)", "a.b.c/json", "/json", 5},
    {"/json/", "a.b.c/json/", "/json", 5},
    {"a plain token is the WebSocket endpoint", "a.b.c", NULL, 0},
    {"no token before the path", "/json/version", NULL, 0},
    {"another DevTools path (/json/new) is not served", "a.b.c/json/new", NULL, 0},
    {"/json/protocol is not served", "a.b.c/json/protocol", NULL, 0},
    {"a prefix of a discovery path", "a.b.c/json/versio", NULL, 0},
    {"more after the path", "a.b.c/json/version/x", NULL, 0},
    {"two slashes at the end", "a.b.c/json/version//", NULL, 0},
    {"a lone slash", "a.b.c/", NULL, 0},
    {"empty", "", NULL, 0},
    {"absent (no ?jwt=)", NULL, NULL, 0},
};

static void test_query_suffix(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct suffix_case *c = &cases[i];
        size_t toklen = 0;
        const char *got = cdp_disc_query_suffix(c->jwt, &toklen);
        if (c->path == NULL) {
            if (got != NULL)
                fail_msg("%s: expected none, got %s", c->name, got);
            continue;
        }
        if (got == NULL || strcmp(got, c->path) != 0 || toklen != c->toklen)
            fail_msg("%s: expected %s after %zu bytes, got %s after %zu", c->name, c->path,
                     c->toklen, got ? got : "(none)", toklen);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_query_suffix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
