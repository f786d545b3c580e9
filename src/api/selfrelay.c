/*
 * The session relay: see selfrelay.h. One accepting thread; each connection
 * gets a short-lived thread for its handshake (the request head within
 * SR_HEAD_MS), counted per session, per organization and in all so that one
 * tenant cannot take every slot (LIM_SELF_RELAY_*). After the 101 the relay
 * engine owns the socket and the thread ends.
 */
#include "api/selfrelay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "api/browsers.h"
#include "core/clock.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/token.h"
#include "core/xalloc.h"
#include "proxy/ws.h"

#define SR_HEAD_MS   10000 /* the whole head (prefix line and request) */
#define SR_ACCEPT_MS 200   /* how often the accepting thread looks at stopping */
#define SR_FINI_MS   15000 /* longest selfrelay_fini waits for handshakes */
#define SR_PREFIX    "BROWSERD-SELF "

struct pending {
    int used;
    char sid[64], org[64];
};

static struct {
    struct app *app;
    int lfd;
    pthread_t t;
    int started, stopping;
    pthread_mutex_t mu;
    pthread_cond_t gone; /* monotonic */
    int threads;         /* handshake threads running */
    struct pending p[LIM_SELF_RELAY_PENDING];
} SR = {.lfd = -1, .mu = PTHREAD_MUTEX_INITIALIZER};

/* Takes a handshake slot for (sid, org): -1 when the session, its
 * organization or the server has all it may have. */
static int slot_take(const char *sid, const char *org)
{
    int free_i = -1, by_sid = 0, by_org = 0;
    pthread_mutex_lock(&SR.mu);
    for (int i = 0; i < LIM_SELF_RELAY_PENDING; i++) {
        if (!SR.p[i].used) {
            if (free_i < 0)
                free_i = i;
            continue;
        }
        by_sid += strcmp(SR.p[i].sid, sid) == 0;
        by_org += strcmp(SR.p[i].org, org) == 0;
    }
    if (free_i >= 0 && by_sid < LIM_SELF_RELAY_PENDING_SESSION &&
        by_org < LIM_SELF_RELAY_PENDING_ORG) {
        SR.p[free_i].used = 1;
        snprintf(SR.p[free_i].sid, sizeof SR.p[free_i].sid, "%s", sid);
        snprintf(SR.p[free_i].org, sizeof SR.p[free_i].org, "%s", org);
    } else {
        free_i = -1;
    }
    pthread_mutex_unlock(&SR.mu);
    return free_i;
}

static void slot_give(int i)
{
    if (i < 0)
        return;
    pthread_mutex_lock(&SR.mu);
    SR.p[i].used = 0;
    pthread_mutex_unlock(&SR.mu);
}

static void answer(int fd, int status, const char *reason, const char *why)
{
    char buf[512];
    int n = snprintf(buf, sizeof buf,
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                     "Content-Length: %zu\r\n\r\n%s\n",
                     status, reason, strlen(why) + 1, why);
    if (n > 0)
        (void)!send(fd, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1, MSG_NOSIGNAL);
}

/* The value of header name (case-insensitive) in head, copied to out; -1
 * when absent. */
static int header(const char *head, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);
    for (const char *l = strstr(head, "\r\n"); l && l[2] != '\r'; l = strstr(l + 2, "\r\n")) {
        const char *h = l + 2;
        if (strncasecmp(h, name, nl) != 0 || h[nl] != ':')
            continue;
        const char *v = h + nl + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        const char *end = strstr(v, "\r\n");
        size_t n = end ? (size_t)(end - v) : strlen(v);
        while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
            n--;
        if (n >= cap)
            return -1;
        memcpy(out, v, n);
        out[n] = '\0';
        return 0;
    }
    return -1;
}

/* The value of query parameter name in q ("a=1&b=2"); -1 when absent or
 * too long. Values are taken as they are (tokens and target ids need no
 * escaping). */
static int query_param(const char *q, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);
    for (const char *p = q; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL) {
        if (strncmp(p, name, nl) != 0 || p[nl] != '=')
            continue;
        const char *v = p + nl + 1;
        size_t n = strcspn(v, "&");
        if (n >= cap)
            return -1;
        memcpy(out, v, n);
        out[n] = '\0';
        return 0;
    }
    return -1;
}

/* Reads the prefix line and the request head (nothing may follow it: a
 * WebSocket client waits for the 101). 0 with buf NUL-terminated. */
static int read_head(int fd, char *buf, size_t cap, size_t *len)
{
    int64_t end = clock_mono_us() + (int64_t)SR_HEAD_MS * 1000;
    *len = 0;
    while (*len + 1 < cap) {
        int64_t left = (end - clock_mono_us()) / 1000;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            return -1;
        ssize_t n = recv(fd, buf + *len, cap - 1 - *len, 0);
        if (n <= 0)
            return -1;
        *len += (size_t)n;
        buf[*len] = '\0';
        char *h = strstr(buf, "\r\n");
        if (h && strstr(h + 2, "\r\n\r\n"))
            return 0;
    }
    return -1;
}

static void handshake(int fd)
{
    char *buf = xmalloc(LIM_HEADER_BYTES + 128);
    size_t len = 0;
    int slot = -1;
    char sid[64] = "", org[64] = "";
    if (read_head(fd, buf, LIM_HEADER_BYTES + 128, &len) != 0 ||
        strncmp(buf, SR_PREFIX, sizeof SR_PREFIX - 1) != 0 ||
        sscanf(buf + sizeof SR_PREFIX - 1, "%63s %63s", sid, org) != 2) {
        close(fd);
        xfree(buf);
        return;
    }
    const char *req = strstr(buf, "\r\n") + 2;
    const char *end = strstr(req, "\r\n\r\n");
    if ((slot = slot_take(sid, org)) < 0) {
        answer(fd, 429, "Too Many Requests", "too many connections to the relay at once");
        goto done;
    }
    /* The request line: exactly GET /browser/cdp?... HTTP/1.1. */
    static const char want[] = "GET /browser/cdp?";
    const char *sp = strncmp(req, want, sizeof want - 1) == 0 ? strchr(req + 4, ' ') : NULL;
    if (!sp || strncmp(sp, " HTTP/1.1\r\n", 11) != 0 || end + 4 != buf + len) {
        answer(fd, 403, "Forbidden",
               "a browser reaches only its own session's CDP relay (GET /browser/cdp?jwt=)");
        goto done;
    }
    char query[TOKEN_MAX + 128];
    size_t ql = (size_t)(sp - (req + sizeof want - 1));
    if (ql >= sizeof query) {
        answer(fd, 403, "Forbidden", "the query is too long");
        goto done;
    }
    memcpy(query, req + sizeof want - 1, ql);
    query[ql] = '\0';
    char jwt[TOKEN_MAX], target[72], upgrade[32], key[64], accept[29];
    int has_target = query_param(query, "target", target, sizeof target) == 0;
    struct token_claims c;
    struct err e;
    err_init(&e);
    if (query_param(query, "jwt", jwt, sizeof jwt) != 0 ||
        token_verify(SR.app->token_key, sizeof SR.app->token_key, jwt, "cdp", clock_now_ms() / 1000,
                     &c, &e) != 0 ||
        strcmp(c.sub, sid) != 0 || strcmp(c.org, org) != 0) {
        answer(fd, 403, "Forbidden", "a browser may use only its own session's cdp token");
        goto done;
    }
    if ((has_target && !cdp_target_id_ok(target)) ||
        header(req, "Upgrade", upgrade, sizeof upgrade) != 0 ||
        strcasecmp(upgrade, "websocket") != 0 ||
        header(req, "Sec-WebSocket-Key", key, sizeof key) != 0 || ws_accept_key(key, accept) != 0) {
        answer(fd, 400, "Bad Request", "a WebSocket upgrade to the CDP relay was expected");
        goto done;
    }
    if (browsers_cdp_fd(SR.app, sid, has_target ? target : NULL, fd, accept, &e) == 0) {
        fd = -1; /* the relay's */
        log_info("session relay: session %s's own browser attached to its CDP relay", sid);
    } else {
        answer(fd, 502, "Bad Gateway", e.message);
    }
done:
    slot_give(slot);
    if (fd >= 0)
        close(fd);
    xfree(buf);
}

static void *handshake_main(void *arg)
{
    handshake((int)(intptr_t)arg);
    pthread_mutex_lock(&SR.mu);
    SR.threads--;
    pthread_cond_broadcast(&SR.gone);
    pthread_mutex_unlock(&SR.mu);
    return NULL;
}

static void *accept_main(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&SR.mu);
        int stop = SR.stopping;
        pthread_mutex_unlock(&SR.mu);
        if (stop)
            break;
        struct pollfd p = {.fd = SR.lfd, .events = POLLIN};
        if (poll(&p, 1, SR_ACCEPT_MS) <= 0)
            continue;
        int fd = accept4(SR.lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        pthread_mutex_lock(&SR.mu);
        int ok = !SR.stopping && SR.threads < LIM_SELF_RELAY_PENDING;
        if (ok)
            SR.threads++;
        pthread_mutex_unlock(&SR.mu);
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (ok && pthread_create(&t, &at, handshake_main, (void *)(intptr_t)fd) != 0) {
            pthread_mutex_lock(&SR.mu);
            SR.threads--;
            pthread_mutex_unlock(&SR.mu);
            ok = 0;
        }
        pthread_attr_destroy(&at);
        if (!ok)
            close(fd);
    }
    return NULL;
}

int selfrelay_start(struct app *app, int *port, struct err *e)
{
    SR.app = app;
    clock_cond_init(&SR.gone);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 64) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        int er = errno;
        if (fd >= 0)
            close(fd);
        return err_set(e, E_INTERNAL, "internal", "session relay: cannot listen: %s", strerror(er));
    }
    SR.lfd = fd;
    if (pthread_create(&SR.t, NULL, accept_main, NULL) != 0) {
        close(fd);
        SR.lfd = -1;
        return err_set(e, E_INTERNAL, "internal", "session relay: no thread");
    }
    pthread_setname_np(SR.t, "self-relay");
    SR.started = 1;
    __atomic_store_n(port, (int)ntohs(sa.sin_port), __ATOMIC_RELAXED);
    return 0;
}

void selfrelay_fini(void)
{
    if (!SR.started)
        return;
    pthread_mutex_lock(&SR.mu);
    SR.stopping = 1;
    pthread_mutex_unlock(&SR.mu);
    pthread_join(SR.t, NULL);
    SR.started = 0;
    close(SR.lfd);
    SR.lfd = -1;
    pthread_mutex_lock(&SR.mu);
    struct timespec dl = clock_deadline(SR_FINI_MS);
    while (SR.threads > 0 && pthread_cond_timedwait(&SR.gone, &SR.mu, &dl) != ETIMEDOUT)
        ;
    if (SR.threads > 0)
        log_error("session relay: %d handshakes still running at shutdown", SR.threads);
    pthread_mutex_unlock(&SR.mu);
}
