/*
 * telemetry/event: the pure pieces of telemetry (no state, no I/O, no
 * threads): the categories, an event's source, the network body limits, the
 * event object and its SSE frame. Implemented in event.c; tested in
 * tests/unit/test_telemetry_event.c. The capture (capture.h) and the engine
 * (telemetry.h) both build on it, so neither includes the other's header
 * for these: the telemetry files include each other without a circle.
 */
#ifndef BD_TELEMETRY_EVENT_H
#define BD_TELEMETRY_EVENT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Category bits, in telcfg_categories order (control first). */
enum telem_cat {
    TELEM_CONTROL,
    TELEM_CONNECTION,
    TELEM_SYSTEM,
    TELEM_CAPTCHA,
    TELEM_CONSOLE,
    TELEM_NETWORK,
    TELEM_PAGE,
    TELEM_INTERACTION,
    TELEM_SCREENSHOT,
    TELEM_PLATFORM,
    TELEM_NCATS
};

/* Categories captured from the browser's own CDP connection (capture.h). */
#define TELEM_BROWSER_MASK                                                                         \
    ((1u << TELEM_SYSTEM) | (1u << TELEM_CONSOLE) | (1u << TELEM_NETWORK) | (1u << TELEM_PAGE) |   \
     (1u << TELEM_INTERACTION) | (1u << TELEM_SCREENSHOT))

/* The category's name ("control", ...). */
const char *telem_cat_name(enum telem_cat c);
/* The category named name, or -1. */
int telem_cat_parse(const char *name);
/* The bit mask of the categories an active configuration cfg (may be NULL:
 * 0) captures. */
unsigned telem_cfg_mask(const json_t *cfg);

struct telem_src {
    const char *kind;  /* "cdp", "kernel_api", "extension" or "local_process" */
    const char *event; /* producer's own event name (e.g. a CDP method), may be NULL */
    int truncated;
};

/* Network body limits of the interface document. */
#define TELEM_BODY_STRUCTURED 8192u
#define TELEM_BODY_TEXT       4096u

/* How many bytes of a response body of MIME type mime (may carry
 * parameters, case-insensitive) are kept: TELEM_BODY_STRUCTURED for JSON,
 * XML and form data, TELEM_BODY_TEXT for other text, 0 for binary (the body
 * is excluded). */
size_t telem_body_limit(const char *mime);
/* 1 when a response names no media type (missing or empty): its body is
 * then judged by its bytes (telem_bytes_are_text) and kept as other text. A
 * declared type, application/octet-stream included, is taken at its word. */
int telem_mime_missing(const char *mime);
/* 1 when n bytes look like text: valid UTF-8 (a sequence cut by the end is
 * allowed) without NUL bytes. */
int telem_bytes_are_text(const unsigned char *p, size_t n);
/* The length of the longest prefix of s (len bytes) that is at most limit
 * bytes and does not split a UTF-8 sequence. */
size_t telem_utf8_cut(const char *s, size_t len, size_t limit);
/* The event object {type, category, ts (Unix us), session_id, source,
 * data, truncated?} (src may be NULL: kind "kernel_api"; data stolen, NULL
 * = {}). New reference. */
json_t *telem_event_json(const char *session_id, enum telem_cat cat, const char *type,
                         int64_t ts_us, const struct telem_src *src, json_t *data);
/* One SSE frame for event text (JSON, len bytes) with sequence seq: owned,
 * *out_len bytes. */
char *telem_sse_frame(uint64_t seq, const char *event, size_t len, size_t *out_len);

#endif
