/* libFuzzer target for proxy/ws handshake parsing: arbitrary bytes as the
 * browser's answer to our upgrade request (ws_parse_upgrade_response), and as
 * a client's Sec-WebSocket-Key (ws_accept_key). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/xalloc.h"
#include "proxy/ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size copy so that any read past len is caught by ASan. */
    char *buf = xmalloc(size);
    memcpy(buf, data, size);
    size_t head_len = 0;
    int rc = ws_parse_upgrade_response(buf, size, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", &head_len);
    if (rc == 0 && (head_len > size || head_len < 4))
        abort();
    if (rc != 0 && rc != 1 && rc != E_INVALID)
        abort();
    head_len = 0;
    int rc2 = ws_parse_upgrade_response(buf, size, NULL, &head_len);
    if (rc == 0 && rc2 != 0)
        abort(); /* not checking the accept can only accept more */
    xfree(buf);

    char *key = xstrndup((const char *)data, size < 64 ? size : 64);
    char out[29];
    if (ws_accept_key(key, out) == 0 && strlen(out) != WS_ACCEPT_LEN)
        abort();
    xfree(key);
    return 0;
}
