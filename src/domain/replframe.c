/* domain/replframe: see replframe.h. */
#include "domain/replframe.h"

#include <stdint.h>
#include <string.h>

#include "core/xalloc.h"

static const char *const channels[] = {"write", "stdout", "stderr"};
static const char *const mimes[] = {"image/png", "image/jpeg", "image/webp", "image/gif"};

static int one_of(const char *s, const char *const *set, size_t n)
{
    for (size_t i = 0; s && i < n; i++)
        if (strcmp(s, set[i]) == 0)
            return 1;
    return 0;
}

/* The checks of one message; -1 with e said when it breaks the protocol. */
static int check(json_t *m, enum replmsg_kind *kind, struct err *e)
{
    const char *t = json_string_value(json_object_get(m, "t"));
    if (t && strcmp(t, "text") == 0) {
        *kind = REPLMSG_TEXT;
        if (!one_of(json_string_value(json_object_get(m, "channel")), channels, 3) ||
            !json_is_string(json_object_get(m, "text")))
            return err_set(e, E_INTERNAL, "internal",
                           "REPL protocol: a text frame needs channel and text"),
                   -1;
        return 0;
    }
    if (t && strcmp(t, "image") == 0) {
        *kind = REPLMSG_IMAGE;
        if (!one_of(json_string_value(json_object_get(m, "mime_type")), mimes, 4) ||
            !json_is_string(json_object_get(m, "data_b64")))
            return err_set(e, E_INTERNAL, "internal",
                           "REPL protocol: an image frame needs mime_type and data_b64"),
                   -1;
        return 0;
    }
    if (t && strcmp(t, "done") == 0) {
        *kind = REPLMSG_DONE;
        json_t *er = json_object_get(m, "error"), *st = json_object_get(m, "stack");
        if (!json_is_boolean(json_object_get(m, "success")) ||
            (er && !json_is_null(er) && !json_is_string(er)) ||
            (st && !json_is_null(st) && !json_is_string(st)))
            return err_set(e, E_INTERNAL, "internal",
                           "REPL protocol: a done frame needs success (error, stack: strings)"),
                   -1;
        return 0;
    }
    return err_set(e, E_INTERNAL, "internal", "REPL protocol: unknown frame type"), -1;
}

int replframe_next(const char *p, size_t n, size_t max, size_t *used, json_t **msg,
                   enum replmsg_kind *kind, struct err *e)
{
    *used = 0;
    *msg = NULL;
    *kind = 0;
    if (n < 4)
        return 0;
    const unsigned char *u = (const unsigned char *)p;
    uint32_t len = (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 | u[3];
    if (len == 0 || len > max) {
        err_set(e, E_INTERNAL, "internal", "REPL protocol: a frame of %u bytes (1..%zu allowed)",
                len, max);
        return -1;
    }
    if (n - 4 < len)
        return 0;
    json_error_t je;
    json_t *m = json_loadb(p + 4, len, JSON_ALLOW_NUL, &je);
    if (!m || !json_is_object(m)) {
        json_decref(m);
        err_set(e, E_INTERNAL, "internal", "REPL protocol: a frame is not a JSON object");
        return -1;
    }
    if (check(m, kind, e) != 0) {
        json_decref(m);
        *kind = 0;
        return -1;
    }
    *msg = m;
    *used = 4 + (size_t)len;
    return 1;
}

char *replframe_encode(const json_t *obj, size_t *len)
{
    *len = 0;
    char *t = json_dumps(obj, JSON_COMPACT);
    if (!t)
        return NULL;
    size_t n = strlen(t);
    if (n > UINT32_MAX) {
        xfree(t);
        return NULL;
    }
    char *f = xmalloc(n + 4);
    f[0] = (char)(n >> 24 & 0xff);
    f[1] = (char)(n >> 16 & 0xff);
    f[2] = (char)(n >> 8 & 0xff);
    f[3] = (char)(n & 0xff);
    memcpy(f + 4, t, n);
    xfree(t);
    *len = n + 4;
    return f;
}
