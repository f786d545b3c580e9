/*
 * addrclass: which kind of network an IP address belongs to, and the
 * operator's ranges a session may reach directly (--allow-private).
 *
 * One rule for every connection the server makes for a tenant: a page's
 * egress, POST /curl (through the egress), a session process's proxy
 * request, an OTLP export, a Chrome Web Store redirect, a custom proxy's own
 * address and a proxy check. Everything that is not PUBLIC is refused unless
 * the operator allowed it: LOOPBACK, UNSPEC, LINKLOCAL and METADATA (the
 * host's side) only through an exact --allow-loopback HOST:PORT; the LAN-side
 * classes (PRIVATE, SHARED, ULA, MULTICAST, RESERVED) only inside an
 * --allow-private range. IPv6 forms that embed an IPv4 address (mapped
 * ::ffff:a.b.c.d, compatible ::a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16)
 * are classified as the IPv4 address they reach. Pure; table-tested by
 * tests/unit/test_addrclass.c. Design note: docs/egress-proxy.md.
 */
#ifndef BD_DOMAIN_ADDRCLASS_H
#define BD_DOMAIN_ADDRCLASS_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

enum addrclass {
    ADDRCLASS_PUBLIC = 0, /* anything below does not hold: reachable */
    ADDRCLASS_LOOPBACK,   /* 127.0.0.0/8, ::1 */
    ADDRCLASS_UNSPEC,     /* 0.0.0.0/8, :: (connecting there reaches the host) */
    ADDRCLASS_LINKLOCAL,  /* 169.254.0.0/16, fe80::/10 */
    ADDRCLASS_METADATA,   /* 169.254.169.254, fd00:ec2::254 */
    ADDRCLASS_PRIVATE,    /* 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 */
    ADDRCLASS_SHARED,     /* 100.64.0.0/10 (carrier-grade NAT, RFC 6598) */
    ADDRCLASS_ULA,        /* fc00::/7 (unique local), fec0::/10 (old site-local) */
    ADDRCLASS_MULTICAST,  /* 224.0.0.0/4, ff00::/8 */
    ADDRCLASS_RESERVED,   /* 240.0.0.0/4 and broadcast, 192.0.0.0/24, documentation and
                             benchmark ranges, 2001:db8::/32, 100::/64, Teredo 2001::/32,
                             64:ff9b:1::/48 (local NAT64) */
};

/* Classifies an address (fam 4 with 4 bytes, or 6 with 16 bytes). An IPv6
 * address that embeds an IPv4 one is classified as the embedded address
 * (a NAT64 or 6to4 address of a public IPv4 address is PUBLIC). */
enum addrclass addrclass_of(int fam, const uint8_t *addr);

/* The class's name for messages and logs ("loopback", "private", ...). */
const char *addrclass_name(enum addrclass c);

/* 1 for the host-side classes (LOOPBACK, UNSPEC, LINKLOCAL, METADATA), which
 * only an exact --allow-loopback HOST:PORT opens; 0 otherwise. */
int addrclass_host_side(enum addrclass c);

/* Copies the IPv4 address an IPv6 address embeds (mapped, compatible, NAT64
 * 64:ff9b::/96, 6to4) into v4; returns 1, or 0 when it embeds none. */
int addrclass_embedded_v4(const uint8_t a6[16], uint8_t v4[4]);

/* One range of --allow-private. */
struct addrclass_range {
    int fam; /* 4 or 6 */
    uint8_t addr[16];
    int plen;
};

/* Parses "CIDR[,CIDR...]" (a bare address is /32 or /128; spaces around
 * entries ignored; host bits must be zero). *out (owned, xfree) and *n;
 * NULL/empty -> no ranges. E_INVALID with a message naming the entry. */
int addrclass_parse_ranges(const char *list, struct addrclass_range **out, size_t *n,
                           struct err *e) WUR;

/* Is the address inside one of the n ranges? An IPv6 address that embeds
 * an IPv4 address also matches through the IPv4 ranges. 1 or 0. */
int addrclass_in_ranges(const struct addrclass_range *r, size_t n, int fam, const uint8_t *addr);

/* The rule itself, without the host's own interface addresses and the
 * server's ports (the caller adds those): 1 when a tenant's connection to
 * (fam, addr) is allowed by its class and the --allow-private ranges alone,
 * i.e. PUBLIC, or a LAN-side class inside a range. Host-side classes
 * return 0 (only --allow-loopback opens them). */
int addrclass_allowed(const struct addrclass_range *r, size_t n, int fam, const uint8_t *addr);

/* The address of a host written as a literal ("10.0.0.1", "::1", "[::1]"):
 * 4 or 6 with addr filled, or 0 when host is not a literal. */
int addrclass_literal(const char *host, uint8_t addr[16]);

#endif
