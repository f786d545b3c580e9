/* Unit tests for core/totp: the test vectors of RFC 6238 appendix B (SHA-1)
 * and RFC 4226 appendix D, and base32 secrets as people paste them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "core/err.h"
#include "core/totp.h"

/* "12345678901234567890", the key of both RFCs, in base32. */
#define RFC_KEY_B32 "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"
#define RFC_KEY     "12345678901234567890"

static void rfc4226_hotp(void **state)
{
    (void)state;
    static const char *const want[] = {"755224", "287082", "359152", "969429", "338314",
                                       "254676", "287922", "162583", "399871", "520489"};
    for (uint64_t i = 0; i < 10; i++) {
        char out[9];
        totp_hotp((const uint8_t *)RFC_KEY, 20, i, 6, out);
        assert_string_equal(out, want[i]);
    }
}

static void rfc6238_sha1_vectors(void **state)
{
    (void)state;
    static const struct {
        int64_t t;
        const char *eight;
    } v[] = {{59, "94287082"},         {1111111109, "07081804"}, {1111111111, "14050471"},
             {1234567890, "89005924"}, {2000000000, "69279037"}, {20000000000LL, "65353130"}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char out[9];
        totp_hotp((const uint8_t *)RFC_KEY, 20, (uint64_t)(v[i].t / 30), 8, out);
        assert_string_equal(out, v[i].eight);
        /* Six digits are the last six of the eight (the same value mod 10^6). */
        char six[9];
        int64_t exp = 0;
        assert_int_equal(totp_code(RFC_KEY_B32, v[i].t, six, &exp), 0);
        assert_string_equal(six, v[i].eight + 2);
        assert_int_equal(exp, (v[i].t / 30 + 1) * 30);
    }
}

static void base32_as_pasted(void **state)
{
    (void)state;
    char a[9], b[9];
    int64_t e1, e2;
    assert_int_equal(totp_code(RFC_KEY_B32, 59, a, &e1), 0);
    assert_int_equal(totp_code("gezd gnbv gy3t qojq gezd-gnbv gy3t qojq====", 59, b, &e2), 0);
    assert_string_equal(a, b);
    assert_int_equal(totp_code("GEZ1", 59, a, &e1), E_INVALID);     /* 1 is not base32 */
    assert_int_equal(totp_code("  ", 59, a, &e1), E_INVALID);       /* empty */
    assert_int_equal(totp_code("GEZDGNB!", 59, a, &e1), E_INVALID); /* punctuation */
    uint8_t small[2];
    size_t n;
    assert_int_equal(totp_base32_decode("GEZDGNBV", small, sizeof small, &n), E_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rfc4226_hotp),
        cmocka_unit_test(rfc6238_sha1_vectors),
        cmocka_unit_test(base32_as_pasted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
