/*
 * libFuzzer target for runtime/extpack: the CRX header parser (bytes from
 * the Chrome Web Store or the operator's store URL), then the extension
 * zip checks on the payload it finds and on the raw input (libarchive's zip
 * reader and extpack's entry and manifest rules), and the entry-name rule
 * on the input as text. Input: any bytes.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/xalloc.h"
#include "runtime/extpack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct err e;
    err_init(&e);
    size_t off = 0;
    if (extpack_crx_payload(data, size, &off, &e) == 0) {
        if (off > size)
            __builtin_trap();
        err_init(&e);
        (void)extpack_check(data + off, size - off, NULL, &e);
    }
    err_init(&e);
    struct extpack_info info;
    (void)extpack_check(data, size, &info, &e);
    if (size < 4096) {
        char *s = xmalloc(size + 1);
        memcpy(s, data, size);
        s[size] = '\0';
        char why[400];
        (void)extpack_path_check(s, why, sizeof why);
        xfree(s);
    }
    return 0;
}
