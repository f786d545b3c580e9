/* HTML to text and markdown for search content (domain/htmltext). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/xalloc.h"
#include "domain/htmltext.h"

static char *conv(const char *html, int markdown, size_t max, int *cut)
{
    char *out = NULL;
    htmltext_convert(html, strlen(html), markdown, max, &out, cut);
    assert_non_null(out);
    return out;
}

static void test_markdown(void **state)
{
    (void)state;
    int cut;
    char *t = conv("<html><head><title>x</title><script>a<b</script></head><body>"
                   "<h2>Sub  title</h2><p>One &amp; <b>two</b>&#x21;</p>"
                   "<p>A <a href=\"/n?a=1&amp;b=2\">link</a>.</p><ul><li>i</li><li>j</li></ul>"
                   "<!-- gone --><style>p{}</style></body></html>",
                   1, 1000, &cut);
    assert_string_equal(t, "## Sub title\n\nOne & two!\n\nA [link](/n?a=1&b=2).\n\n- i\n- j");
    assert_int_equal(cut, 0);
    xfree(t);
}

static void test_text_and_cut(void **state)
{
    (void)state;
    int cut;
    char *t = conv("<h1>T\xc3\xa9st</h1><p>abc def</p>", 0, 8, &cut);
    assert_string_equal(t, "T\xc3\xa9st\n\nab");
    assert_int_equal(cut, 1);
    xfree(t);
    t = conv("", 0, 10, &cut);
    assert_string_equal(t, "");
    xfree(t);
    /* Unterminated markup and a lone '<' never read past the input. */
    t = conv("a < b <p", 0, 100, &cut);
    assert_string_equal(t, "a < b");
    xfree(t);
    t = conv("<script>never closed", 0, 100, &cut);
    assert_string_equal(t, "");
    xfree(t);
    t = conv("<a href='javascript:x'>no</a> &#0; &bogus; &#x110000;", 1, 100, &cut);
    assert_string_equal(t, "no \xef\xbf\xbd &bogus; \xef\xbf\xbd");
    xfree(t);
}

static void test_plain(void **state)
{
    (void)state;
    int cut;
    char *t = NULL;
    htmltext_plain("h\xc3\xa9llo", 6, 2, &t, &cut);
    assert_string_equal(t, "h\xc3\xa9");
    assert_int_equal(cut, 1);
    xfree(t);
    /* Invalid bytes (a lone continuation, a cut sequence, an overlong form,
     * a surrogate) become U+FFFD: the text is always valid JSON. */
    htmltext_plain("a\x80"
                   "b\xe2\x82",
                   5, 100, &t, &cut);
    assert_string_equal(t, "a\xef\xbf\xbd"
                           "b\xef\xbf\xbd\xef\xbf\xbd");
    assert_int_equal(cut, 0);
    xfree(t);
    t = conv("<p>\xc0\xaf\xed\xa0\x80\xf0\x9f\x98\x80</p>", 0, 100, &cut);
    assert_string_equal(
        t, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xf0\x9f\x98\x80");
    xfree(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_markdown),
        cmocka_unit_test(test_text_and_cut),
        cmocka_unit_test(test_plain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
