/*
 * capture: the server's own CDP connection to a session's browser, for the
 * categories the browser itself must report (system, console, network, page,
 * interaction, screenshot). One thread per capturing session: it discovers
 * every page target, attaches with flattened sessions, enables the domains
 * the mask needs and turns CDP events into telemetry events (telemetry_emit).
 * See docs/telemetry.md for the event names and payloads.
 */
#ifndef BD_TELEMETRY_CAPTURE_H
#define BD_TELEMETRY_CAPTURE_H

#include <jansson.h>

#include "telemetry/event.h"

struct capture;

/* Where a capture's events go (the telemetry module passes
 * telemetry_emit_src; a test passes a fake). Called on the capture's thread;
 * data is stolen. */
typedef void (*capture_sink_fn)(void *ctx, const char *session_id, enum telem_cat cat,
                                const char *type, const struct telem_src *src, json_t *data);

/* Starts capturing for session_id from the browser's DevTools URL ws_url
 * for the categories in mask (bits of enum telem_cat), delivering events to
 * sink(sink_ctx, ...). Returns the owned capture, or NULL when the thread
 * cannot start (logged). The connection is made on the new thread; a failure
 * there is logged and ends it. */
struct capture *capture_start(const char *session_id, const char *ws_url, unsigned mask,
                              int screenshot_interval_ms, capture_sink_fn sink, void *sink_ctx);
/* Stops the thread (closes the connection) and frees; accepts NULL. Must
 * not be called with the telemetry module's lock held. */
void capture_stop(struct capture *c);

/* The interaction listener script injected into pages (tests read it). */
extern const char capture_interaction_js[];

#endif
