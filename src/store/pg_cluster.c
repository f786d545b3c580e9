/*
 * PostgreSQL backend: the cluster ops (store.h) — the node registry and its
 * liveness, per-org admission, pool homes, shared blobs and cluster-wide
 * singletons (docs: /work/shared/design/multinode.md, section 2).
 *
 * Times are the database's clock (PG_NOW_MS), so that nodes whose clocks
 * disagree still agree on who is alive. Node death is decided by row locks
 * (an UPDATE of the node row): whichever transaction flips a node from up to
 * dead is the only one that sees it in its RETURNING, and it ends the node's
 * sessions in the same statement. Admission serializes on the org's row
 * (SELECT ... FOR UPDATE) and counts rows, so a dead node's ended sessions
 * free their slots with no counter to drift.
 */
#include <stdio.h>
#include <string.h>

#include "core/crypto.h"
#include "core/xalloc.h"
#include "store/pg_internal.h"

const char pgx_schema_cluster[] =
    "ALTER TABLE sessions ADD COLUMN node_id " PG_TEXT " NOT NULL DEFAULT 'local';"
    "ALTER TABLE pools ADD COLUMN node_id " PG_TEXT " NOT NULL DEFAULT 'local';"
    "CREATE INDEX sessions_org_active ON sessions (org_id) WHERE status = 'active';"
    "CREATE INDEX sessions_node_active ON sessions (node_id) WHERE status = 'active';"
    "CREATE INDEX pools_node_active ON pools (node_id) WHERE status = 'active';"
    "CREATE TABLE nodes (id " PG_TEXT " PRIMARY KEY, name " PG_TEXT " NOT NULL,"
    " advertise_url text NOT NULL, state " PG_TEXT " NOT NULL DEFAULT 'up',"
    " started_at bigint NOT NULL, heartbeat_at bigint NOT NULL,"
    " capacity bigint NOT NULL, running bigint NOT NULL DEFAULT 0);"
    "CREATE INDEX nodes_up ON nodes (heartbeat_at) WHERE state = 'up';"
    "CREATE TABLE blobs (key " PG_TEXT " PRIMARY KEY, data bytea NOT NULL);";

/* Slots of an organization's cluster-wide caps (org_slot_take): one row per
 * unit held, naming the node that holds it, ended with that node. */
const char pgx_schema_org_slots[] =
    "CREATE TABLE org_slots (id " PG_TEXT " PRIMARY KEY, org_id " PG_TEXT " NOT NULL,"
    " kind " PG_TEXT " NOT NULL, node_id " PG_TEXT " NOT NULL, expires_at bigint NOT NULL);"
    "CREATE INDEX org_slots_org ON org_slots (org_id, kind);"
    "CREATE INDEX org_slots_node ON org_slots (node_id);";

/* The records a dead node leaves (docs/multinode.md "Records a node leaves
 * behind") are ended after the sweep's commit, by the sweeper: orphans_by
 * names the live node ending them, until orphans_until (the database's
 * clock); NULL once they were ended, or for a node retired (nothing to
 * end). A claim that runs out is taken by another live node. */
const char pgx_schema_node_orphans[] =
    "ALTER TABLE nodes ADD COLUMN orphans_by " PG_TEXT " NOT NULL DEFAULT '';"
    "ALTER TABLE nodes ADD COLUMN orphans_until bigint;";

/* ---- nodes ---- */

#define NODE_COLS "id, name, advertise_url, state, started_at, heartbeat_at, capacity, running"

static void node_row(const PGresult *r, int i, struct node_rec *n)
{
    pgx_col(r, i, 0, n->id, sizeof n->id);
    pgx_col(r, i, 1, n->name, sizeof n->name);
    pgx_col(r, i, 2, n->advertise_url, sizeof n->advertise_url);
    pgx_col(r, i, 3, n->state, sizeof n->state);
    n->started_at = pgx_i64(r, i, 4);
    n->heartbeat_at = pgx_i64(r, i, 5);
    n->capacity = pgx_i64(r, i, 6);
    n->running = pgx_i64(r, i, 7);
}

int pgx_node_register(struct store *st_, struct node_rec *n)
{
    if (!n->id[0])
        crypto_new_id(n->id);
    PGCONN(p, c);
    PGresult *r;
    /* One reading of the clock for both times. */
    int ret = pgx_q(c, &r,
                    "WITH t AS (SELECT " PG_NOW_MS " AS ms) INSERT INTO nodes (" NODE_COLS ")"
                    " SELECT $1, $2, $3, 'up', t.ms, t.ms, $4, $5 FROM t"
                    " RETURNING started_at, heartbeat_at",
                    "sssii", n->id, n->name, n->advertise_url, n->capacity, n->running);
    if (ret == 0) {
        snprintf(n->state, sizeof n->state, "up");
        n->started_at = pgx_i64(r, 0, 0);
        n->heartbeat_at = pgx_i64(r, 0, 1);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret;
}

int pgx_node_heartbeat(struct store *st_, const char *id, int64_t running)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "UPDATE nodes SET heartbeat_at = " PG_NOW_MS ", running = $2"
                    " WHERE id = $1 AND state = 'up' RETURNING id",
                    "si", id, running);
    if (ret == 0 && (ret = pgx_one(r)) == 0)
        PQclear(r);
    pgx_put(p, c);
    return ret;
}

int pgx_node_get(struct store *st_, const char *id, struct node_rec *out)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r, "SELECT " NODE_COLS " FROM nodes WHERE id = $1", "s", id);
    if (ret == 0 && (ret = pgx_one(r)) == 0) {
        node_row(r, 0, out);
        PQclear(r);
    }
    pgx_put(p, c);
    return ret;
}

int pgx_node_list(struct store *st_, struct node_rec **rows, size_t *n)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(
        c, &r, "SELECT " NODE_COLS " FROM nodes WHERE state = 'up' ORDER BY started_at, id", "");
    if (ret == 0) {
        PG_ALL(r, rows, n, struct node_rec, node_row);
    } else {
        *rows = xcalloc(1, sizeof **rows);
        *n = 0;
    }
    pgx_put(p, c);
    return ret;
}

/*
 * The end of a node, one statement: the CTE `d` flips the node(s) to dead
 * (each row once: a concurrent transaction that locked the row first either
 * flipped it, and `state = 'up'` no longer holds when this one re-reads it,
 * or skipped it); the others end d's active sessions, move d's active pools
 * to the heir ($2; "" leaves them) and free d's org slots. Data-modifying CTEs all run, and
 * the statement is atomic. `set` adds columns to d's update (a sweep's claim of the records
 * the node leaves).
 */
#define END_NODES(pick, when, reason, set)                                                         \
    "WITH d AS (UPDATE nodes SET state = 'dead'" set " WHERE id IN (" pick ")"                     \
    " RETURNING id, " when " AS at),"                                                              \
    " s AS (UPDATE sessions x SET status = 'deleted', end_reason = " reason ","                    \
    " deleted_at = d.at, uptime_ms = greatest(0, d.at - x.created_at), usage_status = 'ready'"     \
    " FROM d WHERE x.node_id = d.id AND x.status = 'active' RETURNING x.id),"                      \
    " q AS (UPDATE pools y SET node_id = $2 FROM d"                                                \
    " WHERE $2 != '' AND y.node_id = d.id AND y.status = 'active' RETURNING y.id),"                \
    " o AS (DELETE FROM org_slots z USING d WHERE z.node_id = d.id RETURNING z.id)"                \
    " SELECT id FROM d ORDER BY id"

int pgx_node_sweep(struct store *st_, int64_t lease_ms, const char *heir, char (**dead)[STORE_ID],
                   size_t *n)
{
    *dead = NULL;
    *n = 0;
    PGCONN(p, c);
    PGresult *r;
    int ret =
        pgx_q(c, &r,
              END_NODES("SELECT id FROM nodes WHERE state = 'up' AND heartbeat_at < " PG_NOW_MS
                        " - $1 FOR UPDATE SKIP LOCKED",
                        "heartbeat_at", "'node lost'",
                        ", orphans_by = $2, orphans_until = " PG_NOW_MS " + $1"),
              "is", lease_ms, heir ? heir : "");
    /* Stragglers: a session a node inserted after it was declared dead (its
     * insert raced the sweep's snapshot) would stay active, and counted,
     * forever; a fresh statement ends those of every dead node, and re-homes
     * pools likewise. Its failure only delays that to the next sweep. */
    if (ret == 0)
        (void)pgx_q(c, NULL,
                    "WITH s AS (UPDATE sessions x SET status = 'deleted', end_reason = 'node lost',"
                    " deleted_at = n.heartbeat_at, uptime_ms = greatest(0, n.heartbeat_at -"
                    " x.created_at), usage_status = 'ready' FROM nodes n WHERE n.id = x.node_id"
                    " AND n.state = 'dead' AND x.status = 'active' RETURNING x.id)"
                    " UPDATE pools y SET node_id = $1 FROM nodes n WHERE $1 != ''"
                    " AND n.id = y.node_id AND n.state = 'dead' AND y.status = 'active'",
                    "s", heir ? heir : "");
    /* Slots a node took after it was declared dead go likewise (a take
     * counts only the slots of up nodes, so they never held anything). */
    if (ret == 0)
        (void)pgx_q(c, NULL,
                    "DELETE FROM org_slots z USING nodes n WHERE n.id = z.node_id"
                    " AND n.state = 'dead'",
                    "");
    /* One row per process start: rows of nodes dead for a week go (a
     * session's node_id may name a pruned node; only live nodes are ever
     * looked up by it). */
    if (ret == 0)
        (void)pgx_q(c, NULL,
                    "DELETE FROM nodes WHERE state = 'dead' AND heartbeat_at < " PG_NOW_MS
                    " - 604800000",
                    "");
    if (ret == 0) {
        size_t nt = (size_t)PQntuples(r);
        *dead = xcalloc(nt ? nt : 1, sizeof **dead);
        for (size_t i = 0; i < nt; i++)
            pgx_col(r, (int)i, 0, (*dead)[i], STORE_ID);
        *n = nt;
        PQclear(r);
    }
    pgx_put(p, c);
    return ret;
}

int pgx_node_retire(struct store *st_, const char *id, const char *reason, const char *heir)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    END_NODES("SELECT id FROM nodes WHERE id = $1 AND state = 'up' FOR UPDATE",
                              PG_NOW_MS, "$3", ""),
                    "sss", id, heir ? heir : "", reason ? reason : "");
    if (ret == 0 && (ret = pgx_one(r)) == 0)
        PQclear(r);
    pgx_put(p, c);
    return ret;
}

int pgx_node_orphans_claim(struct store *st_, const char *me, int64_t claim_ms,
                           char (**dead)[STORE_ID], size_t *n)
{
    *dead = NULL;
    *n = 0;
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_q(c, &r,
                    "UPDATE nodes SET orphans_by = $1, orphans_until = " PG_NOW_MS " + $2"
                    " WHERE id IN (SELECT id FROM nodes WHERE state = 'dead'"
                    " AND orphans_until < " PG_NOW_MS " FOR UPDATE SKIP LOCKED)"
                    " RETURNING id",
                    "si", me, claim_ms);
    if (ret == 0) {
        size_t nt = (size_t)PQntuples(r);
        *dead = xcalloc(nt ? nt : 1, sizeof **dead);
        for (size_t i = 0; i < nt; i++)
            pgx_col(r, (int)i, 0, (*dead)[i], STORE_ID);
        *n = nt;
        PQclear(r);
    }
    pgx_put(p, c);
    return ret;
}

int pgx_node_orphans_done(struct store *st_, const char *id)
{
    PGCONN(p, c);
    int ret = pgx_q(c, NULL, "UPDATE nodes SET orphans_until = NULL WHERE id = $1", "s", id);
    pgx_put(p, c);
    return ret;
}

/* ---- admission ---- */

/* A pool's size from its config JSON text (0 when absent or not a number). */
#define POOL_SIZE(cfg)                                                                             \
    "(CASE WHEN jsonb_typeof((" cfg ")::jsonb -> 'size') = 'number'"                               \
    " THEN ((" cfg ")::jsonb ->> 'size')::numeric ELSE 0 END)"

/* The org's active standalone sessions (not a pool's: no "pool" key in data). */
#define STANDALONE_SESSIONS                                                                        \
    "(SELECT count(*) FROM sessions WHERE org_id = $1 AND status = 'active'"                       \
    " AND (data::jsonb ? 'pool') IS NOT TRUE)"

/* Serializes the org's admissions: held until the transaction ends.
 * E_NOTFOUND when there is no such org. */
static int lock_org(struct pgc *c, const char *org_id)
{
    PGresult *r;
    int ret = pgx_q(c, &r, "SELECT 1 FROM orgs WHERE id = $1 FOR UPDATE", "s", org_id);
    if (ret == 0 && (ret = pgx_one(r)) == 0)
        PQclear(r);
    return ret;
}

int pgx_org_slot_take(struct store *st_, const char *kind, const char *org_id, const char *node_id,
                      int64_t limit, int64_t ttl_ms, char id[STORE_ID], int64_t *held)
{
    char nid[STORE_ID];
    crypto_new_id(nid);
    id[0] = '\0';
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_begin(c);
    if (ret == 0)
        ret = lock_org(c, org_id);
    if (ret == 0)
        ret = pgx_q(
            c, NULL,
            "DELETE FROM org_slots WHERE org_id = $1 AND kind = $2 AND expires_at <= " PG_NOW_MS,
            "ss", org_id, kind);
    if (ret == 0)
        ret = pgx_q(c, &r,
                    "SELECT count(*) FROM org_slots z JOIN nodes n ON n.id = z.node_id"
                    " AND n.state = 'up' WHERE z.org_id = $1 AND z.kind = $2",
                    "ss", org_id, kind);
    if (ret == 0) {
        int64_t n = pgx_i64(r, 0, 0);
        PQclear(r);
        if (held)
            *held = n;
        if (n >= limit)
            ret = E_LIMIT;
    }
    if (ret == 0)
        ret = pgx_q(c, NULL,
                    "INSERT INTO org_slots (id, org_id, kind, node_id, expires_at)"
                    " VALUES ($1, $2, $3, $4, " PG_NOW_MS " + $5)",
                    "ssssi", nid, org_id, kind, node_id, ttl_ms);
    ret = pgx_end(c, ret);
    pgx_put(p, c);
    if (ret == 0)
        memcpy(id, nid, STORE_ID);
    return ret;
}

int pgx_org_slot_give(struct store *st_, const char *id)
{
    PGCONN(p, c);
    int ret = pgx_q(c, NULL, "DELETE FROM org_slots WHERE id = $1", "s", id);
    pgx_put(p, c);
    return ret;
}

/* The project $2's active standalone sessions and active pools' sizes (a
 * pool $3 left out), and its limit: its own, else the org's default, else -1
 * (store.h, limits_get). */
#define PROJECT_COUNTS                                                                             \
    "(SELECT count(*) FROM sessions WHERE org_id = $1 AND project_id = $2"                         \
    " AND status = 'active' AND (data::jsonb ? 'pool') IS NOT TRUE),"                              \
    " (SELECT coalesce(sum(" POOL_SIZE(                                                            \
        "config") "), 0)::bigint FROM pools WHERE org_id = $1"                                     \
                  " AND project_id = $2 AND status = 'active' AND id != $3),"                      \
                  " coalesce((SELECT nullif(max_sessions, 0) FROM concurrency_limits WHERE "       \
                  "org_id = $1"                                                                    \
                  " AND project_id = $2), (SELECT nullif(max_sessions, 0) FROM concurrency_limits" \
                  " WHERE org_id = $1 AND project_id = ''), -1)::bigint"

int pgx_session_admit(struct store *st_, const struct session_rec *s, int64_t limit, int64_t *pools,
                      int64_t *project_limit)
{
    PGCONN(p, c);
    PGresult *r;
    if (project_limit)
        *project_limit = -1;
    int ret = pgx_begin(c);
    if (ret == 0)
        ret = lock_org(c, s->org_id);
    if (ret == 0)
        ret = pgx_q(c, &r,
                    "SELECT " STANDALONE_SESSIONS ", (SELECT coalesce(sum(" POOL_SIZE(
                        "config") "), 0)::bigint FROM pools WHERE org_id = $1 AND status ="
                                  " 'active'), " PROJECT_COUNTS,
                    "sss", s->org_id, s->project_id, "");
    if (ret == 0) {
        int64_t nsess = pgx_i64(r, 0, 0), npools = pgx_i64(r, 0, 1);
        int64_t psess = pgx_i64(r, 0, 2), ppools = pgx_i64(r, 0, 3), plimit = pgx_i64(r, 0, 4);
        PQclear(r);
        if (pools)
            *pools = npools;
        if (limit >= 0 && nsess + npools >= limit)
            ret = E_LIMIT;
        else if (plimit >= 0 && psess + ppools >= plimit) {
            ret = E_LIMIT;
            if (pools)
                *pools = ppools;
            if (project_limit)
                *project_limit = plimit;
        }
    }
    if (ret == 0)
        ret = pgx_session_insert_on(c, s);
    ret = pgx_end(c, ret);
    pgx_put(p, c);
    return ret;
}

int pgx_pool_admit(struct store *st_, const struct pool_rec *pr, int is_update, int64_t limit,
                   int64_t *pools, int64_t *sessions, int64_t *project_limit)
{
    /* A pool leaving the active state only frees capacity: never refused. */
    int active = strcmp(pr->status, "active") == 0;
    PGCONN(p, c);
    PGresult *r;
    if (project_limit)
        *project_limit = -1;
    int ret = pgx_begin(c);
    if (ret == 0)
        ret = lock_org(c, pr->org_id);
    if (ret == 0)
        ret =
            pgx_q(c, &r,
                  "SELECT " STANDALONE_SESSIONS ", (SELECT coalesce(sum(" POOL_SIZE(
                      "config") "), 0)::bigint FROM pools WHERE org_id = $1 AND status = 'active'"
                                " AND id != $3), " PROJECT_COUNTS
                                ", (CASE WHEN $5 != 0 THEN " POOL_SIZE("$4") " ELSE 0 END)::bigint",
                  "ssssi", pr->org_id, pr->project_id, pr->id, pr->config ? pr->config : "{}",
                  (int64_t)active);
    if (ret == 0) {
        int64_t nsess = pgx_i64(r, 0, 0), npools = pgx_i64(r, 0, 1);
        int64_t psess = pgx_i64(r, 0, 2), ppools = pgx_i64(r, 0, 3), plimit = pgx_i64(r, 0, 4);
        int64_t size = pgx_i64(r, 0, 5);
        PQclear(r);
        if (pools)
            *pools = npools + size;
        if (sessions)
            *sessions = nsess;
        if (active && limit >= 0 && nsess + npools + size > limit)
            ret = E_LIMIT;
        else if (active && plimit >= 0 && psess + ppools + size > plimit) {
            ret = E_LIMIT;
            if (pools)
                *pools = ppools + size;
            if (sessions)
                *sessions = psess;
            if (project_limit)
                *project_limit = plimit;
        }
    }
    if (ret == 0)
        ret = is_update ? pgx_pool_update_on(c, pr) : pgx_pool_insert_on(c, pr);
    ret = pgx_end(c, ret);
    pgx_put(p, c);
    return ret;
}

/* ---- limits ---- */

const char pgx_schema_limits[] =
    "CREATE TABLE concurrency_limits (org_id " PG_TEXT " NOT NULL, project_id " PG_TEXT
    " NOT NULL, max_sessions bigint NOT NULL DEFAULT 0,"
    " max_invocations bigint NOT NULL DEFAULT 0, PRIMARY KEY (org_id, project_id));"
    "CREATE INDEX sessions_project_active ON sessions (project_id) WHERE status = 'active';";

int pgx_limits_get(struct store *st_, const char *org_id, const char *project_id,
                   struct limits_rec *out)
{
    PGCONN(p, c);
    PGresult *r;
    memset(out, 0, sizeof *out);
    snprintf(out->org_id, sizeof out->org_id, "%s", org_id);
    snprintf(out->project_id, sizeof out->project_id, "%s", project_id);
    int ret = pgx_q(c, &r,
                    "SELECT max_sessions, max_invocations FROM concurrency_limits"
                    " WHERE org_id = $1 AND project_id = $2",
                    "ss", org_id, project_id);
    if (ret == 0) {
        if (PQntuples(r) == 1) {
            out->max_sessions = pgx_i64(r, 0, 0);
            out->max_invocations = pgx_i64(r, 0, 1);
        }
        PQclear(r);
    }
    pgx_put(p, c);
    return ret;
}

int pgx_limits_put(struct store *st_, const struct limits_rec *l)
{
    PGCONN(p, c);
    int ret = pgx_q(c, NULL,
                    "INSERT INTO concurrency_limits (org_id, project_id, max_sessions,"
                    " max_invocations) VALUES ($1, $2, $3, $4) ON CONFLICT (org_id, project_id)"
                    " DO UPDATE SET max_sessions = excluded.max_sessions,"
                    " max_invocations = excluded.max_invocations",
                    "ssii", l->org_id, l->project_id, l->max_sessions, l->max_invocations);
    pgx_put(p, c);
    return ret;
}

/* ---- blobs ---- */

/* PostgreSQL's largest field value (1 GiB). */
#define PG_FIELD_MAX ((size_t)1 << 30)

int pgx_blob_put(struct store *st_, const char *key, const void *data, size_t len)
{
    if (len >= PG_FIELD_MAX)
        return E_TOOBIG;
    PGCONN(p, c);
    int ret = pgx_q(c, NULL,
                    "INSERT INTO blobs (key, data) VALUES ($1, $2)"
                    " ON CONFLICT (key) DO UPDATE SET data = excluded.data",
                    "sb", key, data ? data : "", len);
    pgx_put(p, c);
    return ret;
}

int pgx_blob_get(struct store *st_, const char *key, void **data, size_t *len)
{
    PGCONN(p, c);
    PGresult *r;
    int ret = pgx_qbin(c, &r, "SELECT data FROM blobs WHERE key = $1", "s", key);
    if (ret == 0 && (ret = pgx_one(r)) == 0) {
        size_t n = (size_t)PQgetlength(r, 0, 0);
        *data = xmalloc(n ? n : 1);
        if (n)
            memcpy(*data, PQgetvalue(r, 0, 0), n);
        *len = n;
        PQclear(r);
    }
    pgx_put(p, c);
    return ret;
}

int pgx_blob_delete(struct store *st_, const char *key)
{
    PGCONN(p, c);
    int ret = pgx_q(c, NULL, "DELETE FROM blobs WHERE key = $1", "s", key);
    pgx_put(p, c);
    return ret;
}

/* ---- singletons ---- */

/* run_exclusive's advisory locks use the two-int form, a key space apart
 * from the migrations' single bigint: (this class, hashtext(key)). */
#define EXCLUSIVE_CLASS "1650745208"

int pgx_run_exclusive(struct store *st_, const char *key, int (*fn)(void *ctx), void *ctx)
{
    PGCONN(p, c);
    int ret =
        pgx_q(c, NULL, "SELECT pg_advisory_lock(" EXCLUSIVE_CLASS ", hashtext($1))", "s", key);
    if (ret) {
        pgx_put(p, c);
        return E_INTERNAL;
    }
    /* The lock lives as long as this session: the connection stays out of
     * the pool until it is released. */
    ret = fn(ctx);
    PGresult *r;
    int un = pgx_q(c, &r, "SELECT pg_advisory_unlock(" EXCLUSIVE_CLASS ", hashtext($1))", "s", key);
    int released = un == 0 && PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    if (un == 0)
        PQclear(r);
    /* A lock we could not release must not outlive the call: ending the
     * session releases it. */
    if (released)
        pgx_put(p, c);
    else
        pgx_drop(p, c);
    return ret;
}
