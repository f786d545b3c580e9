/*
 * api/replays: browsers.replays.* (SESSION_API.md section 6): recordings of
 * a session's screen as MP4 (runtime/recorder), kept under
 * DATA/replays/SESSION/ after the session ends for the plan's
 * features.browser_replays.retention_days (LIM_REPLAY_RETENTION_DAYS when
 * the plan gives none), then deleted. docs/replays.md.
 *
 * It joins the session through its hooks (session/ext.h): it answers the
 * viewport rule's question ("is a recording active?", the state hook), cuts
 * a recording into segments around a forced resize (resizing, resized),
 * makes a DELETE wait for its ending hook when the session has replays
 * (needs_graceful_end) and finishes the recordings at the end (ending).
 */
#ifndef BD_API_REPLAYS_H
#define BD_API_REPLAYS_H

#include "api/api.h"
#include "api/liveview.h"

int replays_list(struct req *rq, struct resp *rs);
int replays_start(struct req *rq, struct resp *rs);
int replays_stop(struct req *rq, struct resp *rs);
int replays_download(struct req *rq, struct resp *rs);
/* GET /browser/replays?jwt=...&replay_id=...: a replay's replay_view_url,
 * without an API key (the token is signed for that one replay). */
int replays_view(struct req *rq, struct resp *rs);

/* The routes of this module, spliced into api_routes (routes.c): a list of
 * route initializers, each followed by a comma (the live view's included). */
#define REPLAYS_ROUTES                                                                             \
    {"GET", "/browsers/{id}/replays", replays_list, AUTH_KEY},                                     \
        {"POST", "/browsers/{id}/replays", replays_start, AUTH_KEY},                               \
        {"POST", "/browsers/{id}/replays/{replay_id}/stop", replays_stop, AUTH_KEY},               \
        {"GET", "/browsers/{id}/replays/{replay_id}", replays_download, AUTH_KEY},                 \
        {"GET", "/browser/replays", replays_view, AUTH_NONE}, LIVEVIEW_ROUTES

#endif
