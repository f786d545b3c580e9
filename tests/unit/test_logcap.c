/* Unit tests for runtime/logcap: "Every log a session can write to the
 * server's disk is capped" (issue 29.11). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/logcap.h"

static char dir[] = "/tmp/bd-logcap-XXXXXX";

/* Waits (bounded) until path is size bytes long; returns its size. */
static long long wait_size(const char *path, long long size)
{
    struct stat st = {0};
    for (int i = 0; i < 500; i++) {
        if (stat(path, &st) == 0 && st.st_size == size)
            break;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return (long long)st.st_size;
}

static void write_n(int fd, size_t n)
{
    char chunk[4096];
    memset(chunk, 'x', sizeof chunk);
    while (n) {
        size_t k = n < sizeof chunk ? n : sizeof chunk;
        assert_int_equal(write(fd, chunk, k), (ssize_t)k);
        n -= k;
    }
}

/* Output under the cap lands whole; past it, the file holds the cap and one
 * notice line, and a later writer of the same log gets no fresh budget. */
static void caps_and_keeps_the_budget(void **state)
{
    (void)state;
    char path[256];
    snprintf(path, sizeof path, "%s/a.log", dir);
    const long long cap = 10000, notice = (long long)strlen(LOGCAP_NOTICE);
    int w = logcap_pipe(path, cap);
    assert_true(w >= 0);
    write_n(w, 6000);
    assert_int_equal(wait_size(path, 6000), 6000);
    write_n(w, 100000); /* far past the cap: the writer never blocks */
    close(w);
    assert_int_equal(wait_size(path, cap + notice), cap + notice);
    w = logcap_pipe(path, cap);
    assert_true(w >= 0);
    write_n(w, 5000);
    close(w);
    /* The budget is decided when the pipe is made (the file is full), so
     * nothing of the second writer can land. */
    assert_int_equal(wait_size(path, cap + notice), cap + notice);
    unlink(path);
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(caps_and_keeps_the_budget),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
