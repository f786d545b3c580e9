/* Unit tests for telemetry/otlp: endpoint parsing, the OTLP/JSON logs
 * document, and the exporter against a loopback collector that fails for a
 * while and recovers (and one whose queue overflows: drops are counted). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/xalloc.h"
#include "proxy/netguard.h"
#include "telemetry/otlp.h"

/* ---- endpoints ---- */

struct ep_case {
    const char *name;
    const char *url;
    int ok;
    const char *host;
    int port;
    const char *path;
};

static const struct ep_case ep_cases[] = {
    {"an http URL with port and path", "http://127.0.0.1:4318/v1/logs", 1, "127.0.0.1", 4318,
     "/v1/logs"},
    {"the port defaults to 80", "http://collector.example/v1/logs", 1, "collector.example", 80,
     "/v1/logs"},
    {"the path defaults to /", "http://h:9", 1, "h", 9, "/"},
    {"a bracketed IPv6 host", "http://[::1]:4318/x", 1, "::1", 4318, "/x"},
    {"a query is kept", "http://h/p?a=b", 1, "h", 80, "/p?a=b"},
    {"https is refused (no TLS in this server)", "https://h/v1/logs", 0, NULL, 0, NULL},
    {"other schemes are refused", "ftp://h/", 0, NULL, 0, NULL},
    {"user information is refused", "http://u:p@h/", 0, NULL, 0, NULL},
    {"port 0 is refused", "http://h:0/", 0, NULL, 0, NULL},
    {"port above 65535 is refused", "http://h:65536/", 0, NULL, 0, NULL},
    {"an empty port is refused", "http://h:/", 0, NULL, 0, NULL},
    {"an empty host is refused", "http:///p", 0, NULL, 0, NULL},
    {"a fragment is refused", "http://h/p#f", 0, NULL, 0, NULL},
    {"spaces in the path are refused", "http://h/a b", 0, NULL, 0, NULL},
};

static void test_endpoints(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof ep_cases / sizeof ep_cases[0]; i++) {
        const struct ep_case *c = &ep_cases[i];
        char host[256], path[1024];
        int port = -1;
        struct err e;
        err_init(&e);
        int rc = otlp_parse_endpoint(c->url, host, sizeof host, &port, path, sizeof path, &e);
        if ((rc == 0) != c->ok)
            fail_msg("%s: rc %d (%s)", c->name, rc, e.ndetails ? e.details[0].message : "");
        if (c->ok && (strcmp(host, c->host) != 0 || port != c->port || strcmp(path, c->path) != 0))
            fail_msg("%s: got %s %d %s", c->name, host, port, path);
        if (!c->ok && (e.ndetails == 0 || strncmp(e.details[0].message, "endpoint", 8) != 0))
            fail_msg("%s: the error names the endpoint field", c->name);
    }
}

/* ---- the document ---- */

static void test_logs_json(void **state)
{
    (void)state;
    struct otlp_item it[3] = {
        {"s1", 1, 1000, "control", "cdp_command", (char *)"{\"name\":\"cdp_command\"}"},
        {"s1", 2, 2000, "connection", "cdp_disconnect", (char *)"{\"name\":\"cdp_disconnect\"}"},
        {"s2", 7, 3000, "page", "load", (char *)"{\"name\":\"load\"}"},
    };
    char *text = otlp_logs_json(it, 3);
    json_t *doc = json_loads(text, 0, NULL);
    xfree(text);
    json_t *rl = json_object_get(doc, "resourceLogs");
    assert_int_equal(json_array_size(rl), 2); /* one resource per session */
    json_t *recs = json_object_get(
        json_array_get(json_object_get(json_array_get(rl, 0), "scopeLogs"), 0), "logRecords");
    assert_int_equal(json_array_size(recs), 2);
    json_t *r0 = json_array_get(recs, 0);
    assert_string_equal(json_string_value(json_object_get(r0, "timeUnixNano")), "1000000000");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(r0, "body"), "stringValue")),
        "{\"name\":\"cdp_command\"}");
    json_t *attrs = json_object_get(r0, "attributes");
    int seen_seq = 0;
    for (size_t i = 0; i < json_array_size(attrs); i++) {
        json_t *a = json_array_get(attrs, i);
        if (strcmp(json_string_value(json_object_get(a, "key")), "browser.telemetry.seq") == 0) {
            assert_string_equal(
                json_string_value(json_object_get(json_object_get(a, "value"), "intValue")), "1");
            seen_seq = 1;
        }
    }
    assert_true(seen_seq);
    json_decref(doc);
}

/* ---- exporter against a loopback collector ---- */

struct collector {
    int lfd, port;
    int fail_first; /* answer 503 to this many requests */
    int requests, ok_requests;
    pthread_t th;
    int stop;
    pthread_mutex_t mu;
};

static void *collector_run(void *arg)
{
    struct collector *c = arg;
    for (;;) {
        int fd = accept(c->lfd, NULL, NULL);
        if (fd < 0)
            return NULL;
        char buf[65536];
        size_t got = 0;
        /* Read the head, then Content-Length bytes. */
        ssize_t n;
        char *end = NULL;
        while (!end && (n = recv(fd, buf + got, sizeof buf - 1 - got, 0)) > 0) {
            got += (size_t)n;
            buf[got] = '\0';
            end = strstr(buf, "\r\n\r\n");
        }
        long len = 0;
        char *cl = end ? strcasestr(buf, "Content-Length:") : NULL;
        if (cl)
            len = strtol(cl + 15, NULL, 10);
        size_t want = end ? (size_t)(end + 4 - buf) + (size_t)len : got;
        while (got < want && got < sizeof buf - 1 &&
               (n = recv(fd, buf + got, sizeof buf - 1 - got, 0)) > 0)
            got += (size_t)n;
        pthread_mutex_lock(&c->mu);
        int fail = c->requests++ < c->fail_first;
        if (!fail)
            c->ok_requests++;
        int stop = c->stop;
        pthread_mutex_unlock(&c->mu);
        const char *resp = fail ? "HTTP/1.1 503 Unavailable\r\nContent-Length: 0\r\n\r\n"
                                : "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
        if (send(fd, resp, strlen(resp), MSG_NOSIGNAL) < 0)
            fail = 1;
        close(fd);
        if (stop)
            return NULL;
    }
}

static void collector_start(struct collector *c, int fail_first)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    c->fail_first = fail_first;
    c->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(c->lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(c->lfd, 16), 0);
    socklen_t sl = sizeof a;
    getsockname(c->lfd, (struct sockaddr *)&a, &sl);
    c->port = ntohs(a.sin_port);
    pthread_create(&c->th, NULL, collector_run, c);
}

static void collector_stop(struct collector *c)
{
    shutdown(c->lfd, SHUT_RDWR);
    close(c->lfd);
    pthread_join(c->th, NULL);
    pthread_mutex_destroy(&c->mu);
}

/* The operator's allowance of the tests: loopback is open (as
 * --allow-loopback would open a collector's HOST:PORT). */
static int allow_all(void *ctx, int fam, const uint8_t *addr, int port)
{
    (void)ctx, (void)fam, (void)addr, (void)port;
    return 1;
}

static json_int_t stat(const char *id, const char *k)
{
    json_t *s = otlp_stats(id);
    json_int_t v = json_integer_value(json_object_get(s, k));
    json_decref(s);
    return v;
}

static void test_export_recovers(void **state)
{
    (void)state;
    struct collector c;
    collector_start(&c, 2);
    netguard_set(allow_all, NULL);
    struct err e;
    err_init(&e);
    assert_int_equal(otlp_start(100, &e), 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/logs", c.port);
    json_t *h = json_pack("{s:s}", "x-token", "t");
    struct otlp_target *t = otlp_target_new("dest-recover", "org-1", url, h);
    json_decref(h);
    for (int i = 1; i <= 5; i++)
        otlp_enqueue(t, "s1", (uint64_t)i, 1000 + i, "control", "cdp_command", "{}");
    /* "retrying with backoff": two 503s, then delivered. */
    assert_int_equal(otlp_drain(t, 20000), 0);
    assert_int_equal(stat("dest-recover", "exported"), 5);
    assert_int_equal(stat("dest-recover", "failed_attempts"), 2);
    assert_int_equal(stat("dest-recover", "dropped"), 0);
    otlp_target_unref(t);
    otlp_stop();
    collector_stop(&c);
}

static void test_queue_bound_drops_counted(void **state)
{
    (void)state;
    struct err e;
    err_init(&e);
    assert_int_equal(otlp_start(3, &e), 0);
    /* Nothing listens on port 9 of loopback: every attempt fails, so the
     * first batch is held in retries while the queue fills. */
    struct otlp_target *t = otlp_target_new("dest-full", "org-1", "http://127.0.0.1:9/", NULL);
    for (int i = 1; i <= 20; i++)
        otlp_enqueue(t, "s1", (uint64_t)i, i, "control", "cdp_command", "{}");
    assert_true(stat("dest-full", "dropped") >= 20 - 3 - OTLP_BATCH);
    assert_true(stat("dest-full", "dropped") > 0);
    otlp_stop(); /* stops retrying promptly */
    otlp_target_unref(t);
}

static const char *last_error(const char *id, char *buf, size_t cap)
{
    json_t *s = otlp_stats(id);
    snprintf(buf, cap, "%s", json_string_value(json_object_get(s, "last_error")) ?: "");
    json_decref(s);
    return buf;
}

/* Issue 29.5: without the operator's allowance a loopback collector is never
 * contacted, and the error a tenant reads in the stats is the one of a
 * collector that does not answer (no port or status scanner). */
static void test_refused_like_unreachable(void **state)
{
    (void)state;
    struct collector c;
    collector_start(&c, 0);
    int closed = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof a;
    assert_int_equal(bind(closed, (struct sockaddr *)&a, sizeof a), 0);
    getsockname(closed, (struct sockaddr *)&a, &sl);
    int closed_port = ntohs(a.sin_port);
    close(closed); /* nothing listens there now */
    struct err e;
    err_init(&e);
    assert_int_equal(otlp_start(100, &e), 0);
    char url[64], url2[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/logs", c.port);
    snprintf(url2, sizeof url2, "http://127.0.0.1:%d/v1/logs", closed_port);
    netguard_set(NULL, NULL); /* the default: public addresses only */
    struct otlp_target *t = otlp_target_new("dest-refused", "org-1", url, NULL);
    otlp_enqueue(t, "s1", 1, 1000, "control", "cdp_command", "{}");
    while (stat("dest-refused", "failed_attempts") == 0)
        usleep(20000);
    char e1[200], e2[200], want1[64], want2[64];
    snprintf(want1, sizeof want1, "cannot connect to 127.0.0.1:%d", c.port);
    assert_string_equal(last_error("dest-refused", e1, sizeof e1), want1);
    otlp_stop();
    netguard_set(allow_all, NULL);
    assert_int_equal(otlp_start(100, &e), 0);
    struct otlp_target *t2 = otlp_target_new("dest-closed", "org-1", url2, NULL);
    otlp_enqueue(t2, "s1", 1, 1000, "control", "cdp_command", "{}");
    while (stat("dest-closed", "failed_attempts") == 0)
        usleep(20000);
    snprintf(want2, sizeof want2, "cannot connect to 127.0.0.1:%d", closed_port);
    assert_string_equal(last_error("dest-closed", e2, sizeof e2), want2);
    pthread_mutex_lock(&c.mu);
    int got = c.requests;
    pthread_mutex_unlock(&c.mu);
    assert_int_equal(got, 0);
    otlp_stop();
    otlp_target_unref(t);
    otlp_target_unref(t2);
    collector_stop(&c);
}

/* Issue 29.7: a collector that accepts and never answers holds its own
 * destination's queue only: another destination's events are exported while
 * the hung one's first attempt has not even ended. */
static void test_hung_collector_delays_nobody(void **state)
{
    (void)state;
    int hung = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof a;
    assert_int_equal(bind(hung, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(hung, 16), 0); /* the kernel accepts; nobody answers */
    getsockname(hung, (struct sockaddr *)&a, &sl);
    struct collector c;
    collector_start(&c, 0);
    netguard_set(allow_all, NULL);
    struct err e;
    err_init(&e);
    assert_int_equal(otlp_start(1000, &e), 0);
    char url[64], url2[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/logs", ntohs(a.sin_port));
    snprintf(url2, sizeof url2, "http://127.0.0.1:%d/v1/logs", c.port);
    struct otlp_target *th = otlp_target_new("dest-hung", "org-a", url, NULL);
    struct otlp_target *tg = otlp_target_new("dest-good", "org-b", url2, NULL);
    for (int i = 1; i <= 5; i++)
        otlp_enqueue(th, "s1", (uint64_t)i, 1000 + i, "control", "cdp_command", "{}");
    while (stat("dest-hung", "queued") != 5)
        usleep(10000);
    for (int i = 1; i <= 5; i++)
        otlp_enqueue(tg, "s2", (uint64_t)i, 1000 + i, "control", "cdp_command", "{}");
    assert_int_equal(otlp_drain(tg, 60000), 0);
    assert_int_equal(stat("dest-good", "exported"), 5);
    assert_int_equal(stat("dest-hung", "failed_attempts"), 0);
    assert_int_equal(stat("dest-hung", "exported"), 0);
    otlp_stop();
    otlp_target_unref(th);
    otlp_target_unref(tg);
    close(hung);
    collector_stop(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_endpoints),
        cmocka_unit_test(test_logs_json),
        cmocka_unit_test(test_export_recovers),
        cmocka_unit_test(test_queue_bound_drops_counted),
        cmocka_unit_test(test_refused_like_unreachable),
        cmocka_unit_test(test_hung_collector_delays_nobody),
    };
    return cmocka_run_group_tests_name("telemetry/otlp", tests, NULL, NULL);
}
