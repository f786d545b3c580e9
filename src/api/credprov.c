/*
 * /org/credential_providers (see api/credprov.h).
 *
 * Stored data of a provider (a vault_rec under CREDPROV_VAULT_ID): {"name",
 * "provider_type": "onepassword", "token": "<sealed>", "cache_ttl_seconds",
 * "enabled", "priority"}. The record the API shows is rendered from it; the
 * token, sealed or clear, never is.
 */
#include "api/credprov.h"

#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/credentials.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "core/secretbox.h"
#include "core/xalloc.h"
#include "proxy/httpc.h"
#include "session/app.h"
#include "store/store.h"
#include "telemetry/otlp.h"

#define FEATURE       "credential_providers"
#define PROVIDER_TYPE "onepassword"
#define NAME_MAX_B    255
#define CONNECT_ENV   "BROWSERD_ONEPASSWORD_CONNECT_URL"

/* ---- the per-organization share of concurrent Connect calls ---- */

static pthread_mutex_t calls_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char org_id[STORE_ID];
    int n;
} calls[LIM_CREDPROV_CALLS_TOTAL];

/* Takes a call slot for org (0), or 429 with Retry-After. */
static int call_begin(struct req *rq, const char *org)
{
    int total = 0, mine = 0, free_slot = -1;
    pthread_mutex_lock(&calls_mu);
    for (int i = 0; i < LIM_CREDPROV_CALLS_TOTAL; i++) {
        total += calls[i].n;
        if (calls[i].n && strcmp(calls[i].org_id, org) == 0)
            mine += calls[i].n;
        else if (!calls[i].n && free_slot < 0)
            free_slot = i;
    }
    int ok =
        mine < LIM_CREDPROV_CALLS_PER_ORG && total < LIM_CREDPROV_CALLS_TOTAL && free_slot >= 0;
    if (ok) {
        snprintf(calls[free_slot].org_id, sizeof calls[free_slot].org_id, "%s", org);
        calls[free_slot].n = 1;
    }
    pthread_mutex_unlock(&calls_mu);
    if (ok)
        return 0;
    int rc = err_set(&rq->err, E_LIMIT, "limit_exceeded",
                     "%s: at most %d calls to credential providers run at once per "
                     "organization (%d on this server); retry shortly",
                     mine >= LIM_CREDPROV_CALLS_PER_ORG ? "this organization" : "this server",
                     LIM_CREDPROV_CALLS_PER_ORG, LIM_CREDPROV_CALLS_TOTAL);
    rq->err.retry_after = LIM_CREDPROV_RETRY_AFTER_S;
    return rc;
}

static void call_end(const char *org)
{
    pthread_mutex_lock(&calls_mu);
    for (int i = 0; i < LIM_CREDPROV_CALLS_TOTAL; i++)
        if (calls[i].n && strcmp(calls[i].org_id, org) == 0) {
            calls[i].n = 0;
            break;
        }
    pthread_mutex_unlock(&calls_mu);
}

/* ---- records ---- */

static int gate(struct req *rq)
{
    int rc = api_require_feature(rq, FEATURE);
    return rc ? rc : credentials_load_key(rq);
}

static json_t *data_of(const struct vault_rec *v)
{
    json_t *d = json_loads(v->data ? v->data : "{}", 0, NULL);
    if (!json_is_object(d)) {
        json_decref(d);
        d = json_object();
    }
    return d;
}

static json_t *render(const struct vault_rec *v)
{
    char t[40];
    json_t *d = data_of(v);
    json_t *en = json_object_get(d, "enabled");
    json_t *r = json_object();
    json_object_set_new(r, "id", json_string(v->id));
    json_object_set_new(r, "name", json_string(jsonx_str(d, "name") ? jsonx_str(d, "name") : ""));
    json_object_set_new(r, "provider_type", json_string(PROVIDER_TYPE));
    json_object_set_new(r, "enabled", json_boolean(!json_is_false(en)));
    json_object_set_new(r, "priority",
                        json_integer(json_integer_value(json_object_get(d, "priority"))));
    json_object_set_new(r, "cache_ttl_seconds",
                        json_integer(json_integer_value(json_object_get(d, "cache_ttl_seconds"))));
    json_object_set_new(r, "created_at",
                        json_string(clock_fmt_rfc3339(v->created_at, t, sizeof t)));
    json_object_set_new(r, "updated_at",
                        json_string(clock_fmt_rfc3339(v->updated_at, t, sizeof t)));
    json_decref(d);
    return r;
}

static int load(struct req *rq, struct vault_rec *v)
{
    memset(v, 0, sizeof *v);
    int rc = store_vault_get(api_app(rq)->store, api_auth(rq)->org.id, "", CREDPROV_VAULT_ID,
                             rq->params[0], v);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found",
                       "credential provider %s not found in this organization", rq->params[0]);
    if (rc)
        return err_set(&rq->err, rc, "internal", "credential provider %s could not be read",
                       rq->params[0]);
    return 0;
}

/* Zeroes the token's JSON string and the raw request body. */
static void wipe(struct req *rq, json_t *body)
{
    json_t *t = json_object_get(body, "token");
    if (json_is_string(t))
        OPENSSL_cleanse((char *)json_string_value(t), json_string_length(t));
    if (rq->body && rq->body_len)
        OPENSSL_cleanse(rq->body, rq->body_len);
}

/* Checks body against the fields of a create (create=1) or an update. */
static void check(const json_t *body, int create, struct err *e)
{
    static const char *const known[] = {"name",    "provider_type", "token", "cache_ttl_seconds",
                                        "enabled", "priority",      NULL};
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)body, k, v)
    {
        size_t i = 0;
        while (known[i] && strcmp(known[i], k) != 0)
            i++;
        if (!known[i] || (!create && strcmp(k, "provider_type") == 0) ||
            (create && (strcmp(k, "enabled") == 0 || strcmp(k, "priority") == 0))) {
            char path[300];
            snprintf(path, sizeof path, "%.250s", k);
            err_field(e, path, "is not a field of a credential provider %s",
                      create ? "create" : "update");
        }
    }
    json_t *name = json_object_get(body, "name");
    if ((create || name) && (!json_is_string(name) || json_string_length(name) < 1 ||
                             json_string_length(name) > NAME_MAX_B ||
                             strlen(json_string_value(name)) != json_string_length(name)))
        err_field(e, "name", "is required: a string of 1-%d bytes without NUL", NAME_MAX_B);
    json_t *pt = json_object_get(body, "provider_type");
    if (create && (!json_is_string(pt) || strcmp(json_string_value(pt), PROVIDER_TYPE) != 0))
        err_field(e, "provider_type", "is required and must be \"" PROVIDER_TYPE "\"");
    json_t *tok = json_object_get(body, "token");
    if (create || tok) {
        int good = json_is_string(tok) && json_string_length(tok) >= 1 &&
                   json_string_length(tok) <= LIM_CREDPROV_TOKEN_BYTES;
        for (size_t i = 0; good && i < json_string_length(tok); i++) {
            unsigned char c = (unsigned char)json_string_value(tok)[i];
            good = c > 0x20 && c < 0x7f;
        }
        if (!good)
            err_field(e, "token",
                      "is required: a 1Password Connect token of 1-%d printable ASCII "
                      "characters without spaces",
                      LIM_CREDPROV_TOKEN_BYTES);
    }
    json_t *ttl = json_object_get(body, "cache_ttl_seconds");
    if (ttl && (!json_is_integer(ttl) || json_integer_value(ttl) < 0 ||
                json_integer_value(ttl) > LIM_CREDPROV_CACHE_TTL_S))
        err_field(e, "cache_ttl_seconds", "must be an integer of 0-%d", LIM_CREDPROV_CACHE_TTL_S);
    json_t *en = json_object_get(body, "enabled");
    if (en && !json_is_boolean(en))
        err_field(e, "enabled", "must be a boolean");
    json_t *pr = json_object_get(body, "priority");
    if (pr && (!json_is_integer(pr) || json_integer_value(pr) < 0 ||
               json_integer_value(pr) > LIM_CREDPROV_PRIORITY_MAX))
        err_field(e, "priority", "must be an integer of 0-%d", LIM_CREDPROV_PRIORITY_MAX);
}

/* Writes body's fields into d (the token sealed). */
static int apply(struct req *rq, const json_t *body, json_t *d)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)body, k, v)
    {
        if (strcmp(k, "token") == 0) {
            char *sealed = NULL;
            int rc = secretbox_seal(credentials_key(), json_string_value(v), &sealed, &rq->err);
            if (rc)
                return rc;
            json_object_set_new(d, "token", json_string(sealed));
            xfree(sealed);
        } else if (strcmp(k, "provider_type") != 0) {
            json_object_set(d, k, v);
        }
    }
    return 0;
}

/* 429 limit_exceeded: the org has count providers, its cap. */
static int over_cap(struct err *e, int64_t count)
{
    return api_over_org_cap(e, "credential providers", count, LIM_CREDPROV_PER_ORG,
                            LIM_CREDPROV_RETRY_AFTER_S);
}

int credprov_create(struct req *rq, struct resp *rs)
{
    struct auth *a = api_auth(rq);
    struct err *e = &rq->err;
    json_t *body;
    int rc = req_json_object(rq, 0, &body);
    if (rc)
        return rc;
    check(body, 1, e);
    rc = err_has_fields(e) ? E_INVALID : gate(rq);
    int64_t count = 0;
    if (rc == 0 && store_vault_count(api_app(rq)->store, a->org.id, CREDPROV_VAULT_ID, &count))
        rc = err_set(e, E_INTERNAL, "internal", "credential providers could not be counted");
    if (rc == 0 && count >= LIM_CREDPROV_PER_ORG)
        rc = over_cap(e, count);
    json_t *d = json_pack("{s:s,s:b,s:i,s:i}", "provider_type", PROVIDER_TYPE, "enabled", 1,
                          "priority", 0, "cache_ttl_seconds", 0);
    if (rc == 0)
        rc = apply(rq, body, d);
    struct vault_rec v;
    memset(&v, 0, sizeof v);
    if (rc == 0) {
        crypto_new_id(v.id);
        snprintf(v.org_id, sizeof v.org_id, "%s", a->org.id);
        snprintf(v.vault_id, sizeof v.vault_id, "%s", CREDPROV_VAULT_ID);
        snprintf(v.name, sizeof v.name, "%s", v.id);
        snprintf(v.type, sizeof v.type, "provider");
        v.version = 1;
        v.created_at = v.updated_at = clock_now_ms();
        v.data = jsonx_dump(d);
        /* Counted again with the insert, as one step per org on every node:
         * creates racing on several nodes all passed the count above. */
        rc = store_vault_insert(api_app(rq)->store, &v, LIM_CREDPROV_PER_ORG);
        if (rc == E_LIMIT)
            over_cap(e, LIM_CREDPROV_PER_ORG);
        else if (rc)
            err_set(e, rc, "internal", "the credential provider could not be stored");
    }
    if (rc == 0)
        resp_json(rs, 200, render(&v));
    vault_rec_clear(&v);
    json_decref(d);
    wipe(rq, body);
    json_decref(body);
    return rc;
}

int credprov_get(struct req *rq, struct resp *rs)
{
    struct vault_rec v;
    memset(&v, 0, sizeof v);
    int rc = gate(rq);
    if (rc == 0)
        rc = load(rq, &v);
    if (rc == 0)
        resp_json(rs, 200, render(&v));
    vault_rec_clear(&v);
    return rc;
}

int credprov_list(struct req *rq, struct resp *rs)
{
    size_t limit, offset;
    int rc = req_page(rq, &limit, &offset);
    if (rc == 0)
        rc = gate(rq);
    if (rc)
        return rc;
    /* All of the organization's (at most LIM_CREDPROV_PER_ORG), filtered by
     * the name, which is in the data, then paged. */
    struct page pg = {.limit = LIM_CREDPROV_PER_ORG, .offset = 0};
    struct vault_rec *rows = NULL;
    size_t n = 0;
    rc = store_vault_list(api_app(rq)->store, api_auth(rq)->org.id, "", CREDPROV_VAULT_ID, NULL,
                          &pg, &rows, &n);
    if (rc)
        return err_set(&rq->err, rc, "internal", "credential providers could not be listed");
    const char *query = req_query(rq, "query");
    json_t *arr = json_array();
    size_t seen = 0;
    int more = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *r = render(&rows[i]);
        const char *name = jsonx_str(r, "name");
        if (!query || !*query || (name && strstr(name, query))) {
            if (seen >= offset && json_array_size(arr) < limit)
                json_array_append(arr, r);
            else if (seen >= offset)
                more = 1;
            seen++;
        }
        json_decref(r);
        vault_rec_clear(&rows[i]);
    }
    xfree(rows);
    size_t shown = json_array_size(arr);
    resp_json(rs, 200, arr);
    resp_page(rs, offset, shown, more);
    return 0;
}

int credprov_update(struct req *rq, struct resp *rs)
{
    struct err *e = &rq->err;
    json_t *body;
    int rc = req_json_object(rq, 1, &body);
    if (rc)
        return rc;
    check(body, 0, e);
    rc = err_has_fields(e) ? E_INVALID : gate(rq);
    struct vault_rec v;
    memset(&v, 0, sizeof v);
    if (rc == 0)
        rc = load(rq, &v);
    json_t *d = NULL;
    if (rc == 0) {
        d = data_of(&v);
        rc = apply(rq, body, d);
    }
    if (rc == 0) {
        int64_t was = v.version;
        v.version++;
        v.updated_at = clock_now_ms();
        xfree(v.data);
        v.data = jsonx_dump(d);
        rc = store_vault_update(api_app(rq)->store, &v, was);
        if (rc == E_CONFLICT)
            err_set(e, rc, "conflict",
                    "credential provider %s was changed by another request; retry", v.id);
        else if (rc)
            err_set(e, rc, rc == E_NOTFOUND ? "not_found" : "internal",
                    "credential provider %s could not be updated", v.id);
    }
    if (rc == 0)
        resp_json(rs, 200, render(&v));
    vault_rec_clear(&v);
    json_decref(d);
    wipe(rq, body);
    json_decref(body);
    return rc;
}

int credprov_delete(struct req *rq, struct resp *rs)
{
    struct vault_rec v;
    memset(&v, 0, sizeof v);
    int rc = gate(rq);
    if (rc == 0)
        rc = load(rq, &v);
    if (rc == 0) {
        rc = store_vault_delete(api_app(rq)->store, v.org_id, "", v.id);
        if (rc)
            err_set(&rq->err, rc, rc == E_NOTFOUND ? "not_found" : "internal",
                    "credential provider %s could not be deleted", rq->params[0]);
    }
    vault_rec_clear(&v);
    if (rc == 0)
        resp_empty(rs, 204);
    return rc;
}

/* ---- the 1Password Connect REST API ---- */

struct connect {
    char host[256];
    int port;
    char prefix[512]; /* the URL's path without a trailing '/' */
    char *token;      /* opened; wiped by connect_close */
    int64_t deadline_ms;
};

/* The operator's Connect server and the provider's opened token. */
static int connect_open(struct req *rq, const struct vault_rec *v, struct connect *c)
{
    memset(c, 0, sizeof *c);
    const char *url = getenv(CONNECT_ENV);
    struct err pe;
    err_init(&pe);
    if (!url || !*url)
        return err_set(&rq->err, E_UNAVAIL, "unavailable",
                       "credential providers: this server has no 1Password Connect server "
                       "(the operator sets " CONNECT_ENV ")");
    if (otlp_parse_endpoint(url, c->host, sizeof c->host, &c->port, c->prefix, sizeof c->prefix,
                            &pe) != 0)
        return err_set(&rq->err, E_UNAVAIL, "unavailable",
                       "credential providers: the operator's " CONNECT_ENV
                       " is not an http:// URL");
    size_t pl = strlen(c->prefix);
    while (pl && c->prefix[pl - 1] == '/')
        c->prefix[--pl] = '\0';
    json_t *d = data_of(v);
    struct err e;
    err_init(&e);
    int rc = jsonx_str(d, "token")
                 ? secretbox_open(credentials_key(), jsonx_str(d, "token"), &c->token, &e)
                 : E_INTERNAL;
    json_decref(d);
    if (rc)
        return err_set(&rq->err, E_INTERNAL, "internal",
                       "credential provider %s: the stored token cannot be opened", v->id);
    c->deadline_ms = clock_mono_ms() + LIM_CREDPROV_TIMEOUT_MS;
    return 0;
}

static void connect_close(struct connect *c)
{
    secretbox_wipe(c->token);
    c->token = NULL;
}

/* GET prefix+path from Connect into *out (a JSON array). On failure why
 * says what failed, without host, path or token. */
static int connect_get(struct connect *c, const char *path, json_t **out, char *why, size_t why_cap)
{
    *out = NULL;
    char port[8], host[300], target[800];
    snprintf(port, sizeof port, "%d", c->port);
    int v6 = strchr(c->host, ':') != NULL;
    snprintf(host, sizeof host, "%s%s%s:%d", v6 ? "[" : "", c->host, v6 ? "]" : "", c->port);
    snprintf(target, sizeof target, "%s%s", c->prefix, path);
    struct err e;
    err_init(&e);
    int fd = httpc_dial(c->host, port, c->deadline_ms, &e);
    if (fd < 0) {
        snprintf(why, why_cap, "the 1Password Connect server cannot be reached");
        return E_UPSTREAM;
    }
    char *fields = xasprintf("Accept: application/json\r\nAuthorization: Bearer %s\r\n", c->token);
    struct httpc_req hr = {
        .method = "GET",
        .target = target,
        .host = host,
        .fields = fields,
        .body_max = LIM_CREDPROV_RESPONSE_BYTES,
        .deadline_ms = c->deadline_ms,
    };
    struct httpc_resp r;
    int rc = httpc_exchange(fd, &hr, &r, &e);
    OPENSSL_cleanse(fields, strlen(fields));
    xfree(fields);
    if (rc) {
        snprintf(why, why_cap, "the 1Password Connect server's answer failed: %.200s",
                 rc == E_TOOBIG ? "larger than the response cap" : e.message);
        return E_UPSTREAM;
    }
    if (r.status != 200) {
        snprintf(why, why_cap, "the 1Password Connect server answered HTTP %d%s", r.status,
                 r.status == 401 || r.status == 403 ? " (the token was refused)" : "");
        httpc_resp_free(&r);
        return E_UPSTREAM;
    }
    rc = credprov_answer_parse(r.body, r.body_len, out, why, why_cap);
    httpc_resp_free(&r);
    return rc;
}

int credprov_answer_parse(const char *body, size_t len, json_t **out, char *why, size_t why_cap)
{
    json_t *j = json_loadb(body, len, 0, NULL);
    if (!json_is_array(j)) {
        json_decref(j);
        *out = NULL;
        snprintf(why, why_cap, "the 1Password Connect server's answer is not a JSON array");
        return E_UPSTREAM;
    }
    *out = j;
    return 0;
}

/* A Connect id as the API has them: letters and digits only. */
static int id_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n < 1 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9')))
            return 0;
    return 1;
}

json_t *credprov_vaults_of(const json_t *raw)
{
    json_t *vs = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(raw, i, v)
    {
        const char *id = jsonx_str(v, "id"), *name = jsonx_str(v, "name");
        if (!id_ok(id))
            continue;
        if (json_array_size(vs) >= LIM_CREDPROV_VAULTS)
            break;
        json_array_append_new(vs, json_pack("{s:s,s:s}", "id", id, "name", name ? name : ""));
    }
    return vs;
}

/* The vaults of Connect as [{id, name}] (at most LIM_CREDPROV_VAULTS). */
static int connect_vaults(struct connect *c, json_t **out, char *why, size_t why_cap)
{
    json_t *raw;
    int rc = connect_get(c, "/v1/vaults", &raw, why, why_cap);
    if (rc)
        return rc;
    *out = credprov_vaults_of(raw);
    json_decref(raw);
    return 0;
}

/* What a handler does over the provider's Connect server (v: the provider,
 * c: its opened connection, its call slot held); 0, or an error set in
 * rq->err. */
typedef int (*connect_fn)(struct req *rq, struct resp *rs, const struct vault_rec *v,
                          struct connect *c);

/* The Connect handlers' frame: gates the request, loads the provider of the
 * path, opens its Connect server and takes a call slot of the organization,
 * runs fn, then gives back the slot, wipes the token and clears the
 * provider. */
static int connect_call(struct req *rq, struct resp *rs, connect_fn fn)
{
    struct vault_rec v;
    struct connect c;
    memset(&v, 0, sizeof v);
    int rc = gate(rq);
    if (rc == 0)
        rc = load(rq, &v);
    if (rc == 0)
        rc = connect_open(rq, &v, &c);
    if (rc == 0 && (rc = call_begin(rq, v.org_id)) != 0)
        connect_close(&c);
    if (rc == 0) {
        rc = fn(rq, rs, &v, &c);
        call_end(v.org_id);
        connect_close(&c);
    }
    vault_rec_clear(&v);
    return rc;
}

int credprov_items_add(json_t *items, const json_t *vault, const json_t *raw, size_t *bytes,
                       char *why, size_t why_cap)
{
    size_t j;
    json_t *it;
    json_array_foreach(raw, j, it)
    {
        const char *id = jsonx_str(it, "id"), *title = jsonx_str(it, "title");
        if (!id || !title)
            continue;
        if (json_array_size(items) >= LIM_CREDPROV_ITEMS)
            break;
        const char *vname = jsonx_str(vault, "name");
        char *p = xasprintf("%s/%s", vname, title);
        json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s}", "id", id, "path", p, "title", title,
                              "vault_id", jsonx_str(vault, "id"), "vault_name", vname);
        xfree(p);
        json_t *urls = json_object_get(it, "urls");
        if (json_is_array(urls) && json_array_size(urls)) {
            json_t *hrefs = json_array();
            size_t k;
            json_t *u;
            json_array_foreach(urls, k, u)
            {
                const char *href = jsonx_str(u, "href");
                if (href && json_array_size(hrefs) < LIM_CREDPROV_ITEM_URLS) {
                    json_array_append_new(hrefs, json_string(href));
                    *bytes += strlen(href);
                }
            }
            json_object_set_new(o, "urls", hrefs);
        }
        /* id, title, vault_id, vault_name and the path (both names). */
        *bytes += strlen(id) + 2 * (strlen(title) + strlen(vname)) + strlen(jsonx_str(vault, "id"));
        if (*bytes > LIM_CREDPROV_ITEMS_BYTES) {
            json_decref(o);
            snprintf(why, why_cap,
                     "the 1Password Connect server's items are larger than the answer cap");
            return E_UPSTREAM;
        }
        json_array_append_new(items, o);
    }
    return 0;
}

static int provider_items(struct req *rq, struct resp *rs, const struct vault_rec *v,
                          struct connect *c)
{
    char why[300] = "";
    json_t *vaults = NULL, *items = json_array();
    size_t bytes = 0; /* of the text kept in items, against LIM_CREDPROV_ITEMS_BYTES */
    int rc = connect_vaults(c, &vaults, why, sizeof why);
    size_t i;
    json_t *vt;
    json_array_foreach(vaults, i, vt)
    {
        if (rc)
            break;
        char path[128];
        snprintf(path, sizeof path, "/v1/vaults/%s/items", jsonx_str(vt, "id"));
        json_t *raw;
        rc = connect_get(c, path, &raw, why, sizeof why);
        if (rc == 0)
            rc = credprov_items_add(items, vt, raw, &bytes, why, sizeof why);
        json_decref(raw);
    }
    if (rc == 0)
        resp_json(rs, 200, json_pack("{s:o}", "items", json_incref(items)));
    else
        err_set(&rq->err, E_UPSTREAM, "bad_gateway", "credential provider %s: %s", v->id, why);
    json_decref(items);
    json_decref(vaults);
    return rc ? rq->err.rc : 0;
}

int credprov_items(struct req *rq, struct resp *rs)
{
    return connect_call(rq, rs, provider_items);
}

static int provider_test(struct req *rq, struct resp *rs, const struct vault_rec *v,
                         struct connect *c)
{
    (void)rq, (void)v;
    char why[300] = "";
    json_t *vaults = NULL;
    int bad = connect_vaults(c, &vaults, why, sizeof why);
    json_t *r = json_pack("{s:b,s:o}", "success", !bad, "vaults", vaults ? vaults : json_array());
    if (bad)
        json_object_set_new(r, "error", json_string(why));
    resp_json(rs, 200, r);
    return 0;
}

int credprov_test(struct req *rq, struct resp *rs)
{
    return connect_call(rq, rs, provider_test);
}
