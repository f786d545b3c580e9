/* SQLite backend: organizations, plans, projects, API keys, meta. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/xalloc.h"
#include "store/keycache.h"
#include "store/sqlite_internal.h"

const char sq_schema_tenancy[] =
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE plans (id TEXT PRIMARY KEY, entitlements TEXT NOT NULL);"
    "CREATE TABLE orgs (id TEXT PRIMARY KEY, name TEXT NOT NULL, plan TEXT NOT NULL,"
    " plan_status TEXT NOT NULL, trial_plan TEXT NOT NULL DEFAULT '',"
    " trial_ends_at INTEGER NOT NULL DEFAULT 0, projects_enabled INTEGER NOT NULL DEFAULT 1,"
    " overrides TEXT NOT NULL DEFAULT '{}', default_project_id TEXT NOT NULL,"
    " created_at INTEGER NOT NULL);"
    "CREATE TABLE projects (id TEXT PRIMARY KEY, org_id TEXT NOT NULL, name TEXT NOT NULL,"
    " status TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,"
    " UNIQUE (org_id, name));"
    "CREATE TABLE api_keys (id TEXT PRIMARY KEY, org_id TEXT NOT NULL,"
    " project_id TEXT NOT NULL DEFAULT '', name TEXT NOT NULL, key_hash TEXT NOT NULL UNIQUE,"
    " masked_key TEXT NOT NULL, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,"
    " deleted_at INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX api_keys_org ON api_keys (org_id, created_at);";

/* ---- meta ---- */

int sq_meta_get(struct store *st_, const char *key, char *val, size_t cap)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = sqx_q(c, &st, "SELECT value FROM meta WHERE key = ?", "s", key);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        sqx_col(st, 0, val, cap);
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return ret;
}

int sq_meta_init(struct store *st_, const char *key, const char *val, char *out, size_t cap)
{
    CONN(s, c);
    int rc =
        sqx_q(c, NULL, "INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", "ss", key, val);
    sqx_conn_put(s, c);
    if (rc < 0)
        return E_INTERNAL;
    return sq_meta_get(st_, key, out, cap);
}

/* ---- orgs ---- */

#define ORG_COLS                                                                                   \
    "id, name, plan, plan_status, trial_plan, trial_ends_at, projects_enabled, overrides,"         \
    " default_project_id, created_at"

/* Reads the ORG_COLS columns starting at column base. */
static void org_row_at(sqlite3_stmt *st, int base, struct org_rec *o)
{
    sqx_col(st, base + 0, o->id, sizeof o->id);
    sqx_col(st, base + 1, o->name, sizeof o->name);
    sqx_col(st, base + 2, o->plan, sizeof o->plan);
    sqx_col(st, base + 3, o->plan_status, sizeof o->plan_status);
    sqx_col(st, base + 4, o->trial_plan, sizeof o->trial_plan);
    o->trial_ends_at = sqlite3_column_int64(st, base + 5);
    o->projects_enabled = sqlite3_column_int(st, base + 6);
    const unsigned char *ov = sqlite3_column_text(st, base + 7);
    o->overrides = xstrdup(ov ? (const char *)ov : "{}");
    sqx_col(st, base + 8, o->default_project_id, sizeof o->default_project_id);
    o->created_at = sqlite3_column_int64(st, base + 9);
}

static void org_row(sqlite3_stmt *st, struct org_rec *o)
{
    org_row_at(st, 0, o);
}

int sq_org_count(struct store *st_, int64_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = sqx_q(c, &st, "SELECT count(*) FROM orgs", "");
    if (rc == SQLITE_ROW) {
        *n = sqlite3_column_int64(st, 0);
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return rc == SQLITE_ROW ? 0 : E_INTERNAL;
}

static const char SQL_PROJECT_INSERT[] =
    "INSERT INTO projects (id, org_id, name, status, created_at, updated_at)"
    " VALUES (?, ?, ?, ?, ?, ?)";

int sq_org_create(struct store *st_, struct org_rec *o, struct project_rec *p)
{
    CONN(s, c);
    int64_t now = clock_now_ms();
    crypto_new_id(o->id);
    crypto_new_id(p->id);
    o->created_at = now;
    snprintf(o->default_project_id, sizeof o->default_project_id, "%s", p->id);
    snprintf(p->org_id, sizeof p->org_id, "%s", o->id);
    snprintf(p->status, sizeof p->status, "active");
    p->created_at = p->updated_at = now;
    int ret = sqx_begin(c);
    if (ret == 0)
        ret = sqx_qrc(
            sqx_q(c, NULL,
                  "INSERT INTO orgs (id, name, plan, plan_status, trial_plan, trial_ends_at,"
                  " projects_enabled, overrides, default_project_id, created_at)"
                  " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                  "sssssiissi", o->id, o->name, o->plan, o->plan_status, o->trial_plan,
                  o->trial_ends_at, (int64_t)o->projects_enabled,
                  o->overrides ? o->overrides : "{}", o->default_project_id, o->created_at));
    if (ret == 0)
        ret = sqx_qrc(sqx_q(c, NULL, SQL_PROJECT_INSERT, "ssssii", p->id, p->org_id, p->name,
                            p->status, p->created_at, p->updated_at));
    if (ret == 0)
        ret = sqx_commit(c);
    if (ret)
        sqx_rollback(c);
    sqx_conn_put(s, c);
    return ret;
}

int sq_org_get(struct store *st_, const char *id, struct org_rec *o)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = sqx_q(c, &st, "SELECT " ORG_COLS " FROM orgs WHERE id = ?", "s", id);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        org_row(st, o);
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return ret;
}

int sq_org_update(struct store *st_, const struct org_rec *o)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = sqx_q(c, &st,
                   "UPDATE orgs SET name = ?, plan = ?, plan_status = ?, trial_plan = ?,"
                   " trial_ends_at = ?, projects_enabled = ?, overrides = ?, default_project_id = ?"
                   " WHERE id = ? RETURNING id",
                   "ssssiisss", o->name, o->plan, o->plan_status, o->trial_plan, o->trial_ends_at,
                   (int64_t)o->projects_enabled, o->overrides ? o->overrides : "{}",
                   o->default_project_id, o->id);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : sqx_qrc(rc);
    if (rc == SQLITE_ROW)
        sqlite3_reset(st);
    sqx_conn_put(s, c);
    return ret;
}

/* ---- plans ---- */

int sq_plan_get(struct store *st_, const char *id, char **json)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = sqx_q(c, &st, "SELECT entitlements FROM plans WHERE id = ?", "s", id);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        *json = xstrdup((const char *)sqlite3_column_text(st, 0));
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return ret;
}

int sq_plan_put(struct store *st_, const char *id, const char *json)
{
    CONN(s, c);
    int rc = sqx_q(c, NULL,
                   "INSERT INTO plans (id, entitlements) VALUES (?, ?)"
                   " ON CONFLICT (id) DO UPDATE SET entitlements = excluded.entitlements",
                   "ss", id, json);
    sqx_conn_put(s, c);
    return sqx_qrc(rc);
}

int sq_plan_each(struct store *st_, void (*fn)(void *, const char *, const char *), void *ctx)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = sqx_q(c, &st, "SELECT id, entitlements FROM plans ORDER BY id", "");
    while (rc == SQLITE_ROW) {
        fn(ctx, (const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 1));
        rc = sqlite3_step(st);
    }
    int ret = rc == SQLITE_DONE ? 0 : sqx_fail(c->db, "plan_each");
    sqlite3_reset(st);
    sqx_conn_put(s, c);
    return ret;
}

/* ---- projects ---- */

#define PROJECT_COLS "id, org_id, name, status, created_at, updated_at"

static void project_row(sqlite3_stmt *st, struct project_rec *p)
{
    sqx_col(st, 0, p->id, sizeof p->id);
    sqx_col(st, 1, p->org_id, sizeof p->org_id);
    sqx_col(st, 2, p->name, sizeof p->name);
    sqx_col(st, 3, p->status, sizeof p->status);
    p->created_at = sqlite3_column_int64(st, 4);
    p->updated_at = sqlite3_column_int64(st, 5);
}

int sq_project_create(struct store *st_, struct project_rec *p, int64_t cap)
{
    CONN(s, c);
    crypto_new_id(p->id);
    p->created_at = p->updated_at = clock_now_ms();
    if (!p->status[0])
        snprintf(p->status, sizeof p->status, "active");
    int ret =
        sqx_cap_begin(c, cap, p->org_id, "SELECT count(*) FROM projects WHERE org_id = ?", NULL);
    if (ret == 0)
        ret = sqx_qrc(sqx_q(c, NULL, SQL_PROJECT_INSERT, "ssssii", p->id, p->org_id, p->name,
                            p->status, p->created_at, p->updated_at));
    ret = sqx_cap_end(c, cap, ret);
    sqx_conn_put(s, c);
    return ret;
}

int sq_project_get(struct store *st_, const char *org_id, const char *id_or_name,
                   struct project_rec *out)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = sqx_q(c, &st,
                   "SELECT " PROJECT_COLS " FROM projects WHERE org_id = ? AND (id = ? OR name = ?)"
                   " ORDER BY id = ? DESC LIMIT 1",
                   "ssss", org_id, id_or_name, id_or_name, id_or_name);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        project_row(st, out);
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return ret;
}

int sq_project_list(struct store *st_, const char *org_id, const struct name_filter *f,
                    struct page *pg, struct project_rec **rows, size_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st,
                   "SELECT " PROJECT_COLS " FROM projects WHERE org_id = ?"
                   " AND (?2 IS NULL OR name = ?2 COLLATE NOCASE)"
                   " AND (?3 IS NULL OR instr(lower(name), lower(?3)) > 0)"
                   " ORDER BY created_at, id LIMIT ?4 OFFSET ?5",
                   "sssii", org_id, f ? f->name : NULL, f ? f->query : NULL, (int64_t)pg->limit + 1,
                   (int64_t)pg->offset);
    if (rc < 0) {
        sqx_conn_put(s, c);
        return E_INTERNAL;
    }
    COLLECT(st, rc, pg, rows, n, struct project_rec, project_row);
    if (rc)
        sqx_fail(c->db, "project_list");
    sqx_conn_put(s, c);
    return rc ? E_INTERNAL : 0;
}

int sq_project_update(struct store *st_, const struct project_rec *p)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int ret = sqx_begin(c);
    if (ret == 0 && strcmp(p->status, "active") != 0) {
        /* Archiving: the org must keep an active project, and its default
         * moves to the oldest remaining active one. */
        int rc = sqx_q(c, &st,
                       "SELECT count(*) FROM projects WHERE org_id = ? AND status = 'active'"
                       " AND id != ?",
                       "ss", p->org_id, p->id);
        int64_t others = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
        if (rc == SQLITE_ROW)
            sqlite3_reset(st);
        ret = others < 0 ? E_INTERNAL : others == 0 ? E_CONFLICT : 0;
    }
    if (ret == 0) {
        int rc = sqx_q(c, &st,
                       "UPDATE projects SET name = ?, status = ?, updated_at = ?"
                       " WHERE org_id = ? AND id = ? RETURNING id",
                       "ssiss", p->name, p->status, p->updated_at, p->org_id, p->id);
        ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : sqx_qrc(rc);
        if (rc == SQLITE_ROW)
            sqlite3_reset(st);
    }
    if (ret == 0 && strcmp(p->status, "active") != 0)
        ret = sqx_qrc(sqx_q(c, NULL,
                            "UPDATE orgs SET default_project_id = (SELECT id FROM projects"
                            " WHERE org_id = orgs.id AND status = 'active' ORDER BY created_at, id"
                            " LIMIT 1) WHERE id = ? AND default_project_id = ?",
                            "ss", p->org_id, p->id));
    if (ret == 0)
        ret = sqx_commit(c);
    if (ret)
        sqx_rollback(c);
    sqx_conn_put(s, c);
    return ret;
}

int sq_project_delete(struct store *st_, const char *org_id, const char *id)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int ret = sqx_begin(c);
    int64_t count = 0;
    if (ret == 0) {
        /* Counted among active projects: an org must keep one to work in. */
        int rc = sqx_q(c, &st,
                       "SELECT count(*) FROM projects WHERE org_id = ? AND status = 'active'"
                       " AND id != ?",
                       "ss", org_id, id);
        if (rc == SQLITE_ROW) {
            count = sqlite3_column_int64(st, 0);
            sqlite3_reset(st);
        } else {
            ret = E_INTERNAL;
        }
    }
    if (ret == 0 && count < 1)
        ret = E_CONFLICT;
    if (ret == 0) {
        int rc = sqx_q(c, &st, "DELETE FROM projects WHERE org_id = ? AND id = ? RETURNING id",
                       "ss", org_id, id);
        ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
        if (rc == SQLITE_ROW)
            sqlite3_reset(st);
    }
    if (ret == 0)
        ret = sqx_qrc(sqx_q(c, NULL,
                            "UPDATE orgs SET default_project_id = (SELECT id FROM projects"
                            " WHERE org_id = orgs.id AND status = 'active' ORDER BY created_at, id"
                            " LIMIT 1)"
                            " WHERE id = ? AND default_project_id = ?",
                            "ss", org_id, id));
    if (ret == 0)
        ret = sqx_qrc(sqx_q(c, NULL,
                            "UPDATE api_keys SET deleted_at = ? WHERE project_id = ?"
                            " AND deleted_at = 0",
                            "is", clock_now_ms(), id));
    if (ret == 0)
        ret = sqx_commit(c);
    if (ret)
        sqx_rollback(c);
    sqx_conn_put(s, c);
    return ret;
}

/* ---- API keys ---- */

#define KEY_COLS                                                                                   \
    "id, org_id, project_id, name, key_hash, masked_key, created_at, expires_at, deleted_at"

static void key_row(sqlite3_stmt *st, struct apikey_rec *k)
{
    sqx_col(st, 0, k->id, sizeof k->id);
    sqx_col(st, 1, k->org_id, sizeof k->org_id);
    sqx_col(st, 2, k->project_id, sizeof k->project_id);
    sqx_col(st, 3, k->name, sizeof k->name);
    sqx_col(st, 4, k->key_hash, sizeof k->key_hash);
    sqx_col(st, 5, k->masked_key, sizeof k->masked_key);
    k->created_at = sqlite3_column_int64(st, 6);
    k->expires_at = sqlite3_column_int64(st, 7);
    k->deleted_at = sqlite3_column_int64(st, 8);
}

static const char SQL_KEY_INSERT[] = "INSERT INTO api_keys (" KEY_COLS ")"
                                     " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)";

/* The org's live keys (store.h key_create), now = the second argument. */
static const char SQL_KEYS_LIVE[] = "SELECT count(*) FROM api_keys WHERE org_id = ?"
                                    " AND deleted_at = 0 AND (expires_at = 0"
                                    " OR expires_at > CAST(? AS INTEGER))";

/* Inserts k; with cap > 0 (inside sqx_cap_begin's transaction) first deletes
 * the org's ended keys past the LIM_API_KEYS_ENDED_KEPT newest. */
static int key_insert(struct conn *c, struct apikey_rec *k, int64_t cap)
{
    crypto_new_id(k->id);
    k->created_at = clock_now_ms();
    k->deleted_at = 0;
    int ret = 0;
    if (cap > 0)
        ret = sqx_qrc(sqx_q(c, NULL,
                            "DELETE FROM api_keys WHERE id IN (SELECT id FROM api_keys"
                            " WHERE org_id = ? AND (deleted_at > 0 OR (expires_at > 0"
                            " AND expires_at <= ?)) ORDER BY created_at DESC, id DESC"
                            " LIMIT -1 OFFSET ?)",
                            "sii", k->org_id, k->created_at, (int64_t)LIM_API_KEYS_ENDED_KEPT));
    if (ret == 0)
        ret = sqx_qrc(sqx_q(c, NULL, SQL_KEY_INSERT, "ssssssii", k->id, k->org_id, k->project_id,
                            k->name, k->key_hash, k->masked_key, k->created_at, k->expires_at));
    return ret;
}

int sq_key_create(struct store *st_, struct apikey_rec *k, int64_t cap)
{
    CONN(s, c);
    char now[24];
    snprintf(now, sizeof now, "%lld", (long long)clock_now_ms());
    int ret = sqx_cap_begin(c, cap, k->org_id, SQL_KEYS_LIVE, now);
    if (ret == 0)
        ret = key_insert(c, k, cap);
    ret = sqx_cap_end(c, cap, ret);
    sqx_conn_put(s, c);
    return ret;
}

static int key_get1(struct store *st_, const char *sql, const char *a, const char *b,
                    struct apikey_rec *out)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = b ? sqx_q(c, &st, sql, "ss", a, b) : sqx_q(c, &st, sql, "s", a);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        key_row(st, out);
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return ret;
}

int sq_key_get(struct store *st_, const char *org_id, const char *id, struct apikey_rec *out)
{
    return key_get1(st_, "SELECT " KEY_COLS " FROM api_keys WHERE org_id = ? AND id = ?", org_id,
                    id, out);
}

int sq_key_by_hash(struct store *st_, const char *hash, struct apikey_rec *out)
{
    return key_get1(st_, "SELECT " KEY_COLS " FROM api_keys WHERE key_hash = ?", hash, NULL, out);
}

static void org_row_at(sqlite3_stmt *st, int base, struct org_rec *o);

/*
 * auth_lookup's cache. Keys and orgs change from other processes (`browserd
 * admin`), so the cache must learn of every commit, wherever it comes from.
 * PRAGMA data_version tells a connection exactly that: its value changes
 * whenever ANOTHER connection (of this process or any other) has committed
 * since the last reading. The watch is a pool connection taken for good and
 * never used to write, so every commit to the file, this process's own
 * included, moves it. Reading it starts and ends a read transaction on the
 * WAL index in shared memory: no disk I/O, no lock a writer waits on.
 * Each change seen bumps the epoch that keycache.h keys its entries by.
 */
struct sq_authcache {
    pthread_mutex_t mu; /* the watch connection is used by one thread at a time */
    struct conn *watch;
    sqlite3_stmt *dv; /* PRAGMA data_version on watch */
    int64_t last_dv;
    uint64_t epoch;
    struct keycache *kc;
};

/* The epoch as of now: bumped when a commit happened since the last call.
 * Fails (the caller then reads uncached) when the watch cannot be read. */
static int authcache_epoch(struct sq_authcache *a, uint64_t *epoch)
{
    int ret = E_INTERNAL;
    pthread_mutex_lock(&a->mu);
    if (sqlite3_step(a->dv) == SQLITE_ROW) {
        int64_t v = sqlite3_column_int64(a->dv, 0);
        if (v != a->last_dv) {
            a->last_dv = v;
            a->epoch++;
        }
        *epoch = a->epoch;
        ret = 0;
    }
    /* Ends the read transaction: a held snapshot would stall checkpoints. */
    sqlite3_reset(a->dv);
    pthread_mutex_unlock(&a->mu);
    return ret;
}

void sq_authcache_open(struct sq *s)
{
    struct conn *c = sqx_conn_get(s);
    sqlite3_stmt *dv = NULL;
    if (!c || sqlite3_prepare_v3(c->db, "PRAGMA data_version", -1, SQLITE_PREPARE_PERSISTENT, &dv,
                                 NULL) != SQLITE_OK) {
        log_warn("store: API key lookups uncached: %s",
                 c ? sqlite3_errmsg(c->db) : "no connection");
        sqx_conn_put(s, c);
        return;
    }
    struct sq_authcache *a = xcalloc(1, sizeof *a);
    pthread_mutex_init(&a->mu, NULL);
    a->watch = c;
    a->dv = dv;
    a->last_dv = -1; /* the first reading counts as a change: epoch 1 */
    a->kc = keycache_new();
    s->auth = a;
}

void sq_authcache_close(struct sq *s)
{
    struct sq_authcache *a = s->auth;
    if (!a)
        return;
    sqlite3_finalize(a->dv);
    sqx_conn_put(s, a->watch);
    keycache_free(a->kc);
    pthread_mutex_destroy(&a->mu);
    xfree(a);
    s->auth = NULL;
}

int sq_auth_lookup(struct store *st_, const char *hash, struct apikey_rec *key, struct org_rec *org)
{
    struct sq *s0 = (struct sq *)st_;
    uint64_t epoch = 0;
    int cached = s0->auth && authcache_epoch(s0->auth, &epoch) == 0;
    if (cached && keycache_get(s0->auth->kc, epoch, hash, key, org))
        return 0;
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = sqx_q(c, &st,
                   "SELECT k.id, k.org_id, k.project_id, k.name, k.key_hash, k.masked_key,"
                   " k.created_at, k.expires_at, k.deleted_at, o.id, o.name, o.plan, o.plan_status,"
                   " o.trial_plan, o.trial_ends_at, o.projects_enabled, o.overrides,"
                   " o.default_project_id, o.created_at"
                   " FROM api_keys k JOIN orgs o ON o.id = k.org_id WHERE k.key_hash = ?",
                   "s", hash);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        key_row(st, key);
        org_row_at(st, 9, org);
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    /* Unknown keys are not remembered: the cache holds only rows that exist. */
    if (ret == 0 && cached)
        keycache_put(s->auth->kc, epoch, hash, key, org);
    return ret;
}

int sq_key_list(struct store *st_, const char *org_id, const struct name_filter *f, struct page *pg,
                struct apikey_rec **rows, size_t *n)
{
    CONN(s, c);
    /* The ORDER BY column comes from a fixed set (never from the request's
     * text), so the statement is one of six static strings. */
    static const char *const sql[3][2] = {
        {"SELECT " KEY_COLS " FROM api_keys WHERE org_id = ?1 AND (?2 = 'all' OR (?2 = 'deleted')"
         " = (deleted_at != 0)) AND (?3 IS NULL OR name = ?3 COLLATE NOCASE) AND (?4 IS NULL OR"
         " instr(lower(name), lower(?4)) > 0 OR id = ?4 OR masked_key LIKE ?4 || '%')"
         " ORDER BY created_at, id LIMIT ?5 OFFSET ?6",
         "SELECT " KEY_COLS " FROM api_keys WHERE org_id = ?1 AND (?2 = 'all' OR (?2 = 'deleted')"
         " = (deleted_at != 0)) AND (?3 IS NULL OR name = ?3 COLLATE NOCASE) AND (?4 IS NULL OR"
         " instr(lower(name), lower(?4)) > 0 OR id = ?4 OR masked_key LIKE ?4 || '%')"
         " ORDER BY created_at DESC, id DESC LIMIT ?5 OFFSET ?6"},
        {"SELECT " KEY_COLS " FROM api_keys WHERE org_id = ?1 AND (?2 = 'all' OR (?2 = 'deleted')"
         " = (deleted_at != 0)) AND (?3 IS NULL OR name = ?3 COLLATE NOCASE) AND (?4 IS NULL OR"
         " instr(lower(name), lower(?4)) > 0 OR id = ?4 OR masked_key LIKE ?4 || '%')"
         " ORDER BY name COLLATE NOCASE, id LIMIT ?5 OFFSET ?6",
         "SELECT " KEY_COLS " FROM api_keys WHERE org_id = ?1 AND (?2 = 'all' OR (?2 = 'deleted')"
         " = (deleted_at != 0)) AND (?3 IS NULL OR name = ?3 COLLATE NOCASE) AND (?4 IS NULL OR"
         " instr(lower(name), lower(?4)) > 0 OR id = ?4 OR masked_key LIKE ?4 || '%')"
         " ORDER BY name COLLATE NOCASE DESC, id DESC LIMIT ?5 OFFSET ?6"},
        {"SELECT " KEY_COLS " FROM api_keys WHERE org_id = ?1 AND (?2 = 'all' OR (?2 = 'deleted')"
         " = (deleted_at != 0)) AND (?3 IS NULL OR name = ?3 COLLATE NOCASE) AND (?4 IS NULL OR"
         " instr(lower(name), lower(?4)) > 0 OR id = ?4 OR masked_key LIKE ?4 || '%')"
         " ORDER BY expires_at = 0, expires_at, id LIMIT ?5 OFFSET ?6",
         "SELECT " KEY_COLS " FROM api_keys WHERE org_id = ?1 AND (?2 = 'all' OR (?2 = 'deleted')"
         " = (deleted_at != 0)) AND (?3 IS NULL OR name = ?3 COLLATE NOCASE) AND (?4 IS NULL OR"
         " instr(lower(name), lower(?4)) > 0 OR id = ?4 OR masked_key LIKE ?4 || '%')"
         " ORDER BY expires_at = 0 DESC, expires_at DESC, id DESC LIMIT ?5 OFFSET ?6"},
    };
    int by = f && f->sort_by >= 0 && f->sort_by < 3 ? f->sort_by : 0;
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st, sql[by][f && f->descending ? 1 : 0], "ssssii", org_id,
                   f && f->status ? f->status : "active", f ? f->name : NULL, f ? f->query : NULL,
                   (int64_t)pg->limit + 1, (int64_t)pg->offset);
    if (rc < 0) {
        sqx_conn_put(s, c);
        return E_INTERNAL;
    }
    COLLECT(st, rc, pg, rows, n, struct apikey_rec, key_row);
    sqx_conn_put(s, c);
    return rc ? E_INTERNAL : 0;
}

int sq_key_update(struct store *st_, const struct apikey_rec *k)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = sqx_q(c, &st,
                   "UPDATE api_keys SET name = ?, expires_at = ?, deleted_at = ?"
                   " WHERE org_id = ? AND id = ? RETURNING id",
                   "siiss", k->name, k->expires_at, k->deleted_at, k->org_id, k->id);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : sqx_qrc(rc);
    if (rc == SQLITE_ROW)
        sqlite3_reset(st);
    sqx_conn_put(s, c);
    return ret;
}

int sq_key_rotate(struct store *st_, const char *org_id, const char *old_id, int64_t old_expires_at,
                  struct apikey_rec *fresh, int64_t cap)
{
    CONN(s, c);
    sqlite3_stmt *st;
    char now[24];
    snprintf(now, sizeof now, "%lld", (long long)clock_now_ms());
    int ret = cap > 0 ? sqx_cap_begin(c, cap, org_id, SQL_KEYS_LIVE, now) : sqx_begin(c);
    if (ret == 0) {
        int rc = sqx_q(c, &st,
                       "UPDATE api_keys SET expires_at = CASE WHEN expires_at = 0 OR expires_at > ?"
                       " THEN ? ELSE expires_at END WHERE org_id = ? AND id = ? AND deleted_at = 0"
                       " RETURNING id",
                       "iiss", old_expires_at, old_expires_at, org_id, old_id);
        ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
        if (rc == SQLITE_ROW)
            sqlite3_reset(st);
    }
    if (ret == 0)
        ret = key_insert(c, fresh, cap);
    if (ret == 0)
        ret = sqx_commit(c);
    if (ret)
        sqx_rollback(c);
    sqx_conn_put(s, c);
    return ret;
}
