/* addrclass: address classes and --allow-private ranges (see addrclass.h). */
#include "domain/addrclass.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/xalloc.h"

/* A prefix and the class of everything inside it. Longer prefixes are
 * listed before the shorter ones that contain them (metadata before
 * link-local), so the first match is the most specific one. */
struct prefix {
    uint8_t addr[16];
    int plen;
    enum addrclass cls;
};

static const struct prefix v4_table[] = {
    {{169, 254, 169, 254}, 32, ADDRCLASS_METADATA},
    {{127}, 8, ADDRCLASS_LOOPBACK},
    {{0}, 8, ADDRCLASS_UNSPEC},
    {{169, 254}, 16, ADDRCLASS_LINKLOCAL},
    {{10}, 8, ADDRCLASS_PRIVATE},
    {{172, 16}, 12, ADDRCLASS_PRIVATE},
    {{192, 168}, 16, ADDRCLASS_PRIVATE},
    {{100, 64}, 10, ADDRCLASS_SHARED},
    {{224}, 4, ADDRCLASS_MULTICAST},
    {{240}, 4, ADDRCLASS_RESERVED}, /* includes 255.255.255.255 */
    {{192, 0, 0}, 24, ADDRCLASS_RESERVED},
    {{192, 0, 2}, 24, ADDRCLASS_RESERVED},
    {{192, 88, 99}, 24, ADDRCLASS_RESERVED},
    {{198, 18}, 15, ADDRCLASS_RESERVED},
    {{198, 51, 100}, 24, ADDRCLASS_RESERVED},
    {{203, 0, 113}, 24, ADDRCLASS_RESERVED},
};

static const struct prefix v6_table[] = {
    {{0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54}, 128, ADDRCLASS_METADATA},
    {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 128, ADDRCLASS_LOOPBACK},
    {{0}, 128, ADDRCLASS_UNSPEC},
    {{0xfe, 0x80}, 10, ADDRCLASS_LINKLOCAL},
    {{0xfe, 0xc0}, 10, ADDRCLASS_ULA},
    {{0xfc}, 7, ADDRCLASS_ULA},
    {{0xff}, 8, ADDRCLASS_MULTICAST},
    {{0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48, ADDRCLASS_RESERVED},
    {{0x20, 0x01, 0x0d, 0xb8}, 32, ADDRCLASS_RESERVED},
    {{0x20, 0x01, 0x00, 0x00}, 32, ADDRCLASS_RESERVED},
    {{0x01, 0x00}, 64, ADDRCLASS_RESERVED},
};

static int prefix_match(const uint8_t *a, const uint8_t *p, int plen)
{
    int full = plen / 8, rest = plen % 8;
    if (memcmp(a, p, (size_t)full) != 0)
        return 0;
    if (rest == 0)
        return 1;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (a[full] & mask) == (p[full] & mask);
}

int addrclass_embedded_v4(const uint8_t a6[16], uint8_t v4[4])
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const uint8_t nat64[12] = {0x00, 0x64, 0xff, 0x9b};
    static const uint8_t zero[12] = {0};
    if (memcmp(a6, mapped, 12) == 0 || memcmp(a6, nat64, 12) == 0) {
        memcpy(v4, a6 + 12, 4);
        return 1;
    }
    /* IPv4-compatible ::a.b.c.d (deprecated; some stacks still route it to
     * IPv4). :: and ::1 are the IPv6 unspecified and loopback addresses. */
    if (memcmp(a6, zero, 12) == 0 && !(a6[12] == 0 && a6[13] == 0 && a6[14] == 0 && a6[15] <= 1)) {
        memcpy(v4, a6 + 12, 4);
        return 1;
    }
    if (a6[0] == 0x20 && a6[1] == 0x02) { /* 6to4: 2002:AABB:CCDD::/48 */
        memcpy(v4, a6 + 2, 4);
        return 1;
    }
    return 0;
}

enum addrclass addrclass_of(int fam, const uint8_t *a)
{
    uint8_t v4[4];
    if (fam == 6 && addrclass_embedded_v4(a, v4))
        return addrclass_of(4, v4);
    const struct prefix *t = fam == 4 ? v4_table : v6_table;
    size_t n = fam == 4 ? sizeof v4_table / sizeof *v4_table : sizeof v6_table / sizeof *v6_table;
    for (size_t i = 0; i < n; i++)
        if (prefix_match(a, t[i].addr, t[i].plen))
            return t[i].cls;
    return ADDRCLASS_PUBLIC;
}

const char *addrclass_name(enum addrclass c)
{
    switch (c) {
    case ADDRCLASS_PUBLIC:
        return "public";
    case ADDRCLASS_LOOPBACK:
        return "loopback";
    case ADDRCLASS_UNSPEC:
        return "unspecified";
    case ADDRCLASS_LINKLOCAL:
        return "link-local";
    case ADDRCLASS_METADATA:
        return "cloud metadata";
    case ADDRCLASS_PRIVATE:
        return "private";
    case ADDRCLASS_SHARED:
        return "shared (carrier-grade NAT)";
    case ADDRCLASS_ULA:
        return "unique local";
    case ADDRCLASS_MULTICAST:
        return "multicast";
    case ADDRCLASS_RESERVED:
        return "reserved";
    }
    return "reserved";
}

int addrclass_host_side(enum addrclass c)
{
    return c == ADDRCLASS_LOOPBACK || c == ADDRCLASS_UNSPEC || c == ADDRCLASS_LINKLOCAL ||
           c == ADDRCLASS_METADATA;
}

int addrclass_literal(const char *host, uint8_t addr[16])
{
    char h[64];
    size_t n = strlen(host);
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        host++;
        n -= 2;
    }
    if (n == 0 || n >= sizeof h)
        return 0;
    memcpy(h, host, n);
    h[n] = '\0';
    if (inet_pton(AF_INET, h, addr) == 1)
        return 4;
    if (inet_pton(AF_INET6, h, addr) == 1)
        return 6;
    return 0;
}

static int parse_range(char *s, struct addrclass_range *r)
{
    memset(r, 0, sizeof *r);
    char *slash = strchr(s, '/');
    if (slash)
        *slash = '\0';
    if (inet_pton(AF_INET, s, r->addr) == 1)
        r->fam = 4;
    else if (inet_pton(AF_INET6, s, r->addr) == 1)
        r->fam = 6;
    else
        return -1;
    int max = r->fam == 4 ? 32 : 128;
    r->plen = max;
    if (slash) {
        const char *p = slash + 1;
        if (!*p || strspn(p, "0123456789") != strlen(p) || strlen(p) > 3 || (p[0] == '0' && p[1]))
            return -1;
        r->plen = (int)strtol(p, NULL, 10);
        if (r->plen > max)
            return -1;
    }
    /* Canonical: no host bits set. */
    for (int bit = r->plen; bit < max; bit++)
        if (r->addr[bit / 8] & (0x80 >> (bit % 8)))
            return -1;
    return 0;
}

int addrclass_parse_ranges(const char *list, struct addrclass_range **out, size_t *n, struct err *e)
{
    *out = NULL;
    *n = 0;
    if (!list || !*list)
        return 0;
    char *copy = xstrdup(list);
    int rc = 0;
    for (char *tok = copy; tok && rc == 0;) {
        char *next = strchr(tok, ',');
        if (next)
            *next++ = '\0';
        while (*tok == ' ' || *tok == '\t')
            tok++;
        size_t len = strlen(tok);
        while (len && (tok[len - 1] == ' ' || tok[len - 1] == '\t'))
            tok[--len] = '\0';
        if (*tok) {
            char shown[64];
            snprintf(shown, sizeof shown, "%s", tok);
            struct addrclass_range r;
            if (parse_range(tok, &r) != 0) {
                rc = err_set(e, E_INVALID, "bad_request",
                             "--allow-private: %s is not an address or a CIDR range with its "
                             "host bits zero",
                             shown);
                break;
            }
            *out = xrealloc(*out, (*n + 1) * sizeof **out);
            (*out)[(*n)++] = r;
        }
        tok = next;
    }
    xfree(copy);
    if (rc) {
        xfree(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

int addrclass_in_ranges(const struct addrclass_range *r, size_t n, int fam, const uint8_t *a)
{
    uint8_t v4[4];
    int has4 = fam == 6 && addrclass_embedded_v4(a, v4);
    for (size_t i = 0; i < n; i++) {
        if (r[i].fam == fam && prefix_match(a, r[i].addr, r[i].plen))
            return 1;
        if (has4 && r[i].fam == 4 && prefix_match(v4, r[i].addr, r[i].plen))
            return 1;
    }
    return 0;
}

int addrclass_allowed(const struct addrclass_range *r, size_t n, int fam, const uint8_t *addr)
{
    enum addrclass c = addrclass_of(fam, addr);
    if (c == ADDRCLASS_PUBLIC)
        return 1;
    if (addrclass_host_side(c))
        return 0;
    return addrclass_in_ranges(r, n, fam, addr);
}
