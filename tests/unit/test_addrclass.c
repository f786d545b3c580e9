/* Unit tests for domain/addrclass: the one address rule for every request the
 * server makes for a tenant (issue 29 items 5 and 6). Each case names the
 * range and the sentence of docs/egress-proxy.md ("Isolation") it checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <string.h>

#include "core/err.h"
#include "core/xalloc.h"
#include "domain/addrclass.h"

#define NCASES(a) (sizeof(a) / sizeof((a)[0]))

static int parse(const char *s, uint8_t a[16])
{
    if (inet_pton(AF_INET, s, a) == 1)
        return 4;
    if (inet_pton(AF_INET6, s, a) == 1)
        return 6;
    fail_msg("bad address in a case: %s", s);
    return 0;
}

struct class_case {
    const char *name, *addr;
    enum addrclass cls;
};

static const struct class_case class_cases[] = {
    {"loopback 127.0.0.0/8", "127.0.0.1", ADDRCLASS_LOOPBACK},
    {"loopback 127.0.0.0/8 (any address in it)", "127.45.6.7", ADDRCLASS_LOOPBACK},
    {"loopback ::1", "::1", ADDRCLASS_LOOPBACK},
    {"unspecified 0.0.0.0 (reaches the host)", "0.0.0.0", ADDRCLASS_UNSPEC},
    {"unspecified 0.0.0.0/8", "0.1.2.3", ADDRCLASS_UNSPEC},
    {"unspecified ::", "::", ADDRCLASS_UNSPEC},
    {"link-local 169.254.0.0/16", "169.254.1.1", ADDRCLASS_LINKLOCAL},
    {"link-local fe80::/10", "fe80::1", ADDRCLASS_LINKLOCAL},
    {"link-local fe80::/10 upper edge", "febf::1", ADDRCLASS_LINKLOCAL},
    {"metadata 169.254.169.254", "169.254.169.254", ADDRCLASS_METADATA},
    {"metadata fd00:ec2::254", "fd00:ec2::254", ADDRCLASS_METADATA},
    {"private 10.0.0.0/8", "10.0.0.1", ADDRCLASS_PRIVATE},
    {"private 10.0.0.0/8 last address", "10.255.255.255", ADDRCLASS_PRIVATE},
    {"private 172.16.0.0/12", "172.16.0.1", ADDRCLASS_PRIVATE},
    {"private 172.16.0.0/12 last address", "172.31.255.255", ADDRCLASS_PRIVATE},
    {"172.32.0.0 is past 172.16.0.0/12", "172.32.0.1", ADDRCLASS_PUBLIC},
    {"private 192.168.0.0/16", "192.168.1.1", ADDRCLASS_PRIVATE},
    {"shared 100.64.0.0/10 (carrier-grade NAT)", "100.64.0.1", ADDRCLASS_SHARED},
    {"shared 100.64.0.0/10 last address", "100.127.255.255", ADDRCLASS_SHARED},
    {"100.128.0.0 is past 100.64.0.0/10", "100.128.0.1", ADDRCLASS_PUBLIC},
    {"unique local fc00::/7 (fd00::)", "fd00::1", ADDRCLASS_ULA},
    {"unique local fc00::/7 (fc00::)", "fc00::1", ADDRCLASS_ULA},
    {"site-local fec0::/10", "fec0::1", ADDRCLASS_ULA},
    {"multicast 224.0.0.0/4", "224.0.0.1", ADDRCLASS_MULTICAST},
    {"multicast 239.255.255.250", "239.255.255.250", ADDRCLASS_MULTICAST},
    {"multicast ff00::/8", "ff02::1", ADDRCLASS_MULTICAST},
    {"reserved 240.0.0.0/4", "240.0.0.1", ADDRCLASS_RESERVED},
    {"reserved broadcast", "255.255.255.255", ADDRCLASS_RESERVED},
    {"reserved 192.0.0.0/24 (IETF)", "192.0.0.8", ADDRCLASS_RESERVED},
    {"reserved 192.0.2.0/24 (documentation)", "192.0.2.1", ADDRCLASS_RESERVED},
    {"reserved 198.18.0.0/15 (benchmarking)", "198.19.0.1", ADDRCLASS_RESERVED},
    {"reserved 198.51.100.0/24 (documentation)", "198.51.100.7", ADDRCLASS_RESERVED},
    {"reserved 203.0.113.0/24 (documentation)", "203.0.113.9", ADDRCLASS_RESERVED},
    {"reserved 2001:db8::/32 (documentation)", "2001:db8::1", ADDRCLASS_RESERVED},
    {"reserved 100::/64 (discard)", "100::1", ADDRCLASS_RESERVED},
    {"reserved 2001::/32 (Teredo)", "2001:0:4136:e378::1", ADDRCLASS_RESERVED},
    {"reserved 64:ff9b:1::/48 (local NAT64)", "64:ff9b:1::a00:1", ADDRCLASS_RESERVED},
    {"public IPv4", "93.184.216.34", ADDRCLASS_PUBLIC},
    {"public IPv4 next to 10/8", "11.0.0.1", ADDRCLASS_PUBLIC},
    {"public IPv6", "2606:4700::1111", ADDRCLASS_PUBLIC},
    /* IPv6 forms that embed an IPv4 address reach that address. */
    {"IPv4-mapped loopback", "::ffff:127.0.0.1", ADDRCLASS_LOOPBACK},
    {"IPv4-mapped metadata", "::ffff:169.254.169.254", ADDRCLASS_METADATA},
    {"IPv4-mapped private", "::ffff:10.1.2.3", ADDRCLASS_PRIVATE},
    {"IPv4-mapped shared", "::ffff:100.64.1.1", ADDRCLASS_SHARED},
    {"IPv4-mapped public", "::ffff:93.184.216.34", ADDRCLASS_PUBLIC},
    {"IPv4-compatible loopback", "::127.0.0.1", ADDRCLASS_LOOPBACK},
    {"IPv4-compatible private", "::10.0.0.1", ADDRCLASS_PRIVATE},
    {"NAT64 64:ff9b::/96 of loopback", "64:ff9b::127.0.0.1", ADDRCLASS_LOOPBACK},
    {"NAT64 64:ff9b::/96 of private", "64:ff9b::10.0.0.1", ADDRCLASS_PRIVATE},
    {"NAT64 64:ff9b::/96 of metadata", "64:ff9b::a9fe:a9fe", ADDRCLASS_METADATA},
    {"NAT64 64:ff9b::/96 of a public address", "64:ff9b::5db8:d822", ADDRCLASS_PUBLIC},
    {"6to4 2002::/16 of private", "2002:a00:1::1", ADDRCLASS_PRIVATE},
    {"6to4 2002::/16 of loopback", "2002:7f00:1::", ADDRCLASS_LOOPBACK},
};

static void class_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES(class_cases); i++) {
        const struct class_case *c = &class_cases[i];
        uint8_t a[16];
        int fam = parse(c->addr, a);
        enum addrclass got = addrclass_of(fam, a);
        if (got != c->cls)
            fail_msg("%s: %s classified %s, expected %s", c->name, c->addr, addrclass_name(got),
                     addrclass_name(c->cls));
    }
}

/* addrclass_allowed with --allow-private "10.20.0.0/16,fd00:1::/32,100.64.0.0/10". */
struct allow_case {
    const char *name, *addr;
    int allowed;
};

static const struct allow_case allow_cases[] = {
    {"public is always allowed", "93.184.216.34", 1},
    {"private outside every range is refused", "10.1.0.1", 0},
    {"private inside a range is allowed", "10.20.3.4", 1},
    {"shared inside a range is allowed", "100.64.7.7", 1},
    {"ULA outside every range is refused", "fd00::5", 0},
    {"ULA inside a range is allowed", "fd00:1::5", 1},
    {"a mapped form of an allowed private address is allowed", "::ffff:10.20.3.4", 1},
    {"a NAT64 form of a refused private address is refused", "64:ff9b::a01:1", 0},
    {"192.168.0.0/16 is refused by default", "192.168.1.1", 0},
    {"multicast is refused", "224.0.0.1", 0},
    {"reserved is refused", "240.0.0.1", 0},
    {"loopback is never opened by --allow-private", "127.0.0.1", 0},
    {"link-local is never opened by --allow-private", "169.254.1.1", 0},
    {"metadata is never opened by --allow-private", "169.254.169.254", 0},
};

static void allow_table(void **state)
{
    (void)state;
    struct err e;
    err_init(&e);
    struct addrclass_range *r = NULL;
    size_t n = 0;
    assert_int_equal(
        addrclass_parse_ranges(" 10.20.0.0/16, fd00:1::/32 ,100.64.0.0/10", &r, &n, &e), 0);
    assert_int_equal(n, 3);
    for (size_t i = 0; i < NCASES(allow_cases); i++) {
        const struct allow_case *c = &allow_cases[i];
        uint8_t a[16];
        int fam = parse(c->addr, a);
        if (addrclass_allowed(r, n, fam, a) != c->allowed)
            fail_msg("%s: %s allowed=%d", c->name, c->addr, !c->allowed);
    }
    /* No ranges (the default): only public addresses. */
    uint8_t a[16];
    int fam = parse("10.20.3.4", a);
    assert_int_equal(addrclass_allowed(NULL, 0, fam, a), 0);
    xfree(r);
}

struct range_case {
    const char *name, *list;
    int ok;
    size_t n;
};

static const struct range_case range_cases[] = {
    {"empty list: no ranges", "", 1, 0},
    {"one IPv4 CIDR", "10.0.0.0/8", 1, 1},
    {"a bare address is one host", "10.1.2.3", 1, 1},
    {"IPv6 CIDR", "fd00::/8", 1, 1},
    {"empty entries are skipped", "10.0.0.0/8,,", 1, 1},
    {"host bits set are refused", "10.0.0.1/8", 0, 0},
    {"prefix over 32 is refused", "10.0.0.0/33", 0, 0},
    {"prefix with a leading zero is refused", "10.0.0.0/08", 0, 0},
    {"a name is refused", "lan.example", 0, 0},
    {"an empty prefix is refused", "10.0.0.0/", 0, 0},
};

static void range_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES(range_cases); i++) {
        const struct range_case *c = &range_cases[i];
        struct err e;
        err_init(&e);
        struct addrclass_range *r = NULL;
        size_t n = 0;
        int rc = addrclass_parse_ranges(c->list, &r, &n, &e);
        if ((rc == 0) != c->ok || n != c->n)
            fail_msg("%s: %s -> rc %d, %zu ranges", c->name, c->list, rc, n);
        if (!c->ok && !strstr(e.message, "--allow-private"))
            fail_msg("%s: the message does not name the flag: %s", c->name, e.message);
        xfree(r);
    }
}

static void literal_table(void **state)
{
    (void)state;
    uint8_t a[16];
    assert_int_equal(addrclass_literal("10.0.0.1", a), 4);
    assert_int_equal(addrclass_literal("[::ffff:127.0.0.1]", a), 6);
    assert_int_equal(addrclass_of(6, a), ADDRCLASS_LOOPBACK);
    assert_int_equal(addrclass_literal("::1", a), 6);
    assert_int_equal(addrclass_literal("localhost", a), 0);
    assert_int_equal(addrclass_literal("example.com", a), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(class_table),
        cmocka_unit_test(allow_table),
        cmocka_unit_test(range_table),
        cmocka_unit_test(literal_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
