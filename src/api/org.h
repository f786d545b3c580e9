/* Handlers of /org/entitlements, /org/projects, /org/api_keys and /auth/context (route table
 * in routes.c). */
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
/* GET /auth/context: who the caller is, from the API key it used and the
 * project the request acts on (KERNEL_API_NEWER.md 1.4). */
int org_auth_context(struct req *rq, struct resp *rs);

/* GET/PATCH /org/limits and /org/projects/{id_or_name}/limits: the
 * organization's and its projects' concurrency limits (KERNEL_API_NEWER.md
 * 1.4; enforced by the store's admission, docs/auth.md "Limits"). */
int org_limits_get(struct req *rq, struct resp *rs);
int org_limits_update(struct req *rq, struct resp *rs);
int org_project_limits_get(struct req *rq, struct resp *rs);
int org_project_limits_update(struct req *rq, struct resp *rs);

/* Endpoints of the public API that this server does not serve yet: 501. */
int api_not_implemented(struct req *rq, struct resp *rs);

#endif
