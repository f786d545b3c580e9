/* The config registry's rules (domain/siteclass, docs/config-registry.md):
 * a target URL's normalized form and registrable domain, and one visit's
 * classification. Each case names the rule it checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "domain/siteclass.h"

static void test_targets(void **state)
{
    (void)state;
    static const struct {
        const char *rule, *url, *domain, *host, *normalized; /* domain NULL: a 400 */
    } cases[] = {
        {"the registrable domain of a name under a public suffix",
         "https://a.b.Example.co.uk/p/q?x=1#f", "example.co.uk", "a.b.example.co.uk",
         "https://a.b.example.co.uk/p/q"},
        {"the scheme's default port is dropped, another kept", "HTTP://example.com:80",
         "example.com", "example.com", "http://example.com/"},
        {"another port is kept", "http://example.com:8080/a", "example.com", "example.com",
         "http://example.com:8080/a"},
        {"an IPv4 address is its own domain", "http://127.0.0.1:3000/x", "127.0.0.1", "127.0.0.1",
         "http://127.0.0.1:3000/x"},
        {"an IPv6 address is its own domain", "http://[::1]:3000/", "::1", "::1",
         "http://[::1]:3000/"},
        {"a single label is its own domain", "http://localhost/", "localhost", "localhost",
         "http://localhost/"},
        {"a trailing dot is dropped", "https://www.example.org./", "example.org", "www.example.org",
         "https://www.example.org/"},
        {"only http and https", "ftp://example.com/", NULL, NULL, NULL},
        {"a relative URL is refused", "example.com/a", NULL, NULL, NULL},
        {"no user information", "http://u:p@example.com/", NULL, NULL, NULL},
        {"a host is required", "http:///a", NULL, NULL, NULL},
        {"a port within 1-65535", "http://example.com:70000/", NULL, NULL, NULL},
        {"no white space", "http://exa mple.com/", NULL, NULL, NULL},
        {"a name's characters only", "http://exa%mple.com/", NULL, NULL, NULL},
        {"a malformed IPv6 host", "http://[::g]/", NULL, NULL, NULL},
        {"empty", "", NULL, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct siteclass_target t;
        struct err e;
        err_init(&e);
        int rc = siteclass_target_parse(cases[i].url, "url", &t, &e);
        if (!cases[i].domain) {
            if (rc != E_INVALID || strncmp(e.details[0].message, "url", 3) != 0)
                fail_msg("%s: expected a 400 naming url", cases[i].rule);
            continue;
        }
        if (rc != 0)
            fail_msg("%s: %s", cases[i].rule, e.message);
        if (strcmp(t.domain, cases[i].domain) || strcmp(t.host, cases[i].host) ||
            strcmp(t.normalized, cases[i].normalized))
            fail_msg("%s: got %s %s %s", cases[i].rule, t.domain, t.host, t.normalized);
    }
}

static void test_classify(void **state)
{
    (void)state;
    static const struct {
        const char *rule;
        int status;
        const char *body, *net_error;
        enum siteclass_outcome out;
        const char *reason;
    } cases[] = {
        {"a page with content is accessed", 200, "<h1>Hello</h1>", NULL, SITECLASS_ACCESSED, "ok"},
        {"a redirect's answer with content is accessed", 302, "moved", NULL, SITECLASS_ACCESSED,
         "ok"},
        {"403 is blocked", 403, "<h1>Forbidden</h1>", NULL, SITECLASS_BLOCKED, "http_403"},
        {"429 is blocked", 429, "", NULL, SITECLASS_BLOCKED, "http_429"},
        {"a challenge page with 200 is blocked", 200,
         "<title>Just a moment...</title><div id=cf-chl-widget>", NULL, SITECLASS_BLOCKED,
         "challenge_page"},
        {"access denied text is blocked", 200, "<H1>ACCESS DENIED</H1>", NULL, SITECLASS_BLOCKED,
         "challenge_page"},
        {"a 503 challenge is blocked", 503, "Attention Required! | Cloudflare", NULL,
         SITECLASS_BLOCKED, "challenge_page"},
        {"another 5xx is inconclusive", 502, "bad gateway", NULL, SITECLASS_INCONCLUSIVE,
         "http_502"},
        {"404 is inconclusive", 404, "not here", NULL, SITECLASS_INCONCLUSIVE, "http_404"},
        {"an empty body is inconclusive", 200, " \r\n\t", NULL, SITECLASS_INCONCLUSIVE,
         "empty_body"},
        {"the session's rules refusing is inconclusive", 0, NULL, "ERR_ACCESS_DENIED",
         SITECLASS_INCONCLUSIVE, "egress_refused"},
        {"a network error is inconclusive", 0, NULL, "ERR_CONNECTION_RESET", SITECLASS_INCONCLUSIVE,
         "net_ERR_CONNECTION_RESET"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct siteclass_visit v = {.status = cases[i].status,
                                    .body = cases[i].body,
                                    .body_len = cases[i].body ? strlen(cases[i].body) : 0,
                                    .net_error = cases[i].net_error};
        char reason[96];
        enum siteclass_outcome o = siteclass_classify(&v, reason, sizeof reason);
        if (o != cases[i].out || strcmp(reason, cases[i].reason) != 0)
            fail_msg("%s: got %s %s", cases[i].rule, siteclass_outcome_names[o], reason);
    }
    /* A marker past LIM_CFGREG_CLASSIFY_BYTES is not read. */
    static char big[LIM_CFGREG_CLASSIFY_BYTES + 64];
    memset(big, 'a', sizeof big);
    memcpy(big + LIM_CFGREG_CLASSIFY_BYTES + 2, "access denied", 13);
    struct siteclass_visit v = {.status = 200, .body = big, .body_len = sizeof big};
    char reason[96];
    assert_int_equal(siteclass_classify(&v, reason, sizeof reason), SITECLASS_ACCESSED);
}

static void test_challenge_headers(void **state)
{
    (void)state;
    static const struct {
        const char *rule, *name, *value;
        int status, want;
    } cases[] = {
        {"Cloudflare's cf-mitigated: challenge names a challenge", "CF-Mitigated", "challenge", 403,
         1},
        {"cf-mitigated names a challenge whatever the status", "cf-mitigated", "challenge", 200, 1},
        {"AWS WAF's x-amzn-waf-action captcha", "x-amzn-waf-action", "captcha", 405, 1},
        {"AWS WAF's x-amzn-waf-action challenge", "X-Amzn-Waf-Action", "Challenge", 202, 1},
        {"x-datadome on a refusal", "x-datadome", "protected", 403, 1},
        {"x-datadome on an answer it let through is not one", "x-datadome", "protected", 200, 0},
        {"another header is not", "server", "cloudflare", 403, 0},
        {"a NULL value is not", "cf-mitigated", NULL, 403, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (siteclass_challenge_header(cases[i].name, cases[i].value, cases[i].status) !=
            cases[i].want)
            fail_msg("%s", cases[i].rule);
}

/* The visit's telemetry: the rules of docs/config-registry.md
 * "Classification" that read the page's responses, its last URL and its
 * console errors. The target is https://shop.example/app. */
static void test_classify_telemetry(void **state)
{
    (void)state;
    static const struct siteclass_response doc = {"https://shop.example/app", 200, 1, 0};
    static const struct siteclass_response doc_ch = {"https://shop.example/app", 200, 1, 1};
    static const struct siteclass_response sub_ch = {"https://shop.example/api", 403, 0, 1};
    static const struct siteclass_response sub_403 = {"https://shop.example/api", 403, 0, 0};
    static const struct siteclass_response sub_ok_ch = {"https://shop.example/api", 200, 0, 1};
    static const struct siteclass_response redir = {"https://shop.example/challenge?r=1", 200, 1,
                                                    0};
    static const struct siteclass_response cf_redir = {
        "https://shop.example/cdn-cgi/challenge-platform/h/b", 200, 1, 0};
    static const struct siteclass_response dd = {"https://geo.captcha-delivery.com/captcha/", 200,
                                                 0, 0};
    static const struct siteclass_response recaptcha = {"https://www.google.com/recaptcha/api.js",
                                                        200, 0, 0};
    static const struct siteclass_response blocked_word = {"https://shop.example/blocked-items",
                                                           200, 1, 0};
    static const char *const err_captcha[] = {"Uncaught Error: captcha failed to load"};
    static const char *const err_plain[] = {"TypeError: x is undefined"};
    static const struct {
        const char *rule;
        struct siteclass_response r[3];
        size_t nr;
        const char *final_url;
        const char *const *console;
        size_t nconsole;
        const char *text;
        enum siteclass_outcome out;
        const char *reason;
    } cases[] = {
        {"a rendered page with text and quiet telemetry is accessed",
         {doc},
         1,
         NULL,
         NULL,
         0,
         "Shop",
         SITECLASS_ACCESSED,
         "ok"},
        {"the main document with a challenge header is blocked",
         {doc_ch},
         1,
         NULL,
         NULL,
         0,
         "Shop",
         SITECLASS_BLOCKED,
         "challenge_header"},
        {"an HTTP redirect to /challenge is blocked",
         {doc, redir},
         2,
         NULL,
         NULL,
         0,
         "wait",
         SITECLASS_BLOCKED,
         "challenge_redirect"},
        {"a script's navigation to /challenge (the last URL) is blocked",
         {doc},
         1,
         "https://shop.example/challenge?from=app",
         NULL,
         0,
         "wait",
         SITECLASS_BLOCKED,
         "challenge_redirect"},
        {"a redirect to Cloudflare's challenge platform is blocked",
         {doc, cf_redir},
         2,
         NULL,
         NULL,
         0,
         "wait",
         SITECLASS_BLOCKED,
         "challenge_redirect"},
        {"the target itself on a challenge-like path is not a redirect",
         {redir},
         1,
         "https://shop.example/challenge?r=1",
         NULL,
         0,
         "a page",
         SITECLASS_ACCESSED,
         "ok"},
        {"a segment that only starts with blocked is not one",
         {doc, blocked_word},
         2,
         NULL,
         NULL,
         0,
         "items",
         SITECLASS_ACCESSED,
         "ok"},
        {"a sub-request refused with a challenge header is blocked",
         {doc, sub_ch},
         2,
         NULL,
         NULL,
         0,
         "Shop",
         SITECLASS_BLOCKED,
         "challenge_request"},
        {"a sub-request refused without a challenge header is not",
         {doc, sub_403},
         2,
         NULL,
         NULL,
         0,
         "Shop",
         SITECLASS_ACCESSED,
         "ok"},
        {"a sub-request let through with a challenge header is not",
         {doc, sub_ok_ch},
         2,
         NULL,
         NULL,
         0,
         "Shop",
         SITECLASS_ACCESSED,
         "ok"},
        {"a request to DataDome's captcha service is blocked",
         {doc, dd},
         2,
         NULL,
         NULL,
         0,
         "Shop",
         SITECLASS_BLOCKED,
         "challenge_request"},
        {"a login form's reCAPTCHA is not a block",
         {doc, recaptcha},
         2,
         NULL,
         NULL,
         0,
         "Sign in",
         SITECLASS_ACCESSED,
         "ok"},
        {"a console error naming a captcha is blocked",
         {doc},
         1,
         NULL,
         err_captcha,
         1,
         "Shop",
         SITECLASS_BLOCKED,
         "console_challenge"},
        {"another console error on a page with text is accessed",
         {doc},
         1,
         NULL,
         err_plain,
         1,
         "Shop",
         SITECLASS_ACCESSED,
         "ok"},
        {"no visible text and a console error is script_error",
         {doc},
         1,
         NULL,
         err_plain,
         1,
         " \n ",
         SITECLASS_INCONCLUSIVE,
         "script_error"},
        {"no visible text and no console error is empty_body",
         {doc},
         1,
         NULL,
         NULL,
         0,
         "",
         SITECLASS_INCONCLUSIVE,
         "empty_body"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct siteclass_telemetry t = {.responses = cases[i].r,
                                        .nresponses = cases[i].nr,
                                        .final_url = cases[i].final_url,
                                        .console_errors = cases[i].console,
                                        .nconsole = cases[i].nconsole,
                                        .text = cases[i].text};
        const char *html = "<html><body>rendered</body></html>";
        struct siteclass_visit v = {
            .status = 200, .body = html, .body_len = strlen(html), .telemetry = &t};
        char reason[96];
        enum siteclass_outcome o = siteclass_classify(&v, reason, sizeof reason);
        if (o != cases[i].out || strcmp(reason, cases[i].reason) != 0)
            fail_msg("%s: got %s %s", cases[i].rule, siteclass_outcome_names[o], reason);
    }
    /* The main document's refusal comes first: a 403 is http_403 whatever
     * the telemetry says. */
    struct siteclass_telemetry t = {.responses = &doc_ch, .nresponses = 1, .text = "x"};
    struct siteclass_visit v = {.status = 403, .body = "x", .body_len = 1, .telemetry = &t};
    char reason[96];
    assert_int_equal(siteclass_classify(&v, reason, sizeof reason), SITECLASS_BLOCKED);
    assert_string_equal(reason, "http_403");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_targets),
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_challenge_headers),
        cmocka_unit_test(test_classify_telemetry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
