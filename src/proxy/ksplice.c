/* ksplice: see ksplice.h and bpf/egress_splice.bpf.c.
 *
 * The program's object (clang -target bpf) is assembled into this object's
 * read-only data with .incbin, as api/openapi.c does with its document: the
 * Makefile builds it first and names its path in KSPLICE_BPF_OBJ, so the
 * binary carries it and nothing is read from disk at run time (the .deb
 * ships one file). libbpf loads it from memory. */
#include "proxy/ksplice.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "core/log.h"
#include "core/xalloc.h"

#ifndef KSPLICE_BPF_OBJ
#define KSPLICE_BPF_OBJ "build/bpf/egress_splice.bpf.o"
#endif

__asm__(".pushsection .rodata\n"
        ".balign 16\n"
        ".globl ksplice_obj\n"
        ".type ksplice_obj, @object\n"
        "ksplice_obj:\n"
        ".incbin \"" KSPLICE_BPF_OBJ "\"\n"
        ".globl ksplice_obj_end\n"
        "ksplice_obj_end:\n"
        ".popsection\n");

extern const char ksplice_obj[], ksplice_obj_end[];

/* The value of the program's `peers` map (struct ksplice_peer there). */
struct peer_val {
    uint64_t peer, bytes, passed;
};

struct ksplice {
    struct bpf_object *obj;
    int socks, peers, prog;
};

/* libbpf's warnings while loading: the last one names what refused (the
 * verifier's log ends there); they go to the debug log. Only
 * ksplice_open sets this printer, once at start. */
static char load_msg[200];

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    if (level == LIBBPF_DEBUG)
        return 0;
    char line[sizeof load_msg];
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\n")] = '\0';
    if (line[0]) {
        snprintf(load_msg, sizeof load_msg, "%s", line);
        log_debug("egress: libbpf: %s", line);
    }
    return 0;
}
#pragma GCC diagnostic pop

static int fail(struct err *e, struct ksplice *k, const char *step, int rc)
{
    if (rc >= 0)
        rc = E_INTERNAL;
    err_set(e, rc, "internal", "%s: %s%s%s%s", step, strerror(-rc), load_msg[0] ? " (libbpf: " : "",
            load_msg, load_msg[0] ? ")" : "");
    ksplice_free(k);
    return rc;
}

int ksplice_open(int sockets, struct ksplice **out, struct err *e)
{
    struct ksplice *k = xcalloc(1, sizeof *k);
    k->socks = k->peers = k->prog = -1;
    load_msg[0] = '\0';
    libbpf_print_fn_t old = libbpf_set_print(libbpf_print);
    LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = "egress_splice");
    k->obj = bpf_object__open_mem(ksplice_obj, (size_t)(ksplice_obj_end - ksplice_obj), &oo);
    int rc = k->obj ? 0 : -errno;
    struct bpf_map *socks = NULL, *peers = NULL;
    struct bpf_program *prog = NULL;
    if (rc == 0) {
        socks = bpf_object__find_map_by_name(k->obj, "socks");
        peers = bpf_object__find_map_by_name(k->obj, "peers");
        prog = bpf_object__find_program_by_name(k->obj, "egress_verdict");
        if (!socks || !peers || !prog)
            rc = -ENOENT;
    }
    if (rc == 0 && (bpf_map__set_max_entries(socks, (uint32_t)sockets) != 0 ||
                    bpf_map__set_max_entries(peers, (uint32_t)sockets) != 0))
        rc = -EINVAL;
    if (rc != 0) {
        libbpf_set_print(old);
        return fail(e, k, "cannot open the BPF object", rc);
    }
    rc = bpf_object__load(k->obj);
    libbpf_set_print(old);
    if (rc != 0)
        return fail(e, k, "cannot load the BPF program and maps", rc);
    k->socks = bpf_map__fd(socks);
    k->peers = bpf_map__fd(peers);
    k->prog = bpf_program__fd(prog);
    if (bpf_prog_attach(k->prog, k->socks, BPF_SK_SKB_STREAM_VERDICT, 0) != 0)
        return fail(e, k, "cannot attach the stream verdict program to the sockmap", -errno);
    *out = k;
    return 0;
}

void ksplice_free(struct ksplice *k)
{
    if (!k)
        return;
    if (k->prog >= 0 && k->socks >= 0)
        (void)bpf_prog_detach2(k->prog, k->socks, BPF_SK_SKB_STREAM_VERDICT);
    bpf_object__close(k->obj);
    xfree(k);
}

static int cookie_of(int fd, uint64_t *c)
{
    socklen_t len = sizeof *c;
    return getsockopt(fd, SOL_SOCKET, SO_COOKIE, c, &len) == 0 ? 0 : -errno;
}

int ksplice_join(struct ksplice *k, int a, int b, struct ksplice_pair *p)
{
    int fds[2] = {a, b};
    int rc = cookie_of(a, &p->cookie[0]);
    if (rc == 0)
        rc = cookie_of(b, &p->cookie[1]);
    if (rc)
        return rc;
    int peers = 0, socks = 0;
    for (; peers < 2 && rc == 0; peers++) {
        struct peer_val v = {.peer = p->cookie[1 - peers]};
        if (bpf_map_update_elem(k->peers, &p->cookie[peers], &v, BPF_NOEXIST) != 0)
            rc = -errno;
    }
    if (rc)
        peers--;
    /* a first: the caller passes the side that is silent until the tunnel
     * is answered, so no byte finds its peer missing. */
    for (; socks < 2 && rc == 0; socks++) {
        uint32_t fd = (uint32_t)fds[socks];
        if (bpf_map_update_elem(k->socks, &p->cookie[socks], &fd, BPF_NOEXIST) != 0)
            rc = -errno;
    }
    if (rc) {
        socks--;
        while (socks-- > 0)
            (void)bpf_map_delete_elem(k->socks, &p->cookie[socks]);
        while (peers-- > 0)
            (void)bpf_map_delete_elem(k->peers, &p->cookie[peers]);
        return rc;
    }
    /* Bytes queued before the join wait for the next arrival: setting
     * SO_RCVLOWAT makes TCP call the socket's data_ready now (the verdict's,
     * since the join), and takes the socket's lock, so a verdict running
     * on another CPU has finished when it returns. */
    int one = 1;
    for (int i = 0; i < 2; i++)
        (void)setsockopt(fds[i], SOL_SOCKET, SO_RCVLOWAT, &one, sizeof one);
    return 0;
}

int ksplice_counts(struct ksplice *k, const struct ksplice_pair *p, uint64_t bytes[2],
                   uint64_t passed[2])
{
    for (int i = 0; i < 2; i++) {
        struct peer_val v;
        if (bpf_map_lookup_elem(k->peers, &p->cookie[i], &v) != 0)
            return -errno;
        bytes[i] = v.bytes;
        passed[i] = v.passed;
    }
    return 0;
}

void ksplice_leave(struct ksplice *k, const struct ksplice_pair *p, uint64_t bytes[2])
{
    for (int i = 0; i < 2; i++)
        (void)bpf_map_delete_elem(k->socks, &p->cookie[i]);
    for (int i = 0; i < 2; i++) {
        struct peer_val v = {0};
        bytes[i] = bpf_map_lookup_elem(k->peers, &p->cookie[i], &v) == 0 ? v.bytes : 0;
        (void)bpf_map_delete_elem(k->peers, &p->cookie[i]);
    }
}

int64_t ksplice_written(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    int outq = 0;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof ti.tcpi_bytes_acked ||
        ioctl(fd, SIOCOUTQ, &outq) != 0)
        return -1;
    return (int64_t)ti.tcpi_bytes_acked + outq;
}
