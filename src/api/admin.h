/* Handlers of the admin API (/admin/..., admin.c; route table in routes.c). */
#ifndef BD_API_ADMIN_H
#define BD_API_ADMIN_H

#include "api/api.h"
#include "http/http.h"

int admin_org_create(struct req *rq, struct resp *rs);
int admin_org_get(struct req *rq, struct resp *rs);
int admin_org_update(struct req *rq, struct resp *rs);
int admin_key_create(struct req *rq, struct resp *rs);
int admin_plan_list(struct req *rq, struct resp *rs);
int admin_plan_put(struct req *rq, struct resp *rs);

#endif
