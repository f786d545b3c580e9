/* RFC 6238 TOTP / RFC 4226 HOTP (see core/totp.h). */
#include "core/totp.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>

#include "core/limits.h"

int totp_base32_decode(const char *text, uint8_t *out, size_t cap, size_t *n)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t len = 0;
    for (const char *p = text; *p; p++) {
        char ch = *p;
        int v;
        if (ch == ' ' || ch == '-' || ch == '=' || ch == '\t')
            continue;
        if (ch >= 'a' && ch <= 'z')
            ch = (char)(ch - 'a' + 'A');
        if (ch >= 'A' && ch <= 'Z')
            v = ch - 'A';
        else if (ch >= '2' && ch <= '7')
            v = ch - '2' + 26;
        else
            return E_INVALID;
        acc = (acc << 5) | (uint32_t)v;
        bits += 5;
        if (bits >= 8) {
            if (len >= cap)
                return E_INVALID;
            out[len++] = (uint8_t)(acc >> (bits - 8));
            bits -= 8;
        }
        acc &= (1u << bits) - 1;
    }
    if (len == 0)
        return E_INVALID;
    *n = len;
    return 0;
}

void totp_hotp(const uint8_t *key, size_t keylen, uint64_t counter, int digits, char *out)
{
    uint8_t msg[8], mac[EVP_MAX_MD_SIZE];
    unsigned int maclen = 0;
    for (int i = 7; i >= 0; i--) {
        msg[i] = (uint8_t)(counter & 0xff);
        counter >>= 8;
    }
    HMAC(EVP_sha1(), key, (int)keylen, msg, sizeof msg, mac, &maclen);
    int off = mac[maclen - 1] & 0x0f;
    uint32_t bin = ((uint32_t)(mac[off] & 0x7f) << 24) | ((uint32_t)mac[off + 1] << 16) |
                   ((uint32_t)mac[off + 2] << 8) | (uint32_t)mac[off + 3];
    uint32_t mod = 1;
    for (int i = 0; i < digits; i++)
        mod *= 10;
    snprintf(out, (size_t)digits + 1, "%0*u", digits, bin % mod);
    OPENSSL_cleanse(mac, sizeof mac);
}

int totp_code(const char *secret_b32, int64_t t, char *out, int64_t *expires_at)
{
    uint8_t key[LIM_CREDENTIAL_TOTP_CHARS * 5 / 8 + 1];
    size_t n = 0;
    int rc = totp_base32_decode(secret_b32, key, sizeof key, &n);
    if (rc == 0) {
        uint64_t step = (uint64_t)(t / TOTP_STEP_S);
        totp_hotp(key, n, step, TOTP_DIGITS, out);
        *expires_at = (int64_t)(step + 1) * TOTP_STEP_S;
    }
    OPENSSL_cleanse(key, sizeof key);
    return rc;
}
