/* Pure pieces of telemetry: categories, body limits, event JSON, SSE frames. */
#include "telemetry/event.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/clock.h"
#include "core/xalloc.h"
#include "domain/telemetry_cfg.h"

const char *telem_cat_name(enum telem_cat c)
{
    return (unsigned)c < TELEM_NCATS ? telcfg_categories[c] : "unknown";
}

int telem_cat_parse(const char *name)
{
    for (int i = 0; i < TELEM_NCATS; i++)
        if (strcmp(telcfg_categories[i], name) == 0)
            return i;
    return -1;
}

unsigned telem_cfg_mask(const json_t *cfg)
{
    unsigned m = 0;
    for (int i = 0; i < TELEM_NCATS; i++)
        if (telcfg_category_on(cfg, telcfg_categories[i]))
            m |= 1u << i;
    return m;
}

/* 1 when the MIME type's essence (before ';', case-insensitive) is t. */
static int mime_is(const char *m, size_t n, const char *t)
{
    return strlen(t) == n && strncasecmp(m, t, n) == 0;
}

static int mime_ends(const char *m, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && strncasecmp(m + n - k, suffix, k) == 0;
}

size_t telem_body_limit(const char *mime)
{
    if (!mime)
        return 0;
    while (*mime == ' ')
        mime++;
    size_t n = strcspn(mime, "; ");
    if (n == 0)
        return 0;
    if (mime_is(mime, n, "application/json") || mime_ends(mime, n, "+json") ||
        mime_is(mime, n, "application/xml") || mime_is(mime, n, "text/xml") ||
        mime_ends(mime, n, "+xml") || mime_is(mime, n, "application/x-www-form-urlencoded") ||
        mime_is(mime, n, "multipart/form-data"))
        return TELEM_BODY_STRUCTURED;
    if ((n > 5 && strncasecmp(mime, "text/", 5) == 0) ||
        mime_is(mime, n, "application/javascript") || mime_is(mime, n, "application/ecmascript") ||
        mime_is(mime, n, "application/x-javascript") || mime_is(mime, n, "image/svg+xml") ||
        mime_is(mime, n, "application/graphql"))
        return TELEM_BODY_TEXT;
    return 0;
}

int telem_mime_missing(const char *mime)
{
    if (!mime)
        return 1;
    while (*mime == ' ')
        mime++;
    return strcspn(mime, "; ") == 0;
}

int telem_bytes_are_text(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        size_t need;
        if (c == 0)
            return 0;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
        } else {
            return 0;
        }
        for (size_t k = 1; k <= need; k++) {
            if (i + k >= n)
                return 1; /* cut by the end of what we have */
            if ((p[i + k] & 0xC0) != 0x80)
                return 0;
        }
        i += need + 1;
    }
    return 1;
}

size_t telem_utf8_cut(const char *s, size_t len, size_t limit)
{
    if (len <= limit)
        return len;
    size_t n = limit;
    /* Step back over continuation bytes to the start of the split sequence. */
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return n;
}

json_t *telem_event_json(const char *session_id, enum telem_cat cat, const char *type,
                         int64_t ts_us, const struct telem_src *src, json_t *data)
{
    json_t *o = json_object();
    json_object_set_new(o, "type", json_string(type));
    json_object_set_new(o, "category", json_string(telem_cat_name(cat)));
    json_object_set_new(o, "ts", json_integer((json_int_t)ts_us));
    json_object_set_new(o, "session_id", json_string(session_id));
    json_t *so = json_pack("{s:s}", "kind", src && src->kind ? src->kind : "kernel_api");
    if (src && src->event)
        json_object_set_new(so, "event", json_string(src->event));
    json_object_set_new(o, "source", so);
    json_object_set_new(o, "data", data ? data : json_object());
    if (src && src->truncated)
        json_object_set_new(o, "truncated", json_true());
    return o;
}

char *telem_sse_frame(uint64_t seq, const char *event, size_t len, size_t *out_len)
{
    char head[80];
    int h = snprintf(head, sizeof head,
                     "id: %llu\ndata: {\"seq\":%llu,\"event\":", (unsigned long long)seq,
                     (unsigned long long)seq);
    size_t hl = h > 0 ? (size_t)h : 0;
    char *f = xmalloc(hl + len + 4);
    memcpy(f, head, hl);
    memcpy(f + hl, event, len);
    memcpy(f + hl + len, "}\n\n", 4);
    *out_len = hl + len + 3;
    return f;
}
