/* PostgreSQL backend: telemetry events and OTLP destinations. */
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/xalloc.h"
#include "store/pg_internal.h"

const char pgx_schema_telemetry[] =
    "CREATE TABLE telemetry_events (session_id " PG_TEXT " NOT NULL, seq bigint NOT NULL,"
    " ts bigint NOT NULL, category " PG_TEXT " NOT NULL, data text NOT NULL,"
    " PRIMARY KEY (session_id, seq));"
    "CREATE INDEX telemetry_events_ts ON telemetry_events (ts);"
    "CREATE TABLE otlp_destinations (id " PG_TEXT " PRIMARY KEY, org_id " PG_TEXT " NOT NULL,"
    " name " PG_TEXT " NOT NULL, endpoint text NOT NULL, headers text NOT NULL,"
    " created_at bigint NOT NULL, updated_at bigint NOT NULL);"
    "CREATE UNIQUE INDEX otlp_destinations_name ON otlp_destinations (org_id, name);";

/* ---- events ---- */

int pgx_telem_events_insert(struct store *st_, const char *session_id,
                            const struct telem_event_rec *rows, size_t n)
{
    PGCONN(p, c);
    int ret = pgx_begin(c);
    for (size_t i = 0; ret == 0 && i < n; i++)
        ret = pgx_q(c, NULL,
                    "INSERT INTO telemetry_events (session_id, seq, ts, category, data)"
                    " VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                    "siiss", session_id, rows[i].seq, rows[i].ts, rows[i].category, rows[i].text);
    ret = pgx_end(c, ret);
    pgx_put(p, c);
    return ret;
}

static void event_row(const PGresult *r, int i, struct telem_event_rec *e)
{
    e->seq = pgx_i64(r, i, 0);
    e->ts = pgx_i64(r, i, 1);
    pgx_col(r, i, 2, e->category, sizeof e->category);
    e->text = pgx_dup(r, i, 3, "{}");
}

#define EVENT_WHERE                                                                                \
    " FROM telemetry_events WHERE session_id = $1 AND seq > $2"                                    \
    " AND ($3 = '' OR strpos($3, ',' || category || ',') > 0)"                                     \
    " AND ($4 = 0 OR ts >= $4) AND ($5 = 0 OR ts <= $5)"

int pgx_telem_events_list(struct store *st_, const char *session_id, const struct telem_query *q,
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
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    q->desc ? "SELECT seq, ts, category, data" EVENT_WHERE
                              " ORDER BY seq DESC LIMIT $6 OFFSET $7"
                            : "SELECT seq, ts, category, data" EVENT_WHERE
                              " ORDER BY seq LIMIT $6 OFFSET $7",
                    "sisiiii", session_id, q->after_seq, cats, q->since_ms, q->until_ms,
                    (int64_t)pg->limit + 1, (int64_t)pg->offset);
    if (ret == 0)
        PG_COLLECT(r, pg, rows, n, struct telem_event_rec, event_row);
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

int pgx_telem_events_max_seq(struct store *st_, const char *session_id, int64_t *out)
{
    PGCONN(p, c);
    PGresult *r;
    *out = 0;
    int ret =
        pgx_q(c, &r, "SELECT coalesce(max(seq), 0) FROM telemetry_events WHERE session_id = $1",
              "s", session_id);
    if (ret == 0) {
        *out = pgx_i64(r, 0, 0);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

int pgx_telem_bytes_by_org(struct store *st_,
                           void (*fn)(void *ctx, const char *org_id, int64_t bytes), void *ctx)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT s.org_id, sum(octet_length(e.data))::bigint FROM telemetry_events e"
                    " JOIN sessions s ON s.id = e.session_id GROUP BY s.org_id",
                    "");
    if (ret == 0) {
        for (int i = 0; i < PQntuples(r); i++)
            fn(ctx, PQgetvalue(r, i, 0), pgx_i64(r, i, 1));
        PQclear(r);
    }
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

/* Rows one trimming statement deletes at most. */
#define TRIM_ROWS 100

/* The rows the next trimming statement deletes: as many as left bytes
 * need at the rows' average size so far, 1..TRIM_ROWS (the first is 1). */
static int64_t trim_chunk(int64_t left, int64_t avg)
{
    int64_t n = avg > 0 ? (left + avg - 1) / avg : 1;
    return n < 1 ? 1 : n > TRIM_ROWS ? TRIM_ROWS : n;
}

int pgx_telem_events_trim_org(struct store *st_, const char *org_id, int64_t bytes, int64_t *freed)
{
    PGCONN(p, c);
    *freed = 0;
    int ret = 0;
    int64_t total = 0, chunk = 1;
    for (int rows = 1; rows > 0 && *freed < bytes && ret == 0;) {
        PGresult *r;
        rows = 0;
        ret = pgx_q(c, &r,
                    "DELETE FROM telemetry_events WHERE (session_id, seq) IN (SELECT e.session_id,"
                    " e.seq FROM telemetry_events e JOIN sessions s ON s.id = e.session_id"
                    " WHERE s.org_id = $1 ORDER BY e.ts, e.seq LIMIT $2)"
                    " RETURNING octet_length(data)",
                    "si", org_id, chunk);
        if (ret == 0) {
            rows = PQntuples(r);
            for (int i = 0; i < rows; i++)
                *freed += pgx_i64(r, i, 0);
            PQclear(r);
        }
        total += rows;
        chunk = trim_chunk(bytes - *freed, total ? *freed / total : 1);
    }
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

int pgx_telem_events_purge(struct store *st_, int64_t before_ms, int64_t *deleted)
{
    PGCONN(p, c);
    PGresult *r;
    *deleted = 0;
    int ret = pgx_q(c, &r, "DELETE FROM telemetry_events WHERE ts < $1", "i", before_ms);
    if (ret == 0) {
        *deleted = pgx_changed(r);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret;
}

/* ---- destinations ---- */

#define DEST_COLS "id, org_id, name, endpoint, headers, created_at, updated_at"

static void dest_row(const PGresult *r, int i, struct otlp_dest_rec *d)
{
    pgx_col(r, i, 0, d->id, sizeof d->id);
    pgx_col(r, i, 1, d->org_id, sizeof d->org_id);
    pgx_col(r, i, 2, d->name, sizeof d->name);
    pgx_col(r, i, 3, d->endpoint, sizeof d->endpoint);
    d->headers = pgx_dup(r, i, 4, "{}");
    d->created_at = pgx_i64(r, i, 5);
    d->updated_at = pgx_i64(r, i, 6);
}

int pgx_otlp_dest_create(struct store *st_, struct otlp_dest_rec *d, int64_t cap)
{
    PGCONN(p, c);
    crypto_new_id(d->id);
    d->created_at = d->updated_at = clock_now_ms();
    int ret = pgx_cap_begin(c, cap, d->org_id,
                            "SELECT count(*) FROM otlp_destinations WHERE org_id = $1", NULL);
    if (ret == 0)
        ret = pgx_q(c, NULL,
                    "INSERT INTO otlp_destinations (" DEST_COLS ") VALUES ($1, $2, $3, $4, $5, $6,"
                    " $7)",
                    "sssssii", d->id, d->org_id, d->name, d->endpoint,
                    d->headers ? d->headers : "{}", d->created_at, d->updated_at);
    ret = pgx_cap_end(c, cap, ret);
    pgx_put(p, c);
    return ret;
}

int pgx_otlp_dest_get(struct store *st_, const char *org_id, const char *id_or_name,
                      struct otlp_dest_rec *out)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT " DEST_COLS " FROM otlp_destinations WHERE org_id = $1"
                    " AND (id = $2 OR name = $2) ORDER BY id = $2 DESC LIMIT 1",
                    "ss", org_id, id_or_name);
    if (ret == 0 && (ret = pgx_one(r)) == 0) {
        dest_row(r, 0, out);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret ? (ret == E_NOTFOUND ? ret : E_INTERNAL) : 0;
}

int pgx_otlp_dest_list(struct store *st_, const char *org_id, struct page *pg,
                       struct otlp_dest_rec **rows, size_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT " DEST_COLS " FROM otlp_destinations WHERE org_id = $1"
                    " ORDER BY created_at, id LIMIT $2 OFFSET $3",
                    "sii", org_id, (int64_t)pg->limit + 1, (int64_t)pg->offset);
    if (ret == 0)
        PG_COLLECT(r, pg, rows, n, struct otlp_dest_rec, dest_row);
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

int pgx_otlp_dest_update(struct store *st_, const struct otlp_dest_rec *d)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "UPDATE otlp_destinations SET name = $1, endpoint = $2, headers = $3,"
                    " updated_at = $4 WHERE org_id = $5 AND id = $6",
                    "sssiss", d->name, d->endpoint, d->headers ? d->headers : "{}", d->updated_at,
                    d->org_id, d->id);
    if (ret == 0) {
        ret = pgx_changed(r) > 0 ? 0 : E_NOTFOUND;
        PQclear(r);
    }
    pgx_put(p, c);
    return ret;
}

int pgx_otlp_dest_delete(struct store *st_, const char *org_id, const char *id)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r, "DELETE FROM otlp_destinations WHERE org_id = $1 AND id = $2", "ss",
                    org_id, id);
    if (ret == 0) {
        ret = pgx_changed(r) > 0 ? 0 : E_NOTFOUND;
        PQclear(r);
    }
    pgx_put(p, c);
    return ret;
}
