/* Responses, and the one table that maps error codes to statuses. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/xalloc.h"
#include "http/http.h"

static const struct {
    int rc;
    int status;
    const char *code;
} status_table[] = {
    {E_INVALID, 400, "bad_request"},       {E_UNAUTH, 401, "unauthorized"},
    {E_FORBIDDEN, 403, "forbidden"},       {E_NOTFOUND, 404, "not_found"},
    {E_METHOD, 405, "method_not_allowed"}, {E_CONFLICT, 409, "conflict"},
    {E_TOOBIG, 413, "payload_too_large"},  {E_LIMIT, 429, "rate_limited"},
    {E_INTERNAL, 500, "internal"},         {E_NOTIMPL, 501, "not_implemented"},
    {E_UNAVAIL, 503, "unavailable"},       {E_UPSTREAM, 502, "bad_gateway"},
};

int http_status_for(int rc)
{
    for (size_t i = 0; i < sizeof status_table / sizeof status_table[0]; i++)
        if (status_table[i].rc == rc)
            return status_table[i].status;
    return 500;
}

const char *http_code_for(int status)
{
    for (size_t i = 0; i < sizeof status_table / sizeof status_table[0]; i++)
        if (status_table[i].status == status)
            return status_table[i].code;
    return "internal";
}

json_t *http_error_json(const struct err *e)
{
    int status = http_status_for(e->rc);
    const char *code = e->code[0] ? e->code : http_code_for(status);
    /* No host folder reaches a client (err_hide_path): the log has them. */
    char msg[ERR_MSG_MAX];
    snprintf(msg, sizeof msg, "%s", e->message[0] ? e->message : code);
    err_scrub_text(msg, sizeof msg);
    json_t *o = json_pack("{s:s,s:s}", "code", code, "message", msg);
    if (e->ndetails) {
        json_t *d = json_array();
        for (size_t i = 0; i < e->ndetails; i++) {
            snprintf(msg, sizeof msg, "%s", e->details[i].message);
            err_scrub_text(msg, sizeof msg);
            json_array_append_new(
                d, json_pack("{s:s,s:s}", "code", e->details[i].code, "message", msg));
        }
        if (e->nmore) {
            char more[64];
            snprintf(more, sizeof more, "%zu further problems not listed", e->nmore);
            json_array_append_new(d,
                                  json_pack("{s:s,s:s}", "code", "invalid_input", "message", more));
        }
        json_object_set_new(o, "details", d);
    }
    return o;
}

void resp_json(struct resp *rs, int status, json_t *body)
{
    rs->status = status;
    json_decref(rs->json);
    rs->json = body;
}

void resp_empty(struct resp *rs, int status)
{
    rs->status = status;
    json_decref(rs->json);
    rs->json = NULL;
}

void resp_text(struct resp *rs, int status, const char *content_type, char *text, size_t len)
{
    rs->status = status;
    json_decref(rs->json);
    rs->json = NULL;
    xfree(rs->text);
    rs->text = text;
    rs->text_len = len;
    rs->content_type = content_type;
}

void resp_header(struct resp *rs, const char *name, const char *fmt, ...)
{
    if (rs->nheaders >= RESP_MAX_HEADERS)
        return;
    snprintf(rs->headers[rs->nheaders].name, sizeof rs->headers[0].name, "%s", name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rs->headers[rs->nheaders].value, sizeof rs->headers[0].value, fmt, ap);
    va_end(ap);
    rs->nheaders++;
}

void resp_upgrade(struct resp *rs, const char *accept_key, http_upgrade_fn fn,
                  void (*cancel)(void *ctx), void *ctx)
{
    rs->upgrade_cancel = cancel;
    rs->status = 101;
    json_decref(rs->json);
    rs->json = NULL;
    rs->upgrade = fn;
    rs->upgrade_ctx = ctx;
    resp_header(rs, "Upgrade", "websocket");
    resp_header(rs, "Sec-WebSocket-Accept", "%s", accept_key);
}

void resp_page(struct resp *rs, size_t offset, size_t count, int has_more)
{
    resp_header(rs, "X-Has-More", "%s", has_more ? "true" : "false");
    resp_header(rs, "X-Next-Offset", "%zu", has_more ? offset + count : (size_t)0);
}
