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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table),
        cmocka_unit_test(part_count_is_capped),
        cmocka_unit_test(find_returns_the_first_of_a_name),
        cmocka_unit_test(binary_data_with_nul_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
