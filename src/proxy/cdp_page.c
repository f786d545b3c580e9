#include "proxy/cdp_page.h"

#include <stdio.h>
#include <string.h>

#include "core/jsonx.h"
#include "core/log.h"

int cdp_page_list(struct cdp_client *c, int timeout_ms, json_t **pages, struct err *e)
{
    *pages = NULL;
    json_t *res = NULL;
    int rc = cdp_client_call(c, NULL, "Target.getTargets", NULL, 1, timeout_ms, &res, e);
    if (rc)
        return rc;
    json_t *out = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(res, "targetInfos"), i, t)
    {
        const char *type = jsonx_str(t, "type");
        if (type && strcmp(type, "page") == 0 && jsonx_str(t, "targetId"))
            json_array_append(out, t);
    }
    json_decref(res);
    *pages = out;
    return 0;
}

int cdp_page_first(struct cdp_client *c, int timeout_ms, char *out, size_t cap, struct err *e)
{
    out[0] = '\0';
    json_t *pages = NULL;
    int rc = cdp_page_list(c, timeout_ms, &pages, e);
    if (rc == 0 && json_array_size(pages) == 0)
        rc = err_set(e, E_NOTFOUND, "no_page", "the browser has no open page");
    if (rc == 0)
        snprintf(out, cap, "%s", jsonx_str(json_array_get(pages, 0), "targetId"));
    json_decref(pages);
    return rc;
}

int cdp_page_create(struct cdp_client *c, const char *url, int hidden, int timeout_ms, char *out,
                    size_t cap, struct err *e)
{
    out[0] = '\0';
    json_t *p =
        hidden ? json_pack("{s:s,s:b}", "url", url, "hidden", 1) : json_pack("{s:s}", "url", url);
    json_t *res = NULL;
    int rc = cdp_client_call(c, NULL, "Target.createTarget", p, 1, timeout_ms, &res, e);
    json_decref(p);
    const char *id = jsonx_str(res, "targetId");
    if (rc == 0 && !id)
        rc = err_set(e, E_INTERNAL, "internal", "the browser opened no page");
    if (rc == 0)
        snprintf(out, cap, "%s", id);
    json_decref(res);
    return rc;
}

int cdp_page_attach(struct cdp_client *c, const char *target, int timeout_ms, char *out, size_t cap,
                    struct err *e)
{
    out[0] = '\0';
    json_t *p = json_pack("{s:s,s:b}", "targetId", target, "flatten", 1);
    json_t *res = NULL;
    int rc = cdp_client_call(c, NULL, "Target.attachToTarget", p, 1, timeout_ms, &res, e);
    json_decref(p);
    const char *sid = jsonx_str(res, "sessionId");
    if (rc == 0 && !sid)
        rc = err_set(e, E_INTERNAL, "internal", "the browser did not attach to its page");
    if (rc == 0)
        snprintf(out, cap, "%s", sid);
    json_decref(res);
    return rc;
}

int cdp_page_attach_first(struct cdp_client *c, int timeout_ms, char *sid, size_t cap,
                          struct err *e)
{
    char target[128];
    sid[0] = '\0';
    int rc = cdp_page_first(c, timeout_ms, target, sizeof target, e);
    return rc ? rc : cdp_page_attach(c, target, timeout_ms, sid, cap, e);
}

void cdp_page_close_with(struct cdp_client *c, const char *target, int timeout_ms)
{
    if (c && target[0]) {
        struct err e;
        err_init(&e);
        if (cdp_client_call_own(c, NULL, "Target.closeTarget",
                                json_pack("{s:s}", "targetId", target), 1, timeout_ms, NULL, &e))
            log_debug("closing page %s: %s", target, e.message);
    }
    cdp_client_close(c);
}

void cdp_page_navigate_first(const char *ws_url, const char *url, int timeout_ms)
{
    struct err e;
    err_init(&e);
    struct cdp_client *c = NULL;
    char sid[128];
    int rc = cdp_client_open(ws_url, timeout_ms, &c, &e);
    if (rc == 0)
        rc = cdp_page_attach_first(c, timeout_ms, sid, sizeof sid, &e);
    if (rc == 0) {
        json_t *p = json_pack("{s:s}", "url", url);
        rc = cdp_client_call(c, sid, "Page.navigate", p, 0, timeout_ms, NULL, &e);
        json_decref(p);
    }
    if (rc)
        log_debug("navigate %s: %s", url, e.message);
    cdp_client_close(c);
}
