/* libFuzzer target for a search provider's answer (api/search.c): the
 * provider's bytes (a third party's server) parsed as the server parses them
 * (jsonx_parse, LIM_SEARCH_PROVIDER_BODY_BYTES) and normalized as a SearXNG
 * and as a Brave answer by search_normalize(); each result kept must be an
 * object of strings with an http(s) URL. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "api/search.h"
#include "core/err.h"
#include "core/jsonx.h"
#include "core/limits.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const json_t *out)
{
    size_t i;
    const json_t *r;
    json_array_foreach(out, i, r)
    {
        const char *url = json_string_value(json_object_get(r, "url"));
        if (!url || (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) ||
            !json_is_string(json_object_get(r, "title")) ||
            !json_is_string(json_object_get(r, "snippet")))
            __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *root = NULL;
    struct err e;
    err_init(&e);
    if (jsonx_parse((const char *)data, size, LIM_SEARCH_PROVIDER_BODY_BYTES, &root, &e) != 0)
        return 0;
    for (int brave = 0; brave < 2; brave++) {
        json_t *out = search_normalize(brave, root);
        if (out && !json_is_array(out))
            __builtin_trap();
        check(out);
        json_decref(out);
    }
    json_decref(root);
    return 0;
}
