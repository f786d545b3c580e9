/* PostgreSQL backend: deployments and invocations of apps (api/apps.h),
 * one table keyed by kind. */
#include <stdio.h>
#include <string.h>

#include "core/xalloc.h"
#include "store/pg_internal.h"

const char pgx_schema_apps[] =
    "CREATE TABLE app_objects (id " PG_TEXT " PRIMARY KEY, org_id " PG_TEXT " NOT NULL,"
    " project_id " PG_TEXT " NOT NULL, kind " PG_TEXT " NOT NULL, app_name " PG_TEXT " NOT NULL,"
    " version " PG_TEXT " NOT NULL, status " PG_TEXT " NOT NULL, bytes bigint NOT NULL,"
    " created_at bigint NOT NULL, updated_at bigint NOT NULL, data text NOT NULL);"
    "CREATE INDEX app_objects_org ON app_objects (org_id, project_id, kind, created_at);";

#define APPOBJ_COLS                                                                                \
    "id, org_id, project_id, kind, app_name, version, status, bytes, created_at, updated_at, data"

static void appobj_row(const PGresult *r, int i, struct appobj_rec *v)
{
    pgx_col(r, i, 0, v->id, sizeof v->id);
    pgx_col(r, i, 1, v->org_id, sizeof v->org_id);
    pgx_col(r, i, 2, v->project_id, sizeof v->project_id);
    pgx_col(r, i, 3, v->kind, sizeof v->kind);
    pgx_col(r, i, 4, v->app_name, sizeof v->app_name);
    pgx_col(r, i, 5, v->version, sizeof v->version);
    pgx_col(r, i, 6, v->status, sizeof v->status);
    v->bytes = pgx_i64(r, i, 7);
    v->created_at = pgx_i64(r, i, 8);
    v->updated_at = pgx_i64(r, i, 9);
    v->data = pgx_dup(r, i, 10, "{}");
}

int pgx_appobj_put(struct store *st_, const struct appobj_rec *v)
{
    PGCONN(p, c);
    int ret =
        pgx_q(c, NULL,
              "INSERT INTO app_objects (" APPOBJ_COLS ") VALUES ($1, $2, $3, $4, $5, $6, $7,"
              " $8, $9, $10, $11) ON CONFLICT (id) DO UPDATE SET status = excluded.status, "
              "app_name = excluded.app_name,"
              " bytes = excluded.bytes, updated_at = excluded.updated_at,"
              " data = excluded.data",
              "sssssssiiis", v->id, v->org_id, v->project_id, v->kind, v->app_name, v->version,
              v->status, v->bytes, v->created_at, v->updated_at, v->data ? v->data : "{}");
    pgx_put(p, c);
    return ret;
}

int pgx_appobj_get(struct store *st_, const char *org_id, const char *project_id, const char *kind,
                   const char *id, struct appobj_rec *out)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT " APPOBJ_COLS " FROM app_objects WHERE org_id = $1 AND project_id = $2"
                    " AND kind = $3 AND id = $4",
                    "ssss", org_id, project_id, kind, id);
    if (ret == 0 && (ret = pgx_one(r)) == 0) {
        appobj_row(r, 0, out);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret ? (ret == E_NOTFOUND ? ret : E_INTERNAL) : 0;
}

int pgx_appobj_list(struct store *st_, const char *org_id, const char *project_id, const char *kind,
                    const char *app_name, const char *version, const char *status,
                    const char *match1, const char *match2, struct page *pg,
                    struct appobj_rec **rows, size_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT " APPOBJ_COLS " FROM app_objects WHERE org_id = $1 AND project_id = $2"
                    " AND kind = $3 AND ($4::text IS NULL OR app_name = $4)"
                    " AND ($5::text IS NULL OR version = $5) AND ($6::text IS NULL OR status = $6)"
                    " AND ($9::text IS NULL OR strpos(data, $9) > 0)"
                    " AND ($10::text IS NULL OR strpos(data, $10) > 0)"
                    " ORDER BY created_at DESC, id LIMIT $7 OFFSET $8",
                    "ssssssiiss", org_id, project_id, kind, app_name, version, status,
                    (int64_t)pg->limit + 1, (int64_t)pg->offset, match1, match2);
    if (ret == 0)
        PG_COLLECT(r, pg, rows, n, struct appobj_rec, appobj_row);
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

int pgx_appobj_delete(struct store *st_, const char *org_id, const char *project_id,
                      const char *kind, const char *id)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "DELETE FROM app_objects WHERE org_id = $1 AND project_id = $2 AND kind = $3"
                    " AND id = $4",
                    "ssss", org_id, project_id, kind, id);
    if (ret == 0) {
        ret = pgx_changed(r) > 0 ? 0 : E_NOTFOUND;
        PQclear(r);
    }
    pgx_put(p, c);
    return ret;
}

int pgx_appobj_bytes(struct store *st_, const char *org_id, const char *kind, int64_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT coalesce(sum(bytes), 0)::bigint FROM app_objects WHERE org_id = $1"
                    " AND kind = $2",
                    "ss", org_id, kind);
    if (ret == 0) {
        *n = pgx_i64(r, 0, 0);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

/* The statuses a run moves on: an invocation queued or running, a
 * deployment queued or being built (in_progress). */
#define UNFINISHED                                                                                 \
    "((kind = 'invocation' AND status IN ('queued', 'running'))"                                   \
    " OR (kind = 'deployment' AND status IN ('queued', 'in_progress')))"

int pgx_appobj_unfinished(struct store *st_, struct page *pg, struct appobj_rec **rows, size_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "SELECT " APPOBJ_COLS " FROM app_objects WHERE " UNFINISHED
                    " ORDER BY created_at, id LIMIT $1 OFFSET $2",
                    "ii", (int64_t)pg->limit + 1, (int64_t)pg->offset);
    if (ret == 0)
        PG_COLLECT(r, pg, rows, n, struct appobj_rec, appobj_row);
    pgx_put(p, c);
    return ret ? E_INTERNAL : 0;
}

int pgx_appobj_settle(struct store *st_, const struct appobj_rec *v, const char *was)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(
        c, &r,
        "UPDATE app_objects SET status = $1, bytes = $2, updated_at = $3, data = $4 WHERE id = $5"
        " AND status = $6",
        "siisss", v->status, v->bytes, v->updated_at, v->data ? v->data : "{}", v->id, was);
    if (ret == 0)
        ret = pgx_touched(r);
    pgx_put(p, c);
    return ret;
}
