/*
 * launch_settings: the part of a session's stored settings document (the
 * record session/session.c writes at create and rewrites on PATCH) that
 * decides how its browser is launched and shown: headless, stealth,
 * kiosk_mode, gpu, the viewport with its refresh rate, memory,
 * timeout_seconds, chrome_policy and network. One parser for every reader:
 * the launch and the restart, the resize planner's current state, the
 * computer controls, replays, the live view and its viewers, the process
 * API and the egress proxy's hooks.
 *
 * The document is the server's own, written from a create that passed
 * sessrules_validate_create, so every key is present and well formed. The
 * parser still never fails: a missing key or a value of another type (a
 * record of an older shape) gives that field's default below.
 *
 * Not here: what the other modules own in the same document and read
 * through their hooks (profile, proxy, telemetry, extensions, egress_url,
 * devtools_port, pool), and what a lease or an update rewrites (name, tags,
 * start_url). Pure.
 */
#ifndef BD_DOMAIN_LAUNCH_SETTINGS_H
#define BD_DOMAIN_LAUNCH_SETTINGS_H

#include <jansson.h>

#include "domain/viewport.h"

/* A document without "headless" is taken as headless: no display is
 * assumed to exist (no live view, no screen to act on). A create without it
 * is headful (sessrules_validate_create) and always writes it. */
#define LAUNCH_HEADLESS_DEFAULT 1

struct launch_settings {
    int headless, stealth, kiosk_mode, gpu; /* 0 or 1 */
    /* width and height >= 1 (VIEWPORT_DEFAULT_WIDTH x VIEWPORT_DEFAULT_HEIGHT
     * when the stored one has no usable size); refresh_rate >= 1 (the one
     * viewport_refresh_for() gives when none is stored). */
    struct viewport viewport;
    long long memory_bytes;    /* "memory", e.g. "8GiB", in bytes (SESSRULES_MEMORY_DEFAULT) */
    long long timeout_seconds; /* idle timeout (SESSRULES_TIMEOUT_DEFAULT) */
    /* Borrowed from the document (valid while it lives): the objects as
     * stored, NULL when absent, not an object, or (chrome_policy) empty. */
    const json_t *chrome_policy;
    const json_t *network;
};

/* Fills *out from a session's settings document (borrowed; NULL or a
 * non-object gives every default). Never fails. */
void launch_settings_from_json(const json_t *doc, struct launch_settings *out);

/* The same from the document's JSON text (a session row's data; NULL or text
 * that does not parse gives every default), for readers of the scalar
 * settings: chrome_policy and network are left NULL (the document they would
 * point into is gone on return). */
void launch_settings_from_text(const char *data, struct launch_settings *out);

/* The bytes of a memory setting ("1GiB" .. "16GiB": its leading decimal
 * digits, in GiB); 0 when it has no digits or the bytes would not fit in a
 * long long. */
long long launch_memory_bytes(const char *memory);

#endif
