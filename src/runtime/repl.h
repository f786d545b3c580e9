/*
 * repl: the Browser REPL (KERNEL_API_NEWER.md 1.4; docs/repl.md). One
 * persistent Node process per session (runtime-js/repl.mjs), started on first
 * use by runtime/proc exactly like playwright.execute's runner: inside the
 * session's sandbox, as its user, in its cgroup and network namespace, with
 * runtime-js/ bound read-only. The server talks to it over its stdin (code)
 * and its descriptor 3 (output, images, the outcome) in length-prefixed JSON
 * frames (domain/replframe). Executions are one at a time per session: a
 * second call while one runs is refused (E_CONFLICT), never queued.
 *
 * A timeout, a crash (out of memory included) or a protocol violation kills
 * the process; the answer says repl_terminated and the next call starts a new
 * process with a new repl_id. The process does not keep its session from
 * idling out: only calls do.
 *
 * Threading: thread-safe; repl_exec blocks its caller (a blocking HTTP
 * thread) until the execution ends or its timeout.
 */
#ifndef BD_RUNTIME_REPL_H
#define BD_RUNTIME_REPL_H

#include <jansson.h>
#include <stddef.h>

#include "core/err.h"

struct sandbox;

#define REPL_ID_LEN 25 /* "c" and 24 of [a-z0-9], CUID2-like */

struct repl_req {
    const struct sandbox *sb; /* the session's; must have sandbox_root */
    const char *session_id;
    const char *org_id;
    const char *ws;      /* the browser's internal DevTools URL */
    const char *display; /* ":0" for a headful session, else NULL */
    const char *egress;  /* the session's egress proxy URL (httpGet), or NULL */
    const char *code;    /* may be "" only with reset */
    int reset;
    int timeout_s; /* 1..LIM_REPL_TIMEOUT_MAX_S */
};

/* Runs one execution; *out is the answer record {repl_id, success,
 * content?, content_truncated?, duration_ms, error?, stack?,
 * repl_terminated?} (new reference). E_CONFLICT when the session's REPL is
 * busy, E_LIMIT (retry_after set) past LIM_REPL_RUNNING_PER_ORG, E_UNAVAIL
 * when runtime-js is missing or the server stops, E_INTERNAL when the
 * process cannot start. */
int repl_exec(const struct repl_req *q, json_t **out, struct err *e) WUR;

/* Lowers the executions one organization may run at once from
 * LIM_REPL_RUNNING_PER_ORG to cap (1..LIM_REPL_RUNNING_PER_ORG; others are
 * ignored): BROWSERD_REPL_RUNNING_PER_ORG, docs/operator.md. Called once at
 * start, before any request. */
void repl_set_org_cap(int cap);

/* Kills the session's REPL and forgets it (the session ended). */
void repl_session_end(const char *session_id);

#endif
