/* The opening exchange of a BiDi client connection; proxy/bidiopen.h. */
#include "proxy/bidiopen.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "core/clock.h"
#include "core/fdio.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/xalloc.h"

/* A first message larger than this is relayed untouched. */
#define FIRST_MESSAGE_MAX LIM_BIDI_FIRST_MESSAGE_BYTES

struct bidiopen {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int opening; /* connections in their opening exchange (threads) */
    int stopping;
};

/* One connection in its opening exchange. */
struct opening {
    struct bidiopen *o;
    int client_fd;
    char session_id[64];
    json_t *answer; /* borrowed from the caller until a hook runs */
    char *extra;    /* client bytes after its request head, then of the first message */
    size_t extra_len;
    struct bidiopen_hooks hooks;
};

struct bidiopen *bidiopen_new(void)
{
    struct bidiopen *o = xcalloc(1, sizeof *o);
    pthread_mutex_init(&o->lock, NULL);
    pthread_cond_init(&o->cond, NULL);
    return o;
}

void bidiopen_free(struct bidiopen *o)
{
    if (!o)
        return;
    pthread_cond_destroy(&o->cond);
    pthread_mutex_destroy(&o->lock);
    xfree(o);
}

/* Parses the first client frame (masked). Returns 1 when more bytes are
 * needed, 0 with *frame_len and the unmasked payload in *payload (owned) when
 * it is a complete unfragmented text frame, -1 when it is anything else
 * (relayed untouched). */
static int first_frame(const char *buf, size_t len, size_t *frame_len, char **payload,
                       size_t *payload_len)
{
    const unsigned char *b = (const unsigned char *)buf;
    if (len < 2)
        return 1;
    if (b[0] != 0x81 || !(b[1] & 0x80)) /* FIN + text, no RSV; clients must mask */
        return -1;
    size_t n = b[1] & 0x7f, at = 2;
    if (n == 126) {
        if (len < 4)
            return 1;
        n = (size_t)b[2] << 8 | b[3];
        at = 4;
    } else if (n == 127) {
        if (len < 10)
            return 1;
        unsigned long long v = 0;
        for (int i = 2; i < 10; i++)
            v = v << 8 | b[i];
        if (v > FIRST_MESSAGE_MAX)
            return -1;
        n = (size_t)v;
        at = 10;
    }
    if (n > FIRST_MESSAGE_MAX)
        return -1;
    if (len < at + 4 + n)
        return 1;
    const unsigned char *mask = b + at;
    char *p = xmalloc(n + 1);
    for (size_t i = 0; i < n; i++)
        p[i] = (char)(b[at + 4 + i] ^ mask[i % 4]);
    p[n] = '\0';
    *payload = p;
    *payload_len = n;
    *frame_len = at + 4 + n;
    return 0;
}

/* Writes all of buf to the client socket, within 5 s. 0 or -1. */
static int send_all(int fd, const char *buf, size_t len)
{
    return fdio_write_all(fd, buf, len, clock_mono_ms() + 5000) == 0 ? 0 : -1;
}

/* A server text frame (unmasked) carrying text. */
static int send_text(int fd, const char *text)
{
    size_t n = strlen(text), h = 2;
    char *f = xmalloc(n + 10);
    f[0] = (char)0x81;
    if (n < 126) {
        f[1] = (char)n;
    } else if (n <= 0xffff) {
        f[1] = 126;
        f[2] = (char)(n >> 8);
        f[3] = (char)n;
        h = 4;
    } else {
        f[1] = 127;
        for (int i = 0; i < 8; i++)
            f[2 + i] = (char)((unsigned long long)n >> (56 - 8 * i));
        h = 10;
    }
    memcpy(f + h, text, n);
    int rc = send_all(fd, f, h + n);
    xfree(f);
    return rc;
}

/* If the message is {"id":N,"method":"session.new",...}, answers it with the
 * driver's session and returns 1; if it is a session.status, answers that
 * (ready: session.new will give the session) and returns 2; 0 when it is
 * something else, -1 when the answer could not be sent. */
static int answer_opening(struct opening *c, const char *msg, size_t len, int status_ok)
{
    json_t *m = json_loadb(msg, len, JSON_REJECT_DUPLICATES, NULL);
    json_t *id = json_object_get(m, "id");
    const char *method = json_string_value(json_object_get(m, "method"));
    int kind = !json_is_integer(id) || !method                      ? 0
               : strcmp(method, "session.new") == 0                 ? 1
               : status_ok && strcmp(method, "session.status") == 0 ? 2
                                                                    : 0;
    if (kind == 0) {
        json_decref(m);
        return 0;
    }
    json_t *result = kind == 1 ? json_incref(c->answer)
                               : json_pack("{s:b,s:s}", "ready", 1, "message",
                                           "session.new gives the session's WebDriver session");
    json_t *reply = json_pack("{s:s,s:O,s:o}", "type", "success", "id", id, "result", result);
    char *text = json_dumps(reply, JSON_COMPACT);
    int rc = send_text(c->client_fd, text);
    xfree(text);
    json_decref(reply);
    json_decref(m);
    log_debug("session %s: answered the client's %s", c->session_id,
              kind == 1 ? "session.new" : "session.status");
    return rc == 0 ? kind : -1;
}

/* The opening exchange: waits for the client's first message; a session.new
 * is answered here (the driver's session already exists and the driver would
 * refuse a second one), anything else goes to the driver as sent. Clients
 * that probe with session.status before session.new (Puppeteer's
 * protocol: 'webDriverBiDi' tells a BiDi endpoint from a CDP one so) get
 * their answer here too, at most LIM_BIDI_OPENING_STATUS times, and the wait
 * goes on for the session.new. */
static void *opening_main(void *arg)
{
    struct opening *c = arg;
    struct bidiopen *o = c->o;
    int64_t deadline = clock_mono_us() / 1000 + BIDIOPEN_FIRST_MESSAGE_WAIT_MS;
    size_t frame_len = 0, plen = 0;
    char *payload = NULL;
    int r;
    int gone = 0, failed = 0, statuses = 0;
    for (;;) {
        while ((r = first_frame(c->extra, c->extra_len, &frame_len, &payload, &plen)) == 1) {
            pthread_mutex_lock(&o->lock);
            int stop = o->stopping;
            pthread_mutex_unlock(&o->lock);
            if (stop || clock_mono_us() / 1000 >= deadline) {
                gone = stop;
                break;
            }
            struct pollfd p = {.fd = c->client_fd, .events = POLLIN};
            if (poll(&p, 1, 200) <= 0)
                continue;
            char buf[16384];
            ssize_t n = recv(c->client_fd, buf, sizeof buf, MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
                gone = 1;
                break;
            }
            if (n > 0) {
                int over = c->extra_len + (size_t)n > FIRST_MESSAGE_MAX + 64;
                c->extra = xrealloc(c->extra, c->extra_len + (size_t)n);
                memcpy(c->extra + c->extra_len, buf, (size_t)n);
                c->extra_len += (size_t)n;
                if (over) {
                    r = -1;
                    break;
                }
            }
        }
        if (gone || r != 0)
            break;
        int a = answer_opening(c, payload, plen, statuses < LIM_BIDI_OPENING_STATUS);
        xfree(payload);
        payload = NULL;
        if (a < 0) {
            c->hooks.fail(c->hooks.ctx, "cannot answer the opening message");
            failed = 1;
            break;
        }
        if (a == 0)
            break;
        /* Answered: the frame is not relayed. */
        memmove(c->extra, c->extra + frame_len, c->extra_len - frame_len);
        c->extra_len -= frame_len;
        if (a == 1)
            break;
        statuses++;
    }
    xfree(payload);
    if (gone)
        c->hooks.fail(c->hooks.ctx, "client left before its first message");
    else if (!failed) /* hand_over copies the bytes. */
        c->hooks.hand_over(c->hooks.ctx, c->extra, c->extra_len);
    xfree(c->extra);
    xfree(c);
    pthread_mutex_lock(&o->lock);
    o->opening--;
    pthread_cond_broadcast(&o->cond);
    pthread_mutex_unlock(&o->lock);
    return NULL;
}

void bidiopen_start(struct bidiopen *o, int client_fd, const char *session_id, const json_t *answer,
                    const char *extra, size_t extra_len, const struct bidiopen_hooks *hooks)
{
    pthread_mutex_lock(&o->lock);
    int stop = o->stopping;
    if (!stop)
        o->opening++;
    pthread_mutex_unlock(&o->lock);
    if (stop) {
        hooks->fail(hooks->ctx, "server stopping");
        return;
    }
    struct opening *c = xcalloc(1, sizeof *c);
    c->o = o;
    c->client_fd = client_fd;
    snprintf(c->session_id, sizeof c->session_id, "%s", session_id);
    c->answer = (json_t *)answer;
    c->hooks = *hooks;
    if (extra_len) {
        c->extra = xmalloc(extra_len);
        memcpy(c->extra, extra, extra_len);
        c->extra_len = extra_len;
    }
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &at, opening_main, c);
    pthread_attr_destroy(&at);
    if (rc != 0) {
        log_warn("webdriver: no thread for the opening exchange: %s", strerror(rc));
        pthread_mutex_lock(&o->lock);
        o->opening--;
        pthread_cond_broadcast(&o->cond);
        pthread_mutex_unlock(&o->lock);
        hooks->hand_over(hooks->ctx, c->extra, c->extra_len);
        xfree(c->extra);
        xfree(c);
    }
}

void bidiopen_stop(struct bidiopen *o)
{
    pthread_mutex_lock(&o->lock);
    o->stopping = 1;
    while (o->opening > 0)
        pthread_cond_wait(&o->cond, &o->lock);
    pthread_mutex_unlock(&o->lock);
}
