/*
 * httpresp: a pure parser of an HTTP/1.1 response: the head (status line
 * and header fields), the body's framing (RFC 9112 section 6.3) and a
 * chunked-body decoder. Every client of the server reads its answers with
 * it: the blocking client (proxy/httpc.h) and the forwarder of requests
 * between nodes (cluster/forward.c), which streams.
 *
 * The bytes are untrusted (a peer may be compromised, or not browserd at
 * all): every size is bounded by a constant below, a length read from the
 * peer is only ever counted down (never used to size a buffer), and no
 * function allocates. Fuzzed by fuzz/fuzz_httpresp.c.
 */
#ifndef BD_CORE_HTTPRESP_H
#define BD_CORE_HTTPRESP_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

/* Largest response head (status line, fields, blank line) accepted. */
#define HTTPRESP_HEAD_MAX (64u * 1024u)
/* Most header fields in one head. */
#define HTTPRESP_FIELDS_MAX 100
/* Longest chunk-size line (with its extensions), and most trailer bytes. */
#define HTTPRESP_CHUNK_LINE_MAX 4096u
#define HTTPRESP_TRAILER_MAX    (64u * 1024u)

/* One header field: pointers into the parsed buffer, not NUL-terminated;
 * the value without its leading and trailing whitespace. */
struct httpresp_field {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};

struct httpresp_head {
    int minor;       /* HTTP/1.<minor>: 0 or 1 */
    int status;      /* 100..599 */
    size_t head_len; /* bytes of the head, through its blank line */
    size_t nfields;  /* entries of fields[] used, in the order received */
    struct httpresp_field fields[HTTPRESP_FIELDS_MAX];
};

/* Parses the response head at the start of buf[0..len). Call it again with
 * more bytes (the same prefix, longer) while it returns 1. Returns 0 when the
 * head is complete (h filled; its fields point into buf), 1 when more bytes
 * are needed, E_INVALID when the bytes are not an HTTP/1.0 or 1.1 response
 * head, the head passes HTTPRESP_HEAD_MAX bytes or HTTPRESP_FIELDS_MAX fields,
 * or a field is malformed (a name that is not a token, whitespace before the
 * colon, control characters, obsolete line folding). Lines may end in CRLF or
 * a bare LF; a bare CR inside a line is refused. */
int httpresp_parse_head(const char *buf, size_t len, struct httpresp_head *h) WUR;

/* The first field named name (case-insensitive), or NULL. */
const struct httpresp_field *httpresp_field(const struct httpresp_head *h, const char *name);

/* 1 when one of the fields named name holds token (case-insensitive) in its
 * comma-separated list ("Connection: keep-alive, Upgrade" holds "upgrade"). */
int httpresp_has_token(const struct httpresp_head *h, const char *name, const char *token);

enum httpresp_body {
    HTTPRESP_BODY_NONE,    /* no body (HEAD, 1xx, 204, 304) */
    HTTPRESP_BODY_LENGTH,  /* exactly *length bytes */
    HTTPRESP_BODY_CHUNKED, /* decode with httpresp_chunked_decode */
    HTTPRESP_BODY_CLOSE,   /* every byte until the peer closes */
};

/* How the body of the response h is delimited (RFC 9112 6.3) when it answers
 * a request whose method was HEAD (head_request = 1) or not. Returns 0, or
 * E_INVALID for a Transfer-Encoding other than exactly "chunked" (a relay
 * that decodes the chunks cannot pass other codings on), or a Content-Length
 * that is not digits or disagrees with another one. Transfer-Encoding wins
 * over Content-Length. */
int httpresp_body_framing(const struct httpresp_head *h, int head_request, enum httpresp_body *kind,
                          uint64_t *length) WUR;

/* The state of one chunked body being decoded. */
struct httpresp_chunked {
    int state;
    unsigned digits; /* hex digits of the current chunk size */
    uint64_t left;   /* data bytes of the current chunk still to come */
    size_t line;     /* bytes of the current size or trailer line */
    size_t trailer;  /* trailer bytes so far */
};

void httpresp_chunked_init(struct httpresp_chunked *c);

/* Decodes the chunked bytes buf[0..len) in place: the data bytes are moved
 * to buf[0..*out_len) (never more than len, so one buffer serves), chunk
 * sizes, extensions and trailers are dropped. *consumed = input bytes used.
 * Returns 0 when every byte was used and the body goes on, 1 when the body
 * ended (the last chunk and its trailers; *consumed may then be < len: the
 * bytes after the body are not the body's), E_INVALID when the framing is
 * malformed (then and on later calls: the state stays failed). A chunk size
 * has at most 16 hex digits; a size line or trailer line past
 * HTTPRESP_CHUNK_LINE_MAX, or trailers past HTTPRESP_TRAILER_MAX, are
 * malformed. Lines must end in CRLF. */
int httpresp_chunked_decode(struct httpresp_chunked *c, char *buf, size_t len, size_t *consumed,
                            size_t *out_len) WUR;

#endif
