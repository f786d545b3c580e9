#include "core/token.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/crypto.h"
#include "core/limits.h"

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* Base64url without padding. Returns the length written, or 0 if cap is too small. */
static size_t enc(const uint8_t *in, size_t n, char *out, size_t cap)
{
    size_t need = (n * 4 + 2) / 3;
    if (need + 1 > cap)
        return 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        out[o++] = b64url[(v >> 18) & 63];
        out[o++] = b64url[(v >> 12) & 63];
        if (i + 1 < n)
            out[o++] = b64url[(v >> 6) & 63];
        if (i + 2 < n)
            out[o++] = b64url[v & 63];
    }
    out[o] = '\0';
    return o;
}

static int val(char c)
{
    const char *p = c ? strchr(b64url, c) : NULL;
    return p ? (int)(p - b64url) : -1;
}

/* Decodes base64url without padding. Returns the length, or -1 when malformed. */
static long dec(const char *in, size_t n, uint8_t *out, size_t cap)
{
    if (n % 4 == 1)
        return -1;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = val(in[i]);
        if (v < 0)
            return -1;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o >= cap)
                return -1;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    return (long)o;
}

static const char header_b64[] =
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"; /* {"alg":"HS256","typ":"JWT"} */

int token_sign(const uint8_t *key, size_t keylen, const struct token_claims *c, char *out,
               size_t cap)
{
    char claims[512];
    json_t *j = json_pack("{s:s,s:s,s:s,s:I}", "sub", c->sub, "org", c->org, "aud", c->aud, "exp",
                          (json_int_t)c->exp);
    if (c->obj[0])
        json_object_set_new(j, "obj", json_string(c->obj));
    size_t n = json_dumpb(j, claims, sizeof claims, JSON_COMPACT);
    json_decref(j);
    if (n == 0 || n > sizeof claims)
        return E_INVALID;
    size_t hl = strlen(header_b64);
    if (cap < hl + 2)
        return E_INVALID;
    memcpy(out, header_b64, hl);
    out[hl] = '.';
    size_t cl = enc((const uint8_t *)claims, n, out + hl + 1, cap - hl - 1);
    if (!cl)
        return E_INVALID;
    size_t signed_len = hl + 1 + cl;
    uint8_t mac[32];
    crypto_hmac_sha256(key, keylen, out, signed_len, mac);
    if (signed_len + 2 > cap)
        return E_INVALID;
    out[signed_len] = '.';
    if (!enc(mac, sizeof mac, out + signed_len + 1, cap - signed_len - 1))
        return E_INVALID;
    return 0;
}

int token_verify(const uint8_t *key, size_t keylen, const char *token, const char *aud, int64_t now,
                 struct token_claims *c, struct err *e)
{
    size_t n = token ? strnlen(token, TOKEN_MAX + 1) : 0;
    if (n == 0)
        return err_set(e, E_UNAUTH, "unauthorized", "a jwt query parameter is required");
    if (n > TOKEN_MAX)
        return err_set(e, E_UNAUTH, "unauthorized", "the token is too long");
    const char *d1 = memchr(token, '.', n);
    const char *d2 = d1 ? memchr(d1 + 1, '.', n - (size_t)(d1 + 1 - token)) : NULL;
    if (!d1 || !d2)
        return err_set(e, E_UNAUTH, "unauthorized", "the token is malformed");
    uint8_t mac[32], given[40];
    crypto_hmac_sha256(key, keylen, token, (size_t)(d2 - token), mac);
    long gl = dec(d2 + 1, n - (size_t)(d2 + 1 - token), given, sizeof given);
    if (gl != 32 || !crypto_equal(mac, given, 32))
        return err_set(e, E_UNAUTH, "unauthorized", "the token's signature is invalid");
    if ((size_t)(d1 - token) != strlen(header_b64) ||
        memcmp(token, header_b64, strlen(header_b64)) != 0)
        return err_set(e, E_UNAUTH, "unauthorized", "the token's algorithm is not HS256");
    uint8_t claims[512];
    long cl = dec(d1 + 1, (size_t)(d2 - d1 - 1), claims, sizeof claims);
    if (cl <= 0)
        return err_set(e, E_UNAUTH, "unauthorized", "the token is malformed");
    json_t *j = json_loadb((const char *)claims, (size_t)cl, JSON_REJECT_DUPLICATES, NULL);
    const char *sub = json_string_value(json_object_get(j, "sub"));
    const char *org = json_string_value(json_object_get(j, "org"));
    const char *a = json_string_value(json_object_get(j, "aud"));
    json_t *exp = json_object_get(j, "exp");
    json_t *obj = json_object_get(j, "obj");
    int rc = 0;
    if (!sub || !org || !a || !json_is_integer(exp) || (obj && !json_is_string(obj)))
        rc = err_set(e, E_UNAUTH, "unauthorized", "the token is malformed");
    else if (strcmp(a, aud) != 0)
        rc = err_set(e, E_UNAUTH, "unauthorized", "the token is not for this endpoint");
    else if (json_integer_value(exp) <= now)
        rc = err_set(e, E_UNAUTH, "unauthorized", "the token has expired");
    else {
        snprintf(c->sub, sizeof c->sub, "%s", sub);
        snprintf(c->org, sizeof c->org, "%s", org);
        snprintf(c->aud, sizeof c->aud, "%s", a);
        c->exp = json_integer_value(exp);
        snprintf(c->obj, sizeof c->obj, "%s", obj ? json_string_value(obj) : "");
    }
    json_decref(j);
    return rc;
}
