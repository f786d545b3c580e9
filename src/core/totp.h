/*
 * totp: one-time passwords of RFC 6238 (TOTP over RFC 4226 HOTP, HMAC-SHA-1)
 * from a base32 secret (RFC 4648 alphabet; spaces, dashes and padding are
 * ignored, lowercase accepted), as authenticator apps show them.
 */
#ifndef BD_CORE_TOTP_H
#define BD_CORE_TOTP_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define TOTP_STEP_S 30 /* seconds one code is valid */
#define TOTP_DIGITS 6

/* Decodes a base32 secret into out (cap bytes); *n gets the byte count.
 * E_INVALID when a character is outside the alphabet, the secret is empty
 * or it does not fit. */
int totp_base32_decode(const char *text, uint8_t *out, size_t cap, size_t *n) WUR;

/* The HOTP value of key at counter, with digits (6..8) decimal digits,
 * written NUL-terminated into out (>= digits + 1 bytes). */
void totp_hotp(const uint8_t *key, size_t keylen, uint64_t counter, int digits, char *out);

/* The TOTP code of a base32 secret at unix time t (seconds), TOTP_DIGITS
 * digits, into out (>= 9 bytes); *expires_at gets the end of its step
 * (seconds). E_INVALID when the secret does not decode. The decoded key is
 * wiped before return. */
int totp_code(const char *secret_b32, int64_t t, char *out, int64_t *expires_at) WUR;

#endif
