/* PostgreSQL backend: organizations, plans, projects, API keys, meta. */
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/xalloc.h"
#include "store/pg_internal.h"

const char pgx_schema_tenancy[] =
    "CREATE TABLE meta (key " PG_TEXT " PRIMARY KEY, value text NOT NULL);"
    "CREATE TABLE plans (id " PG_TEXT " PRIMARY KEY, entitlements text NOT NULL);"
    "CREATE TABLE orgs (id " PG_TEXT " PRIMARY KEY, name " PG_TEXT " NOT NULL,"
    " plan " PG_TEXT " NOT NULL, plan_status " PG_TEXT " NOT NULL,"
    " trial_plan " PG_TEXT " NOT NULL DEFAULT '', trial_ends_at bigint NOT NULL DEFAULT 0,"
    " projects_enabled bigint NOT NULL DEFAULT 1, overrides text NOT NULL DEFAULT '{}',"
    " default_project_id " PG_TEXT " NOT NULL, created_at bigint NOT NULL);"
    "CREATE TABLE projects (id " PG_TEXT " PRIMARY KEY, org_id " PG_TEXT " NOT NULL,"
    " name " PG_TEXT " NOT NULL, status " PG_TEXT " NOT NULL, created_at bigint NOT NULL,"
    " updated_at bigint NOT NULL, UNIQUE (org_id, name));"
    "CREATE TABLE api_keys (id " PG_TEXT " PRIMARY KEY, org_id " PG_TEXT " NOT NULL,"
    " project_id " PG_TEXT " NOT NULL DEFAULT '', name " PG_TEXT " NOT NULL,"
    " key_hash " PG_TEXT " NOT NULL UNIQUE, masked_key " PG_TEXT " NOT NULL,"
    " created_at bigint NOT NULL, expires_at bigint NOT NULL,"
    " deleted_at bigint NOT NULL DEFAULT 0);"
    "CREATE INDEX api_keys_org ON api_keys (org_id, created_at);";

/* ---- meta ---- */

int pgx_meta_get(struct store *st_, const char *key, char *val, size_t cap)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r, "SELECT value FROM meta WHERE key = $1", "s", key);
    if (ret == 0 && (ret = pgx_one(r)) == 0) {
        pgx_col(r, 0, 0, val, cap);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret;
}

int pgx_meta_init(struct store *st_, const char *key, const char *val, char *out, size_t cap)
{
    PGCONN(p, c);
    int ret = pgx_q(c, NULL, "INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                    "ss", key, val);
    pgx_put(p, c);
    if (ret)
        return E_INTERNAL;
    return pgx_meta_get(st_, key, out, cap);
}

/* ---- orgs ---- */

#define ORG_COLS                                                                                   \
    "id, name, plan, plan_status, trial_plan, trial_ends_at, projects_enabled, overrides,"         \
    " default_project_id, created_at"

/* Reads the ORG_COLS columns of row i starting at column base. */
static void org_row_at(const PGresult *r, int i, int base, struct org_rec *o)
{
    pgx_col(r, i, base + 0, o->id, sizeof o->id);
    pgx_col(r, i, base + 1, o->name, sizeof o->name);
    pgx_col(r, i, base + 2, o->plan, sizeof o->plan);
    pgx_col(r, i, base + 3, o->plan_status, sizeof o->plan_status);
    pgx_col(r, i, base + 4, o->trial_plan, sizeof o->trial_plan);
    o->trial_ends_at = pgx_i64(r, i, base + 5);
    o->projects_enabled = (int)pgx_i64(r, i, base + 6);
    o->overrides = pgx_dup(r, i, base + 7, "{}");
    pgx_col(r, i, base + 8, o->default_project_id, sizeof o->default_project_id);
    o->created_at = pgx_i64(r, i, base + 9);
}

int pgx_org_count(struct store *st_, int64_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r, "SELECT count(*) FROM orgs", "");
    if (ret == 0) {
        *n = pgx_i64(r, 0, 0);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

static const char SQL_PROJECT_INSERT[] =
    "INSERT INTO projects (id, org_id, name, status, created_at, updated_at)"
    " VALUES ($1, $2, $3, $4, $5, $6)";

int pgx_org_create(struct store *st_, struct org_rec *o, struct project_rec *pr)
{
    PGCONN(p, c);
    int64_t now = clock_now_ms();
    crypto_new_id(o->id);
    crypto_new_id(pr->id);
    o->created_at = now;
    snprintf(o->default_project_id, sizeof o->default_project_id, "%s", pr->id);
    snprintf(pr->org_id, sizeof pr->org_id, "%s", o->id);
    snprintf(pr->status, sizeof pr->status, "active");
    pr->created_at = pr->updated_at = now;
    int ret = pgx_begin(c);
    if (ret == 0)
        ret = pgx_q(c, NULL,
                    "INSERT INTO orgs (" ORG_COLS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,"
                    " $10)",
                    "sssssiissi", o->id, o->name, o->plan, o->plan_status, o->trial_plan,
                    o->trial_ends_at, (int64_t)o->projects_enabled,
                    o->overrides ? o->overrides : "{}", o->default_project_id, o->created_at);
    if (ret == 0)
        ret = pgx_q(c, NULL, SQL_PROJECT_INSERT, "ssssii", pr->id, pr->org_id, pr->name, pr->status,
                    pr->created_at, pr->updated_at);
    ret = pgx_end(c, ret);
    pgx_put(p, c);
    return ret;
}

int pgx_org_get(struct store *st_, const char *id, struct org_rec *o)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r, "SELECT " ORG_COLS " FROM orgs WHERE id = $1", "s", id);
    if (ret == 0 && (ret = pgx_one(r)) == 0) {
        org_row_at(r, 0, 0, o);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret;
}

int pgx_org_update(struct store *st_, const struct org_rec *o)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "UPDATE orgs SET name = $1, plan = $2, plan_status = $3, trial_plan = $4,"
                    " trial_ends_at = $5, projects_enabled = $6, overrides = $7,"
                    " default_project_id = $8 WHERE id = $9 RETURNING id",
                    "ssssiisss", o->name, o->plan, o->plan_status, o->trial_plan, o->trial_ends_at,
                    (int64_t)o->projects_enabled, o->overrides ? o->overrides : "{}",
                    o->default_project_id, o->id);
    if (ret == 0 && (ret = pgx_one(r)) == 0)
        PQclear(r);
    pgx_put(p, c);
    return ret;
}

/* ---- plans ---- */

int pgx_plan_get(struct store *st_, const char *id, char **json)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r, "SELECT entitlements FROM plans WHERE id = $1", "s", id);
    if (ret == 0 && (ret = pgx_one(r)) == 0) {
        *json = pgx_dup(r, 0, 0, "{}");
        PQclear(r);
    }
    pgx_put(p, c);
    return ret;
}

int pgx_plan_put(struct store *st_, const char *id, const char *json)
{
    PGCONN(p, c);
    int ret = pgx_q(c, NULL,
                    "INSERT INTO plans (id, entitlements) VALUES ($1, $2)"
                    " ON CONFLICT (id) DO UPDATE SET entitlements = excluded.entitlements",
                    "ss", id, json);
    pgx_put(p, c);
    return ret;
}

int pgx_plan_each(struct store *st_, void (*fn)(void *, const char *, const char *), void *ctx)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r, "SELECT id, entitlements FROM plans ORDER BY id", "");
    /* The connection goes back before the callbacks run: fn may use the store. */
    pgx_put(p, c);
    if (ret)
        return E_INTERNAL;
    for (int i = 0; i < PQntuples(r); i++)
        fn(ctx, PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
    PQclear(r);
    return 0;
}

/* ---- projects ---- */

#define PROJECT_COLS "id, org_id, name, status, created_at, updated_at"

static void project_row(const PGresult *r, int i, struct project_rec *pr)
{
    pgx_col(r, i, 0, pr->id, sizeof pr->id);
    pgx_col(r, i, 1, pr->org_id, sizeof pr->org_id);
    pgx_col(r, i, 2, pr->name, sizeof pr->name);
    pgx_col(r, i, 3, pr->status, sizeof pr->status);
    pr->created_at = pgx_i64(r, i, 4);
    pr->updated_at = pgx_i64(r, i, 5);
}

int pgx_project_create(struct store *st_, struct project_rec *pr, int64_t cap)
{
    PGCONN(p, c);
    crypto_new_id(pr->id);
    pr->created_at = pr->updated_at = clock_now_ms();
    if (!pr->status[0])
        snprintf(pr->status, sizeof pr->status, "active");
    int ret =
        pgx_cap_begin(c, cap, pr->org_id, "SELECT count(*) FROM projects WHERE org_id = $1", NULL);
    if (ret == 0)
        ret = pgx_q(c, NULL, SQL_PROJECT_INSERT, "ssssii", pr->id, pr->org_id, pr->name, pr->status,
                    pr->created_at, pr->updated_at);
    ret = pgx_cap_end(c, cap, ret);
    pgx_put(p, c);
    return ret;
}

int pgx_project_get(struct store *st_, const char *org_id, const char *id_or_name,
                    struct project_rec *out)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT " PROJECT_COLS " FROM projects WHERE org_id = $1"
                    " AND (id = $2 OR name = $2) ORDER BY id = $2 DESC LIMIT 1",
                    "ss", org_id, id_or_name);
    if (ret == 0 && (ret = pgx_one(r)) == 0) {
        project_row(r, 0, out);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret;
}

int pgx_project_list(struct store *st_, const char *org_id, const struct name_filter *f,
                     struct page *pg, struct project_rec **rows, size_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT " PROJECT_COLS " FROM projects WHERE org_id = $1"
                    " AND ($2 IS NULL OR lower(name) = lower($2))"
                    " AND ($3 IS NULL OR strpos(lower(name), lower($3)) > 0)"
                    " ORDER BY created_at, id LIMIT $4 OFFSET $5",
                    "sssii", org_id, f ? f->name : NULL, f ? f->query : NULL,
                    (int64_t)pg->limit + 1, (int64_t)pg->offset);
    if (ret == 0)
        PG_COLLECT(r, pg, rows, n, struct project_rec, project_row);
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

/* Locks the org's row for the rest of the transaction: changes that keep a
 * rule over all of an org's projects (one active project at least) run one
 * at a time, as SQLite's BEGIN IMMEDIATE makes them. */
static int lock_org(struct pgc *c, const char *org_id)
{
    return pgx_q(c, NULL, "SELECT 1 FROM orgs WHERE id = $1 FOR UPDATE", "s", org_id);
}

/* Active projects of the org other than id; -1 on failure. */
static int64_t other_active_projects(struct pgc *c, const char *org_id, const char *id)
{
    PGresult *r;
    if (pgx_q(c, &r,
              "SELECT count(*) FROM projects WHERE org_id = $1 AND status = 'active'"
              " AND id != $2",
              "ss", org_id, id) != 0)
        return -1;
    int64_t v = pgx_i64(r, 0, 0);
    PQclear(r);
    return v;
}

static const char SQL_MOVE_DEFAULT[] =
    "UPDATE orgs SET default_project_id = coalesce((SELECT id FROM projects"
    " WHERE org_id = orgs.id AND status = 'active' ORDER BY created_at, id LIMIT 1), '')"
    " WHERE id = $1 AND default_project_id = $2";

int pgx_project_update(struct store *st_, const struct project_rec *pr)
{
    PGCONN(p, c);
    PGresult *r;
    int archiving = strcmp(pr->status, "active") != 0;
    int ret = pgx_begin(c);
    if (ret == 0)
        ret = lock_org(c, pr->org_id);
    if (ret == 0 && archiving) {
        int64_t others = other_active_projects(c, pr->org_id, pr->id);
        ret = others < 0 ? E_INTERNAL : others == 0 ? E_CONFLICT : 0;
    }
    if (ret == 0) {
        ret = pgx_q(c, &r,
                    "UPDATE projects SET name = $1, status = $2, updated_at = $3"
                    " WHERE org_id = $4 AND id = $5 RETURNING id",
                    "ssiss", pr->name, pr->status, pr->updated_at, pr->org_id, pr->id);
        if (ret == 0 && (ret = pgx_one(r)) == 0)
            PQclear(r);
    }
    if (ret == 0 && archiving)
        ret = pgx_q(c, NULL, SQL_MOVE_DEFAULT, "ss", pr->org_id, pr->id);
    ret = pgx_end(c, ret);
    pgx_put(p, c);
    return ret;
}

int pgx_project_delete(struct store *st_, const char *org_id, const char *id)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_begin(c);
    if (ret == 0)
        ret = lock_org(c, org_id);
    if (ret == 0) {
        /* Counted among active projects: an org must keep one to work in. */
        int64_t others = other_active_projects(c, org_id, id);
        ret = others < 0 ? E_INTERNAL : others < 1 ? E_CONFLICT : 0;
    }
    if (ret == 0) {
        ret = pgx_q(c, &r, "DELETE FROM projects WHERE org_id = $1 AND id = $2 RETURNING id", "ss",
                    org_id, id);
        if (ret == 0 && (ret = pgx_one(r)) == 0)
            PQclear(r);
    }
    if (ret == 0)
        ret = pgx_q(c, NULL, SQL_MOVE_DEFAULT, "ss", org_id, id);
    if (ret == 0)
        ret = pgx_q(c, NULL,
                    "UPDATE api_keys SET deleted_at = $1 WHERE project_id = $2 AND deleted_at = 0",
                    "is", clock_now_ms(), id);
    ret = pgx_end(c, ret);
    pgx_put(p, c);
    return ret;
}

/* ---- API keys ---- */

#define KEY_COLS                                                                                   \
    "id, org_id, project_id, name, key_hash, masked_key, created_at, expires_at, deleted_at"

static void key_row_at(const PGresult *r, int i, struct apikey_rec *k)
{
    pgx_col(r, i, 0, k->id, sizeof k->id);
    pgx_col(r, i, 1, k->org_id, sizeof k->org_id);
    pgx_col(r, i, 2, k->project_id, sizeof k->project_id);
    pgx_col(r, i, 3, k->name, sizeof k->name);
    pgx_col(r, i, 4, k->key_hash, sizeof k->key_hash);
    pgx_col(r, i, 5, k->masked_key, sizeof k->masked_key);
    k->created_at = pgx_i64(r, i, 6);
    k->expires_at = pgx_i64(r, i, 7);
    k->deleted_at = pgx_i64(r, i, 8);
}

/* The org's live keys (store.h key_create), now = $2. */
static const char SQL_KEYS_LIVE[] = "SELECT count(*) FROM api_keys WHERE org_id = $1"
                                    " AND deleted_at = 0 AND (expires_at = 0"
                                    " OR expires_at > $2::bigint)";

/* Inserts k; with cap > 0 (inside pgx_cap_begin's transaction) first deletes
 * the org's ended keys past the LIM_API_KEYS_ENDED_KEPT newest. */
static int key_insert(struct pgc *c, struct apikey_rec *k, int64_t cap)
{
    crypto_new_id(k->id);
    k->created_at = clock_now_ms();
    k->deleted_at = 0;
    int ret = 0;
    if (cap > 0)
        ret = pgx_q(c, NULL,
                    "DELETE FROM api_keys WHERE id IN (SELECT id FROM api_keys"
                    " WHERE org_id = $1 AND (deleted_at > 0 OR (expires_at > 0"
                    " AND expires_at <= $2)) ORDER BY created_at DESC, id DESC OFFSET $3)",
                    "sii", k->org_id, k->created_at, (int64_t)LIM_API_KEYS_ENDED_KEPT);
    if (ret == 0)
        ret =
            pgx_q(c, NULL,
                  "INSERT INTO api_keys (" KEY_COLS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0)",
                  "ssssssii", k->id, k->org_id, k->project_id, k->name, k->key_hash, k->masked_key,
                  k->created_at, k->expires_at);
    return ret;
}

int pgx_key_create(struct store *st_, struct apikey_rec *k, int64_t cap)
{
    PGCONN(p, c);
    char now[24];
    snprintf(now, sizeof now, "%lld", (long long)clock_now_ms());
    int ret = pgx_cap_begin(c, cap, k->org_id, SQL_KEYS_LIVE, now);
    if (ret == 0)
        ret = key_insert(c, k, cap);
    ret = pgx_cap_end(c, cap, ret);
    pgx_put(p, c);
    return ret;
}

static int key_get1(struct store *st_, const char *sql, const char *a, const char *b,
                    struct apikey_rec *out)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = b ? pgx_q(c, &r, sql, "ss", a, b) : pgx_q(c, &r, sql, "s", a);
    if (ret == 0 && (ret = pgx_one(r)) == 0) {
        key_row_at(r, 0, out);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret ? (ret == E_NOTFOUND ? ret : E_INTERNAL) : 0;
}

int pgx_key_get(struct store *st_, const char *org_id, const char *id, struct apikey_rec *out)
{
    return key_get1(st_, "SELECT " KEY_COLS " FROM api_keys WHERE org_id = $1 AND id = $2", org_id,
                    id, out);
}

int pgx_key_by_hash(struct store *st_, const char *hash, struct apikey_rec *out)
{
    return key_get1(st_, "SELECT " KEY_COLS " FROM api_keys WHERE key_hash = $1", hash, NULL, out);
}

/* Exact by construction: no cache, one read of the key and its org, so any
 * commit made anywhere before the call is seen. */
int pgx_auth_lookup(struct store *st_, const char *hash, struct apikey_rec *key,
                    struct org_rec *org)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT k.id, k.org_id, k.project_id, k.name, k.key_hash, k.masked_key,"
                    " k.created_at, k.expires_at, k.deleted_at, o.id, o.name, o.plan,"
                    " o.plan_status, o.trial_plan, o.trial_ends_at, o.projects_enabled,"
                    " o.overrides, o.default_project_id, o.created_at"
                    " FROM api_keys k JOIN orgs o ON o.id = k.org_id WHERE k.key_hash = $1",
                    "s", hash);
    if (ret == 0 && (ret = pgx_one(r)) == 0) {
        key_row_at(r, 0, key);
        org_row_at(r, 0, 9, org);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret ? (ret == E_NOTFOUND ? ret : E_INTERNAL) : 0;
}

int pgx_key_list(struct store *st_, const char *org_id, const struct name_filter *f,
                 struct page *pg, struct apikey_rec **rows, size_t *n)
{
    /* The ORDER BY comes from a fixed set (never from the request's text),
     * so the statement is one of six static strings. SQLite's NOCASE and
     * LIKE (case-insensitive, no escape character) become lower() and
     * ILIKE ... ESCAPE ''. */
#define KEY_LIST_WHERE                                                                             \
    "SELECT " KEY_COLS " FROM api_keys WHERE org_id = $1 AND ($2 = 'all' OR ($2 = 'deleted')"      \
    " = (deleted_at != 0)) AND ($3 IS NULL OR lower(name) = lower($3)) AND ($4 IS NULL OR"         \
    " strpos(lower(name), lower($4)) > 0 OR id = $4 OR masked_key ILIKE $4 || '%' ESCAPE '')"
    static const char *const sql[3][2] = {
        {KEY_LIST_WHERE " ORDER BY created_at, id LIMIT $5 OFFSET $6",
         KEY_LIST_WHERE " ORDER BY created_at DESC, id DESC LIMIT $5 OFFSET $6"},
        {KEY_LIST_WHERE " ORDER BY lower(name), id LIMIT $5 OFFSET $6",
         KEY_LIST_WHERE " ORDER BY lower(name) DESC, id DESC LIMIT $5 OFFSET $6"},
        {KEY_LIST_WHERE " ORDER BY expires_at = 0, expires_at, id LIMIT $5 OFFSET $6",
         KEY_LIST_WHERE
         " ORDER BY expires_at = 0 DESC, expires_at DESC, id DESC LIMIT $5 OFFSET $6"},
    };
#undef KEY_LIST_WHERE
    PGCONN(p, c);
    int by = f && f->sort_by >= 0 && f->sort_by < 3 ? f->sort_by : 0;
    PGresult *r;
    int ret = pgx_q(c, &r, sql[by][f && f->descending ? 1 : 0], "ssssii", org_id,
                    f && f->status ? f->status : "active", f ? f->name : NULL, f ? f->query : NULL,
                    (int64_t)pg->limit + 1, (int64_t)pg->offset);
    if (ret == 0)
        PG_COLLECT(r, pg, rows, n, struct apikey_rec, key_row_at);
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

int pgx_key_update(struct store *st_, const struct apikey_rec *k)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "UPDATE api_keys SET name = $1, expires_at = $2, deleted_at = $3"
                    " WHERE org_id = $4 AND id = $5 RETURNING id",
                    "siiss", k->name, k->expires_at, k->deleted_at, k->org_id, k->id);
    if (ret == 0 && (ret = pgx_one(r)) == 0)
        PQclear(r);
    pgx_put(p, c);
    return ret;
}

int pgx_key_rotate(struct store *st_, const char *org_id, const char *old_id,
                   int64_t old_expires_at, struct apikey_rec *fresh, int64_t cap)
{
    PGCONN(p, c);
    PGresult *r;
    char now[24];
    snprintf(now, sizeof now, "%lld", (long long)clock_now_ms());
    int ret = cap > 0 ? pgx_cap_begin(c, cap, org_id, SQL_KEYS_LIVE, now) : pgx_begin(c);
    if (ret == 0) {
        ret = pgx_q(c, &r,
                    "UPDATE api_keys SET expires_at = CASE WHEN expires_at = 0 OR expires_at > $1"
                    " THEN $1 ELSE expires_at END WHERE org_id = $2 AND id = $3 AND deleted_at = 0"
                    " RETURNING id",
                    "iss", old_expires_at, org_id, old_id);
        if (ret == 0 && (ret = pgx_one(r)) == 0)
            PQclear(r);
        else if (ret == E_CONFLICT)
            ret = E_INTERNAL;
    }
    if (ret == 0)
        ret = key_insert(c, fresh, cap);
    ret = pgx_end(c, ret);
    pgx_put(p, c);
    return ret;
}
