/*
 * fields: validators for the small field shapes the interface document repeats
 * (names, tags, {id, name} selectors, vault references) and the typed helpers
 * (boolean, bounded integer, number, bounded string, unknown fields) every
 * body validator is built from.
 *
 * Every validator is pure. It records each problem it finds with err_field()
 * under the field path the client wrote ("tags.team", "profile.name"), keeps
 * going after the first problem, and returns 0 when the value is valid or
 * E_INVALID when at least one problem was recorded. `path` is borrowed; ""
 * means the body itself. Interpretations are listed in docs/domain-fields.md.
 */
#ifndef BD_DOMAIN_FIELDS_H
#define BD_DOMAIN_FIELDS_H

#include <jansson.h>
#include <stddef.h>

#include "core/err.h"

/* Longest name (session, pool, profile, vault): ^[a-zA-Z0-9._-]{1,255}$. */
#define FIELDS_NAME_MAX 255
/* Tags: entries per resource, key and value lengths. */
#define FIELDS_TAGS_MAX      50
#define FIELDS_TAG_KEY_MAX   128
#define FIELDS_TAG_VALUE_MAX 256
/* Room for a field path built by fields_path(); longer paths are truncated. */
#define FIELDS_PATH_MAX 320

/* Name pattern ^[a-zA-Z0-9._-]{1,255}$ . v must be a JSON string. flags:
 * FIELDS_EMPTY_OK lets "" through (session update: "" clears; pool update: ""
 * is a no-op); the caller decides the meaning. null is a type error here: the
 * session update's "string or null" is the caller's decision. */
#define FIELDS_EMPTY_OK 1u
int fields_check_name(const char *path, const json_t *v, unsigned flags, struct err *e) WUR;

/* 1 when the n bytes at s match ^[a-zA-Z0-9._-]{1,255}$, else 0. */
int fields_name_ok(const char *s, size_t n);

/* Tags: object of string->string; at most 50 entries; key 1-128 chars matching
 * ^[A-Za-z0-9 _.:/=+@-]+$; value 0-256 chars matching ^[A-Za-z0-9 _.:/=+@-]*$.
 * Errors name "<path>.<key>" paths (path is normally "tags"). null is a type
 * error: "Tags or null" is decided by the caller. */
int fields_check_tags(const char *path, const json_t *v, struct err *e) WUR;

/* Selector {id, name}: exactly one of id or name (strings; name uses the name
 * pattern; id non-empty). flags:
 *   SEL_SAVE_CHANGES        allows an optional boolean save_changes (session profile);
 *   SEL_IGNORE_SAVE_CHANGES accepts save_changes of any value and ignores it
 *                           (pool profile: "ignored, not rejected");
 *   SEL_EMPTY_CLEARS        accepts id:"" or name:"" as "clear" (pool profile);
 *                           {} is still rejected.
 * No other properties. Use fields_selector_is_clear() to read the "clear" case. */
#define SEL_SAVE_CHANGES        1u
#define SEL_IGNORE_SAVE_CHANGES 2u
#define SEL_EMPTY_CLEARS        4u
int fields_check_selector(const char *path, const json_t *v, unsigned flags, struct err *e) WUR;

/* For a selector already accepted by fields_check_selector(): 1 when it is the
 * "clear" form (id:"" or name:""), else 0. */
int fields_selector_is_clear(const json_t *v);

/* VaultReference: exactly one of id (non-empty string) or name (string, 1-255
 * chars), no other properties. */
int fields_check_vault_ref(const char *path, const json_t *v, struct err *e) WUR;

/* A JSON boolean. */
int fields_check_bool(const char *path, const json_t *v, struct err *e) WUR;

/* Integer in [min,max] (JSON integer only: no reals, strings or booleans). */
int fields_check_int(const char *path, const json_t *v, long long min, long long max,
                     struct err *e) WUR;

/* Number (JSON integer or real, finite) >= min; used by fill_rate_per_minute. */
int fields_check_number_min(const char *path, const json_t *v, double min, struct err *e) WUR;

/* String with byte length in [minlen, maxlen]. */
int fields_check_string(const char *path, const json_t *v, size_t minlen, size_t maxlen,
                        struct err *e) WUR;

/* Unknown fields: every key of object v not in the NULL-terminated `allowed`
 * list is a field error "path.key: unknown field". A non-object v is accepted
 * here (the type check belongs to the caller). */
int fields_check_known(const char *path, const json_t *v, const char *const *allowed,
                       struct err *e) WUR;

/* Joins a path and a key ("" + "name" -> "name"; "viewport" + "width" ->
 * "viewport.width") into buf of cap bytes, truncating if needed; returns buf. */
const char *fields_path(char *buf, size_t cap, const char *path, const char *key);

/* Same for an array index: "extensions" + 3 -> "extensions[3]". */
const char *fields_path_index(char *buf, size_t cap, const char *path, size_t index);

/* Name of v's JSON type for messages ("string", "integer", "null", ...). */
const char *fields_type_name(const json_t *v);

#endif
