/* peer: a blocking GET to another node (see peer.h). */
#include "cluster/peer.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/httpresp.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/xalloc.h"

/* Splits "http://host:port" into host and port ("[v6]" loses its brackets). */
static int split_base(const char *base, char *host, size_t hcap, char *port, size_t pcap)
{
    if (strncmp(base, "http://", 7) != 0)
        return -1;
    const char *h = base + 7, *end;
    if (*h == '[') {
        end = strchr(h, ']');
        if (!end || end[1] != ':')
            return -1;
        h++;
    } else {
        end = strchr(h, ':');
        if (!end)
            return -1;
    }
    size_t hl = (size_t)(end - h);
    const char *p = *end == ']' ? end + 2 : end + 1;
    size_t pl = strcspn(p, "/");
    if (!hl || hl >= hcap || !pl || pl >= pcap)
        return -1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    memcpy(port, p, pl);
    port[pl] = '\0';
    return 0;
}

static int dial(const char *host, const char *port, int timeout_ms)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai = NULL;
    if (getaddrinfo(host, port, &hints, &ai) != 0 || !ai)
        return -1;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    if (fd < 0)
        return -1;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (poll(&p, 1, timeout_ms) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 ||
        soerr != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Waits for fd to be ready for events until the deadline (monotonic ms). */
static int wait_fd(int fd, short events, int64_t deadline)
{
    int64_t left = deadline - clock_mono_ms();
    if (left <= 0)
        return -1;
    struct pollfd p = {.fd = fd, .events = events};
    return poll(&p, 1, (int)left) == 1 ? 0 : -1;
}

static int send_all(int fd, const char *s, size_t len, int64_t deadline)
{
    while (len) {
        ssize_t w = send(fd, s, len, MSG_NOSIGNAL);
        if (w > 0) {
            s += w;
            len -= (size_t)w;
        } else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (wait_fd(fd, POLLOUT, deadline) != 0)
                return -1;
        } else {
            return -1;
        }
    }
    return 0;
}

/* Reads until the peer closes (the request said Connection: close). */
static int read_all(int fd, struct buf *b, int64_t deadline)
{
    char chunk[16384];
    for (;;) {
        ssize_t r = recv(fd, chunk, sizeof chunk, 0);
        if (r == 0)
            return 0;
        if (r > 0) {
            if (buf_append(b, chunk, (size_t)r) != 0)
                return -1; /* past the cap */
        } else if (errno == EAGAIN || errno == EINTR) {
            if (wait_fd(fd, POLLIN, deadline) != 0)
                return -1;
        } else {
            return -1;
        }
    }
}

__attribute__((format(printf, 2, 3))) static int appendf(struct buf *b, const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line)
        return -1;
    return buf_append(b, line, (size_t)n);
}

static int unavailable(struct err *e, const char *base, const char *why)
{
    return err_set(e, E_UNAVAIL, "node_unavailable", "the node at %s could not be read: %s", base,
                   why);
}

/* The body of the response in b (a whole exchange) into body and len,
 * decoded in place. */
static int body_of(struct buf *b, const struct httpresp_head *h, char **body, size_t *len)
{
    enum httpresp_body kind;
    uint64_t length = 0;
    if (httpresp_body_framing(h, 0, &kind, &length) != 0)
        return -1;
    char *p = b->p + h->head_len;
    size_t have = b->len - h->head_len;
    *body = p;
    switch (kind) {
    case HTTPRESP_BODY_NONE:
        *len = 0;
        return 0;
    case HTTPRESP_BODY_LENGTH:
        if (length > have)
            return -1;
        *len = (size_t)length;
        return 0;
    case HTTPRESP_BODY_CLOSE:
        *len = have;
        return 0;
    case HTTPRESP_BODY_CHUNKED: {
        struct httpresp_chunked c;
        httpresp_chunked_init(&c);
        size_t used = 0, out = 0;
        if (httpresp_chunked_decode(&c, p, have, &used, &out) != 1)
            return -1;
        *len = out;
        return 0;
    }
    }
    return -1;
}

int peer_get_json(const char *base, const char *path, const char *const *headers, int timeout_ms,
                  int *status, json_t **out, struct err *e)
{
    *out = NULL;
    char host[256], port[16];
    if (split_base(base, host, sizeof host, port, sizeof port) != 0)
        return unavailable(e, base, "not an http://host:port URL");
    int64_t deadline = clock_mono_ms() + timeout_ms;
    int fd = dial(host, port, timeout_ms);
    if (fd < 0)
        return unavailable(e, base, "no connection");
    struct buf req;
    buf_init(&req, 64 * 1024);
    int ok = appendf(&req, "GET %s HTTP/1.1\r\nHost: %s:%s\r\n", path, host, port) == 0;
    for (const char *const *h = headers; ok && h && *h; h++)
        ok = !strpbrk(*h, "\r\n") && appendf(&req, "%s\r\n", *h) == 0;
    ok = ok && appendf(&req, "X-Browserd-Hop: 1\r\nConnection: close\r\n\r\n") == 0;
    struct buf resp;
    buf_init(&resp, HTTPRESP_HEAD_MAX + PEER_BODY_MAX);
    int rc = ok && send_all(fd, req.p, req.len, deadline) == 0 && read_all(fd, &resp, deadline) == 0
                 ? 0
                 : -1;
    close(fd);
    buf_free(&req);
    struct httpresp_head *h = xcalloc(1, sizeof *h);
    char *body = NULL;
    size_t blen = 0;
    if (rc == 0 &&
        (httpresp_parse_head(resp.p, resp.len, h) != 0 || body_of(&resp, h, &body, &blen) != 0))
        rc = -2;
    if (rc == 0) {
        *status = h->status;
        *out = json_loadb(body, blen, 0, NULL);
    }
    xfree(h);
    buf_free(&resp);
    if (rc == -1)
        return unavailable(e, base, "the exchange failed or timed out");
    if (rc == -2)
        return unavailable(e, base, "its answer was malformed");
    return 0;
}
