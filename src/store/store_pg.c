/*
 * The shared store: PostgreSQL through libpq.
 *
 * Several server processes (the nodes of a cluster) and the `admin` commands
 * use one database at once, so nothing is cached across calls: every op is
 * one statement, or one transaction on one pooled connection. Connections
 * live in a small pool (at most PG_POOL_MAX, opened on demand; a caller
 * beyond that waits on a condition variable). A connection found broken
 * (CONNECTION_BAD, or closed by the server while idle, e.g. by a server
 * restart) is closed and a fresh one opened in its place before use, so the
 * store recovers without a restart of ours and without failing a request.
 *
 * Each connection gets TCP keepalives (10 s idle, 5 s apart, 3 probes) so a
 * lost server is noticed in about 25 s instead of the kernel's hours, and a
 * connect timeout of 5 s unless the URL sets one. Both come before the URL
 * in PQconnectdbParams, so the URL's own parameters win.
 *
 * Schema migrations are named (as in the SQLite backend) and each is applied
 * in its own transaction under a transaction-scoped advisory lock, so that
 * processes starting together apply each exactly once: the second waits for
 * the first's commit and then finds the name recorded. A database that holds
 * a migration this binary does not know was written by a newer version and is
 * refused.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/xalloc.h"
#include "store/pg_internal.h"

/* The advisory lock every migration runs under ("browserd" in ASCII). */
#define PG_MIGRATION_LOCK "7093010272990520676"

/* Logs libpq's message for `what`, without the newline(s) libpq ends it with. */
static void pgx_log(const char *what, const char *msg)
{
    size_t n = msg ? strlen(msg) : 0;
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        n--;
    log_error("store: %s: %.*s", what, (int)n, msg ? msg : "");
}

/* ---- connections ---- */

/* The server's warnings (client_min_messages = warning) go to our log, not
 * to libpq's default of raw stderr lines. */
static void pgx_notice(void *arg, const char *msg)
{
    (void)arg;
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        n--;
    log_warn("store: PostgreSQL: %.*s", (int)n, msg);
}

static PGconn *pgx_connect(const char *url)
{
    /* Defaults first, then the URL (expanded as a connection string), whose
     * own settings override them. */
    const char *const keys[] = {
        "connect_timeout",  "keepalives",       "keepalives_idle", "keepalives_interval",
        "keepalives_count", "application_name", "dbname",          NULL};
    const char *const vals[] = {"5", "1", "10", "5", "3", "browserd", url, NULL};
    PGconn *db = PQconnectdbParams(keys, vals, 1);
    if (PQstatus(db) != CONNECTION_OK) {
        pgx_log("cannot connect to PostgreSQL", db ? PQerrorMessage(db) : "out of memory");
        PQfinish(db);
        return NULL;
    }
    PQsetNoticeProcessor(db, pgx_notice, NULL);
    PGresult *r = PQexec(db, "SET client_min_messages = warning");
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        pgx_log("PostgreSQL session setup", PQerrorMessage(db));
    PQclear(r);
    if (!ok) {
        PQfinish(db);
        return NULL;
    }
    return db;
}

/* Whether an idle connection can still be used. A pooled connection never
 * LISTENs, so the server has nothing to say to it between queries unless it
 * is ending the session (a restart, pg_terminate_backend, an idle timeout):
 * then the socket holds a FATAL message and EOF. Anything readable, or a
 * hang-up, therefore means the connection is gone. One poll(2) of the
 * socket, no round trip. */
static int pgx_alive(PGconn *db)
{
    if (PQstatus(db) != CONNECTION_OK)
        return 0;
    struct pollfd pfd = {.fd = PQsocket(db), .events = POLLIN};
    if (pfd.fd < 0)
        return 0;
    return poll(&pfd, 1, 0) == 0;
}

struct pgc *pgx_get(struct pg *p)
{
    pthread_mutex_lock(&p->mu);
    while (!p->idle && p->nopen >= PG_POOL_MAX)
        pthread_cond_wait(&p->cv, &p->mu);
    struct pgc *c = p->idle;
    if (c)
        p->idle = c->next;
    else
        p->nopen++; /* a slot reserved for the connection opened below */
    pthread_mutex_unlock(&p->mu);

    if (c && !pgx_alive(c->db)) {
        PQfinish(c->db);
        c->db = NULL;
    }
    if (!c)
        c = xcalloc(1, sizeof *c);
    if (!c->db)
        c->db = pgx_connect(p->url);
    if (!c->db) {
        xfree(c);
        pthread_mutex_lock(&p->mu);
        p->nopen--;
        pthread_cond_signal(&p->cv);
        pthread_mutex_unlock(&p->mu);
        return NULL;
    }
    c->next = NULL;
    return c;
}

void pgx_drop(struct pg *p, struct pgc *c)
{
    if (!c)
        return;
    PQfinish(c->db);
    xfree(c);
    pthread_mutex_lock(&p->mu);
    p->nopen--;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void pgx_put(struct pg *p, struct pgc *c)
{
    if (!c)
        return;
    /* A connection left inside a transaction (a bug) or broken is not
     * handed to the next caller: it is closed, and its slot freed. */
    if (PQstatus(c->db) != CONNECTION_OK || PQtransactionStatus(c->db) != PQTRANS_IDLE) {
        pgx_drop(p, c);
        return;
    }
    pthread_mutex_lock(&p->mu);
    c->next = p->idle;
    p->idle = c;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* ---- queries ---- */

/* Type OIDs of the parameters (pg_type.h is a server header). */
#define OID_BYTEA 17
#define OID_INT8  20
#define OID_TEXT  25

static int pgx_vq(struct pgc *c, PGresult **out, int binary, const char *sql, const char *fmt,
                  va_list ap)
{
    Oid types[PG_MAX_PARAMS];
    const char *vals[PG_MAX_PARAMS];
    int lens[PG_MAX_PARAMS];
    int formats[PG_MAX_PARAMS];
    char nums[PG_MAX_PARAMS][24];
    int n = 0;
    for (; *fmt && n < PG_MAX_PARAMS; fmt++, n++) {
        lens[n] = 0;
        formats[n] = 0;
        if (*fmt == 's') {
            types[n] = OID_TEXT;
            vals[n] = va_arg(ap, const char *);
        } else if (*fmt == 'i') {
            types[n] = OID_INT8;
            snprintf(nums[n], sizeof nums[n], "%lld", (long long)va_arg(ap, int64_t));
            vals[n] = nums[n];
        } else {
            types[n] = OID_BYTEA;
            vals[n] = va_arg(ap, const char *);
            lens[n] = (int)va_arg(ap, size_t);
            formats[n] = 1;
        }
    }
    int64_t start = clock_mono_us();
    PGresult *r = PQexecParams(c->db, sql, n, types, vals, lens, formats, binary);
    metrics_store_query(clock_mono_us() - start);
    ExecStatusType s = PQresultStatus(r);
    if (s == PGRES_TUPLES_OK || s == PGRES_COMMAND_OK) {
        if (out)
            *out = r;
        else
            PQclear(r);
        return 0;
    }
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    int ret = E_INTERNAL;
    if (state && strncmp(state, "23", 2) == 0)
        ret = E_CONFLICT;
    else
        pgx_log(sql, r ? PQresultErrorMessage(r) : PQerrorMessage(c->db));
    PQclear(r);
    return ret;
}

int pgx_q(struct pgc *c, PGresult **out, const char *sql, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int ret = pgx_vq(c, out, 0, sql, fmt, ap);
    va_end(ap);
    return ret;
}

int pgx_qbin(struct pgc *c, PGresult **out, const char *sql, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int ret = pgx_vq(c, out, 1, sql, fmt, ap);
    va_end(ap);
    return ret;
}

int pgx_exec(struct pgc *c, const char *what, const char *sql)
{
    PGresult *r = PQexec(c->db, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!ok)
        pgx_log(what, PQerrorMessage(c->db));
    PQclear(r);
    return ok ? 0 : E_INTERNAL;
}

int pgx_begin(struct pgc *c)
{
    return pgx_exec(c, "BEGIN", "BEGIN");
}

int pgx_commit(struct pgc *c)
{
    int ret = pgx_exec(c, "COMMIT", "COMMIT");
    /* A COMMIT of a failed transaction reports ROLLBACK, not an error. */
    if (ret == 0 && PQtransactionStatus(c->db) != PQTRANS_IDLE)
        ret = E_INTERNAL;
    return ret;
}

void pgx_rollback(struct pgc *c)
{
    PGTransactionStatusType t = PQtransactionStatus(c->db);
    if (t == PQTRANS_INTRANS || t == PQTRANS_INERROR)
        (void)pgx_exec(c, "ROLLBACK", "ROLLBACK");
}

int pgx_cap_begin(struct pgc *c, int64_t cap, const char *org_id, const char *count_sql,
                  const char *arg)
{
    if (cap <= 0)
        return 0;
    PGresult *r;
    int ret = pgx_begin(c);
    if (ret == 0)
        ret = pgx_q(c, NULL, "SELECT 1 FROM orgs WHERE id = $1 FOR UPDATE", "s", org_id);
    if (ret == 0)
        ret =
            arg ? pgx_q(c, &r, count_sql, "ss", org_id, arg) : pgx_q(c, &r, count_sql, "s", org_id);
    if (ret == 0) {
        if (pgx_i64(r, 0, 0) >= cap)
            ret = E_LIMIT;
        PQclear(r);
    }
    return ret;
}

int pgx_cap_end(struct pgc *c, int64_t cap, int ret)
{
    return cap > 0 ? pgx_end(c, ret) : ret;
}

int pgx_end(struct pgc *c, int ret)
{
    if (ret == 0)
        ret = pgx_commit(c);
    if (ret)
        pgx_rollback(c);
    return ret;
}

void pgx_col(const PGresult *r, int row, int col, char *buf, size_t cap)
{
    if (cap == 0)
        return;
    const char *t = PQgetisnull(r, row, col) ? "" : PQgetvalue(r, row, col);
    size_t n = (size_t)PQgetlength(r, row, col);
    if (!*t)
        n = 0;
    if (n >= cap)
        n = cap - 1;
    if (n)
        memcpy(buf, t, n);
    buf[n] = '\0';
}

int64_t pgx_i64(const PGresult *r, int row, int col)
{
    if (PQgetisnull(r, row, col))
        return 0;
    return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

char *pgx_dup(const PGresult *r, int row, int col, const char *dflt)
{
    return xstrdup(PQgetisnull(r, row, col) ? dflt : PQgetvalue(r, row, col));
}

int64_t pgx_changed(const PGresult *r)
{
    return strtoll(PQcmdTuples((PGresult *)r), NULL, 10);
}

int pgx_one(PGresult *r)
{
    if (PQntuples(r) > 0)
        return 0;
    PQclear(r);
    return E_NOTFOUND;
}

int pgx_touched(PGresult *r)
{
    int ret = pgx_changed(r) > 0 ? 0 : E_NOTFOUND;
    PQclear(r);
    return ret;
}

/* ---- lifecycle ---- */

static void pgx_close(struct store *st_)
{
    struct pg *p = (struct pg *)st_;
    while (p->idle) {
        struct pgc *c = p->idle;
        p->idle = c->next;
        PQfinish(c->db);
        xfree(c);
    }
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    xfree(p->url);
    xfree(p);
}

static const struct store_ops pgx_ops = {
    .name = "postgresql",
    .close = pgx_close,
    .meta_get = pgx_meta_get,
    .meta_init = pgx_meta_init,
    .org_count = pgx_org_count,
    .org_create = pgx_org_create,
    .org_get = pgx_org_get,
    .org_update = pgx_org_update,
    .plan_get = pgx_plan_get,
    .plan_put = pgx_plan_put,
    .plan_each = pgx_plan_each,
    .project_create = pgx_project_create,
    .project_get = pgx_project_get,
    .project_list = pgx_project_list,
    .project_update = pgx_project_update,
    .project_delete = pgx_project_delete,
    .key_create = pgx_key_create,
    .key_get = pgx_key_get,
    .key_by_hash = pgx_key_by_hash,
    .auth_lookup = pgx_auth_lookup,
    .key_list = pgx_key_list,
    .key_update = pgx_key_update,
    .key_rotate = pgx_key_rotate,
    .session_insert = pgx_session_insert,
    .session_get = pgx_session_get,
    .session_list = pgx_session_list,
    .session_update = pgx_session_update,
    .session_list_active = pgx_session_list_active,
    .profile_create = pgx_profile_create,
    .profile_get = pgx_profile_get,
    .profile_get_by_id = pgx_profile_get_by_id,
    .profile_list = pgx_profile_list,
    .profile_count = pgx_profile_count,
    .profile_ids = pgx_profile_ids,
    .profile_update = pgx_profile_update,
    .profile_touch = pgx_profile_touch,
    .profile_delete = pgx_profile_delete,
    .pool_insert = pgx_pool_insert,
    .pool_get = pgx_pool_get,
    .pool_list = pgx_pool_list,
    .pool_update = pgx_pool_update,
    .pool_list_active = pgx_pool_list_active,
    .proxy_insert = pgx_proxy_insert,
    .proxy_get = pgx_proxy_get,
    .proxy_find = pgx_proxy_find,
    .proxy_list = pgx_proxy_list,
    .proxy_update = pgx_proxy_update,
    .proxy_delete = pgx_proxy_delete,
    .telem_events_insert = pgx_telem_events_insert,
    .telem_events_list = pgx_telem_events_list,
    .telem_events_max_seq = pgx_telem_events_max_seq,
    .telem_events_purge = pgx_telem_events_purge,
    .telem_bytes_by_org = pgx_telem_bytes_by_org,
    .telem_events_trim_org = pgx_telem_events_trim_org,
    .otlp_dest_create = pgx_otlp_dest_create,
    .otlp_dest_get = pgx_otlp_dest_get,
    .otlp_dest_list = pgx_otlp_dest_list,
    .otlp_dest_update = pgx_otlp_dest_update,
    .otlp_dest_delete = pgx_otlp_dest_delete,
    .audit_insert = pgx_audit_insert,
    .audit_list = pgx_audit_list,
    .audit_prune = pgx_audit_prune,
    .audit_trim = pgx_audit_trim,
    .ext_create = pgx_ext_create,
    .ext_get = pgx_ext_get,
    .ext_list = pgx_ext_list,
    .ext_count = pgx_ext_count,
    .ext_touch = pgx_ext_touch,
    .ext_delete = pgx_ext_delete,
    .cred_insert = pgx_cred_insert,
    .cred_get = pgx_cred_get,
    .cred_list = pgx_cred_list,
    .cred_count = pgx_cred_count,
    .cred_update = pgx_cred_update,
    .cred_delete = pgx_cred_delete,
    .vault_insert = pgx_vault_insert,
    .vault_get = pgx_vault_get,
    .vault_list = pgx_vault_list,
    .vault_count = pgx_vault_count,
    .vault_update = pgx_vault_update,
    .vault_delete = pgx_vault_delete,
    .ac_insert = pgx_ac_insert,
    .ac_get = pgx_ac_get,
    .ac_list = pgx_ac_list,
    .ac_count = pgx_ac_count,
    .ac_update = pgx_ac_update,
    .ac_delete = pgx_ac_delete,
    .ac_flow_admit = pgx_ac_flow_admit,
    .search_put = pgx_search_put,
    .search_get = pgx_search_get,
    .search_prune = pgx_search_prune,
    .cfgreg_analysis_put = pgx_cfgreg_analysis_put,
    .cfgreg_analysis_get = pgx_cfgreg_analysis_get,
    .cfgreg_analysis_list = pgx_cfgreg_analysis_list,
    .cfgreg_entry_put = pgx_cfgreg_entry_put,
    .cfgreg_entry_get = pgx_cfgreg_entry_get,
    .cfgreg_entry_list = pgx_cfgreg_entry_list,
    .cfgreg_prune = pgx_cfgreg_prune,
    .cfgreg_running = pgx_cfgreg_running,
    .cfgreg_entry_settle = pgx_cfgreg_entry_settle,
    .appobj_put = pgx_appobj_put,
    .appobj_get = pgx_appobj_get,
    .appobj_list = pgx_appobj_list,
    .appobj_delete = pgx_appobj_delete,
    .appobj_bytes = pgx_appobj_bytes,
    .appobj_unfinished = pgx_appobj_unfinished,
    .appobj_settle = pgx_appobj_settle,
    .node_register = pgx_node_register,
    .node_heartbeat = pgx_node_heartbeat,
    .node_get = pgx_node_get,
    .node_list = pgx_node_list,
    .node_sweep = pgx_node_sweep,
    .node_retire = pgx_node_retire,
    .node_orphans_claim = pgx_node_orphans_claim,
    .node_orphans_done = pgx_node_orphans_done,
    .org_slot_take = pgx_org_slot_take,
    .org_slot_give = pgx_org_slot_give,
    .session_admit = pgx_session_admit,
    .pool_admit = pgx_pool_admit,
    .limits_get = pgx_limits_get,
    .limits_put = pgx_limits_put,
    .session_list_node = pgx_session_list_node,
    .pool_list_node = pgx_pool_list_node,
    .blob_put = pgx_blob_put,
    .blob_get = pgx_blob_get,
    .blob_delete = pgx_blob_delete,
    .run_exclusive = pgx_run_exclusive,
};

/* Every schema, in the order applied; the names are those of the SQLite
 * backend (store_sqlite.c), so both record the same history, but for
 * 0043_org_slots and 0046_node_orphans: tables and columns only a cluster uses. */
static const struct pgx_migration migrations[] = {
    {"0001_tenancy", pgx_schema_tenancy},
    {"0002_sessions", pgx_schema_sessions},
    {"0003_profiles", pgx_schema_profiles},
    {"0004_pools", pgx_schema_pools},
    {"0005_proxies", pgx_schema_proxies},
    {"0010_telemetry", pgx_schema_telemetry},
    {"0019_extensions", pgx_schema_extensions},
    {"0020_cluster", pgx_schema_cluster},
    {"0021_profiles_seq", pgx_schema_profiles_seq},
    {"0030_audit_logs", pgx_schema_audit},
    {"0031_audit_entry_id", pgx_schema_audit_entry_id},
    {"0033_limits", pgx_schema_limits},
    {"0034_credentials", pgx_schema_credentials},
    {"0035_vaults", pgx_schema_vaults},
    {"0037_auth_connections", pgx_schema_authconn},
    {"0040_searches", pgx_schema_search},
    {"0041_config_registry", pgx_schema_cfgreg},
    {"0036_apps", pgx_schema_apps},
    {"0042_cfgreg_node", pgx_schema_cfgreg_node},
    {"0043_org_slots", pgx_schema_org_slots},
    {"0046_node_orphans", pgx_schema_node_orphans},
    {"0047_sessions_ended", pgx_schema_sessions_ended},
};
#define NMIGRATIONS (sizeof migrations / sizeof migrations[0])

static const char SQL_MIGRATION_TABLE[] =
    "CREATE TABLE IF NOT EXISTS schema_migrations (name text COLLATE \"C\" PRIMARY KEY,"
    " applied_at bigint NOT NULL)";

/* Refuses a database holding a migration this binary does not know. */
static int migrations_known(struct pgc *c, struct err *e)
{
    PGresult *r = NULL;
    int ret = pgx_begin(c);
    if (ret == 0)
        ret = pgx_exec(c, "migration lock", "SELECT pg_advisory_xact_lock(" PG_MIGRATION_LOCK ")");
    if (ret == 0)
        ret = pgx_exec(c, "schema_migrations", SQL_MIGRATION_TABLE);
    if (ret == 0)
        ret = pgx_q(c, &r, "SELECT name FROM schema_migrations ORDER BY name", "");
    if (ret == 0) {
        for (int i = 0; i < PQntuples(r) && ret == 0; i++) {
            const char *name = PQgetvalue(r, i, 0);
            size_t k = 0;
            while (k < NMIGRATIONS && strcmp(migrations[k].name, name) != 0)
                k++;
            if (k == NMIGRATIONS) {
                log_error("store: the database holds schema migration %s, unknown to this"
                          " browserd (written by a newer version?)",
                          name);
                ret = err_set(e, E_INTERNAL, "internal",
                              "the PostgreSQL store holds schema migration %s, which this"
                              " browserd does not know: it was written by a newer version",
                              name);
            }
        }
        PQclear(r);
    }
    return pgx_end(c, ret);
}

static int migrate(struct pgc *c, struct err *e)
{
    int ret = migrations_known(c, e);
    for (size_t i = 0; ret == 0 && i < NMIGRATIONS; i++) {
        PGresult *r = NULL;
        ret = pgx_begin(c);
        if (ret == 0)
            ret = pgx_exec(c, "migration lock",
                           "SELECT pg_advisory_xact_lock(" PG_MIGRATION_LOCK ")");
        if (ret == 0)
            ret = pgx_q(c, &r, "SELECT 1 FROM schema_migrations WHERE name = $1", "s",
                        migrations[i].name);
        int applied = ret == 0 && PQntuples(r) > 0;
        PQclear(r);
        if (ret == 0 && !applied) {
            ret = pgx_exec(c, migrations[i].name, migrations[i].sql);
            if (ret == 0)
                ret = pgx_q(c, NULL,
                            "INSERT INTO schema_migrations (name, applied_at)"
                            " VALUES ($1, " PG_NOW_MS ")",
                            "s", migrations[i].name);
        }
        ret = pgx_end(c, ret);
        if (ret)
            err_set(e, E_INTERNAL, "internal", "cannot apply schema migration %s to the store",
                    migrations[i].name);
    }
    return ret;
}

int store_open_pg(const char *url, struct store **out, struct err *e)
{
    *out = NULL;
    struct pg *p = xcalloc(1, sizeof *p);
    p->base.ops = &pgx_ops;
    p->base.sessions_ended_kept = LIM_SESSIONS_ENDED_KEPT;
    p->url = xstrdup(url);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    struct pgc *c = pgx_get(p);
    if (!c) {
        pgx_close(&p->base);
        return err_set(e, E_INTERNAL, "internal", "cannot connect to the PostgreSQL store");
    }
    int ret = migrate(c, e);
    pgx_put(p, c);
    if (ret) {
        pgx_close(&p->base);
        return ret;
    }
    *out = &p->base;
    return 0;
}

int store_open(const char *url, const char *dir, struct store **out, struct err *e)
{
    *out = NULL;
    if (!url || !*url)
        return store_open_sqlite(dir, out, e);
    if (strncmp(url, "postgresql://", 13) == 0 || strncmp(url, "postgres://", 11) == 0)
        return store_open_pg(url, out, e);
    return err_set(e, E_INVALID, "bad_request",
                   "unsupported store URL (BROWSERD_STORE / --store): expected"
                   " postgresql://... or postgres://..., or none for the embedded SQLite store");
}
