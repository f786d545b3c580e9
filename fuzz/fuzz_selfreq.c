/* libFuzzer target for proxy/selfreq selfreq_parse: arbitrary bytes as what
 * a session's browser sends through its tunnel to the session relay (after
 * the egress's line, which the input also may or may not start with).
 * Checks: no crash, every output NUL-terminated within its field, and an
 * accepted request is exactly the relay endpoint with a token and a key. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/xalloc.h"
#include "proxy/selfreq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int with_prefix = 0; with_prefix < 2; with_prefix++) {
        static const char pfx[] = "BROWSERD-SELF sid org\r\n";
        size_t pl = with_prefix ? sizeof pfx - 1 : 0;
        char *buf = xmalloc(pl + size + 1);
        memcpy(buf, pfx, pl);
        memcpy(buf + pl, data, size);
        buf[pl + size] = '\0';
        struct selfreq r;
        enum selfreq_result res = selfreq_parse(buf, pl + size, &r);
        if (strnlen(r.sid, sizeof r.sid) == sizeof r.sid ||
            strnlen(r.org, sizeof r.org) == sizeof r.org ||
            strnlen(r.jwt, sizeof r.jwt) == sizeof r.jwt ||
            strnlen(r.target, sizeof r.target) == sizeof r.target ||
            strnlen(r.key, sizeof r.key) == sizeof r.key)
            abort();
        if (res == SELFREQ_OK) {
            const char *req = strstr(buf, "\r\n");
            if (!req || strncmp(req + 2, "GET /browser/cdp?", 17) != 0 || !r.jwt[0] || !r.key[0] ||
                !r.sid[0] || !r.org[0] || memcmp(buf + pl + size - 4, "\r\n\r\n", 4) != 0)
                abort();
        }
        xfree(buf);
    }
    return 0;
}
