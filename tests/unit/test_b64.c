/* Unit tests for core/b64: standard base64 (RFC 4648 section 4), the one
 * codec of the tree (CDP payloads, process output, proxy credentials). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "core/b64.h"
#include "core/xalloc.h"

struct dcase {
    const char *name, *in;
    int rc;
    const char *want; /* when rc == 0 */
    size_t want_len;
};

static const struct dcase decode_cases[] = {
    {"RFC 4648 10: the test vector foobar", "Zm9vYmFy", 0, "foobar", 6},
    {"RFC 4648 10: one padding character", "Zm9vYmE=", 0, "fooba", 5},
    {"RFC 4648 10: two padding characters", "Zm9vYg==", 0, "foob", 4},
    {"padding may be left out (CDP bodies are padded, process data need not be)", "Zm9vYg", 0,
     "foob", 4},
    {"the empty string is zero bytes", "", 0, "", 0},
    {"a form body Chromium hands over base64-encoded", "YT0xJmI9Mg==", 0, "a=1&b=2", 7},
    {"binary bytes", "AP8Q", 0, "\x00\xff\x10", 3},
    {"a character outside the alphabet", "YT0*", -1, NULL, 0},
    {"whitespace is outside the alphabet", "YT0x\nJmI9Mg", -1, NULL, 0},
    {"padding only at the end", "Zg==Zg==", -1, NULL, 0},
    {"padding that does not complete a quantum", "Zm9v=", -1, NULL, 0},
    {"a dangling final character", "Zm9vY", -1, NULL, 0},
};

static void decode_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof decode_cases / sizeof *decode_cases; i++) {
        const struct dcase *c = &decode_cases[i];
        unsigned char *out = NULL;
        size_t len = 0;
        int rc = b64_decode(c->in, strlen(c->in), &out, &len);
        if (rc != c->rc)
            fail_msg("%s: rc %d, want %d", c->name, rc, c->rc);
        if (rc == 0 && (len != c->want_len || memcmp(out, c->want, len) != 0 || out[len] != '\0'))
            fail_msg("%s: decoded %zu bytes, want %zu", c->name, len, c->want_len);
        xfree(out);
    }
}

struct ecase {
    const char *name;
    const char *in;
    size_t n;
    const char *want;
};

static const struct ecase encode_cases[] = {
    {"RFC 4648 10: empty", "", 0, ""},
    {"RFC 4648 10: f", "f", 1, "Zg=="},
    {"RFC 4648 10: fo", "fo", 2, "Zm8="},
    {"RFC 4648 10: foo", "foo", 3, "Zm9v"},
    {"RFC 4648 10: foobar", "foobar", 6, "Zm9vYmFy"},
    {"Basic credentials of an upstream proxy", "user:p@ss", 9, "dXNlcjpwQHNz"},
    {"binary bytes use + and /", "\xfb\xff", 2, "+/8="},
};

static void encode_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof encode_cases / sizeof *encode_cases; i++) {
        const struct ecase *c = &encode_cases[i];
        size_t len = 0;
        char *out = b64_encode(c->in, c->n, &len);
        if (strcmp(out, c->want) != 0 || len != strlen(c->want))
            fail_msg("%s: '%s' (%zu), want '%s'", c->name, out, len, c->want);
        unsigned char *back = NULL;
        size_t blen = 0;
        if (b64_decode(out, len, &back, &blen) != 0 || blen != c->n ||
            memcmp(back, c->in, c->n) != 0)
            fail_msg("%s: does not decode back", c->name);
        xfree(back);
        xfree(out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decode_table),
        cmocka_unit_test(encode_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
