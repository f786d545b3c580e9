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
    if (st == 401 || st == 403 || st == 407 || st == 429 || st == 451) {
        snprintf(reason, cap, "http_%d", st);
        return SITECLASS_BLOCKED;
    }
    if (challenge) {
        snprintf(reason, cap, "challenge_page");
        return SITECLASS_BLOCKED;
    }
    if (st < 200 || st >= 400) {
        snprintf(reason, cap, "http_%d", st);
        return SITECLASS_INCONCLUSIVE;
    }
    size_t i = 0;
    while (i < n && (v->body[i] == ' ' || v->body[i] == '\t' || v->body[i] == '\r' ||
                     v->body[i] == '\n' || v->body[i] == '\f'))
        i++;
    if (i == n) {
        snprintf(reason, cap, "empty_body");
        return SITECLASS_INCONCLUSIVE;
    }
    snprintf(reason, cap, "ok");
    return SITECLASS_ACCESSED;
}
