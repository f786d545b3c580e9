/* Unit tests for domain/netcfg: "Network rules" 1-9, the Limits table and
 * Errors item 4 of the interface document. Every case names the rule (and
 * quotes or paraphrases the sentence) it checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "core/xalloc.h"
#include "domain/netcfg.h"

#define NCASES(a) (sizeof(a) / sizeof((a)[0]))

/* ---- one private_hosts entry: {"private_hosts": [entry]} ----------------- */

struct entry_case {
    const char *name;
    const char *entry;
    int ok;
    const char *msg; /* substring of the field error when !ok, or NULL */
};

static const struct entry_case entry_cases[] = {
    /* Rule 4 "Entries are hostname patterns or IP/CIDR literals." */
    {"rule 4: hostname pattern accepted", "intranet.corp.example.com", 1, NULL},
    {"rule 4: single-label hostname accepted", "intranet", 1, NULL},
    {"rule 4: upper-case hostname accepted", "GitLab.Corp.Example.COM", 1, NULL},
    {"rule 4: hostname with trailing dot accepted", "gitlab.example.com.", 1, NULL},
    {"rule 4: punycode hostname accepted", "xn--bcher-kva.example", 1, NULL},
    {"rule 4: IPv4 literal accepted", "10.1.2.3", 1, NULL},
    {"rule 4: empty entry rejected", "", 0, "must not be empty"},
    {"rule 4: hostname with underscore rejected", "my_host.example.com", 0, "not a valid hostname"},
    {"rule 4: hostname with space rejected", "my host", 0, "not a valid hostname"},
    {"rule 4: hostname with empty label rejected", "a..example.com", 0, "1-63"},
    {"rule 4: hostname of only a dot rejected", ".", 0, "must not be empty"},
    {"rule 4: label starting with '-' rejected", "-a.example.com", 0, "start or end"},
    {"rule 4: label ending with '-' rejected", "a-.example.com", 0, "start or end"},
    {"rule 4: 63-character label accepted",
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example.com", 1, NULL},
    {"rule 4: 64-character label rejected",
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example.com", 0, "1-63"},
    {"rule 4: non-ASCII hostname rejected",
     "b\xc3\xbc"
     "cher.example",
     0, "not a valid hostname"},
    {"rule 4: URL instead of host rejected", "http://example.com", 0, NULL},
    {"rule 4: IPv4 with 5 parts rejected", "10.1.2.3.4", 0, "not a valid IPv4"},
    {"rule 4: IPv4 with 3 parts rejected", "10.1.2", 0, "not a valid IPv4"},
    {"rule 4: IPv4 octet 256 rejected", "10.1.2.256", 0, "not a valid IPv4"},
    {"rule 4: IPv4 with leading zero rejected (octal to a browser)", "10.01.2.3", 0,
     "not a valid IPv4"},
    {"rule 4: IPv4 in hex form rejected", "0xa.1.2.3", 0, "not a valid IPv4"},
    {"rule 4: hostname ending in a numeric label rejected", "host.123", 0, "not a valid IPv4"},

    /* Rule 5 "Only the private ranges listed in rule 2 are accepted; public, loopback,
     * link-local and unspecified ranges are rejected." Boundaries of each range. */
    {"rule 5: 10.0.0.0 first address of 10/8 accepted", "10.0.0.0", 1, NULL},
    {"rule 5: 10.255.255.255 last address of 10/8 accepted", "10.255.255.255", 1, NULL},
    {"rule 5: 9.255.255.255 below 10/8 is public", "9.255.255.255", 0, "public"},
    {"rule 5: 11.0.0.0 above 10/8 is public", "11.0.0.0", 0, "public"},
    {"rule 5: 172.15.255.255 below 172.16/12 is public", "172.15.255.255", 0, "public"},
    {"rule 5: 172.16.0.0 first of 172.16/12 accepted", "172.16.0.0", 1, NULL},
    {"rule 5: 172.31.255.255 last of 172.16/12 accepted", "172.31.255.255", 1, NULL},
    {"rule 5: 172.32.0.0 above 172.16/12 is public", "172.32.0.0", 0, "public"},
    {"rule 5: 192.167.255.255 below 192.168/16 is public", "192.167.255.255", 0, "public"},
    {"rule 5: 192.168.0.0 first of 192.168/16 accepted", "192.168.0.0", 1, NULL},
    {"rule 5: 192.168.255.255 last of 192.168/16 accepted", "192.168.255.255", 1, NULL},
    {"rule 5: 192.169.0.0 above 192.168/16 is public", "192.169.0.0", 0, "public"},
    {"rule 5: 100.63.255.255 below 100.64/10 is public", "100.63.255.255", 0, "public"},
    {"rule 5: 100.64.0.0 first of 100.64/10 accepted", "100.64.0.0", 1, NULL},
    {"rule 5: 100.127.255.255 last of 100.64/10 accepted", "100.127.255.255", 1, NULL},
    {"rule 5: 100.128.0.0 above 100.64/10 is public", "100.128.0.0", 0, "public"},
    {"rule 5: public 8.8.8.8 rejected", "8.8.8.8", 0, "public"},
    {"rule 5: loopback 127.0.0.1 rejected", "127.0.0.1", 0, "loopback"},
    {"rule 5: link-local 169.254.1.1 rejected", "169.254.1.1", 0, "link-local"},
    {"rule 5: unspecified 0.0.0.0 rejected", "0.0.0.0", 0, "unspecified"},
    {"rule 5: multicast 224.0.0.1 rejected", "224.0.0.1", 0, "multicast"},
    {"rule 5: broadcast 255.255.255.255 rejected", "255.255.255.255", 0, "public or reserved"},
    {"rule 5: IPv6 fc00:: first of fc00::/7 accepted", "[fc00::]", 1, NULL},
    {"rule 5: IPv6 fd12:3456::1 inside fc00::/7 accepted", "[fd12:3456::1]", 1, NULL},
    {"rule 5: IPv6 last of fc00::/7 accepted", "[fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]", 1,
     NULL},
    {"rule 5: IPv6 fbff:: below fc00::/7 is public", "[fbff:ffff::1]", 0, "public"},
    {"rule 5: IPv6 fe00:: above fc00::/7 rejected", "[fe00::1]", 0, "public or reserved"},
    {"rule 5: IPv6 link-local fe80::1 rejected", "[fe80::1]", 0, "link-local"},
    {"rule 5: IPv6 loopback ::1 rejected", "[::1]", 0, "loopback"},
    {"rule 5: IPv6 unspecified :: rejected", "[::]", 0, "unspecified"},
    {"rule 5: IPv6 multicast ff02::1 rejected", "[ff02::1]", 0, "multicast"},
    {"rule 5: IPv6 global 2001:db8::1 rejected", "[2001:db8::1]", 0, "public"},
    {"rule 5: IPv4-mapped ::ffff:10.0.0.1 rejected (not inside fc00::/7)", "[::ffff:10.0.0.1]", 0,
     "IPv4-mapped"},
    {"rule 5: IPv6 uncompressed form accepted", "[fd00:0000:0000:0000:0000:0000:0000:0001]", 1,
     NULL},
    {"rule 5: IPv6 upper-case form accepted", "[FD00::ABCD]", 1, NULL},
    {"rule 5: IPv6 zone identifier rejected", "[fd00::1%eth0]", 0, "not a valid"},
    {"rule 5: IPv6 with two '::' rejected", "[fd00::1::2]", 0, "not a valid"},

    /* Rule 5 "CIDRs must be in canonical masked form (host bits zero)." */
    {"rule 5: canonical CIDR 10.0.0.0/8 accepted", "10.0.0.0/8", 1, NULL},
    {"rule 5: non-canonical CIDR 10.0.0.1/8 rejected", "10.0.0.1/8", 0, "not canonical"},
    {"rule 5: non-canonical CIDR 192.168.1.1/24 rejected", "192.168.1.1/24", 0,
     "did you mean 192.168.1.0/24"},
    {"rule 5: canonical CIDR 172.16.0.0/12 accepted", "172.16.0.0/12", 1, NULL},
    {"rule 5: non-canonical CIDR 172.17.0.0/12 rejected", "172.17.0.0/12", 0, "not canonical"},
    {"rule 5: canonical CIDR 100.64.0.0/10 accepted", "100.64.0.0/10", 1, NULL},
    {"rule 5: CIDR /32 of a private address accepted", "10.1.2.3/32", 1, NULL},
    {"rule 5: CIDR inside 192.168/16 accepted", "192.168.10.0/24", 1, NULL},
    {"rule 5: CIDR 10.0.0.0/7 wider than 10/8 rejected", "10.0.0.0/7", 0, "wider than"},
    {"rule 5: CIDR 172.0.0.0/11 covering more than 172.16/12 rejected", "172.0.0.0/11", 0,
     "covers more than the private range 172.16.0.0/12"},
    {"rule 5: CIDR 100.0.0.0/9 covering more than 100.64/10 rejected", "100.0.0.0/9", 0,
     "covers more than the private range 100.64.0.0/10"},
    {"rule 5: CIDR 100.64.0.0/9 is not canonical", "100.64.0.0/9", 0, "not canonical"},
    {"rule 5: unspecified CIDR 0.0.0.0/8 rejected", "0.0.0.0/8", 0, "unspecified"},
    {"rule 5: CIDR 0.0.0.0/0 rejected", "0.0.0.0/0", 0, "covers more than"},
    {"rule 5: CIDR public 8.8.8.0/24 rejected", "8.8.8.0/24", 0, "public"},
    {"rule 5: CIDR loopback 127.0.0.0/8 rejected", "127.0.0.0/8", 0, "loopback"},
    {"rule 5: CIDR link-local 169.254.0.0/16 rejected", "169.254.0.0/16", 0, "link-local"},
    {"rule 5: CIDR prefix 33 rejected", "10.0.0.0/33", 0, "prefix length"},
    {"rule 5: CIDR prefix with leading zero rejected", "10.0.0.0/08", 0, "prefix length"},
    {"rule 5: CIDR without prefix rejected", "10.0.0.0/", 0, "prefix length"},
    {"rule 5: CIDR with non-numeric prefix rejected", "10.0.0.0/x", 0, "prefix length"},
    {"rule 5: CIDR with hostname base rejected", "example.com/24", 0, "not a valid IPv4 CIDR"},
    {"rule 5: IPv6 CIDR fc00::/7 accepted", "fc00::/7", 1, NULL},
    {"rule 5: IPv6 CIDR fd00::/8 accepted", "fd00::/8", 1, NULL},
    {"rule 5: IPv6 CIDR fd12:3456::/32 accepted", "fd12:3456::/32", 1, NULL},
    {"rule 5: IPv6 CIDR /128 accepted", "fd00::1/128", 1, NULL},
    {"rule 5: IPv6 CIDR fc00::/6 wider than fc00::/7 rejected", "fc00::/6", 0, "wider than"},
    {"rule 5: IPv6 CIDR non-canonical fd00::1/64 rejected", "fd00::1/64", 0, "not canonical"},
    {"rule 5: IPv6 CIDR fe80::/10 link-local rejected", "fe80::/10", 0, "link-local"},
    {"rule 5: IPv6 CIDR ::/0 rejected", "::/0", 0, "covers more than the private range fc00::/7"},
    {"rule 5: IPv6 CIDR ::/128 unspecified rejected", "::/128", 0, "unspecified"},
    {"rule 5: IPv6 CIDR ::1/128 loopback rejected", "::1/128", 0, "loopback"},
    {"rule 5: IPv6 CIDR ff00::/8 multicast rejected", "ff00::/8", 0, "multicast"},
    {"rule 5: IPv6 CIDR prefix 129 rejected", "fd00::/129", 0, "prefix length"},

    /* Rule 6 "Exact IPv6 addresses are bracketed; IPv6 CIDR ranges are unbracketed." */
    {"rule 6: bracketed exact IPv6 accepted", "[fd00::1]", 1, NULL},
    {"rule 6: unbracketed exact IPv6 rejected", "fd00::1", 0, "must be bracketed"},
    {"rule 6: unbracketed full exact IPv6 rejected", "fd00:1:2:3:4:5:6:7", 0, "must be bracketed"},
    {"rule 6: bracketed IPv6 CIDR rejected", "[fd00::/8]", 0, "without brackets"},
    {"rule 6: bracketed base with prefix outside rejected", "[fd00::]/8", 0, "without brackets"},
    {"rule 6: unterminated bracket rejected", "[fd00::1", 0, "closing"},
    {"rule 6: bracketed IPv4 rejected", "[10.0.0.1]", 0, "not a valid bracketed IPv6"},
    {"rule 6: text after bracket rejected", "[fd00::1]x", 0, "after ']'"},

    /* Rule 7 "Hostname and IP entries may carry a port; CIDR ranges may not." */
    {"rule 7: hostname with port accepted", "gitlab.corp:8443", 1, NULL},
    {"rule 7: IPv4 with port accepted", "10.1.2.3:8080", 1, NULL},
    {"rule 7: bracketed IPv6 with port accepted", "[fd00::1]:443", 1, NULL},
    {"rule 7: wildcard with port accepted", "*.corp.example.com:443", 1, NULL},
    {"rule 7: port 1 accepted", "10.1.2.3:1", 1, NULL},
    {"rule 7: port 65535 accepted", "10.1.2.3:65535", 1, NULL},
    {"rule 7: port 0 rejected", "10.1.2.3:0", 0, "port"},
    {"rule 7: port 65536 rejected", "10.1.2.3:65536", 0, "port"},
    {"rule 7: port with leading zero rejected", "host.corp:080", 0, "port"},
    {"rule 7: empty port rejected", "host.corp:", 0, "port"},
    {"rule 7: negative port rejected", "host.corp:-1", 0, "port"},
    {"rule 7: non-numeric port rejected", "host.corp:http", 0, "port"},
    {"rule 7: IPv6 empty port rejected", "[fd00::1]:", 0, "port"},
    {"rule 7: IPv6 port 0 rejected", "[fd00::1]:0", 0, "port"},
    {"rule 7: IPv4 CIDR with port rejected", "10.0.0.0/8:80", 0, "may not carry a port"},
    {"rule 7: IPv6 CIDR with port rejected", "fd00::/8:443", 0, "may not carry a port"},
    {"rule 7: port on public IPv4 still rejected for the range", "8.8.8.8:53", 0, "public"},

    /* Rule 7 "A wildcard is one leading `*.` over a suffix of at least two labels that is
     * not a public suffix." */
    {"rule 7: wildcard *.example.com accepted", "*.example.com", 1, NULL},
    {"rule 7: wildcard *.corp.internal accepted", "*.corp.internal", 1, NULL},
    {"rule 7: wildcard *.example.co.uk accepted", "*.example.co.uk", 1, NULL},
    {"rule 7: wildcard with trailing dot accepted", "*.example.com.", 1, NULL},
    {"rule 7: wildcard *.com (one label) rejected", "*.com", 0, "at least two labels"},
    {"rule 7: wildcard *.internal (one label) rejected", "*.internal", 0, "at least two labels"},
    {"rule 7: wildcard over public suffix co.uk rejected", "*.co.uk", 0, "public suffix co.uk"},
    {"rule 7: wildcard over public suffix github.io rejected", "*.github.io", 0,
     "public suffix github.io"},
    {"rule 7: wildcard over upper-case public suffix rejected", "*.CO.UK", 0, "public suffix"},
    {"rule 7: wildcard over public suffix com.au rejected", "*.com.au", 0, "public suffix"},
    {"rule 7: wildcard over PSL wildcard rule (*.ck) rejected", "*.foo.ck", 0, "public suffix"},
    {"rule 7: lone '*' rejected", "*", 0, "wildcard"},
    {"rule 7: '*.' without suffix rejected", "*.", 0, "must not be empty"},
    {"rule 7: '*' without dot rejected", "*example.com", 0, "wildcard"},
    {"rule 7: double wildcard rejected", "*.*.example.com", 0, "wildcard"},
    {"rule 7: '**.' rejected", "**.example.com", 0, "wildcard"},
    {"rule 7: inner '*' label rejected", "a.*.example.com", 0, "wildcard"},
    {"rule 7: trailing '*' rejected", "example.*", 0, "wildcard"},
    {"rule 7: partial-label '*' rejected", "foo*.example.com", 0, "wildcard"},
    {"rule 7: wildcard over IP-like suffix rejected", "*.10.0.0", 0, "not a valid IPv4"},
    /* Rule 7 "Hostname entries are not resolved during validation." */
    {"rule 7: unresolvable hostname accepted (never resolved)", "does-not-exist.invalid", 1, NULL},
};

/* ---- whole BrowserNetworkConfig documents ------------------------------ */

struct doc_case {
    const char *name;
    const char *json;
    int allow_routes;
    int ok;
    const char *path; /* expected path prefix of the first field error */
    const char *msg;  /* substring of the first field error */
};

#define H50                                                                                        \
    "\"h1.x.com\",\"h2.x.com\",\"h3.x.com\",\"h4.x.com\",\"h5.x.com\",\"h6.x.com\",\"h7.x.com\","  \
    "\"h8.x.com\",\"h9.x.com\",\"h10.x.com\",\"h11.x.com\",\"h12.x.com\",\"h13.x.com\","           \
    "\"h14.x.com\",\"h15.x.com\",\"h16.x.com\",\"h17.x.com\",\"h18.x.com\",\"h19.x.com\","         \
    "\"h20.x.com\",\"h21.x.com\",\"h22.x.com\",\"h23.x.com\",\"h24.x.com\",\"h25.x.com\","         \
    "\"h26.x.com\",\"h27.x.com\",\"h28.x.com\",\"h29.x.com\",\"h30.x.com\",\"h31.x.com\","         \
    "\"h32.x.com\",\"h33.x.com\",\"h34.x.com\",\"h35.x.com\",\"h36.x.com\",\"h37.x.com\","         \
    "\"h38.x.com\",\"h39.x.com\",\"h40.x.com\",\"h41.x.com\",\"h42.x.com\",\"h43.x.com\","         \
    "\"h44.x.com\",\"h45.x.com\",\"h46.x.com\",\"h47.x.com\",\"h48.x.com\",\"h49.x.com\","         \
    "\"h50.x.com\""
#define P32                                                                                        \
    "\"10.0.0.1\",\"10.0.0.2\",\"10.0.0.3\",\"10.0.0.4\",\"10.0.0.5\",\"10.0.0.6\",\"10.0.0.7\","  \
    "\"10.0.0.8\",\"10.0.0.9\",\"10.0.0.10\",\"10.0.0.11\",\"10.0.0.12\",\"10.0.0.13\","           \
    "\"10.0.0.14\",\"10.0.0.15\",\"10.0.0.16\",\"10.0.0.17\",\"10.0.0.18\",\"10.0.0.19\","         \
    "\"10.0.0.20\",\"10.0.0.21\",\"10.0.0.22\",\"10.0.0.23\",\"10.0.0.24\",\"10.0.0.25\","         \
    "\"10.0.0.26\",\"10.0.0.27\",\"10.0.0.28\",\"10.0.0.29\",\"10.0.0.30\",\"10.0.0.31\","         \
    "\"10.0.0.32\""
#define R1(h) "{\"hosts\":[\"" h "\"],\"proxy\":{\"id\":\"p\"}}"
#define R10                                                                                        \
    R1("a1.com")                                                                                   \
    "," R1("a2.com") "," R1("a3.com") "," R1("a4.com") "," R1("a5.com") "," R1("a6.com") "," R1(   \
        "a7.com") "," R1("a8.com") "," R1("a9.com") "," R1("a10.com")
#define S253                                                                                       \
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa."                             \
    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb."                             \
    "ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc."                             \
    "ddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"

static const struct doc_case doc_cases[] = {
    {"BrowserNetworkConfig: empty object accepted", "{}", 1, 1, NULL, NULL},
    {"BrowserNetworkConfig: must be an object", "[]", 1, 0, "network", "must be an object"},
    {"BrowserNetworkConfig: null is not an object", "null", 1, 0, "network", "must be an object"},
    {"BrowserNetworkConfig: unknown field rejected", "{\"bypass_hosts\":[]}", 1, 0,
     "network.bypass_hosts", "unknown field"},
    {"rule 3: explicit empty private_hosts accepted", "{\"private_hosts\":[]}", 1, 1, NULL, NULL},
    {"BrowserNetworkConfig: private_hosts must be an array", "{\"private_hosts\":\"10.0.0.1\"}", 1,
     0, "network.private_hosts", "must be an array"},
    {"BrowserNetworkConfig: private_hosts null rejected", "{\"private_hosts\":null}", 1, 0,
     "network.private_hosts", "must be an array"},
    {"BrowserNetworkConfig: private_hosts items are strings",
     "{\"private_hosts\":[\"10.0.0.1\",\"10.0.0.2\",3]}", 1, 0, "network.private_hosts[2]",
     "must be a string"},
    {"Limits: private_hosts max 32 entries (32 accepted)", "{\"private_hosts\":[" P32 "]}", 1, 1,
     NULL, NULL},
    {"Limits: private_hosts max 32 entries (33 rejected)",
     "{\"private_hosts\":[" P32 ",\"10.0.0.33\"]}", 1, 0, "network.private_hosts", "at most 32"},
    {"Limits: private_hosts entry max 255 chars (256 rejected)",
     "{\"private_hosts\":[\"" S253 "xxx\"]}", 1, 0, "network.private_hosts[0]",
     "at most 255 characters"},
    {"Limits: private_hosts entry of 253-char hostname accepted",
     "{\"private_hosts\":[\"" S253 "\"]}", 1, 1, NULL, NULL},
    {"Limits: entry max 255 chars (253-char host plus :8443 is 258, rejected)",
     "{\"private_hosts\":[\"" S253 ":8443\"]}", 1, 0, "network.private_hosts[0]", "at most 255"},
    {"rule 4: 254-char hostname rejected as DNS name", "{\"private_hosts\":[\"" S253 "d\"]}", 1, 0,
     "network.private_hosts[0]", "longer than 253"},
    {"Validation reports every problem: second bad entry named",
     "{\"private_hosts\":[\"10.0.0.1\",\"8.8.8.8\"]}", 1, 0, "network.private_hosts[1]", "public"},
    {"Errors item 4: non-canonical CIDR named with its path",
     "{\"private_hosts\":[\"10.0.0.0/8\",\"10.0.0.1/8\"]}", 1, 0, "network.private_hosts[1]",
     "not canonical"},
    {"BrowserNetworkConfig: private_hosts string with NUL rejected",
     "{\"private_hosts\":[\"a\\u0000b\"]}", 1, 0, "network.private_hosts[0]", "NUL"},

    /* Rule 9 "Routes are not supported on browser pools." */
    {"rule 9: routes rejected on browser pools",
     "{\"proxy_routes\":[{\"hosts\":[\"a.com\"],\"proxy\":{\"id\":\"p1\"}}]}", 0, 0,
     "network.proxy_routes", "not supported on browser pools"},
    {"rule 9: even an empty routes array is rejected on pools", "{\"proxy_routes\":[]}", 0, 0,
     "network.proxy_routes", "not supported on browser pools"},
    {"rule 9: pools accept private_hosts", "{\"private_hosts\":[\"10.0.0.0/8\"]}", 0, 1, NULL,
     NULL},
    {"rule 9: route with proxy id accepted on sessions",
     "{\"proxy_routes\":[{\"hosts\":[\"a.com\",\"*.b.com\"],\"proxy\":{\"id\":\"p1\"}}]}", 1, 1,
     NULL, NULL},
    {"rule 9: route with proxy name accepted",
     "{\"proxy_routes\":[{\"hosts\":[\"a.com\"],\"proxy\":{\"name\":\"eu\"}}]}", 1, 1, NULL, NULL},
    {"rule 9: empty routes array accepted on sessions", "{\"proxy_routes\":[]}", 1, 1, NULL, NULL},
    {"BrowserNetworkConfig: proxy_routes must be an array", "{\"proxy_routes\":{}}", 1, 0,
     "network.proxy_routes", "must be an array"},
    {"BrowserProxyRoute: route must be an object", "{\"proxy_routes\":[\"a.com\"]}", 1, 0,
     "network.proxy_routes[0]", "must be an object"},
    {"Limits: max 10 routes (10 accepted)", "{\"proxy_routes\":[" R10 "]}", 1, 1, NULL, NULL},
    {"Limits: max 10 routes (11 rejected)", "{\"proxy_routes\":[" R10 "," R1("a11.com") "]}", 1, 0,
     "network.proxy_routes", "at most 10"},
    {"BrowserProxyRoute: hosts required", "{\"proxy_routes\":[{\"proxy\":{\"id\":\"p\"}}]}", 1, 0,
     "network.proxy_routes[0].hosts", "required"},
    {"BrowserProxyRoute: proxy required", "{\"proxy_routes\":[{\"hosts\":[\"a.com\"]}]}", 1, 0,
     "network.proxy_routes[0].proxy", "required"},
    {"BrowserProxyRoute: no other properties",
     "{\"proxy_routes\":[{\"hosts\":[\"a.com\"],\"proxy\":{\"id\":\"p\"},\"priority\":1}]}", 1, 0,
     "network.proxy_routes[0].priority", "unknown field"},
    {"Limits: hosts per route 1-50 (0 rejected)",
     "{\"proxy_routes\":[{\"hosts\":[],\"proxy\":{\"id\":\"p\"}}]}", 1, 0,
     "network.proxy_routes[0].hosts", "1-50"},
    {"Limits: hosts per route 1-50 (50 accepted)",
     "{\"proxy_routes\":[{\"hosts\":[" H50 "],\"proxy\":{\"id\":\"p\"}}]}", 1, 1, NULL, NULL},
    {"Limits: hosts per route 1-50 (51 rejected)",
     "{\"proxy_routes\":[{\"hosts\":[" H50 ",\"h51.x.com\"],\"proxy\":{\"id\":\"p\"}}]}", 1, 0,
     "network.proxy_routes[0].hosts", "1-50"},
    {"Limits: route host max 253 chars (253 accepted)",
     "{\"proxy_routes\":[{\"hosts\":[\"" S253 "\"],\"proxy\":{\"id\":\"p\"}}]}", 1, 1, NULL, NULL},
    {"Limits: route host max 253 chars (254 rejected)",
     "{\"proxy_routes\":[{\"hosts\":[\"" S253 "d\"],\"proxy\":{\"id\":\"p\"}}]}", 1, 0,
     "network.proxy_routes[0].hosts[0]", "at most 253"},
    {"BrowserProxyRoute: hosts must be strings",
     "{\"proxy_routes\":[{\"hosts\":[\"a.com\",7],\"proxy\":{\"id\":\"p\"}}]}", 1, 0,
     "network.proxy_routes[0].hosts[1]", "must be a string"},
    {"BrowserProxyRoute: hosts must be an array",
     "{\"proxy_routes\":[{\"hosts\":\"a.com\",\"proxy\":{\"id\":\"p\"}}]}", 1, 0,
     "network.proxy_routes[0].hosts", "must be an array"},
    {"rule 9 (same wildcard rule as rule 7): route wildcard over public suffix rejected",
     "{\"proxy_routes\":[{\"hosts\":[\"*.github.io\"],\"proxy\":{\"id\":\"p\"}}]}", 1, 0,
     "network.proxy_routes[0].hosts[0]", "public suffix"},
    {"rule 9: route wildcard *.com rejected",
     "{\"proxy_routes\":[{\"hosts\":[\"*.com\"],\"proxy\":{\"id\":\"p\"}}]}", 1, 0,
     "network.proxy_routes[0].hosts[0]", "two labels"},
    {"rule 9: route inner '*' rejected",
     "{\"proxy_routes\":[{\"hosts\":[\"a.*.com\"],\"proxy\":{\"id\":\"p\"}}]}", 1, 0,
     "network.proxy_routes[0].hosts[0]", "wildcard"},
    {"rule 9 \"a destination hostname is matched\": IPv4 route host rejected",
     "{\"proxy_routes\":[{\"hosts\":[\"10.0.0.1\"],\"proxy\":{\"id\":\"p\"}}]}", 1, 0,
     "network.proxy_routes[0].hosts[0]", "IP addresses"},
    {"rule 9: IPv6 route host rejected",
     "{\"proxy_routes\":[{\"hosts\":[\"[fd00::1]\"],\"proxy\":{\"id\":\"p\"}}]}", 1, 0,
     "network.proxy_routes[0].hosts[0]", "IP addresses"},
    {"rule 9: CIDR route host rejected",
     "{\"proxy_routes\":[{\"hosts\":[\"10.0.0.0/8\"],\"proxy\":{\"id\":\"p\"}}]}", 1, 0,
     "network.proxy_routes[0].hosts[0]", "CIDR"},
    {"rule 9 \"regardless of port\": route host with port rejected",
     "{\"proxy_routes\":[{\"hosts\":[\"a.com:443\"],\"proxy\":{\"id\":\"p\"}}]}", 1, 0,
     "network.proxy_routes[0].hosts[0]", "port"},
    {"rule 9: empty route host rejected",
     "{\"proxy_routes\":[{\"hosts\":[\"\"],\"proxy\":{\"id\":\"p\"}}]}", 1, 0,
     "network.proxy_routes[0].hosts[0]", "empty"},
    {"rule 9 \"A host pattern may appear in only one route\"",
     "{\"proxy_routes\":[" R1("a.com") "," R1("b.com") "," R1("a.com") "]}", 1, 0,
     "network.proxy_routes[2].hosts[0]", "only one route"},
    {"rule 9: duplicate host pattern compared case-insensitively",
     "{\"proxy_routes\":[" R1("*.Example.com") "," R1("*.example.COM") "]}", 1, 0,
     "network.proxy_routes[1].hosts[0]", "only one route"},
    {"rule 9: duplicate host pattern compared without trailing dot",
     "{\"proxy_routes\":[" R1("a.com") "," R1("a.com.") "]}", 1, 0,
     "network.proxy_routes[1].hosts[0]", "only one route"},
    {"rule 9: exact and wildcard of the same name are different patterns",
     "{\"proxy_routes\":[" R1("example.com") "," R1("*.example.com") "]}", 1, 1, NULL, NULL},
    {"rule 9: a repeat inside one route is not in two routes",
     "{\"proxy_routes\":[{\"hosts\":[\"a.com\",\"A.com\"],\"proxy\":{\"id\":\"p\"}}]}", 1, 1, NULL,
     NULL},
    {"BrowserProxyRouteTarget: exactly one of id or name (neither)",
     "{\"proxy_routes\":[{\"hosts\":[\"a.com\"],\"proxy\":{}}]}", 1, 0,
     "network.proxy_routes[0].proxy", "exactly one of id or name"},
    {"BrowserProxyRouteTarget: exactly one of id or name (both)",
     "{\"proxy_routes\":[{\"hosts\":[\"a.com\"],\"proxy\":{\"id\":\"p\",\"name\":\"n\"}}]}", 1, 0,
     "network.proxy_routes[0].proxy", "exactly one of id or name"},
    {"BrowserProxyRouteTarget: id min length 1",
     "{\"proxy_routes\":[{\"hosts\":[\"a.com\"],\"proxy\":{\"id\":\"\"}}]}", 1, 0,
     "network.proxy_routes[0].proxy.id", "non-empty string"},
    {"BrowserProxyRouteTarget: name min length 1",
     "{\"proxy_routes\":[{\"hosts\":[\"a.com\"],\"proxy\":{\"name\":\"\"}}]}", 1, 0,
     "network.proxy_routes[0].proxy.name", "non-empty string"},
    {"BrowserProxyRouteTarget: id must be a string",
     "{\"proxy_routes\":[{\"hosts\":[\"a.com\"],\"proxy\":{\"id\":5}}]}", 1, 0,
     "network.proxy_routes[0].proxy.id", "non-empty string"},
    {"BrowserProxyRouteTarget: mode is not a route target (non-direct proxy)",
     "{\"proxy_routes\":[{\"hosts\":[\"a.com\"],\"proxy\":{\"mode\":\"direct\"}}]}", 1, 0,
     "network.proxy_routes[0].proxy.mode", "unknown field"},
    {"BrowserProxyRouteTarget: no other properties",
     "{\"proxy_routes\":[{\"hosts\":[\"a.com\"],\"proxy\":{\"id\":\"p\",\"x\":1}}]}", 1, 0,
     "network.proxy_routes[0].proxy.x", "unknown field"},
    {"BrowserProxyRouteTarget: must be an object",
     "{\"proxy_routes\":[{\"hosts\":[\"a.com\"],\"proxy\":\"p\"}]}", 1, 0,
     "network.proxy_routes[0].proxy", "must be an object"},
};

/* Returns 1 when some field error's message starts with path + ": " and contains msg. */
static int has_detail(const struct err *e, const char *path, const char *msg)
{
    for (size_t i = 0; i < e->ndetails; i++) {
        const char *m = e->details[i].message;
        size_t pl = path ? strlen(path) : 0;
        if (path && (strncmp(m, path, pl) != 0 || m[pl] != ':'))
            continue;
        if (msg && !strstr(m, msg))
            continue;
        return 1;
    }
    return 0;
}

static void dump_details(const char *name, const struct err *e)
{
    print_error("case: %s\n", name);
    for (size_t i = 0; i < e->ndetails; i++)
        print_error("  detail: %s\n", e->details[i].message);
}

static void check_validate(const char *name, json_t *doc, int allow_routes, int ok,
                           const char *path, const char *msg)
{
    struct err e;
    err_init(&e);
    int rc = netcfg_validate("network", doc, allow_routes, &e);
    if (ok && rc != 0) {
        dump_details(name, &e);
        fail_msg("%s: expected valid", name);
    }
    if (!ok && rc != E_INVALID) {
        fail_msg("%s: expected E_INVALID, got %d", name, rc);
    }
    if (!ok && !has_detail(&e, path, msg)) {
        dump_details(name, &e);
        fail_msg("%s: no field error at %s containing \"%s\"", name, path ? path : "-",
                 msg ? msg : "-");
    }
    if (ok) {
        /* "Returns NULL only if v is invalid." */
        struct netcfg *nc = netcfg_compile(doc);
        if (!nc)
            fail_msg("%s: compile returned NULL for a valid config", name);
        netcfg_free(nc);
    } else if (allow_routes) {
        struct netcfg *nc = netcfg_compile(doc);
        if (nc)
            fail_msg("%s: compile accepted an invalid config", name);
    }
}

static void test_entries(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES(entry_cases); i++) {
        const struct entry_case *c = &entry_cases[i];
        json_t *doc = json_pack("{s:[s]}", "private_hosts", c->entry);
        assert_non_null(doc);
        check_validate(c->name, doc, 0, c->ok, "network.private_hosts[0]", c->msg);
        json_decref(doc);
    }
}

static void test_documents(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES(doc_cases); i++) {
        const struct doc_case *c = &doc_cases[i];
        json_error_t jerr;
        json_t *doc = json_loads(c->json, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
        if (!doc)
            fail_msg("%s: bad test JSON: %s", c->name, jerr.text);
        check_validate(c->name, doc, c->allow_routes, c->ok, c->path, c->msg);
        json_decref(doc);
    }
}

/* "Reports every problem": three bad entries give three details. */
static void test_reports_every_problem(void **state)
{
    (void)state;
    json_error_t jerr;
    json_t *doc = json_loads("{\"private_hosts\":[\"8.8.8.8\",\"ok.example\",\"*.com\",1],"
                             "\"proxy_routes\":[{\"hosts\":[\"10.0.0.1\"],\"proxy\":{}}],"
                             "\"extra\":true}",
                             0, &jerr);
    assert_non_null(doc);
    struct err e;
    err_init(&e);
    assert_int_equal(netcfg_validate("network", doc, 1, &e), E_INVALID);
    assert_int_equal(e.ndetails, 6);
    assert_true(has_detail(&e, "network.private_hosts[0]", "public"));
    assert_true(has_detail(&e, "network.private_hosts[2]", "two labels"));
    assert_true(has_detail(&e, "network.private_hosts[3]", "must be a string"));
    assert_true(has_detail(&e, "network.proxy_routes[0].hosts[0]", "IP"));
    assert_true(has_detail(&e, "network.proxy_routes[0].proxy", "exactly one"));
    assert_true(has_detail(&e, "network.extra", "unknown field"));
    json_decref(doc);
}

/* ---- rule 4 matching: netcfg_is_private ---------------------------------- */

struct private_case {
    const char *name;
    const char *config; /* JSON, or NULL = network config omitted */
    const char *host;
    int port;
    int expected;
};

#define PH(list) "{\"private_hosts\":[" list "]}"

static const struct private_case private_cases[] = {
    /* Rule 2 "When private_hosts is omitted, these ranges route directly by default". */
    {"rule 2: omitted config: 10.0.0.0 direct", NULL, "10.0.0.0", 443, 1},
    {"rule 2: omitted config: 10.255.255.255 direct", NULL, "10.255.255.255", 443, 1},
    {"rule 2: omitted config: 9.255.255.255 not direct", NULL, "9.255.255.255", 443, 0},
    {"rule 2: omitted config: 11.0.0.0 not direct", NULL, "11.0.0.0", 443, 0},
    {"rule 2: omitted config: 172.15.255.255 not direct", NULL, "172.15.255.255", 80, 0},
    {"rule 2: omitted config: 172.16.0.0 direct", NULL, "172.16.0.0", 80, 1},
    {"rule 2: omitted config: 172.31.255.255 direct", NULL, "172.31.255.255", 80, 1},
    {"rule 2: omitted config: 172.32.0.0 not direct", NULL, "172.32.0.0", 80, 0},
    {"rule 2: omitted config: 192.167.255.255 not direct", NULL, "192.167.255.255", 80, 0},
    {"rule 2: omitted config: 192.168.0.1 direct", NULL, "192.168.0.1", 80, 1},
    {"rule 2: omitted config: 192.168.255.255 direct", NULL, "192.168.255.255", 80, 1},
    {"rule 2: omitted config: 192.169.0.0 not direct", NULL, "192.169.0.0", 80, 0},
    {"rule 2: omitted config: 100.63.255.255 not direct", NULL, "100.63.255.255", 80, 0},
    {"rule 2: omitted config: 100.64.0.0 direct", NULL, "100.64.0.0", 80, 1},
    {"rule 2: omitted config: 100.127.255.255 direct", NULL, "100.127.255.255", 80, 1},
    {"rule 2: omitted config: 100.128.0.0 not direct", NULL, "100.128.0.0", 80, 0},
    {"rule 2: omitted config: [fc00::1] direct", NULL, "[fc00::1]", 443, 1},
    {"rule 2: omitted config: fdff:: unbracketed direct", NULL, "fdff::1", 443, 1},
    {"rule 2: omitted config: [fbff::1] not direct", NULL, "[fbff::1]", 443, 0},
    {"rule 2: omitted config: [fe80::1] link-local not direct", NULL, "[fe80::1]", 443, 0},
    {"rule 2: omitted config: [::1] not direct", NULL, "[::1]", 443, 0},
    {"rule 2: omitted config: [::] not direct", NULL, "[::]", 443, 0},
    {"rule 2: omitted config: 127.0.0.1 not direct", NULL, "127.0.0.1", 443, 0},
    {"rule 2: omitted config: public 8.8.8.8 not direct", NULL, "8.8.8.8", 443, 0},
    {"rule 2: omitted config: any port", NULL, "10.1.2.3", 0, 1},
    {"rule 2: config without private_hosts keeps defaults",
     "{\"proxy_routes\":[{\"hosts\":[\"a.com\"],\"proxy\":{\"id\":\"p\"}}]}", "10.1.2.3", 443, 1},
    {"rule 2: empty config object keeps defaults", "{}", "192.168.1.1", 443, 1},
    /* Rule 4 "IP and CIDR entries match only URLs written with a literal IP address, never
     * hostnames that resolve into the range." */
    {"rule 4: default ranges never match a hostname", NULL, "intranet.corp", 443, 0},
    {"rule 4: default ranges never match localhost", NULL, "localhost", 443, 0},
    {"rule 4: ::ffff:10.0.0.1 literal matched as its IPv4 address", NULL, "[::ffff:10.0.0.1]", 443,
     1},
    {"rule 4: ::ffff:8.8.8.8 literal not direct", NULL, "[::ffff:8.8.8.8]", 443, 0},
    {"rule 4: IPv4 literal as a browser reads it: 10.1 is 10.0.0.1", NULL, "10.1", 443, 1},
    {"rule 4: IPv4 literal in hex 0xa.0.0.1 is 10.0.0.1", NULL, "0xa.0.0.1", 443, 1},
    {"rule 4: IPv4 literal as one number 167772161 is 10.0.0.1", NULL, "167772161", 443, 1},
    {"rule 4: octal 012.0.0.1 is 10.0.0.1", NULL, "012.0.0.1", 443, 1},
    {"rule 4: octal 010.0.0.1 is 8.0.0.1, not direct", NULL, "010.0.0.1", 443, 0},
    {"rule 4: IPv4 with trailing dot", NULL, "10.0.0.1.", 443, 1},
    {"rule 4: invalid IPv4 10.0.0.256 matches nothing", NULL, "10.0.0.256", 443, 0},
    {"rule 4: five-part IPv4 matches nothing", NULL, "10.0.0.1.1", 443, 0},
    {"rule 4: IPv6 zone identifier matches nothing", NULL, "[fd00::1%25eth0]", 443, 0},
    {"rule 4: unterminated bracket matches nothing", NULL, "[fd00::1", 443, 0},
    {"rule 4: empty host matches nothing", NULL, "", 443, 0},
    {"rule 4: hostname entry matches the name", PH("\"gitlab.corp\""), "gitlab.corp", 443, 1},
    {"rule 4: hostname entry case-insensitive", PH("\"GitLab.Corp\""), "GITLAB.corp", 443, 1},
    {"rule 4: hostname entry ignores the host's trailing dot", PH("\"gitlab.corp\""),
     "gitlab.corp.", 443, 1},
    {"rule 4: hostname entry with trailing dot matches plain host", PH("\"gitlab.corp.\""),
     "gitlab.corp", 443, 1},
    {"rule 4: hostname entry does not match a subdomain", PH("\"corp.example\""), "a.corp.example",
     443, 0},
    {"rule 4: hostname entry does not match a longer name", PH("\"corp.example\""), "xcorp.example",
     443, 0},
    {"rule 4: hostname entry never matches an IP host", PH("\"gitlab.corp\""), "10.0.0.1", 443, 0},
    {"rule 4: wildcard matches a subdomain", PH("\"*.corp.example\""), "git.corp.example", 443, 1},
    {"rule 4: wildcard matches a deeper subdomain", PH("\"*.corp.example\""), "a.b.corp.example",
     443, 1},
    {"rule 4: wildcard does not match its own suffix", PH("\"*.corp.example\""), "corp.example",
     443, 0},
    {"rule 4: wildcard does not match across a label", PH("\"*.corp.example\""), "xcorp.example",
     443, 0},
    {"rule 4: wildcard case-insensitive", PH("\"*.Corp.Example\""), "GIT.CORP.EXAMPLE.", 443, 1},
    {"rule 4: IP entry never matches a hostname", PH("\"10.0.0.1\""), "ten.corp", 443, 0},
    {"rule 4: CIDR entry matches an address inside", PH("\"10.1.0.0/16\""), "10.1.200.3", 443, 1},
    {"rule 4: CIDR entry does not match outside", PH("\"10.1.0.0/16\""), "10.2.0.1", 443, 0},
    {"rule 4: IPv6 CIDR matches bracketed literal", PH("\"fd00:1::/32\""), "[fd00:1::5]", 443, 1},
    {"rule 4: IPv6 CIDR matches unbracketed literal", PH("\"fd00:1::/32\""), "fd00:1:0::5", 443, 1},
    {"rule 4: IPv6 CIDR does not match outside", PH("\"fd00:1::/32\""), "[fd00:2::5]", 443, 0},
    {"rule 4: exact IPv6 matches any written form", PH("\"[fd00::1]\""), "[FD00:0:0:0:0:0:0:0001]",
     443, 1},
    {"rule 4: exact IPv6 does not match a neighbour", PH("\"[fd00::1]\""), "[fd00::2]", 443, 0},
    {"rule 4: IPv4 entry does not match an IPv6 host", PH("\"10.0.0.1\""), "[fd00::1]", 443, 0},
    {"rule 4: IPv4 entry matched through a mapped IPv6 host", PH("\"10.0.0.1\""), "[::ffff:a00:1]",
     443, 1},
    /* Rule 3 "An explicitly supplied list replaces the defaults with exactly its entries.
     * An empty list disables the defaults, so all traffic uses managed egress." */
    {"rule 3: explicit list replaces defaults (10/8 no longer direct)", PH("\"192.168.1.0/24\""),
     "10.0.0.1", 443, 0},
    {"rule 3: explicit list: its entry is direct", PH("\"192.168.1.0/24\""), "192.168.1.7", 443, 1},
    {"rule 3: explicit list: rest of 192.168/16 not direct", PH("\"192.168.1.0/24\""),
     "192.168.2.7", 443, 0},
    {"rule 3: explicit hostname-only list drops fc00::/7", PH("\"gitlab.corp\""), "[fd00::1]", 443,
     0},
    {"rule 3: empty list disables defaults (10.0.0.1)", PH(""), "10.0.0.1", 443, 0},
    {"rule 3: empty list disables defaults ([fd00::1])", PH(""), "[fd00::1]", 443, 0},
    {"rule 3: empty list disables defaults (hostname)", PH(""), "gitlab.corp", 443, 0},
    /* Rule 7 "Hostname and IP entries may carry a port". */
    {"rule 7: hostname entry with port matches that port", PH("\"gitlab.corp:8443\""),
     "gitlab.corp", 8443, 1},
    {"rule 7: hostname entry with port does not match another port", PH("\"gitlab.corp:8443\""),
     "gitlab.corp", 443, 0},
    {"rule 7: hostname entry with port does not match an unknown port", PH("\"gitlab.corp:8443\""),
     "gitlab.corp", 0, 0},
    {"rule 7: hostname entry without port matches any port", PH("\"gitlab.corp\""), "gitlab.corp",
     22, 1},
    {"rule 7: wildcard with port matches that port", PH("\"*.corp.example:443\""), "a.corp.example",
     443, 1},
    {"rule 7: wildcard with port does not match another port", PH("\"*.corp.example:443\""),
     "a.corp.example", 80, 0},
    {"rule 7: IPv4 entry with port matches that port", PH("\"10.1.2.3:8080\""), "10.1.2.3", 8080,
     1},
    {"rule 7: IPv4 entry with port does not match another port", PH("\"10.1.2.3:8080\""),
     "10.1.2.3", 80, 0},
    {"rule 7: IPv6 entry with port matches that port", PH("\"[fd00::1]:443\""), "[fd00::1]", 443,
     1},
    {"rule 7: IPv6 entry with port does not match another port", PH("\"[fd00::1]:443\""),
     "[fd00::1]", 8443, 0},
    {"rule 7: CIDR entry matches every port", PH("\"10.0.0.0/8\""), "10.9.9.9", 65535, 1},
    {"rule 7: several entries: any one matching is enough",
     PH("\"gitlab.corp:8443\",\"gitlab.corp:22\""), "gitlab.corp", 22, 1},
};

static void test_is_private(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES(private_cases); i++) {
        const struct private_case *c = &private_cases[i];
        json_t *doc = NULL;
        if (c->config) {
            json_error_t jerr;
            doc = json_loads(c->config, 0, &jerr);
            if (!doc)
                fail_msg("%s: bad test JSON: %s", c->name, jerr.text);
        }
        struct netcfg *nc = netcfg_compile(doc);
        if (!nc)
            fail_msg("%s: config did not compile", c->name);
        int got = netcfg_is_private(nc, c->host, c->port);
        if (got != c->expected)
            fail_msg("%s: netcfg_is_private(%s, %d) = %d, expected %d", c->name, c->host, c->port,
                     got, c->expected);
        netcfg_free(nc);
        json_decref(doc);
    }
    assert_int_equal(netcfg_is_private(NULL, "10.0.0.1", 443), 0);
}

/* ---- rule 9 matching: netcfg_route_for ---------------------------------- */

struct route_case {
    const char *name;
    const char *host;
    int expected;
};

/* Route 0: exact a.example.com; route 1: *.example.com; route 2: *.deep.example.com;
 * route 3: example.com and *.other.org (by name); route 4: *.b.deep.example.com. */
static const char route_config[] =
    "{\"proxy_routes\":["
    "{\"hosts\":[\"a.example.com\"],\"proxy\":{\"id\":\"p0\"}},"
    "{\"hosts\":[\"*.example.com\"],\"proxy\":{\"id\":\"p1\"}},"
    "{\"hosts\":[\"*.deep.example.com\"],\"proxy\":{\"id\":\"p2\"}},"
    "{\"hosts\":[\"Example.com.\",\"*.other.org\"],\"proxy\":{\"name\":\"eu-egress\"}},"
    "{\"hosts\":[\"*.b.deep.example.com\"],\"proxy\":{\"id\":\"p4\"}}]}";

static const struct route_case route_cases[] = {
    {"rule 9 \"An exact hostname beats a wildcard\"", "a.example.com", 0},
    {"rule 9: exact hostname match is case-insensitive", "A.EXAMPLE.COM", 0},
    {"rule 9: exact hostname match ignores the trailing dot", "a.example.com.", 0},
    {"rule 9: wildcard matches another subdomain", "b.example.com", 1},
    {"rule 9: wildcard matches below an exact name", "x.a.example.com", 1},
    {"rule 9 \"a longer wildcard suffix beats a shorter one\"", "x.deep.example.com", 2},
    {"rule 9: longest of three nested wildcard suffixes wins", "x.b.deep.example.com", 4},
    {"rule 9: nested wildcard's own suffix falls back to the shorter wildcard",
     "b.deep.example.com", 2},
    {"rule 9: deep.example.com itself matches only *.example.com", "deep.example.com", 1},
    {"rule 9 \"`*.example.com` matches subdomains only, not `example.com`\": exact route wins",
     "example.com", 3},
    {"rule 9: second pattern of a route matches", "www.other.org", 3},
    {"rule 9: *.other.org does not match other.org", "other.org", -1},
    {"rule 9: label boundary respected (notexample.com)", "notexample.com", -1},
    {"rule 9 \"Unmatched requests use the top-level proxy\": unrelated host", "example.net", -1},
    {"rule 9: underscore hostname still matched by suffix", "my_host.example.com", 1},
    {"rule 9 \"a destination hostname is matched\": IPv4 literal never routed", "10.0.0.1", -1},
    {"rule 9: IPv6 literal never routed", "[fd00::1]", -1},
    {"rule 9: empty host unmatched", "", -1},
    {"rule 9: host with an empty label unmatched", "a..example.com", -1},
    {"rule 9: host with a port in it is not a hostname", "a.example.com:443", -1},
};

static void test_route_for(void **state)
{
    (void)state;
    json_error_t jerr;
    json_t *doc = json_loads(route_config, 0, &jerr);
    assert_non_null(doc);
    struct netcfg *nc = netcfg_compile(doc);
    assert_non_null(nc);
    assert_int_equal(netcfg_route_count(nc), 5);
    for (size_t i = 0; i < NCASES(route_cases); i++) {
        const struct route_case *c = &route_cases[i];
        int got = netcfg_route_for(nc, c->host);
        if (got != c->expected)
            fail_msg("%s: netcfg_route_for(%s) = %d, expected %d", c->name, c->host, got,
                     c->expected);
    }
    /* Routes do not touch private_hosts: the defaults still apply (rule 2). */
    assert_int_equal(netcfg_is_private(nc, "10.0.0.1", 443), 1);
    const char *id, *name;
    netcfg_route_target(nc, 0, &id, &name);
    assert_string_equal(id, "p0");
    assert_null(name);
    netcfg_route_target(nc, 3, &id, &name);
    assert_null(id);
    assert_string_equal(name, "eu-egress");
    netcfg_route_target(nc, 5, &id, &name);
    assert_null(id);
    assert_null(name);
    netcfg_route_target(nc, -1, &id, &name);
    assert_null(id);
    netcfg_free(nc);
    json_decref(doc);
}

/* Rule 9 "route order is irrelevant": the same routes reversed pick the same patterns. */
static void test_route_order_irrelevant(void **state)
{
    (void)state;
    static const char reversed[] =
        "{\"proxy_routes\":["
        "{\"hosts\":[\"*.b.deep.example.com\"],\"proxy\":{\"id\":\"p4\"}},"
        "{\"hosts\":[\"Example.com.\",\"*.other.org\"],\"proxy\":{\"name\":\"eu-egress\"}},"
        "{\"hosts\":[\"*.deep.example.com\"],\"proxy\":{\"id\":\"p2\"}},"
        "{\"hosts\":[\"*.example.com\"],\"proxy\":{\"id\":\"p1\"}},"
        "{\"hosts\":[\"a.example.com\"],\"proxy\":{\"id\":\"p0\"}}]}";
    json_t *doc = json_loads(reversed, 0, NULL);
    assert_non_null(doc);
    struct netcfg *nc = netcfg_compile(doc);
    assert_non_null(nc);
    for (size_t i = 0; i < NCASES(route_cases); i++) {
        const struct route_case *c = &route_cases[i];
        int want = c->expected < 0 ? -1 : 4 - c->expected;
        int got = netcfg_route_for(nc, c->host);
        if (got != want)
            fail_msg("%s (reversed order): got %d, expected %d", c->name, got, want);
    }
    netcfg_free(nc);
    json_decref(doc);
}

/* Rule 2 via compile(NULL) and the accessors on configs without routes. */
static void test_no_routes(void **state)
{
    (void)state;
    struct netcfg *nc = netcfg_compile(NULL);
    assert_non_null(nc);
    assert_int_equal(netcfg_route_count(nc), 0);
    assert_int_equal(netcfg_route_for(nc, "a.example.com"), -1);
    netcfg_free(nc);
    netcfg_free(NULL);
    assert_int_equal(netcfg_route_count(NULL), 0);
    assert_int_equal(netcfg_route_for(NULL, "a.example.com"), -1);
}

/* netcfg_psl_load: a missing or bogus file is refused and the built-in list stays. */
static void test_psl_load(void **state)
{
    (void)state;
    assert_int_equal(netcfg_psl_load("/nonexistent/public_suffix_list.dat"), E_INVALID);
    char path[] = "/tmp/netcfg_psl_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fputs("// not much of a list\nexample\n", f);
    fclose(f);
    assert_int_equal(netcfg_psl_load(path), E_INVALID);
    unlink(path);
    const char *dat = "/usr/share/publicsuffix/public_suffix_list.dat";
    if (access(dat, R_OK) == 0)
        assert_int_equal(netcfg_psl_load(dat), 0);
    json_t *doc = json_pack("{s:[s]}", "private_hosts", "*.github.io");
    struct err e;
    err_init(&e);
    assert_int_equal(netcfg_validate("network", doc, 0, &e), E_INVALID);
    json_decref(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_entries),
        cmocka_unit_test(test_documents),
        cmocka_unit_test(test_reports_every_problem),
        cmocka_unit_test(test_is_private),
        cmocka_unit_test(test_route_for),
        cmocka_unit_test(test_route_order_irrelevant),
        cmocka_unit_test(test_no_routes),
        cmocka_unit_test(test_psl_load),
    };
    size_t ncases =
        NCASES(entry_cases) + NCASES(doc_cases) + NCASES(private_cases) + 2 * NCASES(route_cases);
    printf("domain/netcfg: %zu table cases\n", ncases);
    return cmocka_run_group_tests_name("domain/netcfg", tests, NULL, NULL);
}
