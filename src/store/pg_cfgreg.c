/* PostgreSQL backend: the config registry (per organization: its analyses
 * and one entry per registrable domain; docs/config-registry.md). */
#include <string.h>

#include "core/xalloc.h"
#include "store/pg_internal.h"

const char pgx_schema_cfgreg[] =
    "CREATE TABLE cfgreg_analyses (id " PG_TEXT " PRIMARY KEY, org_id " PG_TEXT " NOT NULL,"
    " domain " PG_TEXT " NOT NULL, created_at bigint NOT NULL, record " PG_TEXT " NOT NULL);"
    "CREATE INDEX cfgreg_analyses_org ON cfgreg_analyses (org_id, created_at);"
    "CREATE TABLE cfgreg_entries (org_id " PG_TEXT " NOT NULL, domain " PG_TEXT " NOT NULL,"
    " analysis_status " PG_TEXT " NOT NULL, recommended_config " PG_TEXT " NOT NULL,"
    " last_requested_at bigint NOT NULL, success_permille bigint NOT NULL,"
    " record " PG_TEXT " NOT NULL, PRIMARY KEY (org_id, domain));";
/* The node running an entry's analysis ("" on one server), so that a dead
 * node's analyses can be ended by the node that sweeps it. */
const char pgx_schema_cfgreg_node[] =
    "ALTER TABLE cfgreg_entries ADD COLUMN node_id " PG_TEXT " NOT NULL DEFAULT '';";

int pgx_cfgreg_analysis_put(struct store *st_, const char *org_id, const char *id,
                            const char *domain, int64_t created_at, const char *json)
{
    PGCONN(p, c);
    int ret = pgx_q(c, NULL,
                    "INSERT INTO cfgreg_analyses (id, org_id, domain, created_at, record)"
                    " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO UPDATE SET record = $5"
                    " WHERE cfgreg_analyses.org_id = $2",
                    "sssis", id, org_id, domain, created_at, json);
    pgx_put(p, c);
    return ret;
}

static int get_text(struct store *st_, const char *sql, const char *a, const char *b, char **json)
{
    PGCONN(p, c);
    PGresult *r;
    *json = NULL;
    int ret = pgx_q(c, &r, sql, "ss", a, b);
    if (ret == 0 && (ret = pgx_one(r)) == 0) {
        *json = pgx_dup(r, 0, 0, "{}");
        PQclear(r);
    }
    pgx_put(p, c);
    return ret ? (ret == E_NOTFOUND ? ret : E_INTERNAL) : 0;
}

int pgx_cfgreg_analysis_get(struct store *st_, const char *org_id, const char *id, char **json)
{
    return get_text(st_, "SELECT record FROM cfgreg_analyses WHERE org_id = $1 AND id = $2", org_id,
                    id, json);
}

static void text_row(const PGresult *r, int i, struct cfgreg_text *out)
{
    out->json = pgx_dup(r, i, 0, "{}");
}

int pgx_cfgreg_analysis_list(struct store *st_, const char *org_id, const char *search,
                             struct page *pg, struct cfgreg_text **rows, size_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT record FROM cfgreg_analyses WHERE org_id = $1"
                    " AND ($2::text IS NULL OR strpos(domain, $2) > 0)"
                    " ORDER BY created_at DESC, id LIMIT $3 OFFSET $4",
                    "ssii", org_id, search, (int64_t)pg->limit + 1, (int64_t)pg->offset);
    if (ret == 0)
        PG_COLLECT(r, pg, rows, n, struct cfgreg_text, text_row);
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

int pgx_cfgreg_entry_put(struct store *st_, const struct cfgreg_entry_rec *e)
{
    PGCONN(p, c);
    int ret = pgx_q(c, NULL,
                    "INSERT INTO cfgreg_entries (org_id, domain, analysis_status,"
                    " recommended_config, last_requested_at, success_permille, record, node_id)"
                    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (org_id, domain) DO"
                    " UPDATE SET analysis_status = $3, recommended_config = $4,"
                    " last_requested_at = $5, success_permille = $6, record = $7, node_id = $8",
                    "ssssiiss", e->org_id, e->domain, e->analysis_status, e->recommended_config,
                    e->last_requested_at, (int64_t)e->success_permille, e->json,
                    e->node_id ? e->node_id : "");
    pgx_put(p, c);
    return ret;
}

int pgx_cfgreg_entry_get(struct store *st_, const char *org_id, const char *domain, char **json)
{
    return get_text(st_, "SELECT record FROM cfgreg_entries WHERE org_id = $1 AND domain = $2",
                    org_id, domain, json);
}

#define ENTRY_LIST(order)                                                                          \
    "SELECT record FROM cfgreg_entries WHERE org_id = $1"                                          \
    " AND ($2::text IS NULL OR strpos(domain, $2) > 0)"                                            \
    " ORDER BY " order ", domain LIMIT $3 OFFSET $4"
static const char *const entry_lists[5][2] = {
    {ENTRY_LIST("domain ASC"), ENTRY_LIST("domain DESC")},
    {ENTRY_LIST("analysis_status ASC"), ENTRY_LIST("analysis_status DESC")},
    {ENTRY_LIST("recommended_config ASC"), ENTRY_LIST("recommended_config DESC")},
    {ENTRY_LIST("last_requested_at ASC"), ENTRY_LIST("last_requested_at DESC")},
    {ENTRY_LIST("success_permille ASC"), ENTRY_LIST("success_permille DESC")},
};

int pgx_cfgreg_entry_list(struct store *st_, const char *org_id, const char *search,
                          enum cfgreg_sort sort, int descending, struct page *pg,
                          struct cfgreg_text **rows, size_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r, entry_lists[(unsigned)sort < 5 ? sort : 0][descending ? 1 : 0], "ssii",
                    org_id, search, (int64_t)pg->limit + 1, (int64_t)pg->offset);
    if (ret == 0)
        PG_COLLECT(r, pg, rows, n, struct cfgreg_text, text_row);
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

int pgx_cfgreg_prune(struct store *st_, const char *org_id, size_t keep_analyses,
                     size_t keep_entries)
{
    PGCONN(p, c);
    int ret = pgx_q(c, NULL,
                    "DELETE FROM cfgreg_analyses WHERE org_id = $1 AND id NOT IN (SELECT id FROM"
                    " cfgreg_analyses WHERE org_id = $1 ORDER BY created_at DESC, id LIMIT $2)",
                    "si", org_id, (int64_t)keep_analyses);
    if (ret == 0)
        ret = pgx_q(c, NULL,
                    "DELETE FROM cfgreg_entries WHERE org_id = $1 AND domain NOT IN (SELECT domain"
                    " FROM cfgreg_entries WHERE org_id = $1 ORDER BY last_requested_at DESC,"
                    " domain LIMIT $2)",
                    "si", org_id, (int64_t)keep_entries);
    pgx_put(p, c);
    return ret;
}

static void running_row(const PGresult *r, int i, struct cfgreg_text *out)
{
    pgx_col(r, i, 0, out->org_id, sizeof out->org_id);
    out->json = pgx_dup(r, i, 1, "{}");
}

int pgx_cfgreg_running(struct store *st_, const char *node_id, struct page *pg,
                       struct cfgreg_text **rows, size_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT org_id, record FROM cfgreg_entries WHERE analysis_status = 'running'"
                    " AND ($1::text IS NULL OR node_id = $1) ORDER BY org_id, domain"
                    " LIMIT $2 OFFSET $3",
                    "sii", node_id, (int64_t)pg->limit + 1, (int64_t)pg->offset);
    if (ret == 0)
        PG_COLLECT(r, pg, rows, n, struct cfgreg_text, running_row);
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

int pgx_cfgreg_entry_settle(struct store *st_, const char *org_id, const char *domain,
                            const char *status, const char *json, const char *was)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "UPDATE cfgreg_entries SET analysis_status = $1, record = $2 WHERE org_id = $3"
                    " AND domain = $4 AND analysis_status = $5",
                    "sssss", status, json, org_id, domain, was);
    if (ret == 0)
        ret = pgx_touched(r);
    pgx_put(p, c);
    return ret;
}
