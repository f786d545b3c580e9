/*
 * bcurl: an HTTP request made by a session's browser, for browsers.curl.
 *
 * The request goes through Chromium's own network stack, so it carries the
 * browser's cookies, TLS fingerprint, proxy (the session's egress proxy and
 * its rules) and default headers, and Chromium follows redirects. How: a
 * hidden page target (Target.createTarget hidden: true, invisible to the
 * session's own CDP clients) in the default browser context, with the Fetch
 * domain intercepting its navigation: the first request is rewritten to the
 * caller's method, headers and body (Fetch.continueRequest), redirects are
 * let through, and the final response is read (Fetch.getResponseBody) and
 * then aborted, so the page never renders it. A navigation error
 * (net::ERR_*) or the egress proxy's refusal is a transport error.
 *
 * Each call opens its own DevTools connection and target and closes both; it
 * blocks the calling thread for at most the request's timeout plus a few
 * seconds. Thread-safe (no shared state).
 */
#ifndef BD_RUNTIME_BCURL_H
#define BD_RUNTIME_BCURL_H

#include <jansson.h>
#include <stddef.h>

#include "core/err.h"
#include "domain/curlreq.h"

/* Largest response body returned (it is buffered into JSON). */
#define BCURL_BODY_MAX (10u << 20)

struct bcurl_result {
    /* A response (transport_error 0): */
    int status;
    json_t *headers; /* {name: [values]}, new reference */
    char *body;      /* raw bytes (NUL-terminated for convenience) */
    size_t body_len;
    char *final_url; /* the URL that answered (after redirects); NULL when unknown */
    /* Or a transport error: */
    int transport_error;
    int net_error;           /* Chromium's number, 0 when unknown */
    char net_error_name[64]; /* "ERR_CONNECTION_REFUSED", "" when none */
    char message[256];
    long long duration_ms;
};

/* Makes request r through the browser whose DevTools browser endpoint is
 * ws_url. 0 with *out filled (a response or a transport error); E_UNAVAIL
 * when the browser cannot be driven (gone, not answering). */
int bcurl_run(const char *ws_url, const struct curlreq *r, struct bcurl_result *out,
              struct err *e) WUR;
void bcurl_result_clear(struct bcurl_result *res);

#endif
