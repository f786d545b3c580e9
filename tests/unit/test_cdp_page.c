/* Unit tests for proxy/cdp_page against a fake browser: a DevTools WebSocket
 * on 127.0.0.1 that answers each CDP method from a table and records what it
 * was sent. */
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

#include "core/fdio.h"
#include "core/jsonx.h"
#include "core/xalloc.h"
#include "proxy/cdp_page.h"
#include "proxy/ws.h"

/* ---- the fake browser ---- */

struct fake {
    int lfd;
    char url[64];
    json_t *answers; /* method -> result, or {"error": message} */
    json_t *seen;    /* [{method, params?, sessionId?}] in arrival order */
    pthread_t th;
};

static int read_exact(int fd, void *b, size_t n)
{
    size_t got = 0;
    return fdio_read_all(fd, b, n, &got, FDIO_NO_DEADLINE) == 0 && got == n ? 0 : -1;
}

/* One client frame (masked); its payload (owned, NUL-terminated) into *out.
 * The opcode, or -1 when the connection ended. */
static int read_frame(int fd, char **out)
{
    unsigned char h[2], ext[8], mask[4] = {0};
    if (read_exact(fd, h, 2) != 0)
        return -1;
    uint64_t len = h[1] & 0x7f;
    if (len == 126 || len == 127) {
        size_t n = len == 126 ? 2 : 8;
        if (read_exact(fd, ext, n) != 0)
            return -1;
        len = 0;
        for (size_t i = 0; i < n; i++)
            len = len << 8 | ext[i];
    }
    if ((h[1] & 0x80) && read_exact(fd, mask, 4) != 0)
        return -1;
    char *p = xmalloc((size_t)len + 1);
    if (read_exact(fd, p, (size_t)len) != 0) {
        xfree(p);
        return -1;
    }
    for (uint64_t i = 0; i < len; i++)
        p[i] ^= (char)mask[i % 4];
    p[len] = '\0';
    *out = p;
    return h[0] & 0x0f;
}

/* A server frame (unmasked) of text. Runs in the fake's thread: no cmocka
 * assertion here, a failed write shows as the client's error. */
static void send_text(int fd, const char *text)
{
    size_t n = strlen(text), h = 2;
    unsigned char head[10] = {0x81};
    if (n < 126) {
        head[1] = (unsigned char)n;
    } else {
        head[1] = 126;
        head[2] = (unsigned char)(n >> 8);
        head[3] = (unsigned char)n;
        h = 4;
    }
    if (fdio_write_all(fd, head, h, FDIO_NO_DEADLINE) == 0)
        (void)!fdio_write_all(fd, text, n, FDIO_NO_DEADLINE);
}

static void *fake_run(void *arg)
{
    struct fake *f = arg;
    int fd = accept(f->lfd, NULL, NULL);
    if (fd < 0)
        return NULL;
    char head[4096] = "";
    size_t used = 0;
    while (used < sizeof head - 1 && !strstr(head, "\r\n\r\n")) {
        ssize_t r = read(fd, head + used, sizeof head - 1 - used);
        if (r <= 0)
            break;
        used += (size_t)r;
        head[used] = '\0';
    }
    const char *k = strstr(head, "Sec-WebSocket-Key: ");
    char key[WS_KEY_LEN + 1] = "", acc[29] = "";
    if (k)
        snprintf(key, sizeof key, "%s", k + strlen("Sec-WebSocket-Key: "));
    if (ws_accept_key(key, acc) != 0) {
        close(fd);
        return NULL;
    }
    char resp[256];
    int n = snprintf(resp, sizeof resp,
                     "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
                     acc);
    if (fdio_write_all(fd, resp, (size_t)n, FDIO_NO_DEADLINE) != 0) {
        close(fd);
        return NULL;
    }
    char *msg = NULL;
    int op;
    while ((op = read_frame(fd, &msg)) > 0 && op != 8) {
        json_t *req = json_loads(msg, 0, NULL);
        xfree(msg);
        msg = NULL;
        const char *method = json_string_value(json_object_get(req, "method"));
        json_t *rec = json_pack("{s:s}", "method", method ? method : "");
        if (json_object_get(req, "params"))
            json_object_set(rec, "params", json_object_get(req, "params"));
        if (json_object_get(req, "sessionId"))
            json_object_set(rec, "sessionId", json_object_get(req, "sessionId"));
        json_array_append_new(f->seen, rec);
        json_t *ans = json_object_get(f->answers, method ? method : "");
        json_t *reply = json_pack("{s:O}", "id", json_object_get(req, "id"));
        if (json_object_get(ans, "error"))
            json_object_set_new(
                reply, "error",
                json_pack("{s:i,s:O}", "code", -32000, "message", json_object_get(ans, "error")));
        else
            json_object_set_new(reply, "result", ans ? json_incref(ans) : json_object());
        char *text = jsonx_dump(reply);
        send_text(fd, text);
        xfree(text);
        json_decref(reply);
        json_decref(req);
    }
    xfree(msg);
    close(fd);
    return NULL;
}

/* Starts a fake browser answering from answers (JSON text). */
static void fake_start(struct fake *f, const char *answers)
{
    memset(f, 0, sizeof *f);
    f->answers = json_loads(answers, 0, NULL);
    assert_non_null(f->answers);
    f->seen = json_array();
    f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(f->lfd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    assert_int_equal(bind(f->lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(f->lfd, 1), 0);
    assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&a, &al), 0);
    snprintf(f->url, sizeof f->url, "ws://127.0.0.1:%d/devtools/browser/fake", ntohs(a.sin_port));
    assert_int_equal(pthread_create(&f->th, NULL, fake_run, f), 0);
}

/* Waits for the fake to see its client leave; the requests stay in f->seen. */
static void fake_join(struct fake *f)
{
    pthread_join(f->th, NULL);
    close(f->lfd);
    json_decref(f->answers);
}

/* ---- the steps, one case per rule ---- */

enum step { FIRST, ATTACH, CREATE, CREATE_HIDDEN, ATTACH_FIRST, LIST };

#define PAGES_AND_OTHERS                                                                           \
    "{\"Target.getTargets\":{\"targetInfos\":["                                                    \
    "{\"type\":\"browser\",\"targetId\":\"B\"},{\"type\":\"service_worker\",\"targetId\":\"W\"},"  \
    "{\"type\":\"page\",\"targetId\":\"P1\"},{\"type\":\"page\",\"targetId\":\"P2\"}]},"           \
    "\"Target.attachToTarget\":{\"sessionId\":\"S1\"}}"

struct scase {
    const char *rule;
    enum step step;
    const char *answers;
    int rc;
    const char *out;      /* the id written, when rc == 0; for LIST the ids joined by ',' */
    const char *requests; /* what the browser was sent, in order */
};

static const struct scase cases[] = {
    {"first: the first page in the browser's order, past the browser and workers", FIRST,
     PAGES_AND_OTHERS, 0, "P1", "[{\"method\":\"Target.getTargets\"}]"},
    {"first: a page without a targetId is passed over", FIRST,
     "{\"Target.getTargets\":{\"targetInfos\":[{\"type\":\"page\"},"
     "{\"type\":\"page\",\"targetId\":\"P2\"}]}}",
     0, "P2", "[{\"method\":\"Target.getTargets\"}]"},
    {"first: no page yet is E_NOTFOUND (callers wait, or answer no_page)", FIRST,
     "{\"Target.getTargets\":{\"targetInfos\":[{\"type\":\"browser\",\"targetId\":\"B\"}]}}",
     E_NOTFOUND, NULL, "[{\"method\":\"Target.getTargets\"}]"},
    {"first: an answer without targetInfos is no page", FIRST, "{}", E_NOTFOUND, NULL,
     "[{\"method\":\"Target.getTargets\"}]"},
    {"first: a CDP error is the call's E_INTERNAL", FIRST,
     "{\"Target.getTargets\":{\"error\":\"Not allowed\"}}", E_INTERNAL, NULL,
     "[{\"method\":\"Target.getTargets\"}]"},
    {"attach: a flat session (flatten: true) and its sessionId", ATTACH, PAGES_AND_OTHERS, 0, "S1",
     "[{\"method\":\"Target.attachToTarget\",\"params\":{\"targetId\":\"T9\",\"flatten\":true}}]"},
    {"attach: an answer without a sessionId is E_INTERNAL", ATTACH, "{}", E_INTERNAL, NULL,
     "[{\"method\":\"Target.attachToTarget\",\"params\":{\"targetId\":\"T9\",\"flatten\":true}}]"},
    {"attach: a CDP error is E_INTERNAL", ATTACH,
     "{\"Target.attachToTarget\":{\"error\":\"No target with given id found\"}}", E_INTERNAL, NULL,
     "[{\"method\":\"Target.attachToTarget\",\"params\":{\"targetId\":\"T9\",\"flatten\":true}}]"},
    {"create: a page at the url, its targetId", CREATE,
     "{\"Target.createTarget\":{\"targetId\":\"N1\"}}", 0, "N1",
     "[{\"method\":\"Target.createTarget\",\"params\":{\"url\":\"about:blank\"}}]"},
    {"create: hidden asks for a hidden page", CREATE_HIDDEN,
     "{\"Target.createTarget\":{\"targetId\":\"N2\"}}", 0, "N2",
     "[{\"method\":\"Target.createTarget\",\"params\":{\"url\":\"about:blank\",\"hidden\":true}}]"},
    {"create: an answer without a targetId is E_INTERNAL", CREATE, "{}", E_INTERNAL, NULL,
     "[{\"method\":\"Target.createTarget\",\"params\":{\"url\":\"about:blank\"}}]"},
    {"attach_first: the session of the first page", ATTACH_FIRST, PAGES_AND_OTHERS, 0, "S1",
     "[{\"method\":\"Target.getTargets\"},{\"method\":\"Target.attachToTarget\","
     "\"params\":{\"targetId\":\"P1\",\"flatten\":true}}]"},
    {"attach_first: no page is E_NOTFOUND and attaches to nothing", ATTACH_FIRST,
     "{\"Target.getTargets\":{\"targetInfos\":[]}}", E_NOTFOUND, NULL,
     "[{\"method\":\"Target.getTargets\"}]"},
    {"list: the pages only, in the browser's order", LIST, PAGES_AND_OTHERS, 0, "P1,P2",
     "[{\"method\":\"Target.getTargets\"}]"},
};

static int run_step(struct cdp_client *c, enum step s, char *out, size_t cap, struct err *e)
{
    switch (s) {
    case FIRST:
        return cdp_page_first(c, 5000, out, cap, e);
    case ATTACH:
        return cdp_page_attach(c, "T9", 5000, out, cap, e);
    case CREATE:
        return cdp_page_create(c, "about:blank", 0, 5000, out, cap, e);
    case CREATE_HIDDEN:
        return cdp_page_create(c, "about:blank", 1, 5000, out, cap, e);
    case ATTACH_FIRST:
        return cdp_page_attach_first(c, 5000, out, cap, e);
    case LIST: {
        json_t *pages = NULL;
        int rc = cdp_page_list(c, 5000, &pages, e);
        out[0] = '\0';
        size_t i;
        json_t *t;
        json_array_foreach(pages, i, t)
        {
            size_t l = strlen(out);
            snprintf(out + l, cap - l, "%s%s", i ? "," : "",
                     json_string_value(json_object_get(t, "targetId")));
        }
        json_decref(pages);
        return rc;
    }
    }
    return -1;
}

static void steps_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const struct scase *c = &cases[i];
        struct fake f;
        fake_start(&f, c->answers);
        struct cdp_client *cc = NULL;
        struct err e;
        err_init(&e);
        if (cdp_client_open(f.url, 5000, &cc, &e) != 0)
            fail_msg("%s: cdp_client_open: %s", c->rule, e.message);
        char out[128] = "unset";
        int rc = run_step(cc, c->step, out, sizeof out, &e);
        cdp_client_close(cc);
        fake_join(&f);
        if (rc != c->rc)
            fail_msg("%s: rc %d (%s), want %d", c->rule, rc, e.message, c->rc);
        if (rc == 0 && strcmp(out, c->out) != 0)
            fail_msg("%s: '%s', want '%s'", c->rule, out, c->out);
        json_t *want = json_loads(c->requests, 0, NULL);
        assert_non_null(want);
        if (!json_equal(want, f.seen)) {
            char *got = jsonx_dump(f.seen);
            fail_msg("%s: sent %s, want %s", c->rule, got, c->requests);
        }
        json_decref(want);
        json_decref(f.seen);
    }
}

/* The navigation an update or a pool lease asks for: the first page's
 * session, then Page.navigate in it (not waited for). */
static void navigate_first_sends_the_url_to_the_first_page(void **state)
{
    (void)state;
    struct fake f;
    fake_start(&f, PAGES_AND_OTHERS);
    cdp_page_navigate_first(f.url, "https://example.test/a", 5000);
    fake_join(&f);
    json_t *want = json_loads(
        "[{\"method\":\"Target.getTargets\"},{\"method\":\"Target.attachToTarget\","
        "\"params\":{\"targetId\":\"P1\",\"flatten\":true}},{\"method\":\"Page.navigate\","
        "\"params\":{\"url\":\"https://example.test/a\"},\"sessionId\":\"S1\"}]",
        0, NULL);
    assert_non_null(want);
    if (!json_equal(want, f.seen))
        fail_msg("sent %s", jsonx_dump(f.seen));
    json_decref(want);
    json_decref(f.seen);
}

/* No page: nothing is navigated, and the failure is dropped (best effort). */
static void navigate_first_without_a_page_navigates_nothing(void **state)
{
    (void)state;
    struct fake f;
    fake_start(&f, "{\"Target.getTargets\":{\"targetInfos\":[]}}");
    cdp_page_navigate_first(f.url, "https://example.test/a", 5000);
    fake_join(&f);
    assert_int_equal(json_array_size(f.seen), 1);
    json_decref(f.seen);
}

/* The end of a page of one's own (bcurl, brender): Target.closeTarget on
 * the browser's connection (no session), then the connection closed (the
 * fake sees its client leave); a CDP error is dropped; no target ("")
 * sends nothing. */
static void close_with_closes_the_target_then_the_connection(void **state)
{
    (void)state;
    static const char *const answers[] = {"{}", "{\"Target.closeTarget\":{\"error\":\"gone\"}}"};
    for (size_t i = 0; i < 2; i++) {
        struct fake f;
        fake_start(&f, answers[i]);
        struct cdp_client *cc = NULL;
        struct err e;
        err_init(&e);
        if (cdp_client_open(f.url, 5000, &cc, &e) != 0)
            fail_msg("cdp_client_open: %s", e.message);
        cdp_page_close_with(cc, "T7", 5000);
        fake_join(&f);
        json_t *want = json_loads(
            "[{\"method\":\"Target.closeTarget\",\"params\":{\"targetId\":\"T7\"}}]", 0, NULL);
        assert_non_null(want);
        if (!json_equal(want, f.seen))
            fail_msg("answers %s: sent %s", answers[i], jsonx_dump(f.seen));
        json_decref(want);
        json_decref(f.seen);
    }
    struct fake f;
    fake_start(&f, "{}");
    struct cdp_client *cc = NULL;
    struct err e;
    err_init(&e);
    if (cdp_client_open(f.url, 5000, &cc, &e) != 0)
        fail_msg("cdp_client_open: %s", e.message);
    cdp_page_close_with(cc, "", 5000);
    fake_join(&f);
    assert_int_equal(json_array_size(f.seen), 0);
    json_decref(f.seen);
    cdp_page_close_with(NULL, "", 5000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(steps_table),
        cmocka_unit_test(navigate_first_sends_the_url_to_the_first_page),
        cmocka_unit_test(navigate_first_without_a_page_navigates_nothing),
        cmocka_unit_test(close_with_closes_the_target_then_the_connection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
