/*
 * forward: one hop from the node that received a request to the node that
 * runs the request's browser (docs/multinode.md 2(b)). Any node answers any
 * request; a request that needs a live browser owned by another node is
 * passed to that node's advertise URL as it came (method, path, query,
 * headers, body, plus "X-Browserd-Hop: 1"), the owner authenticates it
 * again, and its answer goes back to the client as it arrives: status,
 * headers, and the body streamed (Server-Sent Events stay live), or for a
 * WebSocket upgrade the 101 and then the raw bytes both ways.
 *
 * No HTTP thread waits on the network: each forward parks its request
 * (req_suspend) and runs on a thread of its own, which connects, sends,
 * reads the owner's head, resumes the request, and then pumps the body (or
 * the upgraded connection's bytes) until either side ends. The owner's bytes
 * are untrusted and parsed by core/httpresp.
 */
#ifndef BD_CLUSTER_FORWARD_H
#define BD_CLUSTER_FORWARD_H

#include "http/http.h"

/* The request header that marks a forwarded request. */
#define FORWARD_HOP_HEADER "X-Browserd-Hop"
/* The owner may take as long as it likes to answer (a process exec runs up
 * to 10 minutes, a pool acquire waits as long as it was asked to): no timer
 * runs on the answer. A lost owner is noticed by TCP instead: keepalive
 * probes after FORWARD_KEEPALIVE_IDLE_S of silence, and bytes left
 * unacknowledged for FORWARD_USER_TIMEOUT_MS (probes included) end the
 * connection, which the client sees as a 503 before the head or a cut body
 * or closed WebSocket after it. */
#define FORWARD_KEEPALIVE_IDLE_S 10
#define FORWARD_USER_TIMEOUT_MS  30000
/* Decoded body bytes held for a client that reads slower than the owner
 * writes; the owner is not read while they are full (backpressure). */
#define FORWARD_BUFFER_BYTES (256u * 1024u)
/* Forwards running at once on this node (each holds a thread and a
 * buffer); past it, forward_http answers E_UNAVAIL. */
#define FORWARD_MAX_LIVE 4096

/* Forwards rq to the node at base ("http://host:port", the owner's advertise
 * URL; host a numeric IPv4 address, a bracketed IPv6 one or "localhost"):
 * the same method, rq->orig_path plus the query rebuilt from req_query_each
 * (percent-encoded), the request headers except hop-by-hop ones
 * (Connection and the fields it names, Keep-Alive, Transfer-Encoding, TE,
 * Upgrade, Proxy-*, Expect, Content-Length; Host is set to the owner's),
 * plus "X-Browserd-Hop: 1", and the body (rq->body, rq->body_len, with
 * Content-Length). The owner's answer goes back to rq's client: status,
 * headers (except hop-by-hop ones and Content-Length/Transfer-Encoding,
 * which the HTTP layer sets) and the body streamed as it arrives (chunked,
 * Content-Length or close-delimited from the owner). A body the owner cuts
 * short reaches the client cut short (the connection closes without the end
 * of the body), never as a complete one.
 *
 * Returns HTTP_SUSPEND (the handler returns it), or E_UNAVAIL with rq->err
 * set ("the node running this browser (<base>) cannot be reached: <why>")
 * when base is not a usable URL, the module is stopping, rq is itself a hop
 * (forward_is_hop: never forwarded twice), or the connection fails at once. A connection that
 * cannot be made within connect_ms, or an owner that closes without answering, is answered 503 the
 * same way after the resume; a malformed answer is 502 (E_UPSTREAM). When the client goes away, the
 * connection to the owner is closed (so an SSE stream upstream ends). Call on the HTTP thread that
 * runs rq's handler. */
int forward_http(struct req *rq, struct resp *rs, const char *base, int connect_ms) WUR;

/* The same for a WebSocket upgrade request (CDP, WebDriver BiDi, live
 * view): sends the upgrade request (same path and query, the client's
 * headers incl. Sec-WebSocket-Key/Version/Protocol/Extensions, plus
 * X-Browserd-Hop: 1) and reads the owner's head without blocking the HTTP
 * thread (the request is parked as in forward_http). When it is a valid 101
 * for the client's key, the client gets 101 (resp_upgrade with
 * ws_accept_key of its key, and the owner's Sec-WebSocket-Protocol and
 * -Extensions), and the bytes are then copied both ways unchanged (no
 * framing: extensions and masks stay end to end) until either side closes,
 * which closes the other; the owner's bytes that came after its head go to
 * the client first, the client's bytes after its request head to the owner
 * first. Any other answer (401, 404, 409...) reaches the client as that
 * status and body. Returns HTTP_SUSPEND, E_INVALID (no valid
 * Sec-WebSocket-Key) or E_UNAVAIL as forward_http. */
int forward_upgrade(struct req *rq, struct resp *rs, const char *base, int connect_ms) WUR;

/* 1 when rq came from another node (X-Browserd-Hop present): the caller must
 * not forward it again (a hop that misses the owner answers 503). Any client
 * can send the header; it only keeps its own request from being forwarded
 * (the owner authenticates every request, forwarded or not). */
int forward_is_hop(struct req *rq);

/* Ends every forward: parked requests are answered 503, streamed bodies end
 * cut short, upgraded connections close on both sides; waits (up to 5 s) for
 * their threads to finish. Later forwards answer E_UNAVAIL. Call before
 * http_stop (which must not find parked requests or open upgraded
 * connections). Idempotent. */
void forward_shutdown(void);

#endif
