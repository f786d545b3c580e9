/* api/fs: browser filesystem (browsers.fs.*). */
#ifndef BD_API_FS_H
#define BD_API_FS_H

/* The routes of this module, spliced into api_routes (routes.c): a list of
 * route initializers, each followed by a comma; empty while none is served. */
#define FS_ROUTES

#endif
