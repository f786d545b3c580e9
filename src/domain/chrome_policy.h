/*
 * chrome_policy: validation of the custom Chrome enterprise policy overrides
 * (`chrome_policy`) of sessions and pools. Pure; the table of accepted policy
 * names and the list of service-managed ones live in chrome_policy.c and are
 * summarised in docs/domain-fields.md.
 */
#ifndef BD_DOMAIN_CHROME_POLICY_H
#define BD_DOMAIN_CHROME_POLICY_H

#include <jansson.h>
#include <stddef.h>

#include "core/err.h"

/* "Serialized payload capped at 5 MiB": compact JSON bytes of the whole object. */
#define CHROME_POLICY_MAX_BYTES (5u * 1024u * 1024u)

/* JSON type a policy expects. */
enum chrome_policy_type {
    CHROME_POLICY_UNKNOWN,   /* not a policy name in the table */
    CHROME_POLICY_MANAGED,   /* managed by the service; never settable */
    CHROME_POLICY_BOOLEAN,   /* true/false */
    CHROME_POLICY_INTEGER,   /* JSON integer (enum values are not checked) */
    CHROME_POLICY_STRING,    /* JSON string */
    CHROME_POLICY_LIST,      /* array of strings */
    CHROME_POLICY_LIST_DICT, /* array of objects */
    CHROME_POLICY_DICT,      /* object */
};

/* Validates chrome_policy at `path` (normally "chrome_policy"): an object
 * (the empty object is valid: it clears the overrides); its compact JSON
 * serialization is at most CHROME_POLICY_MAX_BYTES; every key is a known
 * Chromium policy name whose value has the expected JSON type; unknown names
 * are rejected; service-managed policies (extension installation and
 * settings, proxy settings, remote debugging / developer tools / automation,
 * the browser's data directories) are rejected with
 * "<path>.<Name>: is managed by the service and cannot be set". Records every
 * problem in e; returns 0 or E_INVALID. */
int chrome_policy_validate(const char *path, const json_t *v, struct err *e) WUR;

/* The type expected for policy `name` (case-sensitive), CHROME_POLICY_MANAGED
 * for service-managed names, CHROME_POLICY_UNKNOWN otherwise. */
enum chrome_policy_type chrome_policy_type_of(const char *name);

/* Iterates the tables: the i-th accepted policy name with its type in *type,
 * then the service-managed names (type CHROME_POLICY_MANAGED); NULL once i is
 * past both. For tests and documentation. */
const char *chrome_policy_name_at(size_t i, enum chrome_policy_type *type);

#endif
