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

/* Whether a delimiter "--boundary" ending at body[at] is a real delimiter
 * line: followed by "--" (the closing one) or by optional transport padding
 * (at most LIM_MULTIPART_PADDING blanks) and CRLF: 1. Anything else means
 * the boundary text occurs inside a part: 0. -1 when the bytes up to len do
 * not tell yet (more of a streamed body will); with `final` they are all
 * there is, and that is 0. */
static int delim_tail(const char *body, size_t len, size_t at, int final)
{
    int more = final ? 0 : -1;
    if (at < len && body[at] == '-')
        return len - at < 2 ? more : body[at + 1] == '-';
    size_t pad = 0;
    while (at < len && is_ws(body[at])) {
        if (++pad > LIM_MULTIPART_PADDING)
            return 0;
        at++;
    }
    if (at == len)
        return more;
    if (body[at] != '\r')
        return 0;
    return at + 1 == len ? more : body[at + 1] == '\n';
}

static int delim_line_ok(const char *body, size_t len, size_t at)
{
    return delim_tail(body, len, at, 1) == 1;
}

/* RFC 2046 bchars: what a boundary may hold (a space only inside). */
static int is_bchar(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("'()+_,-./:=? ", c) != NULL);
}

/* The boundary of a delimiter line "--boundary" CRLF that opens the body,
 * when it is not the one Content-Type names. The pinned client's routed
 * requests (SESSION_API.md 0.2: newer clients' direct routing) keep the
 * Content-Type of a form they encoded once and send the form encoded again,
 * with a fresh boundary; the body's own opening delimiter is then the only
 * one there is. Returns 1 with the boundary in out (MP_BOUNDARY_MAX + 1
 * bytes), 0 when the body does not open with such a line, -1 when the bytes
 * up to n do not tell yet (never with `final`). */
static int opening_boundary(const char *b, size_t n, int final, char *out)
{
    size_t i = 0;
    for (; i < n && i < 2; i++)
        if (b[i] != '-')
            return 0;
    while (i < n && i - 2 <= MP_BOUNDARY_MAX && is_bchar(b[i]))
        i++;
    if (i - 2 > MP_BOUNDARY_MAX)
        return 0;
    if (i == n || (b[i] == '\r' && i + 1 == n))
        return final ? 0 : -1;
    if (i == 2 || b[i] != '\r' || b[i + 1] != '\n' || b[i - 1] == ' ')
        return 0;
    memcpy(out, b + 2, i - 2);
    out[i - 2] = '\0';
    return 1;
}

/* Looks for the next "\r\n--boundary" delimiter (dl, dlen bytes) at or
 * after from: 1 with its offset in *at, -1 with *at when one may start there
 * but its line is not all in the bytes yet (delim_tail), 0 when none. */
static int find_delim_in(const char *body, size_t len, size_t from, const char *dl, size_t dlen,
                         int final, size_t *at)
{
    while (from < len) {
        const char *hit = memmem(body + from, len - from, dl, dlen);
        if (hit == NULL)
            return 0;
        size_t h = (size_t)(hit - body);
        int ok = delim_tail(body, len, h + dlen, final);
        if (ok != 0) {
            *at = h;
            return ok;
        }
        from = h + 1;
    }
    return 0;
}

/* Offset of the next "\r\n--boundary" delimiter at or after from, or
 * (size_t)-1. */
static size_t find_delim(const char *body, size_t len, size_t from, const char *dl, size_t dlen)
{
    size_t at;
    return find_delim_in(body, len, from, dl, dlen, 1, &at) == 1 ? at : (size_t)-1;
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
 * delimiter line) up to and including the blank line. `cut`: the bytes stop
 * past LIM_MULTIPART_HEADER_BYTES without a blank line and more follow (a
 * streamed body), so a line without its end is one past the cap. */
static int parse_headers(const char *body, size_t len, size_t *pos, struct mp_part *p, size_t idx,
                         int cut, struct err *e)
{
    size_t i = *pos, start = *pos;
    int have_cd = 0;
    for (;;) {
        const char *eol = memmem(body + i, len - i, "\r\n", 2);
        if (eol == NULL || (size_t)(eol - body) - start > LIM_MULTIPART_HEADER_BYTES)
            return err_set(e, E_INVALID, "bad_request",
                           eol == NULL && !cut
                               ? "multipart part %zu: headers do not end with a blank line"
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
    char own[MP_BOUNDARY_MAX + 1];
    if (len >= dlen - 2 && memcmp(body, dl + 2, dlen - 2) == 0 &&
        delim_line_ok(body, len, dlen - 2)) {
        pos = dlen - 2;
    } else if (opening_boundary(body, len, 1, own) == 1) {
        blen = strlen(own);
        dlen = blen + 4;
        memcpy(dl + 4, own, blen);
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
        rc = parse_headers(body, len, &pos, p, out->n - 1, 0, e);
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

/* ---- streamed ---- */

/* Where a streamed parse is: before the first delimiter (START: the body
 * may open with it; PREAMBLE: looking for it), just past an accepted
 * "--boundary" (AFTER), in a part's header block (HEADERS) or its data
 * (DATA), past the closing delimiter (DONE: the epilogue is dropped), or
 * stopped by a failure (FAILED). */
enum mps_state { MPS_START, MPS_PREAMBLE, MPS_AFTER, MPS_HEADERS, MPS_DATA, MPS_DONE, MPS_FAILED };

/* The window holds what may still be a delimiter or a header block: at most
 * a header block's cap, or a delimiter with its padding. */
_Static_assert(LIM_MULTIPART_WINDOW >
                   LIM_MULTIPART_HEADER_BYTES + MP_BOUNDARY_MAX + LIM_MULTIPART_PADDING + 8,
               "the multipart window holds a whole header block and a whole delimiter");

struct mp_stream {
    struct mp_sink sink;
    enum mps_state st;
    int rc; /* FAILED's code */
    char boundary[MP_BOUNDARY_MAX + 1];
    char dl[MP_BOUNDARY_MAX + 5]; /* "\r\n--boundary" */
    size_t dlen;
    size_t nparts;       /* parts begun */
    struct mp_part part; /* the current part's names */
    char *win;           /* LIM_MULTIPART_WINDOW bytes not yet taken */
    size_t n;
};

int multipart_stream_new(const char *content_type, const struct mp_sink *sink,
                         struct mp_stream **out, struct err *e)
{
    *out = NULL;
    char boundary[MP_BOUNDARY_MAX + 1];
    int rc = boundary_of(content_type, boundary, sizeof boundary, e);
    if (rc < 0)
        return rc;
    struct mp_stream *s = xcalloc(1, sizeof *s);
    s->sink = *sink;
    s->st = MPS_START;
    size_t blen = strlen(boundary);
    memcpy(s->boundary, boundary, blen + 1);
    memcpy(s->dl, "\r\n--", 4);
    memcpy(s->dl + 4, boundary, blen);
    s->dlen = blen + 4;
    s->win = xmalloc(LIM_MULTIPART_WINDOW);
    *out = s;
    return 0;
}

static int mps_fail(struct mp_stream *s, int rc)
{
    s->st = MPS_FAILED;
    s->rc = rc;
    return rc;
}

static void mps_take(struct mp_stream *s, size_t k)
{
    memmove(s->win, s->win + k, s->n - k);
    s->n -= k;
}

/* Takes what the window's bytes decide, calling the sink. Returns 0 when it
 * needs more bytes (or, `final`, when the bytes are all taken), or the
 * failure. */
static int mps_step(struct mp_stream *s, int final, struct err *e)
{
    for (;;) {
        const char *b = s->win;
        size_t n = s->n, at;
        int r, rc;
        switch (s->st) {
        case MPS_START: {
            /* The body may open with "--boundary", without its CRLF. */
            size_t want = s->dlen - 2;
            if (memcmp(b, s->dl + 2, n < want ? n : want) != 0 || (n < want && final))
                r = 0;
            else if (n < want || (r = delim_tail(b, n, want, final)) < 0)
                return 0;
            if (r == 0) {
                /* Not Content-Type's delimiter: the body's own, if it
                 * opens with one (opening_boundary), else a preamble. */
                char own[MP_BOUNDARY_MAX + 1];
                if ((r = opening_boundary(b, n, final, own)) < 0)
                    return 0;
                if (r == 0) {
                    s->st = MPS_PREAMBLE;
                    continue;
                }
                size_t blen = strlen(own);
                memcpy(s->boundary, own, blen + 1);
                memcpy(s->dl + 4, own, blen);
                s->dlen = blen + 4;
                want = s->dlen - 2;
            }
            mps_take(s, want);
            s->st = MPS_AFTER;
            continue;
        }
        case MPS_PREAMBLE:
            r = find_delim_in(b, n, 0, s->dl, s->dlen, final, &at);
            if (r == 1) {
                mps_take(s, at + s->dlen);
                s->st = MPS_AFTER;
                continue;
            }
            if (r < 0)
                mps_take(s, at);
            else if (n >= s->dlen)
                mps_take(s, n - (s->dlen - 1));
            return 0;
        case MPS_AFTER: {
            /* delim_tail accepted what follows: "--" or padding and CRLF. */
            if (b[0] == '-') {
                s->st = MPS_DONE;
                s->n = 0;
                return 0;
            }
            size_t i = 0;
            while (is_ws(b[i]))
                i++;
            mps_take(s, i + 2);
            if (s->nparts == LIM_MULTIPART_PARTS)
                return mps_fail(s, err_set(e, E_INVALID, "bad_request",
                                           "multipart body has more than %d parts",
                                           LIM_MULTIPART_PARTS));
            s->nparts++;
            s->st = MPS_HEADERS;
            continue;
        }
        case MPS_HEADERS: {
            /* The block up to and including its blank line, parsed whole as
             * the buffered parser does; past the cap it cannot end well. */
            size_t blk = 0;
            const char *t;
            if (n >= 2 && b[0] == '\r' && b[1] == '\n')
                blk = 2;
            else if ((t = memmem(b, n, "\r\n\r\n", 4)) != NULL)
                blk = (size_t)(t - b) + 4;
            if (blk == 0 && !final && n <= LIM_MULTIPART_HEADER_BYTES + 2)
                return 0;
            size_t pos = 0;
            part_clear(&s->part);
            rc = parse_headers(b, blk ? blk : n, &pos, &s->part, s->nparts - 1, blk == 0 && !final,
                               e);
            if (rc < 0)
                return mps_fail(s, rc);
            if ((rc = s->sink.part_begin(s->sink.ctx, &s->part, e)) != 0)
                return mps_fail(s, rc);
            mps_take(s, pos);
            s->st = MPS_DATA;
            continue;
        }
        case MPS_DATA: {
            /* Bytes that cannot be the start of a delimiter are the part's. */
            r = find_delim_in(b, n, 0, s->dl, s->dlen, final, &at);
            size_t data = r != 0 ? at : n >= s->dlen ? n - (s->dlen - 1) : 0;
            if (r == 0 && final)
                return 0; /* the part never ends: multipart_stream_end says so */
            if (data > 0 && (rc = s->sink.part_data(s->sink.ctx, b, data, e)) != 0)
                return mps_fail(s, rc);
            if (r != 1) {
                mps_take(s, data);
                return 0;
            }
            if ((rc = s->sink.part_end(s->sink.ctx, e)) != 0)
                return mps_fail(s, rc);
            mps_take(s, at + s->dlen);
            s->st = MPS_AFTER;
            continue;
        }
        case MPS_DONE:
            s->n = 0;
            return 0;
        case MPS_FAILED:
            return s->rc;
        }
    }
}

int multipart_stream_feed(struct mp_stream *s, const char *data, size_t len, struct err *e)
{
    while (len > 0 && s->st != MPS_DONE && s->st != MPS_FAILED) {
        size_t k = LIM_MULTIPART_WINDOW - s->n;
        if (k > len)
            k = len;
        memcpy(s->win + s->n, data, k);
        s->n += k;
        data += k;
        len -= k;
        int rc = mps_step(s, 0, e);
        if (rc)
            return rc;
        if (s->n == LIM_MULTIPART_WINDOW) /* the assertion above rules it out */
            return mps_fail(s, err_set(e, E_INTERNAL, "internal", "multipart window full"));
    }
    return s->st == MPS_FAILED ? s->rc : 0;
}

int multipart_stream_end(struct mp_stream *s, struct err *e)
{
    int rc = mps_step(s, 1, e);
    if (rc)
        return rc;
    switch (s->st) {
    case MPS_DONE:
        return 0;
    case MPS_DATA:
        return mps_fail(s, err_set(e, E_INVALID, "bad_request",
                                   "multipart part %zu is not followed by a delimiter: the body "
                                   "must end with '--%s--'",
                                   s->nparts - 1, s->boundary));
    default:
        return mps_fail(s, err_set(e, E_INVALID, "bad_request",
                                   "multipart body has no delimiter line '--%s' (boundary from "
                                   "Content-Type)",
                                   s->boundary));
    }
}

void multipart_stream_free(struct mp_stream *s)
{
    if (s == NULL)
        return;
    part_clear(&s->part);
    xfree(s->win);
    xfree(s);
}
