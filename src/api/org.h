/* Handlers of /org/entitlements, /org/projects and /org/api_keys (route table in routes.c). */
#ifndef BD_API_ORG_H
#define BD_API_ORG_H

#include "api/api.h"
#include "http/http.h"

int org_get_entitlements(struct req *rq, struct resp *rs);
int org_project_create(struct req *rq, struct resp *rs);
int org_project_get(struct req *rq, struct resp *rs);
int org_project_update(struct req *rq, struct resp *rs);
int org_project_delete(struct req *rq, struct resp *rs);
int org_project_list(struct req *rq, struct resp *rs);
int org_key_create(struct req *rq, struct resp *rs);
int org_key_get(struct req *rq, struct resp *rs);
int org_key_update(struct req *rq, struct resp *rs);
int org_key_delete(struct req *rq, struct resp *rs);
int org_key_list(struct req *rq, struct resp *rs);
int org_key_rotate(struct req *rq, struct resp *rs);

/* Admin API (admin.c). */
int admin_org_create(struct req *rq, struct resp *rs);
int admin_org_get(struct req *rq, struct resp *rs);
int admin_org_update(struct req *rq, struct resp *rs);
int admin_key_create(struct req *rq, struct resp *rs);
int admin_plan_list(struct req *rq, struct resp *rs);
int admin_plan_put(struct req *rq, struct resp *rs);

/* Browser sessions (browsers.c). */
int browsers_create(struct req *rq, struct resp *rs);
int browsers_get(struct req *rq, struct resp *rs);
int browsers_list(struct req *rq, struct resp *rs);
int browsers_update(struct req *rq, struct resp *rs);
int browsers_delete(struct req *rq, struct resp *rs);
int browsers_cdp(struct req *rq, struct resp *rs);

/* Browser pools (pools.c). */
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

/* Endpoints of the public API that this server does not serve yet: 501. */
int api_not_implemented(struct req *rq, struct resp *rs);

#endif
