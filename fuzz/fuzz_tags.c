/*
 * libFuzzer target for domain/fields (tags first, then the other field
 * validators that read the same untrusted JSON: names, selectors, vault
 * references) plus viewport_parse and proxysel_parse. Input: any JSON text.
 */
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "domain/fields.h"
#include "domain/proxysel.h"
#include "domain/viewport.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t je;
    json_t *v = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!v)
        return 0;
    struct err e;
    err_init(&e);
    (void)fields_check_tags("tags", v, &e);
    err_init(&e);
    (void)fields_check_name("name", v, FIELDS_EMPTY_OK, &e);
    err_init(&e);
    if (fields_check_selector("profile", v, SEL_IGNORE_SAVE_CHANGES | SEL_EMPTY_CLEARS, &e) == 0)
        (void)fields_selector_is_clear(v);
    err_init(&e);
    (void)fields_check_selector("profile", v, SEL_SAVE_CHANGES, &e);
    err_init(&e);
    (void)fields_check_vault_ref("vaults[0]", v, &e);

    struct viewport vp;
    int force;
    err_init(&e);
    if (viewport_parse("viewport", v, 1, &vp, &force, &e) == 0) {
        viewport_fill_rate(&vp, force);
        (void)viewport_is_known_good(&vp, force);
        json_decref(viewport_to_json(&vp));
    }

    struct proxysel sel;
    err_init(&e);
    if (proxysel_parse(v, 1, &sel, &e) == 0) {
        static const struct proxysel_candidate cands[] = {
            {"prx_a", "corp", "p1", 1},
            {"prx_b", "corp", "p1", 1},
            {"prx_c", "edge", NULL, 1},
        };
        struct proxysel_egress eg;
        err_init(&e);
        if (proxysel_resolve(&sel, 1, "p1", cands, 3, "prx_s", &eg, &e) == 0)
            json_decref(proxysel_to_json(&sel, &eg));
    }
    json_decref(v);
    return 0;
}
