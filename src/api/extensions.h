/* api/extensions: extensions (client.extensions.*, browsers.loadExtensions). */
#ifndef BD_API_EXTENSIONS_H
#define BD_API_EXTENSIONS_H

/* The routes of this module, spliced into api_routes (routes.c): a list of
 * route initializers, each followed by a comma; empty while none is served. */
#define EXTENSIONS_ROUTES

#endif
