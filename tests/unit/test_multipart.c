/* Unit tests for core/multipart: multipart/form-data as the fs upload routes
 * receive it (RFC 7578 over RFC 2046; SESSION_API.md section 2, upload). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "core/limits.h"
#include "core/multipart.h"
#include "core/xalloc.h"

#define CT "multipart/form-data; boundary=XyZ"

struct mcase {
    const char *name; /* the rule checked */
    const char *ct, *body;
    int rc;
    /* Parts rendered as "name[filename](type)=data;" with "-" for NULL, or
     * the start of the error message when rc < 0. */
    const char *want;
};

static const struct mcase cases[] = {
    {"one field", CT,
     "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nhello\r\n--XyZ--\r\n", 0,
     "a[-](-)=hello;"},
    {"a file part keeps its filename and type, parts in the order sent", CT,
     "--XyZ\r\nContent-Disposition: form-data; name=\"files[0][dest_path]\"\r\n\r\n/tmp/x\r\n"
     "--XyZ\r\nContent-Disposition: form-data; name=\"files[0][file]\"; filename=\"x.bin\"\r\n"
     "Content-Type: application/octet-stream\r\n\r\nDATA\r\n--XyZ--",
     0, "files[0][dest_path][-](-)=/tmp/x;files[0][file][x.bin](application/octet-stream)=DATA;"},
    {"the boundary may be quoted", "multipart/form-data; boundary=\"a b:c\"",
     "--a b:c\r\nContent-Disposition: form-data; name=x\r\n\r\n1\r\n--a b:c--", 0, "x[-](-)=1;"},
    {"type and parameter names are case-insensitive, other parameters ignored",
     "Multipart/Form-Data; charset=utf-8; BOUNDARY=XyZ",
     "--XyZ\r\ncontent-disposition: form-data; NAME=\"a\"\r\n\r\n\r\n--XyZ--", 0, "a[-](-)=;"},
    {"an empty part is its blank line followed by the delimiter", CT,
     "--XyZ\r\nContent-Disposition: form-data; name=\"e\"\r\n\r\n\r\n--XyZ--", 0, "e[-](-)=;"},
    {"preamble and epilogue are ignored (RFC 2046)", CT,
     "ignored\r\n--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--XyZ--\r\nafter",
     0, "a[-](-)=v;"},
    {"transport padding after a delimiter is allowed", CT,
     "--XyZ  \r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--XyZ--", 0, "a[-](-)=v;"},
    {"the boundary text inside data is data when not a delimiter line", CT,
     "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx\r\n--XyZabc\r\n--XyZ--", 0,
     "a[-](-)=x\r\n--XyZabc;"},
    {"CRLF inside data is kept, the one before the delimiter is not", CT,
     "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nl1\r\nl2\r\n\r\n--XyZ--", 0,
     "a[-](-)=l1\r\nl2\r\n;"},
    {"quoted values take backslash escapes", CT,
     "--XyZ\r\nContent-Disposition: form-data; name=\"q\\\"x\"; filename=\"a\\\\b\"\r\n\r\n1\r\n"
     "--XyZ--",
     0, "q\"x[a\\b](-)=1;"},
    {"a body opening with another boundary's delimiter line is parsed by that boundary (the "
     "pinned client's routed forms, issue 33.6)",
     CT,
     "--other-42\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--XyZ\r\n--other-"
     "42--",
     0, "a[-](-)=v\r\n--XyZ;"},
    {"a body opening with a longer boundary than Content-Type's is parsed by the longer one", CT,
     "--XyZq\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--XyZq--", 0, "a[-](-)=v;"},
    {"no Content-Type", NULL, "--XyZ--", -1, "the request needs Content-Type"},
    {"not multipart/form-data", "application/json; boundary=XyZ", "--XyZ--", -1,
     "Content-Type must be multipart/form-data"},
    {"no boundary", "multipart/form-data", "--XyZ--", -1, "Content-Type multipart/form-data needs"},
    {"boundary longer than 70",
     "multipart/form-data; "
     "boundary=0123456789012345678901234567890123456789012345678901234567890123456789x",
     "", -1, "Content-Type boundary must be"},
    {"unterminated quoted boundary", "multipart/form-data; boundary=\"XyZ", "", -1,
     "Content-Type parameters are malformed"},
    {"no delimiter in the body", CT, "hello", -1, "multipart body has no delimiter line"},
    {"missing closing delimiter", CT,
     "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nhello", -1,
     "multipart part 0 is not followed by a delimiter"},
    {"bare LF line endings are refused (lines end with CRLF)", CT,
     "--XyZ\nContent-Disposition: form-data; name=\"a\"\n\nhello\n--XyZ--\n", -1,
     "multipart body has no delimiter line"},
    {"headers without a blank line", CT, "--XyZ\r\nContent-Disposition: form-data; name=\"a\"", -1,
     "multipart part 0: headers do not end with a blank line"},
    {"header folding is refused", CT,
     "--XyZ\r\nContent-Disposition: form-data;\r\n name=\"a\"\r\n\r\nv\r\n--XyZ--", -1,
     "multipart part 0: folded header lines are not accepted"},
    {"a part needs Content-Disposition", CT,
     "--XyZ\r\nContent-Type: text/plain\r\n\r\nv\r\n--XyZ--", -1,
     "multipart part 0: no Content-Disposition header"},
    {"Content-Disposition needs a name", CT,
     "--XyZ\r\nContent-Disposition: form-data; filename=\"f\"\r\n\r\nv\r\n--XyZ--", -1,
     "multipart part 0: Content-Disposition has no name"},
    {"Content-Disposition must be form-data", CT,
     "--XyZ\r\nContent-Disposition: attachment; name=\"a\"\r\n\r\nv\r\n--XyZ--", -1,
     "multipart part 0: Content-Disposition must be form-data"},
    {"two Content-Disposition headers are refused", CT,
     "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\nContent-Disposition: form-data; "
     "name=\"b\"\r\n\r\nv\r\n--XyZ--",
     -1, "multipart part 0: more than one Content-Disposition"},
    {"a header line without a colon", CT, "--XyZ\r\nbogus\r\n\r\nv\r\n--XyZ--", -1,
     "multipart part 0: header line without"},
};

static void render(const struct mp_form *f, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < f->n && n < cap; i++) {
        const struct mp_part *p = &f->parts[i];
        n += (size_t)snprintf(out + n, cap - n, "%s[%s](%s)=%.*s;", p->name,
                              p->filename ? p->filename : "-",
                              p->content_type ? p->content_type : "-", (int)p->len, p->data);
    }
}

static void table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const struct mcase *c = &cases[i];
        struct mp_form f;
        struct err e;
        err_init(&e);
        int rc = multipart_parse(c->ct, c->body, strlen(c->body), &f, &e);
        if (c->rc == 0) {
            if (rc != 0)
                fail_msg("%s: failed: %s", c->name, e.message);
            char got[1024];
            render(&f, got, sizeof got);
            if (strcmp(got, c->want) != 0)
                fail_msg("%s: got %s, want %s", c->name, got, c->want);
            multipart_free(&f);
        } else {
            if (rc != E_INVALID)
                fail_msg("%s: rc %d, want E_INVALID", c->name, rc);
            if (strncmp(e.message, c->want, strlen(c->want)) != 0)
                fail_msg("%s: message '%s', want '%s...'", c->name, e.message, c->want);
            assert_int_equal(f.n, 0);
            assert_null(f.parts);
        }
    }
}

/* Builds a body of n empty fields named f<i>. */
static char *many_parts(size_t n, size_t *len)
{
    size_t cap = n * 64 + 16, l = 0;
    char *b = xmalloc(cap);
    for (size_t i = 0; i < n; i++)
        l += (size_t)snprintf(b + l, cap - l,
                              "--XyZ\r\nContent-Disposition: form-data; name=f%zu\r\n\r\nv\r\n", i);
    l += (size_t)snprintf(b + l, cap - l, "--XyZ--");
    *len = l;
    return b;
}

static void part_count_is_capped(void **state)
{
    (void)state;
    struct mp_form f;
    struct err e;
    size_t len;
    char *b = many_parts(LIM_MULTIPART_PARTS, &len);
    err_init(&e);
    assert_int_equal(multipart_parse(CT, b, len, &f, &e), 0);
    assert_int_equal(f.n, LIM_MULTIPART_PARTS);
    const struct mp_part *p = multipart_find(&f, "f255");
    assert_non_null(p);
    assert_int_equal(p->len, 1);
    assert_null(multipart_find(&f, "f256"));
    multipart_free(&f);
    xfree(b);

    b = many_parts(LIM_MULTIPART_PARTS + 1, &len);
    err_init(&e);
    assert_int_equal(multipart_parse(CT, b, len, &f, &e), E_INVALID);
    assert_non_null(strstr(e.message, "more than 256 parts"));
    assert_int_equal(f.n, 0);
    xfree(b);
}

static void find_returns_the_first_of_a_name(void **state)
{
    (void)state;
    const char *b = "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n"
                    "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\n2\r\n--XyZ--";
    struct mp_form f;
    struct err e;
    err_init(&e);
    assert_int_equal(multipart_parse(CT, b, strlen(b), &f, &e), 0);
    assert_int_equal(f.n, 2);
    const struct mp_part *p = multipart_find(&f, "a");
    assert_ptr_equal(p, &f.parts[0]);
    assert_null(multipart_find(&f, "b"));
    multipart_free(&f);
    multipart_free(&f); /* freeing an empty form is harmless */
}

static void binary_data_with_nul_bytes(void **state)
{
    (void)state;
    static const char b[] = "--XyZ\r\nContent-Disposition: form-data; name=bin\r\n\r\n\0\x01\xff\0"
                            "\r\n--XyZ--";
    struct mp_form f;
    struct err e;
    err_init(&e);
    assert_int_equal(multipart_parse(CT, b, sizeof b - 1, &f, &e), 0);
    assert_int_equal(f.n, 1);
    assert_int_equal(f.parts[0].len, 4);
    assert_memory_equal(f.parts[0].data, "\0\x01\xff\0", 4);
    multipart_free(&f);
}

/* ---- the streamed parser (multipart_stream_*) ---- */

/* A sink that renders what it is told as render() does. */
struct rsink {
    char out[8192];
    size_t n;
    int in_part;
};

static void rput(struct rsink *r, const char *data, size_t len)
{
    if (len > sizeof r->out - 1 - r->n)
        fail_msg("rendered parts overflow");
    memcpy(r->out + r->n, data, len);
    r->n += len;
    r->out[r->n] = '\0';
}

static int r_begin(void *ctx, const struct mp_part *p, struct err *e)
{
    (void)e;
    struct rsink *r = ctx;
    char head[512];
    int k = snprintf(head, sizeof head, "%s[%s](%s)=", p->name, p->filename ? p->filename : "-",
                     p->content_type ? p->content_type : "-");
    assert_false(r->in_part);
    assert_null(p->data);
    r->in_part = 1;
    rput(r, head, (size_t)k);
    return 0;
}

static int r_data(void *ctx, const char *data, size_t len, struct err *e)
{
    (void)e;
    struct rsink *r = ctx;
    assert_true(r->in_part);
    assert_true(len > 0);
    rput(r, data, len);
    return 0;
}

static int r_end(void *ctx, struct err *e)
{
    (void)e;
    struct rsink *r = ctx;
    assert_true(r->in_part);
    r->in_part = 0;
    rput(r, ";", 1);
    return 0;
}

/* Streams body in pieces: the first `split` bytes, then the rest in pieces
 * of `step` bytes (0: at once). Returns the parse's code; r holds the parts
 * and e the failure. */
static int stream(const char *ct, const char *body, size_t len, size_t split, size_t step,
                  struct rsink *r, struct err *e)
{
    memset(r, 0, sizeof *r);
    err_init(e);
    struct mp_sink sink = {r_begin, r_data, r_end, r};
    struct mp_stream *s;
    int rc = multipart_stream_new(ct, &sink, &s, e);
    if (rc)
        return rc;
    rc = multipart_stream_feed(s, body, split, e);
    for (size_t at = split; rc == 0 && at < len;) {
        size_t k = step == 0 || step > len - at ? len - at : step;
        rc = multipart_stream_feed(s, body + at, k, e);
        at += k;
    }
    if (rc == 0)
        rc = multipart_stream_end(s, e);
    multipart_stream_free(s);
    return rc;
}

/* Every case of the table, its body split at every byte, and fed one byte
 * at a time: the same parts, or the same failure, as multipart_parse. */
static void stream_table_every_split(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const struct mcase *c = &cases[i];
        size_t len = strlen(c->body);
        for (size_t split = 0; split <= len + 1; split++) {
            struct rsink r;
            struct err e;
            int rc = split <= len ? stream(c->ct, c->body, len, split, 0, &r, &e)
                                  : stream(c->ct, c->body, len, 0, 1, &r, &e);
            if (c->rc == 0) {
                if (rc != 0)
                    fail_msg("%s (split %zu): failed: %s", c->name, split, e.message);
                if (strcmp(r.out, c->want) != 0)
                    fail_msg("%s (split %zu): got %s, want %s", c->name, split, r.out, c->want);
            } else {
                if (rc != E_INVALID)
                    fail_msg("%s (split %zu): rc %d, want E_INVALID", c->name, split, rc);
                if (strncmp(e.message, c->want, strlen(c->want)) != 0)
                    fail_msg("%s (split %zu): message '%s', want '%s...'", c->name, split,
                             e.message, c->want);
            }
        }
    }
}

/* A large part's runs, checked against the bytes sent. */
struct rbig {
    size_t got;
    const char *want;
    int parts, ended;
};

static int big_begin(void *ctx, const struct mp_part *p, struct err *e)
{
    (void)p;
    (void)e;
    ((struct rbig *)ctx)->parts++;
    return 0;
}

static int big_data(void *ctx, const char *data, size_t len, struct err *e)
{
    (void)e;
    struct rbig *b = ctx;
    assert_true(len > 0);
    assert_memory_equal(data, b->want + b->got, len);
    b->got += len;
    return 0;
}

static int big_end(void *ctx, struct err *e)
{
    (void)e;
    ((struct rbig *)ctx)->ended++;
    return 0;
}

/* A part far larger than the parser's window arrives whole, in runs, with
 * the boundary's own text and CRLFs inside it, whatever the piece size. */
static void stream_large_part_in_pieces(void **state)
{
    (void)state;
    size_t dlen = 3 * LIM_MULTIPART_WINDOW + 123;
    char *data = xmalloc(dlen);
    for (size_t i = 0; i < dlen; i++)
        data[i] = "ab\r\n--XyZ-"[i % 10];
    static const char head[] =
        "--XyZ\r\nContent-Disposition: form-data; name=\"f\"; filename=\"f\"\r\n\r\n";
    static const char tail[] = "\r\n--XyZ--\r\n";
    size_t hl = sizeof head - 1, len = hl + dlen + sizeof tail - 1;
    char *body = xmalloc(len);
    memcpy(body, head, hl);
    memcpy(body + hl, data, dlen);
    memcpy(body + hl + dlen, tail, sizeof tail - 1);
    static const size_t steps[] = {1, 7, 4096, LIM_MULTIPART_WINDOW - 1, LIM_MULTIPART_WINDOW + 3,
                                   0};
    for (size_t k = 0; k < sizeof steps / sizeof *steps; k++) {
        struct rbig b = {0, data, 0, 0};
        struct err e;
        err_init(&e);
        struct mp_sink sink = {big_begin, big_data, big_end, &b};
        struct mp_stream *s;
        assert_int_equal(multipart_stream_new(CT, &sink, &s, &e), 0);
        int rc = 0;
        for (size_t at = 0; rc == 0 && at < len;) {
            size_t n = steps[k] == 0 || steps[k] > len - at ? len - at : steps[k];
            rc = multipart_stream_feed(s, body + at, n, &e);
            at += n;
        }
        if (rc == 0)
            rc = multipart_stream_end(s, &e);
        multipart_stream_free(s);
        if (rc != 0)
            fail_msg("step %zu: %s", steps[k], e.message);
        assert_int_equal(b.parts, 1);
        assert_int_equal(b.ended, 1);
        assert_int_equal(b.got, dlen);
    }
    xfree(body);
    xfree(data);
}

/* A delimiter's transport padding is bounded the same in both parsers:
 * past LIM_MULTIPART_PADDING blanks the line is data. */
static void padding_past_the_cap_is_data(void **state)
{
    (void)state;
    char body[512];
    char pad[LIM_MULTIPART_PADDING + 2];
    memset(pad, ' ', sizeof pad - 1);
    pad[sizeof pad - 1] = '\0';
    snprintf(body, sizeof body,
             "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n--XyZ%s\r\n--XyZ--", pad);
    struct mp_form f;
    struct err e;
    err_init(&e);
    assert_int_equal(multipart_parse(CT, body, strlen(body), &f, &e), 0);
    assert_int_equal(f.n, 1);
    assert_int_equal(f.parts[0].len, 1 + 2 + 5 + strlen(pad));
    multipart_free(&f);
    struct rsink r;
    assert_int_equal(stream(CT, body, strlen(body), 0, 1, &r, &e), 0);
    char want[512];
    snprintf(want, sizeof want, "a[-](-)=x\r\n--XyZ%s;", pad);
    assert_string_equal(r.out, want);
    pad[LIM_MULTIPART_PADDING] = '\0'; /* at the cap: a delimiter */
    snprintf(body, sizeof body,
             "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n--XyZ%s\r\n", pad);
    snprintf(body + strlen(body), sizeof body - strlen(body),
             "Content-Disposition: form-data; name=b\r\n\r\ny\r\n--XyZ--");
    assert_int_equal(stream(CT, body, strlen(body), 0, 1, &r, &e), 0);
    assert_string_equal(r.out, "a[-](-)=x;b[-](-)=y;");
}

/* A sink's failure stops the parse with its code; a header block past the
 * cap is refused before its end arrives; more than LIM_MULTIPART_PARTS
 * parts are refused as the buffered parser refuses them. */
static int refuse_b(void *ctx, const struct mp_part *p, struct err *e)
{
    (void)ctx;
    if (strcmp(p->name, "b") == 0)
        return err_set(e, E_INVALID, "bad_request", "no b");
    return 0;
}

static void stream_failures(void **state)
{
    (void)state;
    struct rsink r;
    struct err e;
    const char *b = "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n"
                    "--XyZ\r\nContent-Disposition: form-data; name=b\r\n\r\n2\r\n--XyZ--";
    struct mp_sink sink = {refuse_b, r_data, r_end, &r};
    memset(&r, 0, sizeof r);
    r.in_part = 1; /* r_data and r_end expect a part */
    struct mp_stream *s;
    err_init(&e);
    assert_int_equal(multipart_stream_new(CT, &sink, &s, &e), 0);
    assert_int_equal(multipart_stream_feed(s, b, strlen(b), &e), E_INVALID);
    assert_string_equal(e.message, "no b");
    assert_int_equal(multipart_stream_feed(s, "x", 1, &e), E_INVALID);
    assert_int_equal(multipart_stream_end(s, &e), E_INVALID);
    multipart_stream_free(s);

    /* Header bytes past the cap, with no end in sight: refused at once. */
    size_t hl = LIM_MULTIPART_HEADER_BYTES + 64;
    char *h = xmalloc(hl);
    memcpy(h, "--XyZ\r\nX-Long: ", 15);
    memset(h + 15, 'a', hl - 15);
    err_init(&e);
    memset(&r, 0, sizeof r);
    sink = (struct mp_sink){r_begin, r_data, r_end, &r};
    assert_int_equal(multipart_stream_new(CT, &sink, &s, &e), 0);
    assert_int_equal(multipart_stream_feed(s, h, hl, &e), E_INVALID);
    assert_non_null(strstr(e.message, "headers exceed 8 KiB"));
    multipart_stream_free(s);
    xfree(h);

    size_t len;
    char *many = many_parts(LIM_MULTIPART_PARTS + 1, &len);
    assert_int_equal(stream(CT, many, len, 0, 4096, &r, &e), E_INVALID);
    assert_non_null(strstr(e.message, "more than 256 parts"));
    xfree(many);
    assert_int_equal(stream("text/plain", "", 0, 0, 0, &r, &e), E_INVALID);
    assert_non_null(strstr(e.message, "Content-Type must be multipart/form-data"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table),
        cmocka_unit_test(part_count_is_capped),
        cmocka_unit_test(find_returns_the_first_of_a_name),
        cmocka_unit_test(binary_data_with_nul_bytes),
        cmocka_unit_test(stream_table_every_split),
        cmocka_unit_test(stream_large_part_in_pieces),
        cmocka_unit_test(padding_past_the_cap_is_data),
        cmocka_unit_test(stream_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
