#include "core/secretbox.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

#include "core/crypto.h"
#include "core/xalloc.h"

#define NONCE_LEN 12
#define TAG_LEN   16
#define PREFIX    "v1:"

static const char hexdig[] = "0123456789abcdef";

static int unhex(const char *s, size_t n, unsigned char *out)
{
    for (size_t i = 0; i < n; i++) {
        int v = 0;
        for (int k = 0; k < 2; k++) {
            char ch = s[2 * i + k];
            int d = ch >= '0' && ch <= '9'   ? ch - '0'
                    : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                    : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                             : -1;
            if (d < 0)
                return -1;
            v = v * 16 + d;
        }
        out[i] = (unsigned char)v;
    }
    return 0;
}

int secretbox_key_from_hex(const char *hex, unsigned char key[SECRETBOX_KEY_LEN])
{
    if (!hex || strlen(hex) != 2 * SECRETBOX_KEY_LEN || unhex(hex, SECRETBOX_KEY_LEN, key) != 0)
        return E_INVALID;
    return 0;
}

int secretbox_seal(const unsigned char key[SECRETBOX_KEY_LEN], const char *plain, char **out,
                   struct err *e)
{
    size_t n = strlen(plain);
    if (n > SECRETBOX_PLAIN_MAX)
        return err_set(e, E_INVALID, "bad_request", "secret longer than %d bytes",
                       SECRETBOX_PLAIN_MAX);
    size_t total = NONCE_LEN + n + TAG_LEN;
    unsigned char *buf = xmalloc(total);
    crypto_random(buf, NONCE_LEN);
    EVP_CIPHER_CTX *cx = EVP_CIPHER_CTX_new();
    int len = 0, fin = 0, ok = cx != NULL;
    ok = ok && EVP_EncryptInit_ex(cx, EVP_aes_256_gcm(), NULL, NULL, NULL) == 1;
    ok = ok && EVP_CIPHER_CTX_ctrl(cx, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) == 1;
    ok = ok && EVP_EncryptInit_ex(cx, NULL, NULL, key, buf) == 1;
    ok = ok &&
         EVP_EncryptUpdate(cx, buf + NONCE_LEN, &len, (const unsigned char *)plain, (int)n) == 1;
    ok = ok && EVP_EncryptFinal_ex(cx, buf + NONCE_LEN + len, &fin) == 1;
    ok = ok && EVP_CIPHER_CTX_ctrl(cx, EVP_CTRL_GCM_GET_TAG, TAG_LEN, buf + NONCE_LEN + n) == 1;
    EVP_CIPHER_CTX_free(cx);
    if (!ok) {
        xfree(buf);
        return err_set(e, E_INTERNAL, "internal", "secret could not be sealed");
    }
    char *s = xmalloc(sizeof PREFIX + 2 * total);
    memcpy(s, PREFIX, sizeof PREFIX - 1);
    char *p = s + sizeof PREFIX - 1;
    for (size_t i = 0; i < total; i++) {
        *p++ = hexdig[buf[i] >> 4];
        *p++ = hexdig[buf[i] & 15];
    }
    *p = '\0';
    xfree(buf);
    *out = s;
    return 0;
}

int secretbox_open(const unsigned char key[SECRETBOX_KEY_LEN], const char *sealed, char **out,
                   struct err *e)
{
    size_t hl = sealed ? strlen(sealed) : 0;
    if (hl < sizeof PREFIX - 1 || strncmp(sealed, PREFIX, sizeof PREFIX - 1) != 0)
        return err_set(e, E_INVALID, "bad_request", "sealed secret: unknown format");
    hl -= sizeof PREFIX - 1;
    if (hl % 2 || hl / 2 < NONCE_LEN + TAG_LEN ||
        hl / 2 > NONCE_LEN + TAG_LEN + SECRETBOX_PLAIN_MAX)
        return err_set(e, E_INVALID, "bad_request", "sealed secret: bad length");
    size_t total = hl / 2, n = total - NONCE_LEN - TAG_LEN;
    unsigned char *buf = xmalloc(total);
    if (unhex(sealed + sizeof PREFIX - 1, total, buf) != 0) {
        xfree(buf);
        return err_set(e, E_INVALID, "bad_request", "sealed secret: not hex");
    }
    char *plain = xmalloc(n + 1);
    EVP_CIPHER_CTX *cx = EVP_CIPHER_CTX_new();
    int len = 0, fin = 0, ok = cx != NULL;
    ok = ok && EVP_DecryptInit_ex(cx, EVP_aes_256_gcm(), NULL, NULL, NULL) == 1;
    ok = ok && EVP_CIPHER_CTX_ctrl(cx, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) == 1;
    ok = ok && EVP_DecryptInit_ex(cx, NULL, NULL, key, buf) == 1;
    ok = ok && EVP_DecryptUpdate(cx, (unsigned char *)plain, &len, buf + NONCE_LEN, (int)n) == 1;
    ok = ok && EVP_CIPHER_CTX_ctrl(cx, EVP_CTRL_GCM_SET_TAG, TAG_LEN, buf + NONCE_LEN + n) == 1;
    ok = ok && EVP_DecryptFinal_ex(cx, (unsigned char *)plain + len, &fin) == 1;
    EVP_CIPHER_CTX_free(cx);
    xfree(buf);
    if (!ok) {
        OPENSSL_cleanse(plain, n + 1);
        xfree(plain);
        return err_set(e, E_INVALID, "bad_request", "sealed secret does not authenticate");
    }
    plain[n] = '\0';
    *out = plain;
    return 0;
}

void secretbox_wipe(char *secret)
{
    if (!secret)
        return;
    OPENSSL_cleanse(secret, strlen(secret));
    xfree(secret);
}
