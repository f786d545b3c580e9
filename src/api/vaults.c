/*
 * /vaults (see api/vaults.h).
 *
 * Stored data of a credential item: {"domain"?, "values": {key: "<sealed>"},
 * "totp": "<sealed>"?, "spec_mac": hex, "events": [...]}. spec_mac is an
 * HMAC-SHA256, under the server's secret key, of the PUT's spec (sorted
 * compact JSON): an identical PUT is told from a conflicting one without
 * opening a value.
 */
#include "api/vaults.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "api/credentials.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "core/secretbox.h"
#include "core/xalloc.h"
#include "domain/entitlements.h"
#include "proxy/cdp_client.h"
#include "proxy/cdp_page.h"
#include "runtime/sessmgr.h"
#include "session/ext.h"
#include "session/app.h"
#include "store/store.h"

#define FEATURE         "vaults"
#define NAME_MAX_BYTES  255
#define FILL_DEFAULT_MS 10000
#define SELECTOR_MAX    1024

/* Sets the value of the element `this` and tells the page it changed, as a
 * person typing would: the native setter (frameworks watch it), then input
 * and change events. Answers "ok" or why not. */
static const char FILL_FN[] =
    "function(v){const el=this;if(!(el instanceof Element))return 'not_an_element';"
    "if(el.disabled||el.readOnly)return 'not_fillable';"
    "const proto=el instanceof HTMLTextAreaElement?HTMLTextAreaElement.prototype:"
    "el instanceof HTMLInputElement?HTMLInputElement.prototype:null;"
    "if(!proto){if(el.isContentEditable){el.textContent=v;}else return 'not_fillable';}"
    "else{Object.getOwnPropertyDescriptor(proto,'value').set.call(el,v);}"
    "el.dispatchEvent(new Event('input',{bubbles:true}));"
    "el.dispatchEvent(new Event('change',{bubbles:true}));return 'ok';}";

static int gate(struct req *rq)
{
    int rc = api_require_feature(rq, FEATURE);
    return rc ? rc : credentials_load_key(rq);
}

static json_t *render_vault(const struct vault_rec *v)
{
    char t[40];
    json_t *r = json_object();
    json_object_set_new(r, "id", json_string(v->id));
    json_object_set_new(r, "name", json_string(v->name));
    json_object_set_new(r, "created_at",
                        json_string(clock_fmt_rfc3339(v->created_at, t, sizeof t)));
    json_object_set_new(r, "updated_at",
                        json_string(clock_fmt_rfc3339(v->updated_at, t, sizeof t)));
    return r;
}

static json_t *render_item(const struct vault_rec *it)
{
    char t[40];
    json_t *d = json_loads(it->data ? it->data : "{}", 0, NULL);
    json_t *vals = json_object_get(d, "values");
    json_t *keys = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(vals, k, v)
    {
        (void)v;
        json_array_append_new(keys, json_string(k));
    }
    json_t *spec = json_object();
    const char *dom = jsonx_str(d, "domain");
    json_object_set_new(spec, "domain", dom ? json_string(dom) : json_null());
    json_object_set_new(spec, "value_keys", keys);
    json_object_set_new(spec, "has_values", json_boolean(json_object_size(vals) > 0));
    json_object_set_new(spec, "has_totp_secret", json_boolean(jsonx_str(d, "totp") != NULL));
    json_t *r = json_object();
    json_object_set_new(r, "key", json_string(it->name));
    json_object_set_new(r, "vault_id", json_string(it->vault_id));
    json_object_set_new(r, "type", json_string(it->type));
    json_object_set_new(r, "version", json_integer(it->version));
    json_object_set_new(r, "spec", spec);
    json_object_set_new(r, "available_operations", json_pack("[s]", "fill"));
    json_object_set_new(r, "created_at",
                        json_string(clock_fmt_rfc3339(it->created_at, t, sizeof t)));
    json_object_set_new(r, "updated_at",
                        json_string(clock_fmt_rfc3339(it->updated_at, t, sizeof t)));
    json_decref(d);
    return r;
}

static int load_vault(struct req *rq, struct vault_rec *v)
{
    struct auth *a = api_auth(rq);
    memset(v, 0, sizeof *v);
    int rc = store_vault_get(api_app(rq)->store, a->org.id, a->project.id, "", rq->params[0], v);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "vault %s not found in this project",
                       rq->params[0]);
    if (rc)
        return err_set(&rq->err, rc, "internal", "vault %s could not be read", rq->params[0]);
    return 0;
}

/* The vault of the path, then its item params[1]. */
static int load_item(struct req *rq, struct vault_rec *vault, struct vault_rec *it)
{
    struct auth *a = api_auth(rq);
    memset(it, 0, sizeof *it);
    int rc = load_vault(rq, vault);
    if (rc)
        return rc;
    rc =
        store_vault_get(api_app(rq)->store, a->org.id, a->project.id, vault->id, rq->params[1], it);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "item %s not found in vault %s", rq->params[1],
                       vault->name);
    if (rc)
        return err_set(&rq->err, rc, "internal", "item %s could not be read", rq->params[1]);
    return 0;
}

/* What a handler does with the item of its path (vault: the item's vault;
 * ctx: the handler's); 0, or an error set in rq->err. */
typedef int (*item_fn)(struct req *rq, struct resp *rs, const struct vault_rec *vault,
                       struct vault_rec *it, void *ctx);

/* The item handlers' frame: answers E_INVALID when rq->err already holds
 * field details, else gates the request, loads the vault and item of the
 * path, runs fn on them and clears both. */
static int with_item(struct req *rq, struct resp *rs, item_fn fn, void *ctx)
{
    int rc = err_has_fields(&rq->err) ? E_INVALID : gate(rq);
    struct vault_rec vault, it;
    memset(&vault, 0, sizeof vault);
    memset(&it, 0, sizeof it);
    if (rc == 0)
        rc = load_item(rq, &vault, &it);
    if (rc == 0)
        rc = fn(rq, rs, &vault, &it, ctx);
    vault_rec_clear(&vault);
    vault_rec_clear(&it);
    return rc;
}

/* ------------------------------------------------------------ vaults */

/* 403 limit_exceeded: the org has n vaults, its cap lim. */
static int over_vault_limit(struct req *rq, int64_t lim, int64_t n)
{
    return err_set(&rq->err, E_FORBIDDEN, "limit_exceeded",
                   "limits.max_vaults (%lld) reached: this organization has %lld vaults; "
                   "delete one first",
                   (long long)lim, (long long)n);
}

/* limits.max_vaults of the plan (null: LIM_VAULTS_PER_ORG) against the org's
 * count; *lim receives the cap (for the insert, which counts again). */
static int check_vault_limit(struct req *rq, int64_t *lim)
{
    const json_t *ent = NULL;
    int rc = api_entitlements(rq, &ent);
    if (rc)
        return rc;
    int64_t n = 0;
    *lim = LIM_VAULTS_PER_ORG;
    if (ent_limit(ent, "max_vaults", lim) && *lim > LIM_VAULTS_PER_ORG)
        *lim = LIM_VAULTS_PER_ORG;
    if (store_vault_count(api_app(rq)->store, api_auth(rq)->org.id, "", &n) != 0)
        return err_set(&rq->err, E_INTERNAL, "internal", "vaults could not be counted");
    if (n >= *lim)
        return over_vault_limit(rq, *lim, n);
    return 0;
}

int vaults_upsert(struct req *rq, struct resp *rs)
{
    struct auth *a = api_auth(rq);
    json_t *body;
    int rc = req_json_object(rq, 0, &body);
    if (rc)
        return rc;
    static const char *const known[] = {"name", NULL};
    credentials_check_fields(body, known, "a vault (POST /vaults takes name)", &rq->err);
    json_t *nm = json_object_get(body, "name");
    if (!json_is_string(nm) || json_string_length(nm) < 1 ||
        json_string_length(nm) > NAME_MAX_BYTES ||
        strlen(json_string_value(nm)) != json_string_length(nm))
        err_field(&rq->err, "name", "is required: a string of 1-%d bytes", NAME_MAX_BYTES);
    rc = err_has_fields(&rq->err) ? E_INVALID : gate(rq);
    struct vault_rec vr;
    memset(&vr, 0, sizeof vr);
    if (rc == 0) {
        rc = store_vault_get(api_app(rq)->store, a->org.id, a->project.id, "",
                             json_string_value(nm), &vr);
        if (rc == 0 && strcmp(vr.name, json_string_value(nm)) != 0) {
            vault_rec_clear(&vr); /* an id that looks like the name: not an upsert of it */
            memset(&vr, 0, sizeof vr);
            rc = E_NOTFOUND;
        }
        if (rc == E_NOTFOUND) {
            int64_t lim = 0;
            rc = check_vault_limit(rq, &lim);
            if (rc == 0) {
                crypto_new_id(vr.id);
                snprintf(vr.org_id, sizeof vr.org_id, "%s", a->org.id);
                snprintf(vr.project_id, sizeof vr.project_id, "%s", a->project.id);
                snprintf(vr.name, sizeof vr.name, "%s", json_string_value(nm));
                snprintf(vr.type, sizeof vr.type, "vault");
                vr.created_at = vr.updated_at = clock_now_ms();
                vr.data = xstrdup("{}");
                /* Counted again with the insert, as one step per org on every
                 * node: creates racing on several nodes all passed the count. */
                rc = store_vault_insert(api_app(rq)->store, &vr, lim);
                if (rc == E_CONFLICT) { /* made meanwhile by another call: that one */
                    vault_rec_clear(&vr);
                    rc = store_vault_get(api_app(rq)->store, a->org.id, a->project.id, "",
                                         json_string_value(nm), &vr);
                }
                if (rc == E_LIMIT)
                    rc = over_vault_limit(rq, lim, lim);
                else if (rc)
                    err_set(&rq->err, rc, "internal", "the vault could not be stored");
            }
        } else if (rc) {
            err_set(&rq->err, rc, "internal", "vaults could not be read");
        }
    }
    if (rc == 0)
        resp_json(rs, 200, render_vault(&vr));
    vault_rec_clear(&vr);
    json_decref(body);
    return rc;
}

int vaults_list(struct req *rq, struct resp *rs)
{
    struct auth *a = api_auth(rq);
    size_t limit, offset;
    int rc = req_page(rq, &limit, &offset);
    if (rc == 0)
        rc = gate(rq);
    if (rc)
        return rc;
    struct page pg = {.limit = limit, .offset = offset};
    struct vault_rec *rows = NULL;
    size_t n = 0;
    const char *q = req_query(rq, "query");
    rc = store_vault_list(api_app(rq)->store, a->org.id, a->project.id,
                          rq->nparams ? rq->params[0] : "", q && *q ? q : NULL, &pg, &rows, &n);
    if (rc)
        return err_set(&rq->err, rc, "internal", "vaults could not be listed");
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(arr, render_vault(&rows[i]));
        vault_rec_clear(&rows[i]);
    }
    xfree(rows);
    resp_json(rs, 200, arr);
    resp_page(rs, offset, n, pg.has_more);
    return 0;
}

int vaults_get(struct req *rq, struct resp *rs)
{
    struct vault_rec v;
    memset(&v, 0, sizeof v);
    int rc = gate(rq);
    if (rc == 0)
        rc = load_vault(rq, &v);
    if (rc == 0)
        resp_json(rs, 200, render_vault(&v));
    vault_rec_clear(&v);
    return rc;
}

int vaults_delete(struct req *rq, struct resp *rs)
{
    struct auth *a = api_auth(rq);
    struct vault_rec v;
    memset(&v, 0, sizeof v);
    int rc = gate(rq);
    if (rc == 0)
        rc = load_vault(rq, &v);
    if (rc == 0 && (rc = store_vault_delete(api_app(rq)->store, a->org.id, a->project.id, v.id)))
        err_set(&rq->err, rc, rc == E_NOTFOUND ? "not_found" : "internal",
                "vault %s could not be deleted", rq->params[0]);
    vault_rec_clear(&v);
    if (rc == 0)
        resp_empty(rs, 204);
    return rc;
}

/* ------------------------------------------------------------ items */

int vault_items_list(struct req *rq, struct resp *rs)
{
    struct auth *a = api_auth(rq);
    size_t limit, offset;
    int rc = req_page(rq, &limit, &offset);
    struct vault_rec v;
    memset(&v, 0, sizeof v);
    if (rc == 0)
        rc = gate(rq);
    if (rc == 0)
        rc = load_vault(rq, &v);
    struct page pg = {.limit = limit, .offset = offset};
    struct vault_rec *rows = NULL;
    size_t n = 0;
    if (rc == 0 && (rc = store_vault_list(api_app(rq)->store, a->org.id, a->project.id, v.id, NULL,
                                          &pg, &rows, &n)) != 0)
        err_set(&rq->err, rc, "internal", "items could not be listed");
    vault_rec_clear(&v);
    if (rc)
        return rc;
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(arr, render_item(&rows[i]));
        vault_rec_clear(&rows[i]);
    }
    xfree(rows);
    resp_json(rs, 200, arr);
    resp_page(rs, offset, n, pg.has_more);
    return 0;
}

/* The item type of a PUT: credential; wallet and card are 501. */
static int check_type(struct req *rq, const json_t *body)
{
    const char *type = jsonx_str(body, "type");
    if (type && (strcmp(type, "wallet") == 0 || strcmp(type, "card") == 0))
        return err_set(&rq->err, E_NOTIMPL, "not_implemented",
                       "vault %s items: not implemented by this server (payment partners); "
                       "credential items are",
                       type);
    if (!type || strcmp(type, "credential") != 0)
        return err_field(&rq->err, "type", "must be credential (wallet and card: not served)");
    return 0;
}

/* Checks a credential spec {domain?, values?, totp_secret?} (patch: values
 * may be null or "" to clear a key). */
static void check_spec(struct req *rq, const json_t *spec, int patch)
{
    struct err *e = &rq->err;
    if (!json_is_object(spec)) {
        err_field(e, "spec", "must be an object {domain?, values?, totp_secret?}");
        return;
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)spec, k, v)
    {
        if (strcmp(k, "domain") && strcmp(k, "values") && strcmp(k, "totp_secret")) {
            char path[300];
            snprintf(path, sizeof path, "spec.%.250s", k);
            err_field(e, path, "is not a field of a credential item");
        }
    }
    json_t *d = json_object_get(spec, "domain");
    if (d && !json_is_null(d) &&
        (!json_is_string(d) || json_string_length(d) < 1 || json_string_length(d) > NAME_MAX_BYTES))
        err_field(e, "spec.domain", "must be a string of 1-%d bytes", NAME_MAX_BYTES);
    json_t *vals = json_object_get(spec, "values");
    if (vals && !json_is_null(vals)) {
        if (patch && json_is_object(vals)) {
            json_t *copy = json_object();
            json_object_foreach(vals, k, v)
            {
                if (!json_is_null(v))
                    json_object_set(copy, k, v);
            }
            credentials_check_values(copy, "spec.values", e);
            json_decref(copy);
        } else {
            credentials_check_values(vals, "spec.values", e);
        }
    }
    (void)credentials_check_totp(spec, patch, e);
}

/* HMAC-SHA256 (hex) of spec's sorted compact JSON under the secret key. */
static void spec_mac(const json_t *spec, char out[65])
{
    char *text = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
    uint8_t mac[32];
    crypto_hmac_sha256(credentials_key(), SECRETBOX_KEY_LEN, text ? text : "",
                       text ? strlen(text) : 0, mac);
    if (text) {
        OPENSSL_cleanse(text, strlen(text));
        xfree(text);
    }
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", mac[i]);
}

/* Appends an event to an item's data, keeping the newest LIM_VAULT_ITEM_EVENTS. */
static void add_event(json_t *d, json_t *ev)
{
    char t[40];
    json_object_set_new(ev, "at", json_string(clock_fmt_rfc3339(clock_now_ms(), t, sizeof t)));
    json_t *evs = json_object_get(d, "events");
    if (!json_is_array(evs)) {
        evs = json_array();
        json_object_set_new(d, "events", evs);
    }
    json_array_append_new(evs, ev);
    while (json_array_size(evs) > LIM_VAULT_ITEM_EVENTS)
        json_array_remove(evs, 0);
}

/* Applies a spec to d (a credentials_doc): domain, sealed values (null/""
 * removes on patch), TOTP secret. */
static int apply_spec(struct req *rq, const json_t *spec, json_t *d)
{
    json_t *dom = json_object_get(spec, "domain");
    if (json_is_string(dom))
        json_object_set_new(d, "domain", json_string(json_string_value(dom)));
    else if (dom && json_is_null(dom))
        json_object_del(d, "domain");
    json_t *sealed = json_object_get(d, "values");
    json_t *vals = json_object_get(spec, "values");
    json_t *set = json_object();
    const char *k;
    json_t *v;
    size_t added = 0; /* keys set that the item does not hold yet */
    json_object_foreach(vals, k, v)
    {
        if (json_is_null(v) || (json_is_string(v) && json_string_length(v) == 0)) {
            json_object_del(sealed, k);
        } else {
            json_object_set(set, k, v);
            added += json_object_get(sealed, k) == NULL;
        }
    }
    int rc = 0;
    if (json_object_size(sealed) + added > LIM_CREDENTIAL_VALUES)
        rc = err_field(&rq->err, "spec.values", "an item holds at most %d keys",
                       LIM_CREDENTIAL_VALUES);
    if (rc == 0)
        rc = credentials_seal_values(rq, set, sealed);
    json_decref(set);
    int totp_set = 0;
    if (rc == 0)
        rc = credentials_seal_totp(rq, spec, d, &totp_set);
    return rc;
}

int vault_item_put(struct req *rq, struct resp *rs)
{
    struct auth *a = api_auth(rq);
    json_t *body;
    int rc = req_json_object(rq, 0, &body);
    if (rc)
        return rc;
    json_t *spec = json_object_get(body, "spec");
    rc = check_type(rq, body);
    if (rc == E_NOTIMPL) {
        json_decref(body);
        return rc;
    }
    static const char *const known[] = {"type", "spec", NULL};
    credentials_check_fields(body, known, "an item (PUT takes type and spec)", &rq->err);
    if (strlen(rq->params[1]) > NAME_MAX_BYTES)
        err_field(&rq->err, "key", "must be at most %d bytes", NAME_MAX_BYTES);
    check_spec(rq, spec, 0);
    rc = err_has_fields(&rq->err) ? E_INVALID : gate(rq);
    struct vault_rec vault, it;
    memset(&vault, 0, sizeof vault);
    memset(&it, 0, sizeof it);
    if (rc == 0)
        rc = load_vault(rq, &vault);
    char mac[65] = "";
    if (rc == 0)
        spec_mac(spec, mac);
    if (rc == 0) {
        int g = store_vault_get(api_app(rq)->store, a->org.id, a->project.id, vault.id,
                                rq->params[1], &it);
        if (g == 0) {
            json_t *d = json_loads(it.data ? it.data : "{}", 0, NULL);
            const char *old = jsonx_str(d, "spec_mac");
            if (strcmp(it.name, rq->params[1]) != 0 || !old || strcmp(old, mac) != 0)
                rc = err_set(&rq->err, E_CONFLICT, "conflict",
                             "item %s of vault %s exists with another spec (PATCH it with its "
                             "version)",
                             rq->params[1], vault.name);
            json_decref(d);
            if (rc == 0)
                resp_json(rs, 200, render_item(&it));
            goto out;
        }
        if (g != E_NOTFOUND) {
            rc = err_set(&rq->err, g, "internal", "items could not be read");
            goto out;
        }
        int64_t n = 0;
        if (store_vault_count(api_app(rq)->store, a->org.id, vault.id, &n) != 0)
            rc = err_set(&rq->err, E_INTERNAL, "internal", "items could not be counted");
        else if (n >= LIM_VAULT_ITEMS)
            rc = err_set(&rq->err, E_FORBIDDEN, "limit_exceeded",
                         "vault %s holds %lld items, the most one vault may (%d)", vault.name,
                         (long long)n, LIM_VAULT_ITEMS);
        json_t *d = credentials_doc(NULL);
        if (rc == 0)
            rc = apply_spec(rq, spec, d);
        json_object_set_new(d, "spec_mac", json_string(mac));
        add_event(d, json_pack("{s:s,s:s}", "type", "created", "api_key_id", a->key.id));
        if (rc == 0) {
            memset(&it, 0, sizeof it);
            crypto_new_id(it.id);
            snprintf(it.org_id, sizeof it.org_id, "%s", a->org.id);
            snprintf(it.project_id, sizeof it.project_id, "%s", a->project.id);
            snprintf(it.vault_id, sizeof it.vault_id, "%s", vault.id);
            snprintf(it.name, sizeof it.name, "%s", rq->params[1]);
            snprintf(it.type, sizeof it.type, "credential");
            it.version = 1;
            it.created_at = it.updated_at = clock_now_ms();
            it.data = jsonx_dump(d);
            rc = store_vault_insert(api_app(rq)->store, &it, LIM_VAULT_ITEMS);
            if (rc == E_LIMIT)
                rc = err_set(&rq->err, E_FORBIDDEN, "limit_exceeded",
                             "vault %s holds %d items, the most one vault may", vault.name,
                             LIM_VAULT_ITEMS);
            else if (rc)
                err_set(&rq->err, rc, rc == E_CONFLICT ? "conflict" : "internal",
                        "item %s could not be stored", rq->params[1]);
        }
        json_decref(d);
        if (rc == 0)
            resp_json(rs, 200, render_item(&it));
    }
out:
    vault_rec_clear(&vault);
    vault_rec_clear(&it);
    credentials_wipe(rq, json_object_get(spec, "values") ? (json_t *)spec : NULL);
    json_decref(body);
    return rc;
}

static int item_show(struct req *rq, struct resp *rs, const struct vault_rec *vault,
                     struct vault_rec *it, void *ctx)
{
    (void)rq, (void)vault, (void)ctx;
    resp_json(rs, 200, render_item(it));
    return 0;
}

int vault_item_get(struct req *rq, struct resp *rs)
{
    return with_item(rq, rs, item_show, NULL);
}

/* A PATCH's version and spec (borrowed from its body). */
struct item_patch {
    json_int_t version;
    const json_t *spec;
};

static int item_patch(struct req *rq, struct resp *rs, const struct vault_rec *vault,
                      struct vault_rec *it, void *ctx)
{
    (void)vault;
    const struct item_patch *p = ctx;
    struct auth *a = api_auth(rq);
    if (it->version != p->version)
        return err_set(&rq->err, E_CONFLICT, "version_conflict",
                       "item %s is at version %lld, not %lld: read it again", it->name,
                       (long long)it->version, (long long)p->version);
    json_t *d = credentials_doc(it->data);
    int rc = apply_spec(rq, p->spec, d);
    if (rc == 0) {
        /* A later PUT of any spec conflicts: the item no longer is one PUT's. */
        json_object_set_new(d, "spec_mac", json_string(""));
        add_event(d, json_pack("{s:s,s:s}", "type", "updated", "api_key_id", a->key.id));
        xfree(it->data);
        it->data = jsonx_dump(d);
        int64_t was = it->version;
        it->version = was + 1;
        it->updated_at = clock_now_ms();
        rc = store_vault_update(api_app(rq)->store, it, was);
        if (rc)
            err_set(&rq->err, rc,
                    rc == E_CONFLICT   ? "version_conflict"
                    : rc == E_NOTFOUND ? "not_found"
                                       : "internal",
                    "item %s could not be updated", it->name);
    }
    if (rc == 0)
        resp_json(rs, 200, render_item(it));
    json_decref(d);
    return rc;
}

int vault_item_patch(struct req *rq, struct resp *rs)
{
    json_t *body;
    int rc = req_json_object(rq, 0, &body);
    if (rc)
        return rc;
    static const char *const known[] = {"version", "spec", NULL};
    credentials_check_fields(body, known, "an item update (version, spec)", &rq->err);
    json_t *ver = json_object_get(body, "version");
    if (!json_is_integer(ver) || json_integer_value(ver) < 1)
        err_field(&rq->err, "version", "is required: the item's current version (an integer >= 1)");
    json_t *spec = json_object_get(body, "spec");
    check_spec(rq, spec, 1);
    struct item_patch p = {json_integer_value(ver), spec};
    rc = with_item(rq, rs, item_patch, &p);
    credentials_wipe(rq, json_is_object(spec) ? spec : NULL);
    json_decref(body);
    return rc;
}

static int item_delete(struct req *rq, struct resp *rs, const struct vault_rec *vault,
                       struct vault_rec *it, void *ctx)
{
    (void)vault, (void)ctx;
    struct auth *a = api_auth(rq);
    int rc = store_vault_delete(api_app(rq)->store, a->org.id, a->project.id, it->id);
    if (rc)
        return err_set(&rq->err, rc, "internal", "item %s could not be deleted", it->name);
    resp_empty(rs, 204);
    return 0;
}

int vault_item_delete(struct req *rq, struct resp *rs)
{
    return with_item(rq, rs, item_delete, NULL);
}

static int item_events(struct req *rq, struct resp *rs, const struct vault_rec *vault,
                       struct vault_rec *it, void *ctx)
{
    (void)rq, (void)vault, (void)ctx;
    json_t *d = json_loads(it->data ? it->data : "{}", 0, NULL);
    json_t *evs = json_object_get(d, "events");
    resp_json(rs, 200, json_is_array(evs) ? json_incref(evs) : json_array());
    json_decref(d);
    return 0;
}

int vault_item_events(struct req *rq, struct resp *rs)
{
    return with_item(rq, rs, item_events, NULL);
}

/* ------------------------------------------------------------ fill */

/* One binding into the page: "ok", or why not into *why. The clear value
 * lives in the call's params only and is zeroed before they are freed. */
/* Milliseconds left before deadline (a clock_mono_ms time), at least 1. */
static int left_ms(int64_t deadline)
{
    int64_t n = deadline - clock_mono_ms();
    return n < 1 ? 1 : (int)n;
}

static const char *fill_one(struct cdp_client *cc, const char *sid, const char *selector,
                            char *value, int64_t deadline)
{
    struct err e;
    err_init(&e);
    json_t *res = NULL;
    const char *out = "failed";
    json_t *p = json_pack("{s:i}", "depth", 0);
    int rc = cdp_client_call(cc, sid, "DOM.getDocument", p, 1, left_ms(deadline), &res, &e);
    json_decref(p);
    json_int_t root =
        rc == 0 ? json_integer_value(json_object_get(json_object_get(res, "root"), "nodeId")) : 0;
    json_decref(res);
    res = NULL;
    if (rc)
        return rc == E_UNAVAIL ? "unknown" : "failed";
    p = json_pack("{s:I,s:s}", "nodeId", root, "selector", selector);
    rc = cdp_client_call(cc, sid, "DOM.querySelector", p, 1, left_ms(deadline), &res, &e);
    json_decref(p);
    json_int_t node = rc == 0 ? json_integer_value(json_object_get(res, "nodeId")) : 0;
    json_decref(res);
    res = NULL;
    if (rc)
        return rc == E_UNAVAIL ? "unknown" : "failed";
    if (!node)
        return "not_found";
    p = json_pack("{s:I}", "nodeId", node);
    rc = cdp_client_call(cc, sid, "DOM.resolveNode", p, 1, left_ms(deadline), &res, &e);
    json_decref(p);
    const char *obj = rc == 0 ? jsonx_str(json_object_get(res, "object"), "objectId") : NULL;
    if (!obj) {
        json_decref(res);
        return rc == E_UNAVAIL ? "unknown" : "failed";
    }
    json_t *arg = json_string(value);
    p = json_pack("{s:s,s:s,s:[{s:O}],s:b}", "objectId", obj, "functionDeclaration", FILL_FN,
                  "arguments", "value", arg, "returnByValue", 1);
    json_decref(res);
    res = NULL;
    rc = cdp_client_call(cc, sid, "Runtime.callFunctionOn", p, 1, left_ms(deadline), &res, &e);
    OPENSSL_cleanse((char *)json_string_value(arg), json_string_length(arg));
    json_decref(arg);
    json_decref(p);
    if (rc)
        out = rc == E_UNAVAIL ? "unknown" : "failed";
    else {
        const char *r = jsonx_str(json_object_get(res, "result"), "value");
        out = r && strcmp(r, "ok") == 0               ? "ok"
              : r && strcmp(r, "not_fillable") == 0   ? "not_fillable"
              : r && strcmp(r, "not_an_element") == 0 ? "not_fillable"
                                                      : "failed";
    }
    json_decref(res);
    return out;
}

static void check_fill(struct req *rq, const json_t *body)
{
    struct err *e = &rq->err;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)body, k, v)
    {
        if (strcmp(k, "type") && strcmp(k, "browser_id") && strcmp(k, "bindings") &&
            strcmp(k, "timeout_ms")) {
            char path[300];
            snprintf(path, sizeof path, "%.250s", k);
            err_field(e, path, "is not a field of a fill (type, browser_id, bindings, timeout_ms)");
        }
    }
    json_t *b = json_object_get(body, "browser_id");
    if (!json_is_string(b) || json_string_length(b) < 1 || json_string_length(b) > NAME_MAX_BYTES)
        err_field(e, "browser_id", "is required: the id of a running browser session");
    json_t *t = json_object_get(body, "timeout_ms");
    if (t && (!json_is_integer(t) || json_integer_value(t) < 1 ||
              json_integer_value(t) > LIM_VAULT_FILL_TIMEOUT_MS))
        err_field(e, "timeout_ms", "must be an integer 1-%d", LIM_VAULT_FILL_TIMEOUT_MS);
    json_t *bs = json_object_get(body, "bindings");
    if (!json_is_array(bs) || json_array_size(bs) < 1 ||
        json_array_size(bs) > LIM_VAULT_FILL_BINDINGS) {
        err_field(e, "bindings", "is required: 1-%d of {selector, field}", LIM_VAULT_FILL_BINDINGS);
        return;
    }
    size_t i;
    json_t *x;
    json_array_foreach(bs, i, x)
    {
        char path[64];
        const char *sel = jsonx_str(x, "selector"), *field = jsonx_str(x, "field");
        snprintf(path, sizeof path, "bindings[%zu].selector", i);
        if (!sel || !*sel || strlen(sel) > SELECTOR_MAX)
            err_field(e, path, "must be a CSS selector of 1-%d bytes", SELECTOR_MAX);
        snprintf(path, sizeof path, "bindings[%zu].field", i);
        if (!field || !*field || strlen(field) > LIM_CREDENTIAL_KEY_BYTES)
            err_field(e, path, "must name a value key of the item, or totp_code");
    }
}

/* A fill writes values of the vaults linked to the browser at its creation
 * only (POST /browsers {vaults}): 403 vault_not_attached for another. */
static int check_attached(struct req *rq, const struct session_rec *srec,
                          const struct vault_rec *vault)
{
    json_t *sd = json_loads(srec->data ? srec->data : "{}", 0, NULL);
    int found = 0;
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(sd, "vaults"), i, r)
    {
        const char *id = jsonx_str(r, "id");
        found |= id && strcmp(id, vault->id) == 0;
    }
    json_decref(sd);
    if (found)
        return 0;
    return err_set(&rq->err, E_FORBIDDEN, "vault_not_attached",
                   "browser_id: browser session %s was not created with vault %s (link it with "
                   "POST /browsers {vaults: [{\"name\": \"%s\"}]})",
                   srec->id, vault->id, vault->name);
}

/* ---- POST /browsers {vaults} (session/ext.h) ---- */

/* Resolves every VaultReference of the create ({id} or {name}, checked by
 * domain/session_rules) in the owner's project and stores [{id, name}] in
 * the session's document. */
static int on_prepare(struct session_ctx *sc, struct err *e)
{
    json_t *refs = json_object_get(sc->body, "vaults");
    if (!json_is_array(refs) || json_array_size(refs) == 0)
        return 0;
    if (!ent_feature_on(sc->ent, FEATURE))
        return err_set(e, E_FORBIDDEN, "feature_not_enabled",
                       "vaults: features.vaults is not enabled for this organization's plan");
    if (json_array_size(refs) > LIM_VAULTS_PER_BROWSER)
        return err_field(e, "vaults", "a browser links at most %d vaults", LIM_VAULTS_PER_BROWSER);
    json_t *out = json_array();
    int rc = 0;
    size_t i;
    json_t *ref;
    json_array_foreach(refs, i, ref)
    {
        const char *id = jsonx_str(ref, "id"), *name = jsonx_str(ref, "name");
        const char *want = id ? id : name;
        char path[32];
        snprintf(path, sizeof path, "vaults[%zu]", i);
        struct vault_rec v;
        memset(&v, 0, sizeof v);
        int g = want ? store_vault_get(sc->app->store, sc->rec->org_id, sc->rec->project_id, "",
                                       want, &v)
                     : E_NOTFOUND;
        if (g == 0 && strcmp(id ? v.id : v.name, want) != 0)
            g = E_NOTFOUND; /* {id} matched a name or {name} an id */
        if (g == E_NOTFOUND)
            rc =
                err_set(e, E_NOTFOUND, "not_found", "%s: vault %s %.255s not found in this project",
                        path, id ? "id" : "name", want ? want : "");
        else if (g)
            rc = err_set(e, g, "internal", "%s: the vault could not be read", path);
        size_t k;
        json_t *seen;
        json_array_foreach(out, k, seen) if (rc == 0 && strcmp(jsonx_str(seen, "id"), v.id) == 0)
            rc = err_field(e, path, "vault %s is already listed", v.id);
        if (rc == 0)
            json_array_append_new(out, json_pack("{s:s,s:s}", "id", v.id, "name", v.name));
        vault_rec_clear(&v);
        if (rc)
            break;
    }
    if (rc == 0)
        json_object_set(sc->doc, "vaults", out);
    json_decref(out);
    return rc;
}

static void on_render(struct session_ctx *sc, json_t *record)
{
    json_t *v = sc->doc ? json_object_get(sc->doc, "vaults") : NULL;
    if (json_is_array(v))
        json_object_set(record, "vaults", v);
}

static const struct session_ext vaults_ext = {
    .name = "vaults", .prepare = on_prepare, .render = on_render};

/* Registered at load time, as api/repl does. */
__attribute__((constructor)) static void vaults_register(void)
{
    session_ext_register(&vaults_ext);
}

/* The fill of an item (ctx: the request's body, checked by check_fill). */
static int item_fill(struct req *rq, struct resp *rs, const struct vault_rec *vault,
                     struct vault_rec *it, void *ctx)
{
    const json_t *body = ctx;
    struct auth *a = api_auth(rq);
    struct session_rec srec;
    memset(&srec, 0, sizeof srec);
    struct live *live = NULL;
    char ws[512];
    int rc = api_live_session_id(rq, jsonx_str(body, "browser_id"), &srec, &live, ws, sizeof ws);
    if (rc == 0)
        rc = check_attached(rq, &srec, vault);
    json_t *d = NULL;
    struct cdp_client *cc = NULL;
    char sid[128] = "";
    int ms = json_is_integer(json_object_get(body, "timeout_ms"))
                 ? (int)json_integer_value(json_object_get(body, "timeout_ms"))
                 : FILL_DEFAULT_MS;
    /* timeout_ms bounds the whole operation: fields not reached by then are
     * not attempted (failed, reason timeout). */
    int64_t deadline = clock_mono_ms() + ms;
    if (rc == 0) {
        live_touch(live);
        d = json_loads(it->data ? it->data : "{}", 0, NULL);
        struct err e;
        err_init(&e);
        if (cdp_client_open(ws, left_ms(deadline), &cc, &e) != 0 ||
            cdp_page_attach_first(cc, left_ms(deadline), sid, sizeof sid, &e) != 0)
            rc = err_set(&rq->err, E_UNAVAIL, "browser_unavailable",
                         "browser session %s: its page is not answering", srec.id);
    }
    json_t *fields = json_array();
    int filled = 0;
    if (rc == 0) {
        json_t *sealed = json_object_get(d, "values");
        size_t i;
        json_t *x;
        json_array_foreach(json_object_get(body, "bindings"), i, x)
        {
            const char *sel = jsonx_str(x, "selector"), *field = jsonx_str(x, "field");
            const char *enc = jsonx_str(sealed, field);
            const char *status;
            char *clear = NULL;
            char code[9] = "";
            if (clock_mono_ms() >= deadline) {
                status = "timeout";
            } else if (enc) {
                struct err e;
                err_init(&e);
                status = secretbox_open(credentials_key(), enc, &clear, &e) == 0 ? NULL : "failed";
            } else if (strcmp(field, "totp_code") == 0 && jsonx_str(d, "totp")) {
                int64_t exp;
                status = credentials_code_of(rq, jsonx_str(d, "totp"), code, &exp) == 0 ? NULL
                                                                                        : "failed";
                err_init(&rq->err);
            } else {
                status = "no_such_field";
            }
            if (!status)
                status = fill_one(cc, sid, sel, clear ? clear : code, deadline);
            secretbox_wipe(clear);
            OPENSSL_cleanse(code, sizeof code);
            filled += strcmp(status, "ok") == 0;
            const char *outcome = strcmp(status, "ok") == 0        ? "ok"
                                  : strcmp(status, "unknown") == 0 ? "unknown"
                                                                   : "failed";
            json_t *f =
                json_pack("{s:s,s:s,s:s}", "selector", sel, "field", field, "status", outcome);
            if (strcmp(outcome, "failed") == 0)
                json_object_set_new(f, "reason", json_string(status));
            json_array_append_new(fields, f);
        }
        add_event(d, json_pack("{s:s,s:s,s:s,s:i}", "type", "fill", "browser_id", srec.id,
                               "api_key_id", a->key.id, "fields_filled", filled));
        xfree(it->data);
        it->data = jsonx_dump(d);
        /* An event is no change of the item: version and updated_at stay. */
        (void)store_vault_update(api_app(rq)->store, it, it->version);
        char t[40];
        resp_json(rs, 200,
                  json_pack("{s:s,s:s,s:s,s:o,s:s}", "type", "fill", "status",
                            filled == (int)json_array_size(fields) ? "ok"
                            : filled                               ? "partial"
                                                                   : "failed",
                            "browser_id", srec.id, "fields", fields, "completed_at",
                            clock_fmt_rfc3339(clock_now_ms(), t, sizeof t)));
        fields = NULL;
    }
    json_decref(fields);
    cdp_client_close(cc);
    if (live)
        sessmgr_put(live);
    session_rec_clear(&srec);
    json_decref(d);
    return rc;
}

int vault_item_operation(struct req *rq, struct resp *rs)
{
    rq->no_retry = 1;
    json_t *body;
    int rc = req_json_object(rq, 0, &body);
    if (rc)
        return rc;
    const char *type = jsonx_str(body, "type");
    if (!type)
        err_field(&rq->err, "type", "is required (credential items offer fill)");
    else if (strcmp(type, "fill") != 0) {
        int g = gate(rq);
        if (g == 0)
            g = err_set(&rq->err, E_CONFLICT, "operation_not_available",
                        "operation %.64s is not available for a credential item (available: "
                        "fill)",
                        type);
        json_decref(body); /* type belongs to body */
        return g;
    }
    if (!err_has_fields(&rq->err))
        check_fill(rq, body);
    rc = with_item(rq, rs, item_fill, body);
    json_decref(body);
    return rc;
}
