/* SQLite backend: extensions (uploaded browser extensions; the zips live in
 * the data folder, this table holds their records). */
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/xalloc.h"
#include "store/sqlite_internal.h"

const char sq_schema_extensions[] =
    "CREATE TABLE extensions (id TEXT PRIMARY KEY, org_id TEXT NOT NULL, project_id TEXT NOT NULL,"
    " name TEXT NOT NULL DEFAULT '', created_at INTEGER NOT NULL, size_bytes INTEGER NOT NULL,"
    " checksum TEXT NOT NULL DEFAULT '', last_used_at INTEGER NOT NULL DEFAULT 0);"
    "CREATE UNIQUE INDEX extensions_name ON extensions (org_id, project_id, name)"
    " WHERE name != '';"
    "CREATE INDEX extensions_project ON extensions (org_id, project_id, created_at);";

#define EXT_COLS "id, org_id, project_id, name, created_at, size_bytes, checksum, last_used_at"

static void ext_row(sqlite3_stmt *st, struct ext_rec *r)
{
    sqx_col(st, 0, r->id, sizeof r->id);
    sqx_col(st, 1, r->org_id, sizeof r->org_id);
    sqx_col(st, 2, r->project_id, sizeof r->project_id);
    sqx_col(st, 3, r->name, sizeof r->name);
    r->created_at = sqlite3_column_int64(st, 4);
    r->size_bytes = sqlite3_column_int64(st, 5);
    sqx_col(st, 6, r->checksum, sizeof r->checksum);
    r->last_used_at = sqlite3_column_int64(st, 7);
}

int sq_ext_create(struct store *st_, struct ext_rec *x)
{
    CONN(s, c);
    crypto_new_id(x->id);
    x->created_at = clock_now_ms();
    x->last_used_at = 0;
    int rc = sqx_q(c, NULL, "INSERT INTO extensions (" EXT_COLS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                   "ssssiisi", x->id, x->org_id, x->project_id, x->name, x->created_at,
                   x->size_bytes, x->checksum, x->last_used_at);
    sqx_conn_put(s, c);
    return sqx_qrc(rc);
}

int sq_ext_get(struct store *st_, const char *org_id, const char *project_id,
               const char *id_or_name, struct ext_rec *out)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st,
                   "SELECT " EXT_COLS " FROM extensions WHERE org_id = ? AND project_id = ?"
                   " AND (id = ? OR (name = ? AND name != '')) ORDER BY id = ? DESC LIMIT 1",
                   "sssss", org_id, project_id, id_or_name, id_or_name, id_or_name);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        ext_row(st, out);
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return ret;
}

int sq_ext_list(struct store *st_, const char *org_id, const char *project_id, const char *name,
                const char *query, struct page *pg, struct ext_rec **rows, size_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st =
        sqx_prep(c, "SELECT " EXT_COLS " FROM extensions"
                    " WHERE org_id = ?1 AND project_id = ?2"
                    " AND (?3 IS NULL OR lower(name) = lower(?3))"
                    " AND (?4 IS NULL OR id = ?4 OR instr(lower(name), lower(?4)) > 0)"
                    " ORDER BY created_at, id LIMIT ?5 OFFSET ?6");
    if (!st) {
        sqx_conn_put(s, c);
        return E_INTERNAL;
    }
    sqlite3_bind_text(st, 1, org_id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, project_id, -1, SQLITE_TRANSIENT);
    if (name)
        sqlite3_bind_text(st, 3, name, -1, SQLITE_TRANSIENT);
    if (query && *query)
        sqlite3_bind_text(st, 4, query, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 5, (int64_t)pg->limit + 1);
    sqlite3_bind_int64(st, 6, (int64_t)pg->offset);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        int ret = sqx_fail(c->db, "ext_list");
        sqlite3_reset(st);
        sqx_conn_put(s, c);
        return ret;
    }
    COLLECT(st, rc, pg, rows, n, struct ext_rec, ext_row);
    sqx_conn_put(s, c);
    return rc ? E_INTERNAL : 0;
}

int sq_ext_count(struct store *st_, const char *org_id, int64_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st, "SELECT count(*) FROM extensions WHERE org_id = ?", "s", org_id);
    int ret = rc == SQLITE_ROW ? 0 : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        *n = sqlite3_column_int64(st, 0);
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return ret;
}

int sq_ext_touch(struct store *st_, const char *id, int64_t last_used_at)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st, "UPDATE extensions SET last_used_at = ? WHERE id = ? RETURNING id", "is",
                   last_used_at, id);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : sqx_qrc(rc);
    if (rc == SQLITE_ROW)
        sqlite3_reset(st);
    sqx_conn_put(s, c);
    return ret;
}

int sq_ext_delete(struct store *st_, const char *org_id, const char *project_id, const char *id)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st,
                   "DELETE FROM extensions WHERE org_id = ? AND project_id = ? AND id = ?"
                   " RETURNING id",
                   "sss", org_id, project_id, id);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : sqx_qrc(rc);
    if (rc == SQLITE_ROW)
        sqlite3_reset(st);
    sqx_conn_put(s, c);
    return ret;
}
