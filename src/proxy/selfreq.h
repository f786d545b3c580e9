/*
 * selfreq: the one request the session relay (proxy/selfrelay) accepts from a
 * session's own browser, parsed from the bytes of its tunnel: the egress's
 * line "BROWSERD-SELF <session id> <org id>\r\n", then exactly
 * `GET /browser/cdp?jwt=T[&target=ID] HTTP/1.1` with a WebSocket upgrade
 * and nothing after the head. Pure; the token is checked by the caller.
 * Fuzzed by fuzz/fuzz_selfreq.c, table-tested in tests/unit/test_selfreq.c.
 */
#ifndef BD_PROXY_SELFREQ_H
#define BD_PROXY_SELFREQ_H

#include <stddef.h>

#include "core/token.h"

#define SELFREQ_PREFIX "BROWSERD-SELF "

struct selfreq {
    char sid[64], org[64]; /* from the egress's line */
    char jwt[TOKEN_MAX];   /* the query's jwt, as sent */
    char target[72];       /* the query's target ("" = none), as sent */
    char key[64];          /* Sec-WebSocket-Key */
};

enum selfreq_result {
    SELFREQ_OK = 0,
    SELFREQ_PARTIAL,     /* the head is not complete yet: read more */
    SELFREQ_NO_PREFIX,   /* no egress line: not from the egress, close */
    SELFREQ_NOT_RELAY,   /* anything but the relay endpoint with a jwt, or bytes after the head */
    SELFREQ_NOT_UPGRADE, /* the relay endpoint without a WebSocket upgrade and key */
};

/* Parses len bytes of buf (need not be NUL-terminated). */
enum selfreq_result selfreq_parse(const char *buf, size_t len, struct selfreq *out);

#endif
