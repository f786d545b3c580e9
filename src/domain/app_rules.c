/* domain/app_rules: see app_rules.h. */
#include "domain/app_rules.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

const char *app_rules_entrypoint_runtime(const char *path)
{
    static const char *const node[] = {".js", ".mjs", ".cjs"};
    size_t n = strlen(path);
    for (size_t i = 0; i < sizeof node / sizeof node[0]; i++) {
        size_t k = strlen(node[i]);
        if (n > k && strcmp(path + n - k, node[i]) == 0)
            return "node";
    }
    return NULL;
}

int app_rules_version_ok(const char *v, size_t n)
{
    if (n == 0 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)v[i]) && v[i] != '.' && v[i] != '_' && v[i] != '-')
            return 0;
    return 1;
}

int app_rules_env_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 128 || isdigit((unsigned char)name[0]))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)name[i]) && name[i] != '_')
            return 0;
    return strcmp(name, "KERNEL_API_KEY") != 0 && strcmp(name, "KERNEL_BASE_URL") != 0;
}

int app_rules_secret_name(const char *name)
{
    static const char *const marks[] = {"KEY",  "SECRET",     "TOKEN", "PASSWORD", "PASSWD",
                                        "PASS", "CREDENTIAL", "AUTH",  "PRIVATE",  "COOKIE"};
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        if (strcasestr(name, marks[i]))
            return 1;
    return 0;
}

json_t *app_rules_redact_env(const json_t *env)
{
    json_t *out = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)env, k, v)
    {
        json_object_set_new(
            out, k, app_rules_secret_name(k) ? json_string("[redacted]") : json_deep_copy(v));
    }
    return out;
}
