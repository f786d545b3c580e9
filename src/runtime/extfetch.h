/*
 * extfetch: one HTTP(S) GET of a whole body, for fetching extension packages
 * from the Chrome Web Store's update service (or the store URL the operator
 * set). HTTP/1.1 with Connection: close; chunked or sized bodies; https
 * verified against the system's roots (proxy/tls_client).
 *
 * The URL is the operator's; only the extension id inside it comes from a
 * client (checked to be 32 letters a-p by the caller). Redirects (the update
 * service answers with one) are followed, at most EXTFETCH_REDIRECTS, and
 * only to http or https URLs. The operator's host and port are trusted (as
 * a managed proxy is); a redirect to any other host is held to the egress's
 * address rule after DNS (proxy/netguard.h), and a refused hop fails like
 * one that does not answer.
 */
#ifndef BD_RUNTIME_EXTFETCH_H
#define BD_RUNTIME_EXTFETCH_H

#include <stddef.h>

#include "core/err.h"

#define EXTFETCH_REDIRECTS 5

/* GETs url within timeout_ms (in all, redirects included), a body of at
 * most max bytes: *body (owned, xfree) and *len on success. Fails with
 * E_INVALID for a URL this client cannot fetch, E_UNAVAIL when the host
 * cannot be reached or answers anything but a 2xx (the message says which:
 * "connection refused", "HTTP 404", "timed out"), E_TOOBIG past max. */
int extfetch_get(const char *url, size_t max, int timeout_ms, char **body, size_t *len,
                 struct err *e) WUR;

#endif
