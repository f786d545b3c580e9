/* libFuzzer target for api/wdclassic's reading of a classic WebDriver
 * new-session body (the tenant's bytes): parsed as the handler does
 * (jsonx_parse, an object), then wdc_caps_parse. Checks the contract: merged
 * capabilities are an object whose browserd:options is an object with a
 * string pool or none; a refusal is 400 or 500 with an error code and a
 * message. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "api/wdclassic.h"
#include "core/err.h"
#include "core/jsonx.h"
#include "core/limits.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *body = NULL;
    struct err e;
    err_init(&e);
    if (jsonx_parse((const char *)data, size, LIM_BODY_BYTES, &body, &e) != 0)
        return 0;
    if (json_is_object(body)) {
        json_t *caps;
        struct wdc_refusal why;
        if (wdc_caps_parse(body, &caps, &why) == 0) {
            json_t *opts = json_object_get(caps, "browserd:options");
            json_t *pool = json_object_get(opts, "pool");
            if (!json_is_object(caps) || (opts && !json_is_object(opts)) ||
                (pool && !json_is_string(pool)))
                __builtin_trap();
            json_decref(caps);
        } else if (caps || (why.status != 400 && why.status != 500) || !why.error ||
                   !why.message[0]) {
            __builtin_trap();
        }
    }
    json_decref(body);
    return 0;
}
