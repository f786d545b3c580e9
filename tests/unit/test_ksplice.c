/* Unit tests for proxy/ksplice, the egress's in-kernel splice, on real
 * loopback sockets: what a socket had received before the join is carried
 * too, bulk bytes arrive whole and in order both ways and are counted
 * exactly, and a half-close (an empty FIN reaching the verdict) does not
 * break the other direction. Skipped where the kernel or the process's
 * permissions refuse the program (the engine then relays in user space). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/err.h"
#include "core/xalloc.h"
#include "proxy/ksplice.h"

#define WAIT_MS 10000

/* A connected loopback pair: *out the client end, *in the accepted one. */
static void tcp_pair(int *out, int *in)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(l, 1), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &len), 0);
    *out = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(*out, (struct sockaddr *)&sa, sizeof sa), 0);
    *in = accept(l, NULL, NULL);
    assert_true(*in >= 0);
    close(l);
}

static uint8_t pat(size_t i, int salt)
{
    return (uint8_t)(i * 7 + i / 251 + (size_t)salt);
}

/* Sends n pattern bytes on `from` while reading them on `to` (both blocking
 * sockets, driven by poll so neither side's buffers stall the other); 0 when
 * all arrived in order. */
static int move(int from, int to, size_t n, int salt)
{
    size_t sent = 0, got = 0;
    uint8_t buf[65536];
    while (got < n) {
        struct pollfd p[2] = {{.fd = from, .events = sent < n ? POLLOUT : 0},
                              {.fd = to, .events = POLLIN}};
        if (poll(p, 2, WAIT_MS) <= 0)
            return -1;
        if (p[0].revents & POLLOUT) {
            size_t k = n - sent < sizeof buf ? n - sent : sizeof buf;
            for (size_t i = 0; i < k; i++)
                buf[i] = pat(sent + i, salt);
            ssize_t w = send(from, buf, k, MSG_DONTWAIT);
            if (w > 0)
                sent += (size_t)w;
        }
        if (p[1].revents & POLLIN) {
            ssize_t r = recv(to, buf, sizeof buf, MSG_DONTWAIT);
            if (r <= 0)
                return -1;
            for (ssize_t i = 0; i < r; i++)
                if (buf[i] != pat(got + (size_t)i, salt))
                    return -1;
            got += (size_t)r;
        }
    }
    return 0;
}

static int recv_exact(int fd, char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, WAIT_MS) <= 0)
            return -1;
        ssize_t r = recv(fd, buf + got, n - got, 0);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

struct fixture {
    struct ksplice *k;
    int x1, a; /* the browser and the egress's socket to it */
    int b, x2; /* the egress's socket to the destination, and the destination */
    struct ksplice_pair p;
};

static int setup(void **state)
{
    struct fixture *f = xcalloc(1, sizeof *f);
    struct err e;
    err_init(&e);
    if (ksplice_open(64, &f->k, &e) != 0) {
        fprintf(stderr, "ksplice: not available here: %s\n", e.message);
        xfree(f);
        *state = NULL;
        return 0;
    }
    tcp_pair(&f->x1, &f->a);
    tcp_pair(&f->b, &f->x2);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    if (!f)
        return 0;
    int fds[4] = {f->x1, f->a, f->b, f->x2};
    for (int i = 0; i < 4; i++)
        close(fds[i]);
    ksplice_free(f->k);
    xfree(f);
    return 0;
}

/* "bytes either socket had received before are redirected too" (ksplice.h),
 * then 16 MiB each way in order, counted exactly. */
static void test_join_carries_early_and_bulk_bytes(void **state)
{
    struct fixture *f = *state;
    if (!f)
        skip();
    assert_int_equal(send(f->x1, "early", 5, 0), 5);
    struct pollfd p = {.fd = f->a, .events = POLLIN};
    assert_int_equal(poll(&p, 1, WAIT_MS), 1); /* queued on a before the join */
    assert_int_equal(ksplice_join(f->k, f->b, f->a, &f->p), 0);
    char buf[8];
    assert_int_equal(recv_exact(f->x2, buf, 5), 0);
    assert_memory_equal(buf, "early", 5);
    assert_int_equal(move(f->x1, f->x2, 16u << 20, 1), 0);
    assert_int_equal(move(f->x2, f->x1, 16u << 20, 2), 0);
    uint64_t bytes[2], passed[2];
    assert_int_equal(ksplice_counts(f->k, &f->p, bytes, passed), 0);
    assert_true(bytes[0] == 16u << 20);       /* received on b (the destination's) */
    assert_true(bytes[1] == 5 + (16u << 20)); /* received on a (the browser's) */
    assert_true(passed[0] == 0 && passed[1] == 0);
    ksplice_leave(f->k, &f->p, bytes);
    assert_true(bytes[0] == 16u << 20 && bytes[1] == 5 + (16u << 20));
    assert_int_equal(ksplice_counts(f->k, &f->p, bytes, passed), -ENOENT);
}

/* A half-close: the browser's FIN reaches the verdict as an empty skb; the
 * destination's direction keeps working and a sees the end. */
static void test_half_close_keeps_the_other_direction(void **state)
{
    struct fixture *f = *state;
    if (!f)
        skip();
    assert_int_equal(ksplice_join(f->k, f->b, f->a, &f->p), 0);
    assert_int_equal(move(f->x1, f->x2, 1u << 20, 3), 0);
    assert_int_equal(shutdown(f->x1, SHUT_WR), 0);
    struct pollfd p = {.fd = f->a, .events = POLLRDHUP};
    assert_int_equal(poll(&p, 1, WAIT_MS), 1);
    assert_true(p.revents & POLLRDHUP);
    assert_false(p.revents & POLLERR);
    assert_int_equal(move(f->x2, f->x1, 4u << 20, 4), 0);
    int err = 0;
    socklen_t len = sizeof err;
    assert_int_equal(getsockopt(f->b, SOL_SOCKET, SO_ERROR, &err, &len), 0);
    assert_int_equal(err, 0); /* no EPIPE on the peer */
    assert_true(ksplice_written(f->b) >= (int64_t)(1u << 20));
    uint64_t bytes[2];
    ksplice_leave(f->k, &f->p, bytes);
    assert_true(bytes[0] == 4u << 20 && bytes[1] == 1u << 20);
}

/* "0, or a negative errno with the reason in e ... the reason says which step
 * failed" (ksplice.h): maps of no room are refused by the kernel at load. */
static void test_refused_load_names_the_step(void **state)
{
    (void)state;
    struct ksplice *k = NULL;
    struct err e;
    err_init(&e);
    int rc = ksplice_open(0, &k, &e);
    assert_true(rc < 0);
    assert_null(k);
    assert_non_null(strstr(e.message, "cannot "));
    ksplice_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refused_load_names_the_step),
        cmocka_unit_test_setup_teardown(test_join_carries_early_and_bulk_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_half_close_keeps_the_other_direction, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
