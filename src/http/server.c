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
#include <sys/socket.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/xalloc.h"
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
    unsigned jobs_live; /* queued or running */
    unsigned nblockers, nidle;
    int jobs_stop;
    pthread_t blockers[LIM_HTTP_BLOCKING_THREADS];
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
    struct buf body;   /* the request body, at most body_limit bytes; rq.body points into it */
    size_t body_limit; /* LIM_BODY_BYTES, or LIM_UPLOAD_BYTES on an HTTP_ROUTE_UPLOAD route */
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
    if (rq->body_too_big)
        return err_set(&rq->err, E_TOOBIG, "payload_too_large",
                       "request body exceeds the limit of %u bytes", LIM_BODY_BYTES);
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
    int rc = jsonx_parse(b, rq->body_len, LIM_BODY_BYTES, &v, &rq->err);
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

struct job {
    struct req *rq;
    const struct route *route;
    struct resp rs;
    int rc;
    struct job *next;
};

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
        if (!srv->jobs_head)
            srv->jobs_tail = &srv->jobs_head;
        pthread_mutex_unlock(&srv->jobs_mu);

        struct req *rq = j->rq;
        int rc = j->route->fn(rq, &j->rs);
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
            req_resume(rq);
        }

        pthread_mutex_lock(&srv->jobs_mu);
        if (--srv->jobs_live == 0)
            pthread_cond_broadcast(&srv->jobs_idle_cv);
    }
    pthread_mutex_unlock(&srv->jobs_mu);
    return NULL;
}

/* Queues rq's handler for a blocking thread: HTTP_SUSPEND, or 0 when it
 * must run here instead (the server stops, or no thread can be started). */
static int offload(struct http_server *srv, struct req *rq, const struct route *r)
{
    struct job *j = xcalloc(1, sizeof *j);
    j->rq = rq;
    j->route = r;
    j->rs.status = 200;
    pthread_mutex_lock(&srv->jobs_mu);
    if (srv->jobs_stop) {
        pthread_mutex_unlock(&srv->jobs_mu);
        xfree(j);
        return 0;
    }
    if (srv->nidle == 0 && srv->nblockers < LIM_HTTP_BLOCKING_THREADS) {
        if (pthread_create(&srv->blockers[srv->nblockers], NULL, blocker_main, srv) == 0)
            srv->nblockers++;
        else
            log_warn("http: cannot start a blocking handler thread (%u running): %s",
                     srv->nblockers, strerror(errno));
    }
    if (srv->nblockers == 0) {
        pthread_mutex_unlock(&srv->jobs_mu);
        xfree(j);
        return 0;
    }
    *srv->jobs_tail = j;
    srv->jobs_tail = &j->next;
    srv->jobs_live++;
    pthread_cond_signal(&srv->jobs_cv);
    pthread_mutex_unlock(&srv->jobs_mu);
    return HTTP_SUSPEND;
}

/* Lets every queued and running blocking handler finish (their requests are
 * resumed), then ends the threads. */
static void blockers_stop(struct http_server *srv)
{
    pthread_mutex_lock(&srv->jobs_mu);
    srv->jobs_stop = 1;
    pthread_cond_broadcast(&srv->jobs_cv);
    while (srv->jobs_live)
        pthread_cond_wait(&srv->jobs_idle_cv, &srv->jobs_mu);
    unsigned n = srv->nblockers;
    pthread_mutex_unlock(&srv->jobs_mu);
    for (unsigned i = 0; i < n; i++)
        pthread_join(srv->blockers[i], NULL);
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

/* Routes and runs the handler. Returns HTTP_SUSPEND when the handler parked
 * the request, 0 otherwise (rs then holds the response). */
static int dispatch(struct ctx *cx, struct resp *rs)
{
    struct req *rq = &cx->rq;
    struct http_server *srv = cx->srv;
    const struct route *found = NULL;
    int path_known = 0;
    if (strlen(rq->path) >= LIM_PATH_BYTES) {
        err_set(&rq->err, E_NOTFOUND, "not_found", "no such endpoint");
        error_resp(rq, rs, E_NOTFOUND);
        return 0;
    }
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
        int rc = path_known ? E_METHOD : E_NOTFOUND;
        if (path_known)
            err_set(&rq->err, rc, "method_not_allowed", "%s is not allowed on %s", rq->method,
                    rq->path);
        else
            err_set(&rq->err, rc, "not_found", "no endpoint %s %s", rq->method, rq->path);
        error_resp(rq, rs, rc);
        return 0;
    }
    rq->route = found;
    int rc = srv->cfg.authorize ? srv->cfg.authorize(rq, found->flags) : 0;
    int hooked = -1;
    if (rc == 0 && srv->cfg.route_hook)
        hooked = srv->cfg.route_hook(rq, rs, found->flags);
    if (hooked != -1)
        rc = hooked;
    else if (rc == 0) {
        rc = (found->flags & HTTP_ROUTE_BLOCKING) && rq->conn ? offload(srv, rq, found) : 0;
        if (rc != HTTP_SUSPEND)
            rc = found->fn(rq, rs);
    }
    if (rc == HTTP_SUSPEND)
        return HTTP_SUSPEND;
    if (rc)
        error_resp(rq, rs, rc);
    return 0;
}

/* The body cap of a request, chosen from its route before a byte of the body
 * is read: uploads get LIM_UPLOAD_BYTES, everything else LIM_BODY_BYTES. */
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
        if (!(r->flags & HTTP_ROUTE_UPLOAD) || strcmp(r->method, method) != 0)
            continue;
        if (match(r->pattern, url, parambuf, sizeof parambuf, params, &n))
            return LIM_UPLOAD_BYTES;
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
        cx->rq.status = 0;
        cx->upgrade.fn = NULL;
        cx->rq.resume_fn = NULL;
        cx->rq.done_fn = NULL;
        cx->rq.async_ctx = NULL;
        cx->rq.suspended = 0;
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
        *con_cls = cx;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        size_t n, digits = cl ? strspn(cl, "0123456789") : 0;
        /* All digits and either too long for parse_size (10+ digits, so at
         * least 1 GB) or above the limit. */
        if (digits && !cl[digits] &&
            (digits > 9 || (parse_size(cl, &n) == 0 && n > cx->body_limit))) {
            /* Refuse before reading a byte of the body. */
            struct resp rs = {0};
            cx->rq.body_too_big = 1;
            err_set(&cx->rq.err, E_TOOBIG, "payload_too_large",
                    "request body of %.32s bytes exceeds the limit of %zu bytes", cl,
                    cx->body_limit);
            error_resp(&cx->rq, &rs, E_TOOBIG);
            return send_resp(c, &cx->rq, &rs);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (cx->rq.body_too_big || buf_append(&cx->body, upload_data, n) != 0) {
            cx->rq.body_too_big = 1;
            return MHD_YES;
        }
        cx->rq.body = cx->body.p;
        cx->rq.body_len = cx->body.len;
        return MHD_YES;
    }
    if (cx->rq.status) /* already answered (413 on the first call) */
        return MHD_YES;
    struct resp rs = {0};
    rs.status = 200;
    if (cx->rq.suspended) {
        /* Resumed: the handler's continuation builds the response. */
        cx->rq.suspended = 0;
        cx->rq.resume_fn(&cx->rq, &rs);
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
    (void)c;
    struct http_server *srv = cls;
    struct ctx *cx = *con_cls;
    if (!cx)
        return;
    int64_t us = clock_mono_us() - cx->rq.start_us;
    log_info("access %s %s %d %lldus%s", cx->rq.method, cx->rq.path, cx->rq.status, (long long)us,
             toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (aborted)");
    if (cx->rq.done_fn)
        cx->rq.done_fn(&cx->rq, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
    if (cx->upgrade.fn && !cx->upgrade.done && cx->upgrade.cancel)
        cx->upgrade.cancel(cx->upgrade.ctx);
    if (srv->cfg.cleanup)
        srv->cfg.cleanup(&cx->rq);
    buf_free(&cx->body);
    xfree(cx);
    *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && line[n - 1] == '\n')
        line[--n] = '\0';
    log_warn("http: %s", line);
}

int http_start(const struct http_config *cfg, struct http_server **out, struct err *e)
{
    *out = NULL;
    struct http_server *srv = xcalloc(1, sizeof *srv);
    srv->cfg = *cfg;
    pthread_mutex_init(&srv->streams_mu, NULL);
    pthread_mutex_init(&srv->jobs_mu, NULL);
    pthread_cond_init(&srv->jobs_cv, NULL);
    pthread_cond_init(&srv->jobs_idle_cv, NULL);
    srv->jobs_tail = &srv->jobs_head;
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
    if (cfg->bound)
        cfg->bound(cfg->app, srv->port);
    srv->d = MHD_start_daemon(
        flags, 0, NULL, NULL, &on_request, srv, MHD_OPTION_EXTERNAL_LOGGER, &mhd_log, NULL,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd, MHD_OPTION_THREAD_POOL_SIZE,
        cfg->threads ? cfg->threads : http_default_threads(), MHD_OPTION_NOTIFY_COMPLETED,
        &on_completed, srv, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)LIM_HEADER_BYTES,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_END);
    if (!srv->d) {
        close(fd);
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
    pthread_mutex_destroy(&srv->streams_mu);
    pthread_mutex_destroy(&srv->jobs_mu);
    pthread_cond_destroy(&srv->jobs_cv);
    pthread_cond_destroy(&srv->jobs_idle_cv);
    xfree(srv);
}
