/* Unit tests for core/log's writer of deferred lines: issue 39.3, "the
 * access log never blocks a worker, without losing lines on a clean
 * shutdown". Standard error is a pipe that nobody reads while the lines are
 * written: every call must return, the lines past the buffer are dropped
 * and counted, and every other line is written by the stop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/limits.h"
#include "core/log.h"
#include "core/xalloc.h"

struct reader {
    int fd;
    char *buf;
    size_t len, cap;
};

static void *drain(void *arg)
{
    struct reader *r = arg;
    for (;;) {
        if (r->len + 65536 > r->cap) {
            r->cap = r->cap * 2 + 65536;
            r->buf = xrealloc(r->buf, r->cap);
        }
        ssize_t n = read(r->fd, r->buf + r->len, r->cap - r->len - 1);
        if (n <= 0)
            break;
        r->len += (size_t)n;
    }
    r->buf[r->len] = '\0';
    return NULL;
}

static size_t count(const char *s, const char *needle)
{
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

static void unread_stderr_never_blocks_and_drops_are_counted(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_int_equal(dup2(p[1], STDERR_FILENO), STDERR_FILENO);
    close(p[1]);
    alarm(60); /* a blocked caller fails the test instead of hanging it */
    assert_int_equal(log_writer_start(), 0);
    /* About 3 MiB of lines: past the 1 MiB buffer and the pipe's 64 KiB. */
    char pad[900];
    memset(pad, 'x', sizeof pad - 1);
    pad[sizeof pad - 1] = '\0';
    const size_t n = 3 * 1024 * 1024 / sizeof pad;
    for (size_t i = 0; i < n; i++)
        log_deferred(LOG_INFO, "access GET /line-%zu %s", i, pad);
    /* Every call returned with nobody reading: now read and stop. */
    struct reader r = {.fd = p[0]};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, drain, &r), 0);
    log_writer_stop();
    assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
    close(saved);
    pthread_join(t, NULL);
    close(p[0]);
    alarm(0);
    size_t written = count(r.buf, "access GET /line-");
    /* The writer reports the drops of each of its rounds. */
    unsigned long long dropped = 0;
    for (const char *rep = r.buf; (rep = strstr(rep, "log: ")) != NULL; rep += 5)
        dropped += strtoull(rep + 5, NULL, 10);
    assert_true(dropped > 0);
    assert_true(written >= LIM_LOG_BUFFER_BYTES / (sizeof pad + 64));
    assert_int_equal(written + dropped, n);
    xfree(r.buf);
}

static void without_a_writer_lines_are_written_by_the_caller(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    int saved = dup(STDERR_FILENO);
    assert_int_equal(dup2(p[1], STDERR_FILENO), STDERR_FILENO);
    close(p[1]);
    log_deferred(LOG_INFO, "access POST /direct 201 5us");
    assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
    close(saved);
    char buf[256] = "";
    ssize_t got = read(p[0], buf, sizeof buf - 1);
    close(p[0]);
    assert_true(got > 0);
    assert_non_null(strstr(buf, " info access POST /direct 201 5us\n"));
}

/* What a call writes to standard error with no writer running, from its
 * level on (the timestamp before it differs from call to call). */
struct access_case {
    const char *name, *method, *path;
    int status;
    long long us;
    int aborted;
};

static void read_line_after_level(int fd, char *out, size_t cap)
{
    char buf[4096] = "";
    ssize_t got = read(fd, buf, sizeof buf - 1);
    assert_true(got > 0);
    const char *lvl = strstr(buf, "Z info ");
    assert_non_null(lvl);
    snprintf(out, cap, "%s", lvl);
}

static void access_line_is_the_printf_line_of_its_escaped_fields(void **state)
{
    (void)state;
    static char long_path[3000];
    memset(long_path, 'p', sizeof long_path - 1);
    long_path[0] = '/';
    static char long_escaped[1500];
    for (size_t i = 0; i < sizeof long_escaped - 1; i++)
        long_escaped[i] = i % 3 ? 'a' : '\n';
    static const struct access_case cases[] = {
        {"a plain GET", "GET", "/org/entitlements", 200, 91, 0},
        {"an aborted request", "POST", "/browsers", 0, 1234567, 1},
        {"a path with a newline, a quote, a space and a backslash", "GET", "/a\nb\"c d\\e\x7f\x80",
         404, 0, 0},
        {"a method past its field is cut",
         "AVERYLONGMETHODNAMEAVERYLONGMETHODNAMEAVERYLONGMETHODNAME"
         "AVERYLONGMETHODNAME",
         "/", 405, 7, 0},
        {"a path past its field is cut", "GET", long_path, 414, 9, 0},
        {"an escaped path past its field is cut before a whole escape", "GET", long_escaped, 404,
         10, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct access_case *c = &cases[i];
        int p[2];
        assert_int_equal(pipe(p), 0);
        int saved = dup(STDERR_FILENO);
        assert_int_equal(dup2(p[1], STDERR_FILENO), STDERR_FILENO);
        close(p[1]);
        char method[LIM_LOG_METHOD_BYTES], path[LIM_LOG_PATH_BYTES];
        log_deferred(LOG_INFO, "access %s %s %d %lldus%s",
                     log_escape(c->method, method, sizeof method),
                     log_escape(c->path, path, sizeof path), c->status, c->us,
                     c->aborted ? " (aborted)" : "");
        char want[4096], got[4096];
        read_line_after_level(p[0], want, sizeof want);
        log_access(LOG_INFO, c->method, c->path, c->status, c->us, c->aborted);
        read_line_after_level(p[0], got, sizeof got);
        assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
        close(saved);
        close(p[0]);
        if (strcmp(want, got) != 0)
            fail_msg("%s: log_access wrote %s, log_deferred %s", c->name, got, want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unread_stderr_never_blocks_and_drops_are_counted),
        cmocka_unit_test(without_a_writer_lines_are_written_by_the_caller),
        cmocka_unit_test(access_line_is_the_printf_line_of_its_escaped_fields),
    };
    return cmocka_run_group_tests_name("core/log", tests, NULL, NULL);
}
