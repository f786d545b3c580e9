/* Unit tests for proxy/httpc: one blocking exchange against a peer thread
 * on the other end of a socketpair that reads the request and answers
 * canned bytes. Table-driven; each case is named after the sentence of
 * proxy/httpc.h it checks. No case waits on a clock: the silent peer is
 * ended by the client's own deadline, and every peer ends when the client
 * closes its socket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/xalloc.h"
#include "proxy/httpc.h"

#define NCASES(a) (sizeof(a) / sizeof((a)[0]))

/* The peer: reads the request head (and a body as long as its
 * Content-Length), writes the answer, then either closes at once or keeps
 * the connection open until the client closes it. */
struct peer {
    int fd;
    const char *answer; /* NULL: answer nothing */
    size_t answer_len;
    int close_after; /* 1: close after the answer (a close-delimited body) */
    char request[8192];
};

static void *serve(void *arg)
{
    struct peer *p = arg;
    size_t got = 0;
    size_t want = 0; /* the head's length plus its Content-Length, once the head is in */
    for (;;) {
        const char *end = strstr(p->request, "\r\n\r\n");
        if (end && !want) {
            want = (size_t)(end - p->request) + 4;
            const char *cl = strstr(p->request, "\r\nContent-Length: ");
            if (cl && cl < end)
                want += strtoul(cl + 18, NULL, 10);
        }
        if ((want && got >= want) || got >= sizeof p->request - 1)
            break;
        ssize_t r = read(p->fd, p->request + got, sizeof p->request - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
        p->request[got] = '\0';
    }
    for (size_t off = 0; p->answer && off < p->answer_len;) {
        ssize_t w = write(p->fd, p->answer + off, p->answer_len - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    if (!p->close_after) {
        char b[4096];
        while (read(p->fd, b, sizeof b) > 0) {
        }
    }
    close(p->fd);
    return NULL;
}

/* One exchange of rq against a peer answering answer[0..len). */
static int run(struct peer *p, const struct httpc_req *rq, struct httpc_resp *out, struct err *e)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    p->fd = sv[1];
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, serve, p), 0);
    err_init(e);
    int rc = httpc_exchange(sv[0], rq, out, e);
    pthread_join(t, NULL);
    return rc;
}

static struct httpc_req get_req(size_t body_max, int64_t timeout_ms)
{
    struct httpc_req rq = {
        .method = "GET",
        .target = "/x?y=1",
        .host = "peer.test:8080",
        .fields = NULL,
        .body = NULL,
        .body_len = 0,
        .tls_host = NULL,
        .body_max = body_max,
        .head_only = 0,
        .deadline_ms = clock_mono_ms() + timeout_ms,
    };
    return rq;
}

struct answer_case {
    const char *name;
    const char *answer; /* NULL: a silent peer */
    int close_after;
    size_t body_max;
    int64_t timeout_ms;
    int rc;
    int status;       /* when rc == 0 */
    const char *body; /* when rc == 0 */
    const char *why;  /* when rc != 0: a part of the message */
};

static const struct answer_case answer_cases[] = {
    {"Content-Length framing: the body ends at its length, not at the close",
     "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 0, 100, 5000, 0, 200, "hello", NULL},
    {"chunked framing is decoded (sizes, extensions and trailers dropped)",
     "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
     "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n",
     0, 100, 5000, 0, 201, "hello world", NULL},
    {"close framing: every byte until the peer closes", "HTTP/1.0 200 OK\r\n\r\nuntil the close", 1,
     100, 5000, 0, 200, "until the close", NULL},
    {"a 204 has no body", "HTTP/1.1 204 No Content\r\n\r\n", 0, 100, 5000, 0, 204, "", NULL},
    {"a body of exactly body_max is accepted", "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabcd",
     0, 4, 5000, 0, 200, "abcd", NULL},
    {"E_TOOBIG: a Content-Length past body_max is refused before the body is read",
     "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", 0, 10, 5000, E_TOOBIG, 0, NULL,
     "larger than 10 bytes"},
    {"E_TOOBIG: a close-delimited body past body_max", "HTTP/1.1 200 OK\r\n\r\n0123456789abc", 1,
     10, 5000, E_TOOBIG, 0, NULL, "larger than 10 bytes"},
    {"E_TOOBIG: a chunked body past body_max, counted decoded",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: "
     "chunked\r\n\r\n8\r\n01234567\r\n8\r\n89abcdef\r\n0\r\n\r\n",
     0, 10, 5000, E_TOOBIG, 0, NULL, "larger than 10 bytes"},
    {"E_UPSTREAM: the answer is not HTTP", "SSH-2.0-OpenSSH_9.6\r\n\r\n", 1, 100, 5000, E_UPSTREAM,
     0, NULL, "not HTTP"},
    {"E_UPSTREAM: a malformed head (whitespace before the colon)",
     "HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\n{}", 1, 100, 5000, E_UPSTREAM, 0, NULL,
     "not HTTP"},
    {"E_UPSTREAM: a head the peer never finishes", "HTTP/1.1 200 OK\r\nServer: x\r\n", 1, 100, 5000,
     E_UPSTREAM, 0, NULL, "not HTTP"},
    {"E_UPSTREAM: the answer was cut short (fewer bytes than its Content-Length)",
     "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}", 1, 1000, 5000, E_UPSTREAM, 0, NULL,
     "cut short"},
    {"E_UPSTREAM: a malformed chunked answer",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", 1, 100, 5000,
     E_UPSTREAM, 0, NULL, "malformed chunked"},
    {"E_UPSTREAM: a chunked answer that ends before its last chunk",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", 1, 100, 5000, E_UPSTREAM, 0,
     NULL, "cut short"},
    {"E_UPSTREAM: the answer's framing is malformed (a coding other than chunked)",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxx", 1, 100, 5000, E_UPSTREAM, 0, NULL,
     "framing"},
    {"E_UNAVAIL: a silent peer is left at the deadline", NULL, 0, 100, 200, E_UNAVAIL, 0, NULL,
     "timed out"},
    {"E_UNAVAIL: a peer that answers half a body and then nothing is left at the deadline",
     "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf", 0, 100, 200, E_UNAVAIL, 0, NULL,
     "timed out"},
};

static void each_answer_case(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES(answer_cases); i++) {
        const struct answer_case *c = &answer_cases[i];
        struct peer p = {.answer = c->answer,
                         .answer_len = c->answer ? strlen(c->answer) : 0,
                         .close_after = c->close_after};
        struct httpc_req rq = get_req(c->body_max, c->timeout_ms);
        struct httpc_resp r;
        struct err e;
        int rc = run(&p, &rq, &r, &e);
        if (rc != c->rc)
            fail_msg("%s: rc %d, want %d (%s)", c->name, rc, c->rc, e.message);
        if (rc == 0) {
            if (r.status != c->status || r.body_len != strlen(c->body) ||
                memcmp(r.body, c->body, r.body_len) != 0 || r.body[r.body_len] != '\0')
                fail_msg("%s: status %d body '%.*s'", c->name, r.status, (int)r.body_len, r.body);
        } else {
            if (!strstr(e.message, c->why))
                fail_msg("%s: message '%s' lacks '%s'", c->name, e.message, c->why);
            if (r.raw || !r.sent)
                fail_msg("%s: a failed answer holds bytes, or the request was not sent", c->name);
        }
        httpc_resp_free(&r);
    }
}

/* "Host, User-Agent: browserd, Content-Length (when body is set) and
 * Connection: close are sent by httpc" and the caller's fields go out as
 * given. */
static void the_request_is_sent_as_asked(void **state)
{
    (void)state;
    static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    struct peer p = {.answer = ok, .answer_len = sizeof ok - 1};
    struct httpc_req rq = get_req(100, 5000);
    rq.method = "POST";
    rq.fields = "Content-Type: application/json\r\nX-Key: k\r\n";
    rq.body = "{\"a\":1}";
    rq.body_len = 7;
    struct httpc_resp r;
    struct err e;
    assert_int_equal(run(&p, &rq, &r, &e), 0);
    assert_string_equal(r.body, "ok");
    httpc_resp_free(&r);
    assert_non_null(strstr(p.request, "POST /x?y=1 HTTP/1.1\r\nHost: peer.test:8080\r\n"));
    assert_non_null(strstr(p.request, "\r\nContent-Type: application/json\r\nX-Key: k\r\n"));
    assert_non_null(strstr(p.request, "\r\nContent-Length: 7\r\n"));
    assert_non_null(strstr(p.request, "\r\nConnection: close\r\n\r\n{\"a\":1}"));

    /* Without a body: no Content-Length. */
    struct peer q = {.answer = ok, .answer_len = sizeof ok - 1};
    rq = get_req(100, 5000);
    assert_int_equal(run(&q, &rq, &r, &e), 0);
    httpc_resp_free(&r);
    assert_null(strstr(q.request, "Content-Length"));
}

/* "1: stop after the head (the body is neither read nor kept)": the peer's
 * body never comes, yet the exchange ends with the head's status. */
static void head_only_stops_after_the_head(void **state)
{
    (void)state;
    static const char ans[] = "HTTP/1.1 503 Busy\r\nContent-Length: 100000\r\n\r\npartial";
    struct peer p = {.answer = ans, .answer_len = sizeof ans - 1};
    struct httpc_req rq = get_req(0, 5000);
    rq.head_only = 1;
    struct httpc_resp r;
    struct err e;
    assert_int_equal(run(&p, &rq, &r, &e), 0);
    assert_int_equal(r.status, 503);
    assert_int_equal(r.body_len, 0);
    assert_string_equal(r.body, "");
    httpc_resp_free(&r);
}

/* "head's fields and body point into raw": a body that arrives in many
 * reads (the buffer grows and moves) leaves the fields readable. */
static void fields_survive_a_growing_buffer(void **state)
{
    (void)state;
    size_t n = 300 * 1024;
    char *ans = xmalloc(n + 200);
    int h = snprintf(
        ans, 200, "HTTP/1.1 200 OK\r\nLocation: /next\r\nTransfer-Encoding: chunked\r\n\r\n%zx\r\n",
        n);
    memset(ans + h, 'x', n);
    memcpy(ans + h + n, "\r\n0\r\n\r\n", 7);
    struct peer p = {.answer = ans, .answer_len = (size_t)h + n + 7};
    struct httpc_req rq = get_req(n, 5000);
    struct httpc_resp r;
    struct err e;
    assert_int_equal(run(&p, &rq, &r, &e), 0);
    assert_int_equal(r.body_len, n);
    assert_int_equal(r.body[n - 1], 'x');
    const struct httpresp_field *f = httpresp_field(&r.head, "Location");
    assert_non_null(f);
    assert_int_equal(f->value_len, 5);
    assert_memory_equal(f->value, "/next", 5);
    httpc_resp_free(&r);
    xfree(ans);
}

/* httpc_dial: "every address tried in turn", and E_UNAVAIL naming the host
 * and port when none answers. */
static void dial_connects_or_says_why(void **state)
{
    (void)state;
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(lfd, 4), 0);
    socklen_t al = sizeof a;
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
    char port[16];
    snprintf(port, sizeof port, "%d", ntohs(a.sin_port));
    struct err e;
    err_init(&e);
    int fd = httpc_dial("127.0.0.1", port, clock_mono_ms() + 5000, &e);
    assert_true(fd >= 0);
    close(fd);
    close(lfd); /* nobody listens on the port any more */
    err_init(&e);
    assert_int_equal(httpc_dial("127.0.0.1", port, clock_mono_ms() + 5000, &e), E_UNAVAIL);
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1 port %s: ", port);
    assert_non_null(strstr(e.message, want));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(each_answer_case),
        cmocka_unit_test(the_request_is_sent_as_asked),
        cmocka_unit_test(head_only_stops_after_the_head),
        cmocka_unit_test(fields_survive_a_growing_buffer),
        cmocka_unit_test(dial_connects_or_says_why),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
