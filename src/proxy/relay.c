/*
 * relay: CDP WebSocket relay on wslay and epoll. Design: docs/cdp-relay.md.
 *
 * Each connection has two sides, each a wslay event context on one socket:
 * the client side is a server endpoint (expects masked frames), the upstream
 * side is a client endpoint (masks what it sends). A message completed on one
 * side is queued on the other and written right away. epoll is
 * level-triggered, so a side may stop reading (backpressure) or stop
 * draining a socket early without losing a wakeup.
 *
 * Syscalls, not parsing, are what a relayed message costs, so both
 * directions are batched per wakeup: a side reads its socket into its
 * thread's read buffer (RELAY_RBUF: one recv() for many small messages
 * instead of one per 4 KiB, wslay's own buffer; wslay takes all of it before
 * the read returns, so one buffer per thread serves every connection) and
 * gathers the frames wslay writes into an output buffer of its own
 * (RELAY_OBUF) sent with one send() once every message read was queued; a
 * frame that does not fit goes out behind the gathered bytes in one
 * sendmsg().
 *
 * Ownership: a connection belongs to the thread it was handed to. Other
 * threads only touch it through the thread's inbox (attach), the relay-wide
 * registry (relay_close_ctx sets close_req under the registry lock) and the
 * thread's eventfd. wslay callbacks only set flags; a connection is finished
 * (sockets closed, hooks called) at a safe point of the loop and its memory
 * released after the current batch of epoll events.
 */
#include "proxy/relay.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <jansson.h>
#include <wslay/wslay.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/xalloc.h"
#include "proxy/ws.h"

#define RELAY_MAX_THREADS 64
#define RELAY_METHOD_MAX  128
#define RELAY_EVENTS      64
/* Most bytes one read event takes from a socket, so that a fast peer cannot
 * hold the thread (its other connections wait) or outrun backpressure. */
#define RELAY_READ_BUDGET (256u * 1024u)
/* A thread's read buffer; a side's output buffer (allocated on first use:
 * small, since a frame bigger than what is left of it is sent directly). */
#define RELAY_RBUF (64u * 1024u)
#define RELAY_OBUF (16u * 1024u)

enum { SIDE_CLIENT = 0, SIDE_UPSTREAM = 1 };

struct conn;

struct side {
    struct conn *c;
    int idx; /* SIDE_CLIENT or SIDE_UPSTREAM */
    int fd;
    wslay_event_context_ptr ws;
    char *extra; /* bytes read from fd before the takeover, fed to wslay first */
    size_t extra_len, extra_off;
    size_t roff, rlen; /* bytes of the thread's rbuf not yet given to wslay */
    uint8_t *obuf;     /* RELAY_OBUF: frames gathered, not yet sent */
    size_t olen;
    uint32_t armed;  /* epoll events currently registered */
    int registered;  /* fd is in the epoll set */
    int dead;        /* transport failed: no more I/O on it */
    int drained;     /* last recv() was short: the socket is empty for now */
    size_t budget;   /* bytes this read event may still take from the socket */
    int closing;     /* a close frame was received from or queued to this peer */
    int rejected;    /* over a cap: drop what wslay still delivers */
    unsigned frames; /* data frames of the message being received */
    size_t charged;  /* bytes of it charged through hooks.charge */
    size_t qcharged; /* bytes of the outgoing queue charged through hooks.charge */
};

struct rthread;

struct conn {
    struct rthread *t;
    struct side s[2];
    struct relay_hooks hooks;
    struct conn *next, *prev;   /* thread's list, or inbox (next only) */
    struct conn *gnext, *gprev; /* relay-wide registry, under relay.lock */
    int close_req;              /* relay_close_ctx asked; under relay.lock */
    int close_done;             /* thread has acted on close_req */
    int finished;
    int64_t deadline_us; /* close grace deadline; 0 while not closing */
    const char *reason;
    uint64_t msgs[2]; /* messages relayed from each side (index: SIDE_*) */
};

struct rthread {
    struct relay *r;
    pthread_t tid;
    int started;
    int epfd, evfd;
    pthread_mutex_t qlock;
    struct conn *inbox; /* under qlock */
    int stopping;       /* under qlock */
    struct conn *conns; /* owned by the thread */
    struct conn *graveyard;
    size_t nclosing;
    uint8_t rbuf[RELAY_RBUF]; /* the side being read; empty between reads */
};

struct relay {
    struct rthread *threads;
    unsigned n;
    atomic_uint rr;
    atomic_size_t count;
    pthread_mutex_t lock; /* registry */
    struct conn *all;
};

static int side_paused(const struct side *s);
static void side_fail(struct side *s);

/* ---- wslay callbacks: I/O and flags only, never free anything --------- */

static ssize_t side_recv_cb(wslay_event_context_ptr ws, uint8_t *buf, size_t len, int flags,
                            void *user)
{
    (void)flags;
    struct side *s = user;
    if (s->extra_off < s->extra_len) {
        size_t n = s->extra_len - s->extra_off;
        if (n > len)
            n = len;
        memcpy(buf, s->extra + s->extra_off, n);
        s->extra_off += n;
        if (s->extra_off == s->extra_len) {
            xfree(s->extra);
            s->extra = NULL;
            s->extra_len = s->extra_off = 0;
        }
        return (ssize_t)n;
    }
    if (s->roff < s->rlen) {
        size_t n = s->rlen - s->roff;
        if (n > len)
            n = len;
        memcpy(buf, s->c->t->rbuf + s->roff, n);
        s->roff += n;
        return (ssize_t)n;
    }
    /* A short read means the socket was empty: skip the recv() that would
     * only say EAGAIN. Stopping early is safe too: level-triggered epoll
     * reports what is left. */
    if (s->drained || s->budget == 0 || side_paused(s)) {
        wslay_event_set_error(ws, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    uint8_t *rbuf = s->c->t->rbuf;
    size_t want = s->budget < RELAY_RBUF ? s->budget : RELAY_RBUF;
    ssize_t n = recv(s->fd, rbuf, want, 0);
    if (n > 0) {
        metrics_add(METRICS_RELAY_BYTES, (uint64_t)n);
        if ((size_t)n < want)
            s->drained = 1;
        s->budget -= (size_t)n;
        s->rlen = (size_t)n;
        s->roff = (size_t)n < len ? (size_t)n : len;
        memcpy(buf, rbuf, s->roff);
        return (ssize_t)s->roff;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        wslay_event_set_error(ws, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    wslay_event_set_error(ws, WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
}

/* Drops the first n gathered bytes (they were sent). */
static void side_obuf_consume(struct side *s, size_t n)
{
    if (n < s->olen)
        memmove(s->obuf, s->obuf + n, s->olen - n);
    s->olen -= n;
}

/* wslay writes every frame as a header and a payload, in separate calls:
 * both are gathered in obuf (sent by side_flush once wslay has written every
 * queued message). A piece that does not fit goes out now, behind what is
 * gathered, in one sendmsg(). */
static ssize_t side_send_cb(wslay_event_context_ptr ws, const uint8_t *data, size_t len, int flags,
                            void *user)
{
    (void)flags;
    struct side *s = user;
    if (s->olen + len <= RELAY_OBUF) {
        if (s->obuf == NULL)
            s->obuf = xmalloc(RELAY_OBUF);
        memcpy(s->obuf + s->olen, data, len);
        s->olen += len;
        return (ssize_t)len;
    }
    struct iovec iov[2];
    int n = 0;
    if (s->olen > 0)
        iov[n++] = (struct iovec){.iov_base = s->obuf, .iov_len = s->olen};
    iov[n++] = (struct iovec){.iov_base = (void *)data, .iov_len = len};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t w = sendmsg(s->fd, &mh, MSG_NOSIGNAL);
    if (w < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            wslay_event_set_error(ws, WSLAY_ERR_WOULDBLOCK);
        else
            wslay_event_set_error(ws, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }
    if ((size_t)w < s->olen) {
        side_obuf_consume(s, (size_t)w);
        wslay_event_set_error(ws, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    w -= (ssize_t)s->olen;
    s->olen = 0;
    if (w == 0) {
        wslay_event_set_error(ws, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    return w;
}

/*
 * Masking keys for frames to the browser. RFC 6455 asks for unpredictable
 * masks so that a hostile page cannot steer the bytes an intermediary sees;
 * this hop runs over loopback to our own Chromium with no intermediary, so a
 * per-thread xorshift generator seeded from the CSPRNG is enough, and it
 * keeps OpenSSL (and its getpid fork check) off the per-message path.
 */
static _Thread_local uint64_t mask_state;

static int side_genmask_cb(wslay_event_context_ptr ws, uint8_t *buf, size_t len, void *user)
{
    (void)ws;
    (void)user;
    if (mask_state == 0)
        while (mask_state == 0)
            crypto_random(&mask_state, sizeof mask_state);
    for (size_t i = 0; i < len; i++) {
        mask_state ^= mask_state << 13;
        mask_state ^= mask_state >> 7;
        mask_state ^= mask_state << 17;
        buf[i] = (uint8_t)(mask_state >> 32);
    }
    return 0;
}

/* Queues a close frame to s unless one was already exchanged. code 0 sends
 * a close without a status code. */
static void side_queue_close(struct side *s, uint16_t code, const uint8_t *reason, size_t rlen)
{
    if (s->dead || s->closing)
        return;
    s->closing = 1;
    if (code == 0 || code == WSLAY_CODE_NO_STATUS_RCVD || code == WSLAY_CODE_ABNORMAL_CLOSURE ||
        code == WSLAY_CODE_TLS_HANDSHAKE)
        rlen = 0;
    if (code == WSLAY_CODE_NO_STATUS_RCVD)
        code = 0;
    else if (code == WSLAY_CODE_ABNORMAL_CLOSURE || code == WSLAY_CODE_TLS_HANDSHAKE)
        code = WSLAY_CODE_GOING_AWAY;
    if (rlen > 123)
        rlen = 123;
    (void)wslay_event_queue_close(s->ws, code, reason, rlen);
}

static void side_frame_start_cb(wslay_event_context_ptr ws,
                                const struct wslay_event_on_frame_recv_start_arg *arg, void *user)
{
    struct side *s = user;
    struct conn *c = s->c;
    if (wslay_is_ctrl_frame(arg->opcode))
        return;
    if (++s->frames > LIM_WS_FRAGMENTS && !s->rejected) {
        s->rejected = 1;
        wslay_event_shutdown_read(ws);
        (void)wslay_event_queue_close(ws, WSLAY_CODE_MESSAGE_TOO_BIG, NULL, 0);
        return;
    }
    /* A frame over the message cap is refused by wslay before it buffers
     * anything; every other frame, from either peer, is charged before its
     * payload is read. */
    if (c->hooks.charge == NULL || s->rejected || arg->payload_length == 0 ||
        arg->payload_length > LIM_WS_MESSAGE_BYTES)
        return;
    if (c->hooks.charge(c->hooks.ctx, (long long)arg->payload_length) == 0) {
        s->charged += (size_t)arg->payload_length;
        return;
    }
    static const char why[] = "message budget full";
    s->rejected = 1;
    if (c->reason == NULL)
        c->reason = why;
    wslay_event_shutdown_read(ws);
    (void)wslay_event_queue_close(ws, WSLAY_CODE_MESSAGE_TOO_BIG, (const uint8_t *)why,
                                  sizeof why - 1);
}

/* Gives back what a side's message in progress was charged. */
static void side_uncharge(struct side *s)
{
    struct conn *c = s->c;
    if (s->charged && c->hooks.charge != NULL)
        (void)c->hooks.charge(c->hooks.ctx, -(long long)s->charged);
    s->charged = 0;
}

/* Brings what a side's outgoing queue is charged to what it holds (wslay
 * copies a relayed message into it and frees it once sent; a peer that
 * never reads keeps it: RELAY_QUEUE_HIGH pauses the other side's reading,
 * but one message may pass it by up to its own size). A queue its tenant's
 * share cannot take ends the connection: that peer is dropped as failed. */
static void side_settle(struct side *s)
{
    struct conn *c = s->c;
    if (c->hooks.charge == NULL)
        return;
    size_t q = s->dead ? 0 : wslay_event_get_queued_msg_length(s->ws);
    if (q < s->qcharged)
        (void)c->hooks.charge(c->hooks.ctx, -(long long)(s->qcharged - q));
    else if (q > s->qcharged && c->hooks.charge(c->hooks.ctx, (long long)(q - s->qcharged)) != 0) {
        if (c->reason == NULL)
            c->reason = "message budget full";
        side_fail(s);
        if (s->qcharged)
            (void)c->hooks.charge(c->hooks.ctx, -(long long)s->qcharged);
        q = 0;
    }
    s->qcharged = q;
}

/* Answers a command the refuse hook refused, on the client's side s, as the
 * browser answers a failed command (relay.h). Rare: the command is parsed
 * whole here, never on the hot path, and only up to
 * LIM_RELAY_REFUSE_PARSE_BYTES (a larger one gets no answer). */
static void side_answer_refused(struct side *s, const uint8_t *msg, size_t len, const char *why)
{
    json_t *cmd =
        len <= LIM_RELAY_REFUSE_PARSE_BYTES ? json_loadb((const char *)msg, len, 0, NULL) : NULL;
    json_t *id = json_object_get(cmd, "id");
    json_t *sid = json_object_get(cmd, "sessionId");
    if (json_is_integer(id) && !s->dead && !s->closing) {
        json_t *ans =
            json_pack("{s:O,s:{s:i,s:s}}", "id", id, "error", "code", -32000, "message", why);
        if (json_is_string(sid))
            json_object_set(ans, "sessionId", sid);
        char *text = jsonx_dump(ans);
        struct wslay_event_msg m = {
            .opcode = WSLAY_TEXT_FRAME, .msg = (const uint8_t *)text, .msg_length = strlen(text)};
        (void)wslay_event_queue_msg(s->ws, &m);
        xfree(text);
        json_decref(ans);
    }
    json_decref(cmd);
}

static void side_msg_cb(wslay_event_context_ptr ws, const struct wslay_event_on_msg_recv_arg *arg,
                        void *user)
{
    (void)ws;
    struct side *s = user;
    struct conn *c = s->c;
    struct side *o = &c->s[!s->idx];
    if (arg->opcode == WSLAY_CONNECTION_CLOSE) {
        s->closing = 1;
        if (c->reason == NULL)
            c->reason = s->idx == SIDE_CLIENT ? "client closed" : "browser closed";
        const uint8_t *why = arg->msg_length > 2 ? arg->msg + 2 : NULL;
        side_queue_close(o, arg->status_code, why, why ? arg->msg_length - 2 : 0);
        return;
    }
    if (arg->opcode != WSLAY_TEXT_FRAME && arg->opcode != WSLAY_BINARY_FRAME)
        return; /* pings are answered by wslay, pongs need nothing */
    s->frames = 0;
    side_uncharge(s); /* wslay_event_queue_msg below copies the message */
    if (s->rejected)
        return;
    c->msgs[s->idx]++;
    if (s->idx == SIDE_CLIENT && (c->hooks.on_client_message || c->hooks.refuse)) {
        char method[RELAY_METHOD_MAX];
        int found = ws_cdp_method((const char *)arg->msg, arg->msg_length, method, sizeof(method));
        if (c->hooks.on_client_message)
            c->hooks.on_client_message(c->hooks.ctx, found ? method : NULL, arg->msg_length);
        const char *why = found && c->hooks.refuse
                              ? c->hooks.refuse(c->hooks.ctx, method, arg->msg, arg->msg_length)
                              : NULL;
        if (why) {
            side_answer_refused(s, arg->msg, arg->msg_length, why);
            return;
        }
    }
    if (o->dead || o->closing)
        return;
    struct wslay_event_msg m = {
        .opcode = arg->opcode, .msg = arg->msg, .msg_length = arg->msg_length};
    (void)wslay_event_queue_msg(o->ws, &m);
}

static const struct wslay_event_callbacks side_callbacks = {
    .recv_callback = side_recv_cb,
    .send_callback = side_send_cb,
    .genmask_callback = side_genmask_cb,
    .on_frame_recv_start_callback = side_frame_start_cb,
    .on_msg_recv_callback = side_msg_cb,
};

/* ---- per-connection state machine (relay thread only) ---------------- */

static void side_unregister(struct side *s)
{
    if (s->registered) {
        (void)epoll_ctl(s->c->t->epfd, EPOLL_CTL_DEL, s->fd, NULL);
        s->registered = 0;
        s->armed = 0;
    }
}

static void side_fail(struct side *s)
{
    if (s->dead)
        return;
    s->dead = 1;
    side_unregister(s);
    if (s->c->reason == NULL)
        s->c->reason = s->idx == SIDE_CLIENT ? "client disconnected" : "browser disconnected";
}

/* Has bytes to write: queued in wslay or gathered in obuf. */
static int side_want_write(struct side *s)
{
    return s->olen > 0 || wslay_event_want_write(s->ws);
}

/* Lets wslay write every queued frame (gathered in obuf), then sends what
 * was gathered in one send(). What the socket does not take stays in obuf
 * for the next EPOLLOUT. */
static void side_flush(struct side *s)
{
    if (s->dead)
        return;
    if (wslay_event_want_write(s->ws) && wslay_event_send(s->ws) != 0) {
        side_fail(s);
        return;
    }
    if (s->olen == 0)
        return;
    ssize_t w = send(s->fd, s->obuf, s->olen, MSG_NOSIGNAL);
    if (w >= 0)
        side_obuf_consume(s, (size_t)w);
    else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        side_fail(s);
}

static int side_paused(const struct side *s)
{
    const struct side *o = &s->c->s[!s->idx];
    return !o->dead && wslay_event_get_queued_msg_length(o->ws) > RELAY_QUEUE_HIGH;
}

static void side_read(struct side *s)
{
    s->drained = 0;
    s->budget = RELAY_READ_BUDGET;
    if (wslay_event_recv(s->ws) != 0)
        side_fail(s);
    /* wslay reads until the callback would block, so the thread's buffer is
     * empty now, unless reading stopped for good (a close, a cap): what is
     * left is not wanted then. */
    s->roff = s->rlen = 0;
}

static const char *close_reason(uint16_t code)
{
    switch (code) {
    case WSLAY_CODE_MESSAGE_TOO_BIG:
        return "message too big";
    case WSLAY_CODE_PROTOCOL_ERROR:
        return "protocol error";
    case WSLAY_CODE_INVALID_FRAME_PAYLOAD_DATA:
        return "invalid message payload";
    default:
        return "closed by relay";
    }
}

/* Propagates closes and failures between the two sides: a peer that closed
 * or was closed by wslay itself (protocol error, cap) gets its code passed
 * on; a dead transport becomes 1001 on the other side. */
static void conn_propagate(struct conn *c)
{
    for (int i = 0; i < 2; i++) {
        struct side *s = &c->s[i], *o = &c->s[!i];
        if (!s->dead && !s->closing && !wslay_event_get_read_enabled(s->ws)) {
            /* wslay queued a close on its own; flush it to learn its code */
            s->closing = 1;
            side_flush(s);
            uint16_t code =
                wslay_event_get_close_sent(s->ws)
                    ? wslay_event_get_status_code_sent(s->ws)
                    : (s->rejected ? WSLAY_CODE_MESSAGE_TOO_BIG : WSLAY_CODE_GOING_AWAY);
            if (c->reason == NULL)
                c->reason = close_reason(code);
            side_queue_close(o, code, NULL, 0);
        }
        if (s->dead)
            side_queue_close(o, WSLAY_CODE_GOING_AWAY, NULL, 0);
    }
}

static int side_done(struct side *s)
{
    return s->dead || (!wslay_event_want_read(s->ws) && !side_want_write(s));
}

static void conn_finish(struct conn *c, const char *reason)
{
    struct rthread *t = c->t;
    struct relay *r = t->r;
    if (c->finished)
        return;
    c->finished = 1;
    if (c->reason == NULL)
        c->reason = reason;
    if (c->deadline_us != 0)
        t->nclosing--;
    if (c->prev != NULL)
        c->prev->next = c->next;
    else if (t->conns == c)
        t->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    for (int i = 0; i < 2; i++)
        side_unregister(&c->s[i]);
    close(c->s[SIDE_UPSTREAM].fd);
    if (c->hooks.close_client != NULL)
        c->hooks.close_client(c->hooks.ctx);
    else
        close(c->s[SIDE_CLIENT].fd);

    pthread_mutex_lock(&r->lock);
    if (c->gprev != NULL)
        c->gprev->gnext = c->gnext;
    else
        r->all = c->gnext;
    if (c->gnext != NULL)
        c->gnext->gprev = c->gprev;
    pthread_mutex_unlock(&r->lock);
    atomic_fetch_sub(&r->count, 1);

    for (int i = 0; i < 2; i++) { /* nothing more is sent: every charge is given back */
        side_uncharge(&c->s[i]);
        if (c->s[i].qcharged && c->hooks.charge != NULL)
            (void)c->hooks.charge(c->hooks.ctx, -(long long)c->s[i].qcharged);
        c->s[i].qcharged = 0;
    }
    if (c->hooks.on_counts != NULL)
        c->hooks.on_counts(c->hooks.ctx, c->msgs[SIDE_CLIENT], c->msgs[SIDE_UPSTREAM]);
    if (c->hooks.on_close != NULL)
        c->hooks.on_close(c->hooks.ctx, c->reason);
    c->next = t->graveyard;
    t->graveyard = c;
}

static void conn_free(struct conn *c)
{
    for (int i = 0; i < 2; i++) {
        wslay_event_context_free(c->s[i].ws);
        xfree(c->s[i].extra);
        xfree(c->s[i].obuf);
    }
    xfree(c);
}

/* Brings a connection to a consistent state after any event: closes
 * propagated, queues flushed, finished when both sides are done, epoll
 * interest matching what wslay wants. */
static void conn_update(struct conn *c)
{
    if (c->finished)
        return;
    for (int round = 0; round < 2; round++) {
        conn_propagate(c);
        side_flush(&c->s[0]);
        side_flush(&c->s[1]);
        if (round == 0) {
            side_settle(&c->s[0]);
            side_settle(&c->s[1]);
        }
    }
    if (side_done(&c->s[0]) && side_done(&c->s[1])) {
        conn_finish(c, "closed");
        return;
    }
    int closing = c->s[0].closing || c->s[1].closing || c->s[0].dead || c->s[1].dead;
    if (closing && c->deadline_us == 0) {
        c->deadline_us = clock_mono_us() + (int64_t)RELAY_CLOSE_GRACE_MS * 1000;
        c->t->nclosing++;
    }
    for (int i = 0; i < 2; i++) {
        struct side *s = &c->s[i];
        if (s->dead || !s->registered)
            continue;
        uint32_t want = 0;
        if (wslay_event_want_read(s->ws) && !side_paused(s))
            want |= EPOLLIN;
        if (side_want_write(s))
            want |= EPOLLOUT;
        if (want != s->armed) {
            struct epoll_event ev = {.events = want, .data.ptr = s};
            if (epoll_ctl(c->t->epfd, EPOLL_CTL_MOD, s->fd, &ev) != 0)
                side_fail(s);
            else
                s->armed = want;
        }
    }
}

static void side_event(struct side *s, uint32_t events)
{
    struct side *o = &s->c->s[!s->idx];
    if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && (s->armed & EPOLLIN)) {
        side_read(s);
        side_flush(o);
    }
    if ((events & EPOLLOUT) && !s->dead) {
        side_flush(s); /* conn_update re-arms o's EPOLLIN if this lifted backpressure */
    }
    if ((events & (EPOLLHUP | EPOLLERR)) && !s->dead && !(s->armed & EPOLLIN))
        side_fail(s); /* nothing more will be read, and the peer is gone */
}

/* ---- thread ----------------------------------------------------------- */

static void conn_adopt(struct rthread *t, struct conn *c)
{
    c->prev = NULL;
    c->next = t->conns;
    if (t->conns != NULL)
        t->conns->prev = c;
    t->conns = c;
    for (int i = 0; i < 2; i++) {
        struct side *s = &c->s[i];
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};
        if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, s->fd, &ev) != 0) {
            log_warn("relay: epoll_ctl: %s", strerror(errno));
            side_fail(s);
            continue;
        }
        s->registered = 1;
        s->armed = EPOLLIN;
    }
    /* bytes read before the takeover are already here: process them now */
    for (int i = 0; i < 2; i++)
        if (!c->s[i].dead && c->s[i].extra != NULL)
            side_read(&c->s[i]);
    conn_update(c);
}

static void conn_begin_close(struct conn *c)
{
    side_queue_close(&c->s[0], WSLAY_CODE_GOING_AWAY, NULL, 0);
    side_queue_close(&c->s[1], WSLAY_CODE_GOING_AWAY, NULL, 0);
}

/* Drains the eventfd, adopts new connections, acts on relay_close_ctx.
 * Returns 1 when the thread must stop. */
static int thread_wake(struct rthread *t)
{
    uint64_t v;
    if (read(t->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
        log_warn("relay: eventfd read: %s", strerror(errno));
    pthread_mutex_lock(&t->qlock);
    struct conn *in = t->inbox;
    t->inbox = NULL;
    int stopping = t->stopping;
    pthread_mutex_unlock(&t->qlock);
    while (in != NULL) {
        struct conn *next = in->next;
        conn_adopt(t, in);
        in = next;
    }
    pthread_mutex_lock(&t->r->lock);
    for (struct conn *c = t->conns; c != NULL; c = c->next) {
        if (c->close_req && !c->close_done) {
            c->close_done = 1;
            c->reason = "closed by server";
        }
    }
    pthread_mutex_unlock(&t->r->lock);
    for (struct conn *c = t->conns, *next; c != NULL; c = next) {
        next = c->next;
        if (c->close_done && !c->s[0].closing && !c->s[1].closing) {
            conn_begin_close(c);
            conn_update(c);
        }
    }
    return stopping;
}

static void thread_sweep(struct rthread *t)
{
    int64_t now = clock_mono_us();
    for (struct conn *c = t->conns, *next; c != NULL; c = next) {
        next = c->next;
        if (c->deadline_us != 0 && now >= c->deadline_us)
            conn_finish(c, "close timed out");
    }
}

static void thread_bury(struct rthread *t)
{
    while (t->graveyard != NULL) {
        struct conn *c = t->graveyard;
        t->graveyard = c->next;
        conn_free(c);
    }
}

static void *thread_main(void *arg)
{
    struct rthread *t = arg;
    struct epoll_event evs[RELAY_EVENTS];
    for (;;) {
        int n = epoll_wait(t->epfd, evs, RELAY_EVENTS, t->nclosing > 0 ? 250 : -1);
        if (n < 0 && errno != EINTR) {
            log_error("relay: epoll_wait: %s", strerror(errno));
            break;
        }
        int wake = 0;
        for (int i = 0; i < n; i++) {
            struct side *s = evs[i].data.ptr;
            if (s == NULL) {
                wake = 1;
                continue;
            }
            if (s->c->finished)
                continue;
            side_event(s, evs[i].events);
            conn_update(s->c);
        }
        if (wake && thread_wake(t))
            break;
        if (t->nclosing > 0)
            thread_sweep(t);
        thread_bury(t);
    }
    /* relay_stop: say goodbye to every peer, best effort, and finish */
    pthread_mutex_lock(&t->qlock);
    t->stopping = 1;
    struct conn *in = t->inbox;
    t->inbox = NULL;
    pthread_mutex_unlock(&t->qlock);
    while (in != NULL) {
        struct conn *next = in->next;
        in->prev = NULL;
        in->next = t->conns;
        if (t->conns != NULL)
            t->conns->prev = in;
        t->conns = in;
        in = next;
    }
    while (t->conns != NULL) {
        struct conn *c = t->conns;
        conn_begin_close(c);
        side_flush(&c->s[0]);
        side_flush(&c->s[1]);
        conn_finish(c, "relay stopped");
    }
    thread_bury(t);
    return NULL;
}

static void thread_kick(struct rthread *t)
{
    uint64_t one = 1;
    if (write(t->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        log_warn("relay: eventfd write: %s", strerror(errno));
}

/* ---- public API ------------------------------------------------------- */

int relay_start(unsigned nthreads, struct relay **out, struct err *e)
{
    if (nthreads == 0 || nthreads > RELAY_MAX_THREADS)
        return err_set(e, E_INVALID, "bad_request", "relay threads must be 1..%d",
                       RELAY_MAX_THREADS);
    struct relay *r = xcalloc(1, sizeof(*r));
    r->threads = xcalloc(nthreads, sizeof(*r->threads));
    pthread_mutex_init(&r->lock, NULL);
    atomic_init(&r->rr, 0);
    atomic_init(&r->count, 0);
    for (unsigned i = 0; i < nthreads; i++) {
        struct rthread *t = &r->threads[i];
        t->r = r;
        t->epfd = t->evfd = -1;
        pthread_mutex_init(&t->qlock, NULL);
        r->n = i + 1;
        t->epfd = epoll_create1(EPOLL_CLOEXEC);
        t->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
        if (t->epfd < 0 || t->evfd < 0 || epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->evfd, &ev) != 0 ||
            pthread_create(&t->tid, NULL, thread_main, t) != 0) {
            int rc = err_set(e, E_INTERNAL, "internal", "relay thread setup: %s", strerror(errno));
            relay_stop(r);
            return rc;
        }
        t->started = 1;
    }
    *out = r;
    return 0;
}

void relay_stop(struct relay *r)
{
    if (r == NULL)
        return;
    for (unsigned i = 0; i < r->n; i++) {
        struct rthread *t = &r->threads[i];
        if (!t->started)
            continue;
        pthread_mutex_lock(&t->qlock);
        t->stopping = 1;
        pthread_mutex_unlock(&t->qlock);
        thread_kick(t);
    }
    for (unsigned i = 0; i < r->n; i++) {
        struct rthread *t = &r->threads[i];
        if (t->started)
            pthread_join(t->tid, NULL);
        if (t->epfd >= 0)
            close(t->epfd);
        if (t->evfd >= 0)
            close(t->evfd);
        pthread_mutex_destroy(&t->qlock);
    }
    pthread_mutex_destroy(&r->lock);
    xfree(r->threads);
    xfree(r);
}

static int side_init(struct conn *c, int idx, int fd, const char *extra, size_t extra_len)
{
    struct side *s = &c->s[idx];
    s->c = c;
    s->idx = idx;
    s->fd = fd;
    int rc = idx == SIDE_CLIENT ? wslay_event_context_server_init(&s->ws, &side_callbacks, s)
                                : wslay_event_context_client_init(&s->ws, &side_callbacks, s);
    if (rc != 0)
        return -1;
    wslay_event_config_set_max_recv_msg_length(s->ws, LIM_WS_MESSAGE_BYTES);
    if (extra_len > 0) {
        s->extra = xmalloc(extra_len);
        memcpy(s->extra, extra, extra_len);
        s->extra_len = extra_len;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
        return -1;
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* fails on non-TCP */
    return 0;
}

int relay_attach(struct relay *r, int client_fd, const char *client_extra, size_t client_extra_len,
                 int upstream_fd, const char *upstream_extra, size_t upstream_extra_len,
                 const struct relay_hooks *hooks, struct err *e)
{
    struct conn *c = xcalloc(1, sizeof(*c));
    c->hooks = *hooks;
    if (side_init(c, SIDE_CLIENT, client_fd, client_extra, client_extra_len) != 0 ||
        side_init(c, SIDE_UPSTREAM, upstream_fd, upstream_extra, upstream_extra_len) != 0) {
        conn_free(c);
        return err_set(e, E_INTERNAL, "internal", "relay: cannot set up the connection");
    }
    unsigned i = atomic_fetch_add(&r->rr, 1) % r->n;
    struct rthread *t = &r->threads[i];
    c->t = t;
    pthread_mutex_lock(&t->qlock);
    if (t->stopping) {
        pthread_mutex_unlock(&t->qlock);
        conn_free(c);
        return err_set(e, E_UNAVAIL, "unavailable", "relay is stopping");
    }
    pthread_mutex_lock(&r->lock);
    c->gnext = r->all;
    if (r->all != NULL)
        r->all->gprev = c;
    r->all = c;
    pthread_mutex_unlock(&r->lock);
    atomic_fetch_add(&r->count, 1);
    c->next = t->inbox;
    t->inbox = c;
    pthread_mutex_unlock(&t->qlock);
    thread_kick(t);
    return 0;
}

size_t relay_count(struct relay *r)
{
    return atomic_load(&r->count);
}

size_t relay_close_ctx(struct relay *r, void *ctx)
{
    size_t n = 0;
    pthread_mutex_lock(&r->lock);
    for (struct conn *c = r->all; c != NULL; c = c->gnext) {
        if (c->hooks.ctx == ctx && !c->close_req) {
            c->close_req = 1;
            n++;
            thread_kick(c->t);
        }
    }
    pthread_mutex_unlock(&r->lock);
    return n;
}
