/*
 * extfetch: a blocking HTTP/1.1 GET on the calling thread (an HTTP worker
 * of the API: the store fetch is a rare, explicit call), bounded in time by
 * a monotonic deadline applied to connect, every read and every write.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/xalloc.h"
#include "proxy/netguard.h"
#include "proxy/tls_client.h"
#include "runtime/extfetch.h"

#define HEAD_MAX (64u * 1024u)

static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static struct tls_client *tls;

static void tls_init(void)
{
    struct err e;
    err_init(&e);
    if (tls_client_new(NULL, &tls, &e) != 0)
        tls = NULL;
}

struct url {
    int https;
    char host[256];
    char port[8];
    char *path; /* owned, starts with '/' */
};

static int url_parse(const char *s, struct url *u)
{
    memset(u, 0, sizeof *u);
    const char *p;
    if (strncmp(s, "http://", 7) == 0)
        p = s + 7;
    else if (strncmp(s, "https://", 8) == 0) {
        p = s + 8;
        u->https = 1;
    } else
        return -1;
    size_t hl = strcspn(p, "/?#");
    const char *hostend = p + hl;
    if (hl == 0 || memchr(p, '@', hl))
        return -1;
    const char *colon = p[0] == '[' ? memchr(p, ']', hl) : memchr(p, ':', hl);
    if (p[0] == '[') { /* [v6]:port */
        if (!colon)
            return -1;
        snprintf(u->host, sizeof u->host, "%.*s", (int)(colon - p - 1), p + 1);
        colon = colon + 1 < hostend && colon[1] == ':' ? colon + 1 : NULL;
    } else {
        size_t n = colon ? (size_t)(colon - p) : hl;
        if (n >= sizeof u->host)
            return -1;
        snprintf(u->host, sizeof u->host, "%.*s", (int)n, p);
    }
    if (colon) {
        size_t n = (size_t)(hostend - colon - 1);
        if (n == 0 || n >= sizeof u->port || strspn(colon + 1, "0123456789") < n)
            return -1;
        snprintf(u->port, sizeof u->port, "%.*s", (int)n, colon + 1);
    } else {
        snprintf(u->port, sizeof u->port, "%s", u->https ? "443" : "80");
    }
    size_t pl = strcspn(hostend, "#");
    u->path = *hostend == '/' ? xstrndup(hostend, pl) : xasprintf("/%.*s", (int)pl, hostend);
    return 0;
}

static int remaining(int64_t deadline)
{
    int64_t left = deadline - clock_mono_ms();
    return left > 0 ? (int)left : 0;
}

static int wait_fd(int fd, short ev, int64_t deadline)
{
    struct pollfd p = {fd, ev, 0};
    for (;;) {
        int r = poll(&p, 1, remaining(deadline));
        if (r > 0)
            return 0;
        if (r == 0)
            return -ETIMEDOUT;
        if (errno != EINTR)
            return -errno;
    }
}

static int dial(const struct url *u, int guarded, int64_t deadline, struct err *e)
{
    if (guarded) {
        /* A redirect away from the operator's store: the egress's address
         * rule after DNS, and one answer for refused and unreachable. */
        int fd = netguard_dial(u->host, (int)strtol(u->port, NULL, 10), deadline);
        if (fd < 0)
            return err_set(e, E_UNAVAIL, "unavailable", "%s port %s: cannot connect", u->host,
                           u->port);
        return fd;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    int g = getaddrinfo(u->host, u->port, &hints, &ai);
    if (g != 0)
        return err_set(e, E_UNAVAIL, "unavailable", "%s: cannot resolve: %s", u->host,
                       gai_strerror(g));
    int fd = -1, err = ECONNREFUSED;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            break;
        if (errno == EINPROGRESS) {
            int w = wait_fd(fd, POLLOUT, deadline);
            socklen_t sl = sizeof err;
            if (w != 0)
                err = -w;
            else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) != 0)
                err = errno;
            if (w == 0 && err == 0)
                break;
        } else {
            err = errno;
        }
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    if (fd < 0)
        return err_set(e, E_UNAVAIL, "unavailable", "%s port %s: %s", u->host, u->port,
                       err == ETIMEDOUT ? "timed out" : strerror(err));
    return fd;
}

/* A connection: a socket, TLS on it or not. */
struct conn {
    int fd;
    SSL *ssl;
};

static ssize_t conn_io(struct conn *c, void *buf, size_t n, int writing, int64_t deadline)
{
    for (;;) {
        ssize_t r;
        if (c->ssl)
            r = writing ? tls_client_write(c->ssl, buf, n) : tls_client_read(c->ssl, buf, n);
        else
            r = writing ? write(c->fd, buf, n) : read(c->fd, buf, n);
        if (r >= 0)
            return r;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
        /* TLS may need to read while writing and the reverse: wait for both. */
        int w = wait_fd(c->fd,
                        c->ssl    ? (short)(POLLIN | POLLOUT)
                        : writing ? POLLOUT
                                  : POLLIN,
                        deadline);
        if (w != 0) {
            errno = -w;
            return -1;
        }
    }
}

static int tls_start(struct conn *c, const char *host, int64_t deadline, struct err *e)
{
    pthread_once(&tls_once, tls_init);
    if (!tls || !(c->ssl = tls_client_conn(tls, c->fd, host)))
        return err_set(e, E_UNAVAIL, "unavailable", "TLS is not available on this server");
    char why[256] = "";
    for (;;) {
        int r = tls_client_handshake(c->ssl, why, sizeof why);
        if (r == TLS_OK)
            return 0;
        if (r == TLS_FAILED)
            return err_set(e, E_UNAVAIL, "unavailable", "%s: TLS: %s", host, why);
        if (wait_fd(c->fd, POLLIN | POLLOUT, deadline) != 0)
            return err_set(e, E_UNAVAIL, "unavailable", "%s: TLS handshake timed out", host);
    }
}

/* Decodes a chunked body in place; returns its length or -1. */
static long dechunk(char *b, size_t n)
{
    size_t in = 0, out = 0;
    for (;;) {
        char *end = NULL;
        if (in >= n)
            return -1;
        unsigned long long sz = strtoull(b + in, &end, 16);
        char *crlf = memmem(b + in, n - in, "\r\n", 2);
        if (!crlf || end == b + in || end > crlf)
            return -1;
        in = (size_t)(crlf - b) + 2;
        if (sz == 0)
            return (long)out;
        if (sz > n - in || n - in - sz < 2 || memcmp(b + in + sz, "\r\n", 2) != 0)
            return -1;
        memmove(b + out, b + in, sz);
        out += sz;
        in += sz + 2;
    }
}

/* The value of header name in head (a copy into out), 0 when present. */
static int header(const char *head, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);
    for (const char *p = strstr(head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
        const char *h = p + 2;
        if (strncasecmp(h, name, nl) == 0 && h[nl] == ':') {
            h += nl + 1;
            h += strspn(h, " \t");
            snprintf(out, cap, "%.*s", (int)strcspn(h, "\r\n"), h);
            return 0;
        }
    }
    return -1;
}

/* One exchange: *status, the head's Location in loc (when a redirect) and
 * the body. */
static int exchange(const struct url *u, int guarded, size_t max, int64_t deadline, int *status,
                    char *loc, size_t loccap, char **body, size_t *len, struct err *e)
{
    struct conn c = {dial(u, guarded, deadline, e), NULL};
    if (c.fd < 0)
        return e->rc;
    int rc = u->https ? tls_start(&c, u->host, deadline, e) : 0;
    char *req = xasprintf("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: browserd\r\nAccept: */*\r\n"
                          "Accept-Encoding: identity\r\nConnection: close\r\n\r\n",
                          u->path, u->host);
    for (size_t off = 0, n = strlen(req); rc == 0 && off < n;) {
        ssize_t w = conn_io(&c, req + off, n - off, 1, deadline);
        if (w <= 0)
            rc = err_set(e, E_UNAVAIL, "unavailable", "%s: sending the request failed: %s", u->host,
                         errno == ETIMEDOUT ? "timed out" : strerror(errno));
        else
            off += (size_t)w;
    }
    xfree(req);
    size_t cap = 64 * 1024, n = 0, limit = max + HEAD_MAX;
    char *buf = xmalloc(cap + 1);
    while (rc == 0) {
        if (n == cap) {
            if (cap >= limit) {
                rc = err_set(e, E_TOOBIG, "payload_too_large",
                             "%s: the answer is larger than %zu bytes", u->host, max);
                break;
            }
            cap = cap * 2 < limit ? cap * 2 : limit;
            buf = xrealloc(buf, cap + 1);
        }
        ssize_t r = conn_io(&c, buf + n, cap - n, 0, deadline);
        if (r == 0)
            break;
        if (r < 0)
            rc = err_set(e, E_UNAVAIL, "unavailable", "%s: reading the answer failed: %s", u->host,
                         errno == ETIMEDOUT ? "timed out" : strerror(errno));
        else
            n += (size_t)r;
    }
    if (c.ssl) {
        tls_client_close_notify(c.ssl);
        SSL_free(c.ssl);
    }
    close(c.fd);
    buf[n] = '\0';
    char *sep = rc == 0 ? memmem(buf, n, "\r\n\r\n", 4) : NULL;
    if (rc == 0 && (!sep || sscanf(buf, "HTTP/1.%*d %d", status) != 1))
        rc = err_set(e, E_UNAVAIL, "unavailable", "%s: the answer is not HTTP", u->host);
    if (rc || !sep) {
        xfree(buf);
        return rc ? rc : E_UNAVAIL;
    }
    *sep = '\0';
    size_t blen = n - (size_t)(sep + 4 - buf);
    char te[64] = "", cl[32] = "";
    loc[0] = '\0';
    (void)header(buf, "Location", loc, loccap);
    if (header(buf, "Transfer-Encoding", te, sizeof te) == 0 && strcasecmp(te, "chunked") == 0) {
        long d = dechunk(sep + 4, blen);
        if (d < 0) {
            xfree(buf);
            return err_set(e, E_UNAVAIL, "unavailable", "%s: a malformed chunked answer", u->host);
        }
        blen = (size_t)d;
    } else if (header(buf, "Content-Length", cl, sizeof cl) == 0) {
        unsigned long long want = strtoull(cl, NULL, 10);
        if (want > blen) {
            xfree(buf);
            return err_set(e, E_UNAVAIL, "unavailable", "%s: the answer was cut short", u->host);
        }
        blen = (size_t)want;
    }
    if (blen > max) {
        xfree(buf);
        return err_set(e, E_TOOBIG, "payload_too_large", "%s: the answer is larger than %zu bytes",
                       u->host, max);
    }
    *body = xmalloc(blen + 1);
    memcpy(*body, sep + 4, blen);
    (*body)[blen] = '\0';
    *len = blen;
    xfree(buf);
    return 0;
}

int extfetch_get(const char *url, size_t max, int timeout_ms, char **body, size_t *len,
                 struct err *e)
{
    int64_t deadline = clock_mono_ms() + timeout_ms;
    char *cur = xstrdup(url);
    *body = NULL;
    *len = 0;
    char host0[256] = "", port0[8] = "";
    for (int hop = 0;; hop++) {
        struct url u;
        if (url_parse(cur, &u) != 0) {
            int rc = err_set(e, E_INVALID, "bad_request",
                             "cannot fetch %.300s (http or https "
                             "URLs only)",
                             cur);
            xfree(cur);
            return rc;
        }
        char loc[2048];
        int status = 0;
        char *b = NULL;
        size_t n = 0;
        if (hop == 0) {
            snprintf(host0, sizeof host0, "%s", u.host);
            snprintf(port0, sizeof port0, "%s", u.port);
        }
        int guarded = strcasecmp(u.host, host0) != 0 || strcmp(u.port, port0) != 0;
        int rc = exchange(&u, guarded, max, deadline, &status, loc, sizeof loc, &b, &n, e);
        if (rc == 0 && status >= 300 && status < 400 && loc[0]) {
            xfree(b);
            char *next =
                loc[0] == '/' && loc[1] != '/'
                    ? xasprintf("%s://%s:%s%s", u.https ? "https" : "http", u.host, u.port, loc)
                    : xstrdup(loc);
            xfree(u.path);
            xfree(cur);
            cur = next;
            if (hop + 1 > EXTFETCH_REDIRECTS) {
                xfree(cur);
                return err_set(e, E_UNAVAIL, "unavailable", "more than %d redirects",
                               EXTFETCH_REDIRECTS);
            }
            continue;
        }
        if (rc == 0 && (status < 200 || status > 299)) {
            rc = err_set(e, E_UNAVAIL, "unavailable", "%s answered HTTP %d", u.host, status);
            xfree(b);
        }
        xfree(u.path);
        xfree(cur);
        if (rc == 0) {
            *body = b;
            *len = n;
        }
        return rc;
    }
}
