/* libFuzzer target for core/httpresp: arbitrary bytes as another node's
 * answer to a forwarded request. The head parser must agree with itself
 * when fed in two pieces, and the chunked decoder must never produce more
 * bytes than it consumed nor disagree between one call and byte-by-byte
 * calls. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/httpresp.h"
#include "core/xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void decode(const char *in, size_t size, size_t step, char *out, size_t *olen, int *rc)
{
    /* An exact-size copy per call so that any read past the end is caught. */
    struct httpresp_chunked c;
    httpresp_chunked_init(&c);
    size_t pos = 0;
    *olen = 0;
    *rc = 0;
    while (pos < size && *rc == 0) {
        size_t n = size - pos < step ? size - pos : step;
        char *b = xmalloc(n);
        memcpy(b, in + pos, n);
        size_t used = 0, got = 0;
        *rc = httpresp_chunked_decode(&c, b, n, &used, &got);
        if (used > n || got > used)
            abort();
        if (*rc == 0 && used != n)
            abort();
        if (*rc != 0 && *rc != 1 && *rc != E_INVALID)
            abort();
        memcpy(out + *olen, b, got);
        *olen += got;
        pos += used;
        xfree(b);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = xmalloc(size);
    memcpy(buf, data, size);
    struct httpresp_head *h = xmalloc(sizeof *h);
    int rc = httpresp_parse_head(buf, size, h);
    if (rc != 0 && rc != 1 && rc != E_INVALID)
        abort();
    if (rc == 0) {
        if (h->head_len > size || h->head_len > HTTPRESP_HEAD_MAX ||
            h->nfields > HTTPRESP_FIELDS_MAX)
            abort();
        if (h->status < 100 || h->status > 599)
            abort();
        for (size_t i = 0; i < h->nfields; i++) {
            const struct httpresp_field *f = &h->fields[i];
            if (f->name < buf || f->value < buf || f->value + f->value_len > buf + h->head_len)
                abort();
        }
        /* The head alone parses to the same head. */
        struct httpresp_head *h2 = xmalloc(sizeof *h2);
        if (httpresp_parse_head(buf, h->head_len, h2) != 0 || h2->head_len != h->head_len ||
            h2->nfields != h->nfields)
            abort();
        xfree(h2);
        enum httpresp_body kind;
        uint64_t len;
        (void)httpresp_body_framing(h, 0, &kind, &len);
        (void)httpresp_has_token(h, "Connection", "upgrade");
    } else if (rc == 1 && size >= HTTPRESP_HEAD_MAX) {
        abort();
    }
    xfree(h);
    xfree(buf);

    /* The chunked decoder, at once and byte by byte: the same outcome. */
    if (size > 4096)
        return 0;
    char *o1 = xmalloc(size + 1), *o2 = xmalloc(size + 1);
    size_t l1, l2;
    int r1, r2;
    decode((const char *)data, size, size ? size : 1, o1, &l1, &r1);
    decode((const char *)data, size, 1, o2, &l2, &r2);
    if (r1 != r2 || (r1 != E_INVALID && (l1 != l2 || memcmp(o1, o2, l1) != 0)))
        abort();
    xfree(o1);
    xfree(o2);
    return 0;
}
