/* Handlers of /browsers and the CDP WebSocket (browsers.c; route table in routes.c). The session
 * functions other modules call (sess_spawn, sess_end, ...) are in api.h. */
#ifndef BD_API_BROWSERS_H
#define BD_API_BROWSERS_H

#include "api/api.h"
#include "http/http.h"

int browsers_create(struct req *rq, struct resp *rs);
int browsers_get(struct req *rq, struct resp *rs);
int browsers_list(struct req *rq, struct resp *rs);
int browsers_update(struct req *rq, struct resp *rs);
int browsers_delete(struct req *rq, struct resp *rs);
/* The CDP WebSocket: the browser's endpoint, or one page's with
 * ?target=ID (the ids /json/list gives). */
int browsers_cdp(struct req *rq, struct resp *rs);

/* The CDP relay for a client socket that did not come through the HTTP
 * daemon (proxy/selfrelay: the session's own browser), whose request was
 * checked by the caller: connects the session's browser (one page's socket
 * with target), sends the 101 with accept (Sec-WebSocket-Accept) on fd and
 * hands both sockets to the relay. 0 when fd was taken (closed by the relay
 * in the end); else E_NOTFOUND (session ended) / E_UNAVAIL and fd is still
 * the caller's. Blocks up to a few seconds (the browser's handshake). */
int browsers_cdp_fd(struct app *app, const char *org, const char *session_id, const char *target,
                    int fd, const char *accept, struct err *e);

/* The rest of Chromium's DevTools HTTP pages under the same token forms
 * (cdp_discovery.c): /json/protocol (the browser's descriptor), PUT
 * /json/new?URL (a new tab; GET is a 405 as in Chromium), /json/activate/ID
 * and /json/close/ID (404 "No such target id" for an id the session's
 * browser lacks). cdp_disc_no_token answers /json/... at the root, where no
 * session is named: 401 saying where the token goes. */
int cdp_disc_protocol_q(struct req *rq, struct resp *rs);
int cdp_disc_protocol_p(struct req *rq, struct resp *rs);
int cdp_disc_new_q(struct req *rq, struct resp *rs);
int cdp_disc_new_p(struct req *rq, struct resp *rs);
int cdp_disc_new_get(struct req *rq, struct resp *rs);
int cdp_disc_activate_q(struct req *rq, struct resp *rs);
int cdp_disc_activate_p(struct req *rq, struct resp *rs);
int cdp_disc_close_q(struct req *rq, struct resp *rs);
int cdp_disc_close_p(struct req *rq, struct resp *rs);
int cdp_disc_no_token(struct req *rq, struct resp *rs);

/* DevTools HTTP discovery (cdp_discovery.c): /json/version and /json/list
 * of the session named by the cdp token, in ?jwt= (_q) or in the path's
 * first parameter (_p); 401 for a bad token, 404 for an ended session. */
int cdp_disc_version_q(struct req *rq, struct resp *rs);
int cdp_disc_list_q(struct req *rq, struct resp *rs);
int cdp_disc_version_p(struct req *rq, struct resp *rs);
int cdp_disc_list_p(struct req *rq, struct resp *rs);
/* The discovery path a client appended to the ?jwt= value of cdp_ws_url as a
 * string (Stagehand 4 turns an http cdpUrl into `${cdpUrl}/json/version`,
 * which puts "/json/version" inside the query): for jwt = T + S, S one of
 * "/json/version", "/json/list", "/json", each with or without a trailing
 * "/", sets *toklen to the length of T and returns S without its trailing
 * "/" (a static string); NULL for anything else (a plain token included).
 * Pure; T is not checked here. */
const char *cdp_disc_query_suffix(const char *jwt, size_t *toklen);
/* 1 when id has the shape of a DevTools target id (1 to 64 hex digits). */
int cdp_target_id_ok(const char *id);

#endif
