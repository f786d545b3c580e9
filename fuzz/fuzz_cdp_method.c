/* libFuzzer target for proxy/ws ws_cdp_method: arbitrary bytes as a client's
 * CDP message. Differential check: whenever jansson accepts the bytes as an
 * object whose top-level "method" is a string, the scanner must report the
 * same string. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/xalloc.h"
#include "proxy/ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = xmalloc(size);
    memcpy(buf, data, size);
    char out[128];
    int found = ws_cdp_method(buf, size, out, sizeof(out));
    if (found != 0 && found != 1)
        abort();
    if (found && strlen(out) >= sizeof(out))
        abort();
    char tiny[1];
    int tiny_found = ws_cdp_method(buf, size, tiny, sizeof(tiny));
    /* Only an empty method fits in one byte (its NUL). */
    if (tiny_found && (tiny[0] != '\0' || !found || out[0] != '\0'))
        abort();

    json_t *v = json_loadb(buf, size, 0, NULL);
    if (json_is_object(v)) {
        const char *m = json_string_value(json_object_get(v, "method"));
        if (m != NULL && strlen(m) < sizeof(out) && (!found || strcmp(m, out) != 0))
            abort();
    }
    json_decref(v);
    xfree(buf);
    return 0;
}
