/* PostgreSQL backend: managed auth connections of a project (api/authconn.h). */
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/xalloc.h"
#include "store/pg_internal.h"

const char pgx_schema_authconn[] =
    "CREATE TABLE auth_connections (id " PG_TEXT " PRIMARY KEY, org_id " PG_TEXT " NOT NULL,"
    " project_id " PG_TEXT " NOT NULL, profile_name " PG_TEXT " NOT NULL, domain " PG_TEXT
    " NOT NULL, created_at bigint NOT NULL, updated_at bigint NOT NULL, data text NOT NULL,"
    " UNIQUE (org_id, project_id, profile_name, domain));"
    "CREATE INDEX auth_connections_org ON auth_connections (org_id, created_at);";

#define AC_COLS "id, org_id, project_id, profile_name, domain, created_at, updated_at, data"

static void ac_row(const PGresult *r, int i, struct authconn_rec *c)
{
    pgx_col(r, i, 0, c->id, sizeof c->id);
    pgx_col(r, i, 1, c->org_id, sizeof c->org_id);
    pgx_col(r, i, 2, c->project_id, sizeof c->project_id);
    pgx_col(r, i, 3, c->profile_name, sizeof c->profile_name);
    pgx_col(r, i, 4, c->domain, sizeof c->domain);
    c->created_at = pgx_i64(r, i, 5);
    c->updated_at = pgx_i64(r, i, 6);
    c->data = pgx_dup(r, i, 7, "{}");
}

/* E_NOTFOUND when the statement that made r touched no row; clears r. */
static int touched(PGresult *r)
{
    int ret = pgx_changed(r) > 0 ? 0 : E_NOTFOUND;
    PQclear(r);
    return ret;
}

int pgx_ac_insert(struct store *st_, const struct authconn_rec *ac, int64_t cap)
{
    PGCONN(p, c);
    int ret = pgx_cap_begin(c, cap, ac->org_id,
                            "SELECT count(*) FROM auth_connections WHERE org_id = $1", NULL);
    if (ret == 0)
        ret = pgx_q(c, NULL,
                    "INSERT INTO auth_connections (" AC_COLS ") VALUES ($1, $2, $3, $4, $5, $6,"
                    " $7, $8)",
                    "sssssiis", ac->id, ac->org_id, ac->project_id, ac->profile_name, ac->domain,
                    ac->created_at, ac->updated_at, ac->data ? ac->data : "{}");
    ret = pgx_cap_end(c, cap, ret);
    pgx_put(p, c);
    return ret;
}

int pgx_ac_get(struct store *st_, const char *org_id, const char *project_id, const char *id,
               struct authconn_rec *out)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT " AC_COLS " FROM auth_connections WHERE org_id = $1 AND"
                    " project_id = $2 AND id = $3",
                    "sss", org_id, project_id, id);
    if (ret == 0 && (ret = pgx_one(r)) == 0) {
        ac_row(r, 0, out);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret ? (ret == E_NOTFOUND ? ret : E_INTERNAL) : 0;
}

int pgx_ac_list(struct store *st_, const char *org_id, const char *project_id,
                const char *profile_name, const char *domain, struct page *pg,
                struct authconn_rec **rows, size_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT " AC_COLS " FROM auth_connections WHERE ($1::text IS NULL OR"
                    " org_id = $1) AND ($2::text IS NULL OR project_id = $2) AND ($3::text IS NULL"
                    " OR profile_name = $3) AND ($4::text IS NULL OR domain = $4)"
                    " ORDER BY created_at, id LIMIT $5 OFFSET $6",
                    "ssssii", org_id, project_id, profile_name, domain, (int64_t)pg->limit + 1,
                    (int64_t)pg->offset);
    if (ret == 0)
        PG_COLLECT(r, pg, rows, n, struct authconn_rec, ac_row);
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

int pgx_ac_count(struct store *st_, const char *org_id, int64_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r, "SELECT count(*) FROM auth_connections WHERE org_id = $1", "s", org_id);
    if (ret == 0) {
        *n = pgx_i64(r, 0, 0);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

int pgx_ac_update(struct store *st_, const struct authconn_rec *ac)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "UPDATE auth_connections SET updated_at = $1, data = $2 WHERE id = $3 AND"
                    " org_id = $4",
                    "isss", ac->updated_at, ac->data ? ac->data : "{}", ac->id, ac->org_id);
    if (ret == 0)
        ret = touched(r);
    pgx_put(p, c);
    return ret;
}

int pgx_ac_delete(struct store *st_, const char *org_id, const char *project_id, const char *id)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "DELETE FROM auth_connections WHERE org_id = $1 AND project_id = $2 AND"
                    " id = $3",
                    "sss", org_id, project_id, id);
    if (ret == 0)
        ret = touched(r);
    pgx_put(p, c);
    return ret;
}

/* A connection's flow that holds one of its org's flow slots: IN_PROGRESS
 * and not past its expiry ($now, the same RFC 3339 form the flow wrote), so
 * that a row a failed write left IN_PROGRESS frees its slot when its flow
 * would have expired. */
#define FLOW_RUNNING(now)                                                                          \
    "(data::jsonb #>> '{flow,flow_status}') = 'IN_PROGRESS' AND"                                   \
    " (data::jsonb #>> '{flow,flow_expires_at}') > " now

/* ... and its node not known to be gone (dead or retired). A flow lives in
 * its node's memory and ended with it, though its row reads IN_PROGRESS
 * until a sweeper ends it (docs/multinode.md "Records a node leaves
 * behind"): the org's other flows, a node restarted under its name among
 * them, are not held back meanwhile. The connection's own row still counts
 * such a flow (409 to a second login): the sweeper's end of it is a
 * read-then-write that a new flow in the same row would race. */
#define FLOW_NODE_NOT_GONE                                                                         \
    " AND NOT EXISTS (SELECT 1 FROM nodes WHERE nodes.id = (data::jsonb #>> '{flow,node_id}')"     \
    " AND nodes.state != 'up')"

int pgx_ac_flow_admit(struct store *st_, const struct authconn_rec *ac, const char *node_id,
                      int64_t limit, int64_t *running)
{
    char now[40];
    clock_fmt_rfc3339(clock_now_ms(), now, sizeof now);
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_begin(c);
    if (ret == 0)
        ret = pgx_q(c, &r, "SELECT 1 FROM orgs WHERE id = $1 FOR UPDATE", "s", ac->org_id);
    if (ret == 0 && (ret = pgx_one(r)) == 0)
        PQclear(r);
    if (ret == 0)
        ret = pgx_q(c, &r,
                    "SELECT (SELECT count(*) FROM auth_connections WHERE org_id = $1 AND id != $2"
                    " AND " FLOW_RUNNING("$3") FLOW_NODE_NOT_GONE
                    "), (SELECT count(*) FROM auth_connections WHERE"
                    " org_id = $1 AND id = $2 AND " FLOW_RUNNING(
                        "$3") " AND (data::jsonb #>> '{flow,node_id}')"
                              " IS DISTINCT FROM $4)",
                    "ssss", ac->org_id, ac->id, now, node_id);
    if (ret == 0) {
        int64_t others = pgx_i64(r, 0, 0), elsewhere = pgx_i64(r, 0, 1);
        PQclear(r);
        if (running)
            *running = others;
        if (elsewhere)
            ret = E_CONFLICT;
        else if (others >= limit)
            ret = E_LIMIT;
    }
    if (ret == 0 &&
        (ret = pgx_q(c, &r,
                     "UPDATE auth_connections SET updated_at = $1, data = $2 WHERE"
                     " id = $3 AND org_id = $4",
                     "isss", ac->updated_at, ac->data ? ac->data : "{}", ac->id, ac->org_id)) == 0)
        ret = touched(r);
    ret = pgx_end(c, ret);
    pgx_put(p, c);
    return ret;
}
