/* libFuzzer target for domain/replay_rules liveview_token_parse: arbitrary
 * bytes as the token of a live view URL (untrusted: anyone can send one).
 * Checks: no crash, outputs NUL-terminated within their caps, and a token the
 * parser accepts rebuilds to itself (org.sid.mac with the MAC recomputed). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/xalloc.h"
#include "domain/replay_rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const unsigned char key[32] = {7};
    char *tok = xmalloc(size + 1);
    memcpy(tok, data, size);
    tok[size] = '\0';
    char org[32], sid[32];
    if (liveview_token_parse(key, sizeof key, tok, org, sizeof org, sid, sizeof sid) == 0) {
        if (strlen(org) >= sizeof org || strlen(sid) >= sizeof sid)
            abort();
        char mac[LIVEVIEW_MAC_HEX + 1], again[256];
        liveview_token_mac(key, sizeof key, org, sid, mac);
        snprintf(again, sizeof again, "%s.%s.%s", org, sid, mac);
        if (strcmp(again, tok) != 0)
            abort();
    }
    /* A token made by the server always parses back. */
    if (size < 20 && !memchr(data, '.', size) && !memchr(data, '\0', size) && size > 0) {
        char mac[LIVEVIEW_MAC_HEX + 1], made[128];
        liveview_token_mac(key, sizeof key, tok, tok, mac);
        snprintf(made, sizeof made, "%s.%s.%s", tok, tok, mac);
        if (liveview_token_parse(key, sizeof key, made, org, sizeof org, sid, sizeof sid) != 0 ||
            strcmp(org, tok) != 0 || strcmp(sid, tok) != 0)
            abort();
    }
    xfree(tok);
    return 0;
}
