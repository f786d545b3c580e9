/* libFuzzer target for api/mcp's reading of a POST /mcp body (the tenant's
 * bytes): mcp_msg_parse, then for a message that names a method its params
 * as a tools/call's (mcp_call_parse) against a few tool names. Checks the
 * contract: a refusal carries a JSON-RPC code and a message, an accepted
 * request has a method and a string or integer id, a tools/call's tool is
 * one of the names and its arguments an object or absent. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "api/mcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const names[] = {"navigate", "snapshot", "click", "type", "repl"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mcp_msg m;
    if (mcp_msg_parse((const char *)data, size, &m) != 0) {
        if (m.code >= 0 || !m.message[0] ||
            (m.id && !json_is_string(m.id) && !json_is_integer(m.id) && !json_is_null(m.id)))
            __builtin_trap();
        mcp_msg_clear(&m);
        return 0;
    }
    if (!json_is_object(m.root))
        __builtin_trap();
    if (!m.notification) {
        if (!m.method || !(json_is_string(m.id) || json_is_integer(m.id)))
            __builtin_trap();
        size_t tool;
        const json_t *args;
        const char *why;
        if (mcp_call_parse(m.params, names, sizeof names / sizeof names[0], &tool, &args, &why) ==
            0) {
            if (tool >= sizeof names / sizeof names[0] || (args && !json_is_object(args)))
                __builtin_trap();
        } else if (!why || args) {
            __builtin_trap();
        }
    }
    mcp_msg_clear(&m);
    return 0;
}
