/* PostgreSQL backend: credentials of a project (sealed values, api/credentials.h). */
#include <stdio.h>
#include <string.h>

#include "core/xalloc.h"
#include "store/pg_internal.h"

const char pgx_schema_credentials[] =
    "CREATE TABLE credentials (id " PG_TEXT " PRIMARY KEY, org_id " PG_TEXT " NOT NULL,"
    " project_id " PG_TEXT " NOT NULL, name " PG_TEXT " NOT NULL, domain " PG_TEXT " NOT NULL,"
    " created_at bigint NOT NULL, updated_at bigint NOT NULL, data text NOT NULL,"
    " UNIQUE (org_id, project_id, name));"
    "CREATE INDEX credentials_org ON credentials (org_id, created_at);";

#define CRED_COLS "id, org_id, project_id, name, domain, created_at, updated_at, data"

static void cred_row(const PGresult *r, int i, struct cred_rec *c)
{
    pgx_col(r, i, 0, c->id, sizeof c->id);
    pgx_col(r, i, 1, c->org_id, sizeof c->org_id);
    pgx_col(r, i, 2, c->project_id, sizeof c->project_id);
    pgx_col(r, i, 3, c->name, sizeof c->name);
    pgx_col(r, i, 4, c->domain, sizeof c->domain);
    c->created_at = pgx_i64(r, i, 5);
    c->updated_at = pgx_i64(r, i, 6);
    c->data = pgx_dup(r, i, 7, "{}");
}

int pgx_cred_insert(struct store *st_, const struct cred_rec *cr, int64_t cap)
{
    PGCONN(p, c);
    int ret = pgx_cap_begin(c, cap, cr->org_id,
                            "SELECT count(*) FROM credentials WHERE org_id = $1", NULL);
    if (ret == 0)
        ret = pgx_q(c, NULL,
                    "INSERT INTO credentials (" CRED_COLS ") VALUES ($1, $2, $3, $4, $5, $6, $7,"
                    " $8)",
                    "sssssiis", cr->id, cr->org_id, cr->project_id, cr->name, cr->domain,
                    cr->created_at, cr->updated_at, PG_DATA(cr->data));
    ret = pgx_cap_end(c, cap, ret);
    pgx_put(p, c);
    return ret;
}

int pgx_cred_get(struct store *st_, const char *org_id, const char *project_id,
                 const char *id_or_name, struct cred_rec *out)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT " CRED_COLS " FROM credentials WHERE org_id = $1 AND project_id = $2"
                    " AND (id = $3 OR name = $3) ORDER BY id = $3 DESC LIMIT 1",
                    "sss", org_id, project_id, id_or_name);
    if (ret == 0 && (ret = pgx_one(r)) == 0) {
        cred_row(r, 0, out);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret ? (ret == E_NOTFOUND ? ret : E_INTERNAL) : 0;
}

int pgx_cred_list(struct store *st_, const char *org_id, const char *project_id, const char *domain,
                  const char *query, struct page *pg, struct cred_rec **rows, size_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT " CRED_COLS " FROM credentials WHERE org_id = $1 AND project_id = $2"
                    " AND ($3::text IS NULL OR domain = $3) AND ($4::text IS NULL OR"
                    " strpos(name, $4) > 0) ORDER BY created_at, id LIMIT $5 OFFSET $6",
                    "ssssii", org_id, project_id, domain, query, (int64_t)pg->limit + 1,
                    (int64_t)pg->offset);
    if (ret == 0)
        PG_COLLECT(r, pg, rows, n, struct cred_rec, cred_row);
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

int pgx_cred_count(struct store *st_, const char *org_id, int64_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r, "SELECT count(*) FROM credentials WHERE org_id = $1", "s", org_id);
    if (ret == 0) {
        *n = pgx_i64(r, 0, 0);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

int pgx_cred_update(struct store *st_, const struct cred_rec *cr)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "UPDATE credentials SET name = $1, updated_at = $2, data = $3"
                    " WHERE id = $4 AND org_id = $5",
                    "sisss", cr->name, cr->updated_at, PG_DATA(cr->data), cr->id, cr->org_id);
    if (ret == 0)
        ret = pgx_touched(r);
    pgx_put(p, c);
    return ret;
}

int pgx_cred_delete(struct store *st_, const char *org_id, const char *project_id, const char *id)
{
    PGCONN(p, c);
    PGresult *r;
    int ret =
        pgx_q(c, &r, "DELETE FROM credentials WHERE org_id = $1 AND project_id = $2 AND id = $3",
              "sss", org_id, project_id, id);
    if (ret == 0)
        ret = pgx_touched(r);
    pgx_put(p, c);
    return ret;
}
