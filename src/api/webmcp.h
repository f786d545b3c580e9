/*
 * WebMCP (KERNEL_API_NEWER.md 1.4 "Browser WebMCP"; docs/webmcp.md): the
 * tools a session's pages register with Chromium's WebMCP API
 * (document.modelContext), listed and invoked, and custom tools a tenant
 * defines per session. The CDP work runs inside the session's sandbox
 * (runtime-js/webmcp-runner.mjs and webmcp.js, started like
 * playwright.execute's runner); the server reads one bounded JSON answer
 * back. On blocking threads.
 */
#ifndef BD_API_WEBMCP_H
#define BD_API_WEBMCP_H

#include "http/http.h"

int webmcp_tools_get(struct req *rq, struct resp *rs);
int webmcp_invoke(struct req *rq, struct resp *rs);
int webmcp_custom_list(struct req *rq, struct resp *rs);
int webmcp_custom_post(struct req *rq, struct resp *rs);
int webmcp_custom_delete(struct req *rq, struct resp *rs);
/* Lowers the server's source budget to bytes (at start, before any call;
 * BROWSERD_WEBMCP_SOURCE_MB): an organization's share becomes at most a
 * fifth of it and a session's at most its organization's, so one tenant
 * still never holds it alone. */
void webmcp_set_source_budget(long long bytes);

#endif
