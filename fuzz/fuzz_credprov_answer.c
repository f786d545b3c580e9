/* libFuzzer target for api/credprov's reading of 1Password Connect answers:
 * the input is two answer bodies split at its first NUL byte (without one,
 * the whole input is both), the first read as GET /v1/vaults's (credprov_answer_parse,
 * credprov_vaults_of) and the second as every vault's GET /v1/vaults/{id}/items
 * (credprov_items_add), as provider_items does. Checks the caps: at most
 * LIM_CREDPROV_VAULTS vaults with ids of letters and digits, at most
 * LIM_CREDPROV_ITEMS items, and the kept text within
 * LIM_CREDPROV_ITEMS_BYTES while the answer is accepted. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "api/credprov.h"
#include "core/limits.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > LIM_CREDPROV_RESPONSE_BYTES)
        return 0;
    const char *a = (const char *)data, *b = a;
    size_t alen = size, blen = size;
    const char *nul = memchr(a, '\0', size);
    if (nul) {
        alen = (size_t)(nul - a);
        b = nul + 1;
        blen = size - alen - 1;
    }
    char why[300] = "";
    json_t *raw;
    if (credprov_answer_parse(a, alen, &raw, why, sizeof why) != 0) {
        if (raw || !why[0])
            __builtin_trap();
        return 0;
    }
    json_t *vaults = credprov_vaults_of(raw);
    json_decref(raw);
    if (json_array_size(vaults) > LIM_CREDPROV_VAULTS)
        __builtin_trap();
    json_t *items = json_array();
    size_t bytes = 0;
    int rc = 0;
    size_t i;
    json_t *vt;
    json_array_foreach(vaults, i, vt)
    {
        const char *id = json_string_value(json_object_get(vt, "id"));
        if (!id || strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") !=
                       strlen(id))
            __builtin_trap();
        json_t *its;
        if (credprov_answer_parse(b, blen, &its, why, sizeof why) != 0)
            break;
        rc = credprov_items_add(items, vt, its, &bytes, why, sizeof why);
        json_decref(its);
        if (rc)
            break;
    }
    if (json_array_size(items) > LIM_CREDPROV_ITEMS ||
        (rc == 0 && bytes > LIM_CREDPROV_ITEMS_BYTES))
        __builtin_trap();
    json_array_foreach(items, i, vt)
    {
        if (json_array_size(json_object_get(vt, "urls")) > LIM_CREDPROV_ITEM_URLS)
            __builtin_trap();
    }
    json_decref(items);
    json_decref(vaults);
    return 0;
}
