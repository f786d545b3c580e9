/* api/process: browser processes and Playwright code (browsers.process.*, browsers.playwright.execute). */
#ifndef BD_API_PROCESS_H
#define BD_API_PROCESS_H

/* The routes of this module, spliced into api_routes (routes.c): a list of
 * route initializers, each followed by a comma; empty while none is served. */
#define PROCESS_ROUTES

#endif
