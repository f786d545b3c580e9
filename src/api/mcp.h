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

#include <jansson.h>
#include <stddef.h>

#include "http/http.h"

int mcp_post(struct req *rq, struct resp *rs);
int mcp_delete(struct req *rq, struct resp *rs);
int mcp_get(struct req *rq, struct resp *rs);

/* One JSON-RPC 2.0 message of a POST /mcp body, parsed. */
struct mcp_msg {
    json_t *root;         /* the parsed body (owned; mcp_msg_clear frees it) */
    const json_t *id;     /* a string, an integer, JSON null, or NULL (absent) */
    const char *method;   /* NULL for a response */
    const json_t *params; /* any JSON value, or NULL */
    int notification;     /* a notification or a response: nothing to answer */
    int code;             /* refused: the JSON-RPC error code (-32700, -32600) */
    char message[512];    /* refused: the error's message */
};

/* Parses body (len bytes, the tenant's, up to LIM_BODY_BYTES) as one
 * JSON-RPC 2.0 message into *m. 0, or E_INVALID with m->code, m->message
 * and m->id (the id to answer with: NULL when it was unusable) set: an empty
 * body, bytes that are not JSON, JSON that is not an object (batches are
 * not taken), an id neither string, integer nor null, jsonrpc other than
 * "2.0", or none of method, result and error. *m is cleared with
 * mcp_msg_clear either way. Pure: no I/O, no globals. */
int mcp_msg_parse(const char *body, size_t len, struct mcp_msg *m)
    __attribute__((warn_unused_result));
void mcp_msg_clear(struct mcp_msg *m);

/* The params of a tools/call (borrowed, any JSON value or NULL) against the
 * tool names (n of them): the index of params.name in *tool and
 * params.arguments (an object, borrowed from params, or NULL when absent) in
 * *args. E_INVALID with *why (a static sentence naming the field) for an
 * unknown or missing name, or arguments that are not an object. Pure. */
int mcp_call_parse(const json_t *params, const char *const *names, size_t n, size_t *tool,
                   const json_t **args, const char **why) __attribute__((warn_unused_result));

#endif
