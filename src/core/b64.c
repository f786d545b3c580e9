#include "core/b64.h"

#include "core/xalloc.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *b64_encode(const void *data, size_t n, size_t *out_len)
{
    const unsigned char *p = data;
    size_t len = (n + 2) / 3 * 4;
    char *out = xmalloc(len + 1), *o = out;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8 | p[i + 2];
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = alphabet[(v >> 6) & 63];
        *o++ = alphabet[v & 63];
    }
    if (i < n) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0);
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    *o = '\0';
    if (out_len)
        *out_len = len;
    return out;
}

static int value_of(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

int b64_decode(const char *in, size_t n, unsigned char **out, size_t *out_len)
{
    size_t pad = 0;
    while (pad < 2 && n > 0 && in[n - 1] == '=') {
        n--;
        pad++;
    }
    if (pad && (n + pad) % 4 != 0)
        return -1;
    if (n % 4 == 1)
        return -1;
    unsigned char *buf = xmalloc(n / 4 * 3 + 3), *o = buf;
    unsigned v = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int d = value_of((unsigned char)in[i]);
        if (d < 0) {
            xfree(buf);
            return -1;
        }
        v = (v << 6) | (unsigned)d;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            *o++ = (unsigned char)(v >> bits);
        }
    }
    *o = '\0';
    *out = buf;
    *out_len = (size_t)(o - buf);
    return 0;
}
