/*
 * The audit spool's records (auditspool.h). The encoder is the server's own;
 * the parser reads a file that a crash may have torn or anyone with access
 * to the data folder may have edited, so it takes nothing on trust: every
 * field is type- and length-checked against the entry it fills.
 */
#include "telemetry/auditspool.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "core/err.h"
#include "core/limits.h"
#include "core/xalloc.h"

static const char *nz(const char *s)
{
    return s ? s : "";
}

size_t auditspool_encode(const struct audit_rec *r, char *out, size_t cap)
{
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:i, s:I, s:s, s:s, s:s, s:s, s:s, s:s}",
                          "id", r->entry_id, "org", r->org_id, "ts", (json_int_t)r->ts, "method",
                          r->method, "auth", r->auth_strategy, "service", r->service, "status",
                          r->status, "dur", (json_int_t)r->duration_ms, "path", nz(r->path),
                          "route", nz(r->route), "ip", nz(r->client_ip), "ua", nz(r->user_agent),
                          "user", nz(r->user_id), "domain", nz(r->domain));
    if (!o)
        return 0; /* a string that is not UTF-8: field() never makes one */
    size_t n = json_dumpb(o, out, cap, JSON_COMPACT);
    json_decref(o);
    if (n == 0 || n >= cap)
        return 0;
    out[n] = '\n';
    return n + 1;
}

/* The string member key of o into buf (cap bytes, NUL included). */
static int fixed(const json_t *o, const char *key, char *buf, size_t cap)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_string(v) || json_string_length(v) >= cap ||
        strlen(json_string_value(v)) != json_string_length(v))
        return E_INVALID;
    memcpy(buf, json_string_value(v), json_string_length(v) + 1);
    return 0;
}

/* The string member key of o, owned, at most LIM_AUDIT_FIELD_BYTES. */
static int owned(const json_t *o, const char *key, char **out)
{
    char buf[LIM_AUDIT_FIELD_BYTES + 1];
    int rc = fixed(o, key, buf, sizeof buf);
    if (rc == 0)
        *out = xstrdup(buf);
    return rc;
}

static int integer(const json_t *o, const char *key, int64_t min, int64_t max, int64_t *out)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
        return E_INVALID;
    *out = json_integer_value(v);
    return 0;
}

int auditspool_parse(const char *line, size_t len, struct audit_rec *r)
{
    memset(r, 0, sizeof *r);
    if (len > LIM_AUDIT_SPOOL_RECORD_BYTES)
        return E_INVALID;
    json_error_t je;
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(o)) {
        json_decref(o);
        return E_INVALID;
    }
    int64_t status = 0;
    int rc = fixed(o, "id", r->entry_id, sizeof r->entry_id);
    if (rc == 0 && !r->entry_id[0])
        rc = E_INVALID;
    if (rc == 0)
        rc = fixed(o, "org", r->org_id, sizeof r->org_id);
    if (rc == 0)
        rc = integer(o, "ts", 0, INT64_MAX, &r->ts);
    if (rc == 0)
        rc = fixed(o, "method", r->method, sizeof r->method);
    if (rc == 0)
        rc = fixed(o, "auth", r->auth_strategy, sizeof r->auth_strategy);
    if (rc == 0)
        rc = fixed(o, "service", r->service, sizeof r->service);
    if (rc == 0)
        rc = integer(o, "status", 0, 599, &status);
    if (rc == 0)
        rc = integer(o, "dur", 0, INT64_MAX, &r->duration_ms);
    if (rc == 0)
        rc = owned(o, "path", &r->path);
    if (rc == 0)
        rc = owned(o, "route", &r->route);
    if (rc == 0)
        rc = owned(o, "ip", &r->client_ip);
    if (rc == 0)
        rc = owned(o, "ua", &r->user_agent);
    if (rc == 0)
        rc = owned(o, "user", &r->user_id);
    if (rc == 0)
        rc = owned(o, "domain", &r->domain);
    json_decref(o);
    r->status = (int)status;
    if (rc) {
        audit_rec_clear(r);
        memset(r, 0, sizeof *r);
    }
    return rc;
}

/* Bytes read at once; a record longer than the cap is skipped to its
 * newline without being held. */
#define SPOOL_READ_BYTES (2 * LIM_AUDIT_SPOOL_RECORD_BYTES)

int auditspool_read(int fd, int (*fn)(void *ctx, struct audit_rec *r), void *ctx, size_t *skipped)
{
    char *buf = xmalloc(SPOOL_READ_BYTES);
    size_t have = 0;  /* bytes of buf holding the current line's start */
    int overlong = 0; /* the current line passed the cap: skip to its newline */
    off_t off = 0;
    int rc = 0;
    for (;;) {
        ssize_t got = pread(fd, buf + have, SPOOL_READ_BYTES - have, off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            rc = E_INTERNAL;
            break;
        }
        if (got == 0) {
            if (have || overlong)
                (*skipped)++; /* a torn last line: its write() never returned */
            break;
        }
        off += got;
        size_t end = have + (size_t)got, start = 0;
        for (;;) {
            char *nl = memchr(buf + start, '\n', end - start);
            if (!nl)
                break;
            size_t len = (size_t)(nl - (buf + start));
            struct audit_rec r;
            if (overlong || auditspool_parse(buf + start, len, &r) != 0)
                (*skipped)++;
            else if ((rc = fn(ctx, &r)) != 0)
                goto out;
            overlong = 0;
            start += len + 1;
        }
        have = end - start;
        if (have > LIM_AUDIT_SPOOL_RECORD_BYTES) {
            overlong = 1;
            have = 0;
        } else {
            memmove(buf, buf + start, have);
        }
    }
out:
    xfree(buf);
    return rc;
}
