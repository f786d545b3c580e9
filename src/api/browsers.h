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
int browsers_cdp(struct req *rq, struct resp *rs);

#endif
