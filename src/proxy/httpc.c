/* httpc: one blocking HTTP/1.1 exchange (see the header). */
#include "proxy/httpc.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/xalloc.h"
#include "proxy/tls_client.h"

/* Bytes asked of the socket per read. */
#define READ_BYTES (16u * 1024u)

static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static struct tls_client *tls;

static void httpc_tls_init(void)
{
    struct err e;
    err_init(&e);
    if (tls_client_new(NULL, &tls, &e) != 0)
        tls = NULL;
}

/* Waits until fd is ready for ev; 0, -ETIMEDOUT, or -errno. */
static int wait_fd(int fd, short ev, int64_t deadline)
{
    struct pollfd p = {.fd = fd, .events = ev};
    for (;;) {
        int64_t left = deadline - clock_mono_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        int r = poll(&p, 1, (int)left);
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return -errno;
    }
}

int httpc_connect(int fd, const struct sockaddr *a, socklen_t alen, int64_t deadline_ms)
{
    if (connect(fd, a, alen) == 0)
        return 0;
    if (errno != EINPROGRESS)
        return -errno;
    int w = wait_fd(fd, POLLOUT, deadline_ms);
    if (w != 0)
        return w;
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0)
        return -errno;
    return -soerr;
}

int httpc_dial(const char *host, const char *port, int64_t deadline_ms, struct err *e)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    int g = getaddrinfo(host, port, &hints, &ai);
    if (g != 0)
        return err_set(e, E_UNAVAIL, "unavailable", "%s: cannot resolve: %s", host,
                       gai_strerror(g));
    int fd = -1, rc = -ECONNREFUSED;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) {
            rc = -errno;
            continue;
        }
        rc = httpc_connect(fd, a->ai_addr, a->ai_addrlen, deadline_ms);
        if (rc != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0)
        return err_set(e, E_UNAVAIL, "unavailable", "%s port %s: %s", host, port,
                       rc == -ETIMEDOUT ? "timed out" : strerror(-rc));
    return fd;
}

/* A connection: a socket, TLS on it or not. */
struct conn {
    int fd;
    SSL *ssl;
    int64_t deadline;
};

/* One read or write of at most n bytes, waiting within the deadline. > 0
 * bytes, 0 at the end of the stream, or -1 with errno (ETIMEDOUT). */
static ssize_t conn_io(struct conn *c, void *buf, size_t n, int writing)
{
    for (;;) {
        ssize_t r;
        if (c->ssl)
            r = writing ? tls_client_write(c->ssl, buf, n) : tls_client_read(c->ssl, buf, n);
        else
            r = writing ? send(c->fd, buf, n, MSG_NOSIGNAL) : recv(c->fd, buf, n, 0);
        if (r >= 0)
            return r;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
        /* TLS may need to read while writing and the reverse: wait for both. */
        short ev = c->ssl ? (short)(POLLIN | POLLOUT) : writing ? POLLOUT : POLLIN;
        int w = wait_fd(c->fd, ev, c->deadline);
        if (w != 0) {
            errno = -w;
            return -1;
        }
    }
}

static const char *io_why(void)
{
    return errno == ETIMEDOUT ? "timed out" : strerror(errno);
}

static int httpc_tls_start(struct conn *c, const char *host, struct err *e)
{
    pthread_once(&tls_once, httpc_tls_init);
    if (!tls || !(c->ssl = tls_client_conn(tls, c->fd, host, NULL)))
        return err_set(e, E_UNAVAIL, "unavailable", "TLS is not available on this server");
    char why[256] = "";
    for (;;) {
        int r = tls_client_handshake(c->ssl, why, sizeof why);
        if (r == TLS_OK)
            return 0;
        if (r == TLS_FAILED)
            return err_set(e, E_UNAVAIL, "unavailable", "TLS: %s", why);
        if (wait_fd(c->fd, POLLIN | POLLOUT, c->deadline) != 0)
            return err_set(e, E_UNAVAIL, "unavailable", "the TLS handshake timed out");
    }
}

static int send_request(struct conn *c, const struct httpc_req *rq, struct err *e)
{
    char clen[48] = "";
    if (rq->body)
        snprintf(clen, sizeof clen, "Content-Length: %zu\r\n", rq->body_len);
    char *head = xasprintf("%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: browserd\r\n%s%s"
                           "Connection: close\r\n\r\n",
                           rq->method, rq->target, rq->host, rq->fields ? rq->fields : "", clen);
    const char *parts[2] = {head, rq->body};
    size_t lens[2] = {strlen(head), rq->body ? rq->body_len : 0};
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++)
        for (size_t off = 0; off < lens[i] && rc == 0;) {
            ssize_t w = conn_io(c, (char *)parts[i] + off, lens[i] - off, 1);
            if (w > 0)
                off += (size_t)w;
            else
                rc = err_set(e, E_UNAVAIL, "unavailable", "sending the request failed: %s",
                             w == 0 ? "the connection closed" : io_why());
        }
    xfree(head);
    return rc;
}

/* Reads more of the answer into b: > 0 bytes, 0 when the peer closed, or
 * an error in e. The room was reserved by the caller. */
static ssize_t read_more(struct conn *c, struct buf *b, size_t room, struct err *e)
{
    ssize_t r = conn_io(c, b->p + b->len, room, 0);
    if (r < 0)
        return err_set(e, E_UNAVAIL, "unavailable", "reading the answer failed: %s", io_why());
    b->len += (size_t)r;
    b->p[b->len] = '\0';
    return r;
}

static int too_big(struct err *e, size_t max)
{
    return err_set(e, E_TOOBIG, "payload_too_large", "the answer is larger than %zu bytes", max);
}

static int malformed(struct err *e, const char *what)
{
    return err_set(e, E_UPSTREAM, "bad_gateway", "%s", what);
}

/* Reads the head into b and parses it into h. */
static int read_head(struct conn *c, struct buf *b, struct httpresp_head *h, struct err *e)
{
    for (;;) {
        int p = httpresp_parse_head(b->p ? b->p : "", b->len, h);
        if (p == 0)
            return 0;
        if (p < 0)
            return malformed(e, "the answer is not HTTP");
        if (buf_reserve(b, READ_BYTES) != 0)
            return malformed(e, "the answer is not HTTP");
        ssize_t r = read_more(c, b, READ_BYTES, e);
        if (r < 0)
            return (int)r;
        if (r == 0)
            return malformed(e, "the answer is not HTTP");
    }
}

/* Reads and decodes the body that follows the head (head_len bytes of b)
 * so that b ends with it; *len = its length. */
static int read_body(struct conn *c, struct buf *b, size_t head_len, enum httpresp_body kind,
                     uint64_t length, size_t max, size_t *len, struct err *e)
{
    if (kind == HTTPRESP_BODY_NONE) {
        b->len = head_len;
        b->p[b->len] = '\0';
        *len = 0;
        return 0;
    }
    if (kind == HTTPRESP_BODY_LENGTH && length > max)
        return too_big(e, max);
    struct httpresp_chunked ch;
    httpresp_chunked_init(&ch);
    size_t body = 0;                    /* decoded body bytes, at b->p + head_len */
    size_t pending = b->len - head_len; /* bytes after the head not yet looked at */
    for (;;) {
        char *seg = b->p + head_len + body;
        if (kind == HTTPRESP_BODY_CHUNKED) {
            size_t used = 0, out = 0;
            int d = httpresp_chunked_decode(&ch, seg, pending, &used, &out);
            if (d < 0)
                return malformed(e, "a malformed chunked answer");
            body += out;
            if (body > max)
                return too_big(e, max);
            if (d == 1)
                break;
        } else if (kind == HTTPRESP_BODY_LENGTH) {
            body += pending < length - body ? pending : (size_t)(length - body);
            if (body == length)
                break;
        } else {
            body += pending;
            if (body > max)
                return too_big(e, max);
        }
        b->len = head_len + body;
        if (buf_reserve(b, READ_BYTES) != 0)
            return too_big(e, max);
        ssize_t r = read_more(c, b, READ_BYTES, e);
        if (r < 0)
            return (int)r;
        if (r == 0) {
            if (kind == HTTPRESP_BODY_CLOSE)
                break;
            return malformed(e, "the answer was cut short");
        }
        pending = (size_t)r;
    }
    b->len = head_len + body;
    b->p[b->len] = '\0';
    *len = body;
    return 0;
}

/* Reads the answer, whose bytes stay in b. */
static int read_answer(struct conn *c, const struct httpc_req *rq, struct buf *b,
                       struct httpc_resp *out, struct err *e)
{
    int rc = read_head(c, b, &out->head, e);
    if (rc != 0)
        return rc;
    size_t head_len = out->head.head_len;
    if (rq->head_only) {
        b->len = head_len;
        b->p[b->len] = '\0';
        return 0;
    }
    enum httpresp_body kind;
    uint64_t length = 0;
    if (httpresp_body_framing(&out->head, strcmp(rq->method, "HEAD") == 0, &kind, &length) != 0)
        return malformed(e, "the answer's framing is malformed");
    return read_body(c, b, head_len, kind, length, rq->body_max, &out->body_len, e);
}

int httpc_exchange(int fd, const struct httpc_req *rq, struct httpc_resp *out, struct err *e)
{
    memset(out, 0, sizeof *out);
    /* Every wait is a poll() bounded by the deadline, never a blocking
     * read: the socket is made non-blocking (it is httpc's now). */
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) {
        close(fd);
        return err_set(e, E_UNAVAIL, "unavailable", "the socket: %s", strerror(errno));
    }
    struct conn c = {.fd = fd, .ssl = NULL, .deadline = rq->deadline_ms};
    int rc = rq->tls_host ? httpc_tls_start(&c, rq->tls_host, e) : 0;
    if (rc == 0)
        rc = send_request(&c, rq, e);
    out->sent = rc == 0;
    /* The head, the body, and a read of slack: the body is decoded in
     * place, behind the raw bytes of the last read. */
    struct buf b;
    buf_init(&b, HTTPRESP_HEAD_MAX + rq->body_max + READ_BYTES);
    if (rc == 0)
        rc = read_answer(&c, rq, &b, out, e);
    if (c.ssl) {
        tls_client_close_notify(c.ssl);
        SSL_free(c.ssl);
    }
    close(fd);
    if (rc != 0) {
        buf_free(&b);
        int sent = out->sent;
        memset(out, 0, sizeof *out);
        out->sent = sent;
        return rc;
    }
    /* The buffer moved as it grew: the head's fields point into it again. */
    if (httpresp_parse_head(b.p, b.len, &out->head) != 0) {
        buf_free(&b);
        return malformed(e, "the answer is not HTTP");
    }
    out->status = out->head.status;
    out->raw = b.p;
    out->body = b.p + out->head.head_len;
    return 0;
}

void httpc_resp_free(struct httpc_resp *r)
{
    if (!r)
        return;
    xfree(r->raw);
    r->raw = NULL;
    r->body = NULL;
    r->body_len = 0;
}
