/*
 * SQLite backend: concurrency limits an organization sets (its projects'
 * max_concurrent_sessions, the default for projects without one), and the
 * admission that holds them: session_admit and pool_admit (store.h), each
 * one BEGIN IMMEDIATE transaction, the same counts as the PostgreSQL
 * backend's (pg_cluster.c). On SQLite the org's own limit is the session
 * manager's (one process); callers pass it as -1.
 */
#include <stdio.h>
#include <string.h>

#include "store/sqlite_internal.h"

const char sq_schema_limits[] =
    "CREATE TABLE concurrency_limits (org_id TEXT NOT NULL, project_id TEXT NOT NULL,"
    " max_sessions INTEGER NOT NULL DEFAULT 0, max_invocations INTEGER NOT NULL DEFAULT 0,"
    " PRIMARY KEY (org_id, project_id));"
    "CREATE INDEX sessions_project_active ON sessions (project_id) WHERE status = 'active';";

int sq_limits_get(struct store *st_, const char *org_id, const char *project_id,
                  struct limits_rec *out)
{
    CONN(s, c);
    sqlite3_stmt *st;
    memset(out, 0, sizeof *out);
    snprintf(out->org_id, sizeof out->org_id, "%s", org_id);
    snprintf(out->project_id, sizeof out->project_id, "%s", project_id);
    int rc = sqx_q(c, &st,
                   "SELECT max_sessions, max_invocations FROM concurrency_limits"
                   " WHERE org_id = ? AND project_id = ?",
                   "ss", org_id, project_id);
    if (rc == SQLITE_ROW) {
        out->max_sessions = sqlite3_column_int64(st, 0);
        out->max_invocations = sqlite3_column_int64(st, 1);
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return rc < 0 ? E_INTERNAL : 0;
}

int sq_limits_put(struct store *st_, const struct limits_rec *r)
{
    CONN(s, c);
    int rc = sqx_q(c, NULL,
                   "INSERT INTO concurrency_limits (org_id, project_id, max_sessions,"
                   " max_invocations) VALUES (?, ?, ?, ?) ON CONFLICT (org_id, project_id)"
                   " DO UPDATE SET max_sessions = excluded.max_sessions,"
                   " max_invocations = excluded.max_invocations",
                   "ssii", r->org_id, r->project_id, r->max_sessions, r->max_invocations);
    sqx_conn_put(s, c);
    return sqx_qrc(rc);
}

/* A pool's size from its config JSON text (0 when absent or not a number). */
#define POOL_SIZE(cfg)                                                                             \
    "(CASE WHEN json_type(" cfg ", '$.size') IN ('integer', 'real')"                               \
    " THEN json_extract(" cfg ", '$.size') ELSE 0 END)"

/* Counts, for org ?1, project ?2 and a pool ?3 left out of the sums: the
 * org's active standalone sessions (data without a "pool" key), its active
 * pools' sizes, the same two for the project, and the project's limit (its
 * own, else the org's default; -1: none). */
static const char SQL_COUNTS[] =
    "SELECT (SELECT count(*) FROM sessions WHERE org_id = ?1 AND status = 'active'"
    "  AND json_type(data, '$.pool') IS NULL),"
    " (SELECT coalesce(sum(" POOL_SIZE(
        "config") "), 0) FROM pools WHERE org_id = ?1"
                  "  AND status = 'active' AND id != ?3),"
                  " (SELECT count(*) FROM sessions WHERE org_id = ?1 AND project_id = ?2"
                  "  AND status = 'active' AND json_type(data, '$.pool') IS NULL),"
                  " (SELECT coalesce(sum(" POOL_SIZE(
                      "config") "), 0) FROM pools WHERE org_id = ?1"
                                "  AND project_id = ?2 AND status = 'active' AND id != ?3),"
                                " coalesce((SELECT nullif(max_sessions, 0) FROM concurrency_limits "
                                "WHERE org_id = ?1"
                                "  AND project_id = ?2), (SELECT nullif(max_sessions, 0) FROM "
                                "concurrency_limits"
                                "  WHERE org_id = ?1 AND project_id = ''), -1)";

struct counts {
    int64_t org_sessions, org_pools, sessions, pools, limit;
};

static int count(struct conn *c, const char *org_id, const char *project_id, const char *pool_id,
                 struct counts *n)
{
    sqlite3_stmt *st;
    int rc = sqx_q(c, &st, SQL_COUNTS, "sss", org_id, project_id, pool_id);
    if (rc != SQLITE_ROW)
        return E_INTERNAL;
    n->org_sessions = sqlite3_column_int64(st, 0);
    n->org_pools = sqlite3_column_int64(st, 1);
    n->sessions = sqlite3_column_int64(st, 2);
    n->pools = sqlite3_column_int64(st, 3);
    n->limit = sqlite3_column_int64(st, 4);
    sqlite3_reset(st);
    return 0;
}

struct admit_args {
    const struct session_rec *s;
    int64_t limit, *pools, *project_limit;
};

static int session_admit_on(struct conn *c, const void *arg)
{
    const struct admit_args *a = arg;
    struct counts n;
    int ret = sqx_begin(c);
    if (ret == 0)
        ret = count(c, a->s->org_id, a->s->project_id, "", &n);
    if (ret == 0) {
        if (a->pools)
            *a->pools = n.org_pools;
        if (a->limit >= 0 && n.org_sessions + n.org_pools >= a->limit)
            ret = E_LIMIT;
        else if (n.limit >= 0 && n.sessions + n.pools >= n.limit) {
            ret = E_LIMIT;
            if (a->pools)
                *a->pools = n.pools;
            if (a->project_limit)
                *a->project_limit = n.limit;
        }
    }
    if (ret == 0)
        ret = sqx_qrc(sqx_session_insert_on(c, a->s));
    if (ret == 0)
        ret = sqx_commit(c);
    if (ret)
        sqx_rollback(c);
    return ret;
}

/* The create path's write, as session_insert: committed without waiting for
 * the disk (sqx_unsynced). */
int sq_session_admit(struct store *st_, const struct session_rec *s, int64_t limit, int64_t *pools,
                     int64_t *project_limit)
{
    CONN(sq, c);
    if (project_limit)
        *project_limit = -1;
    struct admit_args a = {s, limit, pools, project_limit};
    int ret = sqx_unsynced(sq, c, session_admit_on, &a);
    sqx_conn_put(sq, c);
    return ret;
}

int sq_pool_admit(struct store *st_, const struct pool_rec *p, int is_update, int64_t limit,
                  int64_t *pools, int64_t *sessions, int64_t *project_limit)
{
    int active = strcmp(p->status, "active") == 0;
    int64_t size = 0;
    CONN(s, c);
    if (project_limit)
        *project_limit = -1;
    struct counts n;
    sqlite3_stmt *st;
    int ret = sqx_begin(c);
    if (ret == 0)
        ret = count(c, p->org_id, p->project_id, p->id, &n);
    if (ret == 0 && active) {
        int rc = sqx_q(c, &st, "SELECT " POOL_SIZE("?1"), "s", p->config ? p->config : "{}");
        if (rc == SQLITE_ROW) {
            size = sqlite3_column_int64(st, 0);
            sqlite3_reset(st);
        } else
            ret = E_INTERNAL;
    }
    if (ret == 0) {
        if (pools)
            *pools = n.org_pools + size;
        if (sessions)
            *sessions = n.org_sessions;
        if (active && limit >= 0 && n.org_sessions + n.org_pools + size > limit)
            ret = E_LIMIT;
        else if (active && n.limit >= 0 && n.sessions + n.pools + size > n.limit) {
            ret = E_LIMIT;
            if (pools)
                *pools = n.pools + size;
            if (sessions)
                *sessions = n.sessions;
            if (project_limit)
                *project_limit = n.limit;
        }
    }
    if (ret == 0)
        ret = is_update ? sqx_pool_update_on(c, p) : sqx_pool_insert_on(c, p);
    if (ret == 0)
        ret = sqx_commit(c);
    if (ret)
        sqx_rollback(c);
    sqx_conn_put(s, c);
    return ret;
}
