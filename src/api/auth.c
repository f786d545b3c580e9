/*
 * Authentication and project selection, run before every handler.
 *
 * API keys are stored only as SHA-256 hashes, so the lookup is by hash and
 * the comparison of the presented key never touches a stored secret; the
 * admin token, which is held in memory, is compared in constant time.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "api/api.h"
#include "api/audit.h"
#include "core/b64.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/jsonx.h"
#include "core/token.h"
#include "core/xalloc.h"
#include "domain/entitlements.h"
#include "runtime/mcpreg.h"

/* Extracts the token of "Authorization: Bearer <token>"; NULL when absent or malformed. */
static const char *bearer(struct req *rq)
{
    const char *h = req_header(rq, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return NULL;
    h += 7;
    while (*h == ' ')
        h++;
    size_t n = strlen(h);
    if (n == 0 || n > LIM_TOKEN_BYTES)
        return NULL;
    return h;
}

static int unauthorized(struct req *rq, const char *why)
{
    return err_set(&rq->err, E_UNAUTH, "unauthorized", "%s", why);
}

/* The value of header name, or NULL when absent or empty. */
static const char *nonempty_header(struct req *rq, const char *name)
{
    const char *h = req_header(rq, name);
    return h && *h ? h : NULL;
}

/* Finds the active project an X-Kernel-Project(-Id) header names, by id or
 * by name (store project_get), into out. */
static int named_project(struct req *rq, struct store *st, const char *org_id, const char *header,
                         const char *ref, struct project_rec *out)
{
    if (store_project_get(st, org_id, ref, out) != 0 || strcmp(out->status, "active") != 0)
        return err_set(&rq->err, E_NOTFOUND, "project_not_found",
                       "project %s not found (unknown or archived; from %s)", ref, header);
    return 0;
}

/* Selects the request's project: the API key's own project, else the one
 * X-Kernel-Project-Id or X-Kernel-Project names (newer clients send the
 * latter; each takes an id or a name, and when both are sent they must name
 * the same project), else the organization's default project. */
static int select_project(struct req *rq, struct auth *a, struct store *st)
{
    const char *hdr = nonempty_header(rq, "X-Kernel-Project-Id");
    const char *hdr2 = nonempty_header(rq, "X-Kernel-Project");
    if (!a->org.projects_enabled)
        hdr = hdr2 = NULL; /* one implicit project: the headers have nothing to select */
    struct project_rec named, named2;
    int rc;
    if (hdr && (rc = named_project(rq, st, a->org.id, "X-Kernel-Project-Id", hdr, &named)))
        return rc;
    if (hdr2 && (rc = named_project(rq, st, a->org.id, "X-Kernel-Project", hdr2, &named2)))
        return rc;
    if (hdr && hdr2 && strcmp(named.id, named2.id) != 0)
        return err_set(&rq->err, E_INVALID, "bad_request",
                       "X-Kernel-Project (%s) and X-Kernel-Project-Id (%s) name different projects",
                       hdr2, hdr);
    if (!hdr && hdr2) {
        hdr = hdr2;
        named = named2;
    }
    if (a->key.project_id[0]) {
        if (hdr && strcmp(named.id, a->key.project_id) != 0)
            return err_set(&rq->err, E_FORBIDDEN, "forbidden",
                           "this API key is scoped to another project");
        if (store_project_get(st, a->org.id, a->key.project_id, &a->project) != 0 ||
            strcmp(a->project.status, "active") != 0)
            return err_set(&rq->err, E_NOTFOUND, "project_not_found",
                           "the API key's project is archived or gone");
        return 0;
    }
    if (hdr) {
        a->project = named;
        return 0;
    }
    if (store_project_get(st, a->org.id, a->org.default_project_id, &a->project) == 0 &&
        strcmp(a->project.status, "active") == 0)
        return 0;
    return err_set(&rq->err, E_NOTFOUND, "project_not_found",
                   "the organization's default project is archived; name a project with "
                   "X-Kernel-Project or X-Kernel-Project-Id");
}

/* Prefix of a session's own URL (its Browser record's base_url). */
#define SESSION_URL_PREFIX "/browser/sessions/"

int api_session_url_rewrite(const char *path, char *out, size_t cap)
{
    size_t pl = strlen(SESSION_URL_PREFIX);
    if (strncmp(path, SESSION_URL_PREFIX, pl) != 0)
        return 0;
    const char *id = path + pl, *slash = strchr(id, '/');
    /* /browser/sessions/{id}/<tail>: a tail is required (the session API
     * lives below the session; the session's record itself does not). */
    if (!slash || slash == id || !slash[1])
        return 0;
    int n = snprintf(out, cap, "/browsers/%s", id);
    return n > 0 && (size_t)n < cap;
}

/* A request to a session's own URL: the session's token (the jwt query
 * parameter, as in its cdp_ws_url) instead of an API key, valid for that
 * session's API only. The caller acts as the session's organization and
 * project. */
static int session_url_authorize(struct req *rq, unsigned flags)
{
    struct app *app = api_app(rq);
    if (!(flags & AUTH_KEY) || (flags & AUTH_ORG_ADMIN) || rq->nparams < 1 ||
        strncmp(rq->route->pattern, "/browsers/{id}/", 15) != 0)
        return err_set(&rq->err, E_NOTFOUND, "not_found", "no endpoint %s %s under a session URL",
                       rq->method, rq->path);
    struct token_claims c;
    const char *jwt = req_query(rq, "jwt");
    if (!jwt)
        return unauthorized(rq, "a session URL needs the session's token: the jwt query parameter");
    int rc = token_verify(app->token_key, sizeof app->token_key, jwt, "cdp", clock_now_ms() / 1000,
                          &c, &rq->err);
    if (rc)
        return rc;
    if (strcmp(c.sub, rq->params[0]) != 0)
        return unauthorized(rq, "the token belongs to another session");
    struct auth *a = xcalloc(1, sizeof *a);
    rq->auth = a;
    struct session_rec s;
    rc = store_session_get(app->store, c.org, "", c.sub, 1, &s);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, E_NOTFOUND, "not_found", "browser session %s not found", c.sub);
    if (rc)
        return err_set(&rq->err, rc, "internal", "authentication failed");
    rc = store_org_get(app->store, c.org, &a->org);
    if (rc == 0 && store_project_get(app->store, c.org, s.project_id, &a->project) != 0)
        rc = E_NOTFOUND;
    session_rec_clear(&s);
    if (rc)
        return err_set(&rq->err, E_NOTFOUND, "not_found", "browser session %s not found", c.sub);
    rq->tenant = a->org.id;
    return 0;
}

/* The API key of "Authorization: Basic base64(CREDENTIALS)", as WebDriver
 * clients send a URL's user info (http://KEY@host/wd/hub) or their user and
 * key options: CREDENTIALS "user:KEY" gives KEY; "KEY:" and "KEY" give KEY.
 * Copied into buf (cap bytes); NULL when absent or malformed. */
static const char *basic_key(struct req *rq, char *buf, size_t cap)
{
    const char *h = req_header(rq, "Authorization");
    if (!h || strncasecmp(h, "Basic ", 6) != 0)
        return NULL;
    h += 6;
    while (*h == ' ')
        h++;
    size_t n = strlen(h);
    unsigned char *raw = NULL;
    size_t len = 0;
    if (n == 0 || n > 2 * LIM_TOKEN_BYTES || b64_decode(h, n, &raw, &len) != 0)
        return NULL;
    const char *cred = (const char *)raw;
    const char *colon = memchr(raw, ':', len);
    const char *k = cred;
    size_t klen = len;
    if (colon && colon[1]) {
        k = colon + 1;
        klen = len - (size_t)(k - cred);
    } else if (colon) {
        klen = (size_t)(colon - cred);
    }
    const char *out = NULL;
    if (klen > 0 && klen < cap && !memchr(k, '\0', klen)) {
        memcpy(buf, k, klen);
        buf[klen] = '\0';
        out = buf;
    }
    xfree(raw);
    return out;
}

static int authorize(struct req *rq, unsigned flags)
{
    struct app *app = api_app(rq);
    if (rq->via_session_url)
        return session_url_authorize(rq, flags);
    if (flags & AUTH_ADMIN) {
        size_t n = strlen(app->cfg.admin_token);
        if (n == 0)
            return err_set(&rq->err, E_NOTFOUND, "not_found", "no endpoint %s %s", rq->method,
                           rq->path);
        const char *t = bearer(rq);
        if (!t || strlen(t) != n || !crypto_equal(t, app->cfg.admin_token, n))
            return unauthorized(rq, "a valid admin token is required");
        return 0;
    }
    if (!(flags & AUTH_KEY))
        return 0;
    char basic[LIM_TOKEN_BYTES + 1];
    const char *t = bearer(rq);
    if (!t && (flags & AUTH_BASIC))
        t = basic_key(rq, basic, sizeof basic);
    if (!t)
        return unauthorized(rq, flags & AUTH_BASIC
                                    ? "missing or malformed Authorization: Bearer or Basic header"
                                    : "missing or malformed Authorization: Bearer header");
    char hash[CRYPTO_SHA256_HEX];
    crypto_sha256_hex(t, strlen(t), hash);
    struct auth *a = xcalloc(1, sizeof *a);
    rq->auth = a;
    int rc = store_auth_lookup(app->store, hash, &a->key, &a->org);
    if (rc == E_NOTFOUND || (rc == 0 && a->key.deleted_at))
        return unauthorized(rq, "invalid API key");
    if (rc)
        return err_set(&rq->err, rc, "internal", "authentication failed");
    if (a->key.expires_at && a->key.expires_at <= clock_now_ms())
        return unauthorized(rq, "the API key has expired");
    rq->tenant = a->org.id;
    if ((flags & AUTH_ORG_ADMIN) && a->key.project_id[0])
        return err_set(&rq->err, E_FORBIDDEN, "forbidden",
                       "this operation requires an organization-scoped API key");
    if (flags & AUTH_NO_PROJECT)
        return 0;
    return select_project(rq, a, app->store);
}

/* A request under a classic WebDriver URL (/browser/wd/{token}/...,
 * api/wdclassic.h) is charged to the token's organization and the session
 * it names, like a keyed request: its signed token is verified here, before
 * it waits for a blocking thread. */
static int wd_token_authorize(struct req *rq)
{
    struct app *app = api_app(rq);
    struct token_claims c;
    int rc = token_verify(app->token_key, sizeof app->token_key, rq->params[0], "webdriver",
                          clock_now_ms() / 1000, &c, &rq->err);
    if (rc)
        return rc;
    size_t n = strlen(c.org);
    if (n >= sizeof((struct org_rec *)0)->id)
        return unauthorized(rq, "the token names no organization");
    struct auth *a = xcalloc(1, sizeof *a);
    rq->auth = a;
    memcpy(a->org.id, c.org, n + 1);
    rq->tenant = a->org.id;
    if (rq->nparams >= 2)
        rq->tenant_session = rq->params[1];
    return 0;
}

/* Authenticates (which sets rq->tenant, the key's organization), then names
 * the session a request under /browsers/{id}/ (or a WebDriver command,
 * /session/{id}/ and /wd/hub/session/{id}/) is charged to for its share of
 * the server's slow-call threads (http/fairshare.h). The
 * session record itself (PATCH, DELETE) is charged to the organization
 * only: a session whose share is full can still be ended, which also stops
 * its calls. */
int api_authorize(struct req *rq, unsigned flags)
{
    rq->tenant_session = NULL; /* never a previous request's on this connection */
    if (!rq->via_session_url && rq->route && rq->nparams >= 1 &&
        strncmp(rq->route->pattern, "/browser/wd/{token}/", 20) == 0)
        return wd_token_authorize(rq);
    int rc = authorize(rq, flags);
    struct auth *a = rq->auth;
    if (rc == 0 && a && a->org.id[0]) {
        const char *pat = rq->route ? rq->route->pattern : "";
        if (rq->nparams >= 1 &&
            (strncmp(pat, "/browsers/{id}/", 15) == 0 || strncmp(pat, "/session/{id}/", 14) == 0 ||
             strncmp(pat, "/wd/hub/session/{id}/", 21) == 0))
            rq->tenant_session = rq->params[0];
        /* A call on an MCP session waits (up to LIM_MCP_BUSY_WAIT_MS) while
         * another holds it: charged to that MCP session, one MCP session
         * holds at most the per-session share of the threads, not its
         * organization's whole share. DELETE /mcp counts for the organization
         * only, so that an MCP session whose share is full can still be ended. */
        const char *mcp = strcmp(pat, "/mcp") == 0 && strcmp(rq->method, "POST") == 0
                              ? req_header(rq, "Mcp-Session-Id")
                              : NULL;
        if (mcp && *mcp && strlen(mcp) < MCPREG_ID_MAX)
            rq->tenant_session = mcp;
    }
    if (rc == 0)
        rc = api_audit_admit(rq, flags);
    return rc;
}

void api_cleanup(struct req *rq)
{
    struct auth *a = rq->auth;
    if (!a)
        return;
    api_audit_release(rq);
    org_rec_clear(&a->org);
    json_decref(a->ent);
    xfree(a);
    rq->auth = NULL;
    rq->tenant = NULL; /* a->org.id */
    rq->tenant_session = NULL;
}

int api_resolve_entitlements(struct store *st, const struct org_rec *org, json_t **out,
                             struct err *e)
{
    json_t *ov = json_loads(org->overrides ? org->overrides : "{}", 0, NULL);
    struct ent_org eo = {org->plan, org->plan_status, org->trial_plan, org->trial_ends_at, ov};
    int rc = ent_resolve(&eo, clock_now_ms(), tenancy_plan_lookup, st, out, e);
    json_decref(ov);
    return rc;
}

/*
 * Resolved entitlements, cached per org as JSON text. An entry is valid while
 * every input of the resolution is unchanged: the org's plan fields and
 * overrides (read from the store on every request anyway, so changes made by
 * `browserd admin` in another process are seen at once), the plan documents
 * (generation bumped by api_plans_changed) and, during a trial, the clock
 * (the entry expires when the trial does).
 */
#define ENT_CACHE_SLOTS 256

/* A slot holds the inputs it was resolved from, compared field by field on
 * each request (formatting them into one string to compare cost two
 * vsnprintf passes per request). */
struct ent_slot {
    char org_id[STORE_ID];
    char plan[STORE_SHORT], plan_status[STORE_SHORT], trial_plan[STORE_SHORT];
    int64_t trial_ends_at;
    unsigned long plans_gen;
    char *overrides;
    char *text;
    int64_t valid_until;
};

static pthread_mutex_t ent_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ent_slot ent_cache[ENT_CACHE_SLOTS];
static unsigned long plans_gen;

void api_plans_changed(void)
{
    pthread_mutex_lock(&ent_mu);
    plans_gen++;
    pthread_mutex_unlock(&ent_mu);
}

static struct ent_slot *slot_for(const char *org_id)
{
    unsigned h = 2166136261u;
    for (const char *p = org_id; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return &ent_cache[h % ENT_CACHE_SLOTS];
}

/* 1 when s holds o's entitlements resolved from o's current plan fields and
 * overrides under plan documents generation gen. Under ent_mu. */
static int slot_matches(const struct ent_slot *s, const struct org_rec *o, unsigned long gen)
{
    return s->text && s->plans_gen == gen && s->trial_ends_at == o->trial_ends_at &&
           strcmp(s->org_id, o->id) == 0 && strcmp(s->plan, o->plan) == 0 &&
           strcmp(s->plan_status, o->plan_status) == 0 &&
           strcmp(s->trial_plan, o->trial_plan) == 0 &&
           strcmp(s->overrides, o->overrides ? o->overrides : "") == 0;
}

int api_entitlements_text(struct req *rq, char **text)
{
    struct auth *a = api_auth(rq);
    const struct org_rec *o = &a->org;
    int64_t now = clock_now_ms();
    /* On a shared store another node may change a plan document (the admin
     * API) without this process knowing: resolve from the store every time. */
    if (store_shared(api_app(rq)->store)) {
        json_t *ent = NULL;
        int rc = api_resolve_entitlements(api_app(rq)->store, o, &ent, &rq->err);
        if (rc == 0)
            *text = jsonx_dump(ent);
        json_decref(ent);
        return rc;
    }
    pthread_mutex_lock(&ent_mu);
    unsigned long gen = plans_gen;
    struct ent_slot *s = slot_for(o->id);
    if (slot_matches(s, o, gen) && now < s->valid_until) {
        *text = xstrdup(s->text);
        pthread_mutex_unlock(&ent_mu);
        return 0;
    }
    pthread_mutex_unlock(&ent_mu);
    json_t *ent = NULL;
    int rc = api_resolve_entitlements(api_app(rq)->store, o, &ent, &rq->err);
    if (rc)
        return rc;
    *text = jsonx_dump(ent);
    int trialing = json_is_true(json_object_get(json_object_get(ent, "plan"), "is_trialing"));
    json_decref(ent);
    pthread_mutex_lock(&ent_mu);
    xfree(s->overrides);
    xfree(s->text);
    snprintf(s->org_id, sizeof s->org_id, "%s", o->id);
    snprintf(s->plan, sizeof s->plan, "%s", o->plan);
    snprintf(s->plan_status, sizeof s->plan_status, "%s", o->plan_status);
    snprintf(s->trial_plan, sizeof s->trial_plan, "%s", o->trial_plan);
    s->trial_ends_at = o->trial_ends_at;
    s->plans_gen = gen;
    s->overrides = xstrdup(o->overrides ? o->overrides : "");
    s->text = xstrdup(*text);
    s->valid_until = trialing ? o->trial_ends_at : INT64_MAX;
    pthread_mutex_unlock(&ent_mu);
    return 0;
}

int api_entitlements(struct req *rq, const json_t **out)
{
    struct auth *a = api_auth(rq);
    if (!a->ent) {
        char *text;
        int rc = api_entitlements_text(rq, &text);
        if (rc)
            return rc;
        a->ent = json_loads(text, 0, NULL);
        xfree(text);
        if (!a->ent)
            return err_set(&rq->err, E_INTERNAL, "internal", "entitlements unreadable");
    }
    *out = a->ent;
    return 0;
}

int api_require_feature(struct req *rq, const char *feature)
{
    const json_t *ent = NULL;
    int rc = api_entitlements(rq, &ent);
    if (rc)
        return rc;
    if (!ent_feature_on(ent, feature))
        return err_set(&rq->err, E_FORBIDDEN, "feature_not_enabled",
                       "features.%s is not enabled for this organization's plan", feature);
    return 0;
}
