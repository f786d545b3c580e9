/*
 * token: the signed tokens carried as `?jwt=` in cdp_ws_url and
 * webdriver_ws_url. They are JSON Web Tokens (HS256) so that clients and
 * tools recognize them: header {"alg":"HS256","typ":"JWT"}, claims
 * {sub: session id, org: org id, aud: "cdp" | "webdriver", exp: seconds}.
 * The key is the server's, generated once and kept in the store.
 */
#ifndef BD_CORE_TOKEN_H
#define BD_CORE_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define TOKEN_MAX 1024

struct token_claims {
    char sub[64];
    char org[64];
    char aud[16];
    int64_t exp;  /* seconds since the epoch */
    char obj[72]; /* the one object under sub the token is for ("obj"; "" = none): a replay */
};

/* Signs claims with key into out (cap bytes). Returns 0, or E_INVALID when
 * out is too small. */
int token_sign(const uint8_t *key, size_t keylen, const struct token_claims *c, char *out,
               size_t cap) WUR;
/* Verifies token (untrusted) with key at time now (seconds) and for audience
 * aud. Returns 0 and fills *c, or E_UNAUTH with the reason in e (malformed,
 * bad signature, wrong audience, expired). */
int token_verify(const uint8_t *key, size_t keylen, const char *token, const char *aud, int64_t now,
                 struct token_claims *c, struct err *e) WUR;

#endif
