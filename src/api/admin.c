/* The operator's admin API (OPERATOR.md): orgs, their keys, and plans. */
#include <string.h>

#include "api/api.h"
#include "api/admin.h"
#include "core/jsonx.h"
#include "core/xalloc.h"
#include "domain/entitlements.h"

int admin_org_create(struct req *rq, struct resp *rs)
{
    json_t *body, *out;
    int rc = req_json_object(rq, 0, &body);
    if (rc)
        return rc;
    rc = tenancy_org_create(api_app(rq)->store, body, &out, &rq->err);
    json_decref(body);
    if (rc)
        return rc;
    resp_json(rs, 201, out);
    return 0;
}

int admin_org_get(struct req *rq, struct resp *rs)
{
    json_t *out;
    int rc = tenancy_org_get(api_app(rq)->store, rq->params[0], &out, &rq->err);
    if (rc)
        return rc;
    resp_json(rs, 200, out);
    return 0;
}

int admin_org_update(struct req *rq, struct resp *rs)
{
    json_t *body, *out;
    int rc = req_json_object(rq, 0, &body);
    if (rc)
        return rc;
    rc = tenancy_org_update(api_app(rq)->store, rq->params[0], body, &out, &rq->err);
    json_decref(body);
    if (rc)
        return rc;
    resp_json(rs, 200, out);
    return 0;
}

int admin_key_create(struct req *rq, struct resp *rs)
{
    json_t *body, *out;
    struct org_rec o;
    memset(&o, 0, sizeof o);
    int rc = store_org_get(api_app(rq)->store, rq->params[0], &o);
    org_rec_clear(&o);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "organization %s not found", rq->params[0]);
    if (rc || (rc = req_json_object(rq, 1, &body)))
        return rc;
    rc = tenancy_key_create(api_app(rq)->store, rq->params[0], body, 0, &out, &rq->err);
    json_decref(body);
    if (rc)
        return rc;
    resp_json(rs, 201, out);
    return 0;
}

struct plan_list {
    json_t *arr;
    json_t *seen;
};

static void add_stored(void *ctx, const char *id, const char *doc)
{
    struct plan_list *pl = ctx;
    json_t *v = json_loads(doc, 0, NULL);
    if (!v)
        return;
    json_object_set_new(pl->seen, id, json_true());
    json_array_append_new(pl->arr, json_pack("{s:s,s:o}", "id", id, "entitlements", v));
}

int admin_plan_list(struct req *rq, struct resp *rs)
{
    struct plan_list pl = {json_array(), json_object()};
    struct store *st = api_app(rq)->store;
    for (size_t i = 0; ent_builtin_ids[i]; i++) {
        char *doc = NULL;
        if (store_plan_get(st, ent_builtin_ids[i], &doc) == 0) {
            xfree(doc);
            continue; /* replaced: listed with the stored plans */
        }
        json_array_append_new(pl.arr, json_pack("{s:s,s:o}", "id", ent_builtin_ids[i],
                                                "entitlements", ent_builtin(ent_builtin_ids[i])));
    }
    int rc = store_plan_each(st, add_stored, &pl);
    json_decref(pl.seen);
    if (rc) {
        json_decref(pl.arr);
        return rc;
    }
    resp_json(rs, 200, pl.arr);
    return 0;
}

int admin_plan_put(struct req *rq, struct resp *rs)
{
    json_t *body, *plan = NULL;
    const char *id = rq->params[0];
    int rc = req_json_object(rq, 0, &body);
    if (rc)
        return rc;
    if (!ent_valid_plan_id(id))
        rc = err_field(&rq->err, "id", "a plan id is 1 to 64 characters of a-z, 0-9, _ and -");
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v)
    {
        if (strcmp(k, "entitlements") != 0)
            rc = err_field(&rq->err, k, "unknown field");
    }
    json_t *ent = json_object_get(body, "entitlements");
    if (!ent)
        rc = err_field(&rq->err, "entitlements", "is required");
    else if (ent_complete_plan("entitlements", ent, &plan, &rq->err))
        rc = E_INVALID;
    json_decref(body);
    if (rc) {
        json_decref(plan);
        return rc;
    }
    char *doc = jsonx_dump(plan);
    rc = store_plan_put(api_app(rq)->store, id, doc);
    xfree(doc);
    api_plans_changed();
    if (rc) {
        json_decref(plan);
        return rc;
    }
    resp_json(rs, 200, json_pack("{s:s,s:o}", "id", id, "entitlements", plan));
    return 0;
}
