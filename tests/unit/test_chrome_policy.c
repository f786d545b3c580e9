/* Unit tests for domain/chrome_policy: policy names, expected value types,
 * service-managed policies and the 5 MiB serialized cap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/xalloc.h"
#include "domain/chrome_policy.h"

struct tcase {
    const char *name; /* the rule checked */
    const char *json;
    int rc;          /* 0 or E_INVALID */
    const char *msg; /* substring of the first detail, or NULL */
    size_t ndetails; /* 0 = not checked */
};

static const struct tcase cases[] = {
    {"chrome_policy: Empty object clears them (valid)", "{}", 0, NULL, 0},
    {"Keys are policy names; boolean value (BookmarkBarEnabled)", "{\"BookmarkBarEnabled\":true}",
     0, NULL, 0},
    {"integer value (DefaultCookiesSetting)", "{\"DefaultCookiesSetting\":1}", 0, NULL, 0},
    {"string value (HomepageLocation)", "{\"HomepageLocation\":\"https://example.com\"}", 0, NULL,
     0},
    {"list value (URLBlocklist)", "{\"URLBlocklist\":[\"example.com\",\"*.ads.example\"]}", 0, NULL,
     0},
    {"empty list value (URLAllowlist)", "{\"URLAllowlist\":[]}", 0, NULL, 0},
    {"list of dictionaries (ManagedBookmarks)",
     "{\"ManagedBookmarks\":[{\"toplevel_name\":\"Corp\"},{\"name\":\"A\",\"url\":\"a.com\"}]}", 0,
     NULL, 0},
    {"dictionary value (PrintingPaperSizeDefault)",
     "{\"PrintingPaperSizeDefault\":{\"name\":\"iso_a4_210x297mm\"}}", 0, NULL, 0},
    {"several common policies together",
     "{\"PasswordManagerEnabled\":false,\"AutofillAddressEnabled\":false,"
     "\"IncognitoModeAvailability\":1,\"DefaultPopupsSetting\":2,\"DefaultGeolocationSetting\":2,"
     "\"TranslateEnabled\":false,\"DownloadDirectory\":\"/tmp/dl\"}",
     0, NULL, 0},
    {"values must match the expected types: boolean given a string",
     "{\"BookmarkBarEnabled\":\"true\"}", E_INVALID,
     "chrome_policy.BookmarkBarEnabled: must be a boolean, not string", 1},
    {"values must match the expected types: boolean given 1", "{\"TranslateEnabled\":1}", E_INVALID,
     "chrome_policy.TranslateEnabled: must be a boolean", 1},
    {"values must match the expected types: integer given a real",
     "{\"DefaultCookiesSetting\":1.0}", E_INVALID,
     "chrome_policy.DefaultCookiesSetting: must be an integer, not number", 1},
    {"values must match the expected types: integer given a boolean",
     "{\"DefaultPopupsSetting\":true}", E_INVALID, "must be an integer, not boolean", 1},
    {"values must match the expected types: integer given a string",
     "{\"IncognitoModeAvailability\":\"1\"}", E_INVALID, "must be an integer, not string", 1},
    {"values must match the expected types: string given an integer", "{\"HomepageLocation\":1}",
     E_INVALID, "chrome_policy.HomepageLocation: must be a string, not integer", 1},
    {"values must match the expected types: list given a string",
     "{\"URLBlocklist\":\"example.com\"}", E_INVALID,
     "chrome_policy.URLBlocklist: must be an array of strings, not string", 1},
    {"values must match the expected types: list items are strings",
     "{\"URLBlocklist\":[\"a.com\",1,null]}", E_INVALID,
     "chrome_policy.URLBlocklist[1]: must be a string, not integer", 2},
    {"values must match the expected types: list of dictionaries items are objects",
     "{\"ManagedBookmarks\":[\"x\"]}", E_INVALID,
     "chrome_policy.ManagedBookmarks[0]: must be an object, not string", 1},
    {"values must match the expected types: dictionary given an array",
     "{\"PrintingPaperSizeDefault\":[]}", E_INVALID, "must be an object, not array", 1},
    {"values must match the expected types: null is not a value", "{\"BookmarkBarEnabled\":null}",
     E_INVALID, "not null", 1},
    {"Keys are policy names: unknown names rejected", "{\"NotAChromePolicy\":true}", E_INVALID,
     "chrome_policy.NotAChromePolicy: is not a known Chromium policy name", 1},
    {"Keys are policy names: names are case-sensitive", "{\"bookmarkbarenabled\":true}", E_INVALID,
     "is not a known Chromium policy name", 1},
    {"Keys are policy names: empty name rejected", "{\"\":true}", E_INVALID,
     "is not a known Chromium policy name", 1},
    {"Service-managed policies (proxy) are blocked whatever the value",
     "{\"ProxyMode\":\"direct\"}", E_INVALID,
     "chrome_policy.ProxyMode: is managed by the service and cannot be set", 1},
    {"Service-managed policies (extensions) are blocked",
     "{\"ExtensionInstallForcelist\":[\"abc;https://x\"]}", E_INVALID,
     "chrome_policy.ExtensionInstallForcelist: is managed by the service", 1},
    {"Service-managed policies (CDP/automation) are blocked", "{\"RemoteDebuggingAllowed\":true}",
     E_INVALID, "chrome_policy.RemoteDebuggingAllowed: is managed by the service", 1},
    {"every problem is reported",
     "{\"ProxySettings\":{},\"Nope\":1,\"BookmarkBarEnabled\":0,\"TranslateEnabled\":true}",
     E_INVALID, "chrome_policy.ProxySettings: is managed by the service", 3},
    {"chrome_policy: an object (array rejected)", "[]", E_INVALID,
     "chrome_policy: must be an object", 1},
    {"chrome_policy: an object (null rejected)", "null", E_INVALID, "not null", 1},
    {"chrome_policy: an object (string rejected)", "\"{}\"", E_INVALID, "not string", 1},
};

static void validate_table(void **state)
{
    (void)state;
    int failures = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct tcase *c = &cases[i];
        json_error_t je;
        json_t *v = json_loads(c->json, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
        if (!v)
            fail_msg("bad test JSON in %s: %s", c->name, je.text);
        struct err e;
        err_init(&e);
        int rc = chrome_policy_validate("chrome_policy", v, &e);
        json_decref(v);
        const char *first = e.ndetails ? e.details[0].message : "";
        int ok = rc == c->rc && (!c->msg || strstr(first, c->msg)) &&
                 (!c->ndetails || e.ndetails == c->ndetails) && (rc != 0 || e.ndetails == 0);
        if (!ok) {
            print_error("FAIL %s: rc %d (want %d), %zu details, first \"%s\"\n", c->name, rc, c->rc,
                        e.ndetails, first);
            failures++;
        }
    }
    if (failures)
        fail_msg("%d case(s) failed", failures);
}

/* "Blocked (service-managed)": every policy the brief names, each with the
 * message naming it. */
static void managed_policies_blocked(void **state)
{
    (void)state;
    static const char *const names[] = {
        "ExtensionInstallForcelist",
        "ExtensionInstallBlocklist",
        "ExtensionInstallAllowlist",
        "ExtensionSettings",
        "ExtensionInstallSources",
        "ExtensionAllowedTypes",
        "ProxySettings",
        "ProxyMode",
        "ProxyServer",
        "ProxyPacUrl",
        "ProxyBypassList",
        "RemoteDebuggingAllowed",
        "DeveloperToolsAvailability",
        "DeveloperToolsDisabled",
        "ExtensionInstallBlacklist",
        "ExtensionInstallWhitelist",
        "NativeMessagingAllowlist",
        "HeadlessMode",
        "UserDataDir",
        "WPADQuickCheckEnabled",
    };
    int failures = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        json_t *v = json_pack("{s:b}", names[i], 1);
        struct err e;
        err_init(&e);
        char want[160];
        snprintf(want, sizeof want, "chrome_policy.%s: is managed by the service and cannot be set",
                 names[i]);
        int rc = chrome_policy_validate("chrome_policy", v, &e);
        json_decref(v);
        if (rc != E_INVALID || e.ndetails != 1 || strcmp(e.details[0].message, want) != 0) {
            print_error("FAIL %s: rc %d, \"%s\"\n", names[i], rc,
                        e.ndetails ? e.details[0].message : "");
            failures++;
        }
    }
    if (failures)
        fail_msg("%d case(s) failed", failures);
}

/* Builds {"URLBlocklist":["xxx..."]} whose compact serialization is `total` bytes. */
static json_t *sized_policy(size_t total)
{
    const size_t overhead = strlen("{\"URLBlocklist\":[\"\"]}");
    size_t n = total - overhead;
    char *s = xmalloc(n + 1);
    memset(s, 'x', n);
    s[n] = '\0';
    json_t *v = json_pack("{s:[s]}", "URLBlocklist", s);
    xfree(s);
    return v;
}

/* "Serialized payload capped at 5 MiB" (Limits: "Pool chrome_policy serialized size 5 MiB"). */
static void five_mib_cap(void **state)
{
    (void)state;
    struct err e;
    json_t *at = sized_policy(5u * 1024u * 1024u);
    char *s = json_dumps(at, JSON_COMPACT);
    assert_int_equal(strlen(s), 5u * 1024u * 1024u);
    free(s);
    err_init(&e);
    assert_int_equal(chrome_policy_validate("chrome_policy", at, &e), 0);
    json_decref(at);

    json_t *over = sized_policy(5u * 1024u * 1024u + 1u);
    err_init(&e);
    assert_int_equal(chrome_policy_validate("chrome_policy", over, &e), E_INVALID);
    assert_int_equal(e.ndetails, 1);
    assert_non_null(
        strstr(e.details[0].message, "chrome_policy: serialized size is 5242881 bytes"));
    json_decref(over);
}

/* The table: at least ~150 policies, every name found again by lookup (so the
 * bsearch order holds), and the common ones of the brief with their types. */
static void policy_table(void **state)
{
    (void)state;
    size_t n = 0, nmanaged = 0;
    enum chrome_policy_type t;
    const char *name;
    for (size_t i = 0; (name = chrome_policy_name_at(i, &t)) != NULL; i++) {
        if (chrome_policy_type_of(name) != t)
            fail_msg("%s: lookup gives %d, table says %d (table out of order?)", name,
                     (int)chrome_policy_type_of(name), (int)t);
        if (t == CHROME_POLICY_MANAGED)
            nmanaged++;
        else
            n++;
    }
    assert_true(n >= 150);
    assert_true(nmanaged >= 14);
    static const struct {
        const char *name;
        enum chrome_policy_type type;
    } common[] = {
        {"HomepageLocation", CHROME_POLICY_STRING},
        {"DefaultCookiesSetting", CHROME_POLICY_INTEGER},
        {"BookmarkBarEnabled", CHROME_POLICY_BOOLEAN},
        {"PasswordManagerEnabled", CHROME_POLICY_BOOLEAN},
        {"DownloadDirectory", CHROME_POLICY_STRING},
        {"URLBlocklist", CHROME_POLICY_LIST},
        {"URLAllowlist", CHROME_POLICY_LIST},
        {"AutofillAddressEnabled", CHROME_POLICY_BOOLEAN},
        {"IncognitoModeAvailability", CHROME_POLICY_INTEGER},
        {"DefaultPopupsSetting", CHROME_POLICY_INTEGER},
        {"DefaultGeolocationSetting", CHROME_POLICY_INTEGER},
        {"TranslateEnabled", CHROME_POLICY_BOOLEAN},
        {"ManagedBookmarks", CHROME_POLICY_LIST_DICT},
        {"ProxySettings", CHROME_POLICY_MANAGED},
        {"NoSuchPolicy", CHROME_POLICY_UNKNOWN},
    };
    for (size_t i = 0; i < sizeof common / sizeof common[0]; i++)
        if (chrome_policy_type_of(common[i].name) != common[i].type)
            fail_msg("%s: type %d, want %d", common[i].name,
                     (int)chrome_policy_type_of(common[i].name), (int)common[i].type);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(validate_table),
        cmocka_unit_test(managed_policies_blocked),
        cmocka_unit_test(five_mib_cap),
        cmocka_unit_test(policy_table),
    };
    return cmocka_run_group_tests_name("domain/chrome_policy", tests, NULL, NULL);
}
