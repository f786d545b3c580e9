/* Unit tests for domain/fields: names, tags, {id, name} selectors, vault
 * references and the typed helpers. Each case is named after the sentence of
 * the interface document it checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "core/xalloc.h"
#include "domain/fields.h"

/* Expands test templates: <STR*N> is N copies of STR, <tags:N> is N entries
 * "k0":"v","k1":"v",... . Returns an owned string. */
static char *expand(const char *t)
{
    size_t cap = 64, len = 0;
    char *out = xmalloc(cap);
#define PUT(s, n)                                                                                  \
    do {                                                                                           \
        while (len + (n) + 1 > cap)                                                                \
            out = xrealloc(out, cap *= 2);                                                         \
        memcpy(out + len, (s), (n));                                                               \
        len += (n);                                                                                \
    } while (0)
    while (*t) {
        const char *end = *t == '<' ? strchr(t, '>') : NULL;
        const char *star = end ? memchr(t, '*', (size_t)(end - t)) : NULL;
        if (end && strncmp(t, "<tags:", 6) == 0) {
            long n = strtol(t + 6, NULL, 10);
            for (long i = 0; i < n; i++) {
                char buf[32];
                int k = snprintf(buf, sizeof buf, "%s\"k%ld\":\"v\"", i ? "," : "", i);
                PUT(buf, (size_t)k);
            }
            t = end + 1;
        } else if (end && star) {
            long n = strtol(star + 1, NULL, 10);
            for (long i = 0; i < n; i++)
                PUT(t + 1, (size_t)(star - t - 1));
            t = end + 1;
        } else {
            PUT(t, 1);
            t++;
        }
    }
    out[len] = '\0';
#undef PUT
    return out;
}

static json_t *load(const char *tmpl)
{
    char *s = expand(tmpl);
    json_error_t je;
    json_t *v = json_loads(s, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!v)
        fail_msg("bad test JSON %s: %s", tmpl, je.text);
    xfree(s);
    return v;
}

enum fn { F_NAME, F_TAGS, F_SEL, F_VAULT, F_BOOL, F_INT, F_NUM, F_STR, F_KNOWN };

struct tcase {
    const char *name; /* the rule checked */
    enum fn fn;
    unsigned flags;
    long long a, b;   /* bounds for F_INT / F_NUM / F_STR */
    const char *json; /* input, a template for expand() */
    int rc;           /* 0 or E_INVALID */
    const char *msg;  /* substring of the first detail, or NULL */
    size_t ndetails;  /* expected details, 0 = not checked */
};

static int run_one(const struct tcase *c, struct err *e)
{
    static const char *const allowed[] = {"a", "b", NULL};
    json_t *v = load(c->json);
    int rc = E_INTERNAL;
    switch (c->fn) {
    case F_NAME:
        rc = fields_check_name("name", v, c->flags, e);
        break;
    case F_TAGS:
        rc = fields_check_tags("tags", v, e);
        break;
    case F_SEL:
        rc = fields_check_selector("profile", v, c->flags, e);
        break;
    case F_VAULT:
        rc = fields_check_vault_ref("vaults[0]", v, e);
        break;
    case F_BOOL:
        rc = fields_check_bool("headless", v, e);
        break;
    case F_INT:
        rc = fields_check_int("timeout_seconds", v, c->a, c->b, e);
        break;
    case F_NUM:
        rc = fields_check_number_min("fill_rate_per_minute", v, (double)c->a, e);
        break;
    case F_STR:
        rc = fields_check_string("start_url", v, (size_t)c->a, (size_t)c->b, e);
        break;
    case F_KNOWN:
        rc = fields_check_known("", v, allowed, e);
        break;
    }
    json_decref(v);
    return rc;
}

static void run_table(const struct tcase *cases, size_t n)
{
    int failures = 0;
    for (size_t i = 0; i < n; i++) {
        const struct tcase *c = &cases[i];
        struct err e;
        err_init(&e);
        int rc = run_one(c, &e);
        const char *first = e.ndetails ? e.details[0].message : "";
        int ok = rc == c->rc && (rc != 0 || e.ndetails == 0) && (rc == 0 || e.ndetails > 0) &&
                 (!c->msg || strstr(first, c->msg)) && (!c->ndetails || e.ndetails == c->ndetails);
        if (!ok) {
            print_error("FAIL %s: rc %d (want %d), %zu details, first \"%s\" (want \"%s\")\n",
                        c->name, rc, c->rc, e.ndetails, first, c->msg ? c->msg : "");
            failures++;
        }
    }
    if (failures)
        fail_msg("%d case(s) failed", failures);
}

#define RUN(t) run_table(t, sizeof t / sizeof t[0])

static const struct tcase name_cases[] = {
    {"name: 1-255 chars matching ^[a-zA-Z0-9._-]{1,255}$", F_NAME, 0, 0, 0, "\"my-sess_1.A\"", 0,
     NULL, 0},
    {"name: 255 chars accepted", F_NAME, 0, 0, 0, "\"<a*255>\"", 0, NULL, 0},
    {"name: 256 chars rejected", F_NAME, 0, 0, 0, "\"<a*256>\"", E_INVALID,
     "name: must be 1-255 characters", 1},
    {"name: 1 char accepted", F_NAME, 0, 0, 0, "\"x\"", 0, NULL, 0},
    {"name: empty string rejected where it has no meaning", F_NAME, 0, 0, 0, "\"\"", E_INVALID,
     "name: must be 1-255", 1},
    {"session update: an empty string clears the name (let through)", F_NAME, FIELDS_EMPTY_OK, 0, 0,
     "\"\"", 0, NULL, 0},
    {"pool update: empty string is a no-op (let through)", F_NAME, FIELDS_EMPTY_OK, 0, 0, "\"\"", 0,
     NULL, 0},
    {"name pattern: space rejected", F_NAME, 0, 0, 0, "\"a b\"", E_INVALID, "must match", 1},
    {"name pattern: slash rejected", F_NAME, 0, 0, 0, "\"a/b\"", E_INVALID, "offset 1", 1},
    {"name pattern: non-ASCII rejected", F_NAME, 0, 0, 0, "\"caf\\u00e9\"", E_INVALID, "must match",
     1},
    {"name pattern: 256 chars rejected even with FIELDS_EMPTY_OK", F_NAME, FIELDS_EMPTY_OK, 0, 0,
     "\"<b*256>\"", E_INVALID, NULL, 1},
    {"name type: null is the caller's decision (string or null), a type error here", F_NAME, 0, 0,
     0, "null", E_INVALID, "not null", 1},
    {"name type: integer rejected", F_NAME, 0, 0, 0, "12", E_INVALID, "not integer", 1},
    {"name type: boolean rejected", F_NAME, 0, 0, 0, "true", E_INVALID, "not boolean", 1},
};

static const struct tcase tags_cases[] = {
    {"Tags: object of string to string", F_TAGS, 0, 0, 0, "{\"team\":\"backend\",\"env\":\"prod\"}",
     0, NULL, 0},
    {"tags: `{}` clears all tags (valid)", F_TAGS, 0, 0, 0, "{}", 0, NULL, 0},
    {"Tags: up to 50 entries (50 accepted)", F_TAGS, 0, 0, 0, "{<tags:50>}", 0, NULL, 0},
    {"Tags: up to 50 entries (51 rejected)", F_TAGS, 0, 0, 0, "{<tags:51>}", E_INVALID,
     "tags: at most 50 entries", 1},
    {"Tags: key 1-128 chars (128 accepted)", F_TAGS, 0, 0, 0, "{\"<k*128>\":\"v\"}", 0, NULL, 0},
    {"Tags: key 1-128 chars (129 rejected)", F_TAGS, 0, 0, 0, "{\"<k*129>\":\"v\"}", E_INVALID,
     "key must be 1-128 characters", 1},
    {"Tags: key 1-128 chars (empty key rejected)", F_TAGS, 0, 0, 0, "{\"\":\"v\"}", E_INVALID,
     "key must be 1-128", 1},
    {"Tags: value 0-256 chars (256 accepted)", F_TAGS, 0, 0, 0, "{\"k\":\"<v*256>\"}", 0, NULL, 0},
    {"Tags: value 0-256 chars (257 rejected)", F_TAGS, 0, 0, 0, "{\"k\":\"<v*257>\"}", E_INVALID,
     "tags.k: value must be 0-256 characters", 1},
    {"Tags: value 0-256 chars (empty value accepted)", F_TAGS, 0, 0, 0, "{\"k\":\"\"}", 0, NULL, 0},
    {"Tags: key matching ^[A-Za-z0-9 _.:/=+@-]+$ (whole alphabet accepted)", F_TAGS, 0, 0, 0,
     "{\"aZ09 _.:/=+@-\":\"aZ09 _.:/=+@-\"}", 0, NULL, 0},
    {"Tags: key matching ^[A-Za-z0-9 _.:/=+@-]+$ ('#' rejected)", F_TAGS, 0, 0, 0, "{\"a#\":\"v\"}",
     E_INVALID, "tags.a#: key must match", 1},
    {"Tags: key pattern (non-ASCII rejected)", F_TAGS, 0, 0, 0, "{\"\\u00e9\":\"v\"}", E_INVALID,
     "key must match", 1},
    {"Tags: value matching ^[A-Za-z0-9 _.:/=+@-]*$ (',' rejected)", F_TAGS, 0, 0, 0,
     "{\"k\":\"a,b\"}", E_INVALID, "tags.k: value must match", 1},
    {"Tags: value pattern (newline rejected)", F_TAGS, 0, 0, 0, "{\"k\":\"a\\nb\"}", E_INVALID,
     "value must match", 1},
    {"Tags: string to string (integer value rejected)", F_TAGS, 0, 0, 0, "{\"k\":1}", E_INVALID,
     "tags.k: value must be a string, not integer", 1},
    {"Tags: string to string (null value rejected)", F_TAGS, 0, 0, 0, "{\"k\":null}", E_INVALID,
     "not null", 1},
    {"Tags: string to string (object value rejected)", F_TAGS, 0, 0, 0, "{\"k\":{}}", E_INVALID,
     "not object", 1},
    {"Tags: an object (array rejected)", F_TAGS, 0, 0, 0, "[]", E_INVALID, "must be an object", 1},
    {"Tags or null: null is the caller's decision, a type error here", F_TAGS, 0, 0, 0, "null",
     E_INVALID, "not null", 1},
    {"Tags: every bad entry is reported", F_TAGS, 0, 0, 0, "{\"a#\":\"v\",\"b\":1,\"c\":\"ok\"}",
     E_INVALID, NULL, 2},
};

static const struct tcase selector_cases[] = {
    {"profile: exactly one of id (string)", F_SEL, SEL_SAVE_CHANGES, 0, 0, "{\"id\":\"prof_1\"}", 0,
     NULL, 0},
    {"profile: exactly one of name (string, 1-255 chars, pattern above)", F_SEL, SEL_SAVE_CHANGES,
     0, 0, "{\"name\":\"my-profile\"}", 0, NULL, 0},
    {"profile: exactly one of id or name (both rejected)", F_SEL, SEL_SAVE_CHANGES, 0, 0,
     "{\"id\":\"a\",\"name\":\"b\"}", E_INVALID, "profile: give exactly one of id or name", 1},
    {"profile: exactly one of id or name (empty object rejected)", F_SEL, SEL_SAVE_CHANGES, 0, 0,
     "{}", E_INVALID, "profile: must give exactly one of id or name", 1},
    {"profile: optional save_changes (boolean) accepted", F_SEL, SEL_SAVE_CHANGES, 0, 0,
     "{\"name\":\"p\",\"save_changes\":true}", 0, NULL, 0},
    {"profile: save_changes must be a boolean", F_SEL, SEL_SAVE_CHANGES, 0, 0,
     "{\"name\":\"p\",\"save_changes\":\"yes\"}", E_INVALID,
     "profile.save_changes: must be a boolean", 1},
    {"profile: name pattern above (space rejected)", F_SEL, SEL_SAVE_CHANGES, 0, 0,
     "{\"name\":\"a b\"}", E_INVALID, "profile.name: must match", 1},
    {"profile: name 1-255 chars (256 rejected)", F_SEL, SEL_SAVE_CHANGES, 0, 0,
     "{\"name\":\"<n*256>\"}", E_INVALID, "profile.name: must be 1-255", 1},
    {"profile: name 1-255 chars (255 accepted)", F_SEL, SEL_SAVE_CHANGES, 0, 0,
     "{\"name\":\"<n*255>\"}", 0, NULL, 0},
    {"profile: id must be a string", F_SEL, SEL_SAVE_CHANGES, 0, 0, "{\"id\":5}", E_INVALID,
     "profile.id: must be a string", 1},
    {"profile: session id must not be empty", F_SEL, SEL_SAVE_CHANGES, 0, 0, "{\"id\":\"\"}",
     E_INVALID, "profile.id: must not be empty", 1},
    {"profile: session name must not be empty", F_SEL, SEL_SAVE_CHANGES, 0, 0, "{\"name\":\"\"}",
     E_INVALID, "profile.name", 1},
    {"profile: an object, never a string", F_SEL, SEL_SAVE_CHANGES, 0, 0, "\"prof_1\"", E_INVALID,
     "profile: must be an object", 1},
    {"profile: other properties rejected", F_SEL, SEL_SAVE_CHANGES, 0, 0,
     "{\"id\":\"a\",\"foo\":1}", E_INVALID, "profile.foo: unknown field", 1},
    {"extensions entry {id, name}: save_changes is an unknown field", F_SEL, 0, 0, 0,
     "{\"id\":\"a\",\"save_changes\":true}", E_INVALID, "unknown field", 1},
    {"extensions: each entry provides either id or name (neither rejected)", F_SEL, 0, 0, 0,
     "{\"foo\":\"x\"}", E_INVALID, NULL, 2},
    {"pool profile: save_changes is ignored, not rejected", F_SEL,
     SEL_IGNORE_SAVE_CHANGES | SEL_EMPTY_CLEARS, 0, 0, "{\"id\":\"p\",\"save_changes\":true}", 0,
     NULL, 0},
    {"pool profile: save_changes of any type is ignored, not rejected", F_SEL,
     SEL_IGNORE_SAVE_CHANGES | SEL_EMPTY_CLEARS, 0, 0, "{\"id\":\"p\",\"save_changes\":\"x\"}", 0,
     NULL, 0},
    {"pool profile: to clear, send id as an empty string", F_SEL,
     SEL_IGNORE_SAVE_CHANGES | SEL_EMPTY_CLEARS, 0, 0, "{\"id\":\"\"}", 0, NULL, 0},
    {"pool profile: to clear, send name as an empty string", F_SEL,
     SEL_IGNORE_SAVE_CHANGES | SEL_EMPTY_CLEARS, 0, 0, "{\"name\":\"\"}", 0, NULL, 0},
    {"pool profile: an empty object is rejected with 400", F_SEL,
     SEL_IGNORE_SAVE_CHANGES | SEL_EMPTY_CLEARS, 0, 0, "{}", E_INVALID, "an empty object", 1},
    {"pool profile: save_changes alone is still an empty selector", F_SEL,
     SEL_IGNORE_SAVE_CHANGES | SEL_EMPTY_CLEARS, 0, 0, "{\"save_changes\":false}", E_INVALID,
     "exactly one of id or name", 1},
};

static const struct tcase vault_cases[] = {
    {"VaultReference: id (string)", F_VAULT, 0, 0, 0, "{\"id\":\"v1\"}", 0, NULL, 0},
    {"VaultReference: name (string, 1-255 chars)", F_VAULT, 0, 0, 0, "{\"name\":\"My Vault\"}", 0,
     NULL, 0},
    {"VaultReference: exactly one of them (both rejected)", F_VAULT, 0, 0, 0,
     "{\"id\":\"v\",\"name\":\"n\"}", E_INVALID, "exactly one of id or name", 1},
    {"VaultReference: exactly one of them (none rejected)", F_VAULT, 0, 0, 0, "{}", E_INVALID,
     "exactly one of id or name", 1},
    {"VaultReference: no other properties", F_VAULT, 0, 0, 0, "{\"id\":\"v\",\"x\":1}", E_INVALID,
     "vaults[0].x: unknown field", 1},
    {"VaultReference: name 1-255 chars (empty rejected)", F_VAULT, 0, 0, 0, "{\"name\":\"\"}",
     E_INVALID, "vaults[0].name: must be 1-255", 1},
    {"VaultReference: name 1-255 chars (255 accepted)", F_VAULT, 0, 0, 0, "{\"name\":\"<v*255>\"}",
     0, NULL, 0},
    {"VaultReference: name 1-255 chars (256 rejected)", F_VAULT, 0, 0, 0, "{\"name\":\"<v*256>\"}",
     E_INVALID, "got 256", 1},
    {"VaultReference: name counts characters, not bytes (255 x e-acute accepted)", F_VAULT, 0, 0, 0,
     "{\"name\":\"<\\u00e9*255>\"}", 0, NULL, 0},
    {"VaultReference: id must be a string", F_VAULT, 0, 0, 0, "{\"id\":1}", E_INVALID,
     "must be a string", 1},
    {"VaultReference: an object", F_VAULT, 0, 0, 0, "\"v1\"", E_INVALID, "must be an object", 1},
};

static const struct tcase helper_cases[] = {
    {"boolean: true", F_BOOL, 0, 0, 0, "true", 0, NULL, 0},
    {"boolean: false", F_BOOL, 0, 0, 0, "false", 0, NULL, 0},
    {"boolean: 1 rejected", F_BOOL, 0, 0, 0, "1", E_INVALID, "headless: must be a boolean", 1},
    {"boolean: \"true\" rejected", F_BOOL, 0, 0, 0, "\"true\"", E_INVALID, "not string", 1},
    {"boolean: null rejected", F_BOOL, 0, 0, 0, "null", E_INVALID, "not null", 1},
    {"Pool timeout_seconds 10 to 259200 (10 accepted)", F_INT, 0, 10, 259200, "10", 0, NULL, 0},
    {"Pool timeout_seconds 10 to 259200 (259200 accepted)", F_INT, 0, 10, 259200, "259200", 0, NULL,
     0},
    {"Pool timeout_seconds 10 to 259200 (9 rejected)", F_INT, 0, 10, 259200, "9", E_INVALID,
     "timeout_seconds: must be an integer between 10 and 259200 (got 9)", 1},
    {"Pool timeout_seconds 10 to 259200 (259201 rejected)", F_INT, 0, 10, 259200, "259201",
     E_INVALID, "got 259201", 1},
    {"integer: a real is rejected (10.0)", F_INT, 0, 10, 259200, "10.0", E_INVALID,
     "not number with a fraction", 1},
    {"integer: a string is rejected", F_INT, 0, 10, 259200, "\"10\"", E_INVALID, "not string", 1},
    {"integer: a boolean is rejected", F_INT, 0, 10, 259200, "true", E_INVALID, "not boolean", 1},
    {"Pool size >= 1 (0 rejected)", F_INT, 0, 1, LLONG_MAX, "0", E_INVALID,
     "must be an integer >= 1 (got 0)", 1},
    {"Pool size >= 1 (huge accepted here; org limit applies elsewhere)", F_INT, 0, 1, LLONG_MAX,
     "9223372036854775807", 0, NULL, 0},
    {"fill_rate_per_minute: number >= 0 (0 accepted)", F_NUM, 0, 0, 0, "0", 0, NULL, 0},
    {"fill_rate_per_minute: number (0.5 accepted)", F_NUM, 0, 0, 0, "0.5", 0, NULL, 0},
    {"fill_rate_per_minute: only the lower bound is enforced (100 accepted)", F_NUM, 0, 0, 0, "100",
     0, NULL, 0},
    {"fill_rate_per_minute: >= 0 (-0.1 rejected)", F_NUM, 0, 0, 0, "-0.1", E_INVALID,
     "fill_rate_per_minute: must be a number >= 0", 1},
    {"fill_rate_per_minute: number (string rejected)", F_NUM, 0, 0, 0, "\"1\"", E_INVALID,
     "not string", 1},
    {"fill_rate_per_minute: number (boolean rejected)", F_NUM, 0, 0, 0, "false", E_INVALID,
     "not boolean", 1},
    {"start_url: max 2048 chars (2048 accepted)", F_STR, 0, 0, 2048, "\"<u*2048>\"", 0, NULL, 0},
    {"start_url: max 2048 chars (2049 rejected)", F_STR, 0, 0, 2048, "\"<u*2049>\"", E_INVALID,
     "start_url: must be at most 2048 characters (got 2049)", 1},
    {"start_url: empty string accepted (leaves the page unchanged)", F_STR, 0, 0, 2048, "\"\"", 0,
     NULL, 0},
    {"string: integer rejected", F_STR, 0, 0, 2048, "5", E_INVALID, "must be a string", 1},
    {"string: 1-255 bounds (0 rejected)", F_STR, 0, 1, 255, "\"\"", E_INVALID,
     "must be 1-255 characters (got 0)", 1},
    {"unknown fields: known keys accepted", F_KNOWN, 0, 0, 0, "{\"a\":1,\"b\":2}", 0, NULL, 0},
    {"unknown fields: each unknown key is an error", F_KNOWN, 0, 0, 0,
     "{\"a\":1,\"zz\":2,\"yy\":3}", E_INVALID, "zz: unknown field", 2},
};

static void names(void **state)
{
    (void)state;
    RUN(name_cases);
}

static void tags(void **state)
{
    (void)state;
    RUN(tags_cases);
}

static void selectors(void **state)
{
    (void)state;
    RUN(selector_cases);
}

static void vault_refs(void **state)
{
    (void)state;
    RUN(vault_cases);
}

static void helpers(void **state)
{
    (void)state;
    RUN(helper_cases);
}

static void paths_join(void **state)
{
    (void)state;
    char buf[FIELDS_PATH_MAX];
    assert_string_equal(fields_path(buf, sizeof buf, "", "name"), "name");
    assert_string_equal(fields_path(buf, sizeof buf, NULL, "name"), "name");
    assert_string_equal(fields_path(buf, sizeof buf, "viewport", "width"), "viewport.width");
    assert_string_equal(fields_path_index(buf, sizeof buf, "extensions", 3), "extensions[3]");
    char tiny[8];
    assert_string_equal(fields_path(tiny, sizeof tiny, "viewport", "width"), "viewpor");
    assert_int_equal(fields_name_ok("abc", 3), 1);
    assert_int_equal(fields_name_ok("", 0), 0);
    assert_int_equal(fields_name_ok("a b", 3), 0);
}

static void selector_clear_form(void **state)
{
    (void)state;
    json_t *a = load("{\"id\":\"\"}");
    json_t *b = load("{\"name\":\"\"}");
    json_t *c = load("{\"id\":\"x\"}");
    assert_int_equal(fields_selector_is_clear(a), 1);
    assert_int_equal(fields_selector_is_clear(b), 1);
    assert_int_equal(fields_selector_is_clear(c), 0);
    json_decref(a);
    json_decref(b);
    json_decref(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names),
        cmocka_unit_test(tags),
        cmocka_unit_test(selectors),
        cmocka_unit_test(vault_refs),
        cmocka_unit_test(helpers),
        cmocka_unit_test(paths_join),
        cmocka_unit_test(selector_clear_form),
    };
    return cmocka_run_group_tests_name("domain/fields", tests, NULL, NULL);
}
