/* SQLite backend: browser pools. */
#include <stdio.h>
#include <string.h>

#include "core/xalloc.h"
#include "store/sqlite_internal.h"

const char sq_schema_pools[] =
    "CREATE TABLE pools (id TEXT PRIMARY KEY, org_id TEXT NOT NULL, project_id TEXT NOT NULL,"
    " name TEXT NOT NULL DEFAULT '', status TEXT NOT NULL, created_at INTEGER NOT NULL,"
    " config TEXT NOT NULL);"
    "CREATE UNIQUE INDEX pools_active_name ON pools (project_id, name)"
    " WHERE status = 'active' AND name != '';"
    "CREATE INDEX pools_project ON pools (org_id, project_id, created_at);";

#define POOL_COLS "id, org_id, project_id, name, status, created_at, node_id, config"

static void pool_row(sqlite3_stmt *st, struct pool_rec *p)
{
    sqx_col(st, 0, p->id, sizeof p->id);
    sqx_col(st, 1, p->org_id, sizeof p->org_id);
    sqx_col(st, 2, p->project_id, sizeof p->project_id);
    sqx_col(st, 3, p->name, sizeof p->name);
    sqx_col(st, 4, p->status, sizeof p->status);
    p->created_at = sqlite3_column_int64(st, 5);
    sqx_col(st, 6, p->node_id, sizeof p->node_id);
    const unsigned char *c = sqlite3_column_text(st, 7);
    p->config = xstrdup(c ? (const char *)c : "{}");
}

int sqx_pool_insert_on(struct conn *c, const struct pool_rec *p)
{
    return sqx_qrc(sqx_q(c, NULL,
                         "INSERT INTO pools (" POOL_COLS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         "sssssiss", p->id, p->org_id, p->project_id, p->name, p->status,
                         p->created_at, p->node_id[0] ? p->node_id : "local", p->config));
}

int sq_pool_insert(struct store *st_, const struct pool_rec *p)
{
    CONN(s, c);
    int rc = sqx_pool_insert_on(c, p);
    sqx_conn_put(s, c);
    return rc;
}

int sq_pool_get(struct store *st_, const char *org_id, const char *project_id,
                const char *id_or_name, struct pool_rec *out)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = sqx_q(c, &st,
                   "SELECT " POOL_COLS " FROM pools WHERE org_id = ? AND project_id = ?"
                   " AND status = 'active' AND (id = ? OR (name = ? AND name != ''))"
                   " ORDER BY id = ? DESC LIMIT 1",
                   "sssss", org_id, project_id, id_or_name, id_or_name, id_or_name);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        pool_row(st, out);
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return ret;
}

int sq_pool_list(struct store *st_, const char *org_id, const char *project_id, const char *name,
                 const char *query, const char *region, const char *region_default, struct page *pg,
                 struct pool_rec **rows, size_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st,
                   "SELECT " POOL_COLS " FROM pools WHERE org_id = ? AND project_id = ?"
                   " AND status = 'active' AND (? IS NULL OR name = ?)"
                   " AND (? IS NULL OR instr(name, ?) > 0)"
                   " AND (? IS NULL OR coalesce(json_extract(config, '$.region'), ?) = ?)"
                   " ORDER BY created_at, id LIMIT ? OFFSET ?",
                   "sssssssssii", org_id, project_id, name, name, query, query, region,
                   region_default, region, (int64_t)pg->limit + 1, (int64_t)pg->offset);
    if (rc < 0) {
        sqx_conn_put(s, c);
        return E_INTERNAL;
    }
    COLLECT(st, rc, pg, rows, n, struct pool_rec, pool_row);
    sqx_conn_put(s, c);
    return rc ? E_INTERNAL : 0;
}

int sqx_pool_update_on(struct conn *c, const struct pool_rec *p)
{
    sqlite3_stmt *st;
    int rc =
        sqx_q(c, &st, "UPDATE pools SET name = ?, status = ?, config = ? WHERE id = ? RETURNING id",
              "ssss", p->name, p->status, p->config, p->id);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : sqx_qrc(rc);
    if (rc == SQLITE_ROW)
        sqlite3_reset(st);
    return ret;
}

int sq_pool_update(struct store *st_, const struct pool_rec *p)
{
    CONN(s, c);
    int ret = sqx_pool_update_on(c, p);
    sqx_conn_put(s, c);
    return ret;
}

int sq_pool_list_active(struct store *st_, struct pool_rec **rows, size_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    size_t cap = 8;
    *rows = xcalloc(cap, sizeof **rows);
    *n = 0;
    int rc = sqx_q(c, &st, "SELECT " POOL_COLS " FROM pools WHERE status = 'active'", "");
    while (rc == SQLITE_ROW) {
        if (*n == cap) {
            cap *= 2;
            *rows = xrealloc(*rows, cap * sizeof **rows);
        }
        pool_row(st, &(*rows)[(*n)++]);
        rc = sqlite3_step(st);
    }
    if (st)
        sqlite3_reset(st);
    sqx_conn_put(s, c);
    return rc == SQLITE_DONE ? 0 : E_INTERNAL;
}
