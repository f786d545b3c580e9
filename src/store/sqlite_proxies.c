/* SQLite backend: proxies (custom and managed) of a project. */
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "core/xalloc.h"
#include "store/sqlite_internal.h"

const char sq_schema_proxies[] =
    "CREATE TABLE proxies (id TEXT PRIMARY KEY, org_id TEXT NOT NULL, project_id TEXT NOT NULL,"
    " name TEXT NOT NULL DEFAULT '', type TEXT NOT NULL, status TEXT NOT NULL DEFAULT '',"
    " last_checked INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL,"
    " data TEXT NOT NULL);"
    "CREATE INDEX proxies_project ON proxies (org_id, project_id, created_at);"
    "CREATE INDEX proxies_name ON proxies (org_id, name);";

#define PROXY_COLS "id, org_id, project_id, name, type, status, last_checked, created_at, data"

static void proxy_row(sqlite3_stmt *st, struct proxy_rec *r)
{
    sqx_col(st, 0, r->id, sizeof r->id);
    sqx_col(st, 1, r->org_id, sizeof r->org_id);
    sqx_col(st, 2, r->project_id, sizeof r->project_id);
    sqx_col(st, 3, r->name, sizeof r->name);
    sqx_col(st, 4, r->type, sizeof r->type);
    sqx_col(st, 5, r->status, sizeof r->status);
    r->last_checked = sqlite3_column_int64(st, 6);
    r->created_at = sqlite3_column_int64(st, 7);
    r->data = sqx_data(st, 8);
}

int sq_proxy_insert(struct store *st_, const struct proxy_rec *r, int64_t cap)
{
    CONN(s, c);
    int ret =
        sqx_cap_begin(c, cap, r->org_id, "SELECT count(*) FROM proxies WHERE org_id = ?", NULL);
    if (ret == 0)
        ret = sqx_qrc(sqx_q(
            c, NULL, "INSERT INTO proxies (" PROXY_COLS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            "ssssssiis", r->id, r->org_id, r->project_id, r->name, r->type, r->status,
            r->last_checked, r->created_at, SQ_DATA(r->data)));
    ret = sqx_cap_end(c, cap, ret);
    sqx_conn_put(s, c);
    return ret;
}

int sq_proxy_get(struct store *st_, const char *org_id, const char *project_id, const char *id,
                 struct proxy_rec *out)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = sqx_q(c, &st,
                   "SELECT " PROXY_COLS " FROM proxies WHERE org_id = ? AND project_id = ?"
                   " AND id = ?",
                   "sss", org_id, project_id, id);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        proxy_row(st, out);
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return ret;
}

int sq_proxy_find(struct store *st_, const char *org_id, const char *ref, struct proxy_rec **rows,
                  size_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st,
                   "SELECT " PROXY_COLS " FROM proxies WHERE org_id = ?"
                   " AND (id = ? OR (name = ? AND name != '')) ORDER BY created_at, id LIMIT 101",
                   "sss", org_id, ref, ref);
    if (rc < 0) {
        sqx_conn_put(s, c);
        return E_INTERNAL;
    }
    struct page pg = {.limit = 100};
    COLLECT(st, rc, &pg, rows, n, struct proxy_rec, proxy_row);
    if (rc)
        sqx_fail(c->db, "proxy_find");
    sqx_conn_put(s, c);
    return rc ? E_INTERNAL : 0;
}

int sq_proxy_list(struct store *st_, const char *org_id, const char *project_id, const char *name,
                  const char *query, struct page *pg, struct proxy_rec **rows, size_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st,
                   "SELECT " PROXY_COLS " FROM proxies WHERE org_id = ?1 AND project_id = ?2"
                   " AND (?3 IS NULL OR name = ?3) AND (?4 IS NULL OR instr(name, ?4) > 0)"
                   " ORDER BY created_at, id LIMIT ?5 OFFSET ?6",
                   "ssssii", org_id, project_id, name, query, (int64_t)pg->limit + 1,
                   (int64_t)pg->offset);
    if (rc < 0) {
        sqx_conn_put(s, c);
        return E_INTERNAL;
    }
    COLLECT(st, rc, pg, rows, n, struct proxy_rec, proxy_row);
    if (rc)
        sqx_fail(c->db, "proxy_list");
    sqx_conn_put(s, c);
    return rc ? E_INTERNAL : 0;
}

int sq_proxy_update(struct store *st_, const struct proxy_rec *r)
{
    CONN(s, c);
    int ret =
        sqx_touched(c, sqx_q(c, NULL,
                             "UPDATE proxies SET name = ?, status = ?, last_checked = ?, data = ?"
                             " WHERE id = ? AND org_id = ?",
                             "ssisss", r->name, r->status, r->last_checked, SQ_DATA(r->data), r->id,
                             r->org_id));
    sqx_conn_put(s, c);
    return ret;
}

int sq_proxy_delete(struct store *st_, const char *org_id, const char *project_id, const char *id)
{
    CONN(s, c);
    int ret = sqx_touched(
        c, sqx_q(c, NULL, "DELETE FROM proxies WHERE org_id = ? AND project_id = ? AND id = ?",
                 "sss", org_id, project_id, id));
    sqx_conn_put(s, c);
    return ret;
}
