/* libFuzzer target for core/jsonx, the entry point of every request body:
 * jsonx_parse on arbitrary bytes (depth pre-scan, duplicate keys, numbers out
 * of range named by their field), and jsonx_path_at at every offset of the
 * input. Invariants: a parse either succeeds with a value or fails with an
 * Error record (code and message set); a path is a terminated string that
 * fits its buffer. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/jsonx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct err e;
    err_init(&e);
    json_t *v = NULL;
    int rc = jsonx_parse((const char *)data, size, 1 << 20, &v, &e);
    if (rc == 0 && !v)
        abort();
    if (rc != 0 && (v || !e.code[0] || !e.message[0]))
        abort();
    json_decref(v);
    char path[32];
    for (size_t pos = 0; pos <= size && pos < 4096; pos += 1 + pos / 64) {
        jsonx_path_at((const char *)data, size, pos, path, sizeof path);
        if (strnlen(path, sizeof path) >= sizeof path)
            abort();
    }
    return 0;
}
