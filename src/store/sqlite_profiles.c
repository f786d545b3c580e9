/* SQLite backend: profiles (saved browser states; the archives live in the
 * data folder, this table holds their records). */
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/log.h"
#include "core/xalloc.h"
#include "store/sqlite_internal.h"

const char sq_schema_profiles[] =
    "CREATE TABLE profiles (id TEXT PRIMARY KEY, org_id TEXT NOT NULL, project_id TEXT NOT NULL,"
    " name TEXT NOT NULL DEFAULT '', created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,"
    " last_used_at INTEGER NOT NULL DEFAULT 0);"
    "CREATE UNIQUE INDEX profiles_name ON profiles (org_id, project_id, name) WHERE name != '';"
    "CREATE INDEX profiles_project ON profiles (org_id, project_id, created_at);";

/* Profiles made in the same millisecond list in the order they were made
 * (ORDER BY created_at, rowid): nothing to add here, the rowid is that order.
 * The migration exists so that both backends record the same history; the
 * PostgreSQL one adds a sequence column. */
const char sq_schema_profiles_seq[] = "SELECT 1;";

#define PROFILE_COLS "id, org_id, project_id, name, created_at, updated_at, last_used_at"

static void profile_row(sqlite3_stmt *st, struct profile_rec *r)
{
    sqx_col(st, 0, r->id, sizeof r->id);
    sqx_col(st, 1, r->org_id, sizeof r->org_id);
    sqx_col(st, 2, r->project_id, sizeof r->project_id);
    sqx_col(st, 3, r->name, sizeof r->name);
    r->created_at = sqlite3_column_int64(st, 4);
    r->updated_at = sqlite3_column_int64(st, 5);
    r->last_used_at = sqlite3_column_int64(st, 6);
}

int sq_profile_create(struct store *st_, struct profile_rec *p)
{
    CONN(s, c);
    crypto_new_id(p->id);
    p->created_at = p->updated_at = clock_now_ms();
    p->last_used_at = 0;
    int rc = sqx_q(c, NULL, "INSERT INTO profiles (" PROFILE_COLS ") VALUES (?, ?, ?, ?, ?, ?, ?)",
                   "ssssiii", p->id, p->org_id, p->project_id, p->name, p->created_at,
                   p->updated_at, p->last_used_at);
    sqx_conn_put(s, c);
    return sqx_qrc(rc);
}

/* Reads one row of a single-row query into out. */
static int one_row(int rc, sqlite3_stmt *st, struct profile_rec *out)
{
    if (rc == SQLITE_ROW) {
        profile_row(st, out);
        sqlite3_reset(st);
        return 0;
    }
    return rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
}

int sq_profile_get(struct store *st_, const char *org_id, const char *project_id,
                   const char *id_or_name, struct profile_rec *out)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st,
                   "SELECT " PROFILE_COLS " FROM profiles WHERE org_id = ? AND project_id = ?"
                   " AND (id = ? OR (name = ? AND name != '')) ORDER BY id = ? DESC LIMIT 1",
                   "sssss", org_id, project_id, id_or_name, id_or_name, id_or_name);
    int ret = one_row(rc, st, out);
    sqx_conn_put(s, c);
    return ret;
}

int sq_profile_get_by_id(struct store *st_, const char *id, struct profile_rec *out)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st, "SELECT " PROFILE_COLS " FROM profiles WHERE id = ?", "s", id);
    int ret = one_row(rc, st, out);
    sqx_conn_put(s, c);
    return ret;
}

int sq_profile_list(struct store *st_, const char *org_id, const char *project_id,
                    const struct profile_filter *f, struct page *pg, struct profile_rec **rows,
                    size_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = sqx_prep(c, "SELECT " PROFILE_COLS " FROM profiles"
                                   " WHERE org_id = ?1 AND project_id = ?2"
                                   " AND (?3 IS NULL OR name = ?3)"
                                   " AND (?4 IS NULL OR instr(name, ?4) > 0)"
                                   " ORDER BY created_at, rowid LIMIT ?5 OFFSET ?6");
    if (!st) {
        sqx_conn_put(s, c);
        return E_INTERNAL;
    }
    sqlite3_bind_text(st, 1, org_id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, project_id, -1, SQLITE_TRANSIENT);
    if (f && f->name)
        sqlite3_bind_text(st, 3, f->name, -1, SQLITE_TRANSIENT);
    if (f && f->query && *f->query)
        sqlite3_bind_text(st, 4, f->query, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 5, (int64_t)pg->limit + 1);
    sqlite3_bind_int64(st, 6, (int64_t)pg->offset);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        int ret = sqx_fail(c->db, "profile_list");
        sqlite3_reset(st);
        sqx_conn_put(s, c);
        return ret;
    }
    COLLECT(st, rc, pg, rows, n, struct profile_rec, profile_row);
    sqx_conn_put(s, c);
    return rc ? E_INTERNAL : 0;
}

int sq_profile_update(struct store *st_, const struct profile_rec *p)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st, "UPDATE profiles SET name = ?, updated_at = ? WHERE id = ? RETURNING id",
                   "sis", p->name, p->updated_at, p->id);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : sqx_qrc(rc);
    if (rc == SQLITE_ROW)
        sqlite3_reset(st);
    sqx_conn_put(s, c);
    return ret;
}

int sq_profile_touch(struct store *st_, const char *id, int64_t last_used_at, int64_t updated_at)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st,
                   "UPDATE profiles SET"
                   " last_used_at = CASE WHEN ?1 > 0 THEN ?1 ELSE last_used_at END,"
                   " updated_at = CASE WHEN ?2 > 0 THEN ?2 ELSE updated_at END"
                   " WHERE id = ?3 RETURNING id",
                   "iis", last_used_at, updated_at, id);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : sqx_qrc(rc);
    if (rc == SQLITE_ROW)
        sqlite3_reset(st);
    sqx_conn_put(s, c);
    return ret;
}

int sq_profile_delete(struct store *st_, const char *org_id, const char *project_id, const char *id)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st,
                   "DELETE FROM profiles WHERE org_id = ? AND project_id = ? AND id = ?"
                   " RETURNING id",
                   "sss", org_id, project_id, id);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : sqx_qrc(rc);
    if (rc == SQLITE_ROW)
        sqlite3_reset(st);
    sqx_conn_put(s, c);
    return ret;
}

int sq_profile_count(struct store *st_, const char *org_id, int64_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st, "SELECT count(*) FROM profiles WHERE org_id = ?", "s", org_id);
    int ret = rc == SQLITE_ROW ? 0 : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        *n = sqlite3_column_int64(st, 0);
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return ret;
}

int sq_profile_ids(struct store *st_, const char *org_id, char (**ids)[STORE_ID], size_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    size_t cap = 16, k = 0;
    char(*out)[STORE_ID] = xcalloc(cap, sizeof *out);
    int rc = sqx_q(c, &st, "SELECT id FROM profiles WHERE org_id = ?", "s", org_id);
    for (; rc == SQLITE_ROW; rc = sqlite3_step(st)) {
        if (k == cap) {
            cap *= 2;
            out = xrealloc(out, cap * sizeof *out);
        }
        sqx_col(st, 0, out[k++], STORE_ID);
    }
    if (st)
        sqlite3_reset(st);
    sqx_conn_put(s, c);
    if (rc != SQLITE_DONE) {
        xfree(out);
        *ids = NULL;
        *n = 0;
        return E_INTERNAL;
    }
    *ids = out;
    *n = k;
    return 0;
}
