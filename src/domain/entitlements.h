/*
 * entitlements: the built-in plans and the five resolution steps of
 * OPERATOR.md, as pure functions over JSON. The rest of the server asks one
 * question through ent_feature_on / ent_limit on a resolved record.
 *
 * A plan's values are a document {features: {...}, limits: {...}} with every
 * path of the interface document's entitlements table; the resolved record adds
 * `plan: {id, effective_id, is_trialing, status, trial_ends_at}`.
 */
#ifndef BD_DOMAIN_ENTITLEMENTS_H
#define BD_DOMAIN_ENTITLEMENTS_H

#include <jansson.h>
#include <stdint.h>

#include "core/err.h"

/* The organization fields resolution reads (borrowed). */
struct ent_org {
    const char *plan;
    const char *plan_status;
    const char *trial_plan;  /* NULL or "" = none */
    int64_t trial_ends_at;   /* ms since epoch; 0 = none */
    const json_t *overrides; /* NULL = none */
};

/* Returns the plan's {features, limits} document as a new reference, or NULL
 * when no such plan exists. Resolution calls it for the plans it needs. */
typedef json_t *(*ent_plan_lookup_fn)(void *ctx, const char *plan_id);

/* Values of a built-in plan (developer, hobbyist, startup, enterprise) as a
 * new reference, or NULL for another id. */
json_t *ent_builtin(const char *plan_id);
/* NULL-terminated list of the built-in plan ids. */
extern const char *const ent_builtin_ids[];

/* Resolves an org's entitlements at time now_ms (steps 1-5). *out is a new
 * reference to the full record. Fails with E_INTERNAL when a plan the org
 * names cannot be found (the admin API refuses such orgs, so this means the
 * data changed underneath). */
int ent_resolve(const struct ent_org *org, int64_t now_ms, ent_plan_lookup_fn lookup, void *ctx,
                json_t **out, struct err *e) WUR;

/* Validates an overrides document at `path`: an object with optional
 * `features` and `limits`, known keys only, each value of its type; null only
 * where the value is nullable. */
int ent_validate_overrides(const char *path, const json_t *v, struct err *e) WUR;
/* Validates a plan document for PUT /admin/plans: same shape as overrides;
 * values it leaves out are taken from the `developer` plan. On success *out is
 * the complete document (new reference). */
int ent_complete_plan(const char *path, const json_t *v, json_t **out, struct err *e) WUR;
/* Plan ids: 1-64 chars of [a-z0-9_-]. */
int ent_valid_plan_id(const char *id);
/* Plan statuses this server knows: active, trialing, past_due, canceled, unpaid,
 * incomplete, incomplete_expired, paused. */
int ent_valid_status(const char *status);

/* 1 when features.<feature>.enabled is JSON true in a resolved record. */
int ent_feature_on(const json_t *ent, const char *feature);
/* Reads limits.<name> (or "features.x.y" when name contains a dot). Returns 1
 * and sets *out when limited, 0 when unlimited (null or absent). */
int ent_limit(const json_t *ent, const char *name, int64_t *out);

#endif
