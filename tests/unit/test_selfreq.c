/* Unit tests for proxy/selfreq (issue 31.10, docs/egress-proxy.md): "the
 * session relay lets through exactly GET /browser/cdp?jwt=T[&target=ID]
 * HTTP/1.1 with a WebSocket upgrade, nothing after the head". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "proxy/selfreq.h"

#define PFX "BROWSERD-SELF s1 o1\r\n"
#define UPG "Host: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: k==\r\n\r\n"

struct scase {
    const char *name, *in;
    enum selfreq_result want;
    const char *jwt, *target;
};

static const struct scase cases[] = {
    {"the relay endpoint with a token and an upgrade",
     PFX "GET /browser/cdp?jwt=T HTTP/1.1\r\n" UPG, SELFREQ_OK, "T", ""},
    {"one page's socket (target)", PFX "GET /browser/cdp?jwt=T&target=AB12 HTTP/1.1\r\n" UPG,
     SELFREQ_OK, "T", "AB12"},
    {"target first", PFX "GET /browser/cdp?target=AB&jwt=T HTTP/1.1\r\n" UPG, SELFREQ_OK, "T",
     "AB"},
    {"header names in any case",
     PFX "GET /browser/cdp?jwt=T HTTP/1.1\r\nupgrade: WebSocket\r\n"
         "sec-websocket-key: k==\r\n\r\n",
     SELFREQ_OK, "T", ""},
    {"the head not complete yet", PFX "GET /browser/cdp?jwt=T HTTP/1.1\r\nHost", SELFREQ_PARTIAL,
     NULL, NULL},
    {"the egress's line not complete yet", "BROWSERD-SE", SELFREQ_PARTIAL, NULL, NULL},
    {"no egress line: not from the egress", "GET /browser/cdp?jwt=T HTTP/1.1\r\n" UPG,
     SELFREQ_NO_PREFIX, NULL, NULL},
    {"an egress line without an org", "BROWSERD-SELF s1\r\nGET / HTTP/1.1\r\n\r\n",
     SELFREQ_NO_PREFIX, NULL, NULL},
    {"the API", PFX "GET /browsers HTTP/1.1\r\nAuthorization: Bearer k\r\n\r\n", SELFREQ_NOT_RELAY,
     NULL, NULL},
    {"the admin API", PFX "POST /admin/orgs HTTP/1.1\r\n\r\n", SELFREQ_NOT_RELAY, NULL, NULL},
    {"discovery", PFX "GET /browser/cdp/json/version?jwt=T HTTP/1.1\r\n\r\n", SELFREQ_NOT_RELAY,
     NULL, NULL},
    {"another path with a prefix of it", PFX "GET /browser/cdpx?jwt=T HTTP/1.1\r\n" UPG,
     SELFREQ_NOT_RELAY, NULL, NULL},
    {"no token", PFX "GET /browser/cdp?target=AB HTTP/1.1\r\n" UPG, SELFREQ_NOT_RELAY, NULL, NULL},
    {"an empty token", PFX "GET /browser/cdp?jwt= HTTP/1.1\r\n" UPG, SELFREQ_NOT_RELAY, NULL, NULL},
    {"HTTP/1.0", PFX "GET /browser/cdp?jwt=T HTTP/1.0\r\n" UPG, SELFREQ_NOT_RELAY, NULL, NULL},
    {"a second request pipelined after the head",
     PFX "GET /browser/cdp?jwt=T HTTP/1.1\r\n" UPG "GET /browsers HTTP/1.1\r\n\r\n",
     SELFREQ_NOT_RELAY, NULL, NULL},
    {"no upgrade", PFX "GET /browser/cdp?jwt=T HTTP/1.1\r\nHost: h\r\n\r\n", SELFREQ_NOT_UPGRADE,
     NULL, NULL},
    {"an empty key",
     PFX "GET /browser/cdp?jwt=T HTTP/1.1\r\nUpgrade: websocket\r\n"
         "Sec-WebSocket-Key:  \r\n\r\n",
     SELFREQ_NOT_UPGRADE, NULL, NULL},
    {"an upgrade to something else",
     PFX "GET /browser/cdp?jwt=T HTTP/1.1\r\nUpgrade: h2c\r\nSec-WebSocket-Key: k==\r\n\r\n",
     SELFREQ_NOT_UPGRADE, NULL, NULL},
};

static void table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct selfreq r;
        enum selfreq_result got = selfreq_parse(cases[i].in, strlen(cases[i].in), &r);
        if (got != cases[i].want)
            fail_msg("%s: got %d, want %d", cases[i].name, (int)got, (int)cases[i].want);
        if (got == SELFREQ_OK) {
            assert_string_equal(r.sid, "s1");
            assert_string_equal(r.org, "o1");
            assert_string_equal(r.key, "k==");
            if (strcmp(r.jwt, cases[i].jwt) != 0 || strcmp(r.target, cases[i].target) != 0)
                fail_msg("%s: jwt %s target %s", cases[i].name, r.jwt, r.target);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(table)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
