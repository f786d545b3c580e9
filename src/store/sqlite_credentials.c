/* SQLite backend: credentials of a project (sealed values, api/credentials.h). */
#include <stdio.h>
#include <string.h>

#include "core/xalloc.h"
#include "store/sqlite_internal.h"

const char sq_schema_credentials[] =
    "CREATE TABLE credentials (id TEXT PRIMARY KEY, org_id TEXT NOT NULL,"
    " project_id TEXT NOT NULL, name TEXT NOT NULL, domain TEXT NOT NULL,"
    " created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, data TEXT NOT NULL,"
    " UNIQUE (org_id, project_id, name));"
    "CREATE INDEX credentials_org ON credentials (org_id, created_at);";

#define CRED_COLS "id, org_id, project_id, name, domain, created_at, updated_at, data"

static void cred_row(sqlite3_stmt *st, struct cred_rec *r)
{
    sqx_col(st, 0, r->id, sizeof r->id);
    sqx_col(st, 1, r->org_id, sizeof r->org_id);
    sqx_col(st, 2, r->project_id, sizeof r->project_id);
    sqx_col(st, 3, r->name, sizeof r->name);
    sqx_col(st, 4, r->domain, sizeof r->domain);
    r->created_at = sqlite3_column_int64(st, 5);
    r->updated_at = sqlite3_column_int64(st, 6);
    r->data = sqx_data(st, 7);
}

int sq_cred_insert(struct store *st_, const struct cred_rec *r, int64_t cap)
{
    CONN(s, c);
    int ret =
        sqx_cap_begin(c, cap, r->org_id, "SELECT count(*) FROM credentials WHERE org_id = ?", NULL);
    if (ret == 0)
        ret = sqx_qrc(sqx_q(
            c, NULL, "INSERT INTO credentials (" CRED_COLS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            "sssssiis", r->id, r->org_id, r->project_id, r->name, r->domain, r->created_at,
            r->updated_at, SQ_DATA(r->data)));
    ret = sqx_cap_end(c, cap, ret);
    sqx_conn_put(s, c);
    return ret;
}

int sq_cred_get(struct store *st_, const char *org_id, const char *project_id,
                const char *id_or_name, struct cred_rec *out)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st,
                   "SELECT " CRED_COLS " FROM credentials WHERE org_id = ? AND project_id = ?"
                   " AND (id = ? OR name = ?) ORDER BY id = ? DESC LIMIT 1",
                   "sssss", org_id, project_id, id_or_name, id_or_name, id_or_name);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        cred_row(st, out);
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return ret;
}

int sq_cred_list(struct store *st_, const char *org_id, const char *project_id, const char *domain,
                 const char *query, struct page *pg, struct cred_rec **rows, size_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st,
                   "SELECT " CRED_COLS " FROM credentials WHERE org_id = ?1 AND project_id = ?2"
                   " AND (?3 IS NULL OR domain = ?3) AND (?4 IS NULL OR instr(name, ?4) > 0)"
                   " ORDER BY created_at, id LIMIT ?5 OFFSET ?6",
                   "ssssii", org_id, project_id, domain, query, (int64_t)pg->limit + 1,
                   (int64_t)pg->offset);
    if (rc < 0) {
        sqx_conn_put(s, c);
        return E_INTERNAL;
    }
    COLLECT(st, rc, pg, rows, n, struct cred_rec, cred_row);
    if (rc)
        sqx_fail(c->db, "cred_list");
    sqx_conn_put(s, c);
    return rc ? E_INTERNAL : 0;
}

int sq_cred_count(struct store *st_, const char *org_id, int64_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st, "SELECT count(*) FROM credentials WHERE org_id = ?", "s", org_id);
    int ret = rc == SQLITE_ROW ? 0 : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        *n = sqlite3_column_int64(st, 0);
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return ret;
}

int sq_cred_update(struct store *st_, const struct cred_rec *r)
{
    CONN(s, c);
    int ret =
        sqx_touched(c, sqx_q(c, NULL,
                             "UPDATE credentials SET name = ?, updated_at = ?, data = ?"
                             " WHERE id = ? AND org_id = ?",
                             "sisss", r->name, r->updated_at, SQ_DATA(r->data), r->id, r->org_id));
    sqx_conn_put(s, c);
    return ret;
}

int sq_cred_delete(struct store *st_, const char *org_id, const char *project_id, const char *id)
{
    CONN(s, c);
    int ret = sqx_touched(
        c, sqx_q(c, NULL, "DELETE FROM credentials WHERE org_id = ? AND project_id = ? AND id = ?",
                 "sss", org_id, project_id, id));
    sqx_conn_put(s, c);
    return ret;
}
