/*
 * egress: per-session forward proxy (see egress.h and docs/egress-proxy.md).
 *
 * Life of a connection: the acceptor thread accepts on a session's listener
 * and hands the socket to a new thread; the thread reads the request head
 * (at most EGRESS_HEAD_MAX bytes), decides with egress_decide(), resolves and
 * checks the destination (or connects to the upstream proxy and asks it to
 * CONNECT), answers the browser, and then copies bytes both ways until either
 * side ends. Plain HTTP requests are rewritten to origin form with
 * "Connection: close", so every proxied HTTP request has its own connection
 * and its own decision.
 *
 * Locking: eg->mu guards the session list, each session's top-level egress,
 * connection lists, reference counts and the protected ports. No I/O happens
 * under it except shutdown(2), which never blocks.
 */
#include "proxy/egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/xalloc.h"

#define EGRESS_HEAD_MAX      (16 * 1024) /* request or upstream response head */
#define EGRESS_CONNECT_MS    10000       /* TCP connect, per address */
#define EGRESS_HEAD_MS       30000       /* time a client or upstream has to send its head */
#define EGRESS_SPLICE_BUF    (64 * 1024)
#define EGRESS_LOCALS_TTL_MS 5000 /* how long the host's interface addresses are cached */

/* ---------------------------------------------------------------- pure part */

static void host_norm(const char *host, char *out, size_t cap)
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
static int bypass_split(const char *p, char *host, size_t cap, int *port)
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
    host_norm(tmp, host, cap);
    return host[0] ? 0 : -1;
}

int egress_bypass_valid(const char *pattern)
{
    char host[300];
    int port;
    if (!pattern || strlen(pattern) > 260 || bypass_split(pattern, host, sizeof host, &port) != 0)
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
    if (bypass_split(pattern, ph, sizeof ph, &pport) != 0)
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
    host_norm(host, h, sizeof h);
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

enum egress_addr_class egress_addr_classify(int fam, const uint8_t *a)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const uint8_t zero[16] = {0};
    static const uint8_t meta6[16] = {0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0,    0,
                                      0,    0,    0,    0,    0, 0, 0x02, 0x54};
    if (fam == 6 && memcmp(a, mapped, 12) == 0) {
        fam = 4;
        a += 12;
    }
    if (fam == 4) {
        if (a[0] == 127)
            return EGRESS_ADDR_LOOPBACK;
        if (a[0] == 0)
            return EGRESS_ADDR_UNSPEC;
        if (a[0] == 169 && a[1] == 254)
            return a[2] == 169 && a[3] == 254 ? EGRESS_ADDR_METADATA : EGRESS_ADDR_LINKLOCAL;
        return EGRESS_ADDR_PUBLIC;
    }
    if (memcmp(a, zero, 15) == 0 && a[15] == 1)
        return EGRESS_ADDR_LOOPBACK;
    if (memcmp(a, zero, 16) == 0)
        return EGRESS_ADDR_UNSPEC;
    if (memcmp(a, meta6, 16) == 0)
        return EGRESS_ADDR_METADATA;
    if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
        return EGRESS_ADDR_LINKLOCAL;
    /* IPv4-compatible ::a.b.c.d (deprecated, still routed to IPv4 by some
     * stacks): classify the embedded address. */
    if (memcmp(a, zero, 12) == 0)
        return egress_addr_classify(4, a + 12);
    return EGRESS_ADDR_PUBLIC;
}

void egress_upstream_clear(struct egress_upstream *u)
{
    if (!u)
        return;
    if (u->userpass) {
        OPENSSL_cleanse(u->userpass, strlen(u->userpass));
        xfree(u->userpass);
    }
    json_decref(u->bypass);
    memset(u, 0, sizeof *u);
}

/* -------------------------------------------------------------- the engine */

struct econn {
    int cfd, dfd;
    int uses_top;
    struct esess *s;
    struct econn *next;
};

struct esess {
    char id[64], org[32], project[32];
    int lfd, port;
    struct netcfg *nc;
    struct egress_top top;
    int routes_on;           /* proxy_routes apply (after setup) */
    uint64_t sent, received; /* __atomic */
    int refs;                /* the session list + one per connection */
    int closed;
    struct econn *conns;
    struct esess *next;
};

struct allow_ent {
    int fam;
    uint8_t addr[16];
    int port;
};

struct host_rule {
    char *pattern; /* fnmatch pattern, lower case */
    char *target;  /* numeric address; NULL = EXCLUDE */
};

struct port_ref {
    int port, count;
};

struct egress {
    pthread_mutex_t mu;
    pthread_cond_t idle;
    int nconns;
    int epfd, wakefd;
    pthread_t acceptor;
    int stopping;
    struct esess *sessions;
    struct allow_ent *allow;
    size_t nallow;
    struct host_rule *rules;
    size_t nrules;
    struct port_ref *ports;
    size_t nports;
    const int *server_port;
    int (*resolve)(void *, const char *, const char *, const char *, struct egress_upstream *);
    void *ctx;
    /* The host's own addresses, refreshed every EGRESS_LOCALS_TTL_MS. */
    pthread_mutex_t lmu;
    struct allow_ent *locals;
    size_t nlocals;
    int64_t locals_at;
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int sa_bytes(const struct sockaddr *sa, int *fam, uint8_t out[16], int *port)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        *fam = 4;
        memcpy(out, &s4->sin_addr, 4);
        if (port)
            *port = ntohs(s4->sin_port);
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        *fam = 6;
        memcpy(out, &s6->sin6_addr, 16);
        if (port)
            *port = ntohs(s6->sin6_port);
        return 0;
    }
    return -1;
}

/* Same address, IPv4-mapped IPv6 compared as IPv4. */
static int addr_eq(int fa, const uint8_t *a, int fb, const uint8_t *b)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (fa == 6 && memcmp(a, mapped, 12) == 0) {
        fa = 4;
        a += 12;
    }
    if (fb == 6 && memcmp(b, mapped, 12) == 0) {
        fb = 4;
        b += 12;
    }
    return fa == fb && memcmp(a, b, fa == 4 ? 4 : 16) == 0;
}

static void refresh_locals(struct egress *eg)
{
    pthread_mutex_lock(&eg->lmu);
    int64_t now = mono_ms();
    if (eg->locals && now - eg->locals_at < EGRESS_LOCALS_TTL_MS) {
        pthread_mutex_unlock(&eg->lmu);
        return;
    }
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) == 0) {
        size_t n = 0;
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
            n++;
        xfree(eg->locals);
        eg->locals = xcalloc(n + 1, sizeof *eg->locals);
        eg->nlocals = 0;
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
            struct allow_ent *a = &eg->locals[eg->nlocals];
            if (i->ifa_addr && sa_bytes(i->ifa_addr, &a->fam, a->addr, NULL) == 0)
                eg->nlocals++;
        }
        freeifaddrs(ifs);
        eg->locals_at = now;
    }
    pthread_mutex_unlock(&eg->lmu);
}

static int is_local_addr(struct egress *eg, int fam, const uint8_t *a)
{
    refresh_locals(eg);
    pthread_mutex_lock(&eg->lmu);
    int hit = 0;
    for (size_t i = 0; i < eg->nlocals && !hit; i++)
        hit = addr_eq(eg->locals[i].fam, eg->locals[i].addr, fam, a);
    pthread_mutex_unlock(&eg->lmu);
    return hit;
}

/* A port that stays unreachable on local addresses even when listed. */
static int port_protected(struct egress *eg, int port)
{
    int sp = eg->server_port ? __atomic_load_n(eg->server_port, __ATOMIC_RELAXED) : 0;
    if (sp > 0 && port == sp)
        return 1;
    int hit = 0;
    pthread_mutex_lock(&eg->mu);
    for (size_t i = 0; i < eg->nports && !hit; i++)
        hit = eg->ports[i].port == port && eg->ports[i].count > 0;
    for (struct esess *s = eg->sessions; s && !hit; s = s->next)
        hit = s->port == port;
    pthread_mutex_unlock(&eg->mu);
    return hit;
}

/* The isolation rule for one resolved destination. Returns NULL when a page
 * may connect there, else the reason. */
static const char *addr_refused(struct egress *eg, int fam, const uint8_t *a, int port)
{
    enum egress_addr_class cls = egress_addr_classify(fam, a);
    if (cls == EGRESS_ADDR_PUBLIC && !is_local_addr(eg, fam, a))
        return NULL;
    if (port_protected(eg, port))
        return "a port of this server (API, egress proxy or DevTools)";
    for (size_t i = 0; i < eg->nallow; i++)
        if (eg->allow[i].port == port && addr_eq(eg->allow[i].fam, eg->allow[i].addr, fam, a))
            return NULL;
    switch (cls) {
    case EGRESS_ADDR_METADATA:
        return "a cloud metadata address";
    case EGRESS_ADDR_LINKLOCAL:
        return "a link-local address";
    case EGRESS_ADDR_UNSPEC:
        return "an unspecified address";
    default:
        return "a loopback or host address not in --allow-loopback";
    }
}

/* ---- config parsing ---- */

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    return s;
}

static int parse_allow(struct egress *eg, const char *list, struct err *e)
{
    if (!list || !*list)
        return 0;
    char *copy = xstrdup(list), *save = NULL;
    int rc = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *t = trim(tok);
        if (!*t)
            continue;
        char host[300];
        int port;
        if (bypass_split(t, host, sizeof host, &port) != 0 || port == 0) {
            rc = err_set(e, E_INVALID, "bad_request", "--allow-loopback: %s is not HOST:PORT", t);
            break;
        }
        struct allow_ent a = {.port = port};
        if (inet_pton(AF_INET, host, a.addr) == 1 || inet_pton(AF_INET6, host, a.addr) == 1) {
            a.fam = strchr(host, ':') ? 6 : 4;
            eg->allow = xrealloc(eg->allow, (eg->nallow + 1) * sizeof *eg->allow);
            eg->allow[eg->nallow++] = a;
            continue;
        }
        /* A name (localhost, a developer's app name): every address it
         * resolves to now, at start. */
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
        if (getaddrinfo(strcmp(host, "localhost") == 0 ? "localhost" : host, NULL, &hints, &res) !=
                0 ||
            !res) {
            rc = err_set(e, E_INVALID, "bad_request", "--allow-loopback: %s does not resolve", t);
            break;
        }
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
            if (sa_bytes(ai->ai_addr, &a.fam, a.addr, NULL) != 0)
                continue;
            eg->allow = xrealloc(eg->allow, (eg->nallow + 1) * sizeof *eg->allow);
            eg->allow[eg->nallow++] = a;
        }
        freeaddrinfo(res);
        if (rc)
            break;
    }
    xfree(copy);
    return rc;
}

/* Chromium's --host-resolver-rules subset: "MAP pattern address" and
 * "EXCLUDE pattern", comma-separated. */
static int parse_rules(struct egress *eg, const char *rules, struct err *e)
{
    if (!rules || !*rules)
        return 0;
    char *copy = xstrdup(rules), *save = NULL;
    int rc = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *t = trim(tok), *s2 = NULL;
        char *verb = strtok_r(t, " \t", &s2), *pat = strtok_r(NULL, " \t", &s2);
        char *target = strtok_r(NULL, " \t", &s2);
        if (!verb)
            continue;
        struct host_rule r = {0};
        if (strcasecmp(verb, "MAP") == 0 && pat && target) {
            char tgt[300];
            int port;
            uint8_t tmp[16];
            if (bypass_split(target, tgt, sizeof tgt, &port) != 0 ||
                (inet_pton(AF_INET, tgt, tmp) != 1 && inet_pton(AF_INET6, tgt, tmp) != 1)) {
                rc =
                    err_set(e, E_INVALID, "bad_request",
                            "host rules: MAP %s %s: the target must be an IP address", pat, target);
                break;
            }
            r.target = xstrdup(tgt);
        } else if (strcasecmp(verb, "EXCLUDE") != 0 || !pat) {
            rc = err_set(e, E_INVALID, "bad_request", "host rules: cannot read \"%s\"", t);
            break;
        }
        char lower[300];
        host_norm(pat, lower, sizeof lower);
        r.pattern = xstrdup(lower);
        eg->rules = xrealloc(eg->rules, (eg->nrules + 1) * sizeof *eg->rules);
        eg->rules[eg->nrules++] = r;
    }
    xfree(copy);
    return rc;
}

/* The test-mode mapping of a hostname, or NULL. */
static const char *rule_for(const struct egress *eg, const char *host)
{
    char h[300];
    host_norm(host, h, sizeof h);
    for (size_t i = 0; i < eg->nrules; i++)
        if (fnmatch(eg->rules[i].pattern, h, 0) == 0)
            return eg->rules[i].target;
    return NULL;
}

/* ---- socket helpers ---- */

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Connects to sa within timeout_ms; returns a blocking socket or -1. */
static int connect_timeout(const struct sockaddr *sa, socklen_t len, int timeout_ms)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    int rc = connect(fd, sa, len);
    if (rc != 0 && errno == EINPROGRESS) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int err = 0;
        socklen_t el = sizeof err;
        do
            rc = poll(&p, 1, timeout_ms);
        while (rc < 0 && errno == EINTR);
        if (rc == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0)
            rc = 0;
        else
            rc = -1;
    }
    if (rc != 0) {
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* Reads a head ending in CRLFCRLF into buf (cap bytes); *len is what was
 * read, *head_len the head's length. -1 on EOF, error, timeout or overflow. */
static int read_head(int fd, char *buf, size_t cap, size_t *len, size_t *head_len, int timeout_ms)
{
    *len = 0;
    int64_t end = mono_ms() + timeout_ms;
    while (*len < cap - 1) {
        int left = (int)(end - mono_ms());
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, left) != 1)
            return -1;
        ssize_t r = recv(fd, buf + *len, cap - 1 - *len, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        *len += (size_t)r;
        buf[*len] = '\0';
        char *h = strstr(buf, "\r\n\r\n");
        if (h) {
            *head_len = (size_t)(h - buf) + 4;
            return 0;
        }
    }
    return -1;
}

static void reply(int fd, int status, const char *reason, const char *why)
{
    char body[512], msg[1024];
    int bn = snprintf(body, sizeof body, "browserd egress: %s\n", why);
    if (bn < 0 || (size_t)bn >= sizeof body)
        bn = (int)strlen(body);
    int n = snprintf(msg, sizeof msg,
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                     "Connection: close\r\nX-Browserd-Egress: refused\r\n\r\n%s",
                     status, reason, bn, body);
    if (n > 0 && (size_t)n < sizeof msg)
        (void)write_all(fd, msg, (size_t)n);
}

/* ---- destinations ---- */

/* Resolves host (test rules first) and connects to the first address the
 * isolation rule allows. 0 with *fd; E_FORBIDDEN (why set) when every
 * address is refused; E_UNAVAIL when none answers. */
static int connect_checked(struct egress *eg, const char *host, int port, int check, int *fd,
                           const char **why)
{
    char h[300];
    host_norm(host, h, sizeof h);
    const char *mapped = eg ? rule_for(eg, h) : NULL;
    char ps[8];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_family = AF_UNSPEC}, *res = NULL;
    if (getaddrinfo(mapped ? mapped : h, ps, &hints, &res) != 0 || !res) {
        *why = "the name does not resolve";
        return E_UNAVAIL;
    }
    int refused = 0, rc = E_UNAVAIL;
    *why = "no address answered";
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fam, p;
        uint8_t a[16];
        if (sa_bytes(ai->ai_addr, &fam, a, &p) != 0)
            continue;
        const char *r = check && eg ? addr_refused(eg, fam, a, port) : NULL;
        if (r) {
            refused = 1;
            *why = r;
            continue;
        }
        int s = connect_timeout(ai->ai_addr, ai->ai_addrlen, EGRESS_CONNECT_MS);
        if (s >= 0) {
            *fd = s;
            rc = 0;
            break;
        }
        *why = "the destination did not accept the connection";
    }
    freeaddrinfo(res);
    if (rc && refused && strcmp(*why, "the destination did not accept the connection") != 0)
        return E_FORBIDDEN;
    return rc;
}

static void b64(const char *in, char *out, size_t cap)
{
    size_t n = strlen(in);
    if (4 * ((n + 2) / 3) + 1 > cap) {
        out[0] = '\0';
        return;
    }
    EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)in, (int)n);
}

/* host:port as a request target (IPv6 bracketed). */
static void authority(const char *host, int port, char *out, size_t cap)
{
    char h[300];
    host_norm(host, h, sizeof h);
    if (strchr(h, ':'))
        snprintf(out, cap, "[%s]:%d", h, port);
    else
        snprintf(out, cap, "%s:%d", h, port);
}

/* Opens a tunnel to host:port through up. On success *fd is the tunnel and
 * any bytes the upstream sent after its answer are in extra (owned). */
static int connect_upstream(struct egress *eg, const struct egress_upstream *up, const char *host,
                            int port, int *fd, char **extra, size_t *extra_len, const char **why,
                            int timeout_ms)
{
    *extra = NULL;
    *extra_len = 0;
    if (up->tls) {
        *why = "https upstream proxies are not supported by this server (TLS to the proxy)";
        return E_UNAVAIL;
    }
    int s = -1;
    int rc = connect_checked(eg, up->host, up->port, up->check_address, &s, why);
    if (rc) {
        if (rc == E_FORBIDDEN)
            *why = "the proxy's address is not reachable from browsers";
        else
            *why = "the upstream proxy does not answer";
        return E_UNAVAIL;
    }
    char auth[300], head[2048];
    authority(host, port, auth, sizeof auth);
    int n;
    if (up->userpass && *up->userpass) {
        char enc[1400];
        b64(up->userpass, enc, sizeof enc);
        n = snprintf(head, sizeof head,
                     "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n",
                     auth, auth, enc);
        OPENSSL_cleanse(enc, sizeof enc);
    } else {
        n = snprintf(head, sizeof head, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", auth, auth);
    }
    int ok = n > 0 && (size_t)n < sizeof head && write_all(s, head, (size_t)n) == 0;
    OPENSSL_cleanse(head, sizeof head);
    char *buf = xmalloc(EGRESS_HEAD_MAX);
    size_t len = 0, hl = 0;
    ok = ok && read_head(s, buf, EGRESS_HEAD_MAX, &len, &hl, timeout_ms) == 0;
    int status = 0;
    if (ok && sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
        ok = 0;
    if (!ok || status < 200 || status > 299) {
        *why = !ok             ? "the upstream proxy did not answer CONNECT"
               : status == 407 ? "the upstream proxy refused the credentials (407)"
                               : "the upstream proxy refused the tunnel";
        xfree(buf);
        close(s);
        return E_UNAVAIL;
    }
    if (len > hl) {
        *extra_len = len - hl;
        *extra = xmalloc(*extra_len);
        memcpy(*extra, buf + hl, *extra_len);
    }
    xfree(buf);
    *fd = s;
    return 0;
}

/* ---- sessions ---- */

static struct esess *find_locked(struct egress *eg, const char *id)
{
    for (struct esess *s = eg->sessions; s; s = s->next)
        if (strcmp(s->id, id) == 0)
            return s;
    return NULL;
}

static void sess_unref_locked(struct esess *s)
{
    if (--s->refs > 0)
        return;
    netcfg_free(s->nc);
    xfree(s);
}

/* ---- one connection ---- */

struct bypass_cache {
    struct egress *eg;
    struct esess *s;
    struct {
        char ref[EGRESS_REF_MAX + 1];
        int rc;
        struct egress_upstream up;
    } ent[2];
    int n;
};

static struct egress_upstream *cache_get(struct bypass_cache *bc, const char *ref, int *rc)
{
    for (int i = 0; i < bc->n; i++)
        if (strcmp(bc->ent[i].ref, ref) == 0) {
            *rc = bc->ent[i].rc;
            return &bc->ent[i].up;
        }
    if (bc->n == 2) {
        *rc = E_INTERNAL;
        return NULL;
    }
    int i = bc->n++;
    set_ref(bc->ent[i].ref, ref);
    memset(&bc->ent[i].up, 0, sizeof bc->ent[i].up);
    bc->ent[i].rc = bc->eg->resolve ? bc->eg->resolve(bc->eg->ctx, bc->s->org, bc->s->project, ref,
                                                      &bc->ent[i].up)
                                    : E_NOTFOUND;
    *rc = bc->ent[i].rc;
    return &bc->ent[i].up;
}

static int bypass_cb(void *ctx, const char *ref, const char *host, int port)
{
    int rc;
    struct egress_upstream *u = cache_get(ctx, ref, &rc);
    return u && rc == 0 && egress_bypass_match(u->bypass, host, port);
}

static const char *reason_name(enum egress_reason r)
{
    switch (r) {
    case EGRESS_R_PRIVATE:
        return "private_hosts";
    case EGRESS_R_ROUTE:
        return "proxy route";
    case EGRESS_R_ROUTE_BYPASS:
        return "route proxy bypass_hosts";
    case EGRESS_R_TOP_BYPASS:
        return "proxy bypass_hosts";
    default:
        return "top-level";
    }
}

/* Parses "host:port" or "[v6]:port". */
static int parse_authority(const char *s, size_t n, char *host, size_t cap, int *port, int dflt)
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

/* The request head of a plain HTTP request, rewritten to origin form with
 * hop-by-hop and proxy headers removed and "Connection: close". */
static char *rewrite_head(const char *method, const char *path, const char *head, size_t hl,
                          size_t *out_len)
{
    size_t cap = hl + strlen(path) + 64;
    char *out = xmalloc(cap);
    int n = snprintf(out, cap, "%s %s HTTP/1.1\r\n", method, path);
    size_t len = n > 0 ? (size_t)n : 0;
    const char *p = strstr(head, "\r\n");
    p = p ? p + 2 : head + hl;
    while (p < head + hl - 2) {
        const char *eol = strstr(p, "\r\n");
        if (!eol)
            break;
        size_t ln = (size_t)(eol - p);
        static const char *const drop[] = {
            "proxy-connection:", "proxy-authorization:", "connection:", "keep-alive:", NULL};
        int skip = 0;
        for (size_t k = 0; drop[k] && !skip; k++)
            skip = ln >= strlen(drop[k]) && strncasecmp(p, drop[k], strlen(drop[k])) == 0;
        if (!skip && len + ln + 2 < cap) {
            memcpy(out + len, p, ln);
            memcpy(out + len + ln, "\r\n", 2);
            len += ln + 2;
        }
        p = eol + 2;
    }
    static const char tail[] = "Connection: close\r\n\r\n";
    if (len + sizeof tail > cap)
        out = xrealloc(out, len + sizeof tail);
    memcpy(out + len, tail, sizeof tail - 1);
    *out_len = len + sizeof tail - 1;
    return out;
}

static void splice_fds(struct esess *s, int cfd, int dfd)
{
    char *buf = xmalloc(EGRESS_SPLICE_BUF);
    int open_c = 1, open_d = 1;
    while (open_c || open_d) {
        struct pollfd p[2] = {{.fd = open_c ? cfd : -1, .events = POLLIN},
                              {.fd = open_d ? dfd : -1, .events = POLLIN}};
        int rc = poll(p, 2, -1);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            break;
        int fail = 0;
        for (int i = 0; i < 2 && !fail; i++) {
            if (!p[i].revents)
                continue;
            int from = i == 0 ? cfd : dfd, to = i == 0 ? dfd : cfd;
            ssize_t r = recv(from, buf, EGRESS_SPLICE_BUF, 0);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                if (r < 0 && errno != ECONNRESET) {
                    fail = 1;
                    break;
                }
                shutdown(to, SHUT_WR);
                if (i == 0)
                    open_c = 0;
                else
                    open_d = 0;
                if (r < 0)
                    fail = 1;
                continue;
            }
            if (write_all(to, buf, (size_t)r) != 0) {
                fail = 1;
                break;
            }
            __atomic_add_fetch(i == 0 ? &s->sent : &s->received, (uint64_t)r, __ATOMIC_RELAXED);
        }
        if (fail)
            break;
    }
    xfree(buf);
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
        return parse_authority(target, tl, out->host, sizeof out->host, &out->port, 0) ? E_INVALID
                                                                                       : 0;
    if (strncasecmp(target, "http://", 7) != 0)
        return E_INVALID;
    const char *a = target + 7;
    size_t an = strcspn(a, "/?#");
    if (memchr(a, '@', an) || parse_authority(a, an, out->host, sizeof out->host, &out->port, 80))
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

struct conn_arg {
    struct egress *eg;
    struct econn *c;
};

static void conn_serve(struct egress *eg, struct econn *c)
{
    struct esess *s = c->s;
    char *buf = xmalloc(EGRESS_HEAD_MAX);
    size_t len = 0, hl = 0;
    struct bypass_cache bc = {.eg = eg, .s = s};
    if (read_head(c->cfd, buf, EGRESS_HEAD_MAX, &len, &hl, EGRESS_HEAD_MS) != 0) {
        xfree(buf);
        return;
    }
    struct egress_request rq;
    int bad = egress_parse_request(buf, hl, &rq) != 0;
    const char *method = rq.method, *path = rq.path, *host = rq.host;
    int port = rq.port, is_connect = rq.is_connect;
    if (bad) {
        reply(c->cfd, 400, "Bad Request", "this proxy takes CONNECT or absolute http:// requests");
        xfree(buf);
        return;
    }

    struct egress_decision d;
    pthread_mutex_lock(&eg->mu);
    struct egress_top top = s->top;
    int routes_on = s->routes_on;
    pthread_mutex_unlock(&eg->mu);
    egress_decide(s->nc, routes_on, &top, host, port, bypass_cb, &bc, &d);
    if (d.reason == EGRESS_R_TOP || d.reason == EGRESS_R_TOP_BYPASS) {
        pthread_mutex_lock(&eg->mu);
        c->uses_top = 1;
        /* A switch that happened while we decided: decide again. */
        int changed = memcmp(&top, &s->top, sizeof top) != 0;
        top = s->top;
        pthread_mutex_unlock(&eg->mu);
        if (changed)
            egress_decide(s->nc, routes_on, &top, host, port, bypass_cb, &bc, &d);
    }

    int dfd = -1, rc;
    const char *why = "";
    char *extra = NULL;
    size_t extra_len = 0;
    uint8_t lit[16];
    int litfam = 0;
    char hn[300];
    host_norm(host, hn, sizeof hn);
    if (inet_pton(AF_INET, hn, lit) == 1)
        litfam = 4;
    else if (inet_pton(AF_INET6, hn, lit) == 1)
        litfam = 6;
    if (d.kind == EGRESS_PROXY) {
        /* Literal addresses and localhost names are refused before they are
         * handed to an upstream, which might sit on this host. */
        size_t hnl = strlen(hn);
        if (litfam && egress_addr_classify(litfam, lit) != EGRESS_ADDR_PUBLIC)
            why = addr_refused(eg, litfam, lit, port);
        else if (strcmp(hn, "localhost") == 0 ||
                 (hnl > 10 && strcmp(hn + hnl - 10, ".localhost") == 0))
            why = "a loopback name";
        else
            why = NULL;
        if (why) {
            rc = E_FORBIDDEN;
        } else {
            int urc;
            struct egress_upstream *up = cache_get(&bc, d.proxy_ref, &urc);
            if (!up || urc != 0) {
                why = "the selected proxy is not available (fail closed)";
                rc = E_UNAVAIL;
            } else {
                rc = connect_upstream(eg, up, hn, port, &dfd, &extra, &extra_len, &why,
                                      EGRESS_HEAD_MS);
            }
        }
    } else {
        rc = connect_checked(eg, hn, port, 1, &dfd, &why);
    }
    log_debug("egress %s: %s %s:%d -> %s (%s)%s%s", s->id, method, hn, port,
              d.kind == EGRESS_PROXY ? d.proxy_ref : "direct", reason_name(d.reason),
              rc ? ": refused: " : "", rc ? why : "");
    if (rc) {
        if (rc == E_FORBIDDEN)
            log_info("egress %s: refused %s:%d: %s", s->id, hn, port, why);
        reply(c->cfd, rc == E_FORBIDDEN ? 403 : 502,
              rc == E_FORBIDDEN ? "Forbidden" : "Bad Gateway", why);
        xfree(buf);
        for (int i = 0; i < bc.n; i++)
            egress_upstream_clear(&bc.ent[i].up);
        return;
    }
    for (int i = 0; i < bc.n; i++)
        egress_upstream_clear(&bc.ent[i].up);

    pthread_mutex_lock(&eg->mu);
    c->dfd = dfd;
    int closing = s->closed;
    pthread_mutex_unlock(&eg->mu);
    int ok = !closing;
    if (ok && is_connect) {
        static const char est[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        ok = write_all(c->cfd, est, sizeof est - 1) == 0 &&
             (!extra_len || write_all(c->cfd, extra, extra_len) == 0) &&
             (len == hl || write_all(dfd, buf + hl, len - hl) == 0);
        if (ok)
            __atomic_add_fetch(&s->sent, (uint64_t)(len - hl), __ATOMIC_RELAXED);
    } else if (ok) {
        size_t nl;
        char *nh = rewrite_head(method, path, buf, hl, &nl);
        ok = write_all(dfd, nh, nl) == 0 && (len == hl || write_all(dfd, buf + hl, len - hl) == 0);
        if (ok)
            __atomic_add_fetch(&s->sent, (uint64_t)(nl + len - hl), __ATOMIC_RELAXED);
        xfree(nh);
    }
    xfree(extra);
    xfree(buf);
    if (ok)
        splice_fds(s, c->cfd, dfd);
}

static void *conn_main(void *arg)
{
    struct conn_arg *ca = arg;
    struct egress *eg = ca->eg;
    struct econn *c = ca->c;
    xfree(ca);
    conn_serve(eg, c);
    pthread_mutex_lock(&eg->mu);
    struct esess *s = c->s;
    for (struct econn **pp = &s->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    close(c->cfd);
    if (c->dfd >= 0)
        close(c->dfd);
    xfree(c);
    sess_unref_locked(s);
    if (--eg->nconns == 0)
        pthread_cond_broadcast(&eg->idle);
    pthread_mutex_unlock(&eg->mu);
    return NULL;
}

static void accept_on(struct egress *eg, struct esess *target)
{
    pthread_mutex_lock(&eg->mu);
    struct esess *s = eg->sessions;
    while (s && s != target)
        s = s->next;
    if (!s || s->closed || eg->stopping) {
        pthread_mutex_unlock(&eg->mu);
        return;
    }
    for (;;) {
        int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            break;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct econn *c = xcalloc(1, sizeof *c);
        c->cfd = fd;
        c->dfd = -1;
        c->s = s;
        struct conn_arg *ca = xmalloc(sizeof *ca);
        ca->eg = eg;
        ca->c = c;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&at, 256 * 1024);
        pthread_t t;
        if (pthread_create(&t, &at, conn_main, ca) != 0) {
            log_warn("egress %s: cannot start a connection thread", s->id);
            close(fd);
            xfree(c);
            xfree(ca);
        } else {
            c->next = s->conns;
            s->conns = c;
            s->refs++;
            eg->nconns++;
        }
        pthread_attr_destroy(&at);
    }
    pthread_mutex_unlock(&eg->mu);
}

static void *acceptor_main(void *arg)
{
    struct egress *eg = arg;
    struct epoll_event evs[32];
    for (;;) {
        int n = epoll_wait(eg->epfd, evs, 32, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        int stop = 0;
        for (int i = 0; i < n; i++) {
            if (evs[i].data.ptr == NULL)
                stop = 1;
            else
                accept_on(eg, evs[i].data.ptr);
        }
        if (stop)
            break;
    }
    return NULL;
}

int egress_start(const struct egress_config *cfg, struct egress **out, struct err *e)
{
    struct egress *eg = xcalloc(1, sizeof *eg);
    pthread_mutex_init(&eg->mu, NULL);
    pthread_mutex_init(&eg->lmu, NULL);
    pthread_cond_init(&eg->idle, NULL);
    eg->server_port = cfg->server_port;
    eg->resolve = cfg->resolve;
    eg->ctx = cfg->ctx;
    eg->epfd = eg->wakefd = -1;
    int rc = parse_allow(eg, cfg->allow_loopback, e);
    if (rc == 0)
        rc = parse_rules(eg, cfg->host_rules, e);
    if (rc == 0) {
        eg->epfd = epoll_create1(EPOLL_CLOEXEC);
        eg->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
        if (eg->epfd < 0 || eg->wakefd < 0 ||
            epoll_ctl(eg->epfd, EPOLL_CTL_ADD, eg->wakefd, &ev) != 0 ||
            pthread_create(&eg->acceptor, NULL, acceptor_main, eg) != 0)
            rc = err_set(e, E_INTERNAL, "internal", "egress: cannot start: %s", strerror(errno));
    }
    if (rc) {
        if (eg->epfd >= 0)
            close(eg->epfd);
        if (eg->wakefd >= 0)
            close(eg->wakefd);
        for (size_t i = 0; i < eg->nrules; i++) {
            xfree(eg->rules[i].pattern);
            xfree(eg->rules[i].target);
        }
        xfree(eg->rules);
        xfree(eg->allow);
        pthread_mutex_destroy(&eg->mu);
        pthread_mutex_destroy(&eg->lmu);
        pthread_cond_destroy(&eg->idle);
        xfree(eg);
        return rc;
    }
    *out = eg;
    return 0;
}

/* Unlinks a session, closes its listener and shuts its connections down.
 * Called with eg->mu held. */
static void close_locked(struct egress *eg, struct esess *s)
{
    for (struct esess **pp = &eg->sessions; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    s->closed = 1;
    epoll_ctl(eg->epfd, EPOLL_CTL_DEL, s->lfd, NULL);
    close(s->lfd);
    s->lfd = -1;
    for (struct econn *c = s->conns; c; c = c->next) {
        shutdown(c->cfd, SHUT_RDWR);
        if (c->dfd >= 0)
            shutdown(c->dfd, SHUT_RDWR);
    }
    sess_unref_locked(s);
}

void egress_stop(struct egress *eg)
{
    if (!eg)
        return;
    pthread_mutex_lock(&eg->mu);
    eg->stopping = 1;
    while (eg->sessions)
        close_locked(eg, eg->sessions);
    uint64_t one = 1;
    if (write(eg->wakefd, &one, sizeof one) < 0)
        log_warn("egress: cannot wake the acceptor");
    while (eg->nconns > 0)
        pthread_cond_wait(&eg->idle, &eg->mu);
    pthread_mutex_unlock(&eg->mu);
    pthread_join(eg->acceptor, NULL);
    close(eg->epfd);
    close(eg->wakefd);
    for (size_t i = 0; i < eg->nrules; i++) {
        xfree(eg->rules[i].pattern);
        xfree(eg->rules[i].target);
    }
    xfree(eg->rules);
    xfree(eg->allow);
    xfree(eg->ports);
    xfree(eg->locals);
    pthread_mutex_destroy(&eg->mu);
    pthread_mutex_destroy(&eg->lmu);
    pthread_cond_destroy(&eg->idle);
    xfree(eg);
}

int egress_open(struct egress *eg, const char *session_id, const char *org_id,
                const char *project_id, const json_t *network, const struct egress_top *top,
                int defer_routes, int *port, struct err *e)
{
    struct netcfg *nc = netcfg_compile(network);
    if (!nc)
        return err_field(e, "network", "the network configuration does not compile");
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 128) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        int er = errno;
        if (fd >= 0)
            close(fd);
        netcfg_free(nc);
        return err_set(e, E_INTERNAL, "internal", "egress: cannot listen: %s", strerror(er));
    }
    struct esess *s = xcalloc(1, sizeof *s);
    snprintf(s->id, sizeof s->id, "%s", session_id);
    snprintf(s->org, sizeof s->org, "%s", org_id ? org_id : "");
    snprintf(s->project, sizeof s->project, "%s", project_id ? project_id : "");
    s->lfd = fd;
    s->port = ntohs(sa.sin_port);
    s->nc = nc;
    s->top = *top;
    s->routes_on = !defer_routes;
    s->refs = 1;
    pthread_mutex_lock(&eg->mu);
    if (find_locked(eg, session_id) || eg->stopping) {
        pthread_mutex_unlock(&eg->mu);
        close(fd);
        netcfg_free(nc);
        xfree(s);
        return err_set(e, E_CONFLICT, "conflict", "egress: session %s has a listener already",
                       session_id);
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};
    if (epoll_ctl(eg->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        pthread_mutex_unlock(&eg->mu);
        close(fd);
        netcfg_free(nc);
        xfree(s);
        return err_set(e, E_INTERNAL, "internal", "egress: epoll: %s", strerror(errno));
    }
    s->next = eg->sessions;
    eg->sessions = s;
    pthread_mutex_unlock(&eg->mu);
    *port = s->port;
    return 0;
}

int egress_set_top(struct egress *eg, const char *session_id, const struct egress_top *top)
{
    pthread_mutex_lock(&eg->mu);
    struct esess *s = find_locked(eg, session_id);
    if (!s) {
        pthread_mutex_unlock(&eg->mu);
        return E_NOTFOUND;
    }
    int changed = memcmp(&s->top, top, sizeof *top) != 0;
    s->top = *top;
    if (changed)
        for (struct econn *c = s->conns; c; c = c->next)
            if (c->uses_top) {
                shutdown(c->cfd, SHUT_RDWR);
                if (c->dfd >= 0)
                    shutdown(c->dfd, SHUT_RDWR);
            }
    pthread_mutex_unlock(&eg->mu);
    return 0;
}

int egress_routes_on(struct egress *eg, const char *session_id)
{
    pthread_mutex_lock(&eg->mu);
    struct esess *s = find_locked(eg, session_id);
    if (s)
        s->routes_on = 1;
    pthread_mutex_unlock(&eg->mu);
    return s ? 0 : E_NOTFOUND;
}

void egress_close(struct egress *eg, const char *session_id)
{
    if (!eg)
        return;
    pthread_mutex_lock(&eg->mu);
    struct esess *s = find_locked(eg, session_id);
    if (s)
        close_locked(eg, s);
    pthread_mutex_unlock(&eg->mu);
}

int egress_bytes(struct egress *eg, const char *session_id, uint64_t *sent, uint64_t *received)
{
    pthread_mutex_lock(&eg->mu);
    struct esess *s = find_locked(eg, session_id);
    if (s) {
        *sent = __atomic_load_n(&s->sent, __ATOMIC_RELAXED);
        *received = __atomic_load_n(&s->received, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&eg->mu);
    return s ? 0 : E_NOTFOUND;
}

void egress_protect_port(struct egress *eg, int port)
{
    if (!eg || port <= 0)
        return;
    pthread_mutex_lock(&eg->mu);
    size_t i;
    for (i = 0; i < eg->nports && eg->ports[i].port != port; i++)
        ;
    if (i == eg->nports) {
        eg->ports = xrealloc(eg->ports, (eg->nports + 1) * sizeof *eg->ports);
        eg->ports[eg->nports++] = (struct port_ref){port, 0};
    }
    eg->ports[i].count++;
    pthread_mutex_unlock(&eg->mu);
}

void egress_unprotect_port(struct egress *eg, int port)
{
    if (!eg)
        return;
    pthread_mutex_lock(&eg->mu);
    for (size_t i = 0; i < eg->nports; i++)
        if (eg->ports[i].port == port && eg->ports[i].count > 0) {
            if (--eg->ports[i].count == 0)
                eg->ports[i] = eg->ports[--eg->nports];
            break;
        }
    pthread_mutex_unlock(&eg->mu);
}

int egress_probe(struct egress *eg, const struct egress_upstream *up, const char *url,
                 int timeout_ms, struct err *e)
{
    int https;
    const char *a;
    if (strncasecmp(url, "http://", 7) == 0) {
        https = 0;
        a = url + 7;
    } else if (strncasecmp(url, "https://", 8) == 0) {
        https = 1;
        a = url + 8;
    } else {
        return err_field(e, "url", "must be an http:// or https:// URL");
    }
    size_t an = strcspn(a, "/?#");
    char host[300];
    int port;
    if (memchr(a, '@', an) ||
        parse_authority(a, an, host, sizeof host, &port, https ? 443 : 80) != 0)
        return err_field(e, "url", "must be an http:// or https:// URL with a valid host");
    int fd = -1;
    char *extra = NULL;
    size_t extra_len = 0;
    const char *why = "";
    int rc = connect_upstream(eg, up, host, port, &fd, &extra, &extra_len, &why, timeout_ms);
    xfree(extra);
    if (rc)
        return err_set(e, E_UNAVAIL, "proxy_unavailable", "%s", why);
    if (!https) {
        char req[2600], auth[320];
        authority(host, port, auth, sizeof auth);
        int n = snprintf(req, sizeof req,
                         "GET %s%.*s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n"
                         "User-Agent: browserd-proxy-check\r\n\r\n",
                         a[an] == '/' ? "" : "/", (int)strnlen(a + an, 2000), a + an, auth);
        char *buf = xmalloc(EGRESS_HEAD_MAX);
        size_t len = 0, hl = 0;
        int status = 0;
        if (n <= 0 || (size_t)n >= sizeof req || write_all(fd, req, (size_t)n) != 0 ||
            read_head(fd, buf, EGRESS_HEAD_MAX, &len, &hl, timeout_ms) != 0 ||
            sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
            rc = err_set(e, E_UNAVAIL, "proxy_unavailable",
                         "no HTTP answer from %s through the proxy", auth);
        xfree(buf);
    }
    close(fd);
    return rc;
}

/* ---- benchmark ---- */

struct sink {
    int lfd;
    size_t expect;
};

static void *sink_main(void *arg)
{
    struct sink *k = arg;
    char *buf = xmalloc(EGRESS_SPLICE_BUF);
    for (;;) {
        int fd = accept4(k->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            break;
        ssize_t r;
        while ((r = recv(fd, buf, EGRESS_SPLICE_BUF, 0)) > 0)
            ;
        (void)write_all(fd, "k", 1);
        close(fd);
    }
    xfree(buf);
    return NULL;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* One run: connect (directly, or through the egress with CONNECT), send
 * nbytes, half-close, wait for the sink's one-byte answer. */
static int bench_once(int sink_port, int egress_port, size_t nbytes, double *conn_us, double *mbps)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    sa.sin_port = htons((uint16_t)(egress_port ? egress_port : sink_port));
    double t0 = now_us();
    int fd = connect_timeout((struct sockaddr *)&sa, sizeof sa, 5000);
    if (fd < 0)
        return -1;
    if (egress_port) {
        char req[128], head[512];
        int n = snprintf(req, sizeof req, "CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: x\r\n\r\n",
                         sink_port);
        size_t len, hl;
        if (n <= 0 || write_all(fd, req, (size_t)n) != 0 ||
            read_head(fd, head, sizeof head, &len, &hl, 5000) != 0 ||
            strncmp(head, "HTTP/1.1 200", 12) != 0) {
            close(fd);
            return -1;
        }
    }
    double t1 = now_us();
    char *buf = xcalloc(1, EGRESS_SPLICE_BUF);
    int rc = 0;
    for (size_t left = nbytes; left && rc == 0;) {
        size_t k = left < EGRESS_SPLICE_BUF ? left : EGRESS_SPLICE_BUF;
        rc = write_all(fd, buf, k);
        left -= k;
    }
    shutdown(fd, SHUT_WR);
    char ack;
    if (rc == 0 && recv(fd, &ack, 1, 0) != 1)
        rc = -1;
    double t2 = now_us();
    xfree(buf);
    close(fd);
    *conn_us = t1 - t0;
    *mbps = (double)nbytes / (t2 - t1); /* bytes per microsecond = MB/s */
    return rc;
}

int egress_bench(size_t nbytes, double *direct_connect_us, double *proxied_connect_us,
                 double *direct_mbps, double *proxied_mbps)
{
    struct sink k = {.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (k.lfd < 0 || bind(k.lfd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(k.lfd, 16) != 0 || getsockname(k.lfd, (struct sockaddr *)&sa, &sl) != 0)
        return E_INTERNAL;
    int sink_port = ntohs(sa.sin_port);
    pthread_t t;
    if (pthread_create(&t, NULL, sink_main, &k) != 0) {
        close(k.lfd);
        return E_INTERNAL;
    }
    char allow[64];
    snprintf(allow, sizeof allow, "127.0.0.1:%d", sink_port);
    struct egress_config cfg = {.allow_loopback = allow};
    struct egress *eg = NULL;
    struct err e;
    err_init(&e);
    int port = 0, rc = egress_start(&cfg, &eg, &e);
    struct egress_top top = {.kind = EGRESS_DIRECT};
    if (rc == 0)
        rc = egress_open(eg, "bench", "", "", NULL, &top, 0, &port, &e);
    const int runs = 20;
    double dc = 0, pc = 0, dm = 0, pm = 0;
    for (int i = 0; i < runs && rc == 0; i++) {
        double c1 = 0, m1 = 0, c2 = 0, m2 = 0;
        if (bench_once(sink_port, 0, nbytes, &c1, &m1) != 0 ||
            bench_once(sink_port, port, nbytes, &c2, &m2) != 0)
            rc = E_INTERNAL;
        dc += c1;
        dm += m1;
        pc += c2;
        pm += m2;
    }
    egress_stop(eg);
    shutdown(k.lfd, SHUT_RDWR);
    pthread_join(t, NULL);
    close(k.lfd);
    if (rc)
        return E_INTERNAL;
    *direct_connect_us = dc / runs;
    *proxied_connect_us = pc / runs;
    *direct_mbps = dm / runs;
    *proxied_mbps = pm / runs;
    return 0;
}
