/* SQLite backend: telemetry events and OTLP destinations. */
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/log.h"
#include "core/xalloc.h"
#include "store/sqlite_internal.h"

const char sq_schema_telemetry[] =
    "CREATE TABLE telemetry_events (session_id TEXT NOT NULL, seq INTEGER NOT NULL,"
    " ts INTEGER NOT NULL, category TEXT NOT NULL, data TEXT NOT NULL,"
    " PRIMARY KEY (session_id, seq)) WITHOUT ROWID;"
    "CREATE INDEX telemetry_events_ts ON telemetry_events (ts);"
    "CREATE TABLE otlp_destinations (id TEXT PRIMARY KEY, org_id TEXT NOT NULL,"
    " name TEXT NOT NULL, endpoint TEXT NOT NULL, headers TEXT NOT NULL,"
    " created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);"
    "CREATE UNIQUE INDEX otlp_destinations_name ON otlp_destinations (org_id, name);";

/* ---- events ---- */

int sq_telem_events_insert(struct store *st_, const char *session_id,
                           const struct telem_event_rec *rows, size_t n)
{
    CONN(s, c);
    int ret = sqx_begin(c);
    for (size_t i = 0; ret == 0 && i < n; i++) {
        int rc =
            sqx_q(c, NULL,
                  "INSERT OR IGNORE INTO telemetry_events (session_id, seq, ts, category, data)"
                  " VALUES (?, ?, ?, ?, ?)",
                  "siiss", session_id, rows[i].seq, rows[i].ts, rows[i].category, rows[i].text);
        ret = sqx_qrc(rc);
    }
    if (ret == 0)
        ret = sqx_commit(c);
    if (ret)
        sqx_rollback(c);
    sqx_conn_put(s, c);
    return ret;
}

static void event_row(sqlite3_stmt *st, struct telem_event_rec *r)
{
    r->seq = sqlite3_column_int64(st, 0);
    r->ts = sqlite3_column_int64(st, 1);
    sqx_col(st, 2, r->category, sizeof r->category);
    const unsigned char *d = sqlite3_column_text(st, 3);
    r->text = xstrdup(d ? (const char *)d : "{}");
}

#define EVENT_WHERE                                                                                \
    " FROM telemetry_events WHERE session_id = ? AND seq > ?"                                      \
    " AND (? = '' OR instr(?, ',' || category || ',') > 0)"                                        \
    " AND (? = 0 OR ts >= ?) AND (? = 0 OR ts <= ?)"

int sq_telem_events_list(struct store *st_, const char *session_id, const struct telem_query *q,
                         struct page *pg, struct telem_event_rec **rows, size_t *n)
{
    /* The categories as ",a,b," so one static statement filters any set. */
    char cats[256] = "";
    size_t off = 0;
    for (size_t i = 0; i < q->ncategories && off + 20 < sizeof cats; i++) {
        int w = snprintf(cats + off, sizeof cats - off, ",%s", q->categories[i]);
        if (w > 0)
            off += (size_t)w;
    }
    if (off)
        snprintf(cats + off, sizeof cats - off, ",");
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(
        c, &st,
        q->desc ? "SELECT seq, ts, category, data" EVENT_WHERE " ORDER BY seq DESC LIMIT ? OFFSET ?"
                : "SELECT seq, ts, category, data" EVENT_WHERE " ORDER BY seq LIMIT ? OFFSET ?",
        "sissiiiiii", session_id, q->after_seq, cats, cats, q->since_ms, q->since_ms, q->until_ms,
        q->until_ms, (int64_t)pg->limit + 1, (int64_t)pg->offset);
    if (rc < 0) {
        sqx_conn_put(s, c);
        return E_INTERNAL;
    }
    COLLECT(st, rc, pg, rows, n, struct telem_event_rec, event_row);
    if (rc)
        sqx_fail(c->db, "telem_events_list");
    sqx_conn_put(s, c);
    return rc ? E_INTERNAL : 0;
}

int sq_telem_events_max_seq(struct store *st_, const char *session_id, int64_t *out)
{
    CONN(s, c);
    sqlite3_stmt *st;
    *out = 0;
    int rc =
        sqx_q(c, &st, "SELECT coalesce(max(seq), 0) FROM telemetry_events WHERE session_id = ?",
              "s", session_id);
    if (rc == SQLITE_ROW) {
        *out = sqlite3_column_int64(st, 0);
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return rc < 0 ? E_INTERNAL : 0;
}

int sq_telem_events_purge(struct store *st_, int64_t before_ms, int64_t *deleted)
{
    CONN(s, c);
    int rc = sqx_q(c, NULL, "DELETE FROM telemetry_events WHERE ts < ?", "i", before_ms);
    *deleted = rc == SQLITE_DONE ? sqlite3_changes(c->db) : 0;
    sqx_conn_put(s, c);
    return sqx_qrc(rc);
}

int sq_telem_bytes_by_org(struct store *st_,
                          void (*fn)(void *ctx, const char *org_id, int64_t bytes), void *ctx)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st,
                   "SELECT s.org_id, sum(length(CAST(e.data AS BLOB))) FROM telemetry_events e"
                   " JOIN sessions s ON s.id = e.session_id GROUP BY s.org_id",
                   "");
    for (; rc == SQLITE_ROW; rc = sqlite3_step(st))
        fn(ctx, (const char *)sqlite3_column_text(st, 0), sqlite3_column_int64(st, 1));
    if (st)
        sqlite3_reset(st);
    sqx_conn_put(s, c);
    return rc == SQLITE_DONE ? 0 : E_INTERNAL;
}

/* Rows one trimming statement deletes at most (a short hold of the writer). */
#define TRIM_ROWS 100

/* The rows the next trimming statement deletes: as many as left bytes
 * need at the rows' average size so far, 1..TRIM_ROWS (the first is 1). */
static int64_t trim_chunk(int64_t left, int64_t avg)
{
    int64_t n = avg > 0 ? (left + avg - 1) / avg : 1;
    return n < 1 ? 1 : n > TRIM_ROWS ? TRIM_ROWS : n;
}

int sq_telem_events_trim_org(struct store *st_, const char *org_id, int64_t bytes, int64_t *freed)
{
    CONN(s, c);
    *freed = 0;
    int rc = SQLITE_DONE;
    int64_t total = 0, chunk = 1;
    for (int64_t rows = 1; rows > 0 && *freed < bytes && rc == SQLITE_DONE;) {
        sqlite3_stmt *st = NULL;
        rows = 0;
        rc = sqx_q(c, &st,
                   "DELETE FROM telemetry_events WHERE (session_id, seq) IN (SELECT e.session_id,"
                   " e.seq FROM telemetry_events e JOIN sessions s ON s.id = e.session_id"
                   " WHERE s.org_id = ? ORDER BY e.ts, e.seq LIMIT ?)"
                   " RETURNING length(CAST(data AS BLOB))",
                   "si", org_id, chunk);
        for (; rc == SQLITE_ROW; rc = sqlite3_step(st), rows++)
            *freed += sqlite3_column_int64(st, 0);
        if (st)
            sqlite3_reset(st);
        total += rows;
        chunk = trim_chunk(bytes - *freed, total ? *freed / total : 1);
    }
    sqx_conn_put(s, c);
    return rc == SQLITE_DONE ? 0 : E_INTERNAL;
}

/* ---- destinations ---- */

#define DEST_COLS "id, org_id, name, endpoint, headers, created_at, updated_at"

static void dest_row(sqlite3_stmt *st, struct otlp_dest_rec *d)
{
    sqx_col(st, 0, d->id, sizeof d->id);
    sqx_col(st, 1, d->org_id, sizeof d->org_id);
    sqx_col(st, 2, d->name, sizeof d->name);
    sqx_col(st, 3, d->endpoint, sizeof d->endpoint);
    const unsigned char *h = sqlite3_column_text(st, 4);
    d->headers = xstrdup(h ? (const char *)h : "{}");
    d->created_at = sqlite3_column_int64(st, 5);
    d->updated_at = sqlite3_column_int64(st, 6);
}

int sq_otlp_dest_create(struct store *st_, struct otlp_dest_rec *d, int64_t cap)
{
    CONN(s, c);
    crypto_new_id(d->id);
    d->created_at = d->updated_at = clock_now_ms();
    int ret = sqx_cap_begin(c, cap, d->org_id,
                            "SELECT count(*) FROM otlp_destinations WHERE org_id = ?", NULL);
    if (ret == 0)
        ret = sqx_qrc(sqx_q(
            c, NULL, "INSERT INTO otlp_destinations (" DEST_COLS ") VALUES (?, ?, ?, ?, ?, ?, ?)",
            "sssssii", d->id, d->org_id, d->name, d->endpoint, d->headers ? d->headers : "{}",
            d->created_at, d->updated_at));
    ret = sqx_cap_end(c, cap, ret);
    sqx_conn_put(s, c);
    return ret;
}

int sq_otlp_dest_get(struct store *st_, const char *org_id, const char *id_or_name,
                     struct otlp_dest_rec *out)
{
    CONN(s, c);
    sqlite3_stmt *st;
    int rc = sqx_q(c, &st,
                   "SELECT " DEST_COLS " FROM otlp_destinations WHERE org_id = ?"
                   " AND (id = ? OR name = ?) ORDER BY id = ? DESC LIMIT 1",
                   "ssss", org_id, id_or_name, id_or_name, id_or_name);
    int ret = rc < 0 ? E_INTERNAL : rc == SQLITE_ROW ? 0 : E_NOTFOUND;
    if (rc == SQLITE_ROW) {
        dest_row(st, out);
        sqlite3_reset(st);
    }
    sqx_conn_put(s, c);
    return ret;
}

int sq_otlp_dest_list(struct store *st_, const char *org_id, struct page *pg,
                      struct otlp_dest_rec **rows, size_t *n)
{
    CONN(s, c);
    sqlite3_stmt *st = NULL;
    int rc = sqx_q(c, &st,
                   "SELECT " DEST_COLS " FROM otlp_destinations WHERE org_id = ?"
                   " ORDER BY created_at, id LIMIT ? OFFSET ?",
                   "sii", org_id, (int64_t)pg->limit + 1, (int64_t)pg->offset);
    if (rc < 0) {
        sqx_conn_put(s, c);
        return E_INTERNAL;
    }
    COLLECT(st, rc, pg, rows, n, struct otlp_dest_rec, dest_row);
    if (rc)
        sqx_fail(c->db, "otlp_dest_list");
    sqx_conn_put(s, c);
    return rc ? E_INTERNAL : 0;
}

int sq_otlp_dest_update(struct store *st_, const struct otlp_dest_rec *d)
{
    CONN(s, c);
    int rc = sqx_q(c, NULL,
                   "UPDATE otlp_destinations SET name = ?, endpoint = ?, headers = ?,"
                   " updated_at = ? WHERE org_id = ? AND id = ?",
                   "sssiss", d->name, d->endpoint, d->headers ? d->headers : "{}", d->updated_at,
                   d->org_id, d->id);
    int ret = sqx_qrc(rc);
    if (ret == 0 && sqlite3_changes(c->db) == 0)
        ret = E_NOTFOUND;
    sqx_conn_put(s, c);
    return ret;
}

int sq_otlp_dest_delete(struct store *st_, const char *org_id, const char *id)
{
    CONN(s, c);
    int rc = sqx_q(c, NULL, "DELETE FROM otlp_destinations WHERE org_id = ? AND id = ?", "ss",
                   org_id, id);
    int ret = sqx_qrc(rc);
    if (ret == 0 && sqlite3_changes(c->db) == 0)
        ret = E_NOTFOUND;
    sqx_conn_put(s, c);
    return ret;
}
