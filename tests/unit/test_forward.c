/*
 * Tests for cluster/forward against real sockets: two in-process HTTP
 * servers, "the owner" (routes that echo, fail, stream Server-Sent Events
 * and accept a WebSocket upgrade) and "the front", whose routes forward
 * every request to the owner with forward_http / forward_upgrade, as a node
 * that does not run the browser does. The client is a minimal raw-socket
 * HTTP client that reads responses with core/httpresp. Every wait has a
 * deadline; nothing sleeps a fixed time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cluster/forward.h"
#include "core/httpresp.h"
#include "core/clock.h"
#include "core/xalloc.h"
#include "http/http.h"
#include "proxy/ws.h"

#define DEADLINE_MS 5000

static struct http_server *owner, *front;
static char owner_base[64], dead_base[64], raw_base[64];
static int owner_port, front_port;

/* ---- a minimal client ---- */

static int cli_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void cli_send(int fd, const void *p, size_t n)
{
    const char *b = p;
    while (n) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        assert_true(w > 0);
        b += w;
        n -= (size_t)w;
    }
}

/* A response being read: the head, then the body decoded as it comes. */
struct rd {
    int fd;
    char raw[65536];
    size_t rlen;
    char *headbuf;
    struct httpresp_head h;
    enum httpresp_body kind;
    uint64_t left;
    struct httpresp_chunked ch;
    char *body;
    size_t blen;
    int ended; /* the body is complete */
    int eof;   /* the connection closed */
};

/* Reads more bytes into raw. 0, 1 at EOF, -1 at the deadline. */
static int rd_fill(struct rd *r, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - clock_mono_ms();
        if (left <= 0)
            return -1;
        struct pollfd p = {r->fd, POLLIN, 0};
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        ssize_t n = recv(r->fd, r->raw + r->rlen, sizeof r->raw - r->rlen, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            r->eof = 1;
            return 1;
        }
        r->rlen += (size_t)n;
        return 0;
    }
}

static void rd_take(struct rd *r)
{
    size_t out = r->rlen;
    if (r->kind == HTTPRESP_BODY_CHUNKED) {
        size_t used;
        int rc = httpresp_chunked_decode(&r->ch, r->raw, r->rlen, &used, &out);
        assert_true(rc >= 0);
        r->ended = rc == 1;
    } else if (r->kind == HTTPRESP_BODY_LENGTH) {
        if (out > r->left)
            out = (size_t)r->left;
        r->left -= out;
        r->ended = r->left == 0;
    } else if (r->kind == HTTPRESP_BODY_NONE) {
        out = 0;
        r->ended = 1;
    }
    r->body = xrealloc(r->body, r->blen + out + 1);
    memcpy(r->body + r->blen, r->raw, out);
    r->blen += out;
    r->body[r->blen] = '\0';
    r->rlen = 0;
}

/* Reads the head (0, or -1 at the deadline or EOF first). */
static int rd_head(struct rd *r, int fd, int head_request)
{
    memset(r, 0, sizeof *r);
    r->fd = fd;
    int64_t deadline = clock_mono_ms() + DEADLINE_MS;
    for (;;) {
        int rc = httpresp_parse_head(r->raw, r->rlen, &r->h);
        assert_true(rc >= 0);
        if (rc == 0)
            break;
        if (rd_fill(r, deadline) != 0)
            return -1;
    }
    size_t hl = r->h.head_len;
    r->headbuf = xmalloc(hl);
    memcpy(r->headbuf, r->raw, hl);
    assert_int_equal(httpresp_parse_head(r->headbuf, hl, &r->h), 0);
    memmove(r->raw, r->raw + hl, r->rlen - hl);
    r->rlen -= hl;
    if (r->h.status != 101)
        assert_int_equal(httpresp_body_framing(&r->h, head_request, &r->kind, &r->left), 0);
    httpresp_chunked_init(&r->ch);
    if (r->h.status != 101)
        rd_take(r);
    return 0;
}

/* Reads body bytes until needle appears (NULL: until the body ends or the
 * connection closes). 0, or -1 at the deadline. */
static int rd_until(struct rd *r, const char *needle, int ms)
{
    int64_t deadline = clock_mono_ms() + ms;
    for (;;) {
        if (needle && r->body && strstr(r->body, needle))
            return 0;
        if (r->ended || r->eof)
            return needle ? -1 : 0;
        int rc = rd_fill(r, deadline);
        if (rc < 0)
            return -1;
        rd_take(r);
    }
}

static void rd_free(struct rd *r)
{
    xfree(r->headbuf);
    xfree(r->body);
}

/* A header of the response as a string (static buffer), or NULL. */
static const char *rd_hdr(struct rd *r, const char *name)
{
    static char v[512];
    const struct httpresp_field *f = httpresp_field(&r->h, name);
    if (!f)
        return NULL;
    snprintf(v, sizeof v, "%.*s", (int)f->value_len, f->value);
    return v;
}

/* One whole exchange on a new connection. */
static void request(int port, const char *head, const void *body, size_t body_len, struct rd *r)
{
    int fd = cli_connect(port);
    cli_send(fd, head, strlen(head));
    if (body_len)
        cli_send(fd, body, body_len);
    assert_int_equal(rd_head(r, fd, strncmp(head, "HEAD ", 5) == 0), 0);
    assert_int_equal(rd_until(r, NULL, DEADLINE_MS), 0);
    close(fd);
}

/* ---- the owner ---- */

static void echo_pair(void *ctx, const char *k, const char *v)
{
    json_array_append_new(ctx, v ? json_pack("[s,s]", k, v) : json_pack("[s,n]", k));
}

static void echo_header(void *ctx, const char *k, const char *v)
{
    char low[128];
    snprintf(low, sizeof low, "%s", k);
    for (char *p = low; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p + 32);
    json_object_set_new(ctx, low, json_string(v));
}

static int owner_echo(struct req *rq, struct resp *rs)
{
    json_t *q = json_array(), *h = json_object();
    req_query_each_raw(rq, echo_pair, q);
    req_header_each(rq, echo_header, h);
    resp_json(rs, 200,
              json_pack("{s:s,s:s,s:o,s:o,s:I,s:b}", "method", rq->method, "path", rq->orig_path,
                        "query", q, "headers", h, "body_len", (json_int_t)rq->body_len, "hop",
                        forward_is_hop(rq)));
    resp_header(rs, "X-Owner", "yes");
    resp_header(rs, "Connection", "X-Secret");
    resp_header(rs, "X-Secret", "hop-by-hop");
    return 0;
}

static int owner_raw(struct req *rq, struct resp *rs)
{
    char *b = xmalloc(rq->body_len + 1);
    memcpy(b, rq->body, rq->body_len);
    resp_text(rs, 201, "application/octet-stream", b, rq->body_len);
    resp_header(rs, "X-Owner-Len", "%zu", rq->body_len);
    return 0;
}

static int owner_404(struct req *rq, struct resp *rs)
{
    (void)rs;
    return err_set(&rq->err, E_NOTFOUND, "not_found", "no browser b-404 here");
}

/* A streamed SSE body fed by a producer thread (one at a time). */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char q[4096];
    size_t qlen;
    int ended, freed, acked, ack_timeouts, forever;
    struct http_stream *hs;
    pthread_t producer;
    int running;
} os = {.mu = PTHREAD_MUTEX_INITIALIZER};

static long os_read(void *ctx, char *buf, size_t cap)
{
    (void)ctx;
    pthread_mutex_lock(&os.mu);
    size_t n = os.qlen < cap ? os.qlen : cap;
    memcpy(buf, os.q, n);
    memmove(os.q, os.q + n, os.qlen - n);
    os.qlen -= n;
    long r = n ? (long)n : os.ended ? -1 : 0;
    pthread_mutex_unlock(&os.mu);
    return r;
}

static void os_free(void *ctx)
{
    (void)ctx;
    pthread_mutex_lock(&os.mu);
    os.freed = 1;
    pthread_cond_broadcast(&os.cv);
    pthread_mutex_unlock(&os.mu);
}

/* Queues text and wakes the stream; 0, or -1 once the stream was freed. */
static int os_push(const char *text)
{
    pthread_mutex_lock(&os.mu);
    int freed = os.freed;
    if (!freed && os.qlen + strlen(text) < sizeof os.q) {
        memcpy(os.q + os.qlen, text, strlen(text));
        os.qlen += strlen(text);
        if (os.hs)
            http_stream_wake(os.hs);
    }
    pthread_mutex_unlock(&os.mu);
    return freed ? -1 : 0;
}

static void *os_produce(void *arg)
{
    (void)arg;
    if (os.forever) {
        /* A keepalive every 20 ms until the client is gone. */
        for (;;) {
            if (os_push("data: tick\n\n") < 0)
                return NULL;
            pthread_mutex_lock(&os.mu);
            struct timespec ts = clock_deadline(20);
            if (!os.freed)
                pthread_cond_timedwait(&os.cv, &os.mu, &ts);
            pthread_mutex_unlock(&os.mu);
        }
    }
    for (int i = 1; i <= 3; i++) {
        char ev[64];
        snprintf(ev, sizeof ev, "id: %d\ndata: event %d\n\n", i, i);
        (void)os_push(ev);
        /* The next event only after the client saw this one through the
         * forwarder: a forwarder that buffers to the end times out here. */
        pthread_mutex_lock(&os.mu);
        struct timespec ts = clock_deadline(DEADLINE_MS);
        while (os.acked < i && !os.freed)
            if (pthread_cond_timedwait(&os.cv, &os.mu, &ts) == ETIMEDOUT) {
                os.ack_timeouts++;
                break;
            }
        pthread_mutex_unlock(&os.mu);
    }
    pthread_mutex_lock(&os.mu);
    os.ended = 1;
    if (os.hs && !os.freed)
        http_stream_wake(os.hs);
    pthread_mutex_unlock(&os.mu);
    return NULL;
}

static void os_reset(int forever)
{
    pthread_mutex_lock(&os.mu);
    os.qlen = 0;
    os.ended = os.freed = os.acked = os.ack_timeouts = 0;
    os.forever = forever;
    os.hs = NULL;
    pthread_mutex_unlock(&os.mu);
}

static void os_ack(int i)
{
    pthread_mutex_lock(&os.mu);
    os.acked = i;
    pthread_cond_broadcast(&os.cv);
    pthread_mutex_unlock(&os.mu);
}

static int os_wait_freed(void)
{
    pthread_mutex_lock(&os.mu);
    struct timespec ts = clock_deadline(DEADLINE_MS);
    while (!os.freed)
        if (pthread_cond_timedwait(&os.cv, &os.mu, &ts) == ETIMEDOUT)
            break;
    int f = os.freed;
    pthread_mutex_unlock(&os.mu);
    return f;
}

static int owner_sse(struct req *rq, struct resp *rs)
{
    (void)rq;
    pthread_mutex_lock(&os.mu);
    resp_stream(rs, 200, "text/event-stream", os_read, os_free, NULL, &os.hs);
    pthread_mutex_unlock(&os.mu);
    resp_header(rs, "Cache-Control", "no-cache");
    os.running = pthread_create(&os.producer, NULL, os_produce, NULL) == 0;
    return 0;
}

/* The owner's WebSocket: echoes raw bytes; "quit" in a read makes it close. */
static pthread_mutex_t ws_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ws_cv;
static int ws_closed; /* owner-side connections that ended */

#define BURST_BYTES (200u * 1024u)

static char burst_byte(size_t i)
{
    return (char)((i * 31u) ^ (i >> 9));
}

struct owner_ws {
    int fd;
    int burst; /* sends BURST_BYTES first, without waiting for the client */
    struct http_upgrade *up;
    char extra[256];
    size_t extra_len;
};

static void *owner_ws_echo(void *arg)
{
    struct owner_ws *w = arg;
    int fl = fcntl(w->fd, F_GETFL);
    fcntl(w->fd, F_SETFL, fl & ~O_NONBLOCK);
    if (w->extra_len)
        (void)!send(w->fd, w->extra, w->extra_len, MSG_NOSIGNAL);
    char b[65536];
    for (size_t off = 0; w->burst && off < BURST_BYTES;) {
        size_t n = BURST_BYTES - off < sizeof b ? BURST_BYTES - off : sizeof b;
        for (size_t i = 0; i < n; i++)
            b[i] = burst_byte(off + i);
        ssize_t k = send(w->fd, b, n, MSG_NOSIGNAL);
        if (k <= 0)
            break;
        off += (size_t)k;
    }
    for (;;) {
        ssize_t n = recv(w->fd, b, sizeof b, 0);
        if (n <= 0)
            break;
        if (n >= 4 && memmem(b, (size_t)n, "quit", 4))
            break;
        if (send(w->fd, b, (size_t)n, MSG_NOSIGNAL) != n)
            break;
    }
    http_upgrade_close(w->up);
    xfree(w);
    pthread_mutex_lock(&ws_mu);
    ws_closed++;
    pthread_cond_broadcast(&ws_cv);
    pthread_mutex_unlock(&ws_mu);
    return NULL;
}

static void owner_ws_up(void *ctx, int fd, const char *extra, size_t extra_len,
                        struct http_upgrade *up)
{
    struct owner_ws *w = xcalloc(1, sizeof *w);
    w->burst = ctx != NULL;
    w->fd = fd;
    w->up = up;
    w->extra_len = extra_len < sizeof w->extra ? extra_len : sizeof w->extra;
    memcpy(w->extra, extra, w->extra_len);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, owner_ws_echo, w), 0);
    pthread_detach(t);
}

static int owner_ws(struct req *rq, struct resp *rs)
{
    char acc[29];
    const char *key = req_header(rq, "Sec-WebSocket-Key");
    if (!key || ws_accept_key(key, acc) != 0)
        return err_set(&rq->err, E_INVALID, "bad_request", "no key");
    /* ctx non-NULL: the burst variant (no cancel: ctx is not owned). */
    resp_upgrade(rs, acc, owner_ws_up, NULL, strcmp(rq->path, "/ws-burst") == 0 ? rs : NULL);
    const char *proto = req_header(rq, "Sec-WebSocket-Protocol");
    if (proto)
        resp_header(rs, "Sec-WebSocket-Protocol", "%s", proto);
    return 0;
}

static int owner_ws_deny(struct req *rq, struct resp *rs)
{
    (void)rs;
    return err_set(&rq->err, E_CONFLICT, "conflict", "the browser has ended");
}

static const struct route owner_routes[] = {
    {"GET", "/echo/*", owner_echo, 0},
    {"POST", "/echo/*", owner_echo, 0},
    {"DELETE", "/echo/*", owner_echo, 0},
    {"HEAD", "/echo/*", owner_echo, 0},
    {"POST", "/raw", owner_raw, HTTP_ROUTE_UPLOAD},
    {"GET", "/missing", owner_404, 0},
    {"GET", "/sse", owner_sse, 0},
    {"GET", "/sse-forever", owner_sse, 0},
    {"GET", "/ws", owner_ws, 0},
    {"GET", "/ws-deny", owner_ws_deny, 0},
    {"GET", "/ws-burst", owner_ws, 0},
};

/* ---- the front: forwards everything ---- */

static int front_http(struct req *rq, struct resp *rs)
{
    if (strcmp(rq->path, "/sse-forever") == 0)
        os_reset(1);
    else if (strcmp(rq->path, "/sse") == 0)
        os_reset(0);
    return forward_http(rq, rs, owner_base, 1000);
}

static int front_ws(struct req *rq, struct resp *rs)
{
    return forward_upgrade(rq, rs, owner_base, 1000);
}

static int front_dead(struct req *rq, struct resp *rs)
{
    return forward_http(rq, rs, dead_base, 1000);
}

static int front_raw(struct req *rq, struct resp *rs)
{
    return forward_http(rq, rs, raw_base, 1000);
}

/* "localhost" may resolve to ::1 first, where nobody listens: the next
 * address is tried. */
static int front_localhost(struct req *rq, struct resp *rs)
{
    char base[64];
    snprintf(base, sizeof base, "http://localhost:%d/", owner_port);
    return forward_http(rq, rs, base, 1000);
}

static int front_badbase(struct req *rq, struct resp *rs)
{
    return forward_http(rq, rs, "https://127.0.0.1:1", 1000);
}

static void early_resume(struct req *rq, struct resp *rs)
{
    (void)rq;
    resp_json(rs, 200, json_pack("{s:b}", "early", 1));
}

/* A request resumed before its handler returned (as a forward whose owner
 * answers at once may be): the HTTP layer must still answer it. */
static int front_early(struct req *rq, struct resp *rs)
{
    (void)rs;
    int rc = req_suspend(rq, early_resume, NULL, NULL);
    req_resume(rq);
    return rc;
}

static const struct route front_routes[] = {
    {"GET", "/echo/localhost", front_localhost, 0},
    {"GET", "/badbase", front_badbase, 0},
    {"GET", "/echo/*", front_http, 0},
    {"POST", "/echo/*", front_http, 0},
    {"DELETE", "/echo/*", front_http, 0},
    {"HEAD", "/echo/*", front_http, 0},
    {"POST", "/raw", front_http, HTTP_ROUTE_UPLOAD},
    {"GET", "/missing", front_http, 0},
    {"GET", "/sse", front_http, 0},
    {"GET", "/sse-forever", front_http, 0},
    {"GET", "/ws", front_ws, 0},
    {"GET", "/ws-deny", front_ws, 0},
    {"GET", "/ws-burst", front_ws, 0},
    {"GET", "/dead", front_dead, 0},
    {"GET", "/rawpeer", front_raw, 0},
    {"GET", "/early", front_early, 0},
};

/* ---- a raw peer: answers whatever raw_reply holds, then closes ---- */

static int raw_listen = -1;
static const char *raw_reply; /* NULL: close without answering */
/* A reply that is none: the peer holds the connection until the other end
 * closes it, then counts it in raw_closed. */
static const char raw_hold[] = "hold";
static int raw_closed, raw_held;

static void *raw_peer(void *arg)
{
    (void)arg;
    for (;;) {
        int c = accept(raw_listen, NULL, NULL);
        if (c < 0)
            return NULL;
        char b[4096];
        (void)!recv(c, b, sizeof b, 0);
        const char *reply = __atomic_load_n(&raw_reply, __ATOMIC_SEQ_CST);
        if (reply == raw_hold) {
            __atomic_add_fetch(&raw_held, 1, __ATOMIC_SEQ_CST);
            while (recv(c, b, sizeof b, 0) > 0)
                ;
            __atomic_add_fetch(&raw_closed, 1, __ATOMIC_SEQ_CST);
        } else if (reply)
            (void)!send(c, reply, strlen(reply), MSG_NOSIGNAL);
        close(c);
    }
}

static int setup(void **state)
{
    (void)state;
    clock_cond_init(&os.cv); /* they wait with clock_deadline */
    clock_cond_init(&ws_cv);
    struct err e;
    err_init(&e);
    struct http_config oc = {.host = "127.0.0.1",
                             .threads = 2,
                             .routes = owner_routes,
                             .nroutes = sizeof owner_routes / sizeof owner_routes[0]};
    if (http_start(&oc, &owner, &e) != 0)
        return -1;
    owner_port = http_port(owner);
    snprintf(owner_base, sizeof owner_base, "http://127.0.0.1:%d", owner_port);
    struct http_config fc = oc;
    fc.routes = front_routes;
    fc.nroutes = sizeof front_routes / sizeof front_routes[0];
    if (http_start(&fc, &front, &e) != 0)
        return -1;
    front_port = http_port(front);
    /* A port nobody listens on: bound, then closed. */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof a;
    if (bind(s, (struct sockaddr *)&a, sizeof a) || getsockname(s, (struct sockaddr *)&a, &sl))
        return -1;
    snprintf(dead_base, sizeof dead_base, "http://127.0.0.1:%d", ntohs(a.sin_port));
    close(s);
    raw_listen = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    a.sin_port = 0;
    if (bind(raw_listen, (struct sockaddr *)&a, sizeof a) || listen(raw_listen, 16) ||
        getsockname(raw_listen, (struct sockaddr *)&a, &sl))
        return -1;
    snprintf(raw_base, sizeof raw_base, "http://127.0.0.1:%d", ntohs(a.sin_port));
    pthread_t t;
    if (pthread_create(&t, NULL, raw_peer, NULL) != 0)
        return -1;
    pthread_detach(t);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    forward_shutdown();
    http_stop(front);
    http_stop(owner);
    shutdown(raw_listen, SHUT_RDWR);
    return 0;
}

/* ---- tests ---- */

/* The owner sees the method, the original path and query (percent-encoding
 * intact), the client's headers minus hop-by-hop ones, X-Browserd-Hop: 1 and
 * the body; its status, headers and body come back. */
static void echo_roundtrip(void **state)
{
    (void)state;
    char head[1024];
    snprintf(head, sizeof head,
             "POST /echo/b-1/a%%20b?q=hello%%20world%%20%%26%%20more&x=1&x=2&plus=a%%2Bb&e=&flag "
             "HTTP/1.1\r\nHost: front\r\nAuthorization: Bearer tok-123\r\n"
             "X-Custom: kept\r\nConnection: keep-alive, X-Drop\r\nX-Drop: 1\r\n"
             "Proxy-Authorization: secret\r\nContent-Type: application/json\r\n"
             "Content-Length: 11\r\n\r\n");
    struct rd r;
    request(front_port, head, "{\"a\":\"b\"}\r\n", 11, &r);
    assert_int_equal(r.h.status, 200);
    assert_string_equal(rd_hdr(&r, "X-Owner"), "yes");
    assert_null(rd_hdr(&r, "X-Secret")); /* named by the owner's Connection */
    assert_string_equal(rd_hdr(&r, "Content-Type"), "application/json");
    json_t *j = json_loads(r.body, 0, NULL);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "method")), "POST");
    assert_string_equal(json_string_value(json_object_get(j, "path")), "/echo/b-1/a b");
    json_t *want = json_pack("[[s,s],[s,s],[s,s],[s,s],[s,s],[s,n]]", "q", "hello world & more",
                             "x", "1", "x", "2", "plus", "a+b", "e", "", "flag");
    if (!json_equal(json_object_get(j, "query"), want)) {
        char *got = json_dumps(json_object_get(j, "query"), 0);
        fail_msg("query %s", got);
    }
    json_decref(want);
    json_t *h = json_object_get(j, "headers");
    assert_string_equal(json_string_value(json_object_get(h, "authorization")), "Bearer tok-123");
    assert_string_equal(json_string_value(json_object_get(h, "x-browserd-hop")), "1");
    assert_string_equal(json_string_value(json_object_get(h, "x-custom")), "kept");
    char host[64];
    snprintf(host, sizeof host, "127.0.0.1:%d", owner_port);
    assert_string_equal(json_string_value(json_object_get(h, "host")), host);
    assert_null(json_object_get(h, "x-drop"));
    assert_null(json_object_get(h, "proxy-authorization"));
    assert_int_equal(json_integer_value(json_object_get(j, "body_len")), 11);
    assert_true(json_is_true(json_object_get(j, "hop")));
    json_decref(j);
    rd_free(&r);

    /* The owner does send the field its Connection names (so the check
     * above means something). */
    request(owner_port, "GET /echo/x HTTP/1.1\r\nHost: o\r\n\r\n", NULL, 0, &r);
    assert_string_equal(rd_hdr(&r, "X-Secret"), "hop-by-hop");
    rd_free(&r);

    /* Two forwarded requests on one keep-alive connection. */
    int fd = cli_connect(front_port);
    for (int i = 0; i < 2; i++) {
        const char *g = "GET /echo/ka HTTP/1.1\r\nHost: f\r\n\r\n";
        cli_send(fd, g, strlen(g));
        assert_int_equal(rd_head(&r, fd, 0), 0);
        assert_int_equal(rd_until(&r, NULL, DEADLINE_MS), 0);
        assert_int_equal(r.h.status, 200);
        assert_true(r.ended && !r.eof);
        rd_free(&r);
    }
    close(fd);

    /* A bodiless GET and a HEAD. */
    request(front_port, "GET /echo/x HTTP/1.1\r\nHost: f\r\n\r\n", NULL, 0, &r);
    assert_int_equal(r.h.status, 200);
    j = json_loads(r.body, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(j, "method")), "GET");
    assert_false(json_is_true(json_object_get(json_object_get(j, "headers"), "content-length")));
    json_decref(j);
    rd_free(&r);
    request(front_port, "HEAD /echo/x HTTP/1.1\r\nHost: f\r\n\r\n", NULL, 0, &r);
    assert_int_equal(r.h.status, 200);
    assert_int_equal(r.blen, 0);
    rd_free(&r);
}

/* 1 MiB of binary (NULs included) goes to the owner and comes back. */
static void binary_body(void **state)
{
    (void)state;
    size_t n = 1u << 20;
    char *body = xmalloc(n);
    for (size_t i = 0; i < n; i++)
        body[i] = (char)((i * 7919u) >> 3);
    memset(body + 1000, 0, 64);
    char head[256];
    snprintf(head, sizeof head,
             "POST /raw HTTP/1.1\r\nHost: f\r\nContent-Type: application/octet-stream\r\n"
             "Content-Length: %zu\r\n\r\n",
             n);
    struct rd r;
    request(front_port, head, body, n, &r);
    assert_int_equal(r.h.status, 201);
    assert_string_equal(rd_hdr(&r, "X-Owner-Len"), "1048576");
    assert_string_equal(rd_hdr(&r, "Content-Type"), "application/octet-stream");
    assert_int_equal(r.blen, n);
    assert_memory_equal(r.body, body, n);
    rd_free(&r);
    xfree(body);
}

/* The owner's error status and Error body reach the client. */
static void owner_error(void **state)
{
    (void)state;
    struct rd r;
    request(front_port, "GET /missing HTTP/1.1\r\nHost: f\r\n\r\n", NULL, 0, &r);
    assert_int_equal(r.h.status, 404);
    json_t *j = json_loads(r.body, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(j, "code")), "not_found");
    assert_string_equal(json_string_value(json_object_get(j, "message")), "no browser b-404 here");
    json_decref(j);
    rd_free(&r);
}

/* Events arrive one by one: the owner sends the next only after the client
 * saw the previous one through the forwarder. */
static void sse_is_live(void **state)
{
    (void)state;
    int fd = cli_connect(front_port);
    const char *h = "GET /sse HTTP/1.1\r\nHost: f\r\nAccept: text/event-stream\r\n\r\n";
    cli_send(fd, h, strlen(h));
    struct rd r;
    assert_int_equal(rd_head(&r, fd, 0), 0);
    assert_int_equal(r.h.status, 200);
    assert_string_equal(rd_hdr(&r, "Content-Type"), "text/event-stream");
    assert_string_equal(rd_hdr(&r, "Cache-Control"), "no-cache");
    for (int i = 1; i <= 3; i++) {
        char want[32];
        snprintf(want, sizeof want, "data: event %d\n\n", i);
        assert_int_equal(rd_until(&r, want, DEADLINE_MS), 0);
        assert_false(r.ended);
        os_ack(i);
    }
    assert_int_equal(rd_until(&r, NULL, DEADLINE_MS), 0);
    assert_true(r.ended); /* a whole chunked body: the last chunk came */
    pthread_join(os.producer, NULL);
    assert_int_equal(os.ack_timeouts, 0);
    assert_true(os_wait_freed());
    rd_free(&r);
    close(fd);
}

/* A client that leaves an SSE stream: the owner's stream sees its client
 * gone (its free_cb runs). */
static void sse_client_leaves(void **state)
{
    (void)state;
    int fd = cli_connect(front_port);
    const char *h = "GET /sse-forever HTTP/1.1\r\nHost: f\r\n\r\n";
    cli_send(fd, h, strlen(h));
    struct rd r;
    assert_int_equal(rd_head(&r, fd, 0), 0);
    assert_int_equal(rd_until(&r, "data: tick\n\n", DEADLINE_MS), 0);
    close(fd);
    assert_true(os_wait_freed());
    pthread_join(os.producer, NULL);
    rd_free(&r);
}

/* A base where nobody listens: 503 at once, with the reason. */
static void dead_owner(void **state)
{
    (void)state;
    int64_t t0 = clock_mono_ms();
    struct rd r;
    request(front_port, "GET /dead HTTP/1.1\r\nHost: f\r\n\r\n", NULL, 0, &r);
    int64_t ms = clock_mono_ms() - t0;
    assert_int_equal(r.h.status, 503);
    assert_non_null(strstr(r.body, "cannot be reached"));
    assert_non_null(strstr(r.body, dead_base));
    assert_true(ms < 1000);
    rd_free(&r);
}

/* Bases: "localhost" (every address tried), and what is not http://. */
static void bases(void **state)
{
    (void)state;
    struct rd r;
    request(front_port, "GET /echo/localhost HTTP/1.1\r\nHost: f\r\n\r\n", NULL, 0, &r);
    assert_int_equal(r.h.status, 200);
    assert_non_null(strstr(r.body, "localhost:"));
    rd_free(&r);
    /* A request that is already a hop is not forwarded again. */
    request(front_port, "GET /echo/x HTTP/1.1\r\nHost: f\r\nX-Browserd-Hop: 1\r\n\r\n", NULL, 0,
            &r);
    assert_int_equal(r.h.status, 503);
    assert_non_null(strstr(r.body, "already forwarded once"));
    rd_free(&r);
    request(front_port, "GET /badbase HTTP/1.1\r\nHost: f\r\n\r\n", NULL, 0, &r);
    assert_int_equal(r.h.status, 503);
    assert_non_null(strstr(r.body, "not an http://host:port URL"));
    rd_free(&r);
}

/* A peer that closes without answering is 503; one that answers garbage is
 * 502; a body cut short reaches the client cut short. */
static void bad_owner(void **state)
{
    (void)state;
    struct rd r;
    __atomic_store_n(&raw_reply, NULL, __ATOMIC_SEQ_CST);
    request(front_port, "GET /rawpeer HTTP/1.1\r\nHost: f\r\n\r\n", NULL, 0, &r);
    assert_int_equal(r.h.status, 503);
    assert_non_null(strstr(r.body, "without answering"));
    rd_free(&r);
    __atomic_store_n(&raw_reply, "SSH-2.0-OpenSSH_9.2\r\n", __ATOMIC_SEQ_CST);
    request(front_port, "GET /rawpeer HTTP/1.1\r\nHost: f\r\n\r\n", NULL, 0, &r);
    assert_int_equal(r.h.status, 502);
    rd_free(&r);
    __atomic_store_n(&raw_reply, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this",
                     __ATOMIC_SEQ_CST);
    request(front_port, "GET /rawpeer HTTP/1.1\r\nHost: f\r\n\r\n", NULL, 0, &r);
    assert_int_equal(r.h.status, 200);
    assert_false(r.ended); /* no last chunk: the client knows */
    assert_true(r.eof);
    assert_string_equal(r.body, "only this");
    rd_free(&r);
    __atomic_store_n(&raw_reply,
                     "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nX-A: 1\r\n\r\nto the close",
                     __ATOMIC_SEQ_CST);
    request(front_port, "GET /rawpeer HTTP/1.1\r\nHost: f\r\n\r\n", NULL, 0, &r);
    assert_int_equal(r.h.status, 200);
    assert_true(r.ended);
    assert_string_equal(r.body, "to the close");
    assert_string_equal(rd_hdr(&r, "X-A"), "1");
    rd_free(&r);
}

/* A client that leaves while its request is parked (the owner has not
 * answered yet): the connection to the owner is closed. */
static void client_leaves_while_parked(void **state)
{
    (void)state;
    __atomic_store_n(&raw_reply, raw_hold, __ATOMIC_SEQ_CST);
    int before = __atomic_load_n(&raw_closed, __ATOMIC_SEQ_CST);
    assert_int_equal(__atomic_load_n(&raw_held, __ATOMIC_SEQ_CST), before);
    int fd = cli_connect(front_port);
    const char *h = "GET /rawpeer HTTP/1.1\r\nHost: f\r\n\r\n";
    cli_send(fd, h, strlen(h));
    /* Once the request reached the peer (parked on the front), leave. */
    int64_t deadline = clock_mono_ms() + DEADLINE_MS;
    while (__atomic_load_n(&raw_held, __ATOMIC_SEQ_CST) == before && clock_mono_ms() < deadline) {
        struct pollfd none = {-1, 0, 0};
        (void)poll(&none, 1, 5);
    }
    assert_int_equal(__atomic_load_n(&raw_held, __ATOMIC_SEQ_CST), before + 1);
    close(fd);
    while (__atomic_load_n(&raw_closed, __ATOMIC_SEQ_CST) == before && clock_mono_ms() < deadline) {
        struct pollfd none = {-1, 0, 0};
        (void)poll(&none, 1, 10);
    }
    assert_int_equal(__atomic_load_n(&raw_closed, __ATOMIC_SEQ_CST), before + 1);
    __atomic_store_n(&raw_reply, NULL, __ATOMIC_SEQ_CST);
}

static void early_resume_answers(void **state)
{
    (void)state;
    struct rd r;
    request(front_port, "GET /early HTTP/1.1\r\nHost: f\r\n\r\n", NULL, 0, &r);
    assert_int_equal(r.h.status, 200);
    rd_free(&r);
}

/* ---- WebSocket ---- */

static const char *ws_key = "dGhlIHNhbXBsZSBub25jZQ==";

static int ws_open(int port, const char *path, const char *early, struct rd *r)
{
    int fd = cli_connect(port);
    char head[512];
    snprintf(head, sizeof head,
             "GET %s HTTP/1.1\r\nHost: f\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
             "Sec-WebSocket-Protocol: cdp\r\n\r\n%s",
             path, ws_key, early ? early : "");
    cli_send(fd, head, strlen(head));
    assert_int_equal(rd_head(r, fd, 0), 0);
    return fd;
}

static void recv_exact(int fd, char *b, size_t n)
{
    int64_t deadline = clock_mono_ms() + DEADLINE_MS;
    size_t got = 0;
    while (got < n) {
        struct pollfd p = {fd, POLLIN, 0};
        int64_t left = deadline - clock_mono_ms();
        assert_true(left > 0);
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        ssize_t k = recv(fd, b + got, n - got, 0);
        assert_true(k > 0);
        got += (size_t)k;
    }
}

/* 1 when fd reaches EOF (or an error) before the deadline. */
static int sees_close(int fd)
{
    int64_t deadline = clock_mono_ms() + DEADLINE_MS;
    char b[256];
    for (;;) {
        int64_t left = deadline - clock_mono_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        ssize_t k = recv(fd, b, sizeof b, 0);
        if (k <= 0)
            return 1;
    }
}

static int ws_closed_count(void)
{
    pthread_mutex_lock(&ws_mu);
    int n = ws_closed;
    pthread_mutex_unlock(&ws_mu);
    return n;
}

static int wait_ws_closed(int want)
{
    pthread_mutex_lock(&ws_mu);
    struct timespec ts = clock_deadline(DEADLINE_MS);
    while (ws_closed < want)
        if (pthread_cond_timedwait(&ws_cv, &ws_mu, &ts) == ETIMEDOUT)
            break;
    int ok = ws_closed >= want;
    pthread_mutex_unlock(&ws_mu);
    return ok;
}

static void ws_both_ways(void **state)
{
    (void)state;
    struct rd r;
    int base = ws_closed_count();
    int fd = ws_open(front_port, "/ws", "early", &r);
    assert_int_equal(r.h.status, 101);
    char acc[29];
    assert_int_equal(ws_accept_key(ws_key, acc), 0);
    assert_string_equal(rd_hdr(&r, "Sec-WebSocket-Accept"), acc);
    assert_string_equal(rd_hdr(&r, "Sec-WebSocket-Protocol"), "cdp");
    assert_true(httpresp_has_token(&r.h, "Connection", "upgrade"));
    /* The bytes sent right after the request head went first. */
    char b[5];
    if (r.rlen >= 5)
        memcpy(b, r.raw, 5);
    else {
        memcpy(b, r.raw, r.rlen);
        recv_exact(fd, b + r.rlen, 5 - r.rlen);
    }
    assert_memory_equal(b, "early", 5);
    /* 256 KiB both ways, 4 KiB at a time. */
    char out[4096], in[4096];
    for (int i = 0; i < 64; i++) {
        memset(out, 'a' + i % 26, sizeof out);
        out[0] = '\0';
        cli_send(fd, out, sizeof out);
        recv_exact(fd, in, sizeof in);
        assert_memory_equal(in, out, sizeof out);
    }
    /* The client closes: the owner's side closes. */
    close(fd);
    assert_true(wait_ws_closed(base + 1));
    rd_free(&r);

    /* The owner closes: the client's side closes. */
    fd = ws_open(front_port, "/ws", NULL, &r);
    assert_int_equal(r.h.status, 101);
    cli_send(fd, "ping", 4);
    recv_exact(fd, b, 4);
    cli_send(fd, "quit", 4);
    assert_true(sees_close(fd));
    close(fd);
    rd_free(&r);
}

/* What the owner sends right after its 101, before the client says
 * anything (more than one read's worth), reaches the client whole and in
 * order. */
static void ws_owner_speaks_first(void **state)
{
    (void)state;
    struct rd r;
    int fd = ws_open(front_port, "/ws-burst", NULL, &r);
    assert_int_equal(r.h.status, 101);
    char *b = xmalloc(BURST_BYTES);
    size_t have = r.rlen < BURST_BYTES ? r.rlen : BURST_BYTES;
    memcpy(b, r.raw, have);
    recv_exact(fd, b + have, BURST_BYTES - have);
    for (size_t i = 0; i < BURST_BYTES; i++)
        if (b[i] != burst_byte(i))
            fail_msg("byte %zu differs", i);
    xfree(b);
    cli_send(fd, "echo", 4);
    char e[4];
    recv_exact(fd, e, 4);
    assert_memory_equal(e, "echo", 4);
    close(fd);
    rd_free(&r);
}

/* An owner that refuses the upgrade: the client gets its status and body. */
static void ws_refused(void **state)
{
    (void)state;
    struct rd r;
    int fd = ws_open(front_port, "/ws-deny", NULL, &r);
    assert_int_equal(r.h.status, 409);
    assert_int_equal(rd_until(&r, NULL, DEADLINE_MS), 0);
    assert_non_null(strstr(r.body, "the browser has ended"));
    close(fd);
    rd_free(&r);
    /* No key at all: 400 from the front, nothing forwarded. */
    fd = cli_connect(front_port);
    const char *h =
        "GET /ws HTTP/1.1\r\nHost: f\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
    cli_send(fd, h, strlen(h));
    assert_int_equal(rd_head(&r, fd, 0), 0);
    assert_int_equal(r.h.status, 400);
    close(fd);
    rd_free(&r);
}

/* The round trip of a small message, straight to the owner and through the
 * forwarder: the difference is what the hop adds. */
static double ws_rtt_us(int port, int rounds)
{
    struct rd r;
    int fd = ws_open(port, "/ws", NULL, &r);
    assert_int_equal(r.h.status, 101);
    char msg[32], in[32];
    memset(msg, 'm', sizeof msg);
    for (int i = 0; i < 50; i++) { /* warm up */
        cli_send(fd, msg, sizeof msg);
        recv_exact(fd, in, sizeof in);
    }
    int64_t t0 = clock_mono_us();
    for (int i = 0; i < rounds; i++) {
        cli_send(fd, msg, sizeof msg);
        recv_exact(fd, in, sizeof in);
        assert_memory_equal(in, msg, sizeof msg);
    }
    int64_t us = clock_mono_us() - t0;
    close(fd);
    rd_free(&r);
    return (double)us / rounds;
}

static void ws_added_latency(void **state)
{
    (void)state;
    double direct = 1e9, hop = 1e9;
    /* Best of three runs each: the machine is shared. */
    for (int k = 0; k < 3; k++) {
        double d = ws_rtt_us(owner_port, 1000), h = ws_rtt_us(front_port, 1000);
        direct = d < direct ? d : direct;
        hop = h < hop ? h : hop;
    }
    printf("forward: WebSocket echo round trip %.1f us direct, %.1f us through the hop "
           "(%.1f us added)\n",
           direct, hop, hop - direct);
    /* A figure, not a verdict (timing is for make bench on a quiet host);
     * what the test asserts is that both paths carried every echo. */
    assert_true(direct > 0 && hop > 0);
}

/* forward_shutdown ends a live SSE forward (the client's connection ends)
 * and later forwards answer 503. Runs last. */
static void shutdown_ends_forwards(void **state)
{
    (void)state;
    int fd = cli_connect(front_port);
    const char *h = "GET /sse-forever HTTP/1.1\r\nHost: f\r\n\r\n";
    cli_send(fd, h, strlen(h));
    struct rd r;
    assert_int_equal(rd_head(&r, fd, 0), 0);
    assert_int_equal(rd_until(&r, "data: tick\n\n", DEADLINE_MS), 0);
    forward_shutdown();
    assert_int_equal(rd_until(&r, NULL, DEADLINE_MS), 0);
    assert_true(r.eof);
    assert_false(r.ended); /* cut short */
    close(fd);
    assert_true(os_wait_freed());
    pthread_join(os.producer, NULL);
    rd_free(&r);
    request(front_port, "GET /echo/x HTTP/1.1\r\nHost: f\r\n\r\n", NULL, 0, &r);
    assert_int_equal(r.h.status, 503);
    rd_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(echo_roundtrip),
        cmocka_unit_test(binary_body),
        cmocka_unit_test(owner_error),
        cmocka_unit_test(sse_is_live),
        cmocka_unit_test(sse_client_leaves),
        cmocka_unit_test(dead_owner),
        cmocka_unit_test(bad_owner),
        cmocka_unit_test(bases),
        cmocka_unit_test(client_leaves_while_parked),
        cmocka_unit_test(early_resume_answers),
        cmocka_unit_test(ws_both_ways),
        cmocka_unit_test(ws_refused),
        cmocka_unit_test(ws_owner_speaks_first),
        cmocka_unit_test(ws_added_latency),
        cmocka_unit_test(shutdown_ends_forwards),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
