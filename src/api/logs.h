/* GET /browsers/{id}/logs/stream (logs.c): Server-Sent Events of a session's
 * own logs. */
#ifndef BD_API_LOGS_H
#define BD_API_LOGS_H

#include "http/http.h"

/* How often a following stream looks for new bytes: the period of the
 * app's log waker (app->log_waker, runtime/waker.h), made by main.c. */
#define LOGS_POLL_MS 200

int logs_stream_get(struct req *rq, struct resp *rs);

#endif
