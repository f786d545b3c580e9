/* peer: a blocking call to another node (see peer.h), through proxy/httpc. */
#include "cluster/peer.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/buf.h"
#include "core/clock.h"
#include "proxy/httpc.h"

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

int peer_call_json(const char *base, const char *method, const char *path,
                   const char *const *headers, int timeout_ms, int *status, json_t **out,
                   struct err *e)
{
    *out = NULL;
    char host[256], port[16];
    if (split_base(base, host, sizeof host, port, sizeof port) != 0)
        return unavailable(e, base, "not an http://host:port URL");
    int64_t deadline = clock_mono_ms() + timeout_ms;
    struct buf fields;
    buf_init(&fields, 64 * 1024);
    int ok = 1;
    for (const char *const *h = headers; ok && h && *h; h++)
        ok = !strpbrk(*h, "\r\n") && appendf(&fields, "%s\r\n", *h) == 0;
    ok = ok && appendf(&fields, "X-Browserd-Hop: 1\r\n") == 0;
    if (!ok) {
        buf_free(&fields);
        return unavailable(e, base, "the exchange failed or timed out");
    }
    int fd = httpc_dial(host, port, deadline, e);
    if (fd < 0) {
        buf_free(&fields);
        return unavailable(e, base, "no connection");
    }
    char authority[300];
    snprintf(authority, sizeof authority, "%s:%s", host, port);
    struct httpc_req rq = {
        .method = method,
        .target = path,
        .host = authority,
        .fields = fields.p,
        .body = strcmp(method, "GET") == 0 ? NULL : "", /* "Content-Length: 0" */
        .body_len = 0,
        .tls_host = NULL,
        .body_max = PEER_BODY_MAX,
        .head_only = 0,
        .deadline_ms = deadline,
    };
    struct httpc_resp r;
    int rc = httpc_exchange(fd, &rq, &r, e);
    buf_free(&fields);
    if (rc == E_UPSTREAM)
        return unavailable(e, base, "its answer was malformed");
    if (rc != 0)
        return unavailable(e, base, "the exchange failed or timed out");
    *status = r.status;
    *out = json_loadb(r.body, r.body_len, 0, NULL);
    httpc_resp_free(&r);
    return 0;
}

int peer_get_json(const char *base, const char *path, const char *const *headers, int timeout_ms,
                  int *status, json_t **out, struct err *e)
{
    return peer_call_json(base, "GET", path, headers, timeout_ms, status, out, e);
}
