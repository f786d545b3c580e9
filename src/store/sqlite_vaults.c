/* SQLite backend: vaults and their items (api/vaults.h). */
#include <stdio.h>
#include <string.h>

#include "core/xalloc.h"
#include "store/sqlite_internal.h"

const char sq_schema_vaults[] =
    "CREATE TABLE vaults (id TEXT PRIMARY KEY, org_id TEXT NOT NULL, project_id TEXT NOT NULL,"
    " vault_id TEXT NOT NULL, name TEXT NOT NULL, type TEXT NOT NULL,"
    " version INTEGER NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,"
    " data TEXT NOT NULL, UNIQUE (org_id, project_id, vault_id, name));"
    "CREATE INDEX vaults_org ON vaults (org_id, vault_id);";

#define VAULT_COLS                                                                                 \
    "id, org_id, project_id, vault_id, name, type, version, created_at, updated_at, data"

static void vault_row(sqlite3_stmt *st, struct vault_rec *r)
{
    sqx_col(st, 0, r->id, sizeof r->id);
    sqx_col(st, 1, r->org_id, sizeof r->org_id);
    sqx_col(st, 2, r->project_id, sizeof r->project_id);
    sqx_col(st, 3, r->vault_id, sizeof r->vault_id);
    sqx_col(st, 4, r->name, sizeof r->name);
    sqx_col(st, 5, r->type, sizeof r->type);
    r->version = sqlite3_column_int64(st, 6);
    r->created_at = sqlite3_column_int64(st, 7);
    r->updated_at = sqlite3_column_int64(st, 8);
    r->data = sqx_data(st, 9);
}

int sq_vault_insert(struct store *st_, const struct vault_rec *r, int64_t cap)
{
    CONN(s, c);
    int ret =
        sqx_cap_begin(c, cap, r->org_id,
                      "SELECT count(*) FROM vaults WHERE org_id = ? AND vault_id = ?", r->vault_id);
    if (ret == 0)
        ret = sqx_qrc(sqx_q(
            c, NULL, "INSERT INTO vaults (" VAULT_COLS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            "ssssssiiis", r->id, r->org_id, r->project_id, r->vault_id, r->name, r->type,
            r->version, r->created_at, r->updated_at, SQ_DATA(r->data)));
    ret = sqx_cap_end(c, cap, ret);
    sqx_conn_put(s, c);
    return ret;
}

int sq_vault_get(struct store *st_, const char *org_id, const char *project_id,
                 const char *vault_id, const char *id_or_name, struct vault_rec *out)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st,
                   "SELECT " VAULT_COLS " FROM vaults WHERE org_id = ?1 AND project_id = ?2"
                   " AND vault_id = ?3 AND (id = ?4 OR name = ?4) ORDER BY id = ?4 DESC LIMIT 1",
                   "ssss", org_id, project_id, vault_id, id_or_name);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        vault_row(st, out);
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return ret;
}

int sq_vault_list(struct store *st_, const char *org_id, const char *project_id,
                  const char *vault_id, const char *query, struct page *pg, struct vault_rec **rows,
                  size_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st,
                   "SELECT " VAULT_COLS " FROM vaults WHERE org_id = ?1 AND project_id = ?2"
                   " AND vault_id = ?3 AND (?4 IS NULL OR instr(name, ?4) > 0)"
                   " ORDER BY created_at, id LIMIT ?5 OFFSET ?6",
                   "ssssii", org_id, project_id, vault_id, query, (int64_t)pg->limit + 1,
                   (int64_t)pg->offset);
    if (rc < 0) {
        sqx_conn_put(s, c);
        return E_INTERNAL;
    }
    COLLECT(st, rc, pg, rows, n, struct vault_rec, vault_row);
    if (rc)
        sqx_fail(c->db, "vault_list");
    sqx_conn_put(s, c);
    return rc ? E_INTERNAL : 0;
}

int sq_vault_count(struct store *st_, const char *org_id, const char *vault_id, int64_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st, "SELECT count(*) FROM vaults WHERE org_id = ? AND vault_id = ?", "ss",
                   org_id, vault_id);
    int ret = rc == SQLITE_ROW ? 0 : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        *n = sqlite3_column_int64(st, 0);
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return ret;
}

int sq_vault_update(struct store *st_, const struct vault_rec *r, int64_t expected_version)
{
    CONN(s, c);
    int rc = sqx_q(c, NULL,
                   "UPDATE vaults SET data = ?, version = ?, updated_at = ?"
                   " WHERE id = ? AND org_id = ? AND version = ?",
                   "siissi", SQ_DATA(r->data), r->version, r->updated_at, r->id, r->org_id,
                   expected_version);
    int changed = rc == SQLITE_DONE ? sqlite3_changes(c->db) : 0;
    int exists = 0;
    if (rc >= 0 && !changed) {
        sqlite3_stmt *st = NULL;
        exists = sqx_q(c, &st, "SELECT 1 FROM vaults WHERE id = ? AND org_id = ?", "ss", r->id,
                       r->org_id) == SQLITE_ROW;
        if (exists)
            sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    if (rc < 0)
        return sqx_qrc(rc);
    return changed ? 0 : exists ? E_CONFLICT : E_NOTFOUND;
}

int sq_vault_delete(struct store *st_, const char *org_id, const char *project_id, const char *id)
{
    CONN(s, c);
    int ret = sqx_begin(c);
    int changed = 0;
    if (ret == 0) {
        int rc = sqx_q(c, NULL, "DELETE FROM vaults WHERE org_id = ? AND project_id = ? AND id = ?",
                       "sss", org_id, project_id, id);
        changed = rc == SQLITE_DONE ? sqlite3_changes(c->db) : 0;
        if (rc >= 0)
            rc = sqx_q(c, NULL, "DELETE FROM vaults WHERE org_id = ? AND vault_id = ?", "ss",
                       org_id, id);
        ret = rc < 0 ? E_INTERNAL : sqx_commit(c);
        if (ret)
            sqx_rollback(c);
    }
    sqx_conn_put(s, c);
    return ret ? ret : changed ? 0 : E_NOTFOUND;
}
