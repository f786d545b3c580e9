/*
 * DevTools HTTP discovery of a session (issue 31.9): `/json/version`,
 * `/json/list` and `/json` as Chromium's own DevTools server answers them,
 * under the same signed token as the session's cdp_ws_url, with every
 * webSocketDebuggerUrl pointing back through browserd's CDP relay.
 *
 * Clients take an http URL and append the discovery path. Playwright's
 * connectOverCDP appends "json/version/" to the path and keeps the query, so
 * cdp_ws_url with an http scheme works as it is
 * (`/browser/cdp/json/version?jwt=T`); tools that keep the path but not the
 * query get the token in a path segment (`/browser/cdp/T/json/version`).
 * Stagehand 4 appends "/json/version" to the URL as a string, which lands in
 * the query (`/browser/cdp?jwt=T/json/version`): browsers_cdp redirects that
 * to the path form (cdp_disc_query_suffix).
 * Puppeteer's browserURL resolves "/json/version" against the origin and
 * drops both, so it cannot name a session: docs/cdp-relay.md says to give
 * it cdp_ws_url instead; those root paths answer a 401 saying so.
 *
 * The rest of Chromium's pages follow on both forms (/json/protocol, PUT
 * /json/new, /json/activate, /json/close), for chrome-remote-interface,
 * whose alterPath prefixes "/browser/cdp/T" to each path it asks (and to the
 * WebSocket URL it opens: the relay answers /browser/cdp/T/browser/cdp).
 */
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "api/browsers.h"
#include "core/clock.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "core/share.h"
#include "core/token.h"
#include "core/xalloc.h"
#include "proxy/cdp_client.h"
#include "proxy/httpc.h"
#include "proxy/ws.h"
#include "runtime/sessmgr.h"

#define DISC_CALL_MS 5000

/* The live session of the token (path segment or ?jwt=): 0 with its
 * browser's DevTools URL in ws; 401 for a bad token, 404 for an ended
 * session; 1 when another node answered (rs is set). */
static int disc_open(struct req *rq, struct resp *rs, const char *token, struct token_claims *c,
                     char *ws, size_t cap)
{
    struct app *app = api_app(rq);
    int rc = token_verify(app->token_key, sizeof app->token_key, token, "cdp",
                          clock_now_ms() / 1000, c, &rq->err);
    if (rc)
        return rc;
    struct live *l = sessmgr_get(app->sessions, c->sub);
    if (!l) {
        rc = api_cluster_forward(rq, rs, c->org, c->sub, 0);
        if (rc != -1)
            return rc ? rc : 1;
        return err_set(&rq->err, E_NOTFOUND, "not_found", "browser session %s not found or ended",
                       c->sub);
    }
    rc = live_ws_url(l, ws, cap);
    sessmgr_put(l);
    if (rc != 0)
        return err_set(&rq->err, E_NOTFOUND, "not_found", "browser session %s not found or ended",
                       c->sub);
    return 0;
}

/* The relay's public URL for token, for one page target when target is set. */
static json_t *disc_relay_url(const struct app *app, const char *token, const char *target)
{
    char *base = api_public_ws_url(app, "/browser/cdp", token);
    char *url = target ? xasprintf("%s&target=%s", base, target) : xstrdup(base);
    json_t *v = json_string(url);
    xfree(url);
    xfree(base);
    return v;
}

static const char *str_or(const char *s, const char *dflt)
{
    return s ? s : dflt;
}

/* One DevTools call (params borrowed, may be NULL) on a fresh connection to
 * the session's browser. */
static int disc_call_p(struct req *rq, const char *ws, const char *method, json_t *params,
                       json_t **res)
{
    struct cdp_client *cc = NULL;
    int rc = cdp_client_open(ws, DISC_CALL_MS, &cc, &rq->err);
    if (rc == 0)
        rc = cdp_client_call(cc, NULL, method, params, 1, DISC_CALL_MS, res, &rq->err);
    cdp_client_close(cc);
    if (rc)
        return err_set(&rq->err, E_UNAVAIL, "browser_unavailable",
                       "the session's browser is not answering");
    return 0;
}

static int disc_call(struct req *rq, const char *ws, const char *method, json_t **res)
{
    return disc_call_p(rq, ws, method, NULL, res);
}

static int disc_version(struct req *rq, struct resp *rs, const char *token)
{
    struct token_claims c;
    char ws[512];
    int rc = disc_open(rq, rs, token, &c, ws, sizeof ws);
    if (rc)
        return rc > 0 ? 0 : rc;
    json_t *v = NULL;
    if ((rc = disc_call(rq, ws, "Browser.getVersion", &v)) != 0)
        return rc;
    json_t *out = json_object();
    json_object_set_new(out, "Browser", json_string(str_or(jsonx_str(v, "product"), "")));
    json_object_set_new(out, "Protocol-Version",
                        json_string(str_or(jsonx_str(v, "protocolVersion"), "1.3")));
    json_object_set_new(out, "User-Agent", json_string(str_or(jsonx_str(v, "userAgent"), "")));
    json_object_set_new(out, "V8-Version", json_string(str_or(jsonx_str(v, "jsVersion"), "")));
    json_object_set_new(out, "WebKit-Version", json_string(str_or(jsonx_str(v, "revision"), "")));
    json_object_set_new(out, "webSocketDebuggerUrl", disc_relay_url(api_app(rq), token, NULL));
    json_decref(v);
    resp_header(rs, "Cache-Control", "no-store");
    resp_json(rs, 200, out);
    return 0;
}

/* 1 when id has the shape of a DevTools target id (hex, at most 64). */
static int target_id_ok(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'A' && id[i] <= 'F') ||
              (id[i] >= 'a' && id[i] <= 'f')))
            return 0;
    return 1;
}

/* One /json/list entry for a target of Target.getTargets (borrowed t), or
 * NULL for the browser itself and ids of another shape. */
static json_t *disc_entry(struct req *rq, const char *token, json_t *t)
{
    const char *type = jsonx_str(t, "type"), *id = jsonx_str(t, "targetId");
    if (!type || !id || strcmp(type, "browser") == 0 || !target_id_ok(id))
        return NULL;
    json_t *e = json_object();
    json_object_set_new(e, "description", json_string(""));
    json_object_set_new(e, "id", json_string(id));
    json_object_set_new(e, "title", json_string(str_or(jsonx_str(t, "title"), "")));
    json_object_set_new(e, "type", json_string(type));
    json_object_set_new(e, "url", json_string(str_or(jsonx_str(t, "url"), "")));
    json_object_set_new(e, "webSocketDebuggerUrl", disc_relay_url(api_app(rq), token, id));
    return e;
}

static int disc_list(struct req *rq, struct resp *rs, const char *token)
{
    struct token_claims c;
    char ws[512];
    int rc = disc_open(rq, rs, token, &c, ws, sizeof ws);
    if (rc)
        return rc > 0 ? 0 : rc;
    json_t *res = NULL;
    if ((rc = disc_call(rq, ws, "Target.getTargets", &res)) != 0)
        return rc;
    json_t *out = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(res, "targetInfos"), i, t)
    {
        json_t *e = disc_entry(rq, token, t);
        if (e)
            json_array_append_new(out, e);
    }
    json_decref(res);
    resp_header(rs, "Cache-Control", "no-store");
    resp_json(rs, 200, out);
    return 0;
}

/* /json/protocol fetches in flight (LIM_CDP_PROTOCOL_FETCHES*): each holds
 * a descriptor of up to LIM_CDP_PROTOCOL_BYTES twice until its answer is
 * built (the copy then goes out with the response). */
static struct share protocol_fetches =
    SHARE_INIT("DevTools protocol fetches in flight", LIM_CDP_PROTOCOL_FETCHES,
               LIM_CDP_PROTOCOL_FETCHES_PER_ORG, LIM_CDP_PROTOCOL_FETCHES_PER_SESSION);

/* The browser's own protocol descriptor, as its DevTools HTTP server serves
 * it (chrome-remote-interface fetches it before it connects). */
static int disc_protocol(struct req *rq, struct resp *rs, const char *token)
{
    struct token_claims c;
    char ws[512];
    int rc = disc_open(rq, rs, token, &c, ws, sizeof ws);
    if (rc)
        return rc > 0 ? 0 : rc;
    if ((rc = share_take_or_err(&protocol_fetches, c.org, c.sub, 1, &rq->err)) != 0)
        return rc;
    struct httpc_resp r;
    rc = ws_http_get(ws, "/json/protocol", LIM_CDP_PROTOCOL_BYTES, DISC_CALL_MS, &r, &rq->err);
    if (rc != 0) {
        share_give(&protocol_fetches, c.org, c.sub);
        return err_set(&rq->err, E_UNAVAIL, "browser_unavailable",
                       "the session's browser is not answering");
    }
    if (r.status != 200) {
        httpc_resp_free(&r);
        share_give(&protocol_fetches, c.org, c.sub);
        return err_set(&rq->err, E_UNAVAIL, "browser_unavailable",
                       "the session's browser did not give its protocol");
    }
    resp_header(rs, "Cache-Control", "no-store");
    char *body = xmalloc(r.body_len + 1);
    memcpy(body, r.body, r.body_len + 1);
    resp_text(rs, 200, "application/json; charset=UTF-8", body, r.body_len);
    httpc_resp_free(&r);
    share_give(&protocol_fetches, c.org, c.sub);
    return 0;
}

/* The raw query of /json/new?URL, as Chromium takes it: everything after the
 * '?' but the jwt= argument (the query form), rebuilt from the decoded
 * arguments (libmicrohttpd splits them at '&' and '='). */
struct new_url {
    char *buf;
    size_t len;
    int too_long;
    int skip_jwt; /* the query form: its jwt= is the token, not the URL's */
};

static void new_url_add(void *ctx, const char *k, const char *v)
{
    struct new_url *u = ctx;
    if (u->skip_jwt && strcmp(k, "jwt") == 0 && v)
        return;
    size_t need = strlen(k) + (v ? strlen(v) + 1 : 0) + (u->len ? 1 : 0);
    if (u->len + need >= LIM_CDP_NEW_URL_BYTES) {
        u->too_long = 1;
        return;
    }
    u->len += (size_t)snprintf(u->buf + u->len, LIM_CDP_NEW_URL_BYTES - u->len, "%s%s%s%s",
                               u->len ? "&" : "", k, v ? "=" : "", v ? v : "");
}

/* PUT /json/new?URL: a new tab (Target.createTarget, the rules of any CDP
 * client of the session: the sandbox confines what a file:// or chrome://
 * tab shows), answered with its /json/list entry. */
static int disc_new(struct req *rq, struct resp *rs, const char *token, int query_form)
{
    struct new_url u = {.buf = xcalloc(1, LIM_CDP_NEW_URL_BYTES), .skip_jwt = query_form};
    req_query_each_raw(rq, new_url_add, &u);
    if (u.too_long) {
        xfree(u.buf);
        return err_set(&rq->err, E_INVALID, "bad_request",
                       "json/new: the URL after '?' must be under %u bytes",
                       (unsigned)LIM_CDP_NEW_URL_BYTES);
    }
    struct token_claims c;
    char ws[512];
    int rc = disc_open(rq, rs, token, &c, ws, sizeof ws);
    if (rc) {
        xfree(u.buf);
        return rc > 0 ? 0 : rc;
    }
    json_t *params = json_pack("{s:s}", "url", u.len ? u.buf : "about:blank");
    xfree(u.buf);
    json_t *res = NULL;
    rc = disc_call_p(rq, ws, "Target.createTarget", params, &res);
    json_decref(params);
    if (rc)
        return rc;
    const char *id = jsonx_str(res, "targetId");
    json_t *all = NULL, *entry = NULL;
    if (id && (rc = disc_call(rq, ws, "Target.getTargets", &all)) == 0) {
        size_t i;
        json_t *t;
        json_array_foreach(json_object_get(all, "targetInfos"), i, t)
        {
            const char *tid = jsonx_str(t, "targetId");
            if (tid && strcmp(tid, id) == 0) {
                entry = disc_entry(rq, token, t);
                break;
            }
        }
    }
    json_decref(all);
    json_decref(res);
    if (rc)
        return rc;
    if (!entry)
        return err_set(&rq->err, E_UNAVAIL, "browser_unavailable",
                       "the session's browser did not open the tab");
    resp_header(rs, "Cache-Control", "no-store");
    resp_json(rs, 200, entry);
    return 0;
}

/* /json/activate/ID and /json/close/ID: Chromium's plain-text answers, and
 * its 404 "No such target id" for an id the session's browser does not have
 * (the browser of the token only: another session's ids are unknown here). */
static int disc_target_act(struct req *rq, struct resp *rs, const char *token, const char *id,
                           const char *method, const char *done)
{
    struct token_claims c;
    char ws[512];
    int rc = disc_open(rq, rs, token, &c, ws, sizeof ws);
    if (rc)
        return rc > 0 ? 0 : rc;
    if (!target_id_ok(id))
        return err_set(&rq->err, E_NOTFOUND, "not_found", "No such target id: (not a target id)");
    json_t *all = NULL;
    if ((rc = disc_call(rq, ws, "Target.getTargets", &all)) != 0)
        return rc;
    int found = 0;
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(all, "targetInfos"), i, t)
    {
        const char *tid = jsonx_str(t, "targetId"), *type = jsonx_str(t, "type");
        if (tid && type && strcmp(tid, id) == 0 && strcmp(type, "browser") != 0)
            found = 1;
    }
    json_decref(all);
    if (!found)
        return err_set(&rq->err, E_NOTFOUND, "not_found", "No such target id: %s", id);
    json_t *params = json_pack("{s:s}", "targetId", id), *res = NULL;
    rc = disc_call_p(rq, ws, method, params, &res);
    json_decref(params);
    json_decref(res);
    if (rc)
        return rc;
    resp_text(rs, 200, "text/plain; charset=UTF-8", xstrdup(done), strlen(done));
    return 0;
}

int cdp_disc_protocol_q(struct req *rq, struct resp *rs)
{
    return disc_protocol(rq, rs, req_query(rq, "jwt"));
}

int cdp_disc_protocol_p(struct req *rq, struct resp *rs)
{
    return disc_protocol(rq, rs, rq->params[0]);
}

int cdp_disc_new_q(struct req *rq, struct resp *rs)
{
    return disc_new(rq, rs, req_query(rq, "jwt"), 1);
}

int cdp_disc_new_p(struct req *rq, struct resp *rs)
{
    return disc_new(rq, rs, rq->params[0], 0);
}

int cdp_disc_new_get(struct req *rq, struct resp *rs)
{
    (void)rs;
    return err_set(&rq->err, E_METHOD, "method_not_allowed",
                   "json/new opens a tab: use PUT, as Chromium's DevTools server requires");
}

int cdp_disc_activate_q(struct req *rq, struct resp *rs)
{
    return disc_target_act(rq, rs, req_query(rq, "jwt"), rq->params[0], "Target.activateTarget",
                           "Target activated");
}

int cdp_disc_activate_p(struct req *rq, struct resp *rs)
{
    return disc_target_act(rq, rs, rq->params[0], rq->params[1], "Target.activateTarget",
                           "Target activated");
}

int cdp_disc_close_q(struct req *rq, struct resp *rs)
{
    return disc_target_act(rq, rs, req_query(rq, "jwt"), rq->params[0], "Target.closeTarget",
                           "Target is closing");
}

int cdp_disc_close_p(struct req *rq, struct resp *rs)
{
    return disc_target_act(rq, rs, rq->params[0], rq->params[1], "Target.closeTarget",
                           "Target is closing");
}

int cdp_disc_no_token(struct req *rq, struct resp *rs)
{
    (void)rs;
    return err_set(&rq->err, E_UNAUTH, "unauthorized",
                   "DevTools discovery needs the session's cdp token: ask "
                   "/browser/cdp/TOKEN%s (chrome-remote-interface: alterPath adding "
                   "/browser/cdp/TOKEN, or target = cdp_ws_url with local: true)",
                   rq->orig_path ? rq->orig_path : "/json/version");
}

int cdp_disc_version_q(struct req *rq, struct resp *rs)
{
    return disc_version(rq, rs, req_query(rq, "jwt"));
}

int cdp_disc_list_q(struct req *rq, struct resp *rs)
{
    return disc_list(rq, rs, req_query(rq, "jwt"));
}

int cdp_disc_version_p(struct req *rq, struct resp *rs)
{
    return disc_version(rq, rs, rq->params[0]);
}

int cdp_disc_list_p(struct req *rq, struct resp *rs)
{
    return disc_list(rq, rs, rq->params[0]);
}

const char *cdp_disc_query_suffix(const char *jwt, size_t *toklen)
{
    static const char *const paths[] = {"/json/version", "/json/list", "/json"};
    const char *slash = jwt ? strchr(jwt, '/') : NULL;
    if (!slash || slash == jwt)
        return NULL;
    size_t n = strlen(slash);
    if (n > 1 && slash[n - 1] == '/')
        n--;
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (strlen(paths[i]) == n && strncmp(slash, paths[i], n) == 0) {
            *toklen = (size_t)(slash - jwt);
            return paths[i];
        }
    return NULL;
}

int cdp_target_id_ok(const char *id)
{
    return target_id_ok(id);
}
