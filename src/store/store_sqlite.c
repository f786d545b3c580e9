/*
 * The embedded store: SQLite in WAL mode.
 *
 * Connections live in a small pool (one per concurrently active thread), each
 * with its own cache of prepared statements keyed by the SQL text's address.
 * Writes run in BEGIN IMMEDIATE transactions so that a writer takes the lock
 * up front instead of failing on upgrade; synchronous=FULL makes every
 * acknowledged commit survive a crash of the process or the machine. Other
 * processes (the `admin` commands) may open the same file at the same time:
 * nothing is cached across calls.
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/log.h"
#include "core/xalloc.h"
#include "store/store.h"

#define STMT_CACHE 64

struct conn {
    sqlite3 *db;
    struct {
        const char *sql;
        sqlite3_stmt *st;
    } cache[STMT_CACHE];
    size_t ncache;
    struct conn *next;
};

struct sq {
    struct store base;
    char *path;
    pthread_mutex_t mu;
    struct conn *idle; /* connections not in use */
};

/* Numbered schema migrations; user_version records how many are applied. */
static const char *const migrations[] = {
    /* 1: tenancy */
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
    "CREATE INDEX api_keys_org ON api_keys (org_id, created_at);",
    /* 2: browser sessions */
    "CREATE TABLE sessions (id TEXT PRIMARY KEY, org_id TEXT NOT NULL, project_id TEXT NOT NULL,"
    " name TEXT NOT NULL DEFAULT '', status TEXT NOT NULL, created_at INTEGER NOT NULL,"
    " deleted_at INTEGER NOT NULL DEFAULT 0, uptime_ms INTEGER NOT NULL DEFAULT 0,"
    " usage_status TEXT NOT NULL DEFAULT '', end_reason TEXT NOT NULL DEFAULT '',"
    " pid INTEGER NOT NULL DEFAULT 0, pid_start INTEGER NOT NULL DEFAULT 0,"
    " xvfb_pid INTEGER NOT NULL DEFAULT 0, xvfb_start INTEGER NOT NULL DEFAULT 0,"
    " data TEXT NOT NULL);"
    "CREATE UNIQUE INDEX sessions_active_name ON sessions (project_id, name)"
    " WHERE status = 'active' AND name != '';"
    "CREATE INDEX sessions_project ON sessions (org_id, project_id, created_at);",
};

static int fail(sqlite3 *db, const char *what)
{
    log_error("store: %s: %s", what, sqlite3_errmsg(db));
    return E_INTERNAL;
}

static int conn_open(const char *path, struct conn **out)
{
    struct conn *c = xcalloc(1, sizeof *c);
    int rc = sqlite3_open_v2(
        path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        log_error("store: open %s: %s", path, c->db ? sqlite3_errmsg(c->db) : "out of memory");
        sqlite3_close(c->db);
        xfree(c);
        return E_INTERNAL;
    }
    sqlite3_busy_timeout(c->db, 5000);
    char *msg = NULL;
    if (sqlite3_exec(c->db,
                     "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;",
                     NULL, NULL, &msg) != SQLITE_OK) {
        log_error("store: pragmas: %s", msg ? msg : "?");
        sqlite3_free(msg);
        sqlite3_close(c->db);
        xfree(c);
        return E_INTERNAL;
    }
    *out = c;
    return 0;
}

static void conn_close(struct conn *c)
{
    for (size_t i = 0; i < c->ncache; i++)
        sqlite3_finalize(c->cache[i].st);
    sqlite3_close(c->db);
    xfree(c);
}

static struct conn *conn_get(struct sq *s)
{
    pthread_mutex_lock(&s->mu);
    struct conn *c = s->idle;
    if (c)
        s->idle = c->next;
    pthread_mutex_unlock(&s->mu);
    if (!c && conn_open(s->path, &c) != 0)
        return NULL;
    return c;
}

static void conn_put(struct sq *s, struct conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&s->mu);
    c->next = s->idle;
    s->idle = c;
    pthread_mutex_unlock(&s->mu);
}

/* Returns the connection's cached statement for sql (a static string), reset
 * and with its bindings cleared, or NULL after logging the failure. */
static sqlite3_stmt *prep(struct conn *c, const char *sql)
{
    for (size_t i = 0; i < c->ncache; i++)
        if (c->cache[i].sql == sql) {
            sqlite3_reset(c->cache[i].st);
            sqlite3_clear_bindings(c->cache[i].st);
            return c->cache[i].st;
        }
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) != SQLITE_OK) {
        fail(c->db, sql);
        return NULL;
    }
    if (c->ncache < STMT_CACHE) {
        c->cache[c->ncache].sql = sql;
        c->cache[c->ncache].st = st;
        c->ncache++;
    }
    return st;
}

/* Binds arguments by a format: 's' text (NULL binds NULL), 'i' int64. */
static void bindv(sqlite3_stmt *st, const char *fmt, va_list ap)
{
    for (int i = 1; *fmt; fmt++, i++) {
        if (*fmt == 's') {
            const char *v = va_arg(ap, const char *);
            sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
        } else {
            sqlite3_bind_int64(st, i, va_arg(ap, int64_t));
        }
    }
}

/* Prepares, binds and steps once. Returns SQLITE_ROW, SQLITE_DONE, or -1. */
static int q(struct conn *c, sqlite3_stmt **out, const char *sql, const char *fmt, ...)
{
    sqlite3_stmt *st = prep(c, sql);
    if (!st)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    bindv(st, fmt, ap);
    va_end(ap);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        if (rc == SQLITE_CONSTRAINT) {
            sqlite3_reset(st);
            return -2;
        }
        fail(c->db, sql);
        sqlite3_reset(st);
        return -1;
    }
    if (out)
        *out = st;
    else
        sqlite3_reset(st);
    return rc;
}

static int qrc(int rc)
{
    return rc == -2 ? E_CONFLICT : rc < 0 ? E_INTERNAL : 0;
}

static int begin(struct conn *c)
{
    return q(c, NULL, "BEGIN IMMEDIATE", "") < 0 ? E_INTERNAL : 0;
}

static int commit(struct conn *c)
{
    return q(c, NULL, "COMMIT", "") < 0 ? E_INTERNAL : 0;
}

static void rollback(struct conn *c)
{
    if (!sqlite3_get_autocommit(c->db))
        (void)q(c, NULL, "ROLLBACK", "");
}

static void col(sqlite3_stmt *st, int i, char *buf, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    size_t n = t ? (size_t)sqlite3_column_bytes(st, i) : 0;
    if (n >= cap)
        n = cap - 1;
    if (n)
        memcpy(buf, t, n);
    buf[n] = '\0';
}

#define CONN(s, c)                                                                                 \
    struct sq *s = (struct sq *)st_;                                                               \
    struct conn *c = conn_get(s);                                                                  \
    if (!c)                                                                                        \
    return E_INTERNAL

/* ---- meta ---- */

static int sq_meta_get(struct store *st_, const char *key, char *val, size_t cap)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = q(c, &st, "SELECT value FROM meta WHERE key = ?", "s", key);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        col(st, 0, val, cap);
        sqlite3_reset(st);
    }
    conn_put(s, c);
    return ret;
}

static int sq_meta_init(struct store *st_, const char *key, const char *val, char *out, size_t cap)
{
    CONN(s, c);
    int rc = q(c, NULL, "INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", "ss", key, val);
    conn_put(s, c);
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
    col(st, base + 0, o->id, sizeof o->id);
    col(st, base + 1, o->name, sizeof o->name);
    col(st, base + 2, o->plan, sizeof o->plan);
    col(st, base + 3, o->plan_status, sizeof o->plan_status);
    col(st, base + 4, o->trial_plan, sizeof o->trial_plan);
    o->trial_ends_at = sqlite3_column_int64(st, base + 5);
    o->projects_enabled = sqlite3_column_int(st, base + 6);
    const unsigned char *ov = sqlite3_column_text(st, base + 7);
    o->overrides = xstrdup(ov ? (const char *)ov : "{}");
    col(st, base + 8, o->default_project_id, sizeof o->default_project_id);
    o->created_at = sqlite3_column_int64(st, base + 9);
}

static void org_row(sqlite3_stmt *st, struct org_rec *o)
{
    org_row_at(st, 0, o);
}

void org_rec_clear(struct org_rec *o)
{
    xfree(o->overrides);
    o->overrides = NULL;
}

static int sq_org_count(struct store *st_, int64_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = q(c, &st, "SELECT count(*) FROM orgs", "");
    if (rc == SQLITE_ROW) {
        *n = sqlite3_column_int64(st, 0);
        sqlite3_reset(st);
    }
    conn_put(s, c);
    return rc == SQLITE_ROW ? 0 : E_INTERNAL;
}

static const char SQL_PROJECT_INSERT[] =
    "INSERT INTO projects (id, org_id, name, status, created_at, updated_at)"
    " VALUES (?, ?, ?, ?, ?, ?)";

static int sq_org_create(struct store *st_, struct org_rec *o, struct project_rec *p)
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
    int ret = begin(c);
    if (ret == 0)
        ret = qrc(q(c, NULL,
                    "INSERT INTO orgs (id, name, plan, plan_status, trial_plan, trial_ends_at,"
                    " projects_enabled, overrides, default_project_id, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    "sssssiissi", o->id, o->name, o->plan, o->plan_status, o->trial_plan,
                    o->trial_ends_at, (int64_t)o->projects_enabled,
                    o->overrides ? o->overrides : "{}", o->default_project_id, o->created_at));
    if (ret == 0)
        ret = qrc(q(c, NULL, SQL_PROJECT_INSERT, "ssssii", p->id, p->org_id, p->name, p->status,
                    p->created_at, p->updated_at));
    if (ret == 0)
        ret = commit(c);
    if (ret)
        rollback(c);
    conn_put(s, c);
    return ret;
}

static int sq_org_get(struct store *st_, const char *id, struct org_rec *o)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = q(c, &st, "SELECT " ORG_COLS " FROM orgs WHERE id = ?", "s", id);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        org_row(st, o);
        sqlite3_reset(st);
    }
    conn_put(s, c);
    return ret;
}

static int sq_org_update(struct store *st_, const struct org_rec *o)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = q(c, &st,
               "UPDATE orgs SET name = ?, plan = ?, plan_status = ?, trial_plan = ?,"
               " trial_ends_at = ?, projects_enabled = ?, overrides = ?, default_project_id = ?"
               " WHERE id = ? RETURNING id",
               "ssssiisss", o->name, o->plan, o->plan_status, o->trial_plan, o->trial_ends_at,
               (int64_t)o->projects_enabled, o->overrides ? o->overrides : "{}",
               o->default_project_id, o->id);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : qrc(rc);
    if (rc == SQLITE_ROW)
        sqlite3_reset(st);
    conn_put(s, c);
    return ret;
}

/* ---- plans ---- */

static int sq_plan_get(struct store *st_, const char *id, char **json)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = q(c, &st, "SELECT entitlements FROM plans WHERE id = ?", "s", id);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        *json = xstrdup((const char *)sqlite3_column_text(st, 0));
        sqlite3_reset(st);
    }
    conn_put(s, c);
    return ret;
}

static int sq_plan_put(struct store *st_, const char *id, const char *json)
{
    CONN(s, c);
    int rc = q(c, NULL,
               "INSERT INTO plans (id, entitlements) VALUES (?, ?)"
               " ON CONFLICT (id) DO UPDATE SET entitlements = excluded.entitlements",
               "ss", id, json);
    conn_put(s, c);
    return qrc(rc);
}

static int sq_plan_each(struct store *st_, void (*fn)(void *, const char *, const char *),
                        void *ctx)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = q(c, &st, "SELECT id, entitlements FROM plans ORDER BY id", "");
    while (rc == SQLITE_ROW) {
        fn(ctx, (const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 1));
        rc = sqlite3_step(st);
    }
    int ret = rc == SQLITE_DONE ? 0 : fail(c->db, "plan_each");
    sqlite3_reset(st);
    conn_put(s, c);
    return ret;
}

/* ---- projects ---- */

#define PROJECT_COLS "id, org_id, name, status, created_at, updated_at"

static void project_row(sqlite3_stmt *st, struct project_rec *p)
{
    col(st, 0, p->id, sizeof p->id);
    col(st, 1, p->org_id, sizeof p->org_id);
    col(st, 2, p->name, sizeof p->name);
    col(st, 3, p->status, sizeof p->status);
    p->created_at = sqlite3_column_int64(st, 4);
    p->updated_at = sqlite3_column_int64(st, 5);
}

static int sq_project_create(struct store *st_, struct project_rec *p)
{
    CONN(s, c);
    crypto_new_id(p->id);
    p->created_at = p->updated_at = clock_now_ms();
    if (!p->status[0])
        snprintf(p->status, sizeof p->status, "active");
    int rc = q(c, NULL, SQL_PROJECT_INSERT, "ssssii", p->id, p->org_id, p->name, p->status,
               p->created_at, p->updated_at);
    conn_put(s, c);
    return qrc(rc);
}

static int sq_project_get(struct store *st_, const char *org_id, const char *id_or_name,
                          struct project_rec *out)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = q(c, &st,
               "SELECT " PROJECT_COLS " FROM projects WHERE org_id = ? AND (id = ? OR name = ?)"
               " ORDER BY id = ? DESC LIMIT 1",
               "ssss", org_id, id_or_name, id_or_name, id_or_name);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        project_row(st, out);
        sqlite3_reset(st);
    }
    conn_put(s, c);
    return ret;
}

/* Steps a list query that asked for limit + 1 rows, keeping at most limit. */
#define COLLECT(st, rc, pg, rows, n, type, rowfn)                                                  \
    do {                                                                                           \
        size_t cap_ = (pg)->limit ? (pg)->limit : 1;                                               \
        *(rows) = xcalloc(cap_, sizeof(type));                                                     \
        *(n) = 0;                                                                                  \
        (pg)->has_more = 0;                                                                        \
        while ((rc) == SQLITE_ROW) {                                                               \
            if (*(n) == (pg)->limit) {                                                             \
                (pg)->has_more = 1;                                                                \
                break;                                                                             \
            }                                                                                      \
            rowfn((st), &(*(rows))[(*(n))++]);                                                     \
            (rc) = sqlite3_step(st);                                                               \
        }                                                                                          \
        if ((rc) == SQLITE_ROW || (rc) == SQLITE_DONE)                                             \
            (rc) = 0;                                                                              \
        sqlite3_reset(st);                                                                         \
    } while (0)

static int sq_project_list(struct store *st_, const char *org_id, struct page *pg,
                           struct project_rec **rows, size_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = q(c, &st,
               "SELECT " PROJECT_COLS " FROM projects WHERE org_id = ?"
               " ORDER BY created_at, id LIMIT ? OFFSET ?",
               "sii", org_id, (int64_t)pg->limit + 1, (int64_t)pg->offset);
    if (rc < 0) {
        conn_put(s, c);
        return E_INTERNAL;
    }
    COLLECT(st, rc, pg, rows, n, struct project_rec, project_row);
    if (rc)
        fail(c->db, "project_list");
    conn_put(s, c);
    return rc ? E_INTERNAL : 0;
}

static int sq_project_update(struct store *st_, const struct project_rec *p)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int ret = begin(c);
    if (ret == 0 && strcmp(p->status, "active") != 0) {
        /* Archiving: the org must keep an active project, and its default
         * moves to the oldest remaining active one. */
        int rc = q(c, &st,
                   "SELECT count(*) FROM projects WHERE org_id = ? AND status = 'active'"
                   " AND id != ?",
                   "ss", p->org_id, p->id);
        int64_t others = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
        if (rc == SQLITE_ROW)
            sqlite3_reset(st);
        ret = others < 0 ? E_INTERNAL : others == 0 ? E_CONFLICT : 0;
    }
    if (ret == 0) {
        int rc = q(c, &st,
                   "UPDATE projects SET name = ?, status = ?, updated_at = ?"
                   " WHERE org_id = ? AND id = ? RETURNING id",
                   "ssiss", p->name, p->status, p->updated_at, p->org_id, p->id);
        ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : qrc(rc);
        if (rc == SQLITE_ROW)
            sqlite3_reset(st);
    }
    if (ret == 0 && strcmp(p->status, "active") != 0)
        ret = qrc(q(c, NULL,
                    "UPDATE orgs SET default_project_id = (SELECT id FROM projects"
                    " WHERE org_id = orgs.id AND status = 'active' ORDER BY created_at, id"
                    " LIMIT 1) WHERE id = ? AND default_project_id = ?",
                    "ss", p->org_id, p->id));
    if (ret == 0)
        ret = commit(c);
    if (ret)
        rollback(c);
    conn_put(s, c);
    return ret;
}

static int sq_project_delete(struct store *st_, const char *org_id, const char *id)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int ret = begin(c);
    int64_t count = 0;
    if (ret == 0) {
        /* Counted among active projects: an org must keep one to work in. */
        int rc = q(c, &st,
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
        int rc = q(c, &st, "DELETE FROM projects WHERE org_id = ? AND id = ? RETURNING id", "ss",
                   org_id, id);
        ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
        if (rc == SQLITE_ROW)
            sqlite3_reset(st);
    }
    if (ret == 0)
        ret = qrc(q(c, NULL,
                    "UPDATE orgs SET default_project_id = (SELECT id FROM projects"
                    " WHERE org_id = orgs.id AND status = 'active' ORDER BY created_at, id"
                    " LIMIT 1)"
                    " WHERE id = ? AND default_project_id = ?",
                    "ss", org_id, id));
    if (ret == 0)
        ret = qrc(q(c, NULL,
                    "UPDATE api_keys SET deleted_at = ? WHERE project_id = ?"
                    " AND deleted_at = 0",
                    "is", clock_now_ms(), id));
    if (ret == 0)
        ret = commit(c);
    if (ret)
        rollback(c);
    conn_put(s, c);
    return ret;
}

/* ---- API keys ---- */

#define KEY_COLS                                                                                   \
    "id, org_id, project_id, name, key_hash, masked_key, created_at, expires_at, deleted_at"

static void key_row(sqlite3_stmt *st, struct apikey_rec *k)
{
    col(st, 0, k->id, sizeof k->id);
    col(st, 1, k->org_id, sizeof k->org_id);
    col(st, 2, k->project_id, sizeof k->project_id);
    col(st, 3, k->name, sizeof k->name);
    col(st, 4, k->key_hash, sizeof k->key_hash);
    col(st, 5, k->masked_key, sizeof k->masked_key);
    k->created_at = sqlite3_column_int64(st, 6);
    k->expires_at = sqlite3_column_int64(st, 7);
    k->deleted_at = sqlite3_column_int64(st, 8);
}

static const char SQL_KEY_INSERT[] = "INSERT INTO api_keys (" KEY_COLS ")"
                                     " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)";

static int key_insert(struct conn *c, struct apikey_rec *k)
{
    crypto_new_id(k->id);
    k->created_at = clock_now_ms();
    k->deleted_at = 0;
    return qrc(q(c, NULL, SQL_KEY_INSERT, "ssssssii", k->id, k->org_id, k->project_id, k->name,
                 k->key_hash, k->masked_key, k->created_at, k->expires_at));
}

static int sq_key_create(struct store *st_, struct apikey_rec *k)
{
    CONN(s, c);
    int ret = key_insert(c, k);
    conn_put(s, c);
    return ret;
}

static int key_get1(struct store *st_, const char *sql, const char *a, const char *b,
                    struct apikey_rec *out)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = b ? q(c, &st, sql, "ss", a, b) : q(c, &st, sql, "s", a);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        key_row(st, out);
        sqlite3_reset(st);
    }
    conn_put(s, c);
    return ret;
}

static int sq_key_get(struct store *st_, const char *org_id, const char *id, struct apikey_rec *out)
{
    return key_get1(st_, "SELECT " KEY_COLS " FROM api_keys WHERE org_id = ? AND id = ?", org_id,
                    id, out);
}

static int sq_key_by_hash(struct store *st_, const char *hash, struct apikey_rec *out)
{
    return key_get1(st_, "SELECT " KEY_COLS " FROM api_keys WHERE key_hash = ?", hash, NULL, out);
}

static void org_row_at(sqlite3_stmt *st, int base, struct org_rec *o);

static int sq_auth_lookup(struct store *st_, const char *hash, struct apikey_rec *key,
                          struct org_rec *org)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = q(c, &st,
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
    conn_put(s, c);
    return ret;
}

static int sq_key_list(struct store *st_, const char *org_id, struct page *pg,
                       struct apikey_rec **rows, size_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = q(c, &st,
               "SELECT " KEY_COLS " FROM api_keys WHERE org_id = ? AND deleted_at = 0"
               " ORDER BY created_at, id LIMIT ? OFFSET ?",
               "sii", org_id, (int64_t)pg->limit + 1, (int64_t)pg->offset);
    if (rc < 0) {
        conn_put(s, c);
        return E_INTERNAL;
    }
    COLLECT(st, rc, pg, rows, n, struct apikey_rec, key_row);
    conn_put(s, c);
    return rc ? E_INTERNAL : 0;
}

static int sq_key_update(struct store *st_, const struct apikey_rec *k)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = q(c, &st,
               "UPDATE api_keys SET name = ?, expires_at = ?, deleted_at = ?"
               " WHERE org_id = ? AND id = ? RETURNING id",
               "siiss", k->name, k->expires_at, k->deleted_at, k->org_id, k->id);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : qrc(rc);
    if (rc == SQLITE_ROW)
        sqlite3_reset(st);
    conn_put(s, c);
    return ret;
}

static int sq_key_rotate(struct store *st_, const char *org_id, const char *old_id,
                         int64_t old_expires_at, struct apikey_rec *fresh)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int ret = begin(c);
    if (ret == 0) {
        int rc = q(c, &st,
                   "UPDATE api_keys SET expires_at = CASE WHEN expires_at = 0 OR expires_at > ?"
                   " THEN ? ELSE expires_at END WHERE org_id = ? AND id = ? AND deleted_at = 0"
                   " RETURNING id",
                   "iiss", old_expires_at, old_expires_at, org_id, old_id);
        ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
        if (rc == SQLITE_ROW)
            sqlite3_reset(st);
    }
    if (ret == 0)
        ret = key_insert(c, fresh);
    if (ret == 0)
        ret = commit(c);
    if (ret)
        rollback(c);
    conn_put(s, c);
    return ret;
}

/* ---- sessions ---- */

#define SESSION_COLS                                                                               \
    "id, org_id, project_id, name, status, created_at, deleted_at, uptime_ms, usage_status,"       \
    " end_reason, pid, pid_start, xvfb_pid, xvfb_start, data"

static void session_row(sqlite3_stmt *st, struct session_rec *r)
{
    col(st, 0, r->id, sizeof r->id);
    col(st, 1, r->org_id, sizeof r->org_id);
    col(st, 2, r->project_id, sizeof r->project_id);
    col(st, 3, r->name, sizeof r->name);
    col(st, 4, r->status, sizeof r->status);
    r->created_at = sqlite3_column_int64(st, 5);
    r->deleted_at = sqlite3_column_int64(st, 6);
    r->uptime_ms = sqlite3_column_int64(st, 7);
    col(st, 8, r->usage_status, sizeof r->usage_status);
    col(st, 9, r->end_reason, sizeof r->end_reason);
    r->pid = sqlite3_column_int(st, 10);
    r->pid_start = (unsigned long long)sqlite3_column_int64(st, 11);
    r->xvfb_pid = sqlite3_column_int(st, 12);
    r->xvfb_start = (unsigned long long)sqlite3_column_int64(st, 13);
    const unsigned char *d = sqlite3_column_text(st, 14);
    r->data = xstrdup(d ? (const char *)d : "{}");
}

void session_rec_clear(struct session_rec *s)
{
    xfree(s->data);
    s->data = NULL;
}

static int sq_session_insert(struct store *st_, const struct session_rec *r)
{
    CONN(s, c);
    int rc = q(c, NULL,
               "INSERT INTO sessions (" SESSION_COLS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
               " ?, ?, ?, ?)",
               "sssssiiisiiiiis", r->id, r->org_id, r->project_id, r->name, r->status,
               r->created_at, r->deleted_at, r->uptime_ms, r->usage_status, r->end_reason,
               (int64_t)r->pid, (int64_t)r->pid_start, (int64_t)r->xvfb_pid, (int64_t)r->xvfb_start,
               r->data ? r->data : "{}");
    conn_put(s, c);
    return qrc(rc);
}

static int sq_session_get(struct store *st_, const char *org_id, const char *project_id,
                          const char *id_or_name, int include_deleted, struct session_rec *out)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = q(c, &st,
               "SELECT " SESSION_COLS " FROM sessions WHERE org_id = ? AND project_id = ?"
               " AND (id = ? OR (name = ? AND name != '' AND status = 'active'))"
               " AND (? OR status = 'active') ORDER BY id = ? DESC LIMIT 1",
               "ssssis", org_id, project_id, id_or_name, id_or_name, (int64_t)include_deleted,
               id_or_name);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        session_row(st, out);
        sqlite3_reset(st);
    }
    conn_put(s, c);
    return ret;
}

static int sq_session_list(struct store *st_, const char *org_id, const char *project_id,
                           const struct session_filter *f, struct page *pg,
                           struct session_rec **rows, size_t *n)
{
    CONN(s, c);
    /* Tag filters are matched in SQL with json_extract, one placeholder pair
     * per tag; the statement text therefore depends on the count, so it is
     * prepared per call rather than cached. */
    char sql[2048];
    int off = snprintf(sql, sizeof sql,
                       "SELECT " SESSION_COLS " FROM sessions WHERE org_id = ?1 AND project_id = ?2"
                       " AND (?3 = 'all' OR status = ?3) AND (?4 IS NULL OR instr(name, ?4) > 0)");
    for (size_t i = 0; i < f->ntags && off > 0 && (size_t)off < sizeof sql; i++)
        off += snprintf(sql + off, sizeof sql - (size_t)off,
                        " AND json_extract(data, '$.tags.' || json_quote(?%zu)) = ?%zu", 7 + 2 * i,
                        8 + 2 * i);
    if (off > 0 && (size_t)off < sizeof sql)
        snprintf(sql + off, sizeof sql - (size_t)off,
                 " ORDER BY created_at, id LIMIT ?5 OFFSET ?6");
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(c->db, sql, -1, &st, NULL) != SQLITE_OK) {
        int ret = fail(c->db, "session_list");
        conn_put(s, c);
        return ret;
    }
    sqlite3_bind_text(st, 1, org_id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, project_id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 3, f->status ? f->status : "active", -1, SQLITE_TRANSIENT);
    if (f->query && *f->query)
        sqlite3_bind_text(st, 4, f->query, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 5, (int64_t)pg->limit + 1);
    sqlite3_bind_int64(st, 6, (int64_t)pg->offset);
    for (size_t i = 0; i < f->ntags; i++) {
        sqlite3_bind_text(st, (int)(7 + 2 * i), f->tag_keys[i], -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, (int)(8 + 2 * i), f->tag_values[i], -1, SQLITE_TRANSIENT);
    }
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        int ret = fail(c->db, "session_list");
        sqlite3_finalize(st);
        conn_put(s, c);
        return ret;
    }
    COLLECT(st, rc, pg, rows, n, struct session_rec, session_row);
    sqlite3_finalize(st);
    conn_put(s, c);
    return rc ? E_INTERNAL : 0;
}

static int sq_session_update(struct store *st_, const struct session_rec *r)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = q(c, &st,
               "UPDATE sessions SET name = ?, status = ?, deleted_at = ?, uptime_ms = ?,"
               " usage_status = ?, end_reason = ?, pid = ?, pid_start = ?, xvfb_pid = ?,"
               " xvfb_start = ?, data = ? WHERE id = ? RETURNING id",
               "ssiissiiiiss", r->name, r->status, r->deleted_at, r->uptime_ms, r->usage_status,
               r->end_reason, (int64_t)r->pid, (int64_t)r->pid_start, (int64_t)r->xvfb_pid,
               (int64_t)r->xvfb_start, r->data ? r->data : "{}", r->id);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : qrc(rc);
    if (rc == SQLITE_ROW)
        sqlite3_reset(st);
    conn_put(s, c);
    return ret;
}

static int sq_session_list_active(struct store *st_, struct session_rec **rows, size_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    size_t cap = 16;
    *rows = xcalloc(cap, sizeof **rows);
    *n = 0;
    int rc = q(c, &st, "SELECT " SESSION_COLS " FROM sessions WHERE status = 'active'", "");
    while (rc == SQLITE_ROW) {
        if (*n == cap) {
            cap *= 2;
            *rows = xrealloc(*rows, cap * sizeof **rows);
        }
        session_row(st, &(*rows)[(*n)++]);
        rc = sqlite3_step(st);
    }
    if (st)
        sqlite3_reset(st);
    conn_put(s, c);
    return rc == SQLITE_DONE ? 0 : E_INTERNAL;
}

/* ---- lifecycle ---- */

static void sq_close(struct store *st_)
{
    struct sq *s = (struct sq *)st_;
    while (s->idle) {
        struct conn *c = s->idle;
        s->idle = c->next;
        conn_close(c);
    }
    pthread_mutex_destroy(&s->mu);
    xfree(s->path);
    xfree(s);
}

static const struct store_ops sqlite_ops = {
    .name = "sqlite",
    .close = sq_close,
    .meta_get = sq_meta_get,
    .meta_init = sq_meta_init,
    .org_count = sq_org_count,
    .org_create = sq_org_create,
    .org_get = sq_org_get,
    .org_update = sq_org_update,
    .plan_get = sq_plan_get,
    .plan_put = sq_plan_put,
    .plan_each = sq_plan_each,
    .project_create = sq_project_create,
    .project_get = sq_project_get,
    .project_list = sq_project_list,
    .project_update = sq_project_update,
    .project_delete = sq_project_delete,
    .key_create = sq_key_create,
    .key_get = sq_key_get,
    .key_by_hash = sq_key_by_hash,
    .auth_lookup = sq_auth_lookup,
    .key_list = sq_key_list,
    .key_update = sq_key_update,
    .key_rotate = sq_key_rotate,
    .session_insert = sq_session_insert,
    .session_get = sq_session_get,
    .session_list = sq_session_list,
    .session_update = sq_session_update,
    .session_list_active = sq_session_list_active,
};

static int migrate(struct conn *c)
{
    sqlite3_stmt *st;
    if (begin(c))
        return E_INTERNAL;
    int rc = q(c, &st, "PRAGMA user_version", "");
    int version = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
    if (rc == SQLITE_ROW)
        sqlite3_reset(st);
    int n = (int)(sizeof migrations / sizeof migrations[0]);
    if (version < 0 || version > n) {
        rollback(c);
        log_error("store: schema version %d is unknown to this build (it knows %d)", version, n);
        return E_INTERNAL;
    }
    for (int i = version; i < n; i++) {
        char *msg = NULL;
        if (sqlite3_exec(c->db, migrations[i], NULL, NULL, &msg) != SQLITE_OK) {
            log_error("store: migration %d: %s", i + 1, msg ? msg : "?");
            sqlite3_free(msg);
            rollback(c);
            return E_INTERNAL;
        }
        char pragma[48];
        snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", i + 1);
        if (sqlite3_exec(c->db, pragma, NULL, NULL, NULL) != SQLITE_OK) {
            rollback(c);
            return fail(c->db, "user_version");
        }
    }
    return commit(c);
}

int store_open_sqlite(const char *dir, struct store **out, struct err *e)
{
    *out = NULL;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return err_set(e, E_INTERNAL, "internal", "cannot create data folder %s: %s", dir,
                       strerror(errno));
    struct sq *s = xcalloc(1, sizeof *s);
    s->base.ops = &sqlite_ops;
    s->path = xasprintf("%s/browserd.db", dir);
    pthread_mutex_init(&s->mu, NULL);
    struct conn *c;
    if (conn_open(s->path, &c) != 0) {
        sq_close(&s->base);
        return err_set(e, E_INTERNAL, "internal", "cannot open the store in %s", dir);
    }
    if (migrate(c) != 0) {
        conn_close(c);
        sq_close(&s->base);
        return err_set(e, E_INTERNAL, "internal", "cannot migrate the store in %s", dir);
    }
    conn_put(s, c);
    *out = &s->base;
    return 0;
}

void store_close(struct store *st)
{
    if (st)
        st->ops->close(st);
}
