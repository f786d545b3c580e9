/* PostgreSQL backend: browser pools. */
#include <stdio.h>
#include <string.h>

#include "core/xalloc.h"
#include "store/pg_internal.h"

/* node_id is added by the cluster migration (pg_cluster.c), as on SQLite. */
const char pgx_schema_pools[] =
    "CREATE TABLE pools (id " PG_TEXT " PRIMARY KEY, org_id " PG_TEXT " NOT NULL,"
    " project_id " PG_TEXT " NOT NULL, name " PG_TEXT " NOT NULL DEFAULT '',"
    " status " PG_TEXT " NOT NULL, created_at bigint NOT NULL, config text NOT NULL);"
    "CREATE UNIQUE INDEX pools_active_name ON pools (project_id, name)"
    " WHERE status = 'active' AND name != '';"
    "CREATE INDEX pools_project ON pools (org_id, project_id, created_at);";

#define POOL_COLS "id, org_id, project_id, name, status, created_at, node_id, config"

static void pool_row(const PGresult *r, int i, struct pool_rec *p)
{
    pgx_col(r, i, 0, p->id, sizeof p->id);
    pgx_col(r, i, 1, p->org_id, sizeof p->org_id);
    pgx_col(r, i, 2, p->project_id, sizeof p->project_id);
    pgx_col(r, i, 3, p->name, sizeof p->name);
    pgx_col(r, i, 4, p->status, sizeof p->status);
    p->created_at = pgx_i64(r, i, 5);
    pgx_col(r, i, 6, p->node_id, sizeof p->node_id);
    p->config = pgx_dup(r, i, 7, "{}");
}

int pgx_pool_insert_on(struct pgc *c, const struct pool_rec *p)
{
    return pgx_q(c, NULL,
                 "INSERT INTO pools (" POOL_COLS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                 "sssssiss", p->id, p->org_id, p->project_id, p->name, p->status, p->created_at,
                 p->node_id[0] ? p->node_id : "local", p->config);
}

int pgx_pool_update_on(struct pgc *c, const struct pool_rec *p)
{
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "UPDATE pools SET name = $1, status = $2, config = $3 WHERE id = $4"
                    " RETURNING id",
                    "ssss", p->name, p->status, p->config, p->id);
    if (ret == 0 && (ret = pgx_one(r)) == 0)
        PQclear(r);
    return ret;
}

int pgx_pool_insert(struct store *st_, const struct pool_rec *pr)
{
    PGCONN(p, c);
    int ret = pgx_pool_insert_on(c, pr);
    pgx_put(p, c);
    return ret;
}

int pgx_pool_update(struct store *st_, const struct pool_rec *pr)
{
    PGCONN(p, c);
    int ret = pgx_pool_update_on(c, pr);
    pgx_put(p, c);
    return ret;
}

int pgx_pool_get(struct store *st_, const char *org_id, const char *project_id,
                 const char *id_or_name, struct pool_rec *out)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT " POOL_COLS " FROM pools WHERE org_id = $1 AND project_id = $2"
                    " AND status = 'active' AND (id = $3 OR (name = $3 AND name != ''))"
                    " ORDER BY id = $3 DESC LIMIT 1",
                    "sss", org_id, project_id, id_or_name);
    if (ret == 0 && (ret = pgx_one(r)) == 0) {
        pool_row(r, 0, out);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret ? (ret == E_NOTFOUND ? ret : E_INTERNAL) : 0;
}

int pgx_pool_list(struct store *st_, const char *org_id, const char *project_id, const char *name,
                  const char *query, const char *region, const char *region_default,
                  struct page *pg, struct pool_rec **rows, size_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT " POOL_COLS " FROM pools WHERE org_id = $1 AND project_id = $2"
                    " AND status = 'active' AND ($3 IS NULL OR name = $3)"
                    " AND ($4 IS NULL OR strpos(name, $4) > 0)"
                    " AND ($5::text IS NULL OR coalesce(config::json->>'region', $6) = $5)"
                    " ORDER BY created_at, id LIMIT $7 OFFSET $8",
                    "ssssssii", org_id, project_id, name, query, region, region_default,
                    (int64_t)pg->limit + 1, (int64_t)pg->offset);
    if (ret == 0)
        PG_COLLECT(r, pg, rows, n, struct pool_rec, pool_row);
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

static int list_all(struct store *st_, const char *sql, const char *node_id, struct pool_rec **rows,
                    size_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = node_id ? pgx_q(c, &r, sql, "s", node_id) : pgx_q(c, &r, sql, "");
    if (ret == 0) {
        PG_ALL(r, rows, n, struct pool_rec, pool_row);
    } else {
        *rows = xcalloc(1, sizeof **rows);
        *n = 0;
    }
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

int pgx_pool_list_active(struct store *st_, struct pool_rec **rows, size_t *n)
{
    return list_all(st_, "SELECT " POOL_COLS " FROM pools WHERE status = 'active'", NULL, rows, n);
}

int pgx_pool_list_node(struct store *st_, const char *node_id, struct pool_rec **rows, size_t *n)
{
    return list_all(st_,
                    "SELECT " POOL_COLS " FROM pools WHERE status = 'active' AND node_id = $1"
                    " ORDER BY created_at, id",
                    node_id, rows, n);
}
