/*
 * bidiopen: the opening exchange of a WebDriver BiDi client connection
 * (docs/webdriver.md). The ChromeDriver behind a session already made
 * its WebDriver session, and would refuse a second one: a thread per new
 * connection waits for the client's first message; a session.new is
 * answered here with the driver's session (after at most
 * LIM_BIDI_OPENING_STATUS session.status probes, answered here too), anything
 * else goes on to the driver as sent. Then the connection is handed over (to the CDP relay, by
 * the caller's hook).
 *
 * What it owns: the count of connections in their opening exchange, one
 * detached thread each, and each one's buffered client bytes. It does not
 * own the client socket (the caller's hooks close it) nor the relay.
 *
 * Threading: bidiopen_start is called on the HTTP daemon's thread that
 * upgraded the connection; the hooks run on the opening thread (or on the
 * caller's, when no thread starts); bidiopen_stop on main.c's stop.
 *
 * Failure: no hook result is reported back: a client that leaves, a failed
 * answer or a stopping server end in hooks->fail; a first message that is
 * late, too large or not a single text frame is handed over untouched; when
 * no thread can start, the connection is handed over at once.
 *
 * Stop: bidiopen_stop makes the waiting openings fail (within ~200 ms) and
 * new ones fail at once, and returns when none is left; then bidiopen_free.
 */
#ifndef BD_PROXY_BIDIOPEN_H
#define BD_PROXY_BIDIOPEN_H

#include <jansson.h>
#include <stddef.h>

struct bidiopen;

struct bidiopen_hooks {
    /* The opening is over: relay the client's bytes rest (copied by the
     * callee) after the upstream's. The connection is the callee's. */
    void (*hand_over)(void *ctx, const char *rest, size_t rest_len);
    /* The connection ends (why: for the log). */
    void (*fail)(void *ctx, const char *why);
    void *ctx;
};

/* How long a new connection may take to send its first message before it is
 * relayed without the session.new interception. */
#define BIDIOPEN_FIRST_MESSAGE_WAIT_MS 30000

struct bidiopen *bidiopen_new(void);
/* NULL is a no-op; after bidiopen_stop. */
void bidiopen_free(struct bidiopen *o);

/* Starts the opening exchange of client_fd (session_id: for the log), whose
 * bytes after its request head are extra. answer: the result of the
 * synthetic session.new (borrowed; valid until a hook runs). */
void bidiopen_start(struct bidiopen *o, int client_fd, const char *session_id, const json_t *answer,
                    const char *extra, size_t extra_len, const struct bidiopen_hooks *hooks);

void bidiopen_stop(struct bidiopen *o);

#endif
