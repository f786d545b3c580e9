/*
 * crypto: the few primitives browserd needs, on OpenSSL libcrypto:
 * randomness, SHA-256, HMAC-SHA256, constant-time comparison, resource ids
 * and API keys.
 */
#ifndef BD_CORE_CRYPTO_H
#define BD_CORE_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

#define CRYPTO_ID_LEN     24 /* resource ids: 24 lowercase alphanumerics */
#define CRYPTO_SHA256_HEX 65

/* Fills buf with n bytes from the OS CSPRNG. Aborts if the generator fails:
 * a server that cannot make secrets must not continue. */
void crypto_random(void *buf, size_t n);
/* Writes a new id of CRYPTO_ID_LEN chars [a-z0-9] plus NUL into out (>= 25 bytes). */
void crypto_new_id(char out[CRYPTO_ID_LEN + 1]);
/* Writes a new API key "bd_" + 40 chars [A-Za-z0-9] plus NUL into out (>= 44 bytes). */
#define CRYPTO_KEY_LEN 43
void crypto_new_api_key(char out[CRYPTO_KEY_LEN + 1]);
/* Lowercase hex SHA-256 of data into out (65 bytes with NUL). */
void crypto_sha256_hex(const void *data, size_t n, char out[CRYPTO_SHA256_HEX]);
/* Lowercase hex SHA-256 of everything read from fd (from its current offset
 * to its end) into out. 0, or -errno when a read fails. */
int crypto_sha256_fd_hex(int fd, char out[CRYPTO_SHA256_HEX]) __attribute__((warn_unused_result));
/* HMAC-SHA256 of data under key into mac (32 bytes). */
void crypto_hmac_sha256(const void *key, size_t keylen, const void *data, size_t n,
                        uint8_t mac[32]);
/* 1 when a and b (both n bytes) are equal, in time independent of their contents. */
int crypto_equal(const void *a, const void *b, size_t n);

#endif
