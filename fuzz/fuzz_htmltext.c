/* libFuzzer target for domain/htmltext: arbitrary bytes as a page's HTML
 * (a search result's content). The output holds at most max_chars code
 * points (max_chars from the first byte) of valid UTF-8, says truncated
 * only when it reached max_chars, and the same input gives the same
 * output. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/xalloc.h"
#include "domain/htmltext.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Code points of s, or (size_t)-1 when s is not valid UTF-8 (checked
 * through mbrtowc-free arithmetic: lead byte, continuation bytes, and the
 * decoded value's range). */
static size_t code_points(const char *s)
{
    size_t n = 0;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p, len = c < 0x80         ? 1
                               : (c >> 5) == 6  ? 2
                               : (c >> 4) == 14 ? 3
                               : (c >> 3) == 30 ? 4
                                                : 0;
        if (!len)
            return (size_t)-1;
        uint32_t cp = len == 1 ? c : c & (0x7Fu >> len);
        for (unsigned k = 1; k < len; k++) {
            if ((p[k] >> 6) != 2)
                return (size_t)-1;
            cp = cp << 6 | (p[k] & 0x3F);
        }
        static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return (size_t)-1;
        p += len;
        n++;
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t max = (size_t)data[0] * 4 + 1;
    char *buf = xmalloc(size - 1);
    memcpy(buf, data + 1, size - 1);
    for (int md = 0; md < 2; md++) {
        char *out = NULL, *again = NULL;
        int cut = 0, cut2 = 0;
        htmltext_convert(buf, size - 1, md, max, &out, &cut);
        size_t cps = out ? code_points(out) : (size_t)-1;
        /* A cut leaves room for less than one character and its line breaks. */
        if (cps == (size_t)-1 || cps > max || (cut && cps + 2 < max))
            abort();
        htmltext_convert(buf, size - 1, md, max, &again, &cut2);
        if (strcmp(out, again) != 0 || cut != cut2)
            abort();
        xfree(out);
        xfree(again);
    }
    char *plain = NULL;
    int pcut = 0;
    htmltext_plain(buf, size - 1, max, &plain, &pcut);
    size_t pcps = plain ? code_points(plain) : (size_t)-1;
    if (pcps == (size_t)-1 || pcps > max || (pcut && pcps != max))
        abort();
    xfree(plain);
    xfree(buf);
    return 0;
}
