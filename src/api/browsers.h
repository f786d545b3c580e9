/* Handlers of /browsers and the CDP WebSocket (browsers.c; route table in routes.c). The session
 * functions other modules call (browsers_spawn, browsers_end, ...) are in api.h. */
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

/* DevTools HTTP discovery (cdp_discovery.c): /json/version and /json/list
 * of the session named by the cdp token, in ?jwt= (_q) or in the path's
 * first parameter (_p); 401 for a bad token, 404 for an ended session. */
int cdp_disc_version_q(struct req *rq, struct resp *rs);
int cdp_disc_list_q(struct req *rq, struct resp *rs);
int cdp_disc_version_p(struct req *rq, struct resp *rs);
int cdp_disc_list_p(struct req *rq, struct resp *rs);
/* 1 when id has the shape of a DevTools target id (1 to 64 hex digits). */
int cdp_target_id_ok(const char *id);

#endif
