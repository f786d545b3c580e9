/*
 * api/liveview: browser_live_view_url (SESSION_API.md section 9). Every
 * headful session's record carries PUBLIC/browser/live/TOKEN, where TOKEN =
 * ORG.SESSION.MAC (MAC: HMAC-SHA256 under the server's token key, 128 bits:
 * unguessable, bound to that session, nothing stored). The URL serves a small
 * page that opens PUBLIC/browser/live/TOKEN/ws: JPEG pictures of the page
 * from the browser's DevTools go down as binary WebSocket messages; mouse and
 * keyboard come up as JSON {action, body} with the computer API's bodies
 * (click_mouse, drag_mouse, scroll, press_key, type_text), validated and run
 * by the computer module. A connection opened with ?readOnly=true gets
 * pictures only: the server drops every input it sends. The URL answers 404
 * once the session has ended. docs/live-view.md.
 */
#ifndef BD_API_LIVEVIEW_H
#define BD_API_LIVEVIEW_H

#include "api/api.h"

int liveview_page(struct req *rq, struct resp *rs);
int liveview_ws(struct req *rq, struct resp *rs);

/* The viewers are the app's engine app->viewers (runtime/viewers.h), made,
 * and stopped before the HTTP daemon stops, by main.c; the handlers and the
 * session hook reach them through the app, never a file-scope pointer. */

#define LIVEVIEW_ROUTES                                                                            \
    {"GET", "/browser/live/{token}", liveview_page, AUTH_NONE},                                    \
        {"GET", "/browser/live/{token}/ws", liveview_ws, AUTH_NONE},

#endif
