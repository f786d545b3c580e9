/* Unit tests for proxy/egress: the per-connection decision (Network rules 1-9
 * plus the proxies' bypass_hosts), bypass_hosts matching, the address classes
 * of the isolation boundary, core/secretbox, and the engine itself through
 * real loopback sockets (tunnels, byte counts, switching, plain HTTP,
 * refusals). Table-driven. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/secretbox.h"
#include "core/xalloc.h"
#include "domain/netcfg.h"
#include "proxy/egress.h"

/* ---- egress_decide ---- */

/* Bypass lists of the fake proxies: "pb" bypasses byp.example.com and
 * anything on port 8443; "top" bypasses *.skip.test. */
static int fake_bypass(void *ctx, const char *ref, const char *host, int port)
{
    (void)ctx;
    json_t *pat = NULL;
    if (strcmp(ref, "pb") == 0)
        pat = json_pack("[s,s]", "byp.example.com", "*:8443");
    else if (strcmp(ref, "top") == 0)
        pat = json_pack("[s]", "*.skip.test");
    int hit = egress_bypass_match(pat, host, port);
    json_decref(pat);
    return hit;
}

struct decide_case {
    const char *name;
    const char *network; /* JSON or NULL (omitted) */
    const char *top;     /* NULL = direct, else proxy ref */
    const char *host;
    int port;
    enum egress_kind kind;
    enum egress_reason reason;
    const char *proxy; /* expected ref for EGRESS_PROXY */
};

#define ROUTES                                                                                     \
    "{\"private_hosts\":[],\"proxy_routes\":["                                                     \
    "{\"hosts\":[\"*.example.com\"],\"proxy\":{\"id\":\"pw\"}},"                                   \
    "{\"hosts\":[\"api.example.com\",\"*.deep.example.com\"],\"proxy\":{\"id\":\"pe\"}},"          \
    "{\"hosts\":[\"byp.example.com\",\"b8.example.com\"],\"proxy\":{\"id\":\"pb\"}},"              \
    "{\"hosts\":[\"named.test\"],\"proxy\":{\"name\":\"by-name\"}}]}"

static const struct decide_case decide_cases[] = {
    {"rule 2: private_hosts omitted -> 10.0.0.0/8 goes direct by default", NULL, "top", "10.1.2.3",
     80, EGRESS_DIRECT, EGRESS_R_PRIVATE, NULL},
    {"rule 2: defaults include 172.16.0.0/12", "{}", "top", "172.16.5.5", 443, EGRESS_DIRECT,
     EGRESS_R_PRIVATE, NULL},
    {"rule 2: defaults include fc00::/7", NULL, "top", "[fd00::1]", 443, EGRESS_DIRECT,
     EGRESS_R_PRIVATE, NULL},
    {"rule 2: a public address uses the top-level proxy", NULL, "top", "8.8.8.8", 443, EGRESS_PROXY,
     EGRESS_R_TOP, "top"},
    {"rule 3: an empty list disables the defaults, so all traffic uses managed egress",
     "{\"private_hosts\":[]}", "top", "10.1.2.3", 80, EGRESS_PROXY, EGRESS_R_TOP, "top"},
    {"rule 3: an explicit list replaces the defaults with exactly its entries",
     "{\"private_hosts\":[\"192.168.0.0/16\"]}", "top", "10.1.2.3", 80, EGRESS_PROXY, EGRESS_R_TOP,
     "top"},
    {"rule 3: an explicit list's entries go direct", "{\"private_hosts\":[\"192.168.0.0/16\"]}",
     "top", "192.168.1.9", 80, EGRESS_DIRECT, EGRESS_R_PRIVATE, NULL},
    {"rule 4: IP/CIDR entries never match hostnames that resolve into the range", NULL, "top",
     "intranet.example", 80, EGRESS_PROXY, EGRESS_R_TOP, "top"},
    {"rule 4: hostname entries match the hostname", "{\"private_hosts\":[\"*.corp.test\"]}", "top",
     "wiki.corp.test", 443, EGRESS_DIRECT, EGRESS_R_PRIVATE, NULL},
    {"rule 7: a hostname entry with a port matches only that port",
     "{\"private_hosts\":[\"git.corp.test:22\"]}", "top", "git.corp.test", 443, EGRESS_PROXY,
     EGRESS_R_TOP, "top"},
    {"rule 7: ... and does match that port", "{\"private_hosts\":[\"git.corp.test:22\"]}", "top",
     "git.corp.test", 22, EGRESS_DIRECT, EGRESS_R_PRIVATE, NULL},
    {"rule 9: an exact hostname beats a wildcard", ROUTES, NULL, "api.example.com", 443,
     EGRESS_PROXY, EGRESS_R_ROUTE, "pe"},
    {"rule 9: a wildcard matches other subdomains", ROUTES, NULL, "www.example.com", 443,
     EGRESS_PROXY, EGRESS_R_ROUTE, "pw"},
    {"rule 9: a longer wildcard suffix beats a shorter one", ROUTES, NULL, "x.deep.example.com",
     443, EGRESS_PROXY, EGRESS_R_ROUTE, "pe"},
    {"rule 9: *.example.com matches subdomains only, not example.com", ROUTES, "top", "example.com",
     443, EGRESS_PROXY, EGRESS_R_TOP, "top"},
    {"rule 9: matched regardless of port", ROUTES, NULL, "api.example.com", 8080, EGRESS_PROXY,
     EGRESS_R_ROUTE, "pe"},
    {"rule 9: a route is used instead of the top-level proxy, including mode direct", ROUTES, NULL,
     "www.example.com", 80, EGRESS_PROXY, EGRESS_R_ROUTE, "pw"},
    {"rule 9: that proxy's own bypass_hosts still apply", ROUTES, "top", "byp.example.com", 443,
     EGRESS_DIRECT, EGRESS_R_ROUTE_BYPASS, NULL},
    {"rule 9: bypass_hosts with a port apply on that port only", ROUTES, "top", "b8.example.com",
     8443, EGRESS_DIRECT, EGRESS_R_ROUTE_BYPASS, NULL},
    {"rule 9: ... and not on another port", ROUTES, "top", "b8.example.com", 443, EGRESS_PROXY,
     EGRESS_R_ROUTE, "pb"},
    {"rule 9: a route target given by name is handed on as the name", ROUTES, NULL, "named.test",
     80, EGRESS_PROXY, EGRESS_R_ROUTE, "by-name"},
    {"rule 9: unmatched requests use the top-level proxy", ROUTES, "top", "other.test", 443,
     EGRESS_PROXY, EGRESS_R_TOP, "top"},
    {"rule 9: unmatched requests with mode direct go direct", ROUTES, NULL, "other.test", 443,
     EGRESS_DIRECT, EGRESS_R_TOP, NULL},
    {"rule 9: IP literals never match a route", ROUTES, "top", "93.184.216.34", 443, EGRESS_PROXY,
     EGRESS_R_TOP, "top"},
    {"the top-level proxy's bypass_hosts go direct", NULL, "top", "a.skip.test", 443, EGRESS_DIRECT,
     EGRESS_R_TOP_BYPASS, NULL},
    {"private_hosts win over routes",
     "{\"private_hosts\":[\"api.example.com\"],\"proxy_routes\":[{\"hosts\":[\"api.example.com\"],"
     "\"proxy\":{\"id\":\"pe\"}}]}",
     "top", "api.example.com", 443, EGRESS_DIRECT, EGRESS_R_PRIVATE, NULL},
    {"rule 8: private_hosts is unrelated to bypass_hosts (a bypassed name is not private)",
     "{\"private_hosts\":[]}", "top", "x.skip.test", 443, EGRESS_DIRECT, EGRESS_R_TOP_BYPASS, NULL},
    {"hostnames are matched case-insensitively with a trailing dot ignored", ROUTES, NULL,
     "API.Example.COM.", 443, EGRESS_PROXY, EGRESS_R_ROUTE, "pe"},
};

/* The same while the session is being created (routes not yet in effect). */
static const struct decide_case setup_cases[] = {
    {"rule 9: start_url and setup traffic use the top-level proxy", ROUTES, "top",
     "api.example.com", 443, EGRESS_PROXY, EGRESS_R_TOP, "top"},
    {"rule 9: setup traffic still honours private_hosts", "{\"private_hosts\":[\"*.corp.test\"]}",
     "top", "a.corp.test", 443, EGRESS_DIRECT, EGRESS_R_PRIVATE, NULL},
};

static void run_decide(const struct decide_case *cases, size_t n, int use_routes)
{
    for (size_t i = 0; i < n; i++) {
        const struct decide_case *c = &cases[i];
        json_t *v = c->network ? json_loads(c->network, 0, NULL) : NULL;
        if (c->network && !v)
            fail_msg("%s: bad JSON in the case", c->name);
        struct netcfg *nc = netcfg_compile(v);
        if (!nc)
            fail_msg("%s: network does not compile", c->name);
        struct egress_top top = {.kind = c->top ? EGRESS_PROXY : EGRESS_DIRECT};
        snprintf(top.proxy_ref, sizeof top.proxy_ref, "%s", c->top ? c->top : "");
        struct egress_decision d;
        egress_decide(nc, use_routes, &top, c->host, c->port, fake_bypass, NULL, &d);
        if (d.kind != c->kind || d.reason != c->reason)
            fail_msg("%s: got kind %d reason %d, expected kind %d reason %d", c->name, d.kind,
                     d.reason, c->kind, c->reason);
        if (c->proxy && strcmp(d.proxy_ref, c->proxy) != 0)
            fail_msg("%s: proxy %s, expected %s", c->name, d.proxy_ref, c->proxy);
        netcfg_free(nc);
        json_decref(v);
    }
}

static void decide_table(void **state)
{
    (void)state;
    run_decide(decide_cases, sizeof decide_cases / sizeof decide_cases[0], 1);
    run_decide(setup_cases, sizeof setup_cases / sizeof setup_cases[0], 0);
}

/* ---- bypass_hosts ---- */

struct bypass_case {
    const char *name, *pattern, *host;
    int port, match;
};

static const struct bypass_case bypass_cases[] = {
    {"exact hostname", "example.com", "example.com", 443, 1},
    {"exact hostname is not a subdomain match", "example.com", "www.example.com", 443, 0},
    {"*.suffix matches subdomains", "*.example.com", "a.b.example.com", 80, 1},
    {"*.suffix does not match the suffix itself", "*.example.com", "example.com", 80, 0},
    {".suffix means *.suffix", ".example.com", "www.example.com", 80, 1},
    {"case-insensitive, trailing dot ignored", "Example.COM", "example.com.", 80, 1},
    {"a port restricts the entry", "example.com:8080", "example.com", 80, 0},
    {"... to that port", "example.com:8080", "example.com", 8080, 1},
    {"* matches everything", "*", "anything.test", 1, 1},
    {"IPv4 literal", "10.1.2.3", "10.1.2.3", 80, 1},
    {"bracketed IPv6 literal with a port", "[::1]:8080", "[::1]", 8080, 1},
    {"IPv6 literals compare as addresses", "2001:db8::1", "[2001:db8:0::1]", 443, 1},
    {"no partial-label suffix match", "*.example.com", "badexample.com", 80, 0},
};

static void bypass_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bypass_cases / sizeof bypass_cases[0]; i++) {
        const struct bypass_case *c = &bypass_cases[i];
        json_t *p = json_pack("[s]", c->pattern);
        int got = egress_bypass_match(p, c->host, c->port);
        json_decref(p);
        if (got != c->match)
            fail_msg("%s: %s vs %s:%d gave %d", c->name, c->pattern, c->host, c->port, got);
        if (egress_bypass_valid(c->pattern) != 0)
            fail_msg("%s: pattern %s reported invalid", c->name, c->pattern);
    }
    static const char *const invalid[] = {"",   "a b",  "host:0", "host:99999",
                                          "*.", "x*.y", "[::1",   NULL};
    for (size_t i = 0; invalid[i]; i++)
        if (egress_bypass_valid(invalid[i]) == 0)
            fail_msg("bypass_hosts entry \"%s\" should be invalid", invalid[i]);
}

/* ---- request heads ---- */

struct head_case {
    const char *name, *head;
    int ok, is_connect;
    const char *host;
    int port;
    const char *path;
};

static const struct head_case head_cases[] = {
    {"CONNECT host:port", "CONNECT example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n", 1, 1,
     "example.com", 443, NULL},
    {"CONNECT to a bracketed IPv6 literal", "CONNECT [::1]:8080 HTTP/1.1\r\n\r\n", 1, 1, "::1",
     8080, NULL},
    {"absolute-form http:// with a port and path", "GET http://a.test:8080/x?y=1 HTTP/1.1\r\n\r\n",
     1, 0, "a.test", 8080, "/x?y=1"},
    {"absolute-form without a port defaults to 80", "POST http://a.test HTTP/1.1\r\n\r\n", 1, 0,
     "a.test", 80, "/"},
    {"a query without a path gets /", "GET http://a.test?q HTTP/1.0\r\n\r\n", 1, 0, "a.test", 80,
     "/?q"},
    {"the fragment is dropped", "GET http://a.test/p#frag HTTP/1.1\r\n\r\n", 1, 0, "a.test", 80,
     "/p"},
    {"CONNECT needs a port", "CONNECT example.com HTTP/1.1\r\n\r\n", 0, 0, NULL, 0, NULL},
    {"port 0 is refused", "CONNECT example.com:0 HTTP/1.1\r\n\r\n", 0, 0, NULL, 0, NULL},
    {"port above 65535 is refused", "CONNECT example.com:65536 HTTP/1.1\r\n\r\n", 0, 0, NULL, 0,
     NULL},
    {"https:// in absolute form is refused (CONNECT only)", "GET https://a.test/ HTTP/1.1\r\n\r\n",
     0, 0, NULL, 0, NULL},
    {"origin-form is not a proxy request", "GET / HTTP/1.1\r\n\r\n", 0, 0, NULL, 0, NULL},
    {"userinfo is refused", "GET http://u:p@a.test/ HTTP/1.1\r\n\r\n", 0, 0, NULL, 0, NULL},
    {"a bad host character is refused", "CONNECT a/b:443 HTTP/1.1\r\n\r\n", 0, 0, NULL, 0, NULL},
    {"HTTP/2 request lines are refused", "CONNECT a.test:443 HTTP/2.0\r\n\r\n", 0, 0, NULL, 0,
     NULL},
    {"the request line must end before the headers", "CONNECT a.test:443\r\nX: HTTP/1.1\r\n\r\n", 0,
     0, NULL, 0, NULL},
    {"lower-case methods are refused", "connect a.test:443 HTTP/1.1\r\n\r\n", 0, 0, NULL, 0, NULL},
};

static void head_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof head_cases / sizeof head_cases[0]; i++) {
        const struct head_case *c = &head_cases[i];
        struct egress_request r;
        int rc = egress_parse_request(c->head, strlen(c->head), &r);
        if ((rc == 0) != c->ok)
            fail_msg("%s: rc %d", c->name, rc);
        if (!c->ok)
            continue;
        if (r.is_connect != c->is_connect || strcmp(r.host, c->host) != 0 || r.port != c->port)
            fail_msg("%s: got connect=%d host=%s port=%d", c->name, r.is_connect, r.host, r.port);
        if (c->path && strcmp(r.path, c->path) != 0)
            fail_msg("%s: path %s, expected %s", c->name, r.path, c->path);
    }
}

/* ---- secretbox ---- */

static void secretbox_roundtrip(void **state)
{
    (void)state;
    unsigned char key[SECRETBOX_KEY_LEN], other[SECRETBOX_KEY_LEN];
    memset(key, 7, sizeof key);
    memset(other, 8, sizeof other);
    static const char *const secrets[] = {"", "p", "pässwörd with spaces", NULL};
    for (size_t i = 0; secrets[i]; i++) {
        struct err e;
        err_init(&e);
        char *sealed = NULL, *plain = NULL, *again = NULL;
        assert_int_equal(secretbox_seal(key, secrets[i], &sealed, &e), 0);
        assert_null(strstr(sealed, secrets[i][0] ? secrets[i] : "\x01"));
        assert_int_equal(secretbox_seal(key, secrets[i], &again, &e), 0);
        if (strcmp(sealed, again) == 0)
            fail_msg("a fresh nonce per seal: two seals of \"%s\" are equal", secrets[i]);
        assert_int_equal(secretbox_open(key, sealed, &plain, &e), 0);
        assert_string_equal(plain, secrets[i]);
        secretbox_wipe(plain);
        plain = NULL;
        if (secretbox_open(other, sealed, &plain, &e) != E_INVALID)
            fail_msg("another key must not open \"%s\"", secrets[i]);
        size_t n = strlen(sealed);
        sealed[n - 1] = sealed[n - 1] == '0' ? '1' : '0';
        if (secretbox_open(key, sealed, &plain, &e) != E_INVALID)
            fail_msg("a tampered value must not open");
        xfree(sealed);
        xfree(again);
    }
    struct err e;
    err_init(&e);
    char *plain = NULL;
    assert_int_equal(secretbox_open(key, "garbage", &plain, &e), E_INVALID);
    assert_int_equal(secretbox_open(key, "v1:zz", &plain, &e), E_INVALID);
}

/* ---- engine: listener, CONNECT, isolation, switch (loopback only) ---- */

static void engine_refuses_loopback(void **state)
{
    (void)state;
    struct egress_config cfg = {.allow_loopback = ""};
    struct egress *eg = NULL;
    struct err e;
    err_init(&e);
    assert_int_equal(egress_start(&cfg, &eg, &e), 0);
    struct egress_top top = {.kind = EGRESS_DIRECT};
    int port = 0;
    assert_int_equal(egress_open(eg, "s1", "o", "p", NULL, &top, 0, 0, &port, &e), 0);
    assert_true(port > 0);
    assert_int_equal(egress_open(eg, "s1", "o", "p", NULL, &top, 0, 0, &port, &e), E_CONFLICT);
    /* a proxy whose address is loopback is refused like a page's destination */
    struct egress_upstream up = {.port = port, .check_address = 1};
    snprintf(up.host, sizeof up.host, "127.0.0.1");
    err_init(&e);
    assert_int_equal(egress_probe(eg, &up, "http://example.com/", 2000, &e), E_UNAVAIL);
    assert_int_equal(egress_set_top(eg, "s1", &top), 0);
    assert_int_equal(egress_set_top(eg, "nope", &top), E_NOTFOUND);
    uint64_t sent, recv;
    assert_int_equal(egress_bytes(eg, "s1", &sent, &recv), 0);
    egress_close(eg, "s1");
    assert_int_equal(egress_bytes(eg, "s1", &sent, &recv), E_NOTFOUND);
    egress_stop(eg);
    err_init(&e);
    struct egress_config bad = {.allow_loopback = "nohostport"};
    assert_int_equal(egress_start(&bad, &eg, &e), E_INVALID);
    err_init(&e);
    struct egress_config badlan = {.allow_private = "10.0.0.1/8"};
    assert_int_equal(egress_start(&badlan, &eg, &e), E_INVALID);
}

/* Issue 29.6: LAN-side addresses are refused unless --allow-private names
 * them; host-side ones stay closed whatever the ranges say. */
static void engine_allow_private(void **state)
{
    (void)state;
    static const uint8_t lan[4] = {10, 9, 8, 7}, other[4] = {192, 168, 1, 1},
                         cgnat[4] = {100, 64, 0, 9}, meta[4] = {169, 254, 169, 254};
    struct err e;
    err_init(&e);
    struct egress *eg = NULL;
    struct egress_config dflt = {.allow_loopback = ""};
    assert_int_equal(egress_start(&dflt, &eg, &e), 0);
    assert_int_equal(egress_addr_allowed(eg, 4, lan, 80), 0);
    assert_int_equal(egress_addr_allowed(eg, 4, cgnat, 80), 0);
    egress_stop(eg);
    struct egress_config cfg = {.allow_private = "10.9.0.0/16, 100.64.0.0/10, 169.254.0.0/16"};
    assert_int_equal(egress_start(&cfg, &eg, &e), 0);
    assert_int_equal(egress_addr_allowed(eg, 4, lan, 80), 1);
    assert_int_equal(egress_addr_allowed(eg, 4, cgnat, 443), 1);
    assert_int_equal(egress_addr_allowed(eg, 4, other, 80), 0);
    assert_int_equal(egress_addr_allowed(eg, 4, meta, 80), 0);
    egress_stop(eg);
}

/* ---- engine: tunnels through a session listener to servers of the test ----
 *
 * Each case gets a fresh rig: an epoll echo server (one thread whatever the
 * number of connections, so the thread count measures the egress), a
 * one-connection-at-a-time HTTP server that records the request it got, a
 * listening port that is NOT in --allow-loopback, and an egress with one
 * session listener (top-level selection: direct). Every read and write polls
 * with a timeout, so a broken engine fails a case instead of hanging it. */

#define IO_MS        5000 /* one connect, read or write */
#define SETTLE_MS    2000 /* for counters and closes to settle after the fact */
#define TUNNELS      1000
#define THREADS_MAX  16 /* the engine runs a handful of worker threads */
#define WEB_HEAD_MAX (64 * 1024)
#define RIG_SESSION  "s1"

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* 1 when fd has one of events within ms, else 0 (timeout or error). */
static int wait_fd(int fd, short events, int ms)
{
    int64_t end = mono_ms() + ms;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int left = (int)(end - mono_ms());
        int rc = poll(&p, 1, left > 0 ? left : 0);
        if (rc > 0)
            return 1;
        if (rc == 0 || errno != EINTR)
            return 0;
    }
}

/* A non-blocking listening socket on 127.0.0.1 with an ephemeral port. */
static int listen_loopback(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, SOMAXCONN) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

/* A non-blocking socket connected to 127.0.0.1:port, or -1. */
static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                             .sin_port = htons((uint16_t)port)};
    int err = 0;
    socklen_t el = sizeof err;
    if ((connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS) ||
        !wait_fd(fd, POLLOUT, IO_MS) || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 ||
        err != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Writes all n bytes (fd blocking or not); 0 or -1. */
static int send_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            if (!wait_fd(fd, POLLOUT, IO_MS))
                return -1;
            continue;
        }
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads what arrives within IO_MS: > 0 bytes, 0 at EOF, -1 on an error
 * (a reset included) or a timeout. */
static ssize_t recv_wait(int fd, void *buf, size_t cap)
{
    for (;;) {
        if (!wait_fd(fd, POLLIN, IO_MS))
            return -1;
        ssize_t r = recv(fd, buf, cap, 0);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            continue;
        return r < 0 ? -1 : r;
    }
}

static int recv_exact(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n) {
        ssize_t r = recv_wait(fd, p, n);
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Reads until buf (NUL-terminated) holds a head ending in CRLFCRLF. Returns
 * the bytes read (bytes after the head included), -1 on EOF, error, timeout
 * or a head longer than cap - 1. */
static ssize_t recv_head(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    while (!strstr(buf, "\r\n\r\n")) {
        if (len + 1 >= cap)
            return -1;
        ssize_t r = recv_wait(fd, buf + len, cap - 1 - len);
        if (r <= 0)
            return -1;
        len += (size_t)r;
        buf[len] = '\0';
    }
    return (ssize_t)len;
}

/* Reads until EOF, keeping the first cap - 1 bytes (NUL-terminated) and
 * counting all of them in *total. 0, or -1 on an error or timeout. */
static int recv_to_eof(int fd, char *buf, size_t cap, size_t *total)
{
    char chunk[16384];
    *total = 0;
    buf[0] = '\0';
    for (;;) {
        ssize_t r = recv_wait(fd, chunk, sizeof chunk);
        if (r < 0)
            return -1;
        if (r == 0)
            return 0;
        if (*total + 1 < cap) {
            size_t k = cap - 1 - *total < (size_t)r ? cap - 1 - *total : (size_t)r;
            memcpy(buf + *total, chunk, k);
            buf[*total + k] = '\0';
        }
        *total += (size_t)r;
    }
}

/* Does the head carry the header line "name: value" (case-insensitive)? */
static int has_line(const char *head, const char *line)
{
    char want[256];
    snprintf(want, sizeof want, "\r\n%s\r\n", line);
    return strcasestr(head, want) != NULL;
}

/* Entries of a /proc/self folder: "fd" (open descriptors, the one reading
 * included) or "task" (threads). -1 when it cannot be read. */
static int count_self(const char *what)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/%s", what);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *de; (de = readdir(d));)
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* ---- echo server: epoll, one thread, writes back what it reads ---- */

struct echo {
    int lfd, port, epfd, wake[2];
    pthread_t thr;
    int running;
    int *conns; /* open connections, owned by the thread while it runs */
    size_t nconns, cap;
    int live; /* open connections (__atomic) */
};

static void echo_drop(struct echo *s, int fd)
{
    epoll_ctl(s->epfd, EPOLL_CTL_DEL, fd, NULL);
    close(fd);
    for (size_t i = 0; i < s->nconns; i++)
        if (s->conns[i] == fd) {
            s->conns[i] = s->conns[--s->nconns];
            break;
        }
    __atomic_sub_fetch(&s->live, 1, __ATOMIC_RELAXED);
}

static void echo_accept(struct echo *s)
{
    for (;;) {
        int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            close(fd);
            continue;
        }
        if (s->nconns == s->cap) {
            s->cap = s->cap ? 2 * s->cap : 256;
            s->conns = xrealloc(s->conns, s->cap * sizeof *s->conns);
        }
        s->conns[s->nconns++] = fd;
        __atomic_add_fetch(&s->live, 1, __ATOMIC_RELAXED);
    }
}

/* The payloads are small, so a write back is done at once (a full socket
 * buffer makes send_all wait, up to IO_MS, on this one thread). */
static void *echo_main(void *arg)
{
    struct echo *s = arg;
    char buf[16384];
    struct epoll_event ev[64];
    for (;;) {
        int n = epoll_wait(s->epfd, ev, 64, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return NULL;
        for (int i = 0; i < n; i++) {
            int fd = ev[i].data.fd;
            if (fd == s->wake[0])
                return NULL;
            if (fd == s->lfd) {
                echo_accept(s);
                continue;
            }
            ssize_t r = recv(fd, buf, sizeof buf, 0);
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
                continue;
            if (r <= 0 || send_all(fd, buf, (size_t)r) != 0)
                echo_drop(s, fd);
        }
    }
}

static void close_fd(int fd)
{
    if (fd >= 0)
        close(fd);
}

/* 0, or -1 with what was made left for echo_stop. */
static int echo_start(struct echo *s)
{
    memset(s, 0, sizeof *s);
    s->wake[0] = s->wake[1] = -1;
    s->lfd = listen_loopback(&s->port);
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (s->lfd < 0 || s->epfd < 0 || pipe2(s->wake, O_CLOEXEC) != 0)
        return -1;
    struct epoll_event l = {.events = EPOLLIN, .data.fd = s->lfd};
    struct epoll_event w = {.events = EPOLLIN, .data.fd = s->wake[0]};
    if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &l) != 0 ||
        epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->wake[0], &w) != 0)
        return -1;
    s->running = pthread_create(&s->thr, NULL, echo_main, s) == 0;
    return s->running ? 0 : -1;
}

static void echo_stop(struct echo *s)
{
    if (s->running && write(s->wake[1], "x", 1) == 1)
        pthread_join(s->thr, NULL);
    for (size_t i = 0; i < s->nconns; i++)
        close(s->conns[i]);
    xfree(s->conns);
    close_fd(s->lfd);
    close_fd(s->epfd);
    close_fd(s->wake[0]);
    close_fd(s->wake[1]);
}

/* Sends 16 bytes naming tunnel i and expects them back. 0 or -1. */
static int echo_check(int fd, int i)
{
    char out[17], in[16];
    snprintf(out, sizeof out, "tunnel %09d", i);
    if (send_all(fd, out, 16) != 0 || recv_exact(fd, in, sizeof in) != 0)
        return -1;
    return memcmp(out, in, 16) == 0 ? 0 : -1;
}

/* ---- HTTP server: one connection at a time, records the last request ----
 *
 * "GET /bytes/N" is answered with N body bytes, anything else with "ok"; the
 * connection is closed after each answer. */

struct web {
    int lfd, port, wake[2];
    pthread_t thr;
    int running;
    pthread_mutex_t mu;
    char head[WEB_HEAD_MAX]; /* the last request head, NUL-terminated */
    size_t got, sent;        /* bytes of the last request read, of its answer sent */
};

/* Body byte pos of a "GET /bytes/N" answer: a period (251) that no buffer
 * or page size divides, so a lost, doubled or reordered chunk shows. */
static char pattern_at(size_t pos)
{
    return (char)(pos % 251);
}

static void web_answer(struct web *w, int fd, char *buf)
{
    ssize_t got = recv_head(fd, buf, WEB_HEAD_MAX);
    if (got < 0)
        return;
    size_t body = 2;
    if (strncmp(buf, "GET /bytes/", 11) == 0)
        body = strtoul(buf + 11, NULL, 10);
    char top[160];
    int tn = snprintf(top, sizeof top,
                      "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", body);
    int ok = tn > 0 && (size_t)tn < sizeof top && send_all(fd, top, (size_t)tn) == 0;
    char fill[4096] = {'o', 'k'};
    int bytes = strncmp(buf, "GET /bytes/", 11) == 0;
    for (size_t pos = 0; ok && pos < body;) {
        size_t k = body - pos < sizeof fill ? body - pos : sizeof fill;
        for (size_t i = 0; bytes && i < k; i++)
            fill[i] = pattern_at(pos + i);
        ok = send_all(fd, fill, k) == 0;
        pos += k;
    }
    pthread_mutex_lock(&w->mu);
    memcpy(w->head, buf, (size_t)got + 1);
    w->got = (size_t)got;
    w->sent = ok ? (size_t)tn + body : 0;
    pthread_mutex_unlock(&w->mu);
}

static void *web_main(void *arg)
{
    struct web *w = arg;
    char *buf = xmalloc(WEB_HEAD_MAX);
    for (;;) {
        struct pollfd p[2] = {{.fd = w->lfd, .events = POLLIN},
                              {.fd = w->wake[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[1].revents)
            break;
        int fd = p[0].revents ? accept4(w->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC) : -1;
        if (fd < 0)
            continue;
        web_answer(w, fd, buf);
        close(fd);
    }
    xfree(buf);
    return NULL;
}

/* 0, or -1 with what was made left for web_stop. */
static int web_start(struct web *w)
{
    memset(w, 0, sizeof *w);
    w->wake[0] = w->wake[1] = -1;
    pthread_mutex_init(&w->mu, NULL);
    w->lfd = listen_loopback(&w->port);
    if (w->lfd < 0 || pipe2(w->wake, O_CLOEXEC) != 0)
        return -1;
    w->running = pthread_create(&w->thr, NULL, web_main, w) == 0;
    return w->running ? 0 : -1;
}

static void web_stop(struct web *w)
{
    if (w->running && write(w->wake[1], "x", 1) == 1)
        pthread_join(w->thr, NULL);
    close_fd(w->lfd);
    close_fd(w->wake[0]);
    close_fd(w->wake[1]);
    pthread_mutex_destroy(&w->mu);
}

/* ---- the rig ---- */

struct rig;
struct engine_case {
    const char *name; /* the rule the case checks */
    void (*run)(struct rig *r);
};

struct rig {
    const struct engine_case *c;
    struct echo echo;
    struct web web;
    int unlisted_fd, unlisted_port; /* listening, but not in --allow-loopback */
    struct egress *eg;
    int eport; /* the session's listener */
    int *fds;  /* client sockets of the case, closed by the teardown (-1: closed) */
    size_t nfds, capfds;
    char resolved[128]; /* "org/project/ref" of the last lookup of RIG_PROXY (web.mu) */
};

/* The rig's one known proxy: the HTTP server, which records the CONNECT it
 * gets. Any other ref is a proxy that does not exist (connections fail
 * closed). */
#define RIG_PROXY "webproxy"

static int rig_resolve(void *ctx, const char *org_id, const char *project_id, const char *ref,
                       struct egress_upstream *out)
{
    struct rig *r = ctx;
    memset(out, 0, sizeof *out);
    if (strcmp(ref, RIG_PROXY) != 0)
        return E_NOTFOUND;
    pthread_mutex_lock(&r->web.mu);
    snprintf(r->resolved, sizeof r->resolved, "%s/%s/%s", org_id, project_id, ref);
    pthread_mutex_unlock(&r->web.mu);
    snprintf(out->host, sizeof out->host, "127.0.0.1");
    out->port = r->web.port;
    out->check_address = 1;
    return 0;
}

static int rig_keep(struct rig *r, int fd)
{
    if (fd < 0)
        return fd;
    if (r->nfds == r->capfds) {
        r->capfds = r->capfds ? 2 * r->capfds : 64;
        r->fds = xrealloc(r->fds, r->capfds * sizeof *r->fds);
    }
    r->fds[r->nfds++] = fd;
    return fd;
}

static void rig_close(struct rig *r, int fd)
{
    for (size_t i = 0; i < r->nfds; i++)
        if (r->fds[i] == fd)
            r->fds[i] = -1;
    close(fd);
}

/* Sends "CONNECT 127.0.0.1:port" on a new connection to the session's
 * listener and reads the answer head into head. The socket (kept by the rig)
 * or -1. */
static int rig_connect(struct rig *r, int port, char *head, size_t cap)
{
    head[0] = '\0';
    int fd = rig_keep(r, dial(r->eport));
    char req[160];
    int n = snprintf(req, sizeof req, "CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n",
                     port, port);
    if (fd < 0 || send_all(fd, req, (size_t)n) != 0 || recv_head(fd, head, cap) < 0)
        return -1;
    return fd;
}

/* Like rig_connect, to host:port (a name goes through a lookup thread). */
static int rig_connect_host(struct rig *r, const char *host, int port, char *head, size_t cap)
{
    head[0] = '\0';
    int fd = rig_keep(r, dial(r->eport));
    char req[300];
    int n = snprintf(req, sizeof req, "CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n", host, port,
                     host, port);
    if (fd < 0 || send_all(fd, req, (size_t)n) != 0 || recv_head(fd, head, cap) < 0)
        return -1;
    return fd;
}

/* A tunnel to 127.0.0.1:port (answered 200), or -1. */
static int rig_tunnel(struct rig *r, int port)
{
    char head[1024];
    int fd = rig_connect(r, port, head, sizeof head);
    return fd >= 0 && strncmp(head, "HTTP/1.1 200", 12) == 0 ? fd : -1;
}

static int rig_down(void **state)
{
    struct rig *r = *state;
    for (size_t i = 0; i < r->nfds; i++)
        close_fd(r->fds[i]);
    xfree(r->fds);
    egress_stop(r->eg);
    echo_stop(&r->echo);
    web_stop(&r->web);
    close_fd(r->unlisted_fd);
    xfree(r);
    return 0;
}

/* *state is the case on entry, the rig on return (torn down again when
 * something cannot be set up). */
static int rig_up(void **state)
{
    struct rig *r = xcalloc(1, sizeof *r);
    r->c = *state;
    *state = r;
    int bad = echo_start(&r->echo) != 0;
    bad |= web_start(&r->web) != 0;
    r->unlisted_fd = listen_loopback(&r->unlisted_port);
    char allow[64];
    snprintf(allow, sizeof allow, "127.0.0.1:%d,127.0.0.1:%d", r->echo.port, r->web.port);
    /* Names under rekey.test are the test's loopback servers. */
    struct egress_config cfg = {.allow_loopback = allow,
                                .host_rules = "MAP *.rekey.test 127.0.0.1",
                                .resolve = rig_resolve,
                                .ctx = r};
    struct egress_top top = {.kind = EGRESS_DIRECT};
    struct err e;
    err_init(&e);
    if (bad || r->unlisted_fd < 0 || egress_start(&cfg, &r->eg, &e) != 0 ||
        egress_open(r->eg, RIG_SESSION, "o", "p", NULL, &top, 0, 0, &r->eport, &e) != 0) {
        print_error("%s: cannot set up the rig: %s\n", r->c->name, e.message);
        rig_down(state);
        return -1;
    }
    return 0;
}

/* ---- engine cases ---- */

static void run_many_tunnels(struct rig *r)
{
    raise_nofile();
    for (int i = 0; i < TUNNELS; i++) {
        int fd = rig_tunnel(r, r->echo.port);
        if (fd < 0 || echo_check(fd, i) != 0)
            fail_msg("%s: tunnel %d of %d did not open or echo", r->c->name, i + 1, TUNNELS);
    }
    int threads = count_self("task");
    if (threads < 0 || threads >= THREADS_MAX)
        fail_msg("%s: %d threads in the process with %d tunnels open (expected fewer than %d)",
                 r->c->name, threads, TUNNELS, THREADS_MAX);
    for (size_t i = 0; i < r->nfds; i++)
        if (echo_check(r->fds[i], (int)i) != 0)
            fail_msg("%s: tunnel %zu stopped echoing once all were open", r->c->name, i + 1);
}

static void run_counts_bytes(struct rig *r)
{
    enum { BODY = 200000, PAD = 30000 };
    int fd = rig_tunnel(r, r->web.port);
    if (fd < 0)
        fail_msg("%s: the tunnel did not open", r->c->name);
    char *req = xmalloc(PAD + 256);
    int n = snprintf(req, PAD + 256, "GET /bytes/%d HTTP/1.1\r\nHost: t\r\nX-Pad: %0*d\r\n\r\n",
                     BODY, PAD, 0);
    char first[64];
    size_t down = 0;
    int ok = send_all(fd, req, (size_t)n) == 0 && recv_to_eof(fd, first, sizeof first, &down) == 0;
    xfree(req);
    rig_close(r, fd);
    if (!ok)
        fail_msg("%s: the exchange through the tunnel failed", r->c->name);
    pthread_mutex_lock(&r->web.mu);
    size_t got = r->web.got, sent = r->web.sent;
    pthread_mutex_unlock(&r->web.mu);
    if (got != (size_t)n || sent != down)
        fail_msg("%s: the server read %zu of %d bytes and sent %zu, the client got %zu", r->c->name,
                 got, n, sent, down);
    uint64_t up = 0, back = 0;
    for (int64_t end = mono_ms() + SETTLE_MS; mono_ms() < end; poll(NULL, 0, 20)) {
        assert_int_equal(egress_bytes(r->eg, RIG_SESSION, &up, &back), 0);
        if (up == (uint64_t)n && back == down)
            break;
    }
    if (up != (uint64_t)n || back != down)
        fail_msg("%s: egress_bytes reports sent %llu received %llu, expected %d and %zu",
                 r->c->name, (unsigned long long)up, (unsigned long long)back, n, down);
}

/* Past the default 64 KiB pipe, a direction's pipe is grown (EGRESS_PIPE_BULK);
 * every byte must still arrive once and in order. */
static void run_bulk_in_order(struct rig *r)
{
    enum { BODY = 48 << 20 };
    int fd = rig_tunnel(r, r->web.port);
    if (fd < 0)
        fail_msg("%s: the tunnel did not open", r->c->name);
    char req[64];
    int n = snprintf(req, sizeof req, "GET /bytes/%d HTTP/1.1\r\nHost: t\r\n\r\n", BODY);
    char *chunk = xmalloc(1 << 16);
    size_t total = 0, body = 0, bad = (size_t)-1;
    char head[256];
    size_t hlen = 0;
    int ok = send_all(fd, req, (size_t)n) == 0, in_body = 0;
    for (ssize_t got; ok && (got = recv_wait(fd, chunk, 1 << 16)) != 0;) {
        if (got < 0) {
            ok = 0;
            break;
        }
        total += (size_t)got;
        for (ssize_t i = 0; i < got; i++) {
            if (!in_body) {
                if (hlen + 1 < sizeof head)
                    head[hlen++] = chunk[i];
                head[hlen] = '\0';
                in_body = hlen >= 4 && memcmp(head + hlen - 4, "\r\n\r\n", 4) == 0;
                continue;
            }
            if (chunk[i] != pattern_at(body) && bad == (size_t)-1)
                bad = body;
            body++;
        }
    }
    xfree(chunk);
    rig_close(r, fd);
    if (!ok)
        fail_msg("%s: the transfer through the tunnel failed after %zu bytes", r->c->name, total);
    if (body != (size_t)BODY || bad != (size_t)-1)
        fail_msg("%s: %zu of %d body bytes arrived; first wrong byte at %zd", r->c->name, body,
                 BODY, bad == (size_t)-1 ? (ssize_t)-1 : (ssize_t)bad);
}

/* Tunnels planned on the worker (a literal address), on a lookup thread (a
 * name), and refused: once all are closed, the process holds as many
 * descriptors as before. */
static void run_no_fd_left(struct rig *r)
{
    enum { ROUNDS = 40 };
    char head[1024];
    int fd = rig_tunnel(r, r->echo.port); /* the engine's pipes and threads exist now */
    if (fd < 0 || echo_check(fd, 0) != 0)
        fail_msg("%s: the first tunnel did not echo", r->c->name);
    rig_close(r, fd);
    poll(NULL, 0, 100);
    int before = count_self("fd");
    for (int i = 0; i < ROUNDS; i++) {
        static const char *const hosts[] = {"127.0.0.1", "localhost"};
        fd = rig_connect_host(r, hosts[i % 2], r->echo.port, head, sizeof head);
        if (fd < 0 || strncmp(head, "HTTP/1.1 200", 12) != 0 || echo_check(fd, i) != 0)
            fail_msg("%s: tunnel %d to %s did not echo (%.40s)", r->c->name, i + 1, hosts[i % 2],
                     head);
        rig_close(r, fd);
        fd = rig_connect_host(r, i % 2 ? "localhost" : "127.0.0.1", r->unlisted_port, head,
                              sizeof head);
        if (fd < 0 || strncmp(head, "HTTP/1.1 403", 12) != 0)
            fail_msg("%s: an unlisted port was not refused (%.40s)", r->c->name, head);
        rig_close(r, fd);
    }
    int after = -1;
    for (int64_t end = mono_ms() + SETTLE_MS; mono_ms() < end; poll(NULL, 0, 20))
        if ((after = count_self("fd")) <= before)
            break;
    if (after != before)
        fail_msg("%s: %d descriptors open before %d tunnels, %d after they closed", r->c->name,
                 before, 2 * ROUNDS, after);
}

/* A browser being started holds duplicates of every descriptor between fork
 * and exec. A tunnel that ends then must not stay registered in the epoll
 * (closing alone would leave it there): later events would name the freed
 * connection. AddressSanitizer reports that use after free. */
static void run_closed_while_forked(struct rig *r)
{
    int fd = rig_tunnel(r, r->echo.port);
    if (fd < 0 || echo_check(fd, 0) != 0)
        fail_msg("%s: the tunnel did not echo", r->c->name);
    pid_t pid = fork();
    if (pid == 0) {
        /* The child: drop the client's socket, wait until the engine has
         * ended the tunnel, then write through the engine's own socket to the
         * echo server, whose answer makes that socket readable again. */
        close(fd);
        poll(NULL, 0, 300);
        for (int k = 3; k < 4096; k++) {
            struct sockaddr_in sa;
            socklen_t sl = sizeof sa;
            if (getpeername(k, (struct sockaddr *)&sa, &sl) == 0 && sa.sin_family == AF_INET &&
                ntohs(sa.sin_port) == r->echo.port)
                (void)send(k, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        poll(NULL, 0, 700);
        _exit(0);
    }
    if (pid < 0)
        fail_msg("%s: fork: %s", r->c->name, strerror(errno));
    struct linger hard = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    rig_close(r, fd); /* a reset: the engine ends the tunnel without a half-close */
    int status = 0;
    waitpid(pid, &status, 0);
    fd = rig_tunnel(r, r->echo.port);
    if (fd < 0 || echo_check(fd, 1) != 0)
        fail_msg("%s: the engine stopped working after the child exited", r->c->name);
}

static void run_set_top_closes(struct rig *r)
{
    int fd = rig_tunnel(r, r->echo.port);
    if (fd < 0 || echo_check(fd, 0) != 0)
        fail_msg("%s: the tunnel did not open or echo", r->c->name);
    struct egress_top proxy = {.kind = EGRESS_PROXY};
    snprintf(proxy.proxy_ref, sizeof proxy.proxy_ref, "x");
    assert_int_equal(egress_set_top(r->eg, RIG_SESSION, &proxy), 0);
    char c;
    if (!wait_fd(fd, POLLIN, SETTLE_MS) || recv(fd, &c, 1, 0) > 0)
        fail_msg("%s: the tunnel was not closed within %d ms", r->c->name, SETTLE_MS);
    int64_t end = mono_ms() + SETTLE_MS;
    while (__atomic_load_n(&r->echo.live, __ATOMIC_RELAXED) > 0 && mono_ms() < end)
        poll(NULL, 0, 20);
    if (__atomic_load_n(&r->echo.live, __ATOMIC_RELAXED) > 0)
        fail_msg("%s: the destination side stayed open", r->c->name);
    /* The new selection is a proxy no resolve hook knows: fail closed. */
    char head[1024];
    if (rig_connect(r, r->echo.port, head, sizeof head) < 0 ||
        strncmp(head, "HTTP/1.1 502", 12) != 0)
        fail_msg("%s: a new CONNECT through the unavailable proxy got \"%.40s\", expected 502",
                 r->c->name, head);
}

/* Tunnels opened and closed by a thread of their own while the main thread
 * rekeys: the decisions on workers and lookup threads read the session's
 * rules, org and project as the rekey replaces them (ThreadSanitizer sees
 * any read made without the lock). */
struct churn {
    struct rig *r;
    int stop;   /* __atomic */
    int rounds; /* __atomic */
};

static void *churn_main(void *arg)
{
    struct churn *ch = arg;
    static const char *const hosts[] = {"echo.rekey.test", "127.0.0.1"};
    for (int i = 0; !__atomic_load_n(&ch->stop, __ATOMIC_RELAXED) && i < 10000; i++) {
        int fd = dial(ch->r->eport);
        char req[200], head[1024];
        int n = snprintf(req, sizeof req, "CONNECT %s:%d HTTP/1.1\r\n\r\n", hosts[i % 2],
                         ch->r->echo.port);
        if (fd >= 0 && send_all(fd, req, (size_t)n) == 0)
            (void)recv_head(fd, head, sizeof head);
        if (fd >= 0)
            close(fd);
        __atomic_store_n(&ch->rounds, i + 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* A spare's listener is handed to its owner (egress_rekey): the owner's
 * private_hosts, routes (looked up for the owner's org and project) and
 * top-level selection decide from then on, and what the listener carried
 * before is closed. */
static void run_rekey(struct rig *r)
{
    int old = rig_tunnel(r, r->echo.port);
    if (old < 0 || echo_check(old, 0) != 0)
        fail_msg("%s: before the rekey, a direct tunnel did not echo", r->c->name);
    struct churn ch = {.r = r};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, churn_main, &ch), 0);
    for (int64_t end = mono_ms() + IO_MS;
         __atomic_load_n(&ch.rounds, __ATOMIC_RELAXED) < 20 && mono_ms() < end;)
        poll(NULL, 0, 5);
    const char *net = "{\"private_hosts\":[\"echo.rekey.test\"],\"proxy_routes\":[{\"hosts\":["
                      "\"route.rekey.test\"],\"proxy\":{\"id\":\"" RIG_PROXY "\"}}]}";
    json_t *network = json_loads(net, 0, NULL);
    struct egress_top gone = {.kind = EGRESS_PROXY};
    snprintf(gone.proxy_ref, sizeof gone.proxy_ref, "gone");
    struct err e;
    err_init(&e);
    int rc = egress_rekey(r->eg, RIG_SESSION, "o2", "p2", network, &gone, &e);
    int64_t end = mono_ms() + IO_MS;
    for (int seen = __atomic_load_n(&ch.rounds, __ATOMIC_RELAXED);
         __atomic_load_n(&ch.rounds, __ATOMIC_RELAXED) < seen + 20 && mono_ms() < end;)
        poll(NULL, 0, 5);
    __atomic_store_n(&ch.stop, 1, __ATOMIC_RELAXED);
    pthread_join(t, NULL);
    if (rc != 0)
        fail_msg("%s: egress_rekey failed: %s", r->c->name, e.message);
    /* The tunnel opened before the owner had the listener is closed. */
    char c;
    if (!wait_fd(old, POLLIN, SETTLE_MS) || recv(old, &c, 1, 0) > 0)
        fail_msg("%s: the old tunnel was not closed within %d ms", r->c->name, SETTLE_MS);
    end = mono_ms() + SETTLE_MS;
    while (__atomic_load_n(&r->echo.live, __ATOMIC_RELAXED) > 0 && mono_ms() < end)
        poll(NULL, 0, 20);
    if (__atomic_load_n(&r->echo.live, __ATOMIC_RELAXED) > 0)
        fail_msg("%s: the old tunnel's destination side stayed open", r->c->name);
    /* The owner's private host goes direct. */
    char head[1024];
    int fd = rig_connect_host(r, "echo.rekey.test", r->echo.port, head, sizeof head);
    if (fd < 0 || strncmp(head, "HTTP/1.1 200", 12) != 0 || echo_check(fd, 1) != 0)
        fail_msg("%s: the owner's private host did not go direct (%.40s)", r->c->name, head);
    /* Anything else takes the owner's top-level proxy (one that does not
     * exist: fail closed), where the spare's rules went direct. */
    if (rig_connect(r, r->echo.port, head, sizeof head) < 0 ||
        strncmp(head, "HTTP/1.1 502", 12) != 0)
        fail_msg("%s: 127.0.0.1 answered \"%.40s\", expected 502 (the owner's proxy)", r->c->name,
                 head);
    /* The owner's route goes through its proxy, looked up for the owner. */
    (void)rig_connect_host(r, "route.rekey.test", 443, head, sizeof head);
    char got[160] = "", who[128] = "";
    for (end = mono_ms() + SETTLE_MS; mono_ms() < end; poll(NULL, 0, 20)) {
        pthread_mutex_lock(&r->web.mu);
        snprintf(got, sizeof got, "%.60s", r->web.head);
        snprintf(who, sizeof who, "%s", r->resolved);
        pthread_mutex_unlock(&r->web.mu);
        if (got[0])
            break;
    }
    if (strncmp(got, "CONNECT route.rekey.test:443 ", 29) != 0)
        fail_msg("%s: the route's proxy got \"%s\", expected the CONNECT", r->c->name, got);
    if (strcmp(who, "o2/p2/" RIG_PROXY) != 0)
        fail_msg("%s: the route's proxy was looked up as %s, expected o2/p2/" RIG_PROXY, r->c->name,
                 who);
    /* Once per listener; unknown sessions and rules that do not compile. */
    err_init(&e);
    assert_int_equal(egress_rekey(r->eg, RIG_SESSION, "o3", "p3", NULL, &gone, &e), E_CONFLICT);
    err_init(&e);
    assert_int_equal(egress_rekey(r->eg, "nope", "o3", "p3", NULL, &gone, &e), E_NOTFOUND);
    json_t *bad = json_loads("{\"private_hosts\":[\"127.0.0.1\"]}", 0, NULL);
    err_init(&e);
    assert_int_equal(egress_rekey(r->eg, "nope", "o3", "p3", bad, &gone, &e), E_INVALID);
    json_decref(bad);
    json_decref(network);
}

static void run_plain_http(struct rig *r)
{
    int fd = rig_keep(r, dial(r->eport));
    char req[256], host[64], resp[1024];
    snprintf(host, sizeof host, "Host: 127.0.0.1:%d", r->web.port);
    int n =
        snprintf(req, sizeof req,
                 "GET http://127.0.0.1:%d/x HTTP/1.1\r\n%s\r\nProxy-Connection: keep-alive\r\n\r\n",
                 r->web.port, host);
    size_t len = 0;
    if (fd < 0 || send_all(fd, req, (size_t)n) != 0 ||
        recv_to_eof(fd, resp, sizeof resp, &len) != 0)
        fail_msg("%s: no answer through the listener", r->c->name);
    if (strncmp(resp, "HTTP/1.1 200", 12) != 0)
        fail_msg("%s: answered \"%.40s\"", r->c->name, resp);
    pthread_mutex_lock(&r->web.mu);
    char *got = xstrdup(r->web.head);
    pthread_mutex_unlock(&r->web.mu);
    const char *why = NULL;
    if (strncmp(got, "GET /x HTTP/1.1\r\n", 17) != 0)
        why = "the request line is not in origin form";
    else if (!has_line(got, "Connection: close"))
        why = "no Connection: close";
    else if (strcasestr(got, "\r\nProxy-Connection:"))
        why = "Proxy-Connection was passed on";
    else if (!has_line(got, host))
        why = "the Host header was not kept";
    if (why) {
        print_error("the server got:\n%s\n", got);
        xfree(got);
        fail_msg("%s: %s", r->c->name, why);
    }
    xfree(got);
}

static void run_refuses_unlisted(struct rig *r)
{
    char head[1024];
    if (rig_connect(r, r->unlisted_port, head, sizeof head) < 0)
        fail_msg("%s: no answer head", r->c->name);
    if (strncmp(head, "HTTP/1.1 403", 12) != 0 ||
        !strcasestr(head, "\r\nX-Browserd-Egress: refused\r\n"))
        fail_msg("%s: answered \"%.200s\"", r->c->name, head);
    if (wait_fd(r->unlisted_fd, POLLIN, 0))
        fail_msg("%s: the egress connected to the port anyway", r->c->name);
}

/* CPU seconds the engine's worker threads ("egress-w*") have used. */
static double worker_cpu(void)
{
    DIR *d = opendir("/proc/self/task");
    double total = 0;
    for (struct dirent *de; d && (de = readdir(d));) {
        char path[300], buf[1024];
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", de->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        char *open_p = strchr(buf, '('), *close_p = strrchr(buf, ')');
        unsigned long ut = 0, st = 0;
        if (open_p && close_p && strncmp(open_p + 1, "egress-w", 8) == 0 &&
            sscanf(close_p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) ==
                2)
            total += (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
    }
    if (d)
        closedir(d);
    return total;
}

static void run_out_of_fds(struct rig *r)
{
    enum { CLIENTS = 4 };
    struct rlimit old, low;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    int open_now = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *de; d && (de = readdir(d));)
        open_now += de->d_name[0] != '.';
    if (d)
        closedir(d);
    low = old;
    low.rlim_cur = (rlim_t)open_now + 32;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    /* Clients connect but send nothing yet: the listener defers accepting
     * until a request arrives, so none is accepted. Then every descriptor
     * left is taken, and only then do the clients send their requests. */
    int clients[CLIENTS], nclients = 0;
    for (int i = 0; i < CLIENTS; i++)
        if ((clients[i] = rig_keep(r, dial(r->eport))) >= 0)
            nclients++;
    double c0 = worker_cpu(); /* reading /proc needs descriptors: before and after */
    int fillers[64], nfill = 0;
    while (nfill < 64 && (fillers[nfill] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
        nfill++;
    char req[160];
    int n = snprintf(req, sizeof req, "CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: x\r\n\r\n",
                     r->unlisted_port);
    int sent = 0;
    for (int i = 0; i < CLIENTS; i++)
        sent += clients[i] >= 0 && send_all(clients[i], req, (size_t)n) == 0;
    int64_t t0 = mono_ms();
    while (mono_ms() - t0 < 1000)
        (void)poll(NULL, 0, 50);
    /* Every client got an end: refused (closed without an answer) or, when
     * another thread freed a descriptor meanwhile, answered 403. */
    int ended = 0;
    for (int i = 0; i < CLIENTS; i++) {
        char b[256];
        ended += clients[i] >= 0 && wait_fd(clients[i], POLLIN, IO_MS) &&
                 (recv(clients[i], b, sizeof b, MSG_DONTWAIT) <= 0 ||
                  strncmp(b, "HTTP/1.1 403", 12) == 0);
    }
    for (int i = 0; i < nfill; i++)
        close(fillers[i]);
    double used = worker_cpu() - c0;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
    if (nclients != CLIENTS || sent != CLIENTS || nfill == 64)
        fail_msg("%s: cannot set the case up (%d clients, %d sent, %d fillers)", r->c->name,
                 nclients, sent, nfill);
    if (used > 0.5)
        fail_msg(
            "%s: the workers used %.2f s of CPU in about 1 s while out of descriptors (spinning)",
            r->c->name, used);
    if (ended != CLIENTS)
        fail_msg("%s: only %d of %d clients got an end while out of descriptors", r->c->name, ended,
                 CLIENTS);
    /* And the listener serves again once descriptors are free. */
    char head[1024];
    int fd = rig_connect(r, r->unlisted_port, head, sizeof head);
    if (fd < 0 || strncmp(head, "HTTP/1.1 403", 12) != 0)
        fail_msg("%s: no answer once descriptors were free again (%.60s)", r->c->name, head);
}

static const struct engine_case engine_cases[] = {
    {"item 6: holds thousands of tunnels on its threads", run_many_tunnels},
    {"item 6: counts bytes sent and received per session", run_counts_bytes},
    {"item 6: a bulk transfer (grown pipes) arrives whole and in order", run_bulk_in_order},
    {"item 6: closed tunnels leave no descriptor behind (worker, lookup thread, refusal)",
     run_no_fd_left},
    {"a tunnel ending while a forked child holds its descriptors leaves no event behind",
     run_closed_while_forked},
    {"item 3: egress_set_top closes tunnels the old top-level selection carried",
     run_set_top_closes},
    {"issue 21: egress_rekey gives a spare's listener its owner's rules, routes and proxy and "
     "closes what it carried",
     run_rekey},
    {"plain http is sent in origin form without proxy headers and with Connection: close",
     run_plain_http},
    {"operator: pages never reach a loopback HOST:PORT missing from --allow-loopback (403 refused)",
     run_refuses_unlisted},
    {"item 6: out of descriptors, the listener refuses connections instead of spinning",
     run_out_of_fds},
};
#define ENGINE_CASES (sizeof engine_cases / sizeof engine_cases[0])

static void engine_run(void **state)
{
    struct rig *r = *state;
    r->c->run(r);
}

#define ENGINE_TEST(i)                                                                             \
    {                                                                                              \
        engine_cases[i].name, engine_run, rig_up, rig_down, (void *)&engine_cases[i]               \
    }

int main(void)
{
    /* As the server (main.c): a splice into a socket that a switch or a
     * rekey shut down must fail with EPIPE, not end the process. */
    signal(SIGPIPE, SIG_IGN);
    _Static_assert(ENGINE_CASES == 10, "list every engine case below");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decide_table),
        cmocka_unit_test(bypass_table),
        cmocka_unit_test(head_table),
        cmocka_unit_test(secretbox_roundtrip),
        cmocka_unit_test(engine_refuses_loopback),
        cmocka_unit_test(engine_allow_private),
        ENGINE_TEST(0),
        ENGINE_TEST(1),
        ENGINE_TEST(2),
        ENGINE_TEST(3),
        ENGINE_TEST(4),
        ENGINE_TEST(5),
        ENGINE_TEST(6),
        ENGINE_TEST(7),
        ENGINE_TEST(8),
        ENGINE_TEST(9),
    };
    return cmocka_run_group_tests_name("proxy/egress", tests, NULL, NULL);
}
