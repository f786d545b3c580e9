/*
 * netcfg: BrowserNetworkConfig validation and matching ("Network rules" 1-9).
 *
 * One parser per entry kind serves both netcfg_validate() (which turns a
 * parse failure into a field error naming the rule) and netcfg_compile()
 * (which keeps the parsed form), so what is accepted and what is matched can
 * never drift apart. Addresses are kept as 16 bytes plus a family; an IPv4
 * address uses the first 4 bytes. See docs/domain-netcfg.md.
 */
#include "domain/netcfg.h"

#include <arpa/inet.h>
#include <libpsl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/xalloc.h"

/* Longest DNS name without its trailing dot (RFC 1035), and longest label. */
#define DNS_NAME_MAX  253
#define DNS_LABEL_MAX 63
/* Reason messages for one entry; err_field() bounds the final text anyway. */
#define WHY_MAX 256

/* Rule 2: the only ranges private_hosts may name, and the defaults when omitted. */
struct nc_range {
    int fam;
    uint8_t addr[16];
    int plen;
    const char *text;
};

static const struct nc_range private_ranges[] = {
    {4, {10}, 8, "10.0.0.0/8"},
    {4, {172, 16}, 12, "172.16.0.0/12"},
    {4, {192, 168}, 16, "192.168.0.0/16"},
    {4, {100, 64}, 10, "100.64.0.0/10"},
    {6, {0xfc}, 7, "fc00::/7"},
};
#define NRANGES (sizeof private_ranges / sizeof private_ranges[0])
#define RANGES_TEXT                                                                                \
    "only 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10 and fc00::/7 are accepted"

enum nc_kind {
    NC_HOST, /* exact hostname */
    NC_WILD, /* "*." + suffix: strict subdomains of suffix */
    NC_ADDR, /* IP address (plen 32/128) or CIDR range */
};

/* One parsed private_hosts entry or route host pattern. name holds the
 * hostname or wildcard suffix in lower case without a trailing dot. */
struct nc_parsed {
    enum nc_kind kind;
    char name[DNS_NAME_MAX + 1];
    int fam;
    uint8_t addr[16];
    int plen;
    int port; /* 0 = any port */
};

struct nc_entry {
    enum nc_kind kind;
    char *name;
    size_t namelen;
    int fam;
    uint8_t addr[16];
    int plen;
    int port;
};

struct nc_pattern {
    int wild;
    char *name; /* hostname, or the suffix of a wildcard */
    size_t namelen;
};

struct nc_route {
    struct nc_pattern *hosts;
    size_t nhosts;
    char *id;
    char *name;
};

struct netcfg {
    struct nc_entry *priv;
    size_t npriv;
    struct nc_route *routes;
    size_t nroutes;
};

/* ---- public suffix list ------------------------------------------------ */

/* Set once at startup by netcfg_psl_load(); otherwise libpsl's built-in list. */
static psl_ctx_t *loaded_psl;

static const psl_ctx_t *suffix_list(void)
{
    return loaded_psl ? loaded_psl : psl_builtin();
}

int netcfg_psl_load(const char *path)
{
    if (!path)
        return E_INVALID;
    psl_ctx_t *ctx = psl_load_file(path);
    /* A file that parses but does not know co.uk is not a public suffix list. */
    if (!ctx || psl_is_public_suffix2(ctx, "co.uk", PSL_TYPE_ICANN) != 1) {
        psl_free(ctx);
        return E_INVALID;
    }
    psl_free(loaded_psl);
    loaded_psl = ctx;
    return 0;
}

/* Without any list every suffix counts as public: wildcards fail closed. */
static int is_public_suffix(const char *lower)
{
    const psl_ctx_t *ctx = suffix_list();
    return !ctx || psl_is_public_suffix2(ctx, lower, PSL_TYPE_ANY) != 0;
}

/* ---- small helpers ----------------------------------------------------- */

static void fmt_bounded(char *dst, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fmt_bounded(char *dst, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, cap, fmt, ap);
    va_end(ap);
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int is_hex(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static char to_lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

static int hex_val(char c)
{
    if (is_digit(c))
        return c - '0';
    return to_lower(c) - 'a' + 10;
}

/* Characters in a UTF-8 string (the Limits table counts characters). */
static size_t utf8_chars(const char *s, size_t n)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            count++;
    return count;
}

static const char *memchr_c(const char *s, size_t n, char c)
{
    return memchr(s, c, n);
}

static size_t count_char(const char *s, size_t n, char c)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += s[i] == c;
    return k;
}

/* Decimal 1-65535 without sign or leading zeros. */
static int parse_port(const char *s, size_t n, int *port)
{
    if (n == 0 || n > 5 || s[0] == '0')
        return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!is_digit(s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < 1 || v > 65535)
        return -1;
    *port = (int)v;
    return 0;
}

/* Dotted decimal a.b.c.d, each 0-255 without leading zeros (a leading zero
 * means octal to a browser, so it is not accepted as a canonical entry). */
static int parse_ipv4_strict(const char *s, size_t n, uint8_t out[4])
{
    size_t i = 0;
    for (int part = 0; part < 4; part++) {
        if (part > 0) {
            if (i >= n || s[i] != '.')
                return -1;
            i++;
        }
        size_t start = i;
        int v = 0;
        while (i < n && is_digit(s[i]) && i - start < 3)
            v = v * 10 + (s[i++] - '0');
        size_t len = i - start;
        if (len == 0 || v > 255 || (len > 1 && s[start] == '0'))
            return -1;
        out[part] = (uint8_t)v;
    }
    return i == n ? 0 : -1;
}

/* Any textual IPv6 form inet_pton(3) accepts (compressed, upper case, with an
 * embedded IPv4 tail); zone identifiers are not addresses and are refused. */
static int parse_ipv6(const char *s, size_t n, uint8_t out[16])
{
    char buf[64];
    if (n == 0 || n >= sizeof buf || memchr_c(s, n, '%') || memchr_c(s, n, '\0'))
        return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return inet_pton(AF_INET6, buf, out) == 1 ? 0 : -1;
}

/* The WHATWG URL "IPv4 number": decimal, 0x hex (may be empty) or 0-led
 * octal. Returns -1 on a non-number; values above 2^32 saturate. */
static int parse_ipv4_number(const char *s, size_t n, uint64_t *out)
{
    int radix = 10;
    if (n == 0)
        return -1;
    if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        radix = 16;
        s += 2;
        n -= 2;
    } else if (n >= 2 && s[0] == '0') {
        radix = 8;
        s += 1;
        n -= 1;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        int d;
        if (radix == 16 && is_hex(s[i]))
            d = hex_val(s[i]);
        else if (radix == 10 && is_digit(s[i]))
            d = s[i] - '0';
        else if (radix == 8 && s[i] >= '0' && s[i] <= '7')
            d = s[i] - '0';
        else
            return -1;
        if (v <= UINT32_MAX)
            v = v * (uint64_t)radix + (uint64_t)d;
    }
    *out = v;
    return 0;
}

/* Strips one trailing dot, as DNS and URLs treat "example.com." as "example.com". */
static size_t strip_dot(const char *s, size_t n)
{
    return (n > 0 && s[n - 1] == '.') ? n - 1 : n;
}

/* WHATWG "ends in a number": the last label is all digits or a 0x hex
 * number, so a browser reads the whole host as an IPv4 address. */
static int ends_in_number(const char *s, size_t n)
{
    n = strip_dot(s, n);
    size_t start = n;
    while (start > 0 && s[start - 1] != '.')
        start--;
    const char *last = s + start;
    size_t len = n - start;
    if (len == 0)
        return 0;
    size_t i = 0;
    while (i < len && is_digit(last[i]))
        i++;
    if (i == len)
        return 1;
    uint64_t ignored;
    return len >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') &&
           parse_ipv4_number(last, len, &ignored) == 0;
}

/* An IPv4 host as a browser reads it from a URL ("10.1" is 10.0.0.1). */
static int parse_ipv4_url(const char *s, size_t n, uint8_t out[4])
{
    uint64_t parts[4];
    size_t count = 0, start = 0;
    n = strip_dot(s, n);
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.')
            continue;
        if (count == 4 || parse_ipv4_number(s + start, i - start, &parts[count]) != 0)
            return -1;
        count++;
        start = i + 1;
    }
    if (count == 0)
        return -1;
    for (size_t i = 0; i + 1 < count; i++)
        if (parts[i] > 255)
            return -1;
    uint64_t limit = 1ull << (8 * (5 - count));
    if (parts[count - 1] >= limit)
        return -1;
    uint64_t v = parts[count - 1];
    for (size_t i = 0; i + 1 < count; i++)
        v += parts[i] << (8 * (3 - i));
    for (int i = 0; i < 4; i++)
        out[i] = (uint8_t)(v >> (8 * (3 - i)));
    return 0;
}

static int addr_bytes(int fam)
{
    return fam == 4 ? 4 : 16;
}

static int prefix_equal(const uint8_t *a, const uint8_t *b, int plen)
{
    int full = plen / 8, rest = plen % 8;
    if (memcmp(a, b, (size_t)full) != 0)
        return 0;
    if (rest == 0)
        return 1;
    uint8_t mask = (uint8_t)(0xFF << (8 - rest));
    return (a[full] & mask) == (b[full] & mask);
}

static int host_bits_zero(int fam, const uint8_t *a, int plen)
{
    for (int bit = plen; bit < addr_bytes(fam) * 8; bit++)
        if (a[bit / 8] & (0x80 >> (bit % 8)))
            return 0;
    return 1;
}

static void mask_host_bits(int fam, uint8_t *a, int plen)
{
    for (int bit = plen; bit < addr_bytes(fam) * 8; bit++)
        a[bit / 8] &= (uint8_t) ~(0x80 >> (bit % 8));
}

/* Index of the rule 2 range that wholly contains addr/plen, or -1. */
static int private_range_of(int fam, const uint8_t *a, int plen)
{
    for (size_t i = 0; i < NRANGES; i++) {
        const struct nc_range *r = &private_ranges[i];
        if (r->fam == fam && plen >= r->plen && prefix_equal(a, r->addr, r->plen))
            return (int)i;
    }
    return -1;
}

/* Index of a rule 2 range lying inside addr/plen (a CIDR that is too wide), or -1. */
static int covered_range(int fam, const uint8_t *a, int plen)
{
    for (size_t i = 0; i < NRANGES; i++) {
        const struct nc_range *r = &private_ranges[i];
        if (r->fam == fam && r->plen >= plen && prefix_equal(a, r->addr, plen))
            return (int)i;
    }
    return -1;
}

/* Rule 5's words for an address outside every private range. */
static const char *addr_class(int fam, const uint8_t *a)
{
    static const uint8_t zero[16];
    if (fam == 4) {
        if (a[0] == 0)
            return "unspecified";
        if (a[0] == 127)
            return "loopback";
        if (a[0] == 169 && a[1] == 254)
            return "link-local";
        if (a[0] >= 224 && a[0] <= 239)
            return "multicast";
        return "public or reserved";
    }
    if (memcmp(a, zero, 16) == 0)
        return "unspecified";
    if (memcmp(a, zero, 15) == 0 && a[15] == 1)
        return "loopback";
    if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
        return "link-local";
    if (a[0] == 0xff)
        return "multicast";
    if (memcmp(a, zero, 10) == 0 && a[10] == 0xff && a[11] == 0xff)
        return "IPv4-mapped (write the IPv4 address itself)";
    return "public or reserved";
}

static void addr_text(int fam, const uint8_t *a, char *buf, size_t cap)
{
    if (!inet_ntop(fam == 4 ? AF_INET : AF_INET6, a, buf, (socklen_t)cap))
        fmt_bounded(buf, cap, "?");
}

/* Rule 5 for an address or range that parsed: canonical and wholly private. */
static int check_private_addr(const struct nc_parsed *p, int is_cidr, char *why)
{
    char text[64];
    addr_text(p->fam, p->addr, text, sizeof text);
    if (is_cidr && !host_bits_zero(p->fam, p->addr, p->plen)) {
        uint8_t masked[16];
        char mtext[64];
        memcpy(masked, p->addr, sizeof masked);
        mask_host_bits(p->fam, masked, p->plen);
        addr_text(p->fam, masked, mtext, sizeof mtext);
        fmt_bounded(why, WHY_MAX,
                    "CIDR %s/%d is not canonical (host bits must be zero; did you mean %s/%d?)",
                    text, p->plen, mtext, p->plen);
        return -1;
    }
    if (private_range_of(p->fam, p->addr, p->plen) >= 0)
        return 0;
    int base = private_range_of(p->fam, p->addr, p->fam == 4 ? 32 : 128);
    if (is_cidr && base >= 0)
        fmt_bounded(why, WHY_MAX, "CIDR %s/%d is wider than the private range %s; " RANGES_TEXT,
                    text, p->plen, private_ranges[base].text);
    else if (is_cidr && (base = covered_range(p->fam, p->addr, p->plen)) >= 0)
        fmt_bounded(why, WHY_MAX, "CIDR %s/%d covers more than the private range %s; " RANGES_TEXT,
                    text, p->plen, private_ranges[base].text);
    else if (is_cidr)
        fmt_bounded(why, WHY_MAX, "CIDR %s/%d is %s; " RANGES_TEXT, text, p->plen,
                    addr_class(p->fam, p->addr));
    else
        fmt_bounded(why, WHY_MAX, "address %s is %s; " RANGES_TEXT, text,
                    addr_class(p->fam, p->addr));
    return -1;
}

/* A DNS name (no trailing dot): labels of 1-63 letters, digits and '-', not
 * starting or ending with '-', at most 253 characters. Never resolved. */
static int check_dns_name(const char *s, size_t n, char *why)
{
    if (n == 0) {
        fmt_bounded(why, WHY_MAX, "hostname must not be empty");
        return -1;
    }
    if (n > DNS_NAME_MAX) {
        fmt_bounded(why, WHY_MAX, "hostname longer than %d characters", DNS_NAME_MAX);
        return -1;
    }
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.') {
            if (!is_alpha(s[i]) && !is_digit(s[i]) && s[i] != '-') {
                fmt_bounded(why, WHY_MAX,
                            "not a valid hostname: only letters, digits, '-' and '.' are allowed");
                return -1;
            }
            continue;
        }
        size_t len = i - start;
        if (len == 0 || len > DNS_LABEL_MAX) {
            fmt_bounded(why, WHY_MAX, "not a valid hostname: every label must be 1-%d characters",
                        DNS_LABEL_MAX);
            return -1;
        }
        if (s[start] == '-' || s[i - 1] == '-') {
            fmt_bounded(why, WHY_MAX,
                        "not a valid hostname: a label must not start or end with '-'");
            return -1;
        }
        start = i + 1;
    }
    if (ends_in_number(s, n)) {
        fmt_bounded(why, WHY_MAX,
                    "not a valid IPv4 address (write dotted decimal a.b.c.d without leading "
                    "zeros) nor a hostname (the last label must not be a number)");
        return -1;
    }
    return 0;
}

/* Rule 7: a hostname, or one leading "*." over a suffix of at least two
 * labels that is not a public suffix. Fills p->kind and p->name. */
static int parse_host_pattern(const char *s, size_t n, struct nc_parsed *p, char *why)
{
    int wild = n >= 2 && s[0] == '*' && s[1] == '.';
    const char *name = wild ? s + 2 : s;
    size_t len = wild ? n - 2 : n;
    if (memchr_c(name, len, '*')) {
        fmt_bounded(
            why, WHY_MAX,
            "a wildcard is exactly one leading '*.' over a hostname suffix (*.example.com)");
        return -1;
    }
    len = strip_dot(name, len);
    if (check_dns_name(name, len, why) != 0)
        return -1;
    for (size_t i = 0; i < len; i++)
        p->name[i] = to_lower(name[i]);
    p->name[len] = '\0';
    p->kind = wild ? NC_WILD : NC_HOST;
    p->port = 0;
    if (!wild)
        return 0;
    if (count_char(p->name, len, '.') < 1) {
        fmt_bounded(why, WHY_MAX,
                    "a wildcard needs a suffix of at least two labels (*.example.com, not *.%s)",
                    p->name);
        return -1;
    }
    if (is_public_suffix(p->name)) {
        fmt_bounded(why, WHY_MAX, "wildcard over the public suffix %s is not allowed", p->name);
        return -1;
    }
    return 0;
}

/* Bracketed exact IPv6 with an optional port: "[fd00::1]", "[fd00::1]:443". */
static int parse_bracketed(const char *s, size_t n, struct nc_parsed *p, char *why)
{
    const char *close = memchr_c(s, n, ']');
    if (!close) {
        fmt_bounded(why, WHY_MAX, "'[' without a closing ']'");
        return -1;
    }
    const char *inner = s + 1;
    size_t innerlen = (size_t)(close - inner);
    const char *rest = close + 1;
    size_t restlen = n - (size_t)(rest - s);
    if (memchr_c(inner, innerlen, '/') || (restlen > 0 && rest[0] == '/')) {
        fmt_bounded(why, WHY_MAX, "IPv6 CIDR ranges are written without brackets (fd00::/8)");
        return -1;
    }
    if (parse_ipv6(inner, innerlen, p->addr) != 0) {
        fmt_bounded(why, WHY_MAX, "not a valid bracketed IPv6 address");
        return -1;
    }
    p->kind = NC_ADDR;
    p->fam = 6;
    p->plen = 128;
    p->port = 0;
    if (restlen > 0 && (rest[0] != ':' || parse_port(rest + 1, restlen - 1, &p->port) != 0)) {
        fmt_bounded(why, WHY_MAX, "after ']' only ':' and a port 1-65535 may follow");
        return -1;
    }
    return check_private_addr(p, 0, why);
}

/* Unbracketed "address/prefix"; rule 7: no port. */
static int parse_cidr(const char *s, size_t n, const char *slash, struct nc_parsed *p, char *why)
{
    const char *base = s;
    size_t baselen = (size_t)(slash - s);
    const char *pl = slash + 1;
    size_t pllen = n - baselen - 1;
    const char *colon = memchr_c(pl, pllen, ':');
    if (colon) {
        fmt_bounded(why, WHY_MAX, "CIDR ranges may not carry a port");
        return -1;
    }
    p->kind = NC_ADDR;
    p->port = 0;
    if (memchr_c(base, baselen, ':')) {
        p->fam = 6;
        if (parse_ipv6(base, baselen, p->addr) != 0) {
            fmt_bounded(why, WHY_MAX, "not a valid IPv6 CIDR range (fd00::/8)");
            return -1;
        }
    } else {
        p->fam = 4;
        memset(p->addr, 0, sizeof p->addr);
        if (parse_ipv4_strict(base, baselen, p->addr) != 0) {
            fmt_bounded(why, WHY_MAX,
                        "not a valid IPv4 CIDR range (dotted decimal a.b.c.d/n without leading "
                        "zeros)");
            return -1;
        }
    }
    int max = p->fam == 4 ? 32 : 128, v = 0;
    int ok = pllen >= 1 && pllen <= 3 && !(pllen > 1 && pl[0] == '0');
    for (size_t i = 0; ok && i < pllen; i++) {
        ok = is_digit(pl[i]);
        v = v * 10 + (pl[i] - '0');
    }
    if (!ok || v > max) {
        fmt_bounded(why, WHY_MAX, "prefix length must be an integer 0-%d without leading zeros",
                    max);
        return -1;
    }
    p->plen = v;
    return check_private_addr(p, 1, why);
}

/* Rules 4-7 for one private_hosts entry (already length-checked). */
static int parse_private_entry(const char *s, size_t n, struct nc_parsed *p, char *why)
{
    memset(p, 0, sizeof *p);
    if (n == 0) {
        fmt_bounded(why, WHY_MAX, "must not be empty");
        return -1;
    }
    if (s[0] == '[')
        return parse_bracketed(s, n, p, why);
    const char *slash = memchr_c(s, n, '/');
    if (slash)
        return parse_cidr(s, n, slash, p, why);
    if (count_char(s, n, ':') >= 2) {
        uint8_t a[16];
        if (parse_ipv6(s, n, a) == 0)
            fmt_bounded(why, WHY_MAX, "exact IPv6 addresses must be bracketed ([%.*s])", (int)n, s);
        else
            fmt_bounded(why, WHY_MAX, "not a valid hostname, IP address or CIDR range");
        return -1;
    }
    const char *colon = memchr_c(s, n, ':');
    size_t hostlen = colon ? (size_t)(colon - s) : n;
    int port = 0;
    if (colon && parse_port(colon + 1, n - hostlen - 1, &port) != 0) {
        fmt_bounded(why, WHY_MAX, "port must be an integer 1-65535 without leading zeros");
        return -1;
    }
    if (parse_ipv4_strict(s, hostlen, p->addr) == 0) {
        p->kind = NC_ADDR;
        p->fam = 4;
        p->plen = 32;
        p->port = port;
        return check_private_addr(p, 0, why);
    }
    if (parse_host_pattern(s, hostlen, p, why) != 0)
        return -1;
    p->port = port;
    return 0;
}

/* Rule 9 host pattern: a hostname or wildcard; decided: no IP literals (the
 * rule matches "a destination hostname") and no port ("regardless of port"). */
static int parse_route_host(const char *s, size_t n, struct nc_parsed *p, char *why)
{
    memset(p, 0, sizeof *p);
    if (n == 0) {
        fmt_bounded(why, WHY_MAX, "must not be empty");
        return -1;
    }
    const char *colon = memchr_c(s, n, ':');
    size_t hostlen = colon ? (size_t)(colon - s) : n;
    if (s[0] == '[' || memchr_c(s, n, '/') || count_char(s, n, ':') >= 2 ||
        ends_in_number(s, hostlen)) {
        fmt_bounded(why, WHY_MAX,
                    "route hosts are hostnames or wildcard patterns; IP addresses and CIDR "
                    "ranges are not supported");
        return -1;
    }
    if (colon) {
        fmt_bounded(why, WHY_MAX, "route hosts may not carry a port (routes match any port)");
        return -1;
    }
    return parse_host_pattern(s, n, p, why);
}

/* ---- validation -------------------------------------------------------- */

/* A JSON string as (bytes, length), or NULL when it holds a NUL byte. */
static const char *string_bytes(const json_t *v, size_t *n)
{
    const char *s = json_string_value(v);
    *n = json_string_length(v);
    return memchr_c(s, *n, '\0') ? NULL : s;
}

static int validate_private_hosts(const char *path, const json_t *ph, struct err *e)
{
    int rc = 0;
    char ipath[512], why[WHY_MAX];
    if (!json_is_array(ph))
        return err_field(e, path, "must be an array of strings");
    size_t n = json_array_size(ph);
    if (n > NETCFG_PRIVATE_HOSTS_MAX)
        rc = err_field(e, path, "at most %d entries (got %zu)", NETCFG_PRIVATE_HOSTS_MAX, n);
    for (size_t i = 0; i < n; i++) {
        const json_t *item = json_array_get(ph, i);
        fmt_bounded(ipath, sizeof ipath, "%s[%zu]", path, i);
        size_t len;
        const char *s;
        struct nc_parsed p;
        if (!json_is_string(item)) {
            rc = err_field(e, ipath, "must be a string");
        } else if (!(s = string_bytes(item, &len))) {
            rc = err_field(e, ipath, "must not contain NUL characters");
        } else if (utf8_chars(s, len) > NETCFG_PRIVATE_HOST_LEN) {
            rc = err_field(e, ipath, "at most %d characters", NETCFG_PRIVATE_HOST_LEN);
        } else if (parse_private_entry(s, len, &p, why) != 0) {
            rc = err_field(e, ipath, "%s", why);
        }
    }
    return rc;
}

/* Normalized route host patterns seen so far, for "A host pattern may
 * appear in only one route". */
struct seen {
    char pattern[DNS_NAME_MAX + 3];
    size_t route;
};

static int validate_target(const char *path, const json_t *t, struct err *e)
{
    char kpath[512];
    const char *key;
    json_t *val;
    int rc = 0, have = 0;
    if (!json_is_object(t))
        return err_field(e, path, "must be an object with exactly one of id or name");
    json_object_foreach((json_t *)t, key, val)
    {
        fmt_bounded(kpath, sizeof kpath, "%s.%s", path, key);
        if (strcmp(key, "id") != 0 && strcmp(key, "name") != 0) {
            rc = err_field(e, kpath, "unknown field (a route proxy has exactly one of id or name)");
            continue;
        }
        have++;
        if (!json_is_string(val) || json_string_length(val) == 0)
            rc = err_field(e, kpath, "must be a non-empty string");
    }
    if (have != 1)
        rc = err_field(e, path, "must have exactly one of id or name");
    return rc;
}

static int validate_route(const char *path, size_t ri, const json_t *r, struct seen *seen,
                          size_t *nseen, struct err *e)
{
    char hpath[512], fpath[512], why[WHY_MAX];
    const char *key;
    json_t *val;
    int rc = 0;
    if (!json_is_object(r))
        return err_field(e, path, "must be an object with hosts and proxy");
    json_object_foreach((json_t *)r, key, val)
    {
        if (strcmp(key, "hosts") != 0 && strcmp(key, "proxy") != 0) {
            fmt_bounded(fpath, sizeof fpath, "%s.%s", path, key);
            rc = err_field(e, fpath, "unknown field (a route has only hosts and proxy)");
        }
    }
    const json_t *hosts = json_object_get(r, "hosts");
    fmt_bounded(fpath, sizeof fpath, "%s.hosts", path);
    if (!hosts) {
        rc = err_field(e, fpath, "is required");
    } else if (!json_is_array(hosts)) {
        rc = err_field(e, fpath, "must be an array of strings");
    } else {
        size_t n = json_array_size(hosts);
        if (n < 1 || n > NETCFG_ROUTE_HOSTS_MAX)
            rc = err_field(e, fpath, "must have 1-%d entries (got %zu)", NETCFG_ROUTE_HOSTS_MAX, n);
        for (size_t i = 0; i < n; i++) {
            const json_t *item = json_array_get(hosts, i);
            fmt_bounded(hpath, sizeof hpath, "%s[%zu]", fpath, i);
            size_t len;
            const char *s;
            struct nc_parsed p;
            if (!json_is_string(item)) {
                rc = err_field(e, hpath, "must be a string");
                continue;
            }
            if (!(s = string_bytes(item, &len))) {
                rc = err_field(e, hpath, "must not contain NUL characters");
                continue;
            }
            if (utf8_chars(s, len) > NETCFG_ROUTE_HOST_LEN) {
                rc = err_field(e, hpath, "at most %d characters", NETCFG_ROUTE_HOST_LEN);
                continue;
            }
            if (parse_route_host(s, len, &p, why) != 0) {
                rc = err_field(e, hpath, "%s", why);
                continue;
            }
            if (!seen || i >= NETCFG_ROUTE_HOSTS_MAX)
                continue; /* over the limits: already an error, skip the quadratic check */
            struct seen *cur = &seen[*nseen];
            fmt_bounded(cur->pattern, sizeof cur->pattern, "%s%s", p.kind == NC_WILD ? "*." : "",
                        p.name);
            cur->route = ri;
            int dup = 0;
            for (size_t k = 0; k < *nseen; k++) {
                if (seen[k].route != ri && strcmp(seen[k].pattern, cur->pattern) == 0) {
                    rc = err_field(
                        e, hpath,
                        "host pattern %s already appears in proxy_routes[%zu]; a host pattern "
                        "may appear in only one route",
                        cur->pattern, seen[k].route);
                    dup = 1;
                    break;
                }
            }
            if (!dup)
                (*nseen)++;
        }
    }
    const json_t *target = json_object_get(r, "proxy");
    fmt_bounded(fpath, sizeof fpath, "%s.proxy", path);
    if (!target)
        rc = err_field(e, fpath, "is required");
    else if (validate_target(fpath, target, e) != 0)
        rc = E_INVALID;
    return rc;
}

static int validate_routes(const char *path, const json_t *pr, struct err *e)
{
    char rpath[512];
    int rc = 0;
    if (!json_is_array(pr))
        return err_field(e, path, "must be an array of routes");
    size_t n = json_array_size(pr);
    if (n > NETCFG_ROUTES_MAX)
        rc = err_field(e, path, "at most %d routes (got %zu)", NETCFG_ROUTES_MAX, n);
    struct seen *seen = xcalloc(NETCFG_ROUTES_MAX * NETCFG_ROUTE_HOSTS_MAX, sizeof *seen);
    size_t nseen = 0;
    for (size_t i = 0; i < n; i++) {
        fmt_bounded(rpath, sizeof rpath, "%s[%zu]", path, i);
        if (validate_route(rpath, i, json_array_get(pr, i), i < NETCFG_ROUTES_MAX ? seen : NULL,
                           &nseen, e) != 0)
            rc = E_INVALID;
    }
    xfree(seen);
    return rc;
}

int netcfg_validate(const char *path, const json_t *v, int allow_routes, struct err *e)
{
    char fpath[512];
    const char *key;
    json_t *val;
    int rc = 0;
    if (!path)
        path = "network";
    if (!json_is_object(v))
        return err_field(e, path, "must be an object (BrowserNetworkConfig)");
    json_object_foreach((json_t *)v, key, val)
    {
        fmt_bounded(fpath, sizeof fpath, "%s.%s", path, key);
        if (strcmp(key, "private_hosts") == 0) {
            if (validate_private_hosts(fpath, val, e) != 0)
                rc = E_INVALID;
        } else if (strcmp(key, "proxy_routes") == 0) {
            if (!allow_routes)
                rc = err_field(e, fpath, "routes are not supported on browser pools");
            else if (validate_routes(fpath, val, e) != 0)
                rc = E_INVALID;
        } else {
            rc = err_field(e, fpath, "unknown field (expected private_hosts or proxy_routes)");
        }
    }
    return rc;
}

/* ---- compilation ------------------------------------------------------- */

static void entry_from_parsed(struct nc_entry *en, const struct nc_parsed *p)
{
    en->kind = p->kind;
    en->fam = p->fam;
    memcpy(en->addr, p->addr, sizeof en->addr);
    en->plen = p->plen;
    en->port = p->port;
    if (p->kind != NC_ADDR) {
        en->name = xstrdup(p->name);
        en->namelen = strlen(p->name);
    }
}

static void compile_routes(struct netcfg *nc, const json_t *pr)
{
    char why[WHY_MAX];
    nc->nroutes = json_array_size(pr);
    nc->routes = xcalloc(nc->nroutes ? nc->nroutes : 1, sizeof *nc->routes);
    for (size_t i = 0; i < nc->nroutes; i++) {
        const json_t *r = json_array_get(pr, i);
        const json_t *hosts = json_object_get(r, "hosts");
        const json_t *t = json_object_get(r, "proxy");
        struct nc_route *rt = &nc->routes[i];
        rt->nhosts = json_array_size(hosts);
        rt->hosts = xcalloc(rt->nhosts, sizeof *rt->hosts);
        for (size_t k = 0; k < rt->nhosts; k++) {
            const json_t *h = json_array_get(hosts, k);
            struct nc_parsed p;
            if (parse_route_host(json_string_value(h), json_string_length(h), &p, why) != 0)
                continue; /* unreachable: validated */
            rt->hosts[k].wild = p.kind == NC_WILD;
            rt->hosts[k].name = xstrdup(p.name);
            rt->hosts[k].namelen = strlen(p.name);
        }
        const json_t *id = json_object_get(t, "id");
        const json_t *name = json_object_get(t, "name");
        if (id)
            rt->id = xstrdup(json_string_value(id));
        else
            rt->name = xstrdup(json_string_value(name));
    }
}

struct netcfg *netcfg_compile(const json_t *v)
{
    char why[WHY_MAX];
    struct err e;
    err_init(&e);
    if (v && netcfg_validate("network", v, 1, &e) != 0)
        return NULL;
    struct netcfg *nc = xcalloc(1, sizeof *nc);
    const json_t *ph = v ? json_object_get(v, "private_hosts") : NULL;
    if (!ph) {
        /* Rule 2: omitted -> the private ranges route directly. */
        nc->npriv = NRANGES;
        nc->priv = xcalloc(NRANGES, sizeof *nc->priv);
        for (size_t i = 0; i < NRANGES; i++) {
            nc->priv[i].kind = NC_ADDR;
            nc->priv[i].fam = private_ranges[i].fam;
            memcpy(nc->priv[i].addr, private_ranges[i].addr, 16);
            nc->priv[i].plen = private_ranges[i].plen;
        }
    } else {
        /* Rule 3: exactly the listed entries; an empty list disables the defaults. */
        size_t n = json_array_size(ph);
        nc->priv = xcalloc(n ? n : 1, sizeof *nc->priv);
        for (size_t i = 0; i < n; i++) {
            const json_t *item = json_array_get(ph, i);
            struct nc_parsed p;
            if (parse_private_entry(json_string_value(item), json_string_length(item), &p, why) !=
                0)
                continue; /* unreachable: validated */
            entry_from_parsed(&nc->priv[nc->npriv++], &p);
        }
    }
    const json_t *pr = v ? json_object_get(v, "proxy_routes") : NULL;
    if (pr)
        compile_routes(nc, pr);
    return nc;
}

void netcfg_free(struct netcfg *nc)
{
    if (!nc)
        return;
    for (size_t i = 0; i < nc->npriv; i++)
        xfree(nc->priv[i].name);
    xfree(nc->priv);
    for (size_t i = 0; i < nc->nroutes; i++) {
        for (size_t k = 0; k < nc->routes[i].nhosts; k++)
            xfree(nc->routes[i].hosts[k].name);
        xfree(nc->routes[i].hosts);
        xfree(nc->routes[i].id);
        xfree(nc->routes[i].name);
    }
    xfree(nc->routes);
    xfree(nc);
}

/* ---- matching ---------------------------------------------------------- */

/* A request host as written in the URL, classified and normalized. */
struct nc_host {
    int is_ip;
    int fam;
    uint8_t addr[16];
    char name[DNS_NAME_MAX + 1]; /* lower case, no trailing dot */
    size_t namelen;
};

/* Returns -1 for a host no entry can match (not an IP, not a plausible name).
 * Hostnames are read leniently ('_' allowed, as browsers do) since the
 * result only picks a path for traffic already on its way. */
static int classify_host(const char *host, struct nc_host *h)
{
    size_t n = strlen(host);
    memset(h, 0, sizeof *h);
    if (n == 0)
        return -1;
    if (host[0] == '[' || memchr_c(host, n, ':')) {
        int br = host[0] == '[';
        if (br && (n < 2 || host[n - 1] != ']'))
            return -1;
        if (parse_ipv6(host + br, n - 2 * (size_t)br, h->addr) != 0)
            return -1;
        h->is_ip = 1;
        h->fam = 6;
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (memcmp(h->addr, mapped, sizeof mapped) == 0) {
            memmove(h->addr, h->addr + 12, 4);
            memset(h->addr + 4, 0, 12);
            h->fam = 4;
        }
        return 0;
    }
    if (ends_in_number(host, n)) {
        if (parse_ipv4_url(host, n, h->addr) != 0)
            return -1;
        h->is_ip = 1;
        h->fam = 4;
        return 0;
    }
    n = strip_dot(host, n);
    if (n == 0 || n > DNS_NAME_MAX)
        return -1;
    size_t label = 0;
    for (size_t i = 0; i < n; i++) {
        char c = host[i];
        if (c == '.') {
            if (label == 0)
                return -1;
            label = 0;
        } else if (is_alpha(c) || is_digit(c) || c == '-' || c == '_') {
            label++;
        } else {
            return -1;
        }
        h->name[i] = to_lower(c);
    }
    if (label == 0)
        return -1;
    h->name[n] = '\0';
    h->namelen = n;
    return 0;
}

/* `*.example.com` matches strict subdomains: "a.example.com", "a.b.example.com". */
static int wild_match(const char *suffix, size_t slen, const struct nc_host *h)
{
    return h->namelen > slen + 1 && h->name[h->namelen - slen - 1] == '.' &&
           memcmp(h->name + h->namelen - slen, suffix, slen) == 0;
}

int netcfg_is_private(const struct netcfg *nc, const char *host, int port)
{
    struct nc_host h;
    if (!nc || !host || classify_host(host, &h) != 0)
        return 0;
    for (size_t i = 0; i < nc->npriv; i++) {
        const struct nc_entry *en = &nc->priv[i];
        if (en->port != 0 && en->port != port)
            continue;
        int hit;
        if (en->kind == NC_ADDR)
            hit = h.is_ip && h.fam == en->fam && prefix_equal(h.addr, en->addr, en->plen);
        else if (en->kind == NC_HOST)
            hit = !h.is_ip && strcmp(h.name, en->name) == 0;
        else
            hit = !h.is_ip && wild_match(en->name, en->namelen, &h);
        if (hit)
            return 1;
    }
    return 0;
}

int netcfg_route_for(const struct netcfg *nc, const char *host)
{
    struct nc_host h;
    if (!nc || !host || classify_host(host, &h) != 0 || h.is_ip)
        return -1;
    int best = -1;
    size_t bestlen = 0;
    for (size_t r = 0; r < nc->nroutes; r++) {
        for (size_t k = 0; k < nc->routes[r].nhosts; k++) {
            const struct nc_pattern *pt = &nc->routes[r].hosts[k];
            if (!pt->name)
                continue;
            if (!pt->wild) {
                /* Patterns are unique across routes: at most one exact hit. */
                if (strcmp(pt->name, h.name) == 0)
                    return (int)r;
            } else if (pt->namelen > bestlen && wild_match(pt->name, pt->namelen, &h)) {
                best = (int)r;
                bestlen = pt->namelen;
            }
        }
    }
    return best;
}

void netcfg_route_target(const struct netcfg *nc, int i, const char **id, const char **name)
{
    *id = NULL;
    *name = NULL;
    if (!nc || i < 0 || (size_t)i >= nc->nroutes)
        return;
    *id = nc->routes[i].id;
    *name = nc->routes[i].name;
}

size_t netcfg_route_count(const struct netcfg *nc)
{
    return nc ? nc->nroutes : 0;
}
