/*
 * The session relay (issue 31.10): the one way a session's own browser
 * reaches this server. A page or an extension inside the browser (Stagehand
 * 4 opens its own CDP WebSocket to cdp_ws_url) connects to the server's port;
 * the session's egress sends that tunnel here instead of refusing it
 * (egress_config.self_port), preceded by the line
 * "BROWSERD-SELF <session id> <org id>\r\n" that only the egress writes. This
 * listener answers exactly one request per connection:
 * `GET /browser/cdp?jwt=T[&target=ID]` with a WebSocket upgrade, T a valid
 * cdp token OF THAT SESSION; then the connection is the session's CDP relay
 * (the attach hook: api/browsers browsers_cdp_fd). Anything else (the API, the admin API,
 * another session's token, a second request) is a 403 and the connection
 * closes. docs/egress-proxy.md.
 */
#ifndef BD_PROXY_SELFRELAY_H
#define BD_PROXY_SELFRELAY_H

#include "core/err.h"

/* What the relay asks of the server, on a handshake thread. */
struct selfrelay_hooks {
    /* 0 when jwt is a valid, unexpired cdp token of session sid in org org;
     * anything else refuses the request (403). */
    int (*verify)(void *ctx, const char *jwt, const char *sid, const char *org);
    /* Hands fd, whose WebSocket upgrade the relay has checked (accept is the
     * Sec-WebSocket-Accept value to answer with), to session sid's CDP relay
     * (target: a page's id, or NULL for the browser), org the session's
     * organization (what its relayed messages are charged to). 0: fd is the callee's;
     * otherwise fd stays the caller's and e says why: E_INVALID (a target
     * that is no page id) is answered 400, anything else 502. */
    int (*attach)(void *ctx, const char *org, const char *sid, const char *target, int fd,
                  const char *accept, struct err *e);
    void *ctx;
};

/* Binds 127.0.0.1:0 on the host and starts the accepting thread; *port is
 * the port, for the egress's config (read by it atomically; the caller
 * protects it from pages with egress_protect_port). hooks is copied. 0, or
 * E_INTERNAL with e filled. */
int selfrelay_start(const struct selfrelay_hooks *hooks, int *port, struct err *e) WUR;

/* Stops accepting and waits (bounded) for the handshakes in progress;
 * relays already attached end with the relay engine. Before the relay and
 * the session manager stop. Idempotent; a no-op when not started. */
void selfrelay_fini(void);

#endif
