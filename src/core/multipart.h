/*
 * multipart: a parser of multipart/form-data bodies (RFC 7578 over RFC 2046),
 * for the file upload routes.
 *
 * multipart_parse takes a body buffered whole by the HTTP layer (at most
 * LIM_UPLOAD_BYTES) and works in place: each part's bytes point into the
 * body, only the names taken from its headers are copied. multipart_stream_*
 * takes a streamed body piece by piece and hands the parts' bytes on as it
 * finds them. Both are strict where leniency would let two readers disagree
 * about where a part ends: lines end with CRLF, header folding (obsolete
 * since RFC 7230) is refused, a body without its closing delimiter is
 * refused. Bytes before the first delimiter (the preamble) and after the
 * closing one (the epilogue) are ignored, as RFC 2046 says.
 */
#ifndef BD_CORE_MULTIPART_H
#define BD_CORE_MULTIPART_H

#include <stddef.h>

#include "core/err.h"

struct mp_part {
    char *name;         /* form field name from Content-Disposition (owned) */
    char *filename;     /* NULL when the part has none (owned) */
    char *content_type; /* NULL when absent (owned) */
    const char *data;   /* the part's bytes, pointing into the parsed body (borrowed) */
    size_t len;
};
struct mp_form {
    struct mp_part *parts;
    size_t n;
};

/* Parses body (len bytes) as multipart/form-data, the boundary taken from the
 * Content-Type header value content_type (NULL counts as absent). On success
 * out owns its parts (free with multipart_free) and borrows body, which must
 * outlive it. Fails with E_INVALID and a message a client can act on when the
 * content type is not multipart/form-data with a boundary, or the body is
 * malformed; at most LIM_MULTIPART_PARTS parts. On failure out is empty. */
int multipart_parse(const char *content_type, const char *body, size_t len, struct mp_form *out,
                    struct err *e) WUR;

/* The first part named name, or NULL. */
const struct mp_part *multipart_find(const struct mp_form *f, const char *name);

/* Frees what f owns and empties it; accepts an empty form. */
void multipart_free(struct mp_form *f);

/* ---- the same parser fed as a streamed body arrives ---- */

/* What a streamed parse reports, in body order: part_begin once a part's
 * headers are parsed (its name, filename and content type; data NULL;
 * borrowed for the call), part_data for each run of its bytes as they are
 * known to be data (any number of runs, none empty; borrowed for the call),
 * part_end once its delimiter was seen. A callback returns 0, or a negative
 * E_* code with e filled: the parse stops there with that code. */
struct mp_sink {
    int (*part_begin)(void *ctx, const struct mp_part *p, struct err *e);
    int (*part_data)(void *ctx, const char *data, size_t len, struct err *e);
    int (*part_end)(void *ctx, struct err *e);
    void *ctx;
};

/* A parse of one body fed in pieces that may split anything (a delimiter,
 * a header line). It holds at most LIM_MULTIPART_WINDOW bytes: a part's
 * data goes to the sink as it comes, less the few bytes that may still be
 * the start of a delimiter. It accepts and refuses what multipart_parse
 * does, with the same messages, but reports a failure as soon as it is
 * certain: a header block past LIM_MULTIPART_HEADER_BYTES is refused
 * without waiting for its end ("headers exceed 8 KiB", where a whole body
 * with no line end left at all would read "headers do not end with a blank
 * line"). */
struct mp_stream;

/* Starts a parse; the boundary comes from the Content-Type value (which
 * need not outlive the call); sink is copied. Fails as multipart_parse does
 * for a bad content type, *out NULL. */
int multipart_stream_new(const char *content_type, const struct mp_sink *sink,
                         struct mp_stream **out, struct err *e) WUR;
/* Feeds the next len bytes. 0, or the failure (a malformed body or a
 * sink's code, e filled the first time): every later call returns it. */
int multipart_stream_feed(struct mp_stream *s, const char *data, size_t len, struct err *e) WUR;
/* The body ended: 0 when the closing delimiter was seen, else the failure
 * (a part without its delimiter, no delimiter at all). */
int multipart_stream_end(struct mp_stream *s, struct err *e) WUR;
/* Frees s; NULL is a no-op. */
void multipart_stream_free(struct mp_stream *s);

#endif
