/* Unit tests for cluster/peer: a blocking GET (or POST) to another node, against a
 * raw socket server that answers canned bytes. Each case names the sentence
 * of cluster/peer.h it checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cluster/peer.h"
#include "core/clock.h"
#include "core/xalloc.h"

struct canned {
    int lfd;
    const char *answer; /* NULL: read the request and never answer */
    size_t answer_len;
    char request[4096];
    int64_t hold_ms; /* how long to keep a silent connection open */
};

static void *serve_one(void *arg)
{
    struct canned *c = arg;
    int fd = accept(c->lfd, NULL, NULL);
    if (fd < 0)
        return NULL;
    size_t got = 0;
    while (got < sizeof c->request - 1 && !strstr(c->request, "\r\n\r\n")) {
        ssize_t r = read(fd, c->request + got, sizeof c->request - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
        c->request[got] = '\0';
    }
    if (c->answer) {
        size_t off = 0;
        while (off < c->answer_len) {
            ssize_t w = write(fd, c->answer + off, c->answer_len - off);
            if (w <= 0)
                break;
            off += (size_t)w;
        }
    } else {
        char b[64];
        struct timeval tv = {(time_t)(c->hold_ms / 1000), 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        while (read(fd, b, sizeof b) > 0) {
        }
    }
    close(fd);
    return NULL;
}

/* Starts a one-connection server; writes its base URL into base. */
static pthread_t start(struct canned *c, char *base, size_t cap)
{
    c->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(c->lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(c->lfd, 4), 0);
    socklen_t al = sizeof a;
    assert_int_equal(getsockname(c->lfd, (struct sockaddr *)&a, &al), 0);
    snprintf(base, cap, "http://127.0.0.1:%d", ntohs(a.sin_port));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, serve_one, c), 0);
    return t;
}

static void finish(struct canned *c, pthread_t t)
{
    shutdown(c->lfd, SHUT_RDWR);
    pthread_join(t, NULL);
    close(c->lfd);
}

static int get(const char *base, const char *const *headers, int timeout_ms, int *status,
               json_t **out, struct err *e)
{
    err_init(e);
    return peer_get_json(base, "/browser_pools/p1", headers, timeout_ms, status, out, e);
}

/* "GETs path ... with the given extra header lines ... and
 * "X-Browserd-Hop: 1" ... *status is the answer's status and *out its body
 * parsed as JSON" (Content-Length framing) */
static void a_json_answer_with_a_length_is_read(void **state)
{
    (void)state;
    static const char ans[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                              "Content-Length: 25\r\n\r\n{\"id\":\"p1\",\"available\":3}";
    struct canned c = {.answer = ans, .answer_len = sizeof ans - 1};
    char base[64];
    pthread_t t = start(&c, base, sizeof base);
    const char *h[] = {"Authorization: Bearer k", "X-Kernel-Project-Id: pr", NULL};
    int status = 0;
    json_t *out = NULL;
    struct err e;
    assert_int_equal(get(base, h, 5000, &status, &out, &e), 0);
    finish(&c, t);
    assert_int_equal(status, 200);
    assert_non_null(out);
    assert_int_equal(json_integer_value(json_object_get(out, "available")), 3);
    json_decref(out);
    assert_non_null(strstr(c.request, "GET /browser_pools/p1 HTTP/1.1\r\n"));
    assert_non_null(strstr(c.request, "\r\nAuthorization: Bearer k\r\n"));
    assert_non_null(strstr(c.request, "\r\nX-Kernel-Project-Id: pr\r\n"));
    assert_non_null(strstr(c.request, "\r\nX-Browserd-Hop: 1\r\n"));
}

/* peer_call_json: "The same with another method and an empty body
 * ("Content-Length: 0" unless method is GET)"; a 204 has no JSON body. */
static void a_post_sends_an_empty_body_with_its_length(void **state)
{
    (void)state;
    static const char ans[] = "HTTP/1.1 204 No Content\r\n\r\n";
    struct canned c = {.answer = ans, .answer_len = sizeof ans - 1};
    char base[64];
    pthread_t t = start(&c, base, sizeof base);
    int status = 0;
    json_t *out = NULL;
    struct err e;
    err_init(&e);
    assert_int_equal(
        peer_call_json(base, "POST", "/internal/pools/t/flush", NULL, 5000, &status, &out, &e), 0);
    finish(&c, t);
    assert_int_equal(status, 204);
    assert_null(out);
    assert_non_null(strstr(c.request, "POST /internal/pools/t/flush HTTP/1.1\r\n"));
    assert_non_null(strstr(c.request, "\r\nContent-Length: 0\r\n"));
    assert_non_null(strstr(c.request, "\r\nX-Browserd-Hop: 1\r\n"));
}

/* The same through chunked framing, and a non-JSON body gives *out NULL. */
static void chunked_and_non_json_answers(void **state)
{
    (void)state;
    static const char ans[] = "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "5\r\n{\"a\":\r\n2\r\n1}\r\n0\r\n\r\n";
    struct canned c = {.answer = ans, .answer_len = sizeof ans - 1};
    char base[64];
    pthread_t t = start(&c, base, sizeof base);
    int status = 0;
    json_t *out = NULL;
    struct err e;
    assert_int_equal(get(base, NULL, 5000, &status, &out, &e), 0);
    finish(&c, t);
    assert_int_equal(status, 404);
    assert_int_equal(json_integer_value(json_object_get(out, "a")), 1);
    json_decref(out);

    static const char text[] = "HTTP/1.0 200 OK\r\n\r\nnot json";
    struct canned c2 = {.answer = text, .answer_len = sizeof text - 1};
    t = start(&c2, base, sizeof base);
    assert_int_equal(get(base, NULL, 5000, &status, &out, &e), 0);
    finish(&c2, t);
    assert_int_equal(status, 200);
    assert_null(out);
}

/* "E_UNAVAIL when the node cannot be reached or answers malformed bytes" */
static void unreachable_malformed_or_silent_nodes_are_unavailable(void **state)
{
    (void)state;
    int status = 0;
    json_t *out = NULL;
    struct err e;
    /* A port nobody listens on. */
    struct canned probe = {.answer = "", .answer_len = 0};
    char base[64];
    pthread_t t = start(&probe, base, sizeof base);
    finish(&probe, t);
    assert_int_equal(get(base, NULL, 2000, &status, &out, &e), E_UNAVAIL);
    assert_null(out);
    /* Not HTTP. */
    static const char junk[] = "SSH-2.0-OpenSSH\r\n\r\n";
    struct canned c = {.answer = junk, .answer_len = sizeof junk - 1};
    t = start(&c, base, sizeof base);
    assert_int_equal(get(base, NULL, 2000, &status, &out, &e), E_UNAVAIL);
    finish(&c, t);
    /* A body shorter than its Content-Length. */
    static const char cut[] = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}";
    struct canned c3 = {.answer = cut, .answer_len = sizeof cut - 1};
    t = start(&c3, base, sizeof base);
    assert_int_equal(get(base, NULL, 2000, &status, &out, &e), E_UNAVAIL);
    finish(&c3, t);
    /* A node that never answers: the whole exchange is bounded by the timeout. */
    struct canned c4 = {.answer = NULL, .hold_ms = 5000};
    t = start(&c4, base, sizeof base);
    int64_t t0 = clock_mono_ms();
    assert_int_equal(get(base, NULL, 300, &status, &out, &e), E_UNAVAIL);
    assert_true(clock_mono_ms() - t0 < 4000);
    finish(&c4, t);
    /* Not an http:// base. */
    assert_int_equal(get("https://127.0.0.1:1", NULL, 300, &status, &out, &e), E_UNAVAIL);
    assert_int_equal(get("http://127.0.0.1", NULL, 300, &status, &out, &e), E_UNAVAIL);
}

/* "each without CR or LF": a header line that would inject another line is
 * refused, never sent. */
static void a_header_with_a_line_break_is_refused(void **state)
{
    (void)state;
    static const char ans[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
    struct canned c = {.answer = ans, .answer_len = sizeof ans - 1};
    char base[64];
    pthread_t t = start(&c, base, sizeof base);
    const char *h[] = {"Authorization: x\r\nX-Evil: 1", NULL};
    int status = 0;
    json_t *out = NULL;
    struct err e;
    assert_int_equal(get(base, h, 1000, &status, &out, &e), E_UNAVAIL);
    finish(&c, t);
    assert_null(strstr(c.request, "X-Evil"));
}

/* "Largest body a peer call reads": a larger answer is refused. */
static void an_answer_past_the_cap_is_refused(void **state)
{
    (void)state;
    size_t n = PEER_BODY_MAX + 100000;
    char *big = xmalloc(n + 100);
    int h = snprintf(big, 100, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", n);
    memset(big + h, ' ', n);
    struct canned c = {.answer = big, .answer_len = (size_t)h + n};
    char base[64];
    pthread_t t = start(&c, base, sizeof base);
    int status = 0;
    json_t *out = NULL;
    struct err e;
    assert_int_equal(get(base, NULL, 5000, &status, &out, &e), E_UNAVAIL);
    finish(&c, t);
    xfree(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_json_answer_with_a_length_is_read),
        cmocka_unit_test(a_post_sends_an_empty_body_with_its_length),
        cmocka_unit_test(chunked_and_non_json_answers),
        cmocka_unit_test(unreachable_malformed_or_silent_nodes_are_unavailable),
        cmocka_unit_test(a_header_with_a_line_break_is_refused),
        cmocka_unit_test(an_answer_past_the_cap_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
