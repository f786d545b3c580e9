#include "domain/siteclass.h"

#include <arpa/inet.h>
#include <libpsl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

const char *const siteclass_outcome_names[3] = {"accessed", "blocked", "inconclusive"};

static int host_char_ok(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

int siteclass_target_parse(const char *url, const char *field, struct siteclass_target *out,
                           struct err *e)
{
    memset(out, 0, sizeof *out);
    if (!url || !*url)
        return err_field(e, field, "is required: an http or https URL");
    size_t len = strlen(url);
    if (len > LIM_CFGREG_URL_BYTES)
        return err_field(e, field, "must be at most %d bytes", LIM_CFGREG_URL_BYTES);
    const char *scheme, *rest;
    if (strncasecmp(url, "https://", 8) == 0) {
        scheme = "https";
        rest = url + 8;
    } else if (strncasecmp(url, "http://", 7) == 0) {
        scheme = "http";
        rest = url + 7;
    } else {
        return err_field(e, field, "must be an absolute http or https URL");
    }
    for (const char *p = url; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
            return err_field(e, field, "must not hold white space or control characters");
    size_t auth = strcspn(rest, "/?#");
    if (memchr(rest, '@', auth))
        return err_field(e, field, "must not hold user information");
    if (auth == 0)
        return err_field(e, field, "must name a host");
    char hostport[300];
    if (auth >= sizeof hostport)
        return err_field(e, field, "has a host longer than 255 bytes");
    memcpy(hostport, rest, auth);
    hostport[auth] = '\0';
    const char *port = NULL;
    char *h = hostport;
    if (h[0] == '[') {
        char *end = strchr(h, ']');
        if (!end || (end[1] && end[1] != ':'))
            return err_field(e, field, "has a malformed IPv6 host");
        *end = '\0';
        port = end[1] == ':' ? end + 2 : NULL;
        h++;
        unsigned char a6[16];
        if (inet_pton(AF_INET6, h, a6) != 1)
            return err_field(e, field, "has a malformed IPv6 host");
    } else {
        char *colon = strchr(h, ':');
        if (colon) {
            *colon = '\0';
            port = colon + 1;
        }
    }
    if (port) {
        if (!*port || strlen(port) > 5 || strspn(port, "0123456789") != strlen(port))
            return err_field(e, field, "has a malformed port");
        long pn = 0;
        for (const char *q = port; *q; q++)
            pn = pn * 10 + (*q - '0');
        if (pn < 1 || pn > 65535)
            return err_field(e, field, "has a port outside 1-65535");
        if ((strcmp(scheme, "http") == 0 && pn == 80) ||
            (strcmp(scheme, "https") == 0 && pn == 443))
            port = NULL;
    }
    size_t hl = strlen(h);
    if (hl == 0 || hl >= sizeof out->host)
        return err_field(e, field, "must name a host");
    int v6 = hostport[0] == '[';
    for (size_t i = 0; i < hl; i++) {
        char c = h[i];
        out->host[i] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
        if (!v6 && !host_char_ok((unsigned char)out->host[i]))
            return err_field(e, field, "has a host with a character not allowed in a name");
    }
    while (hl > 1 && out->host[hl - 1] == '.')
        out->host[--hl] = '\0';
    const char *path = rest + auth;
    size_t pl = strcspn(path, "?#");
    int n = snprintf(out->normalized, sizeof out->normalized, "%s://%s%s%s%s%s%.*s", scheme,
                     v6 ? "[" : "", out->host, v6 ? "]" : "", port ? ":" : "", port ? port : "",
                     (int)(pl ? pl : 1), pl ? path : "/");
    if (n < 0 || (size_t)n >= sizeof out->normalized)
        return err_field(e, field, "must be at most %d bytes", LIM_CFGREG_URL_BYTES);
    unsigned char a4[4];
    const char *reg = NULL;
    if (!v6 && inet_pton(AF_INET, out->host, a4) != 1 && strchr(out->host, '.'))
        reg = psl_registrable_domain(psl_builtin(), out->host);
    snprintf(out->domain, sizeof out->domain, "%s", reg ? reg : out->host);
    return 0;
}

/* Case-insensitive search of an ASCII needle (lowercase) in n bytes. */
static int contains(const char *hay, size_t n, const char *needle)
{
    size_t m = strlen(needle);
    for (size_t i = 0; m <= n && i <= n - m; i++) {
        size_t k = 0;
        while (k < m) {
            char c = hay[i + k];
            if (c >= 'A' && c <= 'Z')
                c = (char)(c - 'A' + 'a');
            if (c != needle[k])
                break;
            k++;
        }
        if (k == m)
            return 1;
    }
    return 0;
}

/* What bot protections put in their interstitial pages (Cloudflare,
 * Akamai, PerimeterX, Imperva, DataDome) and the plain refusals. */
static const char *const challenge_markers[] = {
    "access denied",
    "cf-chl-",
    "cf_chl_",
    "challenge-platform",
    "just a moment...",
    "attention required!",
    "verify you are human",
    "are you a robot",
    "request blocked",
    "px-captcha",
    "_incapsula_resource",
    "captcha-delivery.com",
    "you have been blocked",
    "unusual traffic from your",
};

/* Case-insensitive ASCII comparison of a header name. */
static int name_is(const char *name, const char *want)
{
    return name && strcasecmp(name, want) == 0;
}

int siteclass_challenge_header(const char *name, const char *value, int status)
{
    size_t vn = value ? strnlen(value, 256) : 0;
    if (name_is(name, "cf-mitigated"))
        return contains(value, vn, "challenge");
    if (name_is(name, "x-amzn-waf-action"))
        return contains(value, vn, "captcha") || contains(value, vn, "challenge");
    if (name_is(name, "x-datadome"))
        return status == 401 || status == 403 || status == 429;
    return 0;
}

/* The URL bytes the classifier reads (URLs are at most this long in a
 * browser's telemetry worth looking at). */
#define URL_READ 4096
/* The bytes of one console error read. */
#define CONSOLE_READ 1024

/* 1 when url's path has a segment (up to '.', '?', '#' or '/') named
 * challenge, captcha or blocked, or url is Cloudflare's or DataDome's
 * challenge. */
static int challenge_url(const char *url)
{
    if (!url)
        return 0;
    size_t n = strnlen(url, URL_READ);
    if (contains(url, n, "/cdn-cgi/challenge-platform/") ||
        contains(url, n, "captcha-delivery.com"))
        return 1;
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    p += strcspn(p, "/?#");
    static const char *const names[] = {"challenge", "captcha", "blocked"};
    while (*p == '/' && (size_t)(p - url) < n) {
        p++;
        size_t seg = strcspn(p, "/?#.");
        for (size_t i = 0; i < sizeof names / sizeof *names; i++)
            if (seg == strlen(names[i]) && strncasecmp(p, names[i], seg) == 0)
                return 1;
        p += strcspn(p, "/?#");
    }
    return 0;
}

/* 1 when url goes to a service that answers challenged visitors only. */
static int challenge_service(const char *url)
{
    size_t n = url ? strnlen(url, URL_READ) : 0;
    return contains(url, n, "captcha-delivery.com") || contains(url, n, "px-captcha");
}

/* What a console error says when it is a challenge's. */
static const char *const console_markers[] = {"captcha", "challenge", "bot detection", "bot check",
                                              "are you a robot"};

/* The telemetry's verdict: blocked with its reason in reason, or 0. */
static int telemetry_blocked(const struct siteclass_telemetry *t, char *reason, size_t cap)
{
    int docs = 0;
    for (size_t i = 0; i < t->nresponses; i++) {
        const struct siteclass_response *r = &t->responses[i];
        if (r->document && r->challenge_header) {
            snprintf(reason, cap, "challenge_header");
            return 1;
        }
    }
    for (size_t i = 0; i < t->nresponses; i++) {
        const struct siteclass_response *r = &t->responses[i];
        /* The first document is the target the caller named. */
        if (r->document && docs++ > 0 && challenge_url(r->url)) {
            snprintf(reason, cap, "challenge_redirect");
            return 1;
        }
    }
    const char *first = NULL;
    for (size_t i = 0; !first && i < t->nresponses; i++)
        if (t->responses[i].document)
            first = t->responses[i].url;
    if (t->final_url && (!first || strcmp(first, t->final_url) != 0) &&
        challenge_url(t->final_url)) {
        snprintf(reason, cap, "challenge_redirect");
        return 1;
    }
    for (size_t i = 0; i < t->nresponses; i++) {
        const struct siteclass_response *r = &t->responses[i];
        int refused = r->status == 401 || r->status == 403 || r->status == 429;
        if (!r->document && ((refused && r->challenge_header) || challenge_service(r->url))) {
            snprintf(reason, cap, "challenge_request");
            return 1;
        }
    }
    return 0;
}

static int console_challenge(const struct siteclass_telemetry *t)
{
    for (size_t i = 0; i < t->nconsole; i++) {
        const char *c = t->console_errors[i];
        size_t n = c ? strnlen(c, CONSOLE_READ) : 0;
        for (size_t k = 0; k < sizeof console_markers / sizeof *console_markers; k++)
            if (contains(c, n, console_markers[k]))
                return 1;
    }
    return 0;
}

static int blank(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n' || s[i] == '\f'))
        i++;
    return i == n;
}

enum siteclass_outcome siteclass_classify(const struct siteclass_visit *v, char *reason, size_t cap)
{
    if (v->net_error && *v->net_error) {
        if (strcmp(v->net_error, "ERR_ACCESS_DENIED") == 0) {
            snprintf(reason, cap, "egress_refused");
        } else {
            size_t k = strspn(v->net_error, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
            snprintf(reason, cap, "net_%.*s", (int)(k > 48 ? 48 : k), v->net_error);
        }
        return SITECLASS_INCONCLUSIVE;
    }
    size_t n = v->body ? v->body_len : 0;
    if (n > LIM_CFGREG_CLASSIFY_BYTES)
        n = LIM_CFGREG_CLASSIFY_BYTES;
    int challenge = 0;
    for (size_t i = 0; !challenge && i < sizeof challenge_markers / sizeof *challenge_markers; i++)
        challenge = contains(v->body, n, challenge_markers[i]);
    int st = v->status;
    const struct siteclass_telemetry *t = v->telemetry;
    if (st == 401 || st == 403 || st == 407 || st == 429 || st == 451) {
        snprintf(reason, cap, "http_%d", st);
        return SITECLASS_BLOCKED;
    }
    if (t && telemetry_blocked(t, reason, cap))
        return SITECLASS_BLOCKED;
    if (challenge) {
        snprintf(reason, cap, "challenge_page");
        return SITECLASS_BLOCKED;
    }
    if (t && console_challenge(t)) {
        snprintf(reason, cap, "console_challenge");
        return SITECLASS_BLOCKED;
    }
    if (st < 200 || st >= 400) {
        snprintf(reason, cap, "http_%d", st);
        return SITECLASS_INCONCLUSIVE;
    }
    if (t && t->text) {
        if (blank(t->text, strnlen(t->text, LIM_CFGREG_CLASSIFY_BYTES))) {
            snprintf(reason, cap, "%s", t->nconsole ? "script_error" : "empty_body");
            return SITECLASS_INCONCLUSIVE;
        }
    } else if (blank(v->body ? v->body : "", n)) {
        snprintf(reason, cap, "empty_body");
        return SITECLASS_INCONCLUSIVE;
    }
    snprintf(reason, cap, "ok");
    return SITECLASS_ACCESSED;
}
