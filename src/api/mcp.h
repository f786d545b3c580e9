/*
 * The MCP endpoint (docs/mcp.md): /mcp speaks the Model Context Protocol's
 * Streamable HTTP transport (2025-03-26 and 2025-06-18) to an MCP host, with
 * the caller's API key as bearer. POST carries one JSON-RPC 2.0 message and
 * is answered application/json; `initialize` issues an Mcp-Session-Id
 * (runtime/mcpreg.h); DELETE ends the MCP session and its browser; GET is
 * 405 (the server sends no message of its own). Tools act on one browser
 * session per MCP session, created on the first tool call.
 */
#ifndef BD_API_MCP_H
#define BD_API_MCP_H

#include "http/http.h"

int mcp_post(struct req *rq, struct resp *rs);
int mcp_delete(struct req *rq, struct resp *rs);
int mcp_get(struct req *rq, struct resp *rs);

#endif
