/* Unit tests for core/fdio: whole-buffer writes and reads, with and without
 * a deadline, on pipes, sockets and files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/fdio.h"
#include "core/xalloc.h"

/* More than a pipe (64 KiB) or a socket pair buffers: the writer must wait. */
#define BIG (1u << 20)

static unsigned char *pattern(size_t n)
{
    unsigned char *b = xmalloc(n);
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)(i * 31 + (i >> 11));
    return b;
}

static void nonblock(int fd)
{
    assert_int_equal(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
}

/* ---- a reader that drains a pipe or socket in a thread ---- */

struct drain {
    int fd;
    unsigned char *buf;
    size_t got;
    pthread_t th;
};

static void *drain_run(void *arg)
{
    struct drain *d = arg;
    d->buf = xmalloc(BIG + 1);
    int rc = fdio_read_all(d->fd, d->buf, BIG + 1, &d->got, FDIO_NO_DEADLINE);
    (void)rc;
    return NULL;
}

static void drain_start(struct drain *d, int fd)
{
    memset(d, 0, sizeof *d);
    d->fd = fd;
    assert_int_equal(pthread_create(&d->th, NULL, drain_run, d), 0);
}

/* Joins the reader and checks it read exactly want. */
static void drain_check(struct drain *d, const unsigned char *want, size_t n, const char *name)
{
    pthread_join(d->th, NULL);
    if (d->got != n || memcmp(d->buf, want, n) != 0)
        fail_msg("%s: the reader got %zu bytes, want %zu", name, d->got, n);
    xfree(d->buf);
}

/* ---- whole writes to a peer that reads ---- */

struct wcase {
    const char *name;
    int socket;   /* a socket pair, else a pipe */
    int nonblock; /* the writer's end has O_NONBLOCK */
    int deadline; /* with a (far) deadline */
};

static const struct wcase write_cases[] = {
    {"a blocking pipe that fills is written whole", 0, 0, 0},
    {"a non-blocking pipe that fills is written whole (EAGAIN waits)", 0, 1, 0},
    {"a blocking pipe with a deadline is written whole (PIPE_BUF at a time)", 0, 0, 1},
    {"a non-blocking pipe with a deadline is written whole", 0, 1, 1},
    {"a blocking socket that fills is written whole", 1, 0, 0},
    {"a non-blocking socket that fills is written whole", 1, 1, 0},
    {"a socket with a deadline is written whole", 1, 0, 1},
};

static void write_table(void **state)
{
    (void)state;
    unsigned char *data = pattern(BIG);
    for (size_t i = 0; i < sizeof write_cases / sizeof *write_cases; i++) {
        const struct wcase *c = &write_cases[i];
        int fds[2];
        if (c->socket)
            assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
        else
            assert_int_equal(pipe(fds), 0);
        int rd = fds[0], wr = fds[1];
        if (c->nonblock)
            nonblock(wr);
        struct drain d;
        drain_start(&d, rd);
        int64_t deadline = c->deadline ? clock_mono_ms() + 600000 : FDIO_NO_DEADLINE;
        int rc = fdio_write_all(wr, data, BIG, deadline);
        close(wr);
        drain_check(&d, data, BIG, c->name);
        close(rd);
        if (rc != 0)
            fail_msg("%s: rc %d", c->name, rc);
    }
    xfree(data);
}

/* ---- EINTR ---- */

static volatile sig_atomic_t signals_seen;

static void on_usr1(int sig)
{
    (void)sig;
    signals_seen++;
}

struct writer {
    int fd;
    const unsigned char *data;
    int rc;
    int done; /* set by the writer, read by the test's thread: atomic */
};

static void *writer_run(void *arg)
{
    struct writer *w = arg;
    w->rc = fdio_write_all(w->fd, w->data, BIG, FDIO_NO_DEADLINE);
    __atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* A signal handled without SA_RESTART interrupts a blocked write (EINTR, or
 * a short write): the loop goes on, and every byte arrives once, in order. */
static void eintr_does_not_cut_the_write(void **state)
{
    (void)state;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART */
    struct sigaction old;
    assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
    signals_seen = 0;
    unsigned char *data = pattern(BIG);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    struct writer w = {.fd = fds[1], .data = data};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, writer_run, &w), 0);
    /* Read in small steps, signalling the writer (blocked on the full pipe
     * most of the time) before each. */
    unsigned char *got = xmalloc(BIG);
    size_t have = 0;
    while (have < BIG) {
        if (!__atomic_load_n(&w.done, __ATOMIC_ACQUIRE))
            pthread_kill(th, SIGUSR1);
        size_t n = 0;
        size_t step = BIG - have < 4096 ? BIG - have : 4096;
        assert_int_equal(fdio_read_all(fds[0], got + have, step, &n, FDIO_NO_DEADLINE), 0);
        assert_true(n > 0);
        have += n;
    }
    pthread_join(th, NULL);
    assert_int_equal(w.rc, 0);
    assert_true(signals_seen > 0);
    assert_memory_equal(got, data, BIG);
    close(fds[0]);
    close(fds[1]);
    xfree(got);
    xfree(data);
    assert_int_equal(sigaction(SIGUSR1, &old, NULL), 0);
}

/* ---- deadlines on a peer that never reads ---- */

struct dcase {
    const char *name;
    int socket, nonblock;
};

static const struct dcase stuck_cases[] = {
    {"a blocking pipe nobody reads: the deadline ends the write", 0, 0},
    {"a non-blocking pipe nobody reads: the deadline ends the write", 0, 1},
    {"a blocking socket nobody reads: the deadline ends the write", 1, 0},
    {"a non-blocking socket nobody reads: the deadline ends the write", 1, 1},
};

static void deadline_on_a_peer_that_never_reads(void **state)
{
    (void)state;
    unsigned char *data = pattern(BIG);
    for (size_t i = 0; i < sizeof stuck_cases / sizeof *stuck_cases; i++) {
        const struct dcase *c = &stuck_cases[i];
        int fds[2];
        if (c->socket)
            assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
        else
            assert_int_equal(pipe(fds), 0);
        if (c->nonblock)
            nonblock(fds[1]);
        int rc = fdio_write_all(fds[1], data, BIG, clock_mono_ms() + 200);
        if (rc != -ETIMEDOUT)
            fail_msg("%s: rc %d, want -ETIMEDOUT", c->name, rc);
        close(fds[0]);
        close(fds[1]);
    }
    xfree(data);
}

/* A socket whose peer left: -EPIPE, and no SIGPIPE (its default action
 * would end this test). */
static void a_peer_that_left_is_epipe_not_sigpipe(void **state)
{
    (void)state;
    void (*old)(int) = signal(SIGPIPE, SIG_DFL);
    int fds[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    close(fds[0]);
    assert_int_equal(fdio_write_all(fds[1], "x", 1, FDIO_NO_DEADLINE), -EPIPE);
    assert_int_equal(fdio_write_all(fds[1], "x", 1, clock_mono_ms() + 60000), -EPIPE);
    close(fds[1]);
    signal(SIGPIPE, old);
}

/* A regular file is not a socket: written whole, read back whole. */
static void a_file_round_trip(void **state)
{
    (void)state;
    char path[] = "/tmp/test_fdio.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    unsigned char *data = pattern(BIG);
    assert_int_equal(fdio_write_all(fd, data, BIG, FDIO_NO_DEADLINE), 0);
    assert_int_equal(fdio_write_all(fd, data, 100, clock_mono_ms() + 60000), 0);
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
    unsigned char *back = xmalloc(BIG + 200);
    size_t got = 0;
    assert_int_equal(fdio_read_all(fd, back, BIG + 200, &got, FDIO_NO_DEADLINE), 0);
    assert_int_equal(got, BIG + 100);
    assert_memory_equal(back, data, BIG);
    assert_memory_equal(back + BIG, data, 100);
    close(fd);
    xfree(back);
    xfree(data);
}

/* ---- whole files (fdio_read_file) ---- */

struct fcase {
    const char *name;
    long size; /* bytes of the file; -1: no file */
    size_t max;
    int rc;
};

static const struct fcase FILE_CASES[] = {
    {"a file under max is read whole", 5000, 8192, 0},
    {"a file of exactly max bytes is read whole", 8192, 8192, 0},
    {"an empty file is 0 bytes, not an error", 0, 8192, 0},
    {"a file one byte over max is -EFBIG", 8193, 8192, -EFBIG},
    {"a missing file is -ENOENT", -1, 8192, -ENOENT},
};

static void read_file_table(void **state)
{
    (void)state;
    unsigned char *data = pattern(8193);
    for (size_t i = 0; i < sizeof FILE_CASES / sizeof FILE_CASES[0]; i++) {
        const struct fcase *c = &FILE_CASES[i];
        char path[] = "/tmp/test_fdio_file.XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        if (c->size >= 0)
            assert_int_equal(fdio_write_all(fd, data, (size_t)c->size, FDIO_NO_DEADLINE), 0);
        close(fd);
        if (c->size < 0)
            unlink(path);
        char *out = NULL;
        size_t len = 0;
        int rc = fdio_read_file(path, c->max, &out, &len);
        if (rc != c->rc)
            fail_msg("%s: rc %d, expected %d", c->name, rc, c->rc);
        if (rc == 0) {
            assert_int_equal(len, (size_t)c->size);
            assert_memory_equal(out, data, len);
        } else {
            assert_null(out);
        }
        xfree(out);
        unlink(path);
    }
    xfree(data);
}

/* ---- reads ---- */

struct rcase {
    const char *name;
    const char *sent; /* written before the read; NULL: nothing */
    int close_writer; /* the writer's end is closed before the read (EOF) */
    size_t cap;
    int deadline; /* a short deadline */
    int rc;
    size_t got;
};

static const struct rcase read_cases[] = {
    {"the end comes before the buffer is full: got counts what came", "hello", 1, 100, 0, 0, 5},
    {"a full buffer ends the read (the rest stays in the pipe)", "0123456789", 1, 4, 0, 0, 4},
    {"an empty pipe closed by its writer: 0 bytes, no error", NULL, 1, 10, 0, 0, 0},
    {"a writer that never closes: the deadline ends the read, got keeps what came", "abc", 0, 10, 1,
     -ETIMEDOUT, 3},
    {"a writer that never writes: the deadline ends the read", NULL, 0, 10, 1, -ETIMEDOUT, 0},
};

static void read_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof read_cases / sizeof *read_cases; i++) {
        const struct rcase *c = &read_cases[i];
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        if (c->sent)
            assert_int_equal(fdio_write_all(fds[1], c->sent, strlen(c->sent), FDIO_NO_DEADLINE), 0);
        if (c->close_writer) {
            close(fds[1]);
            fds[1] = -1;
        }
        char buf[128];
        size_t got = 99;
        int64_t deadline = c->deadline ? clock_mono_ms() + 200 : FDIO_NO_DEADLINE;
        int rc = fdio_read_all(fds[0], buf, c->cap, &got, deadline);
        if (rc != c->rc || got != c->got)
            fail_msg("%s: rc %d got %zu, want rc %d got %zu", c->name, rc, got, c->rc, c->got);
        if (c->sent && memcmp(buf, c->sent, got) != 0)
            fail_msg("%s: the bytes differ", c->name);
        close(fds[0]);
        if (fds[1] >= 0)
            close(fds[1]);
    }
}

/* A non-blocking reader without a deadline waits (EAGAIN) for bytes that
 * come later, until the writer closes. */
static void a_non_blocking_read_waits_for_the_end(void **state)
{
    (void)state;
    unsigned char *data = pattern(BIG);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    nonblock(fds[0]);
    struct writer w = {.fd = fds[1], .data = data};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, writer_run, &w), 0);
    unsigned char *got = xmalloc(BIG + 1);
    size_t n = 0;
    int rc = 0;
    /* The writer closes only after the join, so read exactly BIG. */
    rc = fdio_read_all(fds[0], got, BIG, &n, FDIO_NO_DEADLINE);
    pthread_join(th, NULL);
    assert_int_equal(rc, 0);
    assert_int_equal(w.rc, 0);
    assert_int_equal(n, BIG);
    assert_memory_equal(got, data, BIG);
    close(fds[1]);
    assert_int_equal(fdio_read_all(fds[0], got, 1, &n, FDIO_NO_DEADLINE), 0);
    assert_int_equal(n, 0);
    close(fds[0]);
    xfree(got);
    xfree(data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(write_table),
        cmocka_unit_test(eintr_does_not_cut_the_write),
        cmocka_unit_test(deadline_on_a_peer_that_never_reads),
        cmocka_unit_test(a_peer_that_left_is_epipe_not_sigpipe),
        cmocka_unit_test(a_file_round_trip),
        cmocka_unit_test(read_file_table),
        cmocka_unit_test(read_table),
        cmocka_unit_test(a_non_blocking_read_waits_for_the_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
