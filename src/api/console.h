/* GET /console (console.c): the console, one static page (src/api/console.html,
 * built into the binary) served without a key. The page asks for an API key
 * or the admin token, keeps it in sessionStorage and calls the JSON API with
 * it (docs/console.md). tests/compat/37_console.test.mjs opens it in
 * Chromium and Firefox. */
#ifndef BD_API_CONSOLE_H
#define BD_API_CONSOLE_H

#include "http/http.h"

/* 200 with the page, under a Content-Security-Policy that allows only its
 * own inline style and script (by their SHA-256) and this origin, with
 * X-Frame-Options: DENY and Cache-Control: no-store. */
int console_get(struct req *rq, struct resp *rs);

#endif
