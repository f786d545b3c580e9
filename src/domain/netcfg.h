/*
 * netcfg: the network configuration of a session or pool (BrowserNetworkConfig).
 *
 * Implements "Network rules" 1-9 of the interface document: which destinations
 * go directly through the session's own network (private_hosts, rules 1-7) and
 * which hostnames use a per-route proxy (proxy_routes, rule 9). Validation
 * reports every problem as a field error; a validated config compiles into a
 * matcher the egress proxy consults per connection. Pure: no I/O, no
 * resolution (rule 7 "Hostname entries are not resolved during validation").
 * The one piece of process state is the public suffix list, replaceable once
 * at startup through netcfg_psl_load(). Design note: docs/domain-netcfg.md.
 */
#ifndef BD_DOMAIN_NETCFG_H
#define BD_DOMAIN_NETCFG_H

#include <jansson.h>
#include <stddef.h>

#include "core/err.h"

/* Limits table: network.private_hosts and network.proxy_routes. */
#define NETCFG_PRIVATE_HOSTS_MAX 32
#define NETCFG_PRIVATE_HOST_LEN  255
#define NETCFG_ROUTES_MAX        10
#define NETCFG_ROUTE_HOSTS_MAX   50
#define NETCFG_ROUTE_HOST_LEN    253

/* Validates a BrowserNetworkConfig object at `path` (e.g. "network"). allow_routes: 0 for
 * browser pools ("Routes are not supported on browser pools": proxy_routes present -> field
 * error), 1 for sessions. Reports every problem as a field error in e (paths such as
 * "network.private_hosts[2]"). Returns 0 or E_INVALID. Whether a route's proxy exists and is
 * an active non-direct proxy is not checked here (that needs the store). */
int netcfg_validate(const char *path, const json_t *v, int allow_routes, struct err *e) WUR;

/* A compiled network configuration the egress proxy uses per connection. Immutable once
 * compiled, so it may be shared between threads. */
struct netcfg;

/* Compiles a validated config (v may be NULL = config omitted -> rule 2 defaults apply;
 * a config without private_hosts also gets the defaults; explicit private_hosts replaces
 * defaults; empty list disables). v is borrowed. Returns NULL only if v is invalid (it is
 * validated again, with routes allowed). Owned by caller; release with netcfg_free(). */
struct netcfg *netcfg_compile(const json_t *v);

/* Releases a compiled config; accepts NULL. */
void netcfg_free(struct netcfg *nc);

/* Rule 4: does a request to `host` (as written in the URL: hostname, IPv4 literal, or IPv6
 * literal with or without brackets) on `port` go direct through the session's own network?
 * IP/CIDR entries match only literal-IP hosts, never hostnames. Hostname entries with a port
 * match only that port; without a port any port. Case-insensitive hostnames, trailing dot
 * ignored. IPv4 literals are read as a browser reads them ("10.1" is 10.0.0.1); an
 * IPv4-mapped IPv6 literal ([::ffff:10.0.0.1]) is matched as its IPv4 address. A port <= 0
 * means unknown: only entries without a port can match. Returns 1 or 0 (also for NULL). */
int netcfg_is_private(const struct netcfg *nc, const char *host, int port);

/* Rule 9: which proxy route matches `host` (port ignored)? Returns the route index (0-based,
 * in the order of the config's proxy_routes array) or -1. Exact beats wildcard; longer
 * wildcard suffix beats shorter; `*.example.com` matches subdomains only. IP literals never
 * match a route (route hosts are hostname patterns). */
int netcfg_route_for(const struct netcfg *nc, const char *host);

/* The route target of route i: exactly one of *id / *name is non-NULL (borrowed from nc).
 * Both are set to NULL when i is out of range. */
void netcfg_route_target(const struct netcfg *nc, int i, const char **id, const char **name);

/* Number of proxy routes (0 for NULL). */
size_t netcfg_route_count(const struct netcfg *nc);

/* Rule 7 public-suffix data: loads a newer public suffix list file (DAFSA or .dat) instead of
 * libpsl's built-in one; returns 0, or E_INVALID when the file cannot be loaded (the previous
 * list stays in use). Not thread-safe with concurrent validation; call at startup. */
int netcfg_psl_load(const char *path) WUR;

#endif
