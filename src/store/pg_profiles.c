/* PostgreSQL backend: profiles (records of saved browser states). */
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/xalloc.h"
#include "store/pg_internal.h"

const char pgx_schema_profiles[] =
    "CREATE TABLE profiles (id " PG_TEXT " PRIMARY KEY, org_id " PG_TEXT " NOT NULL,"
    " project_id " PG_TEXT " NOT NULL, name " PG_TEXT " NOT NULL DEFAULT '',"
    " created_at bigint NOT NULL, updated_at bigint NOT NULL,"
    " last_used_at bigint NOT NULL DEFAULT 0);"
    "CREATE UNIQUE INDEX profiles_name ON profiles (org_id, project_id, name) WHERE name != '';"
    "CREATE INDEX profiles_project ON profiles (org_id, project_id, created_at);";

/* Profiles made in the same millisecond list in the order they were made:
 * the ids are random, so they cannot break the tie (SQLite uses its rowid). */
const char pgx_schema_profiles_seq[] = "ALTER TABLE profiles ADD COLUMN seq bigserial;";

#define PROFILE_COLS "id, org_id, project_id, name, created_at, updated_at, last_used_at"

static void profile_row(const PGresult *r, int i, struct profile_rec *p)
{
    pgx_col(r, i, 0, p->id, sizeof p->id);
    pgx_col(r, i, 1, p->org_id, sizeof p->org_id);
    pgx_col(r, i, 2, p->project_id, sizeof p->project_id);
    pgx_col(r, i, 3, p->name, sizeof p->name);
    p->created_at = pgx_i64(r, i, 4);
    p->updated_at = pgx_i64(r, i, 5);
    p->last_used_at = pgx_i64(r, i, 6);
}

int pgx_profile_create(struct store *st_, struct profile_rec *pr)
{
    PGCONN(p, c);
    crypto_new_id(pr->id);
    pr->created_at = pr->updated_at = clock_now_ms();
    pr->last_used_at = 0;
    int ret = pgx_q(c, NULL,
                    "INSERT INTO profiles (" PROFILE_COLS ") VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    "ssssiii", pr->id, pr->org_id, pr->project_id, pr->name, pr->created_at,
                    pr->updated_at, pr->last_used_at);
    pgx_put(p, c);
    return ret;
}

/* Runs a single-row query with string parameters and reads the row. */
static int get1(struct store *st_, const char *sql, const char *fmt, const char *a, const char *b,
                const char *d, struct profile_rec *out)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r, sql, fmt, a, b, d);
    if (ret == 0 && (ret = pgx_one(r)) == 0) {
        profile_row(r, 0, out);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret ? (ret == E_NOTFOUND ? ret : E_INTERNAL) : 0;
}

int pgx_profile_get(struct store *st_, const char *org_id, const char *project_id,
                    const char *id_or_name, struct profile_rec *out)
{
    return get1(st_,
                "SELECT " PROFILE_COLS " FROM profiles WHERE org_id = $1 AND project_id = $2"
                " AND (id = $3 OR (name = $3 AND name != '')) ORDER BY id = $3 DESC LIMIT 1",
                "sss", org_id, project_id, id_or_name, out);
}

int pgx_profile_get_by_id(struct store *st_, const char *id, struct profile_rec *out)
{
    return get1(st_, "SELECT " PROFILE_COLS " FROM profiles WHERE id = $1", "s", id, NULL, NULL,
                out);
}

int pgx_profile_list(struct store *st_, const char *org_id, const char *project_id,
                     const struct profile_filter *f, struct page *pg, struct profile_rec **rows,
                     size_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT " PROFILE_COLS " FROM profiles WHERE org_id = $1 AND project_id = $2"
                    " AND ($3 IS NULL OR name = $3) AND ($4 IS NULL OR strpos(name, $4) > 0)"
                    " ORDER BY created_at, seq LIMIT $5 OFFSET $6",
                    "ssssii", org_id, project_id, f && f->name ? f->name : NULL,
                    f && f->query && *f->query ? f->query : NULL, (int64_t)pg->limit + 1,
                    (int64_t)pg->offset);
    if (ret == 0)
        PG_COLLECT(r, pg, rows, n, struct profile_rec, profile_row);
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

/* The outcome of an UPDATE/DELETE ... RETURNING id that gave ret and r:
 * E_NOTFOUND when no row matched. */
static int change1(PGresult *r, int ret)
{
    if (ret == 0 && (ret = pgx_one(r)) == 0)
        PQclear(r);
    return ret;
}

int pgx_profile_update(struct store *st_, const struct profile_rec *pr)
{
    PGCONN(p, c);
    PGresult *r = NULL;
    int ret =
        pgx_q(c, &r, "UPDATE profiles SET name = $1, updated_at = $2 WHERE id = $3 RETURNING id",
              "sis", pr->name, pr->updated_at, pr->id);
    ret = change1(r, ret);
    pgx_put(p, c);
    return ret;
}

int pgx_profile_touch(struct store *st_, const char *id, int64_t last_used_at, int64_t updated_at)
{
    PGCONN(p, c);
    PGresult *r = NULL;
    int ret = pgx_q(c, &r,
                    "UPDATE profiles SET"
                    " last_used_at = CASE WHEN $1 > 0 THEN $1 ELSE last_used_at END,"
                    " updated_at = CASE WHEN $2 > 0 THEN $2 ELSE updated_at END"
                    " WHERE id = $3 RETURNING id",
                    "iis", last_used_at, updated_at, id);
    ret = change1(r, ret);
    pgx_put(p, c);
    return ret;
}

int pgx_profile_delete(struct store *st_, const char *org_id, const char *project_id,
                       const char *id)
{
    PGCONN(p, c);
    PGresult *r = NULL;
    int ret = pgx_q(c, &r,
                    "DELETE FROM profiles WHERE org_id = $1 AND project_id = $2 AND id = $3"
                    " RETURNING id",
                    "sss", org_id, project_id, id);
    ret = change1(r, ret);
    pgx_put(p, c);
    return ret;
}

int pgx_profile_count(struct store *st_, const char *org_id, int64_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r, "SELECT count(*) FROM profiles WHERE org_id = $1", "s", org_id);
    if (ret == 0) {
        *n = pgx_i64(r, 0, 0);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

int pgx_profile_ids(struct store *st_, const char *org_id, char (**ids)[STORE_ID], size_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    *ids = NULL;
    *n = 0;
    int ret = pgx_q(c, &r, "SELECT id FROM profiles WHERE org_id = $1", "s", org_id);
    if (ret == 0) {
        size_t rows = (size_t)PQntuples(r);
        *ids = xcalloc(rows ? rows : 1, sizeof **ids);
        for (size_t i = 0; i < rows; i++)
            pgx_col(r, (int)i, 0, (*ids)[i], STORE_ID);
        *n = rows;
        PQclear(r);
    }
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}
