/* Unit tests for core/token: the signed tokens of cdp_ws_url (issue 4 item 4). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "core/token.h"

static const uint8_t key[32] = "0123456789abcdef0123456789abcdef";

static void make(char *out, size_t cap, const char *aud, int64_t exp)
{
    struct token_claims c = {.exp = exp};
    memcpy(c.sub, "sess1", 6);
    memcpy(c.org, "org1", 5);
    memcpy(c.aud, aud, strlen(aud) + 1);
    assert_int_equal(token_sign(key, sizeof key, &c, out, cap), 0);
}

/* "signed with HMAC-SHA256 by a server key, names the session and expires" */
static void round_trip(void **state)
{
    (void)state;
    char t[TOKEN_MAX];
    make(t, sizeof t, "cdp", 2000);
    struct token_claims c;
    struct err e;
    err_init(&e);
    assert_int_equal(token_verify(key, sizeof key, t, "cdp", 1000, &c, &e), 0);
    assert_string_equal(c.sub, "sess1");
    assert_string_equal(c.org, "org1");
    assert_int_equal(c.exp, 2000);
    assert_string_equal(c.obj, ""); /* a token for a whole session names no object */
}

/* "obj: the one object under sub the token is for": signed with the rest, so
 * a token for one replay cannot be turned into one for another. */
static void object_claim_is_signed(void **state)
{
    (void)state;
    struct token_claims c = {.exp = 2000};
    memcpy(c.sub, "sess1", 6);
    memcpy(c.org, "org1", 5);
    memcpy(c.aud, "replay", 7);
    memcpy(c.obj, "rec1", 5);
    char t[TOKEN_MAX];
    assert_int_equal(token_sign(key, sizeof key, &c, t, sizeof t), 0);
    struct token_claims got;
    struct err e;
    err_init(&e);
    assert_int_equal(token_verify(key, sizeof key, t, "replay", 1000, &got, &e), 0);
    assert_string_equal(got.obj, "rec1");
    memcpy(c.obj, "rec2", 5);
    char other[TOKEN_MAX];
    assert_int_equal(token_sign(key, sizeof key, &c, other, sizeof other), 0);
    /* rec2's claims under rec1's signature: refused. */
    char mixed[2 * TOKEN_MAX];
    const char *sig = strrchr(t, '.');
    size_t head = (size_t)(strrchr(other, '.') - other);
    memcpy(mixed, other, head);
    snprintf(mixed + head, sizeof mixed - head, "%s", sig);
    err_init(&e);
    assert_int_equal(token_verify(key, sizeof key, mixed, "replay", 1000, &got, &e), E_UNAUTH);
}

static void rejected(void **state)
{
    (void)state;
    char t[TOKEN_MAX], bad[TOKEN_MAX];
    make(t, sizeof t, "cdp", 2000);
    struct token_claims c;
    const struct {
        const char *name, *token, *aud;
        int64_t now;
        const char *why;
    } cases[] = {
        {"missing token: 401", "", "cdp", 1000, "required"},
        {"expired token: 401", t, "cdp", 2000, "expired"},
        {"token for another endpoint: 401", t, "webdriver", 1000, "not for this endpoint"},
        {"tampered token: 401", bad, "cdp", 1000, "signature"},
        {"garbage: 401", "a.b", "cdp", 1000, "malformed"},
        {"no signature: 401", "a.b.", "cdp", 1000, "signature"},
    };
    memcpy(bad, t, sizeof t);
    char *claims = strchr(bad, '.') + 1;
    claims[3] = claims[3] == 'A' ? 'B' : 'A';
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct err e;
        err_init(&e);
        int rc = token_verify(key, sizeof key, cases[i].token, cases[i].aud, cases[i].now, &c, &e);
        if (rc != E_UNAUTH || !strstr(e.message, cases[i].why))
            fail_msg("%s: rc %d, message %s", cases[i].name, rc, e.message);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip),
        cmocka_unit_test(rejected),
        cmocka_unit_test(object_claim_is_signed),
    };
    return cmocka_run_group_tests_name("core/token", tests, NULL, NULL);
}
