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
#include <microhttpd.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/xalloc.h"
#include "http/http.h"

struct http_server {
    struct MHD_Daemon *d;
    struct http_config cfg;
    int port;
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
    size_t body_cap;
};

/* ---- request accessors ---- */

const char *req_header(struct req *rq, const char *name)
{
    return MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, name);
}

const char *req_query(struct req *rq, const char *name)
{
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
    struct each_ctx ec = {fn, ctx};
    MHD_get_connection_values(rq->conn, MHD_GET_ARGUMENT_KIND, each_arg, &ec);
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
    } else {
        r = body ? MHD_create_response_from_buffer_with_free_callback(len, body, &xfree)
                 : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    }
    if (ctype)
        MHD_add_response_header(r, "Content-Type", ctype);
    for (size_t i = 0; i < rs->nheaders; i++)
        MHD_add_response_header(r, rs->headers[i].name, rs->headers[i].value);
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
    if (!rq->err.rc)
        err_set(&rq->err, rc, http_code_for(http_status_for(rc)), "%s",
                http_code_for(http_status_for(rc)));
    int status = http_status_for(rq->err.rc ? rq->err.rc : rc);
    resp_json(rs, status, http_error_json(&rq->err));
    /* The SDK retries 409 and >= 500; a name conflict or an endpoint this
     * server does not implement will not go away on a retry. */
    if (status == 409 || status == 501)
        resp_header(rs, "x-should-retry", "false");
    if (status == 429 && rq->err.retry_after > 0)
        resp_header(rs, "Retry-After", "%d", rq->err.retry_after);
}

static void dispatch(struct ctx *cx, struct resp *rs)
{
    struct req *rq = &cx->rq;
    struct http_server *srv = cx->srv;
    const struct route *found = NULL;
    int path_known = 0;
    if (strlen(rq->path) >= LIM_PATH_BYTES) {
        err_set(&rq->err, E_NOTFOUND, "not_found", "no such endpoint");
        error_resp(rq, rs, E_NOTFOUND);
        return;
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
        return;
    }
    rq->route = found;
    int rc = srv->cfg.authorize ? srv->cfg.authorize(rq, found->flags) : 0;
    if (rc == 0)
        rc = found->fn(rq, rs);
    if (rc)
        error_resp(rq, rs, rc);
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
        cx->body_cap = 0;
        cx->srv = srv;
        cx->rq.conn = c;
        cx->rq.method = method;
        cx->rq.path = url;
        cx->rq.app = srv->cfg.app;
        cx->rq.start_us = clock_mono_us();
        err_init(&cx->rq.err);
        *con_cls = cx;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        size_t n, digits = cl ? strspn(cl, "0123456789") : 0;
        /* All digits and either too long for parse_size (10+ digits, so at
         * least 1 GB) or above the limit. */
        if (digits && !cl[digits] &&
            (digits > 9 || (parse_size(cl, &n) == 0 && n > LIM_BODY_BYTES))) {
            /* Refuse before reading a byte of the body. */
            struct resp rs = {0};
            cx->rq.body_too_big = 1;
            err_set(&cx->rq.err, E_TOOBIG, "payload_too_large",
                    "request body of %.32s bytes exceeds the limit of %u bytes", cl,
                    LIM_BODY_BYTES);
            error_resp(&cx->rq, &rs, E_TOOBIG);
            return send_resp(c, &cx->rq, &rs);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (cx->rq.body_too_big || cx->rq.body_len + n > LIM_BODY_BYTES) {
            cx->rq.body_too_big = 1;
            return MHD_YES;
        }
        if (cx->rq.body_len + n + 1 > cx->body_cap) {
            size_t cap = cx->body_cap ? cx->body_cap : 1024;
            while (cap < cx->rq.body_len + n + 1)
                cap *= 2;
            cx->rq.body = xrealloc(cx->rq.body, cap);
            cx->body_cap = cap;
        }
        memcpy(cx->rq.body + cx->rq.body_len, upload_data, n);
        cx->rq.body_len += n;
        cx->rq.body[cx->rq.body_len] = '\0';
        return MHD_YES;
    }
    if (cx->rq.status) /* already answered (413 on the first call) */
        return MHD_YES;
    struct resp rs = {0};
    rs.status = 200;
    if (cx->rq.body_too_big) {
        err_set(&cx->rq.err, E_TOOBIG, "payload_too_large",
                "request body exceeds the limit of %u bytes", LIM_BODY_BYTES);
        error_resp(&cx->rq, &rs, E_TOOBIG);
    } else {
        dispatch(cx, &rs);
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
    if (cx->upgrade.fn && !cx->upgrade.done && cx->upgrade.cancel)
        cx->upgrade.cancel(cx->upgrade.ctx);
    if (srv->cfg.cleanup)
        srv->cfg.cleanup(&cx->rq);
    xfree(cx->rq.body);
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
    srv->d = MHD_start_daemon(
        flags, (uint16_t)cfg->port, NULL, NULL, &on_request, srv, MHD_OPTION_EXTERNAL_LOGGER,
        &mhd_log, NULL, MHD_OPTION_SOCK_ADDR, &ss, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)(cfg->threads ? cfg->threads : 2), MHD_OPTION_NOTIFY_COMPLETED, &on_completed,
        srv, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)LIM_HEADER_BYTES,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_END);
    /* No MHD_OPTION_LISTENING_ADDRESS_REUSE: it sets SO_REUSEPORT, which let a
     * second server bind the same port and silently take half the connections.
     * libmicrohttpd still sets SO_REUSEADDR, so a restart binds at once. */
    if (!srv->d) {
        xfree(srv);
        return err_set(e, E_INTERNAL, "internal",
                       "cannot listen on %s:%d (in use, or not an "
                       "address of this machine)",
                       cfg->host, cfg->port);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->d, MHD_DAEMON_INFO_BIND_PORT);
    srv->port = info ? info->port : cfg->port;
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

void http_stop(struct http_server *srv)
{
    if (!srv)
        return;
    MHD_socket s = MHD_quiesce_daemon(srv->d);
    MHD_stop_daemon(srv->d); /* joins the workers once in-flight requests finish */
    if (s != MHD_INVALID_SOCKET)
        close(s);
    xfree(srv);
}
