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
 * it cdp_ws_url instead.
 */
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "api/browsers.h"
#include "core/clock.h"
#include "core/jsonx.h"
#include "core/token.h"
#include "core/xalloc.h"
#include "proxy/cdp_client.h"
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

/* One DevTools call on a fresh connection to the session's browser. */
static int disc_call(struct req *rq, const char *ws, const char *method, json_t **res)
{
    struct cdp_client *cc = NULL;
    int rc = cdp_client_open(ws, DISC_CALL_MS, &cc, &rq->err);
    if (rc == 0)
        rc = cdp_client_call(cc, NULL, method, NULL, 1, DISC_CALL_MS, res, &rq->err);
    cdp_client_close(cc);
    if (rc)
        return err_set(&rq->err, E_UNAVAIL, "browser_unavailable",
                       "the session's browser is not answering");
    return 0;
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
        const char *type = jsonx_str(t, "type"), *id = jsonx_str(t, "targetId");
        if (!type || !id || strcmp(type, "browser") == 0 || !target_id_ok(id))
            continue;
        json_t *e = json_object();
        json_object_set_new(e, "description", json_string(""));
        json_object_set_new(e, "id", json_string(id));
        json_object_set_new(e, "title", json_string(str_or(jsonx_str(t, "title"), "")));
        json_object_set_new(e, "type", json_string(type));
        json_object_set_new(e, "url", json_string(str_or(jsonx_str(t, "url"), "")));
        json_object_set_new(e, "webSocketDebuggerUrl", disc_relay_url(api_app(rq), token, id));
        json_array_append_new(out, e);
    }
    json_decref(res);
    resp_header(rs, "Cache-Control", "no-store");
    resp_json(rs, 200, out);
    return 0;
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
