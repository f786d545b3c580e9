#include "runtime/xcapture.h"

#include <string.h>
#include <zlib.h> /* crc32, adler32 */

#include "core/xalloc.h"

/*
 * A PNG encoder for screens, written for speed rather than size.
 *
 * Screens are mostly flat colour and repeated rows, which a general-purpose
 * deflate (zlib level 1) spends 50 ms of hashing on for a 1920x1080 frame on
 * this machine. This one looks only where screens repeat: a run of the same
 * pixel (a back-reference 3 bytes away) and the row above (one row length
 * away), greedily, and codes everything else as a literal. One deflate
 * block with the fixed Huffman codes (RFC 1951 3.2.6), no tables to build.
 * Rows are filter type 0. Flat screens come out small; photos and text come
 * out near their raw size (a literal costs 8 or 9 bits).
 */

#define MAX_MATCH 258
#define MIN_MATCH 4     /* shorter matches cost more bits than literals */
#define WINDOW    32768 /* deflate's farthest back-reference */

struct bits {
    uint8_t *out;
    size_t pos;
    uint64_t acc;
    int n;
};

static inline void put(struct bits *b, uint32_t v, int nbits)
{
    b->acc |= (uint64_t)v << b->n;
    b->n += nbits;
    while (b->n >= 8) {
        b->out[b->pos++] = (uint8_t)b->acc;
        b->acc >>= 8;
        b->n -= 8;
    }
}

/* Huffman codes go most significant bit first. */
static inline uint32_t rev(uint32_t v, int n)
{
    uint32_t r = 0;
    for (int i = 0; i < n; i++)
        r = (r << 1) | ((v >> i) & 1);
    return r;
}

/* Fixed literal/length code of symbol s (0..287): reversed code and length. */
static void fixed_code(int s, uint32_t *code, int *len)
{
    if (s < 144) {
        *code = rev(0x30 + (uint32_t)s, 8);
        *len = 8;
    } else if (s < 256) {
        *code = rev(0x190 + (uint32_t)(s - 144), 9);
        *len = 9;
    } else if (s < 280) {
        *code = rev((uint32_t)(s - 256), 7);
        *len = 7;
    } else {
        *code = rev(0xC0 + (uint32_t)(s - 280), 8);
        *len = 8;
    }
}

/* A symbol with its extra bits, packed into one put(). */
struct sym {
    uint32_t bits;
    int n;
};

struct tables {
    struct sym lit[256];
    struct sym len[MAX_MATCH + 1]; /* length code + extra bits */
};

static void tables_init(struct tables *t)
{
    for (int s = 0; s < 256; s++) {
        uint32_t c;
        int n;
        fixed_code(s, &c, &n);
        t->lit[s] = (struct sym){c, n};
    }
    static const int base[] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                               31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
    static const int extra[] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
    for (int l = 3; l <= MAX_MATCH; l++) {
        int k = 28;
        while (base[k] > l)
            k--;
        uint32_t c;
        int n;
        fixed_code(257 + k, &c, &n);
        t->len[l] = (struct sym){c | (uint32_t)(l - base[k]) << n, n + extra[k]};
    }
}

/* Distance code of d (1..32768) with its extra bits (5-bit fixed codes). */
static struct sym dist_sym(int d)
{
    static const int base[] = {1,    2,    3,    4,    5,    7,    9,    13,    17,    25,
                               33,   49,   65,   97,   129,  193,  257,  385,   513,   769,
                               1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
    int k = 29;
    while (base[k] > d)
        k--;
    int extra = k < 4 ? 0 : k / 2 - 1;
    return (struct sym){rev((uint32_t)k, 5) | (uint32_t)(d - base[k]) << 5, 5 + extra};
}

static void put_match(struct bits *b, const struct tables *t, int len, struct sym d)
{
    put(b, t->len[len].bits, t->len[len].n);
    put(b, d.bits, d.n);
}

/* Length of the common prefix of a and b, at most max. */
static inline int common(const uint8_t *a, const uint8_t *b, int max)
{
    int n = 0;
    while (n < max && a[n] == b[n])
        n++;
    return n;
}

static void chunk(uint8_t *out, size_t *pos, const char *type, const uint8_t *data, size_t len)
{
    uint8_t *p = out + *pos;
    p[0] = (uint8_t)(len >> 24);
    p[1] = (uint8_t)(len >> 16);
    p[2] = (uint8_t)(len >> 8);
    p[3] = (uint8_t)len;
    memcpy(p + 4, type, 4);
    if (data && data != p + 8)
        memmove(p + 8, data, len);
    uLong crc = crc32(crc32(0L, Z_NULL, 0), p + 4, (uInt)(len + 4));
    p += 8 + len;
    p[0] = (uint8_t)(crc >> 24);
    p[1] = (uint8_t)(crc >> 16);
    p[2] = (uint8_t)(crc >> 8);
    p[3] = (uint8_t)crc;
    *pos += 12 + len;
}

int xcapture_png(const uint8_t *bgrx, int width, int height, size_t stride, char **png, size_t *len,
                 struct err *e)
{
    *png = NULL;
    *len = 0;
    if (width < 1 || height < 1 || width > 16384 || height > 16384 || stride < (size_t)width * 4)
        return err_set(e, E_INTERNAL, "internal", "a capture of %dx%d is not encodable", width,
                       height);
    static struct tables t;
    static int ready; /* benign race: every thread writes the same values */
    if (!ready) {
        tables_init(&t);
        ready = 1;
    }
    const int rowlen = 1 + 3 * width; /* the filter byte, then R G B */
    const int up_ok = rowlen <= WINDOW;
    const struct sym d3 = dist_sym(3), dup = dist_sym(up_ok ? rowlen : 1);
    /* Worst case: every byte a 9-bit literal, plus headers. */
    size_t raw = (size_t)rowlen * (size_t)height;
    size_t cap = 8 + 25 + 12 + 2 + raw / 8 * 9 + 64 + 4 + 12;
    uint8_t *out = xmalloc(cap);
    memcpy(out, "\x89PNG\r\n\x1a\n", 8);
    size_t pos = 8;
    uint8_t ihdr[13] = {(uint8_t)(width >> 24),
                        (uint8_t)(width >> 16),
                        (uint8_t)(width >> 8),
                        (uint8_t)width,
                        (uint8_t)(height >> 24),
                        (uint8_t)(height >> 16),
                        (uint8_t)(height >> 8),
                        (uint8_t)height,
                        8, /* bit depth */
                        2 /* RGB */,
                        0,
                        0,
                        0};
    chunk(out, &pos, "IHDR", ihdr, sizeof ihdr);

    /* The zlib stream goes where the IDAT's data will be. */
    size_t idat = pos;
    struct bits b = {out, idat + 8, 0, 0};
    b.out[b.pos++] = 0x78;  /* deflate, 32 KiB window */
    b.out[b.pos++] = 0x01;  /* fastest; (0x78 << 8 | 0x01) % 31 == 0 */
    put(&b, 1 | 1 << 1, 3); /* BFINAL, fixed codes */
    uint8_t *rows = xmalloc((size_t)rowlen * 2);
    uint8_t *prev = rows, *cur = rows + rowlen;
    uLong adler = adler32(0L, Z_NULL, 0);
    for (int y = 0; y < height; y++) {
        const uint8_t *src = bgrx + (size_t)y * stride;
        cur[0] = 0;
        for (int x = 0; x < width; x++) {
            cur[1 + 3 * x] = src[4 * x + 2];
            cur[2 + 3 * x] = src[4 * x + 1];
            cur[3 + 3 * x] = src[4 * x];
        }
        adler = adler32(adler, cur, (uInt)rowlen);
        int i = 0;
        while (i < rowlen) {
            int left = rowlen - i, max = left < MAX_MATCH ? left : MAX_MATCH;
            int lu = y > 0 && up_ok ? common(cur + i, prev + i, max) : 0;
            int lr = i >= 3 && lu < max ? common(cur + i, cur + i - 3, max) : 0;
            if (lu >= MIN_MATCH && lu >= lr) {
                put_match(&b, &t, lu, dup);
                i += lu;
            } else if (lr >= MIN_MATCH) {
                put_match(&b, &t, lr, d3);
                i += lr;
            } else {
                put(&b, t.lit[cur[i]].bits, t.lit[cur[i]].n);
                i++;
            }
        }
        uint8_t *tmp = prev;
        prev = cur;
        cur = tmp;
    }
    xfree(rows);
    {
        uint32_t c;
        int n;
        fixed_code(256, &c, &n); /* end of block */
        put(&b, c, n);
    }
    if (b.n > 0)
        put(&b, 0, 8 - b.n);
    b.out[b.pos++] = (uint8_t)(adler >> 24);
    b.out[b.pos++] = (uint8_t)(adler >> 16);
    b.out[b.pos++] = (uint8_t)(adler >> 8);
    b.out[b.pos++] = (uint8_t)adler;
    pos = idat;
    chunk(out, &pos, "IDAT", out + idat + 8, b.pos - (idat + 8));
    chunk(out, &pos, "IEND", NULL, 0);
    *png = (char *)out;
    *len = pos;
    return 0;
}
