/* Unit tests for domain/app_rules: each case is named after the line of
 * issue 36 (or docs/apps.md) it checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "domain/app_rules.h"

static void test_entrypoint_runtime(void **state)
{
    (void)state;
    static const struct {
        const char *name, *path, *want;
    } cases[] = {
        {"Node: an ES module", "index.mjs", "node"},
        {"Node: a script in a folder", "src/app.js", "node"},
        {"Node: CommonJS", "app.cjs", "node"},
        {"say which runtimes: Python is not supported", "main.py", NULL},
        {"TypeScript is not run (no build step)", "index.ts", NULL},
        {"a bare extension is not a file name", ".js", NULL},
        {"no extension", "index", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *got = app_rules_entrypoint_runtime(cases[i].path);
        if (!cases[i].want)
            assert_null(got);
        else
            assert_string_equal(got, cases[i].want);
    }
}

static void test_version(void **state)
{
    (void)state;
    static const struct {
        const char *name, *v;
        int ok;
    } cases[] = {
        {"a semantic version", "1.0.0", 1},
        {"a word", "latest", 1},
        {"empty", "", 0},
        {"a slash would name a path", "1/2", 0},
        {"a space", "1 0", 0},
        {"65 characters", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(app_rules_version_ok(cases[i].v, strlen(cases[i].v)), cases[i].ok);
}

static void test_env_name(void **state)
{
    (void)state;
    static const struct {
        const char *name, *v;
        int ok;
    } cases[] = {
        {"an ordinary name", "API_BASE", 1},
        {"lower case", "foo_bar1", 1},
        {"a digit first", "1ABC", 0},
        {"a dash", "A-B", 0},
        {"the server sets the run's key", "KERNEL_API_KEY", 0},
        {"the server sets its address", "KERNEL_BASE_URL", 0},
        {"empty", "", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(app_rules_env_name_ok(cases[i].v), cases[i].ok);
}

static void test_redact(void **state)
{
    (void)state;
    static const struct {
        const char *name, *var;
        int secret;
    } cases[] = {
        {"env vars (values of secret-looking names redacted): an API key", "OPENAI_API_KEY", 1},
        {"a token", "github_token", 1},
        {"a password", "DB_PASSWORD", 1},
        {"a secret", "CLIENT_SECRET", 1},
        {"a plain setting", "REGION", 0},
        {"a URL", "TARGET_URL", 0},
    };
    json_t *env = json_object();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(app_rules_secret_name(cases[i].var), cases[i].secret);
        json_object_set_new(env, cases[i].var, json_string("value"));
    }
    json_t *red = app_rules_redact_env(env);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_string_equal(json_string_value(json_object_get(red, cases[i].var)),
                            cases[i].secret ? "[redacted]" : "value");
    assert_string_equal(json_string_value(json_object_get(env, "DB_PASSWORD")), "value");
    json_decref(red);
    json_decref(env);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_entrypoint_runtime),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_env_name),
        cmocka_unit_test(test_redact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
