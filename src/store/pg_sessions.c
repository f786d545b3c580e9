/* PostgreSQL backend: browser sessions. */
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "core/xalloc.h"
#include "store/pg_internal.h"

/* node_id is added by the cluster migration (pg_cluster.c), as on SQLite. */
const char pgx_schema_sessions[] =
    "CREATE TABLE sessions (id " PG_TEXT " PRIMARY KEY, org_id " PG_TEXT " NOT NULL,"
    " project_id " PG_TEXT " NOT NULL, name " PG_TEXT " NOT NULL DEFAULT '',"
    " status " PG_TEXT " NOT NULL, created_at bigint NOT NULL,"
    " deleted_at bigint NOT NULL DEFAULT 0, uptime_ms bigint NOT NULL DEFAULT 0,"
    " usage_status " PG_TEXT " NOT NULL DEFAULT '', end_reason " PG_TEXT " NOT NULL DEFAULT '',"
    " pid bigint NOT NULL DEFAULT 0, pid_start bigint NOT NULL DEFAULT 0,"
    " xvfb_pid bigint NOT NULL DEFAULT 0, xvfb_start bigint NOT NULL DEFAULT 0,"
    " data text NOT NULL);"
    "CREATE UNIQUE INDEX sessions_active_name ON sessions (project_id, name)"
    " WHERE status = 'active' AND name != '';"
    "CREATE INDEX sessions_project ON sessions (org_id, project_id, created_at);";

/* The org's ended sessions newest first, for session_update's pruning (as on
 * SQLite: the statement reads the org's kept entries, not its history). */
const char pgx_schema_sessions_ended[] =
    "CREATE INDEX sessions_org_ended ON sessions (org_id, deleted_at, id)"
    " WHERE status = 'deleted';";

void pgx_session_row(const PGresult *r, int i, struct session_rec *s)
{
    pgx_col(r, i, 0, s->id, sizeof s->id);
    pgx_col(r, i, 1, s->org_id, sizeof s->org_id);
    pgx_col(r, i, 2, s->project_id, sizeof s->project_id);
    pgx_col(r, i, 3, s->name, sizeof s->name);
    pgx_col(r, i, 4, s->status, sizeof s->status);
    s->created_at = pgx_i64(r, i, 5);
    s->deleted_at = pgx_i64(r, i, 6);
    s->uptime_ms = pgx_i64(r, i, 7);
    pgx_col(r, i, 8, s->usage_status, sizeof s->usage_status);
    pgx_col(r, i, 9, s->end_reason, sizeof s->end_reason);
    s->pid = (int)pgx_i64(r, i, 10);
    s->pid_start = (unsigned long long)pgx_i64(r, i, 11);
    s->xvfb_pid = (int)pgx_i64(r, i, 12);
    s->xvfb_start = (unsigned long long)pgx_i64(r, i, 13);
    pgx_col(r, i, 14, s->node_id, sizeof s->node_id);
    s->data = pgx_dup(r, i, 15, "{}");
}

int pgx_session_insert_on(struct pgc *c, const struct session_rec *r)
{
    return pgx_q(c, NULL,
                 "INSERT INTO sessions (" PG_SESSION_COLS ") VALUES ($1, $2, $3, $4, $5, $6, $7,"
                 " $8, $9, $10, $11, $12, $13, $14, $15, $16)",
                 "sssssiiissiiiiss", r->id, r->org_id, r->project_id, r->name, r->status,
                 r->created_at, r->deleted_at, r->uptime_ms, r->usage_status, r->end_reason,
                 (int64_t)r->pid, (int64_t)r->pid_start, (int64_t)r->xvfb_pid,
                 (int64_t)r->xvfb_start, r->node_id[0] ? r->node_id : "local",
                 r->data ? r->data : "{}");
}

int pgx_session_insert(struct store *st_, const struct session_rec *r)
{
    PGCONN(p, c);
    int ret = pgx_session_insert_on(c, r);
    pgx_put(p, c);
    return ret;
}

int pgx_session_get(struct store *st_, const char *org_id, const char *project_id,
                    const char *id_or_name, int include_deleted, struct session_rec *out)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT " PG_SESSION_COLS " FROM sessions WHERE org_id = $1"
                    " AND (project_id = $2 OR ($2 = '' AND id = $3))"
                    " AND (id = $3 OR (name = $3 AND name != '' AND status = 'active'))"
                    " AND ($4 != 0 OR status = 'active') ORDER BY id = $3 DESC LIMIT 1",
                    "sssi", org_id, project_id, id_or_name, (int64_t)include_deleted);
    if (ret == 0 && (ret = pgx_one(r)) == 0) {
        pgx_session_row(r, 0, out);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret ? (ret == E_NOTFOUND ? ret : E_INTERNAL) : 0;
}

int pgx_session_list(struct store *st_, const char *org_id, const char *project_id,
                     const struct session_filter *f, struct page *pg, struct session_rec **rows,
                     size_t *n)
{
    /* Tag filters: one placeholder pair per tag, so the statement text
     * depends on the count (placeholder numbers only, never values). A tag
     * matches when its JSON value is the string given, as SQLite's
     * json_extract(...) = ? does for the string values tags hold. */
    char sql[2048];
    size_t ntags = f->ntags < 16 ? f->ntags : 16;
    int off = snprintf(sql, sizeof sql,
                       "SELECT " PG_SESSION_COLS " FROM sessions WHERE org_id = $1"
                       " AND project_id = $2 AND ($3 = 'all' OR status = $3)"
                       " AND ($4 IS NULL OR strpos(name, $4) > 0)");
    for (size_t i = 0; i < ntags && off > 0 && (size_t)off < sizeof sql; i++)
        off +=
            snprintf(sql + off, sizeof sql - (size_t)off,
                     " AND data::jsonb -> 'tags' -> $%zu = to_jsonb($%zu)", 7 + 2 * i, 8 + 2 * i);
    if (off > 0 && (size_t)off < sizeof sql)
        snprintf(sql + off, sizeof sql - (size_t)off,
                 " ORDER BY created_at, id LIMIT $5 OFFSET $6");
    const char *tv[32] = {0};
    for (size_t i = 0; i < ntags; i++) {
        tv[2 * i] = f->tag_keys[i];
        tv[2 * i + 1] = f->tag_values[i];
    }
    /* The format has six fixed parameters and two per tag. */
    char fmt[6 + 32 + 1] = "ssssii";
    for (size_t i = 0; i < 2 * ntags; i++)
        fmt[6 + i] = 's';
    fmt[6 + 2 * ntags] = '\0';
    PGCONN(p, c);
    PGresult *r;
    int ret =
        pgx_q(c, &r, sql, fmt, org_id, project_id, f->status ? f->status : "active",
              f->query && *f->query ? f->query : NULL, (int64_t)pg->limit + 1, (int64_t)pg->offset,
              tv[0], tv[1], tv[2], tv[3], tv[4], tv[5], tv[6], tv[7], tv[8], tv[9], tv[10], tv[11],
              tv[12], tv[13], tv[14], tv[15], tv[16], tv[17], tv[18], tv[19], tv[20], tv[21],
              tv[22], tv[23], tv[24], tv[25], tv[26], tv[27], tv[28], tv[29], tv[30], tv[31]);
    if (ret == 0)
        PG_COLLECT(r, pg, rows, n, struct session_rec, pgx_session_row);
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

/* Deletes the org's ($1) ended sessions past its newest $2 (by deleted_at,
 * then id) and their telemetry events (which the org's telemetry share finds
 * through their session's row: left behind they would count to no
 * organization). One statement: data-modifying CTEs all run. */
static const char SQL_PRUNE_ENDED[] =
    "WITH gone AS (DELETE FROM sessions WHERE id IN (SELECT id FROM sessions"
    " WHERE org_id = $1 AND status = 'deleted' ORDER BY deleted_at DESC, id DESC OFFSET $2)"
    " RETURNING id)"
    " DELETE FROM telemetry_events WHERE session_id IN (SELECT id FROM gone)";

/* An end (status deleted) writes the row and prunes the org's ended sessions
 * in one transaction. A prune that fails (two ends of one organization
 * deadlocked on the same old rows, say) is rolled back alone, to its
 * savepoint: the end commits all the same, and the organization's next end
 * prunes. */
int pgx_session_update(struct store *st_, const struct session_rec *s)
{
    PGCONN(p, c);
    int ending = strcmp(s->status, "deleted") == 0 && st_->sessions_ended_kept > 0;
    PGresult *r;
    int ret = ending ? pgx_begin(c) : 0;
    if (ret == 0)
        ret = pgx_q(c, &r,
                    "UPDATE sessions SET name = $1, status = $2, deleted_at = $3, uptime_ms = $4,"
                    " usage_status = $5, end_reason = $6, pid = $7, pid_start = $8, xvfb_pid = $9,"
                    " xvfb_start = $10, data = $11 WHERE id = $12 RETURNING org_id",
                    "ssiissiiiiss", s->name, s->status, s->deleted_at, s->uptime_ms,
                    s->usage_status, s->end_reason, (int64_t)s->pid, (int64_t)s->pid_start,
                    (int64_t)s->xvfb_pid, (int64_t)s->xvfb_start, s->data ? s->data : "{}", s->id);
    char org_id[STORE_ID] = "";
    if (ret == 0 && (ret = pgx_one(r)) == 0) {
        pgx_col(r, 0, 0, org_id, sizeof org_id);
        PQclear(r);
    }
    if (ending) {
        if (ret == 0 && (ret = pgx_q(c, NULL, "SAVEPOINT prune", "")) == 0 &&
            pgx_q(c, NULL, SQL_PRUNE_ENDED, "si", org_id, st_->sessions_ended_kept) != 0) {
            log_warn("store: session %s ended; its organization's oldest ended sessions were "
                     "not pruned (the next end tries again)",
                     s->id);
            ret = pgx_q(c, NULL, "ROLLBACK TO SAVEPOINT prune", "");
        }
        if (ret == 0)
            ret = pgx_commit(c);
        if (ret)
            pgx_rollback(c);
    }
    pgx_put(p, c);
    return ret;
}

static int list_all(struct store *st_, const char *sql, const char *node_id,
                    struct session_rec **rows, size_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = node_id ? pgx_q(c, &r, sql, "s", node_id) : pgx_q(c, &r, sql, "");
    if (ret == 0)
        PG_ALL(r, rows, n, struct session_rec, pgx_session_row);
    else {
        *rows = xcalloc(1, sizeof **rows);
        *n = 0;
    }
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

int pgx_session_list_active(struct store *st_, struct session_rec **rows, size_t *n)
{
    return list_all(st_, "SELECT " PG_SESSION_COLS " FROM sessions WHERE status = 'active'", NULL,
                    rows, n);
}

int pgx_session_list_node(struct store *st_, const char *node_id, struct session_rec **rows,
                          size_t *n)
{
    return list_all(st_,
                    "SELECT " PG_SESSION_COLS " FROM sessions WHERE status = 'active'"
                    " AND node_id = $1 ORDER BY created_at, id",
                    node_id, rows, n);
}
