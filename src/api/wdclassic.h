/*
 * wdclassic: classic WebDriver HTTP (W3C WebDriver, Selenium Grid's paths)
 * beside WebDriver BiDi; see docs/webdriver.md.
 *
 * - POST /session, /wd/hub/session (API key as Bearer or Basic): creates a
 *   browserd session from the capabilities (browserd:options is the create
 *   body; browserd:options.pool acquires from that pool instead), starts its
 *   ChromeDriver and answers {value: {sessionId (the session id),
 *   capabilities (with se:cdp, and webSocketUrl when asked)}}.
 * - /session/{id}/... and /wd/hub/session/{id}/...: relayed to the session's
 *   driver; 404 invalid session id for a session the key may not see.
 *   DELETE /session/{id} ends the session (or releases it to its pool).
 * - /browser/wd/{token}/...: the same commands for the one session of the
 *   signed token (the Browser record's webdriver_url); POST .../session
 *   answers with the existing session; DELETE .../session/{id} only leaves.
 * - GET /status, /wd/hub/status: Grid-style readiness.
 * Errors are WebDriver's {value: {error, message, stacktrace}}.
 */
#ifndef BD_API_WDCLASSIC_H
#define BD_API_WDCLASSIC_H

#include "api/api.h"

int wdc_status(struct req *rq, struct resp *rs);
int wdc_new_session(struct req *rq, struct resp *rs);
int wdc_command(struct req *rq, struct resp *rs);
int wdc_token_new_session(struct req *rq, struct resp *rs);
int wdc_token_command(struct req *rq, struct resp *rs);

/* Why a new-session body was refused: the WebDriver status, error code and
 * message to answer. */
struct wdc_refusal {
    int status;        /* 400 for a malformed body, 500 for another browser */
    const char *error; /* "invalid argument" or "session not created" (static) */
    char message[256];
};

/* The capabilities of a W3C new-session body (body: the request's JSON
 * object, borrowed, the tenant's bytes as parsed): capabilities.alwaysMatch
 * with the missing keys filled from the first capabilities.firstMatch entry,
 * as a new reference in *out (json_decref it). Refused (E_INVALID, *out NULL,
 * *why filled) when capabilities, alwaysMatch or that firstMatch entry is not
 * an object, browserd:options is not an object or its pool not a string, or
 * browserName names a browser other than chrome or chromium. Pure: no I/O,
 * no globals. */
int wdc_caps_parse(const json_t *body, json_t **out, struct wdc_refusal *why)
    __attribute__((warn_unused_result));

#endif
