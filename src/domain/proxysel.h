/*
 * proxysel: the session's proxy selection (`proxy` object, deprecated
 * `proxy_id` and `disable_default_proxy`), its resolution to an egress (direct
 * or one proxy id) and the BrowserProxy record of responses.
 *
 * The selection is what the client asked for and what the store keeps; the
 * egress is derived from it, the browser's stealth flag and the proxies that
 * exist. Nothing here reads or writes stealth: "Proxy changes alter egress
 * only, not stealth or captcha-solver behavior." Pure; see
 * docs/domain-fields.md for the readings of the deprecated fields.
 */
#ifndef BD_DOMAIN_PROXYSEL_H
#define BD_DOMAIN_PROXYSEL_H

#include <jansson.h>
#include <stddef.h>

#include "core/err.h"

#define PROXYSEL_REF_MAX 255

enum proxysel_kind {
    PROXYSEL_UNCHANGED, /* update only: keep the current selection */
    PROXYSEL_DIRECT,    /* mode direct: no proxy regardless of stealth */
    PROXYSEL_DEFAULT,   /* mode default: the stealth-derived default */
    PROXYSEL_ID,        /* a proxy by id (ref) */
    PROXYSEL_NAME,      /* a proxy by name (ref); resolved to an id, then stored as ID */
};

struct proxysel {
    enum proxysel_kind kind;
    char ref[PROXYSEL_REF_MAX + 1]; /* id or name for ID/NAME, "" otherwise */
};

/* Reads proxy, proxy_id and disable_default_proxy from a create or update body
 * (the whole body object; other keys are ignored). Rules:
 *  - proxy: exactly one of mode (direct|default), id (string, 1-255), name
 *    (string, 1-255); no other properties; {} invalid; null invalid.
 *  - proxy cannot be combined with proxy_id or disable_default_proxy (the
 *    presence of either key, whatever its value, is the combination).
 *  - proxy_id: a non-empty string -> ID; "" removes the proxy -> DEFAULT;
 *    null -> as if omitted.
 *  - disable_default_proxy: boolean; true -> DIRECT unless a non-empty proxy_id
 *    selects a proxy (a selected proxy is used regardless of stealth); false
 *    asks for nothing (UNCHANGED on update, DEFAULT on create).
 *  - nothing given: UNCHANGED on update, DEFAULT on create.
 * Every problem is recorded in e (paths "proxy", "proxy.mode", "proxy_id",
 * "disable_default_proxy"); returns 0 or E_INVALID. */
int proxysel_parse(const json_t *body, int is_update, struct proxysel *out, struct err *e) WUR;

/* The selection after an update: `change` unless it is UNCHANGED, then
 * `current`. */
void proxysel_merge(const struct proxysel *current, const struct proxysel *change,
                    struct proxysel *out);

/* A proxy the browser could use, as the store knows it (all borrowed).
 * project_id NULL = the organization without projects; active = usable
 * (not deleted or disabled). */
struct proxysel_candidate {
    const char *id;
    const char *name;
    const char *project_id;
    int active;
};

enum proxysel_egress_kind { PROXYSEL_EGRESS_DIRECT, PROXYSEL_EGRESS_PROXY };

struct proxysel_egress {
    enum proxysel_egress_kind kind;
    char proxy_id[PROXYSEL_REF_MAX + 1]; /* for PROXYSEL_EGRESS_PROXY */
};

/* Resolves a selection to the egress of a browser:
 *  - DIRECT -> direct;
 *  - DEFAULT (and UNCHANGED, the selection of a browser that never chose) ->
 *    default_stealth_proxy_id for a stealth browser when it is non-NULL and
 *    non-empty, direct otherwise;
 *  - ID -> that proxy, which must exist among the candidates and be in the
 *    browser's project; otherwise E_NOTFOUND, code "proxy_not_found";
 *  - NAME -> the one active candidate of the browser's project with that name;
 *    zero or several such proxies are E_INVALID (field "proxy.name"); a name
 *    matching only active proxies of other projects is E_NOTFOUND
 *    "proxy_not_found".
 * project_id and candidate project ids compare equal when both are NULL.
 * stealth only picks the default; it is never changed. */
int proxysel_resolve(const struct proxysel *sel, int stealth, const char *project_id,
                     const struct proxysel_candidate *cands, size_t ncands,
                     const char *default_stealth_proxy_id, struct proxysel_egress *out,
                     struct err *e) WUR;

/* The selection to store once resolved: NAME becomes ID of the resolved proxy
 * ("Selected proxies are returned by stable ID"); anything else is copied. */
void proxysel_pin(const struct proxysel *sel, const struct proxysel_egress *eg,
                  struct proxysel *out);

/* The BrowserProxy record of a stored selection: {"mode":"direct"},
 * {"mode":"default"} (also for UNCHANGED) or {"id":"..."}; a NAME selection is
 * returned as {"id": eg->proxy_id} when eg resolves it to a proxy (eg may be
 * NULL otherwise, then {"mode":"default"}). New reference. */
json_t *proxysel_to_json(const struct proxysel *sel, const struct proxysel_egress *eg);

/* The deprecated proxy_id of the session record: the selected proxy id, or
 * NULL when no proxy is selected (leave the field out). Borrowed from sel. */
const char *proxysel_legacy_id(const struct proxysel *sel);

#endif
