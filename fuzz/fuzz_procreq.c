/* libFuzzer target for domain/procreq: arbitrary bytes as an exec/spawn body
 * (JSON), as a resize body, and as stdin's base64. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/err.h"
#include "core/xalloc.h"
#include "domain/procreq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *out;
    size_t n;
    if (procreq_b64_decode((const char *)data, size, &out, &n) == 0) {
        if (n > size)
            __builtin_trap();
        xfree(out);
    }
    json_t *b = json_loadb((const char *)data, size, JSON_ALLOW_NUL, NULL);
    if (!b)
        return 0;
    for (int spawn = 0; spawn < 2; spawn++) {
        struct procreq r;
        struct err e;
        err_init(&e);
        if (procreq_parse(b, spawn, 1100000u, &r, &e) == 0) {
            if (!r.argv.v || !r.argv.v[0] || !r.argv.v[0][0])
                __builtin_trap();
            for (size_t i = 0; i < r.env.n; i++)
                if (!strchr(r.env.v[i], '=') || r.env.v[i][0] == '=')
                    __builtin_trap();
            procreq_clear(&r);
        }
    }
    int rows, cols;
    struct err e;
    err_init(&e);
    if (procreq_resize(b, &rows, &cols, &e) == 0 && (rows < 1 || cols < 1 || rows > 65535))
        __builtin_trap();
    json_decref(b);
    return 0;
}
