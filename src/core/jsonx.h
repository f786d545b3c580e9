/*
 * jsonx: strict JSON in and out on jansson.
 * Parsing caps the bytes before parsing, rejects duplicate keys, trailing
 * garbage and nesting deeper than LIM_JSON_DEPTH.
 */
#ifndef BD_CORE_JSONX_H
#define BD_CORE_JSONX_H

#include <jansson.h>
#include <stddef.h>

#include "core/err.h"

/* Parses exactly len bytes (at most max) as one JSON value. On success
 * *out is a new reference. Fails with E_TOOBIG (over max) or E_INVALID
 * (malformed, duplicate key, too deep), filling e with a message that says
 * where. */
int jsonx_parse(const char *buf, size_t len, size_t max, json_t **out, struct err *e) WUR;
/* Compact serialization; caller frees with xfree. */
/* The JSON path of the value at byte pos of buf ("viewport.width",
 * "items[3]"; "" at the top level), written into out (cap bytes). buf need
 * not be valid JSON beyond pos. */
void jsonx_path_at(const char *buf, size_t len, size_t pos, char *out, size_t cap);
char *jsonx_dump(const json_t *v);
/* Convenience getters on objects: NULL / default when absent or of another type. */
const char *jsonx_str(const json_t *obj, const char *key);
int jsonx_bool(const json_t *obj, const char *key, int dflt);

#endif
