/* PostgreSQL backend: proxies (custom and managed) of a project. */
#include <stdio.h>
#include <string.h>

#include "core/xalloc.h"
#include "store/pg_internal.h"

const char pgx_schema_proxies[] =
    "CREATE TABLE proxies (id " PG_TEXT " PRIMARY KEY, org_id " PG_TEXT " NOT NULL,"
    " project_id " PG_TEXT " NOT NULL, name " PG_TEXT " NOT NULL DEFAULT '',"
    " type " PG_TEXT " NOT NULL, status " PG_TEXT " NOT NULL DEFAULT '',"
    " last_checked bigint NOT NULL DEFAULT 0, created_at bigint NOT NULL, data text NOT NULL);"
    "CREATE INDEX proxies_project ON proxies (org_id, project_id, created_at);"
    "CREATE INDEX proxies_name ON proxies (org_id, name);";

#define PROXY_COLS "id, org_id, project_id, name, type, status, last_checked, created_at, data"

static void proxy_row(const PGresult *r, int i, struct proxy_rec *p)
{
    pgx_col(r, i, 0, p->id, sizeof p->id);
    pgx_col(r, i, 1, p->org_id, sizeof p->org_id);
    pgx_col(r, i, 2, p->project_id, sizeof p->project_id);
    pgx_col(r, i, 3, p->name, sizeof p->name);
    pgx_col(r, i, 4, p->type, sizeof p->type);
    pgx_col(r, i, 5, p->status, sizeof p->status);
    p->last_checked = pgx_i64(r, i, 6);
    p->created_at = pgx_i64(r, i, 7);
    p->data = pgx_dup(r, i, 8, "{}");
}

int pgx_proxy_insert(struct store *st_, const struct proxy_rec *pr, int64_t cap)
{
    PGCONN(p, c);
    int ret =
        pgx_cap_begin(c, cap, pr->org_id, "SELECT count(*) FROM proxies WHERE org_id = $1", NULL);
    if (ret == 0)
        ret = pgx_q(c, NULL,
                    "INSERT INTO proxies (" PROXY_COLS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8,"
                    " $9)",
                    "ssssssiis", pr->id, pr->org_id, pr->project_id, pr->name, pr->type, pr->status,
                    pr->last_checked, pr->created_at, PG_DATA(pr->data));
    ret = pgx_cap_end(c, cap, ret);
    pgx_put(p, c);
    return ret;
}

int pgx_proxy_get(struct store *st_, const char *org_id, const char *project_id, const char *id,
                  struct proxy_rec *out)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT " PROXY_COLS " FROM proxies WHERE org_id = $1 AND project_id = $2"
                    " AND id = $3",
                    "sss", org_id, project_id, id);
    if (ret == 0 && (ret = pgx_one(r)) == 0) {
        proxy_row(r, 0, out);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret ? (ret == E_NOTFOUND ? ret : E_INTERNAL) : 0;
}

int pgx_proxy_find(struct store *st_, const char *org_id, const char *ref, struct proxy_rec **rows,
                   size_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT " PROXY_COLS " FROM proxies WHERE org_id = $1"
                    " AND (id = $2 OR (name = $2 AND name != '')) ORDER BY created_at, id"
                    " LIMIT 101",
                    "ss", org_id, ref);
    struct page pg = {.limit = 100};
    if (ret == 0)
        PG_COLLECT(r, &pg, rows, n, struct proxy_rec, proxy_row);
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

int pgx_proxy_list(struct store *st_, const char *org_id, const char *project_id, const char *name,
                   const char *query, struct page *pg, struct proxy_rec **rows, size_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT " PROXY_COLS " FROM proxies WHERE org_id = $1 AND project_id = $2"
                    " AND ($3 IS NULL OR name = $3) AND ($4 IS NULL OR strpos(name, $4) > 0)"
                    " ORDER BY created_at, id LIMIT $5 OFFSET $6",
                    "ssssii", org_id, project_id, name, query, (int64_t)pg->limit + 1,
                    (int64_t)pg->offset);
    if (ret == 0)
        PG_COLLECT(r, pg, rows, n, struct proxy_rec, proxy_row);
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

int pgx_proxy_update(struct store *st_, const struct proxy_rec *pr)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "UPDATE proxies SET name = $1, status = $2, last_checked = $3, data = $4"
                    " WHERE id = $5 AND org_id = $6",
                    "ssisss", pr->name, pr->status, pr->last_checked, PG_DATA(pr->data), pr->id,
                    pr->org_id);
    if (ret == 0)
        ret = pgx_touched(r);
    pgx_put(p, c);
    return ret;
}

int pgx_proxy_delete(struct store *st_, const char *org_id, const char *project_id, const char *id)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r, "DELETE FROM proxies WHERE org_id = $1 AND project_id = $2 AND id = $3",
                    "sss", org_id, project_id, id);
    if (ret == 0)
        ret = pgx_touched(r);
    pgx_put(p, c);
    return ret;
}
