/* Unit tests for http/guard: the budget of buffered request bodies ("one
 * tenant may never fill a server-wide cap alone"), the head watch's deadline,
 * and log_escape, which keeps a request's bytes from forging a log field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "http/guard.h"

/* A budget of 100 bytes with a share of 60, and a sequence of takes and
 * gives with what each answers. */
static const struct {
    const char *name;
    int give; /* 1: budget_give instead of budget_take */
    const char *tenant;
    size_t n;
    int rc;
} steps[] = {
    {"a tenant takes within its share", 0, "org a", 50, 0},
    {"past its share: 429", 0, "org a", 11, E_LIMIT},
    {"up to its share exactly", 0, "org a", 10, 0},
    {"another tenant within its share", 0, "org b", 30, 0},
    {"past the budget though within its share: 503", 0, "org b", 11, E_UNAVAIL},
    {"up to the budget exactly", 0, "org b", 10, 0},
    {"a third tenant finds the budget full", 0, "ip 127.0.0.1", 1, E_UNAVAIL},
    {"bytes given back", 1, "org a", 60, 0},
    {"are taken by another", 0, "ip 127.0.0.1", 60, 0},
    {"one request larger than a share", 0, "org c", 61, E_LIMIT},
    {"nothing, always", 0, "org c", 0, 0},
};

static void budget_shares_and_total(void **state)
{
    (void)state;
    struct body_budget *b = budget_new(100, 60);
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        int rc = 0;
        if (steps[i].give)
            budget_give(b, steps[i].tenant, steps[i].n);
        else
            rc = budget_take(b, steps[i].tenant, steps[i].n);
        if (rc != steps[i].rc)
            fail_msg("%s: got %d, expected %d", steps[i].name, rc, steps[i].rc);
    }
    assert_int_equal(budget_held(b, NULL), 100);
    assert_int_equal(budget_held(b, "org a"), 0);
    assert_int_equal(budget_held(b, "org b"), 40);
    budget_give(b, "org b", 40);
    budget_give(b, "ip 127.0.0.1", 60);
    assert_int_equal(budget_held(b, NULL), 0);
    budget_free(b);
}

/* A connection that never completes its head is shut down at the deadline;
 * one whose head arrived is left alone. */
static void head_watch_cuts_only_waiting_connections(void **state)
{
    (void)state;
    struct err e;
    err_init(&e);
    struct head_watch *hw;
    assert_int_equal(headwatch_start(1, &hw, &e), 0);
    int late[2], done[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, late), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, done), 0);
    struct head_conn *a = headwatch_conn_new(hw, late[0]);
    struct head_conn *b = headwatch_conn_new(hw, done[0]);
    headwatch_head_done(b);
    /* The peer of a shut-down socket reads its end. */
    struct pollfd p = {.fd = late[1], .events = POLLIN};
    assert_int_equal(poll(&p, 1, 10000), 1);
    char c;
    assert_int_equal(read(late[1], &c, 1), 0);
    assert_int_equal(headwatch_cut_count(hw), 1);
    p.fd = done[1];
    assert_int_equal(poll(&p, 1, 0), 0);
    headwatch_conn_free(a);
    headwatch_conn_free(b);
    headwatch_stop(hw);
    close(late[0]);
    close(late[1]);
    close(done[0]);
    close(done[1]);
}

/* A connection answered before its body was read lingers after it ends:
 * the client may go on writing (read and dropped) until it closes. */
static void a_refused_connection_lingers_until_the_client_closes(void **state)
{
    (void)state;
    struct err e;
    err_init(&e);
    struct head_watch *hw;
    assert_int_equal(headwatch_start(10, &hw, &e), 0);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    struct head_conn *hc = headwatch_conn_new(hw, sv[0]);
    headwatch_head_done(hc);
    headwatch_linger(hc);
    headwatch_conn_free(hc);
    close(sv[0]); /* as libmicrohttpd does after telling us */
    char body[65536];
    memset(body, 'b', sizeof body);
    for (int i = 0; i < 32; i++) { /* 2 MiB, more than any socket buffer */
        size_t off = 0;
        while (off < sizeof body) {
            ssize_t n = send(sv[1], body + off, sizeof body - off, MSG_NOSIGNAL);
            assert_true(n > 0);
            off += (size_t)n;
        }
    }
    shutdown(sv[1], SHUT_WR);
    struct pollfd p = {.fd = sv[1], .events = POLLIN};
    assert_int_equal(poll(&p, 1, 10000), 1);
    char c;
    assert_int_equal(read(sv[1], &c, 1), 0); /* the watch closed its end */
    close(sv[1]);
    headwatch_stop(hw);
}

static const struct {
    const char *in, *out;
} fields[] = {
    {"/browsers/abc/fs/read_file", "/browsers/abc/fs/read_file"},
    {"/x\n2026-01-01T00:00:00Z info forged", "/x\\x0a2026-01-01T00:00:00Z\\x20info\\x20forged"},
    {"/a\r\x1b[2J", "/a\\x0d\\x1b[2J"},
    {"/q\"\\", "/q\\x22\\x5c"},
    {"/caf\xc3\xa9", "/caf\\xc3\\xa9"},
};

static void log_fields_are_escaped(void **state)
{
    (void)state;
    char out[128];
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        assert_string_equal(log_escape(fields[i].in, out, sizeof out), fields[i].out);
    /* Cut short only between whole escapes. */
    char small[6];
    assert_string_equal(log_escape("ab\ncd", small, sizeof small), "ab");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(budget_shares_and_total),
        cmocka_unit_test(head_watch_cuts_only_waiting_connections),
        cmocka_unit_test(a_refused_connection_lingers_until_the_client_closes),
        cmocka_unit_test(log_fields_are_escaped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
