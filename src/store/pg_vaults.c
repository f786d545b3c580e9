/* PostgreSQL backend: vaults and their items (api/vaults.h). */
#include <stdio.h>
#include <string.h>

#include "core/xalloc.h"
#include "store/pg_internal.h"

const char pgx_schema_vaults[] =
    "CREATE TABLE vaults (id " PG_TEXT " PRIMARY KEY, org_id " PG_TEXT " NOT NULL,"
    " project_id " PG_TEXT " NOT NULL, vault_id " PG_TEXT " NOT NULL, name " PG_TEXT " NOT NULL,"
    " type " PG_TEXT " NOT NULL, version bigint NOT NULL, created_at bigint NOT NULL,"
    " updated_at bigint NOT NULL, data text NOT NULL,"
    " UNIQUE (org_id, project_id, vault_id, name));"
    "CREATE INDEX vaults_org ON vaults (org_id, vault_id);";

#define VAULT_COLS                                                                                 \
    "id, org_id, project_id, vault_id, name, type, version, created_at, updated_at, data"

static void vault_row(const PGresult *r, int i, struct vault_rec *v)
{
    pgx_col(r, i, 0, v->id, sizeof v->id);
    pgx_col(r, i, 1, v->org_id, sizeof v->org_id);
    pgx_col(r, i, 2, v->project_id, sizeof v->project_id);
    pgx_col(r, i, 3, v->vault_id, sizeof v->vault_id);
    pgx_col(r, i, 4, v->name, sizeof v->name);
    pgx_col(r, i, 5, v->type, sizeof v->type);
    v->version = pgx_i64(r, i, 6);
    v->created_at = pgx_i64(r, i, 7);
    v->updated_at = pgx_i64(r, i, 8);
    v->data = pgx_dup(r, i, 9, "{}");
}

int pgx_vault_insert(struct store *st_, const struct vault_rec *v, int64_t cap)
{
    PGCONN(p, c);
    int ret = pgx_cap_begin(c, cap, v->org_id,
                            "SELECT count(*) FROM vaults WHERE org_id = $1 AND vault_id = $2",
                            v->vault_id);
    if (ret == 0)
        ret = pgx_q(c, NULL,
                    "INSERT INTO vaults (" VAULT_COLS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8,"
                    " $9, $10)",
                    "ssssssiiis", v->id, v->org_id, v->project_id, v->vault_id, v->name, v->type,
                    v->version, v->created_at, v->updated_at, PG_DATA(v->data));
    ret = pgx_cap_end(c, cap, ret);
    pgx_put(p, c);
    return ret;
}

int pgx_vault_get(struct store *st_, const char *org_id, const char *project_id,
                  const char *vault_id, const char *id_or_name, struct vault_rec *out)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT " VAULT_COLS " FROM vaults WHERE org_id = $1 AND project_id = $2"
                    " AND vault_id = $3 AND (id = $4 OR name = $4) ORDER BY id = $4 DESC LIMIT 1",
                    "ssss", org_id, project_id, vault_id, id_or_name);
    if (ret == 0 && (ret = pgx_one(r)) == 0) {
        vault_row(r, 0, out);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret ? (ret == E_NOTFOUND ? ret : E_INTERNAL) : 0;
}

int pgx_vault_list(struct store *st_, const char *org_id, const char *project_id,
                   const char *vault_id, const char *query, struct page *pg,
                   struct vault_rec **rows, size_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT " VAULT_COLS " FROM vaults WHERE org_id = $1 AND project_id = $2"
                    " AND vault_id = $3 AND ($4::text IS NULL OR strpos(name, $4) > 0)"
                    " ORDER BY created_at, id LIMIT $5 OFFSET $6",
                    "ssssii", org_id, project_id, vault_id, query, (int64_t)pg->limit + 1,
                    (int64_t)pg->offset);
    if (ret == 0)
        PG_COLLECT(r, pg, rows, n, struct vault_rec, vault_row);
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

int pgx_vault_count(struct store *st_, const char *org_id, const char *vault_id, int64_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r, "SELECT count(*) FROM vaults WHERE org_id = $1 AND vault_id = $2", "ss",
                    org_id, vault_id);
    if (ret == 0) {
        *n = pgx_i64(r, 0, 0);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

int pgx_vault_update(struct store *st_, const struct vault_rec *v, int64_t expected_version)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "UPDATE vaults SET data = $1, version = $2, updated_at = $3"
                    " WHERE id = $4 AND org_id = $5 AND version = $6",
                    "siissi", PG_DATA(v->data), v->version, v->updated_at, v->id, v->org_id,
                    expected_version);
    if (ret == 0) {
        int changed = pgx_changed(r) > 0;
        PQclear(r);
        if (!changed) {
            ret = pgx_q(c, &r, "SELECT 1 FROM vaults WHERE id = $1 AND org_id = $2", "ss", v->id,
                        v->org_id);
            if (ret == 0) {
                ret = PQntuples(r) > 0 ? E_CONFLICT : E_NOTFOUND;
                PQclear(r);
            }
        }
    }
    pgx_put(p, c);
    return ret;
}

int pgx_vault_delete(struct store *st_, const char *org_id, const char *project_id, const char *id)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_begin(c);
    int changed = 0;
    if (ret == 0)
        ret = pgx_q(c, &r, "DELETE FROM vaults WHERE org_id = $1 AND project_id = $2 AND id = $3",
                    "sss", org_id, project_id, id);
    if (ret == 0) {
        changed = pgx_changed(r) > 0;
        PQclear(r);
        ret = pgx_q(c, NULL, "DELETE FROM vaults WHERE org_id = $1 AND vault_id = $2", "ss", org_id,
                    id);
    }
    ret = pgx_end(c, ret);
    pgx_put(p, c);
    return ret ? ret : changed ? 0 : E_NOTFOUND;
}
