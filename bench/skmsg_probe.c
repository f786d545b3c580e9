/*
 * A probe, not a benchmark of browserd (docs/egress-proxy.md, "sk_msg:
 * measured, not built"; issue 39.4): can the kernel move a tunnel's upload
 * from the browser's socket straight into the egress's upstream socket
 * (sockops + sk_msg, bpf/skmsg_probe.bpf.c), and what does a writer see?
 *
 * Three ways of moving N bytes from a writer to a reader over loopback, in
 * one run, alternating: direct (writer -> reader); through a user-space
 * relay (writer -> listener, splice through a pipe -> upstream socket ->
 * reader, the egress's own way); routed in the kernel (the writer's sends go
 * out of the upstream socket; the relay thread runs but receives nothing);
 * and routed with a fallback (the bytes take the relay while the upstream
 * socket's send queue is half full, sampled by the relay every millisecond,
 * and the route again once the relay has caught up). Then a stall: a non-blocking writer that waits
 * with poll(2) for POLLOUT, and a reader that stops for --stall-ms after its first MiB; the
 * writer's EAGAIN count and CPU time, each way but direct. Every trial checks
 * the byte count; the stall's reader checks every byte.
 *
 *   skmsg_probe [--mib N] [--runs R] [--stall-ms S]   (as root: it attaches
 *   a sock_ops program to a cgroup v2, mounted for the run where the host
 *   has none, and detaches it at the end)
 */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#ifndef PROBE_BPF_OBJ
#define PROBE_BPF_OBJ "build/bpf/skmsg_probe.bpf.o"
#endif
#define CGROUP2_MAGIC 0x63677270
#define CHUNK         (256 * 1024)

enum way { DIRECT, RELAYED, ROUTED, FALLBACK };
static const char *const way_name[] = {"direct", "relayed", "routed", "routed with fallback"};

/* bpf/skmsg_probe.bpf.c's struct probe_route. */
struct probe_route {
    uint32_t target, fallback, passing, base_seq;
    uint64_t passed, redirects, passes, switches;
};

static long long nbytes = 256LL << 20;
static int stall_ms;
static int lis_reader, lis_relay, port_reader, port_relay;
static int socks_fd, route_fd, relayed_fd, congested_fd;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static int listen_any(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 16) ||
        getsockname(fd, (struct sockaddr *)&a, &len))
        die("listen");
    *port = ntohs(a.sin_port);
    return fd;
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                            .sin_port = htons((uint16_t)port)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a))
        die("connect");
    return fd;
}

static int local_port(int fd)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    if (getsockname(fd, (struct sockaddr *)&a, &len))
        die("getsockname");
    return ntohs(a.sin_port);
}

/* The byte at offset off of the stream: a period of 256, which divides
 * CHUNK, so the writer fills its buffer once. */
static unsigned char pattern(long long off)
{
    return (unsigned char)(off * 7);
}

struct end {
    int fd;
    int nonblock; /* the stall trial's writer; its reader checks every byte */
    long long bytes, wrong, eagain;
    double cpu_s;
};

static void *reader(void *arg)
{
    struct end *r = arg;
    unsigned char *b = malloc(CHUNK);
    ssize_t n;
    while (b && (n = read(r->fd, b, CHUNK)) > 0) {
        for (ssize_t i = 0; r->nonblock && i < n; i++)
            r->wrong += b[i] != pattern(r->bytes + i);
        if (r->nonblock && stall_ms && r->bytes < (1 << 20) && r->bytes + n >= (1 << 20)) {
            struct timespec t = {stall_ms / 1000, (stall_ms % 1000) * 1000000L};
            nanosleep(&t, NULL);
        }
        r->bytes += n;
    }
    free(b);
    return NULL;
}

static void *writer(void *arg)
{
    struct end *w = arg;
    unsigned char *b = malloc(CHUNK);
    if (!b)
        return NULL;
    if (w->nonblock)
        fcntl(w->fd, F_SETFL, O_NONBLOCK);
    for (size_t i = 0; i < CHUNK; i++)
        b[i] = pattern((long long)i);
    for (long long off = 0; off < nbytes;) {
        size_t len = nbytes - off < CHUNK ? (size_t)(nbytes - off) : CHUNK;
        for (size_t done = 0; done < len;) {
            ssize_t n = write(w->fd, b + done, len - done);
            if (n < 0 && errno == EAGAIN) {
                w->eagain++;
                struct pollfd p = {w->fd, POLLOUT, 0};
                poll(&p, 1, 1000);
                continue;
            }
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                die("write");
            done += (size_t)n;
        }
        off += (long long)len;
    }
    shutdown(w->fd, SHUT_WR);
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    w->cpu_s = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
               (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    free(b);
    return NULL;
}

struct relay {
    int from, to;
    long long bytes;
    uint32_t key, up; /* with a fallback: the route's and the upstream's keys */
};

/* Whether the upstream socket's send queue is half full. */
static int half_full(int fd)
{
    int queued = 0, buf = 0;
    socklen_t len = sizeof buf;
    if (ioctl(fd, SIOCOUTQ, &queued) || getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, &len))
        die("the upstream socket's queue");
    return queued >= buf / 2;
}

/* A fallback's relay: non-blocking, so that while the listener side is
 * empty it samples the upstream socket every millisecond, marks it
 * congested when half full and clears the mark once it has room again
 * (the program then routes again when the counts agree). */
static void relay_fallback(struct relay *r, int pipe_in, int pipe_out)
{
    fcntl(r->from, F_SETFL, O_NONBLOCK);
    for (;;) {
        ssize_t n =
            splice(r->from, NULL, pipe_in, NULL, 1 << 20, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n == 0)
            return;
        if (n < 0 && errno != EAGAIN)
            die("splice");
        if (n < 0) {
            uint32_t mark = (uint32_t)half_full(r->to);
            if (bpf_map_update_elem(congested_fd, &r->up, &mark, BPF_ANY))
                die("congested");
            struct pollfd p = {r->from, POLLIN, 0};
            poll(&p, 1, 1);
            continue;
        }
        r->bytes += n;
        while (n > 0) {
            ssize_t m = splice(pipe_out, NULL, r->to, NULL, (size_t)n, SPLICE_F_MOVE);
            if (m <= 0)
                die("splice");
            n -= m;
        }
        uint64_t v = (uint64_t)r->bytes;
        if (bpf_map_update_elem(relayed_fd, &r->key, &v, BPF_ANY))
            die("relayed");
    }
}

/* The egress's way: socket -> pipe -> socket with splice(2), then the
 * half-close passed on. */
static void *relay(void *arg)
{
    struct relay *r = arg;
    int p[2];
    if (pipe(p))
        die("pipe");
    fcntl(p[0], F_SETPIPE_SZ, 1 << 20);
    ssize_t n;
    if (r->key)
        relay_fallback(r, p[1], p[0]);
    while (!r->key && (n = splice(r->from, NULL, p[1], NULL, 1 << 20, SPLICE_F_MOVE)) > 0) {
        r->bytes += n;
        while (n > 0) {
            ssize_t m = splice(p[0], NULL, r->to, NULL, (size_t)n, SPLICE_F_MOVE);
            if (m <= 0)
                die("splice");
            n -= m;
        }
    }
    shutdown(r->to, SHUT_WR);
    close(p[0]);
    close(p[1]);
    return NULL;
}

struct result {
    double mbps, writer_cpu_s;
    long long eagain;
};

static struct result trial(enum way way, int nonblock)
{
    struct end w = {.nonblock = nonblock}, r = {.nonblock = nonblock};
    uint32_t route_key = 0;
    struct relay rl = {-1, -1, 0, 0, 0};
    pthread_t tw, tr, trl;
    if (way == DIRECT) {
        w.fd = connect_to(port_reader);
        r.fd = accept(lis_reader, NULL, NULL);
    } else {
        w.fd = connect_to(port_relay);
        rl.from = accept(lis_relay, NULL, NULL);
        rl.to = connect_to(port_reader);
        r.fd = accept(lis_reader, NULL, NULL);
        if (way == ROUTED || way == FALLBACK) {
            uint32_t up = (uint32_t)local_port(rl.to) << 16 | (uint32_t)port_reader;
            uint32_t from = (uint32_t)local_port(w.fd) << 16 | (uint32_t)port_relay;
            struct probe_route pr = {.target = up, .fallback = way == FALLBACK};
            uint64_t none = 0;
            uint32_t clear = 0;
            if (bpf_map_update_elem(socks_fd, &up, &rl.to, BPF_ANY) ||
                bpf_map_update_elem(relayed_fd, &from, &none, BPF_ANY) ||
                bpf_map_update_elem(congested_fd, &up, &clear, BPF_ANY) ||
                bpf_map_update_elem(route_fd, &from, &pr, BPF_ANY))
                die("joining the upstream socket");
            if (way == FALLBACK) {
                rl.key = from;
                rl.up = up;
            }
            route_key = from;
        }
        pthread_create(&trl, NULL, relay, &rl);
    }
    double t0 = now_s();
    pthread_create(&tr, NULL, reader, &r);
    pthread_create(&tw, NULL, writer, &w);
    pthread_join(tw, NULL);
    pthread_join(tr, NULL);
    double dt = now_s() - t0;
    if (way != DIRECT)
        pthread_join(trl, NULL);
    if (r.bytes != nbytes || r.wrong)
        fprintf(stderr, "skmsg_probe: %s: %lld of %lld bytes arrived, %lld wrong\n", way_name[way],
                r.bytes, nbytes, r.wrong);
    struct probe_route pr = {0};
    if (route_key && bpf_map_lookup_elem(route_fd, &route_key, &pr) == 0) {
        if (way == FALLBACK || rl.bytes)
            printf("  %s: %.0f%% of the bytes relayed; %llu sends redirected, %llu passed, %llu "
                   "switches to the relay\n",
                   way_name[way], 100.0 * (double)rl.bytes / (double)nbytes,
                   (unsigned long long)pr.redirects, (unsigned long long)pr.passes,
                   (unsigned long long)pr.switches);
        bpf_map_delete_elem(route_fd, &route_key);
    }
    close(w.fd);
    close(r.fd);
    if (rl.from >= 0) {
        close(rl.from);
        close(rl.to);
    }
    return (struct result){(double)nbytes / dt / 1e6, w.cpu_s, w.eagain};
}

int main(int argc, char **argv)
{
    int runs = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        long v = strtol(argv[i + 1], NULL, 10);
        if (v < 0 || v > 1000000)
            v = 0;
        if (!strcmp(argv[i], "--mib"))
            nbytes = (long long)v << 20;
        else if (!strcmp(argv[i], "--runs"))
            runs = (int)v;
        else if (!strcmp(argv[i], "--stall-ms"))
            stall_ms = (int)v;
    }
    char cgdir[] = "/tmp/skmsg-probe-XXXXXX";
    const char *cg = "/sys/fs/cgroup";
    struct statfs sf;
    int mounted = 0;
    if (statfs(cg, &sf) || sf.f_type != CGROUP2_MAGIC) {
        if (!mkdtemp(cgdir) || mount("none", cgdir, "cgroup2", 0, NULL))
            die("mounting a cgroup v2");
        cg = cgdir;
        mounted = 1;
    }
    int cgfd = open(cg, O_RDONLY | O_DIRECTORY);
    struct bpf_object *o = bpf_object__open_file(PROBE_BPF_OBJ, NULL);
    if (cgfd < 0 || !o || bpf_object__load(o))
        die("loading " PROBE_BPF_OBJ);
    socks_fd = bpf_object__find_map_fd_by_name(o, "socks");
    route_fd = bpf_object__find_map_fd_by_name(o, "route");
    relayed_fd = bpf_object__find_map_fd_by_name(o, "relayed");
    congested_fd = bpf_object__find_map_fd_by_name(o, "congested");
    int lp_fd = bpf_object__find_map_fd_by_name(o, "listen_port");
    int ops = bpf_program__fd(bpf_object__find_program_by_name(o, "probe_ops"));
    int msg = bpf_program__fd(bpf_object__find_program_by_name(o, "probe_msg"));
    if (bpf_prog_attach(ops, cgfd, BPF_CGROUP_SOCK_OPS, BPF_F_ALLOW_MULTI) ||
        bpf_prog_attach(msg, socks_fd, BPF_SK_MSG_VERDICT, 0))
        die("attaching");
    lis_reader = listen_any(&port_reader);
    lis_relay = listen_any(&port_relay);
    uint32_t zero = 0, lp = (uint32_t)port_relay;
    if (bpf_map_update_elem(lp_fd, &zero, &lp, BPF_ANY))
        die("listen_port");
    printf("%lld MiB a trial, blocking writer\n", nbytes >> 20);
    for (int i = 0; i < runs; i++) {
        struct result d = trial(DIRECT, 0), u = trial(RELAYED, 0), k = trial(ROUTED, 0),
                      f = trial(FALLBACK, 0);
        printf("run %d: direct %.0f MB/s, relayed %.0f (%.0f%%), routed %.0f (%.0f%%), routed with "
               "fallback %.0f (%.0f%%)\n",
               i, d.mbps, u.mbps, 100 * u.mbps / d.mbps, k.mbps, 100 * k.mbps / d.mbps, f.mbps,
               100 * f.mbps / d.mbps);
    }
    if (stall_ms) {
        printf("non-blocking writer waiting with poll(POLLOUT), reader stopped %d ms after 1 "
               "MiB\n",
               stall_ms);
        for (enum way w = RELAYED; w <= FALLBACK; w++) {
            struct result r = trial(w, 1);
            printf("%s: writer's EAGAIN %lld, writer's CPU %.2f s\n", way_name[w], r.eagain,
                   r.writer_cpu_s);
        }
    }
    bpf_prog_detach2(ops, cgfd, BPF_CGROUP_SOCK_OPS);
    close(cgfd);
    bpf_object__close(o);
    if (mounted) {
        if (umount2(cgdir, MNT_DETACH))
            perror("unmounting the cgroup v2");
        rmdir(cgdir);
    }
    return 0;
}
