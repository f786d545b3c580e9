/*
 * app_rules: the pure rules of apps and deployments (api/apps.h): which
 * runtimes an entrypoint may use, the shape of a version and of an env var
 * name, and which env var values the API never shows.
 */
#ifndef BD_DOMAIN_APP_RULES_H
#define BD_DOMAIN_APP_RULES_H

#include <jansson.h>
#include <stddef.h>

/* "node" for an entrypoint ending .js, .mjs or .cjs; NULL otherwise (this
 * server runs Node apps only: a Python entrypoint is refused by name). */
const char *app_rules_entrypoint_runtime(const char *path);
/* 1 when the n bytes at v match ^[A-Za-z0-9._-]{1,64}$. */
int app_rules_version_ok(const char *v, size_t n);
/* 1 when name matches ^[A-Za-z_][A-Za-z0-9_]{0,127}$ and is not one the
 * server sets for a run (KERNEL_API_KEY, KERNEL_BASE_URL). */
int app_rules_env_name_ok(const char *name);
/* 1 when an env var of this name holds a secret by its look: it contains
 * KEY, SECRET, TOKEN, PASSWORD, PASSWD, PASS, CREDENTIAL, AUTH, PRIVATE or
 * COOKIE (any case). */
int app_rules_secret_name(const char *name);
/* A copy of env ({name: value}) whose secret-looking values read
 * "[redacted]" (new reference). */
json_t *app_rules_redact_env(const json_t *env);

#endif
