#include "domain/curlreq.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/xalloc.h"

static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};

/* Names the browser sets itself or that would change how the request is
 * framed: a client cannot set them (a forged Host or Content-Length would
 * let a request smuggle another one past the egress rules). */
static const char *const refused_headers[] = {
    "host",    "content-length", "connection", "transfer-encoding",   "upgrade",          "te",
    "trailer", "keep-alive",     "expect",     "proxy-authorization", "proxy-connection",
};

static int is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int header_rule(const char *name, const char *value, size_t vlen, const char **why)
{
    if (!*name) {
        *why = "a header name cannot be empty";
        return -1;
    }
    for (const char *p = name; *p; p++)
        if (!is_tchar((unsigned char)*p)) {
            *why = "a header name is an HTTP token (letters, digits and !#$%&'*+-.^_`|~)";
            return -1;
        }
    for (size_t i = 0; i < sizeof refused_headers / sizeof *refused_headers; i++)
        if (strcasecmp(name, refused_headers[i]) == 0 || strncasecmp(name, "proxy-", 6) == 0) {
            *why = "is set by the browser and cannot be given";
            return -1;
        }
    for (size_t i = 0; i < vlen; i++)
        if (value[i] == '\r' || value[i] == '\n' || value[i] == '\0') {
            *why = "a header value cannot hold CR, LF or NUL";
            return -1;
        }
    if (strlen(name) + vlen + 2 > CURL_HEADER_MAX) {
        *why = "is longer than 8192 bytes";
        return -1;
    }
    return 0;
}

int curlreq_method_has_body(const char *method)
{
    return strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0;
}

static void url_rule(struct err *e, const char *u)
{
    size_t n = strlen(u);
    if (n == 0 || n > CURL_URL_MAX) {
        (void)err_field(e, "url", "is required, at most %d bytes", CURL_URL_MAX);
        return;
    }
    const char *rest = NULL;
    if (strncasecmp(u, "http://", 7) == 0)
        rest = u + 7;
    else if (strncasecmp(u, "https://", 8) == 0)
        rest = u + 8;
    if (!rest) {
        (void)err_field(e, "url", "must be an absolute http:// or https:// URL");
        return;
    }
    size_t hostlen = strcspn(rest, "/?#");
    if (hostlen == 0) {
        (void)err_field(e, "url", "has no host");
        return;
    }
    if (memchr(rest, '@', hostlen)) {
        (void)err_field(e, "url", "cannot carry credentials (user:password@)");
        return;
    }
    for (const char *p = u; *p; p++)
        if ((unsigned char)*p <= 0x20 || *p == 0x7f) {
            (void)err_field(e, "url", "cannot hold spaces or control characters (encode them)");
            return;
        }
}

int curlreq_parse(const json_t *body, struct curlreq *out, struct err *e)
{
    memset(out, 0, sizeof *out);
    snprintf(out->method, sizeof out->method, "GET");
    out->timeout_ms = CURL_TIMEOUT_DEFAULT;
    if (!json_is_object(body))
        return err_field(e, "", "must be a JSON object");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)body, key, v)
    {
        if (strcmp(key, "url") && strcmp(key, "method") && strcmp(key, "headers") &&
            strcmp(key, "body") && strcmp(key, "response_encoding") && strcmp(key, "timeout_ms"))
            (void)err_field(e, key, "is not a field of this request");
    }
    json_t *u = json_object_get(body, "url");
    if (!json_is_string(u))
        (void)err_field(e, "url", "is required and must be a string");
    else {
        url_rule(e, json_string_value(u));
        out->url = xstrdup(json_string_value(u));
    }
    json_t *m = json_object_get(body, "method");
    if (m && !json_is_null(m)) {
        const char *ms = json_is_string(m) ? json_string_value(m) : "";
        size_t i = 0;
        while (i < sizeof methods / sizeof *methods && strcmp(ms, methods[i]) != 0)
            i++;
        if (i == sizeof methods / sizeof *methods)
            (void)err_field(e, "method",
                            "must be one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS");
        else
            snprintf(out->method, sizeof out->method, "%s", methods[i]);
    }
    json_t *h = json_object_get(body, "headers");
    if (h && !json_is_null(h)) {
        if (!json_is_object(h))
            (void)err_field(e, "headers", "must be an object of strings");
        else if (json_object_size(h) > CURL_HEADERS_MAX)
            (void)err_field(e, "headers", "at most %d headers", CURL_HEADERS_MAX);
        else {
            json_object_foreach(h, key, v)
            {
                char path[96];
                snprintf(path, sizeof path, "headers.%.80s", key);
                const char *why = NULL;
                if (!json_is_string(v))
                    (void)err_field(e, path, "must be a string");
                else if (header_rule(key, json_string_value(v), json_string_length(v), &why))
                    (void)err_field(e, path, "%s", why);
                else {
                    out->headers[out->nheaders].name = xstrdup(key);
                    out->headers[out->nheaders].value = xstrdup(json_string_value(v));
                    out->nheaders++;
                }
            }
        }
    }
    json_t *b = json_object_get(body, "body");
    if (b && !json_is_null(b)) {
        if (!json_is_string(b))
            (void)err_field(e, "body", "must be a string");
        else if (json_string_length(b) > CURL_BODY_MAX)
            (void)err_field(e, "body", "is longer than %u bytes", CURL_BODY_MAX);
        else if (!curlreq_method_has_body(out->method))
            (void)err_field(e, "body",
                            "is not sent with %s (only POST, PUT, PATCH, DELETE, OPTIONS)",
                            out->method);
        else {
            out->body_len = json_string_length(b);
            out->body = xmalloc(out->body_len + 1);
            memcpy(out->body, json_string_value(b), out->body_len + 1);
        }
    }
    json_t *re = json_object_get(body, "response_encoding");
    if (re && !json_is_null(re)) {
        const char *rs = json_is_string(re) ? json_string_value(re) : "";
        if (strcmp(rs, "base64") == 0)
            out->base64 = 1;
        else if (strcmp(rs, "utf8") != 0)
            (void)err_field(e, "response_encoding", "must be utf8 or base64");
    }
    json_t *t = json_object_get(body, "timeout_ms");
    if (t && !json_is_null(t)) {
        if (!json_is_integer(t) || json_integer_value(t) < CURL_TIMEOUT_MIN_MS ||
            json_integer_value(t) > CURL_TIMEOUT_MAX_MS)
            (void)err_field(e, "timeout_ms", "must be an integer from %d to %d",
                            CURL_TIMEOUT_MIN_MS, CURL_TIMEOUT_MAX_MS);
        else
            out->timeout_ms = (int)json_integer_value(t);
    }
    if (err_has_fields(e)) {
        curlreq_clear(out);
        return E_INVALID;
    }
    return 0;
}

void curlreq_clear(struct curlreq *r)
{
    xfree(r->url);
    xfree(r->body);
    for (size_t i = 0; i < r->nheaders; i++) {
        xfree(r->headers[i].name);
        xfree(r->headers[i].value);
    }
    memset(r, 0, sizeof *r);
}

/* Chromium's net/base/net_error_list.h, the errors a request can meet. */
static const struct {
    const char *name;
    int code;
} net_errors[] = {
    {"ERR_FAILED", -2},
    {"ERR_ABORTED", -3},
    {"ERR_INVALID_ARGUMENT", -4},
    {"ERR_TIMED_OUT", -7},
    {"ERR_FILE_TOO_BIG", -8},
    {"ERR_ACCESS_DENIED", -10},
    {"ERR_BLOCKED_BY_CLIENT", -20},
    {"ERR_BLOCKED_BY_RESPONSE", -27},
    {"ERR_CONNECTION_CLOSED", -100},
    {"ERR_CONNECTION_RESET", -101},
    {"ERR_CONNECTION_REFUSED", -102},
    {"ERR_CONNECTION_ABORTED", -103},
    {"ERR_CONNECTION_FAILED", -104},
    {"ERR_NAME_NOT_RESOLVED", -105},
    {"ERR_INTERNET_DISCONNECTED", -106},
    {"ERR_SSL_PROTOCOL_ERROR", -107},
    {"ERR_ADDRESS_INVALID", -108},
    {"ERR_ADDRESS_UNREACHABLE", -109},
    {"ERR_TUNNEL_CONNECTION_FAILED", -111},
    {"ERR_CONNECTION_TIMED_OUT", -118},
    {"ERR_PROXY_CONNECTION_FAILED", -130},
    {"ERR_NAME_RESOLUTION_FAILED", -137},
    {"ERR_NETWORK_ACCESS_DENIED", -138},
    {"ERR_SSL_VERSION_OR_CIPHER_MISMATCH", -113},
    {"ERR_CERT_COMMON_NAME_INVALID", -200},
    {"ERR_CERT_DATE_INVALID", -201},
    {"ERR_CERT_AUTHORITY_INVALID", -202},
    {"ERR_INVALID_URL", -300},
    {"ERR_DISALLOWED_URL_SCHEME", -301},
    {"ERR_UNKNOWN_URL_SCHEME", -302},
    {"ERR_TOO_MANY_REDIRECTS", -310},
    {"ERR_UNSAFE_REDIRECT", -311},
    {"ERR_UNSAFE_PORT", -312},
    {"ERR_INVALID_RESPONSE", -320},
    {"ERR_EMPTY_RESPONSE", -324},
    {"ERR_RESPONSE_HEADERS_TOO_BIG", -325},
    {"ERR_CONTENT_LENGTH_MISMATCH", -354},
    {"ERR_INCOMPLETE_CHUNKED_ENCODING", -355},
};

int curlreq_net_error(const char *name)
{
    if (!name)
        return 0;
    if (strncmp(name, "net::", 5) == 0)
        name += 5;
    for (size_t i = 0; i < sizeof net_errors / sizeof *net_errors; i++)
        if (strcmp(name, net_errors[i].name) == 0)
            return net_errors[i].code;
    return 0;
}
