#include "core/multipart.h"

#include <string.h>
#include <strings.h>

#include "core/limits.h"
#include "core/xalloc.h"

/* RFC 2046 section 5.1.1: 1 to 70 characters. */
#define MP_BOUNDARY_MAX 70

struct cursor {
    const char *s;
    size_t n, i;
};

static int is_ws(char c)
{
    return c == ' ' || c == '\t';
}

/* RFC 7230 tchar: what a parameter name or an unquoted value may hold. */
static int is_tchar(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static void skip_ws(struct cursor *c)
{
    while (c->i < c->n && is_ws(c->s[c->i]))
        c->i++;
}

/* Reads one parameter `; name=value` (value a token or a quoted string with
 * backslash escapes) into an owned name and value. Returns 1 when one was
 * read, 0 at the end of the input, -1 when malformed. */
static int next_param(struct cursor *c, char **name, char **value)
{
    skip_ws(c);
    if (c->i == c->n)
        return 0;
    if (c->s[c->i] != ';')
        return -1;
    c->i++;
    skip_ws(c);
    if (c->i == c->n)
        return 0; /* a trailing ';' is harmless */
    size_t start = c->i;
    while (c->i < c->n && is_tchar(c->s[c->i]))
        c->i++;
    if (c->i == start || c->i == c->n || c->s[c->i] != '=')
        return -1;
    size_t nlen = c->i - start;
    c->i++;
    char *v;
    if (c->i < c->n && c->s[c->i] == '"') {
        c->i++;
        v = xmalloc(c->n - c->i + 1);
        size_t vl = 0;
        for (;;) {
            if (c->i == c->n) {
                xfree(v);
                return -1; /* unterminated quoted string */
            }
            char ch = c->s[c->i++];
            if (ch == '"')
                break;
            if (ch == '\\' && c->i < c->n)
                ch = c->s[c->i++];
            if (ch == '\0' || ch == '\r' || ch == '\n') {
                xfree(v);
                return -1;
            }
            v[vl++] = ch;
        }
        v[vl] = '\0';
    } else {
        size_t vs = c->i;
        while (c->i < c->n && is_tchar(c->s[c->i]))
            c->i++;
        if (c->i == vs)
            return -1;
        v = xstrndup(c->s + vs, c->i - vs);
    }
    *name = xstrndup(c->s + start, nlen);
    *value = v;
    return 1;
}

/* Takes the boundary out of a Content-Type value. */
static int boundary_of(const char *ct, char *out, size_t cap, struct err *e)
{
    static const char type[] = "multipart/form-data";
    if (ct == NULL)
        return err_set(e, E_INVALID, "bad_request",
                       "the request needs Content-Type: multipart/form-data; boundary=...");
    struct cursor c = {ct, strlen(ct), 0};
    skip_ws(&c);
    if (c.n - c.i < sizeof type - 1 || strncasecmp(ct + c.i, type, sizeof type - 1) != 0)
        return err_set(e, E_INVALID, "bad_request",
                       "Content-Type must be multipart/form-data (got '%.64s')", ct);
    c.i += sizeof type - 1;
    int found = 0, r;
    char *name, *value;
    while ((r = next_param(&c, &name, &value)) == 1) {
        if (strcasecmp(name, "boundary") == 0) {
            size_t bl = strlen(value);
            int ok = bl >= 1 && bl <= MP_BOUNDARY_MAX && bl < cap && value[bl - 1] != ' ';
            for (size_t k = 0; ok && k < bl; k++)
                ok = value[k] >= 0x20 && value[k] < 0x7f;
            if (ok) {
                memcpy(out, value, bl + 1);
                found = 1;
            }
            xfree(name);
            xfree(value);
            if (!ok)
                return err_set(e, E_INVALID, "bad_request",
                               "Content-Type boundary must be 1 to 70 printable characters "
                               "not ending in a space (RFC 2046)");
            continue;
        }
        xfree(name);
        xfree(value);
    }
    if (r < 0)
        return err_set(e, E_INVALID, "bad_request",
                       "Content-Type parameters are malformed (want '; name=value')");
    if (!found)
        return err_set(e, E_INVALID, "bad_request",
                       "Content-Type multipart/form-data needs a boundary parameter");
    return 0;
}

/* True when a delimiter "--boundary" ending at body[at] is a real delimiter
 * line: followed by "--" (the closing one) or by optional transport padding
 * and CRLF. Anything else means the boundary text occurs inside a part. */
static int delim_line_ok(const char *body, size_t len, size_t at)
{
    if (len - at >= 2 && body[at] == '-' && body[at + 1] == '-')
        return 1;
    while (at < len && is_ws(body[at]))
        at++;
    return len - at >= 2 && body[at] == '\r' && body[at + 1] == '\n';
}

/* Offset of the next "\r\n--boundary" delimiter at or after from, or
 * (size_t)-1. */
static size_t find_delim(const char *body, size_t len, size_t from, const char *dl, size_t dlen)
{
    while (from < len) {
        const char *hit = memmem(body + from, len - from, dl, dlen);
        if (hit == NULL)
            return (size_t)-1;
        size_t at = (size_t)(hit - body);
        if (delim_line_ok(body, len, at + dlen))
            return at;
        from = at + 1;
    }
    return (size_t)-1;
}

/* Parses a Content-Disposition value: form-data with a name. */
static int parse_disposition(const char *v, size_t vl, struct mp_part *p, size_t idx, struct err *e)
{
    static const char fd[] = "form-data";
    struct cursor c = {v, vl, 0};
    if (vl < sizeof fd - 1 || strncasecmp(v, fd, sizeof fd - 1) != 0)
        return err_set(e, E_INVALID, "bad_request",
                       "multipart part %zu: Content-Disposition must be form-data", idx);
    c.i = sizeof fd - 1;
    int r;
    char *name, *value;
    while ((r = next_param(&c, &name, &value)) == 1) {
        if (strcasecmp(name, "name") == 0 && p->name == NULL) {
            p->name = value;
            value = NULL;
        } else if (strcasecmp(name, "filename") == 0 && p->filename == NULL) {
            p->filename = value;
            value = NULL;
        }
        xfree(name);
        xfree(value);
    }
    if (r < 0)
        return err_set(e, E_INVALID, "bad_request",
                       "multipart part %zu: Content-Disposition parameters are malformed", idx);
    if (p->name == NULL)
        return err_set(e, E_INVALID, "bad_request",
                       "multipart part %zu: Content-Disposition has no name", idx);
    return 0;
}

/* Parses the header lines of part idx starting at *pos (just after its
 * delimiter line) up to and including the blank line. */
static int parse_headers(const char *body, size_t len, size_t *pos, struct mp_part *p, size_t idx,
                         struct err *e)
{
    size_t i = *pos, start = *pos;
    int have_cd = 0;
    for (;;) {
        const char *eol = memmem(body + i, len - i, "\r\n", 2);
        if (eol == NULL || (size_t)(eol - body) - start > LIM_MULTIPART_HEADER_BYTES)
            return err_set(e, E_INVALID, "bad_request",
                           eol == NULL ? "multipart part %zu: headers do not end with a blank line"
                                       : "multipart part %zu: headers exceed 8 KiB",
                           idx);
        size_t end = (size_t)(eol - body);
        if (end == i) {
            *pos = end + 2;
            break;
        }
        /* A continuation line is checked before the line it continues is
         * used, so a folded header never counts as seen. */
        if (is_ws(body[i]) || (end + 2 < len && is_ws(body[end + 2])))
            return err_set(e, E_INVALID, "bad_request",
                           "multipart part %zu: folded header lines are not accepted", idx);
        const char *colon = memchr(body + i, ':', end - i);
        if (colon == NULL || colon == body + i)
            return err_set(e, E_INVALID, "bad_request",
                           "multipart part %zu: header line without 'Name:'", idx);
        size_t nl = (size_t)(colon - (body + i));
        for (size_t k = 0; k < nl; k++)
            if (!is_tchar(body[i + k]))
                return err_set(e, E_INVALID, "bad_request",
                               "multipart part %zu: malformed header name", idx);
        size_t vs = (size_t)(colon - body) + 1, ve = end;
        for (size_t k = vs; k < ve; k++)
            if ((unsigned char)body[k] < 0x20 && body[k] != '\t')
                return err_set(e, E_INVALID, "bad_request",
                               "multipart part %zu: control character in a header", idx);
        while (vs < ve && is_ws(body[vs]))
            vs++;
        while (ve > vs && is_ws(body[ve - 1]))
            ve--;
        if (nl == 19 && strncasecmp(body + i, "Content-Disposition", nl) == 0) {
            if (have_cd++)
                return err_set(e, E_INVALID, "bad_request",
                               "multipart part %zu: more than one Content-Disposition", idx);
            int rc = parse_disposition(body + vs, ve - vs, p, idx, e);
            if (rc < 0)
                return rc;
        } else if (nl == 12 && strncasecmp(body + i, "Content-Type", nl) == 0) {
            xfree(p->content_type);
            p->content_type = xstrndup(body + vs, ve - vs);
        }
        i = end + 2;
    }
    if (!have_cd)
        return err_set(e, E_INVALID, "bad_request",
                       "multipart part %zu: no Content-Disposition header", idx);
    return 0;
}

static void part_clear(struct mp_part *p)
{
    xfree(p->name);
    xfree(p->filename);
    xfree(p->content_type);
    memset(p, 0, sizeof *p);
}

int multipart_parse(const char *content_type, const char *body, size_t len, struct mp_form *out,
                    struct err *e)
{
    memset(out, 0, sizeof *out);
    char boundary[MP_BOUNDARY_MAX + 1];
    int rc = boundary_of(content_type, boundary, sizeof boundary, e);
    if (rc < 0)
        return rc;
    /* dl is "\r\n--boundary"; the first delimiter may also open the body. */
    char dl[MP_BOUNDARY_MAX + 5];
    size_t blen = strlen(boundary), dlen = blen + 4;
    memcpy(dl, "\r\n--", 4);
    memcpy(dl + 4, boundary, blen);
    if (body == NULL) {
        body = "";
        len = 0;
    }
    size_t pos;
    if (len >= dlen - 2 && memcmp(body, dl + 2, dlen - 2) == 0 &&
        delim_line_ok(body, len, dlen - 2)) {
        pos = dlen - 2;
    } else {
        size_t at = find_delim(body, len, 0, dl, dlen);
        if (at == (size_t)-1)
            return err_set(e, E_INVALID, "bad_request",
                           "multipart body has no delimiter line '--%s' (boundary from "
                           "Content-Type)",
                           boundary);
        pos = at + dlen;
    }
    size_t cap = 0;
    for (;;) {
        /* pos is just past a "--boundary" that delim_line_ok accepted. */
        if (body[pos] == '-' && body[pos + 1] == '-')
            return 0; /* closing delimiter; the epilogue is ignored */
        while (is_ws(body[pos]))
            pos++;
        pos += 2;
        if (out->n == LIM_MULTIPART_PARTS) {
            rc = err_set(e, E_INVALID, "bad_request", "multipart body has more than %d parts",
                         LIM_MULTIPART_PARTS);
            break;
        }
        if (out->n == cap) {
            cap = cap ? cap * 2 : 8;
            out->parts = xrealloc(out->parts, cap * sizeof *out->parts);
        }
        struct mp_part *p = &out->parts[out->n++];
        memset(p, 0, sizeof *p);
        rc = parse_headers(body, len, &pos, p, out->n - 1, e);
        if (rc < 0)
            break;
        /* The CRLF before "--boundary" belongs to the delimiter, so an
         * empty part is its blank line followed at once by "\r\n--". */
        size_t at = find_delim(body, len, pos, dl, dlen);
        if (at == (size_t)-1) {
            rc = err_set(e, E_INVALID, "bad_request",
                         "multipart part %zu is not followed by a delimiter: the body must end "
                         "with '--%s--'",
                         out->n - 1, boundary);
            break;
        }
        p->data = body + pos;
        p->len = at - pos;
        pos = at + dlen;
    }
    multipart_free(out);
    return rc;
}

const struct mp_part *multipart_find(const struct mp_form *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->parts[i].name, name) == 0)
            return &f->parts[i];
    return NULL;
}

void multipart_free(struct mp_form *f)
{
    for (size_t i = 0; i < f->n; i++)
        part_clear(&f->parts[i]);
    xfree(f->parts);
    f->parts = NULL;
    f->n = 0;
}
