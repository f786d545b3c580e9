/* api/repl: the Browser REPL, POST /browsers/{id_or_name}/repl
 * (KERNEL_API_NEWER.md 1.4): parse, call runtime/repl, render. docs/repl.md. */
#ifndef BD_API_REPL_H
#define BD_API_REPL_H

#include "api/api.h"
#include "http/http.h"

int repl_post(struct req *rq, struct resp *rs);

/* The session's egress proxy URL ("http://127.0.0.1:PORT" inside its
 * network namespace) from its record's data (borrowed) into out, or "" when
 * it has none: the REPL's helpers (httpGet) go out through it, in the REPL
 * and in WebMCP's CDP-backed custom tools (api/webmcp). */
void repl_egress_url(const char *data, char *out, size_t cap);

#endif
