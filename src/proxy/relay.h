/*
 * relay: the CDP WebSocket relay engine. Clients (Playwright, Puppeteer)
 * talk WebSocket to browserd; the relay forwards every message to the
 * browser's own DevTools WebSocket and back, reporting each client command's
 * method for telemetry. A small fixed number of epoll threads serve every
 * connection; each connection is pinned to one thread. See docs/cdp-relay.md.
 */
#ifndef BD_PROXY_RELAY_H
#define BD_PROXY_RELAY_H

#include <stdint.h>
#include <stddef.h>

#include "core/err.h"

/* A side's outgoing queue above this many bytes pauses reading from the
 * other side until it drains (backpressure). */
#define RELAY_QUEUE_HIGH (8u * 1024u * 1024u)
/* After a close starts, how long the peers get to finish the closing
 * handshake before both sockets are closed anyway. */
#define RELAY_CLOSE_GRACE_MS 3000

struct relay; /* the engine: a small fixed number of epoll threads */

/* Starts nthreads (1..64) relay threads. Returns 0 and *out (owned, release
 * with relay_stop), or E_INVALID / E_INTERNAL when threads or epoll cannot be
 * created. */
int relay_start(unsigned nthreads, struct relay **out, struct err *e) WUR;

/* Closes every connection (close 1001 to both peers, best effort, then the
 * sockets; on_close runs for each), joins the threads, frees. Accepts NULL.
 * No other relay_* call may run concurrently with or after it. */
void relay_stop(struct relay *r);

struct relay_hooks {
    /* Called (on a relay thread) for each complete text/binary message from
     * the client, with its CDP method if any (NULL otherwise) and its length.
     * Must be fast and must not block. May be NULL. */
    void (*on_client_message)(void *ctx, const char *method, size_t len);
    /* Called once when the connection is finished (either side closed,
     * error, or relay_stop), after both sockets are closed; after it returns
     * the relay never touches ctx again. reason is a static string. May be
     * NULL. */
    void (*on_close)(void *ctx, const char *reason);
    /* Called once just before on_close with the number of text and binary
     * messages relayed from each side. May be NULL. */
    void (*on_counts)(void *ctx, uint64_t from_client, uint64_t from_browser);
    /* Closes the client transport: called exactly once instead of
     * close(client_fd) (the HTTP layer owns the socket; libmicrohttpd needs
     * MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE)). If NULL, the relay
     * close()s client_fd itself. */
    void (*close_client)(void *ctx);
    /* Charges delta bytes of messages the relay holds, or gives them back
     * when delta is negative: a message being reassembled from either peer
     * (each data frame's announced length, before it is buffered; given back
     * once the message is relayed) and each peer's outgoing queue (as it
     * grows; given back as it is sent). Every byte charged is given back by
     * the time on_counts runs. 0 admits; anything else ends the connection
     * (a frame is refused with 1009; a queue drops its peer), with reason
     * "message budget full". Called on a relay thread; must not block. May
     * be NULL. */
    int (*charge)(void *ctx, long long delta);
    /* Called (on a relay thread) for each client message whose CDP method was
     * found (msg, len: the whole message, untrusted), before it is relayed:
     * NULL lets it through; anything else (a static string) is why the
     * command is refused. A refused command never reaches the
     * browser; the client gets in its place the CDP error answer
     * {"id", "sessionId" (when the command had one), "error": {"code":
     * -32000, "message": the returned text}} (nothing when the command had no
     * integer id or is over LIM_RELAY_REFUSE_PARSE_BYTES). Must be fast and
     * must not block. May be NULL. */
    const char *(*refuse)(void *ctx, const char *method, const uint8_t *msg, size_t len);
    void *ctx;
};

/* Takes over a client socket that has already received the 101 response
 * (client_fd; client_extra = bytes already read after the client's request
 * head) and an upstream socket from ws_connect (upstream_extra = its
 * leftover), and relays WebSocket messages both ways: client->upstream as a
 * client-side (masked) endpoint, upstream->client as a server-side endpoint.
 * Both sockets are made non-blocking with TCP_NODELAY. Messages over
 * LIM_WS_MESSAGE_BYTES or LIM_WS_FRAGMENTS fragments close that peer with
 * 1009 (and the other with the same code). Pings are answered by the relay;
 * a close from either side is propagated to the other with its code and
 * reason, then both sockets close. Copies the extra buffers and the hooks.
 * Returns 0, or E_UNAVAIL (relay stopping) / E_INTERNAL: then nothing was
 * taken over and the caller still owns and closes both fds. Thread-safe. */
int relay_attach(struct relay *r, int client_fd, const char *client_extra, size_t client_extra_len,
                 int upstream_fd, const char *upstream_extra, size_t upstream_extra_len,
                 const struct relay_hooks *hooks, struct err *e) WUR;

/* Number of live relayed connections (attached and not yet finished). */
size_t relay_count(struct relay *r);

/* Starts closing every connection whose hooks.ctx == ctx (e.g. the session
 * ended) with close code 1001 to both peers; on_close follows on the relay
 * thread once each is finished. Returns how many were asked to close (a
 * connection already asked earlier is not counted again). Thread-safe. */
size_t relay_close_ctx(struct relay *r, void *ctx);

#endif
