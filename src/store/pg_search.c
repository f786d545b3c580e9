/* PostgreSQL backend: searches (the Search records of POST /search, kept for
 * GET /search/{id} until they expire; docs/search.md). */
#include <string.h>

#include "core/limits.h"
#include "core/xalloc.h"
#include "store/pg_internal.h"

const char pgx_schema_search[] =
    "CREATE TABLE searches (id " PG_TEXT " PRIMARY KEY, org_id " PG_TEXT " NOT NULL,"
    " created_at bigint NOT NULL, expires_at bigint NOT NULL, record " PG_TEXT " NOT NULL);"
    "CREATE INDEX searches_expiry ON searches (expires_at);";

int pgx_search_put(struct store *st_, const char *id, const char *org_id, int64_t created_at,
                   int64_t expires_at, const char *json)
{
    PGCONN(p, c);
    int ret = pgx_q(c, NULL,
                    "INSERT INTO searches (id, org_id, created_at, expires_at, record)"
                    " VALUES ($1, $2, $3, $4, $5)",
                    "ssiis", id, org_id, created_at, expires_at, json);
    if (ret == 0)
        ret = pgx_q(c, NULL,
                    "DELETE FROM searches WHERE org_id = $1 AND id NOT IN (SELECT id FROM searches"
                    " WHERE org_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2)",
                    "si", org_id, (int64_t)LIM_SEARCH_STORED_PER_ORG);
    pgx_put(p, c);
    return ret;
}

int pgx_search_get(struct store *st_, const char *org_id, const char *id, int64_t now, char **json)
{
    PGCONN(p, c);
    PGresult *r;
    *json = NULL;
    int ret = pgx_q(c, &r,
                    "SELECT record FROM searches WHERE id = $1 AND org_id = $2 AND expires_at > $3",
                    "ssi", id, org_id, now);
    if (ret == 0 && (ret = pgx_one(r)) == 0) {
        *json = pgx_dup(r, 0, 0, "");
        PQclear(r);
    }
    pgx_put(p, c);
    return ret ? (ret == E_NOTFOUND ? ret : E_INTERNAL) : 0;
}

int pgx_search_prune(struct store *st_, int64_t now)
{
    PGCONN(p, c);
    int ret = pgx_q(c, NULL, "DELETE FROM searches WHERE expires_at <= $1", "i", now);
    pgx_put(p, c);
    return ret;
}
