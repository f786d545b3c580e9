/*
 * cdp_client: a small blocking CDP client for browserd's own commands to a
 * browser (navigate, resize, list targets), over the browser's DevTools
 * WebSocket. One caller at a time: a cdp_client is not thread-safe.
 */
#ifndef BD_PROXY_CDP_CLIENT_H
#define BD_PROXY_CDP_CLIENT_H

#include <jansson.h>

#include "core/err.h"

struct cdp_client;

/* Connects to ws_url (a loopback ws:// DevTools URL, see ws_connect) within
 * timeout_ms. Returns 0 and *out (owned, cdp_client_close), or E_INVALID
 * (bad URL, refused handshake) / E_UNAVAIL (cannot connect, timeout). */
int cdp_client_open(const char *ws_url, int timeout_ms, struct cdp_client **out, struct err *e) WUR;

/* Sends {"id":N,"method":method,"params":params,"sessionId"?:session}
 * (params borrowed, may be NULL: then omitted; session may be NULL). When
 * wait is 1, waits up to timeout_ms for the response with that id, skipping
 * events and other responses, and returns its "result" in *result (new ref;
 * an empty object when the response has none) or E_INTERNAL with the CDP
 * error message; when wait is 0 returns right after sending (result may be
 * NULL then). E_UNAVAIL on timeout or when the browser closed the
 * connection; after that the client is unusable except for close. */
int cdp_client_call(struct cdp_client *c, const char *session, const char *method, json_t *params,
                    int wait, int timeout_ms, json_t **result, struct err *e) WUR;
/* cdp_client_call taking ownership of params (a fresh json_pack, say):
 * they are freed whatever the outcome. */
int cdp_client_call_own(struct cdp_client *c, const char *session, const char *method,
                        json_t *params, int wait, int timeout_ms, json_t **result,
                        struct err *e) WUR;

/* Queues the events (messages without an id) whose method starts with
 * prefix ("Fetch.", say; NULL stops queueing), including those that arrive
 * while cdp_client_call waits for its response, and the responses to calls
 * made with wait 0 (messages with an id); other events are dropped. */
void cdp_client_keep_events(struct cdp_client *c, const char *prefix);
/* The oldest queued event (new reference), waiting up to timeout_ms for one.
 * E_UNAVAIL on timeout or when the connection closed. */
int cdp_client_event(struct cdp_client *c, int timeout_ms, json_t **event, struct err *e) WUR;

/* Closes the connection (a close frame, best effort) and frees; accepts NULL. */
void cdp_client_close(struct cdp_client *c);

#endif
