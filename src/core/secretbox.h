/*
 * secretbox: small secrets at rest (proxy passwords), sealed with
 * AES-256-GCM (OpenSSL EVP) under a server key kept in the store's meta
 * table. A sealed value is text: "v1:" + hex(nonce[12] | ciphertext | tag[16]),
 * so it fits a TEXT column. A fresh random nonce per seal.
 */
#ifndef BD_CORE_SECRETBOX_H
#define BD_CORE_SECRETBOX_H

#include <stddef.h>

#include "core/err.h"

#define SECRETBOX_KEY_LEN   32
#define SECRETBOX_PLAIN_MAX 4096 /* longest secret sealed or opened */

/* Seals plain (NUL-terminated, at most SECRETBOX_PLAIN_MAX bytes) under key.
 * *out is an owned string (xfree). E_INVALID when plain is too long,
 * E_INTERNAL when OpenSSL fails. */
int secretbox_seal(const unsigned char key[SECRETBOX_KEY_LEN], const char *plain, char **out,
                   struct err *e) WUR;

/* Opens a value made by secretbox_seal. *out is an owned NUL-terminated string
 * (xfree; callers should wipe it with secretbox_wipe before). E_INVALID when
 * the text is malformed, or the key or data do not authenticate. */
int secretbox_open(const unsigned char key[SECRETBOX_KEY_LEN], const char *sealed, char **out,
                   struct err *e) WUR;

/* Zeroes and frees a secret returned by secretbox_open; accepts NULL. */
void secretbox_wipe(char *secret);

/* Loads the key from hex (64 hex digits). Returns 0 or E_INVALID. */
int secretbox_key_from_hex(const char *hex, unsigned char key[SECRETBOX_KEY_LEN]) WUR;

#endif
