/* libFuzzer target: the egress proxy's request-head parser, which reads bytes
 * a local client (the browser, or any process that connects to an egress
 * port) sends. It must never read past the buffer, crash or leak. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/xalloc.h"
#include "proxy/egress.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size copy, so ASan sees any read past the end. */
    char *buf = xmalloc(size ? size : 1);
    memcpy(buf, data, size);
    struct egress_request r;
    if (egress_parse_request(buf, size, &r) == 0) {
        /* What the engine relies on afterwards. */
        if (r.port < 1 || r.port > 65535 || !r.host[0] || r.path[0] != '/')
            __builtin_trap();
        json_t *none = NULL;
        (void)egress_bypass_match(none, r.host, r.port);
    }
    xfree(buf);
    return 0;
}
