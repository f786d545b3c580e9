/*
 * session_rules: the session create body (POST /browsers, KERNEL_API.md) and
 * the session update (PATCH /browsers/{id_or_name}, the interface document).
 *
 * Pure: the create validator turns a body into normalized settings; the update
 * planner turns the session's current state plus a PATCH body into the new
 * state and the ordered list of actions the runtime must take. Lookups that
 * need the store (name uniqueness, profile / proxy / extension / destination
 * existence, entitlements such as gpu) are the caller's; the outputs say when
 * they are due. Readings of the document: docs/domain-rules.md.
 */
#ifndef BD_DOMAIN_SESSION_RULES_H
#define BD_DOMAIN_SESSION_RULES_H

#include <jansson.h>

#include "core/err.h"
#include "domain/proxysel.h"
#include "domain/viewport.h"

/* Limits of the create/update bodies. */
#define SESSRULES_TIMEOUT_MIN 10
/* The lowest minimum an operator may allow instead
 * (BROWSERD_MIN_SESSION_TIMEOUT_SECONDS, docs/operator.md). */
#define SESSRULES_TIMEOUT_FLOOR   1
#define SESSRULES_TIMEOUT_MAX     259200
#define SESSRULES_TIMEOUT_DEFAULT 60
#define SESSRULES_START_URL_MAX   2048
#define SESSRULES_NAME_MAX        255
/* Not in either document: sessions get the pools' extension limit. */
#define SESSRULES_EXTENSIONS_MAX 20
#define SESSRULES_REGION_DEFAULT "us-east"
/* The regions a session or pool may name (KERNEL_API_NEWER.md 1.3), as
 * listed in error messages. */
#define SESSRULES_REGIONS_TEXT "us-east, eu-west, ap-southeast"

/* Whether region is one of SESSRULES_REGIONS_TEXT. */
int sessrules_region_known(const char *region);
/* Not in either document: memory when the create body omits it. */
#define SESSRULES_MEMORY_DEFAULT "8GiB"

/* Normalized POST /browsers settings. Every json_t is an owned reference or
 * NULL (not given); release with sessrules_create_clear(). */
struct sessrules_create {
    int headless, stealth, kiosk_mode, gpu;
    long long timeout_seconds;
    char region[16];
    char memory[8];
    char name[SESSRULES_NAME_MAX + 1]; /* "" = no name */
    json_t *tags;                      /* object; NULL = no tags */
    struct viewport viewport;          /* given, or the image default; rate filled */
    int viewport_given;
    json_t *profile; /* selector {id} or {name} (save_changes removed) */
    int profile_save_changes;
    struct proxysel proxy;                       /* DEFAULT when nothing was asked */
    json_t *network;                             /* BrowserNetworkConfig as sent */
    json_t *telemetry;                           /* active configuration, NULL = none */
    json_t *telemetry_destination;               /* OTLP selector to resolve, NULL = none */
    json_t *chrome_policy;                       /* as sent */
    json_t *extensions;                          /* array of selectors as sent */
    json_t *vaults;                              /* array of VaultReference as sent */
    char start_url[SESSRULES_START_URL_MAX + 1]; /* "" = none */
};

/*
 * Validates a POST /browsers body (the body object itself; "{}" is valid) and
 * fills *out (which is first reset). Unknown fields are rejected naming the
 * field; every problem is recorded in e. Returns 0 or E_INVALID (then *out
 * holds nothing that needs clearing). The caller still checks: the gpu
 * entitlement, name uniqueness, that the profile, proxy, extensions, vaults
 * and OTLP destination exist (then telcfg_set_destination on out->telemetry).
 */
int sessrules_validate_create(const json_t *body, struct sessrules_create *out, struct err *e) WUR;
/* The same with timeout_seconds allowed down to min_timeout_s instead of
 * SESSRULES_TIMEOUT_MIN (the operator's BROWSERD_MIN_SESSION_TIMEOUT_SECONDS;
 * kept within SESSRULES_TIMEOUT_FLOOR..SESSRULES_TIMEOUT_MIN). */
int sessrules_validate_create_min(const json_t *body, long long min_timeout_s,
                                  struct sessrules_create *out, struct err *e) WUR;

/* Releases the references held by c and resets it; accepts NULL. */
void sessrules_create_clear(struct sessrules_create *c);

/* What the update planner needs to know about a live session. The json_t
 * members are owned references (NULL allowed); release with
 * sessrules_state_clear(). */
struct sessrules_state {
    char name[SESSRULES_NAME_MAX + 1]; /* "" = no name */
    json_t *tags;                      /* object, NULL = no tags */
    int profile_loaded;
    struct proxysel proxy;    /* the stored selection */
    json_t *telemetry;        /* active configuration, NULL = none */
    json_t *telemetry_export; /* creation-time export ({otlp: ...}), NULL = unknown */
    struct viewport viewport;
    int gpu;              /* picks the refresh rate of a resize without one */
    int live_view_active; /* a live view client is attached */
    int recording_active; /* a replay recording is running */
    int stealth, headless;
    char start_url[SESSRULES_START_URL_MAX + 1]; /* last URL asked for, "" = none */
};

/* Releases the references held by s and resets it; accepts NULL. */
void sessrules_state_clear(struct sessrules_state *s);

/* Deep copy of src into dst (dst is overwritten, not cleared first). */
void sessrules_state_copy(struct sessrules_state *dst, const struct sessrules_state *src);

/* Runtime actions of an update, in the order they must run. */
enum sessrules_action {
    SESSACT_RENAME,          /* store next.name (caller checked uniqueness) */
    SESSACT_RETAG,           /* store next.tags */
    SESSACT_SWITCH_EGRESS,   /* resolve next.proxy and switch the egress proxy */
    SESSACT_LOAD_PROFILE,    /* load plan.profile (restarts the browser) */
    SESSACT_RESIZE,          /* set next.viewport (see resize_force, restart_recording) */
    SESSACT_APPLY_TELEMETRY, /* capture per next.telemetry (NULL: stop) */
    SESSACT_NAVIGATE,        /* navigate to next.start_url, best-effort, errors dropped */
};
#define SESSRULES_MAX_ACTIONS 7

struct sessrules_plan {
    struct sessrules_state next; /* the state after the update */
    enum sessrules_action actions[SESSRULES_MAX_ACTIONS];
    size_t nactions;
    json_t *profile;              /* LOAD_PROFILE: selector {id} or {name}, owned */
    int profile_save_changes;     /* LOAD_PROFILE: save back when the session ends */
    int resize_force;             /* RESIZE: force was true */
    int restart_recording;        /* RESIZE with force while recording: stop gracefully and
                                     restart at the new resolution as a separate segment */
    int start_url_overrides_tabs; /* NAVIGATE in the same update as LOAD_PROFILE */
    int name_check_unique;        /* next.name is a new non-empty name: the caller must check
                                     it is unique among active sessions of the project */
};

/*
 * Plans PATCH /browsers for a session in state cur with body. On success fills
 * *out (release with sessrules_plan_clear) and returns 0. Failures, with *out
 * holding nothing:
 *  - E_INVALID: field errors (every one recorded; unknown fields included);
 *  - E_CONFLICT, code "profile_already_loaded": profile given while
 *    cur->profile_loaded ("Allowed only if the session has no profile loaded");
 *  - E_CONFLICT, code "viewport_locked": a resize while a live view or
 *    recording is active and force is false.
 * Field errors win over conflicts; two conflicts are reported together (the
 * second as a detail).
 */
int sessrules_plan_update(const struct sessrules_state *cur, const json_t *body,
                          struct sessrules_plan *out, struct err *e) WUR;

/* 1 when plan contains action a. */
int sessrules_plan_has(const struct sessrules_plan *plan, enum sessrules_action a);

/* Releases the references held by p and resets it; accepts NULL. */
void sessrules_plan_clear(struct sessrules_plan *p);

#endif
