/*
 * viewport: the BrowserViewport record (width, height, optional refresh_rate),
 * its image defaults, the refresh rate chosen from the resolution, and the
 * document's known-good presets. Pure; see docs/domain-fields.md for the
 * thresholds chosen.
 */
#ifndef BD_DOMAIN_VIEWPORT_H
#define BD_DOMAIN_VIEWPORT_H

#include <jansson.h>

#include "core/err.h"

struct viewport {
    int width, height, refresh_rate; /* refresh_rate 0 = not given (before defaulting) */
};

/* Parses a BrowserViewport at `path` ("viewport"): width and height required
 * integers >= 1 (0, negatives, reals, strings, booleans and values > INT_MAX
 * are rejected); refresh_rate an optional integer >= 1 (0 in *out when
 * omitted). allow_force: the session update also accepts an optional boolean
 * `force` (written to *force, 0 when omitted; force may be NULL otherwise);
 * elsewhere force is an unknown field. No other properties. Every problem is
 * recorded in e; returns 0 or E_INVALID (then *out is unspecified). */
int viewport_parse(const char *path, const json_t *v, int allow_force, struct viewport *out,
                   int *force, struct err *e) WUR;

/* The image's screen when a session asks for none (and when a stored record
 * holds no usable viewport, launch_settings.h). */
#define VIEWPORT_DEFAULT_WIDTH  1920
#define VIEWPORT_DEFAULT_HEIGHT 1080

/* Image defaults: VIEWPORT_DEFAULT_WIDTH x VIEWPORT_DEFAULT_HEIGHT at the rate
 * viewport_refresh_for() gives it: 25 Hz; GPU images 60 Hz. */
void viewport_default(int gpu, struct viewport *out);

/* Refresh rate chosen when refresh_rate is omitted (higher resolutions get
 * lower rates). By pixel count w*h:
 *   non-GPU: <= 1280*800 -> 60; <= 1920*1200 -> 25; larger -> 10
 *   GPU:     <= 1920*1200 -> 60; <= 2560*1600 -> 30; larger -> 25
 * Non-positive sizes give the smallest-size rate (60). */
int viewport_refresh_for(int width, int height, int gpu);

/* Fills refresh_rate from viewport_refresh_for() when it is 0. */
void viewport_fill_rate(struct viewport *vp, int gpu);

/* 1 when the viewport (with its rate; a 0 rate is first filled as above) is in
 * the document's known-good presets (gpu=0) or the GPU recommended list at 60,
 * 30, 25 or 10 Hz (gpu=1), else 0. Callers log a warning, never reject. */
int viewport_is_known_good(const struct viewport *vp, int gpu);

/* {width, height, refresh_rate} (refresh_rate left out when 0). New reference. */
json_t *viewport_to_json(const struct viewport *vp);

#endif
