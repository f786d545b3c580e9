/* httpresp: HTTP/1.1 response head parsing and chunked decoding (see the header). */
#include <string.h>
#include <strings.h>

#include "core/httpresp.h"

/* RFC 9110 5.6.2 tchar. */
static int is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return 1;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* A byte allowed in a field value or reason phrase: visible ASCII, space,
 * tab, obs-text; no other control character. */
static int is_vchar(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

/* Parses one header line line[0..n) (without its line end) into f. */
static int parse_field(const char *line, size_t n, struct httpresp_field *f)
{
    size_t i = 0;
    while (i < n && is_tchar((unsigned char)line[i]))
        i++;
    if (i == 0 || i == n || line[i] != ':')
        return E_INVALID; /* empty name, no colon, or whitespace before it */
    f->name = line;
    f->name_len = i;
    size_t b = i + 1, e = n;
    while (b < e && (line[b] == ' ' || line[b] == '\t'))
        b++;
    while (e > b && (line[e - 1] == ' ' || line[e - 1] == '\t'))
        e--;
    for (size_t k = b; k < e; k++)
        if (!is_vchar((unsigned char)line[k]))
            return E_INVALID;
    f->value = line + b;
    f->value_len = e - b;
    return 0;
}

/* Parses the status line line[0..n). */
static int parse_status(const char *line, size_t n, struct httpresp_head *h)
{
    /* "HTTP/1.x" SP 3DIGIT [SP reason] */
    if (n < 12 || memcmp(line, "HTTP/1.", 7) != 0 || (line[7] != '0' && line[7] != '1') ||
        line[8] != ' ')
        return E_INVALID;
    const char *s = line + 9;
    if (s[0] < '1' || s[0] > '5' || s[1] < '0' || s[1] > '9' || s[2] < '0' || s[2] > '9')
        return E_INVALID;
    if (n > 12 && line[12] != ' ')
        return E_INVALID;
    for (size_t k = 13; k < n; k++)
        if (!is_vchar((unsigned char)line[k]))
            return E_INVALID;
    h->minor = line[7] - '0';
    h->status = (s[0] - '0') * 100 + (s[1] - '0') * 10 + (s[2] - '0');
    return 0;
}

int httpresp_parse_head(const char *buf, size_t len, struct httpresp_head *h)
{
    h->nfields = 0;
    h->head_len = 0;
    /* Fail early on what is not a response at all, rather than wait for
     * HTTPRESP_HEAD_MAX bytes of it. */
    static const char prefix[] = "HTTP/1.";
    for (size_t i = 0; i < len && i < sizeof prefix - 1; i++)
        if (buf[i] != prefix[i])
            return E_INVALID;
    size_t lim = len < HTTPRESP_HEAD_MAX ? len : HTTPRESP_HEAD_MAX;
    size_t start = 0;
    int first = 1;
    for (size_t i = 0; i < lim; i++) {
        if (buf[i] != '\n')
            continue;
        size_t n = i - start;
        if (n && buf[start + n - 1] == '\r')
            n--;
        const char *line = buf + start;
        if (memchr(line, '\r', n) || memchr(line, '\0', n))
            return E_INVALID;
        if (first) {
            if (parse_status(line, n, h) != 0)
                return E_INVALID;
            first = 0;
        } else if (n == 0) {
            h->head_len = i + 1;
            return 0;
        } else {
            if (line[0] == ' ' || line[0] == '\t')
                return E_INVALID; /* obsolete line folding */
            if (h->nfields == HTTPRESP_FIELDS_MAX)
                return E_INVALID;
            if (parse_field(line, n, &h->fields[h->nfields]) != 0)
                return E_INVALID;
            h->nfields++;
        }
        start = i + 1;
    }
    return len >= HTTPRESP_HEAD_MAX ? E_INVALID : 1;
}

static int name_is(const struct httpresp_field *f, const char *name)
{
    return strlen(name) == f->name_len && strncasecmp(f->name, name, f->name_len) == 0;
}

const struct httpresp_field *httpresp_field(const struct httpresp_head *h, const char *name)
{
    for (size_t i = 0; i < h->nfields; i++)
        if (name_is(&h->fields[i], name))
            return &h->fields[i];
    return NULL;
}

/* Calls fn for each element of the comma-separated lists of the fields
 * named name (trimmed, empty ones skipped); stops when fn returns nonzero
 * and returns that. */
static int each_element(const struct httpresp_head *h, const char *name,
                        int (*fn)(void *ctx, const char *s, size_t n), void *ctx)
{
    for (size_t i = 0; i < h->nfields; i++) {
        const struct httpresp_field *f = &h->fields[i];
        if (!name_is(f, name))
            continue;
        size_t b = 0;
        while (b <= f->value_len) {
            size_t e = b;
            while (e < f->value_len && f->value[e] != ',')
                e++;
            size_t s = b, t = e;
            while (s < t && (f->value[s] == ' ' || f->value[s] == '\t'))
                s++;
            while (t > s && (f->value[t - 1] == ' ' || f->value[t - 1] == '\t'))
                t--;
            if (t > s) {
                int r = fn(ctx, f->value + s, t - s);
                if (r)
                    return r;
            }
            b = e + 1;
        }
    }
    return 0;
}

static int hdr_token_eq(void *ctx, const char *s, size_t n)
{
    const char *token = ctx;
    return strlen(token) == n && strncasecmp(s, token, n) == 0;
}

int httpresp_has_token(const struct httpresp_head *h, const char *name, const char *token)
{
    return each_element(h, name, hdr_token_eq, (void *)token);
}

struct te_state {
    int n, chunked_last;
};

static int te_elem(void *ctx, const char *s, size_t n)
{
    struct te_state *t = ctx;
    t->n++;
    t->chunked_last = n == 7 && strncasecmp(s, "chunked", 7) == 0;
    return 0;
}

struct cl_state {
    int n, bad;
    uint64_t v;
};

static int cl_elem(void *ctx, const char *s, size_t n)
{
    struct cl_state *c = ctx;
    uint64_t v = 0;
    if (n > 18) {
        c->bad = 1;
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            c->bad = 1;
            return 1;
        }
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (c->n++ && v != c->v) {
        c->bad = 1;
        return 1;
    }
    c->v = v;
    return 0;
}

int httpresp_body_framing(const struct httpresp_head *h, int head_request, enum httpresp_body *kind,
                          uint64_t *length)
{
    *kind = HTTPRESP_BODY_NONE;
    *length = 0;
    if (head_request || h->status < 200 || h->status == 204 || h->status == 304)
        return 0;
    if (httpresp_field(h, "Transfer-Encoding")) {
        struct te_state t = {0, 0};
        (void)each_element(h, "Transfer-Encoding", te_elem, &t);
        if (t.n != 1 || !t.chunked_last)
            return E_INVALID;
        *kind = HTTPRESP_BODY_CHUNKED;
        return 0;
    }
    if (httpresp_field(h, "Content-Length")) {
        struct cl_state c = {0, 0, 0};
        (void)each_element(h, "Content-Length", cl_elem, &c);
        if (c.bad || c.n == 0)
            return E_INVALID;
        *kind = HTTPRESP_BODY_LENGTH;
        *length = c.v;
        return 0;
    }
    *kind = HTTPRESP_BODY_CLOSE;
    return 0;
}

/* ---- chunked bodies ---- */

enum {
    CS_SIZE,    /* hex digits of a chunk size */
    CS_EXT,     /* after the size: extensions up to CR */
    CS_SIZE_LF, /* the LF of the size line */
    CS_DATA,    /* chunk data */
    CS_DATA_CR, /* CRLF after the data */
    CS_DATA_LF,
    CS_TRAILER, /* start of a trailer line (or the final CRLF) */
    CS_TRAILER_LINE,
    CS_TRAILER_LF,
    CS_END_LF,
    CS_DONE,
    CS_FAILED,
};

void httpresp_chunked_init(struct httpresp_chunked *c)
{
    memset(c, 0, sizeof *c);
    c->state = CS_SIZE;
}

static int hexval(unsigned char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

int httpresp_chunked_decode(struct httpresp_chunked *c, char *buf, size_t len, size_t *consumed,
                            size_t *out_len)
{
    size_t i = 0, o = 0;
    int rc = 0;
    while (i < len && c->state != CS_DONE && c->state != CS_FAILED) {
        unsigned char ch = (unsigned char)buf[i];
        switch (c->state) {
        case CS_SIZE: {
            int v = hexval(ch);
            if (v >= 0) {
                if (++c->digits > 16) {
                    c->state = CS_FAILED;
                    break;
                }
                c->left = (c->left << 4) | (uint64_t)v;
                c->line++;
            } else if (c->digits && (ch == ';' || ch == ' ' || ch == '\t')) {
                c->state = CS_EXT;
                c->line++;
            } else if (c->digits && ch == '\r') {
                c->state = CS_SIZE_LF;
            } else {
                c->state = CS_FAILED;
                break;
            }
            i++;
            break;
        }
        case CS_EXT:
            if (ch == '\r')
                c->state = CS_SIZE_LF;
            else if (!is_vchar(ch) || ++c->line > HTTPRESP_CHUNK_LINE_MAX)
                c->state = CS_FAILED;
            i++;
            break;
        case CS_SIZE_LF:
            if (ch != '\n') {
                c->state = CS_FAILED;
                break;
            }
            i++;
            c->line = 0;
            c->digits = 0;
            c->state = c->left ? CS_DATA : CS_TRAILER;
            break;
        case CS_DATA: {
            size_t n = len - i;
            if ((uint64_t)n > c->left)
                n = (size_t)c->left;
            memmove(buf + o, buf + i, n);
            o += n;
            i += n;
            c->left -= n;
            if (!c->left)
                c->state = CS_DATA_CR;
            break;
        }
        case CS_DATA_CR:
            c->state = ch == '\r' ? CS_DATA_LF : CS_FAILED;
            i++;
            break;
        case CS_DATA_LF:
            c->state = ch == '\n' ? CS_SIZE : CS_FAILED;
            i++;
            break;
        case CS_TRAILER:
            if (ch == '\r') {
                c->state = CS_END_LF;
                i++;
                break;
            }
            c->state = CS_TRAILER_LINE;
            c->line = 0;
            /* The byte starts a trailer line. */
            __attribute__((fallthrough));
        case CS_TRAILER_LINE:
            if (ch == '\r')
                c->state = CS_TRAILER_LF;
            else if (!is_vchar(ch) || ++c->line > HTTPRESP_CHUNK_LINE_MAX ||
                     ++c->trailer > HTTPRESP_TRAILER_MAX)
                c->state = CS_FAILED;
            i++;
            break;
        case CS_TRAILER_LF:
            c->state = ch == '\n' ? CS_TRAILER : CS_FAILED;
            i++;
            break;
        case CS_END_LF:
            c->state = ch == '\n' ? CS_DONE : CS_FAILED;
            i++;
            break;
        default:
            c->state = CS_FAILED;
            break;
        }
    }
    if (c->state == CS_FAILED) {
        rc = E_INVALID;
        o = 0;
    } else if (c->state == CS_DONE) {
        rc = 1;
    }
    *consumed = i;
    *out_len = o;
    return rc;
}
