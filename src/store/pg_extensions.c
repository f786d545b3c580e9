/* PostgreSQL backend: extensions (records of uploaded browser extensions). */
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/xalloc.h"
#include "store/pg_internal.h"

const char pgx_schema_extensions[] =
    "CREATE TABLE extensions (id " PG_TEXT " PRIMARY KEY, org_id " PG_TEXT " NOT NULL,"
    " project_id " PG_TEXT " NOT NULL, name " PG_TEXT " NOT NULL DEFAULT '',"
    " created_at bigint NOT NULL, size_bytes bigint NOT NULL,"
    " checksum " PG_TEXT " NOT NULL DEFAULT '', last_used_at bigint NOT NULL DEFAULT 0);"
    "CREATE UNIQUE INDEX extensions_name ON extensions (org_id, project_id, name)"
    " WHERE name != '';"
    "CREATE INDEX extensions_project ON extensions (org_id, project_id, created_at);";

#define EXT_COLS "id, org_id, project_id, name, created_at, size_bytes, checksum, last_used_at"

static void ext_row(const PGresult *r, int i, struct ext_rec *x)
{
    pgx_col(r, i, 0, x->id, sizeof x->id);
    pgx_col(r, i, 1, x->org_id, sizeof x->org_id);
    pgx_col(r, i, 2, x->project_id, sizeof x->project_id);
    pgx_col(r, i, 3, x->name, sizeof x->name);
    x->created_at = pgx_i64(r, i, 4);
    x->size_bytes = pgx_i64(r, i, 5);
    pgx_col(r, i, 6, x->checksum, sizeof x->checksum);
    x->last_used_at = pgx_i64(r, i, 7);
}

int pgx_ext_create(struct store *st_, struct ext_rec *x)
{
    PGCONN(p, c);
    crypto_new_id(x->id);
    x->created_at = clock_now_ms();
    x->last_used_at = 0;
    int ret = pgx_q(c, NULL,
                    "INSERT INTO extensions (" EXT_COLS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                    "ssssiisi", x->id, x->org_id, x->project_id, x->name, x->created_at,
                    x->size_bytes, x->checksum, x->last_used_at);
    pgx_put(p, c);
    return ret;
}

int pgx_ext_get(struct store *st_, const char *org_id, const char *project_id,
                const char *id_or_name, struct ext_rec *out)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT " EXT_COLS " FROM extensions WHERE org_id = $1 AND project_id = $2"
                    " AND (id = $3 OR (name = $3 AND name != '')) ORDER BY id = $3 DESC LIMIT 1",
                    "sss", org_id, project_id, id_or_name);
    if (ret == 0 && (ret = pgx_one(r)) == 0) {
        ext_row(r, 0, out);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret ? (ret == E_NOTFOUND ? ret : E_INTERNAL) : 0;
}

int pgx_ext_list(struct store *st_, const char *org_id, const char *project_id, const char *name,
                 const char *query, struct page *pg, struct ext_rec **rows, size_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT " EXT_COLS " FROM extensions WHERE org_id = $1 AND project_id = $2"
                    " AND ($3 IS NULL OR lower(name) = lower($3))"
                    " AND ($4 IS NULL OR id = $4 OR strpos(lower(name), lower($4)) > 0)"
                    " ORDER BY created_at, id LIMIT $5 OFFSET $6",
                    "ssssii", org_id, project_id, name, query && *query ? query : NULL,
                    (int64_t)pg->limit + 1, (int64_t)pg->offset);
    if (ret == 0)
        PG_COLLECT(r, pg, rows, n, struct ext_rec, ext_row);
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

int pgx_ext_count(struct store *st_, const char *org_id, int64_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r, "SELECT count(*) FROM extensions WHERE org_id = $1", "s", org_id);
    if (ret == 0) {
        *n = pgx_i64(r, 0, 0);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

int pgx_ext_touch(struct store *st_, const char *id, int64_t last_used_at)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r, "UPDATE extensions SET last_used_at = $1 WHERE id = $2 RETURNING id",
                    "is", last_used_at, id);
    if (ret == 0 && (ret = pgx_one(r)) == 0)
        PQclear(r);
    pgx_put(p, c);
    return ret;
}

int pgx_ext_delete(struct store *st_, const char *org_id, const char *project_id, const char *id)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "DELETE FROM extensions WHERE org_id = $1 AND project_id = $2 AND id = $3"
                    " RETURNING id",
                    "sss", org_id, project_id, id);
    if (ret == 0 && (ret = pgx_one(r)) == 0)
        PQclear(r);
    pgx_put(p, c);
    return ret;
}
