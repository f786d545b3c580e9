#include "domain/fields.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define NAME_RULE    "^[a-zA-Z0-9._-]{1,255}$"
#define TAG_KEY_RULE "^[A-Za-z0-9 _.:/=+@-]+$"
#define TAG_VAL_RULE "^[A-Za-z0-9 _.:/=+@-]*$"

/* snprintf that truncates on purpose: paths are bounded by design. */
static void fmt_trunc(char *dst, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fmt_trunc(char *dst, size_t cap, const char *fmt, ...)
{
    va_list ap;
    if (cap == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(dst, cap, fmt, ap);
    va_end(ap);
}

const char *fields_path(char *buf, size_t cap, const char *path, const char *key)
{
    if (!path || !*path)
        fmt_trunc(buf, cap, "%s", key);
    else
        fmt_trunc(buf, cap, "%s.%s", path, key);
    return buf;
}

const char *fields_path_index(char *buf, size_t cap, const char *path, size_t index)
{
    fmt_trunc(buf, cap, "%s[%zu]", path ? path : "", index);
    return buf;
}

const char *fields_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "number with a fraction";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    case JSON_NULL:
        return "null";
    }
    return "unknown";
}

static int name_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

/* The tag alphabet [A-Za-z0-9 _.:/=+@-] for keys and values. */
static int tag_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ' ' ||
           c == '_' || c == '.' || c == ':' || c == '/' || c == '=' || c == '+' || c == '@' ||
           c == '-';
}

/* Offset of the first byte outside the tag alphabet, or n when none. */
static size_t tag_bad_at(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!tag_char((unsigned char)s[i]))
            return i;
    return n;
}

int fields_name_ok(const char *s, size_t n)
{
    if (n < 1 || n > FIELDS_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!name_char((unsigned char)s[i]))
            return 0;
    return 1;
}

int fields_check_name(const char *path, const json_t *v, unsigned flags, struct err *e)
{
    if (!json_is_string(v))
        return err_field(e, path, "must be a string matching %s, not %s", NAME_RULE,
                         fields_type_name(v));
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    if (n == 0) {
        if (flags & FIELDS_EMPTY_OK)
            return 0;
        return err_field(e, path, "must be 1-255 characters matching %s (got an empty string)",
                         NAME_RULE);
    }
    if (n > FIELDS_NAME_MAX)
        return err_field(e, path, "must be 1-255 characters matching %s (got %zu characters)",
                         NAME_RULE, n);
    for (size_t i = 0; i < n; i++)
        if (!name_char((unsigned char)s[i]))
            return err_field(e, path, "must match %s (character at offset %zu is not allowed)",
                             NAME_RULE, i);
    return 0;
}

int fields_check_tags(const char *path, const json_t *v, struct err *e)
{
    if (!json_is_object(v))
        return err_field(e, path, "must be an object of string to string, not %s",
                         fields_type_name(v));
    int rc = 0;
    size_t count = json_object_size(v);
    if (count > FIELDS_TAGS_MAX)
        rc = err_field(e, path, "at most %d entries are allowed (got %zu)", FIELDS_TAGS_MAX, count);
    const char *key;
    size_t klen;
    json_t *val;
    char p[FIELDS_PATH_MAX];
    json_object_keylen_foreach((json_t *)v, key, klen, val)
    {
        fields_path(p, sizeof p, path, key);
        if (klen < 1 || klen > FIELDS_TAG_KEY_MAX)
            rc = err_field(e, p, "key must be 1-%d characters (got %zu)", FIELDS_TAG_KEY_MAX, klen);
        else if (tag_bad_at(key, klen) < klen)
            rc = err_field(e, p, "key must match %s (character at offset %zu is not allowed)",
                           TAG_KEY_RULE, tag_bad_at(key, klen));
        if (!json_is_string(val)) {
            rc = err_field(e, p, "value must be a string, not %s", fields_type_name(val));
            continue;
        }
        size_t vlen = json_string_length(val);
        if (vlen > FIELDS_TAG_VALUE_MAX)
            rc = err_field(e, p, "value must be 0-%d characters (got %zu)", FIELDS_TAG_VALUE_MAX,
                           vlen);
        else if (tag_bad_at(json_string_value(val), vlen) < vlen)
            rc = err_field(e, p, "value must match %s (character at offset %zu is not allowed)",
                           TAG_VAL_RULE, tag_bad_at(json_string_value(val), vlen));
    }
    return rc;
}

/* Checks one side of an {id, name} pair: id a non-empty string, name a string
 * following the name pattern; "" is let through when empty_ok. */
static int check_sel_id(const char *path, const json_t *v, int empty_ok, struct err *e)
{
    char p[FIELDS_PATH_MAX];
    fields_path(p, sizeof p, path, "id");
    if (!json_is_string(v))
        return err_field(e, p, "must be a string, not %s", fields_type_name(v));
    if (json_string_length(v) == 0 && !empty_ok)
        return err_field(e, p, "must not be empty");
    return 0;
}

int fields_check_selector(const char *path, const json_t *v, unsigned flags, struct err *e)
{
    if (!json_is_object(v))
        return err_field(e, path, "must be an object with exactly one of id or name, not %s",
                         fields_type_name(v));
    static const char *const plain[] = {"id", "name", NULL};
    static const char *const with_save[] = {"id", "name", "save_changes", NULL};
    int save_ok = (flags & (SEL_SAVE_CHANGES | SEL_IGNORE_SAVE_CHANGES)) != 0;
    int rc = fields_check_known(path, v, save_ok ? with_save : plain, e);
    int empty_ok = (flags & SEL_EMPTY_CLEARS) != 0;
    const json_t *id = json_object_get(v, "id");
    const json_t *name = json_object_get(v, "name");
    char p[FIELDS_PATH_MAX];
    if (id && name)
        rc = err_field(e, path, "give exactly one of id or name, not both");
    else if (!id && !name)
        rc = err_field(e, path,
                       "must give exactly one of id or name (an empty object is "
                       "invalid)");
    if (id && check_sel_id(path, id, empty_ok, e) < 0)
        rc = E_INVALID;
    if (name && fields_check_name(fields_path(p, sizeof p, path, "name"), name,
                                  empty_ok ? FIELDS_EMPTY_OK : 0, e) < 0)
        rc = E_INVALID;
    const json_t *save = json_object_get(v, "save_changes");
    if (save && (flags & SEL_SAVE_CHANGES) && !(flags & SEL_IGNORE_SAVE_CHANGES) &&
        fields_check_bool(fields_path(p, sizeof p, path, "save_changes"), save, e) < 0)
        rc = E_INVALID;
    return rc;
}

int fields_selector_is_clear(const json_t *v)
{
    const json_t *id = json_object_get(v, "id");
    const json_t *name = json_object_get(v, "name");
    if (id && json_is_string(id) && json_string_length(id) == 0)
        return 1;
    if (name && json_is_string(name) && json_string_length(name) == 0)
        return 1;
    return 0;
}

/* Characters (UTF-8 code points) in n bytes of valid UTF-8, as jansson
 * guarantees for string values. */
static size_t utf8_chars(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            c++;
    return c;
}

int fields_check_vault_ref(const char *path, const json_t *v, struct err *e)
{
    if (!json_is_object(v))
        return err_field(e, path, "must be an object with exactly one of id or name, not %s",
                         fields_type_name(v));
    static const char *const allowed[] = {"id", "name", NULL};
    int rc = fields_check_known(path, v, allowed, e);
    const json_t *id = json_object_get(v, "id");
    const json_t *name = json_object_get(v, "name");
    char p[FIELDS_PATH_MAX];
    if (id && name)
        rc = err_field(e, path, "give exactly one of id or name, not both");
    else if (!id && !name)
        rc = err_field(e, path, "must give exactly one of id or name");
    if (id && check_sel_id(path, id, 0, e) < 0)
        rc = E_INVALID;
    if (name) {
        fields_path(p, sizeof p, path, "name");
        if (!json_is_string(name)) {
            rc = err_field(e, p, "must be a string, not %s", fields_type_name(name));
        } else {
            size_t n = utf8_chars(json_string_value(name), json_string_length(name));
            if (n < 1 || n > FIELDS_NAME_MAX)
                rc = err_field(e, p, "must be 1-255 characters (got %zu)", n);
        }
    }
    return rc;
}

int fields_check_bool(const char *path, const json_t *v, struct err *e)
{
    if (!json_is_boolean(v))
        return err_field(e, path, "must be a boolean, not %s", fields_type_name(v));
    return 0;
}

/* "an integer >= 1" / "an integer between 10 and 259200" / ... */
static void int_rule(char *buf, size_t cap, long long min, long long max)
{
    if (min == LLONG_MIN && max == LLONG_MAX)
        fmt_trunc(buf, cap, "an integer");
    else if (max == LLONG_MAX)
        fmt_trunc(buf, cap, "an integer >= %lld", min);
    else if (min == LLONG_MIN)
        fmt_trunc(buf, cap, "an integer <= %lld", max);
    else
        fmt_trunc(buf, cap, "an integer between %lld and %lld", min, max);
}

int fields_check_int(const char *path, const json_t *v, long long min, long long max, struct err *e)
{
    char rule[96];
    int_rule(rule, sizeof rule, min, max);
    if (!json_is_integer(v))
        return err_field(e, path, "must be %s, not %s", rule, fields_type_name(v));
    long long n = (long long)json_integer_value(v);
    if (n < min || n > max)
        return err_field(e, path, "must be %s (got %lld)", rule, n);
    return 0;
}

int fields_check_number_min(const char *path, const json_t *v, double min, struct err *e)
{
    if (!json_is_number(v))
        return err_field(e, path, "must be a number >= %g, not %s", min, fields_type_name(v));
    double d = json_number_value(v);
    if (!isfinite(d) || d < min)
        return err_field(e, path, "must be a number >= %g (got %g)", min, d);
    return 0;
}

int fields_check_string(const char *path, const json_t *v, size_t minlen, size_t maxlen,
                        struct err *e)
{
    if (!json_is_string(v))
        return err_field(e, path, "must be a string, not %s", fields_type_name(v));
    size_t n = json_string_length(v);
    if (n < minlen || n > maxlen) {
        if (minlen == 0)
            return err_field(e, path, "must be at most %zu characters (got %zu)", maxlen, n);
        if (maxlen == (size_t)-1)
            return err_field(e, path, "must be at least %zu characters (got %zu)", minlen, n);
        return err_field(e, path, "must be %zu-%zu characters (got %zu)", minlen, maxlen, n);
    }
    return 0;
}

int fields_check_known(const char *path, const json_t *v, const char *const *allowed, struct err *e)
{
    if (!json_is_object(v))
        return 0;
    int rc = 0;
    const char *key;
    json_t *val;
    char p[FIELDS_PATH_MAX];
    json_object_foreach((json_t *)v, key, val)
    {
        (void)val;
        int known = 0;
        for (size_t i = 0; allowed[i]; i++)
            if (strcmp(key, allowed[i]) == 0) {
                known = 1;
                break;
            }
        if (!known)
            rc = err_field(e, fields_path(p, sizeof p, path, key), "unknown field");
    }
    return rc;
}
