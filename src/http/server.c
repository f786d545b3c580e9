/*
 * The libmicrohttpd side: daemon setup, body collection, dispatch, and
 * writing responses.
 *
 * libmicrohttpd calls the access handler several times per request: first
 * with no body (we allocate the request), then with body chunks, then once
 * more with upload_data_size == 0, where the response is queued. Queuing on
 * that last call (never the first when a body is expected) is what keeps the
 * connection alive for the next request.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/xalloc.h"
#include "http/guard.h"
#include "http/fairshare.h"
#include "http/http.h"

struct http_stream;

struct http_server {
    struct MHD_Daemon *d;
    struct http_config cfg;
    int port;
    pthread_mutex_t streams_mu;  /* guards streams and stopping */
    struct http_stream *streams; /* every streamed response not yet freed */
    int stopping;
    int quiesced;
    MHD_socket listen_fd; /* returned by MHD_quiesce_daemon, closed by http_stop */
    /* Blocking handlers (HTTP_ROUTE_BLOCKING), under jobs_mu: */
    pthread_mutex_t jobs_mu;
    pthread_cond_t jobs_cv;      /* a job was queued, or the pool stops */
    pthread_cond_t jobs_idle_cv; /* jobs_live dropped to 0 */
    struct job *jobs_head, **jobs_tail;
    unsigned jobs_live;   /* queued or running */
    unsigned jobs_queued; /* queued, not yet taken by a thread */
    unsigned nblockers, nidle;
    unsigned max_blockers; /* cfg.blocking_threads, or LIM_HTTP_BLOCKING_THREADS */
    int jobs_stop;
    pthread_t blockers[LIM_HTTP_BLOCKING_THREADS];
    /* Requests parked by req_defer, soonest first, and the thread that
     * queues each again when it is due (started with the first), under
     * jobs_mu: */
    struct job *parked;
    pthread_cond_t timer_cv; /* (CLOCK_MONOTONIC) a sooner job was parked, or the pool stops */
    pthread_t timer;
    int timer_started;
    struct head_watch *heads;   /* request head deadlines (guard.h) */
    struct body_budget *budget; /* buffered request bodies (guard.h) */
    struct fairshare *share;    /* each tenant's share of the blocking threads */
};

/* ---- routing ---- */

/* Matches path against pattern, filling params (pointers into buf, which
 * holds the path's segments NUL-separated). Returns 1 on a match. */
static int match(const char *pattern, const char *path, char *buf, size_t cap, const char **params,
                 size_t *nparams)
{
    size_t np = 0, off = 0;
    const char *p = pattern, *s = path;
    while (*p && *s) {
        if (*p != '/' || *s != '/')
            return 0;
        p++;
        s++;
        const char *pe = strchr(p, '/');
        const char *se = strchr(s, '/');
        size_t plen = pe ? (size_t)(pe - p) : strlen(p);
        size_t slen = se ? (size_t)(se - s) : strlen(s);
        if (plen == 1 && p[0] == '*' && !pe) {
            /* A trailing "*" matches one or more remaining segments. */
            if (slen == 0)
                return 0;
            *nparams = np;
            return 1;
        }
        if (plen >= 2 && p[0] == '{') {
            if (slen == 0 || np >= LIM_PATH_PARAMS || off + slen + 1 > cap)
                return 0;
            memcpy(buf + off, s, slen);
            buf[off + slen] = '\0';
            params[np++] = buf + off;
            off += slen + 1;
        } else if (plen != slen || memcmp(p, s, plen) != 0) {
            return 0;
        }
        p += plen;
        s += slen;
    }
    if (*p || (*s && strcmp(s, "/") != 0))
        return 0;
    *nparams = np;
    return 1;
}

struct upgrade_ctx {
    http_upgrade_fn fn;
    void (*cancel)(void *ctx);
    void *ctx;
    int done;
};

struct ctx {
    struct req rq;
    struct upgrade_ctx upgrade; /* fn == NULL: no upgrade queued */
    struct http_server *srv;
    char parambuf[LIM_PATH_BYTES];
    char pathbuf[LIM_PATH_BYTES]; /* the path after cfg.rewrite, when it rewrote it */
    struct buf body;        /* the request body, at most body_limit bytes; rq.body points into it */
    size_t body_limit;      /* LIM_BODY_BYTES, or the route's larger cap (body_limit()) */
    int admitted;           /* routed and authorized on the header pass (admit) */
    int refused;            /* 0, or the E_* code the request is answered with instead */
    size_t body_taken;      /* bytes of srv->budget this request holds for tenant */
    struct job *job;        /* the blocking job running its handler now (req_defer), or NULL */
    struct body_pipe *pipe; /* a streamed body (HTTP_ROUTE_STREAM), or NULL */
    size_t body_off;        /* req_body_read's place in a buffered body */
    char tenant[96];        /* rq.tenant, or the client's address: whose share body_taken is */
    /* An in-process request (http_call): no connection; these lists,
     * NULL-terminated name/value pairs, stand for its headers and query. */
    const char *const *call_headers;
    const char *const *call_query;
};

/* A value of an http_call list: names compared without case for headers. */
static const char *call_lookup(const char *const *kv, const char *name, int nocase)
{
    for (size_t i = 0; kv && kv[i] && kv[i + 1]; i += 2)
        if (nocase ? strcasecmp(kv[i], name) == 0 : strcmp(kv[i], name) == 0)
            return kv[i + 1];
    return NULL;
}

static void call_each(const char *const *kv, void (*fn)(void *, const char *, const char *),
                      void *ctx)
{
    for (size_t i = 0; kv && kv[i] && kv[i + 1]; i += 2)
        fn(ctx, kv[i], kv[i + 1]);
}

/* ---- request accessors ---- */

const char *req_header(struct req *rq, const char *name)
{
    if (!rq->conn)
        return call_lookup(((struct ctx *)rq)->call_headers, name, 1);
    return MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, name);
}

const char *req_query(struct req *rq, const char *name)
{
    if (!rq->conn)
        return call_lookup(((struct ctx *)rq)->call_query, name, 0);
    return MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, name);
}

struct each_ctx {
    void (*fn)(void *, const char *, const char *);
    void *ctx;
};

static enum MHD_Result each_arg(void *cls, enum MHD_ValueKind kind, const char *k, const char *v)
{
    (void)kind;
    struct each_ctx *ec = cls;
    ec->fn(ec->ctx, k, v ? v : "");
    return MHD_YES;
}

void req_query_each(struct req *rq, void (*fn)(void *, const char *, const char *), void *ctx)
{
    if (!rq->conn) {
        call_each(((struct ctx *)rq)->call_query, fn, ctx);
        return;
    }
    struct each_ctx ec = {fn, ctx};
    MHD_get_connection_values(rq->conn, MHD_GET_ARGUMENT_KIND, each_arg, &ec);
}

static enum MHD_Result each_arg_raw(void *cls, enum MHD_ValueKind kind, const char *k,
                                    const char *v)
{
    (void)kind;
    struct each_ctx *ec = cls;
    ec->fn(ec->ctx, k, v);
    return MHD_YES;
}

void req_query_each_raw(struct req *rq, void (*fn)(void *, const char *, const char *), void *ctx)
{
    if (!rq->conn) {
        call_each(((struct ctx *)rq)->call_query, fn, ctx);
        return;
    }
    struct each_ctx ec = {fn, ctx};
    MHD_get_connection_values(rq->conn, MHD_GET_ARGUMENT_KIND, each_arg_raw, &ec);
}

void req_header_each(struct req *rq, void (*fn)(void *, const char *, const char *), void *ctx)
{
    if (!rq->conn) {
        call_each(((struct ctx *)rq)->call_headers, fn, ctx);
        return;
    }
    struct each_ctx ec = {fn, ctx};
    MHD_get_connection_values(rq->conn, MHD_HEADER_KIND, each_arg, &ec);
}

int req_json_object(struct req *rq, int empty_ok, json_t **out)
{
    *out = NULL;
    size_t cap = ((struct ctx *)rq)->body_limit; /* rq is the first member */
    if (rq->body_too_big)
        return err_set(&rq->err, E_TOOBIG, "payload_too_large",
                       "request body exceeds the limit of %zu bytes", cap);
    size_t n = rq->body_len;
    const char *b = rq->body ? rq->body : "";
    while (n && (b[n - 1] == ' ' || b[n - 1] == '\n' || b[n - 1] == '\r' || b[n - 1] == '\t'))
        n--;
    size_t lead = 0;
    while (lead < n && (b[lead] == ' ' || b[lead] == '\n' || b[lead] == '\r' || b[lead] == '\t'))
        lead++;
    if (lead == n) {
        if (!empty_ok)
            return err_set(&rq->err, E_INVALID, "bad_request", "a JSON object body is required");
        *out = json_object();
        return 0;
    }
    json_t *v;
    int rc = jsonx_parse(b, rq->body_len, cap, &v, &rq->err);
    if (rc)
        return rc;
    if (!json_is_object(v)) {
        json_decref(v);
        return err_set(&rq->err, E_INVALID, "bad_request",
                       "the request body must be a JSON object");
    }
    *out = v;
    return 0;
}

static int parse_size(const char *s, size_t *out)
{
    if (!s || !*s || strlen(s) > 9)
        return -1;
    size_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        v = v * 10 + (size_t)(*s - '0');
    }
    *out = v;
    return 0;
}

int req_page(struct req *rq, size_t *limit, size_t *offset)
{
    const char *l = req_query(rq, "limit"), *o = req_query(rq, "offset");
    *limit = LIM_LIST_DEFAULT;
    *offset = 0;
    int bad = 0;
    if (l && (parse_size(l, limit) || *limit < 1 || *limit > LIM_LIST_MAX))
        bad = err_field(&rq->err, "limit", "must be an integer from 1 to %d", LIM_LIST_MAX);
    if (o && parse_size(o, offset))
        bad = err_field(&rq->err, "offset", "must be an integer >= 0");
    return bad ? E_INVALID : 0;
}

/* ---- upgrades ---- */

void http_upgrade_close(struct http_upgrade *up)
{
    MHD_upgrade_action((struct MHD_UpgradeResponseHandle *)up, MHD_UPGRADE_ACTION_CLOSE);
}

static void on_upgraded(void *cls, struct MHD_Connection *c, void *req_cls, const char *extra,
                        size_t extra_len, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
    (void)c;
    (void)req_cls;
    struct upgrade_ctx *u = cls;
    u->done = 1;
    u->fn(u->ctx, sock, extra, extra_len, (struct http_upgrade *)urh);
}

/* ---- asynchronous requests ---- */

int req_suspend(struct req *rq, void (*resume_fn)(struct req *, struct resp *),
                void (*done_fn)(struct req *, int), void *ctx)
{
    rq->resume_fn = resume_fn;
    rq->done_fn = done_fn;
    rq->async_ctx = ctx;
    return HTTP_SUSPEND;
}

void req_resume(struct req *rq)
{
    if (!rq->conn)
        return; /* http_call refuses parked requests */
    MHD_resume_connection(rq->conn);
}

int req_client_fd(struct req *rq)
{
    if (!rq->conn)
        return -1;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(rq->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

const char *req_client_ip(struct req *rq, char *buf, size_t cap)
{
    snprintf(buf, cap, "?");
    const union MHD_ConnectionInfo *ci =
        rq->conn ? MHD_get_connection_info(rq->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS) : NULL;
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, (socklen_t)cap);
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, (socklen_t)cap);
    return buf;
}

int req_client_gone(struct req *rq)
{
    if (!rq->conn)
        return 0; /* an in-process caller waits for its answer */
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(rq->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return 1;
    char b;
    ssize_t n = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    /* 0: orderly close; an error other than "nothing to read" counts too. A
     * client that sent more bytes (a pipelined request) is still there. */
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* ---- streamed bodies ----
 *
 * A stream with nothing to send suspends its connection from inside the
 * content reader (the one place libmicrohttpd allows it besides the access
 * handler) and is resumed by http_stream_wake. `parked` and `pending` under
 * the stream's mutex close the race between a producer's wake and a reader
 * that is about to park: a wake that finds the stream running leaves
 * `pending`, and the reader reads again instead of parking. libmicrohttpd
 * must not be stopped with suspended connections, so http_stop first ends
 * every stream and waits for them (bounded). */

struct http_stream {
    pthread_mutex_t mu;
    struct MHD_Connection *conn; /* set when the response is queued */
    struct http_server *srv;
    http_stream_read_fn read;
    void (*free_cb)(void *ctx);
    void *ctx;
    int parked, pending, ended;
    struct http_stream *next; /* srv->streams */
};

static struct http_stream *http_stream_new(http_stream_read_fn read, void (*free_cb)(void *),
                                           void *ctx)
{
    struct http_stream *st = xcalloc(1, sizeof *st);
    pthread_mutex_init(&st->mu, NULL);
    st->read = read;
    st->free_cb = free_cb;
    st->ctx = ctx;
    return st;
}

void resp_stream(struct resp *rs, int status, const char *content_type, http_stream_read_fn read,
                 void (*free_cb)(void *ctx), void *ctx, struct http_stream **handle)
{
    rs->status = status;
    json_decref(rs->json);
    rs->json = NULL;
    xfree(rs->text);
    rs->text = NULL;
    rs->content_type = content_type;
    rs->stream = http_stream_new(read, free_cb, ctx);
    if (handle)
        *handle = rs->stream;
}

void http_stream_wake(struct http_stream *st)
{
    pthread_mutex_lock(&st->mu);
    if (st->parked) {
        st->parked = 0;
        MHD_resume_connection(st->conn);
    } else {
        st->pending = 1;
    }
    pthread_mutex_unlock(&st->mu);
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct http_stream *st = cls;
    for (;;) {
        pthread_mutex_lock(&st->mu);
        st->pending = 0;
        int stop = st->ended;
        pthread_mutex_unlock(&st->mu);
        if (!stop) {
            pthread_mutex_lock(&st->srv->streams_mu);
            stop = st->srv->stopping;
            pthread_mutex_unlock(&st->srv->streams_mu);
        }
        long n = stop ? -1 : st->read(st->ctx, buf, max);
        if (n < 0) {
            pthread_mutex_lock(&st->mu);
            st->ended = 1;
            pthread_mutex_unlock(&st->mu);
            /* -2: the body was cut short; closing without the last chunk
             * tells the client so. */
            return n == -2 ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
        }
        if (n > 0)
            return (ssize_t)n;
        pthread_mutex_lock(&st->mu);
        if (st->pending || st->ended) {
            pthread_mutex_unlock(&st->mu);
            continue;
        }
        st->parked = 1;
        MHD_suspend_connection(st->conn);
        pthread_mutex_unlock(&st->mu);
        return 0;
    }
}

static void stream_free(void *cls)
{
    struct http_stream *st = cls;
    struct http_server *srv = st->srv;
    if (st->free_cb)
        st->free_cb(st->ctx);
    if (srv) {
        pthread_mutex_lock(&srv->streams_mu);
        for (struct http_stream **p = &srv->streams; *p; p = &(*p)->next)
            if (*p == st) {
                *p = st->next;
                break;
            }
        pthread_mutex_unlock(&srv->streams_mu);
    }
    pthread_mutex_destroy(&st->mu);
    xfree(st);
}

/* Ends every stream (a parked one is resumed to notice) and waits up to
 * 3 s for libmicrohttpd to finish them. */
static void streams_stop(struct http_server *srv)
{
    pthread_mutex_lock(&srv->streams_mu);
    srv->stopping = 1;
    for (struct http_stream *st = srv->streams; st; st = st->next) {
        pthread_mutex_lock(&st->mu);
        st->ended = 1;
        if (st->parked) {
            st->parked = 0;
            MHD_resume_connection(st->conn);
        }
        pthread_mutex_unlock(&st->mu);
    }
    pthread_mutex_unlock(&srv->streams_mu);
    for (int i = 0; i < 300; i++) {
        pthread_mutex_lock(&srv->streams_mu);
        int left = srv->streams != NULL;
        pthread_mutex_unlock(&srv->streams_mu);
        if (!left)
            return;
        usleep(10000);
    }
    log_warn("http: streamed responses still open at shutdown");
}

/* A blocking handler's run (see "blocking handlers" below). */
struct job {
    struct req *rq;
    const struct route *route;
    struct resp rs;
    int rc;
    char *org, *session;         /* what the job is charged to (fairshare), owned */
    http_handler_fn cont;        /* set by req_defer: what runs instead of route->fn */
    int64_t due_ms;              /* parked: when cont is due (clock_mono_ms) */
    struct body_pipe *pipe_wait; /* parked (req_defer_body): also woken by this body's bytes */
    struct job *next;
};

/* ---- streamed request bodies (HTTP_ROUTE_STREAM) ----
 *
 * The handler runs on a blocking thread from the header pass on and takes
 * the body from a small window (LIM_HTTP_STREAM_BYTES) that the access
 * handler fills as libmicrohttpd reads. A full window suspends the
 * connection with the rest of the chunk left unconsumed (libmicrohttpd keeps
 * it, and hands it over again once resumed); the handler's read resumes it.
 * The body's end suspends the connection until the handler returned
 * (parked_final), and the handler's return resumes it to send the answer.
 * A client that leaves mid-body ends the exchange while the handler may
 * still run: the request is then the handler's job's to release (gone). */

struct body_pipe {
    pthread_mutex_t mu;
    pthread_cond_t cv;  /* bytes arrived, the body ended, or the client left */
    char *data;         /* LIM_HTTP_STREAM_BYTES */
    size_t len;         /* bytes waiting in data */
    size_t total;       /* body bytes taken in so far */
    size_t limit;       /* the route's cap */
    int ended;          /* the whole body arrived */
    int too_big;        /* more than limit arrived: the rest is dropped */
    int gone;           /* the exchange ended first: the job frees the request */
    int parked_full;    /* the connection waits for room in data */
    int parked_final;   /* the connection waits for the handler's answer */
    int done;           /* the handler returned (its answer: rq->resume_fn) */
    struct job *waiter; /* under srv->jobs_mu: the handler's job, parked for bytes */
};

static struct body_pipe *pipe_new(size_t limit)
{
    struct body_pipe *p = xcalloc(1, sizeof *p);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->data = xmalloc(LIM_HTTP_STREAM_BYTES);
    p->limit = limit;
    return p;
}

static void pipe_free(struct body_pipe *p)
{
    if (!p)
        return;
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    xfree(p->data);
    xfree(p);
}

static void job_enqueue(struct http_server *srv, struct job *j);

static void job_unpark(struct http_server *srv, struct job *j);

/* Queues the job parked for p's bytes, if any (p->mu not held: the lock
 * order is jobs_mu, then a pipe's mu). Called on the connection's own
 * thread before the exchange ended, so p is still there. */
static void pipe_wake(struct http_server *srv, struct body_pipe *p)
{
    pthread_mutex_lock(&srv->jobs_mu);
    if (p->waiter)
        job_unpark(srv, p->waiter);
    pthread_mutex_unlock(&srv->jobs_mu);
}

/* 1 when a read of p would not wait (p->mu held). */
static int pipe_ready(const struct body_pipe *p)
{
    return p->too_big || p->len || p->gone || p->ended;
}

long req_body_take(struct req *rq, char *buf, size_t cap)
{
    struct ctx *cx = (struct ctx *)rq;
    struct body_pipe *p = cx->pipe;
    if (p) {
        pthread_mutex_lock(&p->mu);
        int ready = pipe_ready(p);
        /* Until gone is set the exchange has not ended (on_completed waits
         * for p->mu), so the connection is there to look at. A client that
         * closed mid-body is noticed here too: libmicrohttpd 0.9.75 may not
         * see the close of a connection it resumed (epoll). */
        int left = !ready && req_client_gone(rq);
        pthread_mutex_unlock(&p->mu);
        if (left)
            return err_set(&rq->err, E_INTERNAL, "internal",
                           "the client went away before the end of its request body");
        if (!ready)
            return HTTP_BODY_WAIT;
    }
    return req_body_read(rq, buf, cap);
}

int req_defer_body(struct req *rq, struct resp *rs, http_handler_fn cont)
{
    struct ctx *cx = (struct ctx *)rq;
    struct job *j = rq->conn ? cx->job : NULL;
    if (!j || !cx->pipe)
        return cont(rq, rs); /* its read will wait on this thread */
    j->cont = cont;
    j->due_ms = -1;
    return HTTP_DEFER;
}

long req_body_read(struct req *rq, char *buf, size_t cap)
{
    struct ctx *cx = (struct ctx *)rq; /* rq is the first member */
    struct body_pipe *p = cx->pipe;
    if (!p) {
        if (rq->body_too_big)
            return err_set(&rq->err, E_TOOBIG, "payload_too_large",
                           "request body exceeds the limit of %zu bytes", cx->body_limit);
        size_t n = rq->body_len - cx->body_off;
        if (n > cap)
            n = cap;
        if (n)
            memcpy(buf, rq->body + cx->body_off, n);
        cx->body_off += n;
        return (long)n;
    }
    pthread_mutex_lock(&p->mu);
    while (!pipe_ready(p))
        pthread_cond_wait(&p->cv, &p->mu);
    long n;
    if (p->too_big) {
        n = err_set(&rq->err, E_TOOBIG, "payload_too_large",
                    "request body exceeds the limit of %zu bytes", p->limit);
    } else if (p->len) {
        size_t k = p->len < cap ? p->len : cap;
        memcpy(buf, p->data, k);
        memmove(p->data, p->data + k, p->len - k);
        p->len -= k;
        n = (long)k;
        if (p->parked_full) {
            p->parked_full = 0;
            MHD_resume_connection(rq->conn);
        }
    } else if (p->gone) {
        n = err_set(&rq->err, E_INTERNAL, "internal",
                    "the client went away before the end of its request body");
    } else {
        n = 0;
    }
    pthread_mutex_unlock(&p->mu);
    return n;
}

/* A chunk of a streamed body (the access handler's upload call): takes
 * what fits in the window and suspends the connection when the rest does
 * not; a body past the cap, or one whose handler already answered, is read
 * and dropped. */
static void pipe_feed(struct ctx *cx, const char *data, size_t *upload_size)
{
    struct body_pipe *p = cx->pipe;
    size_t n = *upload_size;
    pthread_mutex_lock(&p->mu);
    if (p->done || p->too_big) {
        *upload_size = 0;
    } else if (p->total + n > p->limit) {
        p->too_big = 1;
        *upload_size = 0;
        pthread_cond_signal(&p->cv);
    } else {
        size_t take = LIM_HTTP_STREAM_BYTES - p->len;
        if (take > n)
            take = n;
        memcpy(p->data + p->len, data, take);
        p->len += take;
        p->total += take;
        *upload_size = n - take;
        if (take)
            pthread_cond_signal(&p->cv);
        /* libmicrohttpd may hand the rest over again before the handler
         * read: the connection is suspended once (a second suspend of a
         * suspended connection would corrupt libmicrohttpd's lists). */
        if (take < n && !p->parked_full) {
            p->parked_full = 1;
            MHD_suspend_connection(cx->rq.conn);
        }
    }
    pthread_mutex_unlock(&p->mu);
    pipe_wake(cx->srv, p);
}

/* The body ended (the access handler's final call): 1 when the handler
 * already answered (rq->resume_fn builds it), 0 when the connection was
 * suspended until it does. */
static int pipe_end(struct ctx *cx)
{
    struct body_pipe *p = cx->pipe;
    pthread_mutex_lock(&p->mu);
    p->ended = 1;
    pthread_cond_signal(&p->cv);
    int done = p->done;
    if (!done) {
        p->parked_final = 1;
        MHD_suspend_connection(cx->rq.conn);
    }
    pthread_mutex_unlock(&p->mu);
    pipe_wake(cx->srv, p);
    return done;
}

/* The exchange ended (on_completed). 1 when the handler still runs: it
 * now owns the request (pipe_done frees it, maybe as soon as gone is set,
 * so p is not touched after its lock is let go; jobs_mu is taken first, in
 * the lock order, to hand a parked job back to the queue meanwhile). */
static int pipe_orphan(struct ctx *cx)
{
    struct http_server *srv = cx->srv;
    struct body_pipe *p = cx->pipe;
    pthread_mutex_lock(&srv->jobs_mu);
    pthread_mutex_lock(&p->mu);
    int running = !p->done;
    struct job *waiter = NULL;
    if (running) {
        p->gone = 1;
        pthread_cond_broadcast(&p->cv);
        /* Read before the lock goes: a handler running now may return
         * and free p (pipe_done) at once. A parked waiter cannot run
         * meanwhile: it is under jobs_mu, held here. */
        waiter = p->waiter;
    }
    pthread_mutex_unlock(&p->mu);
    if (waiter)
        job_unpark(srv, waiter);
    pthread_mutex_unlock(&srv->jobs_mu);
    return running;
}

static void ctx_free(struct http_server *srv, struct ctx *cx);

/* Drops the handler's answer that will not be sent (the exchange ended
 * first): job_resume frees its job. */
static void pipe_discard_answer(struct ctx *cx)
{
    if (!cx->rq.async_ctx)
        return;
    struct resp rs = {0};
    cx->rq.resume_fn(&cx->rq, &rs);
    json_decref(rs.json);
    xfree(rs.text);
    json_decref(rs.more_headers);
}

/* The handler of a streamed body returned (on its blocking thread), its
 * answer set up for job_resume: the connection, when parked, goes on (to
 * drop the rest of the body, or to send the answer); a request whose
 * exchange already ended is freed here. */
static void pipe_done(struct http_server *srv, struct ctx *cx)
{
    struct body_pipe *p = cx->pipe;
    pthread_mutex_lock(&p->mu);
    p->done = 1;
    int gone = p->gone;
    if (!gone && (p->parked_full || p->parked_final)) {
        p->parked_full = p->parked_final = 0;
        MHD_resume_connection(cx->rq.conn);
    }
    pthread_mutex_unlock(&p->mu);
    if (gone) {
        pipe_discard_answer(cx);
        ctx_free(srv, cx);
    }
}

/* ---- dispatch ---- */

static enum MHD_Result send_resp(struct MHD_Connection *c, struct req *rq, struct resp *rs)
{
    struct ctx *cx = (struct ctx *)rq; /* rq is the first member */
    char *body = NULL;
    size_t len = 0;
    const char *ctype = rs->content_type;
    if (rs->json) {
        body = jsonx_dump(rs->json);
        len = strlen(body);
        ctype = "application/json";
    } else if (rs->text) {
        body = rs->text;
        rs->text = NULL;
        len = rs->text_len;
    }
    struct MHD_Response *r;
    if (rs->upgrade) {
        cx->upgrade.fn = rs->upgrade;
        cx->upgrade.cancel = rs->upgrade_cancel;
        cx->upgrade.ctx = rs->upgrade_ctx;
        cx->upgrade.done = 0;
        r = MHD_create_response_for_upgrade(on_upgraded, &cx->upgrade);
        xfree(body);
        body = NULL;
    } else if (rs->stream) {
        struct http_stream *st = rs->stream;
        rs->stream = NULL;
        st->conn = c;
        st->srv = cx->srv;
        pthread_mutex_lock(&cx->srv->streams_mu);
        st->next = cx->srv->streams;
        cx->srv->streams = st;
        pthread_mutex_unlock(&cx->srv->streams_mu);
        xfree(body);
        body = NULL;
        r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_reader, st,
                                              stream_free);
    } else {
        r = body ? MHD_create_response_from_buffer_with_free_callback(len, body, &xfree)
                 : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    }
    if (ctype)
        MHD_add_response_header(r, "Content-Type", ctype);
    for (size_t i = 0; i < rs->nheaders; i++)
        MHD_add_response_header(r, rs->headers[i].name, rs->headers[i].value);
    size_t hi;
    json_t *h;
    json_array_foreach(rs->more_headers, hi, h)
    {
        const char *hn = json_string_value(json_array_get(h, 0));
        const char *hv = json_string_value(json_array_get(h, 1));
        if (hn && hv)
            MHD_add_response_header(r, hn, hv);
    }
    json_decref(rs->more_headers);
    rs->more_headers = NULL;
    rq->status = rs->status;
    if (cx->srv->cfg.answering)
        cx->srv->cfg.answering(rq, rs, clock_mono_us() - rq->start_us);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)rs->status, r);
    MHD_destroy_response(r);
    json_decref(rs->json);
    xfree(rs->text);
    return ret;
}

/* Turns rq->err into an Error response. */
static void error_resp(struct req *rq, struct resp *rs, int rc)
{
    json_decref(rs->more_headers); /* a relayed response's: not this error's */
    rs->more_headers = NULL;
    if (!rq->err.rc)
        err_set(&rq->err, rc, http_code_for(http_status_for(rc)), "%s",
                http_code_for(http_status_for(rc)));
    int status = http_status_for(rq->err.rc ? rq->err.rc : rc);
    resp_json(rs, status, http_error_json(&rq->err));
    /* The SDK retries 409 and >= 500; a name conflict or an endpoint this
     * server does not implement will not go away on a retry. */
    if (status == 409 || status == 501 || (status >= 500 && rq->no_retry))
        resp_header(rs, "x-should-retry", "false");
    if ((status == 429 || status == 503) && rq->err.retry_after > 0)
        resp_header(rs, "Retry-After", "%d", rq->err.retry_after);
}

/* ---- blocking handlers (HTTP_ROUTE_BLOCKING) ----
 *
 * The request is parked (MHD_suspend_connection, as for req_suspend) and a
 * job carries it to a blocking thread, which runs the handler into the job's
 * own response and resumes the connection; job_resume then hands that
 * response (or the handler's error) to the HTTP thread. A handler that
 * parks the request itself took over its continuation: the job just ends. */

static void *blocker_main(void *arg);

/* Starts a blocking thread (jobs_mu held) when the queue has no idle one
 * left for one more job. An idle thread that was signalled but has not
 * woken yet still counts in nidle: a burst of jobs must not all be left to
 * it (one long job would hold the rest back while the pool has room). */
static void blockers_grow(struct http_server *srv)
{
    if (srv->jobs_queued >= srv->nidle && srv->nblockers < srv->max_blockers) {
        if (pthread_create(&srv->blockers[srv->nblockers], NULL, blocker_main, srv) == 0)
            srv->nblockers++;
        else
            log_warn("http: cannot start a blocking handler thread (%u running): %s",
                     srv->nblockers, strerror(errno));
    }
}

/* Queues j for a blocking thread (jobs_mu held; a thread started for it
 * when needed, and there is at least one). */
static void job_append(struct http_server *srv, struct job *j)
{
    j->next = NULL;
    *srv->jobs_tail = j;
    srv->jobs_tail = &j->next;
    srv->jobs_queued++;
    pthread_cond_signal(&srv->jobs_cv);
}

static void job_enqueue(struct http_server *srv, struct job *j)
{
    blockers_grow(srv);
    job_append(srv, j);
}

/* Queues every parked job whose time has come, or all of them when the
 * pool stops (their requests are told so: rq->stopping). jobs_mu held. */
static void parked_release(struct http_server *srv, int64_t now_ms)
{
    while (srv->parked && (srv->jobs_stop || srv->parked->due_ms <= now_ms)) {
        struct job *j = srv->parked;
        srv->parked = j->next;
        if (j->pipe_wait) {
            j->pipe_wait->waiter = NULL;
            j->pipe_wait = NULL;
        }
        if (srv->jobs_stop)
            j->rq->stopping = 1;
        job_enqueue(srv, j);
    }
}

/* The timer thread: sleeps until the soonest parked job is due. */
static void *timer_main(void *arg)
{
    struct http_server *srv = arg;
    pthread_mutex_lock(&srv->jobs_mu);
    while (!srv->jobs_stop) {
        int64_t now = clock_mono_ms();
        parked_release(srv, now);
        if (!srv->parked) {
            pthread_cond_wait(&srv->timer_cv, &srv->jobs_mu);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t wait = srv->parked->due_ms - now;
        ts.tv_sec += (time_t)(wait / 1000);
        ts.tv_nsec += (long)(wait % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&srv->timer_cv, &srv->jobs_mu, &ts);
    }
    pthread_mutex_unlock(&srv->jobs_mu);
    return NULL;
}

/* Parks j until j->due_ms (jobs_mu held): in due order, the timer thread
 * woken when it is the soonest. A pool that stops queues it at once. */
static void job_park(struct http_server *srv, struct job *j)
{
    int now = srv->jobs_stop;
    if (!now && !srv->timer_started) {
        if (pthread_create(&srv->timer, NULL, timer_main, srv) == 0)
            srv->timer_started = 1;
        else
            log_warn("http: cannot start the timer thread: %s", strerror(errno));
        now = !srv->timer_started; /* runs again at once: a short pause, on a thread */
    }
    if (now) {
        if (j->pipe_wait) {
            j->pipe_wait->waiter = NULL;
            j->pipe_wait = NULL;
        }
        j->rq->stopping = srv->jobs_stop;
        job_enqueue(srv, j);
        return;
    }
    struct job **pp = &srv->parked;
    while (*pp && (*pp)->due_ms <= j->due_ms)
        pp = &(*pp)->next;
    j->next = *pp;
    *pp = j;
    if (srv->parked == j)
        pthread_cond_signal(&srv->timer_cv);
}

/* Queues a parked job now (jobs_mu held): out of the parked list and, when
 * it waited for a body's bytes too, off that body. */
static void job_unpark(struct http_server *srv, struct job *j)
{
    for (struct job **pp = &srv->parked; *pp; pp = &(*pp)->next)
        if (*pp == j) {
            *pp = j->next;
            break;
        }
    if (j->pipe_wait) {
        j->pipe_wait->waiter = NULL;
        j->pipe_wait = NULL;
    }
    job_enqueue(srv, j);
}

int req_defer(struct req *rq, struct resp *rs, unsigned ms, http_handler_fn cont)
{
    struct ctx *cx = (struct ctx *)rq; /* rq is the first member */
    struct job *j = rq->conn ? cx->job : NULL;
    if (!j) {
        /* Not on a blocking thread: the pause is taken here. */
        if (rq->conn) {
            pthread_mutex_lock(&cx->srv->jobs_mu);
            if (cx->srv->jobs_stop)
                rq->stopping = 1;
            pthread_mutex_unlock(&cx->srv->jobs_mu);
        }
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        while (!rq->stopping && nanosleep(&ts, &ts) != 0)
            ;
        return cont(rq, rs);
    }
    j->cont = cont;
    j->due_ms = clock_mono_ms() + ms;
    return HTTP_DEFER;
}

static void job_resume(struct req *rq, struct resp *rs)
{
    struct job *j = rq->async_ctx;
    rq->async_ctx = NULL;
    *rs = j->rs;
    int rc = j->rc;
    xfree(j);
    if (rc)
        error_resp(rq, rs, rc);
}

/* Frees a job that will not run, giving back its share. */
static void job_uncharge(struct http_server *srv, struct job *j)
{
    fairshare_give(srv->share, j->org, j->session);
    xfree(j->org);
    xfree(j->session);
    xfree(j);
}

static void *blocker_main(void *arg)
{
    struct http_server *srv = arg;
    pthread_mutex_lock(&srv->jobs_mu);
    for (;;) {
        while (!srv->jobs_head && !srv->jobs_stop) {
            srv->nidle++;
            pthread_cond_wait(&srv->jobs_cv, &srv->jobs_mu);
            srv->nidle--;
        }
        struct job *j = srv->jobs_head;
        if (!j)
            break; /* stopping, and nothing left to run */
        srv->jobs_head = j->next;
        srv->jobs_queued--;
        if (!srv->jobs_head)
            srv->jobs_tail = &srv->jobs_head;
        pthread_mutex_unlock(&srv->jobs_mu);

        struct req *rq = j->rq;
        struct ctx *cx = (struct ctx *)rq;
        /* The thread's share is given back once the handler is done with
         * it, after j (and rq) may be gone. */
        char *org = j->org, *session = j->session;
        http_handler_fn fn = j->cont ? j->cont : j->route->fn;
        j->cont = NULL;
        cx->job = j;
        int rc = fn(rq, &j->rs);
        cx->job = NULL;
        if (rc == HTTP_DEFER && j->cont) {
            /* Parked (req_defer, req_defer_body): the share stays
             * charged, the thread is free for the next job. */
            pthread_mutex_lock(&srv->jobs_mu);
            if (j->due_ms >= 0) {
                job_park(srv, j);
                continue;
            }
            struct body_pipe *p = cx->pipe;
            pthread_mutex_lock(&p->mu);
            int ready = pipe_ready(p);
            pthread_mutex_unlock(&p->mu);
            if (ready || srv->jobs_stop) {
                rq->stopping = srv->jobs_stop;
                job_enqueue(srv, j);
            } else {
                /* Woken by the body, or by the timer to look at the
                 * client again (req_body_take). */
                p->waiter = j;
                j->pipe_wait = p;
                j->due_ms = clock_mono_ms() + LIM_HTTP_STREAM_CHECK_MS;
                job_park(srv, j);
            }
            continue;
        }
        if (rc == HTTP_SUSPEND) {
            /* The handler parked the request with its own continuation,
             * which may already have run: rq is no longer ours to touch. */
            json_decref(j->rs.json);
            xfree(j->rs.text);
            json_decref(j->rs.more_headers);
            xfree(j);
        } else {
            j->rc = rc;
            rq->resume_fn = job_resume;
            rq->done_fn = NULL;
            rq->async_ctx = j;
            if (cx->pipe)
                pipe_done(srv, cx);
            else
                req_resume(rq);
        }

        fairshare_give(srv->share, org, session);
        xfree(org);
        xfree(session);
        pthread_mutex_lock(&srv->jobs_mu);
        if (--srv->jobs_live == 0)
            pthread_cond_broadcast(&srv->jobs_idle_cv);
    }
    pthread_mutex_unlock(&srv->jobs_mu);
    return NULL;
}

/* Queues rq's handler for a blocking thread: HTTP_SUSPEND, 0 when it
 * must run here instead (the server stops, or no thread can be started), or
 * E_LIMIT (rq->err filled) when its organization or session already has its
 * share of the threads (rq->tenant, rq->tenant_session): it is charged
 * before it takes or waits for a thread, so no tenant can hold them all. */
static int offload(struct http_server *srv, struct req *rq, const struct route *r)
{
    int rc = fairshare_take(srv->share, rq->tenant, rq->tenant_session, &rq->err);
    if (rc)
        return rc;
    struct job *j = xcalloc(1, sizeof *j);
    j->rq = rq;
    j->route = r;
    j->rs.status = 200;
    j->org = rq->tenant ? xstrdup(rq->tenant) : NULL;
    j->session = rq->tenant_session ? xstrdup(rq->tenant_session) : NULL;
    pthread_mutex_lock(&srv->jobs_mu);
    if (srv->jobs_stop) {
        pthread_mutex_unlock(&srv->jobs_mu);
        job_uncharge(srv, j);
        return 0;
    }
    blockers_grow(srv);
    if (srv->nblockers == 0) {
        pthread_mutex_unlock(&srv->jobs_mu);
        job_uncharge(srv, j);
        return 0;
    }
    job_append(srv, j);
    srv->jobs_live++;
    pthread_mutex_unlock(&srv->jobs_mu);
    return HTTP_SUSPEND;
}

/* Lets every queued and running blocking handler finish (their requests are
 * resumed; parked ones run at once, told the server stops), then ends the
 * threads. */
static void blockers_stop(struct http_server *srv)
{
    pthread_mutex_lock(&srv->jobs_mu);
    srv->jobs_stop = 1;
    parked_release(srv, 0);
    pthread_cond_broadcast(&srv->jobs_cv);
    pthread_cond_signal(&srv->timer_cv);
    while (srv->jobs_live)
        pthread_cond_wait(&srv->jobs_idle_cv, &srv->jobs_mu);
    unsigned n = srv->nblockers;
    int timer = srv->timer_started;
    pthread_mutex_unlock(&srv->jobs_mu);
    for (unsigned i = 0; i < n; i++)
        pthread_join(srv->blockers[i], NULL);
    if (timer)
        pthread_join(srv->timer, NULL);
}

unsigned http_default_threads(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    if (n < 1) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (int)c : 1;
    }
    return n > 16 ? 16u : (unsigned)n;
}

/* Routes the request and runs the authorize hook: 0 with rq->route set, or
 * an E_* code with rq->err filled. A connection's request is admitted on the
 * header pass, before a byte of its body is read. */
static int admit(struct ctx *cx)
{
    struct req *rq = &cx->rq;
    struct http_server *srv = cx->srv;
    const struct route *found = NULL;
    int path_known = 0;
    cx->admitted = 1;
    if (strlen(rq->path) >= LIM_PATH_BYTES)
        return err_set(&rq->err, E_NOTFOUND, "not_found", "no such endpoint");
    for (size_t i = 0; i < srv->cfg.nroutes; i++) {
        const struct route *r = &srv->cfg.routes[i];
        if (!match(r->pattern, rq->path, cx->parambuf, sizeof cx->parambuf, rq->params,
                   &rq->nparams))
            continue;
        path_known = 1;
        if (strcmp(r->method, rq->method) == 0) {
            found = r;
            break;
        }
    }
    if (!found) {
        if (path_known)
            return err_set(&rq->err, E_METHOD, "method_not_allowed", "%s is not allowed on %s",
                           rq->method, rq->path);
        return err_set(&rq->err, E_NOTFOUND, "not_found", "no endpoint %s %s", rq->method,
                       rq->path);
    }
    rq->route = found;
    return srv->cfg.authorize ? srv->cfg.authorize(rq, found->flags) : 0;
}

/* Admits the request (unless the header pass did) and runs the handler.
 * Returns HTTP_SUSPEND when the handler parked the request, 0 otherwise (rs
 * then holds the response). */
static int dispatch(struct ctx *cx, struct resp *rs)
{
    struct req *rq = &cx->rq;
    struct http_server *srv = cx->srv;
    int rc = cx->admitted ? cx->refused : admit(cx);
    const struct route *found = rq->route;
    int hooked = -1;
    if (rc == 0 && srv->cfg.route_hook)
        hooked = srv->cfg.route_hook(rq, rs, found->flags);
    if (hooked != -1)
        rc = hooked;
    else if (rc == 0) {
        rc = (found->flags & HTTP_ROUTE_BLOCKING) && rq->conn ? offload(srv, rq, found) : 0;
        if (rc == 0)
            rc = found->fn(rq, rs);
    }
    if (rc == HTTP_SUSPEND)
        return HTTP_SUSPEND;
    if (rc)
        error_resp(rq, rs, rc);
    return 0;
}

/* The body cap of a request, chosen from its route before a byte of the body
 * is read: uploads get LIM_UPLOAD_BYTES, HTTP_ROUTE_LARGE_BODY routes
 * LIM_LARGE_BODY_BYTES, everything else LIM_BODY_BYTES. */
static size_t body_limit(const struct http_server *srv, const char *method, const char *url)
{
    char parambuf[LIM_PATH_BYTES];
    const char *params[LIM_PATH_PARAMS];
    size_t n;
    /* Uploads are POST or PUT: every other request (the hot GETs) skips the scan. */
    if ((strcmp(method, "POST") != 0 && strcmp(method, "PUT") != 0) ||
        strlen(url) >= LIM_PATH_BYTES)
        return LIM_BODY_BYTES;
    for (size_t i = 0; i < srv->cfg.nroutes; i++) {
        const struct route *r = &srv->cfg.routes[i];
        if (!(r->flags & (HTTP_ROUTE_UPLOAD | HTTP_ROUTE_LARGE_BODY)) ||
            strcmp(r->method, method) != 0)
            continue;
        if (match(r->pattern, url, parambuf, sizeof parambuf, params, &n))
            return (r->flags & HTTP_ROUTE_UPLOAD) ? LIM_UPLOAD_BYTES : LIM_LARGE_BODY_BYTES;
    }
    return LIM_BODY_BYTES;
}

int http_call(const struct http_config *cfg, const struct http_call_req *in,
              struct http_call_res *out)
{
    memset(out, 0, sizeof *out);
    if (strlen(in->path) >= LIM_PATH_BYTES)
        return -1;
    struct http_server *srv = xcalloc(1, sizeof *srv);
    srv->cfg = *cfg;
    struct ctx *cx = xcalloc(1, sizeof *cx);
    cx->srv = srv;
    cx->call_headers = in->headers;
    cx->call_query = in->query;
    cx->rq.method = in->method;
    cx->rq.path = in->path;
    cx->rq.orig_path = in->path;
    if (cfg->rewrite && cfg->rewrite(in->path, cx->pathbuf, sizeof cx->pathbuf)) {
        cx->rq.path = cx->pathbuf;
        cx->rq.via_session_url = 1;
    }
    cx->rq.app = cfg->app;
    cx->rq.start_us = clock_mono_us();
    err_init(&cx->rq.err);
    cx->body_limit = body_limit(srv, in->method, cx->rq.path);
    buf_init(&cx->body, cx->body_limit);
    if (in->body_len && buf_append(&cx->body, in->body, in->body_len) != 0)
        cx->rq.body_too_big = 1;
    cx->rq.body = cx->body.p;
    cx->rq.body_len = cx->body.len;
    struct resp rs = {0};
    rs.status = 200;
    int rc = 0;
    if (cx->rq.body_too_big) {
        err_set(&cx->rq.err, E_TOOBIG, "payload_too_large",
                "request body exceeds the limit of %zu bytes", cx->body_limit);
        error_resp(&cx->rq, &rs, E_TOOBIG);
    } else if (dispatch(cx, &rs) == HTTP_SUSPEND || rs.upgrade || rs.stream) {
        rc = -1; /* parked, upgraded and streamed answers need a connection */
    }
    if (rc == 0) {
        out->status = rs.status;
        out->json = rs.json;
        out->text = rs.text;
        out->text_len = rs.text_len;
        out->headers = json_object();
        for (size_t i = 0; i < rs.nheaders; i++)
            json_object_set_new(out->headers, rs.headers[i].name, json_string(rs.headers[i].value));
        rs.json = NULL;
        rs.text = NULL;
    }
    json_decref(rs.json);
    xfree(rs.text);
    json_decref(rs.more_headers);
    if (cx->rq.done_fn)
        cx->rq.done_fn(&cx->rq, rc == 0);
    if (cfg->cleanup)
        cfg->cleanup(&cx->rq);
    buf_free(&cx->body);
    xfree(cx);
    xfree(srv);
    return rc;
}

void http_call_res_clear(struct http_call_res *r)
{
    json_decref(r->json);
    json_decref(r->headers);
    xfree(r->text);
    memset(r, 0, sizeof *r);
}

/* A body of unknown length takes its share of the budget this much ahead
 * of what arrived, so that the budget's lock is not taken per chunk. */
#define BODY_TAKE_STEP ((size_t)256 * 1024)

/* Takes n more bytes of the body budget for the request's tenant: 0, or
 * E_LIMIT (429: the tenant's share is used up) or E_UNAVAIL (503: the
 * server's budget is) with rq->err filled. */
static int take_budget(struct http_server *srv, struct ctx *cx, size_t n)
{
    if (!cx->tenant[0]) {
        if (cx->rq.tenant) {
            snprintf(cx->tenant, sizeof cx->tenant, "org %s", cx->rq.tenant);
        } else {
            /* Before authentication the tenant is the client's address. */
            char ip[INET6_ADDRSTRLEN];
            snprintf(cx->tenant, sizeof cx->tenant, "ip %s", req_client_ip(&cx->rq, ip, sizeof ip));
        }
    }
    int rc = budget_take(srv->budget, cx->tenant, n);
    if (rc == 0) {
        cx->body_taken += n;
        return 0;
    }
    cx->rq.err.retry_after = 1;
    if (rc == E_LIMIT)
        return err_set(&cx->rq.err, rc, "rate_limited",
                       "request bodies in flight for this %s would exceed its share of %zu "
                       "bytes; retry when its other uploads have finished",
                       cx->rq.tenant ? "organization" : "client address", srv->cfg.body_share);
    return err_set(&cx->rq.err, rc, "unavailable",
                   "the server holds as many request bodies as it may (%zu bytes); retry "
                   "shortly",
                   srv->cfg.body_budget);
}

/* The header pass: routing, authorization, the route's size cap and the
 * tenant's share of the body budget, all before a byte of the body is read.
 * A refusal is answered at once when a body of unknown or more than
 * LIM_HTTP_DRAIN_BYTES follows, or the client waits for 100 Continue
 * (libmicrohttpd then closes the connection without reading the body);
 * otherwise the body is read, dropped unkept, and the refusal answered on the
 * final call, so that keep-alive survives a 401 on a GET or a small POST. */
static enum MHD_Result admit_head(struct http_server *srv, struct ctx *cx, struct MHD_Connection *c)
{
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding");
    const char *expect = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Expect");
    size_t n = 0, digits = cl ? strspn(cl, "0123456789") : 0;
    int known = digits && !cl[digits] && digits <= 9 && parse_size(cl, &n) == 0;
    int has_body = te != NULL || (cl && !(known && n == 0));
    int rc = admit(cx);
    /* All digits and either too long for parse_size (10+ digits, so at least
     * 1 GB) or above the limit. */
    if (rc == 0 && digits && !cl[digits] && (digits > 9 || n > cx->body_limit)) {
        cx->rq.body_too_big = 1;
        rc = err_set(&cx->rq.err, E_TOOBIG, "payload_too_large",
                     "request body of %.32s bytes exceeds the limit of %zu bytes", cl,
                     cx->body_limit);
    }
    int streamed = rc == 0 && has_body && !srv->cfg.buffer_streams &&
                   (cx->rq.route->flags & HTTP_ROUTE_STREAM) &&
                   (cx->rq.route->flags & HTTP_ROUTE_BLOCKING);
    if (streamed) {
        /* The handler starts now and takes the body as it arrives. */
        cx->pipe = pipe_new(cx->body_limit);
        rc = offload(srv, &cx->rq, cx->rq.route);
        if (rc == HTTP_SUSPEND) {
            rc = 0;
        } else {
            pipe_free(cx->pipe);
            cx->pipe = NULL;
            if (rc == 0) {
                cx->rq.err.retry_after = 1;
                rc = err_set(&cx->rq.err, E_UNAVAIL, "unavailable",
                             "no thread is free to take the upload; retry shortly");
            }
        }
    }
    if (rc == 0 && known && n > 0 && !streamed) {
        rc = take_budget(srv, cx, n);
        /* The whole body is due: one allocation instead of doublings (pages
         * are only paid for as the body arrives). */
        if (rc == 0 && buf_reserve(&cx->body, n) != 0)
            rc = err_set(&cx->rq.err, E_TOOBIG, "payload_too_large",
                         "request body exceeds the limit of %zu bytes", cx->body_limit);
    }
    if (rc == 0)
        return MHD_YES;
    cx->refused = rc;
    if (!has_body || (known && n <= LIM_HTTP_DRAIN_BYTES && !expect))
        return MHD_YES;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (ci && ci->socket_context && !expect)
        headwatch_linger(ci->socket_context);
    struct resp rs = {0};
    error_resp(&cx->rq, &rs, rc);
    return send_resp(c, &cx->rq, &rs);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    struct http_server *srv = cls;
    struct ctx *cx = *con_cls;
    if (!cx) {
        /* Not calloc: the context holds kilobytes of buffers that are
         * written before they are read; zero only the request header. */
        cx = xmalloc(sizeof *cx);
        memset(&cx->rq, 0, offsetof(struct req, err));
        cx->rq.auth = NULL;
        cx->rq.tenant_session = NULL;
        cx->rq.status = 0;
        cx->upgrade.fn = NULL;
        cx->rq.resume_fn = NULL;
        cx->rq.done_fn = NULL;
        cx->rq.async_ctx = NULL;
        cx->rq.suspended = 0;
        cx->rq.defer_ctx = NULL;
        cx->rq.stopping = 0;
        cx->job = NULL;
        cx->pipe = NULL;
        cx->body_off = 0;
        cx->srv = srv;
        cx->rq.conn = c;
        cx->rq.method = method;
        const char *routed = url;
        if (srv->cfg.rewrite && strlen(url) < LIM_PATH_BYTES &&
            srv->cfg.rewrite(url, cx->pathbuf, sizeof cx->pathbuf))
            routed = cx->pathbuf;
        cx->rq.path = routed;
        cx->rq.orig_path = url;
        cx->rq.via_session_url = routed != url;
        cx->body_limit = body_limit(srv, method, routed);
        buf_init(&cx->body, cx->body_limit);
        cx->rq.app = srv->cfg.app;
        cx->rq.start_us = clock_mono_us();
        err_init(&cx->rq.err);
        cx->admitted = 0;
        cx->refused = 0;
        cx->body_taken = 0;
        cx->tenant[0] = '\0';
        *con_cls = cx;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        if (ci && ci->socket_context)
            headwatch_head_done(ci->socket_context);
        return admit_head(srv, cx, c);
    }
    if (*upload_size && cx->pipe) {
        pipe_feed(cx, upload_data, upload_size);
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (cx->refused || cx->rq.body_too_big)
            return MHD_YES; /* read and dropped: the refusal is answered at the end */
        if (cx->body.len + n > cx->body_taken && cx->body.len + n <= cx->body_limit) {
            /* A body of unknown length (chunked) takes its share as it
             * grows, a chunk ahead. */
            size_t want = cx->body.len + n + BODY_TAKE_STEP - cx->body_taken;
            if (cx->body_taken + want > cx->body_limit)
                want = cx->body_limit - cx->body_taken;
            if ((cx->refused = take_budget(srv, cx, want)) != 0) {
                buf_free(&cx->body);
                cx->rq.body = NULL;
                cx->rq.body_len = 0;
                return MHD_YES;
            }
        }
        if (buf_append(&cx->body, upload_data, n) != 0) {
            cx->rq.body_too_big = 1;
            return MHD_YES;
        }
        cx->rq.body = cx->body.p;
        cx->rq.body_len = cx->body.len;
        return MHD_YES;
    }
    if (cx->rq.status) /* already answered (413 on the first call) */
        return MHD_YES;
    if (cx->pipe && !cx->rq.suspended) {
        /* The handler of a streamed body answers once it returned. */
        cx->rq.suspended = 1;
        if (!pipe_end(cx))
            return MHD_YES;
    }
    struct resp rs = {0};
    rs.status = 200;
    if (cx->rq.suspended) {
        /* Resumed: the handler's continuation builds the response. */
        cx->rq.suspended = 0;
        cx->rq.resume_fn(&cx->rq, &rs);
    } else if (cx->refused) {
        error_resp(&cx->rq, &rs, cx->refused);
    } else if (cx->rq.body_too_big) {
        err_set(&cx->rq.err, E_TOOBIG, "payload_too_large",
                "request body exceeds the limit of %zu bytes", cx->body_limit);
        error_resp(&cx->rq, &rs, E_TOOBIG);
    } else if (dispatch(cx, &rs) == HTTP_SUSPEND) {
        cx->rq.suspended = 1;
        MHD_suspend_connection(c);
        return MHD_YES;
    }
    return send_resp(c, &cx->rq, &rs);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct http_server *srv = cls;
    struct ctx *cx = *con_cls;
    if (!cx)
        return;
    int64_t us = clock_mono_us() - cx->rq.start_us;
    int quiet = cx->rq.route && (cx->rq.route->flags & HTTP_ROUTE_PROBE);
    log_access(quiet ? LOG_DEBUG : LOG_INFO, cx->rq.method, cx->rq.path, cx->rq.status,
               (long long)us, toe != MHD_REQUEST_TERMINATED_COMPLETED_OK);
    if (srv->cfg.metrics)
        metrics_http(cx->rq.route ? (size_t)(cx->rq.route - srv->cfg.routes) : METRICS_NO_ROUTE,
                     cx->rq.status, us);
    if (srv->cfg.completed)
        srv->cfg.completed(&cx->rq, us);
    if (cx->pipe && pipe_orphan(cx)) {
        *con_cls = NULL; /* the handler's job frees it (pipe_done) */
        return;
    }
    if (cx->pipe || (cx->rq.async_ctx && cx->rq.resume_fn == job_resume))
        /* Answered, but the client left before the body's end, or before
         * its resumed connection sent the answer of a blocking handler
         * (libmicrohttpd then ends the exchange without the access
         * handler, and the job holding the answer would leak). */
        pipe_discard_answer(cx);
    if (cx->rq.done_fn)
        cx->rq.done_fn(&cx->rq, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
    if (cx->upgrade.fn && !cx->upgrade.done && cx->upgrade.cancel)
        cx->upgrade.cancel(cx->upgrade.ctx);
    /* A kept-alive connection waits for its next head, with a deadline
     * (not an upgraded one: its socket belongs to the upgrade's owner). */
    const union MHD_ConnectionInfo *ci =
        toe == MHD_REQUEST_TERMINATED_COMPLETED_OK && !cx->upgrade.fn
            ? MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT)
            : NULL;
    if (ci && ci->socket_context)
        headwatch_head_wait(ci->socket_context);
    ctx_free(srv, cx);
    *con_cls = NULL;
}

/* The end of a request's life: its cleanup hook, its body and its share of
 * the body budget. */
static void ctx_free(struct http_server *srv, struct ctx *cx)
{
    if (srv->cfg.cleanup)
        srv->cfg.cleanup(&cx->rq);
    buf_free(&cx->body);
    if (cx->body_taken)
        budget_give(srv->budget, cx->tenant, cx->body_taken);
    pipe_free(cx->pipe);
    xfree(cx);
}

/* libmicrohttpd's messages, at most LOG_BURST a second: a client can cause
 * one per connection ("Server reached connection limit"), and the log must
 * not grow at the rate of a connect flood. Dropped ones are counted. */
#define LOG_BURST 10
static void mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static int64_t second;
    static unsigned in_second;
    static unsigned long dropped;
    int64_t now = clock_mono_ms() / 1000;
    pthread_mutex_lock(&mu);
    if (now != second) {
        second = now;
        in_second = 0;
    }
    int keep = in_second < LOG_BURST;
    unsigned long was_dropped = keep ? dropped : 0;
    if (keep) {
        in_second++;
        dropped = 0;
    } else {
        dropped++;
    }
    pthread_mutex_unlock(&mu);
    if (!keep)
        return;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && line[n - 1] == '\n')
        line[--n] = '\0';
    if (was_dropped)
        log_warn("http: %s (and %lu messages not logged)", line, was_dropped);
    else
        log_warn("http: %s", line);
}

/* libmicrohttpd tells us of each connection: its head deadline starts at
 * the accept and ends with it (before its socket is closed). */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct http_server *srv = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = ci ? headwatch_conn_new(srv->heads, ci->connect_fd) : NULL;
    } else {
        headwatch_conn_free(*socket_context);
        *socket_context = NULL;
    }
}

/* The connection limit: as configured, and at most half the open-files
 * limit (the other half is for browsers, relays and files). */
static unsigned connection_limit(unsigned want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        want > rl.rlim_cur / 2) {
        unsigned cap = rl.rlim_cur / 2 > 16 ? (unsigned)(rl.rlim_cur / 2) : 16;
        log_warn("http: %u connections at most, half the open-files limit of %llu (not %u)", cap,
                 (unsigned long long)rl.rlim_cur, want);
        return cap;
    }
    return want;
}

int http_start(const struct http_config *cfg, struct http_server **out, struct err *e)
{
    *out = NULL;
    struct http_server *srv = xcalloc(1, sizeof *srv);
    srv->cfg = *cfg;
    struct http_config *hc = &srv->cfg;
    hc->max_connections =
        connection_limit(hc->max_connections ? hc->max_connections : LIM_HTTP_CONNECTIONS);
    if (!hc->conns_per_ip)
        hc->conns_per_ip = LIM_HTTP_CONNECTIONS_PER_IP;
    if (!hc->head_timeout_s)
        hc->head_timeout_s = LIM_HTTP_HEAD_SECONDS;
    if (!hc->body_budget)
        hc->body_budget = LIM_HTTP_BODY_BUDGET_BYTES;
    if (!hc->body_share)
        hc->body_share = LIM_HTTP_BODY_TENANT_BYTES;
    if (hc->body_share > hc->body_budget)
        hc->body_share = hc->body_budget;
    if (hc->metrics) {
        /* The labels outlive the server: a scrape may read them at any time. */
        const char **methods = xcalloc(hc->nroutes + 1, sizeof *methods);
        const char **patterns = xcalloc(hc->nroutes + 1, sizeof *patterns);
        for (size_t i = 0; i < hc->nroutes; i++) {
            methods[i] = hc->routes[i].method;
            patterns[i] = hc->routes[i].pattern;
        }
        metrics_http_routes(hc->nroutes, methods, patterns);
    }
    pthread_mutex_init(&srv->streams_mu, NULL);
    pthread_mutex_init(&srv->jobs_mu, NULL);
    pthread_cond_init(&srv->jobs_cv, NULL);
    pthread_cond_init(&srv->jobs_idle_cv, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&srv->timer_cv, &ca);
    pthread_condattr_destroy(&ca);
    srv->jobs_tail = &srv->jobs_head;
    srv->max_blockers = hc->blocking_threads && hc->blocking_threads < LIM_HTTP_BLOCKING_THREADS
                            ? hc->blocking_threads
                            : LIM_HTTP_BLOCKING_THREADS;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
                     MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE | MHD_USE_ITC;
    if (strchr(cfg->host, ':')) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)cfg->port);
        if (inet_pton(AF_INET6, cfg->host, &a->sin6_addr) != 1)
            goto bad_host;
        flags |= MHD_USE_IPv6;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)cfg->port);
        if (inet_pton(AF_INET, cfg->host, &a->sin_addr) != 1)
            goto bad_host;
    }
    /* The socket is ours: bound and listening before the daemon's threads
     * start, so that the port is known (cfg->bound) before any request. SO_REUSEADDR
     * lets a restart bind at once; no SO_REUSEPORT, which would let a second
     * server bind the same port and silently take half the connections. */
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    socklen_t sl =
        ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    if (fd >= 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd >= 0 && ss.ss_family == AF_INET6)
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (fd < 0 || bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, 511) != 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
        int er = errno;
        if (fd >= 0)
            close(fd);
        xfree(srv);
        return err_set(e, E_INTERNAL, "internal",
                       "cannot listen on %s:%d (%s: in use, or not an address of this machine)",
                       cfg->host, cfg->port, strerror(er));
    }
    srv->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                               : ((struct sockaddr_in *)&ss)->sin_port);
    if (headwatch_start(hc->head_timeout_s, &srv->heads, e) != 0) {
        close(fd);
        xfree(srv);
        return e->rc;
    }
    srv->budget = budget_new(hc->body_budget, hc->body_share);
    if (cfg->bound)
        cfg->bound(cfg->app, srv->port);
    srv->share = fairshare_new(LIM_HTTP_BLOCKING_PER_ORG, LIM_HTTP_BLOCKING_PER_SESSION);
    /* The idle timeout (120 s) is for bodies and responses; a request head
     * has head_timeout_s however its bytes trickle (the head watch). */
    srv->d = MHD_start_daemon(
        flags, 0, NULL, NULL, &on_request, srv, MHD_OPTION_EXTERNAL_LOGGER, &mhd_log, NULL,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd, MHD_OPTION_THREAD_POOL_SIZE,
        cfg->threads ? cfg->threads : http_default_threads(), MHD_OPTION_NOTIFY_COMPLETED,
        &on_completed, srv, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)LIM_HEADER_BYTES,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_CONNECTION_LIMIT,
        hc->max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        hc->conns_per_ip == HTTP_NO_LIMIT ? 0u : hc->conns_per_ip, MHD_OPTION_NOTIFY_CONNECTION,
        &on_connection, srv, MHD_OPTION_END);
    if (!srv->d) {
        close(fd);
        headwatch_stop(srv->heads);
        budget_free(srv->budget);
        fairshare_free(srv->share);
        xfree(srv);
        return err_set(e, E_INTERNAL, "internal", "cannot start serving on %s:%d", cfg->host,
                       srv->port);
    }
    *out = srv;
    return 0;
bad_host:
    xfree(srv);
    return err_set(e, E_INVALID, "bad_request", "listen host %s is not a numeric IP address",
                   cfg->host);
}

int http_port(const struct http_server *srv)
{
    return srv->port;
}

void http_quiesce(struct http_server *srv)
{
    if (!srv || srv->quiesced)
        return;
    srv->listen_fd = MHD_quiesce_daemon(srv->d);
    srv->quiesced = 1;
}

void http_stop(struct http_server *srv)
{
    if (!srv)
        return;
    http_quiesce(srv);
    blockers_stop(srv); /* their requests resume before the daemon stops */
    streams_stop(srv);
    MHD_stop_daemon(srv->d); /* joins the workers once in-flight requests finish */
    if (srv->listen_fd != MHD_INVALID_SOCKET)
        close(srv->listen_fd);
    headwatch_stop(srv->heads); /* every connection was released */
    budget_free(srv->budget);
    pthread_mutex_destroy(&srv->streams_mu);
    pthread_mutex_destroy(&srv->jobs_mu);
    pthread_cond_destroy(&srv->jobs_cv);
    pthread_cond_destroy(&srv->jobs_idle_cv);
    pthread_cond_destroy(&srv->timer_cv);
    fairshare_free(srv->share);
    xfree(srv);
}
