/* Fuzz target: OTLP destination endpoints (organization input) and the MIME
 * types / bodies telemetry reads from pages (telemetry/otlp.h,
 * telemetry/telemetry.h). Input: a JSON string, or an array of strings. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "telemetry/otlp.h"
#include "telemetry/telemetry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one(const char *s, size_t len)
{
    char host[256], path[1024];
    int port;
    struct err e;
    err_init(&e);
    if (otlp_parse_endpoint(s, host, sizeof host, &port, path, sizeof path, &e) == 0) {
        if (port < 1 || port > 65535 || path[0] != '/' || strlen(host) == 0)
            __builtin_trap();
    }
    (void)telem_body_limit(s);
    for (size_t lim = 0; lim < len + 2; lim += 1 + lim / 2) {
        size_t k = telem_utf8_cut(s, len, lim);
        if (k > len || (len > lim && k > lim))
            __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *v =
        json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
    if (!v)
        return 0;
    if (json_is_string(v))
        one(json_string_value(v), json_string_length(v));
    size_t i;
    json_t *x;
    if (json_is_array(v))
        json_array_foreach(v, i, x) if (json_is_string(x))
            one(json_string_value(x), json_string_length(x));
    json_decref(v);
    return 0;
}
