/* libFuzzer target for domain/curlreq and core/b64: arbitrary bytes as a
 * browsers.curl body into curlreq_parse, and as base64 text into b64_decode.
 * Invariants: a parse either succeeds with a request the browser can send
 * (http(s) URL, headers without CR/LF, a body only with a method that
 * carries one, timeout in range) or fails with a field error; a decoded
 * buffer re-encodes to a text that decodes to the same bytes. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/b64.h"
#include "core/err.h"
#include "core/xalloc.h"
#include "domain/curlreq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *b = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    struct err e;
    err_init(&e);
    struct curlreq r;
    int rc = curlreq_parse(b, &r, &e);
    if (rc != 0 && (!e.message[0] || r.url))
        abort();
    if (rc == 0) {
        if (strncasecmp(r.url, "http://", 7) != 0 && strncasecmp(r.url, "https://", 8) != 0)
            abort();
        if (r.timeout_ms < CURL_TIMEOUT_MIN_MS || r.timeout_ms > CURL_TIMEOUT_MAX_MS)
            abort();
        if (r.body && !curlreq_method_has_body(r.method))
            abort();
        for (size_t i = 0; i < r.nheaders; i++)
            if (strpbrk(r.headers[i].value, "\r\n") || strpbrk(r.headers[i].name, "\r\n: "))
                abort();
        curlreq_clear(&r);
    }
    json_decref(b);

    unsigned char *d;
    size_t n;
    if (b64_decode((const char *)data, size, &d, &n) == 0) {
        size_t en;
        char *enc = b64_encode(d, n, &en);
        unsigned char *d2;
        size_t n2;
        if (b64_decode(enc, en, &d2, &n2) != 0 || n2 != n || memcmp(d, d2, n) != 0)
            abort();
        xfree(d2);
        xfree(enc);
        xfree(d);
    }
    return 0;
}
