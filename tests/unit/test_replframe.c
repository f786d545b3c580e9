/* Unit tests for domain/replframe: the frames between the server and a
 * session's REPL process (docs/repl.md, "Protocol"). Every case names the
 * rule it checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "core/err.h"
#include "core/xalloc.h"
#include "domain/replframe.h"

/* The frame of text (its 4-byte big-endian length first) in out. */
static size_t frame(const char *text, char *out)
{
    size_t n = strlen(text);
    out[0] = (char)(n >> 24);
    out[1] = (char)(n >> 16);
    out[2] = (char)(n >> 8);
    out[3] = (char)n;
    memcpy(out + 4, text, n);
    return n + 4;
}

static int next(const char *p, size_t n, size_t *used, enum replmsg_kind *kind, struct err *e)
{
    json_t *m;
    err_init(e);
    int k = replframe_next(p, n, 1024, used, &m, kind, e);
    json_decref(m);
    return k;
}

static void well_formed_frames_are_taken_one_at_a_time(void **state)
{
    (void)state;
    char b[512];
    size_t n = frame("{\"t\":\"text\",\"channel\":\"write\",\"text\":\"a\"}", b);
    n += frame("{\"t\":\"done\",\"success\":true}", b + n);
    size_t used;
    enum replmsg_kind kind;
    struct err e;
    assert_int_equal(next(b, n, &used, &kind, &e), 1);
    assert_int_equal(kind, REPLMSG_TEXT);
    assert_int_equal(next(b + used, n - used, &used, &kind, &e), 1);
    assert_int_equal(kind, REPLMSG_DONE);
}

static void a_partial_frame_waits_for_more(void **state)
{
    (void)state;
    char b[512];
    size_t n = frame("{\"t\":\"done\",\"success\":false,\"error\":\"x\"}", b);
    size_t used;
    enum replmsg_kind kind;
    struct err e;
    for (size_t cut = 0; cut < n; cut++)
        assert_int_equal(next(b, cut, &used, &kind, &e), 0);
    assert_int_equal(next(b, n, &used, &kind, &e), 1);
    assert_int_equal(used, n);
}

static void violations_are_said(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "[1]",
        "{\"t\":\"nope\"}",
        "{\"t\":\"text\",\"channel\":\"fd9\",\"text\":\"a\"}",
        "{\"t\":\"text\",\"channel\":\"stdout\"}",
        "{\"t\":\"image\",\"mime_type\":\"text/html\",\"data_b64\":\"\"}",
        "{\"t\":\"done\"}",
        "{\"t\":\"done\",\"success\":true,\"error\":1}",
        "not json",
    };
    char b[512];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        size_t n = frame(bad[i], b), used;
        enum replmsg_kind kind;
        struct err e;
        assert_int_equal(next(b, n, &used, &kind, &e), -1);
        assert_true(strstr(e.message, "REPL protocol") != NULL);
    }
    /* A length over the maximum (or zero) is refused before its bytes come. */
    char big[4] = {0, 0, 4, 1}, zero[4] = {0, 0, 0, 0};
    size_t used;
    enum replmsg_kind kind;
    struct err e;
    assert_int_equal(next(big, 4, &used, &kind, &e), -1);
    assert_int_equal(next(zero, 4, &used, &kind, &e), -1);
}

static void encode_then_parse_is_the_same(void **state)
{
    (void)state;
    json_t *o = json_pack("{s:s}", "code", "let a = \"\\u00e9\";");
    size_t n;
    char *f = replframe_encode(o, &n);
    assert_non_null(f);
    assert_int_equal((unsigned char)f[3], n - 4);
    assert_memory_equal(f + 4, "{\"code\":", 8);
    xfree(f);
    json_decref(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(well_formed_frames_are_taken_one_at_a_time),
        cmocka_unit_test(a_partial_frame_waits_for_more),
        cmocka_unit_test(violations_are_said),
        cmocka_unit_test(encode_then_parse_is_the_same),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
