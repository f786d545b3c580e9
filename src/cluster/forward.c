/*
 * forward: passes a request to the node that owns its browser (see the
 * header for the contract).
 *
 * One forward is one `struct fwd` and one thread. The thread's life has
 * three phases:
 *
 *  A. The request is parked (req_suspend). The thread finishes the
 *     non-blocking connect that forward_http started, sends the request head
 *     and body, and reads the owner's answer head (reading while it sends,
 *     so that an owner answering early, say 413, is heard). It then stores
 *     the outcome and calls req_resume; resume_fn turns it into the response
 *     on an HTTP thread. rq is never touched after req_resume.
 *  B. An ordinary answer: the thread reads the owner's body, decodes it
 *     (chunked, Content-Length, or up to close) into a bounded buffer and
 *     wakes the streamed response, whose read callback drains the buffer on
 *     an HTTP thread. A full buffer stops the reading (backpressure).
 *  C. A 101: the thread waits for the HTTP layer to hand over the client's
 *     socket (the upgrade callback), then copies bytes both ways with poll()
 *     until either side closes, and closes both.
 *
 * The thread also watches a dup() of the client's socket for POLLRDHUP in
 * phases A and B: a parked request or a parked stream is not polled by
 * libmicrohttpd, so without it a client that leaves an idle SSE stream
 * would be noticed only at the owner's next keepalive. An eventfd wakes the
 * thread (buffer drained, response finished, shutdown).
 *
 * The struct is reference counted: the thread, the request (until its
 * done_fn), and the streamed response or the pending upgrade each hold one.
 *
 * Why not the blocking client (proxy/httpc): that one returns a whole body
 * bounded by its caller, which fits a call that needs the answer (peer.c).
 * A forward needs what it cannot give: the request body sent while the
 * answer is already read (an early 413), an answer of any length streamed
 * through a bounded ring with backpressure, the client's socket watched
 * for a hang-up, and a 101 that turns into a byte relay. So it shares the
 * parser (core/httpresp: head, framing, chunked decoding) and keeps this
 * loop of its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cluster/forward.h"
#include "core/httpresp.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/xalloc.h"
#include "proxy/ws.h"

/* The request head we build: the client's headers fit in LIM_HEADER_BYTES,
 * the rest is ours. */
#define REQ_HEAD_MAX (LIM_HEADER_BYTES * 4u)
/* Bytes moved per read in each direction of an upgraded connection. */
#define PIPE_BYTES (64u * 1024u)
_Static_assert(FORWARD_BUFFER_BYTES >= PIPE_BYTES, "the ring serves as a pipe buffer");
/* How long forward_shutdown waits for the threads. */
#define SHUTDOWN_WAIT_MS 5000

enum outcome {
    OUT_NONE,     /* phase A still running */
    OUT_ERROR,    /* err_rc/err_msg: answer with an Error */
    OUT_COMPLETE, /* the whole body is in buf */
    OUT_STREAM,   /* the body follows: stream it */
    OUT_UPGRADE,  /* a valid 101 */
};

struct fwd {
    pthread_mutex_t mu;
    int refs;
    struct fwd *next; /* g.live, while the thread runs */

    /* Set up by forward_http / forward_upgrade, then the thread's. */
    char base[256];
    int connect_ms;
    int upgrade;
    int head_request;
    char accept[WS_ACCEPT_LEN + 1];
    struct addrinfo *ai, *ai_next; /* addresses left to try */
    int up;                        /* socket to the owner */
    int client;                    /* dup of the client's socket, or -1 */
    int wake;                      /* eventfd */
    struct buf reqhead;
    const char *body; /* rq->body: valid while the request is parked */
    size_t body_len;
    struct req *rq; /* valid until req_resume */

    /* Phase A's outcome (under mu). */
    enum outcome out;
    int err_rc;
    char err_msg[ERR_MSG_MAX];
    int status;
    json_t *headers; /* [[name, value], ...] for more_headers; owned */

    /* Body framing (the thread's). */
    enum httpresp_body kind;
    uint64_t left; /* HTTPRESP_BODY_LENGTH: bytes still to come */
    struct httpresp_chunked ch;

    /* The buffer: the head in phase A, then decoded body bytes at
     * [roff, roff + rlen) (under mu). */
    char *ring;
    size_t roff, rlen;

    /* Phase B (under mu). */
    struct http_stream *hs;
    int stream_installed, stream_freed;
    int eof, cut; /* the body ended, cut short when cut */

    /* Phase C (under mu). */
    int upgrade_installed, upgraded, cancelled;
    int cfd;
    struct http_upgrade *uph;
    char *cextra;
    size_t cextra_len;

    int req_done;    /* the request's done_fn ran */
    int worker_gone; /* the thread finished */
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct fwd *live;
    int threads;
    int stopping;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* g.cv waits on the monotonic clock (clock_deadline). */
static void g_init(void)
{
    clock_cond_init(&g.cv);
}

static void fwd_unref(struct fwd *f)
{
    pthread_mutex_lock(&f->mu);
    int last = --f->refs == 0;
    pthread_mutex_unlock(&f->mu);
    if (!last)
        return;
    if (f->ai)
        freeaddrinfo(f->ai);
    if (f->up >= 0)
        close(f->up);
    if (f->client >= 0)
        close(f->client);
    if (f->wake >= 0)
        close(f->wake);
    buf_free(&f->reqhead);
    json_decref(f->headers);
    xfree(f->ring);
    xfree(f->cextra);
    pthread_mutex_destroy(&f->mu);
    xfree(f);
}

static void wake_worker(struct fwd *f)
{
    uint64_t one = 1;
    ssize_t n = write(f->wake, &one, sizeof one);
    (void)n; /* a full counter still wakes */
}

static void drain_wake(struct fwd *f)
{
    uint64_t v;
    ssize_t n = read(f->wake, &v, sizeof v);
    (void)n;
}

static int stopping(void)
{
    pthread_mutex_lock(&g.mu);
    int s = g.stopping;
    pthread_mutex_unlock(&g.mu);
    return s;
}

/* Why phase A gave up when wait_up said -1. */
static const char *abandoned(void)
{
    return stopping() ? "the server is stopping" : "the client went away";
}

/* ---- building the request ---- */

/* Appends s percent-encoded: every byte but the unreserved ones (RFC 3986),
 * and in a path also '/' and the sub-delims, ':' and '@'. */
static int put_encoded(struct buf *b, const char *s, int path)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        int plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || strchr("-._~", *p) ||
                    (path && strchr("/!$&'()*+,;=:@", *p));
        char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
        if (plain ? buf_append(b, p, 1) : buf_append(b, e, 3))
            return -1;
    }
    return 0;
}

static int put(struct buf *b, const char *s)
{
    return buf_append(b, s, strlen(s));
}

struct qctx {
    struct buf *b;
    int n, bad;
};

static void put_query_arg(void *ctx, const char *k, const char *v)
{
    struct qctx *q = ctx;
    q->bad |= put(q->b, q->n++ ? "&" : "?") | put_encoded(q->b, k, 0);
    if (v) /* "?flag" stays without '=' (its value is NULL, not "") */
        q->bad |= put(q->b, "=") | put_encoded(q->b, v, 0);
}

/* Hop-by-hop request fields (RFC 9110 7.6.1) and those we set ourselves. */
static int skip_request_field(const char *k, const char *connection)
{
    static const char *const drop[] = {
        "Connection", "Keep-Alive", "Transfer-Encoding", "TE",     "Upgrade",
        "Trailer",    "Host",       "Content-Length",    "Expect", FORWARD_HOP_HEADER};
    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++)
        if (strcasecmp(k, drop[i]) == 0)
            return 1;
    if (strncasecmp(k, "Proxy-", 6) == 0)
        return 1;
    /* The fields that Connection names are hop-by-hop too. */
    size_t kl = strlen(k);
    for (const char *c = connection; c && *c;) {
        c += strspn(c, " \t,");
        size_t n = strcspn(c, " \t,");
        if (n == kl && strncasecmp(c, k, n) == 0)
            return 1;
        c += n;
    }
    return 0;
}

struct hctx {
    struct buf *b;
    const char *connection;
    int bad;
};

static void put_header(void *ctx, const char *k, const char *v)
{
    struct hctx *h = ctx;
    if (skip_request_field(k, h->connection))
        return;
    h->bad |= put(h->b, k) | put(h->b, ": ") | put(h->b, v) | put(h->b, "\r\n");
}

/* Splits "http://host[:port][/]" into host (brackets removed) and port. */
static int parse_base(const char *base, char *host, size_t hcap, char *port, size_t pcap)
{
    if (strncmp(base, "http://", 7) != 0)
        return -1;
    const char *h = base + 7, *he, *rest;
    if (*h == '[') {
        he = strchr(h, ']');
        if (!he)
            return -1;
        h++;
        rest = he + 1;
    } else {
        he = h + strcspn(h, ":/");
        rest = he;
    }
    size_t hl = (size_t)(he - h);
    if (hl == 0 || hl >= hcap)
        return -1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    const char *p = "80";
    size_t pl = 2;
    if (*rest == ':') {
        p = rest + 1;
        pl = strspn(p, "0123456789");
        if (pl == 0 || pl > 5)
            return -1;
        rest = p + pl;
    }
    if (strcmp(rest, "") != 0 && strcmp(rest, "/") != 0)
        return -1;
    if (pl >= pcap)
        return -1;
    memcpy(port, p, pl);
    port[pl] = '\0';
    long v = strtol(port, NULL, 10);
    return v >= 1 && v <= 65535 ? 0 : -1;
}

/* Starts a non-blocking connect to the next address in f->ai_next. Returns 0
 * (connected or in progress, f->up set), or -errno of the last address
 * that failed at once. */
static int connect_next(struct fwd *f)
{
    int er = ECONNREFUSED;
    while (f->ai_next) {
        struct addrinfo *a = f->ai_next;
        f->ai_next = a->ai_next;
        int fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            er = errno;
            continue;
        }
        int one = 1, idle = FORWARD_KEEPALIVE_IDLE_S, intvl = 5, cnt = 3;
        unsigned user = FORWARD_USER_TIMEOUT_MS;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
        (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
        (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
        (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
        (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user, sizeof user);
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 || errno == EINPROGRESS) {
            f->up = fd;
            return 0;
        }
        er = errno;
        close(fd);
    }
    return -er;
}

/* ---- the thread ---- */

/* Records phase A's failure. */
static void fail(struct fwd *f, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(struct fwd *f, int rc, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&f->mu);
    f->out = OUT_ERROR;
    f->err_rc = rc;
    if (rc == E_UNAVAIL)
        snprintf(f->err_msg, sizeof f->err_msg,
                 "the node running this browser (%.200s) cannot be reached: %.200s", f->base, why);
    else
        snprintf(f->err_msg, sizeof f->err_msg,
                 "the node running this browser (%.200s) answered badly: %.200s", f->base, why);
    pthread_mutex_unlock(&f->mu);
}

/* A wait_up result bit: the eventfd woke the thread (the caller looks at
 * its state again). */
#define WOKE (1 << 20)

/* Polls the owner's socket for events, with the wake eventfd and the
 * client's socket (POLLRDHUP). Returns the owner's revents, WOKE added when
 * the eventfd fired (> 0 either way), 0 at the deadline, -1 when the client
 * left or the module stops. */
static int wait_up(struct fwd *f, short events, int64_t deadline_ms)
{
    for (;;) {
        /* No events: not even POLLHUP (a full buffer must not spin). */
        struct pollfd p[3] = {
            {events ? f->up : -1, events, 0}, {f->wake, POLLIN, 0}, {f->client, POLLRDHUP, 0}};
        int64_t left = deadline_ms < 0 ? -1 : deadline_ms - clock_mono_ms();
        if (deadline_ms >= 0 && left <= 0)
            return 0;
        int n = poll(p, f->client >= 0 ? 3 : 2, (int)(left > 60000 ? 60000 : left));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        int woke = 0;
        if (p[1].revents) {
            drain_wake(f);
            if (stopping())
                return -1;
            woke = WOKE;
        }
        if (f->client >= 0 && p[2].revents)
            return -1;
        if (p[0].revents || woke)
            return p[0].revents | woke;
    }
}

/* Phase A's connect: waits for the connection within connect_ms, trying
 * the next address on failure. Returns 0, or fills the failure. */
static int finish_connect(struct fwd *f)
{
    int64_t deadline = clock_mono_ms() + f->connect_ms;
    for (;;) {
        int r = wait_up(f, POLLOUT, deadline);
        if (r < 0) {
            fail(f, E_UNAVAIL, "%s", abandoned());
            return -1;
        }
        if (r == 0) {
            fail(f, E_UNAVAIL, "no connection within %d ms", f->connect_ms);
            return -1;
        }
        if (!(r & (POLLOUT | POLLERR | POLLHUP)))
            continue;
        int er = 0;
        socklen_t sl = sizeof er;
        if (getsockopt(f->up, SOL_SOCKET, SO_ERROR, &er, &sl) != 0)
            er = errno;
        if (er == 0)
            return 0;
        close(f->up);
        f->up = -1;
        int rc = f->ai_next ? connect_next(f) : -er;
        if (rc != 0) {
            fail(f, E_UNAVAIL, "%s", strerror(-rc));
            return -1;
        }
    }
}

/* Sends the request and reads the answer's head into f->ring. Returns the
 * head's length with *h filled, or -1 after fail(). Interim 1xx answers
 * other than 101 are skipped. */
static long exchange(struct fwd *f, struct httpresp_head *h, size_t *have)
{
    size_t sent = 0, total = f->reqhead.len + f->body_len, len = 0;
    int sending = 1;
    for (;;) {
        short ev = (short)(POLLIN | (sending ? POLLOUT : 0));
        int r = wait_up(f, ev, -1); /* no deadline: see FORWARD_USER_TIMEOUT_MS */
        if (r <= 0) {
            fail(f, E_UNAVAIL, "%s", abandoned());
            return -1;
        }
        if (sending && (r & (POLLOUT | POLLERR | POLLHUP))) {
            struct iovec iov[2];
            int n = 0;
            if (sent < f->reqhead.len)
                iov[n++] = (struct iovec){f->reqhead.p + sent, f->reqhead.len - sent};
            size_t boff = sent > f->reqhead.len ? sent - f->reqhead.len : 0;
            if (f->body_len > boff)
                iov[n++] = (struct iovec){(char *)f->body + boff, f->body_len - boff};
            struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
            ssize_t w = sendmsg(f->up, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0)
                sent += (size_t)w;
            else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                sending = 0; /* the owner may have answered before reading it all */
            if (sent == total)
                sending = 0;
        }
        if (!(r & (POLLIN | POLLERR | POLLHUP)))
            continue;
        ssize_t n = recv(f->up, f->ring + len, FORWARD_BUFFER_BYTES - len, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            continue;
        if (n <= 0) {
            fail(f, E_UNAVAIL, "%s",
                 n == 0 ? "it closed the connection without answering" : strerror(errno));
            return -1;
        }
        len += (size_t)n;
        for (;;) {
            int rc = httpresp_parse_head(f->ring, len, h);
            if (rc == 1)
                break;
            if (rc != 0) {
                fail(f, E_UPSTREAM, "a malformed HTTP response");
                return -1;
            }
            if (h->status >= 200 || h->status == 101) {
                *have = len;
                return (long)h->head_len;
            }
            /* 100 Continue, 103 Early Hints: not the answer. */
            memmove(f->ring, f->ring + h->head_len, len - h->head_len);
            len -= h->head_len;
        }
    }
}

/* Hop-by-hop response fields, and those the HTTP layer writes itself. */
static int skip_response_field(const struct httpresp_head *h, const struct httpresp_field *fl)
{
    static const char *const drop[] = {"Connection",
                                       "Keep-Alive",
                                       "Transfer-Encoding",
                                       "TE",
                                       "Trailer",
                                       "Upgrade",
                                       "Content-Length",
                                       "Date",
                                       "Sec-WebSocket-Accept",
                                       "Proxy-Authenticate"};
    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++)
        if (strlen(drop[i]) == fl->name_len && strncasecmp(fl->name, drop[i], fl->name_len) == 0)
            return 1;
    if (fl->name_len >= 6 && strncasecmp(fl->name, "Proxy-", 6) == 0)
        return 1;
    char name[128];
    if (fl->name_len >= sizeof name)
        return 0;
    memcpy(name, fl->name, fl->name_len);
    name[fl->name_len] = '\0';
    return httpresp_has_token(h, "Connection", name);
}

/* Appends the body bytes p[0..n), raw from the owner and received at the
 * end of the decoded ones (ring + roff + rlen, which the reader does not
 * move), to the decoded body. Returns 1 when the body is complete, 0 when
 * more follows, -1 when the framing is broken. */
static int take_body(struct fwd *f, char *p, size_t n)
{
    size_t out = n;
    int done = 0;
    if (f->kind == HTTPRESP_BODY_CHUNKED) {
        size_t used;
        int rc = httpresp_chunked_decode(&f->ch, p, n, &used, &out);
        if (rc < 0)
            return -1;
        done = rc == 1;
    } else if (f->kind == HTTPRESP_BODY_LENGTH) {
        if ((uint64_t)out > f->left)
            out = (size_t)f->left;
        f->left -= out;
        done = f->left == 0;
    } else if (f->kind == HTTPRESP_BODY_NONE) {
        out = 0;
        done = 1;
    }
    pthread_mutex_lock(&f->mu);
    f->rlen += out;
    if (done)
        f->eof = 1;
    if (f->hs && !f->stream_freed)
        http_stream_wake(f->hs);
    pthread_mutex_unlock(&f->mu);
    return done;
}

/* Turns the owner's head into the outcome. Returns 0, or -1 after fail(). */
static int take_head(struct fwd *f, const struct httpresp_head *h, size_t have)
{
    json_t *hdrs = json_array();
    for (size_t i = 0; i < h->nfields; i++) {
        const struct httpresp_field *fl = &h->fields[i];
        if (skip_response_field(h, fl))
            continue;
        json_array_append_new(
            hdrs, json_pack("[s#,s#]", fl->name, (int)fl->name_len, fl->value, (int)fl->value_len));
    }
    size_t extra = have - h->head_len;
    if (h->status == 101) {
        const struct httpresp_field *acc = httpresp_field(h, "Sec-WebSocket-Accept");
        const struct httpresp_field *upg = httpresp_field(h, "Upgrade");
        if (!f->upgrade || !acc || acc->value_len != WS_ACCEPT_LEN ||
            memcmp(acc->value, f->accept, WS_ACCEPT_LEN) != 0 || !upg || upg->value_len != 9 ||
            strncasecmp(upg->value, "websocket", 9) != 0 ||
            !httpresp_has_token(h, "Connection", "upgrade")) {
            json_decref(hdrs);
            fail(f, E_UPSTREAM, "an invalid 101 Switching Protocols");
            return -1;
        }
        memmove(f->ring, f->ring + h->head_len, extra);
        pthread_mutex_lock(&f->mu);
        f->rlen = extra;
        f->status = 101;
        f->headers = hdrs;
        f->out = OUT_UPGRADE;
        pthread_mutex_unlock(&f->mu);
        return 0;
    }
    if (httpresp_body_framing(h, f->head_request, &f->kind, &f->left) != 0) {
        json_decref(hdrs);
        fail(f, E_UPSTREAM, "an HTTP response with invalid body framing");
        return -1;
    }
    httpresp_chunked_init(&f->ch);
    memmove(f->ring, f->ring + h->head_len, extra);
    f->roff = f->rlen = 0;
    int done = take_body(f, f->ring, extra);
    if (done < 0) {
        json_decref(hdrs);
        fail(f, E_UPSTREAM, "a malformed chunked body");
        return -1;
    }
    pthread_mutex_lock(&f->mu);
    f->status = h->status;
    f->headers = hdrs;
    f->out = done ? OUT_COMPLETE : OUT_STREAM;
    pthread_mutex_unlock(&f->mu);
    return 0;
}

/* Phase B: reads the rest of the body into the buffer until it ends, the
 * client leaves or the response is finished. */
static void pump_body(struct fwd *f)
{
    for (;;) {
        pthread_mutex_lock(&f->mu);
        int done = f->eof || f->stream_freed || (f->req_done && !f->stream_installed);
        if (!done && f->roff && FORWARD_BUFFER_BYTES - f->roff - f->rlen < 16384) {
            memmove(f->ring, f->ring + f->roff, f->rlen);
            f->roff = 0;
        }
        size_t tail = f->roff + f->rlen; /* the reader keeps the sum */
        size_t space = FORWARD_BUFFER_BYTES - tail;
        pthread_mutex_unlock(&f->mu);
        if (done)
            return;
        int r = wait_up(f, space ? POLLIN : 0, -1);
        if (r < 0)
            break;
        if (!r || !space)
            continue;
        if (f->kind == HTTPRESP_BODY_LENGTH && (uint64_t)space > f->left)
            space = (size_t)f->left;
        ssize_t n = recv(f->up, f->ring + tail, space, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            continue;
        if (n <= 0) {
            pthread_mutex_lock(&f->mu);
            f->eof = 1;
            /* Only a close-delimited body may end with the connection. */
            f->cut = n < 0 || f->kind != HTTPRESP_BODY_CLOSE;
            if (f->hs && !f->stream_freed)
                http_stream_wake(f->hs);
            pthread_mutex_unlock(&f->mu);
            return;
        }
        if (take_body(f, f->ring + tail, (size_t)n) < 0)
            break;
    }
    /* The client left, the module stops, or the body is malformed: what
     * was sent stays sent and the rest is cut. */
    pthread_mutex_lock(&f->mu);
    f->eof = 1;
    f->cut = 1;
    if (f->hs && !f->stream_freed)
        http_stream_wake(f->hs);
    pthread_mutex_unlock(&f->mu);
}

struct pipe_dir {
    int from, to;
    char *b;
    size_t off, len;
};

/* Sends what d holds without blocking. Returns -1 when `to` failed. */
static int pipe_flush(struct pipe_dir *d)
{
    while (d->len) {
        ssize_t w = send(d->to, d->b + d->off, d->len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        d->off += (size_t)w;
        d->len -= (size_t)w;
    }
    d->off = 0;
    return 0;
}

/* Reads what `from` has into the empty d and sends it on. Returns -1 when
 * either side closed or failed. */
static int pipe_move(struct pipe_dir *d)
{
    ssize_t n = recv(d->from, d->b, PIPE_BYTES, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    if (n <= 0)
        return -1;
    d->off = 0;
    d->len = (size_t)n;
    return pipe_flush(d);
}

/* Phase C: waits for the client's socket, then copies bytes both ways. */
static void pump_upgrade(struct fwd *f)
{
    for (;;) {
        pthread_mutex_lock(&f->mu);
        int ready = f->upgraded, gone = f->cancelled || (f->req_done && !f->upgrade_installed);
        pthread_mutex_unlock(&f->mu);
        if (ready)
            break;
        if (gone)
            return;
        struct pollfd p = {f->wake, POLLIN, 0};
        if (poll(&p, 1, -1) > 0)
            drain_wake(f);
        if (stopping())
            return; /* the upgrade callback closes the client if it comes */
    }
    if (f->client >= 0) {
        close(f->client); /* the real socket is here now */
        f->client = -1;
    }
    /* The bytes each side sent after its head go first: the owner's are
     * in the ring already (which then serves as that direction's buffer),
     * the client's are copied in front. */
    size_t cap = f->cextra_len > PIPE_BYTES ? f->cextra_len : PIPE_BYTES;
    struct pipe_dir c2u = {f->cfd, f->up, xmalloc(cap), 0, f->cextra_len};
    struct pipe_dir u2c = {f->up, f->cfd, f->ring, 0, f->rlen};
    if (f->cextra_len)
        memcpy(c2u.b, f->cextra, f->cextra_len);
    int ok = pipe_flush(&c2u) == 0 && pipe_flush(&u2c) == 0;
    while (ok) {
        struct pollfd p[3] = {
            {f->cfd, (short)((c2u.len ? 0 : POLLIN) | (u2c.len ? POLLOUT : 0)), 0},
            {f->up, (short)((u2c.len ? 0 : POLLIN) | (c2u.len ? POLLOUT : 0)), 0},
            {f->wake, POLLIN, 0}};
        int r = poll(p, 3, -1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            break;
        if (p[2].revents) {
            drain_wake(f);
            if (stopping())
                break;
        }
        if ((p[0].revents & POLLOUT) && pipe_flush(&u2c) < 0)
            break;
        if ((p[1].revents & POLLOUT) && pipe_flush(&c2u) < 0)
            break;
        if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && !c2u.len && pipe_move(&c2u) < 0)
            break;
        if ((p[1].revents & (POLLIN | POLLHUP | POLLERR)) && !u2c.len && pipe_move(&u2c) < 0)
            break;
        if ((p[0].revents | p[1].revents) & (POLLERR | POLLNVAL))
            break;
    }
    xfree(c2u.b);
    pthread_mutex_lock(&f->mu);
    close(f->up);
    f->up = -1;
    struct http_upgrade *uph = f->uph;
    f->uph = NULL;
    pthread_mutex_unlock(&f->mu);
    http_upgrade_close(uph);
}

static void *worker(void *arg)
{
    struct fwd *f = arg;
    struct httpresp_head *h = xmalloc(sizeof *h);
    size_t have = 0;
    int ok = finish_connect(f) == 0 && exchange(f, h, &have) >= 0 && take_head(f, h, have) == 0;
    xfree(h);
    pthread_mutex_lock(&f->mu);
    enum outcome out = f->out;
    struct req *rq = f->rq;
    f->rq = NULL;
    pthread_mutex_unlock(&f->mu);
    req_resume(rq);
    if (ok && out == OUT_STREAM)
        pump_body(f);
    else if (ok && out == OUT_UPGRADE)
        pump_upgrade(f);

    pthread_mutex_lock(&f->mu);
    f->worker_gone = 1;
    if (!f->eof) {
        f->eof = 1;
        f->cut = 1;
    }
    if (f->hs && !f->stream_freed)
        http_stream_wake(f->hs);
    if (f->up >= 0) {
        /* The owner sees its client leave (an SSE stream there ends). */
        close(f->up);
        f->up = -1;
    }
    /* Handed over while the thread was giving up (shutdown). */
    struct http_upgrade *uph = f->uph;
    f->uph = NULL;
    pthread_mutex_unlock(&f->mu);
    if (uph)
        http_upgrade_close(uph);

    pthread_mutex_lock(&g.mu);
    for (struct fwd **p = &g.live; *p; p = &(*p)->next)
        if (*p == f) {
            *p = f->next;
            break;
        }
    pthread_mutex_unlock(&g.mu);
    fwd_unref(f);
    pthread_mutex_lock(&g.mu);
    g.threads--;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    return NULL;
}

/* ---- the HTTP side ---- */

static long stream_read(void *ctx, char *out, size_t cap)
{
    struct fwd *f = ctx;
    pthread_mutex_lock(&f->mu);
    size_t n = f->rlen < cap ? f->rlen : cap;
    int was_full = f->roff + f->rlen == FORWARD_BUFFER_BYTES;
    memcpy(out, f->ring + f->roff, n);
    f->roff += n;
    f->rlen -= n;
    long r = (long)n;
    if (!n && f->eof)
        r = f->cut ? -2 : -1;
    pthread_mutex_unlock(&f->mu);
    if (n && was_full)
        wake_worker(f);
    return r;
}

static void stream_free(void *ctx)
{
    struct fwd *f = ctx;
    pthread_mutex_lock(&f->mu);
    f->stream_freed = 1;
    pthread_mutex_unlock(&f->mu);
    wake_worker(f);
    fwd_unref(f);
}

static void on_upgrade(void *ctx, int fd, const char *extra, size_t extra_len,
                       struct http_upgrade *up)
{
    struct fwd *f = ctx;
    pthread_mutex_lock(&f->mu);
    int orphan = f->worker_gone;
    if (!orphan) {
        f->upgraded = 1;
        f->cfd = fd;
        f->uph = up;
        f->cextra = extra_len ? xmalloc(extra_len) : NULL;
        if (extra_len)
            memcpy(f->cextra, extra, extra_len);
        f->cextra_len = extra_len;
    }
    pthread_mutex_unlock(&f->mu);
    if (orphan)
        http_upgrade_close(up);
    else
        wake_worker(f);
    fwd_unref(f);
}

static void on_upgrade_cancel(void *ctx)
{
    struct fwd *f = ctx;
    pthread_mutex_lock(&f->mu);
    f->cancelled = 1;
    pthread_mutex_unlock(&f->mu);
    wake_worker(f);
    fwd_unref(f);
}

static void resume(struct req *rq, struct resp *rs)
{
    struct fwd *f = rq->async_ctx;
    pthread_mutex_lock(&f->mu);
    if (f->out == OUT_UPGRADE && f->worker_gone) {
        f->out = OUT_ERROR;
        f->err_rc = E_UNAVAIL;
        snprintf(f->err_msg, sizeof f->err_msg, "the server is stopping");
    }
    switch (f->out) {
    case OUT_NONE:
    case OUT_ERROR: {
        int rc = f->err_rc ? f->err_rc : E_UNAVAIL;
        err_set(&rq->err, rc, http_code_for(http_status_for(rc)), "%s", f->err_msg);
        resp_json(rs, http_status_for(rc), http_error_json(&rq->err));
        if (rq->no_retry)
            resp_header(rs, "x-should-retry", "false");
        break;
    }
    case OUT_COMPLETE: {
        char *body = xmalloc(f->rlen + 1);
        memcpy(body, f->ring + f->roff, f->rlen);
        resp_text(rs, f->status, NULL, body, f->rlen);
        rs->more_headers = f->headers;
        f->headers = NULL;
        break;
    }
    case OUT_STREAM:
        resp_stream(rs, f->status, NULL, stream_read, stream_free, f, &f->hs);
        f->stream_installed = 1;
        f->refs++;
        rs->more_headers = f->headers;
        f->headers = NULL;
        break;
    case OUT_UPGRADE:
        resp_upgrade(rs, f->accept, on_upgrade, on_upgrade_cancel, f);
        f->upgrade_installed = 1;
        f->refs++;
        rs->more_headers = f->headers;
        f->headers = NULL;
        break;
    }
    pthread_mutex_unlock(&f->mu);
}

static void done(struct req *rq, int delivered)
{
    (void)delivered;
    struct fwd *f = rq->async_ctx;
    pthread_mutex_lock(&f->mu);
    f->req_done = 1;
    pthread_mutex_unlock(&f->mu);
    wake_worker(f);
    fwd_unref(f);
}

static int unavailable(struct req *rq, const char *base, const char *why)
{
    return err_set(&rq->err, E_UNAVAIL, "unavailable",
                   "the node running this browser (%s) cannot be reached: %s", base, why);
}

static int start(struct req *rq, const char *base, int connect_ms, int upgrade)
{
    char host[128], port[8];
    if (parse_base(base, host, sizeof host, port, sizeof port) != 0)
        return unavailable(rq, base, "its address is not an http://host:port URL");
    if (stopping())
        return unavailable(rq, base, "the server is stopping");
    /* One hop at most, even if a caller forgot forward_is_hop: two nodes
     * that disagree about the owner must not pass a request back and forth. */
    if (forward_is_hop(rq))
        return unavailable(rq, base, "the request was already forwarded once");
    struct fwd *f = xcalloc(1, sizeof *f);
    pthread_mutex_init(&f->mu, NULL);
    f->up = f->client = f->cfd = -1;
    f->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    snprintf(f->base, sizeof f->base, "%s", base);
    f->connect_ms = connect_ms > 0 ? connect_ms : 1;
    f->upgrade = upgrade;
    f->head_request = strcmp(rq->method, "HEAD") == 0;
    f->refs = 1;
    buf_init(&f->reqhead, REQ_HEAD_MAX);
    int rc = 0;
    if (upgrade) {
        const char *key = req_header(rq, "Sec-WebSocket-Key");
        if (!key || ws_accept_key(key, f->accept) != 0)
            rc = err_set(&rq->err, E_INVALID, "bad_request",
                         "a WebSocket upgrade needs a valid Sec-WebSocket-Key");
    }
    /* The request head, built here while the accessors are valid. */
    struct qctx q = {&f->reqhead, 0, 0};
    struct hctx hc = {&f->reqhead, req_header(rq, "Connection"), 0};
    int bad = put(&f->reqhead, rq->method) | put(&f->reqhead, " ") |
              put_encoded(&f->reqhead, rq->orig_path, 1);
    req_query_each_raw(rq, put_query_arg, &q);
    bad |= q.bad | put(&f->reqhead, " HTTP/1.1\r\nHost: ");
    bad |= strchr(host, ':')
               ? put(&f->reqhead, "[") | put(&f->reqhead, host) | put(&f->reqhead, "]")
               : put(&f->reqhead, host);
    bad |= put(&f->reqhead, ":") | put(&f->reqhead, port) | put(&f->reqhead, "\r\n");
    req_header_each(rq, put_header, &hc);
    bad |= hc.bad | put(&f->reqhead, FORWARD_HOP_HEADER ": 1\r\n");
    if (upgrade) {
        bad |= put(&f->reqhead, "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
    } else {
        char cl[64];
        snprintf(cl, sizeof cl, "Content-Length: %zu\r\n", rq->body_len);
        int has_body = rq->body_len || !strcmp(rq->method, "POST") || !strcmp(rq->method, "PUT") ||
                       !strcmp(rq->method, "PATCH");
        bad |=
            (has_body ? put(&f->reqhead, cl) : 0) | put(&f->reqhead, "Connection: close\r\n\r\n");
        f->body = rq->body;
        f->body_len = rq->body_len;
    }
    if (!rc && bad)
        rc = err_set(&rq->err, E_TOOBIG, "payload_too_large", "the request head is too large");
    if (!rc && f->wake < 0)
        rc = unavailable(rq, base, strerror(errno));
    if (!rc) {
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
        if (strcmp(host, "localhost") != 0)
            hints.ai_flags |= AI_NUMERICHOST;
        int gr = getaddrinfo(host, port, &hints, &f->ai);
        if (gr != 0)
            rc = unavailable(rq, base, gai_strerror(gr));
    }
    if (!rc) {
        f->ai_next = f->ai;
        int cr = connect_next(f);
        if (cr != 0)
            rc = unavailable(rq, base, strerror(-cr));
    }
    if (rc) {
        fwd_unref(f);
        return rc;
    }
    int cfd = req_client_fd(rq);
    f->client = cfd >= 0 ? fcntl(cfd, F_DUPFD_CLOEXEC, 0) : -1;
    f->ring = xmalloc(FORWARD_BUFFER_BYTES);
    f->rq = rq;
    f->refs = 2; /* the thread and the request */

    pthread_once(&g_once, g_init);
    pthread_mutex_lock(&g.mu);
    if (g.stopping || g.threads >= FORWARD_MAX_LIVE) {
        int busy = !g.stopping;
        pthread_mutex_unlock(&g.mu);
        f->refs = 1;
        fwd_unref(f);
        return unavailable(rq, base,
                           busy ? "too many forwards in flight" : "the server is stopping");
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256u * 1024u);
    pthread_t t;
    int tr = pthread_create(&t, &attr, worker, f);
    pthread_attr_destroy(&attr);
    if (tr != 0) {
        pthread_mutex_unlock(&g.mu);
        f->refs = 1;
        fwd_unref(f);
        return unavailable(rq, base, "no thread for the forward");
    }
    f->next = g.live;
    g.live = f;
    g.threads++;
    pthread_mutex_unlock(&g.mu);
    return req_suspend(rq, resume, done, f);
}

int forward_http(struct req *rq, struct resp *rs, const char *base, int connect_ms)
{
    (void)rs;
    return start(rq, base, connect_ms, 0);
}

int forward_upgrade(struct req *rq, struct resp *rs, const char *base, int connect_ms)
{
    (void)rs;
    return start(rq, base, connect_ms, 1);
}

int forward_is_hop(struct req *rq)
{
    return req_header(rq, FORWARD_HOP_HEADER) != NULL;
}

void forward_shutdown(void)
{
    pthread_once(&g_once, g_init);
    pthread_mutex_lock(&g.mu);
    g.stopping = 1;
    for (struct fwd *f = g.live; f; f = f->next)
        wake_worker(f);
    int64_t deadline = clock_mono_ms() + SHUTDOWN_WAIT_MS;
    while (g.threads > 0 && clock_mono_ms() < deadline) {
        struct timespec ts = clock_deadline(deadline - clock_mono_ms());
        pthread_cond_timedwait(&g.cv, &g.mu, &ts);
    }
    int left = g.threads;
    pthread_mutex_unlock(&g.mu);
    if (left)
        log_warn("forward: %d forwards still running at shutdown", left);
}
