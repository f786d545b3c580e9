/* Unit tests for the pure pieces of telemetry (src/telemetry/event.c):
 * network body limits, UTF-8 safe truncation, the event object, SSE frames
 * and the category mask of an active configuration. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "core/xalloc.h"
#include "telemetry/telemetry.h"

/* ---- body limits ---- */

struct limit_case {
    const char *name;
    const char *mime;
    size_t limit;
};

static const struct limit_case limit_cases[] = {
    {"JSON bodies are structured: truncated at 8 KB", "application/json", TELEM_BODY_STRUCTURED},
    {"JSON with a charset parameter is structured", "application/json; charset=utf-8",
     TELEM_BODY_STRUCTURED},
    {"+json suffix types are JSON (structured)", "application/problem+json", TELEM_BODY_STRUCTURED},
    {"XML is structured (application/xml)", "application/xml", TELEM_BODY_STRUCTURED},
    {"XML is structured (text/xml)", "text/xml", TELEM_BODY_STRUCTURED},
    {"+xml suffix types are XML (structured)", "application/atom+xml", TELEM_BODY_STRUCTURED},
    {"form data is structured (urlencoded)", "application/x-www-form-urlencoded",
     TELEM_BODY_STRUCTURED},
    {"form data is structured (multipart)", "multipart/form-data; boundary=x",
     TELEM_BODY_STRUCTURED},
    {"MIME types are case-insensitive", "Application/JSON", TELEM_BODY_STRUCTURED},
    {"other text is truncated at 4 KB (text/plain)", "text/plain", TELEM_BODY_TEXT},
    {"other text is truncated at 4 KB (text/html)", "text/html; charset=utf-8", TELEM_BODY_TEXT},
    {"other text is truncated at 4 KB (javascript)", "application/javascript", TELEM_BODY_TEXT},
    {"binary responses excluded (image/png)", "image/png", 0},
    {"binary responses excluded (octet-stream)", "application/octet-stream", 0},
    {"binary responses excluded (font)", "font/woff2", 0},
    {"no MIME type: excluded", "", 0},
    {"NULL MIME type: excluded", NULL, 0},
    {"'text/' alone is not a text type", "text/", 0},
};

static void test_body_limits(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof limit_cases / sizeof limit_cases[0]; i++) {
        const struct limit_case *c = &limit_cases[i];
        size_t got = telem_body_limit(c->mime);
        if (got != c->limit)
            fail_msg("%s: got %zu, want %zu", c->name, got, c->limit);
    }
}

/* ---- UTF-8 cut ---- */

struct cut_case {
    const char *name;
    const char *s;
    size_t limit;
    size_t want;
};

static const struct cut_case cut_cases[] = {
    {"a body under the limit is kept whole", "abc", 8, 3},
    {"a body at the limit is kept whole", "abcd", 4, 4},
    {"ASCII is cut at exactly the limit", "abcdef", 4, 4},
    {"a 2-byte sequence is never split", "ab\xc3\xa9", 3, 2},
    {"a 3-byte sequence is never split", "a\xe2\x82\xac", 2, 1},
    {"a 4-byte sequence is never split", "\xf0\x9f\x98\x80z", 3, 0},
    {"a cut just after a whole sequence keeps it", "\xc3\xa9z", 2, 2},
};

static void test_utf8_cut(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cut_cases / sizeof cut_cases[0]; i++) {
        const struct cut_case *c = &cut_cases[i];
        size_t got = telem_utf8_cut(c->s, strlen(c->s), c->limit);
        if (got != c->want)
            fail_msg("%s: got %zu, want %zu", c->name, got, c->want);
    }
}

/* ---- event object and SSE frame ---- */

/* Issue 23: "Binary responses excluded" is decided by the media type and,
 * without one, by the bytes; never by Chromium's base64 transfer encoding. */
static void test_text_or_binary(void **state)
{
    (void)state;
    static const struct {
        const char *name, *mime;
        int missing;
    } mimes[] = {
        {"no Content-Type: judged by the bytes", NULL, 1},
        {"an empty type: judged by the bytes", "", 1},
        {"a declared octet stream is binary, not guessed", "application/octet-stream", 0},
        {"form data is a declared text type", "application/x-www-form-urlencoded", 0},
    };
    for (size_t i = 0; i < sizeof mimes / sizeof *mimes; i++)
        if (telem_mime_missing(mimes[i].mime) != mimes[i].missing)
            fail_msg("%s", mimes[i].name);
    static const struct {
        const char *name;
        const char *bytes;
        size_t n;
        int text;
    } bytes[] = {
        {"ASCII", "a=1&b=2", 7, 1},
        {"UTF-8", "caf\xc3\xa9", 5, 1},
        {"a sequence cut by the end", "caf\xc3", 4, 1},
        {"a NUL byte", "a\0b", 3, 0},
        {"a lone continuation byte",
         "a\x80"
         "b",
         3, 0},
        {"a PNG signature",
         "\x89"
         "PNG\r\n\x1a\n",
         8, 0},
    };
    for (size_t i = 0; i < sizeof bytes / sizeof *bytes; i++)
        if (telem_bytes_are_text((const unsigned char *)bytes[i].bytes, bytes[i].n) !=
            bytes[i].text)
            fail_msg("%s", bytes[i].name);
}

static void test_event_json(void **state)
{
    (void)state;
    struct telem_src src = {"cdp", "Runtime.consoleAPICalled", 1};
    json_t *ev = telem_event_json("sess1", TELEM_CONSOLE, "console_log", 1795212062345678LL, &src,
                                  json_pack("{s:s}", "text", "hi"));
    const char *want_keys[] = {"type", "category", "ts", "session_id", "source", "data"};
    for (size_t i = 0; i < 6; i++)
        if (!json_object_get(ev, want_keys[i]))
            fail_msg("each event has a name (type), a category, a timestamp (ts), the session id "
                     "and its payload (data), with its source: %s missing",
                     want_keys[i]);
    assert_string_equal(json_string_value(json_object_get(ev, "category")), "console");
    assert_string_equal(json_string_value(json_object_get(ev, "type")), "console_log");
    assert_string_equal(json_string_value(json_object_get(ev, "session_id")), "sess1");
    /* the SDK's BrowserTelemetryEvent: ts in Unix microseconds */
    assert_int_equal(json_integer_value(json_object_get(ev, "ts")), 1795212062345678LL);
    json_t *so = json_object_get(ev, "source");
    assert_string_equal(json_string_value(json_object_get(so, "kind")), "cdp");
    assert_string_equal(json_string_value(json_object_get(so, "event")),
                        "Runtime.consoleAPICalled");
    assert_true(json_is_true(json_object_get(ev, "truncated")));
    json_decref(ev);
    ev = telem_event_json("s", TELEM_PAGE, "page_load", 0, NULL, NULL);
    assert_true(json_is_object(json_object_get(ev, "data")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(ev, "source"), "kind")),
                        "kernel_api");
    assert_null(json_object_get(ev, "truncated"));
    json_decref(ev);
}

static void test_sse_frame(void **state)
{
    (void)state;
    size_t n;
    const char *ev = "{\"name\":\"x\"}";
    char *f = telem_sse_frame(42, ev, strlen(ev), &n);
    const char *want = "id: 42\ndata: {\"seq\":42,\"event\":{\"name\":\"x\"}}\n\n";
    if (n != strlen(want) || memcmp(f, want, n) != 0)
        fail_msg("frames are 'id: <seq>' + 'data: {\"seq\":n,\"event\":{...}}': got %.*s", (int)n,
                 f);
    xfree(f);
}

/* ---- category mask ---- */

struct mask_case {
    const char *name;
    const char *cfg; /* NULL = no telemetry active */
    unsigned mask;
};

#define B(c) (1u << (c))
static const struct mask_case mask_cases[] = {
    {"no telemetry active: nothing is captured", NULL, 0},
    {"only categories the active configuration has on are captured",
     "{\"browser\":{\"control\":{\"enabled\":true,\"cdp\":{\"excluded_methods\":[]}},"
     "\"connection\":{\"enabled\":false},\"system\":{\"enabled\":true},"
     "\"captcha\":{\"enabled\":false},\"console\":{\"enabled\":true},"
     "\"network\":{\"enabled\":false},\"page\":{\"enabled\":false},"
     "\"interaction\":{\"enabled\":false},\"screenshot\":{\"enabled\":true},"
     "\"platform\":{\"enabled\":false}}}",
     B(TELEM_CONTROL) | B(TELEM_SYSTEM) | B(TELEM_CONSOLE) | B(TELEM_SCREENSHOT)},
};

static void test_cfg_mask(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof mask_cases / sizeof mask_cases[0]; i++) {
        const struct mask_case *c = &mask_cases[i];
        json_t *cfg = c->cfg ? json_loads(c->cfg, 0, NULL) : NULL;
        unsigned got = telem_cfg_mask(cfg);
        json_decref(cfg);
        if (got != c->mask)
            fail_msg("%s: got %#x, want %#x", c->name, got, c->mask);
    }
    for (int k = 0; k < TELEM_NCATS; k++)
        assert_int_equal(telem_cat_parse(telem_cat_name((enum telem_cat)k)), k);
    assert_int_equal(telem_cat_parse("dom"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_body_limits), cmocka_unit_test(test_utf8_cut),
        cmocka_unit_test(test_event_json),  cmocka_unit_test(test_sse_frame),
        cmocka_unit_test(test_cfg_mask),    cmocka_unit_test(test_text_or_binary),
    };
    return cmocka_run_group_tests_name("telemetry/event", tests, NULL, NULL);
}
