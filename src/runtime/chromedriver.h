/*
 * chromedriver: one ChromeDriver process per browser session, attached to the
 * session's already running Chromium through its DevTools address, holding
 * one WebDriver session created with webSocketUrl: true. Its BiDi WebSocket
 * is what webdriver_ws_url relays to (api/webdriver.c, docs/webdriver.md).
 *
 * The driver runs in its own session and process group, listens on a free
 * 127.0.0.1 port under a random URL prefix (so that a foreign ChromeDriver
 * that happens to win the port race is never mistaken for ours), and does
 * not own the browser: with goog:chromeOptions.debuggerAddress, ending the
 * WebDriver session or killing the driver leaves Chromium running (verified
 * with ChromeDriver 156; the driver's "BiDi-CDP Mapper" target closes with
 * its DevTools connection).
 *
 * Threading: one struct chromedriver must not be used by two threads at once;
 * different drivers may be started and stopped concurrently. Drivers are
 * reaped here, by pid (the server must not reap with waitpid(-1)).
 */
#ifndef BD_RUNTIME_CHROMEDRIVER_H
#define BD_RUNTIME_CHROMEDRIVER_H

#include <jansson.h>
#include <sys/types.h>

#include "core/err.h"

#define CHROMEDRIVER_DEFAULT_BINARY "/usr/bin/chromedriver"

struct chromedriver_opts {
    const char *binary;           /* NULL = CHROMEDRIVER_DEFAULT_BINARY */
    const char *debugger_address; /* the browser's DevTools "127.0.0.1:PORT" (required) */
    const char *log_path;         /* --log-path (also makes the command line unique); relative
                                     paths are relative to the server's working folder */
    struct sandbox *sandbox;      /* NULL, or the browser's sandbox: the driver runs inside it
                                     (its network namespace, under bwrap, as the session's
                                     user) and takes a reference */
};
struct sandbox;

struct chromedriver; /* opaque */

/* Starts ChromeDriver on a free loopback port (a port is picked by binding
 * port 0; when the driver cannot bind it, another is tried, 3 attempts in
 * all), waits until GET /status answers ready, and creates a WebDriver
 * session attached to the browser ({alwaysMatch: {webSocketUrl: true,
 * goog:chromeOptions: {debuggerAddress}}}), all within timeout_ms.
 * On success *out is owned (chromedriver_free). Failures leave nothing
 * running: E_INVALID for bad options, E_UNAVAIL when the driver did not start
 * or refused the session (message says why), E_INTERNAL for system calls. */
int chromedriver_start(const struct chromedriver_opts *o, int timeout_ms, struct chromedriver **out,
                       struct err *e) WUR;

/* The session's BiDi WebSocket, "ws://127.0.0.1:PORT/PREFIX/session/ID";
 * owned by d. */
const char *chromedriver_bidi_url(const struct chromedriver *d);
/* The WebDriver session's HTTP path on the driver, "/PREFIX/session/ID"
 * (classic commands are this plus "/url", ...; the port is the BiDi URL's);
 * owned by d. */
const char *chromedriver_session_path(const struct chromedriver *d);
/* The WebDriver session id; owned by d. */
const char *chromedriver_session_id(const struct chromedriver *d);
/* The capabilities ChromeDriver returned for the session (borrowed). */
const json_t *chromedriver_capabilities(const struct chromedriver *d);
/* The debugger address the driver is attached to; owned by d. */
const char *chromedriver_debugger_address(const struct chromedriver *d);
/* The driver process (a session and process group leader). */
pid_t chromedriver_pid(const struct chromedriver *d);
/* /proc/PID/stat field 22 of the driver (for chromium_kill_stale after a crash). */
unsigned long long chromedriver_start_ticks(const struct chromedriver *d);

/* Non-blocking: 1 if the driver process has exited (then reaped, and what is
 * left of its group killed), 0 while it runs. Keeps returning 1 after. */
int chromedriver_exited(struct chromedriver *d);

/* Stops it without ending the WebDriver session over HTTP (not needed: the
 * driver does not own the browser): SIGTERM to the process group, up to
 * grace_ms for the driver to exit, then SIGKILL to the group; reaps it.
 * Safe to call again and after the driver exited. */
void chromedriver_stop(struct chromedriver *d, int grace_ms);

/* Accepts NULL; stops it first (grace 0) if still running, then frees. */
void chromedriver_free(struct chromedriver *d);

#endif
