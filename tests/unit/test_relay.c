/*
 * Tests for proxy/relay and proxy/cdp_client against a real headless
 * Chromium (started once for the group in its own process group and killed
 * with it). The test plays the WebSocket client on the far end of a
 * socketpair, with a wslay client context, exactly as a Playwright or
 * Puppeteer client would behind browserd's HTTP layer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <wslay/wslay.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/limits.h"
#include "core/xalloc.h"
#include "proxy/cdp_client.h"
#include "proxy/relay.h"
#include "proxy/ws.h"

#define CHROMIUM "/usr/bin/chromium"

static pid_t chrome_pid = -1;
static char chrome_dir[] = "/tmp/bd_relay_test_XXXXXX";
static char browser_url[256];

/* ---- Chromium lifecycle ----------------------------------------------- */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int start_chromium(void **state)
{
    (void)state;
    if (mkdtemp(chrome_dir) == NULL)
        return -1;
    char profile[300], logpath[300];
    snprintf(profile, sizeof(profile), "--user-data-dir=%s/profile", chrome_dir);
    snprintf(logpath, sizeof(logpath), "%s/stderr.log", chrome_dir);
    chrome_pid = fork();
    if (chrome_pid < 0)
        return -1;
    if (chrome_pid == 0) {
        setpgid(0, 0);
        /* if the test process dies without its teardown, take the browser along */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* stderr to a file: a pipe nobody drains would block Chromium later */
        int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int devnull = open("/dev/null", O_RDWR);
        if (fd < 0 || devnull < 0)
            _exit(127);
        dup2(devnull, 0);
        dup2(devnull, 1);
        dup2(fd, 2);
        execl(CHROMIUM, CHROMIUM, "--headless=new", "--no-sandbox", "--remote-debugging-port=0",
              "--remote-debugging-address=127.0.0.1", profile, "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "about:blank", (char *)NULL);
        _exit(127);
    }
    setpgid(chrome_pid, chrome_pid);
    int64_t deadline = clock_mono_us() + 30 * 1000000LL;
    while (clock_mono_us() < deadline) {
        FILE *f = fopen(logpath, "r");
        char line[1024];
        while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
            const char *p = strstr(line, "DevTools listening on ws://");
            if (p != NULL) {
                p += strlen("DevTools listening on ");
                size_t n = strcspn(p, "\r\n");
                if (n < sizeof(browser_url)) {
                    memcpy(browser_url, p, n);
                    browser_url[n] = '\0';
                    fclose(f);
                    return 0;
                }
            }
        }
        if (f != NULL)
            fclose(f);
        usleep(50000);
    }
    print_error("Chromium did not print its DevTools URL\n");
    return -1;
}

static int stop_chromium(void **state)
{
    (void)state;
    if (chrome_pid > 0) {
        kill(-chrome_pid, SIGKILL);
        while (waitpid(chrome_pid, NULL, 0) < 0 && errno == EINTR)
            ;
        /* the group's other processes are children of the browser: wait
         * until none is left so the profile folder can be removed */
        for (int i = 0; i < 100 && kill(-chrome_pid, 0) == 0; i++)
            usleep(20000);
        chrome_pid = -1;
    }
    nftw(chrome_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

/* ---- hook recorder ---------------------------------------------------- */

struct rec {
    pthread_mutex_t mu;
    int nmsg;
    char method[128];
    int null_methods;
    size_t last_len;
    int ncloses;
    char reason[64];
    int nclient_close;
    int client_fd;
};

static void rec_init(struct rec *r, int client_fd)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
    r->client_fd = client_fd;
}

static void on_msg(void *ctx, const char *method, size_t len)
{
    struct rec *r = ctx;
    pthread_mutex_lock(&r->mu);
    r->nmsg++;
    r->last_len = len;
    if (method != NULL)
        snprintf(r->method, sizeof(r->method), "%s", method);
    else
        r->null_methods++;
    pthread_mutex_unlock(&r->mu);
}

static void on_close(void *ctx, const char *reason)
{
    struct rec *r = ctx;
    pthread_mutex_lock(&r->mu);
    r->ncloses++;
    snprintf(r->reason, sizeof(r->reason), "%s", reason);
    pthread_mutex_unlock(&r->mu);
}

static void close_client(void *ctx)
{
    struct rec *r = ctx;
    pthread_mutex_lock(&r->mu);
    r->nclient_close++;
    close(r->client_fd);
    pthread_mutex_unlock(&r->mu);
}

static int rec_closes(struct rec *r)
{
    pthread_mutex_lock(&r->mu);
    int n = r->ncloses;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static int wait_closes(struct rec *r, int n, int timeout_ms)
{
    int64_t deadline = clock_mono_us() + (int64_t)timeout_ms * 1000;
    while (rec_closes(r) < n && clock_mono_us() < deadline)
        usleep(2000);
    return rec_closes(r);
}

/* ---- test WebSocket client on a socketpair ---------------------------- */

struct tc {
    int fd;
    wslay_event_context_ptr ws;
    char *msgs[16];
    size_t nmsgs;
    size_t ntext;      /* text messages received, kept or not */
    size_t text_bytes; /* their total length */
    uint64_t digest;   /* of every text message, in the order received */
    int closed;
    int close_code;
    int pongs;
};

static ssize_t tc_recv(wslay_event_context_ptr ws, uint8_t *buf, size_t len, int flags, void *u)
{
    (void)flags;
    struct tc *t = u;
    ssize_t n = recv(t->fd, buf, len, 0);
    if (n > 0)
        return n;
    wslay_event_set_error(ws, n < 0 && errno == EAGAIN ? WSLAY_ERR_WOULDBLOCK
                                                       : WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
}

static ssize_t tc_send(wslay_event_context_ptr ws, const uint8_t *data, size_t len, int flags,
                       void *u)
{
    (void)flags;
    struct tc *t = u;
    ssize_t n = send(t->fd, data, len, MSG_NOSIGNAL);
    if (n >= 0)
        return n;
    wslay_event_set_error(ws, errno == EAGAIN ? WSLAY_ERR_WOULDBLOCK : WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
}

static int tc_mask(wslay_event_context_ptr ws, uint8_t *buf, size_t len, void *u)
{
    (void)ws;
    (void)u;
    crypto_random(buf, len);
    return 0;
}

/* Folds one message into an order-sensitive digest (FNV-1a). */
static uint64_t digest_add(uint64_t d, const uint8_t *m, size_t len)
{
    d = (d ^ len) * 1099511628211u;
    for (size_t i = 0; i < len; i++)
        d = (d ^ m[i]) * 1099511628211u;
    return d;
}

static void tc_on_msg(wslay_event_context_ptr ws, const struct wslay_event_on_msg_recv_arg *a,
                      void *u)
{
    (void)ws;
    struct tc *t = u;
    if (a->opcode == WSLAY_CONNECTION_CLOSE) {
        t->closed = 1;
        t->close_code = a->status_code;
    } else if (a->opcode == WSLAY_PONG) {
        t->pongs++;
    } else if (a->opcode == WSLAY_TEXT_FRAME) {
        t->ntext++;
        t->text_bytes += a->msg_length;
        t->digest = digest_add(t->digest, a->msg, a->msg_length);
        if (t->nmsgs < 16 && a->msg_length < 65536)
            t->msgs[t->nmsgs++] = xstrndup((const char *)a->msg, a->msg_length);
    }
}

static const struct wslay_event_callbacks tc_callbacks = {
    .recv_callback = tc_recv,
    .send_callback = tc_send,
    .genmask_callback = tc_mask,
    .on_msg_recv_callback = tc_on_msg,
};

static void tc_init(struct tc *t, int fd)
{
    memset(t, 0, sizeof(*t));
    t->fd = fd;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    assert_int_equal(wslay_event_context_client_init(&t->ws, &tc_callbacks, t), 0);
}

/* A peer that plays the browser: a server context (it receives masked frames). */
static void tc_init_server(struct tc *t, int fd)
{
    memset(t, 0, sizeof(*t));
    t->fd = fd;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    assert_int_equal(wslay_event_context_server_init(&t->ws, &tc_callbacks, t), 0);
    wslay_event_config_set_max_recv_msg_length(t->ws, 4u << 20);
}

static void tc_free(struct tc *t)
{
    for (size_t i = 0; i < t->nmsgs; i++)
        xfree(t->msgs[i]);
    wslay_event_context_free(t->ws);
    if (t->fd >= 0)
        close(t->fd);
}

/* Runs I/O for up to timeout_ms or until done(t) holds. */
static void tc_run(struct tc *t, int (*done)(struct tc *), int timeout_ms)
{
    int64_t deadline = clock_mono_us() + (int64_t)timeout_ms * 1000;
    while (!done(t) && clock_mono_us() < deadline) {
        struct pollfd p = {.fd = t->fd, .events = POLLIN};
        if (wslay_event_want_write(t->ws))
            p.events |= POLLOUT;
        if (poll(&p, 1, 10) > 0) {
            if (wslay_event_recv(t->ws) != 0 || wslay_event_send(t->ws) != 0) {
                t->closed = t->closed ? t->closed : -1;
                return;
            }
        }
    }
}

static int tc_has_msg(struct tc *t)
{
    return t->nmsgs > 0 || t->closed;
}

static int tc_is_closed(struct tc *t)
{
    return t->closed != 0;
}

static int tc_has_pong(struct tc *t)
{
    return t->pongs > 0 || t->closed;
}

static int tc_flushed(struct tc *t)
{
    return !wslay_event_want_write(t->ws);
}

static void tc_send_text(struct tc *t, const char *s)
{
    struct wslay_event_msg m = {WSLAY_TEXT_FRAME, (const uint8_t *)s, strlen(s)};
    assert_int_equal(wslay_event_queue_msg(t->ws, &m), 0);
    tc_run(t, tc_flushed, 2000);
}

/* Waits for the next text message; returns it (owned by t) or fails. */
static const char *tc_next(struct tc *t, int timeout_ms)
{
    tc_run(t, tc_has_msg, timeout_ms);
    if (t->nmsgs == 0)
        fail_msg("no message from the relay (closed %d)", t->closed);
    return t->msgs[t->nmsgs - 1];
}

/* A masked client frame, written by hand (for raw bytes and client_extra). */
static size_t frame(uint8_t *out, uint8_t b0, const char *payload, size_t len)
{
    size_t n = 0;
    out[n++] = b0;
    if (len < 126) {
        out[n++] = (uint8_t)(0x80 | len);
    } else if (len < 65536) {
        out[n++] = 0x80 | 126;
        out[n++] = (uint8_t)(len >> 8);
        out[n++] = (uint8_t)len;
    } else {
        out[n++] = 0x80 | 127;
        for (int i = 0; i < 8; i++)
            out[n++] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
    }
    uint8_t mask[4] = {0x12, 0x34, 0x56, 0x78};
    memcpy(out + n, mask, 4);
    n += 4;
    for (size_t i = 0; i < len; i++)
        out[n++] = (uint8_t)payload[i] ^ mask[i % 4];
    return n;
}

/* ---- fixture: relay + one client ------------------------------------- */

struct fix {
    struct relay *r;
    struct tc tc;
    struct rec rec;
    struct relay_hooks hooks;
    int upstream_fd;
};

static void fix_attach(struct fix *f, struct relay *r, const char *extra, size_t extra_len)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    rec_init(&f->rec, sv[0]);
    tc_init(&f->tc, sv[1]);
    f->r = r;
    f->hooks = (struct relay_hooks){.on_client_message = on_msg,
                                    .on_close = on_close,
                                    .close_client = close_client,
                                    .ctx = &f->rec};
    struct err e;
    err_init(&e);
    char *left = NULL;
    size_t left_len = 0;
    int rc = ws_connect(browser_url, 5000, &f->upstream_fd, &left, &left_len, &e);
    if (rc != 0)
        fail_msg("ws_connect %s: %s", browser_url, e.message);
    rc = relay_attach(r, sv[0], extra, extra_len, f->upstream_fd, left, left_len, &f->hooks, &e);
    xfree(left);
    if (rc != 0)
        fail_msg("relay_attach: %s", e.message);
}

static struct relay *new_relay(unsigned n)
{
    struct relay *r = NULL;
    struct err e;
    err_init(&e);
    assert_int_equal(relay_start(n, &r, &e), 0);
    return r;
}

/* "relays WebSocket messages both ways": a CDP command reaches the browser,
 * its response comes back, and on_client_message saw the command's method. */
static void relay_round_trip(void **state)
{
    (void)state;
    struct relay *r = new_relay(2);
    struct fix f;
    fix_attach(&f, r, NULL, 0);
    tc_send_text(&f.tc, "{\"id\":1,\"method\":\"Browser.getVersion\"}");
    const char *resp = tc_next(&f.tc, 5000);
    assert_non_null(strstr(resp, "\"id\":1"));
    assert_non_null(strstr(resp, "\"product\""));
    assert_int_equal(f.rec.nmsg, 1);
    assert_string_equal(f.rec.method, "Browser.getVersion");
    assert_int_equal(f.rec.last_len, strlen("{\"id\":1,\"method\":\"Browser.getVersion\"}"));
    assert_int_equal(relay_count(r), 1);

    /* "Pings are answered" */
    struct wslay_event_msg ping = {WSLAY_PING, (const uint8_t *)"hi", 2};
    assert_int_equal(wslay_event_queue_msg(f.tc.ws, &ping), 0);
    tc_run(&f.tc, tc_has_pong, 2000);
    assert_int_equal(f.tc.pongs, 1);

    /* "a close from either side is propagated ... then both sockets close" */
    assert_int_equal(wslay_event_queue_close(f.tc.ws, 1000, NULL, 0), 0);
    tc_run(&f.tc, tc_is_closed, 3000);
    assert_int_equal(f.tc.close_code, 1000);
    assert_int_equal(wait_closes(&f.rec, 1, 3000), 1);
    usleep(50000);
    assert_int_equal(f.rec.ncloses, 1); /* exactly once */
    assert_int_equal(f.rec.nclient_close, 1);
    assert_string_equal(f.rec.reason, "client closed");
    assert_int_equal(relay_count(r), 0);
    errno = 0;
    assert_int_equal(fcntl(f.upstream_fd, F_GETFD), -1); /* upstream closed */
    assert_int_equal(errno, EBADF);
    relay_stop(r);
    tc_free(&f.tc);
}

static const char *refuse_load(void *ctx, const char *method, const uint8_t *msg, size_t len)
{
    (void)ctx;
    (void)msg;
    (void)len;
    return strcmp(method, "Extensions.loadUnpacked") == 0 ? "not on this plan" : NULL;
}

/* "A refused command never reaches the browser; the client gets in its place
 * the CDP error answer {id, sessionId (when the command had one), error}
 * (nothing when the command had no integer id)"; other commands pass. */
static void relay_refuse(void **state)
{
    (void)state;
    struct relay *r = new_relay(1);
    struct fix f;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    rec_init(&f.rec, sv[0]);
    tc_init(&f.tc, sv[1]);
    f.hooks = (struct relay_hooks){.on_client_message = on_msg,
                                   .on_close = on_close,
                                   .close_client = close_client,
                                   .refuse = refuse_load,
                                   .ctx = &f.rec};
    struct err e;
    err_init(&e);
    char *left = NULL;
    size_t left_len = 0;
    if (ws_connect(browser_url, 5000, &f.upstream_fd, &left, &left_len, &e) != 0)
        fail_msg("ws_connect %s: %s", browser_url, e.message);
    assert_int_equal(relay_attach(r, sv[0], NULL, 0, f.upstream_fd, left, left_len, &f.hooks, &e),
                     0);
    xfree(left);

    tc_send_text(&f.tc, "{\"id\":3,\"sessionId\":\"S1\",\"method\":\"Extensions.loadUnpacked\","
                        "\"params\":{\"path\":\"/tmp\"}}");
    const char *ans = tc_next(&f.tc, 5000);
    assert_non_null(strstr(ans, "\"id\":3"));
    assert_non_null(strstr(ans, "\"sessionId\":\"S1\""));
    assert_non_null(strstr(ans, "\"message\":\"not on this plan\""));
    assert_non_null(strstr(ans, "-32000"));
    assert_string_equal(f.rec.method, "Extensions.loadUnpacked"); /* still counted */
    /* No integer id: nothing to answer, nothing relayed; the next command passes. */
    f.tc.nmsgs--;
    xfree(f.tc.msgs[f.tc.nmsgs]);
    tc_send_text(&f.tc, "{\"id\":\"x\",\"method\":\"Extensions.loadUnpacked\"}");
    /* Over LIM_RELAY_REFUSE_PARSE_BYTES: not parsed, not relayed, no answer. */
    size_t big = LIM_RELAY_REFUSE_PARSE_BYTES + 100;
    char *pad = xmalloc(big + 100);
    int n = snprintf(pad, big + 100, "{\"id\":5,\"method\":\"Extensions.loadUnpacked\",\"p\":\"");
    memset(pad + n, 'x', big);
    memcpy(pad + n + big, "\"}", 3);
    tc_send_text(&f.tc, pad);
    xfree(pad);
    tc_send_text(&f.tc, "{\"id\":4,\"method\":\"Browser.getVersion\"}");
    const char *next = tc_next(&f.tc, 5000);
    assert_non_null(strstr(next, "\"id\":4"));
    assert_non_null(strstr(next, "\"product\""));
    assert_int_equal(f.tc.nmsgs, 1);
    relay_stop(r);
    tc_free(&f.tc);
}

/* Bytes the HTTP layer read past the client's request head are relayed
 * first ("client_extra = bytes already read after the client's request head"). */
static void relay_client_extra(void **state)
{
    (void)state;
    struct relay *r = new_relay(1);
    const char *cmd = "{\"id\":7,\"method\":\"Browser.getVersion\"}";
    uint8_t buf[256];
    size_t n = frame(buf, 0x81, cmd, strlen(cmd));
    struct fix f;
    fix_attach(&f, r, (const char *)buf, n);
    const char *resp = tc_next(&f.tc, 5000);
    assert_non_null(strstr(resp, "\"id\":7"));
    assert_string_equal(f.rec.method, "Browser.getVersion");
    relay_stop(r); /* "Closes every connection" */
    assert_int_equal(f.rec.ncloses, 1);
    assert_string_equal(f.rec.reason, "relay stopped");
    assert_int_equal(f.rec.nclient_close, 1);
    tc_free(&f.tc);
}

/* Two clients on one browser at once, interleaved, each sees its own answers. */
static void relay_two_clients(void **state)
{
    (void)state;
    struct relay *r = new_relay(2);
    struct fix a, b;
    fix_attach(&a, r, NULL, 0);
    fix_attach(&b, r, NULL, 0);
    assert_int_equal(relay_count(r), 2);
    tc_send_text(&a.tc, "{\"id\":1,\"method\":\"Browser.getVersion\"}");
    tc_send_text(&b.tc, "{\"id\":2,\"method\":\"Target.getTargets\"}");
    const char *rb = tc_next(&b.tc, 5000);
    const char *ra = tc_next(&a.tc, 5000);
    assert_non_null(strstr(ra, "\"id\":1"));
    assert_non_null(strstr(ra, "\"product\""));
    assert_non_null(strstr(rb, "\"id\":2"));
    assert_non_null(strstr(rb, "targetInfos"));
    assert_string_equal(a.rec.method, "Browser.getVersion");
    assert_string_equal(b.rec.method, "Target.getTargets");

    /* a client vanishing without a close frame ends only its own connection */
    close(a.tc.fd);
    a.tc.fd = -1;
    assert_int_equal(wait_closes(&a.rec, 1, 3000), 1);
    assert_string_equal(a.rec.reason, "client disconnected");
    tc_send_text(&b.tc, "{\"id\":3,\"method\":\"Browser.getVersion\"}");
    tc_run(&b.tc, tc_flushed, 1000);
    b.tc.nmsgs--;
    xfree(b.tc.msgs[b.tc.nmsgs]);
    assert_non_null(strstr(tc_next(&b.tc, 5000), "\"id\":3"));
    assert_int_equal(relay_count(r), 1);
    relay_stop(r);
    tc_free(&a.tc);
    tc_free(&b.tc);
}

/* relay_close_ctx: "Closes every connection whose hooks.ctx == ctx ... with
 * close code 1001. Returns how many." */
static void relay_close_by_ctx(void **state)
{
    (void)state;
    struct relay *r = new_relay(2);
    struct fix a, b;
    fix_attach(&a, r, NULL, 0);
    fix_attach(&b, r, NULL, 0);
    int other;
    assert_int_equal(relay_close_ctx(r, &other), 0);
    assert_int_equal(relay_close_ctx(r, &a.rec), 1);
    tc_run(&a.tc, tc_is_closed, 3000);
    assert_int_equal(a.tc.closed, 1);
    assert_int_equal(a.tc.close_code, 1001);
    tc_run(&a.tc, tc_flushed, 1000); /* our close reply */
    assert_int_equal(wait_closes(&a.rec, 1, 3000), 1);
    assert_string_equal(a.rec.reason, "closed by server");
    assert_int_equal(a.rec.nclient_close, 1);
    assert_int_equal(rec_closes(&b.rec), 0);
    assert_int_equal(relay_count(r), 1);
    relay_stop(r);
    assert_int_equal(b.rec.ncloses, 1);
    tc_free(&a.tc);
    tc_free(&b.tc);
}

/* "Message size cap LIM_WS_MESSAGE_BYTES ... over-cap -> close 1009": a
 * frame announcing one byte more than the cap is refused before its payload
 * is read or buffered. */
static void relay_message_over_cap(void **state)
{
    (void)state;
    struct relay *r = new_relay(1);
    struct fix f;
    fix_attach(&f, r, NULL, 0);
    uint64_t len = (uint64_t)LIM_WS_MESSAGE_BYTES + 1;
    uint8_t hdr[15] = {0x81, 0x80 | 127}; /* + mask key + one payload byte: wslay looks at a
                                             frame once some payload has arrived */
    for (int i = 0; i < 8; i++)
        hdr[2 + i] = (uint8_t)(len >> (56 - 8 * i));
    assert_int_equal(send(f.tc.fd, hdr, sizeof(hdr), MSG_NOSIGNAL), (ssize_t)sizeof(hdr));
    tc_run(&f.tc, tc_is_closed, 3000);
    assert_int_equal(f.tc.closed, 1);
    assert_int_equal(f.tc.close_code, 1009);
    close(f.tc.fd);
    f.tc.fd = -1;
    assert_int_equal(wait_closes(&f.rec, 1, 5000), 1);
    assert_string_equal(f.rec.reason, "message too big");
    assert_int_equal(f.rec.nmsg, 0);
    relay_stop(r);
    tc_free(&f.tc);
}

/* "fragment cap LIM_WS_FRAGMENTS ... over-cap -> close 1009" */
static void relay_fragments_over_cap(void **state)
{
    (void)state;
    struct relay *r = new_relay(1);
    struct fix f;
    fix_attach(&f, r, NULL, 0);
    size_t nframes = LIM_WS_FRAGMENTS + 1;
    uint8_t *buf = xmalloc(nframes * 8);
    size_t n = 0;
    for (size_t i = 0; i < nframes; i++)
        n += frame(buf + n, i == 0 ? 0x01 : 0x00, "x", 1); /* never FIN */
    size_t off = 0;
    while (off < n) {
        ssize_t w = send(f.tc.fd, buf + off, n - off, MSG_NOSIGNAL);
        if (w > 0)
            off += (size_t)w;
        else if (w < 0 && errno == EAGAIN)
            usleep(1000);
        else
            break;
    }
    xfree(buf);
    tc_run(&f.tc, tc_is_closed, 3000);
    assert_int_equal(f.tc.closed, 1);
    assert_int_equal(f.tc.close_code, 1009);
    assert_int_equal(f.rec.nmsg, 0);
    relay_stop(r);
    tc_free(&f.tc);
}

/* A message exactly at the fragment cap still goes through. */
static void relay_fragments_at_cap(void **state)
{
    (void)state;
    struct relay *r = new_relay(1);
    struct fix f;
    fix_attach(&f, r, NULL, 0);
    const char *cmd = "{\"id\":9,\"method\":\"Browser.getVersion\"}";
    size_t clen = strlen(cmd);
    size_t nframes = 8;
    uint8_t buf[512];
    size_t n = 0;
    for (size_t i = 0; i < nframes; i++) {
        size_t a = clen * i / nframes, b = clen * (i + 1) / nframes;
        uint8_t b0 = (uint8_t)((i == 0 ? 0x01 : 0x00) | (i == nframes - 1 ? 0x80 : 0));
        n += frame(buf + n, b0, cmd + a, b - a);
    }
    assert_int_equal(send(f.tc.fd, buf, n, MSG_NOSIGNAL), (ssize_t)n);
    assert_non_null(strstr(tc_next(&f.tc, 5000), "\"id\":9"));
    assert_string_equal(f.rec.method, "Browser.getVersion");
    relay_stop(r);
    tc_free(&f.tc);
}

/* "Backpressure: when one side's outgoing queue exceeds a bound (e.g. 8 MiB),
 * stop reading from the other side until it drains." The upstream here is a
 * socketpair the test does not read at first: the client must get stuck
 * well before all its bytes are written, and every message must arrive
 * intact once the upstream drains. */
static void relay_backpressure(void **state)
{
    (void)state;
    enum { MSGS = 32, MSG_BYTES = 1 << 20 };
    struct relay *r = new_relay(1);
    int csv[2], usv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, csv), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, usv), 0);
    struct rec rec;
    rec_init(&rec, csv[0]);
    struct relay_hooks hooks = {.on_client_message = on_msg,
                                .on_close = on_close,
                                .close_client = close_client,
                                .ctx = &rec};
    struct err e;
    err_init(&e);
    assert_int_equal(relay_attach(r, csv[0], NULL, 0, usv[0], NULL, 0, &hooks, &e), 0);
    struct tc up;
    tc_init_server(&up, usv[1]);
    int cfd = csv[1];
    fcntl(cfd, F_SETFL, fcntl(cfd, F_GETFL) | O_NONBLOCK);

    char *payload = xmalloc(MSG_BYTES);
    memset(payload, 'a', MSG_BYTES);
    uint8_t *wire = xmalloc(MSG_BYTES + 16);
    size_t flen = frame(wire, 0x81, payload, MSG_BYTES);
    xfree(payload);
    size_t total = flen * MSGS, sent = 0;

    /* phase 1: nobody reads the upstream */
    int64_t idle_since = clock_mono_us();
    while (sent < total && clock_mono_us() - idle_since < 500000) {
        ssize_t w = send(cfd, wire + sent % flen, flen - sent % flen, MSG_NOSIGNAL);
        if (w > 0) {
            sent += (size_t)w;
            idle_since = clock_mono_us();
        } else {
            usleep(1000);
        }
    }
    if (sent >= total || sent > (size_t)RELAY_QUEUE_HIGH + 6 * flen)
        fail_msg("client wrote %zu of %zu bytes with a stalled upstream", sent, total);
    if (sent < (size_t)RELAY_QUEUE_HIGH)
        fail_msg("client got stuck after only %zu bytes", sent);

    /* phase 2: the upstream drains; everything flows again */
    int64_t deadline = clock_mono_us() + 20 * 1000000LL;
    while ((up.ntext < MSGS || sent < total) && clock_mono_us() < deadline) {
        if (sent < total) {
            ssize_t w = send(cfd, wire + sent % flen, flen - sent % flen, MSG_NOSIGNAL);
            if (w > 0)
                sent += (size_t)w;
        }
        struct pollfd p = {.fd = up.fd, .events = POLLIN};
        if (poll(&p, 1, 1) > 0)
            assert_int_equal(wslay_event_recv(up.ws), 0);
    }
    assert_int_equal(up.ntext, MSGS);
    assert_int_equal(up.text_bytes, (size_t)MSGS * MSG_BYTES);
    assert_int_equal(rec.nmsg, MSGS);
    assert_int_equal(rec.null_methods, MSGS); /* not CDP: no method */
    xfree(wire);
    relay_stop(r);
    assert_int_equal(rec.ncloses, 1);
    close(cfd);
    tc_free(&up);
}

/* Runs both test peers until each has received want text messages. */
static void run_pair(struct tc *a, struct tc *b, size_t want_a, size_t want_b, int timeout_ms)
{
    int64_t deadline = clock_mono_us() + (int64_t)timeout_ms * 1000;
    while ((a->ntext < want_a || b->ntext < want_b || wslay_event_want_write(a->ws) ||
            wslay_event_want_write(b->ws)) &&
           clock_mono_us() < deadline) {
        struct pollfd p[2] = {{.fd = a->fd, .events = POLLIN}, {.fd = b->fd, .events = POLLIN}};
        struct tc *t[2] = {a, b};
        for (int i = 0; i < 2; i++)
            if (wslay_event_want_write(t[i]->ws))
                p[i].events |= POLLOUT;
        if (poll(p, 2, 10) <= 0)
            continue;
        for (int i = 0; i < 2; i++)
            if (p[i].revents)
                assert_int_equal(wslay_event_recv(t[i]->ws) | wslay_event_send(t[i]->ws), 0);
    }
}

/* The relay reads and writes in batches (one recv, one send per wakeup;
 * frames gathered into a 64 KiB buffer, bigger ones sent behind it): every
 * message of a pipelined burst arrives intact and in order, both ways,
 * whatever its size relative to the buffers (small runs, the 4 KiB and
 * 64 KiB edges, 1 MiB). */
static void relay_pipelined_burst_in_order(void **state)
{
    (void)state;
    static const size_t edges[] = {1,     125,   126,   4095,  4096,    4097,   65521,
                                   65535, 65536, 65537, 70000, 1 << 20, 131071, 3};
    enum { SMALL = 3000 };
    size_t n = SMALL + 2 * (sizeof edges / sizeof edges[0]);
    struct relay *r = new_relay(1);
    int csv[2], usv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, csv), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, usv), 0);
    struct rec rec;
    rec_init(&rec, csv[0]);
    struct relay_hooks hooks = {.on_client_message = on_msg,
                                .on_close = on_close,
                                .close_client = close_client,
                                .ctx = &rec};
    struct err e;
    err_init(&e);
    assert_int_equal(relay_attach(r, csv[0], NULL, 0, usv[0], NULL, 0, &hooks, &e), 0);
    struct tc cl, up;
    tc_init(&cl, csv[1]);
    tc_init_server(&up, usv[1]);

    /* Each message is its index then filler: edges, many small ones, edges. */
    char *buf = xmalloc((1 << 20) + 1);
    uint64_t want = 0;
    size_t bytes = 0;
    for (int dir = 0; dir < 2; dir++) {
        struct tc *from = dir == 0 ? &cl : &up;
        for (size_t i = 0; i < n; i++) {
            size_t k = i < SMALL ? SIZE_MAX : i - SMALL;
            size_t len = k == SIZE_MAX ? 20 + i % 40 : edges[k % (sizeof edges / sizeof edges[0])];
            memset(buf, 'a' + (char)(i % 26), len);
            snprintf(buf, len + 1, "%zu:", i); /* truncated to len when longer */
            struct wslay_event_msg m = {WSLAY_TEXT_FRAME, (const uint8_t *)buf, len};
            assert_int_equal(wslay_event_queue_msg(from->ws, &m), 0);
            if (dir == 0) {
                want = digest_add(want, (const uint8_t *)buf, len);
                bytes += len;
            }
        }
    }
    xfree(buf);
    run_pair(&cl, &up, n, n, 20000);
    assert_int_equal(up.ntext, n);
    assert_int_equal(up.text_bytes, bytes);
    assert_true(up.digest == want);
    assert_int_equal(cl.ntext, n);
    assert_int_equal(cl.text_bytes, bytes);
    assert_true(cl.digest == want);
    assert_int_equal(rec.nmsg, n);
    relay_stop(r);
    tc_free(&cl);
    tc_free(&up);
}

/* relay_start: "a small fixed number of epoll threads": 1..64. */
static void relay_start_rejects_bad_threads(void **state)
{
    (void)state;
    struct relay *r = NULL;
    struct err e;
    err_init(&e);
    assert_int_equal(relay_start(0, &r, &e), E_INVALID);
    assert_int_equal(relay_start(1000, &r, &e), E_INVALID);
}

/* cdp_client: Target.getTargets returns a page; Target.createTarget works;
 * a CDP error comes back as E_INTERNAL with its message. */
static void cdp_client_commands(void **state)
{
    (void)state;
    struct cdp_client *c = NULL;
    struct err e;
    err_init(&e);
    if (cdp_client_open(browser_url, 5000, &c, &e) != 0)
        fail_msg("cdp_client_open: %s", e.message);
    json_t *res = NULL;
    if (cdp_client_call(c, NULL, "Target.getTargets", NULL, 1, 5000, &res, &e) != 0)
        fail_msg("Target.getTargets: %s", e.message);
    json_t *infos = json_object_get(res, "targetInfos");
    assert_true(json_is_array(infos));
    int pages = 0;
    for (size_t i = 0; i < json_array_size(infos); i++) {
        const char *type = json_string_value(json_object_get(json_array_get(infos, i), "type"));
        if (type != NULL && strcmp(type, "page") == 0)
            pages++;
    }
    assert_true(pages >= 1);
    json_decref(res);

    json_t *params = json_pack("{s:s}", "url", "about:blank");
    res = NULL;
    if (cdp_client_call(c, NULL, "Target.createTarget", params, 1, 5000, &res, &e) != 0)
        fail_msg("Target.createTarget: %s", e.message);
    json_decref(params);
    const char *tid = json_string_value(json_object_get(res, "targetId"));
    assert_non_null(tid);
    assert_true(strlen(tid) > 0);
    json_decref(res);

    /* fire and forget, then a waited call skips the earlier response */
    assert_int_equal(cdp_client_call(c, NULL, "Browser.getVersion", NULL, 0, 5000, NULL, &e), 0);
    res = NULL;
    assert_int_equal(cdp_client_call(c, NULL, "Target.getTargets", NULL, 1, 5000, &res, &e), 0);
    assert_non_null(json_object_get(res, "targetInfos"));
    json_decref(res);

    err_init(&e);
    res = NULL;
    assert_int_equal(cdp_client_call(c, NULL, "No.suchMethod", NULL, 1, 5000, &res, &e),
                     E_INTERNAL);
    assert_null(res);
    assert_non_null(strstr(e.message, "No.suchMethod"));
    cdp_client_close(c);
    cdp_client_close(NULL);
}

/* ws_connect: a refused port is E_UNAVAIL and leaves nothing open. */
static void connect_refused_port(void **state)
{
    (void)state;
    struct err e;
    err_init(&e);
    int fd = -1;
    char *left = NULL;
    size_t left_len = 0;
    assert_int_equal(
        ws_connect("ws://127.0.0.1:1/devtools/browser/x", 1000, &fd, &left, &left_len, &e),
        E_UNAVAIL);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(relay_round_trip),
        cmocka_unit_test(relay_refuse),
        cmocka_unit_test(relay_client_extra),
        cmocka_unit_test(relay_two_clients),
        cmocka_unit_test(relay_close_by_ctx),
        cmocka_unit_test(relay_message_over_cap),
        cmocka_unit_test(relay_fragments_over_cap),
        cmocka_unit_test(relay_fragments_at_cap),
        cmocka_unit_test(relay_backpressure),
        cmocka_unit_test(relay_pipelined_burst_in_order),
        cmocka_unit_test(relay_start_rejects_bad_threads),
        cmocka_unit_test(cdp_client_commands),
        cmocka_unit_test(connect_refused_port),
    };
    return cmocka_run_group_tests_name("proxy/relay", tests, start_chromium, stop_chromium);
}
