/* netguard: outbound connections held to the egress's address rule (see
 * netguard.h). */
#include "proxy/netguard.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "domain/addrclass.h"

#define NETGUARD_ADDRS_MAX 8 /* resolved addresses tried per dial */

/* Set once at startup and cleared at shutdown; read on any thread. */
static struct guard {
    netguard_check_fn fn;
    void *ctx;
} * G;

void netguard_set(netguard_check_fn fn, void *ctx)
{
    static struct guard slot;
    if (!fn) {
        __atomic_store_n(&G, NULL, __ATOMIC_RELEASE);
        return;
    }
    slot.fn = fn;
    slot.ctx = ctx;
    __atomic_store_n(&G, &slot, __ATOMIC_RELEASE);
}

static int allowed(const struct sockaddr *sa, int port)
{
    uint8_t a[16];
    int fam;
    if (sa->sa_family == AF_INET) {
        memcpy(a, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        fam = 4;
    } else if (sa->sa_family == AF_INET6) {
        memcpy(a, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        fam = 6;
    } else {
        return 0;
    }
    struct guard *g = __atomic_load_n(&G, __ATOMIC_ACQUIRE);
    return g ? g->fn(g->ctx, fam, a, port) : addrclass_allowed(NULL, 0, fam, a);
}

int netguard_check_literal(const char *host, int port)
{
    uint8_t a[16];
    int fam = addrclass_literal(host, a);
    size_t n = strlen(host);
    if (fam) {
        struct guard *g = __atomic_load_n(&G, __ATOMIC_ACQUIRE);
        int ok = g ? g->fn(g->ctx, fam, a, port) : addrclass_allowed(NULL, 0, fam, a);
        return ok ? 0 : -1;
    }
    if (strcasecmp(host, "localhost") == 0 || strcasecmp(host, "localhost.") == 0 ||
        (n > 10 && strcasecmp(host + n - 10, ".localhost") == 0) ||
        (n > 11 && strcasecmp(host + n - 11, ".localhost.") == 0))
        return -1;
    return 0;
}

static int connect_by(const struct addrinfo *ai, int64_t deadline_ms)
{
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
        return fd;
    if (errno == EINPROGRESS) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        for (;;) {
            int64_t left = deadline_ms - clock_mono_ms();
            int r = left > 0 ? poll(&p, 1, (int)left) : 0;
            if (r < 0 && errno == EINTR)
                continue;
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            if (r == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0)
                return fd;
            break;
        }
    }
    close(fd);
    return -1;
}

int netguard_dial(const char *host, int port, int64_t deadline_ms)
{
    char h[256];
    size_t n = strlen(host);
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        host++;
        n -= 2;
    }
    if (n == 0 || n >= sizeof h || port < 1 || port > 65535)
        return -1;
    memcpy(h, host, n);
    h[n] = '\0';
    char ps[8];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_family = AF_UNSPEC}, *res = NULL;
    if (getaddrinfo(h, ps, &hints, &res) != 0 || !res)
        return -1;
    int fd = -1, tried = 0;
    for (struct addrinfo *ai = res; ai && fd < 0 && tried < NETGUARD_ADDRS_MAX; ai = ai->ai_next) {
        if (!allowed(ai->ai_addr, port))
            continue;
        tried++;
        fd = connect_by(ai, deadline_ms);
    }
    freeaddrinfo(res);
    return fd;
}
