/*
 * ws: WebSocket handshake helpers and the CDP method scanner.
 *
 * wslay frames bytes but knows nothing of HTTP, so the opening handshake
 * lives here. The server side of the handshake is done by the HTTP layer
 * (libmicrohttpd) with ws_accept_key; the client side, towards a browser's
 * DevTools socket on loopback, is ws_connect.
 */
#include "proxy/ws.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/netns.h"
#include "core/crypto.h"
#include "core/fdio.h"
#include "core/limits.h"
#include "core/xalloc.h"
#include "proxy/httpc.h"

static int is_b64(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/';
}

int ws_accept_key(const char *client_key, char out[29])
{
    out[0] = '\0';
    if (client_key == NULL || strlen(client_key) != WS_KEY_LEN)
        return E_INVALID;
    for (size_t i = 0; i < WS_KEY_LEN - 2; i++)
        if (!is_b64((unsigned char)client_key[i]))
            return E_INVALID;
    if (client_key[22] != '=' || client_key[23] != '=')
        return E_INVALID;

    char buf[WS_KEY_LEN + sizeof(WS_GUID)];
    memcpy(buf, client_key, WS_KEY_LEN);
    memcpy(buf + WS_KEY_LEN, WS_GUID, sizeof(WS_GUID) - 1);
    unsigned char md[SHA_DIGEST_LENGTH];
    SHA1((const unsigned char *)buf, WS_KEY_LEN + sizeof(WS_GUID) - 1, md);
    /* EVP_EncodeBlock writes 4 * ceil(20 / 3) = 28 characters plus a NUL. */
    EVP_EncodeBlock((unsigned char *)out, md, SHA_DIGEST_LENGTH);
    return 0;
}

/* ---- 101 response parser ---------------------------------------------- */

struct upgrade_state {
    int upgrade_ok;
    int connection_ok;
    int accept_count;
    int accept_ok;
    int bad;
};

static int is_tchar(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* 1 when the comma-separated list v (vlen bytes) holds token tok, ignoring
 * case and optional whitespace around elements. */
static int list_has_token(const char *v, size_t vlen, const char *tok)
{
    size_t toklen = strlen(tok);
    size_t i = 0;
    while (i <= vlen) {
        size_t j = i;
        while (j < vlen && v[j] != ',')
            j++;
        size_t a = i, b = j;
        while (a < b && (v[a] == ' ' || v[a] == '\t'))
            a++;
        while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t'))
            b--;
        if (b - a == toklen && strncasecmp(v + a, tok, toklen) == 0)
            return 1;
        i = j + 1;
    }
    return 0;
}

static int name_is(const char *name, size_t nlen, const char *want)
{
    return strlen(want) == nlen && strncasecmp(name, want, nlen) == 0;
}

static void upgrade_header(struct upgrade_state *st, const char *name, size_t nlen, const char *v,
                           size_t vlen, int overflow, const char *expect_accept)
{
    if (name_is(name, nlen, "Upgrade")) {
        if (!overflow && list_has_token(v, vlen, "websocket"))
            st->upgrade_ok = 1;
    } else if (name_is(name, nlen, "Connection")) {
        if (!overflow && list_has_token(v, vlen, "upgrade"))
            st->connection_ok = 1;
    } else if (name_is(name, nlen, "Sec-WebSocket-Accept")) {
        st->accept_count++;
        if (expect_accept == NULL ||
            (!overflow && vlen == strlen(expect_accept) && memcmp(v, expect_accept, vlen) == 0))
            st->accept_ok = 1;
    } else if (name_is(name, nlen, "Sec-WebSocket-Extensions") ||
               name_is(name, nlen, "Sec-WebSocket-Protocol")) {
        st->bad = 1; /* we offered neither, so the server may select neither */
    }
}

/* Appends bytes [a, b) of a header line to the unfolded value, trimming the
 * optional whitespace around it; folded pieces are joined with one space. */
static void value_append(char *val, size_t cap, size_t *vlen, int *overflow, const char *a,
                         const char *b)
{
    while (a < b && (*a == ' ' || *a == '\t'))
        a++;
    while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
        b--;
    if (a == b)
        return;
    size_t need = (size_t)(b - a) + (*vlen > 0 ? 1 : 0);
    if (*vlen + need > cap) {
        *overflow = 1;
        return;
    }
    if (*vlen > 0)
        val[(*vlen)++] = ' ';
    memcpy(val + *vlen, a, (size_t)(b - a));
    *vlen += (size_t)(b - a);
}

int ws_parse_upgrade_response(const char *buf, size_t len, const char *expect_accept,
                              size_t *head_len)
{
    static const char prefix[] = "HTTP/1.1 ";
    size_t plen = len < sizeof(prefix) - 1 ? len : sizeof(prefix) - 1;
    if (memcmp(buf, prefix, plen) != 0)
        return E_INVALID;

    size_t scan = len < LIM_HEADER_BYTES ? len : LIM_HEADER_BYTES;
    const char *end = NULL;
    for (size_t i = 0; i + 4 <= scan; i++) {
        if (buf[i] == '\r' && memcmp(buf + i, "\r\n\r\n", 4) == 0) {
            end = buf + i + 2; /* end of the last header line's CRLF */
            break;
        }
    }
    if (end == NULL)
        return len >= LIM_HEADER_BYTES ? E_INVALID : 1;

    /* Status line: "HTTP/1.1 101" then CRLF or SP reason-phrase CRLF. */
    const char *p = buf + sizeof(prefix) - 1;
    if (end - p < 5 || memcmp(p, "101", 3) != 0 || (p[3] != ' ' && p[3] != '\r'))
        return E_INVALID;
    for (; *p != '\r'; p++)
        if (*p == '\n' || *p == '\0' || (unsigned char)*p == 0x7f)
            return E_INVALID;
    if (p[1] != '\n')
        return E_INVALID;
    p += 2;

    struct upgrade_state st = {0};
    char val[1024];
    size_t vlen = 0;
    int overflow = 0;
    const char *name = NULL;
    size_t nlen = 0;
    while (p < end) {
        const char *eol = p;
        while (eol < end && *eol != '\r') {
            if (*eol == '\n' || *eol == '\0')
                return E_INVALID;
            eol++;
        }
        if (eol >= end || eol[1] != '\n')
            return E_INVALID;
        if (*p == ' ' || *p == '\t') {
            if (name == NULL)
                return E_INVALID; /* continuation with nothing to continue */
            value_append(val, sizeof(val), &vlen, &overflow, p, eol);
        } else {
            if (name != NULL)
                upgrade_header(&st, name, nlen, val, vlen, overflow, expect_accept);
            const char *colon = p;
            while (colon < eol && is_tchar((unsigned char)*colon))
                colon++;
            if (colon == p || colon == eol || *colon != ':')
                return E_INVALID;
            name = p;
            nlen = (size_t)(colon - p);
            vlen = 0;
            overflow = 0;
            value_append(val, sizeof(val), &vlen, &overflow, colon + 1, eol);
        }
        p = eol + 2;
    }
    if (name != NULL)
        upgrade_header(&st, name, nlen, val, vlen, overflow, expect_accept);

    if (st.bad || !st.upgrade_ok || !st.connection_ok || st.accept_count > 1 ||
        (expect_accept != NULL && !st.accept_ok))
        return E_INVALID;
    *head_len = (size_t)(end - buf) + 2;
    return 0;
}

/* ---- CDP method scanner ----------------------------------------------- */

struct jscan {
    const unsigned char *p, *end;
};

static void js_ws(struct jscan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static int hex4(const unsigned char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

/* Appends n bytes to out when they fit (keeping room for the NUL). */
static void put_bytes(char *out, size_t cap, size_t *olen, int *fits, const char *b, size_t n)
{
    if (out == NULL || !*fits)
        return;
    if (*olen + n >= cap) {
        *fits = 0;
        return;
    }
    memcpy(out + *olen, b, n);
    *olen += n;
}

static void put_cp(char *out, size_t cap, size_t *olen, int *fits, unsigned cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xc0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        u[0] = (char)(0xf0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    put_bytes(out, cap, olen, fits, u, n);
}

/* Scans a JSON string at s->p (which must be '"'), decoding it into out
 * (cap bytes with the NUL) when out is not NULL; *fits turns 0 when it does
 * not fit. Returns 0, or -1 when malformed or truncated. */
static int js_string(struct jscan *s, char *out, size_t cap, int *fits)
{
    size_t olen = 0;
    s->p++;
    for (;;) {
        const unsigned char *run = s->p;
        while (s->p < s->end && *s->p != '"' && *s->p != '\\' && *s->p >= 0x20)
            s->p++;
        put_bytes(out, cap, &olen, fits, (const char *)run, (size_t)(s->p - run));
        if (s->p >= s->end || *s->p < 0x20)
            return -1;
        if (*s->p == '"') {
            s->p++;
            break;
        }
        if (s->end - s->p < 2)
            return -1;
        unsigned char c = s->p[1];
        s->p += 2;
        const char *simple = NULL;
        switch (c) {
        case '"':
            simple = "\"";
            break;
        case '\\':
            simple = "\\";
            break;
        case '/':
            simple = "/";
            break;
        case 'b':
            simple = "\b";
            break;
        case 'f':
            simple = "\f";
            break;
        case 'n':
            simple = "\n";
            break;
        case 'r':
            simple = "\r";
            break;
        case 't':
            simple = "\t";
            break;
        case 'u':
            break;
        default:
            return -1;
        }
        if (simple != NULL) {
            put_bytes(out, cap, &olen, fits, simple, 1);
            continue;
        }
        unsigned cp, lo;
        if (s->end - s->p < 4 || hex4(s->p, &cp) != 0)
            return -1;
        s->p += 4;
        if (cp >= 0xd800 && cp <= 0xdbff && s->end - s->p >= 6 && s->p[0] == '\\' &&
            s->p[1] == 'u' && hex4(s->p + 2, &lo) == 0 && lo >= 0xdc00 && lo <= 0xdfff) {
            s->p += 6;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        } else if (cp >= 0xd800 && cp <= 0xdfff) {
            cp = 0xfffd; /* lone surrogate: Chromium substitutes U+FFFD */
        }
        put_cp(out, cap, &olen, fits, cp);
    }
    if (out != NULL && *fits)
        out[olen] = '\0';
    return 0;
}

/* Skips one JSON value. Nested containers are skipped by counting brackets
 * outside strings: cheap, and enough to find where the value ends. */
static int js_skip(struct jscan *s)
{
    if (s->p >= s->end)
        return -1;
    int fits = 1;
    if (*s->p == '"')
        return js_string(s, NULL, 0, &fits);
    if (*s->p == '{' || *s->p == '[') {
        size_t depth = 0;
        while (s->p < s->end) {
            unsigned char c = *s->p;
            if (c == '"') {
                if (js_string(s, NULL, 0, &fits) != 0)
                    return -1;
                continue;
            }
            s->p++;
            if (c == '{' || c == '[') {
                depth++;
            } else if (c == '}' || c == ']') {
                if (--depth == 0)
                    return 0;
            }
        }
        return -1;
    }
    const unsigned char *start = s->p;
    while (s->p < s->end && ((*s->p >= '0' && *s->p <= '9') || (*s->p >= 'a' && *s->p <= 'z') ||
                             *s->p == '-' || *s->p == '+' || *s->p == '.' || *s->p == 'E'))
        s->p++;
    return s->p > start ? 0 : -1;
}

int ws_cdp_method(const char *msg, size_t len, char *out, size_t cap)
{
    if (cap == 0)
        return 0;
    out[0] = '\0';
    struct jscan s = {(const unsigned char *)msg, (const unsigned char *)msg + len};
    int found = 0;
    js_ws(&s);
    if (s.p >= s.end || *s.p != '{')
        return 0;
    s.p++;
    js_ws(&s);
    if (s.p < s.end && *s.p == '}') {
        s.p++;
    } else {
        for (;;) {
            char key[8];
            int kfits = 1;
            if (s.p >= s.end || *s.p != '"' || js_string(&s, key, sizeof(key), &kfits) != 0)
                goto malformed;
            js_ws(&s);
            if (s.p >= s.end || *s.p != ':')
                goto malformed;
            s.p++;
            js_ws(&s);
            if (kfits && strcmp(key, "method") == 0) {
                if (s.p < s.end && *s.p == '"') {
                    int vfits = 1;
                    if (js_string(&s, out, cap, &vfits) != 0)
                        goto malformed;
                    found = vfits;
                } else {
                    if (js_skip(&s) != 0)
                        goto malformed;
                    found = 0;
                }
            } else if (js_skip(&s) != 0) {
                goto malformed;
            }
            js_ws(&s);
            if (s.p >= s.end)
                goto malformed;
            if (*s.p == '}') {
                s.p++;
                break;
            }
            if (*s.p != ',')
                goto malformed;
            s.p++;
            js_ws(&s);
        }
    }
    js_ws(&s);
    if (s.p != s.end || !found)
        goto malformed;
    return 1;
malformed:
    out[0] = '\0';
    return 0;
}

/* ---- client handshake ------------------------------------------------- */

struct ws_url {
    int family;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    char hostport[80]; /* Host header value */
    const char *path;
    int netns; /* 0 = the host's; else a core/netns id */
};

static int parse_url(const char *url, struct ws_url *u, struct err *e)
{
    memset(u, 0, sizeof *u);
    if (strncmp(url, "ws://", 5) != 0)
        return err_set(e, E_INVALID, "bad_request", "CDP URL must start with ws://");
    const char *h = url + 5, *hend, *port;
    char host[64];
    /* "nsN@": a port on the loopback of registered network namespace N
     * (core/netns.h); only the server builds such URLs. */
    u->netns = 0;
    if (h[0] == 'n' && h[1] == 's' && h[2] >= '1' && h[2] <= '9') {
        char *end;
        long id = strtol(h + 2, &end, 10);
        if (*end != '@' || id < 1 || id > 65535)
            return err_set(e, E_INVALID, "bad_request", "CDP URL has a malformed namespace");
        u->netns = (int)id;
        h = end + 1;
    }
    if (*h == '[') {
        hend = strchr(h, ']');
        if (hend == NULL || (size_t)(hend - h - 1) >= sizeof(host))
            return err_set(e, E_INVALID, "bad_request", "CDP URL has a malformed IPv6 host");
        memcpy(host, h + 1, (size_t)(hend - h - 1));
        host[hend - h - 1] = '\0';
        port = hend + 1;
    } else {
        hend = h;
        while (*hend != '\0' && *hend != ':' && *hend != '/')
            hend++;
        if ((size_t)(hend - h) >= sizeof(host))
            return err_set(e, E_INVALID, "bad_request", "CDP URL host is too long");
        memcpy(host, h, (size_t)(hend - h));
        host[hend - h] = '\0';
        port = hend;
    }
    if (*port != ':' || port[1] < '0' || port[1] > '9')
        return err_set(e, E_INVALID, "bad_request", "CDP URL must name a port");
    unsigned long pn = 0;
    const char *q = port + 1;
    for (; *q >= '0' && *q <= '9' && pn <= 65535; q++)
        pn = pn * 10 + (unsigned long)(*q - '0');
    if (pn == 0 || pn > 65535 || (*q != '/' && *q != '\0'))
        return err_set(e, E_INVALID, "bad_request", "CDP URL port must be 1..65535");
    u->path = *q == '\0' ? "/" : q;
    size_t plen = strlen(u->path);
    if (plen > LIM_PATH_BYTES)
        return err_set(e, E_INVALID, "bad_request", "CDP URL path is too long");
    for (size_t i = 0; i < plen; i++)
        if ((unsigned char)u->path[i] <= 0x20 || (unsigned char)u->path[i] >= 0x7f)
            return err_set(e, E_INVALID, "bad_request", "CDP URL path has a forbidden character");

    memset(&u->addr, 0, sizeof(u->addr));
    struct sockaddr_in *a4 = (struct sockaddr_in *)&u->addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&u->addr;
    if (*h == '[') {
        if (inet_pton(AF_INET6, host, &a6->sin6_addr) != 1 || !IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr))
            return err_set(e, E_INVALID, "bad_request", "CDP URL host must be a loopback address");
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)pn);
        u->family = AF_INET6;
        u->addrlen = sizeof(*a6);
    } else {
        if (strcmp(host, "localhost") == 0) {
            a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        } else if (inet_pton(AF_INET, host, &a4->sin_addr) != 1 ||
                   (ntohl(a4->sin_addr.s_addr) >> 24) != 127) {
            return err_set(e, E_INVALID, "bad_request", "CDP URL host must be a loopback address");
        }
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)pn);
        u->family = AF_INET;
        u->addrlen = sizeof(*a4);
    }
    int n = snprintf(u->hostport, sizeof(u->hostport), "%.*s", (int)(port - h), h);
    if (n < 0 || (size_t)n >= sizeof(u->hostport))
        return err_set(e, E_INVALID, "bad_request", "CDP URL host is too long");
    n = snprintf(u->hostport + n, sizeof(u->hostport) - (size_t)n, ":%lu", pn);
    if (n < 0)
        return err_set(e, E_INVALID, "bad_request", "CDP URL host is too long");
    return 0;
}

/* Waits for events on fd until deadline (monotonic us). 0, or -1 on timeout. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - clock_mono_us();
        if (left <= 0)
            return -1;
        struct pollfd pfd = {.fd = fd, .events = events};
        int r = poll(&pfd, 1, (int)((left + 999) / 1000));
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

int ws_http_get(const char *url, const char *path, size_t body_max, int timeout_ms,
                struct httpc_resp *out, struct err *e)
{
    struct ws_url u;
    int rc = parse_url(url, &u, e);
    if (rc != 0)
        return rc;
    int64_t deadline = clock_mono_ms() + timeout_ms;
    int s = netns_socket(u.netns, u.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (s < 0)
        return err_set(e, E_UNAVAIL, "unavailable", "socket: %s", strerror(-s));
    if ((rc = httpc_connect(s, (struct sockaddr *)&u.addr, u.addrlen, deadline)) != 0) {
        close(s);
        return err_set(e, E_UNAVAIL, "unavailable", "cannot connect to the browser: %s",
                       strerror(-rc));
    }
    struct httpc_req rq = {.method = "GET",
                           .target = path,
                           .host = u.hostport,
                           .body_max = body_max,
                           .deadline_ms = deadline};
    return httpc_exchange(s, &rq, out, e);
}

int ws_connect(const char *url, int timeout_ms, int *fd, char **leftover, size_t *leftover_len,
               struct err *e)
{
    struct ws_url u;
    int rc = parse_url(url, &u, e);
    if (rc != 0)
        return rc;
    int64_t deadline = clock_mono_us() + (int64_t)timeout_ms * 1000;

    int s = netns_socket(u.netns, u.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (s < 0)
        return err_set(e, E_UNAVAIL, "unavailable", "socket: %s", strerror(-s));
    int one = 1;
    (void)setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(s, (struct sockaddr *)&u.addr, u.addrlen) != 0) {
        int soerr = errno;
        if (soerr == EINPROGRESS) {
            socklen_t sl = sizeof(soerr);
            if (wait_fd(s, POLLOUT, deadline) != 0)
                soerr = ETIMEDOUT;
            else if (getsockopt(s, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0)
                soerr = errno;
        }
        if (soerr != 0) {
            close(s);
            return err_set(e, E_UNAVAIL, "unavailable", "cannot connect to the browser: %s",
                           strerror(soerr));
        }
    }

    unsigned char nonce[16];
    char key[WS_KEY_LEN + 1], accept[WS_ACCEPT_LEN + 1];
    crypto_random(nonce, sizeof(nonce));
    EVP_EncodeBlock((unsigned char *)key, nonce, sizeof(nonce));
    if (ws_accept_key(key, accept) != 0) {
        close(s);
        return err_set(e, E_INTERNAL, "internal", "generated an invalid WebSocket key");
    }
    char *req = xasprintf("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
                          "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                          "Sec-WebSocket-Version: 13\r\n\r\n",
                          u.path, u.hostport, key);
    int wrc = fdio_write_all(s, req, strlen(req), deadline / 1000);
    if (wrc == -ETIMEDOUT)
        rc = err_set(e, E_UNAVAIL, "unavailable", "browser handshake timed out");
    else if (wrc != 0)
        rc = err_set(e, E_UNAVAIL, "unavailable", "browser handshake: %s", strerror(-wrc));
    xfree(req);

    size_t cap = LIM_HEADER_BYTES + 4096, got = 0, head_len = 0;
    char *buf = xmalloc(cap);
    while (rc == 0) {
        ssize_t n = recv(s, buf + got, cap - got, 0);
        if (n > 0) {
            got += (size_t)n;
            int pr = ws_parse_upgrade_response(buf, got, accept, &head_len);
            if (pr == 0)
                break;
            if (pr < 0 || got == cap)
                rc = err_set(e, E_INVALID, "bad_request",
                             "the browser refused the WebSocket handshake");
        } else if (n == 0) {
            rc = err_set(e, E_UNAVAIL, "unavailable", "the browser closed during the handshake");
        } else if (errno != EAGAIN && errno != EINTR) {
            rc = err_set(e, E_UNAVAIL, "unavailable", "browser handshake: %s", strerror(errno));
        } else if (wait_fd(s, POLLIN, deadline) != 0) {
            rc = err_set(e, E_UNAVAIL, "unavailable", "browser handshake timed out");
        }
    }
    if (rc != 0) {
        xfree(buf);
        close(s);
        return rc;
    }
    *leftover = NULL;
    *leftover_len = got - head_len;
    if (*leftover_len > 0) {
        *leftover = xmalloc(*leftover_len);
        memcpy(*leftover, buf + head_len, *leftover_len);
    }
    xfree(buf);
    *fd = s;
    return 0;
}

ssize_t ws_sock_recv(wslay_event_context_ptr ws, struct ws_sock *s, uint8_t *buf, size_t len)
{
    if (s->extra_off < s->extra_len) {
        size_t n = s->extra_len - s->extra_off;
        if (n > len)
            n = len;
        memcpy(buf, s->extra + s->extra_off, n);
        s->extra_off += n;
        return (ssize_t)n;
    }
    ssize_t n = recv(s->fd, buf, len, 0);
    if (n > 0)
        return n;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        wslay_event_set_error(ws, WSLAY_ERR_WOULDBLOCK);
    else
        wslay_event_set_error(ws, WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
}

ssize_t ws_sock_send(wslay_event_context_ptr ws, struct ws_sock *s, const uint8_t *data, size_t len,
                     int flags)
{
    ssize_t n = send(s->fd, data, len, MSG_NOSIGNAL | ((flags & WSLAY_MSG_MORE) ? MSG_MORE : 0));
    if (n >= 0)
        return n;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        wslay_event_set_error(ws, WSLAY_ERR_WOULDBLOCK);
    else
        wslay_event_set_error(ws, WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
}

int ws_genmask_cb(wslay_event_context_ptr ws, uint8_t *buf, size_t len, void *user)
{
    (void)ws;
    (void)user;
    crypto_random(buf, len);
    return 0;
}
