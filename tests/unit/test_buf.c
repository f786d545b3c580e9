/* Unit tests for core/buf: "Every buffer fed by untrusted bytes is created
 * with its maximum size" (STYLE.md). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "core/buf.h"

static void grows_to_its_maximum_and_no_further(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 3000);
    char chunk[1000];
    memset(chunk, 'x', sizeof chunk);
    for (int i = 0; i < 3; i++)
        assert_int_equal(buf_append(&b, chunk, sizeof chunk), 0);
    assert_int_equal(b.len, 3000);
    assert_true(b.cap <= 3001);
    assert_int_equal(b.p[3000], '\0');
    assert_int_equal(buf_append(&b, "y", 1), -E2BIG);
    assert_int_equal(b.len, 3000); /* unchanged */
    buf_free(&b);
    assert_null(b.p);
    assert_int_equal(buf_append(&b, "ab", 2), 0);
    assert_string_equal(b.p, "ab");
    buf_free(&b);
}

static void huge_requests_do_not_overflow(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 100);
    assert_int_equal(buf_append(&b, "abc", 3), 0);
    assert_int_equal(buf_reserve(&b, (size_t)-1), -E2BIG);
    assert_int_equal(buf_reserve(&b, (size_t)-2), -E2BIG);
    assert_int_equal(buf_reserve(&b, 97), 0);
    assert_int_equal(buf_reserve(&b, 98), -E2BIG);
    buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(grows_to_its_maximum_and_no_further),
        cmocka_unit_test(huge_requests_do_not_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
