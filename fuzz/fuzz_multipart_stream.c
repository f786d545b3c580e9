/* libFuzzer target for core/multipart's streamed parser: arbitrary bytes as
 * an upload body fed in pieces. The first byte picks the piece size, the
 * first line after it is the Content-Type value, the rest the body.
 * Invariants: the streamed parse accepts exactly what multipart_parse
 * accepts and reports the same parts (names, filenames, types, bytes);
 * every failure is E_INVALID with a message; the sink sees begin, data,
 * end in order and never an empty run. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/limits.h"
#include "core/multipart.h"
#include "core/xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
    const struct mp_form *f; /* the buffered parse's parts, or empty */
    size_t part;             /* parts begun */
    size_t got;              /* bytes of the current part */
    int in_part;
    int differs;
};

static int same(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

static int s_begin(void *ctx, const struct mp_part *p, struct err *e)
{
    (void)e;
    struct seen *s = ctx;
    if (s->in_part)
        abort();
    s->in_part = 1;
    s->got = 0;
    if (s->part < s->f->n) {
        const struct mp_part *q = &s->f->parts[s->part];
        if (!same(p->name, q->name) || !same(p->filename, q->filename) ||
            !same(p->content_type, q->content_type))
            s->differs = 1;
    }
    s->part++;
    return 0;
}

static int s_data(void *ctx, const char *d, size_t len, struct err *e)
{
    (void)e;
    struct seen *s = ctx;
    if (!s->in_part || len == 0)
        abort();
    if (s->part <= s->f->n) {
        const struct mp_part *q = &s->f->parts[s->part - 1];
        if (s->got + len > q->len || memcmp(q->data + s->got, d, len) != 0)
            s->differs = 1;
    }
    s->got += len;
    return 0;
}

static int s_end(void *ctx, struct err *e)
{
    (void)e;
    struct seen *s = ctx;
    if (!s->in_part)
        abort();
    s->in_part = 0;
    if (s->part <= s->f->n && s->got != s->f->parts[s->part - 1].len)
        s->differs = 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t piece = (size_t)data[0] + 1;
    data++;
    size--;
    const uint8_t *nl = memchr(data, '\n', size);
    size_t ctl = nl ? (size_t)(nl - data) : 0;
    char *ct = xstrndup((const char *)data, ctl);
    size_t blen = nl ? size - ctl - 1 : size;
    char *body = xmalloc(blen + 1);
    memcpy(body, nl ? nl + 1 : data, blen);

    struct mp_form f;
    struct err e1, e2;
    err_init(&e1);
    err_init(&e2);
    int rc1 = multipart_parse(ct, body, blen, &f, &e1);

    struct seen s = {&f, 0, 0, 0, 0};
    struct mp_sink sink = {s_begin, s_data, s_end, &s};
    struct mp_stream *st;
    int rc2 = multipart_stream_new(ct, &sink, &st, &e2);
    for (size_t at = 0; rc2 == 0 && at < blen; at += piece)
        rc2 = multipart_stream_feed(st, body + at, blen - at < piece ? blen - at : piece, &e2);
    if (rc2 == 0)
        rc2 = multipart_stream_end(st, &e2);
    multipart_stream_free(st);

    if (rc2 != 0 && (rc2 != E_INVALID || e2.message[0] == '\0'))
        abort();
    if ((rc1 == 0) != (rc2 == 0))
        abort();
    if (rc1 == 0 && (s.differs || s.part != f.n || s.in_part))
        abort();
    multipart_free(&f);
    xfree(body);
    xfree(ct);
    return 0;
}
