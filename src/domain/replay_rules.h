/*
 * replay_rules: the pure rules of replays and the live view. The options of
 * POST /browsers/{id}/replays (SESSION_API.md section 6), which replay ids
 * may name a file, and the live view's token (ORG.SESSION.MAC, MAC an
 * HMAC-SHA256 under the server's key, 128 bits in hex). No I/O.
 */
#ifndef BD_DOMAIN_REPLAY_RULES_H
#define BD_DOMAIN_REPLAY_RULES_H

#include <jansson.h>
#include <stddef.h>

#include "core/err.h"

#define REPLAY_DEFAULT_FPS 10
#define REPLAY_ID_MAX      64

struct replay_opts {
    int framerate;   /* 1..max_fps, default REPLAY_DEFAULT_FPS */
    int max_seconds; /* 1..max_seconds_cap, default the cap */
};

/* Parses a start body: NULL means no options (the client sent nothing,
 * {} or null). framerate 1 to 20 (60 when gpu), max_duration_in_seconds 1 to
 * max_seconds_cap, record_audio a boolean that must not be true (no audio
 * device), nothing else. Every problem is recorded in e; returns 0 or
 * E_INVALID. */
int replay_parse_start(const json_t *body, int gpu, int max_seconds_cap, struct replay_opts *out,
                       struct err *e) WUR;

/* 1 when id may name a replay's files: 1 to REPLAY_ID_MAX lowercase letters
 * and digits (ids are made by crypto_new_id). */
int replay_valid_id(const char *id);

#define LIVEVIEW_MAC_HEX 32 /* hex digits of the token's MAC */

/* The token's MAC for org and session under key: LIVEVIEW_MAC_HEX lowercase
 * hex digits and a NUL in out. */
void liveview_token_mac(const unsigned char *key, size_t keylen, const char *org, const char *sid,
                        char out[LIVEVIEW_MAC_HEX + 1]);
/* Splits token (untrusted) into org and session (NUL-terminated, each
 * shorter than its cap) and checks its MAC in constant time. 0 when the
 * token is ours, -1 otherwise (org and sid are then unspecified). */
int liveview_token_parse(const unsigned char *key, size_t keylen, const char *token, char *org,
                         size_t org_cap, char *sid, size_t sid_cap) WUR;

#endif
