/*
 * extfetch: a blocking HTTP/1.1 GET on the calling thread (an HTTP worker
 * of the API: the store fetch is a rare, explicit call), bounded in time by
 * a monotonic deadline applied to connect, every read and every write. The
 * exchange itself is proxy/httpc's; this file follows the redirects and
 * chooses the address rule of each hop.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/clock.h"
#include "core/xalloc.h"
#include "proxy/httpc.h"
#include "proxy/netguard.h"
#include "runtime/extfetch.h"

struct url {
    int https;
    char host[256];
    char port[8];
    char *path; /* owned, starts with '/' */
};

static int url_parse(const char *s, struct url *u)
{
    memset(u, 0, sizeof *u);
    const char *p;
    if (strncmp(s, "http://", 7) == 0)
        p = s + 7;
    else if (strncmp(s, "https://", 8) == 0) {
        p = s + 8;
        u->https = 1;
    } else
        return -1;
    size_t hl = strcspn(p, "/?#");
    const char *hostend = p + hl;
    if (hl == 0 || memchr(p, '@', hl))
        return -1;
    const char *colon = p[0] == '[' ? memchr(p, ']', hl) : memchr(p, ':', hl);
    if (p[0] == '[') { /* [v6]:port */
        if (!colon)
            return -1;
        snprintf(u->host, sizeof u->host, "%.*s", (int)(colon - p - 1), p + 1);
        colon = colon + 1 < hostend && colon[1] == ':' ? colon + 1 : NULL;
    } else {
        size_t n = colon ? (size_t)(colon - p) : hl;
        if (n >= sizeof u->host)
            return -1;
        snprintf(u->host, sizeof u->host, "%.*s", (int)n, p);
    }
    if (colon) {
        size_t n = (size_t)(hostend - colon - 1);
        if (n == 0 || n >= sizeof u->port || strspn(colon + 1, "0123456789") < n)
            return -1;
        snprintf(u->port, sizeof u->port, "%.*s", (int)n, colon + 1);
    } else {
        snprintf(u->port, sizeof u->port, "%s", u->https ? "443" : "80");
    }
    size_t pl = strcspn(hostend, "#");
    u->path = *hostend == '/' ? xstrndup(hostend, pl) : xasprintf("/%.*s", (int)pl, hostend);
    return 0;
}

static int dial(const struct url *u, int guarded, int64_t deadline, struct err *e)
{
    if (guarded) {
        /* A redirect away from the operator's store: the egress's address
         * rule after DNS, and one answer for refused and unreachable. */
        int fd = netguard_dial(u->host, (int)strtol(u->port, NULL, 10), deadline);
        if (fd < 0)
            return err_set(e, E_UNAVAIL, "unavailable", "%s port %s: cannot connect", u->host,
                           u->port);
        return fd;
    }
    return httpc_dial(u->host, u->port, deadline, e);
}

/* One exchange: the answer (any status) in *r. A failure names the host;
 * bytes that are not HTTP fail as unavailable, like a host that does not
 * answer. */
static int exchange(const struct url *u, int guarded, size_t max, int64_t deadline,
                    struct httpc_resp *r, struct err *e)
{
    int fd = dial(u, guarded, deadline, e);
    if (fd < 0)
        return fd;
    struct httpc_req rq = {
        .method = "GET",
        .target = u->path,
        .host = u->host,
        .fields = "Accept: */*\r\nAccept-Encoding: identity\r\n",
        .body = NULL,
        .body_len = 0,
        .tls_host = u->https ? u->host : NULL,
        .body_max = max,
        .head_only = 0,
        .deadline_ms = deadline,
    };
    int rc = httpc_exchange(fd, &rq, r, e);
    if (rc == 0)
        return 0;
    char code[ERR_CODE_MAX], why[ERR_MSG_MAX];
    snprintf(code, sizeof code, "%s", rc == E_UPSTREAM ? "unavailable" : e->code);
    snprintf(why, sizeof why, "%s", e->message);
    return err_set(e, rc == E_UPSTREAM ? E_UNAVAIL : rc, code, "%s: %s", u->host, why);
}

int extfetch_get(const char *url, size_t max, int timeout_ms, char **body, size_t *len,
                 struct err *e)
{
    int64_t deadline = clock_mono_ms() + timeout_ms;
    char *cur = xstrdup(url);
    *body = NULL;
    *len = 0;
    char host0[256] = "", port0[8] = "";
    for (int hop = 0;; hop++) {
        struct url u;
        if (url_parse(cur, &u) != 0) {
            int rc = err_set(e, E_INVALID, "bad_request",
                             "cannot fetch %.300s (http or https "
                             "URLs only)",
                             cur);
            xfree(cur);
            return rc;
        }
        if (hop == 0) {
            snprintf(host0, sizeof host0, "%s", u.host);
            snprintf(port0, sizeof port0, "%s", u.port);
        }
        int guarded = strcasecmp(u.host, host0) != 0 || strcmp(u.port, port0) != 0;
        struct httpc_resp r;
        int rc = exchange(&u, guarded, max, deadline, &r, e);
        const struct httpresp_field *lf = rc == 0 ? httpresp_field(&r.head, "Location") : NULL;
        if (lf && lf->value_len && r.status >= 300 && r.status < 400) {
            char loc[2048];
            snprintf(loc, sizeof loc, "%.*s", (int)lf->value_len, lf->value);
            httpc_resp_free(&r);
            char *next =
                loc[0] == '/' && loc[1] != '/'
                    ? xasprintf("%s://%s:%s%s", u.https ? "https" : "http", u.host, u.port, loc)
                    : xstrdup(loc);
            xfree(u.path);
            xfree(cur);
            cur = next;
            if (hop + 1 > EXTFETCH_REDIRECTS) {
                xfree(cur);
                return err_set(e, E_UNAVAIL, "unavailable", "more than %d redirects",
                               EXTFETCH_REDIRECTS);
            }
            continue;
        }
        if (rc == 0 && (r.status < 200 || r.status > 299)) {
            rc = err_set(e, E_UNAVAIL, "unavailable", "%s answered HTTP %d", u.host, r.status);
            httpc_resp_free(&r);
        }
        xfree(u.path);
        xfree(cur);
        if (rc == 0) {
            /* The body moves to the front of the answer's buffer, which the
             * caller takes. */
            memmove(r.raw, r.body, r.body_len + 1);
            *body = r.raw;
            *len = r.body_len;
        }
        return rc;
    }
}
