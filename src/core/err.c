#include "core/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void err_init(struct err *e)
{
    e->rc = 0;
    e->code[0] = '\0';
    e->message[0] = '\0';
    e->ndetails = 0;
    e->nmore = 0;
    e->retry_after = 0;
}

int err_set(struct err *e, int rc, const char *code, const char *fmt, ...)
{
    va_list ap;
    e->rc = rc;
    snprintf(e->code, sizeof e->code, "%s", code);
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return rc;
}

static void add_detail(struct err *e, const char *code, const char *prefix, const char *fmt,
                       va_list ap) __attribute__((format(printf, 4, 0)));
static void add_detail(struct err *e, const char *code, const char *prefix, const char *fmt,
                       va_list ap)
{
    if (e->ndetails >= sizeof e->details / sizeof e->details[0]) {
        e->nmore++;
        return;
    }
    struct err_detail *d = &e->details[e->ndetails++];
    snprintf(d->code, sizeof d->code, "%s", code);
    size_t off = 0;
    if (prefix && *prefix) {
        int n = snprintf(d->message, sizeof d->message, "%s: ", prefix);
        off = n < 0 ? 0 : ((size_t)n >= sizeof d->message ? sizeof d->message - 1 : (size_t)n);
    }
    vsnprintf(d->message + off, sizeof d->message - off, fmt, ap);
}

/* snprintf that truncates on purpose: messages are bounded by design. */
static void fmt_trunc(char *dst, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fmt_trunc(char *dst, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, cap, fmt, ap);
    va_end(ap);
}

int err_field(struct err *e, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_detail(e, "invalid_input", path, fmt, ap);
    va_end(ap);
    e->rc = E_INVALID;
    snprintf(e->code, sizeof e->code, "bad_request");
    size_t total = e->ndetails + e->nmore;
    if (total == 1)
        fmt_trunc(e->message, sizeof e->message, "%s", e->details[0].message);
    else
        fmt_trunc(e->message, sizeof e->message, "%zu problems in the request; first: %s", total,
                  e->details[0].message);
    return E_INVALID;
}

int err_has_fields(const struct err *e)
{
    return e->rc == E_INVALID && (e->ndetails > 0 || e->nmore > 0);
}

static struct {
    const char *path, *as;
} hidden[ERR_HIDDEN_MAX];
static int nhidden;

void err_hide_path(const char *path, const char *as)
{
    if (nhidden < ERR_HIDDEN_MAX && path && strlen(path) > 1) {
        hidden[nhidden].path = path;
        hidden[nhidden++].as = as;
    }
}

void err_scrub_text(char *text, size_t cap)
{
    char out[ERR_MSG_MAX];
    if (cap > sizeof out)
        cap = sizeof out;
    for (int i = 0; i < nhidden; i++) {
        const char *path = hidden[i].path;
        size_t pl = strlen(path), o = 0;
        if (!strstr(text, path))
            continue;
        for (const char *p = text; *p && o + 1 < cap;) {
            if (strncmp(p, path, pl) == 0) {
                for (const char *a = hidden[i].as; *a && o + 1 < cap; a++)
                    out[o++] = *a;
                p += pl;
            } else {
                out[o++] = *p++;
            }
        }
        out[o] = '\0';
        memcpy(text, out, o + 1);
    }
}

void err_detail(struct err *e, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_detail(e, code, NULL, fmt, ap);
    va_end(ap);
}
