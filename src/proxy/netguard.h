/*
 * netguard: outbound connections the server makes for a tenant outside the
 * egress proxy (an OTLP collector, a Chrome Web Store redirect), held to the
 * egress's address rule (docs/egress-proxy.md, "Isolation").
 *
 * The name is resolved here, every resolved address is checked, and the
 * socket is connected to a checked address: a DNS answer cannot change
 * between the check and the connect. A refused address, a name that does not
 * resolve and an address that does not answer fail the same way, so a tenant
 * cannot tell what the host can reach from what the rule refuses.
 */
#ifndef BD_PROXY_NETGUARD_H
#define BD_PROXY_NETGUARD_H

#include <stdint.h>

/* Decides one resolved address: 1 = may connect, 0 = refused. */
typedef int (*netguard_check_fn)(void *ctx, int fam, const uint8_t *addr, int port);

/* Installs the process-wide rule (the egress's, at startup: api/proxies.c).
 * Until one is installed, or after netguard_set(NULL, NULL), only public
 * addresses are allowed (domain/addrclass.h). Call before other threads
 * dial. */
void netguard_set(netguard_check_fn fn, void *ctx);

/* Checks a host as written at creation (an endpoint's, a URL's), without
 * resolving it: 0 when it is a name other than localhost (or a name under .localhost) or a
 * literal address the rule allows on port; -1 when the rule refuses it. */
int netguard_check_literal(const char *host, int port);

/* Resolves host (a name or a literal, IPv6 with or without brackets) and
 * connects to the first allowed address that answers before deadline_ms
 * (clock_mono_ms). Blocks the calling thread. Returns a connected
 * non-blocking close-on-exec socket, or -1 for every kind of failure. */
int netguard_dial(const char *host, int port, int64_t deadline_ms);

#endif
