/*
 * cdp_page: the DevTools steps browserd's own commands to a browser start
 * with: find its page targets (the first one is the page an agent sees), open
 * a page, attach to a page with a flat session (Target.attachToTarget
 * flatten: true: commands then carry the sessionId on the same connection).
 * Each step is one blocking cdp_client_call; the caller owns the client and
 * gives the time each step may take.
 */
#ifndef BD_PROXY_CDP_PAGE_H
#define BD_PROXY_CDP_PAGE_H

#include <jansson.h>
#include <stddef.h>

#include "core/err.h"
#include "proxy/cdp_client.h"

/* The browser's page targets, in its order: the entries of Target.getTargets'
 * targetInfos whose type is "page" and that have a targetId, into *pages (new
 * reference: an array, possibly empty; NULL on failure). Fails as
 * cdp_client_call. */
int cdp_page_list(struct cdp_client *c, int timeout_ms, json_t **pages, struct err *e) WUR;

/* The first page target's id into out (cap bytes). E_NOTFOUND ("no_page")
 * when the browser has no page (yet: it opens its first one a moment after
 * DevTools listens); otherwise fails as cdp_client_call. */
int cdp_page_first(struct cdp_client *c, int timeout_ms, char *out, size_t cap, struct err *e) WUR;

/* Opens a new page at url (Target.createTarget; hidden: a page the browser
 * shows in no window or tab list) and its target id into out. E_INTERNAL
 * when the answer names no target; otherwise fails as cdp_client_call. */
int cdp_page_create(struct cdp_client *c, const char *url, int hidden, int timeout_ms, char *out,
                    size_t cap, struct err *e) WUR;

/* Attaches to target with a flat session and its sessionId into out.
 * E_INTERNAL when the answer carries no sessionId; otherwise fails as
 * cdp_client_call. */
int cdp_page_attach(struct cdp_client *c, const char *target, int timeout_ms, char *out, size_t cap,
                    struct err *e) WUR;

/* Closes the page target (Target.closeTarget, best effort, waiting up to
 * timeout_ms; "" for none), then the connection c (NULL accepted): the end
 * of a page opened with cdp_page_create for one command (bcurl, brender). */
void cdp_page_close_with(struct cdp_client *c, const char *target, int timeout_ms);

/* cdp_page_first, then cdp_page_attach to it: the session of the page an
 * agent sees, into sid. Each step may take timeout_ms. Fails as they do
 * (E_NOTFOUND when there is no page). */
int cdp_page_attach_first(struct cdp_client *c, int timeout_ms, char *sid, size_t cap,
                          struct err *e) WUR;

/* Connects to ws_url, sends the first page to url (Page.navigate, not
 * waiting for the answer or the load) and closes. Best effort, as the
 * interface document has it for a navigation asked with an update: a
 * failure is logged at debug level and dropped. Each step may take
 * timeout_ms. */
void cdp_page_navigate_first(const char *ws_url, const char *url, int timeout_ms);

#endif
