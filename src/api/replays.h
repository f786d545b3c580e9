/* api/replays: replays and live view (browsers.replays.*, browser_live_view_url). */
#ifndef BD_API_REPLAYS_H
#define BD_API_REPLAYS_H

/* The routes of this module, spliced into api_routes (routes.c): a list of
 * route initializers, each followed by a comma; empty while none is served. */
#define REPLAYS_ROUTES

#endif
