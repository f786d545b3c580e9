/*
 * siteclass: the config registry's rules (docs/config-registry.md) as pure
 * functions: a target URL's normalized form and registrable domain, and the
 * classification of one visit (accessed, blocked or inconclusive) from the
 * HTTP status, the page's bytes, the browser's network error and the
 * visit's telemetry (its page's responses, redirects and console errors).
 *
 * No I/O, no clock, no state: the registrable domain comes from libpsl's
 * built-in list. The page's bytes are untrusted: at most
 * LIM_CFGREG_CLASSIFY_BYTES of them are read, NUL bytes included, and so
 * are the telemetry's URLs and console texts (fuzz/fuzz_siteclass.c).
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

/* One response the visit's page received (its network telemetry: the
 * session telemetry's network_response). url borrowed. */
struct siteclass_response {
    const char *url;
    int status;
    int document;         /* the main frame's document (a navigation, a redirect's end) */
    int challenge_header; /* one of its headers is a challenge's (siteclass_challenge_header) */
};

/* What the page did while it loaded in the visit's browser (a rendered
 * visit): its responses in arrival order, the main frame's last URL
 * (after HTTP and script redirects) and its console errors (the session
 * telemetry's console_error: console.error, console.assert, uncaught
 * exceptions). All borrowed. */
struct siteclass_telemetry {
    const struct siteclass_response *responses;
    size_t nresponses;
    const char *final_url; /* NULL when unknown */
    const char *const *console_errors;
    size_t nconsole;
    const char *text; /* the rendered page's visible text (NULL: not rendered) */
};

/* One visit: a response (status > 0, the body's first bytes: for a
 * rendered visit, the rendered DOM) or a network error (net_error,
 * Chromium's name such as "ERR_CONNECTION_REFUSED"), and the visit's
 * telemetry (NULL: none, a plain request). */
struct siteclass_visit {
    int status;
    const char *body;
    size_t body_len;
    const char *net_error; /* NULL or "" when the page answered */
    const struct siteclass_telemetry *telemetry;
};

/* 1 when a response header names a bot challenge: `cf-mitigated:
 * challenge` (Cloudflare), `x-amzn-waf-action: captcha|challenge` (AWS
 * WAF), `x-datadome` on a 401, 403 or 429 (DataDome sets it on every
 * answer it guards, a refusal is the challenge). Names without case. */
int siteclass_challenge_header(const char *name, const char *value, int status);

/* The visit's outcome, with a short reason into reason (cap bytes):
 * "ok"; "http_403" (401, 403, 407, 429, 451: the site refused);
 * "egress_refused" (ERR_ACCESS_DENIED: the session's own network rules
 * refused the target); "net_<ERR_NAME>" (another network error); from the
 * telemetry: "challenge_header" (the main document answered with a
 * challenge header), "challenge_redirect" (the main frame went, by HTTP or
 * by script, to a challenge URL: a path segment challenge, captcha or
 * blocked, Cloudflare's /cdn-cgi/challenge-platform/, DataDome's
 * captcha-delivery.com), "challenge_request" (a sub-request answered 401,
 * 403 or 429 with a challenge header, or went to a service that serves
 * only challenged visitors: captcha-delivery.com, px-captcha; a login
 * form's reCAPTCHA or Turnstile widget is not a block); then "challenge_page" (a bot challenge or
 * "access denied" text in the body, whatever the status);
 * "console_challenge" (a console error that names a captcha, a challenge
 * or a bot check); "http_<status>" (other 4xx and 5xx: not the
 * configuration's fault as far as can be told); "script_error" (a rendered
 * page with no visible text and a console error: its script failed);
 * "empty_body" (2xx/3xx with nothing but white space, or a rendered page
 * with no visible text). */
enum siteclass_outcome siteclass_classify(const struct siteclass_visit *v, char *reason,
                                          size_t cap);

#endif
