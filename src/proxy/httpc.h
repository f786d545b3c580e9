/*
 * httpc: one blocking HTTP/1.1 exchange (a request with Connection: close,
 * its whole answer) on the calling thread, for the server's own small
 * clients: chromedriver's loopback API (runtime/chromedriver.c), the
 * extension store (runtime/extfetch.c), OTLP collectors
 * (telemetry/otlp.c) and another node's API (cluster/peer.c).
 *
 * The caller connects: each keeps its own address rule (netguard_dial for
 * addresses a tenant or a redirect names, httpc_dial for the operator's own
 * hosts, a socket in a sandbox's namespace for chromedriver), then hands
 * the socket to httpc_exchange. TLS, when asked, runs over it through
 * proxy/tls_client with the system's trusted roots.
 *
 * The answer is untrusted bytes, parsed by core/httpresp: the head is
 * bounded by HTTPRESP_HEAD_MAX, the body by the caller's body_max, and the
 * buffer grows with the bytes that arrived, never with a length the peer
 * announced. One deadline (monotonic) bounds the whole exchange: connect,
 * TLS handshake, every write and every read.
 *
 * Threads: any thread; nothing is shared between calls but the TLS context,
 * made once (pthread_once). cluster/forward.c shares the parser but not this
 * client: it streams an answer of any length back to a parked request and
 * relays upgrades, on a non-blocking socket it polls with the client's.
 */
#ifndef BD_PROXY_HTTPC_H
#define BD_PROXY_HTTPC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "core/err.h"
#include "core/httpresp.h"

struct httpc_req {
    const char *method; /* "GET", "POST", ... */
    const char *target; /* origin-form: "/path?query" */
    const char *host;   /* the Host field's value ("name:port" when not the default) */
    /* More header lines, each "Name: value\r\n", or NULL. The caller has
     * refused CR and LF inside them. Host, User-Agent: browserd,
     * Content-Length (when body is set) and Connection: close are sent
     * by httpc. */
    const char *fields;
    const char *body; /* NULL: no body and no Content-Length */
    size_t body_len;
    const char *tls_host; /* NULL: plain; else TLS, the certificate verified for this name */
    size_t body_max;      /* the largest body accepted (decoded) */
    int head_only;        /* 1: stop after the head (the body is neither read nor kept) */
    int64_t deadline_ms;  /* clock_mono_ms() deadline of the whole exchange */
};

/* An answer. head's fields and body point into raw, which the struct owns
 * (httpc_resp_free). body is NUL-terminated (not counted in body_len). */
struct httpc_resp {
    int status;
    struct httpresp_head head;
    char *body;
    size_t body_len;
    int sent; /* 1 once the whole request went out (also set on failure) */
    char *raw;
};

/* A non-blocking TCP connection to host:port (a name is resolved, every
 * address tried in turn) within deadline_ms (clock_mono_ms). No address
 * rule: for the operator's own hosts only. Returns the socket, or E_UNAVAIL
 * with "HOST: cannot resolve: ..." or "HOST port PORT: <why>" in e. */
int httpc_dial(const char *host, const char *port, int64_t deadline_ms, struct err *e) WUR;

/* Connects the socket fd (non-blocking or not) to a within deadline_ms.
 * Returns 0 or a negative errno (-ETIMEDOUT when the deadline passed). fd
 * stays the caller's either way. */
int httpc_connect(int fd, const struct sockaddr *a, socklen_t alen, int64_t deadline_ms) WUR;

/* Sends rq on the connected socket fd, which httpc takes: it is closed
 * before the call returns, on success and on failure. On 0, *out holds the
 * answer (any status; the caller frees it with httpc_resp_free). On failure
 * *out holds nothing to free but out->sent, and the error is in e:
 *  E_UNAVAIL  the connection failed, timed out, or TLS did not verify:
 *             "sending the request failed: timed out", "reading the answer
 *             failed: Connection reset by peer", "TLS: ...";
 *  E_UPSTREAM the bytes are not an HTTP/1.x answer: "the answer is not
 *             HTTP", "a malformed chunked answer", "the answer was cut
 *             short", "the answer's framing is malformed";
 *  E_TOOBIG   the body passes rq->body_max: "the answer is larger than N
 *             bytes".
 * Messages name neither host nor path: the caller says whom it asked. */
int httpc_exchange(int fd, const struct httpc_req *rq, struct httpc_resp *out, struct err *e) WUR;

/* Frees what *r owns; r may be NULL or hold nothing. */
void httpc_resp_free(struct httpc_resp *r);

#endif
