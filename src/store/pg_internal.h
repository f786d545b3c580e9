/*
 * Internals shared by the PostgreSQL backend's files (store_pg.c and one
 * pg_<resource>.c per resource). Not part of the store contract: callers use
 * store/store.h only. Every name here carries pgx_: pg_ is libpq's and the
 * server's own prefix.
 *
 * Every query is parameterized (PQexecParams with typed text parameters);
 * SQL text is only ever assembled from fixed fragments and placeholder
 * numbers, never from values.
 */
#ifndef BD_STORE_PG_INTERNAL_H
#define BD_STORE_PG_INTERNAL_H

#include <libpq-fe.h>
#include <pthread.h>
#include <stdint.h>

#include "store/store.h"

/* Connections a store opens at most; callers beyond that wait for one. */
#define PG_POOL_MAX 8
/* Parameters of one statement at most. */
#define PG_MAX_PARAMS 40

/* The database's clock in ms since the epoch (clock_timestamp moves within a
 * transaction, unlike now()). */
#define PG_NOW_MS "(extract(epoch from clock_timestamp()) * 1000)::bigint"

struct pgc {
    PGconn *db;
    struct pgc *next;
};

struct pg {
    struct store base;
    char *url;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled when a connection is returned or a slot frees */
    struct pgc *idle;  /* connections not in use */
    int nopen;         /* connections in existence (idle or in use) */
};

/* A named schema migration, applied once in array order, recorded by name. */
struct pgx_migration {
    const char *name;
    const char *sql;
};

/* A connection from the pool: an idle one (reopened if it went bad), a new
 * one while fewer than PG_POOL_MAX exist, else waits. NULL after logging when
 * the server cannot be reached. */
struct pgc *pgx_get(struct pg *p);
/* Returns c to the pool; a connection that is broken or left inside a
 * transaction is closed instead. Accepts NULL. */
void pgx_put(struct pg *p, struct pgc *c);
/* Closes c and frees its slot (a connection whose session state is no
 * longer trusted, e.g. an advisory lock that could not be released). */
void pgx_drop(struct pg *p, struct pgc *c);

/*
 * Runs sql with parameters described by fmt, one character each:
 *   's'  const char *, text (NULL binds SQL NULL)
 *   'i'  int64_t, bigint
 *   'b'  const void *, size_t: bytea, sent in binary
 * Returns 0 (the result, when out is not NULL, is left in *out: PQclear it),
 * E_CONFLICT on an integrity violation (SQLSTATE class 23, as SQLite's
 * SQLITE_CONSTRAINT), or E_INTERNAL after logging the server's message.
 */
int pgx_q(struct pgc *c, PGresult **out, const char *sql, const char *fmt, ...);
/* pgx_q with every result column in binary (bytea reads). */
int pgx_qbin(struct pgc *c, PGresult **out, const char *sql, const char *fmt, ...);
/* Runs one or more parameterless statements (schemas); E_INTERNAL after logging. */
int pgx_exec(struct pgc *c, const char *what, const char *sql);
int pgx_begin(struct pgc *c);
int pgx_commit(struct pgc *c);
/* Rolls back the open transaction, if any. */
void pgx_rollback(struct pgc *c);
/* Commits when ret is 0, else rolls back; returns the outcome. */
int pgx_end(struct pgc *c, int ret);
/* A capped insert (store.h, cred_insert), when cap > 0: begins a
 * transaction, locks the org's row (the creates of an org on every node then
 * count one at a time), and runs count_sql ($1 org_id, $2 arg when not
 * NULL): E_LIMIT when it counts cap or more. Nothing when cap <= 0. Pair
 * with pgx_cap_end, which commits the insert that follows or rolls back. */
int pgx_cap_begin(struct pgc *c, int64_t cap, const char *org_id, const char *count_sql,
                  const char *arg);
int pgx_cap_end(struct pgc *c, int64_t cap, int ret);

/* Column readers: copy text (truncated to cap - 1 bytes; NULL reads ""), an
 * int64, an xstrdup'd copy (NULL reads dflt). */
void pgx_col(const PGresult *r, int row, int col, char *buf, size_t cap);
int64_t pgx_i64(const PGresult *r, int row, int col);
char *pgx_dup(const PGresult *r, int row, int col, const char *dflt);
/* Rows a command touched (PQcmdTuples). */
int64_t pgx_changed(const PGresult *r);
/* 0 when r has a row, else E_NOTFOUND; clears r in that case. */
int pgx_one(PGresult *r);
/* The data column of a record (credentials, vault items, proxies): a JSON
 * document whose secrets the API layer sealed before the store saw it,
 * bound as text ("{}" for a record without one) and read back with
 * pgx_dup(r, row, col, "{}"). */
#define PG_DATA(d) ((d) ? (d) : "{}")
/* E_NOTFOUND when the statement that made r touched no row, else 0; clears r. */
int pgx_touched(PGresult *r);

/* Opens the function's connection: declares p and c, returns E_INTERNAL when
 * no connection can be had. Pair with pgx_put(p, c) on every path. */
#define PGCONN(p, c)                                                                               \
    struct pg *p = (struct pg *)st_;                                                               \
    struct pgc *c = pgx_get(p);                                                                    \
    if (!c)                                                                                        \
    return E_INTERNAL

/* Fills a page from a result that asked for limit + 1 rows, keeping at most
 * limit; clears the result. */
#define PG_COLLECT(res, pg, rows, n, type, rowfn)                                                  \
    do {                                                                                           \
        size_t nt_ = (size_t)PQntuples(res);                                                       \
        size_t cap_ = (pg)->limit ? (pg)->limit : 1;                                               \
        *(rows) = xcalloc(cap_, sizeof(type));                                                     \
        *(n) = 0;                                                                                  \
        (pg)->has_more = nt_ > (pg)->limit;                                                        \
        for (size_t i_ = 0; i_ < nt_ && i_ < (pg)->limit; i_++)                                    \
            rowfn((res), (int)i_, &(*(rows))[(*(n))++]);                                           \
        PQclear(res);                                                                              \
    } while (0)

/* Fills an unbounded list (every row of the result); clears the result. */
#define PG_ALL(res, rows, n, type, rowfn)                                                          \
    do {                                                                                           \
        size_t nt_ = (size_t)PQntuples(res);                                                       \
        *(rows) = xcalloc(nt_ ? nt_ : 1, sizeof(type));                                            \
        *(n) = 0;                                                                                  \
        for (size_t i_ = 0; i_ < nt_; i_++)                                                        \
            rowfn((res), (int)i_, &(*(rows))[(*(n))++]);                                           \
        PQclear(res);                                                                              \
    } while (0)

/* Text columns compare and sort bytewise, as SQLite's BINARY collation does,
 * whatever the database's default collation. */
#define PG_TEXT "text COLLATE \"C\""

/* ---- schemas (one per resource file), listed in store_pg.c ---- */
extern const char pgx_schema_tenancy[];
extern const char pgx_schema_sessions[];
extern const char pgx_schema_profiles[];
extern const char pgx_schema_profiles_seq[];
extern const char pgx_schema_pools[];
extern const char pgx_schema_proxies[];
extern const char pgx_schema_telemetry[];
extern const char pgx_schema_audit[];
extern const char pgx_schema_audit_entry_id[];
extern const char pgx_schema_extensions[];
extern const char pgx_schema_credentials[];
extern const char pgx_schema_vaults[];
extern const char pgx_schema_authconn[];
extern const char pgx_schema_cluster[];
extern const char pgx_schema_org_slots[];
extern const char pgx_schema_node_orphans[];
extern const char pgx_schema_sessions_ended[];

/* ---- tenancy (pg_tenancy.c) ---- */
int pgx_meta_get(struct store *st_, const char *key, char *val, size_t cap);
int pgx_meta_init(struct store *st_, const char *key, const char *val, char *out, size_t cap);
int pgx_org_count(struct store *st_, int64_t *n);
int pgx_org_create(struct store *st_, struct org_rec *o, struct project_rec *p);
int pgx_org_get(struct store *st_, const char *id, struct org_rec *o);
int pgx_org_update(struct store *st_, const struct org_rec *o);
int pgx_plan_get(struct store *st_, const char *id, char **json);
int pgx_plan_put(struct store *st_, const char *id, const char *json);
int pgx_plan_each(struct store *st_, void (*fn)(void *, const char *, const char *), void *ctx);
int pgx_project_create(struct store *st_, struct project_rec *p, int64_t cap);
int pgx_project_get(struct store *st_, const char *org_id, const char *id_or_name,
                    struct project_rec *out);
int pgx_project_list(struct store *st_, const char *org_id, const struct name_filter *f,
                     struct page *pg, struct project_rec **rows, size_t *n);
int pgx_project_update(struct store *st_, const struct project_rec *p);
int pgx_project_delete(struct store *st_, const char *org_id, const char *id);
int pgx_key_create(struct store *st_, struct apikey_rec *k, int64_t cap);
int pgx_key_get(struct store *st_, const char *org_id, const char *id, struct apikey_rec *out);
int pgx_key_by_hash(struct store *st_, const char *hash, struct apikey_rec *out);
int pgx_auth_lookup(struct store *st_, const char *hash, struct apikey_rec *key,
                    struct org_rec *org);
int pgx_key_list(struct store *st_, const char *org_id, const struct name_filter *f,
                 struct page *pg, struct apikey_rec **rows, size_t *n);
int pgx_key_update(struct store *st_, const struct apikey_rec *k);
int pgx_key_rotate(struct store *st_, const char *org_id, const char *old_id,
                   int64_t old_expires_at, struct apikey_rec *fresh, int64_t cap);

/* ---- sessions (pg_sessions.c) ---- */
/* The session columns, in the order pgx_session_row reads them. */
#define PG_SESSION_COLS                                                                            \
    "id, org_id, project_id, name, status, created_at, deleted_at, uptime_ms, usage_status,"       \
    " end_reason, pid, pid_start, xvfb_pid, xvfb_start, node_id, data"
void pgx_session_row(const PGresult *r, int i, struct session_rec *s);
/* session_insert on a given connection (inside the caller's transaction). */
int pgx_session_insert_on(struct pgc *c, const struct session_rec *r);
int pgx_session_insert(struct store *st_, const struct session_rec *r);
int pgx_session_get(struct store *st_, const char *org_id, const char *project_id,
                    const char *id_or_name, int include_deleted, struct session_rec *out);
int pgx_session_list(struct store *st_, const char *org_id, const char *project_id,
                     const struct session_filter *f, struct page *pg, struct session_rec **rows,
                     size_t *n);
int pgx_session_update(struct store *st_, const struct session_rec *r);
int pgx_session_list_active(struct store *st_, struct session_rec **rows, size_t *n);
int pgx_session_list_node(struct store *st_, const char *node_id, struct session_rec **rows,
                          size_t *n);

/* ---- profiles (pg_profiles.c) ---- */
int pgx_profile_create(struct store *st_, struct profile_rec *p);
int pgx_profile_get(struct store *st_, const char *org_id, const char *project_id,
                    const char *id_or_name, struct profile_rec *out);
int pgx_profile_get_by_id(struct store *st_, const char *id, struct profile_rec *out);
int pgx_profile_count(struct store *st_, const char *org_id, int64_t *n);
int pgx_profile_ids(struct store *st_, const char *org_id, char (**ids)[STORE_ID], size_t *n);
int pgx_profile_list(struct store *st_, const char *org_id, const char *project_id,
                     const struct profile_filter *f, struct page *pg, struct profile_rec **rows,
                     size_t *n);
int pgx_profile_update(struct store *st_, const struct profile_rec *p);
int pgx_profile_touch(struct store *st_, const char *id, int64_t last_used_at, int64_t updated_at);
int pgx_profile_delete(struct store *st_, const char *org_id, const char *project_id,
                       const char *id);

/* ---- pools (pg_pools.c) ---- */
/* pool_insert / pool_update on a given connection (inside the caller's
 * transaction). */
int pgx_pool_insert_on(struct pgc *c, const struct pool_rec *p);
int pgx_pool_update_on(struct pgc *c, const struct pool_rec *p);
int pgx_pool_insert(struct store *st_, const struct pool_rec *p);
int pgx_pool_get(struct store *st_, const char *org_id, const char *project_id,
                 const char *id_or_name, struct pool_rec *out);
int pgx_pool_list(struct store *st_, const char *org_id, const char *project_id, const char *name,
                  const char *query, const char *region, const char *region_default,
                  struct page *pg, struct pool_rec **rows, size_t *n);
int pgx_pool_update(struct store *st_, const struct pool_rec *p);
int pgx_pool_list_active(struct store *st_, struct pool_rec **rows, size_t *n);
int pgx_pool_list_node(struct store *st_, const char *node_id, struct pool_rec **rows, size_t *n);

/* ---- proxies (pg_proxies.c) ---- */
int pgx_proxy_insert(struct store *st_, const struct proxy_rec *r, int64_t cap);
int pgx_proxy_get(struct store *st_, const char *org_id, const char *project_id, const char *id,
                  struct proxy_rec *out);
int pgx_proxy_find(struct store *st_, const char *org_id, const char *ref, struct proxy_rec **rows,
                   size_t *n);
int pgx_proxy_list(struct store *st_, const char *org_id, const char *project_id, const char *name,
                   const char *query, struct page *pg, struct proxy_rec **rows, size_t *n);
int pgx_proxy_update(struct store *st_, const struct proxy_rec *r);
int pgx_proxy_delete(struct store *st_, const char *org_id, const char *project_id, const char *id);

/* ---- telemetry (pg_telemetry.c) ---- */
int pgx_audit_insert(struct store *st_, struct audit_rec *rows, size_t n);
int pgx_audit_list(struct store *st_, const char *org_id, const struct audit_query *q,
                   struct page *pg, struct audit_rec **rows, size_t *n);
int pgx_audit_prune(struct store *st_, int64_t before_ms, int64_t max, int64_t *deleted);
int pgx_audit_trim(struct store *st_, const char *org_id, int64_t keep, int64_t *deleted);
int pgx_telem_events_insert(struct store *st_, const char *session_id,
                            const struct telem_event_rec *rows, size_t n);
int pgx_telem_events_list(struct store *st_, const char *session_id, const struct telem_query *q,
                          struct page *pg, struct telem_event_rec **rows, size_t *n);
int pgx_telem_events_max_seq(struct store *st_, const char *session_id, int64_t *out);
int pgx_telem_events_purge(struct store *st_, int64_t before_ms, int64_t *deleted);
int pgx_telem_bytes_by_org(struct store *st_,
                           void (*fn)(void *ctx, const char *org_id, int64_t bytes), void *ctx);
int pgx_telem_events_trim_org(struct store *st_, const char *org_id, int64_t bytes, int64_t *freed);
int pgx_otlp_dest_create(struct store *st_, struct otlp_dest_rec *d, int64_t cap);
int pgx_otlp_dest_get(struct store *st_, const char *org_id, const char *id_or_name,
                      struct otlp_dest_rec *out);
int pgx_otlp_dest_list(struct store *st_, const char *org_id, struct page *pg,
                       struct otlp_dest_rec **rows, size_t *n);
int pgx_otlp_dest_update(struct store *st_, const struct otlp_dest_rec *d);
int pgx_otlp_dest_delete(struct store *st_, const char *org_id, const char *id);

/* ---- extensions (pg_extensions.c) ---- */
int pgx_cred_insert(struct store *st_, const struct cred_rec *r, int64_t cap);
int pgx_cred_get(struct store *st_, const char *org_id, const char *project_id,
                 const char *id_or_name, struct cred_rec *out);
int pgx_cred_list(struct store *st_, const char *org_id, const char *project_id, const char *domain,
                  const char *query, struct page *pg, struct cred_rec **rows, size_t *n);
int pgx_cred_count(struct store *st_, const char *org_id, int64_t *n);
int pgx_cred_update(struct store *st_, const struct cred_rec *r);
int pgx_cred_delete(struct store *st_, const char *org_id, const char *project_id, const char *id);
int pgx_ac_insert(struct store *st_, const struct authconn_rec *r, int64_t cap);
int pgx_ac_get(struct store *st_, const char *org_id, const char *project_id, const char *id,
               struct authconn_rec *out);
int pgx_ac_list(struct store *st_, const char *org_id, const char *project_id,
                const char *profile_name, const char *domain, struct page *pg,
                struct authconn_rec **rows, size_t *n);
int pgx_ac_count(struct store *st_, const char *org_id, int64_t *n);
int pgx_ac_update(struct store *st_, const struct authconn_rec *r);
int pgx_ac_delete(struct store *st_, const char *org_id, const char *project_id, const char *id);
int pgx_ac_flow_admit(struct store *st_, const struct authconn_rec *r, const char *node_id,
                      int64_t limit, int64_t *running);
int pgx_vault_insert(struct store *st_, const struct vault_rec *v, int64_t cap);
int pgx_vault_get(struct store *st_, const char *org_id, const char *project_id,
                  const char *vault_id, const char *id_or_name, struct vault_rec *out);
int pgx_vault_list(struct store *st_, const char *org_id, const char *project_id,
                   const char *vault_id, const char *query, struct page *pg,
                   struct vault_rec **rows, size_t *n);
int pgx_vault_count(struct store *st_, const char *org_id, const char *vault_id, int64_t *n);
int pgx_vault_update(struct store *st_, const struct vault_rec *v, int64_t expected_version);
int pgx_vault_delete(struct store *st_, const char *org_id, const char *project_id, const char *id);
int pgx_ext_create(struct store *st_, struct ext_rec *x);
int pgx_ext_get(struct store *st_, const char *org_id, const char *project_id,
                const char *id_or_name, struct ext_rec *out);
int pgx_ext_list(struct store *st_, const char *org_id, const char *project_id, const char *name,
                 const char *query, struct page *pg, struct ext_rec **rows, size_t *n);
int pgx_ext_count(struct store *st_, const char *org_id, int64_t *n);
int pgx_ext_touch(struct store *st_, const char *id, int64_t last_used_at);
int pgx_ext_delete(struct store *st_, const char *org_id, const char *project_id, const char *id);

/* ---- cluster (pg_cluster.c) ---- */
int pgx_node_register(struct store *st_, struct node_rec *n);
int pgx_node_heartbeat(struct store *st_, const char *id, int64_t running);
int pgx_node_get(struct store *st_, const char *id, struct node_rec *out);
int pgx_node_list(struct store *st_, struct node_rec **rows, size_t *n);
int pgx_node_sweep(struct store *st_, int64_t lease_ms, const char *heir, char (**dead)[STORE_ID],
                   size_t *n);
int pgx_node_retire(struct store *st_, const char *id, const char *reason, const char *heir);
int pgx_node_orphans_claim(struct store *st_, const char *me, int64_t claim_ms,
                           char (**dead)[STORE_ID], size_t *n);
int pgx_node_orphans_done(struct store *st_, const char *id);
int pgx_org_slot_take(struct store *st_, const char *kind, const char *org_id, const char *node_id,
                      int64_t limit, int64_t ttl_ms, char id[STORE_ID], int64_t *held);
int pgx_org_slot_give(struct store *st_, const char *id);
int pgx_session_admit(struct store *st_, const struct session_rec *s, int64_t limit, int64_t *pools,
                      int64_t *project_limit);
int pgx_pool_admit(struct store *st_, const struct pool_rec *p, int is_update, int64_t limit,
                   int64_t *pools, int64_t *sessions, int64_t *project_limit);
extern const char pgx_schema_limits[];
int pgx_limits_get(struct store *st_, const char *org_id, const char *project_id,
                   struct limits_rec *out);
int pgx_limits_put(struct store *st_, const struct limits_rec *l);
int pgx_blob_put(struct store *st_, const char *key, const void *data, size_t len);
int pgx_blob_get(struct store *st_, const char *key, void **data, size_t *len);
int pgx_blob_delete(struct store *st_, const char *key);
int pgx_run_exclusive(struct store *st_, const char *key, int (*fn)(void *ctx), void *ctx);

/* searches (pg_search.c) */
extern const char pgx_schema_search[];
int pgx_search_put(struct store *st_, const char *id, const char *org_id, int64_t created_at,
                   int64_t expires_at, const char *json);
int pgx_search_get(struct store *st_, const char *org_id, const char *id, int64_t now, char **json);
int pgx_search_prune(struct store *st_, int64_t now);

/* config registry (pg_cfgreg.c) */
extern const char pgx_schema_cfgreg[];
int pgx_cfgreg_analysis_put(struct store *st_, const char *org_id, const char *id,
                            const char *domain, int64_t created_at, const char *json);
int pgx_cfgreg_analysis_get(struct store *st_, const char *org_id, const char *id, char **json);
int pgx_cfgreg_analysis_list(struct store *st_, const char *org_id, const char *search,
                             struct page *pg, struct cfgreg_text **rows, size_t *n);
int pgx_cfgreg_entry_put(struct store *st_, const struct cfgreg_entry_rec *r);
int pgx_cfgreg_running(struct store *st_, const char *node_id, struct page *pg,
                       struct cfgreg_text **rows, size_t *n);
extern const char pgx_schema_cfgreg_node[];
int pgx_cfgreg_entry_settle(struct store *st_, const char *org_id, const char *domain,
                            const char *status, const char *json, const char *was);
int pgx_cfgreg_entry_get(struct store *st_, const char *org_id, const char *domain, char **json);
int pgx_cfgreg_entry_list(struct store *st_, const char *org_id, const char *search,
                          enum cfgreg_sort sort, int descending, struct page *pg,
                          struct cfgreg_text **rows, size_t *n);

int pgx_cfgreg_prune(struct store *st_, const char *org_id, size_t keep_analyses,
                     size_t keep_entries);
/* apps (pg_apps.c) */
extern const char pgx_schema_apps[];
int pgx_appobj_put(struct store *st_, const struct appobj_rec *r);
int pgx_appobj_get(struct store *st_, const char *org_id, const char *project_id, const char *kind,
                   const char *id, struct appobj_rec *out);
int pgx_appobj_list(struct store *st_, const char *org_id, const char *project_id, const char *kind,
                    const char *app_name, const char *version, const char *status,
                    const char *match1, const char *match2, struct page *pg,
                    struct appobj_rec **rows, size_t *n);
int pgx_appobj_delete(struct store *st_, const char *org_id, const char *project_id,
                      const char *kind, const char *id);
int pgx_appobj_bytes(struct store *st_, const char *org_id, const char *kind, int64_t *n);
int pgx_appobj_unfinished(struct store *st_, struct page *pg, struct appobj_rec **rows, size_t *n);
int pgx_appobj_settle(struct store *st_, const struct appobj_rec *r, const char *was);

#endif
