#include "core/strvec.h"

#include "core/xalloc.h"

void strvec_push(struct strvec *s, char *owned)
{
    if (s->n + 2 > s->cap) {
        s->cap = s->cap ? s->cap * 2 : 32;
        s->v = xrealloc(s->v, s->cap * sizeof *s->v);
    }
    s->v[s->n++] = owned;
    s->v[s->n] = NULL;
}

void strvec_push_cb(void *ctx, char *owned)
{
    strvec_push(ctx, owned);
}

void strvec_free(struct strvec *s)
{
    for (size_t i = 0; i < s->n; i++)
        xfree(s->v[i]);
    xfree(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}
