/* SQLite backend: audit log entries (telemetry/audit.h writes them). */
#include <string.h>

#include "core/xalloc.h"
#include "store/sqlite_internal.h"

const char sq_schema_audit[] =
    "CREATE TABLE audit_logs (id INTEGER PRIMARY KEY, org_id TEXT NOT NULL, ts INTEGER NOT NULL,"
    " method TEXT NOT NULL, path TEXT NOT NULL, route TEXT NOT NULL, status INTEGER NOT NULL,"
    " duration_ms INTEGER NOT NULL, client_ip TEXT NOT NULL, user_agent TEXT NOT NULL,"
    " user_id TEXT NOT NULL, auth_strategy TEXT NOT NULL, service TEXT NOT NULL,"
    " domain TEXT NOT NULL);"
    "CREATE INDEX audit_logs_org_ts ON audit_logs (org_id, ts, id);"
    "CREATE INDEX audit_logs_ts ON audit_logs (ts);";

/* The entry's id (telemetry/audit.c): a spool replayed after a crash inserts
 * the entries already committed again, and they are ignored. Entries of
 * before this migration have none (NULLs are distinct in a UNIQUE index). */
const char sq_schema_audit_entry_id[] =
    "ALTER TABLE audit_logs ADD COLUMN entry_id TEXT;"
    "CREATE UNIQUE INDEX audit_logs_entry_id ON audit_logs (entry_id);";

static const char *nz(const char *s)
{
    return s ? s : "";
}

int sq_audit_insert(struct store *st_, struct audit_rec *rows, size_t n)
{
    CONN(s, c);
    int ret = sqx_begin(c);
    for (size_t i = 0; ret == 0 && i < n; i++) {
        struct audit_rec *r = &rows[i];
        int rc =
            sqx_q(c, NULL,
                  "INSERT OR IGNORE INTO audit_logs (entry_id, org_id, ts, method, path, route,"
                  " status, duration_ms, client_ip, user_agent, user_id, auth_strategy, service,"
                  " domain) VALUES (NULLIF(?, ''), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                  "ssisssiissssss", r->entry_id, r->org_id, r->ts, r->method, nz(r->path),
                  nz(r->route), (int64_t)r->status, r->duration_ms, nz(r->client_ip),
                  nz(r->user_agent), nz(r->user_id), r->auth_strategy, r->service, nz(r->domain));
        ret = sqx_qrc(rc);
        if (ret == 0)
            r->id = sqlite3_changes(c->db) ? sqlite3_last_insert_rowid(c->db) : 0;
    }
    if (ret == 0)
        ret = sqx_commit(c);
    if (ret)
        sqx_rollback(c);
    sqx_conn_put(s, c);
    return ret;
}

static void audit_row(sqlite3_stmt *st, struct audit_rec *r)
{
    r->id = sqlite3_column_int64(st, 0);
    r->ts = sqlite3_column_int64(st, 1);
    sqx_col(st, 2, r->method, sizeof r->method);
    r->path = xstrdup((const char *)sqlite3_column_text(st, 3));
    r->route = xstrdup((const char *)sqlite3_column_text(st, 4));
    r->status = sqlite3_column_int(st, 5);
    r->duration_ms = sqlite3_column_int64(st, 6);
    r->client_ip = xstrdup((const char *)sqlite3_column_text(st, 7));
    r->user_agent = xstrdup((const char *)sqlite3_column_text(st, 8));
    r->user_id = xstrdup((const char *)sqlite3_column_text(st, 9));
    sqx_col(st, 10, r->auth_strategy, sizeof r->auth_strategy);
    sqx_col(st, 11, r->service, sizeof r->service);
    r->domain = xstrdup((const char *)sqlite3_column_text(st, 12));
}

/* Numbered parameters: ?1 org, ?2 start, ?3 end, ?4 methods, ?5 excluded
 * methods, ?6 service, ?7 auth strategy, ?8 search (lower case), ?9 user
 * ids, ?10 cursor ts, ?11 cursor id, ?12 limit. */
#define AUDIT_SELECT                                                                               \
    "SELECT id, ts, method, path, route, status, duration_ms, client_ip, user_agent, user_id,"     \
    " auth_strategy, service, domain FROM audit_logs WHERE org_id = ?1 AND ts >= ?2 AND ts < ?3"   \
    " AND (?4 = '' OR instr(?4, ',' || method || ',') > 0)"                                        \
    " AND (?5 = '' OR instr(?5, ',' || method || ',') = 0)"                                        \
    " AND (?6 = '' OR service = ?6) AND (?7 = '' OR auth_strategy = ?7)"                           \
    " AND ((?8 = '' AND ?9 = '') OR (?8 != '' AND (instr(lower(path), ?8) > 0"                     \
    " OR instr(lower(route), ?8) > 0 OR instr(lower(user_agent), ?8) > 0"                          \
    " OR instr(lower(client_ip), ?8) > 0 OR instr(lower(user_id), ?8) > 0"                         \
    " OR instr(CAST(status AS TEXT), ?8) > 0))"                                                    \
    " OR (?9 != '' AND instr(?9, ',' || user_id || ',') > 0))"

int sq_audit_list(struct store *st_, const char *org_id, const struct audit_query *q,
                  struct page *pg, struct audit_rec **rows, size_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st,
                   q->asc ? AUDIT_SELECT " AND (?11 = 0 OR ts > ?10 OR (ts = ?10 AND id > ?11))"
                                         " ORDER BY ts, id LIMIT ?12"
                          : AUDIT_SELECT " AND (?11 = 0 OR ts < ?10 OR (ts = ?10 AND id < ?11))"
                                         " ORDER BY ts DESC, id DESC LIMIT ?12",
                   "siissssssiii", org_id, q->start_ms, q->end_ms, nz(q->methods),
                   nz(q->exclude_methods), nz(q->service), nz(q->auth_strategy), nz(q->search),
                   nz(q->user_ids), q->after_ts, q->after_id, (int64_t)pg->limit + 1);
    if (rc < 0) {
        sqx_conn_put(s, c);
        return E_INTERNAL;
    }
    COLLECT(st, rc, pg, rows, n, struct audit_rec, audit_row);
    if (rc)
        sqx_fail(c->db, "audit_list");
    sqx_conn_put(s, c);
    return rc ? E_INTERNAL : 0;
}

int sq_audit_prune(struct store *st_, int64_t before_ms, int64_t max, int64_t *deleted)
{
    CONN(s, c);
    int rc = sqx_q(c, NULL,
                   "DELETE FROM audit_logs WHERE id IN"
                   " (SELECT id FROM audit_logs WHERE ts < ? LIMIT ?)",
                   "ii", before_ms, max);
    *deleted = rc == SQLITE_DONE ? sqlite3_changes(c->db) : 0;
    sqx_conn_put(s, c);
    return sqx_qrc(rc);
}

/* The organization's newest keep entries are walked backwards on the
 * (org_id, ts, id) index; what lies past them is deleted. */
int sq_audit_trim(struct store *st_, const char *org_id, int64_t keep, int64_t *deleted)
{
    CONN(s, c);
    int rc = sqx_q(c, NULL,
                   "DELETE FROM audit_logs WHERE id IN (SELECT id FROM audit_logs WHERE org_id = ?1"
                   " ORDER BY ts DESC, id DESC LIMIT -1 OFFSET ?2)",
                   "si", org_id, keep);
    *deleted = rc == SQLITE_DONE ? sqlite3_changes(c->db) : 0;
    sqx_conn_put(s, c);
    return sqx_qrc(rc);
}
