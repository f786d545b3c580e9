/*
 * multipart: a parser of multipart/form-data bodies (RFC 7578 over RFC 2046),
 * for the file upload routes.
 *
 * The body is buffered whole by the HTTP layer (at most LIM_UPLOAD_BYTES), so
 * the parser works in place: each part's bytes point into the body, only the
 * names taken from its headers are copied. It is strict where leniency would
 * let two readers disagree about where a part ends: lines end with CRLF,
 * header folding (obsolete since RFC 7230) is refused, a body without its
 * closing delimiter is refused. Bytes before the first delimiter (the
 * preamble) and after the closing one (the epilogue) are ignored, as RFC 2046
 * says.
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

#endif
