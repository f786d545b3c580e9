/*
 * pool_rules: the browser pool create body (KERNEL_API.md), the pool update
 * (PATCH /browser_pools/{id_or_name}, the interface document) and the acquire
 * body (KERNEL_API.md), all over the pool's browser_pool_config JSON.
 *
 * browser_pool_config as stored and returned: size, timeout_seconds,
 * fill_rate_per_minute, headless, stealth, kiosk_mode always present; name,
 * chrome_policy, extensions, network, profile (the {id} or {name} selector as
 * sent, without save_changes), refresh_on_profile_update (present whenever a
 * profile is, and false after a clear), proxy_id, start_url, telemetry (the
 * active telemetry configuration of telemetry_cfg.h) and viewport present only
 * when set.
 *
 * Pure. What needs the store or the organization (name uniqueness, the sum of
 * pool sizes against the pooled sessions limit, that the profile, proxy and
 * extensions exist) is the caller's; the plans expose what changed.
 * Readings of the document: docs/domain-rules.md.
 */
#ifndef BD_DOMAIN_POOL_RULES_H
#define BD_DOMAIN_POOL_RULES_H

#include <jansson.h>

#include "core/err.h"

#define POOLRULES_TIMEOUT_MIN       10
#define POOLRULES_TIMEOUT_MAX       259200
#define POOLRULES_TIMEOUT_DEFAULT   600
#define POOLRULES_FILL_RATE_DEFAULT 25
#define POOLRULES_EXTENSIONS_MAX    20
#define POOLRULES_START_URL_MAX     2048
#define POOLRULES_NAME_MAX          255
/* Not in either document: the longest acquire long-poll accepted. */
#define POOLRULES_ACQUIRE_TIMEOUT_MAX 259200
/* Read for a stored browser_pool_config without a usable size (a create
 * requires one). */
#define POOLRULES_SIZE_DEFAULT 1

/* The values of a stored browser_pool_config that the pool engine and the
 * handlers act on (the launch options in it are passed on to sess_spawn as a
 * POST /browsers body and validated there). */
struct poolrules_config {
    long long size;              /* >= 1; POOLRULES_SIZE_DEFAULT */
    long long timeout_seconds;   /* a leased browser's idle timeout; POOLRULES_TIMEOUT_DEFAULT */
    double fill_rate_per_minute; /* >= 0, % of size per minute; POOLRULES_FILL_RATE_DEFAULT */
    char name[POOLRULES_NAME_MAX + 1];           /* "" = none */
    char start_url[POOLRULES_START_URL_MAX + 1]; /* "" = none */
};

/* Fills *out from a browser_pool_config (borrowed; NULL or a non-object
 * gives every default). The configuration is the server's own, written by
 * poolrules_validate_create or poolrules_plan_update; still, a value that is
 * missing, of another type or outside the rule above (a configuration of an
 * older shape) gives that field's default, and a string too long for its
 * buffer is read as "". Never fails. */
void poolrules_config_from_json(const json_t *config, struct poolrules_config *out);

/*
 * Validates a POST /browser_pools body and returns in *config a new
 * browser_pool_config (defaults filled: timeout_seconds 600,
 * fill_rate_per_minute 25, refresh_on_profile_update true when a profile is
 * given, headless/stealth/kiosk_mode false). Every problem is recorded in e;
 * returns 0 or E_INVALID (then *config is NULL). The caller checks the name
 * is unique in the project and the sum of pool sizes.
 */
int poolrules_validate_create(const json_t *body, json_t **config, struct err *e) WUR;

/* Which idle browsers an update rebuilds. */
enum poolrules_rebuild {
    POOLRULES_REBUILD_NONE,     /* existing browsers keep their configuration until discarded */
    POOLRULES_REBUILD_ALL_IDLE, /* discard_all_idle: every browser idle at update time */
};

struct poolrules_plan {
    json_t *config; /* the new browser_pool_config, owned */
    enum poolrules_rebuild rebuild;
    int profile_changed; /* the profile reference was attached, replaced or cleared */
    int profile_cleared; /* ... and it was a clear */
    long long size;      /* the new size (check the organization's pooled limit) */
    int size_changed;
    int name_changed; /* a new name: the caller checks uniqueness */
};

/*
 * Plans PATCH /browser_pools for a pool whose browser_pool_config is current
 * (borrowed). On success fills *out (release with poolrules_plan_clear) and
 * returns 0; on field errors records every one in e and returns E_INVALID
 * (then *out holds nothing). Omitted fields leave values unchanged.
 */
int poolrules_plan_update(const json_t *current, const json_t *body, struct poolrules_plan *out,
                          struct err *e) WUR;

/* Releases p's references and resets it; accepts NULL. */
void poolrules_plan_clear(struct poolrules_plan *p);

/* Per-lease settings of an acquire. */
struct poolrules_lease {
    long long acquire_timeout_seconds; /* -1 = default (the time to fill at the fill rate) */
    char name[POOLRULES_NAME_MAX + 1]; /* "" = none */
    json_t *tags;                      /* owned object, NULL = none */
    char start_url[POOLRULES_START_URL_MAX + 1]; /* "" = the pool's */
    int telemetry_given;                         /* 0: the browser keeps the pool's telemetry */
    json_t *telemetry; /* when given: the lease's active configuration, owned,
                          NULL = none */
};

/*
 * Validates an acquire body (may be NULL: no body) against the pool's
 * browser_pool_config pool_config (borrowed) and fills *out. The lease's
 * telemetry merges onto the pool's for that lease (export rejected, as for
 * pools). Returns 0 or E_INVALID with every problem in e.
 */
int poolrules_validate_acquire(const json_t *body, const json_t *pool_config,
                               struct poolrules_lease *out, struct err *e) WUR;

/* Releases the lease's references and resets it; accepts NULL. */
void poolrules_lease_clear(struct poolrules_lease *l);

/* POST /browser_pools/{id}/release: {session_id (required, non-empty),
 * reuse (boolean, default true)} and nothing else. Fills session_id (cap
 * bytes) and *reuse, or E_INVALID with one field error per problem. */
int poolrules_validate_release(const json_t *body, char *session_id, size_t cap, int *reuse,
                               struct err *e) WUR;
/* DELETE /browser_pools/{id}: {force (boolean, default false)} and nothing
 * else; an empty body is {}. */
int poolrules_validate_delete(const json_t *body, int *force, struct err *e) WUR;

#endif
