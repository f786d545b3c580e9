/* libFuzzer target for core/multipart: arbitrary bytes as an upload body.
 * The first line of the input is the Content-Type value, the rest the body.
 * Invariants: success or E_INVALID with a message; every part's data lies
 * inside the body; every part has a name; at most LIM_MULTIPART_PARTS. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/limits.h"
#include "core/multipart.h"
#include "core/xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    size_t ctl = nl ? (size_t)(nl - data) : 0;
    char *ct = xstrndup((const char *)data, ctl);
    size_t blen = nl ? size - ctl - 1 : size;
    char *body = xmalloc(blen + 1);
    memcpy(body, nl ? nl + 1 : data, blen);

    struct mp_form f;
    struct err e;
    err_init(&e);
    int rc = multipart_parse(ct, body, blen, &f, &e);
    if (rc != 0 && (rc != E_INVALID || e.message[0] == '\0' || f.n != 0))
        abort();
    if (f.n > LIM_MULTIPART_PARTS)
        abort();
    for (size_t i = 0; i < f.n; i++) {
        const struct mp_part *p = &f.parts[i];
        if (p->name == NULL || p->data < body || p->len > blen ||
            (size_t)(p->data - body) > blen - p->len)
            abort();
        if (multipart_find(&f, p->name) == NULL)
            abort();
    }
    multipart_free(&f);
    xfree(body);
    xfree(ct);
    return 0;
}
