/* SQLite backend: deployments and invocations of apps (api/apps.h), one
 * table keyed by kind. */
#include <stdio.h>
#include <string.h>

#include "core/xalloc.h"
#include "store/sqlite_internal.h"

const char sq_schema_apps[] =
    "CREATE TABLE app_objects (id TEXT PRIMARY KEY, org_id TEXT NOT NULL,"
    " project_id TEXT NOT NULL, kind TEXT NOT NULL, app_name TEXT NOT NULL,"
    " version TEXT NOT NULL, status TEXT NOT NULL, bytes INTEGER NOT NULL,"
    " created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, data TEXT NOT NULL);"
    "CREATE INDEX app_objects_org ON app_objects (org_id, project_id, kind, created_at);";

#define APPOBJ_COLS                                                                                \
    "id, org_id, project_id, kind, app_name, version, status, bytes, created_at, updated_at, data"

static void appobj_row(sqlite3_stmt *st, struct appobj_rec *r)
{
    sqx_col(st, 0, r->id, sizeof r->id);
    sqx_col(st, 1, r->org_id, sizeof r->org_id);
    sqx_col(st, 2, r->project_id, sizeof r->project_id);
    sqx_col(st, 3, r->kind, sizeof r->kind);
    sqx_col(st, 4, r->app_name, sizeof r->app_name);
    sqx_col(st, 5, r->version, sizeof r->version);
    sqx_col(st, 6, r->status, sizeof r->status);
    r->bytes = sqlite3_column_int64(st, 7);
    r->created_at = sqlite3_column_int64(st, 8);
    r->updated_at = sqlite3_column_int64(st, 9);
    const unsigned char *d = sqlite3_column_text(st, 10);
    r->data = xstrdup(d ? (const char *)d : "{}");
}

int sq_appobj_put(struct store *st_, const struct appobj_rec *r)
{
    CONN(s, c);
    int rc = sqx_q(c, NULL,
                   "INSERT INTO app_objects (" APPOBJ_COLS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?,"
                   " ?, ?) ON CONFLICT (id) DO UPDATE SET status = excluded.status, app_name = "
                   "excluded.app_name,"
                   " bytes = excluded.bytes, updated_at = excluded.updated_at,"
                   " data = excluded.data",
                   "sssssssiiis", r->id, r->org_id, r->project_id, r->kind, r->app_name, r->version,
                   r->status, r->bytes, r->created_at, r->updated_at, r->data ? r->data : "{}");
    sqx_conn_put(s, c);
    return sqx_qrc(rc);
}

int sq_appobj_get(struct store *st_, const char *org_id, const char *project_id, const char *kind,
                  const char *id, struct appobj_rec *out)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st,
                   "SELECT " APPOBJ_COLS " FROM app_objects WHERE org_id = ? AND project_id = ?"
                   " AND kind = ? AND id = ?",
                   "ssss", org_id, project_id, kind, id);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        appobj_row(st, out);
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return ret;
}

int sq_appobj_list(struct store *st_, const char *org_id, const char *project_id, const char *kind,
                   const char *app_name, const char *version, const char *status,
                   const char *match1, const char *match2, struct page *pg,
                   struct appobj_rec **rows, size_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc =
        sqx_q(c, &st,
              "SELECT " APPOBJ_COLS " FROM app_objects WHERE org_id = ?1 AND project_id = ?2"
              " AND kind = ?3 AND (?4 IS NULL OR app_name = ?4)"
              " AND (?5 IS NULL OR version = ?5) AND (?6 IS NULL OR status = ?6)"
              " AND (?9 IS NULL OR instr(data, ?9) > 0) AND (?10 IS NULL OR instr(data, ?10) > 0)"
              " ORDER BY created_at DESC, id LIMIT ?7 OFFSET ?8",
              "ssssssiiss", org_id, project_id, kind, app_name, version, status,
              (int64_t)pg->limit + 1, (int64_t)pg->offset, match1, match2);
    if (rc < 0) {
        sqx_conn_put(s, c);
        return E_INTERNAL;
    }
    COLLECT(st, rc, pg, rows, n, struct appobj_rec, appobj_row);
    if (rc)
        sqx_fail(c->db, "appobj_list");
    sqx_conn_put(s, c);
    return rc ? E_INTERNAL : 0;
}

int sq_appobj_delete(struct store *st_, const char *org_id, const char *project_id,
                     const char *kind, const char *id)
{
    CONN(s, c);
    int rc = sqx_q(c, NULL,
                   "DELETE FROM app_objects WHERE org_id = ? AND project_id = ? AND kind = ?"
                   " AND id = ?",
                   "ssss", org_id, project_id, kind, id);
    int changed = rc == SQLITE_DONE ? sqlite3_changes(c->db) : 0;
    sqx_conn_put(s, c);
    return rc < 0 ? sqx_qrc(rc) : changed ? 0 : E_NOTFOUND;
}

int sq_appobj_bytes(struct store *st_, const char *org_id, const char *kind, int64_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st,
                   "SELECT coalesce(sum(bytes), 0) FROM app_objects WHERE org_id = ? AND kind = ?",
                   "ss", org_id, kind);
    int ret = rc == SQLITE_ROW ? 0 : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        *n = sqlite3_column_int64(st, 0);
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return ret;
}

/* The statuses a run moves on: an invocation queued or running, a
 * deployment queued or being built (in_progress). */
#define UNFINISHED                                                                                 \
    "((kind = 'invocation' AND status IN ('queued', 'running'))"                                   \
    " OR (kind = 'deployment' AND status IN ('queued', 'in_progress')))"

int sq_appobj_unfinished(struct store *st_, struct page *pg, struct appobj_rec **rows, size_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st,
                   "SELECT " APPOBJ_COLS " FROM app_objects WHERE " UNFINISHED
                   " ORDER BY created_at, id LIMIT ? OFFSET ?",
                   "ii", (int64_t)pg->limit + 1, (int64_t)pg->offset);
    if (rc < 0) {
        sqx_conn_put(s, c);
        return E_INTERNAL;
    }
    COLLECT(st, rc, pg, rows, n, struct appobj_rec, appobj_row);
    if (rc)
        sqx_fail(c->db, "appobj_unfinished");
    sqx_conn_put(s, c);
    return rc ? E_INTERNAL : 0;
}

int sq_appobj_settle(struct store *st_, const struct appobj_rec *r, const char *was)
{
    CONN(s, c);
    int rc =
        sqx_q(c, NULL,
              "UPDATE app_objects SET status = ?, bytes = ?, updated_at = ?, data = ? WHERE id = ?"
              " AND status = ?",
              "siisss", r->status, r->bytes, r->updated_at, r->data ? r->data : "{}", r->id, was);
    rc = sqx_touched(c, rc);
    sqx_conn_put(s, c);
    return rc;
}
