/*
 * The store contract (store/store.h), run against both backends: every case
 * of the contract runs once on SQLite (a temporary folder) and once on
 * PostgreSQL (a throwaway server from scripts/pgtmp.sh, one fresh database
 * per case, copied from a migrated template). The cluster ops, which only a
 * shared store has, run on PostgreSQL alone, with real concurrency (threads
 * over two store handles, as two processes would). Each case names the
 * promise of the header it checks.
 *
 * PostgreSQL is required: when its server cannot be started, every
 * PostgreSQL case fails (CI installs postgresql-15).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/xalloc.h"
#include "store/store.h"

/* ---- fixtures ---- */

static char dir[256];

static int open_sqlite(void **state)
{
    snprintf(dir, sizeof dir, "/tmp/browserd-store-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    struct err e;
    err_init(&e);
    struct store *st;
    if (store_open_sqlite(dir, &st, &e) != 0)
        return -1;
    *state = st;
    return 0;
}

static int close_sqlite(void **state)
{
    store_close(*state);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* The PostgreSQL server of the whole run: its folder, its URL's host part,
 * the current case's database URL. pg_up is 0 when it could not start. */
static char pg_dir[64];
static int pg_up;
static int pg_db_seq;
static char pg_db[32];
static char pg_url[256];

static void pg_url_of(const char *db, char *out, size_t cap)
{
    snprintf(out, cap, "postgresql:///%s?host=%s&user=browserd", db, pg_dir);
}

/* Runs one parameterless statement on database db; 0 on success. */
static int pg_admin(const char *db, const char *sql)
{
    char url[256];
    pg_url_of(db, url, sizeof url);
    PGconn *c = PQconnectdb(url);
    int ok = PQstatus(c) == CONNECTION_OK;
    if (ok) {
        PGresult *r = PQexec(c, sql);
        ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
        if (!ok)
            fprintf(stderr, "pg_admin %s: %s", sql, PQerrorMessage(c));
        PQclear(r);
    } else {
        fprintf(stderr, "pg_admin: %s", PQerrorMessage(c));
    }
    PQfinish(c);
    return ok ? 0 : -1;
}

/* One int64 read from the current case's database: sql with one text
 * parameter (may be NULL when sql has none). -1 on failure. */
__attribute__((unused)) static int64_t pg_scalar(const char *sql, const char *param)
{
    PGconn *c = PQconnectdb(pg_url);
    int64_t v = -1;
    if (PQstatus(c) == CONNECTION_OK) {
        const char *vals[1] = {param};
        PGresult *r = PQexecParams(c, sql, param ? 1 : 0, NULL, vals, NULL, NULL, 0);
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
            v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        else
            fprintf(stderr, "pg_scalar %s: %s", sql, PQerrorMessage(c));
        PQclear(r);
    }
    PQfinish(c);
    return v;
}

/* Starts the server (scripts/pgtmp.sh, from the repository root where unit
 * tests run) and migrates a template database every case copies. */
static int pg_group_setup(void **state)
{
    (void)state;
    snprintf(pg_dir, sizeof pg_dir, "/tmp/bdpg-XXXXXX");
    if (!mkdtemp(pg_dir))
        return 0;
    const char *script = "scripts/pgtmp.sh";
    if (access(script, X_OK) != 0) {
        fprintf(stderr, "test_store: %s not found: run from the repository root\n", script);
        return 0;
    }
    char cmd[256];
    snprintf(cmd, sizeof cmd, "%s start %s", script, pg_dir);
    int64_t t0 = clock_mono_ms();
    FILE *f = popen(cmd, "r");
    char line[512] = "";
    if (f) {
        if (!fgets(line, sizeof line, f))
            line[0] = '\0';
        if (pclose(f) != 0)
            line[0] = '\0';
    }
    if (strncmp(line, "postgresql://", 13) != 0) {
        fprintf(stderr, "test_store: PostgreSQL did not start (scripts/pgtmp.sh)\n");
        return 0;
    }
    fprintf(stderr, "test_store: PostgreSQL up in %lld ms\n", (long long)(clock_mono_ms() - t0));
    if (pg_admin("postgres", "CREATE DATABASE tmpl") != 0)
        return 0;
    char url[256];
    pg_url_of("tmpl", url, sizeof url);
    struct err e;
    err_init(&e);
    struct store *st;
    if (store_open_pg(url, &st, &e) != 0) {
        fprintf(stderr, "test_store: migrating the template: %s\n", e.message);
        return 0;
    }
    store_close(st);
    pg_up = 1;
    return 0;
}

/* Stops the server by its PID (SIGQUIT: immediate shutdown), waits for it to
 * be gone, then lets the script remove the folder. */
static int pg_group_teardown(void **state)
{
    (void)state;
    if (!pg_dir[0])
        return 0;
    char path[128];
    snprintf(path, sizeof path, "%s/data/postmaster.pid", pg_dir);
    FILE *f = fopen(path, "r");
    long pid = 0;
    if (f) {
        if (fscanf(f, "%ld", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    if (pid > 0 && kill((pid_t)pid, SIGQUIT) == 0) {
        int64_t deadline = clock_mono_ms() + 10000;
        while (kill((pid_t)pid, 0) == 0 && clock_mono_ms() < deadline) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    char cmd[256];
    snprintf(cmd, sizeof cmd, "scripts/pgtmp.sh stop %s", pg_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static int open_pg(void **state)
{
    if (!pg_up) {
        fprintf(stderr, "PostgreSQL is not running: the case fails\n");
        return -1;
    }
    snprintf(pg_db, sizeof pg_db, "c%d", ++pg_db_seq);
    char sql[96];
    snprintf(sql, sizeof sql, "CREATE DATABASE %s TEMPLATE tmpl", pg_db);
    if (pg_admin("postgres", sql) != 0)
        return -1;
    pg_url_of(pg_db, pg_url, sizeof pg_url);
    struct err e;
    err_init(&e);
    struct store *st;
    if (store_open_pg(pg_url, &st, &e) != 0)
        return -1;
    *state = st;
    return 0;
}

static int close_pg(void **state)
{
    store_close(*state);
    char sql[96];
    snprintf(sql, sizeof sql, "DROP DATABASE %s WITH (FORCE)", pg_db);
    return pg_admin("postgres", sql);
}

/* ---- the contract, on both backends ---- */

static void make_org(struct store *st, struct org_rec *o, struct project_rec *p)
{
    memset(o, 0, sizeof *o);
    memset(p, 0, sizeof *p);
    snprintf(o->name, sizeof o->name, "acme");
    snprintf(o->plan, sizeof o->plan, "developer");
    snprintf(o->plan_status, sizeof o->plan_status, "active");
    o->projects_enabled = 1;
    o->overrides = xstrdup("{}");
    snprintf(p->name, sizeof p->name, "default");
    assert_int_equal(store_org_create(st, o, p), 0);
}

/* "org_create: Creates the org and its default project in one transaction;
 * fills the ids and times." */
static void org_create_fills_ids_and_default_project(void **state)
{
    struct store *st = *state;
    struct org_rec o, got;
    struct project_rec p;
    make_org(st, &o, &p);
    assert_int_equal(strlen(o.id), 24);
    assert_string_equal(o.default_project_id, p.id);
    memset(&got, 0, sizeof got);
    assert_int_equal(store_org_get(st, o.id, &got), 0);
    assert_string_equal(got.name, "acme");
    assert_string_equal(got.overrides, "{}");
    org_rec_clear(&got);
    assert_int_equal(store_org_get(st, "nosuchorg0000000000000000", &got), E_NOTFOUND);
    org_rec_clear(&o);
}

/* "meta_init: Sets key to val unless it already has a value." */
static void meta_init_keeps_the_first_value(void **state)
{
    struct store *st = *state;
    char out[64];
    assert_int_equal(store_meta_init(st, "k", "first", out, sizeof out), 0);
    assert_string_equal(out, "first");
    assert_int_equal(store_meta_init(st, "k", "second", out, sizeof out), 0);
    assert_string_equal(out, "first");
}

/* "project_delete: Refuses (E_CONFLICT) to delete the org's last active
 * project; project_update likewise refuses to archive it." Unique names: 409. */
static void last_active_project_and_unique_names(void **state)
{
    struct store *st = *state;
    struct org_rec o;
    struct project_rec p, q;
    make_org(st, &o, &p);
    assert_int_equal(store_project_delete(st, o.id, p.id), E_CONFLICT);
    p.updated_at = clock_now_ms();
    snprintf(p.status, sizeof p.status, "archived");
    assert_int_equal(store_project_update(st, &p), E_CONFLICT);
    memset(&q, 0, sizeof q);
    snprintf(q.org_id, sizeof q.org_id, "%s", o.id);
    snprintf(q.name, sizeof q.name, "default");
    assert_int_equal(store_project_create(st, &q), E_CONFLICT);
    snprintf(q.name, sizeof q.name, "second");
    assert_int_equal(store_project_create(st, &q), 0);
    assert_int_equal(store_project_delete(st, o.id, p.id), 0);
    /* the default moves to the oldest remaining active project */
    struct org_rec got;
    memset(&got, 0, sizeof got);
    assert_int_equal(store_org_get(st, o.id, &got), 0);
    assert_string_equal(got.default_project_id, q.id);
    org_rec_clear(&got);
    org_rec_clear(&o);
}

/* "auth_lookup: The key with that hash and its org, in one read." */
static void auth_lookup_finds_key_and_org(void **state)
{
    struct store *st = *state;
    struct org_rec o, org;
    struct project_rec p;
    make_org(st, &o, &p);
    struct apikey_rec k, got;
    memset(&k, 0, sizeof k);
    snprintf(k.org_id, sizeof k.org_id, "%s", o.id);
    snprintf(k.name, sizeof k.name, "ci");
    crypto_sha256_hex("secret", 6, k.key_hash);
    snprintf(k.masked_key, sizeof k.masked_key, "bd_se...cret");
    assert_int_equal(store_key_create(st, &k), 0);
    memset(&org, 0, sizeof org);
    assert_int_equal(store_auth_lookup(st, k.key_hash, &got, &org), 0);
    assert_string_equal(got.id, k.id);
    assert_string_equal(org.id, o.id);
    org_rec_clear(&org);
    char other[CRYPTO_SHA256_HEX];
    crypto_sha256_hex("other", 5, other);
    assert_int_equal(store_auth_lookup(st, other, &got, &org), E_NOTFOUND);
    org_rec_clear(&o);
}

/* Sessions: "Insert fails with E_CONFLICT when an active session of the
 * project already has the (non-empty) name"; a deleted session frees it. */
static void session_names_unique_among_active(void **state)
{
    struct store *st = *state;
    struct org_rec o;
    struct project_rec p;
    make_org(st, &o, &p);
    struct session_rec a, b;
    memset(&a, 0, sizeof a);
    crypto_new_id(a.id);
    snprintf(a.org_id, sizeof a.org_id, "%s", o.id);
    snprintf(a.project_id, sizeof a.project_id, "%s", p.id);
    snprintf(a.name, sizeof a.name, "s1");
    snprintf(a.status, sizeof a.status, "active");
    a.data = "{}";
    assert_int_equal(store_session_insert(st, &a), 0);
    b = a;
    crypto_new_id(b.id);
    assert_int_equal(store_session_insert(st, &b), E_CONFLICT);
    snprintf(a.status, sizeof a.status, "deleted");
    a.deleted_at = clock_now_ms();
    assert_int_equal(store_session_update(st, &a), 0);
    assert_int_equal(store_session_insert(st, &b), 0);
    struct session_rec got;
    memset(&got, 0, sizeof got);
    assert_int_equal(store_session_get(st, o.id, p.id, "s1", 0, &got), 0);
    assert_string_equal(got.id, b.id);
    session_rec_clear(&got);
    assert_int_equal(store_session_get(st, o.id, p.id, a.id, 0, &got), E_NOTFOUND);
    assert_int_equal(store_session_get(st, o.id, p.id, a.id, 1, &got), 0);
    session_rec_clear(&got);
    org_rec_clear(&o);
}

/* "A page of a list: the rows plus whether more follow." */
static void lists_page_with_has_more(void **state)
{
    struct store *st = *state;
    struct org_rec o;
    struct project_rec p;
    make_org(st, &o, &p);
    for (int i = 0; i < 4; i++) {
        struct project_rec q;
        memset(&q, 0, sizeof q);
        snprintf(q.org_id, sizeof q.org_id, "%s", o.id);
        snprintf(q.name, sizeof q.name, "p%d", i);
        assert_int_equal(store_project_create(st, &q), 0);
    }
    struct page pg = {.limit = 3, .offset = 0};
    struct project_rec *rows = NULL;
    size_t n = 0;
    assert_int_equal(store_project_list(st, o.id, NULL, &pg, &rows, &n), 0);
    assert_int_equal(n, 3);
    assert_true(pg.has_more);
    xfree(rows);
    pg.offset = 3;
    assert_int_equal(store_project_list(st, o.id, NULL, &pg, &rows, &n), 0);
    assert_int_equal(n, 2);
    assert_false(pg.has_more);
    xfree(rows);
    org_rec_clear(&o);
}

/* The contract's cases: each runs on both backends. */
#define CONTRACT_CASES(X)                                                                          \
    X(org_create_fills_ids_and_default_project)                                                    \
    X(meta_init_keeps_the_first_value)                                                             \
    X(last_active_project_and_unique_names)                                                        \
    X(auth_lookup_finds_key_and_org)                                                               \
    X(session_names_unique_among_active)                                                           \
    X(lists_page_with_has_more)

/* The cluster ops: PostgreSQL only. */
#define CLUSTER_CASES(X)

#define SQLITE_CASE(f) {"sqlite: " #f, f, open_sqlite, close_sqlite, NULL},
#define PG_CASE(f)     {"postgresql: " #f, f, open_pg, close_pg, NULL},

int main(void)
{
    const struct CMUnitTest tests[] = {CONTRACT_CASES(SQLITE_CASE) CONTRACT_CASES(PG_CASE)
                                           CLUSTER_CASES(PG_CASE)};
    return cmocka_run_group_tests_name("store/contract (sqlite, postgresql)", tests, pg_group_setup,
                                       pg_group_teardown);
}
