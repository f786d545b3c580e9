/*
 * egress: the forward proxy every browser's traffic goes through.
 *
 * One listening socket on 127.0.0.1 per session, so the port a connection
 * arrives on identifies the session (Chromium runs with
 * --proxy-server=http://127.0.0.1:PORT and --proxy-bypass-list=<-loopback>).
 * It speaks HTTP CONNECT (https, ws, wss) and absolute-form plain HTTP. Per
 * connection it decides, with the session's compiled BrowserNetworkConfig
 * (domain/netcfg.h) and its top-level proxy selection, whether to connect
 * directly or through an upstream proxy (HTTP CONNECT + Basic auth), and it
 * enforces the isolation boundary of OPERATOR.md: pages never reach loopback,
 * link-local, metadata or the host's own addresses except the HOST:PORT
 * entries of --allow-loopback, never a private, shared, unique-local,
 * multicast or reserved address outside the ranges of --allow-private
 * (domain/addrclass.h), and never the server's port, an egress port or a
 * DevTools port. Hostnames are resolved here and the checked address is
 * the one connected to (no DNS rebinding window). Design note:
 * docs/egress-proxy.md.
 *
 * Threading: a few epoll worker threads (one per core, at most 4) hold every
 * listener and every connection as a non-blocking state machine; tunnels
 * move bytes with splice(2) through a pipe per direction, so payload never
 * crosses user space. Lookups that may block (DNS names, the resolve hook
 * of a proxy) run on a small pool of lookup threads. Every function is
 * thread-safe.
 */
#ifndef BD_PROXY_EGRESS_H
#define BD_PROXY_EGRESS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "domain/netcfg.h"

#define EGRESS_REF_MAX 255

/* ---- the decision (pure; tests/unit/test_egress.c) ---- */

enum egress_kind { EGRESS_DIRECT, EGRESS_PROXY };

/* The session's top-level egress: direct, or one proxy (an id the resolve
 * hook understands, which may be the operator's default proxy). */
struct egress_top {
    enum egress_kind kind;
    char proxy_ref[EGRESS_REF_MAX + 1];
};

/* Why a connection goes where it goes (logged, and checked by the tests). */
enum egress_reason {
    EGRESS_R_PRIVATE,      /* rule 1: private_hosts match -> direct */
    EGRESS_R_ROUTE,        /* rule 9: a proxy route matched -> the route's proxy */
    EGRESS_R_ROUTE_BYPASS, /* rule 9: the route proxy's bypass_hosts -> direct */
    EGRESS_R_TOP,          /* unmatched: the top-level selection */
    EGRESS_R_TOP_BYPASS,   /* the top-level proxy's bypass_hosts -> direct */
};

struct egress_decision {
    enum egress_kind kind;
    enum egress_reason reason;
    int route;                          /* matched route index, -1 when none */
    char proxy_ref[EGRESS_REF_MAX + 1]; /* for EGRESS_PROXY */
};

/* Is host:port in the bypass_hosts of proxy ref? 1 or 0. */
typedef int (*egress_bypass_fn)(void *ctx, const char *proxy_ref, const char *host, int port);

/* Decides where one connection to host:port goes (host as the browser wrote
 * it; IPv6 literals with or without brackets). Order: private_hosts match ->
 * direct; else (when use_routes) a matching proxy route -> that route's
 * proxy, unless host is in that proxy's bypass_hosts (direct); else the
 * top-level selection, with its proxy's bypass_hosts. use_routes is 0 while
 * the session is being created (rule 9: "Routes take effect once the session
 * is created; start_url and setup traffic use the top-level proxy"). nc may
 * be NULL (no private hosts, no routes: compile even an omitted config with
 * netcfg_compile(NULL) to get the rule 2 defaults). bypass may be NULL.
 * Never fails. */
void egress_decide(const struct netcfg *nc, int use_routes, const struct egress_top *top,
                   const char *host, int port, egress_bypass_fn bypass, void *ctx,
                   struct egress_decision *out);

/* bypass_hosts matching: patterns is a JSON array of strings (NULL = none).
 * An entry is a hostname ("example.com", exact), a wildcard ("*.example.com",
 * subdomains only; ".example.com" means the same), an IP literal ("10.1.2.3",
 * "[::1]"), or "*" (everything); any entry may end in ":PORT" to match only
 * that port. Case-insensitive, trailing dots ignored. Returns 1 or 0. */
int egress_bypass_match(const json_t *patterns, const char *host, int port);

/* Checks one bypass_hosts entry (as above); 0 or -1. */
int egress_bypass_valid(const char *pattern);

/* One proxy request head as the browser sent it. */
#define EGRESS_TARGET_MAX 2048
struct egress_request {
    int is_connect;               /* CONNECT host:port, else absolute-form http:// */
    char method[16];              /* upper-case token */
    char host[256];               /* as written (IPv6 without brackets) */
    int port;                     /* 80 when an http:// URL has none */
    char path[EGRESS_TARGET_MAX]; /* origin form ("/" at least); "" unused for CONNECT */
};
/* Parses the request line of a head of len bytes (untrusted: it must not
 * read past len). Accepts "CONNECT host:port HTTP/1.x" and "METHOD
 * http://host[:port][/path] HTTP/1.x"; userinfo, other schemes, control
 * characters and bad ports are E_INVALID. Pure; fuzzed by
 * fuzz/fuzz_egress_head.c. */
int egress_parse_request(const char *head, size_t len, struct egress_request *out) WUR;

/* Lower-cases host, strips IPv6 brackets and trailing dots, into out (cap
 * bytes, truncated). Pure. */
void egress_host_norm(const char *host, char *out, size_t cap);

/* Parses "host:port" or "[v6]:port" (n bytes; port dflt when absent, 0 =
 * required) into host (cap bytes) and *port. 0, or -1 when malformed. Pure. */
int egress_parse_authority(const char *s, size_t n, char *host, size_t cap, int *port, int dflt);

/* Splits "HOST[:PORT]" or "[V6][:PORT]" (a bare IPv6 literal is all host)
 * into the normalized host (cap bytes) and *port (0 = none). 0 or -1. */
int egress_split_hostport(const char *s, char *host, size_t cap, int *port);

/* ---- the engine (egress_engine.c) ---- */

/* An upstream proxy as the resolve hook returns it. */
struct egress_upstream {
    char host[256];
    int port;
    char *userpass;    /* owned "user:password" for Basic auth, or NULL; wiped on clear */
    int tls;           /* protocol https: TLS to the proxy (see tls_client.h) */
    char *ca_pem;      /* owned PEM bundle the proxy's certificate must verify against
                          instead of the system's roots (a custom proxy's ca_bundle), or NULL */
    int check_address; /* 1 for user-supplied (custom) proxies: the proxy's address is held
                          to the isolation rules like a page's destination */
    json_t *bypass;    /* owned bypass_hosts array, or NULL */
};
/* Releases what an upstream owns (wipes the password); accepts NULL. */
void egress_upstream_clear(struct egress_upstream *u);

/* Why a browser connection failed (the service's proxy_error codes,
 * KERNEL_API_NEWER.md 1.1 and docs/egress-proxy.md "Failures"). */
struct egress_failure {
    const char *code;   /* destination_blocked, provider_blacklisted, provider_unreachable,
                           proxy_unavailable, upstream_timeout, upstream_dns_failure,
                           upstream_connect_failed */
    int status;         /* what the browser was answered: 403 or 502 */
    const char *method; /* CONNECT, or the plain request's method */
    const char *host;   /* the destination */
    int port;
    const char *path;    /* a plain request's origin-form path; "" for CONNECT */
    const char *message; /* the reason the browser was given */
};

struct egress_config {
    /* --allow-loopback: "HOST:PORT[,HOST:PORT...]" (HOST numeric or localhost). */
    const char *allow_loopback;
    /* --allow-private: "CIDR[,CIDR...]", the LAN-side ranges (private, shared,
     * unique local, reserved; domain/addrclass.h) sessions may reach
     * directly; NULL or empty = none. */
    const char *allow_private;
    /* Test mode: Chromium's --host-resolver-rules value ("MAP pattern ip, ...")
     * also applied to the egress's own resolution, or NULL. */
    const char *host_rules;
    /* --proxy-ca-file: a PEM bundle trusted for https upstream proxies in
     * addition to the system's roots, or NULL. */
    const char *proxy_ca_file;
    /* The server's listening port, read at each check (it is known only once
     * the HTTP server is bound); may be NULL. */
    const int *server_port;
    /* The session relay's port on the host's 127.0.0.1 (proxy/selfrelay), or
     * NULL / <= 0 for none. A browser's CONNECT to the server's port on a
     * loopback or host address goes there instead of being refused, with the
     * line "BROWSERD-SELF <session id> <org id>\r\n" before the browser's
     * bytes: that listener lets through only the session's own CDP relay
     * endpoint with the session's own token (issue 31.10). */
    const int *self_port;
    /* Resolves a proxy ref of a session (org, project) to its upstream.
     * Returns 0, or E_NOTFOUND when the proxy is gone (connections fail
     * closed). Called on connection threads. */
    int (*resolve)(void *ctx, const char *org_id, const char *project_id, const char *ref,
                   struct egress_upstream *out);
    /* A browser connection the egress could not carry (it answered the
     * browser 403 or 502), for the session's proxy_error telemetry event;
     * may be NULL. Called on a worker thread, without the engine's locks. */
    void (*failed)(void *ctx, const char *session_id, const struct egress_failure *f);
    void *ctx;
    /* Worker threads; 0 = one per core, at most 4. */
    int workers;
    /* 1: splice CONNECT tunnels in the kernel (proxy/ksplice: a sockmap with
     * an sk_skb verdict program) when it loads; when it does not (no
     * permission, an old kernel, a verifier refusal) the reason is logged
     * once and every tunnel is relayed in user space, as with 0. */
    int sockmap;
};

struct egress;

/* Parses the config and starts the worker threads. E_INVALID when
 * allow_loopback, allow_private or host_rules cannot be parsed. */
int egress_start(const struct egress_config *cfg, struct egress **out, struct err *e) WUR;
/* 1 when CONNECT tunnels are spliced in the kernel (egress_config.sockmap
 * and the program loaded), 0 when they are relayed in user space. */
int egress_in_kernel(const struct egress *eg);
/* Closes every listener and connection, waits for the threads; accepts NULL. */
void egress_stop(struct egress *eg);

/* Opens the listener of a session. network is the session's
 * BrowserNetworkConfig (NULL = omitted; compiled with the rule 2 defaults),
 * top its top-level egress. defer_routes: 1 = proxy_routes are ignored until
 * egress_routes_on (setup traffic uses the top-level egress). *port receives
 * the listening port on 127.0.0.1. E_INVALID when network does not compile,
 * E_CONFLICT when the session has a listener already, E_INTERNAL on socket
 * failures. netns: 0 = the host's loopback; else the core/netns id of the
 * session's sandbox, whose loopback the listener is made on (the browser's
 * only way out of its namespace). */
int egress_open(struct egress *eg, const char *session_id, const char *org_id,
                const char *project_id, const json_t *network, const struct egress_top *top,
                int defer_routes, int netns, int *port, struct err *e) WUR;

/* The session is created: its proxy_routes apply from now on. E_NOTFOUND
 * when the session has no listener. */
int egress_routes_on(struct egress *eg, const char *session_id) WUR;

/* Switches the session's top-level egress at once: new connections use it;
 * open tunnels that the old top-level selection carried are closed, so no
 * traffic keeps flowing the old way. E_NOTFOUND when the session has no
 * listener. */
int egress_set_top(struct egress *eg, const char *session_id, const struct egress_top *top) WUR;

/* Gives a listener opened for nobody (a spare browser's: no organization,
 * default rules) its owner at once: org and project (for the resolve hook),
 * the compiled network rules (NULL = omitted, as egress_open) and the
 * top-level egress. Every connection the listener had is closed: it was
 * opened before the owner had the browser and must carry nothing of the
 * owner's. The routes stay as they were (on after egress_routes_on).
 * Once per listener: a second rekey is E_CONFLICT. E_INVALID when network
 * does not compile (field "network", as egress_open), E_NOTFOUND when the
 * session has no listener. */
int egress_rekey(struct egress *eg, const char *session_id, const char *org_id,
                 const char *project_id, const json_t *network, const struct egress_top *top,
                 struct err *e) WUR;

/* Closes the session's listener and its open connections; no-op when none. */
void egress_close(struct egress *eg, const char *session_id);

/* Bytes the session's pages sent (browser -> destination) and received, over
 * the life of its listener. E_NOTFOUND when the session has no listener. */
int egress_bytes(struct egress *eg, const char *session_id, uint64_t *sent, uint64_t *received) WUR;

/* A port pages must never reach on a local address (a browser's DevTools
 * port). Counted: protect twice, unprotect twice. */
void egress_protect_port(struct egress *eg, int port);
void egress_unprotect_port(struct egress *eg, int port);

/* The address rule (docs/egress-proxy.md, "Isolation") for one resolved
 * address of a connection the server makes for a tenant: 1 when it may be
 * connected to on port, 0 when refused (a host-side address not in
 * --allow-loopback, a LAN-side one outside --allow-private, the host's own
 * addresses, the server's ports). Thread-safe. */
int egress_addr_allowed(struct egress *eg, int fam, const uint8_t *addr, int port);

/* Connects through up to url ("http://host[:port]/path" -> a GET through the
 * tunnel, any HTTP status line counts; "https://host[:port]" -> the CONNECT
 * answer) within timeout_ms. 0 when the proxy works, E_UNAVAIL with a reason
 * in e otherwise, E_INVALID for a bad url. eg may be NULL (then no isolation
 * check of the proxy address). */
int egress_probe(struct egress *eg, const struct egress_upstream *up, const char *url,
                 int timeout_ms, struct err *e) WUR;

#endif
