/* SQLite backend: managed auth connections of a project (api/authconn.h). */
#include <stdio.h>
#include <string.h>

#include "core/limits.h"
#include "core/xalloc.h"
#include "store/sqlite_internal.h"

const char sq_schema_authconn[] =
    "CREATE TABLE auth_connections (id TEXT PRIMARY KEY, org_id TEXT NOT NULL,"
    " project_id TEXT NOT NULL, profile_name TEXT NOT NULL, domain TEXT NOT NULL,"
    " created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, data TEXT NOT NULL,"
    " UNIQUE (org_id, project_id, profile_name, domain));"
    "CREATE INDEX auth_connections_org ON auth_connections (org_id, created_at);";

#define AC_COLS "id, org_id, project_id, profile_name, domain, created_at, updated_at, data"

static void ac_row(sqlite3_stmt *st, struct authconn_rec *r)
{
    sqx_col(st, 0, r->id, sizeof r->id);
    sqx_col(st, 1, r->org_id, sizeof r->org_id);
    sqx_col(st, 2, r->project_id, sizeof r->project_id);
    sqx_col(st, 3, r->profile_name, sizeof r->profile_name);
    sqx_col(st, 4, r->domain, sizeof r->domain);
    r->created_at = sqlite3_column_int64(st, 5);
    r->updated_at = sqlite3_column_int64(st, 6);
    const unsigned char *d = sqlite3_column_text(st, 7);
    r->data = xstrdup(d ? (const char *)d : "{}");
}

int sq_ac_insert(struct store *st_, const struct authconn_rec *r, int64_t cap)
{
    CONN(s, c);
    int ret = sqx_cap_begin(c, cap, r->org_id,
                            "SELECT count(*) FROM auth_connections WHERE org_id = ?", NULL);
    if (ret == 0)
        ret = sqx_qrc(sqx_q(
            c, NULL, "INSERT INTO auth_connections (" AC_COLS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            "sssssiis", r->id, r->org_id, r->project_id, r->profile_name, r->domain, r->created_at,
            r->updated_at, r->data ? r->data : "{}"));
    ret = sqx_cap_end(c, cap, ret);
    sqx_conn_put(s, c);
    return ret;
}

int sq_ac_get(struct store *st_, const char *org_id, const char *project_id, const char *id,
              struct authconn_rec *out)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st,
                   "SELECT " AC_COLS " FROM auth_connections WHERE org_id = ? AND project_id = ?"
                   " AND id = ?",
                   "sss", org_id, project_id, id);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        ac_row(st, out);
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return ret;
}

int sq_ac_list(struct store *st_, const char *org_id, const char *project_id,
               const char *profile_name, const char *domain, struct page *pg,
               struct authconn_rec **rows, size_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st,
                   "SELECT " AC_COLS " FROM auth_connections WHERE (?1 IS NULL OR org_id = ?1)"
                   " AND (?2 IS NULL OR project_id = ?2) AND (?3 IS NULL OR profile_name = ?3)"
                   " AND (?4 IS NULL OR domain = ?4) ORDER BY created_at, id LIMIT ?5 OFFSET ?6",
                   "ssssii", org_id, project_id, profile_name, domain, (int64_t)pg->limit + 1,
                   (int64_t)pg->offset);
    if (rc < 0) {
        sqx_conn_put(s, c);
        return E_INTERNAL;
    }
    COLLECT(st, rc, pg, rows, n, struct authconn_rec, ac_row);
    if (rc)
        sqx_fail(c->db, "ac_list");
    sqx_conn_put(s, c);
    return rc ? E_INTERNAL : 0;
}

int sq_ac_count(struct store *st_, const char *org_id, int64_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st, "SELECT count(*) FROM auth_connections WHERE org_id = ?", "s", org_id);
    int ret = rc == SQLITE_ROW ? 0 : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        *n = sqlite3_column_int64(st, 0);
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return ret;
}

int sq_ac_update(struct store *st_, const struct authconn_rec *r)
{
    CONN(s, c);
    int rc = sqx_q(
        c, NULL, "UPDATE auth_connections SET updated_at = ?, data = ? WHERE id = ? AND org_id = ?",
        "isss", r->updated_at, r->data ? r->data : "{}", r->id, r->org_id);
    int changed = rc == SQLITE_DONE ? sqlite3_changes(c->db) : 0;
    sqx_conn_put(s, c);
    if (rc < 0)
        return sqx_qrc(rc);
    return changed ? 0 : E_NOTFOUND;
}

int sq_ac_delete(struct store *st_, const char *org_id, const char *project_id, const char *id)
{
    CONN(s, c);
    int rc = sqx_q(c, NULL,
                   "DELETE FROM auth_connections WHERE org_id = ? AND project_id = ? AND id = ?",
                   "sss", org_id, project_id, id);
    int changed = rc == SQLITE_DONE ? sqlite3_changes(c->db) : 0;
    sqx_conn_put(s, c);
    if (rc < 0)
        return sqx_qrc(rc);
    return changed ? 0 : E_NOTFOUND;
}
