/*
 * egress (pure part): where a connection goes (egress_decide), bypass_hosts,
 * address classes and the proxy request line. No I/O, no state; the engine
 * (listeners, workers, isolation, upstreams) is in egress_engine.c.
 */
#include "proxy/egress.h"

#include <arpa/inet.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/xalloc.h"

/* ---------------------------------------------------------------- pure part */

void egress_host_norm(const char *host, char *out, size_t cap)
{
    size_t n = strlen(host);
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        host++;
        n -= 2;
    }
    while (n && host[n - 1] == '.')
        n--;
    if (n >= cap)
        n = cap - 1;
    for (size_t i = 0; i < n; i++)
        out[i] = (char)(host[i] >= 'A' && host[i] <= 'Z' ? host[i] + 32 : host[i]);
    out[n] = '\0';
}

/* Splits a bypass entry into host part (normalized) and port (0 = any).
 * Returns -1 when malformed. */
int egress_split_hostport(const char *p, char *host, size_t cap, int *port)
{
    const char *hend;
    const char *colon = NULL;
    *port = 0;
    if (p[0] == '[') {
        hend = strchr(p, ']');
        if (!hend)
            return -1;
        if (hend[1] == ':')
            colon = hend + 1;
        else if (hend[1] != '\0')
            return -1;
        hend++;
    } else {
        const char *c1 = strchr(p, ':');
        if (c1 && strchr(c1 + 1, ':')) {
            hend = p + strlen(p); /* a bare IPv6 literal */
        } else {
            colon = c1;
            hend = c1 ? c1 : p + strlen(p);
        }
    }
    if (colon) {
        char *end;
        long v = strtol(colon + 1, &end, 10);
        if (colon[1] == '\0' || *end || v < 1 || v > 65535)
            return -1;
        *port = (int)v;
    }
    size_t n = (size_t)(hend - p);
    if (n == 0 || n >= cap)
        return -1;
    char tmp[300];
    if (n >= sizeof tmp)
        return -1;
    memcpy(tmp, p, n);
    tmp[n] = '\0';
    egress_host_norm(tmp, host, cap);
    return host[0] ? 0 : -1;
}

int egress_bypass_valid(const char *pattern)
{
    char host[300];
    int port;
    if (!pattern || strlen(pattern) > 260 ||
        egress_split_hostport(pattern, host, sizeof host, &port) != 0)
        return -1;
    /* "*" alone, or "*." followed by a suffix; never "*." alone. */
    if (pattern[0] == '*' && pattern[1] && pattern[1] != ':' && (pattern[1] != '.' || !pattern[2]))
        return -1;
    if (strcmp(host, "*") == 0)
        return 0;
    const char *h = host;
    if (strncmp(h, "*.", 2) == 0)
        h += 2;
    else if (h[0] == '.')
        h++;
    if (!*h)
        return -1;
    unsigned char v6[16];
    if (inet_pton(AF_INET6, h, v6) == 1)
        return h == host ? 0 : -1;
    for (const char *c = h; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '.' ||
              *c == '_'))
            return -1;
    return strlen(h) <= 253 ? 0 : -1;
}

static int bypass_one(const char *pattern, const char *host, int port)
{
    char ph[300];
    int pport;
    if (egress_split_hostport(pattern, ph, sizeof ph, &pport) != 0)
        return 0;
    if (pport && pport != port)
        return 0;
    if (strcmp(ph, "*") == 0)
        return 1;
    const char *suffix = strncmp(ph, "*.", 2) == 0 ? ph + 2 : ph[0] == '.' ? ph + 1 : NULL;
    if (suffix) {
        size_t hn = strlen(host), sn = strlen(suffix);
        return hn > sn + 1 && host[hn - sn - 1] == '.' && strcmp(host + hn - sn, suffix) == 0;
    }
    unsigned char a[16], b[16];
    if (inet_pton(AF_INET6, ph, a) == 1 && inet_pton(AF_INET6, host, b) == 1)
        return memcmp(a, b, 16) == 0;
    return strcmp(ph, host) == 0;
}

int egress_bypass_match(const json_t *patterns, const char *host, int port)
{
    if (!json_is_array(patterns) || !host)
        return 0;
    char h[300];
    egress_host_norm(host, h, sizeof h);
    size_t i;
    const json_t *v;
    json_array_foreach(patterns, i, v)
    {
        if (json_is_string(v) && bypass_one(json_string_value(v), h, port))
            return 1;
    }
    return 0;
}

static void set_ref(char *dst, const char *src)
{
    snprintf(dst, EGRESS_REF_MAX + 1, "%s", src ? src : "");
}

void egress_decide(const struct netcfg *nc, int use_routes, const struct egress_top *top,
                   const char *host, int port, egress_bypass_fn bypass, void *ctx,
                   struct egress_decision *out)
{
    memset(out, 0, sizeof *out);
    out->route = -1;
    if (netcfg_is_private(nc, host, port)) {
        out->kind = EGRESS_DIRECT;
        out->reason = EGRESS_R_PRIVATE;
        return;
    }
    int r = use_routes ? netcfg_route_for(nc, host) : -1;
    if (r >= 0) {
        const char *id = NULL, *name = NULL;
        netcfg_route_target(nc, r, &id, &name);
        out->route = r;
        set_ref(out->proxy_ref, id ? id : name);
        if (bypass && bypass(ctx, out->proxy_ref, host, port)) {
            out->kind = EGRESS_DIRECT;
            out->reason = EGRESS_R_ROUTE_BYPASS;
        } else {
            out->kind = EGRESS_PROXY;
            out->reason = EGRESS_R_ROUTE;
        }
        return;
    }
    if (!top || top->kind == EGRESS_DIRECT || !top->proxy_ref[0]) {
        out->kind = EGRESS_DIRECT;
        out->reason = EGRESS_R_TOP;
        return;
    }
    set_ref(out->proxy_ref, top->proxy_ref);
    if (bypass && bypass(ctx, top->proxy_ref, host, port)) {
        out->kind = EGRESS_DIRECT;
        out->reason = EGRESS_R_TOP_BYPASS;
    } else {
        out->kind = EGRESS_PROXY;
        out->reason = EGRESS_R_TOP;
    }
}

void egress_upstream_clear(struct egress_upstream *u)
{
    if (!u)
        return;
    if (u->userpass) {
        OPENSSL_cleanse(u->userpass, strlen(u->userpass));
        xfree(u->userpass);
    }
    xfree(u->ca_pem);
    json_decref(u->bypass);
    memset(u, 0, sizeof *u);
}

/* Parses "host:port" or "[v6]:port". */
int egress_parse_authority(const char *s, size_t n, char *host, size_t cap, int *port, int dflt)
{
    const char *end = s + n, *colon = NULL;
    const char *hs = s, *he;
    if (n && s[0] == '[') {
        const char *rb = memchr(s, ']', n);
        if (!rb)
            return -1;
        hs = s + 1;
        he = rb;
        if (rb + 1 < end) {
            if (rb[1] != ':')
                return -1;
            colon = rb + 1;
        }
    } else {
        colon = memchr(s, ':', n);
        he = colon ? colon : end;
    }
    *port = dflt;
    if (colon) {
        long v = 0;
        const char *p = colon + 1;
        if (p == end)
            return -1;
        for (; p < end; p++) {
            if (*p < '0' || *p > '9' || v > 65535)
                return -1;
            v = v * 10 + (*p - '0');
        }
        if (v < 1 || v > 65535)
            return -1;
        *port = (int)v;
    }
    size_t hl = (size_t)(he - hs);
    if (hl == 0 || hl >= cap || *port <= 0)
        return -1;
    memcpy(host, hs, hl);
    host[hl] = '\0';
    for (const char *c = host; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '-' || *c == '.' || *c == '_' || *c == ':' || *c == '%'))
            return -1;
    return 0;
}

int egress_parse_request(const char *head, size_t len, struct egress_request *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->path, sizeof out->path, "/");
    const char *eol = NULL;
    for (size_t i = 0; i + 1 < len; i++)
        if (head[i] == '\r' && head[i + 1] == '\n') {
            eol = head + i;
            break;
        }
    if (!eol)
        return E_INVALID;
    size_t ll = (size_t)(eol - head);
    const char *sp1 = memchr(head, ' ', ll);
    const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', ll - (size_t)(sp1 + 1 - head)) : NULL;
    if (!sp1 || !sp2 || sp1 == head || (size_t)(sp1 - head) >= sizeof out->method ||
        (size_t)(eol - sp2 - 1) != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0)
        return E_INVALID;
    char target[EGRESS_TARGET_MAX];
    size_t tl = (size_t)(sp2 - sp1 - 1);
    if (tl == 0 || tl >= sizeof target)
        return E_INVALID;
    memcpy(out->method, head, (size_t)(sp1 - head));
    out->method[sp1 - head] = '\0';
    for (const char *m = out->method; *m; m++)
        if (*m < 'A' || *m > 'Z')
            return E_INVALID;
    memcpy(target, sp1 + 1, tl);
    target[tl] = '\0';
    if (memchr(target, '\0', tl))
        return E_INVALID;
    out->is_connect = strcmp(out->method, "CONNECT") == 0;
    if (out->is_connect)
        return egress_parse_authority(target, tl, out->host, sizeof out->host, &out->port, 0)
                   ? E_INVALID
                   : 0;
    if (strncasecmp(target, "http://", 7) != 0)
        return E_INVALID;
    const char *a = target + 7;
    size_t an = strcspn(a, "/?#");
    if (memchr(a, '@', an) ||
        egress_parse_authority(a, an, out->host, sizeof out->host, &out->port, 80))
        return E_INVALID;
    if (a[an] == '/' || a[an] == '?') {
        int n = snprintf(out->path, sizeof out->path, "%s%s", a[an] == '?' ? "/" : "", a + an);
        if (n < 0 || (size_t)n >= sizeof out->path)
            return E_INVALID;
    }
    char *hash = strchr(out->path, '#');
    if (hash)
        *hash = '\0';
    for (const char *c = out->path; *c; c++)
        if ((unsigned char)*c <= ' ' || *c == 0x7f)
            return E_INVALID;
    return 0;
}
