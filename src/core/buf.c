#include "core/buf.h"

#include <errno.h>
#include <string.h>

#include "core/xalloc.h"

void buf_init(struct buf *b, size_t max)
{
    b->p = NULL;
    b->len = b->cap = 0;
    b->max = max;
}

int buf_reserve(struct buf *b, size_t n)
{
    if (n > b->max || b->len > b->max - n)
        return -E2BIG;
    size_t need = b->len + n + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < need)
        cap = cap > (b->max + 1) / 2 ? b->max + 1 : cap * 2;
    b->p = xrealloc(b->p, cap);
    b->cap = cap;
    return 0;
}

int buf_append(struct buf *b, const void *data, size_t n)
{
    int rc = buf_reserve(b, n);
    if (rc)
        return rc;
    if (n)
        memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

void buf_free(struct buf *b)
{
    xfree(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}
