/*
 * http: the transport. libmicrohttpd with a thread pool (epoll per thread),
 * keep-alive, a router with path parameters, request bodies capped before
 * parsing, JSON responses, and the one table that turns error codes into HTTP
 * statuses (response.c). It knows nothing of the API's resources: routes and
 * the authorization hook come from the caller.
 */
#ifndef BD_HTTP_HTTP_H
#define BD_HTTP_HTTP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/limits.h"

struct MHD_Connection;
struct resp;
struct route;

#define RESP_MAX_HEADERS 8

/* One request. Lives from the first byte to the completed response; every
 * pointer in it is valid for that long. */
struct req {
    struct MHD_Connection *conn;
    const char *method;
    const char *path;      /* routed (after http_config.rewrite) */
    const char *orig_path; /* as the client sent it, without the query */
    const struct route *route;
    const char *params[LIM_PATH_PARAMS]; /* path parameters in pattern order, decoded */
    size_t nparams;
    char *body; /* NUL-terminated; body_len bytes */
    size_t body_len;
    int body_too_big;
    int no_retry;        /* a 5xx answer carries x-should-retry: false (non-idempotent action) */
    int via_session_url; /* path was rewritten by http_config.rewrite (a session's own URL) */
    const char *tenant;  /* set by the authorize hook (borrowed until cleanup): the
                            organization the request acts for, whose share of the
                            transport's budgets (bodies, blocking threads) it takes;
                            NULL: its client address (bodies), none (threads) */
    struct err err;      /* the handler's failure, rendered by the HTTP layer */
    void *app;           /* from http_config.app */
    void *auth;          /* set by the authorize hook, released by its cleanup */
    /* Set by the authorize hook (borrowed, valid for the request's life):
     * the session (its id or name as the path gives it) the request is
     * charged to, with its organization (tenant), for their shares of the
     * blocking threads (HTTP_ROUTE_BLOCKING, http/fairshare.h); NULL for none. */
    const char *tenant_session;
    int64_t start_us;
    int status; /* the status finally sent, for the access log */
    /* Asynchronous requests (req_suspend): */
    void (*resume_fn)(struct req *rq, struct resp *rs); /* builds the response on resume */
    void (*done_fn)(struct req *rq, int delivered);     /* after the exchange ended */
    void *async_ctx;
    int suspended;
    /* Deferred handlers (req_defer): the handler's own state between its
     * steps, and 1 once the server stops (the next step must finish). */
    void *defer_ctx;
    int stopping;
};

/* An upgraded connection (101 Switching Protocols). */
struct http_upgrade;
/* Called on an HTTP thread once the 101 response was sent. fd is the client
 * socket; extra holds bytes the client sent after its request head. The
 * callee now owns the connection and must end it exactly once with
 * http_upgrade_close (from any thread), never with close(fd). */
typedef void (*http_upgrade_fn)(void *ctx, int fd, const char *extra, size_t extra_len,
                                struct http_upgrade *up);

/* A response under construction. */
struct resp {
    int status;
    json_t *json; /* owned; NULL = no body */
    char *text;   /* owned raw body, used when json is NULL */
    size_t text_len;
    const char *content_type;
    struct {
        char name[40];
        char value[128];
    } headers[RESP_MAX_HEADERS];
    size_t nheaders;
    http_upgrade_fn upgrade; /* set by resp_upgrade */
    void (*upgrade_cancel)(void *ctx);
    void *upgrade_ctx;
    struct http_stream *stream; /* set by resp_stream */
    json_t *more_headers;       /* owned, NULL or [[name, value], ...]: headers of any number and
                                   size (a relayed response's); sent after headers[] */
};

/* Returns 0 after filling resp, or an E_* code with req->err filled. */
typedef int (*http_handler_fn)(struct req *rq, struct resp *rs);

struct route {
    const char *method;  /* "GET", "POST", ... */
    const char *pattern; /* "/org/projects/{id}": {x} matches one non-empty segment;
                            a final "*" matches one or more remaining segments */
    http_handler_fn fn;
    unsigned flags; /* passed to the authorize hook; HTTP_ROUTE_UPLOAD and
                       HTTP_ROUTE_LARGE_BODY are the transport's */
};
/* A route flag: the request body may be up to LIM_UPLOAD_BYTES (file uploads)
 * instead of LIM_BODY_BYTES. */
#define HTTP_ROUTE_UPLOAD (1u << 16)
/* A route flag: the handler may block for long (it launches or restarts a
 * browser, acts on one, waits on the network or moves megabytes of disk).
 * It runs on one of the transport's blocking threads (at most
 * LIM_HTTP_BLOCKING_THREADS, started as needed) with the request parked, so
 * that the HTTP thread goes on serving its other connections; the response
 * is sent from the HTTP thread as usual. A request is charged to its tenant
 * (req.tenant and tenant_session) before it waits for such a thread:
 * past LIM_HTTP_BLOCKING_PER_ORG calls queued or running for its
 * organization, or LIM_HTTP_BLOCKING_PER_SESSION for its session, it is
 * answered 429 with Retry-After at once. Such a handler may park the request
 * itself (req_suspend, resp_stream) like any other, but must not rely on
 * running on an HTTP thread (forward_http does: such routes are forwarded by
 * the route hook, before the handler). In-process calls (http_call) and
 * requests that arrive while the server stops run on the calling thread. */
#define HTTP_ROUTE_BLOCKING (1u << 17)
/* A route flag (with HTTP_ROUTE_BLOCKING and HTTP_ROUTE_UPLOAD): the handler
 * reads its raw body as it arrives (req_body_read) instead of finding it in
 * rq->body. It is admitted and queued for a blocking thread on the header
 * pass, before a byte of the body is read, and at most
 * LIM_HTTP_STREAM_BYTES of the body wait for it: a handler that does not
 * read stops the client's upload. The body does not count against the body
 * budget. A handler must copy what it needs of req_header/req_query before
 * its first req_body_read: when the client leaves mid-body the exchange ends
 * (req_body_read fails) and those strings are gone. When
 * http_config.buffer_streams is set (the request may be forwarded to
 * another node), or the request has no body, the body is buffered as on
 * any upload route and req_body_read reads it from rq->body. */
#define HTTP_ROUTE_STREAM (1u << 18)
/* A route flag: a probe that load balancers and supervisors call every few
 * seconds (GET /health, /ready). Its requests are logged at debug level
 * only, so that the access log keeps what clients did; the route hook lets
 * it through to its handler whatever the node's state (the handler says
 * what the state is). */
#define HTTP_ROUTE_PROBE (1u << 19)
/* A route flag: the request body may be up to LIM_LARGE_BODY_BYTES (a JSON
 * body the interface document allows past LIM_BODY_BYTES: the Browser REPL's
 * code, a WebMCP custom tools source) instead of LIM_BODY_BYTES. It is held
 * like any other body, inside its tenant's share of the body budget
 * (http_config.body_share). */
#define HTTP_ROUTE_LARGE_BODY (1u << 20)

/* The next bytes of a streamed body (HTTP_ROUTE_STREAM), waiting for them:
 * > 0 bytes copied into buf, 0 at the end of the body, or E_TOOBIG (past
 * the route's cap) / E_INTERNAL (the client left mid-body) with rq->err
 * filled. */
long req_body_read(struct req *rq, char *buf, size_t cap);
/* The same without waiting: HTTP_BODY_WAIT when no byte, end or failure is
 * there yet. A handler then returns req_defer_body(rq, rs, cont): its thread
 * is released, and cont runs on a blocking thread once the body has bytes,
 * ended, or the client left (or at once with rq->stopping set when the
 * server stops): a client that trickles its body holds no thread. */
#define HTTP_BODY_WAIT (-100000)
long req_body_take(struct req *rq, char *buf, size_t cap);
int req_defer_body(struct req *rq, struct resp *rs, http_handler_fn cont);

struct http_config {
    const char *host; /* numeric IPv4 or IPv6 address */
    int port;         /* 0 = ephemeral */
    unsigned threads; /* HTTP threads; 0 = http_default_threads() */
    const struct route *routes;
    size_t nroutes;
    /* Runs before the handler; returns 0 or an E_* code with rq->err filled. */
    int (*authorize)(struct req *rq, unsigned flags);
    /* Releases rq->auth; may be NULL. */
    void (*cleanup)(struct req *rq);
    /* Called once with the bound port after the socket listens and before
     * any request is served (so that what handlers read of it, such as the
     * public URL of an ephemeral port, is set before the first request). May
     * be NULL. */
    void (*bound)(void *app, int port);
    /* May be NULL. Called with each request's path before routing: returns 1
     * after writing another path into out (cap bytes) to route instead (the
     * request then has via_session_url set, for the authorize hook), 0 to
     * route the path as it is. Must be thread-safe. */
    int (*rewrite)(const char *path, char *out, size_t cap);
    /* May be NULL. Runs after a successful authorize and before the
     * handler, with the route's flags: returns -1 to run the handler here,
     * or what a handler would return (0 with rs filled, HTTP_SUSPEND, an
     * E_* code) after answering the request itself (the cluster forwards a
     * request to the node that runs its browser). */
    int (*route_hook)(struct req *rq, struct resp *rs, unsigned flags);
    /* May be NULL. Called on an HTTP thread once each exchange ended (its
     * access log line written), with rq->auth still set and the time since
     * the request arrived: the audit log. Must not block. */
    void (*completed)(struct req *rq, int64_t duration_us);
    /* May be NULL. Called on the thread that answers, with rq->status set
     * and rq->auth still set, just before the response rs is queued (every
     * response passes here, before a byte of it is sent), with the time
     * since the request arrived: the audit log makes an acknowledged
     * change's entry durable here. Must not block (one write() at most). */
    void (*answering)(struct req *rq, const struct resp *rs, int64_t duration_us);
    void *app;
    /* Hostile clients (docs/http.md); 0 takes the default of core/limits.h.
     * max_connections is capped at half the process's open-files limit;
     * conns_per_ip HTTP_NO_LIMIT counts no address (behind a reverse proxy,
     * where every client has the proxy's). The body share is capped at the
     * budget. */
    unsigned max_connections; /* LIM_HTTP_CONNECTIONS */
    unsigned conns_per_ip;    /* LIM_HTTP_CONNECTIONS_PER_IP */
    unsigned head_timeout_s;  /* LIM_HTTP_HEAD_SECONDS */
    size_t body_budget;       /* LIM_HTTP_BODY_BUDGET_BYTES */
    size_t body_share;        /* LIM_HTTP_BODY_TENANT_BYTES */
    /* Threads for HTTP_ROUTE_BLOCKING handlers, at most (0 =
     * LIM_HTTP_BLOCKING_THREADS, also the most allowed). Each tenant's share
     * (LIM_HTTP_BLOCKING_PER_ORG, _PER_SESSION) counts its calls in flight,
     * parked ones (req_defer) included, and does not shrink with it. */
    unsigned blocking_threads;
    /* HTTP_ROUTE_STREAM bodies are buffered like other uploads (a cluster
     * node may forward the request whole: route_hook). */
    int buffer_streams;
    /* Requests answered count in core/metrics (by route index and status
     * class): set for the process's one served table (main.c), not for a
     * test's or a second server's. */
    int metrics;
};
/* conns_per_ip: no limit per client address. */
#define HTTP_NO_LIMIT 0xffffffffu

struct http_server;

/* Binds and starts serving. Before a byte of a request body is read, the
 * request is routed, authorized, held to its route's size cap and to its
 * tenant's share of the budget of buffered bodies; a refusal is answered at
 * once and the connection closed when a body follows. */
int http_start(const struct http_config *cfg, struct http_server **out, struct err *e) WUR;
/* The HTTP thread count when none is configured: the number of CPUs this
 * process may run on (its affinity mask), at least 1 and at most 16. Slow
 * handlers run on blocking threads (HTTP_ROUTE_BLOCKING), so more HTTP
 * threads than CPUs would only make requests wait for a time slice. */
unsigned http_default_threads(void);
/* The bound port (useful when cfg->port was 0). */
int http_port(const struct http_server *srv);
/* Stops accepting new connections; requests in flight and open connections
 * (including upgraded ones) go on. Idempotent. */
void http_quiesce(struct http_server *srv);
/* Stops accepting, lets in-flight requests finish, frees the server. Upgraded
 * connections must have been closed (http_upgrade_close) before. */
void http_stop(struct http_server *srv);

/* ---- in-process requests (tests of handlers without sockets) ---- */

struct http_call_req {
    const char *method;
    const char *path;           /* without the query */
    const char *const *query;   /* NULL-terminated name, value pairs; may be NULL */
    const char *const *headers; /* the same, names without case */
    const char *body;
    size_t body_len;
};

struct http_call_res {
    int status;
    json_t *json; /* the JSON body, or NULL */
    char *text;   /* a raw body, or NULL */
    size_t text_len;
    json_t *headers; /* {name: value} of the handler's response headers */
};

/* Runs one request through cfg's rewrite, routing, authorize hook, handler
 * and cleanup on the calling thread, as a connection would, and returns the
 * response in *out (http_call_res_clear it). -1 when the handler parked the
 * request, upgraded it or streamed its answer: those need a connection. */
int http_call(const struct http_config *cfg, const struct http_call_req *in,
              struct http_call_res *out);
void http_call_res_clear(struct http_call_res *r);

/* A handler returns HTTP_SUSPEND (after req_suspend) to answer later. */
#define HTTP_SUSPEND 1

/* Parks the request: no response is sent until req_resume. When resumed,
 * resume_fn fills the response on an HTTP thread. done_fn (optional) runs once
 * the exchange is over, with delivered = 1 when the response reached the
 * client's socket and 0 when the client went away first, so that a handler can
 * undo what the response announced. Returns HTTP_SUSPEND for the handler to
 * return. */
int req_suspend(struct req *rq, void (*resume_fn)(struct req *, struct resp *),
                void (*done_fn)(struct req *, int), void *ctx);
/* A handler returns HTTP_DEFER (from req_defer) to continue later. */
#define HTTP_DEFER 2

/* Parks a request of an HTTP_ROUTE_BLOCKING route for ms milliseconds
 * without holding a thread: the handler (or a continuation) returns what
 * this returns, its blocking thread is released, and cont runs on a
 * blocking thread about ms later with the same rq and rs, as a handler
 * would (it may defer again). The request keeps its share of the blocking
 * threads (http/fairshare.h) while parked, and its connection stays
 * suspended. Keep the handler's state in rq->defer_ctx. When the server
 * stops, parked requests run their continuation at once with rq->stopping
 * set: it must then answer (an error) and release what it holds. A request
 * that is not on a blocking thread (the pool is stopping or could not start
 * a thread, or an in-process http_call) sleeps ms here and runs cont
 * directly. */
int req_defer(struct req *rq, struct resp *rs, unsigned ms, http_handler_fn cont);

/* Wakes a suspended request. Thread-safe; call exactly once. */
void req_resume(struct req *rq);
/* 1 when the client of a suspended request has closed its connection. */
int req_client_gone(struct req *rq);
/* The client's socket, or -1 for an in-process request (http_call). Only to
 * watch it (poll, or a dup() that outlives the request): never read, write
 * or close it. Call on the request's HTTP thread or while it is parked. */
int req_client_fd(struct req *rq);

/* The client's address as text into buf (cap bytes; INET6_ADDRSTRLEN
 * suffices), "?" when unknown (an in-process request). Returns buf. */
const char *req_client_ip(struct req *rq, char *buf, size_t cap);
/* Request accessors. Returned strings are borrowed for the request's life. */
const char *req_header(struct req *rq, const char *name);
const char *req_query(struct req *rq, const char *name);
/* Calls fn for each request header (repeated names included). */
void req_header_each(struct req *rq, void (*fn)(void *ctx, const char *k, const char *v),
                     void *ctx);
/* Calls fn for each query argument (repeated keys included). */
void req_query_each(struct req *rq, void (*fn)(void *ctx, const char *k, const char *v), void *ctx);
/* The same with v NULL for an argument without '=' ("?flag"), which
 * req_query_each reports as "" (a forwarded query keeps the difference). */
void req_query_each_raw(struct req *rq, void (*fn)(void *ctx, const char *k, const char *v),
                        void *ctx);
/* Parses the body as a JSON object. An empty body is {} when empty_ok.
 * Fails with E_INVALID (malformed, not an object) or E_TOOBIG. *out is a new
 * reference. */
int req_json_object(struct req *rq, int empty_ok, json_t **out) WUR;
/* Reads limit/offset query parameters (defaults 20 / 0; limit 1..100). */
int req_page(struct req *rq, size_t *limit, size_t *offset) WUR;

/* Response builders. resp_json takes ownership of body. */
void resp_json(struct resp *rs, int status, json_t *body);
void resp_empty(struct resp *rs, int status);
/* A raw body; takes ownership of text (xmalloc'd). */
void resp_text(struct resp *rs, int status, const char *content_type, char *text, size_t len);
void resp_header(struct resp *rs, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Answers 101 Switching Protocols with `Upgrade: websocket` and the given
 * Sec-WebSocket-Accept; fn takes over the socket afterwards. Exactly one of
 * fn and cancel is called: cancel when the upgrade cannot happen (the client
 * went away first), so that ctx is always released. */
void resp_upgrade(struct resp *rs, const char *accept_key, http_upgrade_fn fn,
                  void (*cancel)(void *ctx), void *ctx);
/* Ends an upgraded connection. Thread-safe; call exactly once. */
void http_upgrade_close(struct http_upgrade *up);

/*
 * Streamed bodies (Server-Sent Events): a long-lived response whose bytes a
 * producer hands over as they come, without a thread per client.
 *
 * read fills buf (cap bytes) and returns how many bytes it wrote (> 0); 0
 * when nothing is ready: the connection is then parked (no thread, no
 * polling) until http_stream_wake; -1 to end the body; or -2 to end it cut
 * short (the connection closes without the body's end, so that a client
 * cannot take a truncated body for a whole one). It runs on an HTTP
 * thread and must not block for long. free_cb(ctx) runs exactly once when the
 * response is finished, the client went away (noticed on the next write) or
 * the server stops; from the moment free_cb starts, the producer must not call
 * http_stream_wake again (guard both with the producer's own lock).
 */
struct http_stream;
typedef long (*http_stream_read_fn)(void *ctx, char *buf, size_t cap);
/* Answers status with a body streamed from read (chunked when the client
 * speaks HTTP/1.1). *handle (may be NULL) receives the handle to wake the
 * stream with; it stays valid until free_cb returns. */
void resp_stream(struct resp *rs, int status, const char *content_type, http_stream_read_fn read,
                 void (*free_cb)(void *ctx), void *ctx, struct http_stream **handle);
/* Tells a parked stream that read has bytes again (any thread; cheap when
 * the stream is not parked). */
void http_stream_wake(struct http_stream *st);

/* Sets X-Has-More / X-Next-Offset for a list page. */
void resp_page(struct resp *rs, size_t offset, size_t count, int has_more);

/* The single mapping from E_* codes to HTTP statuses; 500 for unknown codes. */
int http_status_for(int rc);
/* The default Error.code for a status ("bad_request", "not_found", ...). */
const char *http_code_for(int status);
/* Builds the Error record JSON from e (new reference). */
json_t *http_error_json(const struct err *e);

#endif
