/*
 * webdriver: the WebDriver BiDi endpoint behind webdriver_ws_url
 * (GET /browser/webdriver?jwt=TOKEN). Each session gets, on its first BiDi
 * connection, a ChromeDriver attached to its running Chromium
 * (runtime/chromedriver.h, kept in the registry runtime/wdreg.h); client
 * WebSockets, after their opening exchange (proxy/bidiopen.h), are relayed to that driver's
 * BiDi socket by the CDP relay engine. The client's first session.new is
 * answered here with the driver's session (the driver already made it).
 * See docs/webdriver.md.
 */
#ifndef BD_API_WEBDRIVER_H
#define BD_API_WEBDRIVER_H

#include "api/api.h"

/* Registers the module's session_ext (started: register the session in
 * app->drivers; ending: stop its driver). Call once in main.c before
 * sess_recover, with app->drivers (runtime/wdreg.h) and
 * app->bidi_openings (proxy/bidiopen.h) made; main.c stops both. */
void webdriver_init(struct app *app);

/* GET /browser/webdriver (AUTH_NONE; the signed token is the credential):
 * 401 for a missing, tampered or expired token (audience "webdriver"), 404
 * when the session is deleted or ended, 400 without a WebSocket upgrade, 503
 * when the driver cannot start; otherwise 101 and the relay. */
int webdriver_upgrade(struct req *rq, struct resp *rs);

struct live;
struct wdreg_view;
/* The driver of live session session_id (l: a reference the caller holds),
 * started or restarted as a BiDi connection would (runtime/wdreg.h): fills v
 * (v->caps is the caller's). E_NOTFOUND for an ended session, E_UNAVAIL when
 * the driver cannot start. Blocks up to the driver's start (seconds). For
 * classic WebDriver (api/wdclassic.h). */
int webdriver_driver(struct app *app, struct live *l, const char *session_id, struct wdreg_view *v,
                     struct err *e) WUR;

#endif
