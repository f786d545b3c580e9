#include "proxy/selfreq.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* The end of the first "\r\n\r\n" at or after from, or NULL. */
static const char *find_end(const char *buf, size_t len, const char *from)
{
    for (const char *p = from; p + 4 <= buf + len; p++)
        if (memcmp(p, "\r\n\r\n", 4) == 0)
            return p + 4;
    return NULL;
}

/* The value of header name (case-insensitive) among the lines of
 * [lines, end), copied to out; -1 when absent or too long. */
static int header(const char *lines, const char *end, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);
    for (const char *h = lines; h < end;) {
        const char *eol = h;
        while (eol + 1 < end && !(eol[0] == '\r' && eol[1] == '\n'))
            eol++;
        if ((size_t)(eol - h) > nl && strncasecmp(h, name, nl) == 0 && h[nl] == ':') {
            const char *v = h + nl + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            size_t n = (size_t)(eol - v);
            while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
                n--;
            if (n == 0 || n >= cap || memchr(v, '\0', n))
                return -1;
            memcpy(out, v, n);
            out[n] = '\0';
            return 0;
        }
        h = eol + 2;
    }
    return -1;
}

/* The value of query parameter name in [q, qend), copied to out; -1 when
 * absent, empty or too long. Values are taken as sent. */
static int param(const char *q, const char *qend, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);
    for (const char *p = q; p < qend;) {
        const char *amp = memchr(p, '&', (size_t)(qend - p));
        const char *e = amp ? amp : qend;
        if ((size_t)(e - p) > nl && strncmp(p, name, nl) == 0 && p[nl] == '=') {
            size_t n = (size_t)(e - p) - nl - 1;
            if (n == 0 || n >= cap)
                return -1;
            memcpy(out, p + nl + 1, n);
            out[n] = '\0';
            return 0;
        }
        p = e + 1;
    }
    return -1;
}

enum selfreq_result selfreq_parse(const char *buf, size_t len, struct selfreq *out)
{
    memset(out, 0, sizeof *out);
    const size_t pl = sizeof SELFREQ_PREFIX - 1;
    const char *eol = NULL;
    for (size_t i = 0; i + 1 < len && !eol; i++)
        if (buf[i] == '\r' && buf[i + 1] == '\n')
            eol = buf + i;
    if (len < pl || memcmp(buf, SELFREQ_PREFIX, pl) != 0)
        return len < pl && memcmp(buf, SELFREQ_PREFIX, len) == 0 ? SELFREQ_PARTIAL
                                                                 : SELFREQ_NO_PREFIX;
    if (!eol)
        return len < pl + sizeof out->sid + sizeof out->org ? SELFREQ_PARTIAL : SELFREQ_NO_PREFIX;
    char line[sizeof out->sid + sizeof out->org + 2];
    size_t ll = (size_t)(eol - buf) - pl;
    if (ll >= sizeof line || memchr(buf + pl, '\0', ll))
        return SELFREQ_NO_PREFIX;
    memcpy(line, buf + pl, ll);
    line[ll] = '\0';
    const char *sp = strchr(line, ' ');
    if (!sp || sp == line || !sp[1] || strchr(sp + 1, ' ') ||
        (size_t)(sp - line) >= sizeof out->sid || strlen(sp + 1) >= sizeof out->org)
        return SELFREQ_NO_PREFIX;
    memcpy(out->sid, line, (size_t)(sp - line));
    snprintf(out->org, sizeof out->org, "%s", sp + 1);

    const char *req = eol + 2;
    const char *end = find_end(buf, len, req);
    if (!end)
        return SELFREQ_PARTIAL;
    /* A WebSocket client sends nothing before the 101: a second request or
     * any byte after the head is refused. */
    if (end != buf + len)
        return SELFREQ_NOT_RELAY;
    static const char want[] = "GET /browser/cdp?";
    size_t rl = (size_t)(end - req);
    if (rl < sizeof want - 1 || memcmp(req, want, sizeof want - 1) != 0)
        return SELFREQ_NOT_RELAY;
    const char *q = req + sizeof want - 1;
    const char *qend = q;
    while (qend < end && *qend != ' ' && *qend != '\r' && *qend != '\n' && *qend != '\0')
        qend++;
    static const char ver[] = " HTTP/1.1\r\n";
    if ((size_t)(end - qend) < sizeof ver - 1 || memcmp(qend, ver, sizeof ver - 1) != 0)
        return SELFREQ_NOT_RELAY;
    if (param(q, qend, "jwt", out->jwt, sizeof out->jwt) != 0)
        return SELFREQ_NOT_RELAY;
    if (param(q, qend, "target", out->target, sizeof out->target) != 0)
        out->target[0] = '\0';
    const char *lines = qend + sizeof ver - 1;
    char upgrade[32];
    if (header(lines, end - 2, "Upgrade", upgrade, sizeof upgrade) != 0 ||
        strcasecmp(upgrade, "websocket") != 0 ||
        header(lines, end - 2, "Sec-WebSocket-Key", out->key, sizeof out->key) != 0)
        return SELFREQ_NOT_UPGRADE;
    return SELFREQ_OK;
}
