/*
 * The embedded store: SQLite in WAL mode.
 *
 * Connections live in a small pool (one per concurrently active thread), each
 * with its own cache of prepared statements keyed by the SQL text's address.
 * Writes run in BEGIN IMMEDIATE transactions so that a writer takes the lock
 * up front instead of failing on upgrade; synchronous=FULL makes every
 * acknowledged commit survive a crash of the process or the machine (but a
 * new session's row: sqx_unsynced, docs/store.md). Other
 * processes (the `admin` commands) may open the same file at the same time:
 * nothing is cached across calls, except auth_lookup's rows, which are
 * dropped as soon as any connection of any process commits (see
 * sq_authcache_open in sqlite_tenancy.c).
 */
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/limits.h"
#include "core/crypto.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/xalloc.h"
#include "store/sqlite_internal.h"

int sqx_fail(sqlite3 *db, const char *what)
{
    log_error("store: %s: %s", what, sqlite3_errmsg(db));
    return E_INTERNAL;
}

static int sqx_conn_open(const char *path, struct conn **out)
{
    struct conn *c = xcalloc(1, sizeof *c);
    int rc = sqlite3_open_v2(
        path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        log_error("store: open %s: %s", path, c->db ? sqlite3_errmsg(c->db) : "out of memory");
        sqlite3_close(c->db);
        xfree(c);
        return E_INTERNAL;
    }
    sqlite3_busy_timeout(c->db, 5000);
    char *msg = NULL;
    if (sqlite3_exec(c->db,
                     "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;",
                     NULL, NULL, &msg) != SQLITE_OK) {
        log_error("store: pragmas: %s", msg ? msg : "?");
        sqlite3_free(msg);
        sqlite3_close(c->db);
        xfree(c);
        return E_INTERNAL;
    }
    *out = c;
    return 0;
}

static void sqx_conn_close(struct conn *c)
{
    for (size_t i = 0; i < c->ncache; i++)
        sqlite3_finalize(c->cache[i].st);
    sqlite3_close(c->db);
    xfree(c);
}

struct conn *sqx_conn_get(struct sq *s)
{
    pthread_mutex_lock(&s->mu);
    struct conn *c = s->idle;
    if (c)
        s->idle = c->next;
    pthread_mutex_unlock(&s->mu);
    if (!c && sqx_conn_open(s->path, &c) != 0)
        return NULL;
    return c;
}

void sqx_conn_put(struct sq *s, struct conn *c)
{
    if (!c)
        return;
    if (c->broken) {
        sqx_conn_close(c);
        return;
    }
    pthread_mutex_lock(&s->mu);
    c->next = s->idle;
    s->idle = c;
    pthread_mutex_unlock(&s->mu);
}

/* Returns the connection's cached statement for sql (a static string), reset
 * and with its bindings cleared, or NULL after logging the failure. */
sqlite3_stmt *sqx_prep(struct conn *c, const char *sql)
{
    for (size_t i = 0; i < c->ncache; i++)
        if (c->cache[i].sql == sql) {
            sqlite3_reset(c->cache[i].st);
            sqlite3_clear_bindings(c->cache[i].st);
            return c->cache[i].st;
        }
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) != SQLITE_OK) {
        sqx_fail(c->db, sql);
        return NULL;
    }
    if (c->ncache < STMT_CACHE) {
        c->cache[c->ncache].sql = sql;
        c->cache[c->ncache].st = st;
        c->ncache++;
    }
    return st;
}

/* Binds arguments by a format: 's' text (NULL binds NULL), 'i' int64. */
static void sqx_bindv(sqlite3_stmt *st, const char *fmt, va_list ap)
{
    for (int i = 1; *fmt; fmt++, i++) {
        if (*fmt == 's') {
            const char *v = va_arg(ap, const char *);
            sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
        } else {
            sqlite3_bind_int64(st, i, va_arg(ap, int64_t));
        }
    }
}

/* Prepares, binds and steps once. Returns SQLITE_ROW, SQLITE_DONE, or -1. */
int sqx_q(struct conn *c, sqlite3_stmt **out, const char *sql, const char *fmt, ...)
{
    int64_t start = clock_mono_us();
    sqlite3_stmt *st = sqx_prep(c, sql);
    if (!st)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    sqx_bindv(st, fmt, ap);
    va_end(ap);
    int rc = sqlite3_step(st);
    metrics_store_query(clock_mono_us() - start);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        if (rc == SQLITE_CONSTRAINT) {
            sqlite3_reset(st);
            return -2;
        }
        sqx_fail(c->db, sql);
        sqlite3_reset(st);
        return -1;
    }
    if (out)
        *out = st;
    else
        sqlite3_reset(st);
    return rc;
}

int sqx_qrc(int rc)
{
    return rc == -2 ? E_CONFLICT : rc < 0 ? E_INTERNAL : 0;
}

int sqx_begin(struct conn *c)
{
    return sqx_q(c, NULL, "BEGIN IMMEDIATE", "") < 0 ? E_INTERNAL : 0;
}

int sqx_commit(struct conn *c)
{
    return sqx_q(c, NULL, "COMMIT", "") < 0 ? E_INTERNAL : 0;
}

void sqx_rollback(struct conn *c)
{
    if (!sqlite3_get_autocommit(c->db))
        (void)sqx_q(c, NULL, "ROLLBACK", "");
}

int sqx_cap_begin(struct conn *c, int64_t cap, const char *org_id, const char *count_sql,
                  const char *arg)
{
    if (cap <= 0)
        return 0;
    sqlite3_stmt *st = NULL;
    int ret = sqx_begin(c);
    if (ret)
        return ret;
    int rc =
        arg ? sqx_q(c, &st, count_sql, "ss", org_id, arg) : sqx_q(c, &st, count_sql, "s", org_id);
    if (rc != SQLITE_ROW)
        return E_INTERNAL;
    if (sqlite3_column_int64(st, 0) >= cap)
        ret = E_LIMIT;
    sqlite3_reset(st);
    return ret;
}

int sqx_cap_end(struct conn *c, int64_t cap, int ret)
{
    if (cap <= 0)
        return ret;
    if (ret == 0)
        ret = sqx_commit(c);
    if (ret)
        sqx_rollback(c);
    return ret;
}

void sqx_col(sqlite3_stmt *st, int i, char *buf, size_t cap)
{
    if (cap == 0)
        return;
    const unsigned char *t = sqlite3_column_text(st, i);
    size_t n = t ? (size_t)sqlite3_column_bytes(st, i) : 0;
    if (n >= cap)
        n = cap - 1;
    if (n)
        memcpy(buf, t, n);
    buf[n] = '\0';
}

char *sqx_data(sqlite3_stmt *st, int i)
{
    const unsigned char *d = sqlite3_column_text(st, i);
    return xstrdup(d ? (const char *)d : "{}");
}

int sqx_touched(struct conn *c, int rc)
{
    if (rc < 0)
        return sqx_qrc(rc);
    return rc == SQLITE_DONE && sqlite3_changes(c->db) ? 0 : E_NOTFOUND;
}

/* ---- commits synced in the background ---- */

struct sq_syncer {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *wal; /* the WAL file's path */
    int pending, stopping;
    uint64_t requested, done; /* passes asked for; the last one asked for when a pass began */
};

/* fdatasync through our own descriptor: the kernel flushes the file, not the
 * descriptor, so this makes every frame SQLite has written durable. */
static void sync_wal(const char *wal)
{
    int fd = open(wal, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return; /* no WAL: a checkpoint removed it, nothing is pending */
    if (fdatasync(fd) != 0)
        log_error("store: fdatasync %s: %m", wal);
    close(fd);
}

static void *syncer_main(void *arg)
{
    struct sq_syncer *y = arg;
    pthread_mutex_lock(&y->mu);
    for (;;) {
        while (!y->pending && !y->stopping)
            pthread_cond_wait(&y->cv, &y->mu);
        if (!y->pending)
            break;
        y->pending = 0;
        uint64_t covers = y->requested;
        pthread_mutex_unlock(&y->mu);
        sync_wal(y->wal);
        pthread_mutex_lock(&y->mu);
        y->done = covers;
        pthread_cond_broadcast(&y->cv);
    }
    pthread_mutex_unlock(&y->mu);
    return NULL;
}

void sqx_sync_soon(struct sq *s)
{
    pthread_mutex_lock(&s->mu);
    if (!s->syncer) {
        struct sq_syncer *y = xcalloc(1, sizeof *y);
        pthread_mutex_init(&y->mu, NULL);
        clock_cond_init(&y->cv);
        y->wal = xasprintf("%s-wal", s->path);
        if (pthread_create(&y->thread, NULL, syncer_main, y) != 0) {
            pthread_mutex_unlock(&s->mu);
            sync_wal(y->wal); /* no thread: sync here rather than not at all */
            pthread_cond_destroy(&y->cv);
            pthread_mutex_destroy(&y->mu);
            xfree(y->wal);
            xfree(y);
            return;
        }
        s->syncer = y;
    }
    struct sq_syncer *y = s->syncer;
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_lock(&y->mu);
    y->pending = 1;
    y->requested++;
    pthread_cond_broadcast(&y->cv);
    pthread_mutex_unlock(&y->mu);
}

int sqx_sync_wait(struct sq *s, int timeout_ms)
{
    pthread_mutex_lock(&s->mu);
    struct sq_syncer *y = s->syncer;
    pthread_mutex_unlock(&s->mu);
    if (!y)
        return 0;
    struct timespec dl = clock_deadline(timeout_ms);
    pthread_mutex_lock(&y->mu);
    uint64_t want = y->requested;
    int rc = 0;
    while (y->done < want && rc == 0)
        rc = pthread_cond_timedwait(&y->cv, &y->mu, &dl);
    int ok = y->done >= want;
    pthread_mutex_unlock(&y->mu);
    return ok ? 0 : -1;
}

/* Ends the syncer after its last pass: nothing acknowledged stays unsynced. */
static void syncer_stop(struct sq_syncer *y)
{
    if (!y)
        return;
    pthread_mutex_lock(&y->mu);
    y->stopping = 1;
    pthread_cond_signal(&y->cv);
    pthread_mutex_unlock(&y->mu);
    pthread_join(y->thread, NULL);
    pthread_cond_destroy(&y->cv);
    pthread_mutex_destroy(&y->mu);
    xfree(y->wal);
    xfree(y);
}

int sqx_unsynced(struct sq *s, struct conn *c, int (*fn)(struct conn *c, const void *arg),
                 const void *arg)
{
    if (sqlite3_exec(c->db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL) != SQLITE_OK)
        return fn(c, arg); /* commits as every other write does */
    int rc = fn(c, arg);
    if (sqlite3_exec(c->db, "PRAGMA synchronous=FULL", NULL, NULL, NULL) != SQLITE_OK) {
        /* Never pool a connection that would skip syncs. */
        sqx_fail(c->db, "synchronous=FULL");
        c->broken = 1;
    }
    sqx_sync_soon(s);
    return rc;
}

/* ---- lifecycle ---- */

static void sq_close(struct store *st_)
{
    struct sq *s = (struct sq *)st_;
    syncer_stop(s->syncer);
    sq_authcache_close(s);
    while (s->idle) {
        struct conn *c = s->idle;
        s->idle = c->next;
        sqx_conn_close(c);
    }
    pthread_mutex_destroy(&s->mu);
    xfree(s->path);
    xfree(s);
}

static const struct store_ops sqx_ops = {
    .name = "sqlite",
    .close = sq_close,
    .meta_get = sq_meta_get,
    .meta_init = sq_meta_init,
    .org_count = sq_org_count,
    .org_create = sq_org_create,
    .org_get = sq_org_get,
    .org_update = sq_org_update,
    .plan_get = sq_plan_get,
    .plan_put = sq_plan_put,
    .plan_each = sq_plan_each,
    .project_create = sq_project_create,
    .project_get = sq_project_get,
    .project_list = sq_project_list,
    .project_update = sq_project_update,
    .project_delete = sq_project_delete,
    .key_create = sq_key_create,
    .key_get = sq_key_get,
    .key_by_hash = sq_key_by_hash,
    .auth_lookup = sq_auth_lookup,
    .key_list = sq_key_list,
    .key_update = sq_key_update,
    .key_rotate = sq_key_rotate,
    .session_insert = sq_session_insert,
    .session_get = sq_session_get,
    .session_list = sq_session_list,
    .session_update = sq_session_update,
    .session_list_active = sq_session_list_active,
    .profile_create = sq_profile_create,
    .profile_get = sq_profile_get,
    .profile_get_by_id = sq_profile_get_by_id,
    .profile_list = sq_profile_list,
    .profile_count = sq_profile_count,
    .profile_ids = sq_profile_ids,
    .profile_update = sq_profile_update,
    .profile_touch = sq_profile_touch,
    .profile_delete = sq_profile_delete,
    /* ops: profiles */
    .pool_insert = sq_pool_insert,
    .pool_get = sq_pool_get,
    .pool_list = sq_pool_list,
    .pool_update = sq_pool_update,
    .pool_list_active = sq_pool_list_active,
    /* ops: pools */
    .proxy_insert = sq_proxy_insert,
    .proxy_get = sq_proxy_get,
    .proxy_find = sq_proxy_find,
    .proxy_list = sq_proxy_list,
    .proxy_update = sq_proxy_update,
    .proxy_delete = sq_proxy_delete,
    /* ops: proxies */
    .telem_events_insert = sq_telem_events_insert,
    .telem_events_list = sq_telem_events_list,
    .telem_events_max_seq = sq_telem_events_max_seq,
    .telem_events_purge = sq_telem_events_purge,
    .telem_bytes_by_org = sq_telem_bytes_by_org,
    .telem_events_trim_org = sq_telem_events_trim_org,
    .otlp_dest_create = sq_otlp_dest_create,
    .otlp_dest_get = sq_otlp_dest_get,
    .otlp_dest_list = sq_otlp_dest_list,
    .otlp_dest_update = sq_otlp_dest_update,
    .otlp_dest_delete = sq_otlp_dest_delete,
    /* ops: telemetry */
    .audit_insert = sq_audit_insert,
    .audit_list = sq_audit_list,
    .audit_prune = sq_audit_prune,
    .audit_trim = sq_audit_trim,
    /* ops: audit */
    .ext_create = sq_ext_create,
    .ext_get = sq_ext_get,
    .ext_list = sq_ext_list,
    .ext_count = sq_ext_count,
    .ext_touch = sq_ext_touch,
    .ext_delete = sq_ext_delete,
    /* ops: extensions */
    .session_admit = sq_session_admit,
    .pool_admit = sq_pool_admit,
    .limits_get = sq_limits_get,
    .limits_put = sq_limits_put,
    .cred_insert = sq_cred_insert,
    .cred_get = sq_cred_get,
    .cred_list = sq_cred_list,
    .cred_count = sq_cred_count,
    .cred_update = sq_cred_update,
    .cred_delete = sq_cred_delete,
    /* ops: credentials */
    .vault_insert = sq_vault_insert,
    .vault_get = sq_vault_get,
    .vault_list = sq_vault_list,
    .vault_count = sq_vault_count,
    .vault_update = sq_vault_update,
    .vault_delete = sq_vault_delete,
    /* ops: vaults */
    .ac_insert = sq_ac_insert,
    .ac_get = sq_ac_get,
    .ac_list = sq_ac_list,
    .ac_count = sq_ac_count,
    .ac_update = sq_ac_update,
    .ac_delete = sq_ac_delete,
    /* ops: authconn */
    .search_put = sq_search_put,
    .search_get = sq_search_get,
    .search_prune = sq_search_prune,
    .cfgreg_analysis_put = sq_cfgreg_analysis_put,
    .cfgreg_analysis_get = sq_cfgreg_analysis_get,
    .cfgreg_analysis_list = sq_cfgreg_analysis_list,
    .cfgreg_entry_put = sq_cfgreg_entry_put,
    .cfgreg_entry_get = sq_cfgreg_entry_get,
    .cfgreg_entry_list = sq_cfgreg_entry_list,
    .cfgreg_prune = sq_cfgreg_prune,
    .cfgreg_running = sq_cfgreg_running,
    .cfgreg_entry_settle = sq_cfgreg_entry_settle,
    .appobj_put = sq_appobj_put,
    .appobj_get = sq_appobj_get,
    .appobj_list = sq_appobj_list,
    .appobj_delete = sq_appobj_delete,
    .appobj_bytes = sq_appobj_bytes,
    .appobj_unfinished = sq_appobj_unfinished,
    .appobj_settle = sq_appobj_settle,
};

/* Every schema of the backend, in the order they are applied. Each is
 * recorded by name in schema_migrations once applied, so resources can be
 * added in any order without renumbering. */
static const struct sq_migration migrations[] = {
    {"0001_tenancy", sq_schema_tenancy},
    {"0002_sessions", sq_schema_sessions},
    {"0003_profiles", sq_schema_profiles},
    /* migrations: profiles */
    {"0004_pools", sq_schema_pools},
    /* migrations: pools */
    {"0005_proxies", sq_schema_proxies},
    /* migrations: proxies */
    {"0010_telemetry", sq_schema_telemetry},
    /* migrations: telemetry */
    {"0019_extensions", sq_schema_extensions},
    /* migrations: extensions */
    {"0020_cluster", sq_schema_cluster},
    {"0021_profiles_seq", sq_schema_profiles_seq},
    {"0030_audit_logs", sq_schema_audit},
    {"0031_audit_entry_id", sq_schema_audit_entry_id},
    {"0033_limits", sq_schema_limits},
    {"0034_credentials", sq_schema_credentials},
    {"0035_vaults", sq_schema_vaults},
    {"0037_auth_connections", sq_schema_authconn},
    {"0040_searches", sq_schema_search},
    {"0041_config_registry", sq_schema_cfgreg},
    {"0036_apps", sq_schema_apps},
    {"0042_cfgreg_node", sq_schema_cfgreg_node},
    {"0047_sessions_ended", sq_schema_sessions_ended},
};

static int migrate(struct conn *c)
{
    sqlite3_stmt *st;
    if (sqx_begin(c))
        return E_INTERNAL;
    if (sqlite3_exec(c->db,
                     "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY,"
                     " applied_at INTEGER NOT NULL)",
                     NULL, NULL, NULL) != SQLITE_OK) {
        sqx_rollback(c);
        return sqx_fail(c->db, "schema_migrations");
    }
    for (size_t i = 0; i < sizeof migrations / sizeof migrations[0]; i++) {
        int rc = sqx_q(c, &st, "SELECT 1 FROM schema_migrations WHERE name = ?", "s",
                       migrations[i].name);
        if (rc == SQLITE_ROW) {
            sqlite3_reset(st);
            continue;
        }
        char *msg = NULL;
        if (rc != SQLITE_DONE ||
            sqlite3_exec(c->db, migrations[i].sql, NULL, NULL, &msg) != SQLITE_OK ||
            sqx_q(c, NULL, "INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)", "si",
                  migrations[i].name, clock_now_ms()) != SQLITE_DONE) {
            log_error("store: migration %s: %s", migrations[i].name,
                      msg ? msg : sqlite3_errmsg(c->db));
            sqlite3_free(msg);
            sqx_rollback(c);
            return E_INTERNAL;
        }
    }
    return sqx_commit(c);
}

int store_open_sqlite(const char *dir, struct store **out, struct err *e)
{
    *out = NULL;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return err_set(e, E_INTERNAL, "internal", "cannot create data folder %s: %s", dir,
                       strerror(errno));
    struct sq *s = xcalloc(1, sizeof *s);
    s->base.ops = &sqx_ops;
    s->base.sessions_ended_kept = LIM_SESSIONS_ENDED_KEPT;
    s->path = xasprintf("%s/browserd.db", dir);
    pthread_mutex_init(&s->mu, NULL);
    struct conn *c;
    if (sqx_conn_open(s->path, &c) != 0) {
        sq_close(&s->base);
        return err_set(e, E_INTERNAL, "internal", "cannot open the store in %s", dir);
    }
    if (migrate(c) != 0) {
        sqx_conn_close(c);
        sq_close(&s->base);
        return err_set(e, E_INTERNAL, "internal", "cannot migrate the store in %s", dir);
    }
    sqx_conn_put(s, c);
    sq_authcache_open(s);
    *out = &s->base;
    return 0;
}

void store_close(struct store *st)
{
    if (st)
        st->ops->close(st);
}
