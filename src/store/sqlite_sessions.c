/* SQLite backend: browser sessions. */
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/log.h"
#include "core/xalloc.h"
#include "store/sqlite_internal.h"

const char sq_schema_sessions[] =
    "CREATE TABLE sessions (id TEXT PRIMARY KEY, org_id TEXT NOT NULL, project_id TEXT NOT NULL,"
    " name TEXT NOT NULL DEFAULT '', status TEXT NOT NULL, created_at INTEGER NOT NULL,"
    " deleted_at INTEGER NOT NULL DEFAULT 0, uptime_ms INTEGER NOT NULL DEFAULT 0,"
    " usage_status TEXT NOT NULL DEFAULT '', end_reason TEXT NOT NULL DEFAULT '',"
    " pid INTEGER NOT NULL DEFAULT 0, pid_start INTEGER NOT NULL DEFAULT 0,"
    " xvfb_pid INTEGER NOT NULL DEFAULT 0, xvfb_start INTEGER NOT NULL DEFAULT 0,"
    " data TEXT NOT NULL);"
    "CREATE UNIQUE INDEX sessions_active_name ON sessions (project_id, name)"
    " WHERE status = 'active' AND name != '';"
    "CREATE INDEX sessions_project ON sessions (org_id, project_id, created_at);";

/* The node running each session and homing each pool: always 'local' here,
 * so that records read the same on both backends (pg_cluster.c). */
const char sq_schema_cluster[] =
    "ALTER TABLE sessions ADD COLUMN node_id TEXT NOT NULL DEFAULT 'local';"
    "ALTER TABLE pools ADD COLUMN node_id TEXT NOT NULL DEFAULT 'local';"
    "CREATE INDEX sessions_org_active ON sessions (org_id) WHERE status = 'active';";

/* The org's ended sessions newest first, for session_update's pruning: the
 * statement reads the org's kept entries of this index and deletes the
 * rest, never its whole history. */
const char sq_schema_sessions_ended[] =
    "CREATE INDEX sessions_org_ended ON sessions (org_id, deleted_at, id)"
    " WHERE status = 'deleted';";

/* ---- sessions ---- */

#define SESSION_COLS                                                                               \
    "id, org_id, project_id, name, status, created_at, deleted_at, uptime_ms, usage_status,"       \
    " end_reason, pid, pid_start, xvfb_pid, xvfb_start, node_id, data"

static void session_row(sqlite3_stmt *st, struct session_rec *r)
{
    sqx_col(st, 0, r->id, sizeof r->id);
    sqx_col(st, 1, r->org_id, sizeof r->org_id);
    sqx_col(st, 2, r->project_id, sizeof r->project_id);
    sqx_col(st, 3, r->name, sizeof r->name);
    sqx_col(st, 4, r->status, sizeof r->status);
    r->created_at = sqlite3_column_int64(st, 5);
    r->deleted_at = sqlite3_column_int64(st, 6);
    r->uptime_ms = sqlite3_column_int64(st, 7);
    sqx_col(st, 8, r->usage_status, sizeof r->usage_status);
    sqx_col(st, 9, r->end_reason, sizeof r->end_reason);
    r->pid = sqlite3_column_int(st, 10);
    r->pid_start = (unsigned long long)sqlite3_column_int64(st, 11);
    r->xvfb_pid = sqlite3_column_int(st, 12);
    r->xvfb_start = (unsigned long long)sqlite3_column_int64(st, 13);
    sqx_col(st, 14, r->node_id, sizeof r->node_id);
    const unsigned char *d = sqlite3_column_text(st, 15);
    r->data = xstrdup(d ? (const char *)d : "{}");
}

int sqx_session_insert_on(struct conn *c, const void *arg)
{
    const struct session_rec *r = arg;
    return sqx_q(c, NULL,
                 "INSERT INTO sessions (" SESSION_COLS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
                 " ?, ?, ?, ?, ?)",
                 "sssssiiisiiiiiss", r->id, r->org_id, r->project_id, r->name, r->status,
                 r->created_at, r->deleted_at, r->uptime_ms, r->usage_status, r->end_reason,
                 (int64_t)r->pid, (int64_t)r->pid_start, (int64_t)r->xvfb_pid,
                 (int64_t)r->xvfb_start, r->node_id[0] ? r->node_id : "local",
                 r->data ? r->data : "{}");
}

/* The create path's one write: committed without waiting for the disk and
 * synced in the background right after (sqx_unsynced). Waiting took 10-30 ms
 * of a spare's 2 ms hand-out while a replacement launched (docs/store.md). */
int sq_session_insert(struct store *st_, const struct session_rec *r)
{
    CONN(s, c);
    int rc = sqx_unsynced(s, c, sqx_session_insert_on, r);
    sqx_conn_put(s, c);
    return sqx_qrc(rc);
}

int sq_session_get(struct store *st_, const char *org_id, const char *project_id,
                   const char *id_or_name, int include_deleted, struct session_rec *out)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = sqx_q(c, &st,
                   "SELECT " SESSION_COLS " FROM sessions WHERE org_id = ?"
                   " AND (project_id = ? OR (? = '' AND id = ?))"
                   " AND (id = ? OR (name = ? AND name != '' AND status = 'active'))"
                   " AND (? OR status = 'active') ORDER BY id = ? DESC LIMIT 1",
                   "ssssssis", org_id, project_id, project_id, id_or_name, id_or_name, id_or_name,
                   (int64_t)include_deleted, id_or_name);
    int ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : E_INTERNAL;
    if (rc == SQLITE_ROW) {
        session_row(st, out);
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return ret;
}

int sq_session_list(struct store *st_, const char *org_id, const char *project_id,
                    const struct session_filter *f, struct page *pg, struct session_rec **rows,
                    size_t *n)
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
        int ret = sqx_fail(c->db, "session_list");
        sqx_conn_put(s, c);
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
        int ret = sqx_fail(c->db, "session_list");
        sqlite3_finalize(st);
        sqx_conn_put(s, c);
        return ret;
    }
    COLLECT(st, rc, pg, rows, n, struct session_rec, session_row);
    sqlite3_finalize(st);
    sqx_conn_put(s, c);
    return rc ? E_INTERNAL : 0;
}

/* The org's (?1) ended sessions past its newest ?2, by deleted_at then id. */
#define SQL_ENDED_PAST                                                                             \
    "SELECT id FROM sessions WHERE org_id = ?1 AND status = 'deleted'"                             \
    " ORDER BY deleted_at DESC, id DESC LIMIT -1 OFFSET ?2"

/* Deletes the org's ended sessions past the newest `kept` and their
 * telemetry events (which the org's telemetry share finds through their
 * session's row: left behind they would count to no organization). */
static int prune_ended(struct conn *c, const char *org_id, int64_t kept)
{
    int ret = sqx_qrc(sqx_q(c, NULL,
                            "DELETE FROM telemetry_events WHERE session_id IN (" SQL_ENDED_PAST ")",
                            "si", org_id, kept));
    if (ret == 0)
        ret = sqx_qrc(sqx_q(c, NULL, "DELETE FROM sessions WHERE id IN (" SQL_ENDED_PAST ")", "si",
                            org_id, kept));
    return ret;
}

/* An end (status deleted) writes the row and prunes the org's ended sessions
 * in one transaction, so one commit (and one sync) as before. A prune that
 * fails is rolled back alone, to its savepoint: the end commits all the
 * same, and the organization's next end prunes. */
int sq_session_update(struct store *st_, const struct session_rec *r)
{
    CONN(s, c);
    int ending = strcmp(r->status, "deleted") == 0 && st_->sessions_ended_kept > 0;
    int ret = ending ? sqx_begin(c) : 0;
    sqlite3_stmt *st;
    int rc =
        ret ? -1
            : sqx_q(c, &st,
                    "UPDATE sessions SET name = ?, status = ?, deleted_at = ?, uptime_ms = ?,"
                    " usage_status = ?, end_reason = ?, pid = ?, pid_start = ?, xvfb_pid = ?,"
                    " xvfb_start = ?, data = ? WHERE id = ? RETURNING org_id",
                    "ssiissiiiiss", r->name, r->status, r->deleted_at, r->uptime_ms,
                    r->usage_status, r->end_reason, (int64_t)r->pid, (int64_t)r->pid_start,
                    (int64_t)r->xvfb_pid, (int64_t)r->xvfb_start, r->data ? r->data : "{}", r->id);
    if (ret == 0)
        ret = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? E_NOTFOUND : sqx_qrc(rc);
    char org_id[STORE_ID] = "";
    if (rc == SQLITE_ROW) {
        sqx_col(st, 0, org_id, sizeof org_id);
        sqlite3_reset(st);
    }
    if (ending) {
        if (ret == 0 && (ret = sqx_qrc(sqx_q(c, NULL, "SAVEPOINT prune", ""))) == 0 &&
            prune_ended(c, org_id, st_->sessions_ended_kept) != 0) {
            log_warn("store: session %s ended; its organization's oldest ended sessions were "
                     "not pruned (the next end tries again)",
                     r->id);
            ret = sqx_qrc(sqx_q(c, NULL, "ROLLBACK TO SAVEPOINT prune", ""));
        }
        if (ret == 0)
            ret = sqx_commit(c);
        if (ret)
            sqx_rollback(c);
    }
    sqx_conn_put(s, c);
    return ret;
}

int sq_session_list_active(struct store *st_, struct session_rec **rows, size_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    size_t cap = 16;
    *rows = xcalloc(cap, sizeof **rows);
    *n = 0;
    int rc = sqx_q(c, &st, "SELECT " SESSION_COLS " FROM sessions WHERE status = 'active'", "");
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
    sqx_conn_put(s, c);
    return rc == SQLITE_DONE ? 0 : E_INTERNAL;
}
