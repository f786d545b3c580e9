/*
 * curlreq: the rules of browsers.curl (SESSION_API.md section 7.1) as pure
 * functions: a request body in, a validated request (or a 400 naming the
 * field and the rule) out; and Chromium's network error names mapped to
 * their numbers for the 502 transport error record. No I/O: runtime/bcurl.c
 * makes the request through the browser.
 */
#ifndef BD_DOMAIN_CURLREQ_H
#define BD_DOMAIN_CURLREQ_H

#include <jansson.h>
#include <stddef.h>

#include "core/err.h"

#define CURL_URL_MAX         8192
#define CURL_HEADERS_MAX     64
#define CURL_HEADER_MAX      8192 /* one name: value line */
#define CURL_BODY_MAX        (4u << 20)
#define CURL_TIMEOUT_MIN_MS  1000 /* CP: minimum 1000 */
#define CURL_TIMEOUT_MAX_MS  60000
#define CURL_TIMEOUT_DEFAULT 30000

struct curl_header {
    char *name;
    char *value;
};

struct curlreq {
    char *url;
    char method[8]; /* GET HEAD POST PUT PATCH DELETE OPTIONS */
    struct curl_header headers[CURL_HEADERS_MAX];
    size_t nheaders;
    char *body; /* NULL when none */
    size_t body_len;
    int base64;     /* response_encoding "base64" */
    int timeout_ms; /* CURL_TIMEOUT_MIN_MS..CURL_TIMEOUT_MAX_MS */
};

/* Validates body (a JSON object) into out. E_INVALID with one field detail
 * per problem: url (required, absolute http or https, no credentials),
 * method (one of the seven), headers (an object of strings; names are
 * HTTP tokens, values hold no CR, LF or NUL; the hop-by-hop and
 * browser-owned names Host, Content-Length, Connection, Transfer-Encoding,
 * Upgrade, Proxy-* are refused), body (a string, only with POST, PUT, PATCH,
 * DELETE or OPTIONS), response_encoding (utf8 or base64), timeout_ms
 * (1000..60000); any other field is refused (the CP schema has
 * additionalProperties: false). out is cleared by curlreq_clear in every case. */
int curlreq_parse(const json_t *body, struct curlreq *out, struct err *e) WUR;
void curlreq_clear(struct curlreq *r);

/* 1 when a request of this method carries the body. */
int curlreq_method_has_body(const char *method);

/* Chromium's number for a net error name ("ERR_CONNECTION_REFUSED" or
 * "net::ERR_CONNECTION_REFUSED"), or 0 when the name is not in the table. */
int curlreq_net_error(const char *name);

#endif
