#include "core/jsonx.h"

#include <stdio.h>
#include <string.h>

#include "core/limits.h"
#include "core/xalloc.h"

static int depth_ok(const json_t *v, int depth)
{
    if (depth > LIM_JSON_DEPTH)
        return 0;
    if (json_is_object(v)) {
        const char *k;
        json_t *c;
        json_object_foreach((json_t *)v, k, c)
        {
            if (!depth_ok(c, depth + 1))
                return 0;
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *c;
        json_array_foreach(v, i, c)
        {
            if (!depth_ok(c, depth + 1))
                return 0;
        }
    }
    return 1;
}

/* Jansson's own recursion guard is 2048 levels; a cheap pre-scan keeps
 * hostile nesting from reaching the parser at all. */
static int prescan_depth(const char *buf, size_t len)
{
    int depth = 0, in_str = 0, esc = 0;
    for (size_t i = 0; i < len; i++) {
        char c = buf[i];
        if (in_str) {
            if (esc)
                esc = 0;
            else if (c == '\\')
                esc = 1;
            else if (c == '"')
                in_str = 0;
            continue;
        }
        if (c == '"')
            in_str = 1;
        else if (c == '{' || c == '[') {
            if (++depth > LIM_JSON_DEPTH + 1)
                return 0;
        } else if (c == '}' || c == ']')
            depth--;
    }
    return 1;
}

/* The path ("viewport.width", "tags.team", "items[3]") of the value being
 * read at byte pos of buf, by a scan that tracks objects, keys and array
 * indexes; "" at the top level. */
void jsonx_path_at(const char *buf, size_t len, size_t pos, char *out, size_t cap)
{
    struct frame {
        char obj;     /* 1: object, 0: array */
        char key[64]; /* objects: the last key read */
        long index;   /* arrays: the current element */
    } st[LIM_JSON_DEPTH + 2];
    int depth = 0, in_str = 0, esc = 0, expect_key = 0;
    size_t kl = 0;
    char key[64];
    if (pos > len)
        pos = len;
    for (size_t i = 0; i < pos; i++) {
        char c = buf[i];
        if (in_str) {
            if (esc) {
                esc = 0;
            } else if (c == '\\') {
                esc = 1;
            } else if (c == '"') {
                in_str = 0;
                if (expect_key && depth > 0 && st[depth - 1].obj) {
                    key[kl] = '\0';
                    memcpy(st[depth - 1].key, key, kl + 1);
                }
                continue;
            }
            if (kl + 1 < sizeof key)
                key[kl++] = c;
            continue;
        }
        if (c == '"') {
            in_str = 1;
            kl = 0;
        } else if ((c == '{' || c == '[') && depth < LIM_JSON_DEPTH + 2) {
            st[depth].obj = c == '{';
            st[depth].key[0] = '\0';
            st[depth].index = 0;
            depth++;
            expect_key = c == '{';
        } else if ((c == '}' || c == ']') && depth > 0) {
            depth--;
            expect_key = 0;
        } else if (c == ':') {
            expect_key = 0;
        } else if (c == ',' && depth > 0) {
            if (st[depth - 1].obj)
                expect_key = 1;
            else
                st[depth - 1].index++;
        }
    }
    size_t o = 0;
    out[0] = '\0';
    for (int d = 0; d < depth && o + 1 < cap; d++) {
        int n = st[d].obj ? snprintf(out + o, cap - o, "%s%s", o ? "." : "", st[d].key)
                          : snprintf(out + o, cap - o, "[%ld]", st[d].index);
        if (n < 0)
            break;
        o += (size_t)n < cap - o ? (size_t)n : cap - o - 1;
    }
}

int jsonx_parse(const char *buf, size_t len, size_t max, json_t **out, struct err *e)
{
    *out = NULL;
    if (len > max)
        return err_set(e, E_TOOBIG, "payload_too_large",
                       "request body is %zu bytes; the limit is %zu bytes", len, max);
    if (!prescan_depth(buf, len))
        return err_set(e, E_INVALID, "bad_request", "JSON nesting deeper than %d levels",
                       LIM_JSON_DEPTH);
    json_error_t je;
    json_t *v = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (!v) {
        /* A number the parser cannot hold is a field out of range, not
         * malformed JSON: name the field. */
        if (strstr(je.text, "too big") || strstr(je.text, "overflow")) {
            char path[256];
            jsonx_path_at(buf, len, (size_t)je.position, path, sizeof path);
            return err_field(e, path,
                             "is a number out of range (integers must fit in 64 bits, other "
                             "numbers in a double)");
        }
        return err_set(e, E_INVALID, "bad_request", "malformed JSON at line %d column %d: %s",
                       je.line, je.column, je.text);
    }
    if (!depth_ok(v, 0)) {
        json_decref(v);
        return err_set(e, E_INVALID, "bad_request", "JSON nesting deeper than %d levels",
                       LIM_JSON_DEPTH);
    }
    *out = v;
    return 0;
}

char *jsonx_dump(const json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s)
        return xstrdup("null");
    return s;
}

const char *jsonx_str(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

int jsonx_bool(const json_t *obj, const char *key, int dflt)
{
    json_t *v = json_object_get(obj, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}
