/*
 * cdp_client: blocking CDP over a wslay client context and poll(2).
 *
 * Responses are matched by id. Events and responses to earlier calls (sent
 * with wait 0, or whose wait timed out) are parsed only far enough to see
 * they are not the awaited one, then dropped.
 */
#include "proxy/cdp_client.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <wslay/wslay.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "core/xalloc.h"
#include "proxy/ws.h"

struct cdp_client {
    struct ws_sock sock; /* the socket, and the bytes after the 101 head fed to wslay first */
    wslay_event_context_ptr ws;
    json_int_t next_id;
    json_int_t want_id; /* id being awaited, 0 = none */
    json_t *reply;      /* the awaited response, once it arrived */
    int broken;         /* peer closed or transport failed */
    char *keep;         /* events whose method starts with this are queued (NULL: none) */
    json_t *events;     /* the queue: an array, oldest first */
};

/* Most events queued (cdp_client_keep_events); a browser that sends more
 * before the caller reads them breaks the connection rather than the heap. */
#define CDP_EVENTS_MAX 1024

static ssize_t cdp_recv_cb(wslay_event_context_ptr ws, uint8_t *buf, size_t len, int flags,
                           void *user)
{
    (void)flags;
    return ws_sock_recv(ws, &((struct cdp_client *)user)->sock, buf, len);
}

static ssize_t cdp_send_cb(wslay_event_context_ptr ws, const uint8_t *data, size_t len, int flags,
                           void *user)
{
    return ws_sock_send(ws, &((struct cdp_client *)user)->sock, data, len, flags);
}

static void cdp_msg_cb(wslay_event_context_ptr ws, const struct wslay_event_on_msg_recv_arg *arg,
                       void *user)
{
    (void)ws;
    struct cdp_client *c = user;
    if (arg->opcode == WSLAY_CONNECTION_CLOSE) {
        c->broken = 1;
        return;
    }
    if (arg->opcode != WSLAY_TEXT_FRAME || ((c->want_id == 0 || c->reply != NULL) && !c->keep))
        return;
    json_t *v = NULL;
    struct err e;
    err_init(&e);
    if (jsonx_parse((const char *)arg->msg, arg->msg_length, LIM_WS_MESSAGE_BYTES, &v, &e) != 0)
        return;
    json_t *id = json_object_get(v, "id");
    const char *method = jsonx_str(v, "method");
    if (c->want_id && !c->reply && json_is_integer(id) && json_integer_value(id) == c->want_id) {
        c->reply = v;
    } else if (c->keep && ((!id && method && strncmp(method, c->keep, strlen(c->keep)) == 0) ||
                           (json_is_integer(id) && !method))) {
        if (json_array_size(c->events) >= CDP_EVENTS_MAX)
            c->broken = 1;
        json_array_append_new(c->events, v);
    } else {
        json_decref(v);
    }
}

static const struct wslay_event_callbacks cdp_callbacks = {
    .recv_callback = cdp_recv_cb,
    .send_callback = cdp_send_cb,
    .genmask_callback = ws_genmask_cb,
    .on_msg_recv_callback = cdp_msg_cb,
};

int cdp_client_open(const char *ws_url, int timeout_ms, struct cdp_client **out, struct err *e)
{
    struct cdp_client *c = xcalloc(1, sizeof(*c));
    int rc = ws_connect(ws_url, timeout_ms, &c->sock.fd, &c->sock.extra, &c->sock.extra_len, e);
    if (rc != 0) {
        xfree(c);
        return rc;
    }
    if (wslay_event_context_client_init(&c->ws, &cdp_callbacks, c) != 0) {
        close(c->sock.fd);
        xfree(c->sock.extra);
        xfree(c);
        return err_set(e, E_INTERNAL, "internal", "cdp client: cannot create a WebSocket context");
    }
    wslay_event_config_set_max_recv_msg_length(c->ws, LIM_WS_MESSAGE_BYTES);
    c->next_id = 1;
    *out = c;
    return 0;
}

/* One round of I/O, waiting up to the deadline for the socket. Returns 0, or
 * -1 when the deadline passed or the connection is gone. */
static int cdp_pump(struct cdp_client *c, int64_t deadline)
{
    if (c->broken)
        return -1;
    short events = 0;
    if (wslay_event_want_read(c->ws))
        events |= POLLIN;
    if (wslay_event_want_write(c->ws))
        events |= POLLOUT;
    if (events == 0) {
        c->broken = 1;
        return -1;
    }
    if (c->sock.extra_off >= c->sock.extra_len) {
        int64_t left = deadline - clock_mono_us();
        if (left <= 0)
            return -1;
        struct pollfd pfd = {.fd = c->sock.fd, .events = events};
        int r = poll(&pfd, 1, (int)((left + 999) / 1000));
        if (r < 0 && errno != EINTR)
            c->broken = 1;
        if (r <= 0)
            return c->broken ? -1 : 0;
    }
    if (wslay_event_recv(c->ws) != 0 || wslay_event_send(c->ws) != 0)
        c->broken = 1;
    return c->broken && c->reply == NULL ? -1 : 0;
}

int cdp_client_call(struct cdp_client *c, const char *session, const char *method, json_t *params,
                    int wait, int timeout_ms, json_t **result, struct err *e)
{
    if (result != NULL)
        *result = NULL;
    if (c->broken)
        return err_set(e, E_UNAVAIL, "unavailable", "CDP connection to the browser is closed");
    int64_t deadline = clock_mono_us() + (int64_t)timeout_ms * 1000;
    json_int_t id = c->next_id++;
    json_t *req = json_object();
    json_object_set_new(req, "id", json_integer(id));
    json_object_set_new(req, "method", json_string(method));
    if (params != NULL)
        json_object_set(req, "params", params);
    if (session != NULL)
        json_object_set_new(req, "sessionId", json_string(session));
    char *text = jsonx_dump(req);
    json_decref(req);
    struct wslay_event_msg m = {
        .opcode = WSLAY_TEXT_FRAME, .msg = (const uint8_t *)text, .msg_length = strlen(text)};
    int qr = wslay_event_queue_msg(c->ws, &m);
    xfree(text);
    if (qr != 0)
        return err_set(e, E_UNAVAIL, "unavailable", "CDP connection to the browser is closing");
    if (wslay_event_send(c->ws) != 0)
        c->broken = 1;
    while (!c->broken && wslay_event_want_write(c->ws)) {
        if (cdp_pump(c, deadline) != 0)
            break;
    }
    if (c->broken || wslay_event_want_write(c->ws))
        return err_set(e, E_UNAVAIL, "unavailable", "CDP %s: could not send to the browser",
                       method);
    if (!wait)
        return 0;

    c->want_id = id;
    while (c->reply == NULL && cdp_pump(c, deadline) == 0)
        ;
    json_t *reply = c->reply;
    c->reply = NULL;
    c->want_id = 0;
    if (reply == NULL)
        return err_set(e, E_UNAVAIL, "unavailable", "CDP %s: %s", method,
                       c->broken ? "the browser closed the connection" : "timed out");
    json_t *error = json_object_get(reply, "error");
    if (error != NULL) {
        const char *msg = jsonx_str(error, "message");
        int rc = err_set(e, E_INTERNAL, "internal", "CDP %s failed: %s", method,
                         msg != NULL ? msg : "unknown error");
        json_decref(reply);
        return rc;
    }
    json_t *res = json_object_get(reply, "result");
    if (result != NULL)
        *result = json_is_object(res) ? json_incref(res) : json_object();
    json_decref(reply);
    return 0;
}

int cdp_client_call_own(struct cdp_client *c, const char *session, const char *method,
                        json_t *params, int wait, int timeout_ms, json_t **result, struct err *e)
{
    int rc = cdp_client_call(c, session, method, params, wait, timeout_ms, result, e);
    json_decref(params);
    return rc;
}

void cdp_client_keep_events(struct cdp_client *c, const char *prefix)
{
    xfree(c->keep);
    c->keep = prefix ? xstrdup(prefix) : NULL;
    if (!c->events)
        c->events = json_array();
}

int cdp_client_event(struct cdp_client *c, int timeout_ms, json_t **event, struct err *e)
{
    *event = NULL;
    int64_t deadline = clock_mono_us() + (int64_t)timeout_ms * 1000;
    while (json_array_size(c->events) == 0 && !c->broken && cdp_pump(c, deadline) == 0)
        ;
    if (json_array_size(c->events) == 0)
        return err_set(e, E_UNAVAIL, "unavailable", "CDP: %s",
                       c->broken ? "the browser closed the connection" : "no event in time");
    *event = json_incref(json_array_get(c->events, 0));
    json_array_remove(c->events, 0);
    return 0;
}

void cdp_client_close(struct cdp_client *c)
{
    if (c == NULL)
        return;
    if (!c->broken && wslay_event_queue_close(c->ws, WSLAY_CODE_NORMAL_CLOSURE, NULL, 0) == 0)
        (void)wslay_event_send(c->ws); /* best effort: a non-blocking write */
    wslay_event_context_free(c->ws);
    close(c->sock.fd);
    xfree(c->sock.extra);
    xfree(c->keep);
    json_decref(c->events);
    json_decref(c->reply);
    xfree(c);
}
