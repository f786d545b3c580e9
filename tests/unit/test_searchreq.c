/* Rules of a POST /search body (domain/searchreq), KERNEL_API_NEWER.md 1.4
 * "Search": each case is a body and the field its 400 names ("" = valid). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "domain/searchreq.h"

static const char *const names[] = {"alpha", "beta"};

/* Parses text against names; the rc, the first detail's message in why. */
static int parse(const char *text, struct searchreq *sp, json_t **keep, char *why, size_t cap)
{
    json_error_t je;
    *keep = json_loads(text, 0, &je);
    assert_non_null(*keep);
    struct err e;
    err_init(&e);
    int rc = searchreq_parse(*keep, names, 2, sp, &e);
    snprintf(why, cap, "%s", e.ndetails ? e.details[0].message : "");
    return rc;
}

static void test_rules(void **state)
{
    (void)state;
    static const struct {
        const char *rule, *body, *field;
    } cases[] = {
        {"query is required", "{}", "query"},
        {"query is a non-empty string", "{\"query\":\"\"}", "query"},
        {"max_results 1-100", "{\"query\":\"q\",\"max_results\":101}", "max_results"},
        {"max_results is an integer", "{\"query\":\"q\",\"max_results\":\"5\"}", "max_results"},
        {"safe_search off|moderate|strict", "{\"query\":\"q\",\"safe_search\":\"max\"}",
         "safe_search"},
        {"include_domains is an array of names", "{\"query\":\"q\",\"include_domains\":[\"\"]}",
         "include_domains"},
        {"timeout_ms 1000-60000", "{\"query\":\"q\",\"timeout_ms\":999}", "timeout_ms"},
        {"strategy.type auto|pinned|fallback", "{\"query\":\"q\",\"strategy\":{\"type\":\"x\"}}",
         "strategy.type"},
        {"strategy.providers are configured names",
         "{\"query\":\"q\",\"strategy\":{\"type\":\"fallback\",\"providers\":[\"gamma\"]}}",
         "strategy.providers"},
        {"fallback needs providers", "{\"query\":\"q\",\"strategy\":{\"type\":\"fallback\"}}",
         "strategy.providers"},
        {"pinned takes one provider",
         "{\"query\":\"q\",\"strategy\":{\"type\":\"pinned\",\"providers\":[\"alpha\",\"beta\"]}}",
         "strategy.providers"},
        {"fallback_on error|timeout|empty",
         "{\"query\":\"q\",\"strategy\":{\"providers\":[\"alpha\"],\"fallback_on\":[\"slow\"]}}",
         "strategy.fallback_on"},
        {"content is true or an object", "{\"query\":\"q\",\"content\":1}", "content"},
        {"content needs the caller's browser", "{\"query\":\"q\",\"content\":true}",
         "content.browser.browser_id"},
        {"content.format markdown|text",
         "{\"query\":\"q\",\"content\":{\"format\":\"html\",\"browser\":{\"browser_id\":\"b\"}}}",
         "content.format"},
        {"content.browser.mode curl|render",
         "{\"query\":\"q\",\"content\":{\"browser\":{\"browser_id\":\"b\",\"mode\":\"x\"}}}",
         "content.browser.mode"},
        {"content.source provider is refused",
         "{\"query\":\"q\",\"content\":{\"source\":\"provider\",\"browser\":{\"browser_id\":\"b\"}}"
         "}",
         "content.source"},
        {"content.max_chars 1-100000",
         "{\"query\":\"q\",\"content\":{\"max_chars\":100001,\"browser\":{\"browser_id\":\"b\"}}}",
         "content.max_chars"},
        {"a valid body", "{\"query\":\"q\",\"max_results\":3,\"unknown\":1}", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct searchreq sp;
        json_t *keep;
        char why[600];
        int rc = parse(cases[i].body, &sp, &keep, why, sizeof why);
        if (cases[i].field[0] == '\0') {
            if (rc != 0)
                fail_msg("%s: refused: %s", cases[i].rule, why);
        } else if (rc != E_INVALID || strncmp(why, cases[i].field, strlen(cases[i].field)) != 0 ||
                   why[strlen(cases[i].field)] != ':') {
            fail_msg("%s: expected a 400 naming %s, got rc %d: %s", cases[i].rule, cases[i].field,
                     rc, why);
        }
        json_decref(keep);
    }
}

static void test_strategy_and_defaults(void **state)
{
    (void)state;
    struct searchreq sp;
    json_t *keep;
    char why[600];
    assert_int_equal(parse("{\"query\":\"q\"}", &sp, &keep, why, sizeof why), 0);
    assert_int_equal(sp.max_results, 10);
    assert_int_equal(sp.norder, 2);
    assert_int_equal(sp.order[0], 0);
    assert_int_equal(sp.order[1], 1);
    assert_int_equal(sp.fallback_on, 1u << SEARCH_ERROR | 1u << SEARCH_TIMEOUT);
    assert_int_equal(sp.content, 0);
    json_decref(keep);
    assert_int_equal(parse("{\"query\":\"q\",\"strategy\":{\"type\":\"pinned\",\"providers\":["
                           "\"beta\"],\"fallback_on\":[\"empty\"]}}",
                           &sp, &keep, why, sizeof why),
                     0);
    assert_int_equal(sp.norder, 1);
    assert_int_equal(sp.order[0], 1);
    assert_int_equal(sp.fallback_on, 0);
    json_decref(keep);
    assert_int_equal(parse("{\"query\":\"q\",\"content\":{\"browser\":{\"browser_id\":\"b\","
                           "\"mode\":\"render\"},\"format\":\"text\"}}",
                           &sp, &keep, why, sizeof why),
                     0);
    assert_int_equal(sp.content, 1);
    assert_int_equal(sp.markdown, 0);
    assert_int_equal(sp.render, 1);
    assert_int_equal(sp.max_chars, SEARCHREQ_CHARS_DEFAULT);
    assert_string_equal(sp.browser_id, "b");
    json_decref(keep);
}

static void test_domains(void **state)
{
    (void)state;
    struct searchreq sp;
    json_t *keep;
    char why[600];
    assert_int_equal(parse("{\"query\":\"q\",\"include_domains\":[\"example.com\"],"
                           "\"exclude_domains\":[\"ads.example.com\"]}",
                           &sp, &keep, why, sizeof why),
                     0);
    assert_int_equal(searchreq_kept(&sp, "https://example.com/a"), 1);
    assert_int_equal(searchreq_kept(&sp, "https://www.Example.com:8443/a"), 1);
    assert_int_equal(searchreq_kept(&sp, "https://ads.example.com/a"), 0);
    assert_int_equal(searchreq_kept(&sp, "https://notexample.com/a"), 0);
    assert_int_equal(searchreq_kept(&sp, "https://other.org/example.com"), 0);
    json_decref(keep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_strategy_and_defaults),
        cmocka_unit_test(test_domains),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
