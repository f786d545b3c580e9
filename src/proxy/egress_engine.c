/*
 * egress engine: listeners, workers, isolation and upstream proxies (see
 * egress.h and docs/egress-proxy.md).
 *
 * Life of a connection (struct econn, owned by the worker whose epoll holds
 * its session's listener):
 *   HEAD     read the request head (at most EGRESS_HEAD_MAX bytes, 30 s);
 *   LOOKUP   decide and resolve on a lookup thread when that may block (a
 *            DNS name, a proxy's record); a direct decision for a literal or
 *            test-mapped address skips it;
 *   CONNECT  non-blocking connect to each checked address in turn (10 s each);
 *   UPHEAD   through an upstream proxy: send CONNECT (+ Basic auth), read its
 *            answer (30 s);
 *   RELAY    answer the browser, then move bytes both ways with splice(2)
 *            through one pipe per direction until both directions ended or
 *            either side fails; or, for a CONNECT tunnel when the in-kernel
 *            splice is loaded, join both sockets in the kernel (ksplice) and
 *            only watch for the ends (kjoin, kcheck).
 * Plain HTTP requests are rewritten to origin form with "Connection: close",
 * so every proxied HTTP request has its own connection and its own decision.
 *
 * Sockets are non-blocking and registered edge-triggered once; an event on a
 * socket pumps the direction that reads from it or writes to it until it
 * would block (or its fair share is used: then it is pumped again after the
 * batch).
 *
 * Locking: eg->mu guards the session list, each session's top-level egress,
 * connection lists, reference counts, the protected ports and c->dfd. Other
 * threads touch a connection only with shutdown(2) under eg->mu (switch,
 * close); its worker sees the hang-up. Only the worker closes a connection's
 * descriptors, after unlinking it under eg->mu; it frees the connection after
 * the current batch of events, which may still name it.
 */
#include "proxy/egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <linux/sockios.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "core/b64.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/netns.h"
#include "core/xalloc.h"
#include "domain/addrclass.h"
#include "proxy/ksplice.h"
#include "proxy/tls_client.h"

#define EGRESS_HEAD_MAX      LIM_EGRESS_HEAD_BYTES
#define EGRESS_CONNECT_MS    10000 /* TCP connect, per address */
#define EGRESS_HEAD_MS       30000 /* time a client or upstream has to send its head */
#define EGRESS_LOCALS_TTL_MS 5000  /* how long the host's interface addresses are cached */
#define EGRESS_WORKERS_MAX   4
#define EGRESS_LOOKUPS_MAX   16        /* lookup threads, started on demand */
#define EGRESS_ADDRS_MAX     8         /* resolved addresses tried per connection */
#define EGRESS_CHUNK         (1 << 20) /* most bytes one splice asks for */
#define EGRESS_PUMP_ROUNDS   16        /* pipe fills per direction per turn */
#define EGRESS_PIPE_BULK     (1 << 20) /* pipe size for a tunnel that fills its pipe */
#define EGRESS_SCAN_MS       1000      /* deadline granularity */
#define EGRESS_TLS_BUF       16384     /* a TLS record's payload: one read or write */
#define EGRESS_DRAIN_MS_MAX  64        /* longest wait between checks of a kernel drain */

static const char EST[] = "HTTP/1.1 200 Connection established\r\n\r\n";

/* -------------------------------------------------------------- the state */

enum cstate { C_HEAD, C_LOOKUP, C_CONNECT, C_UPTLS, C_UPHEAD, C_RELAY, C_DEAD };

/* One direction of a tunnel: pre (a head, bytes read during setup) goes to
 * `to` first, then whatever `from` sends, through the pipe; through cbuf
 * instead when the upstream side is TLS (bytes are decrypted or encrypted in
 * user space, so they cannot be spliced). */
struct dir {
    int from, to;
    int pr, pw;
    size_t inpipe;
    char *pre;
    size_t prelen, preoff, skip; /* the first skip bytes of pre are not payload */
    int eof, done;               /* from ended; to shut down for writing */
    int grown;                   /* the pipe was offered EGRESS_PIPE_BULK */
    char *cbuf;                  /* TLS tunnels: EGRESS_TLS_BUF bytes in transit */
    size_t clen, coff;
    uint64_t *count;
};

struct eaddr {
    socklen_t len;
    struct sockaddr_storage sa;
};

struct worker;

struct econn {
    struct worker *w;
    struct esess *s;
    enum cstate st;
    int cfd, dfd;
    int uses_top;
    int self;     /* to the session relay (egress_config.self_port) */
    int hup;      /* the browser side hung up while LOOKUP ran */
    int in_setup; /* on w->setup */
    int again;    /* on w->again */
    int64_t deadline;
    char *buf; /* the request head and any bytes after it */
    size_t len, hl;
    struct egress_request rq;
    char hn[300]; /* the normalized host */
    /* the plan */
    int rc;
    const char *why;
    struct egress_decision d;
    int via_proxy;
    struct eaddr *addrs;
    int naddr, ai;
    char *uphead; /* CONNECT for the upstream (holds credentials: wiped) */
    size_t uplen, upoff;
    char *resp; /* the upstream's answer */
    size_t resplen;
    int tls;             /* the upstream is spoken to over TLS */
    SSL *ssl;            /* on dfd once the upstream's TCP connect is done */
    char tlshost[256];   /* the name its certificate must carry */
    char *ca_pem;        /* owned: the proxy's own CA bundle (ca_bundle), or NULL */
    const char *code;    /* the proxy_error code of a failure, when known there */
    int timed_out;       /* the last connect attempt ran out of time */
    char whybuf[200];    /* a refusal reason made for this connection */
    struct dir up, down; /* browser -> destination, destination -> browser */
    /* In the kernel (ksplice): kp.cookie[0] is dfd's, [1] cfd's; kbase
     * their ksplice_written at the join. A direction whose source ended
     * waits on w->kdrain until the kernel has written all it redirected,
     * then its half-close is passed on. */
    int kern;      /* set under eg->mu */
    int killed;    /* __atomic: another thread shut the sockets down */
    int kdraining; /* on w->kdrain */
    struct ksplice_pair kp;
    int64_t kbase[2];
    int64_t kdue, kdelay;
    struct econn *knext;         /* w->kdrain */
    struct econn *next;          /* the session's list (eg->mu) */
    struct econn *sprev, *snext; /* w->setup */
    struct econn *qnext;         /* lookup queue, w->done, w->grave */
    struct econn *anext;         /* w->again */
};

struct esess {
    char id[64];
    /* org, project, nc and top change once at most, under eg->mu
     * (egress_rekey: a spare handed out to its owner); connections read
     * them through a sess_view. */
    char org[32], project[32];
    int lfd, port;
    int netns;        /* the listener's network namespace (core/netns id), 0 = the host's */
    struct worker *w; /* whose epoll holds the listener */
    struct netcfg *nc;
    struct netcfg *nc_old; /* replaced by egress_rekey; a decision may still hold it */
    struct egress_top top;
    int routes_on;           /* proxy_routes apply (after setup) */
    uint64_t sent, received; /* __atomic */
    int nkern;               /* tunnels spliced in the kernel (eg->mu) */
    int refs;                /* the session list + one per connection */
    int closed;
    struct econn *conns;
    struct esess *next;
};

struct worker {
    struct egress *eg;
    pthread_t t;
    int epfd, evfd;
    int quit; /* __atomic */
    pthread_mutex_t qmu;
    struct econn *done; /* lookups finished (qmu) */
    struct econn *setup, *grave, *again;
    struct econn *kdrain; /* kernel tunnels waiting for a direction to drain */
    int64_t next_scan;
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
    int stopping;
    int spare_fd;           /* /dev/null, given up to refuse a connection when out of fds */
    struct tls_client *tls; /* for https upstream proxies */
    struct ksplice *ks;     /* the in-kernel splice, or NULL: user space only */
    struct esess *sessions;
    struct worker *w;
    int nw, next_w;
    /* lookup threads */
    pthread_mutex_t lkmu;
    pthread_cond_t lkcv;
    struct econn *lkq, **lkq_tail;
    pthread_t lkt[EGRESS_LOOKUPS_MAX];
    int nlk, lkidle, lkstop;
    /* configuration */
    struct allow_ent *allow;
    size_t nallow;
    struct addrclass_range *priv; /* --allow-private */
    size_t npriv;
    struct host_rule *rules;
    size_t nrules;
    struct port_ref *ports;
    size_t nports;
    const int *server_port;
    const int *self_port;
    int (*resolve)(void *, const char *, const char *, const char *, struct egress_upstream *);
    void (*failed)(void *, const char *, const struct egress_failure *);
    void *ctx;
    /* The host's own addresses, refreshed every EGRESS_LOCALS_TTL_MS. */
    pthread_mutex_t lmu;
    struct allow_ent *locals;
    size_t nlocals;
    int64_t locals_at;
};

/* ------------------------------------------------------------ helpers */

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
    /* A listener inside a session's own namespace is not a port of the
     * host's loopback: the same number there is somebody else's. */
    for (struct esess *s = eg->sessions; s && !hit; s = s->next)
        hit = s->netns == 0 && s->port == port;
    pthread_mutex_unlock(&eg->mu);
    return hit;
}

/* The isolation rule for one resolved destination. Returns NULL when a page
 * may connect there, else the reason. Host-side addresses (loopback,
 * link-local, metadata, unspecified, the host's own) open only for an exact
 * --allow-loopback HOST:PORT and never on a port of this server; LAN-side
 * ones (private, shared, unique local, multicast, reserved) for a range of
 * --allow-private or an exact --allow-loopback entry. */
static const char *addr_refused(struct egress *eg, int fam, const uint8_t *a, int port)
{
    enum addrclass cls = addrclass_of(fam, a);
    int local = is_local_addr(eg, fam, a);
    if (cls == ADDRCLASS_PUBLIC && !local)
        return NULL;
    int lan = !local && !addrclass_host_side(cls);
    if (lan && addrclass_in_ranges(eg->priv, eg->npriv, fam, a))
        return NULL;
    if (!lan && port_protected(eg, port))
        return "a port of this server (API, egress proxy or DevTools)";
    for (size_t i = 0; i < eg->nallow; i++)
        if (eg->allow[i].port == port && addr_eq(eg->allow[i].fam, eg->allow[i].addr, fam, a))
            return NULL;
    if (lan)
        return "a private, shared, unique-local, multicast or reserved address not in "
               "--allow-private";
    switch (cls) {
    case ADDRCLASS_METADATA:
        return "a cloud metadata address";
    case ADDRCLASS_LINKLOCAL:
        return "a link-local address";
    case ADDRCLASS_UNSPEC:
        return "an unspecified address";
    default:
        return "a loopback or host address not in --allow-loopback";
    }
}

int egress_in_kernel(const struct egress *eg)
{
    return eg && eg->ks ? 1 : 0;
}

int egress_addr_allowed(struct egress *eg, int fam, const uint8_t *addr, int port)
{
    if (!eg)
        return addrclass_allowed(NULL, 0, fam, addr);
    return addr_refused(eg, fam, addr, port) == NULL;
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
        if (egress_split_hostport(t, host, sizeof host, &port) != 0 || port == 0) {
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
            if (egress_split_hostport(target, tgt, sizeof tgt, &port) != 0 ||
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
        egress_host_norm(pat, lower, sizeof lower);
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
    egress_host_norm(host, h, sizeof h);
    for (size_t i = 0; i < eg->nrules; i++)
        if (fnmatch(eg->rules[i].pattern, h, 0) == 0)
            return eg->rules[i].target;
    return NULL;
}

/* ---- socket helpers ---- */

/* Blocking writes (ssl: through TLS on fd, or NULL). 0 or -1. */
static int write_all(int fd, SSL *ssl, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t w = ssl ? tls_client_write(ssl, p, n) : send(fd, p, n, MSG_NOSIGNAL);
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
static int read_head(int fd, SSL *ssl, char *buf, size_t cap, size_t *len, size_t *head_len,
                     int timeout_ms)
{
    *len = 0;
    int64_t end = mono_ms() + timeout_ms;
    while (*len < cap - 1) {
        int left = (int)(end - mono_ms());
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (!(ssl && SSL_pending(ssl) > 0) && (left <= 0 || poll(&p, 1, left) != 1))
            return -1;
        ssize_t r = ssl ? tls_client_read(ssl, buf + *len, cap - 1 - *len)
                        : recv(fd, buf + *len, cap - 1 - *len, 0);
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

/* The egress's own answer to the browser; code (may be NULL) is the
 * proxy_error code, sent as X-Kernel-Proxy-Error as the service's egress
 * does, so an agent can tell what failed from the answer itself. */
static void reply(int fd, int status, const char *reason, const char *why, const char *code)
{
    char body[512], msg[1024], hdr[64] = "";
    int bn = snprintf(body, sizeof body, "browserd egress: %s\n", why);
    if (bn < 0 || (size_t)bn >= sizeof body)
        bn = (int)strlen(body);
    if (code)
        snprintf(hdr, sizeof hdr, "X-Kernel-Proxy-Error: %s\r\n", code);
    int n = snprintf(msg, sizeof msg,
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                     "Connection: close\r\nX-Browserd-Egress: refused\r\n%s\r\n%s",
                     status, reason, bn, hdr, body);
    if (n > 0 && (size_t)n < sizeof msg)
        (void)write_all(fd, NULL, msg, (size_t)n);
}

/* host:port as a request target (IPv6 bracketed). */
static void authority(const char *host, int port, char *out, size_t cap)
{
    char h[300];
    egress_host_norm(host, h, sizeof h);
    if (strchr(h, ':'))
        snprintf(out, cap, "[%s]:%d", h, port);
    else
        snprintf(out, cap, "%s:%d", h, port);
}

/* ---- destinations ---- */

/* A numeric address (no lookup) with port; 0 or -1. */
static int numeric_addr(const char *host, int port, struct eaddr *out)
{
    memset(out, 0, sizeof *out);
    struct sockaddr_in *s4 = (struct sockaddr_in *)&out->sa;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&out->sa;
    if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
        out->len = sizeof *s4;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        out->len = sizeof *s6;
        return 0;
    }
    return -1;
}

/* Resolves host (test rules first; may block on DNS) and keeps the
 * addresses the isolation rule allows (every one when !check). 0 with
 * *addrs (owned) and *n >= 1; E_FORBIDDEN (why set) when every address is
 * refused; E_UNAVAIL when the name does not resolve. */
static int resolve_checked(struct egress *eg, const char *host, int port, int check,
                           struct eaddr **addrs, int *n, const char **why)
{
    char h[300];
    egress_host_norm(host, h, sizeof h);
    const char *mapped = eg ? rule_for(eg, h) : NULL;
    char ps[8];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_family = AF_UNSPEC}, *res = NULL;
    *addrs = NULL;
    *n = 0;
    if (getaddrinfo(mapped ? mapped : h, ps, &hints, &res) != 0 || !res) {
        *why = "the name does not resolve";
        return E_UNAVAIL;
    }
    struct eaddr *out = xcalloc(EGRESS_ADDRS_MAX, sizeof *out);
    int k = 0, refused = 0;
    for (struct addrinfo *ai = res; ai && k < EGRESS_ADDRS_MAX; ai = ai->ai_next) {
        int fam, p;
        uint8_t a[16];
        if (sa_bytes(ai->ai_addr, &fam, a, &p) != 0 || ai->ai_addrlen > sizeof out[k].sa)
            continue;
        const char *r = check && eg ? addr_refused(eg, fam, a, port) : NULL;
        if (r) {
            refused = 1;
            *why = r;
            continue;
        }
        memcpy(&out[k].sa, ai->ai_addr, ai->ai_addrlen);
        out[k].len = ai->ai_addrlen;
        k++;
    }
    freeaddrinfo(res);
    if (k == 0) {
        xfree(out);
        if (!refused)
            *why = "the name has no usable address";
        return refused ? E_FORBIDDEN : E_UNAVAIL;
    }
    *addrs = out;
    *n = k;
    return 0;
}

/* The CONNECT request for an upstream (with Basic auth when it has
 * credentials); owned, holds the password: wipe before freeing. */
static char *upstream_head(const struct egress_upstream *up, const char *host, int port,
                           size_t *len)
{
    char auth[300];
    authority(host, port, auth, sizeof auth);
    size_t cap = 2048;
    char *head = xmalloc(cap);
    int n;
    if (up->userpass && *up->userpass) {
        size_t elen = 0;
        char *enc = b64_encode(up->userpass, strlen(up->userpass), &elen);
        n = snprintf(head, cap,
                     "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n",
                     auth, auth, enc);
        OPENSSL_cleanse(enc, elen);
        xfree(enc);
    } else {
        n = snprintf(head, cap, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", auth, auth);
    }
    *len = n > 0 && (size_t)n < cap ? (size_t)n : 0;
    return head;
}

static void wipe_free(char *p, size_t n)
{
    if (p) {
        OPENSSL_cleanse(p, n);
        xfree(p);
    }
}

/* Reads the upstream's answer to CONNECT from buf (a complete head of hl
 * bytes). NULL when it opened the tunnel, else why not. */
static const char *upstream_refusal(const char *buf)
{
    int status = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
        return "the upstream proxy did not answer CONNECT";
    if (status == 407)
        return "the upstream proxy refused the credentials (407)";
    if (status < 200 || status > 299)
        return "the upstream proxy refused the tunnel";
    return NULL;
}

/* ---- sessions ---- */

static struct esess *find_locked(struct egress *eg, const char *id)
{
    for (struct esess *s = eg->sessions; s; s = s->next)
        if (strcmp(s->id, id) == 0)
            return s;
    return NULL;
}

static void esess_unref_locked(struct esess *s)
{
    if (--s->refs > 0)
        return;
    netcfg_free(s->nc);
    netcfg_free(s->nc_old);
    xfree(s);
}

/* ---- the decision of one connection ---- */

/* What deciding one connection reads of its session, copied under eg->mu
 * (egress_rekey may change the session meanwhile). nc stays valid while the
 * connection holds its reference on the session: a replaced netcfg is freed
 * with the session, never before. */
struct sess_view {
    const struct netcfg *nc;
    struct egress_top top;
    int routes_on;
    char org[32], project[32];
};

static void view_locked(const struct esess *s, struct sess_view *v)
{
    v->nc = s->nc;
    v->top = s->top;
    v->routes_on = s->routes_on;
    memcpy(v->org, s->org, sizeof v->org);
    memcpy(v->project, s->project, sizeof v->project);
}

/* Upstreams looked up while deciding one connection (the resolve hook may
 * read the store: lookup threads only), for the session's org and project
 * as decide() saw them. */
struct bypass_cache {
    struct egress *eg;
    char org[32], project[32];
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
    snprintf(bc->ent[i].ref, sizeof bc->ent[i].ref, "%s", ref);
    memset(&bc->ent[i].up, 0, sizeof bc->ent[i].up);
    bc->ent[i].rc = bc->eg->resolve
                        ? bc->eg->resolve(bc->eg->ctx, bc->org, bc->project, ref, &bc->ent[i].up)
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

/* The bypass hook of the worker's fast path: it only notes that a proxy's
 * bypass_hosts would be needed (then the decision moves to a lookup thread). */
static int bypass_note(void *ctx, const char *ref, const char *host, int port)
{
    (void)ref;
    (void)host;
    (void)port;
    *(int *)ctx = 1;
    return 0;
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

/* The org and project the proxy lookups of bc are made for; forgets what
 * was looked up for others. */
static void cache_for(struct bypass_cache *bc, const struct sess_view *v)
{
    if (!bc || (strcmp(bc->org, v->org) == 0 && strcmp(bc->project, v->project) == 0))
        return;
    for (int i = 0; i < bc->n; i++)
        egress_upstream_clear(&bc->ent[i].up);
    bc->n = 0;
    memcpy(bc->org, v->org, sizeof bc->org);
    memcpy(bc->project, v->project, sizeof bc->project);
}

/* egress_decide with the session's current state (bc: the lookup cache the
 * bypass hook uses, NULL on the worker's fast path). A connection the
 * top-level selection carries is marked so that a switch closes it; a switch
 * or a rekey that happened while deciding is decided again. */
static void decide(struct egress *eg, struct econn *c, egress_bypass_fn bypass, void *ctx,
                   struct bypass_cache *bc)
{
    struct esess *s = c->s;
    struct sess_view v;
    pthread_mutex_lock(&eg->mu);
    view_locked(s, &v);
    pthread_mutex_unlock(&eg->mu);
    cache_for(bc, &v);
    egress_decide(v.nc, v.routes_on, &v.top, c->rq.host, c->rq.port, bypass, ctx, &c->d);
    if (c->d.reason == EGRESS_R_TOP || c->d.reason == EGRESS_R_TOP_BYPASS) {
        pthread_mutex_lock(&eg->mu);
        c->uses_top = 1;
        int changed = memcmp(&v.top, &s->top, sizeof v.top) != 0 || v.nc != s->nc;
        view_locked(s, &v);
        pthread_mutex_unlock(&eg->mu);
        if (changed) {
            cache_for(bc, &v);
            egress_decide(v.nc, v.routes_on, &v.top, c->rq.host, c->rq.port, bypass, ctx, &c->d);
        }
    }
}

/* Issue 31.10: a browser's tunnel (CONNECT) to the server's own port on a
 * loopback or host address goes to the session relay instead of being
 * refused (egress_config.self_port); whatever the session's proxy selection,
 * since that port is this host's. Plain http:// requests are not tunnels
 * (a WebSocket through a proxy always is one) and stay refused. */
static int to_self(struct egress *eg, const struct econn *c, int fam, const uint8_t *a)
{
    int sp = eg->server_port ? __atomic_load_n(eg->server_port, __ATOMIC_RELAXED) : 0;
    int rp = eg->self_port ? __atomic_load_n(eg->self_port, __ATOMIC_RELAXED) : 0;
    if (!c->rq.is_connect || sp <= 0 || rp <= 0 || c->rq.port != sp)
        return 0;
    return addrclass_of(fam, a) == ADDRCLASS_LOOPBACK || is_local_addr(eg, fam, a);
}

static void plan_self(struct egress *eg, struct econn *c)
{
    struct sockaddr_in sin = {
        .sin_family = AF_INET,
        .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
        .sin_port = htons((uint16_t)__atomic_load_n(eg->self_port, __ATOMIC_RELAXED))};
    c->addrs = xcalloc(1, sizeof *c->addrs);
    memcpy(&c->addrs[0].sa, &sin, sizeof sin);
    c->addrs[0].len = sizeof sin;
    c->naddr = 1;
    c->self = 1;
    c->rc = 0;
    c->why = NULL;
}

/* The session relay for a literal (or test-mapped) destination: 1 when
 * planned. */
static int self_literal(struct egress *eg, struct econn *c)
{
    const char *mapped = rule_for(eg, c->hn);
    struct eaddr a;
    int fam, p;
    uint8_t raw[16];
    if (numeric_addr(mapped ? mapped : c->hn, c->rq.port, &a) != 0 ||
        sa_bytes((struct sockaddr *)&a.sa, &fam, raw, &p) != 0 || !to_self(eg, c, fam, raw))
        return 0;
    plan_self(eg, c);
    return 1;
}

/* The same for a name (localhost, the public URL's host), on a lookup
 * thread: resolved here only when the port is the server's. */
static int self_named(struct egress *eg, struct econn *c)
{
    int sp = eg->server_port ? __atomic_load_n(eg->server_port, __ATOMIC_RELAXED) : 0;
    if (!c->rq.is_connect || c->rq.port != sp || !eg->self_port)
        return 0;
    struct eaddr *addrs = NULL;
    int n = 0, fam, p, hit = 0;
    const char *why = NULL;
    uint8_t raw[16];
    if (resolve_checked(eg, c->hn, c->rq.port, 0, &addrs, &n, &why) == 0)
        hit = sa_bytes((struct sockaddr *)&addrs[0].sa, &fam, raw, &p) == 0 &&
              to_self(eg, c, fam, raw);
    xfree(addrs);
    if (hit)
        plan_self(eg, c);
    return hit;
}

/* The worker's fast path: a direct decision to a literal (or test-mapped)
 * address needs no lookup. 0 when the plan is made (c->rc says how), -1 when
 * it needs a lookup thread. */
static int plan_fast(struct egress *eg, struct econn *c)
{
    if (self_literal(eg, c))
        return 0;
    int noted = 0;
    decide(eg, c, bypass_note, &noted, NULL);
    if (noted || c->d.kind != EGRESS_DIRECT)
        return -1;
    const char *mapped = rule_for(eg, c->hn);
    struct eaddr a;
    if (numeric_addr(mapped ? mapped : c->hn, c->rq.port, &a) != 0)
        return -1;
    int fam, p;
    uint8_t raw[16];
    if (sa_bytes((struct sockaddr *)&a.sa, &fam, raw, &p) != 0)
        return -1;
    const char *why = addr_refused(eg, fam, raw, c->rq.port);
    if (why) {
        c->rc = E_FORBIDDEN;
        c->why = why;
        return 0;
    }
    c->addrs = xmalloc(sizeof *c->addrs);
    c->addrs[0] = a;
    c->naddr = 1;
    return 0;
}

/* The full plan, on a lookup thread: the decision with the proxies' records,
 * the destination's or the upstream's checked addresses. */
static void plan_slow(struct egress *eg, struct econn *c)
{
    if (self_named(eg, c))
        return;
    struct bypass_cache bc = {.eg = eg}; /* decide() sets its org and project */
    decide(eg, c, bypass_cb, &bc, &bc);
    const char *why = NULL;
    int rc;
    if (c->d.kind == EGRESS_PROXY) {
        /* Literal addresses and localhost names are refused before they are
         * handed to an upstream, which might sit on this host. */
        uint8_t lit[16];
        int litfam = inet_pton(AF_INET, c->hn, lit) == 1    ? 4
                     : inet_pton(AF_INET6, c->hn, lit) == 1 ? 6
                                                            : 0;
        size_t hnl = strlen(c->hn);
        if (litfam && addrclass_of(litfam, lit) != ADDRCLASS_PUBLIC)
            why = addr_refused(eg, litfam, lit, c->rq.port);
        else if (strcmp(c->hn, "localhost") == 0 ||
                 (hnl > 10 && strcmp(c->hn + hnl - 10, ".localhost") == 0))
            why = "a loopback name";
        int urc;
        struct egress_upstream *up = why ? NULL : cache_get(&bc, c->d.proxy_ref, &urc);
        if (why) {
            rc = E_FORBIDDEN;
        } else if (!up || urc != 0) {
            why = "the selected proxy is not available (fail closed)";
            c->code = "proxy_unavailable";
            rc = E_UNAVAIL;
        } else {
            rc = resolve_checked(eg, up->host, up->port, up->check_address, &c->addrs, &c->naddr,
                                 &why);
            if (rc) {
                /* One answer for a refused and an unreachable proxy address:
                 * a tenant's proxy must not probe what the host can reach. */
                why = "the upstream proxy does not answer";
                rc = E_UNAVAIL;
            } else {
                c->via_proxy = 1;
                c->tls = up->tls;
                snprintf(c->tlshost, sizeof c->tlshost, "%s", up->host);
                c->ca_pem = up->tls && up->ca_pem ? xstrdup(up->ca_pem) : NULL;
                c->uphead = upstream_head(up, c->hn, c->rq.port, &c->uplen);
            }
        }
    } else {
        rc = resolve_checked(eg, c->hn, c->rq.port, 1, &c->addrs, &c->naddr, &why);
        if (rc == E_UNAVAIL)
            c->code = "upstream_dns_failure";
    }
    for (int i = 0; i < bc.n; i++)
        egress_upstream_clear(&bc.ent[i].up);
    c->rc = rc;
    c->why = why;
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

/* ---- workers ---- */

/* epoll tags in the low bits of the data word (pointers are 16-aligned). */
enum { T_CFD = 0, T_DFD = 1, T_LISTEN = 2, T_WAKE = 3 };

static uint64_t tag(void *p, int t)
{
    return (uint64_t)(uintptr_t)p | (uint64_t)t;
}

static int ep_add(int epfd, int fd, uint32_t events, uint64_t data)
{
    struct epoll_event ev = {.events = events, .data.u64 = data};
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

#define CONN_EVENTS (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET)

static void setup_add(struct worker *w, struct econn *c)
{
    c->in_setup = 1;
    c->sprev = NULL;
    c->snext = w->setup;
    if (w->setup)
        w->setup->sprev = c;
    w->setup = c;
}

static void setup_del(struct worker *w, struct econn *c)
{
    if (!c->in_setup)
        return;
    if (c->sprev)
        c->sprev->snext = c->snext;
    else
        w->setup = c->snext;
    if (c->snext)
        c->snext->sprev = c->sprev;
    c->in_setup = 0;
}

/* Closes a socket this worker's epoll watches, unregistering it first:
 * closing alone leaves the registration in place while another process
 * holds a duplicate (a browser being started between fork and exec), and
 * its events would then name a freed connection. Accepts -1. */
static void ep_close(struct worker *w, int fd)
{
    if (fd < 0)
        return;
    (void)epoll_ctl(w->epfd, EPOLL_CTL_DEL, fd, NULL);
    close(fd);
}

static void conn_free(struct econn *c)
{
    SSL_free(c->ssl); /* its socket is closed already; nothing is sent */
    xfree(c->ca_pem);
    xfree(c->up.cbuf);
    xfree(c->down.cbuf);
    wipe_free(c->uphead, c->uplen);
    xfree(c->buf);
    xfree(c->resp);
    xfree(c->addrs);
    xfree(c->up.pre);
    xfree(c->down.pre);
    xfree(c);
}

/* Ends a connection: unlinks it, closes its descriptors; freed after the
 * batch. Not for connections a lookup thread holds (C_LOOKUP). */
static void kdrain_del(struct worker *w, struct econn *c)
{
    if (!c->kdraining)
        return;
    for (struct econn **pp = &w->kdrain; *pp; pp = &(*pp)->knext)
        if (*pp == c) {
            *pp = c->knext;
            break;
        }
    c->kdraining = 0;
}

static void conn_end(struct worker *w, struct econn *c)
{
    if (c->st == C_DEAD)
        return;
    setup_del(w, c);
    kdrain_del(w, c);
    c->st = C_DEAD;
    struct egress *eg = w->eg;
    pthread_mutex_lock(&eg->mu);
    struct esess *s = c->s;
    if (c->kern) {
        /* The kernel's counts become the session's (egress_bytes adds
         * those of live kernel tunnels itself, under the same lock). */
        uint64_t b[2];
        ksplice_leave(eg->ks, &c->kp, b);
        __atomic_add_fetch(&s->received, b[0], __ATOMIC_RELAXED);
        __atomic_add_fetch(&s->sent, b[1], __ATOMIC_RELAXED);
        metrics_add(METRICS_EGRESS_BYTES, b[0] + b[1]);
        s->nkern--;
        c->kern = 0;
    }
    for (struct econn **pp = &s->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    int dfd = c->dfd;
    c->dfd = -1;
    c->s = NULL;
    esess_unref_locked(s);
    if (--eg->nconns == 0)
        pthread_cond_broadcast(&eg->idle);
    pthread_mutex_unlock(&eg->mu);
    ep_close(w, c->cfd);
    ep_close(w, dfd);
    int fds[4] = {c->up.pr, c->up.pw, c->down.pr, c->down.pw};
    for (int i = 0; i < 4; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    c->qnext = w->grave;
    w->grave = c;
}

/* Answers the browser with a refusal and ends the connection. */
/* The proxy_error code of a failed connection: where it failed says it;
 * a refusal is always destination_blocked. */
static const char *failure_code(const struct econn *c)
{
    if (c->rc == E_FORBIDDEN)
        return "destination_blocked";
    if (c->code)
        return c->code;
    return c->via_proxy || c->d.kind == EGRESS_PROXY ? "provider_unreachable"
                                                     : "upstream_connect_failed";
}

/* The code for an upstream proxy's non-2xx answer to CONNECT. */
static const char *upstream_code(const char *resp)
{
    int status = 0;
    if (sscanf(resp, "HTTP/1.%*d %d", &status) != 1)
        return "provider_unreachable";
    if (status == 407)
        return "proxy_unavailable"; /* the credentials do not work: the proxy is unusable */
    if (status == 403)
        return "provider_blacklisted"; /* the provider refuses that destination */
    if (status == 504 || status == 408)
        return "upstream_timeout";
    return "upstream_connect_failed";
}

static void conn_refuse(struct worker *w, struct econn *c)
{
    const char *id = c->s->id;
    if (c->rc == E_FORBIDDEN)
        log_info("egress %s: refused %s:%d: %s", id, c->hn, c->rq.port, c->why);
    else
        log_debug("egress %s: %s %s:%d -> %s (%s): failed: %s", id, c->rq.method, c->hn, c->rq.port,
                  c->d.kind == EGRESS_PROXY ? c->d.proxy_ref : "direct", reason_name(c->d.reason),
                  c->why);
    int status = c->rc == E_FORBIDDEN ? 403 : 502;
    const char *code = failure_code(c);
    reply(c->cfd, status, status == 403 ? "Forbidden" : "Bad Gateway", c->why ? c->why : "failed",
          code);
    if (w->eg->failed) {
        struct egress_failure f = {
            .code = code,
            .status = status,
            .method = c->rq.method,
            .host = c->hn,
            .port = c->rq.port,
            .path = c->rq.is_connect ? "" : c->rq.path,
            .message = c->why ? c->why : "failed",
        };
        w->eg->failed(w->eg->ctx, id, &f);
    }
    conn_end(w, c);
}

/* A direction that filled its pipe twice in one turn carries bulk: a bigger
 * pipe moves more per splice (fewer calls and wakeups per byte). The default
 * pipe stays for everything else, since the kernel caps the pipe memory of
 * a user (fs.pipe-user-pages-soft); when the cap refuses, the pipe keeps its
 * size. */
static void grow_pipe(struct dir *d)
{
    d->grown = 1;
    if (fcntl(d->pw, F_SETPIPE_SZ, EGRESS_PIPE_BULK) < 0)
        (void)fcntl(d->pw, F_SETPIPE_SZ, EGRESS_PIPE_BULK / 4);
}

/* Sends on a tunnel's socket: through TLS when it is the upstream's. */
static ssize_t side_send(struct econn *c, int fd, const void *buf, size_t n)
{
    if (c->ssl && fd == c->dfd)
        return tls_client_write(c->ssl, buf, n);
    return send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static ssize_t side_recv(struct econn *c, int fd, void *buf, size_t n)
{
    if (c->ssl && fd == c->dfd)
        return tls_client_read(c->ssl, buf, n);
    return recv(fd, buf, n, 0);
}

/* n payload bytes moved one way: the session's count and the server's
 * (browserd_egress_bytes_total). */
static void count_bytes(struct dir *d, uint64_t n)
{
    __atomic_add_fetch(d->count, n, __ATOMIC_RELAXED);
    metrics_add(METRICS_EGRESS_BYTES, n);
}

/* Sends what is left of d->pre; the first d->skip bytes (our own answer
 * head) are not counted as payload. The bytes sent, or <= 0 as send. */
static ssize_t send_pre(struct econn *c, struct dir *d)
{
    ssize_t n = side_send(c, d->to, d->pre + d->preoff, d->prelen - d->preoff);
    if (n > 0) {
        size_t from = d->preoff, to = d->preoff + (size_t)n;
        if (to > d->skip)
            count_bytes(d, (uint64_t)(to - (from > d->skip ? from : d->skip)));
        d->preoff = to;
    }
    return n;
}

/* Moves bytes one way until it would block, the fair share is used (1,
 * pump again later) or it fails (-1). */
static int pump(struct econn *c, struct dir *d)
{
    for (int rounds = 0;;) {
        ssize_t n;
        if (d->preoff < d->prelen) {
            if (send_pre(c, d) > 0)
                continue;
        } else if (d->inpipe) {
            n = splice(d->pr, NULL, d->to, NULL, d->inpipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n > 0) {
                d->inpipe -= (size_t)n;
                count_bytes(d, (uint64_t)n);
                continue;
            }
        } else if (d->eof) {
            if (!d->done) {
                shutdown(d->to, SHUT_WR);
                d->done = 1;
            }
            return 0;
        } else {
            if (rounds++ == EGRESS_PUMP_ROUNDS)
                return 1;
            /* The pipe is made when the first bytes are due (many tunnels
             * never carry any, and the answer goes out sooner). */
            int p[2];
            if (d->pw < 0) {
                if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) {
                    log_warn("egress: cannot make a pipe: %s", strerror(errno));
                    return -1;
                }
                d->pr = p[0];
                d->pw = p[1];
            }
            n = splice(d->from, NULL, d->pw, NULL, EGRESS_CHUNK, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n > 0) {
                d->inpipe = (size_t)n;
                if (rounds > 1 && !d->grown)
                    grow_pipe(d);
                continue;
            }
            if (n == 0) {
                d->eof = 1;
                continue;
            }
        }
        if (errno == EINTR)
            continue;
        return errno == EAGAIN ? 0 : -1;
    }
}

/* pump for a TLS tunnel: the same contract, through d->cbuf. A write that
 * would block is repeated with the same bytes, as TLS requires. The end of
 * the browser's upload ends the TLS stream (close_notify): TLS has no
 * half-close. */
static int pump_copy(struct econn *c, struct dir *d)
{
    for (int rounds = 0;;) {
        ssize_t n;
        if (d->preoff < d->prelen) {
            if ((n = send_pre(c, d)) > 0)
                continue;
        } else if (d->coff < d->clen) {
            n = side_send(c, d->to, d->cbuf + d->coff, d->clen - d->coff);
            if (n > 0) {
                d->coff += (size_t)n;
                count_bytes(d, (uint64_t)n);
                continue;
            }
        } else if (d->eof) {
            if (!d->done) {
                if (d->to == c->dfd)
                    tls_client_close_notify(c->ssl);
                else
                    shutdown(d->to, SHUT_WR);
                d->done = 1;
            }
            return 0;
        } else {
            if (rounds++ == EGRESS_PUMP_ROUNDS)
                return 1;
            if (!d->cbuf)
                d->cbuf = xmalloc(EGRESS_TLS_BUF);
            n = side_recv(c, d->from, d->cbuf, EGRESS_TLS_BUF);
            if (n > 0) {
                d->clen = (size_t)n;
                d->coff = 0;
                continue;
            }
            if (n == 0) {
                d->eof = 1;
                continue;
            }
        }
        if (n == 0)
            errno = EPIPE;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN ? 0 : -1;
    }
}

static void relay(struct worker *w, struct econn *c, int up, int down)
{
    int b, a;
    if (c->ssl) {
        /* TLS reads may need the socket writable and writes readable, and
         * OpenSSL holds bytes of its own: any event pumps both ways. */
        b = pump_copy(c, &c->down);
        a = b >= 0 ? pump_copy(c, &c->up) : 0;
    } else {
        b = down ? pump(c, &c->down) : 0;
        a = up && b >= 0 ? pump(c, &c->up) : 0;
    }
    if (a < 0 || b < 0 || (c->up.done && c->down.done)) {
        conn_end(w, c);
        return;
    }
    if ((a > 0 || b > 0) && !c->again) {
        c->again = 1;
        c->anext = w->again;
        w->again = c;
    }
}

/* ---- in the kernel (ksplice) ---- */

static int ep_mod(int epfd, int fd, uint32_t events, uint64_t data)
{
    struct epoll_event ev = {.events = events, .data.u64 = data};
    return epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev);
}

/* Kernel tunnels of an organization, over its sessions (eg->mu held). */
static int org_kern_locked(const struct egress *eg, const char *org)
{
    int n = 0;
    for (const struct esess *s = eg->sessions; s; s = s->next)
        if (strcmp(s->org, org) == 0)
            n += s->nkern;
    return n;
}

static void kdrain_add(struct worker *w, struct econn *c)
{
    c->kdelay = c->kdelay ? c->kdelay * 2 : 1;
    if (c->kdelay > EGRESS_DRAIN_MS_MAX)
        c->kdelay = EGRESS_DRAIN_MS_MAX;
    c->kdue = mono_ms() + c->kdelay;
    if (c->kdraining)
        return;
    c->kdraining = 1;
    c->knext = w->kdrain;
    w->kdrain = c;
}

/* Where a kernel tunnel stands: a direction whose source ended (its FIN
 * read by the verdict: nothing left in its receive queue) is shut down
 * for writing on its destination once the kernel has written there every
 * byte it redirected (the kernel may still hold some for a slow reader;
 * a FIN sent before them would cut them off). The tunnel ends when both
 * directions did, when a socket fails, or when another thread shut it
 * down. */
static void kcheck(struct worker *w, struct econn *c)
{
    struct dir *dirs[2] = {&c->down, &c->up}; /* from dfd (cookie 0), from cfd (1) */
    if (__atomic_load_n(&c->killed, __ATOMIC_ACQUIRE)) {
        conn_end(w, c);
        return;
    }
    int pending = 0;
    for (int i = 0; i < 2; i++) {
        struct dir *d = dirs[i];
        if (d->eof)
            continue;
        struct pollfd p = {.fd = d->from, .events = POLLIN | POLLRDHUP};
        int inq = 0;
        if (poll(&p, 1, 0) == 1 && (p.revents & POLLERR)) {
            conn_end(w, c);
            return;
        }
        if (!(p.revents & (POLLRDHUP | POLLHUP)))
            continue;
        /* Bytes before the FIN not yet taken by the verdict: their taking
         * wakes no one here (data wake-ups are masked), so check again. */
        if (ioctl(d->from, SIOCINQ, &inq) == 0 && inq == 0)
            d->eof = 1;
        else
            pending = 1;
    }
    uint64_t bytes[2], passed[2];
    if (ksplice_counts(w->eg->ks, &c->kp, bytes, passed) != 0 || passed[0] || passed[1]) {
        log_debug("egress %s: a kernel tunnel to %s:%d ended: bytes arrived before both sockets "
                  "were joined",
                  c->s->id, c->hn, c->rq.port);
        conn_end(w, c);
        return;
    }
    for (int i = 0; i < 2; i++) {
        struct dir *d = dirs[i];
        if (!d->eof || d->done)
            continue;
        int64_t wr = ksplice_written(d->to);
        if (wr < 0) {
            conn_end(w, c);
            return;
        }
        if ((uint64_t)(wr - c->kbase[1 - i]) >= bytes[i]) {
            shutdown(d->to, SHUT_WR);
            d->done = 1;
        } else {
            pending = 1;
        }
    }
    if (c->up.done && c->down.done) {
        conn_end(w, c);
        return;
    }
    if (pending)
        kdrain_add(w, c);
}

/* Splices an answered CONNECT tunnel in the kernel: the browser gets its
 * "200" from here first (nothing else is sent through user space), then
 * both sockets are joined, the destination's first (it is silent until the
 * browser speaks, and the browser speaks only after the 200). 0 when the
 * kernel carries the tunnel from now on (or it ended); -1 to relay in user
 * space: no splice loaded, a TLS upstream, the session relay, a plain
 * request, bytes already read past a head, the session's or organization's
 * share of the maps used, or a join the kernel refused. */
static int kjoin(struct worker *w, struct econn *c)
{
    struct egress *eg = w->eg;
    struct esess *s = c->s;
    struct dir *u = &c->up, *d = &c->down;
    if (!eg->ks || c->ssl || c->self || !c->rq.is_connect || u->prelen ||
        d->prelen != sizeof EST - 1)
        return -1;
    int64_t bd = ksplice_written(c->dfd), bc = ksplice_written(c->cfd);
    if (bd < 0 || bc < 0)
        return -1;
    pthread_mutex_lock(&eg->mu);
    int ok =
        s->nkern < LIM_EGRESS_KERNEL_SESSION && org_kern_locked(eg, s->org) < LIM_EGRESS_KERNEL_ORG;
    if (ok)
        s->nkern++;
    pthread_mutex_unlock(&eg->mu);
    if (!ok)
        return -1;
    int rc = send_pre(c, d) == (ssize_t)d->prelen ? 0 : -1;
    if (rc == 0) {
        /* The kernel moves redirected bytes to a socket from a work item
         * that, when the socket's send buffer is full, tries again a tick
         * later (4 ms at HZ=250): the default buffer made that the pace
         * (about 250 MB/s on loopback). A fixed, larger buffer (capped by
         * net.core.wmem_max) keeps the sender ahead. */
        int sz = LIM_EGRESS_KERNEL_SNDBUF;
        (void)setsockopt(c->dfd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
        (void)setsockopt(c->cfd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    }
    if (rc == 0)
        rc = ksplice_join(eg->ks, c->dfd, c->cfd, &c->kp);
    pthread_mutex_lock(&eg->mu);
    if (rc == 0)
        c->kern = 1;
    else
        s->nkern--;
    pthread_mutex_unlock(&eg->mu);
    if (rc != 0)
        return -1; /* what send_pre sent is not sent again */
    c->kbase[0] = bd;
    c->kbase[1] = bc + (int64_t)d->prelen;
    metrics_add(METRICS_KERNEL_TUNNELS, 1);
    /* Bytes no longer pass through here: only the end of a direction and
     * failures wake the worker (not every arrival). */
    if (ep_mod(w->epfd, c->cfd, EPOLLRDHUP | EPOLLET, tag(c, T_CFD)) != 0 ||
        ep_mod(w->epfd, c->dfd, EPOLLRDHUP | EPOLLET, tag(c, T_DFD)) != 0) {
        conn_end(w, c);
        return 0;
    }
    kcheck(w, c);
    return 0;
}

/* The tunnel is open: answer the browser and start relaying. */
static void established(struct worker *w, struct econn *c)
{
    struct egress *eg = w->eg;
    struct esess *s = c->s;
    log_debug("egress %s: %s %s:%d -> %s (%s)", s->id, c->rq.method, c->hn, c->rq.port,
              c->d.kind == EGRESS_PROXY ? c->d.proxy_ref : "direct", reason_name(c->d.reason));
    char org[sizeof s->org];
    pthread_mutex_lock(&eg->mu);
    int closing = s->closed;
    memcpy(org, s->org, sizeof org);
    pthread_mutex_unlock(&eg->mu);
    if (closing) {
        conn_end(w, c);
        return;
    }

    setup_del(w, c);
    c->st = C_RELAY;
    wipe_free(c->uphead, c->uplen);
    c->uphead = NULL;
    xfree(c->addrs);
    c->addrs = NULL;
    /* Browser -> destination: the rewritten head of a plain request, then
     * whatever the browser sent after its head. */
    struct dir *u = &c->up, *d = &c->down;
    *u = (struct dir){.from = c->cfd, .to = c->dfd, .pr = -1, .pw = -1, .count = &s->sent};
    *d = (struct dir){.from = c->dfd, .to = c->cfd, .pr = -1, .pw = -1, .count = &s->received};
    size_t rest = c->len - c->hl, head = 0;
    char *nh = NULL;
    if (!c->rq.is_connect)
        nh = rewrite_head(c->rq.method, c->rq.path, c->buf, c->hl, &head);
    else if (c->self) /* who is asking, for the session relay (not payload) */
        nh = xasprintf("BROWSERD-SELF %s %s\r\n", s->id, org[0] ? org : "-");
    if (c->self) {
        head = strlen(nh);
        u->skip = head;
    }
    if (head + rest) {
        u->pre = xmalloc(head + rest);
        if (head)
            memcpy(u->pre, nh, head);
        memcpy(u->pre + head, c->buf + c->hl, rest);
        u->prelen = head + rest;
    }
    xfree(nh);
    xfree(c->buf);
    c->buf = NULL;
    /* Destination -> browser: "200 Connection established" for CONNECT,
     * then what the upstream sent after its own answer. */
    size_t est = c->rq.is_connect ? sizeof EST - 1 : 0, extra = c->resplen;
    if (est + extra) {
        d->pre = xmalloc(est + extra);
        memcpy(d->pre, EST, est);
        if (extra)
            memcpy(d->pre + est, c->resp, extra);
        d->prelen = est + extra;
        d->skip = est;
    }
    xfree(c->resp);
    c->resp = NULL;
    if (kjoin(w, c) == 0)
        return;
    relay(w, c, 1, 1);
}

static void start_connect(struct worker *w, struct econn *c);
static void connect_event(struct worker *w, struct econn *c);

/* Gives up the current address and tries the next one. */
static void next_address(struct worker *w, struct econn *c)
{
    pthread_mutex_lock(&w->eg->mu);
    int fd = c->dfd;
    c->dfd = -1;
    pthread_mutex_unlock(&w->eg->mu);
    ep_close(w, fd);
    c->ai++;
    start_connect(w, c);
}

/* Connects (non-blocking) to the next planned address, or refuses. */
static void start_connect(struct worker *w, struct econn *c)
{
    struct egress *eg = w->eg;
    if (c->rc) {
        conn_refuse(w, c);
        return;
    }
    for (; c->ai < c->naddr; c->ai++) {
        const struct eaddr *a = &c->addrs[c->ai];
        int fd = socket(a->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            log_warn("egress %s: cannot make a socket: %s", c->s->id, strerror(errno));
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(fd, (const struct sockaddr *)&a->sa, a->len) != 0 && errno != EINPROGRESS) {
            log_debug("egress %s: connect: %s", c->s->id, strerror(errno));
            close(fd);
            continue;
        }
        pthread_mutex_lock(&eg->mu);
        c->dfd = fd;
        int closing = c->s->closed;
        pthread_mutex_unlock(&eg->mu);
        if (closing || ep_add(w->epfd, fd, CONN_EVENTS, tag(c, T_DFD)) != 0) {
            conn_end(w, c);
            return;
        }
        c->st = C_CONNECT;
        c->deadline = mono_ms() + EGRESS_CONNECT_MS;
        /* A loopback or LAN handshake is usually complete already: go on
         * now rather than after one more turn of the loop. */
        connect_event(w, c);
        return;
    }
    c->rc = E_UNAVAIL;
    c->why = c->via_proxy ? "the upstream proxy does not answer"
                          : "the destination did not accept the connection";
    c->code = c->via_proxy   ? "provider_unreachable"
              : c->timed_out ? "upstream_timeout"
                             : "upstream_connect_failed";
    conn_refuse(w, c);
}

/* Through an upstream: sends CONNECT, reads the answer. */
static void uphead_io(struct worker *w, struct econn *c)
{
    while (c->upoff < c->uplen) {
        ssize_t n = side_send(c, c->dfd, c->uphead + c->upoff, c->uplen - c->upoff);
        if (n > 0) {
            c->upoff += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        goto fail;
    }
    if (!c->resp)
        c->resp = xmalloc(EGRESS_HEAD_MAX);
    for (;;) {
        if (c->resplen >= EGRESS_HEAD_MAX - 1)
            goto fail;
        ssize_t n = side_recv(c, c->dfd, c->resp + c->resplen, EGRESS_HEAD_MAX - 1 - c->resplen);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0)
            goto fail;
        size_t from = c->resplen > 3 ? c->resplen - 3 : 0;
        c->resplen += (size_t)n;
        c->resp[c->resplen] = '\0';
        char *h = memmem(c->resp + from, c->resplen - from, "\r\n\r\n", 4);
        if (!h)
            continue;
        size_t hl = (size_t)(h - c->resp) + 4;
        const char *why = upstream_refusal(c->resp);
        if (why) {
            c->rc = E_UNAVAIL;
            c->why = why;
            c->code = upstream_code(c->resp);
            conn_refuse(w, c);
            return;
        }
        c->resplen -= hl;
        memmove(c->resp, c->resp + hl, c->resplen);
        established(w, c);
        return;
    }
fail:
    c->rc = E_UNAVAIL;
    c->why = "the upstream proxy did not answer CONNECT";
    conn_refuse(w, c);
}

/* TLS to an https upstream proxy: the handshake, then CONNECT over it. */
static void tls_step(struct worker *w, struct econn *c)
{
    int r = tls_client_handshake(c->ssl, c->whybuf, sizeof c->whybuf);
    if (r == TLS_AGAIN)
        return;
    if (r == TLS_FAILED) {
        c->rc = E_UNAVAIL;
        c->why = c->whybuf;
        c->code = "proxy_unavailable"; /* a certificate that does not verify, or no TLS */
        conn_refuse(w, c);
        return;
    }
    c->st = C_UPHEAD;
    c->deadline = mono_ms() + EGRESS_HEAD_MS;
    uphead_io(w, c);
}

/* The destination socket may have connected: its own state decides (an
 * event may be stale, from an address given up in the same batch). */
static void connect_event(struct worker *w, struct econn *c)
{
    struct pollfd p = {.fd = c->dfd, .events = POLLOUT};
    int err = 0;
    socklen_t el = sizeof err;
    if (poll(&p, 1, 0) < 0 || getsockopt(c->dfd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
        err = errno ? errno : EIO;
    if (err || (p.revents & (POLLERR | POLLHUP))) {
        c->timed_out = 0; /* refused or unreachable, not slow */
        next_address(w, c);
        return;
    }
    if (!(p.revents & POLLOUT))
        return; /* still connecting */
    if (c->via_proxy && c->tls) {
        c->ssl = tls_client_conn(w->eg->tls, c->dfd, c->tlshost, c->ca_pem);
        if (!c->ssl) {
            c->rc = E_UNAVAIL;
            c->why = "cannot start TLS to the upstream proxy";
            c->code = "proxy_unavailable";
            conn_refuse(w, c);
            return;
        }
        c->st = C_UPTLS;
        c->deadline = mono_ms() + EGRESS_HEAD_MS;
        tls_step(w, c);
    } else if (c->via_proxy) {
        c->st = C_UPHEAD;
        c->deadline = mono_ms() + EGRESS_HEAD_MS;
        uphead_io(w, c);
    } else {
        established(w, c);
    }
}

/* A lookup thread: plans queued connections and hands them back to their
 * workers. */
static void *lookup_main(void *arg)
{
    struct egress *eg = arg;
    pthread_mutex_lock(&eg->lkmu);
    for (;;) {
        while (!eg->lkq && !eg->lkstop) {
            eg->lkidle++;
            pthread_cond_wait(&eg->lkcv, &eg->lkmu);
            eg->lkidle--;
        }
        struct econn *c = eg->lkq;
        if (!c)
            break;
        eg->lkq = c->qnext;
        if (!eg->lkq)
            eg->lkq_tail = &eg->lkq;
        pthread_mutex_unlock(&eg->lkmu);
        plan_slow(eg, c);
        struct worker *w = c->w;
        pthread_mutex_lock(&w->qmu);
        c->qnext = w->done;
        w->done = c;
        pthread_mutex_unlock(&w->qmu);
        uint64_t one = 1;
        if (write(w->evfd, &one, sizeof one) < 0)
            log_warn("egress: cannot wake a worker");
        pthread_mutex_lock(&eg->lkmu);
    }
    pthread_mutex_unlock(&eg->lkmu);
    return NULL;
}

/* The request head is complete: parse it and plan. */
static void head_done(struct worker *w, struct econn *c)
{
    struct egress *eg = w->eg;
    if (egress_parse_request(c->buf, c->hl, &c->rq) != 0) {
        reply(c->cfd, 400, "Bad Request", "this proxy takes CONNECT or absolute http:// requests",
              NULL);
        conn_end(w, c);
        return;
    }
    egress_host_norm(c->rq.host, c->hn, sizeof c->hn);
    if (plan_fast(eg, c) == 0) {
        start_connect(w, c);
        return;
    }
    c->st = C_LOOKUP;
    c->deadline = INT64_MAX;
    pthread_mutex_lock(&eg->lkmu);
    c->qnext = NULL;
    *eg->lkq_tail = c;
    eg->lkq_tail = &c->qnext;
    if (eg->lkidle == 0 && eg->nlk < EGRESS_LOOKUPS_MAX) {
        if (pthread_create(&eg->lkt[eg->nlk], NULL, lookup_main, eg) == 0)
            pthread_setname_np(eg->lkt[eg->nlk++], "egress-lookup");
        else if (eg->nlk == 0)
            log_warn("egress: cannot start a lookup thread");
    }
    pthread_cond_signal(&eg->lkcv);
    pthread_mutex_unlock(&eg->lkmu);
}

static void head_read(struct worker *w, struct econn *c)
{
    if (!c->buf)
        c->buf = xmalloc(EGRESS_HEAD_MAX);
    for (;;) {
        if (c->len >= EGRESS_HEAD_MAX - 1) {
            reply(c->cfd, 400, "Bad Request", "the request head is too large", NULL);
            conn_end(w, c);
            return;
        }
        ssize_t n = recv(c->cfd, c->buf + c->len, EGRESS_HEAD_MAX - 1 - c->len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            conn_end(w, c);
            return;
        }
        size_t from = c->len > 3 ? c->len - 3 : 0;
        c->len += (size_t)n;
        c->buf[c->len] = '\0';
        char *h = memmem(c->buf + from, c->len - from, "\r\n\r\n", 4);
        if (h) {
            c->hl = (size_t)(h - c->buf) + 4;
            head_done(w, c);
            return;
        }
    }
}

static void conn_event(struct worker *w, struct econn *c, int is_d, uint32_t ev)
{
    int hup = (ev & (EPOLLHUP | EPOLLERR)) != 0;
    int rd = (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
    int wr = (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR)) != 0;
    switch (c->st) {
    case C_HEAD:
        if (!is_d)
            head_read(w, c);
        break;
    case C_LOOKUP:
        if (!is_d && hup)
            c->hup = 1;
        break;
    case C_CONNECT:
        if (is_d)
            connect_event(w, c);
        else if (hup)
            conn_end(w, c);
        break;
    case C_UPTLS:
    case C_UPHEAD:
        if (is_d)
            (c->st == C_UPTLS ? tls_step : uphead_io)(w, c);
        else if (hup)
            conn_end(w, c);
        break;
    case C_RELAY:
        if (c->kern) {
            if (ev & EPOLLERR)
                conn_end(w, c);
            else
                kcheck(w, c);
            break;
        }
        /* reads from this socket: up from the browser, down from the
         * destination; writes to it: the other direction. */
        relay(w, c, is_d ? wr : rd, is_d ? rd : wr);
        if (c->st == C_RELAY && (ev & EPOLLERR))
            conn_end(w, c);
        break;
    case C_DEAD:
        break;
    }
}

static void accept_on(struct worker *w, struct esess *target)
{
    struct egress *eg = w->eg;
    struct econn *fresh = NULL;
    pthread_mutex_lock(&eg->mu);
    struct esess *s = eg->sessions;
    while (s && s != target)
        s = s->next;
    for (int k = 0; s && !s->closed && !eg->stopping && k < 64; k++) {
        int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
            /* Out of descriptors: refuse this one (the listener is level-
             * triggered and would wake us forever) with the spare one. */
            if (eg->spare_fd >= 0) {
                close(eg->spare_fd);
                eg->spare_fd = -1;
                fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
                if (fd >= 0)
                    close(fd);
                eg->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
            }
            log_warn("egress %s: out of file descriptors: a connection was refused", s->id);
            break;
        }
        if (fd < 0)
            break;
        struct econn *c = xcalloc(1, sizeof *c);
        c->w = w;
        c->s = s;
        c->cfd = fd;
        c->dfd = -1;
        c->up.pr = c->up.pw = c->down.pr = c->down.pw = -1;
        c->next = s->conns;
        s->conns = c;
        s->refs++;
        eg->nconns++;
        c->qnext = fresh;
        fresh = c;
    }
    pthread_mutex_unlock(&eg->mu);
    while (fresh) {
        struct econn *c = fresh;
        fresh = c->qnext;
        c->st = C_HEAD;
        c->deadline = mono_ms() + EGRESS_HEAD_MS;
        setup_add(w, c);
        if (ep_add(w->epfd, c->cfd, CONN_EVENTS, tag(c, T_CFD)) != 0)
            conn_end(w, c);
        else
            head_read(w, c); /* the head often arrived with the connection */
    }
}

/* Connections whose lookup finished. */
static void lookups_done(struct worker *w)
{
    uint64_t v;
    if (read(w->evfd, &v, sizeof v) < 0 && errno != EAGAIN)
        log_warn("egress: eventfd: %s", strerror(errno));
    pthread_mutex_lock(&w->qmu);
    struct econn *list = w->done;
    w->done = NULL;
    pthread_mutex_unlock(&w->qmu);
    while (list) {
        struct econn *c = list;
        list = c->qnext;
        c->qnext = NULL;
        c->st = C_CONNECT; /* no longer held by a lookup thread */
        if (c->hup)
            conn_end(w, c);
        else
            start_connect(w, c);
    }
}

/* Deadlines of the connections still being set up. */
static void scan(struct worker *w, int64_t now)
{
    struct econn *next;
    for (struct econn *c = w->setup; c; c = next) {
        next = c->snext;
        if (c->deadline > now)
            continue;
        if (c->st == C_HEAD) {
            conn_end(w, c);
        } else if (c->st == C_CONNECT) {
            c->timed_out = 1;
            next_address(w, c);
        } else if (c->st == C_UPTLS) {
            c->rc = E_UNAVAIL;
            c->why = "the TLS handshake with the upstream proxy timed out";
            c->code = "provider_unreachable";
            conn_refuse(w, c);
        } else if (c->st == C_UPHEAD) {
            c->rc = E_UNAVAIL;
            c->why = "the upstream proxy did not answer CONNECT";
            c->code = "upstream_timeout";
            conn_refuse(w, c);
        }
    }
    w->next_scan = now + EGRESS_SCAN_MS;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct epoll_event evs[128];
    while (!__atomic_load_n(&w->quit, __ATOMIC_ACQUIRE)) {
        int timeout = w->again ? 0 : w->setup ? EGRESS_SCAN_MS : -1;
        if (!w->again && w->kdrain) {
            int64_t now = mono_ms(), first = now + EGRESS_DRAIN_MS_MAX;
            for (struct econn *c = w->kdrain; c; c = c->knext)
                if (c->kdue < first)
                    first = c->kdue;
            int wait = first > now ? (int)(first - now) : 0;
            if (timeout < 0 || wait < timeout)
                timeout = wait;
        }
        int n = epoll_wait(w->epfd, evs, 128, timeout);
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; i++) {
            uint64_t u = evs[i].data.u64;
            void *p = (void *)(uintptr_t)(u & ~(uint64_t)3);
            switch ((int)(u & 3)) {
            case T_WAKE:
                lookups_done(w);
                break;
            case T_LISTEN:
                accept_on(w, p);
                break;
            default:
                conn_event(w, p, (int)(u & 3) == T_DFD, evs[i].events);
            }
        }
        struct econn *again = w->again;
        w->again = NULL;
        while (again) {
            struct econn *c = again;
            again = c->anext;
            c->again = 0;
            if (c->st == C_RELAY && !c->kern)
                relay(w, c, 1, 1);
        }
        if (w->kdrain) {
            int64_t now = mono_ms();
            struct econn *due = NULL, *next;
            for (struct econn **pp = &w->kdrain; *pp;) {
                struct econn *c = *pp;
                if (c->kdue <= now) {
                    *pp = c->knext;
                    c->kdraining = 0;
                    c->knext = due;
                    due = c;
                } else {
                    pp = &c->knext;
                }
            }
            for (struct econn *c = due; c; c = next) {
                next = c->knext;
                kcheck(w, c);
            }
        }
        while (w->grave) {
            struct econn *c = w->grave;
            w->grave = c->qnext;
            conn_free(c);
        }
        if (w->setup) {
            int64_t now = mono_ms();
            if (now >= w->next_scan)
                scan(w, now);
        }
    }
    return NULL;
}

/* ---- the API ---- */

static void free_config(struct egress *eg)
{
    if (eg->spare_fd >= 0)
        close(eg->spare_fd);
    for (size_t i = 0; i < eg->nrules; i++) {
        xfree(eg->rules[i].pattern);
        xfree(eg->rules[i].target);
    }
    xfree(eg->rules);
    xfree(eg->allow);
    xfree(eg->priv);
    xfree(eg->ports);
    xfree(eg->locals);
    tls_client_free(eg->tls);
    ksplice_free(eg->ks);
}

/* Stops the first n workers (their epolls and eventfds are set up). */
static void workers_stop(struct egress *eg, int started)
{
    for (int i = 0; i < eg->nw; i++) {
        struct worker *w = &eg->w[i];
        if (i < started) {
            __atomic_store_n(&w->quit, 1, __ATOMIC_RELEASE);
            uint64_t one = 1;
            if (write(w->evfd, &one, sizeof one) < 0)
                log_warn("egress: cannot wake a worker");
            pthread_join(w->t, NULL);
        }
        if (w->epfd >= 0)
            close(w->epfd);
        if (w->evfd >= 0)
            close(w->evfd);
        pthread_mutex_destroy(&w->qmu);
    }
    xfree(eg->w);
    eg->w = NULL;
}

int egress_start(const struct egress_config *cfg, struct egress **out, struct err *e)
{
    struct egress *eg = xcalloc(1, sizeof *eg);
    pthread_mutex_init(&eg->mu, NULL);
    pthread_mutex_init(&eg->lmu, NULL);
    pthread_mutex_init(&eg->lkmu, NULL);
    pthread_cond_init(&eg->idle, NULL);
    pthread_cond_init(&eg->lkcv, NULL);
    eg->lkq_tail = &eg->lkq;
    eg->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    eg->server_port = cfg->server_port;
    eg->self_port = cfg->self_port;
    eg->resolve = cfg->resolve;
    eg->failed = cfg->failed;
    eg->ctx = cfg->ctx;
    int rc = parse_allow(eg, cfg->allow_loopback, e);
    if (rc == 0)
        rc = addrclass_parse_ranges(cfg->allow_private, &eg->priv, &eg->npriv, e);
    if (rc == 0)
        rc = parse_rules(eg, cfg->host_rules, e);
    if (rc == 0)
        rc = tls_client_new(cfg->proxy_ca_file, &eg->tls, e);
    if (rc == 0 && cfg->sockmap) {
        struct err ke = {0};
        if (ksplice_open(LIM_EGRESS_KERNEL_SOCKETS, &eg->ks, &ke) == 0)
            log_info("egress: CONNECT tunnels are spliced in the kernel (sockmap)");
        else
            log_warn("egress: tunnels are relayed in user space: the in-kernel splice is not "
                     "available: %s",
                     ke.message);
    } else if (rc == 0) {
        log_info("egress: tunnels are relayed in user space (BROWSERD_EGRESS_SOCKMAP is off)");
    }
    int started = 0;
    if (rc == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        eg->nw = cfg->workers > 0 ? cfg->workers : cores > 0 ? (int)cores : 1;
        if (eg->nw > EGRESS_WORKERS_MAX)
            eg->nw = EGRESS_WORKERS_MAX;
        eg->w = xcalloc((size_t)eg->nw, sizeof *eg->w);
        for (int i = 0; i < eg->nw; i++) {
            struct worker *w = &eg->w[i];
            w->eg = eg;
            pthread_mutex_init(&w->qmu, NULL);
            w->epfd = epoll_create1(EPOLL_CLOEXEC);
            w->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        }
        for (int i = 0; i < eg->nw && rc == 0; i++) {
            struct worker *w = &eg->w[i];
            if (w->epfd < 0 || w->evfd < 0 ||
                ep_add(w->epfd, w->evfd, EPOLLIN, tag(NULL, T_WAKE)) != 0 ||
                pthread_create(&w->t, NULL, worker_main, w) != 0) {
                rc =
                    err_set(e, E_INTERNAL, "internal", "egress: cannot start: %s", strerror(errno));
            } else {
                char name[16] = "egress-w0";
                name[8] = (char)('0' + i % 10);
                pthread_setname_np(w->t, name); /* top -H, and bench/egress.c */
                started++;
            }
        }
    }
    if (rc) {
        if (eg->w)
            workers_stop(eg, started);
        free_config(eg);
        pthread_mutex_destroy(&eg->mu);
        pthread_mutex_destroy(&eg->lmu);
        pthread_mutex_destroy(&eg->lkmu);
        pthread_cond_destroy(&eg->idle);
        pthread_cond_destroy(&eg->lkcv);
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
    epoll_ctl(s->w->epfd, EPOLL_CTL_DEL, s->lfd, NULL);
    close(s->lfd);
    s->lfd = -1;
    for (struct econn *c = s->conns; c; c = c->next) {
        __atomic_store_n(&c->killed, 1, __ATOMIC_RELEASE);
        shutdown(c->cfd, SHUT_RDWR);
        if (c->dfd >= 0)
            shutdown(c->dfd, SHUT_RDWR);
    }
    esess_unref_locked(s);
}

void egress_stop(struct egress *eg)
{
    if (!eg)
        return;
    pthread_mutex_lock(&eg->mu);
    eg->stopping = 1;
    while (eg->sessions)
        close_locked(eg, eg->sessions);
    while (eg->nconns > 0)
        pthread_cond_wait(&eg->idle, &eg->mu);
    pthread_mutex_unlock(&eg->mu);
    workers_stop(eg, eg->nw);
    pthread_mutex_lock(&eg->lkmu);
    eg->lkstop = 1;
    pthread_cond_broadcast(&eg->lkcv);
    pthread_mutex_unlock(&eg->lkmu);
    for (int i = 0; i < eg->nlk; i++)
        pthread_join(eg->lkt[i], NULL);
    free_config(eg);
    pthread_mutex_destroy(&eg->mu);
    pthread_mutex_destroy(&eg->lmu);
    pthread_mutex_destroy(&eg->lkmu);
    pthread_cond_destroy(&eg->idle);
    pthread_cond_destroy(&eg->lkcv);
    xfree(eg);
}

int egress_open(struct egress *eg, const char *session_id, const char *org_id,
                const char *project_id, const json_t *network, const struct egress_top *top,
                int defer_routes, int netns, int *port, struct err *e)
{
    struct netcfg *nc = netcfg_compile(network);
    if (!nc)
        return err_field(e, "network", "the network configuration does not compile");
    int fd = netns_socket(netns, AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
        errno = -fd;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    /* Wake the worker once the browser's request has arrived, not at the
     * handshake before it (the worker accepts and reads in one turn). */
    int defer = 10, one = 1;
    if (fd >= 0) {
        setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer, sizeof defer);
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* inherited */
    }
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 512) != 0 ||
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
    s->netns = netns;
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
    s->w = &eg->w[eg->next_w++ % eg->nw];
    if (ep_add(s->w->epfd, fd, EPOLLIN, tag(s, T_LISTEN)) != 0) {
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
                __atomic_store_n(&c->killed, 1, __ATOMIC_RELEASE);
                shutdown(c->cfd, SHUT_RDWR);
                if (c->dfd >= 0)
                    shutdown(c->dfd, SHUT_RDWR);
            }
    pthread_mutex_unlock(&eg->mu);
    return 0;
}

int egress_rekey(struct egress *eg, const char *session_id, const char *org_id,
                 const char *project_id, const json_t *network, const struct egress_top *top,
                 struct err *e)
{
    struct netcfg *nc = netcfg_compile(network);
    if (!nc)
        return err_field(e, "network", "the network configuration does not compile");
    int rc = 0;
    pthread_mutex_lock(&eg->mu);
    struct esess *s = find_locked(eg, session_id);
    if (!s) {
        rc = err_set(e, E_NOTFOUND, "not_found", "egress: session %s has no listener", session_id);
    } else if (s->nc_old) {
        rc = err_set(e, E_CONFLICT, "conflict", "egress: session %s was given its owner already",
                     session_id);
    } else {
        s->nc_old = s->nc; /* connections being decided may hold it */
        s->nc = nc;
        nc = NULL;
        snprintf(s->org, sizeof s->org, "%s", org_id ? org_id : "");
        snprintf(s->project, sizeof s->project, "%s", project_id ? project_id : "");
        s->top = *top;
        /* Whatever the listener carried was opened before its owner had it. */
        for (struct econn *c = s->conns; c; c = c->next) {
            __atomic_store_n(&c->killed, 1, __ATOMIC_RELEASE);
            shutdown(c->cfd, SHUT_RDWR);
            if (c->dfd >= 0)
                shutdown(c->dfd, SHUT_RDWR);
        }
    }
    pthread_mutex_unlock(&eg->mu);
    netcfg_free(nc);
    return rc;
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
        /* Tunnels in the kernel: their counts so far (conn_end moves them
         * into the session's under this lock). */
        for (const struct econn *c = s->conns; c && eg->ks; c = c->next) {
            uint64_t b[2], passed[2];
            if (c->kern && ksplice_counts(eg->ks, &c->kp, b, passed) == 0) {
                *received += b[0];
                *sent += b[1];
            }
        }
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

/* ---- /proxies/{id}/check (blocking, on the caller's thread) ---- */

/* Opens a tunnel to host:port through up (blocking). 0 with *fd, else
 * E_UNAVAIL with why. */
static int probe_tunnel(struct egress *eg, const struct egress_upstream *up, const char *host,
                        int port, int timeout_ms, int *fd, SSL **sslp, char *why, size_t cap)
{
    const char *w = NULL;
    struct eaddr *addrs = NULL;
    int n = 0, s = -1;
    int rc = resolve_checked(eg, up->host, up->port, up->check_address, &addrs, &n, &w);
    if (rc) {
        snprintf(why, cap, "the upstream proxy does not answer"); /* refused or not */
        return E_UNAVAIL;
    }
    for (int i = 0; i < n && s < 0; i++)
        s = connect_timeout((struct sockaddr *)&addrs[i].sa, addrs[i].len,
                            timeout_ms < EGRESS_CONNECT_MS ? timeout_ms : EGRESS_CONNECT_MS);
    xfree(addrs);
    if (s < 0) {
        snprintf(why, cap, "the upstream proxy does not answer");
        return E_UNAVAIL;
    }
    SSL *ssl = NULL;
    if (up->tls) {
        /* Blocking TLS: the socket's timeouts bound every step. */
        struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        ssl = tls_client_conn(eg->tls, s, up->host, up->ca_pem);
        int r = ssl ? tls_client_handshake(ssl, why, cap) : TLS_FAILED;
        if (r != TLS_OK) {
            if (!ssl)
                snprintf(why, cap, "cannot start TLS to the upstream proxy");
            else if (r == TLS_AGAIN)
                snprintf(why, cap, "the TLS handshake with the upstream proxy timed out");
            SSL_free(ssl);
            close(s);
            return E_UNAVAIL;
        }
    }
    size_t hl = 0, len = 0, rl = 0;
    char *head = upstream_head(up, host, port, &hl);
    int ok = hl && write_all(s, ssl, head, hl) == 0;
    wipe_free(head, hl);
    char *buf = xmalloc(EGRESS_HEAD_MAX);
    ok = ok && read_head(s, ssl, buf, EGRESS_HEAD_MAX, &len, &rl, timeout_ms) == 0;
    w = ok ? upstream_refusal(buf) : "the upstream proxy did not answer CONNECT";
    xfree(buf);
    if (w) {
        snprintf(why, cap, "%s", w);
        SSL_free(ssl);
        close(s);
        return E_UNAVAIL;
    }
    *fd = s;
    *sslp = ssl;
    return 0;
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
        egress_parse_authority(a, an, host, sizeof host, &port, https ? 443 : 80) != 0)
        return err_field(e, "url", "must be an http:// or https:// URL with a valid host");
    /* As a page's request through a proxy: a literal address the rule
     * refuses, or a localhost name, is not handed to the upstream. */
    uint8_t lit[16];
    int litfam = addrclass_literal(host, lit);
    size_t hn = strlen(host);
    if ((litfam && addrclass_of(litfam, lit) != ADDRCLASS_PUBLIC &&
         !egress_addr_allowed(eg, litfam, lit, port)) ||
        strcasecmp(host, "localhost") == 0 ||
        (hn > 10 && strcasecmp(host + hn - 10, ".localhost") == 0))
        return err_field(e, "url",
                         "must not name a loopback, link-local, private or reserved address "
                         "(this server does not send requests there)");
    int fd = -1;
    SSL *ssl = NULL;
    char why[200] = "";
    if (probe_tunnel(eg, up, host, port, timeout_ms, &fd, &ssl, why, sizeof why) != 0)
        return err_set(e, E_UNAVAIL, "proxy_unavailable", "%s", why);
    int rc = 0;
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
        if (n <= 0 || (size_t)n >= sizeof req || write_all(fd, ssl, req, (size_t)n) != 0 ||
            read_head(fd, ssl, buf, EGRESS_HEAD_MAX, &len, &hl, timeout_ms) != 0 ||
            sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
            rc = err_set(e, E_UNAVAIL, "proxy_unavailable",
                         "no HTTP answer from %s through the proxy", auth);
        xfree(buf);
    }
    SSL_free(ssl);
    close(fd);
    return rc;
}
