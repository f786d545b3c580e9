/* libFuzzer target: a telemetry request config through validation and, when
 * valid, through every resolution path (create, update, lease) in every
 * context. Must never crash or leak. */
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "core/err.h"
#include "domain/telemetry_cfg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void exercise(const json_t *cfg)
{
    for (size_t i = 0; i < TELCFG_NCATEGORIES; i++)
        (void)telcfg_category_on(cfg, telcfg_categories[i]);
    (void)telcfg_method_excluded(cfg, "Page.navigate");
    json_t *rec = telcfg_to_record(cfg);
    json_decref(rec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t je;
    json_t *req =
        json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (req == NULL)
        return 0;
    static const enum telcfg_ctx ctxs[] = {TELCFG_SESSION_CREATE, TELCFG_SESSION_UPDATE,
                                           TELCFG_POOL_CREATE, TELCFG_POOL_UPDATE, TELCFG_ACQUIRE};
    json_t *base = json_pack("{s:b}", "enabled", 1);
    json_t *current = telcfg_resolve_create(base);
    for (size_t i = 0; i < sizeof ctxs / sizeof ctxs[0]; i++) {
        struct err e;
        err_init(&e);
        if (telcfg_validate("telemetry", req, ctxs[i], &e) != 0)
            continue;
        json_t *out;
        if (ctxs[i] == TELCFG_SESSION_CREATE || ctxs[i] == TELCFG_POOL_CREATE) {
            out = telcfg_resolve_create(req);
            if (out && telcfg_destination(req))
                telcfg_set_destination(out, "dest");
        } else if (ctxs[i] == TELCFG_ACQUIRE) {
            out = telcfg_resolve_lease(current, req);
        } else {
            out = telcfg_resolve_update(ctxs[i], current, req, NULL);
            json_t *again = telcfg_resolve_update(ctxs[i], NULL, req, NULL);
            exercise(again);
            json_decref(again);
        }
        (void)telcfg_request_is_noop(req);
        exercise(out);
        json_decref(out);
    }
    json_decref(current);
    json_decref(base);
    json_decref(req);
    return 0;
}
