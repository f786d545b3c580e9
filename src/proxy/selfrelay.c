/*
 * The session relay: see selfrelay.h. One accepting thread; each connection
 * gets a short-lived thread for its handshake (the request head within
 * SR_HEAD_MS), counted per session, per organization and in all so that one
 * tenant cannot take every slot (LIM_SELF_RELAY_*). After the 101 the relay
 * engine owns the socket and the thread ends.
 */
#include "proxy/selfrelay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/xalloc.h"
#include "proxy/selfreq.h"
#include "proxy/ws.h"

#define SR_HEAD_MS   10000 /* the whole head (prefix line and request) */
#define SR_ACCEPT_MS 200   /* how often the accepting thread looks at stopping */
#define SR_FINI_MS   15000 /* longest selfrelay_fini waits for handshakes */

struct pending {
    int used;
    char sid[64], org[64];
};

static struct {
    struct selfrelay_hooks hooks;
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

/* Reads the egress's line and the request head, parsed into r: SELFREQ_OK,
 * or why not (SELFREQ_PARTIAL: the client stopped or took too long). */
static enum selfreq_result read_request(int fd, char *buf, size_t cap, struct selfreq *r)
{
    int64_t end = clock_mono_us() + (int64_t)SR_HEAD_MS * 1000;
    size_t len = 0;
    enum selfreq_result res = SELFREQ_PARTIAL;
    while (res == SELFREQ_PARTIAL && len < cap) {
        int64_t left = (end - clock_mono_us()) / 1000;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        ssize_t n = recv(fd, buf + len, cap - len, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
        res = selfreq_parse(buf, len, r);
    }
    return res;
}

static void handshake(int fd)
{
    char *buf = xmalloc(LIM_HEADER_BYTES);
    struct selfreq *r = xmalloc(sizeof *r);
    int slot = -1, rc;
    enum selfreq_result res = read_request(fd, buf, LIM_HEADER_BYTES, r);
    struct err e;
    err_init(&e);
    char accept[29];
    if (res == SELFREQ_PARTIAL || res == SELFREQ_NO_PREFIX) {
        /* Nothing the egress sent, or nothing in time: no answer. */
    } else if ((slot = slot_take(r->sid, r->org)) < 0) {
        answer(fd, 429, "Too Many Requests", "too many connections to the relay at once");
    } else if (res == SELFREQ_NOT_RELAY ||
               SR.hooks.verify(SR.hooks.ctx, r->jwt, r->sid, r->org) != 0) {
        answer(fd, 403, "Forbidden",
               "a browser reaches only its own session's CDP relay, with its own token "
               "(GET /browser/cdp?jwt=)");
    } else if (res == SELFREQ_NOT_UPGRADE || ws_accept_key(r->key, accept) != 0) {
        answer(fd, 400, "Bad Request", "a WebSocket upgrade to the CDP relay was expected");
    } else if ((rc = SR.hooks.attach(SR.hooks.ctx, r->org, r->sid, r->target[0] ? r->target : NULL,
                                     fd, accept, &e)) == 0) {
        fd = -1; /* the relay's */
        log_info("session relay: session %s's own browser attached to its CDP relay", r->sid);
    } else if (rc == E_INVALID) {
        answer(fd, 400, "Bad Request", e.message);
    } else {
        answer(fd, 502, "Bad Gateway", e.message);
    }
    slot_give(slot);
    if (fd >= 0)
        close(fd);
    xfree(r);
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

int selfrelay_start(const struct selfrelay_hooks *hooks, int *port, struct err *e)
{
    SR.hooks = *hooks;
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
