/*
 * The MCP endpoint (mcp.h, docs/mcp.md).
 *
 * Each tool goes through the server's existing internals: the browser
 * session is made and ended by the API's own handlers (POST and DELETE
 * /browsers, run in-process with the caller's own headers by http_call, so
 * that its quotas, defaults and rules apply unchanged), files through the fs
 * handlers the same way, the live view URL from the Browser record; page
 * tools speak DevTools to the browser (proxy/cdp_client, cdp_page), keys
 * are named as the computer API names them (domain/computer). The route
 * runs on the blocking threads (SLOW): a call holds its MCP session
 * (mcpreg_acquire), so the calls of one session run one at a time.
 */
#include "api/mcp.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "core/b64.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "core/xalloc.h"
#include "domain/computer.h"
#include "domain/entitlements.h"
#include "proxy/cdp_client.h"
#include "proxy/cdp_page.h"
#include "runtime/mcpreg.h"
#include "runtime/sessmgr.h"

#define MCP_CDP_MS      10000 /* one DevTools step */
#define MCP_LOAD_MS     20000 /* a navigation's wait for the load event */
#define MCP_MAX_EXPIRED 32    /* MCP sessions one request sweeps */

/* Protocol versions this server speaks, newest first. */
static const char *const versions[] = {"2025-06-18", "2025-03-26", "2024-11-05", NULL};

/* JSON-RPC 2.0 error codes. */
#define RPC_PARSE   (-32700)
#define RPC_REQUEST (-32600)
#define RPC_METHOD  (-32601)
#define RPC_PARAMS  (-32602)

/* One tools/call: the request (for its headers), the MCP session it holds,
 * and the browser's DevTools connection once opened. */
struct call {
    struct req *rq;
    struct mcpreg_entry ent;
    struct cdp_client *cdp;
    char sid[128]; /* the flat session on the selected page */
};

/* ---- in-process calls to the API's own handlers ---- */

/* Runs method path (query: name, value pairs, NULL-ended) as the caller:
 * its Authorization and project headers, through the server's own routes. */
static int api_call(struct req *rq, const char *method, const char *path, const char *const *query,
                    const char *body, size_t len, struct http_call_res *out)
{
    const char *auth = req_header(rq, "Authorization");
    const char *proj = req_header(rq, "X-Kernel-Project-Id");
    const char *hdrs[] = {"Authorization", auth ? auth : "", proj ? "X-Kernel-Project-Id" : NULL,
                          proj, NULL};
    struct http_config hc = {
        .routes = api_routes,
        .nroutes = api_nroutes,
        .authorize = api_authorize,
        .cleanup = api_cleanup,
        .app = rq->app,
        .buffer_streams = 1,
    };
    struct http_call_req in = {method, path, query, hdrs, body, len};
    return http_call(&hc, &in, out);
}

/* The message of an Error record the API answered. */
static const char *api_message(const struct http_call_res *r)
{
    const char *m = jsonx_str(r->json, "message");
    return m ? m : "the request failed";
}

/* ---- results ---- */

static json_t *text_part(const char *text)
{
    return json_pack("{s:s,s:s}", "type", "text", "text", text);
}

static json_t *tool_result(json_t *part, int is_error)
{
    json_t *r = json_pack("{s:[o]}", "content", part);
    if (is_error)
        json_object_set_new(r, "isError", json_true());
    return r;
}

static json_t *tool_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static json_t *tool_error(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tool_result(text_part(msg), 1);
}

static json_t *tool_text(const char *text)
{
    return tool_result(text_part(text), 0);
}

/* ---- the browser session and its page ---- */

/* Creates the MCP session's browser on first use: the caller's defaults
 * (headless), timing out with the MCP session. */
static json_t *ensure_browser(struct call *c)
{
    if (c->ent.session_id[0])
        return NULL;
    char body[96];
    int n = snprintf(body, sizeof body, "{\"headless\":true,\"timeout_seconds\":%d}",
                     LIM_MCP_IDLE_SECONDS);
    struct http_call_res r;
    if (api_call(c->rq, "POST", "/browsers", NULL, body, (size_t)n, &r) != 0)
        return tool_error("could not create the browser session");
    json_t *err = NULL;
    const char *id = jsonx_str(r.json, "session_id");
    if (r.status / 100 != 2 || !id)
        err =
            tool_error("could not create the browser session (%d): %s", r.status, api_message(&r));
    else
        snprintf(c->ent.session_id, sizeof c->ent.session_id, "%s", id);
    http_call_res_clear(&r);
    return err;
}

/* Calls method /browsers/{the MCP session's browser}{suffix} (query and body
 * as api_call's), creating the browser on first use. NULL with the answer in
 * *r (clear it) when it is 2xx, with a JSON object when want_object; else
 * the tool error to return: too_large when no answer could be had (it did
 * not fit an MCP answer), "<what> (<status>): <message>" for an error. */
static json_t *browser_call(struct call *c, const char *method, const char *suffix,
                            const char *const *query, const char *body, size_t len, int want_object,
                            const char *what, const char *too_large, struct http_call_res *r)
{
    json_t *err = ensure_browser(c);
    if (err)
        return err;
    char path[160];
    snprintf(path, sizeof path, "/browsers/%s%s", c->ent.session_id, suffix);
    if (api_call(c->rq, method, path, query, body, len, r) != 0)
        return tool_error("%s", too_large);
    if (r->status / 100 == 2 && (!want_object || json_is_object(r->json)))
        return NULL;
    err = tool_error("%s (%d): %s", what, r->status, api_message(r));
    http_call_res_clear(r);
    return err;
}

/* Opens DevTools on the browser and attaches to the selected page (the
 * first one when none is selected, or the selected one closed). */
static json_t *open_page(struct call *c)
{
    json_t *err = ensure_browser(c);
    if (err)
        return err;
    struct app *app = api_app(c->rq);
    struct live *l = sessmgr_get(app->sessions, c->ent.session_id);
    char ws[512];
    if (!l || live_ws_url(l, ws, sizeof ws) != 0) {
        sessmgr_put(l);
        return tool_error("the browser session %s has ended; end this MCP session and start "
                          "another",
                          c->ent.session_id);
    }
    sessmgr_put(l);
    struct err e;
    err_init(&e);
    if (cdp_client_open(ws, MCP_CDP_MS, &c->cdp, &e) != 0)
        return tool_error("cannot reach the browser: %s", e.message);
    int rc = -1;
    if (c->ent.target[0])
        rc = cdp_page_attach(c->cdp, c->ent.target, MCP_CDP_MS, c->sid, sizeof c->sid, &e);
    if (rc != 0) {
        c->ent.target[0] = '\0';
        err_init(&e);
        if (cdp_page_attach_first(c->cdp, MCP_CDP_MS, c->sid, sizeof c->sid, &e) != 0)
            return tool_error("the browser has no page: %s", e.message);
    }
    return NULL;
}

/* One DevTools command on the selected page; *out a new reference. */
static int page_cmd(struct call *c, const char *method, json_t *params, int timeout_ms,
                    json_t **out, struct err *e)
{
    json_t *res = NULL;
    int rc = cdp_client_call(c->cdp, c->sid, method, params, 1, timeout_ms, &res, e);
    json_decref(params);
    if (out)
        *out = res;
    else
        json_decref(res);
    return rc;
}

/* ---- tools ---- */

static json_t *t_navigate(struct call *c, const json_t *args)
{
    const char *url = jsonx_str(args, "url");
    if (!url || !*url)
        return tool_error("url: required, a URL to open");
    json_t *err = open_page(c);
    if (err)
        return err;
    struct err e;
    err_init(&e);
    json_t *res;
    if (page_cmd(c, "Page.navigate", json_pack("{s:s}", "url", url), MCP_LOAD_MS, &res, &e) != 0)
        return tool_error("navigate failed: %s", e.message);
    const char *fail = jsonx_str(res, "errorText");
    if (fail) {
        err = tool_error("navigate to %s failed: %s", url, fail);
        json_decref(res);
        return err;
    }
    json_decref(res);
    /* Page.navigate answers once the new document committed: wait there for its load. */
    static const char wait_load[] =
        "new Promise(r => document.readyState === 'complete' ? r(document.title) : "
        "addEventListener('load', () => r(document.title)))";
    if (page_cmd(c, "Runtime.evaluate",
                 json_pack("{s:s,s:b,s:b}", "expression", wait_load, "awaitPromise", 1,
                           "returnByValue", 1),
                 MCP_LOAD_MS, &res, &e) != 0)
        return tool_error("navigated to %s, but the page did not load: %s", url, e.message);
    const char *title = jsonx_str(json_object_get(res, "result"), "value");
    char msg[1024];
    snprintf(msg, sizeof msg, "Navigated to %s (title: %s)", url, title ? title : "");
    json_decref(res);
    return tool_text(msg);
}

/* The value of an AX property object ({type, value}) as text, or NULL. */
static const char *ax_value(const json_t *node, const char *key)
{
    json_t *v = json_object_get(json_object_get(node, key), "value");
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Appends node and its children at depth, skipping ignored and unnamed
 * generic nodes (their children take their place). */
static void ax_walk(const json_t *nodes, const json_t *index, const char *id, int depth,
                    struct buf *out, int guard)
{
    json_t *ix = json_object_get(index, id);
    if (!ix || guard > 256 || out->len >= LIM_MCP_SNAPSHOT_BYTES)
        return;
    const json_t *n = json_array_get(nodes, (size_t)json_integer_value(ix));
    const char *role = ax_value(n, "role");
    const char *name = ax_value(n, "name");
    json_t *ref = json_object_get(n, "backendDOMNodeId");
    int shown = !json_is_true(json_object_get(n, "ignored")) && role &&
                !((strcmp(role, "generic") == 0 || strcmp(role, "none") == 0 ||
                   strcmp(role, "InlineTextBox") == 0) &&
                  !(name && *name));
    if (shown && strcmp(role, "InlineTextBox") != 0) {
        char line[600];
        int k = snprintf(line, sizeof line, "%*s- %s", depth * 2, "", role);
        if (name && *name && k > 0 && (size_t)k < sizeof line)
            k += snprintf(line + k, sizeof line - (size_t)k, " \"%.400s\"", name);
        if (json_is_integer(ref) && k > 0 && (size_t)k < sizeof line)
            snprintf(line + k, sizeof line - (size_t)k, " [ref=%lld]",
                     (long long)json_integer_value(ref));
        if (buf_append(out, line, strlen(line)) != 0 || buf_append(out, "\n", 1) != 0)
            return;
    }
    size_t i;
    json_t *child;
    json_array_foreach(json_object_get(n, "childIds"), i, child)
    {
        if (json_is_string(child))
            ax_walk(nodes, index, json_string_value(child), shown ? depth + 1 : depth, out,
                    guard + 1);
    }
}

static json_t *t_snapshot(struct call *c, const json_t *args)
{
    (void)args;
    json_t *err = open_page(c);
    if (err)
        return err;
    struct err e;
    err_init(&e);
    json_t *res;
    if (page_cmd(c, "Accessibility.getFullAXTree", json_object(), MCP_CDP_MS, &res, &e) != 0)
        return tool_error("snapshot failed: %s", e.message);
    json_t *nodes = json_object_get(res, "nodes");
    json_t *index = json_object();
    const char *root = NULL;
    size_t i;
    json_t *n;
    json_array_foreach(nodes, i, n)
    {
        const char *id = jsonx_str(n, "nodeId");
        if (!id)
            continue;
        json_object_set_new(index, id, json_integer((json_int_t)i));
        if (!root && !json_object_get(n, "parentId"))
            root = id;
    }
    struct buf out;
    buf_init(&out, LIM_MCP_SNAPSHOT_BYTES + 1024);
    static const char head[] = "Page accessibility tree (use a ref with click or type):\n";
    if (buf_append(&out, head, sizeof head - 1) == 0 && root)
        ax_walk(nodes, index, root, 0, &out, 0);
    if (out.len >= LIM_MCP_SNAPSHOT_BYTES) {
        static const char cut[] = "... (snapshot cut at its size limit)\n";
        if (buf_append(&out, cut, sizeof cut - 1) != 0)
            out.len = LIM_MCP_SNAPSHOT_BYTES;
    }
    char *text = xstrndup(out.p ? out.p : "", out.len);
    json_t *r = tool_text(text);
    xfree(text);
    buf_free(&out);
    json_decref(index);
    json_decref(res);
    return r;
}

/* The backendDOMNodeId a ref names, or 0 (a ref is a positive integer). */
static long long ref_of(const json_t *args)
{
    json_t *v = json_object_get(args, "ref");
    if (json_is_integer(v))
        return json_integer_value(v) > 0 ? json_integer_value(v) : 0;
    if (json_is_string(v)) {
        char *end;
        long long r = strtoll(json_string_value(v), &end, 10);
        return *end || r <= 0 ? 0 : r;
    }
    return 0;
}

/* The centre of the node ref, scrolled into view, into *x, *y. */
static json_t *node_centre(struct call *c, long long ref, double *x, double *y)
{
    struct err e;
    err_init(&e);
    if (page_cmd(c, "DOM.scrollIntoViewIfNeeded", json_pack("{s:I}", "backendNodeId", ref),
                 MCP_CDP_MS, NULL, &e) != 0)
        return tool_error("ref %lld: no such element on the page (take a new snapshot): %s", ref,
                          e.message);
    json_t *res;
    if (page_cmd(c, "DOM.getBoxModel", json_pack("{s:I}", "backendNodeId", ref), MCP_CDP_MS, &res,
                 &e) != 0)
        return tool_error("ref %lld: the element has no box on the page: %s", ref, e.message);
    json_t *q = json_object_get(json_object_get(res, "model"), "content");
    if (json_array_size(q) != 8) {
        json_decref(res);
        return tool_error("ref %lld: the element has no box on the page", ref);
    }
    *x = *y = 0;
    for (size_t i = 0; i < 8; i += 2) {
        *x += json_number_value(json_array_get(q, i)) / 4;
        *y += json_number_value(json_array_get(q, i + 1)) / 4;
    }
    json_decref(res);
    return NULL;
}

static json_t *t_click(struct call *c, const json_t *args)
{
    long long ref = ref_of(args);
    json_t *jx = json_object_get(args, "x"), *jy = json_object_get(args, "y");
    if (!ref && !(json_is_number(jx) && json_is_number(jy)))
        return tool_error("ref: required (a ref from snapshot), or x and y: page coordinates");
    json_t *err = open_page(c);
    if (err)
        return err;
    double x = json_number_value(jx), y = json_number_value(jy);
    if (ref && (err = node_centre(c, ref, &x, &y)))
        return err;
    static const char *const steps[] = {"mouseMoved", "mousePressed", "mouseReleased"};
    struct err e;
    err_init(&e);
    for (size_t i = 0; i < 3; i++)
        if (page_cmd(c, "Input.dispatchMouseEvent",
                     json_pack("{s:s,s:f,s:f,s:s,s:i}", "type", steps[i], "x", x, "y", y, "button",
                               i ? "left" : "none", "clickCount", i ? 1 : 0),
                     MCP_CDP_MS, NULL, &e) != 0)
            return tool_error("click failed: %s", e.message);
    char msg[128];
    snprintf(msg, sizeof msg, "Clicked at (%.0f, %.0f)", x, y);
    return tool_text(msg);
}

/* Presses a combination ("Enter", "ctrl+a", as the computer API names
 * keys): modifiers down in order, the key, then up in reverse. */
static json_t *press(struct call *c, const char *combo_text)
{
    struct comp_combo k;
    if (comp_combo_parse(combo_text, &k) != 0)
        return tool_error("key: unknown key %s (names as X keysyms or DOM keys: Enter, Tab, "
                          "Escape, ctrl+a, F5)",
                          combo_text);
    struct err e;
    err_init(&e);
    int mods = 0;
    for (int i = 0; i < k.n; i++) {
        mods |= k.keys[i].modifier;
        json_t *p = json_pack("{s:s,s:s,s:s,s:i,s:i,s:i}", "type",
                              k.keys[i].text[0] ? "keyDown" : "rawKeyDown", "key", k.keys[i].key,
                              "code", k.keys[i].code, "windowsVirtualKeyCode", k.keys[i].keycode,
                              "nativeVirtualKeyCode", k.keys[i].keycode, "modifiers", mods);
        if (k.keys[i].text[0] && !(mods & ~8))
            json_object_set_new(p, "text", json_string(k.keys[i].text));
        if (page_cmd(c, "Input.dispatchKeyEvent", p, MCP_CDP_MS, NULL, &e) != 0)
            return tool_error("key %s failed: %s", combo_text, e.message);
    }
    for (int i = k.n - 1; i >= 0; i--) {
        json_t *p = json_pack("{s:s,s:s,s:s,s:i,s:i,s:i}", "type", "keyUp", "key", k.keys[i].key,
                              "code", k.keys[i].code, "windowsVirtualKeyCode", k.keys[i].keycode,
                              "nativeVirtualKeyCode", k.keys[i].keycode, "modifiers", mods);
        mods &= ~k.keys[i].modifier;
        if (page_cmd(c, "Input.dispatchKeyEvent", p, MCP_CDP_MS, NULL, &e) != 0)
            return tool_error("key %s failed: %s", combo_text, e.message);
    }
    return NULL;
}

static json_t *t_type(struct call *c, const json_t *args)
{
    const char *text = jsonx_str(args, "text");
    if (!text)
        return tool_error("text: required, the text to type");
    if (strlen(text) > COMP_TYPE_MAX_BYTES)
        return tool_error("text: at most %d bytes", COMP_TYPE_MAX_BYTES);
    long long ref = ref_of(args);
    if (json_object_get(args, "ref") && !ref)
        return tool_error("ref: a ref from snapshot (a positive integer)");
    json_t *err = open_page(c);
    if (err)
        return err;
    struct err e;
    err_init(&e);
    if (ref && page_cmd(c, "DOM.focus", json_pack("{s:I}", "backendNodeId", ref), MCP_CDP_MS, NULL,
                        &e) != 0)
        return tool_error("ref %lld: cannot focus it (take a new snapshot): %s", ref, e.message);
    if (page_cmd(c, "Input.insertText", json_pack("{s:s}", "text", text), MCP_CDP_MS, NULL, &e) !=
        0)
        return tool_error("type failed: %s", e.message);
    if (jsonx_bool(args, "submit", 0) && (err = press(c, "Return")))
        return err;
    return tool_text("Typed the text");
}

static json_t *t_press_key(struct call *c, const json_t *args)
{
    const char *key = jsonx_str(args, "key");
    if (!key || !*key)
        return tool_error("key: required, a key or combination (Enter, ctrl+a)");
    json_t *err = open_page(c);
    if (err)
        return err;
    if ((err = press(c, key)))
        return err;
    return tool_text("Pressed the key");
}

static json_t *t_screenshot(struct call *c, const json_t *args)
{
    (void)args;
    json_t *err = open_page(c);
    if (err)
        return err;
    struct err e;
    err_init(&e);
    json_t *res;
    if (page_cmd(c, "Page.captureScreenshot", json_pack("{s:s}", "format", "png"), MCP_LOAD_MS,
                 &res, &e) != 0)
        return tool_error("screenshot failed: %s", e.message);
    const char *data = jsonx_str(res, "data");
    json_t *r = data ? tool_result(json_pack("{s:s,s:s,s:s}", "type", "image", "data", data,
                                             "mimeType", "image/png"),
                                   0)
                     : tool_error("screenshot failed: the browser sent no image");
    json_decref(res);
    return r;
}

static json_t *t_evaluate(struct call *c, const json_t *args)
{
    const char *expr = jsonx_str(args, "expression");
    if (!expr)
        return tool_error("expression: required, JavaScript to run in the page");
    json_t *err = open_page(c);
    if (err)
        return err;
    struct err e;
    err_init(&e);
    json_t *res;
    if (page_cmd(
            c, "Runtime.evaluate",
            json_pack("{s:s,s:b,s:b}", "expression", expr, "awaitPromise", 1, "returnByValue", 1),
            MCP_LOAD_MS, &res, &e) != 0)
        return tool_error("evaluate failed: %s", e.message);
    json_t *ex = json_object_get(res, "exceptionDetails");
    json_t *r;
    if (ex) {
        const char *d = jsonx_str(json_object_get(ex, "exception"), "description");
        r = tool_error("the expression threw: %s",
                       d ? d : (jsonx_str(ex, "text") ? jsonx_str(ex, "text") : "an exception"));
    } else {
        json_t *v = json_object_get(json_object_get(res, "result"), "value");
        char *text = v ? jsonx_dump(v) : xstrdup("undefined");
        r = tool_text(text);
        xfree(text);
    }
    json_decref(res);
    return r;
}

/* Closes page target id and waits (at most MCP_CDP_MS) for DevTools to
 * report it destroyed: Target.closeTarget answers before the target leaves
 * Target.getTargets, and the list the tool answers must not show it. */
static int close_tab(struct call *c, const char *id, struct err *e)
{
    cdp_client_keep_events(c->cdp, "Target.targetDestroyed");
    json_t *p = json_pack("{s:b}", "discover", 1);
    int rc = cdp_client_call(c->cdp, NULL, "Target.setDiscoverTargets", p, 1, MCP_CDP_MS, NULL, e);
    json_decref(p);
    p = json_pack("{s:s}", "targetId", id);
    if (rc == 0)
        rc = cdp_client_call(c->cdp, NULL, "Target.closeTarget", p, 1, MCP_CDP_MS, NULL, e);
    json_decref(p);
    int64_t until = clock_mono_ms() + MCP_CDP_MS;
    while (rc == 0) {
        int64_t left = until - clock_mono_ms();
        json_t *ev = NULL;
        if (left <= 0 || cdp_client_event(c->cdp, (int)left, &ev, e) != 0)
            break; /* closed, only not reported in time: the list may still show it */
        const char *gone = jsonx_str(json_object_get(ev, "params"), "targetId");
        int done = gone && strcmp(gone, id) == 0;
        json_decref(ev);
        if (done)
            break;
    }
    cdp_client_keep_events(c->cdp, NULL);
    return rc;
}

static json_t *t_tabs(struct call *c, const json_t *args)
{
    const char *action = jsonx_str(args, "action");
    if (!action)
        action = "list";
    json_t *jidx = json_object_get(args, "index");
    int want_index = strcmp(action, "select") == 0 || strcmp(action, "close") == 0;
    if (strcmp(action, "list") != 0 && strcmp(action, "new") != 0 && !want_index)
        return tool_error("action: must be list, new, select or close");
    if (want_index && !json_is_integer(jidx))
        return tool_error("index: required with %s, a tab's index from list", action);
    json_t *err = open_page(c);
    if (err)
        return err;
    struct err e;
    err_init(&e);
    if (strcmp(action, "new") == 0) {
        const char *url = jsonx_str(args, "url");
        char target[MCPREG_ID_MAX];
        if (cdp_page_create(c->cdp, url ? url : "about:blank", 0, MCP_CDP_MS, target, sizeof target,
                            &e) != 0)
            return tool_error("cannot open a tab: %s", e.message);
        snprintf(c->ent.target, sizeof c->ent.target, "%s", target);
    }
    json_t *pages;
    if (cdp_page_list(c->cdp, MCP_CDP_MS, &pages, &e) != 0)
        return tool_error("cannot list the tabs: %s", e.message);
    json_t *r = NULL;
    if (want_index) {
        json_int_t i = json_integer_value(jidx);
        const char *id = jsonx_str(json_array_get(pages, (size_t)i), "targetId");
        if (i < 0 || !id) {
            r = tool_error("index: no tab %lld (there are %zu)", (long long)i,
                           json_array_size(pages));
        } else if (strcmp(action, "select") == 0) {
            if (cdp_client_call(c->cdp, NULL, "Target.activateTarget",
                                json_pack("{s:s}", "targetId", id), 1, MCP_CDP_MS, NULL, &e) != 0)
                r = tool_error("cannot select tab %lld: %s", (long long)i, e.message);
            else
                snprintf(c->ent.target, sizeof c->ent.target, "%s", id);
        } else {
            if (close_tab(c, id, &e) != 0)
                r = tool_error("cannot close tab %lld: %s", (long long)i, e.message);
            else if (strcmp(c->ent.target, id) == 0)
                c->ent.target[0] = '\0';
            json_decref(pages);
            if (!r && cdp_page_list(c->cdp, MCP_CDP_MS, &pages, &e) != 0)
                return tool_error("cannot list the tabs: %s", e.message);
            if (r)
                return r;
        }
    }
    if (!r) {
        struct buf out;
        buf_init(&out, LIM_MCP_SNAPSHOT_BYTES);
        size_t i;
        json_t *p;
        json_array_foreach(pages, i, p)
        {
            const char *id = jsonx_str(p, "targetId");
            int sel = c->ent.target[0] ? strcmp(c->ent.target, id) == 0 : i == 0;
            char line[1200];
            snprintf(line, sizeof line, "%zu: %.400s %.600s%s\n", i,
                     jsonx_str(p, "title") ? jsonx_str(p, "title") : "",
                     jsonx_str(p, "url") ? jsonx_str(p, "url") : "", sel ? " (selected)" : "");
            if (buf_append(&out, line, strlen(line)) != 0)
                break;
        }
        char *text = xstrndup(out.p ? out.p : "", out.len);
        r = tool_text(text);
        xfree(text);
        buf_free(&out);
    }
    json_decref(pages);
    return r;
}

static json_t *t_live_view_url(struct call *c, const json_t *args)
{
    (void)args;
    struct http_call_res r;
    json_t *err = browser_call(c, "GET", "", NULL, NULL, 0, 0, "cannot read the browser session",
                               "cannot read the browser session", &r);
    if (err)
        return err;
    const char *url = jsonx_str(r.json, "browser_live_view_url");
    if (!url)
        err = tool_error("this MCP session's browser is headless: it has no live view");
    else
        err = tool_text(url);
    http_call_res_clear(&r);
    return err;
}

static json_t *t_files(struct call *c, const json_t *args)
{
    const char *action = jsonx_str(args, "action");
    const char *fpath = jsonx_str(args, "path");
    const char *content = jsonx_str(args, "content");
    if (!action || (strcmp(action, "read") != 0 && strcmp(action, "write") != 0))
        return tool_error("action: must be read or write");
    if (!fpath || !*fpath)
        return tool_error("path: required, an absolute path in the browser's file system");
    int write = strcmp(action, "write") == 0;
    if (write && !content)
        return tool_error("content: required with write, the file's text");
    const char *query[] = {"path", fpath, NULL};
    char what[1024], too_large[1024];
    snprintf(what, sizeof what, "%s %s failed", action, fpath);
    snprintf(too_large, sizeof too_large, "%s %s: the file is too large for an MCP answer", action,
             fpath);
    struct http_call_res r;
    json_t *err =
        browser_call(c, write ? "PUT" : "GET", write ? "/fs/write_file" : "/fs/read_file", query,
                     content, content && write ? strlen(content) : 0, 0, what, too_large, &r);
    if (err)
        return err;
    if (write)
        err = tool_text("Wrote the file");
    else if (r.text && memchr(r.text, '\0', r.text_len) == NULL) {
        char *t = xstrndup(r.text, r.text_len);
        err = tool_text(t);
        xfree(t);
    } else {
        size_t n;
        char *b64 = b64_encode(r.text ? r.text : "", r.text_len, &n);
        err =
            tool_result(json_pack("{s:s,s:{s:s,s:s,s:s}}", "type", "resource", "resource", "uri",
                                  "file:///", "mimeType", "application/octet-stream", "blob", b64),
                        0);
        xfree(b64);
    }
    http_call_res_clear(&r);
    return err;
}

/* The session's Browser REPL (POST /browsers/{id}/repl, docs/repl.md): its
 * text output as text parts, its images as image parts; an exception, a
 * syntax error or a REPL that ended is a result with isError. */
static json_t *t_repl(struct call *c, const json_t *args)
{
    const json_t *code = json_object_get(args, "code");
    const json_t *reset = json_object_get(args, "reset");
    const json_t *tmo = json_object_get(args, "timeout_sec");
    if (code && !json_is_string(code))
        return tool_error("code: must be a string of JavaScript");
    if (reset && !json_is_boolean(reset))
        return tool_error("reset: must be true or false");
    if (tmo && (!json_is_integer(tmo) || json_integer_value(tmo) < 1 ||
                json_integer_value(tmo) > LIM_MCP_REPL_TIMEOUT_S))
        return tool_error("timeout_sec: must be an integer between 1 and %d",
                          LIM_MCP_REPL_TIMEOUT_S);
    json_t *body = json_pack("{s:s}", "code", code ? json_string_value(code) : "");
    if (reset)
        json_object_set(body, "reset", (json_t *)reset);
    if (tmo)
        json_object_set(body, "timeout_sec", (json_t *)tmo);
    char *text = jsonx_dump(body);
    json_decref(body);
    struct http_call_res r;
    json_t *err = browser_call(c, "POST", "/repl", NULL, text, strlen(text), 1, "repl failed",
                               "the REPL's answer is too large for an MCP answer", &r);
    xfree(text);
    if (err)
        return err;
    json_t *parts = json_array();
    size_t i;
    json_t *part;
    json_array_foreach(json_object_get(r.json, "content"), i, part)
    {
        const char *type = jsonx_str(part, "type");
        if (type && strcmp(type, "text") == 0 && jsonx_str(part, "text"))
            json_array_append_new(parts, text_part(jsonx_str(part, "text")));
        else if (type && strcmp(type, "image") == 0 && jsonx_str(part, "data_b64"))
            json_array_append_new(parts, json_pack("{s:s,s:s,s:s}", "type", "image", "data",
                                                   jsonx_str(part, "data_b64"), "mimeType",
                                                   jsonx_str(part, "mime_type")
                                                       ? jsonx_str(part, "mime_type")
                                                       : "image/png"));
    }
    int ok = json_is_true(json_object_get(r.json, "success"));
    if (!ok) {
        const char *msg = jsonx_str(r.json, "error");
        const char *stack = jsonx_str(r.json, "stack");
        char line[2048];
        snprintf(line, sizeof line, "%s%s%s%s", msg ? msg : "the code failed", stack ? "\n" : "",
                 stack ? stack : "",
                 json_is_true(json_object_get(r.json, "repl_terminated"))
                     ? "\n(the REPL ended; the next call starts a fresh one)"
                     : "");
        json_array_append_new(parts, text_part(line));
    }
    if (json_is_true(json_object_get(r.json, "content_truncated")))
        json_array_append_new(parts, text_part("(output truncated)"));
    if (json_array_size(parts) == 0)
        json_array_append_new(parts, text_part(""));
    json_t *res = json_pack("{s:o}", "content", parts);
    if (!ok)
        json_object_set_new(res, "isError", json_true());
    http_call_res_clear(&r);
    return res;
}

/* ---- the tool list ---- */

struct tool {
    const char *name, *description, *schema;
    json_t *(*run)(struct call *c, const json_t *args);
};

static const struct tool tools[] = {
    {"navigate", "Open a URL in the selected tab and wait for it to load.",
     "{\"type\":\"object\",\"properties\":{\"url\":{\"type\":\"string\",\"description\":\"the URL "
     "to open\"}},\"required\":[\"url\"]}",
     t_navigate},
    {"snapshot",
     "The selected tab's accessibility tree, one element a line with its ref (for click and "
     "type).",
     "{\"type\":\"object\",\"properties\":{}}", t_snapshot},
    {"click", "Click an element by its ref from snapshot, or at page coordinates x, y.",
     "{\"type\":\"object\",\"properties\":{\"ref\":{\"type\":[\"integer\",\"string\"]},\"x\":{"
     "\"type\":\"number\"},\"y\":{\"type\":\"number\"}}}",
     t_click},
    {"type",
     "Type text into the element ref (or the focused one); submit presses Enter afterwards.",
     "{\"type\":\"object\",\"properties\":{\"ref\":{\"type\":[\"integer\",\"string\"]},\"text\":{"
     "\"type\":\"string\"},\"submit\":{\"type\":\"boolean\"}},\"required\":[\"text\"]}",
     t_type},
    {"press_key", "Press a key or combination (Enter, Tab, Escape, ctrl+a, F5).",
     "{\"type\":\"object\",\"properties\":{\"key\":{\"type\":\"string\"}},\"required\":[\"key\"]}",
     t_press_key},
    {"screenshot", "A PNG of the selected tab.", "{\"type\":\"object\",\"properties\":{}}",
     t_screenshot},
    {"evaluate", "Run a JavaScript expression in the selected tab; its value as JSON.",
     "{\"type\":\"object\",\"properties\":{\"expression\":{\"type\":\"string\"}},\"required\":["
     "\"expression\"]}",
     t_evaluate},
    {"tabs", "List the tabs, open a new one (url), select or close one (index).",
     "{\"type\":\"object\",\"properties\":{\"action\":{\"type\":\"string\",\"enum\":[\"list\","
     "\"new\",\"select\",\"close\"]},\"index\":{\"type\":\"integer\"},\"url\":{\"type\":"
     "\"string\"}}}",
     t_tabs},
    {"live_view_url", "The URL of the browser's live view (headful browsers only).",
     "{\"type\":\"object\",\"properties\":{}}", t_live_view_url},
    {"files", "Read or write a file in the browser's file system.",
     "{\"type\":\"object\",\"properties\":{\"action\":{\"type\":\"string\",\"enum\":[\"read\","
     "\"write\"]},\"path\":{\"type\":\"string\"},\"content\":{\"type\":\"string\"}},"
     "\"required\":[\"action\",\"path\"]}",
     t_files},
    {"repl",
     "Run JavaScript in the browser's persistent REPL (Node, beside the browser): top-level "
     "declarations persist between calls; output only through repl.write(), the console and "
     "repl.emitImage(); globals gotoUrl, pageInfo, click, typeText, cdp and more (repl.help()).",
     "{\"type\":\"object\",\"properties\":{\"code\":{\"type\":\"string\"},\"reset\":{\"type\":"
     "\"boolean\"},\"timeout_sec\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":150}},"
     "\"required\":[\"code\"]}",
     t_repl},
};

static json_t *tools_list(void)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++) {
        json_t *schema = json_loads(tools[i].schema, 0, NULL);
        json_array_append_new(arr, json_pack("{s:s,s:s,s:o}", "name", tools[i].name, "description",
                                             tools[i].description, "inputSchema", schema));
    }
    return json_pack("{s:o}", "tools", arr);
}

/* ---- JSON-RPC ---- */

static json_t *rpc_error(const json_t *id, int code, const char *msg)
{
    return json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
                     "error", "code", code, "message", msg);
}

static json_t *rpc_result(const json_t *id, json_t *result)
{
    return json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

/* Drops MCP sessions idle past LIM_MCP_IDLE_SECONDS. Their browsers were
 * made with that timeout_seconds and end by themselves; one of this
 * caller's own is ended at once. */
static void sweep(struct req *rq)
{
    struct mcpreg_entry gone[MCP_MAX_EXPIRED];
    size_t n =
        mcpreg_expire(clock_mono_ms(), (int64_t)LIM_MCP_IDLE_SECONDS * 1000, gone, MCP_MAX_EXPIRED);
    for (size_t i = 0; i < n; i++) {
        if (!gone[i].session_id[0] || strcmp(gone[i].org, api_auth(rq)->org.id) != 0)
            continue;
        char path[160];
        snprintf(path, sizeof path, "/browsers/%s", gone[i].session_id);
        struct http_call_res r;
        if (api_call(rq, "DELETE", path, NULL, NULL, 0, &r) == 0)
            http_call_res_clear(&r);
    }
}

static int initialize(struct req *rq, struct resp *rs, const json_t *id, const json_t *params)
{
    /* An MCP session counts against the org's browsers from its start: the
     * browsers it may still start (live ones and pools' sizes taken) bound
     * the MCP sessions waiting for their first tool call. */
    const json_t *ent;
    int rc = api_entitlements(rq, &ent);
    if (rc)
        return rc;
    struct app *app = api_app(rq);
    const char *org = api_auth(rq)->org.id;
    int64_t lim;
    long long room = -1;
    if (ent_limit(ent, "max_concurrent_browsers", &lim)) {
        room = (long long)lim - sessmgr_count(app->sessions, org) -
               sessmgr_pool_capacity(app->sessions, org);
        room = room > 0 ? room : 0;
    }
    char sid[MCPREG_ID_MAX];
    if ((rc = mcpreg_open(org, api_auth(rq)->project.id, room, sid, &rq->err)))
        return rc;
    const char *asked = jsonx_str(params, "protocolVersion");
    const char *v = versions[0];
    for (size_t i = 0; asked && versions[i]; i++)
        if (strcmp(asked, versions[i]) == 0)
            v = versions[i];
    json_t *res = json_pack(
        "{s:s,s:{s:{s:b}},s:{s:s,s:s},s:s}", "protocolVersion", v, "capabilities", "tools",
        "listChanged", 0, "serverInfo", "name", "browserd", "version", "1", "instructions",
        "A browser per MCP session: navigate, then snapshot for refs to click and type.");
    resp_json(rs, 200, rpc_result(id, res));
    resp_header(rs, "Mcp-Session-Id", "%s", sid);
    return 0;
}

static int tools_call(struct req *rq, struct resp *rs, const json_t *id, const json_t *params,
                      const char *mcp_id)
{
    const char *names[sizeof tools / sizeof tools[0]];
    for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++)
        names[i] = tools[i].name;
    size_t ti;
    const json_t *args;
    const char *why;
    if (mcp_call_parse(params, names, sizeof names / sizeof names[0], &ti, &args, &why) != 0) {
        resp_json(rs, 200, rpc_error(id, RPC_PARAMS, why));
        return 0;
    }
    const struct tool *t = &tools[ti];
    struct call c = {.rq = rq};
    int rc =
        mcpreg_acquire(api_auth(rq)->org.id, api_auth(rq)->project.id, mcp_id, &c.ent, &rq->err);
    if (rc)
        return rc;
    json_t *empty = json_object();
    json_t *res = t->run(&c, args ? args : empty);
    json_decref(empty);
    cdp_client_close(c.cdp);
    mcpreg_release(&c.ent);
    resp_json(rs, 200, rpc_result(id, res));
    return 0;
}

static int refuse(struct mcp_msg *m, const json_t *id, int code, const char *msg)
{
    m->id = id;
    m->code = code;
    snprintf(m->message, sizeof m->message, "%s", msg);
    return E_INVALID;
}

int mcp_msg_parse(const char *body, size_t len, struct mcp_msg *m)
{
    memset(m, 0, sizeof *m);
    if (!len)
        return refuse(m, NULL, RPC_REQUEST, "the body must be one JSON-RPC 2.0 message");
    struct err e;
    err_init(&e);
    if (jsonx_parse(body, len, LIM_BODY_BYTES, &m->root, &e) != 0)
        return refuse(m, NULL, RPC_PARSE, e.message);
    const json_t *msg = m->root;
    if (!json_is_object(msg))
        return refuse(m, NULL, RPC_REQUEST,
                      "the body must be one JSON-RPC 2.0 message (an "
                      "object; batches are not taken)");
    const json_t *id = json_object_get(msg, "id");
    const char *version = jsonx_str(msg, "jsonrpc");
    m->method = jsonx_str(msg, "method");
    m->params = json_object_get(msg, "params");
    if (id && !json_is_string(id) && !json_is_integer(id) && !json_is_null(id))
        return refuse(m, NULL, RPC_REQUEST, "id: must be a string or an integer");
    if (!version || strcmp(version, "2.0") != 0)
        return refuse(m, id, RPC_REQUEST, "jsonrpc: must be \"2.0\"");
    if (!m->method && !json_object_get(msg, "result") && !json_object_get(msg, "error"))
        return refuse(m, id, RPC_REQUEST, "method: required (or result or error, for a response)");
    m->id = id;
    m->notification = !m->method || !id || json_is_null(id);
    return 0;
}

void mcp_msg_clear(struct mcp_msg *m)
{
    json_decref(m->root);
    memset(m, 0, sizeof *m);
}

int mcp_call_parse(const json_t *params, const char *const *names, size_t n, size_t *tool,
                   const json_t **args, const char **why)
{
    const char *name = jsonx_str(params, "name");
    const json_t *a = json_object_get(params, "arguments");
    *tool = n;
    *args = NULL;
    for (size_t i = 0; name && i < n; i++)
        if (strcmp(names[i], name) == 0)
            *tool = i;
    if (*tool == n) {
        *why = "params.name: unknown tool";
        return E_INVALID;
    }
    if (a && !json_is_object(a)) {
        *why = "params.arguments: must be an object";
        return E_INVALID;
    }
    *args = a;
    return 0;
}

int mcp_post(struct req *rq, struct resp *rs)
{
    sweep(rq);
    struct mcp_msg m;
    if (mcp_msg_parse(rq->body, rq->body_len, &m) != 0) {
        resp_json(rs, 400, rpc_error(m.id, m.code, m.message));
        mcp_msg_clear(&m);
        return 0;
    }
    const json_t *id = m.id;
    const char *method = m.method;
    const char *mcp_id = req_header(rq, "Mcp-Session-Id");
    int rc = 0;
    if (m.notification) {
        /* A notification or a response: accepted, nothing to answer. */
        resp_empty(rs, 202);
    } else if (strcmp(method, "initialize") == 0) {
        rc = initialize(rq, rs, id, m.params);
    } else if (!mcp_id) {
        resp_json(
            rs, 400,
            rpc_error(id, RPC_REQUEST, "Mcp-Session-Id: required (the id initialize answered)"));
    } else if (mcpreg_touch(api_auth(rq)->org.id, api_auth(rq)->project.id, mcp_id) != 0) {
        /* Ended, timed out, or another organization's: the client starts again. */
        resp_json(rs, 404, rpc_error(id, RPC_REQUEST, "Mcp-Session-Id: no such MCP session"));
    } else if (strcmp(method, "ping") == 0) {
        resp_json(rs, 200, rpc_result(id, json_object()));
    } else if (strcmp(method, "tools/list") == 0) {
        resp_json(rs, 200, rpc_result(id, tools_list()));
    } else if (strcmp(method, "tools/call") == 0) {
        rc = tools_call(rq, rs, id, m.params, mcp_id);
    } else {
        resp_json(rs, 200, rpc_error(id, RPC_METHOD, "method: not served by this server"));
    }
    mcp_msg_clear(&m);
    return rc;
}

int mcp_delete(struct req *rq, struct resp *rs)
{
    const char *mcp_id = req_header(rq, "Mcp-Session-Id");
    if (!mcp_id)
        return err_field(&rq->err, "Mcp-Session-Id", "required (the id initialize answered)");
    struct mcpreg_entry ent;
    int rc = mcpreg_close(api_auth(rq)->org.id, api_auth(rq)->project.id, mcp_id, &ent, &rq->err);
    if (rc)
        return rc;
    if (ent.session_id[0]) {
        char path[160];
        snprintf(path, sizeof path, "/browsers/%s", ent.session_id);
        struct http_call_res r;
        if (api_call(rq, "DELETE", path, NULL, NULL, 0, &r) == 0)
            http_call_res_clear(&r);
    }
    resp_empty(rs, 204);
    return 0;
}

int mcp_get(struct req *rq, struct resp *rs)
{
    resp_header(rs, "Allow", "POST, DELETE");
    return err_set(&rq->err, E_METHOD, "method_not_allowed",
                   "GET /mcp: this server sends no messages of its own (no SSE stream); POST "
                   "JSON-RPC messages instead");
}
