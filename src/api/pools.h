/* Handlers of /browser_pools and the pool engine's start and stop (pools.c; route table in
 * routes.c). */
#ifndef BD_API_POOLS_H
#define BD_API_POOLS_H

#include "api/api.h"
#include "http/http.h"

int pools_create(struct req *rq, struct resp *rs);
int pools_get(struct req *rq, struct resp *rs);
int pools_list(struct req *rq, struct resp *rs);
int pools_update(struct req *rq, struct resp *rs);
int pools_delete(struct req *rq, struct resp *rs);
int pools_acquire(struct req *rq, struct resp *rs);
int pools_release(struct req *rq, struct resp *rs);
int pools_flush(struct req *rq, struct resp *rs);
/* Registers the pools' session module (before recovery). */
void pools_init(struct app *app);
/* Restores stored pools and starts the filler (after the session manager). */
int pools_start(struct app *app);
/* Answers every parked acquire with 204 (before the HTTP server stops). */
void pools_drain(void);
/* Stops the filler (after the HTTP server, before the session manager). */
void pools_stop(void);

#endif
