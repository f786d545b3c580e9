/* libFuzzer target for domain/app_rules: arbitrary bytes as a deployment's
 * entrypoint_rel_path, version and env var name (multipart fields a tenant
 * sends). Checks: no crash; an accepted version or env var name holds only
 * the allowed characters; a "node" entrypoint ends .js, .mjs or .cjs. */
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/xalloc.h"
#include "domain/app_rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = xmalloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    size_t n = strlen(s);
    if (app_rules_version_ok(s, n))
        for (size_t i = 0; i < n; i++)
            if (!isalnum((unsigned char)s[i]) && !strchr("._-", s[i]))
                abort();
    if (app_rules_env_name_ok(s))
        for (size_t i = 0; i < n; i++)
            if (!isalnum((unsigned char)s[i]) && s[i] != '_')
                abort();
    const char *rt = app_rules_entrypoint_runtime(s);
    if (rt && !(n > 3 && (strcmp(s + n - 3, ".js") == 0 || strcmp(s + n - 4, ".mjs") == 0 ||
                          strcmp(s + n - 4, ".cjs") == 0)))
        abort();
    json_t *env = json_object();
    if (json_object_set_new(env, s, json_string("v")) == 0) {
        json_t *red = app_rules_redact_env(env);
        if (json_object_size(red) != json_object_size(env))
            abort();
        json_decref(red);
    }
    json_decref(env);
    xfree(s);
    return 0;
}
