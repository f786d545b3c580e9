/* api/process: browser processes and Playwright code (browsers.process.*,
 * browsers.playwright.execute; SESSION_API.md sections 3 and 5). Processes
 * run inside the session's sandbox (runtime/proc); docs/process.md. */
#ifndef BD_API_PROCESS_H
#define BD_API_PROCESS_H

#include "api/api.h"
#include "http/http.h"

/* exec and playwright.execute park their request, counted by the app's
 * procjobs (runtime/procjobs.h); main.c drains it before the HTTP server
 * stops (it must not stop with parked requests). */

int process_exec(struct req *rq, struct resp *rs);
int process_spawn(struct req *rq, struct resp *rs);
int process_status_get(struct req *rq, struct resp *rs);
int process_stdin_post(struct req *rq, struct resp *rs);
int process_stream_get(struct req *rq, struct resp *rs);
int process_kill(struct req *rq, struct resp *rs);
int process_resize(struct req *rq, struct resp *rs);
int playwright_execute(struct req *rq, struct resp *rs);

/* The routes of this module, spliced into api_routes (routes.c). */
#define PROCESS_ROUTES                                                                             \
    {"POST", "/browsers/{id}/process/exec", process_exec, AUTH_KEY},                               \
        {"POST", "/browsers/{id}/process/spawn", process_spawn, AUTH_KEY},                         \
        {"GET", "/browsers/{id}/process/{process_id}/status", process_status_get, AUTH_KEY},       \
        {"POST", "/browsers/{id}/process/{process_id}/stdin", process_stdin_post, AUTH_KEY},       \
        {"GET", "/browsers/{id}/process/{process_id}/stdout/stream", process_stream_get,           \
         AUTH_KEY},                                                                                \
        {"POST", "/browsers/{id}/process/{process_id}/kill", process_kill, AUTH_KEY},              \
        {"POST", "/browsers/{id}/process/{process_id}/resize", process_resize, AUTH_KEY},          \
        {"POST", "/browsers/{id}/playwright/execute", playwright_execute, AUTH_KEY},

#endif
