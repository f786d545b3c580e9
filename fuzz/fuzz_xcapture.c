/* libFuzzer target for runtime/xcapture: arbitrary bytes as screen pixels
 * (the X server, which runs as the session's user, chooses them), with the
 * size taken from the first two bytes. Invariant: the PNG inflates (zlib
 * checks the Adler-32) to exactly the pixels given, row by row. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/err.h"
#include "core/xalloc.h"
#include "runtime/xcapture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    int w = 1 + data[0], h = 1 + data[1] % 64;
    size_t need = (size_t)w * (size_t)h * 4;
    uint8_t *px = xcalloc(1, need);
    memcpy(px, data + 2, size - 2 < need ? size - 2 : need);
    struct err e;
    err_init(&e);
    char *png = NULL;
    size_t len = 0;
    if (xcapture_png(px, w, h, (size_t)w * 4, &png, &len, &e) != 0)
        abort();
    /* The IDAT's data starts after the signature, IHDR (25) and its header. */
    uint32_t n = (uint32_t)(uint8_t)png[33] << 24 | (uint32_t)(uint8_t)png[34] << 16 |
                 (uint32_t)(uint8_t)png[35] << 8 | (uint8_t)png[36];
    if (41 + (size_t)n + 4 + 12 != len) /* IDAT CRC, IEND */
        abort();
    uLongf rawlen = (uLongf)(1 + 3 * (size_t)w) * (uLongf)h, got = rawlen;
    uint8_t *raw = xmalloc(rawlen);
    if (uncompress(raw, &got, (const Bytef *)png + 41, n) != Z_OK || got != rawlen)
        abort();
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const uint8_t *p = px + ((size_t)y * (size_t)w + (size_t)x) * 4;
            const uint8_t *q = raw + (size_t)y * (1 + 3 * (size_t)w) + 1 + 3 * (size_t)x;
            if (q[0] != p[2] || q[1] != p[1] || q[2] != p[0])
                abort();
        }
    xfree(raw);
    xfree(png);
    xfree(px);
    return 0;
}
