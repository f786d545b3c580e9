/* GET /browsers/{id}/logs/stream (logs.c): Server-Sent Events of a session's
 * own logs. */
#ifndef BD_API_LOGS_H
#define BD_API_LOGS_H

#include "http/http.h"

/* Starts / stops the thread that wakes following streams (once each, around
 * serving). */
void logs_api_init(void);
void logs_api_fini(void);

int logs_stream_get(struct req *rq, struct resp *rs);

#endif
