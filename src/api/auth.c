/*
 * Authentication and project selection, run before every handler.
 *
 * API keys are stored only as SHA-256 hashes, so the lookup is by hash and
 * the comparison of the presented key never touches a stored secret; the
 * admin token, which is held in memory, is compared in constant time.
 */
#include <string.h>
#include <strings.h>

#include "api/api.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/xalloc.h"
#include "domain/entitlements.h"

/* Extracts the token of "Authorization: Bearer <token>"; NULL when absent or malformed. */
static const char *bearer(struct req *rq)
{
    const char *h = req_header(rq, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return NULL;
    h += 7;
    while (*h == ' ')
        h++;
    size_t n = strlen(h);
    if (n == 0 || n > LIM_TOKEN_BYTES)
        return NULL;
    return h;
}

static int unauthorized(struct req *rq, const char *why)
{
    return err_set(&rq->err, E_UNAUTH, "unauthorized", "%s", why);
}

static int select_project(struct req *rq, struct auth *a, struct store *st)
{
    const char *hdr = req_header(rq, "X-Kernel-Project-Id");
    if (hdr && !*hdr)
        hdr = NULL;
    if (!a->org.projects_enabled)
        hdr = NULL; /* one implicit project: the header has nothing to select */
    struct project_rec named;
    if (hdr) {
        if (store_project_get(st, a->org.id, hdr, &named) != 0 ||
            strcmp(named.status, "active") != 0)
            return err_set(&rq->err, E_NOTFOUND, "project_not_found",
                           "project %s not found (unknown or archived)", hdr);
    }
    if (a->key.project_id[0]) {
        if (hdr && strcmp(named.id, a->key.project_id) != 0)
            return err_set(&rq->err, E_FORBIDDEN, "forbidden",
                           "this API key is scoped to another project");
        if (store_project_get(st, a->org.id, a->key.project_id, &a->project) != 0 ||
            strcmp(a->project.status, "active") != 0)
            return err_set(&rq->err, E_NOTFOUND, "project_not_found",
                           "the API key's project is archived or gone");
        return 0;
    }
    if (hdr) {
        a->project = named;
        return 0;
    }
    if (store_project_get(st, a->org.id, a->org.default_project_id, &a->project) == 0 &&
        strcmp(a->project.status, "active") == 0)
        return 0;
    return err_set(&rq->err, E_NOTFOUND, "project_not_found",
                   "the organization's default project is archived; name a project with "
                   "X-Kernel-Project-Id");
}

int api_authorize(struct req *rq, unsigned flags)
{
    struct app *app = api_app(rq);
    if (flags & AUTH_ADMIN) {
        size_t n = strlen(app->cfg.admin_token);
        if (n == 0)
            return err_set(&rq->err, E_NOTFOUND, "not_found", "no endpoint %s %s", rq->method,
                           rq->path);
        const char *t = bearer(rq);
        if (!t || strlen(t) != n || !crypto_equal(t, app->cfg.admin_token, n))
            return unauthorized(rq, "a valid admin token is required");
        return 0;
    }
    if (!(flags & AUTH_KEY))
        return 0;
    const char *t = bearer(rq);
    if (!t)
        return unauthorized(rq, "missing or malformed Authorization: Bearer header");
    char hash[CRYPTO_SHA256_HEX];
    crypto_sha256_hex(t, strlen(t), hash);
    struct auth *a = xcalloc(1, sizeof *a);
    rq->auth = a;
    int rc = store_key_by_hash(app->store, hash, &a->key);
    if (rc == E_NOTFOUND || (rc == 0 && a->key.deleted_at))
        return unauthorized(rq, "invalid API key");
    if (rc)
        return err_set(&rq->err, rc, "internal", "authentication failed");
    if (a->key.expires_at && a->key.expires_at <= clock_now_ms())
        return unauthorized(rq, "the API key has expired");
    rc = store_org_get(app->store, a->key.org_id, &a->org);
    if (rc)
        return unauthorized(rq, "invalid API key");
    if ((flags & AUTH_ORG_ADMIN) && a->key.project_id[0])
        return err_set(&rq->err, E_FORBIDDEN, "forbidden",
                       "this operation requires an organization-scoped API key");
    if (flags & AUTH_NO_PROJECT)
        return 0;
    return select_project(rq, a, app->store);
}

void api_cleanup(struct req *rq)
{
    struct auth *a = rq->auth;
    if (!a)
        return;
    org_rec_clear(&a->org);
    json_decref(a->ent);
    xfree(a);
    rq->auth = NULL;
}

int api_resolve_entitlements(struct store *st, const struct org_rec *org, json_t **out,
                             struct err *e)
{
    json_t *ov = json_loads(org->overrides ? org->overrides : "{}", 0, NULL);
    struct ent_org eo = {org->plan, org->plan_status, org->trial_plan, org->trial_ends_at, ov};
    int rc = ent_resolve(&eo, clock_now_ms(), tenancy_plan_lookup, st, out, e);
    json_decref(ov);
    return rc;
}

int api_entitlements(struct req *rq, const json_t **out)
{
    struct auth *a = api_auth(rq);
    if (!a->ent) {
        int rc = api_resolve_entitlements(api_app(rq)->store, &a->org, &a->ent, &rq->err);
        if (rc)
            return rc;
    }
    *out = a->ent;
    return 0;
}

int api_require_feature(struct req *rq, const char *feature)
{
    const json_t *ent;
    int rc = api_entitlements(rq, &ent);
    if (rc)
        return rc;
    if (!ent_feature_on(ent, feature))
        return err_set(&rq->err, E_FORBIDDEN, "feature_not_enabled",
                       "features.%s is not enabled for this organization's plan", feature);
    return 0;
}
