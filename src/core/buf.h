/* buf: a growable byte buffer with a maximum fixed at birth (curl's
 * curlx_dyn_init(buf, toobig)). Every buffer fed by untrusted bytes is one of
 * these, so no reader can be made to grow memory past its named limit
 * (core/limits.h). The bytes are always followed by a NUL (not counted). */
#ifndef BD_CORE_BUF_H
#define BD_CORE_BUF_H

#include <stddef.h>

struct buf {
    char *p;    /* NULL until the first byte; owned */
    size_t len; /* bytes held */
    size_t cap; /* bytes allocated, the NUL's included */
    size_t max; /* most bytes ever held */
};

/* An empty buffer that will hold at most max bytes. */
void buf_init(struct buf *b, size_t max);
/* Room for n more bytes (doubling, capped at max): 0, or -E2BIG (nothing
 * changes) when len + n would pass max. */
int buf_reserve(struct buf *b, size_t n) __attribute__((warn_unused_result));
/* Appends n bytes: 0 or -E2BIG as buf_reserve. */
int buf_append(struct buf *b, const void *data, size_t n) __attribute__((warn_unused_result));
/* Frees the bytes; the buffer is empty again (same max). */
void buf_free(struct buf *b);

#endif
