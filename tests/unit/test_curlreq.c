/* Rules of browsers.curl requests (domain/curlreq) and core/b64. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/b64.h"
#include "core/xalloc.h"
#include "domain/curlreq.h"

/* Parses text; returns the rc and leaves the first detail in why. */
static int parse(const char *text, struct curlreq *r, char *why, size_t cap)
{
    json_error_t je;
    json_t *v = json_loads(text, 0, &je);
    assert_non_null(v);
    struct err e;
    err_init(&e);
    int rc = curlreq_parse(v, r, &e);
    json_decref(v);
    snprintf(why, cap, "%s", e.ndetails ? e.details[0].message : "");
    return rc;
}

static void test_defaults(void **state)
{
    (void)state;
    struct curlreq r;
    char why[600];
    assert_int_equal(parse("{\"url\":\"https://example.test/a?b=c\"}", &r, why, sizeof why), 0);
    assert_string_equal(r.method, "GET");
    assert_int_equal(r.timeout_ms, CURL_TIMEOUT_DEFAULT);
    assert_int_equal(r.base64, 0);
    assert_null(r.body);
    curlreq_clear(&r);
}

static void test_full(void **state)
{
    (void)state;
    struct curlreq r;
    char why[600];
    assert_int_equal(
        parse("{\"url\":\"http://h.test/\",\"method\":\"POST\",\"headers\":{\"X-A\":\"1\","
              "\"Accept\":\"text/plain\"},\"body\":\"hi\",\"response_encoding\":\"base64\","
              "\"timeout_ms\":1000}",
              &r, why, sizeof why),
        0);
    assert_string_equal(r.method, "POST");
    assert_int_equal(r.nheaders, 2);
    assert_int_equal(r.body_len, 2);
    assert_int_equal(r.base64, 1);
    assert_int_equal(r.timeout_ms, 1000);
    curlreq_clear(&r);
}

/* Each rule of curlreq_parse: the body, the field named, the rule's words. */
static void test_rules(void **state)
{
    (void)state;
    static const struct {
        const char *body, *detail;
    } cases[] = {
        {"{}", "url: is required"},
        {"{\"url\":7}", "url: is required and must be a string"},
        {"{\"url\":\"ftp://h/\"}", "url: must be an absolute http"},
        {"{\"url\":\"file:///etc/passwd\"}", "url: must be an absolute http"},
        {"{\"url\":\"/relative\"}", "url: must be an absolute http"},
        {"{\"url\":\"http://\"}", "url: has no host"},
        {"{\"url\":\"http://u:p@h/\"}", "url: cannot carry credentials"},
        {"{\"url\":\"http://h/a b\"}", "url: cannot hold spaces"},
        {"{\"url\":\"http://h/\",\"method\":\"TRACE\"}", "method: must be one of"},
        {"{\"url\":\"http://h/\",\"method\":\"get\"}", "method: must be one of"},
        {"{\"url\":\"http://h/\",\"headers\":[]}", "headers: must be an object"},
        {"{\"url\":\"http://h/\",\"headers\":{\"X\":1}}", "headers.X: must be a string"},
        {"{\"url\":\"http://h/\",\"headers\":{\"Host\":\"x\"}}",
         "headers.Host: is set by the browser"},
        {"{\"url\":\"http://h/\",\"headers\":{\"content-length\":\"1\"}}",
         "headers.content-length: is set"},
        {"{\"url\":\"http://h/\",\"headers\":{\"Proxy-Foo\":\"1\"}}", "headers.Proxy-Foo: is set"},
        {"{\"url\":\"http://h/\",\"headers\":{\"X\":\"a\\r\\nY: b\"}}",
         "headers.X: a header value cannot hold CR"},
        {"{\"url\":\"http://h/\",\"headers\":{\"A B\":\"1\"}}",
         "headers.A B: a header name is an HTTP token"},
        {"{\"url\":\"http://h/\",\"body\":\"x\"}", "body: is not sent with GET"},
        {"{\"url\":\"http://h/\",\"method\":\"HEAD\",\"body\":\"x\"}",
         "body: is not sent with HEAD"},
        {"{\"url\":\"http://h/\",\"method\":\"POST\",\"body\":1}", "body: must be a string"},
        {"{\"url\":\"http://h/\",\"response_encoding\":\"latin1\"}",
         "response_encoding: must be utf8 or base64"},
        {"{\"url\":\"http://h/\",\"timeout_ms\":999}",
         "timeout_ms: must be an integer from 1000 to 60000"},
        {"{\"url\":\"http://h/\",\"timeout_ms\":60001}", "timeout_ms: must be an integer"},
        {"{\"url\":\"http://h/\",\"timeout_ms\":1.5}", "timeout_ms: must be an integer"},
        {"{\"url\":\"http://h/\",\"follow\":true}", "follow: is not a field of this request"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct curlreq r;
        char why[600];
        int rc = parse(cases[i].body, &r, why, sizeof why);
        if (rc != E_INVALID || strstr(why, cases[i].detail) != why)
            fail_msg("%s: rc %d, detail \"%s\", want \"%s\"", cases[i].body, rc, why,
                     cases[i].detail);
        assert_null(r.url);
    }
}

static void test_net_errors(void **state)
{
    (void)state;
    assert_int_equal(curlreq_net_error("net::ERR_CONNECTION_REFUSED"), -102);
    assert_int_equal(curlreq_net_error("ERR_NAME_NOT_RESOLVED"), -105);
    assert_int_equal(curlreq_net_error("ERR_TIMED_OUT"), -7);
    assert_int_equal(curlreq_net_error("ERR_NOT_A_THING"), 0);
    assert_int_equal(curlreq_net_error(NULL), 0);
}

static void test_b64(void **state)
{
    (void)state;
    static const struct {
        const char *plain, *enc;
    } v[] = {{"", ""},
             {"f", "Zg=="},
             {"fo", "Zm8="},
             {"foo", "Zm9v"},
             {"foob", "Zm9vYg=="},
             {"fooba", "Zm9vYmE="},
             {"foobar", "Zm9vYmFy"}};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        size_t n;
        char *e = b64_encode(v[i].plain, strlen(v[i].plain), &n);
        assert_string_equal(e, v[i].enc);
        assert_int_equal(n, strlen(v[i].enc));
        xfree(e);
        unsigned char *d;
        assert_int_equal(b64_decode(v[i].enc, strlen(v[i].enc), &d, &n), 0);
        assert_int_equal(n, strlen(v[i].plain));
        assert_memory_equal(d, v[i].plain, n);
        xfree(d);
    }
    unsigned char *d;
    size_t n;
    assert_int_equal(b64_decode("Zm9vYg", 6, &d, &n), 0); /* unpadded */
    assert_int_equal(n, 4);
    xfree(d);
    assert_int_equal(b64_decode("Zm9v!", 5, &d, &n), -1);
    assert_int_equal(b64_decode("Z", 1, &d, &n), -1);
    assert_int_equal(b64_decode("Zm=v", 4, &d, &n), -1);
    assert_int_equal(b64_decode("Zm9===", 6, &d, &n), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults), cmocka_unit_test(test_full),
        cmocka_unit_test(test_rules),    cmocka_unit_test(test_net_errors),
        cmocka_unit_test(test_b64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
