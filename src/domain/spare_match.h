/*
 * spare_match: which pre-launched spare browser (runtime/spares.h) can serve
 * a POST /browsers, decided from the validated request alone.
 *
 * A spare was launched for no organization with the default settings of one
 * of two kinds: `{}` (headful: the interface document's headless defaults to
 * false) and `{"headless": true}`. A create can take one when every field that
 * decides how the browser is launched (its command line, its sandbox, its
 * profile folder, its egress listener) equals what the spare was launched
 * with. The other fields are applied at hand-out, to the running browser:
 * name, tags, timeout_seconds, start_url (a navigation), a headless
 * browser's viewport (its page is sized over CDP, as a headless launch sizes
 * it; issue 39.2), telemetry without an
 * OTLP export (configured in memory), proxy and network (the egress listener
 * is given the owner's selection and rules), region (checked like any
 * create).
 *
 * Pure: no I/O. tests/unit/test_spare_match.c names every field.
 */
#ifndef BD_DOMAIN_SPARE_MATCH_H
#define BD_DOMAIN_SPARE_MATCH_H

#include "domain/session_rules.h"

enum spare_kind {
    SPARE_NONE = -1,    /* needs a launch of its own (a cold create) */
    SPARE_HEADFUL = 0,  /* launched as for {} */
    SPARE_HEADLESS = 1, /* launched as for {"headless": true} */
    SPARE_KINDS = 2,
};

/* The kind of spare that can serve the validated create c, or SPARE_NONE
 * with *field (may be NULL) naming the first launch-affecting field that
 * differs from a spare's launch: "stealth", "kiosk_mode", "gpu", "memory",
 * "viewport" (headful only), "profile", "telemetry.export", "chrome_policy", "extensions"
 * or "vaults". */
enum spare_kind spare_match(const struct sessrules_create *c, const char **field);

/* The body a spare of kind k is launched with: "{}" or
 * "{\"headless\":true}" (static strings). */
const char *spare_kind_body(enum spare_kind k);
/* "headful" or "headless" (for logs and the benchmark). */
const char *spare_kind_name(enum spare_kind k);

#endif
