/*
 * libFuzzer target for domain/chrome_policy: any JSON text is validated as a
 * chrome_policy value (names, types, managed policies, the 5 MiB cap).
 */
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "domain/chrome_policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t je;
    json_t *v = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!v)
        return 0;
    struct err e;
    err_init(&e);
    (void)chrome_policy_validate("chrome_policy", v, &e);
    json_decref(v);
    return 0;
}
