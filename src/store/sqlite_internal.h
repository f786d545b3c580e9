/*
 * Internals shared by the SQLite backend's files (store_sqlite.c and one
 * sqlite_<resource>.c per resource). Not part of the store contract: callers
 * use store/store.h only.
 */
#ifndef BD_STORE_SQLITE_INTERNAL_H
#define BD_STORE_SQLITE_INTERNAL_H

#include <sqlite3.h>
#include <pthread.h>

#include "store/store.h"

#define STMT_CACHE 64

struct conn {
    sqlite3 *db;
    struct {
        const char *sql;
        sqlite3_stmt *st;
    } cache[STMT_CACHE];
    size_t ncache;
    int broken; /* closed instead of pooled by sqx_conn_put */
    struct conn *next;
};

struct sq {
    struct store base;
    char *path;
    pthread_mutex_t mu;
    struct conn *idle;         /* connections not in use */
    struct sq_authcache *auth; /* auth_lookup's cache (sqlite_tenancy.c); NULL = uncached */
    struct sq_syncer *syncer;  /* background WAL sync (sqx_sync_soon); NULL until first used */
};

/* A named schema migration; applied once, in array order, recorded by name. */
struct sq_migration {
    const char *name;
    const char *sql;
};

/* Logs the connection's error for `what` and returns E_INTERNAL. */
int sqx_fail(sqlite3 *db, const char *what);
/* A connection from the pool (opened on demand), or NULL after logging. */
struct conn *sqx_conn_get(struct sq *s);
void sqx_conn_put(struct sq *s, struct conn *c);
/* The connection's cached statement for sql (a static string: the cache is
 * keyed by its address), reset and unbound; NULL after logging. */
sqlite3_stmt *sqx_prep(struct conn *c, const char *sql);
/* Prepares sql, binds arguments by fmt ('s' text, NULL binds NULL; 'i'
 * int64_t) and steps once. Returns SQLITE_ROW (the statement is left in *out
 * for reading; reset it when done), SQLITE_DONE, -2 on a constraint
 * violation, or -1 on another failure (logged). */
int sqx_q(struct conn *c, sqlite3_stmt **out, const char *sql, const char *fmt, ...);
/* Maps sqx_q's failures: -2 -> E_CONFLICT, -1 -> E_INTERNAL, else 0. */
int sqx_qrc(int rc);
/* Runs fn(c, arg) with the connection's commits not waiting for the disk
 * (synchronous=NORMAL: a crash of the process loses nothing, a power cut may
 * lose the commit), then asks the background syncer to make them durable
 * (sqx_sync_soon). For the one write on the create path (a new session's row,
 * whose browser a power cut ends anyway). Returns fn's result. */
int sqx_unsynced(struct sq *s, struct conn *c, int (*fn)(struct conn *c, const void *arg),
                 const void *arg);
/* Wakes the background syncer, which fdatasyncs the WAL file: every commit
 * made before the call is durable once the syncer's next pass ends. */
void sqx_sync_soon(struct sq *s);
/* Waits up to timeout_ms until the syncer's passes cover every sqx_sync_soon
 * made before the call: 0, or -1 on timeout. */
int sqx_sync_wait(struct sq *s, int timeout_ms);
int sqx_begin(struct conn *c);
int sqx_commit(struct conn *c);
void sqx_rollback(struct conn *c);
/* A capped insert (store.h, cred_insert), when cap > 0: BEGIN IMMEDIATE
 * (one writer at a time, so an org's count and insert are one step), then
 * count_sql (a static string; org_id, then arg when not NULL): E_LIMIT when
 * it counts cap or more. Nothing when cap <= 0. Pair with sqx_cap_end, which
 * commits the insert that follows or rolls back. */
int sqx_cap_begin(struct conn *c, int64_t cap, const char *org_id, const char *count_sql,
                  const char *arg);
int sqx_cap_end(struct conn *c, int64_t cap, int ret);
/* Copies column i as text into buf (truncated to cap - 1 bytes). */
void sqx_col(sqlite3_stmt *st, int i, char *buf, size_t cap);
/* The data column of a record (credentials, vault items, proxies): a JSON
 * document whose secrets the API layer sealed before the store saw it. The
 * store binds it as text ("{}" for a record without one: SQ_DATA) and reads
 * it back as an owned string ("{}" when NULL: sqx_data). */
#define SQ_DATA(d) ((d) ? (d) : "{}")
char *sqx_data(sqlite3_stmt *st, int i);
/* The answer of an UPDATE or DELETE sqx_q ran (rc its result): 0 when it
 * changed a row, E_NOTFOUND when none, else sqx_qrc(rc). Call before the
 * connection is put back. */
int sqx_touched(struct conn *c, int rc);

/* Opens the function's connection: declares s and c, returns E_INTERNAL when
 * no connection can be had. Pair with sqx_conn_put(s, c) on every path. */
#define CONN(s, c)                                                                                 \
    struct sq *s = (struct sq *)st_;                                                               \
    struct conn *c = sqx_conn_get(s);                                                              \
    if (!c)                                                                                        \
    return E_INTERNAL

/* Steps a list query that asked for limit + 1 rows, keeping at most limit. */
#define COLLECT(st, rc, pg, rows, n, type, rowfn)                                                  \
    do {                                                                                           \
        size_t cap_ = (pg)->limit ? (pg)->limit : 1;                                               \
        *(rows) = xcalloc(cap_, sizeof(type));                                                     \
        *(n) = 0;                                                                                  \
        (pg)->has_more = 0;                                                                        \
        while ((rc) == SQLITE_ROW) {                                                               \
            if (*(n) == (pg)->limit) {                                                             \
                (pg)->has_more = 1;                                                                \
                break;                                                                             \
            }                                                                                      \
            rowfn((st), &(*(rows))[(*(n))++]);                                                     \
            (rc) = sqlite3_step(st);                                                               \
        }                                                                                          \
        if ((rc) == SQLITE_ROW || (rc) == SQLITE_DONE)                                             \
            (rc) = 0;                                                                              \
        sqlite3_reset(st);                                                                         \
    } while (0)

/* Schemas of the resource files, listed in store_sqlite.c. */
extern const char sq_schema_tenancy[];
extern const char sq_schema_sessions[];
extern const char sq_schema_cluster[];
extern const char sq_schema_sessions_ended[];

/* ---- tenancy (sqlite_tenancy.c) ---- */
int sq_meta_get(struct store *st_, const char *key, char *val, size_t cap);
int sq_meta_init(struct store *st_, const char *key, const char *val, char *out, size_t cap);
int sq_org_count(struct store *st_, int64_t *n);
int sq_org_create(struct store *st_, struct org_rec *o, struct project_rec *p);
int sq_org_get(struct store *st_, const char *id, struct org_rec *o);
int sq_org_update(struct store *st_, const struct org_rec *o);
int sq_plan_get(struct store *st_, const char *id, char **json);
int sq_plan_put(struct store *st_, const char *id, const char *json);
int sq_plan_each(struct store *st_, void (*fn)(void *, const char *, const char *), void *ctx);
int sq_project_create(struct store *st_, struct project_rec *p, int64_t cap);
int sq_project_get(struct store *st_, const char *org_id, const char *id_or_name,
                   struct project_rec *out);
int sq_project_list(struct store *st_, const char *org_id, const struct name_filter *f,
                    struct page *pg, struct project_rec **rows, size_t *n);
int sq_project_update(struct store *st_, const struct project_rec *p);
int sq_project_delete(struct store *st_, const char *org_id, const char *id);
int sq_key_create(struct store *st_, struct apikey_rec *k, int64_t cap);
int sq_key_get(struct store *st_, const char *org_id, const char *id, struct apikey_rec *out);
int sq_key_by_hash(struct store *st_, const char *hash, struct apikey_rec *out);
int sq_auth_lookup(struct store *st_, const char *hash, struct apikey_rec *key,
                   struct org_rec *org);
int sq_key_list(struct store *st_, const char *org_id, const struct name_filter *f, struct page *pg,
                struct apikey_rec **rows, size_t *n);
int sq_key_update(struct store *st_, const struct apikey_rec *k);
int sq_key_rotate(struct store *st_, const char *org_id, const char *old_id, int64_t old_expires_at,
                  struct apikey_rec *fresh, int64_t cap);
/* The cache of auth_lookup and its change watch (a connection of its own);
 * open leaves s->auth NULL (lookups uncached) when that cannot be had. */
void sq_authcache_open(struct sq *s);
void sq_authcache_close(struct sq *s);

/* ---- sessions (sqlite_sessions.c) ---- */
int sq_session_insert(struct store *st_, const struct session_rec *r);
/* session_insert of arg (a struct session_rec) on connection c: a
 * sqlite3_step result as sqx_q's (map it with sqx_qrc). */
int sqx_session_insert_on(struct conn *c, const void *arg);
int sq_session_get(struct store *st_, const char *org_id, const char *project_id,
                   const char *id_or_name, int include_deleted, struct session_rec *out);
int sq_session_list(struct store *st_, const char *org_id, const char *project_id,
                    const struct session_filter *f, struct page *pg, struct session_rec **rows,
                    size_t *n);
int sq_session_update(struct store *st_, const struct session_rec *r);
int sq_session_list_active(struct store *st_, struct session_rec **rows, size_t *n);

/* ---- profiles (sqlite_profiles.c) ---- */
extern const char sq_schema_profiles[];
extern const char sq_schema_profiles_seq[];
int sq_profile_create(struct store *st_, struct profile_rec *p);
int sq_profile_get(struct store *st_, const char *org_id, const char *project_id,
                   const char *id_or_name, struct profile_rec *out);
int sq_profile_get_by_id(struct store *st_, const char *id, struct profile_rec *out);
int sq_profile_count(struct store *st_, const char *org_id, int64_t *n);
int sq_profile_ids(struct store *st_, const char *org_id, char (**ids)[STORE_ID], size_t *n);
int sq_profile_list(struct store *st_, const char *org_id, const char *project_id,
                    const struct profile_filter *f, struct page *pg, struct profile_rec **rows,
                    size_t *n);
int sq_profile_update(struct store *st_, const struct profile_rec *p);
int sq_profile_touch(struct store *st_, const char *id, int64_t last_used_at, int64_t updated_at);
int sq_profile_delete(struct store *st_, const char *org_id, const char *project_id,
                      const char *id);
/* ---- pools (sqlite_pools.c) ---- */
extern const char sq_schema_pools[];
int sq_pool_insert(struct store *st_, const struct pool_rec *p);
int sq_pool_get(struct store *st_, const char *org_id, const char *project_id,
                const char *id_or_name, struct pool_rec *out);
int sq_pool_list(struct store *st_, const char *org_id, const char *project_id, const char *name,
                 const char *query, const char *region, const char *region_default, struct page *pg,
                 struct pool_rec **rows, size_t *n);
int sq_pool_update(struct store *st_, const struct pool_rec *p);
/* pool_insert and pool_update on connection c (inside a caller's
 * transaction). */
int sqx_pool_insert_on(struct conn *c, const struct pool_rec *p);
int sqx_pool_update_on(struct conn *c, const struct pool_rec *p);
int sq_pool_list_active(struct store *st_, struct pool_rec **rows, size_t *n);
/* proxies: sqlite_proxies.c */
extern const char sq_schema_proxies[];
int sq_proxy_insert(struct store *st_, const struct proxy_rec *r, int64_t cap);
int sq_proxy_get(struct store *st_, const char *org_id, const char *project_id, const char *id,
                 struct proxy_rec *out);
int sq_proxy_find(struct store *st_, const char *org_id, const char *ref, struct proxy_rec **rows,
                  size_t *n);
int sq_proxy_list(struct store *st_, const char *org_id, const char *project_id, const char *name,
                  const char *query, struct page *pg, struct proxy_rec **rows, size_t *n);
int sq_proxy_update(struct store *st_, const struct proxy_rec *r);
int sq_proxy_delete(struct store *st_, const char *org_id, const char *project_id, const char *id);
/* ---- proxies (sqlite_proxies.c) ---- */
/* ---- audit logs (sqlite_audit.c) ---- */
extern const char sq_schema_audit[];
extern const char sq_schema_audit_entry_id[];
int sq_audit_insert(struct store *st_, struct audit_rec *rows, size_t n);
int sq_audit_list(struct store *st_, const char *org_id, const struct audit_query *q,
                  struct page *pg, struct audit_rec **rows, size_t *n);
int sq_audit_prune(struct store *st_, int64_t before_ms, int64_t max, int64_t *deleted);
int sq_audit_trim(struct store *st_, const char *org_id, int64_t keep, int64_t *deleted);
/* ---- telemetry (sqlite_telemetry.c) ---- */
extern const char sq_schema_telemetry[];
int sq_telem_events_insert(struct store *st_, const char *session_id,
                           const struct telem_event_rec *rows, size_t n);
int sq_telem_events_list(struct store *st_, const char *session_id, const struct telem_query *q,
                         struct page *pg, struct telem_event_rec **rows, size_t *n);
int sq_telem_events_max_seq(struct store *st_, const char *session_id, int64_t *out);
int sq_telem_events_purge(struct store *st_, int64_t before_ms, int64_t *deleted);
int sq_telem_bytes_by_org(struct store *st_,
                          void (*fn)(void *ctx, const char *org_id, int64_t bytes), void *ctx);
int sq_telem_events_trim_org(struct store *st_, const char *org_id, int64_t bytes, int64_t *freed);
int sq_otlp_dest_create(struct store *st_, struct otlp_dest_rec *d, int64_t cap);
int sq_otlp_dest_get(struct store *st_, const char *org_id, const char *id_or_name,
                     struct otlp_dest_rec *out);
int sq_otlp_dest_list(struct store *st_, const char *org_id, struct page *pg,
                      struct otlp_dest_rec **rows, size_t *n);
int sq_otlp_dest_update(struct store *st_, const struct otlp_dest_rec *d);
int sq_otlp_dest_delete(struct store *st_, const char *org_id, const char *id);
/* ---- credentials (sqlite_credentials.c) ---- */
extern const char sq_schema_credentials[];
int sq_cred_insert(struct store *st_, const struct cred_rec *r, int64_t cap);
int sq_cred_get(struct store *st_, const char *org_id, const char *project_id,
                const char *id_or_name, struct cred_rec *out);
int sq_cred_list(struct store *st_, const char *org_id, const char *project_id, const char *domain,
                 const char *query, struct page *pg, struct cred_rec **rows, size_t *n);
int sq_cred_count(struct store *st_, const char *org_id, int64_t *n);
int sq_cred_update(struct store *st_, const struct cred_rec *r);
int sq_cred_delete(struct store *st_, const char *org_id, const char *project_id, const char *id);

/* ---- auth connections (sqlite_authconn.c) ---- */
extern const char sq_schema_authconn[];
int sq_ac_insert(struct store *st_, const struct authconn_rec *r, int64_t cap);
int sq_ac_get(struct store *st_, const char *org_id, const char *project_id, const char *id,
              struct authconn_rec *out);
int sq_ac_list(struct store *st_, const char *org_id, const char *project_id,
               const char *profile_name, const char *domain, struct page *pg,
               struct authconn_rec **rows, size_t *n);
int sq_ac_count(struct store *st_, const char *org_id, int64_t *n);
int sq_ac_update(struct store *st_, const struct authconn_rec *r);
int sq_ac_delete(struct store *st_, const char *org_id, const char *project_id, const char *id);

/* ---- vaults (sqlite_vaults.c) ---- */
extern const char sq_schema_vaults[];
int sq_vault_insert(struct store *st_, const struct vault_rec *v, int64_t cap);
int sq_vault_get(struct store *st_, const char *org_id, const char *project_id,
                 const char *vault_id, const char *id_or_name, struct vault_rec *out);
int sq_vault_list(struct store *st_, const char *org_id, const char *project_id,
                  const char *vault_id, const char *query, struct page *pg, struct vault_rec **rows,
                  size_t *n);
int sq_vault_count(struct store *st_, const char *org_id, const char *vault_id, int64_t *n);
int sq_vault_update(struct store *st_, const struct vault_rec *v, int64_t expected_version);
int sq_vault_delete(struct store *st_, const char *org_id, const char *project_id, const char *id);

/* ---- extensions (sqlite_extensions.c) ---- */
extern const char sq_schema_extensions[];
int sq_ext_create(struct store *st_, struct ext_rec *x);
int sq_ext_get(struct store *st_, const char *org_id, const char *project_id,
               const char *id_or_name, struct ext_rec *out);
int sq_ext_list(struct store *st_, const char *org_id, const char *project_id, const char *name,
                const char *query, struct page *pg, struct ext_rec **rows, size_t *n);
int sq_ext_count(struct store *st_, const char *org_id, int64_t *n);
int sq_ext_touch(struct store *st_, const char *id, int64_t last_used_at);
int sq_ext_delete(struct store *st_, const char *org_id, const char *project_id, const char *id);

/* ---- limits and admission (sqlite_limits.c) ---- */
extern const char sq_schema_limits[];
int sq_limits_get(struct store *st_, const char *org_id, const char *project_id,
                  struct limits_rec *out);
int sq_limits_put(struct store *st_, const struct limits_rec *r);
int sq_session_admit(struct store *st_, const struct session_rec *s, int64_t limit, int64_t *pools,
                     int64_t *project_limit);
int sq_pool_admit(struct store *st_, const struct pool_rec *p, int is_update, int64_t limit,
                  int64_t *pools, int64_t *sessions, int64_t *project_limit);
/* searches (sqlite_search.c) */
extern const char sq_schema_search[];
int sq_search_put(struct store *st_, const char *id, const char *org_id, int64_t created_at,
                  int64_t expires_at, const char *json);
int sq_search_get(struct store *st_, const char *org_id, const char *id, int64_t now, char **json);
int sq_search_prune(struct store *st_, int64_t now);

/* config registry (sqlite_cfgreg.c) */
extern const char sq_schema_cfgreg[];
int sq_cfgreg_analysis_put(struct store *st_, const char *org_id, const char *id,
                           const char *domain, int64_t created_at, const char *json);
int sq_cfgreg_analysis_get(struct store *st_, const char *org_id, const char *id, char **json);
int sq_cfgreg_analysis_list(struct store *st_, const char *org_id, const char *search,
                            struct page *pg, struct cfgreg_text **rows, size_t *n);
int sq_cfgreg_entry_put(struct store *st_, const struct cfgreg_entry_rec *r);
int sq_cfgreg_running(struct store *st_, const char *node_id, struct page *pg,
                      struct cfgreg_text **rows, size_t *n);
extern const char sq_schema_cfgreg_node[];
int sq_cfgreg_entry_settle(struct store *st_, const char *org_id, const char *domain,
                           const char *status, const char *json, const char *was);
int sq_cfgreg_entry_get(struct store *st_, const char *org_id, const char *domain, char **json);
int sq_cfgreg_entry_list(struct store *st_, const char *org_id, const char *search,
                         enum cfgreg_sort sort, int descending, struct page *pg,
                         struct cfgreg_text **rows, size_t *n);

int sq_cfgreg_prune(struct store *st_, const char *org_id, size_t keep_analyses,
                    size_t keep_entries);
/* apps (sqlite_apps.c) */
extern const char sq_schema_apps[];
int sq_appobj_put(struct store *st_, const struct appobj_rec *r);
int sq_appobj_get(struct store *st_, const char *org_id, const char *project_id, const char *kind,
                  const char *id, struct appobj_rec *out);
int sq_appobj_list(struct store *st_, const char *org_id, const char *project_id, const char *kind,
                   const char *app_name, const char *version, const char *status,
                   const char *match1, const char *match2, struct page *pg,
                   struct appobj_rec **rows, size_t *n);
int sq_appobj_delete(struct store *st_, const char *org_id, const char *project_id,
                     const char *kind, const char *id);
int sq_appobj_bytes(struct store *st_, const char *org_id, const char *kind, int64_t *n);
int sq_appobj_unfinished(struct store *st_, struct page *pg, struct appobj_rec **rows, size_t *n);
int sq_appobj_settle(struct store *st_, const struct appobj_rec *r, const char *was);

#endif
