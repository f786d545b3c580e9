/* Unit tests for proxy/egress: the per-connection decision (Network rules 1-9
 * plus the proxies' bypass_hosts), bypass_hosts matching, the address classes
 * of the isolation boundary, and core/secretbox. Table-driven. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

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

/* ---- address classes ---- */

struct addr_case {
    const char *name, *addr;
    enum egress_addr_class cls;
};

static const struct addr_case addr_cases[] = {
    {"loopback 127.0.0.0/8", "127.0.0.1", EGRESS_ADDR_LOOPBACK},
    {"loopback 127.0.0.0/8 (any address in it)", "127.45.6.7", EGRESS_ADDR_LOOPBACK},
    {"loopback ::1", "::1", EGRESS_ADDR_LOOPBACK},
    {"IPv4-mapped loopback", "::ffff:127.0.0.1", EGRESS_ADDR_LOOPBACK},
    {"link-local 169.254.0.0/16", "169.254.1.1", EGRESS_ADDR_LINKLOCAL},
    {"link-local fe80::/10", "fe80::1", EGRESS_ADDR_LINKLOCAL},
    {"link-local fe80::/10 upper edge", "febf::1", EGRESS_ADDR_LINKLOCAL},
    {"metadata 169.254.169.254", "169.254.169.254", EGRESS_ADDR_METADATA},
    {"metadata fd00:ec2::254", "fd00:ec2::254", EGRESS_ADDR_METADATA},
    {"IPv4-mapped metadata", "::ffff:169.254.169.254", EGRESS_ADDR_METADATA},
    {"unspecified 0.0.0.0 (reaches the host)", "0.0.0.0", EGRESS_ADDR_UNSPEC},
    {"unspecified ::", "::", EGRESS_ADDR_UNSPEC},
    {"public IPv4", "93.184.216.34", EGRESS_ADDR_PUBLIC},
    {"private ranges are not loopback", "10.0.0.1", EGRESS_ADDR_PUBLIC},
    {"public IPv6", "2001:db8::1", EGRESS_ADDR_PUBLIC},
    {"fec0:: is not link-local", "fec0::1", EGRESS_ADDR_PUBLIC},
};

static void addr_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof addr_cases / sizeof addr_cases[0]; i++) {
        const struct addr_case *c = &addr_cases[i];
        uint8_t a[16];
        int fam = 4;
        if (inet_pton(AF_INET, c->addr, a) != 1) {
            fam = 6;
            if (inet_pton(AF_INET6, c->addr, a) != 1)
                fail_msg("%s: bad address in the case", c->name);
        }
        enum egress_addr_class got = egress_addr_classify(fam, a);
        if (got != c->cls)
            fail_msg("%s: %s classified %d, expected %d", c->name, c->addr, got, c->cls);
    }
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
    assert_int_equal(egress_open(eg, "s1", "o", "p", NULL, &top, 0, &port, &e), 0);
    assert_true(port > 0);
    assert_int_equal(egress_open(eg, "s1", "o", "p", NULL, &top, 0, &port, &e), E_CONFLICT);
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
}

static void engine_bench(void **state)
{
    (void)state;
    double dc, pc, dm, pm;
    assert_int_equal(egress_bench(2u << 20, &dc, &pc, &dm, &pm), 0);
    print_message("egress bench (2 MiB x 20): connect direct %.0f us, via egress %.0f us; "
                  "throughput direct %.0f MB/s, via egress %.0f MB/s\n",
                  dc, pc, dm, pm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decide_table),        cmocka_unit_test(bypass_table),
        cmocka_unit_test(addr_table),          cmocka_unit_test(head_table),
        cmocka_unit_test(secretbox_roundtrip), cmocka_unit_test(engine_refuses_loopback),
        cmocka_unit_test(engine_bench),
    };
    return cmocka_run_group_tests_name("proxy/egress", tests, NULL, NULL);
}
