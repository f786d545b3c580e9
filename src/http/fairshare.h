/*
 * fairshare: each tenant's share of a pool the whole server shares (the
 * blocking threads of HTTP_ROUTE_BLOCKING routes, http.h).
 *
 * A call is charged to its organization and, when it acts on one, to its
 * session, before it takes or waits for a thread, and given back when the
 * thread is done with it. Past either share the call is refused at once, so
 * that no single tenant (an organization, or one of its sessions) can hold
 * every thread while the others wait. Sessions are told apart within their
 * organization: two organizations may use the same session name.
 *
 * Thread-safe: the table has its own lock, held only to count.
 */
#ifndef BD_HTTP_FAIRSHARE_H
#define BD_HTTP_FAIRSHARE_H

#include "core/err.h"

/* Retry-After (seconds) of a call refused past its share. */
#define FAIRSHARE_RETRY_AFTER_S 1

struct fairshare;

/* A table allowing per_org calls at once per organization and per_session
 * per session (per_session <= per_org makes sense; 0 = no cap). */
struct fairshare *fairshare_new(unsigned per_org, unsigned per_session);
/* Accepts NULL. Every slot should have been given back. */
void fairshare_free(struct fairshare *fs);

/* Charges one call to org and (when session is not NULL or "") to session
 * within org. Returns 0, or E_LIMIT with e filled (429 rate_limited,
 * retry_after FAIRSHARE_RETRY_AFTER_S) when either share is full; nothing is
 * charged then. An org of NULL or "" is charged nothing and always passes. */
int fairshare_take(struct fairshare *fs, const char *org, const char *session, struct err *e) WUR;
/* Gives back what one successful fairshare_take with the same names took. */
void fairshare_give(struct fairshare *fs, const char *org, const char *session);
/* Calls charged now to org (session NULL) or to session within org. */
unsigned fairshare_count(struct fairshare *fs, const char *org, const char *session);

#endif
