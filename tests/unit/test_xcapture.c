/* Unit tests for runtime/xcapture: the screen PNG encoder. Each image is
 * encoded, then checked the way a PNG reader would: the signature, IHDR,
 * every chunk's CRC, and the pixels after zlib's own inflate (which also
 * checks the stream's Adler-32). The cases are the shapes screens have:
 * flat colour, repeated rows, runs of one pixel, and noise that matches
 * nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/err.h"
#include "core/xalloc.h"
#include "runtime/xcapture.h"

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Encodes w x h pixels made by fill(x, y) and checks the decoded result. */
static void roundtrip(int w, int h, uint32_t (*fill)(int x, int y), size_t *png_len)
{
    size_t stride = (size_t)w * 4 + 8; /* rows with padding, as X may give */
    uint8_t *px = xcalloc((size_t)h, stride);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint32_t rgb = fill(x, y);
            uint8_t *p = px + (size_t)y * stride + 4 * (size_t)x;
            p[0] = (uint8_t)rgb;         /* B */
            p[1] = (uint8_t)(rgb >> 8);  /* G */
            p[2] = (uint8_t)(rgb >> 16); /* R */
            p[3] = 0xEE;                 /* X: ignored */
        }
    struct err e;
    err_init(&e);
    char *png = NULL;
    size_t len = 0;
    assert_int_equal(xcapture_png(px, w, h, stride, &png, &len, &e), 0);
    const uint8_t *p = (const uint8_t *)png;
    assert_memory_equal(p, "\x89PNG\r\n\x1a\n", 8);
    size_t off = 8;
    uint8_t *z = NULL;
    size_t zlen = 0;
    int seen_end = 0;
    while (off + 12 <= len) {
        uint32_t n = be32(p + off);
        assert_true(off + 12 + n <= len);
        uLong crc = crc32(crc32(0L, Z_NULL, 0), p + off + 4, n + 4);
        assert_int_equal(crc, be32(p + off + 8 + n));
        if (memcmp(p + off + 4, "IHDR", 4) == 0) {
            assert_int_equal(be32(p + off + 8), (uint32_t)w);
            assert_int_equal(be32(p + off + 12), (uint32_t)h);
            assert_int_equal(p[off + 16], 8); /* bit depth */
            assert_int_equal(p[off + 17], 2); /* RGB */
        } else if (memcmp(p + off + 4, "IDAT", 4) == 0) {
            z = xrealloc(z, zlen + n);
            memcpy(z + zlen, p + off + 8, n);
            zlen += n;
        } else if (memcmp(p + off + 4, "IEND", 4) == 0) {
            seen_end = 1;
        }
        off += 12 + n;
    }
    assert_int_equal(off, len);
    assert_true(seen_end);
    uLongf rawlen = (uLongf)(1 + 3 * (size_t)w) * (uLongf)h;
    uint8_t *raw = xmalloc(rawlen + 1);
    uLongf got = rawlen + 1;
    assert_int_equal(uncompress(raw, &got, z, zlen), Z_OK);
    assert_int_equal(got, rawlen);
    for (int y = 0; y < h; y++) {
        const uint8_t *row = raw + (size_t)y * (1 + 3 * (size_t)w);
        assert_int_equal(row[0], 0); /* filter: none */
        for (int x = 0; x < w; x++) {
            uint32_t rgb =
                (uint32_t)row[1 + 3 * x] << 16 | (uint32_t)row[2 + 3 * x] << 8 | row[3 + 3 * x];
            if (rgb != fill(x, y))
                fail_msg("pixel %d,%d: %06x, expected %06x", x, y, rgb, fill(x, y));
        }
    }
    *png_len = len;
    xfree(raw);
    xfree(z);
    xfree(png);
    xfree(px);
}

static uint32_t flat(int x, int y)
{
    (void)x;
    (void)y;
    return 0x0080ff;
}

/* A browser-like screen: a bar on top, a flat page with some "text". */
static uint32_t screen(int x, int y)
{
    if (y < 40)
        return y == 39 ? 0xc0c0c0 : 0xdde3ea;
    if (y > 100 && y < 110 && x > 50 && x < 300)
        return (uint32_t)((x * 7 + y * 13) % 3) ? 0x202020 : 0xffffff;
    return 0xffffff;
}

static uint32_t noise(int x, int y)
{
    uint32_t v = (uint32_t)x * 2654435761u ^ (uint32_t)y * 40503u;
    v ^= v >> 13;
    v *= 0x5bd1e995u;
    return (v ^ v >> 15) & 0xffffff;
}

static uint32_t stripes(int x, int y)
{
    (void)y;
    return (uint32_t)(x / 5) * 0x010203u & 0xffffff;
}

/* "Speed over size": flat screens come out small. */
static void test_flat_is_small(void **st)
{
    (void)st;
    size_t len;
    roundtrip(1920, 1080, flat, &len);
    assert_true(len < 100000);
}

static void test_screen_like(void **st)
{
    (void)st;
    size_t len;
    roundtrip(1280, 200, screen, &len);
    assert_true(len < 1280 * 200 * 3 / 10);
}

/* Nothing repeats: every byte is a literal, and still a valid PNG. */
static void test_noise(void **st)
{
    (void)st;
    size_t len;
    roundtrip(333, 77, noise, &len);
}

static void test_runs_and_rows(void **st)
{
    (void)st;
    size_t len;
    roundtrip(1000, 50, stripes, &len);
}

/* Sizes at the edges: one pixel, one row, one column, and rows longer than
 * deflate's 32 KiB window (no back-reference to the row above). */
static void test_edges(void **st)
{
    (void)st;
    size_t len;
    roundtrip(1, 1, noise, &len);
    roundtrip(500, 1, stripes, &len);
    roundtrip(1, 300, noise, &len);
    roundtrip(11000, 3, stripes, &len);
    roundtrip(11000, 3, flat, &len);
}

static void test_bad_sizes(void **st)
{
    (void)st;
    uint8_t px[16] = {0};
    struct err e;
    err_init(&e);
    char *png = NULL;
    size_t len = 0;
    assert_int_equal(xcapture_png(px, 0, 1, 16, &png, &len, &e), E_INTERNAL);
    assert_int_equal(xcapture_png(px, 2, 2, 4, &png, &len, &e), E_INTERNAL); /* stride < 4w */
    assert_null(png);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flat_is_small), cmocka_unit_test(test_screen_like),
        cmocka_unit_test(test_noise),         cmocka_unit_test(test_runs_and_rows),
        cmocka_unit_test(test_edges),         cmocka_unit_test(test_bad_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
