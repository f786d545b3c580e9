/*
 * siteclass: the config registry's rules (docs/config-registry.md) as pure
 * functions: a target URL's normalized form and registrable domain, and the
 * classification of one visit (accessed, blocked or inconclusive) from the
 * HTTP status, the page's bytes and the browser's network error.
 *
 * No I/O, no clock, no state: the registrable domain comes from libpsl's
 * built-in list. The page's bytes are untrusted: at most
 * LIM_CFGREG_CLASSIFY_BYTES of them are read, NUL bytes included
 * (fuzz/fuzz_siteclass.c).
 */
#ifndef BD_DOMAIN_SITECLASS_H
#define BD_DOMAIN_SITECLASS_H

#include <stddef.h>

#include "core/err.h"
#include "core/limits.h"

struct siteclass_target {
    char domain[256];                          /* registrable domain, or the host when none */
    char host[256];                            /* lowercase, IPv6 without brackets */
    char normalized[LIM_CFGREG_URL_BYTES + 8]; /* scheme://host[:port]/path, no query */
};

/* Reads url (an absolute http or https URL of at most LIM_CFGREG_URL_BYTES,
 * no user info) into *out. 0, or E_INVALID with err naming field and the
 * rule. The domain is the host's registrable domain (example.co.uk for
 * a.b.example.co.uk); an IP address, a single label or a public suffix is
 * its own domain. */
int siteclass_target_parse(const char *url, const char *field, struct siteclass_target *out,
                           struct err *e) WUR;

enum siteclass_outcome { SITECLASS_ACCESSED, SITECLASS_BLOCKED, SITECLASS_INCONCLUSIVE };
extern const char *const siteclass_outcome_names[3];

/* One visit: a response (status > 0, the body's first bytes) or a network
 * error (net_error, Chromium's name such as "ERR_CONNECTION_REFUSED"). */
struct siteclass_visit {
    int status;
    const char *body;
    size_t body_len;
    const char *net_error; /* NULL or "" when the page answered */
};

/* The visit's outcome, with a short reason into reason (cap bytes):
 * "ok"; "http_403" (401, 403, 407, 429, 451: the site refused);
 * "challenge_page" (a bot challenge or "access denied" text, whatever the
 * status); "empty_body" (2xx/3xx with nothing but white space);
 * "http_<status>" (other 4xx and 5xx: not the configuration's fault as far
 * as can be told); "egress_refused" (ERR_ACCESS_DENIED: the session's own
 * network rules refused the target); "net_<ERR_NAME>" (another network
 * error). */
enum siteclass_outcome siteclass_classify(const struct siteclass_visit *v, char *reason,
                                          size_t cap);

#endif
