/*
 * replframe: the framed protocol between the server and a session's REPL
 * process (runtime/repl, runtime-js/repl.mjs; docs/repl.md). A frame is a
 * 4-byte big-endian length and that many bytes of one JSON object.
 *
 * Server to REPL: {"code": string}. REPL to server, one frame each:
 *   {"t":"text", "channel":"write"|"stdout"|"stderr", "text": string}
 *   {"t":"image", "mime_type":"image/png"|"image/jpeg"|"image/webp"|"image/gif",
 *    "data_b64": string}
 *   {"t":"done", "success": bool, "error"?: string, "stack"?: string}
 * The REPL process runs the tenant's code: every byte it sends is untrusted
 * (fuzzed: fuzz/fuzz_replframe.c). Pure functions, no I/O.
 */
#ifndef BD_DOMAIN_REPLFRAME_H
#define BD_DOMAIN_REPLFRAME_H

#include <jansson.h>
#include <stddef.h>

#include "core/err.h"

enum replmsg_kind { REPLMSG_TEXT = 1, REPLMSG_IMAGE, REPLMSG_DONE };

/* Takes the first frame off p[0..n): 1 with *msg (a new reference to a
 * checked object of the shapes above), *kind and *used (bytes consumed);
 * 0 when the frame is not complete yet; -1 when the bytes break the
 * protocol (a frame longer than max, not one JSON object, an unknown "t",
 * a missing or mistyped field; said in e). */
int replframe_next(const char *p, size_t n, size_t max, size_t *used, json_t **msg,
                   enum replmsg_kind *kind, struct err *e);

/* The frame of a JSON object (its length prefix and compact text), in a
 * new allocation of *len bytes; NULL when it cannot be encoded. */
char *replframe_encode(const json_t *obj, size_t *len);

#endif
