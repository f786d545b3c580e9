/*
 * telemetry_cfg: the telemetry rules of the interface document.
 *
 * Two JSON shapes meet here:
 *
 *  - the request, a BrowserTelemetryRequestConfig as clients send it
 *    ({enabled?, browser?, export?}), and
 *  - the active configuration, a BrowserTelemetryConfig as the service
 *    records it and returns it: every one of the ten categories is listed
 *    with an explicit boolean, control always carries its cdp exclusion list,
 *    and export is {otlp: {destination?, enabled}} or absent when the export
 *    state is unknown:
 *
 *      {"browser": {"control": {"enabled": true,
 *                               "cdp": {"excluded_methods": []}},
 *                   "connection": {"enabled": true}, ... ten categories ...},
 *       "export": {"otlp": {"enabled": false}}}
 *
 *    "No telemetry active" is a NULL pointer (the record shows null).
 *
 * Validation (telcfg_validate) and resolution (telcfg_resolve_*) are separate:
 * resolution assumes a request that validated in the same context and never
 * fails. Nothing here looks up OTLP destinations: the caller resolves the
 * selector returned by telcfg_destination and stores the id with
 * telcfg_set_destination. docs/domain-rules.md lists every reading made.
 */
#ifndef BD_DOMAIN_TELEMETRY_CFG_H
#define BD_DOMAIN_TELEMETRY_CFG_H

#include <jansson.h>

#include "core/err.h"

/* Where a request comes from; the rules differ per context. */
enum telcfg_ctx {
    TELCFG_SESSION_CREATE, /* POST /browsers: export honored */
    TELCFG_SESSION_UPDATE, /* PATCH /browsers: export accepted and ignored */
    TELCFG_POOL_CREATE,    /* POST /browser_pools: export rejected */
    TELCFG_POOL_UPDATE,    /* PATCH /browser_pools: export rejected */
    TELCFG_ACQUIRE,        /* acquire body, per lease: export rejected */
};

/* Number of telemetry categories. */
#define TELCFG_NCATEGORIES 10

/* Category names in the document's order (control first). */
extern const char *const telcfg_categories[TELCFG_NCATEGORIES];

/* 1 when name is one of the ten categories. */
int telcfg_is_category(const char *name);

/* 1 when name is a BrowserCdpCommandMethod value of the document. */
int telcfg_is_cdp_method(const char *name);

/* 1 when the category is on by default (control, connection, system, captcha). */
int telcfg_category_default(const char *name);

/*
 * Validates the BrowserTelemetryRequestConfig v found at path (e.g.
 * "telemetry") for ctx. v may be NULL (field omitted) or JSON null: both are
 * valid everywhere. Records one field error per problem in e and keeps going.
 * Returns 0, or E_INVALID when any problem was found.
 */
int telcfg_validate(const char *path, const json_t *v, enum telcfg_ctx ctx, struct err *e) WUR;

/*
 * 1 when the (valid) request leaves an existing configuration unchanged on
 * update: omitted, null, {} (and, on session update, a body holding only the
 * ignored export).
 */
int telcfg_request_is_noop(const json_t *req);

/*
 * Resolves the active configuration a create request starts
 * (TELCFG_SESSION_CREATE or TELCFG_POOL_CREATE). req must have passed
 * telcfg_validate in that context. Returns a new reference, or NULL when no
 * telemetry starts (telemetry omitted or null, enabled=false, or every
 * category disabled). The result's export is {otlp: {enabled: false}}; a
 * requested destination is written later with telcfg_set_destination.
 */
json_t *telcfg_resolve_create(const json_t *req);

/*
 * Resolves the configuration after an update request (ctx
 * TELCFG_SESSION_UPDATE or TELCFG_POOL_UPDATE) or for one lease
 * (TELCFG_ACQUIRE, current = the pool's configuration). current (borrowed)
 * may be NULL (nothing active). req must have passed telcfg_validate in ctx.
 * Returns a new reference, or NULL when nothing is active afterwards.
 * The export of the result is current's; when current has none it is a copy
 * of keep_export (the session's creation-time export, borrowed, may be NULL:
 * then export is omitted as unknown). For pool contexts with neither, export
 * is {otlp: {enabled: false}} since pools never export. The request's own
 * export is never used on update.
 */
json_t *telcfg_resolve_update(enum telcfg_ctx ctx, const json_t *current, const json_t *req,
                              const json_t *keep_export);

/* The lease's configuration: req (the acquire body's telemetry, validated as
 * TELCFG_ACQUIRE) merged onto the pool's configuration pool_cfg (may be
 * NULL). New reference or NULL. */
json_t *telcfg_resolve_lease(const json_t *pool_cfg, const json_t *req);

/*
 * The OTLP destination selector of a create request ({id} or {name}),
 * borrowed from req, or NULL when the request exports nothing.
 */
const json_t *telcfg_destination(const json_t *req);

/* Records that cfg (non-NULL active configuration) exports to the
 * destination with id dest_id: export becomes {otlp: {destination, enabled: true}}. */
void telcfg_set_destination(json_t *cfg, const char *dest_id);

/* 1 when cfg (may be NULL) captures the category name. */
int telcfg_category_on(const json_t *cfg, const char *name);

/* 1 when cfg (may be NULL) leaves method out of the cdp_command stream.
 * Exclusion affects telemetry only; the command is still relayed. */
int telcfg_method_excluded(const json_t *cfg, const char *method);

/* The value of the record's telemetry field: JSON null when cfg is NULL,
 * otherwise a deep copy (export absent when unknown). New reference. */
json_t *telcfg_to_record(const json_t *cfg);

#endif
