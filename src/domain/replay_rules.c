#include "domain/replay_rules.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/crypto.h"
#include "domain/fields.h"

int replay_parse_start(const json_t *body, int gpu, int max_seconds_cap, struct replay_opts *out,
                       struct err *e)
{
    out->framerate = REPLAY_DEFAULT_FPS;
    out->max_seconds = max_seconds_cap;
    if (!body)
        return 0;
    static const char *const known[] = {"framerate", "max_duration_in_seconds", "record_audio",
                                        NULL};
    int rc = fields_check_known("", body, known, e);
    int max_fps = gpu ? 60 : 20;
    const json_t *v = json_object_get(body, "framerate");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > max_fps)
            rc = err_field(e, "framerate", "must be an integer from 1 to %d%s", max_fps,
                           gpu ? "" : " (more than 20 needs a GPU session)");
        else
            out->framerate = (int)json_integer_value(v);
    }
    v = json_object_get(body, "max_duration_in_seconds");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > max_seconds_cap)
            rc = err_field(e, "max_duration_in_seconds",
                           "must be an integer from 1 to %d (this server's cap per recording)",
                           max_seconds_cap);
        else
            out->max_seconds = (int)json_integer_value(v);
    }
    v = json_object_get(body, "record_audio");
    if (v && !json_is_null(v)) {
        if (!json_is_boolean(v))
            rc = err_field(e, "record_audio", "must be a boolean, not %s", fields_type_name(v));
        else if (json_is_true(v))
            rc = err_field(e, "record_audio",
                           "audio is not recorded by this server (sessions have no audio "
                           "device); send false or leave it out");
    }
    return rc ? E_INVALID : 0;
}

int replay_valid_id(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > REPLAY_ID_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9')))
            return 0;
    return 1;
}

void liveview_token_mac(const unsigned char *key, size_t keylen, const char *org, const char *sid,
                        char out[LIVEVIEW_MAC_HEX + 1])
{
    char msg[512];
    int n = snprintf(msg, sizeof msg, "live-view\n%.200s\n%.200s", org, sid);
    uint8_t mac[32];
    crypto_hmac_sha256(key, keylen, msg, (size_t)n, mac);
    for (int i = 0; i < LIVEVIEW_MAC_HEX / 2; i++)
        snprintf(out + 2 * i, 3, "%02x", mac[i]);
}

int liveview_token_parse(const unsigned char *key, size_t keylen, const char *token, char *org,
                         size_t org_cap, char *sid, size_t sid_cap)
{
    const char *d1 = strchr(token, '.');
    const char *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
    if (!d1 || !d2 || d1 == token || d2 == d1 + 1)
        return -1;
    size_t no = (size_t)(d1 - token), ns = (size_t)(d2 - d1 - 1);
    if (no >= org_cap || ns >= sid_cap || no > 200 || ns > 200 ||
        strlen(d2 + 1) != LIVEVIEW_MAC_HEX)
        return -1;
    memcpy(org, token, no);
    org[no] = '\0';
    memcpy(sid, d1 + 1, ns);
    sid[ns] = '\0';
    char want[LIVEVIEW_MAC_HEX + 1];
    liveview_token_mac(key, keylen, org, sid, want);
    return crypto_equal(want, d2 + 1, LIVEVIEW_MAC_HEX) ? 0 : -1;
}
