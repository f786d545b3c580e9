/*
 * /credentials (see api/credentials.h).
 *
 * Stored data document of a credential: {"values": {key: "<sealed>"},
 * "totp": "<sealed>"?, "sso_provider": "..."?}. The record the API shows is
 * rendered from it; no sealed or clear value ever is.
 */
#include "api/credentials.h"

#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/secretbox.h"
#include "core/totp.h"
#include "core/xalloc.h"
#include "session/app.h"
#include "store/store.h"

#define FEATURE         "credentials"
#define SSO_MAX         64
#define TOTP_NORM_BYTES (LIM_CREDENTIAL_TOTP_CHARS + 1)

static pthread_mutex_t key_mu = PTHREAD_MUTEX_INITIALIZER;
static int key_loaded;
static unsigned char key[SECRETBOX_KEY_LEN];

const unsigned char *credentials_key(void)
{
    return key;
}

/* The store's secret key (the one proxies_init made or found), loaded once. */
int credentials_load_key(struct req *rq)
{
    int rc = 0;
    pthread_mutex_lock(&key_mu);
    if (!key_loaded) {
        unsigned char raw[SECRETBOX_KEY_LEN];
        char fresh[2 * SECRETBOX_KEY_LEN + 1], hex[2 * SECRETBOX_KEY_LEN + 8];
        crypto_random(raw, sizeof raw);
        for (size_t i = 0; i < sizeof raw; i++)
            snprintf(fresh + 2 * i, 3, "%02x", raw[i]);
        OPENSSL_cleanse(raw, sizeof raw);
        if (store_meta_init(api_app(rq)->store, "secret_key", fresh, hex, sizeof hex) != 0 ||
            secretbox_key_from_hex(hex, key) != 0)
            rc = err_set(&rq->err, E_INTERNAL, "internal",
                         "credentials: the server's secret key cannot be loaded");
        else
            key_loaded = 1;
        OPENSSL_cleanse(fresh, sizeof fresh);
        OPENSSL_cleanse(hex, sizeof hex);
    }
    pthread_mutex_unlock(&key_mu);
    return rc;
}

/* Zeroes the clear text of a request that carried secrets: the JSON strings
 * of values and totp_secret, and the raw body they were parsed from. */
void credentials_wipe(struct req *rq, json_t *body)
{
    json_t *vals = json_object_get(body, "values");
    const char *k;
    json_t *v;
    json_object_foreach(vals, k, v)
    {
        if (json_is_string(v))
            OPENSSL_cleanse((char *)json_string_value(v), json_string_length(v));
    }
    json_t *t = json_object_get(body, "totp_secret");
    if (json_is_string(t))
        OPENSSL_cleanse((char *)json_string_value(t), json_string_length(t));
    if (rq->body && rq->body_len)
        OPENSSL_cleanse(rq->body, rq->body_len);
}

/* Uppercase base32 without spaces, dashes or padding into out; E_INVALID
 * when it does not decode (then nothing of it is kept). */
static int totp_normalize(const char *in, char out[TOTP_NORM_BYTES])
{
    size_t n = 0;
    for (const char *p = in; *p; p++) {
        char c = *p;
        if (c == ' ' || c == '-' || c == '=' || c == '\t')
            continue;
        if (n + 1 >= TOTP_NORM_BYTES)
            return E_INVALID;
        out[n++] = c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
    }
    out[n] = '\0';
    char code[9];
    int64_t exp;
    int rc = totp_code(out, 0, code, &exp);
    OPENSSL_cleanse(code, sizeof code);
    return rc;
}

/* The current code of a sealed secret into code / *expires_ms. */
int credentials_code_of(struct req *rq, const char *sealed, char code[9], int64_t *expires_ms)
{
    char *secret = NULL;
    struct err e;
    err_init(&e);
    int rc = secretbox_open(key, sealed, &secret, &e);
    int64_t exp = 0;
    if (rc == 0)
        rc = totp_code(secret, clock_now_ms() / 1000, code, &exp);
    secretbox_wipe(secret);
    if (rc)
        return err_set(&rq->err, E_INTERNAL, "internal",
                       "credentials: the stored TOTP secret cannot be opened");
    *expires_ms = exp * 1000;
    return 0;
}

static json_t *render(const struct cred_rec *c, int single, const char *code, int64_t code_exp)
{
    char t[40];
    json_t *d = json_loads(c->data ? c->data : "{}", 0, NULL);
    if (!d)
        d = json_object();
    json_t *vals = json_object_get(d, "values");
    json_t *r = json_object();
    json_object_set_new(r, "id", json_string(c->id));
    json_object_set_new(r, "name", json_string(c->name));
    json_object_set_new(r, "domain", json_string(c->domain));
    json_object_set_new(r, "created_at",
                        json_string(clock_fmt_rfc3339(c->created_at, t, sizeof t)));
    json_object_set_new(r, "updated_at",
                        json_string(clock_fmt_rfc3339(c->updated_at, t, sizeof t)));
    json_object_set_new(r, "has_values", json_boolean(json_object_size(vals) > 0));
    json_object_set_new(r, "has_totp_secret", json_boolean(jsonx_str(d, "totp") != NULL));
    const char *sso = jsonx_str(d, "sso_provider");
    json_object_set_new(r, "sso_provider", sso ? json_string(sso) : json_null());
    if (single) {
        json_t *keys = json_array();
        const char *k;
        json_t *v;
        json_object_foreach(vals, k, v)
        {
            (void)v;
            json_array_append_new(keys, json_string(k));
        }
        json_object_set_new(r, "value_keys", keys);
    }
    if (code) {
        json_object_set_new(r, "totp_code", json_string(code));
        json_object_set_new(r, "totp_code_expires_at",
                            json_string(clock_fmt_rfc3339(code_exp, t, sizeof t)));
    }
    json_decref(d);
    return r;
}

static void str_field(const json_t *body, const char *name, size_t max, int required,
                      const char **out, struct err *e)
{
    json_t *v = json_object_get(body, name);
    *out = NULL;
    if (!v || json_is_null(v)) {
        if (required)
            err_field(e, name, "is required");
        return;
    }
    if (!json_is_string(v) || json_string_length(v) < 1 || json_string_length(v) > max) {
        err_field(e, name, "must be a string of 1-%zu characters", max);
        return;
    }
    if (strlen(json_string_value(v)) != json_string_length(v)) {
        err_field(e, name, "must not contain NUL characters");
        return;
    }
    *out = json_string_value(v);
}

/* Checks a values object ({key: string}); field is its path in errors. */
void credentials_check_values(const json_t *vals, const char *field, struct err *e)
{
    if (!json_is_object(vals)) {
        err_field(e, field, "must be an object of field name to string value");
        return;
    }
    if (json_object_size(vals) > LIM_CREDENTIAL_VALUES) {
        err_field(e, field, "must have at most %d keys", LIM_CREDENTIAL_VALUES);
        return;
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)vals, k, v)
    {
        char path[200];
        snprintf(path, sizeof path, "%s.%.*s", field, LIM_CREDENTIAL_KEY_BYTES, k);
        size_t kl = strlen(k);
        if (kl < 1 || kl > LIM_CREDENTIAL_KEY_BYTES)
            err_field(e, path, "keys must be 1-%d bytes", LIM_CREDENTIAL_KEY_BYTES);
        else if (!json_is_string(v))
            err_field(e, path, "must be a string");
        else if (json_string_length(v) > LIM_CREDENTIAL_VALUE_BYTES ||
                 strlen(json_string_value(v)) != json_string_length(v))
            err_field(e, path, "must be at most %d bytes without NUL characters",
                      LIM_CREDENTIAL_VALUE_BYTES);
    }
}

/* Seals every value of vals into dst (an object of sealed strings). */
int credentials_seal_values(struct req *rq, const json_t *vals, json_t *dst)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)vals, k, v)
    {
        char *sealed = NULL;
        int rc = secretbox_seal(key, json_string_value(v), &sealed, &rq->err);
        if (rc)
            return rc;
        json_object_set_new(dst, k, json_string(sealed));
        xfree(sealed);
    }
    return 0;
}

json_t *credentials_doc(const char *data)
{
    json_t *d = json_loads(data ? data : "{}", 0, NULL);
    if (!json_is_object(d)) {
        json_decref(d);
        d = json_object();
    }
    if (!json_is_object(json_object_get(d, "values")))
        json_object_set_new(d, "values", json_object());
    return d;
}

/* Seals the normalized totp_secret of body into d["totp"] ("" removes it);
 * *set is 1 when a secret was just set. */
int credentials_seal_totp(struct req *rq, const json_t *body, json_t *d, int *set)
{
    json_t *t = json_object_get(body, "totp_secret");
    *set = 0;
    if (!t || json_is_null(t))
        return 0;
    char norm[TOTP_NORM_BYTES];
    int rc = 0;
    if (json_string_length(t) == 0) {
        json_object_del(d, "totp");
    } else if (totp_normalize(json_string_value(t), norm) != 0) {
        rc = err_field(&rq->err, "totp_secret",
                       "must be a base32 secret (A-Z, 2-7; spaces ignored) of at most %d "
                       "characters",
                       LIM_CREDENTIAL_TOTP_CHARS);
    } else {
        char *sealed = NULL;
        rc = secretbox_seal(key, norm, &sealed, &rq->err);
        if (rc == 0) {
            json_object_set_new(d, "totp", json_string(sealed));
            *set = 1;
        }
        xfree(sealed);
    }
    OPENSSL_cleanse(norm, sizeof norm);
    return rc;
}

int credentials_check_totp(const json_t *body, int allow_empty, struct err *e)
{
    json_t *t = json_object_get(body, "totp_secret");
    if (!t || json_is_null(t))
        return 0;
    if (!json_is_string(t) || (!allow_empty && json_string_length(t) == 0) ||
        json_string_length(t) > LIM_CREDENTIAL_TOTP_CHARS)
        return err_field(e, "totp_secret", "must be a base32 secret of 1-%d characters%s",
                         LIM_CREDENTIAL_TOTP_CHARS, allow_empty ? " (\"\" removes it)" : "");
    if (json_string_length(t) == 0)
        return 0;
    char norm[TOTP_NORM_BYTES];
    int rc = totp_normalize(json_string_value(t), norm);
    OPENSSL_cleanse(norm, sizeof norm);
    if (rc)
        return err_field(e, "totp_secret",
                         "must be base32 (A-Z and 2-7; spaces, dashes and padding ignored)");
    return 0;
}

/* A 400 detail "is not a field of <what>" for each key of body not in known
 * (NULL-ended). */
void credentials_check_fields(const json_t *body, const char *const *known, const char *what,
                              struct err *e)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)body, k, v)
    {
        (void)v;
        size_t i = 0;
        while (known[i] && strcmp(known[i], k) != 0)
            i++;
        if (!known[i]) {
            char path[300];
            snprintf(path, sizeof path, "%.250s", k);
            err_field(e, path, "is not a field of %s", what);
        }
    }
}

static int load(struct req *rq, struct cred_rec *c)
{
    struct auth *a = api_auth(rq);
    memset(c, 0, sizeof *c);
    int rc = store_cred_get(api_app(rq)->store, a->org.id, a->project.id, rq->params[0], c);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "credential %s not found in this project",
                       rq->params[0]);
    if (rc)
        return err_set(&rq->err, rc, "internal", "credential %s could not be read", rq->params[0]);
    return 0;
}

/* The gate every handler passes first: the plan, then the key. */
static int gate(struct req *rq)
{
    int rc = api_require_feature(rq, FEATURE);
    return rc ? rc : credentials_load_key(rq);
}

/* Answers a created or updated record; code when a secret was just set. */
static int answer(struct req *rq, struct resp *rs, const struct cred_rec *c, const json_t *d,
                  int totp_set)
{
    char code[9] = "";
    int64_t exp = 0;
    if (totp_set && credentials_code_of(rq, jsonx_str(d, "totp"), code, &exp) != 0)
        return rq->err.rc;
    resp_json(rs, 200, render(c, 1, totp_set ? code : NULL, exp));
    OPENSSL_cleanse(code, sizeof code);
    return 0;
}

/* 429 limit_exceeded: the org stores count credentials, its cap. */
static int over_cap(struct err *e, int64_t count)
{
    return api_over_org_cap(e, "credentials", count, LIM_CREDENTIALS_PER_ORG,
                            LIM_CREDENTIALS_RETRY_AFTER_S);
}

int credentials_create(struct req *rq, struct resp *rs)
{
    static const char *const known[] = {"name",        "domain",       "values",
                                        "totp_secret", "sso_provider", NULL};
    struct auth *a = api_auth(rq);
    struct err *e = &rq->err;
    json_t *body;
    int rc = req_json_object(rq, 0, &body);
    if (rc)
        return rc;
    credentials_check_fields(body, known, "a credential", e);
    const char *name, *domain, *sso;
    str_field(body, "name", LIM_CREDENTIAL_NAME_BYTES, 1, &name, e);
    str_field(body, "domain", LIM_CREDENTIAL_NAME_BYTES, 1, &domain, e);
    str_field(body, "sso_provider", SSO_MAX, 0, &sso, e);
    json_t *vals = json_object_get(body, "values");
    if (!vals)
        err_field(e, "values", "is required (an object of field name to value)");
    else
        credentials_check_values(vals, "values", e);
    (void)credentials_check_totp(body, 0, e);
    rc = err_has_fields(e) ? E_INVALID : gate(rq);
    int64_t count = 0;
    if (rc == 0 && store_cred_count(api_app(rq)->store, a->org.id, &count) != 0)
        rc = err_set(e, E_INTERNAL, "internal", "credentials could not be counted");
    if (rc == 0 && count >= LIM_CREDENTIALS_PER_ORG)
        rc = over_cap(e, count);
    json_t *d = credentials_doc(NULL);
    json_t *sealed = json_object_get(d, "values");
    int totp_set = 0;
    if (rc == 0)
        rc = credentials_seal_values(rq, vals, sealed);
    if (rc == 0)
        rc = credentials_seal_totp(rq, body, d, &totp_set);
    if (rc == 0 && sso)
        json_object_set_new(d, "sso_provider", json_string(sso));
    struct cred_rec c;
    memset(&c, 0, sizeof c);
    if (rc == 0) {
        crypto_new_id(c.id);
        snprintf(c.org_id, sizeof c.org_id, "%s", a->org.id);
        snprintf(c.project_id, sizeof c.project_id, "%s", a->project.id);
        snprintf(c.name, sizeof c.name, "%s", name);
        snprintf(c.domain, sizeof c.domain, "%s", domain);
        c.created_at = c.updated_at = clock_now_ms();
        c.data = jsonx_dump(d);
        /* Counted again with the insert, as one step per org on every node:
         * creates racing on several nodes all passed the count above. */
        rc = store_cred_insert(api_app(rq)->store, &c, LIM_CREDENTIALS_PER_ORG);
        if (rc == E_LIMIT)
            over_cap(e, LIM_CREDENTIALS_PER_ORG);
        else if (rc == E_CONFLICT)
            err_set(e, rc, "conflict", "a credential named %s already exists in this project",
                    c.name);
        else if (rc)
            err_set(e, rc, "internal", "the credential could not be stored");
    }
    if (rc == 0)
        rc = answer(rq, rs, &c, d, totp_set);
    cred_rec_clear(&c);
    json_decref(d);
    credentials_wipe(rq, body);
    json_decref(body);
    return rc;
}

int credentials_get(struct req *rq, struct resp *rs)
{
    int rc = gate(rq);
    struct cred_rec c;
    memset(&c, 0, sizeof c);
    if (rc == 0)
        rc = load(rq, &c);
    if (rc == 0)
        resp_json(rs, 200, render(&c, 1, NULL, 0));
    cred_rec_clear(&c);
    return rc;
}

int credentials_list(struct req *rq, struct resp *rs)
{
    struct auth *a = api_auth(rq);
    size_t limit, offset;
    int rc = req_page(rq, &limit, &offset);
    if (rc == 0)
        rc = gate(rq);
    if (rc)
        return rc;
    struct page pg = {.limit = limit, .offset = offset};
    struct cred_rec *rows = NULL;
    size_t n = 0;
    const char *domain = req_query(rq, "domain"), *query = req_query(rq, "query");
    rc = store_cred_list(api_app(rq)->store, a->org.id, a->project.id,
                         domain && *domain ? domain : NULL, query && *query ? query : NULL, &pg,
                         &rows, &n);
    if (rc)
        return err_set(&rq->err, rc, "internal", "credentials could not be listed");
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(arr, render(&rows[i], 0, NULL, 0));
        cred_rec_clear(&rows[i]);
    }
    xfree(rows);
    resp_json(rs, 200, arr);
    resp_page(rs, offset, n, pg.has_more);
    return 0;
}

int credentials_update(struct req *rq, struct resp *rs)
{
    static const char *const known[] = {"name",   "remove_value_keys", "sso_provider",
                                        "values", "totp_secret",       NULL};
    struct err *e = &rq->err;
    json_t *body;
    int rc = req_json_object(rq, 0, &body);
    if (rc)
        return rc;
    credentials_check_fields(body, known, "a credential update", e);
    const char *name;
    str_field(body, "name", LIM_CREDENTIAL_NAME_BYTES, 0, &name, e);
    json_t *sso = json_object_get(body, "sso_provider");
    if (sso && !json_is_null(sso) && (!json_is_string(sso) || json_string_length(sso) > SSO_MAX))
        err_field(e, "sso_provider",
                  "must be a string of at most %d characters (\"\" or null "
                  "removes it)",
                  SSO_MAX);
    json_t *vals = json_object_get(body, "values");
    if (vals && !json_is_null(vals))
        credentials_check_values(vals, "values", e);
    json_t *rm = json_object_get(body, "remove_value_keys");
    if (rm && !json_is_null(rm)) {
        size_t i;
        json_t *k;
        if (!json_is_array(rm) || json_array_size(rm) > LIM_CREDENTIAL_VALUES)
            err_field(e, "remove_value_keys", "must be an array of at most %d field names",
                      LIM_CREDENTIAL_VALUES);
        else
            json_array_foreach(rm, i, k) if (!json_is_string(k))
            {
                err_field(e, "remove_value_keys", "must hold strings only");
                break;
            }
    }
    (void)credentials_check_totp(body, 1, e);
    rc = err_has_fields(e) ? E_INVALID : gate(rq);
    struct cred_rec c;
    memset(&c, 0, sizeof c);
    if (rc == 0)
        rc = load(rq, &c);
    json_t *d = NULL;
    int totp_set = 0;
    if (rc == 0) {
        d = credentials_doc(c.data);
        json_t *sealed = json_object_get(d, "values");
        size_t i;
        json_t *k;
        if (json_is_array(rm))
            json_array_foreach(rm, i, k) json_object_del(sealed, json_string_value(k));
        if (json_is_object(vals)) {
            size_t added = 0;
            const char *vk;
            json_t *vv;
            json_object_foreach(vals, vk, vv)
            {
                (void)vv;
                added += json_object_get(sealed, vk) == NULL;
            }
            if (json_object_size(sealed) + added > LIM_CREDENTIAL_VALUES)
                rc = err_field(e, "values", "a credential holds at most %d keys",
                               LIM_CREDENTIAL_VALUES);
            else
                rc = credentials_seal_values(rq, vals, sealed);
        }
        if (rc == 0)
            rc = credentials_seal_totp(rq, body, d, &totp_set);
        if (rc == 0 && sso) {
            if (json_is_string(sso) && json_string_length(sso))
                json_object_set_new(d, "sso_provider", json_string(json_string_value(sso)));
            else
                json_object_del(d, "sso_provider");
        }
    }
    if (rc == 0) {
        if (name)
            snprintf(c.name, sizeof c.name, "%s", name);
        c.updated_at = clock_now_ms();
        xfree(c.data);
        c.data = jsonx_dump(d);
        rc = store_cred_update(api_app(rq)->store, &c);
        if (rc == E_CONFLICT)
            err_set(e, rc, "conflict", "a credential named %s already exists in this project",
                    c.name);
        else if (rc)
            err_set(e, rc, rc == E_NOTFOUND ? "not_found" : "internal",
                    "credential %s could not be updated", c.id);
    }
    if (rc == 0)
        rc = answer(rq, rs, &c, d, totp_set);
    cred_rec_clear(&c);
    json_decref(d);
    credentials_wipe(rq, body);
    json_decref(body);
    return rc;
}

int credentials_delete(struct req *rq, struct resp *rs)
{
    struct auth *a = api_auth(rq);
    int rc = gate(rq);
    struct cred_rec c;
    memset(&c, 0, sizeof c);
    if (rc == 0)
        rc = load(rq, &c);
    if (rc == 0) {
        rc = store_cred_delete(api_app(rq)->store, a->org.id, a->project.id, c.id);
        if (rc)
            err_set(&rq->err, rc, rc == E_NOTFOUND ? "not_found" : "internal",
                    "credential %s could not be deleted", rq->params[0]);
    }
    cred_rec_clear(&c);
    if (rc == 0)
        resp_empty(rs, 204);
    return rc;
}

int credentials_totp_code(struct req *rq, struct resp *rs)
{
    int rc = gate(rq);
    struct cred_rec c;
    memset(&c, 0, sizeof c);
    if (rc == 0)
        rc = load(rq, &c);
    json_t *d = NULL;
    if (rc == 0) {
        d = json_loads(c.data ? c.data : "{}", 0, NULL);
        if (!jsonx_str(d, "totp"))
            rc = err_set(&rq->err, E_NOTFOUND, "not_found",
                         "credential %s has no totp_secret (set one with PATCH "
                         "/credentials/{id_or_name})",
                         rq->params[0]);
    }
    char code[9] = "", t[40];
    int64_t exp = 0;
    if (rc == 0)
        rc = credentials_code_of(rq, jsonx_str(d, "totp"), code, &exp);
    if (rc == 0)
        resp_json(rs, 200,
                  json_pack("{s:s,s:s}", "code", code, "expires_at",
                            clock_fmt_rfc3339(exp, t, sizeof t)));
    OPENSSL_cleanse(code, sizeof code);
    json_decref(d);
    cred_rec_clear(&c);
    return rc;
}
