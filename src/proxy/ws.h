/*
 * ws: the WebSocket handshake pieces browserd needs around wslay (which only
 * does framing): the server's Sec-WebSocket-Accept, a client handshake to a
 * browser's DevTools endpoint on loopback, the parser for the 101 response,
 * and a cheap extractor of a CDP command's "method" for telemetry.
 *
 * Every parser here reads untrusted bytes and is fuzzed (fuzz/fuzz_ws_*.c).
 */
#ifndef BD_PROXY_WS_H
#define BD_PROXY_WS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <wslay/wslay.h>

#include "core/err.h"

/* RFC 6455 section 1.3: the GUID appended to the key before hashing. */
#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
/* Length of a Sec-WebSocket-Key (base64 of 16 bytes) and of an accept value. */
#define WS_KEY_LEN    24
#define WS_ACCEPT_LEN 28

/* Sec-WebSocket-Accept for a client's Sec-WebSocket-Key (base64 of
 * SHA-1(key + GUID)); out >= 29 bytes, NUL-terminated. Returns 0, or
 * E_INVALID if key is not a 16-byte base64 nonce (24 characters of the base64
 * alphabet ending in "=="), leaving out as "". */
int ws_accept_key(const char *client_key, char out[29]) WUR;

/* Opens a TCP connection to a ws://HOST:PORT/PATH URL (HOST must be a numeric
 * loopback address, 127.0.0.0/8 or [::1], or "localhost"), performs the client
 * handshake (GET with Upgrade, a random Sec-WebSocket-Key, checks 101 and
 * Sec-WebSocket-Accept) within timeout_ms, and returns the connected
 * non-blocking fd with TCP_NODELAY set. Bytes the server sent after the 101
 * head are returned in *leftover (owned, xfree; NULL when none) /
 * *leftover_len. Fails with E_INVALID (bad URL, refused handshake) or
 * E_UNAVAIL (cannot connect, timeout, peer closed); nothing is left open. */
int ws_connect(const char *url, int timeout_ms, int *fd, char **leftover, size_t *leftover_len,
               struct err *e) WUR;

/* One HTTP GET of path on the server a ws:// URL of the kind ws_connect takes
 * names (the same loopback address, port and network namespace): for a
 * browser's own DevTools HTTP pages (/json/protocol). On 0, *out holds the
 * answer (any status; httpc_resp_free). Fails with E_INVALID (bad URL),
 * E_UNAVAIL (cannot connect, timed out), E_UPSTREAM (not HTTP) or E_TOOBIG
 * (a body over body_max); nothing is left open. */
struct httpc_resp;
int ws_http_get(const char *url, const char *path, size_t body_max, int timeout_ms,
                struct httpc_resp *out, struct err *e) WUR;

/* Parses an HTTP/1.1 101 response head (untrusted bytes): returns 0 when
 * complete and valid for expect_accept, E_INVALID when malformed or refused,
 * and 1 when more bytes are needed; *head_len = bytes of the head (through
 * the blank line) when 0 is returned. Header names are case-insensitive,
 * obsolete line folding is unfolded; Upgrade must be "websocket", Connection
 * must list "upgrade", Sec-WebSocket-Accept must equal expect_accept (not
 * checked when expect_accept is NULL), and no extension or subprotocol may
 * be selected (we offer none). A head longer than LIM_HEADER_BYTES is
 * E_INVALID. */
int ws_parse_upgrade_response(const char *buf, size_t len, const char *expect_accept,
                              size_t *head_len);

/* Extracts the "method" string of a CDP command message (a JSON object text,
 * untrusted) into out (cap bytes, NUL-terminated). Returns 1 if found, 0 if
 * not. Only the top-level key counts ("method" nested in params does not);
 * escapes in the key and the value are decoded; with duplicate keys the last
 * one wins (as in Chromium's parser). Malformed or truncated text, a
 * non-string value and a method longer than cap - 1 bytes all count as not
 * found. One pass over the bytes, no allocation. */
int ws_cdp_method(const char *msg, size_t len, char *out, size_t cap);

/* The transport of a blocking-style WebSocket client over a socket from
 * ws_connect, for wslay's callbacks: the server's bytes that arrived with its
 * 101 (the leftover) are read first, then the socket. Both the server's own
 * CDP client (cdp_client.c) and telemetry's capture connection use it. */
struct ws_sock {
    int fd;
    char *extra; /* owned leftover from ws_connect */
    size_t extra_len, extra_off;
};

/* wslay recv/send callback bodies over s (EAGAIN becomes WSLAY_ERR_WOULDBLOCK,
 * other failures WSLAY_ERR_CALLBACK_FAILURE). */
ssize_t ws_sock_recv(wslay_event_context_ptr ws, struct ws_sock *s, uint8_t *buf, size_t len);
ssize_t ws_sock_send(wslay_event_context_ptr ws, struct ws_sock *s, const uint8_t *data, size_t len,
                     int flags);
/* A wslay genmask callback drawing masking keys from the CSPRNG. */
int ws_genmask_cb(wslay_event_context_ptr ws, uint8_t *buf, size_t len, void *user);

#endif
