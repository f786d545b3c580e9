/* Unit tests for core/httpresp: the response head, the body's framing
 * (RFC 9112 6.3) and the chunked decoder, table-driven; each case is named
 * after the rule it checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "core/httpresp.h"
#include "core/xalloc.h"

#define NCASES(a) (sizeof(a) / sizeof((a)[0]))

/* ---- heads ---- */

struct head_case {
    const char *name;
    const char *in;
    int rc;            /* 0 complete, 1 more needed, E_INVALID */
    int status;        /* when rc == 0 */
    size_t nfields;    /* when rc == 0 */
    const char *ctype; /* expected Content-Type value, or NULL */
};

static const struct head_case head_cases[] = {
    {"a complete head is parsed", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nbody", 0, 200,
     1, "text/plain"},
    {"HTTP/1.0 is accepted", "HTTP/1.0 404 Not Found\r\n\r\n", 0, 404, 0, NULL},
    {"a status line without reason is accepted", "HTTP/1.1 204\r\n\r\n", 0, 204, 0, NULL},
    {"an empty reason is accepted", "HTTP/1.1 204 \r\n\r\n", 0, 204, 0, NULL},
    {"bare LF line ends are accepted", "HTTP/1.1 200 OK\nA: b\n\n", 0, 200, 1, NULL},
    {"value whitespace is trimmed", "HTTP/1.1 200 OK\r\nContent-Type: \t x/y \t\r\n\r\n", 0, 200, 1,
     "x/y"},
    {"names are case-insensitive", "HTTP/1.1 200 OK\r\ncontent-TYPE: a\r\n\r\n", 0, 200, 1, "a"},
    {"an empty value is accepted", "HTTP/1.1 200 OK\r\nX-E:\r\n\r\n", 0, 200, 1, NULL},
    {"obs-text in a value is accepted", "HTTP/1.1 200 OK\r\nX: caf\xc3\xa9\r\n\r\n", 0, 200, 1,
     NULL},
    {"a partial status line needs more", "HTTP/1.1 20", 1, 0, 0, NULL},
    {"a head without its blank line needs more", "HTTP/1.1 200 OK\r\nA: b\r\n", 1, 0, 0, NULL},
    {"an empty buffer needs more", "", 1, 0, 0, NULL},
    {"a partial prefix needs more", "HTT", 1, 0, 0, NULL},
    {"not HTTP fails at once", "SSH-2.0-OpenSSH", E_INVALID, 0, 0, NULL},
    {"HTTP/2 status line is refused", "HTTP/2 200\r\n\r\n", E_INVALID, 0, 0, NULL},
    {"HTTP/1.2 is refused", "HTTP/1.2 200 OK\r\n\r\n", E_INVALID, 0, 0, NULL},
    {"a two-digit status is refused", "HTTP/1.1 20 OK\r\n\r\n", E_INVALID, 0, 0, NULL},
    {"status 600 is refused", "HTTP/1.1 600 X\r\n\r\n", E_INVALID, 0, 0, NULL},
    {"status 099 is refused", "HTTP/1.1 099 X\r\n\r\n", E_INVALID, 0, 0, NULL},
    {"a status with letters is refused", "HTTP/1.1 2x0 OK\r\n\r\n", E_INVALID, 0, 0, NULL},
    {"no space after the status is refused", "HTTP/1.1 200OK\r\n\r\n", E_INVALID, 0, 0, NULL},
    {"whitespace before the colon is refused", "HTTP/1.1 200 OK\r\nA : b\r\n\r\n", E_INVALID, 0, 0,
     NULL},
    {"a line without colon is refused", "HTTP/1.1 200 OK\r\nAb\r\n\r\n", E_INVALID, 0, 0, NULL},
    {"an empty name is refused", "HTTP/1.1 200 OK\r\n: b\r\n\r\n", E_INVALID, 0, 0, NULL},
    {"obsolete line folding is refused", "HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n", E_INVALID, 0, 0,
     NULL},
    {"a bare CR inside a line is refused", "HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n", E_INVALID, 0, 0,
     NULL},
    {"a control character in a value is refused", "HTTP/1.1 200 OK\r\nA: b\x01\r\n\r\n", E_INVALID,
     0, 0, NULL},
    {"DEL in a value is refused", "HTTP/1.1 200 OK\r\nA: b\x7f\r\n\r\n", E_INVALID, 0, 0, NULL},
    {"a non-token name is refused", "HTTP/1.1 200 OK\r\nA(b): c\r\n\r\n", E_INVALID, 0, 0, NULL},
};

static void head_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES(head_cases); i++) {
        const struct head_case *c = &head_cases[i];
        struct httpresp_head h;
        int rc = httpresp_parse_head(c->in, strlen(c->in), &h);
        if (rc != c->rc)
            fail_msg("%s: rc %d, want %d", c->name, rc, c->rc);
        if (rc != 0)
            continue;
        if (h.status != c->status || h.nfields != c->nfields)
            fail_msg("%s: status %d fields %zu", c->name, h.status, h.nfields);
        const char *end = strstr(c->in, "\r\n\r\n");
        size_t want = end ? (size_t)(end - c->in) + 4 : (size_t)(strstr(c->in, "\n\n") - c->in) + 2;
        if (h.head_len != want)
            fail_msg("%s: head_len %zu, want %zu", c->name, h.head_len, want);
        if (c->ctype) {
            const struct httpresp_field *f = httpresp_field(&h, "Content-Type");
            if (!f || f->value_len != strlen(c->ctype) || memcmp(f->value, c->ctype, f->value_len))
                fail_msg("%s: Content-Type", c->name);
        }
    }
}

/* Fed one byte more at a time, the parser answers "more" until the blank
 * line and then the same head as when fed at once. */
static void head_incremental(void **state)
{
    (void)state;
    const char *in = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Accept: abc\r\n\r\n\x81\x02hi";
    size_t total = strlen(in), head = (size_t)(strstr(in, "\r\n\r\n") - in) + 4;
    struct httpresp_head h;
    for (size_t n = 0; n < head; n++)
        assert_int_equal(httpresp_parse_head(in, n, &h), 1);
    for (size_t n = head; n <= total; n++) {
        assert_int_equal(httpresp_parse_head(in, n, &h), 0);
        assert_int_equal(h.head_len, head);
        assert_int_equal(h.status, 101);
        assert_true(httpresp_has_token(&h, "connection", "upgrade"));
        assert_false(httpresp_has_token(&h, "connection", "close"));
    }
}

/* "head max 64 KiB": a head that does not end within HTTPRESP_HEAD_MAX
 * bytes fails, even if its blank line comes later. */
static void head_is_capped(void **state)
{
    (void)state;
    size_t n = HTTPRESP_HEAD_MAX + 100;
    char *b = xmalloc(n);
    memcpy(b, "HTTP/1.1 200 OK\r\nX: ", 20);
    memset(b + 20, 'a', n - 20);
    memcpy(b + n - 4, "\r\n\r\n", 4);
    struct httpresp_head h;
    assert_int_equal(httpresp_parse_head(b, HTTPRESP_HEAD_MAX - 1, &h), 1);
    assert_int_equal(httpresp_parse_head(b, HTTPRESP_HEAD_MAX, &h), E_INVALID);
    assert_int_equal(httpresp_parse_head(b, n, &h), E_INVALID);
    xfree(b);
}

/* "header count max 100": 100 fields pass, 101 fail. */
static void head_field_count(void **state)
{
    (void)state;
    for (int count = 100; count <= 101; count++) {
        char b[4096];
        size_t o = (size_t)snprintf(b, sizeof b, "HTTP/1.1 200 OK\r\n");
        for (int i = 0; i < count; i++)
            o += (size_t)snprintf(b + o, sizeof b - o, "X%d: %d\r\n", i, i);
        o += (size_t)snprintf(b + o, sizeof b - o, "\r\n");
        struct httpresp_head h;
        int rc = httpresp_parse_head(b, o, &h);
        assert_int_equal(rc, count == 100 ? 0 : E_INVALID);
    }
}

static void tokens(void **state)
{
    (void)state;
    const char *in = "HTTP/1.1 200 OK\r\nConnection: keep-alive , Upgrade\r\n"
                     "Connection: x-foo\r\nVary: ,,\r\n\r\n";
    struct httpresp_head h;
    assert_int_equal(httpresp_parse_head(in, strlen(in), &h), 0);
    assert_true(httpresp_has_token(&h, "Connection", "keep-alive"));
    assert_true(httpresp_has_token(&h, "Connection", "UPGRADE"));
    assert_true(httpresp_has_token(&h, "Connection", "x-foo"));
    assert_false(httpresp_has_token(&h, "Connection", "keep"));
    assert_false(httpresp_has_token(&h, "Vary", ""));
    assert_null(httpresp_field(&h, "Upgrade"));
}

/* ---- framing ---- */

struct framing_case {
    const char *name;
    const char *in;
    int head_request;
    int rc;
    enum httpresp_body kind;
    uint64_t length;
};

static const struct framing_case framing_cases[] = {
    {"a HEAD answer has no body", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", 1, 0,
     HTTPRESP_BODY_NONE, 0},
    {"204 has no body", "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", 0, 0,
     HTTPRESP_BODY_NONE, 0},
    {"304 has no body", "HTTP/1.1 304 Not Modified\r\n\r\n", 0, 0, HTTPRESP_BODY_NONE, 0},
    {"1xx has no body", "HTTP/1.1 100 Continue\r\n\r\n", 0, 0, HTTPRESP_BODY_NONE, 0},
    {"Content-Length delimits", "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n", 0, 0,
     HTTPRESP_BODY_LENGTH, 1234},
    {"Content-Length 0", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0, 0, HTTPRESP_BODY_LENGTH,
     0},
    {"equal repeated Content-Length is one",
     "HTTP/1.1 200 OK\r\nContent-Length: 7, 7\r\n"
     "Content-Length: 7\r\n\r\n",
     0, 0, HTTPRESP_BODY_LENGTH, 7},
    {"differing Content-Length is refused",
     "HTTP/1.1 200 OK\r\nContent-Length: 7\r\n"
     "Content-Length: 8\r\n\r\n",
     0, E_INVALID, HTTPRESP_BODY_NONE, 0},
    {"a signed Content-Length is refused", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", 0,
     E_INVALID, HTTPRESP_BODY_NONE, 0},
    {"an empty Content-Length is refused", "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n", 0,
     E_INVALID, HTTPRESP_BODY_NONE, 0},
    {"a 19-digit Content-Length is refused",
     "HTTP/1.1 200 OK\r\nContent-Length: 1000000000000000000\r\n\r\n", 0, E_INVALID,
     HTTPRESP_BODY_NONE, 0},
    {"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 0,
     HTTPRESP_BODY_CHUNKED, 0},
    {"chunked is case-insensitive", "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n", 0, 0,
     HTTPRESP_BODY_CHUNKED, 0},
    {"Transfer-Encoding wins over Content-Length",
     "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 0,
     HTTPRESP_BODY_CHUNKED, 0},
    {"gzip, chunked is refused", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 0,
     E_INVALID, HTTPRESP_BODY_NONE, 0},
    {"chunked twice is refused",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
     "Transfer-Encoding: chunked\r\n\r\n",
     0, E_INVALID, HTTPRESP_BODY_NONE, 0},
    {"no length reads to close", "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n", 0, 0,
     HTTPRESP_BODY_CLOSE, 0},
};

static void framing_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES(framing_cases); i++) {
        const struct framing_case *c = &framing_cases[i];
        struct httpresp_head h;
        if (httpresp_parse_head(c->in, strlen(c->in), &h) != 0)
            fail_msg("%s: head does not parse", c->name);
        enum httpresp_body kind;
        uint64_t len;
        int rc = httpresp_body_framing(&h, c->head_request, &kind, &len);
        if (rc != c->rc)
            fail_msg("%s: rc %d", c->name, rc);
        if (rc == 0 && (kind != c->kind || len != c->length))
            fail_msg("%s: kind %d length %llu", c->name, (int)kind, (unsigned long long)len);
    }
}

/* ---- chunked ---- */

struct chunk_case {
    const char *name;
    const char *in;
    size_t in_len; /* 0: strlen */
    int rc;        /* final: 1 ended, 0 goes on, E_INVALID */
    const char *out;
    size_t out_len;
    size_t rest; /* bytes after the end of the body (rc == 1) */
};

static const struct chunk_case chunk_cases[] = {
    {"one chunk and the last", "5\r\nhello\r\n0\r\n\r\n", 0, 1, "hello", 5, 0},
    {"several chunks", "3\r\nabc\r\n1\r\nd\r\n0\r\n\r\n", 0, 1, "abcd", 4, 0},
    {"hex sizes in either case", "a\r\n0123456789\r\nB\r\nabcdefghijk\r\n0\r\n\r\n", 0, 1,
     "0123456789abcdefghijk", 21, 0},
    {"extensions are dropped", "3;name=val\r\nabc\r\n0;x\r\n\r\n", 0, 1, "abc", 3, 0},
    {"trailers are dropped", "3\r\nabc\r\n0\r\nX-T: 1\r\nY: 2\r\n\r\n", 0, 1, "abc", 3, 0},
    {"binary data with NUL and CRLF inside", "4\r\n\0\r\n\0\r\n0\r\n\r\n", 14, 1, "\0\r\n\0", 4, 0},
    {"bytes after the end are not the body", "1\r\na\r\n0\r\n\r\nHTTP/1.1", 0, 1, "a", 1, 8},
    {"an unfinished body goes on", "5\r\nhel", 0, 0, "hel", 3, 0},
    {"leading zeros are fine", "0003\r\nabc\r\n0\r\n\r\n", 0, 1, "abc", 3, 0},
    {"an empty size is refused", "\r\nabc\r\n", 0, E_INVALID, "", 0, 0},
    {"a non-hex size is refused", "g\r\n", 0, E_INVALID, "", 0, 0},
    {"a negative size is refused", "-1\r\n", 0, E_INVALID, "", 0, 0},
    {"17 hex digits are refused", "10000000000000000\r\n", 0, E_INVALID, "", 0, 0},
    {"data not followed by CRLF is refused", "3\r\nabcd\r\n", 0, E_INVALID, "", 0, 0},
    {"a bare LF after the size is refused", "3\nabc\r\n", 0, E_INVALID, "", 0, 0},
    {"a control byte in an extension is refused", "3;\x01\r\nabc\r\n", 0, E_INVALID, "", 0, 0},
    {"a huge size is only counted down", "ffffffffffffffff\r\nabc", 0, 0, "abc", 3, 0},
};

static void chunked_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES(chunk_cases); i++) {
        const struct chunk_case *c = &chunk_cases[i];
        size_t n = c->in_len ? c->in_len : strlen(c->in);
        /* At once, then byte by byte: the same bytes out. */
        for (int mode = 0; mode < 2; mode++) {
            char *b = xmalloc(n + 1);
            memcpy(b, c->in, n);
            struct httpresp_chunked st;
            httpresp_chunked_init(&st);
            char out[256];
            size_t olen = 0, pos = 0, used, got;
            int rc = 0;
            while (pos < n && rc == 0) {
                size_t step = mode ? 1 : n - pos;
                rc = httpresp_chunked_decode(&st, b + pos, step, &used, &got);
                if (rc == E_INVALID)
                    break;
                assert_true(used <= step && got <= used);
                memcpy(out + olen, b + pos, got);
                olen += got;
                pos += used;
                if (rc == 0 && used != step)
                    fail_msg("%s: a going-on body left input", c->name);
            }
            if (rc != c->rc)
                fail_msg("%s (mode %d): rc %d, want %d", c->name, mode, rc, c->rc);
            if (rc != E_INVALID && (olen != c->out_len || memcmp(out, c->out, olen) != 0))
                fail_msg("%s (mode %d): out %zu bytes", c->name, mode, olen);
            if (rc == 1 && n - pos != c->rest)
                fail_msg("%s (mode %d): rest %zu", c->name, mode, n - pos);
            if (rc == E_INVALID) {
                /* The state stays failed. */
                assert_int_equal(httpresp_chunked_decode(&st, b, n, &used, &got), E_INVALID);
            }
            xfree(b);
        }
    }
}

/* Trailers past HTTPRESP_TRAILER_MAX bytes are refused (a peer cannot make
 * the decoder run forever without body bytes). */
static void chunked_trailer_cap(void **state)
{
    (void)state;
    struct httpresp_chunked st;
    httpresp_chunked_init(&st);
    char line[64];
    size_t used, got;
    char start[] = "0\r\n";
    assert_int_equal(httpresp_chunked_decode(&st, start, 3, &used, &got), 0);
    int rc = 0;
    for (int i = 0; i < 3000 && rc == 0; i++) {
        int n = snprintf(line, sizeof line, "X-%d: %s\r\n", i, "aaaaaaaaaaaaaaaaaaaaaaaaa");
        rc = httpresp_chunked_decode(&st, line, (size_t)n, &used, &got);
    }
    assert_int_equal(rc, E_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(head_table),     cmocka_unit_test(head_incremental),
        cmocka_unit_test(head_is_capped), cmocka_unit_test(head_field_count),
        cmocka_unit_test(tokens),         cmocka_unit_test(framing_table),
        cmocka_unit_test(chunked_table),  cmocka_unit_test(chunked_trailer_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
