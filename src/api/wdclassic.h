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

#endif
