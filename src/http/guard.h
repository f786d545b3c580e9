/*
 * http/guard: the transport's defences against a client or tenant that would
 * take the server from the others (docs/http.md, "Hostile clients"). Internal
 * to src/http; server.c wires them into libmicrohttpd.
 *
 * - The head watch gives each connection a deadline to deliver a whole
 *   request head. libmicrohttpd's own timeout only counts idleness, so a
 *   client that trickles one byte every few seconds would hold its connection
 *   forever; the watch shuts such a socket down from its own thread. The
 *   same thread lingers on the sockets of requests refused before their body
 *   (headwatch_linger).
 * - The body budget counts the request bodies held in memory, server-wide
 *   and per tenant, so that no tenant can hold the whole budget.
 */
#ifndef BD_HTTP_GUARD_H
#define BD_HTTP_GUARD_H

#include <stddef.h>

#include "core/err.h"

/* ---- head deadlines ---- */

struct head_watch;
struct head_conn;

/* Starts the watch thread: a connection still waiting for (the end of) a
 * request head deadline_s seconds after it started waiting is shut down
 * (shutdown(2), both directions); libmicrohttpd then sees the end of its
 * stream and closes it as usual. */
int headwatch_start(unsigned deadline_s, struct head_watch **out, struct err *e) WUR;
/* Ends the thread and frees the watch. Call after every connection was
 * released (headwatch_conn_free), i.e. after the daemon stopped. NULL is a
 * no-op. */
void headwatch_stop(struct head_watch *hw);
/* A new connection on fd, waiting for its first head. Owned by the caller,
 * released with headwatch_conn_free before fd is closed. */
struct head_conn *headwatch_conn_new(struct head_watch *hw, int fd);
/* The connection is going away; its socket is still open. NULL is a no-op. */
void headwatch_conn_free(struct head_conn *hc);
/* The connection was answered before its request body was read: once it
 * ends, its socket is kept up to LIM_HTTP_LINGER_MS with its input read and
 * dropped, so that the client reads the answer rather than a reset. */
void headwatch_linger(struct head_conn *hc);
/* The connection's request head arrived: no deadline until the next wait. */
void headwatch_head_done(struct head_conn *hc);
/* The connection waits for its next request head (after a response on a
 * kept-alive connection): a new deadline starts now. */
void headwatch_head_wait(struct head_conn *hc);
/* Connections the watch shut down so far. */
unsigned long headwatch_cut_count(struct head_watch *hw);

/* ---- the budget of buffered request bodies ---- */

struct body_budget;

/* A budget of total bytes, of which one tenant may hold share. */
struct body_budget *budget_new(size_t total, size_t share);
/* NULL is a no-op. Every byte taken must have been given back. */
void budget_free(struct body_budget *b);
/* Takes n more bytes for tenant (a NUL-terminated key): 0, or E_LIMIT
 * when the tenant would hold more than its share, or E_UNAVAIL when the
 * server would hold more than the total; nothing is taken then. */
int budget_take(struct body_budget *b, const char *tenant, size_t n) WUR;
/* Gives back n bytes tenant took. */
void budget_give(struct body_budget *b, const char *tenant, size_t n);
/* Bytes held: by tenant, or by everyone when tenant is NULL. */
size_t budget_held(struct body_budget *b, const char *tenant);

#endif
