/*
 * Egress proxy benchmark (issue 6). Direct loopback connections versus
 * tunnels through one session listener of the egress (HTTP CONNECT), trials
 * interleaved in one run so both sides see the same machine:
 *
 *   - connect latency: from socket() until the connection is usable (direct:
 *     connect() returned; via egress: the CONNECT answer head has arrived);
 *   - bulk throughput: N bytes through one connection, half-close, the sink's
 *     one-byte answer;
 *   - what the bulk trials of each way cost: the process's CPU, the relaying
 *     thread's CPU, wake-ups and preemptions, and the host's load average
 *     around them (the machine may be shared);
 *   - many tunnels: K tunnels open at once, 1 KiB echoed through each, with
 *     the process's thread count and resident memory while they are open;
 *   - the bytes egress_bytes counted for the session.
 *
 * Prints a Markdown section on stdout (bench/run.sh appends it to
 * docs/BENCHMARKS.md). Exits 1 when something does not work (a tunnel
 * refused, a byte lost, a count short); a missed target is only reported.
 *
 *   egress [--bytes N] [--tunnels K] [--connects C] [--runs R]
 *
 * N also from EGRESS_BENCH_BYTES, K from EGRESS_BENCH_TUNNELS (the options
 * win); N and K accept a K, M or G suffix (KiB, MiB, GiB).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/err.h"
#include "core/xalloc.h"
#include "proxy/egress.h"

#define IO_MS       10000 /* any one connect, head or answer */
#define BULK_MS     60000 /* one bulk transfer, end to end */
#define SETTLE_MS   10000 /* for the far side to close after a client closed */
#define SINK_BUF    (256 * 1024)
#define PAYLOAD     1024 /* bytes echoed through each of the many tunnels */
#define WINDOW      64   /* tunnels being set up at once */
#define OWN_THREADS 3    /* this program's: main, sink, echo */
#define SESSION     "bench"

static int failures;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("egress bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    failures++;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* 1 when fd has one of events within ms, else 0 (timeout or error). */
static int wait_fd(int fd, short events, int ms)
{
    double end = now_us() + ms * 1e3;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        double left = (end - now_us()) / 1e3;
        int rc = poll(&p, 1, left > 0 ? (int)left : 0);
        if (rc > 0)
            return 1;
        if (rc == 0 || errno != EINTR)
            return 0;
    }
}

static void sleep_ms(int ms)
{
    poll(NULL, 0, ms);
}

static int listen_loopback(int *port, int nonblock)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, SOMAXCONN) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

static struct sockaddr_in loopback(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                             .sin_port = htons((uint16_t)port)};
    return sa;
}

static int send_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of n samples (sorted in place), like bench/sessions.mjs. */
static double quantile(double *v, size_t n, double q)
{
    qsort(v, n, sizeof *v, cmp_double);
    size_t i = (size_t)((double)n * q);
    return v[i < n ? i : n - 1];
}

static int count_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *de; (de = readdir(d));)
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

/* VmRSS of this process in kB, or -1. */
static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = strtol(line + 6, NULL, 10);
    fclose(f);
    return kb;
}

/* ---- the sink: reads each connection to EOF, answers one byte, closes ---- */

struct sink {
    int lfd, port;
    pthread_t thr;
    unsigned long closed; /* connections done (__atomic) */
    uint64_t last;        /* bytes read from the last one (__atomic) */
};

static void *sink_main(void *arg)
{
    struct sink *k = arg;
    char *buf = xmalloc(SINK_BUF);
    for (;;) {
        int fd = accept4(k->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0 && errno == EINTR)
            continue;
        if (fd < 0)
            break;
        /* A stuck peer must not stall the sink for ever. */
        struct timeval tv = {.tv_sec = BULK_MS / 1000};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        uint64_t got = 0;
        ssize_t r;
        while ((r = recv(fd, buf, SINK_BUF, 0)) > 0 || (r < 0 && errno == EINTR))
            got += r > 0 ? (uint64_t)r : 0;
        (void)send(fd, "k", 1, MSG_NOSIGNAL);
        close(fd);
        __atomic_store_n(&k->last, got, __ATOMIC_RELAXED);
        __atomic_add_fetch(&k->closed, 1, __ATOMIC_RELEASE);
    }
    xfree(buf);
    return NULL;
}

/* Waits until the sink has finished n connections in all. 0 or -1. */
static int sink_wait(struct sink *k, unsigned long n)
{
    double end = now_us() + SETTLE_MS * 1e3;
    while (__atomic_load_n(&k->closed, __ATOMIC_ACQUIRE) < n) {
        if (now_us() > end)
            return -1;
        sleep_ms(1);
    }
    return 0;
}

/* ---- the echo server: epoll, one thread, writes back what it reads ---- */

struct echo {
    int lfd, port, epfd, wake[2];
    pthread_t thr;
    int *conns; /* open connections, the thread's own while it runs */
    size_t nconns, cap;
    long live; /* open connections (__atomic) */
};

static void echo_drop(struct echo *s, int fd)
{
    epoll_ctl(s->epfd, EPOLL_CTL_DEL, fd, NULL);
    close(fd);
    for (size_t i = 0; i < s->nconns; i++)
        if (s->conns[i] == fd) {
            s->conns[i] = s->conns[--s->nconns];
            break;
        }
    __atomic_sub_fetch(&s->live, 1, __ATOMIC_RELAXED);
}

static void echo_accept(struct echo *s)
{
    for (;;) {
        int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            close(fd);
            continue;
        }
        if (s->nconns == s->cap) {
            s->cap = s->cap ? 2 * s->cap : 1024;
            s->conns = xrealloc(s->conns, s->cap * sizeof *s->conns);
        }
        s->conns[s->nconns++] = fd;
        __atomic_add_fetch(&s->live, 1, __ATOMIC_RELAXED);
    }
}

/* Echoes what it reads. The payloads are 1 KiB and a fresh socket buffer
 * holds far more, so a write that cannot complete at once is a failure
 * (the connection is dropped and the client reports it). */
static void *echo_main(void *arg)
{
    struct echo *s = arg;
    char buf[16384];
    struct epoll_event ev[256];
    for (;;) {
        int n = epoll_wait(s->epfd, ev, 256, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return NULL;
        for (int i = 0; i < n; i++) {
            int fd = ev[i].data.fd;
            if (fd == s->wake[0])
                return NULL;
            if (fd == s->lfd) {
                echo_accept(s);
                continue;
            }
            ssize_t r = recv(fd, buf, sizeof buf, 0);
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
                continue;
            if (r <= 0 || send(fd, buf, (size_t)r, MSG_NOSIGNAL) != r)
                echo_drop(s, fd);
        }
    }
}

static int echo_start(struct echo *s)
{
    memset(s, 0, sizeof *s);
    s->lfd = listen_loopback(&s->port, 1);
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (s->lfd < 0 || s->epfd < 0 || pipe2(s->wake, O_CLOEXEC) != 0)
        return -1;
    struct epoll_event l = {.events = EPOLLIN, .data.fd = s->lfd};
    struct epoll_event w = {.events = EPOLLIN, .data.fd = s->wake[0]};
    if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &l) != 0 ||
        epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->wake[0], &w) != 0 ||
        pthread_create(&s->thr, NULL, echo_main, s) != 0)
        return -1;
    return 0;
}

static void echo_stop(struct echo *s)
{
    if (write(s->wake[1], "x", 1) == 1)
        pthread_join(s->thr, NULL);
    for (size_t i = 0; i < s->nconns; i++)
        close(s->conns[i]);
    xfree(s->conns);
    close(s->lfd);
    close(s->epfd);
    close(s->wake[0]);
    close(s->wake[1]);
}

/* ---- one connection, direct or through the egress ---- */

struct bench {
    struct egress *eg;
    int eport;          /* the session's listener */
    struct egress *keg; /* a second engine with the in-kernel splice (sockmap) */
    int kport;          /* its session's listener */
    struct sink sink;
    struct echo echo;
    struct floor_relay *floor; /* the minimal relay (bench_bulk's third way) */
    unsigned long sink_conns;  /* connections made to the sink so far */
    char connect_req[160];     /* CONNECT to the sink */
    size_t connect_len;
};

/* ---- the floor: the least a user-space relay does ---- */

/* What any relay in user space costs on this machine, to compare the egress
 * with: one thread, one connection at a time, blocking splice(2) through a
 * 1 MiB pipe one way and the sink's one-byte answer back. No CONNECT, no
 * rules, no polling, no counting: the egress does all of that besides. */
struct floor_relay {
    int lfd, port, sink_port;
    pthread_t thr;
};

static void floor_serve(int a, int sink_port)
{
    int b = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = loopback(sink_port);
    int p[2] = {-1, -1};
    if (b < 0 || connect(b, (struct sockaddr *)&sa, sizeof sa) != 0 || pipe2(p, O_CLOEXEC) != 0) {
        if (b >= 0)
            close(b);
        return;
    }
    int one = 1;
    setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    (void)fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
    for (;;) {
        ssize_t n = splice(a, NULL, p[1], NULL, 1 << 20, SPLICE_F_MOVE);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        while (n > 0) {
            ssize_t m = splice(p[0], NULL, b, NULL, (size_t)n, SPLICE_F_MOVE);
            if (m < 0 && errno == EINTR)
                continue;
            if (m <= 0)
                goto out;
            n -= m;
        }
    }
    char k;
    if (shutdown(b, SHUT_WR) == 0 && recv(b, &k, 1, 0) == 1)
        (void)send(a, &k, 1, MSG_NOSIGNAL);
out:
    close(p[0]);
    close(p[1]);
    close(b);
}

static void *floor_main(void *arg)
{
    struct floor_relay *f = arg;
    for (;;) {
        int a = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (a < 0 && errno == EINTR)
            continue;
        if (a < 0)
            return NULL; /* the listener was shut down */
        floor_serve(a, f->sink_port);
        close(a);
    }
}

/* Reads the CONNECT answer head; 0 when it is "HTTP/1.1 200", else -1. */
static int read_connect_answer(int fd)
{
    char head[1024];
    size_t len = 0;
    head[0] = '\0';
    while (!strstr(head, "\r\n\r\n")) {
        if (len + 1 >= sizeof head || !wait_fd(fd, POLLIN, IO_MS))
            return -1;
        ssize_t r = recv(fd, head + len, sizeof head - 1 - len, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        len += (size_t)r;
        head[len] = '\0';
    }
    return strncmp(head, "HTTP/1.1 200", 12) == 0 ? 0 : -1;
}

/* Opens a usable connection to the sink (proxied 1: through the egress; 2:
 * through the minimal relay; 3: through the egress splicing in the kernel) and stores in *us the
 * time from socket() until then. The socket or -1. */
static int open_to_sink(struct bench *b, int proxied, double *us)
{
    double t0 = now_us();
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {.tv_sec = IO_MS / 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in sa = loopback(proxied == 3   ? b->kport
                                     : proxied == 2 ? b->floor->port
                                     : proxied      ? b->eport
                                                    : b->sink.port);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        ((proxied == 1 || proxied == 3) &&
         (send_all(fd, b->connect_req, b->connect_len) != 0 || read_connect_answer(fd) != 0))) {
        close(fd);
        return -1;
    }
    *us = now_us() - t0;
    b->sink_conns++;
    return fd;
}

/* Closes a connection to the sink and waits until the sink is done with it,
 * so one trial's teardown does not run into the next trial. */
static int close_to_sink(struct bench *b, int fd)
{
    close(fd);
    return sink_wait(&b->sink, b->sink_conns);
}

static const char *way(int proxied)
{
    return proxied == 3   ? "via egress in the kernel"
           : proxied == 2 ? "via the minimal relay"
           : proxied      ? "via egress"
                          : "direct";
}

/* Connect latency, n trials each way, interleaved. */
static int bench_connect(struct bench *b, int n, double *direct, double *proxied)
{
    for (int i = 0; i < 2 * n; i++) {
        int p = i % 2;
        double us = 0;
        int fd = open_to_sink(b, p, &us);
        if (fd < 0) {
            fail("connect %s, trial %d: the connection did not open", way(p), i / 2 + 1);
            return -1;
        }
        (p ? proxied : direct)[i / 2] = us;
        if (close_to_sink(b, fd) != 0) {
            fail("connect %s, trial %d: the sink's side was not closed", way(p), i / 2 + 1);
            return -1;
        }
    }
    return 0;
}

/* CPU seconds used so far by the whole process, or by its egress threads
 * (named "egress-*" by the engine). */
static double cpu_process(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* CPU seconds and context switches of this process's threads whose name
 * starts with prefix: the egress's workers ("egress-w", named by the
 * engine) or the minimal relay ("relay-floor"). Voluntary switches are the
 * thread going to sleep for want of work (one per wake-up); involuntary ones
 * are preemptions, which a busy host adds. */
struct tstat {
    double cpu;
    unsigned long vcsw, ivcsw;
};

static unsigned long status_field(const char *path, const char *name)
{
    FILE *f = fopen(path, "r");
    char line[256];
    unsigned long v = 0;
    size_t n = strlen(name);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, name, n) == 0)
            v = strtoul(line + n, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

static struct tstat thread_stats(const char *prefix)
{
    struct tstat t = {0};
    DIR *d = opendir("/proc/self/task");
    long hz = sysconf(_SC_CLK_TCK);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char path[300], buf[1024];
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", de->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        /* "tid (comm) state ppid ... utime(14) stime(15)" */
        char *open_p = strchr(buf, '('), *close_p = strrchr(buf, ')');
        if (!open_p || !close_p || strncmp(open_p + 1, prefix, strlen(prefix)) != 0)
            continue;
        unsigned long ut = 0, st = 0;
        if (sscanf(close_p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) ==
            2)
            t.cpu += (double)(ut + st) / (double)hz;
        snprintf(path, sizeof path, "/proc/self/task/%s/status", de->d_name);
        t.vcsw += status_field(path, "voluntary_ctxt_switches:");
        t.ivcsw += status_field(path, "nonvoluntary_ctxt_switches:");
    }
    if (d)
        closedir(d);
    return t;
}

/* What the bulk trials of one way cost: process CPU, and the CPU and
 * context switches of the thread that relays (none for direct). */
struct waycost {
    double cpu; /* the whole process, seconds */
    struct tstat relay;
};

/* Bulk throughput, runs trials each way, interleaved; MB/s (10^6 bytes).
 * cost[way]: what the trials of each way cost (way as open_to_sink's
 * proxied). The in-kernel way's relaying runs in the kernel's work items,
 * outside this process: only what its sockets cost the sender and the sink
 * (the verdict runs in the sender's receive path) is counted. */
static const char *const relay_thread[4] = {NULL, "egress-w", "relay-floor", "egress-w"};

static int bench_bulk(struct bench *b, size_t nbytes, int runs, double *direct, double *proxied,
                      double *floor, double *kern, struct waycost cost[4])
{
    char *buf = xcalloc(1, SINK_BUF);
    int rc = 0;
    for (int i = 0; i < 4 * runs && rc == 0; i++) {
        int p = i % 4;
        double us = 0;
        int fd = open_to_sink(b, p, &us);
        if (fd < 0) {
            fail("throughput %s, trial %d: the connection did not open", way(p), i / 4 + 1);
            rc = -1;
            break;
        }
        struct tstat r0 = {0};
        if (relay_thread[p])
            r0 = thread_stats(relay_thread[p]);
        double t0 = now_us(), c0 = cpu_process();
        int ok = 1;
        for (size_t left = nbytes; ok && left;) {
            size_t k = left < SINK_BUF ? left : SINK_BUF;
            ok = send_all(fd, buf, k) == 0;
            left -= k;
        }
        char ack = 0;
        ok = ok && shutdown(fd, SHUT_WR) == 0 && wait_fd(fd, POLLIN, BULK_MS) &&
             recv(fd, &ack, 1, 0) == 1;
        double t1 = now_us();
        (p == 3 ? kern : p == 2 ? floor : p ? proxied : direct)[i / 4] = (double)nbytes / (t1 - t0);
        cost[p].cpu += cpu_process() - c0;
        if (relay_thread[p]) {
            struct tstat r1 = thread_stats(relay_thread[p]);
            cost[p].relay.cpu += r1.cpu - r0.cpu;
            cost[p].relay.vcsw += r1.vcsw - r0.vcsw;
            cost[p].relay.ivcsw += r1.ivcsw - r0.ivcsw;
        }
        if (close_to_sink(b, fd) != 0)
            ok = 0;
        uint64_t got = __atomic_load_n(&b->sink.last, __ATOMIC_RELAXED);
        if (!ok || got != nbytes) {
            fail("throughput %s, trial %d: the sink read %" PRIu64 " of %zu bytes%s", way(p),
                 i / 4 + 1, got, nbytes, ok ? "" : " (or the answer or close never came)");
            rc = -1;
        }
    }
    xfree(buf);
    return rc;
}

/* ---- many tunnels: non-blocking clients driven by one epoll ---- */

enum tstate { T_CONNECTING, T_REQUEST, T_HEAD, T_PAYLOAD, T_ECHO, T_OPEN, T_FAILED };

struct tun {
    int fd;
    enum tstate st;
    size_t off;     /* progress within the current state */
    char head[128]; /* the CONNECT answer so far */
};

static uint8_t pattern(size_t tunnel, size_t i)
{
    return (uint8_t)(tunnel * 131 + i * 7 + 1);
}

static uint32_t tun_fail(struct tun *t)
{
    t->st = T_FAILED;
    return 0;
}

/* Drives one tunnel as far as its socket allows; returns the events it
 * waits for next (0 when it is open or failed). */
static uint32_t tun_step(struct tun *t, size_t idx, const char *req, size_t req_len)
{
    uint8_t buf[PAYLOAD];
    for (;;) {
        ssize_t r;
        switch (t->st) {
        case T_CONNECTING: {
            int err = 0;
            socklen_t el = sizeof err;
            if (getsockopt(t->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0)
                return tun_fail(t);
            t->st = T_REQUEST;
            t->off = 0;
            break;
        }
        case T_REQUEST:
            r = send(t->fd, req + t->off, req_len - t->off, MSG_NOSIGNAL);
            if (r < 0 && (errno == EAGAIN || errno == EINTR))
                return EPOLLOUT;
            if (r <= 0)
                return tun_fail(t);
            t->off += (size_t)r;
            if (t->off == req_len) {
                t->st = T_HEAD;
                t->off = 0;
            }
            break;
        case T_HEAD:
            r = recv(t->fd, t->head + t->off, sizeof t->head - 1 - t->off, 0);
            if (r < 0 && (errno == EAGAIN || errno == EINTR))
                return EPOLLIN;
            if (r <= 0)
                return tun_fail(t);
            t->off += (size_t)r;
            t->head[t->off] = '\0';
            if (strstr(t->head, "\r\n\r\n")) {
                if (strncmp(t->head, "HTTP/1.1 200", 12) != 0)
                    return tun_fail(t);
                t->st = T_PAYLOAD;
                t->off = 0;
            } else if (t->off + 1 >= sizeof t->head) {
                return tun_fail(t);
            }
            break;
        case T_PAYLOAD:
            for (size_t i = t->off; i < PAYLOAD; i++)
                buf[i - t->off] = pattern(idx, i);
            r = send(t->fd, buf, PAYLOAD - t->off, MSG_NOSIGNAL);
            if (r < 0 && (errno == EAGAIN || errno == EINTR))
                return EPOLLOUT;
            if (r <= 0)
                return tun_fail(t);
            t->off += (size_t)r;
            if (t->off == PAYLOAD) {
                t->st = T_ECHO;
                t->off = 0;
            }
            break;
        case T_ECHO:
            r = recv(t->fd, buf, PAYLOAD - t->off, 0);
            if (r < 0 && (errno == EAGAIN || errno == EINTR))
                return EPOLLIN;
            if (r <= 0)
                return tun_fail(t);
            for (size_t i = 0; i < (size_t)r; i++)
                if (buf[i] != pattern(idx, t->off + i))
                    return tun_fail(t);
            t->off += (size_t)r;
            if (t->off == PAYLOAD) {
                t->st = T_OPEN;
                return 0;
            }
            break;
        case T_OPEN:
        case T_FAILED:
            return 0;
        }
    }
}

struct many {
    int open, threads_before, threads_open;
    double setup_s;
    long rss_before, rss_open;
    int lingering; /* destination connections still open after the clients closed */
};

static int start_tunnel(int ep, struct tun *t, size_t idx, int eport)
{
    t->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = loopback(eport);
    struct epoll_event ev = {.events = EPOLLOUT, .data.u64 = idx};
    if (t->fd < 0 ||
        (connect(t->fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS) ||
        epoll_ctl(ep, EPOLL_CTL_ADD, t->fd, &ev) != 0) {
        t->st = T_FAILED;
        return -1;
    }
    t->st = T_CONNECTING;
    return 0;
}

/* Opens k tunnels to the echo server, WINDOW of them being set up at a time,
 * echoes PAYLOAD bytes through each, measures the process with all of them
 * open, then closes them and waits for the echo server to see every close. */
static int bench_many(struct bench *b, int k, struct many *m)
{
    char req[160];
    int rl =
        snprintf(req, sizeof req, "CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n",
                 b->echo.port, b->echo.port);
    struct tun *ts = xmalloc((size_t)k * sizeof *ts);
    /* Touched now, so the memory of the client side is in the baseline. */
    memset(ts, 0, (size_t)k * sizeof *ts);
    for (int i = 0; i < k; i++)
        ts[i].fd = -1;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event *evs = xcalloc(WINDOW, sizeof *evs);
    m->threads_before = count_threads();
    m->rss_before = rss_kb();

    double t0 = now_us();
    int next = 0, busy = 0, done = 0, failed = 0;
    while (ep >= 0 && done + failed < k) {
        while (busy < WINDOW && next < k) {
            if (start_tunnel(ep, &ts[next], (size_t)next, b->eport) == 0)
                busy++;
            else
                failed++;
            next++;
        }
        int n = busy ? epoll_wait(ep, evs, WINDOW, IO_MS) : 0;
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 && busy) {
            fail("many tunnels: %d tunnels made no progress for %d ms", busy, IO_MS);
            break;
        }
        for (int i = 0; i < n; i++) {
            size_t idx = (size_t)evs[i].data.u64;
            struct tun *t = &ts[idx];
            uint32_t want = tun_step(t, idx, req, (size_t)rl);
            struct epoll_event ev = {.events = want, .data.u64 = idx};
            if (want) {
                epoll_ctl(ep, EPOLL_CTL_MOD, t->fd, &ev);
                continue;
            }
            epoll_ctl(ep, EPOLL_CTL_DEL, t->fd, NULL);
            busy--;
            if (t->st == T_OPEN)
                done++;
            else
                failed++;
        }
    }
    m->setup_s = (now_us() - t0) / 1e6;
    m->open = done;
    m->threads_open = count_threads();
    m->rss_open = rss_kb();
    int rc = 0;
    if (failed || done < k) {
        fail("many tunnels: %d of %d tunnels opened and echoed %d bytes", done, k, PAYLOAD);
        rc = -1;
    }

    for (int i = 0; i < k; i++)
        if (ts[i].fd >= 0)
            close(ts[i].fd);
    double end = now_us() + SETTLE_MS * 1e3;
    while (__atomic_load_n(&b->echo.live, __ATOMIC_RELAXED) > 0 && now_us() < end)
        sleep_ms(5);
    m->lingering = (int)__atomic_load_n(&b->echo.live, __ATOMIC_RELAXED);
    if (m->lingering) {
        fail("many tunnels: %d destination connections still open %d ms after the clients closed",
             m->lingering, SETTLE_MS);
        rc = -1;
    }
    if (ep >= 0)
        close(ep);
    xfree(evs);
    xfree(ts);
    return rc;
}

/* ---- options and report ---- */

/* A count with an optional K, M or G suffix (binary). 0 when malformed. */
static uint64_t parse_size(const char *s)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *s == '-')
        return 0;
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10;
    else if (*end == 'M' || *end == 'm')
        shift = 20;
    else if (*end == 'G' || *end == 'g')
        shift = 30;
    if (shift)
        end++;
    if (*end || v > (UINT64_MAX >> shift))
        return 0;
    return (uint64_t)v << shift;
}

struct opts {
    uint64_t bytes;
    int tunnels, connects, runs;
};

static int parse_opts(int argc, char **argv, struct opts *o)
{
    o->bytes = 256u << 20;
    o->tunnels = 2000;
    o->connects = 500;
    o->runs = 7;
    const char *env = getenv("EGRESS_BENCH_BYTES");
    if (env && *env && !(o->bytes = parse_size(env)))
        return -1;
    env = getenv("EGRESS_BENCH_TUNNELS");
    uint64_t v;
    if (env && *env) {
        if (!(v = parse_size(env)) || v > 1000000)
            return -1;
        o->tunnels = (int)v;
    }
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc || !(v = parse_size(argv[i + 1])))
            return -1;
        if (strcmp(argv[i], "--bytes") == 0)
            o->bytes = v;
        else if (strcmp(argv[i], "--tunnels") == 0 && v <= 1000000)
            o->tunnels = (int)v;
        else if (strcmp(argv[i], "--connects") == 0 && v <= 1000000)
            o->connects = (int)v;
        else if (strcmp(argv[i], "--runs") == 0 && v <= 1000)
            o->runs = (int)v;
        else
            return -1;
    }
    return o->bytes > SIZE_MAX ? -1 : 0;
}

/* The soft RLIMIT_NOFILE raised to the hard limit; 0 when need fds fit. */
static int raise_nofile(long need)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return -1;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        return -1;
    return rl.rlim_cur == RLIM_INFINITY || (long)rl.rlim_cur >= need ? 0 : -1;
}

static void report(const char *argv0, const struct opts *o, double *dc, double *pc, double *dm,
                   double *pm, double *fm, double *km, int in_kernel, const struct waycost cost[4],
                   double load[2][3], const struct many *m, uint64_t sent, uint64_t recvd,
                   uint64_t ksent, uint64_t krecvd)
{
    size_t n = (size_t)o->connects, r = (size_t)o->runs;
    double dmed = quantile(dc, n, 0.5), pmed = quantile(pc, n, 0.5);
    double dp99 = quantile(dc, n, 0.99), pp99 = quantile(pc, n, 0.99);
    double dt = quantile(dm, r, 0.5), pt = quantile(pm, r, 0.5), ft = quantile(fm, r, 0.5);
    printf("## Egress proxy (issue 6)\n\n");
    printf("Command: `%s --bytes %" PRIu64 " --tunnels %d --connects %d --runs %d` (run by `make "
           "bench`); a loopback sink and echo server in the same process, reached directly or "
           "through one session listener of the egress with `CONNECT`, or through the minimal "
           "relay (one thread, blocking `splice` through a 1 MiB pipe, nothing else: the least a "
           "relay in user space does, written into the benchmark), or through a second egress "
           "whose tunnels are spliced in the kernel (a sockmap with an sk_skb verdict program, "
           "BROWSERD_EGRESS_SOCKMAP on; the first has it off); the four kinds of trial "
           "alternate in one run.\n\n",
           argv0, o->bytes, o->tunnels, o->connects, o->runs);
    printf("| figure | direct | via egress | target |\n");
    printf("|---|---|---|---|\n");
    printf("| connect until usable, median of %d | %.1f us | %.1f us | |\n", o->connects, dmed,
           pmed);
    printf("| connect until usable, p99 | %.1f us | %.1f us | |\n", dp99, pp99);
    printf("| added connect latency, median | | %.1f us | < 100 us |\n", pmed - dmed);
    printf("| throughput, %.0f MiB through one connection, median of %d | %.0f MB/s | %.0f MB/s "
           "| |\n",
           (double)o->bytes / 1048576.0, o->runs, dt, pt);
    printf("| throughput via egress / direct | | %.0f%% | >= 80%% |\n", 100.0 * pt / dt);
    printf("| throughput via the minimal relay, median of %d; / direct | | %.0f MB/s; %.0f%% | "
           "stated |\n",
           o->runs, ft, 100.0 * ft / dt);
    printf("| throughput via egress / via the minimal relay | | %.0f%% | |\n", 100.0 * pt / ft);
    double kt = quantile(km, r, 0.5);
    printf("| throughput via egress with the in-kernel splice (sockmap%s), median of %d; / direct "
           "| | %.0f MB/s; %.0f%% | >= 80%% |\n",
           in_kernel ? "" : ": NOT LOADED, relayed in user space", o->runs, kt, 100.0 * kt / dt);
    printf(
        "| bytes counted by `egress_bytes` for the in-kernel trials, sent / received | | %" PRIu64
        " / %" PRIu64 " (exactly %d x %" PRIu64 " / %d) | |\n",
        ksent, krecvd, o->runs, o->bytes, o->runs);
    double gib = (double)o->runs * (double)o->bytes / 1073741824.0, mib = gib * 1024.0;
    printf("| CPU per GiB moved, whole process (sender, receiver, egress, kernel) | %.2f s | "
           "%.2f s | |\n",
           cost[0].cpu / gib, cost[1].cpu / gib);
    printf("| CPU per GiB moved, the egress threads alone; the minimal relay's thread alone | | "
           "%.2f s; %.2f s | |\n",
           cost[1].relay.cpu / gib, cost[2].relay.cpu / gib);
    printf("| CPU per GiB moved, whole process, via the minimal relay / via egress in the kernel "
           "(its work items run outside the process: not counted) | | %.2f s / %.2f s | |\n",
           cost[2].cpu / gib, cost[3].cpu / gib);
    printf("| the relaying thread's wake-ups (voluntary switches) and preemptions per MiB, egress; "
           "minimal relay | | %.2f, %.2f; %.2f, %.2f | |\n",
           (double)cost[1].relay.vcsw / mib, (double)cost[1].relay.ivcsw / mib,
           (double)cost[2].relay.vcsw / mib, (double)cost[2].relay.ivcsw / mib);
    printf("| load average of the host (1, 5, 15 min) before / after the throughput trials "
           "(the machine's %ld CPUs are shared) | %.2f %.2f %.2f / %.2f %.2f %.2f | | |\n",
           sysconf(_SC_NPROCESSORS_ONLN), load[0][0], load[0][1], load[0][2], load[1][0],
           load[1][1], load[1][2]);
    printf("| tunnels open at once, %d bytes echoed through each | | %d of %d (set up in %.2f s, "
           "%d at a time) | |\n",
           PAYLOAD, m->open, o->tunnels, m->setup_s, WINDOW);
    printf("| threads in the process with the tunnels open | | %d (%d before; %d are the "
           "benchmark's own) | |\n",
           m->threads_open, m->threads_before, OWN_THREADS);
    printf("| resident memory per open tunnel | | %.1f kB (%ld kB for %d) | |\n",
           m->open ? (double)(m->rss_open - m->rss_before) / m->open : 0.0,
           m->rss_open - m->rss_before, m->open);
    printf("| bytes counted by `egress_bytes`, sent / received | | %" PRIu64 " / %" PRIu64 " | |\n",
           sent, recvd);
}

int main(int argc, char **argv)
{
    struct opts o;
    if (parse_opts(argc, argv, &o) != 0 || o.connects < 1 || o.runs < 1 || o.tunnels < 1) {
        fprintf(stderr,
                "usage: %s [--bytes N[K|M|G]] [--tunnels K] [--connects C] [--runs R]\n"
                "       (or EGRESS_BENCH_BYTES, EGRESS_BENCH_TUNNELS)\n",
                argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    /* Each open tunnel holds four descriptors here: the client's, the
     * egress's two and the echo server's. */
    if (raise_nofile(4L * o.tunnels + 256) != 0) {
        fprintf(stderr, "egress bench: RLIMIT_NOFILE is too low for %d tunnels\n", o.tunnels);
        return 1;
    }

    struct bench b = {0};
    b.sink.lfd = listen_loopback(&b.sink.port, 0);
    if (b.sink.lfd < 0 || pthread_create(&b.sink.thr, NULL, sink_main, &b.sink) != 0 ||
        echo_start(&b.echo) != 0) {
        fprintf(stderr, "egress bench: cannot start the loopback servers\n");
        return 1;
    }
    char allow[64];
    snprintf(allow, sizeof allow, "127.0.0.1:%d,127.0.0.1:%d", b.sink.port, b.echo.port);
    struct egress_config cfg = {.allow_loopback = allow};
    struct egress_top top = {.kind = EGRESS_DIRECT};
    struct err e;
    err_init(&e);
    if (egress_start(&cfg, &b.eg, &e) != 0 ||
        egress_open(b.eg, SESSION, "o", "p", NULL, &top, 0, 0, &b.eport, &e) != 0) {
        fprintf(stderr, "egress bench: cannot start the egress: %s\n", e.message);
        return 1;
    }
    struct egress_config kcfg = {.allow_loopback = allow, .sockmap = 1};
    if (egress_start(&kcfg, &b.keg, &e) != 0 ||
        egress_open(b.keg, SESSION, "o", "p", NULL, &top, 0, 0, &b.kport, &e) != 0) {
        fprintf(stderr, "egress bench: cannot start the second egress: %s\n", e.message);
        return 1;
    }
    int n = snprintf(b.connect_req, sizeof b.connect_req,
                     "CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", b.sink.port,
                     b.sink.port);
    b.connect_len = (size_t)n;

    double *dc = xcalloc((size_t)o.connects, sizeof *dc);
    double *pc = xcalloc((size_t)o.connects, sizeof *pc);
    double *dm = xcalloc((size_t)o.runs, sizeof *dm);
    double *pm = xcalloc((size_t)o.runs, sizeof *pm);
    double *fm = xcalloc((size_t)o.runs, sizeof *fm);
    double *km = xcalloc((size_t)o.runs, sizeof *km);
    struct floor_relay floor = {.sink_port = b.sink.port};
    floor.lfd = listen_loopback(&floor.port, 0);
    if (floor.lfd < 0 || pthread_create(&floor.thr, NULL, floor_main, &floor) != 0) {
        fprintf(stderr, "egress bench: cannot start the minimal relay\n");
        return 1;
    }
    pthread_setname_np(floor.thr, "relay-floor"); /* thread_stats */
    b.floor = &floor;
    struct many m = {0};
    int ok = bench_connect(&b, o.connects, dc, pc) == 0;
    struct waycost cost[4] = {0};
    double load[2][3] = {{-1, -1, -1}, {-1, -1, -1}};
    (void)getloadavg(load[0], 3);
    ok = ok && bench_bulk(&b, (size_t)o.bytes, o.runs, dm, pm, fm, km, cost) == 0;
    (void)getloadavg(load[1], 3);
    ok = ok && bench_many(&b, o.tunnels, &m) == 0;

    /* Up through the egress went the bulk payloads and the echoed bytes
     * (nothing of the connect trials); back came the echoes and one byte per
     * bulk run (plus the sink's byte of a connect trial when the egress read
     * it before the close reached it). The counters may trail the last close
     * by a moment. */
    uint64_t want_sent = (uint64_t)o.runs * o.bytes + (uint64_t)o.tunnels * PAYLOAD;
    uint64_t want_recv = (uint64_t)o.tunnels * PAYLOAD + (uint64_t)o.runs;
    uint64_t sent = 0, recvd = 0;
    for (double end = now_us() + 2e6;; sleep_ms(20)) {
        if (egress_bytes(b.eg, SESSION, &sent, &recvd) != 0) {
            fail("egress_bytes does not know the session");
            ok = 0;
            break;
        }
        if (!ok || (sent >= want_sent && recvd >= want_recv) || now_us() > end)
            break;
    }
    if (ok && (sent < want_sent || recvd < want_recv))
        fail("egress_bytes counted %" PRIu64 " sent / %" PRIu64 " received, at least %" PRIu64
             " / %" PRIu64 " went through",
             sent, recvd, want_sent, want_recv);
    /* The in-kernel engine carried the bulk trials only: exactly their
     * payloads up and one byte each back. */
    uint64_t ksent = 0, krecvd = 0;
    for (double end = now_us() + 2e6; ok; sleep_ms(20)) {
        if (egress_bytes(b.keg, SESSION, &ksent, &krecvd) != 0 ||
            (ksent == (uint64_t)o.runs * o.bytes && krecvd == (uint64_t)o.runs) || now_us() > end)
            break;
    }
    if (ok && (ksent != (uint64_t)o.runs * o.bytes || krecvd != (uint64_t)o.runs)) {
        fail("egress_bytes of the in-kernel egress counted %" PRIu64 " sent / %" PRIu64
             " received, exactly %" PRIu64 " / %d went through",
             ksent, krecvd, (uint64_t)o.runs * o.bytes, o.runs);
        ok = 0;
    }
    if (ok)
        report(argv[0], &o, dc, pc, dm, pm, fm, km, egress_in_kernel(b.keg), cost, load, &m, sent,
               recvd, ksent, krecvd);

    egress_stop(b.keg);
    egress_stop(b.eg);
    shutdown(floor.lfd, SHUT_RDWR);
    pthread_join(floor.thr, NULL);
    close(floor.lfd);
    shutdown(b.sink.lfd, SHUT_RDWR);
    pthread_join(b.sink.thr, NULL);
    close(b.sink.lfd);
    echo_stop(&b.echo);
    xfree(dc);
    xfree(pc);
    xfree(dm);
    xfree(pm);
    xfree(fm);
    xfree(km);
    return failures ? 1 : 0;
}
