/* Unit tests for proxy/ws: handshake helpers and the CDP method scanner. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "core/limits.h"
#include "core/xalloc.h"
#include "proxy/ws.h"

/* ---- ws_accept_key ---------------------------------------------------- */

struct accept_case {
    const char *name;
    const char *key;
    int rc;
    const char *accept;
};

static const struct accept_case accept_cases[] = {
    {"RFC 6455 1.3: the example key hashes to the example accept", "dGhlIHNhbXBsZSBub25jZQ==", 0,
     "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="},
    {"RFC 6455 4.1: the key is a base64 16-byte nonce (too short)",
     "dGhlIHNhbXBsZSBub25jZQ=", E_INVALID, ""},
    {"RFC 6455 4.1: the key is a base64 16-byte nonce (too long)",
     "dGhlIHNhbXBsZSBub25jZQ===", E_INVALID, ""},
    {"RFC 6455 4.1: a 24-char key must end in == (it encodes 16 bytes)", "dGhlIHNhbXBsZSBub25jZQab",
     E_INVALID, ""},
    {"RFC 6455 4.1: only base64 characters", "dGhlIHNhbXBsZSBub25jZ!==", E_INVALID, ""},
    {"RFC 6455 4.1: empty key", "", E_INVALID, ""},
};

static void accept_key_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(accept_cases) / sizeof(accept_cases[0]); i++) {
        const struct accept_case *c = &accept_cases[i];
        char out[29];
        int rc = ws_accept_key(c->key, out);
        if (rc != c->rc || strcmp(out, c->accept) != 0)
            fail_msg("%s: rc %d out '%s'", c->name, rc, out);
    }
}

/* ---- ws_parse_upgrade_response ---------------------------------------- */

#define ACC "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
#define OK_HEAD                                                                                    \
    "HTTP/1.1 101 WebSocket Protocol Handshake\r\nUpgrade: websocket\r\n"                          \
    "Connection: Upgrade\r\nSec-WebSocket-Accept: " ACC "\r\n\r\n"

struct upgrade_case {
    const char *name;
    const char *in;
    int rc;
    size_t head_len; /* checked when rc == 0 */
};

static const struct upgrade_case upgrade_cases[] = {
    {"complete: a valid 101 head is accepted", OK_HEAD, 0, sizeof(OK_HEAD) - 1},
    {"complete: bytes after the head are not part of it", OK_HEAD "\x81\x02{}", 0,
     sizeof(OK_HEAD) - 1},
    {"complete: no reason phrase",
     "HTTP/1.1 101\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " ACC
     "\r\n\r\n",
     0, 0},
    {"partial: status line only", "HTTP/1.1 101 Switching", 1, 0},
    {"partial: head without the blank line",
     "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n", 1, 0},
    {"partial: the first bytes of the status line", "HTT", 1, 0},
    {"wrong status: 200 is a refusal",
     "HTTP/1.1 200 OK\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " ACC
     "\r\n\r\n",
     E_INVALID, 0},
    {"wrong status: 1010 is not 101",
     "HTTP/1.1 1010 X\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " ACC
     "\r\n\r\n",
     E_INVALID, 0},
    {"wrong status: not HTTP/1.1 fails early", "HTTP/1.0 101", E_INVALID, 0},
    {"wrong status: garbage fails without waiting for more", "SSH-2.0", E_INVALID, 0},
    {"wrong accept: a different Sec-WebSocket-Accept is refused",
     "HTTP/1.1 101 X\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "
     "AAAAAAAAAAAAAAAAAAAAAAAAAAA=\r\n\r\n",
     E_INVALID, 0},
    {"wrong accept: missing Sec-WebSocket-Accept is refused",
     "HTTP/1.1 101 X\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", E_INVALID, 0},
    {"wrong accept: two Sec-WebSocket-Accept headers are refused",
     "HTTP/1.1 101 X\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " ACC
     "\r\nSec-WebSocket-Accept: " ACC "\r\n\r\n",
     E_INVALID, 0},
    {"case-insensitive names and token values are accepted",
     "HTTP/1.1 101 X\r\nupgrade: WebSocket\r\nCONNECTION: keep-alive, UPGRADE\r\n"
     "sec-websocket-accept:" ACC "  \r\n\r\n",
     0, 0},
    {"header folding: a folded Connection value is unfolded",
     "HTTP/1.1 101 X\r\nUpgrade: websocket\r\nConnection: keep-alive,\r\n  Upgrade\r\n"
     "Sec-WebSocket-Accept: " ACC "\r\n\r\n",
     0, 0},
    {"header folding: a continuation before any header is malformed",
     "HTTP/1.1 101 X\r\n Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " ACC
     "\r\n\r\n",
     E_INVALID, 0},
    {"Upgrade must be websocket",
     "HTTP/1.1 101 X\r\nUpgrade: h2c\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " ACC
     "\r\n\r\n",
     E_INVALID, 0},
    {"Connection must list upgrade",
     "HTTP/1.1 101 X\r\nUpgrade: websocket\r\nConnection: close\r\nSec-WebSocket-Accept: " ACC
     "\r\n\r\n",
     E_INVALID, 0},
    {"an extension we did not offer is refused",
     "HTTP/1.1 101 X\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " ACC
     "\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n",
     E_INVALID, 0},
    {"a header line without a colon is malformed",
     "HTTP/1.1 101 X\r\nUpgrade websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " ACC
     "\r\n\r\n",
     E_INVALID, 0},
    {"whitespace before the colon is malformed (RFC 7230 3.2.4)",
     "HTTP/1.1 101 X\r\nUpgrade : websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " ACC
     "\r\n\r\n",
     E_INVALID, 0},
    {"a bare LF inside the head is malformed",
     "HTTP/1.1 101 X\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " ACC
     "\r\n\r\n",
     E_INVALID, 0},
};

static void upgrade_response_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(upgrade_cases) / sizeof(upgrade_cases[0]); i++) {
        const struct upgrade_case *c = &upgrade_cases[i];
        size_t head_len = 0;
        int rc = ws_parse_upgrade_response(c->in, strlen(c->in), ACC, &head_len);
        if (rc != c->rc)
            fail_msg("%s: rc %d, want %d", c->name, rc, c->rc);
        if (rc == 0 && c->head_len != 0 && head_len != c->head_len)
            fail_msg("%s: head_len %zu, want %zu", c->name, head_len, c->head_len);
        if (rc == 0 && head_len != strlen(c->in) && c->head_len == 0)
            fail_msg("%s: head_len %zu, want the whole input", c->name, head_len);
    }
}

/* A head that never ends must not make the caller buffer forever. */
static void upgrade_response_is_capped(void **state)
{
    (void)state;
    size_t n = LIM_HEADER_BYTES + 16;
    char *buf = xmalloc(n);
    memset(buf, 'a', n);
    memcpy(buf, "HTTP/1.1 101 X\r\nX-Pad: ", 23);
    size_t head_len = 0;
    assert_int_equal(ws_parse_upgrade_response(buf, n, ACC, &head_len), E_INVALID);
    xfree(buf);
}

/* ---- ws_cdp_method ---------------------------------------------------- */

struct method_case {
    const char *name;
    const char *in;
    int found;
    const char *method;
};

static const struct method_case method_cases[] = {
    {"method first", "{\"method\":\"Page.navigate\",\"id\":1,\"params\":{\"url\":\"x\"}}", 1,
     "Page.navigate"},
    {"method last", "{\"id\":1,\"params\":{\"url\":\"x\"},\"method\":\"Page.navigate\"}", 1,
     "Page.navigate"},
    {"whitespace everywhere", " \n{ \"id\" : 1 ,\t\"method\" :\r\n \"Browser.getVersion\" } ", 1,
     "Browser.getVersion"},
    {"nested method inside params does not match a top-level lookup",
     "{\"id\":1,\"params\":{\"method\":\"Evil.fake\"}}", 0, ""},
    {"nested method in an array does not match",
     "{\"id\":1,\"params\":[{\"method\":\"Evil.fake\"}],\"x\":[\"method\",\"y\"]}", 0, ""},
    {"nested method before the real one is skipped",
     "{\"params\":{\"method\":\"Evil.fake\",\"a\":[1,{\"b\":\"}\"}]},\"method\":\"Runtime."
     "evaluate\"}",
     1, "Runtime.evaluate"},
    {"escaped quotes inside a string value do not end it",
     "{\"params\":{\"expression\":\"a\\\",\\\"method\\\":\\\"Evil.fake\"},\"method\":\"Runtime."
     "evaluate\"}",
     1, "Runtime.evaluate"},
    {"escapes in the method value are decoded", "{\"method\":\"Page.nav\\u0069gate\"}", 1,
     "Page.navigate"},
    {"escapes in the key are decoded", "{\"m\\u0065thod\":\"Page.reload\"}", 1, "Page.reload"},
    {"a key that only starts with method is another key", "{\"methods\":\"Page.reload\"}", 0, ""},
    {"no method", "{\"id\":1,\"params\":{}}", 0, ""},
    {"empty object", "{}", 0, ""},
    {"a non-string method is not a method", "{\"id\":1,\"method\":42}", 0, ""},
    {"duplicate keys: the last one wins (as Chromium parses)",
     "{\"method\":\"A.first\",\"method\":\"B.second\"}", 1, "B.second"},
    {"truncated input: inside the method value", "{\"id\":1,\"method\":\"Page.nav", 0, ""},
    {"truncated input: before the closing brace", "{\"id\":1,\"method\":\"Page.navigate\"", 0, ""},
    {"truncated input: inside params", "{\"method\":\"Page.navigate\",\"params\":{\"url\":\"x", 0,
     ""},
    {"not an object", "[\"method\",\"Page.navigate\"]", 0, ""},
    {"trailing garbage makes the message invalid", "{\"method\":\"Page.navigate\"}x", 0, ""},
    {"a raw control character in a string is invalid", "{\"method\":\"Page.\x01navigate\"}", 0, ""},
    {"empty input", "", 0, ""},
};

static void cdp_method_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(method_cases) / sizeof(method_cases[0]); i++) {
        const struct method_case *c = &method_cases[i];
        char out[64];
        int found = ws_cdp_method(c->in, strlen(c->in), out, sizeof(out));
        if (found != c->found || strcmp(out, c->method) != 0)
            fail_msg("%s: found %d method '%s'", c->name, found, out);
    }
}

/* The method must fit in out; a longer one is not reported truncated. */
static void cdp_method_too_long_for_out(void **state)
{
    (void)state;
    const char *msg = "{\"method\":\"Page.navigate\"}";
    char out[8];
    assert_int_equal(ws_cdp_method(msg, strlen(msg), out, sizeof(out)), 0);
    assert_string_equal(out, "");
    char exact[14];
    assert_int_equal(ws_cdp_method(msg, strlen(msg), exact, sizeof(exact)), 1);
    assert_string_equal(exact, "Page.navigate");
}

/* The length bounds the scan: bytes past len are never read. */
static void cdp_method_respects_len(void **state)
{
    (void)state;
    const char *msg = "{\"method\":\"Page.navigate\"}";
    char out[64];
    assert_int_equal(ws_cdp_method(msg, strlen(msg) - 1, out, sizeof(out)), 0);
}

/* ---- ws_connect URL rules (no network needed) ------------------------- */

struct url_case {
    const char *name;
    const char *url;
};

static const struct url_case bad_urls[] = {
    {"the scheme must be ws://", "http://127.0.0.1:9222/devtools/browser/x"},
    {"HOST must be a loopback address", "ws://10.0.0.1:9222/devtools/browser/x"},
    {"HOST must be numeric or localhost", "ws://example.com:9222/devtools/browser/x"},
    {"a port is required", "ws://127.0.0.1/devtools/browser/x"},
    {"the port must be 1..65535", "ws://127.0.0.1:70000/devtools/browser/x"},
    {"an IPv6 host must be ::1", "ws://[fe80::1]:9222/x"},
    {"the path may not carry spaces (request smuggling)", "ws://127.0.0.1:9222/a b"},
    {"the path may not carry CR/LF (header injection)", "ws://127.0.0.1:9222/a\r\nX: y"},
};

static void connect_rejects_bad_urls(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_urls) / sizeof(bad_urls[0]); i++) {
        struct err e;
        err_init(&e);
        int fd = -1;
        char *left = NULL;
        size_t left_len = 0;
        int rc = ws_connect(bad_urls[i].url, 1000, &fd, &left, &left_len, &e);
        if (rc != E_INVALID)
            fail_msg("%s: rc %d", bad_urls[i].name, rc);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accept_key_table),
        cmocka_unit_test(upgrade_response_table),
        cmocka_unit_test(upgrade_response_is_capped),
        cmocka_unit_test(cdp_method_table),
        cmocka_unit_test(cdp_method_too_long_for_out),
        cmocka_unit_test(cdp_method_respects_len),
        cmocka_unit_test(connect_rejects_bad_urls),
    };
    return cmocka_run_group_tests_name("proxy/ws", tests, NULL, NULL);
}
