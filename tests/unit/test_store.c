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
#include "core/limits.h"
#include "core/xalloc.h"
#include "store/sqlite_internal.h"
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

/* One int64 read from the database at url: sql with one text parameter
 * (may be NULL when sql has none). -1 on failure. */
static int64_t pg_scalar_on(const char *url, const char *sql, const char *param)
{
    PGconn *c = PQconnectdb(url);
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

/* pg_scalar_on the current case's database. */
static int64_t pg_scalar(const char *sql, const char *param)
{
    return pg_scalar_on(pg_url, sql, param);
}

/* Starts the server (scripts/pgtmp.sh, from the repository root where unit
 * tests run) and migrates a template database every case copies. */
static int pg_group_setup(void **state)
{
    (void)state;
    const char *script = "scripts/pgtmp.sh";
    if (access(script, X_OK) != 0) {
        fprintf(stderr, "test_store: %s not found: run from the repository root\n", script);
        return 0;
    }
    snprintf(pg_dir, sizeof pg_dir, "/tmp/bdst-XXXXXX");
    if (!mkdtemp(pg_dir)) {
        pg_dir[0] = '\0';
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
    assert_int_equal(store_project_create(st, &q, 0), E_CONFLICT);
    snprintf(q.name, sizeof q.name, "second");
    assert_int_equal(store_project_create(st, &q, 0), 0);
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
    assert_int_equal(store_key_create(st, &k, 0), 0);
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
        assert_int_equal(store_project_create(st, &q, 0), 0);
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

/* Helpers of the cases below. */
static void new_session(struct session_rec *s, const struct org_rec *o, const struct project_rec *p,
                        const char *node, const char *data)
{
    memset(s, 0, sizeof *s);
    crypto_new_id(s->id);
    snprintf(s->org_id, sizeof s->org_id, "%s", o->id);
    snprintf(s->project_id, sizeof s->project_id, "%s", p->id);
    snprintf(s->status, sizeof s->status, "active");
    snprintf(s->node_id, sizeof s->node_id, "%s", node);
    s->created_at = clock_now_ms();
    s->data = (char *)data;
}

static void new_pool(struct pool_rec *pl, const struct org_rec *o, const struct project_rec *p,
                     const char *node, const char *config)
{
    memset(pl, 0, sizeof *pl);
    crypto_new_id(pl->id);
    snprintf(pl->org_id, sizeof pl->org_id, "%s", o->id);
    snprintf(pl->project_id, sizeof pl->project_id, "%s", p->id);
    snprintf(pl->status, sizeof pl->status, "active");
    snprintf(pl->node_id, sizeof pl->node_id, "%s", node);
    pl->created_at = clock_now_ms();
    pl->config = (char *)config;
}

/* session_rec.node_id: "the node running the browser ("local" on SQLite)";
 * pool_rec.node_id is "written by pool_insert ..., never by pool_update".
 * An empty node_id is stored as "local". */
static void node_ids_round_trip(void **state)
{
    struct store *st = *state;
    struct org_rec o;
    struct project_rec p;
    make_org(st, &o, &p);
    struct session_rec a, b, got;
    new_session(&a, &o, &p, "n1", "{}");
    new_session(&b, &o, &p, "", "{}");
    assert_int_equal(store_session_insert(st, &a), 0);
    assert_int_equal(store_session_insert(st, &b), 0);
    memset(&got, 0, sizeof got);
    assert_int_equal(store_session_get(st, o.id, p.id, a.id, 0, &got), 0);
    assert_string_equal(got.node_id, "n1");
    session_rec_clear(&got);
    assert_int_equal(store_session_get(st, o.id, p.id, b.id, 0, &got), 0);
    assert_string_equal(got.node_id, "local");
    session_rec_clear(&got);
    struct pool_rec pl, pgot;
    new_pool(&pl, &o, &p, "n2", "{\"size\":1}");
    assert_int_equal(store_pool_insert(st, &pl), 0);
    snprintf(pl.node_id, sizeof pl.node_id, "other");
    pl.config = "{\"size\":2}";
    assert_int_equal(store_pool_update(st, &pl), 0);
    memset(&pgot, 0, sizeof pgot);
    assert_int_equal(store_pool_get(st, o.id, p.id, pl.id, &pgot), 0);
    assert_string_equal(pgot.node_id, "n2");
    assert_string_equal(pgot.config, "{\"size\":2}");
    pool_rec_clear(&pgot);
    org_rec_clear(&o);
}

/* limits_get/limits_put, and session_admit/pool_admit holding "the same
 * two counted for s's project below the project's limit (its own
 * max_sessions, else the org's default)" (issue 33.4), on both backends. */
static void project_limits_hold_sessions_and_pools(void **state)
{
    struct store *st = *state;
    struct org_rec o;
    struct project_rec p, p2;
    make_org(st, &o, &p);
    memset(&p2, 0, sizeof p2);
    snprintf(p2.org_id, sizeof p2.org_id, "%s", o.id);
    snprintf(p2.name, sizeof p2.name, "other");
    assert_int_equal(store_project_create(st, &p2, 0), 0);
    struct limits_rec l;
    assert_int_equal(store_limits_get(st, o.id, p.id, &l), 0);
    assert_int_equal(l.max_sessions, 0);
    assert_int_equal(l.max_invocations, 0);
    l.max_sessions = 2;
    l.max_invocations = 7;
    assert_int_equal(store_limits_put(st, &l), 0);
    memset(&l, 0, sizeof l);
    assert_int_equal(store_limits_get(st, o.id, p.id, &l), 0);
    assert_int_equal(l.max_sessions, 2);
    assert_int_equal(l.max_invocations, 7);

    struct session_rec s;
    int64_t pools = -1, sessions = -1, plimit = 0;
    for (int i = 0; i < 2; i++) {
        new_session(&s, &o, &p, "n1", "{}");
        assert_int_equal(store_session_admit(st, &s, -1, &pools, &plimit), 0);
        assert_int_equal(plimit, -1);
    }
    /* a pool's browser is not a standalone session */
    new_session(&s, &o, &p, "n1", "{\"pool\":\"x\"}");
    assert_int_equal(store_session_insert(st, &s), 0);
    new_session(&s, &o, &p, "n1", "{}");
    assert_int_equal(store_session_admit(st, &s, -1, &pools, &plimit), E_LIMIT);
    assert_int_equal(plimit, 2);
    assert_int_equal(pools, 0);
    /* the other project is not held; the org's own limit still is */
    new_session(&s, &o, &p2, "n1", "{}");
    assert_int_equal(store_session_admit(st, &s, 2, &pools, &plimit), E_LIMIT);
    assert_int_equal(plimit, -1);
    assert_int_equal(store_session_admit(st, &s, -1, &pools, &plimit), 0);
    /* pools count their size against the project's cap */
    struct pool_rec a;
    new_pool(&a, &o, &p, "n1", "{\"size\":1}");
    assert_int_equal(store_pool_admit(st, &a, 0, -1, &pools, &sessions, &plimit), E_LIMIT);
    assert_int_equal(plimit, 2);
    assert_int_equal(pools, 1);
    assert_int_equal(sessions, 2);
    /* 0 removes the project's cap; the org's default then holds it */
    l.max_sessions = 0;
    assert_int_equal(store_limits_put(st, &l), 0);
    struct limits_rec d = {0};
    snprintf(d.org_id, sizeof d.org_id, "%s", o.id);
    d.max_sessions = 3;
    assert_int_equal(store_limits_put(st, &d), 0);
    assert_int_equal(store_pool_admit(st, &a, 0, -1, &pools, &sessions, &plimit), 0);
    new_session(&s, &o, &p, "n1", "{}");
    assert_int_equal(store_session_admit(st, &s, -1, &pools, &plimit), E_LIMIT);
    assert_int_equal(plimit, 3);
    assert_int_equal(pools, 1);
    /* a pool leaving the active state is never refused */
    snprintf(a.status, sizeof a.status, "deleted");
    assert_int_equal(store_pool_admit(st, &a, 1, -1, NULL, NULL, &plimit), 0);
    d.max_sessions = 0;
    assert_int_equal(store_limits_put(st, &d), 0);
    assert_int_equal(store_session_admit(st, &s, -1, NULL, &plimit), 0);
    org_rec_clear(&o);
}

/* pool_list: "region (NULL: any) filters on the config's region; a pool
 * stored without one reads as region_default" (issue 33.5). */
static void pool_list_filters_by_region(void **state)
{
    struct store *st = *state;
    struct org_rec o;
    struct project_rec p;
    make_org(st, &o, &p);
    struct pool_rec a, b, c;
    new_pool(&a, &o, &p, "n1", "{\"size\":1,\"region\":\"eu-west\"}");
    new_pool(&b, &o, &p, "n1", "{\"size\":1,\"region\":\"us-east\"}");
    new_pool(&c, &o, &p, "n1", "{\"size\":1}");
    assert_int_equal(store_pool_insert(st, &a), 0);
    assert_int_equal(store_pool_insert(st, &b), 0);
    assert_int_equal(store_pool_insert(st, &c), 0);
    static const struct {
        const char *region, *dflt;
        size_t n;
    } cases[] = {{NULL, "eu-west", 3},
                 {"eu-west", "us-east", 1},
                 {"eu-west", "eu-west", 2},
                 {"us-east", "us-east", 2},
                 {"ap-southeast", "us-east", 0}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct page pg = {.limit = 10};
        struct pool_rec *rows = NULL;
        size_t n = 0;
        assert_int_equal(store_pool_list(st, o.id, p.id, NULL, NULL, cases[i].region, cases[i].dflt,
                                         &pg, &rows, &n),
                         0);
        if (n != cases[i].n)
            fail_msg("region %s (default %s): %zu pools, want %zu", cases[i].region, cases[i].dflt,
                     n, cases[i].n);
        for (size_t k = 0; k < n; k++)
            pool_rec_clear(&rows[k]);
        xfree(rows);
    }
    org_rec_clear(&o);
}

/* store_open: "NULL or "" opens SQLite in dir; anything else is refused
 * (E_INVALID)"; SQLite is not shared (the node ops are NULL). */
static void store_open_selects_the_backend(void **state)
{
    (void)state;
    struct err e;
    err_init(&e);
    struct store *st = NULL;
    assert_int_equal(store_open("mysql://x/y", dir, &st, &e), E_INVALID);
    assert_null(st);
    assert_non_null(strstr(e.message, "BROWSERD_STORE"));
    assert_int_equal(store_open("", dir, &st, &e), 0);
    assert_string_equal(st->ops->name, "sqlite");
    assert_false(store_shared(st));
    assert_null(st->ops->node_register);
    store_close(st);
}

/* Key lists: "name: exact, case-insensitive; query: case-insensitive
 * substring; status: active (default) | deleted | all; sort_by 0
 * created_at, 1 name, 2 expires_at" (never-expiring keys last). */
static void key_list_filters_and_sorts(void **state)
{
    struct store *st = *state;
    struct org_rec o;
    struct project_rec p;
    make_org(st, &o, &p);
    const char *names[] = {"Beta", "alpha", "gamma"};
    const int64_t expires[] = {0, 2000, 1000};
    struct apikey_rec k[3];
    for (int i = 0; i < 3; i++) {
        memset(&k[i], 0, sizeof k[i]);
        snprintf(k[i].org_id, sizeof k[i].org_id, "%s", o.id);
        snprintf(k[i].name, sizeof k[i].name, "%s", names[i]);
        crypto_sha256_hex(names[i], strlen(names[i]), k[i].key_hash);
        snprintf(k[i].masked_key, sizeof k[i].masked_key, "bd_%c%c...wxyz", 'a' + i, 'a' + i);
        k[i].expires_at = expires[i];
        assert_int_equal(store_key_create(st, &k[i], 0), 0);
    }
    struct page pg = {.limit = 10};
    struct apikey_rec *rows = NULL;
    size_t n = 0;
    struct name_filter f = {.sort_by = 1};
    assert_int_equal(store_key_list(st, o.id, &f, &pg, &rows, &n), 0);
    assert_int_equal(n, 3);
    assert_string_equal(rows[0].name, "alpha");
    assert_string_equal(rows[1].name, "Beta");
    assert_string_equal(rows[2].name, "gamma");
    xfree(rows);
    f.descending = 1;
    assert_int_equal(store_key_list(st, o.id, &f, &pg, &rows, &n), 0);
    assert_string_equal(rows[0].name, "gamma");
    xfree(rows);
    f = (struct name_filter){.sort_by = 2};
    assert_int_equal(store_key_list(st, o.id, &f, &pg, &rows, &n), 0);
    assert_string_equal(rows[0].name, "gamma");
    assert_string_equal(rows[1].name, "alpha");
    assert_string_equal(rows[2].name, "Beta");
    xfree(rows);
    f = (struct name_filter){.name = "BETA"};
    assert_int_equal(store_key_list(st, o.id, &f, &pg, &rows, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].id, k[0].id);
    xfree(rows);
    f = (struct name_filter){.query = "AMM"};
    assert_int_equal(store_key_list(st, o.id, &f, &pg, &rows, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].name, "gamma");
    xfree(rows);
    f = (struct name_filter){.query = "BD_BB"}; /* a prefix of the masked key */
    assert_int_equal(store_key_list(st, o.id, &f, &pg, &rows, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].name, "alpha");
    xfree(rows);
    k[1].deleted_at = clock_now_ms();
    assert_int_equal(store_key_update(st, &k[1]), 0);
    f = (struct name_filter){.status = "deleted"};
    assert_int_equal(store_key_list(st, o.id, &f, &pg, &rows, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].id, k[1].id);
    xfree(rows);
    assert_int_equal(store_key_list(st, o.id, NULL, &pg, &rows, &n), 0);
    assert_int_equal(n, 2);
    xfree(rows);
    /* rotate: a fresh key, and the old one's expiry moves */
    struct apikey_rec fresh, got;
    memset(&fresh, 0, sizeof fresh);
    snprintf(fresh.org_id, sizeof fresh.org_id, "%s", o.id);
    snprintf(fresh.name, sizeof fresh.name, "fresh");
    crypto_sha256_hex("fresh", 5, fresh.key_hash);
    assert_int_equal(store_key_rotate(st, o.id, k[0].id, 5000, &fresh, 0), 0);
    assert_int_equal(store_key_get(st, o.id, k[0].id, &got), 0);
    assert_int_equal(got.expires_at, 5000);
    assert_int_equal(store_key_by_hash(st, fresh.key_hash, &got), 0);
    assert_string_equal(got.id, fresh.id);
    assert_int_equal(store_key_rotate(st, o.id, k[1].id, 5000, &fresh, 0), E_NOTFOUND);
    org_rec_clear(&o);
}

static void plans_and_orgs(void **state)
{
    struct store *st = *state;
    assert_int_equal(store_plan_put(st, "b", "{\"x\":1}"), 0);
    assert_int_equal(store_plan_put(st, "a", "{}"), 0);
    assert_int_equal(store_plan_put(st, "b", "{\"x\":2}"), 0);
    char *json = NULL;
    assert_int_equal(store_plan_get(st, "b", &json), 0);
    assert_string_equal(json, "{\"x\":2}");
    xfree(json);
    assert_int_equal(store_plan_get(st, "zz", &json), E_NOTFOUND);
    struct org_rec o, got;
    struct project_rec p;
    make_org(st, &o, &p);
    int64_t n = 0;
    assert_int_equal(store_org_count(st, &n), 0);
    assert_int_equal(n, 1);
    snprintf(o.plan, sizeof o.plan, "scale");
    o.trial_ends_at = 1234;
    xfree(o.overrides);
    o.overrides = xstrdup("{\"max_sessions\":3}");
    assert_int_equal(store_org_update(st, &o), 0);
    memset(&got, 0, sizeof got);
    assert_int_equal(store_org_get(st, o.id, &got), 0);
    assert_string_equal(got.plan, "scale");
    assert_int_equal(got.trial_ends_at, 1234);
    assert_string_equal(got.overrides, "{\"max_sessions\":3}");
    org_rec_clear(&got);
    snprintf(o.id, sizeof o.id, "nosuchorg000000000000000");
    assert_int_equal(store_org_update(st, &o), E_NOTFOUND);
    org_rec_clear(&o);
    char v[16];
    assert_int_equal(store_meta_get(st, "absent", v, sizeof v), E_NOTFOUND);
}

/* Sessions: list filters (status, name substring, tags) and get by id
 * from any project of the org when project_id is "". */
static void session_list_filters(void **state)
{
    struct store *st = *state;
    struct org_rec o;
    struct project_rec p;
    make_org(st, &o, &p);
    struct session_rec a, b, c, got;
    new_session(&a, &o, &p, "", "{\"tags\":{\"team\":\"x\",\"env\":\"prod\"}}");
    snprintf(a.name, sizeof a.name, "crawler-1");
    new_session(&b, &o, &p, "", "{\"tags\":{\"team\":\"y\"}}");
    snprintf(b.name, sizeof b.name, "Crawler-2");
    new_session(&c, &o, &p, "", "{}");
    c.created_at = a.created_at + 1;
    assert_int_equal(store_session_insert(st, &a), 0);
    assert_int_equal(store_session_insert(st, &b), 0);
    assert_int_equal(store_session_insert(st, &c), 0);
    snprintf(c.status, sizeof c.status, "deleted");
    c.uptime_ms = 42;
    snprintf(c.end_reason, sizeof c.end_reason, "timeout");
    assert_int_equal(store_session_update(st, &c), 0);
    struct page pg = {.limit = 10};
    struct session_rec *rows = NULL;
    size_t n = 0;
    struct session_filter f = {.status = "active"};
    assert_int_equal(store_session_list(st, o.id, p.id, &f, &pg, &rows, &n), 0);
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++)
        session_rec_clear(&rows[i]);
    xfree(rows);
    f = (struct session_filter){.status = "all", .query = "rawler"};
    assert_int_equal(store_session_list(st, o.id, p.id, &f, &pg, &rows, &n), 0);
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++)
        session_rec_clear(&rows[i]);
    xfree(rows);
    f = (struct session_filter){.status = "all", .query = "crawler"}; /* case-sensitive */
    assert_int_equal(store_session_list(st, o.id, p.id, &f, &pg, &rows, &n), 0);
    assert_int_equal(n, 1);
    session_rec_clear(&rows[0]);
    xfree(rows);
    f = (struct session_filter){.status = "all", .ntags = 2};
    f.tag_keys[0] = "team";
    f.tag_values[0] = "x";
    f.tag_keys[1] = "env";
    f.tag_values[1] = "prod";
    assert_int_equal(store_session_list(st, o.id, p.id, &f, &pg, &rows, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].id, a.id);
    session_rec_clear(&rows[0]);
    xfree(rows);
    f.tag_values[1] = "dev";
    assert_int_equal(store_session_list(st, o.id, p.id, &f, &pg, &rows, &n), 0);
    assert_int_equal(n, 0);
    xfree(rows);
    f = (struct session_filter){.status = "deleted"};
    assert_int_equal(store_session_list(st, o.id, p.id, &f, &pg, &rows, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(rows[0].uptime_ms, 42);
    assert_string_equal(rows[0].end_reason, "timeout");
    session_rec_clear(&rows[0]);
    xfree(rows);
    memset(&got, 0, sizeof got);
    assert_int_equal(store_session_get(st, o.id, "", a.id, 0, &got), 0);
    session_rec_clear(&got);
    assert_int_equal(store_session_get(st, o.id, "", "crawler-1", 0, &got), E_NOTFOUND);
    assert_int_equal(store_session_list_active(st, &rows, &n), 0);
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++)
        session_rec_clear(&rows[i]);
    xfree(rows);
    org_rec_clear(&o);
}

/* "GET /profiles" lists in the order the profiles were made, also when
 * several are made in the same millisecond (their random ids must not break
 * the tie: 30_profiles once saw alpha, beta, alphabet). */
static void profiles_list_in_creation_order(void **state)
{
    struct store *st = *state;
    struct org_rec o;
    struct project_rec p;
    make_org(st, &o, &p);
    enum { N = 60 };
    char ids[N][sizeof(((struct profile_rec *)0)->id)];
    for (int i = 0; i < N; i++) {
        struct profile_rec a;
        memset(&a, 0, sizeof a);
        snprintf(a.org_id, sizeof a.org_id, "%s", o.id);
        snprintf(a.project_id, sizeof a.project_id, "%s", p.id);
        snprintf(a.name, sizeof a.name, "order-%02d", i);
        assert_int_equal(store_profile_create(st, &a), 0);
        snprintf(ids[i], sizeof ids[i], "%s", a.id);
    }
    struct page pg = {.limit = 100};
    struct profile_rec *rows = NULL;
    size_t n = 0;
    assert_int_equal(store_profile_list(st, o.id, p.id, NULL, &pg, &rows, &n), 0);
    assert_int_equal(n, N);
    for (int i = 0; i < N; i++)
        if (strcmp(rows[i].id, ids[i]) != 0)
            fail_msg("row %d is %s, made %d-th; expected %s", i, rows[i].name, i, ids[i]);
    xfree(rows);
    /* profile_ids: every one of the org's profiles (the share of its archives
     * on disk, api/profiles.c), in any order, and none of another org's. */
    char(*all)[STORE_ID] = NULL;
    assert_int_equal(store_profile_ids(st, o.id, &all, &n), 0);
    assert_int_equal(n, N);
    for (int i = 0; i < N; i++) {
        int seen = 0;
        for (size_t j = 0; j < n; j++)
            seen |= strcmp(all[j], ids[i]) == 0;
        assert_true(seen);
    }
    xfree(all);
    assert_int_equal(store_profile_ids(st, "no-such-org", &all, &n), 0);
    assert_int_equal(n, 0);
    xfree(all);
    org_rec_clear(&o);
}

/* Profiles and extensions: unique non-empty names per project, get by id
 * or name, touch, delete. */
static void profiles_and_extensions(void **state)
{
    struct store *st = *state;
    struct org_rec o;
    struct project_rec p;
    make_org(st, &o, &p);
    struct profile_rec a, b, got;
    memset(&a, 0, sizeof a);
    snprintf(a.org_id, sizeof a.org_id, "%s", o.id);
    snprintf(a.project_id, sizeof a.project_id, "%s", p.id);
    snprintf(a.name, sizeof a.name, "login");
    assert_int_equal(store_profile_create(st, &a), 0);
    b = a;
    assert_int_equal(store_profile_create(st, &b), E_CONFLICT);
    b.name[0] = '\0';
    assert_int_equal(store_profile_create(st, &b), 0);
    assert_int_equal(store_profile_get(st, o.id, p.id, "login", &got), 0);
    assert_string_equal(got.id, a.id);
    assert_int_equal(store_profile_touch(st, a.id, 777, 0), 0);
    assert_int_equal(store_profile_get_by_id(st, a.id, &got), 0);
    assert_int_equal(got.last_used_at, 777);
    assert_int_equal(got.updated_at, a.updated_at);
    struct profile_filter pf = {.query = "og"};
    struct page pg = {.limit = 10};
    struct profile_rec *rows = NULL;
    size_t n = 0;
    assert_int_equal(store_profile_list(st, o.id, p.id, &pf, &pg, &rows, &n), 0);
    assert_int_equal(n, 1);
    xfree(rows);
    snprintf(b.name, sizeof b.name, "login");
    assert_int_equal(store_profile_update(st, &b), E_CONFLICT);
    int64_t pcount = -1;
    assert_int_equal(store_profile_count(st, o.id, &pcount), 0);
    assert_int_equal(pcount, 2);
    assert_int_equal(store_profile_delete(st, o.id, p.id, a.id), 0);
    assert_int_equal(store_profile_delete(st, o.id, p.id, a.id), E_NOTFOUND);
    assert_int_equal(store_profile_count(st, o.id, &pcount), 0);
    assert_int_equal(pcount, 1);
    assert_int_equal(store_profile_touch(st, a.id, 1, 1), E_NOTFOUND);

    struct ext_rec x, y, xg;
    memset(&x, 0, sizeof x);
    snprintf(x.org_id, sizeof x.org_id, "%s", o.id);
    snprintf(x.project_id, sizeof x.project_id, "%s", p.id);
    snprintf(x.name, sizeof x.name, "AdBlock");
    x.size_bytes = 10;
    assert_int_equal(store_ext_create(st, &x), 0);
    y = x;
    assert_int_equal(store_ext_create(st, &y), E_CONFLICT);
    snprintf(y.name, sizeof y.name, "other");
    assert_int_equal(store_ext_create(st, &y), 0);
    struct ext_rec *xr = NULL;
    assert_int_equal(store_ext_list(st, o.id, p.id, "adblock", NULL, &pg, &xr, &n), 0);
    assert_int_equal(n, 1);
    xfree(xr);
    assert_int_equal(store_ext_list(st, o.id, p.id, NULL, "BLO", &pg, &xr, &n), 0);
    assert_int_equal(n, 1);
    xfree(xr);
    assert_int_equal(store_ext_list(st, o.id, p.id, NULL, y.id, &pg, &xr, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(xr[0].name, "other");
    xfree(xr);
    int64_t count = 0;
    assert_int_equal(store_ext_count(st, o.id, &count), 0);
    assert_int_equal(count, 2);
    assert_int_equal(store_ext_touch(st, x.id, 99), 0);
    assert_int_equal(store_ext_get(st, o.id, p.id, "AdBlock", &xg), 0);
    assert_int_equal(xg.last_used_at, 99);
    assert_int_equal(store_ext_delete(st, o.id, p.id, x.id), 0);
    assert_int_equal(store_ext_touch(st, x.id, 99), E_NOTFOUND);
    assert_int_equal(store_ext_delete(st, o.id, p.id, x.id), E_NOTFOUND);
    org_rec_clear(&o);
}

/* Records a tenant creates for itself are capped per organization in the
 * insert (limits.h LIM_PROXIES_PER_ORG, LIM_PROJECTS_PER_ORG,
 * LIM_API_KEYS_PER_ORG): a capped create past the cap writes nothing; only
 * live keys count; and a capped key create deletes the org's ended keys past
 * the LIM_API_KEYS_ENDED_KEPT newest, so create-and-delete loops cannot grow
 * the table. */
static void tenant_records_capped_and_ended_keys_pruned(void **state)
{
    struct store *st = *state;
    struct org_rec o;
    struct project_rec p;
    make_org(st, &o, &p);
    /* projects: make_org made one; a cap of 2 admits one more */
    struct project_rec q;
    memset(&q, 0, sizeof q);
    snprintf(q.org_id, sizeof q.org_id, "%s", o.id);
    snprintf(q.name, sizeof q.name, "second");
    assert_int_equal(store_project_create(st, &q, 2), 0);
    snprintf(q.name, sizeof q.name, "third");
    assert_int_equal(store_project_create(st, &q, 2), E_LIMIT);
    assert_int_equal(store_project_get(st, o.id, "third", &q), E_NOTFOUND);
    /* proxies, counted across the org's projects */
    struct proxy_rec a;
    memset(&a, 0, sizeof a);
    crypto_new_id(a.id);
    snprintf(a.org_id, sizeof a.org_id, "%s", o.id);
    snprintf(a.project_id, sizeof a.project_id, "%s", p.id);
    snprintf(a.type, sizeof a.type, "custom");
    a.data = "{}";
    assert_int_equal(store_proxy_insert(st, &a, 1), 0);
    crypto_new_id(a.id);
    snprintf(a.project_id, sizeof a.project_id, "%s", q.id);
    assert_int_equal(store_proxy_insert(st, &a, 1), E_LIMIT);
    assert_int_equal(store_proxy_insert(st, &a, 2), 0);
    /* keys: two live ones fill a cap of 2; an expired one does not count */
    struct apikey_rec k[3], expired;
    for (int i = 0; i < 3; i++) {
        memset(&k[i], 0, sizeof k[i]);
        snprintf(k[i].org_id, sizeof k[i].org_id, "%s", o.id);
        snprintf(k[i].name, sizeof k[i].name, "k%d", i);
        crypto_new_id(k[i].key_hash);
    }
    expired = k[2];
    crypto_new_id(expired.key_hash);
    expired.expires_at = 1;
    assert_int_equal(store_key_create(st, &expired, 0), 0);
    assert_int_equal(store_key_create(st, &k[0], 2), 0);
    assert_int_equal(store_key_create(st, &k[1], 2), 0);
    assert_int_equal(store_key_create(st, &k[2], 2), E_LIMIT);
    struct apikey_rec fresh = k[2];
    assert_int_equal(store_key_rotate(st, o.id, k[0].id, clock_now_ms() + 60000, &fresh, 2),
                     E_LIMIT);
    k[1].deleted_at = clock_now_ms();
    assert_int_equal(store_key_update(st, &k[1]), 0);
    assert_int_equal(store_key_create(st, &k[2], 2), 0);
    /* ended keys past the newest LIM_API_KEYS_ENDED_KEPT go at a capped create */
    for (int i = 0; i < LIM_API_KEYS_ENDED_KEPT + 3; i++) {
        struct apikey_rec d = expired;
        crypto_new_id(d.key_hash);
        assert_int_equal(store_key_create(st, &d, 0), 0);
    }
    struct apikey_rec last = k[0];
    crypto_new_id(last.key_hash);
    assert_int_equal(store_key_create(st, &last, 10), 0);
    /* left: the kept ended keys and the live k[0], k[2], last */
    struct page pg = {.limit = 10, .offset = LIM_API_KEYS_ENDED_KEPT};
    struct apikey_rec *rows = NULL;
    size_t n = 0;
    struct name_filter f = {.status = "all"};
    assert_int_equal(store_key_list(st, o.id, &f, &pg, &rows, &n), 0);
    assert_int_equal(n, 3);
    xfree(rows);
    struct apikey_rec got;
    assert_int_equal(store_key_get(st, o.id, k[0].id, &got), 0);
    assert_int_equal(store_key_get(st, o.id, last.id, &got), 0);
    org_rec_clear(&o);
}

/* A session row of org o (project p) with status `status`, inserted. */
static void insert_session(struct store *st, const struct org_rec *o, const struct project_rec *p,
                           const char *status, struct session_rec *s)
{
    memset(s, 0, sizeof *s);
    crypto_new_id(s->id);
    snprintf(s->org_id, sizeof s->org_id, "%.24s", o->id);
    snprintf(s->project_id, sizeof s->project_id, "%.24s", p->id);
    snprintf(s->status, sizeof s->status, "%s", status);
    s->data = "{\"settings\":1}";
    assert_int_equal(store_session_insert(st, s), 0);
}

/* The ended sessions of org (status deleted), listed oldest first. */
static size_t ended_of(struct store *st, const struct org_rec *o, const struct project_rec *p,
                       struct session_rec **rows)
{
    struct page pg = {.limit = 100};
    struct session_filter f = {.status = "deleted"};
    size_t n = 0;
    assert_int_equal(store_session_list(st, o->id, p->id, &f, &pg, rows, &n), 0);
    return n;
}

/* "When s ends (status deleted) the org's ended sessions past the newest
 * st->sessions_ended_kept (by deleted_at, then id) are deleted with their
 * telemetry events": N+k ends of org A leave exactly A's newest N ended rows;
 * A's active rows and another organization's ended rows stay; an insert
 * never prunes. */
static void sessions_ended_pruned_per_org(void **state)
{
    struct store *st = *state;
    enum { KEPT = 3, EXTRA = 4 };
    st->sessions_ended_kept = KEPT;
    struct org_rec a, b;
    struct project_rec pa, pb;
    make_org(st, &a, &pa);
    make_org(st, &b, &pb);
    /* org B: more ended rows than A keeps, inserted ended (no pruning) */
    struct session_rec other[KEPT + 2];
    for (int i = 0; i < KEPT + 2; i++)
        insert_session(st, &b, &pb, "deleted", &other[i]);
    struct session_rec live;
    insert_session(st, &a, &pa, "active", &live);
    struct session_rec ends[KEPT + EXTRA];
    struct telem_event_rec ev = {.seq = 1, .ts = 1000, .text = "x"};
    snprintf(ev.category, sizeof ev.category, "console");
    for (int i = 0; i < KEPT + EXTRA; i++) {
        insert_session(st, &a, &pa, "active", &ends[i]);
        assert_int_equal(store_telem_events_insert(st, ends[i].id, &ev, 1), 0);
        snprintf(ends[i].status, sizeof ends[i].status, "deleted");
        ends[i].deleted_at = 1000 + i;
        assert_int_equal(store_session_update(st, &ends[i]), 0);
    }
    struct session_rec *rows = NULL;
    size_t n = ended_of(st, &a, &pa, &rows);
    assert_int_equal(n, KEPT);
    for (size_t i = 0; i < n; i++) {
        int found = 0;
        for (int k = EXTRA; k < KEPT + EXTRA; k++)
            found |= strcmp(rows[i].id, ends[k].id) == 0;
        assert_true(found); /* only the newest by deleted_at */
        session_rec_clear(&rows[i]);
    }
    xfree(rows);
    struct session_rec got;
    memset(&got, 0, sizeof got);
    assert_int_equal(store_session_get(st, a.id, pa.id, ends[0].id, 1, &got), E_NOTFOUND);
    assert_int_equal(store_session_get(st, a.id, pa.id, ends[EXTRA].id, 1, &got), 0);
    session_rec_clear(&got);
    assert_int_equal(store_session_get(st, a.id, pa.id, live.id, 0, &got), 0);
    assert_string_equal(got.status, "active");
    session_rec_clear(&got);
    /* a pruned session's telemetry events went with it; a kept one's stay */
    int64_t max = -1;
    assert_int_equal(store_telem_events_max_seq(st, ends[0].id, &max), 0);
    assert_int_equal(max, 0);
    assert_int_equal(store_telem_events_max_seq(st, ends[EXTRA].id, &max), 0);
    assert_int_equal(max, 1);
    /* another organization's ended rows are untouched */
    assert_int_equal(ended_of(st, &b, &pb, &rows), KEPT + 2);
    for (int i = 0; i < KEPT + 2; i++)
        session_rec_clear(&rows[i]);
    xfree(rows);
    /* an update that does not end prunes nothing (B's rows stay past KEPT) */
    snprintf(other[0].name, sizeof other[0].name, "renamed");
    snprintf(other[0].status, sizeof other[0].status, "active");
    assert_int_equal(store_session_update(st, &other[0]), 0);
    assert_int_equal(ended_of(st, &b, &pb, &rows), KEPT + 1);
    for (int i = 0; i < KEPT + 1; i++)
        session_rec_clear(&rows[i]);
    xfree(rows);
    org_rec_clear(&a);
    org_rec_clear(&b);
}

struct org_bytes {
    const char *org;
    int64_t bytes;
};

static void org_bytes_of(void *ctx, const char *org, int64_t bytes)
{
    struct org_bytes *b = ctx;
    if (strcmp(org, b->org) == 0)
        b->bytes = bytes;
}

/* Telemetry events: the bytes each organization stores (by its sessions),
 * and trimming an organization's oldest events (its share of the disk,
 * LIM_TELEMETRY_ORG_STORED_BYTES) leaves its newest and every other
 * organization's. */
static void telem_bytes_by_org_and_trim(void **state)
{
    struct store *st = *state;
    struct org_rec o[2];
    struct project_rec p[2];
    struct session_rec sess[2];
    make_org(st, &o[0], &p[0]);
    make_org(st, &o[1], &p[1]);
    char text[101];
    memset(text, 'x', 100);
    text[100] = '\0';
    for (int i = 0; i < 2; i++) {
        memset(&sess[i], 0, sizeof sess[i]);
        crypto_new_id(sess[i].id);
        snprintf(sess[i].org_id, sizeof sess[i].org_id, "%.24s", o[i].id);
        snprintf(sess[i].project_id, sizeof sess[i].project_id, "%.24s", p[i].id);
        snprintf(sess[i].status, sizeof sess[i].status, "active");
        sess[i].data = "{}";
        assert_int_equal(store_session_insert(st, &sess[i]), 0);
        struct telem_event_rec rows[10];
        for (int k = 0; k < 10; k++) {
            rows[k] = (struct telem_event_rec){.seq = k + 1, .ts = 1000 + k, .text = text};
            snprintf(rows[k].category, sizeof rows[k].category, "console");
        }
        assert_int_equal(store_telem_events_insert(st, sess[i].id, rows, 10), 0);
    }
    struct org_bytes b = {o[0].id, 0};
    assert_int_equal(store_telem_bytes_by_org(st, org_bytes_of, &b), 0);
    assert_int_equal(b.bytes, 1000);
    int64_t freed = 0;
    assert_int_equal(store_telem_events_trim_org(st, o[0].id, 250, &freed), 0);
    assert_int_equal(freed, 300); /* whole events of 100 bytes, the oldest */
    b.bytes = 0;
    assert_int_equal(store_telem_bytes_by_org(st, org_bytes_of, &b), 0);
    assert_int_equal(b.bytes, 700);
    /* the newest of the trimmed org's stay; the other org's are untouched */
    int64_t max = 0;
    assert_int_equal(store_telem_events_max_seq(st, sess[0].id, &max), 0);
    assert_int_equal(max, 10);
    struct org_bytes other = {o[1].id, 0};
    assert_int_equal(store_telem_bytes_by_org(st, org_bytes_of, &other), 0);
    assert_int_equal(other.bytes, 1000);
    /* asked for more than it holds: everything of that org goes */
    assert_int_equal(store_telem_events_trim_org(st, o[0].id, 1 << 20, &freed), 0);
    assert_int_equal(freed, b.bytes);
    assert_int_equal(store_telem_events_max_seq(st, sess[0].id, &max), 0);
    assert_int_equal(max, 0);
    org_rec_clear(&o[0]);
    org_rec_clear(&o[1]);
}

/* Credentials: names unique per project; get by id or name; list filters by
 * domain and name substring; count per org; update and delete by id. */
static void credentials_crud(void **state)
{
    struct store *st = *state;
    struct org_rec o;
    struct project_rec p;
    make_org(st, &o, &p);
    struct cred_rec a, got;
    memset(&a, 0, sizeof a);
    crypto_new_id(a.id);
    snprintf(a.org_id, sizeof a.org_id, "%s", o.id);
    snprintf(a.project_id, sizeof a.project_id, "%s", p.id);
    snprintf(a.name, sizeof a.name, "shop");
    snprintf(a.domain, sizeof a.domain, "shop.example");
    a.created_at = a.updated_at = 5;
    a.data = "{\"values\":{}}";
    assert_int_equal(store_cred_insert(st, &a, 1), 0);
    struct cred_rec b = a;
    crypto_new_id(b.id);
    assert_int_equal(store_cred_insert(st, &b, 0), E_CONFLICT); /* same name */
    snprintf(b.name, sizeof b.name, "mail");
    snprintf(b.domain, sizeof b.domain, "mail.example");
    b.created_at = 6;
    /* A capped insert: the org holds 1 credential, its cap of 1 refuses. */
    assert_int_equal(store_cred_insert(st, &b, 1), E_LIMIT);
    int64_t held = 0;
    assert_int_equal(store_cred_count(st, o.id, &held), 0);
    assert_int_equal(held, 1);
    assert_int_equal(store_cred_insert(st, &b, 2), 0);
    memset(&got, 0, sizeof got);
    assert_int_equal(store_cred_get(st, o.id, p.id, "shop", &got), 0);
    assert_string_equal(got.id, a.id);
    assert_string_equal(got.data, a.data);
    cred_rec_clear(&got);
    assert_int_equal(store_cred_get(st, o.id, p.id, b.id, &got), 0);
    assert_string_equal(got.name, "mail");
    cred_rec_clear(&got);
    assert_int_equal(store_cred_get(st, "other", p.id, a.id, &got), E_NOTFOUND);
    struct page pg = {.limit = 10};
    struct cred_rec *rows = NULL;
    size_t n = 0;
    assert_int_equal(store_cred_list(st, o.id, p.id, NULL, NULL, &pg, &rows, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(rows[0].name, "shop");
    for (size_t i = 0; i < n; i++)
        cred_rec_clear(&rows[i]);
    xfree(rows);
    assert_int_equal(store_cred_list(st, o.id, p.id, "mail.example", NULL, &pg, &rows, &n), 0);
    assert_int_equal(n, 1);
    cred_rec_clear(&rows[0]);
    xfree(rows);
    assert_int_equal(store_cred_list(st, o.id, p.id, NULL, "ho", &pg, &rows, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].name, "shop");
    cred_rec_clear(&rows[0]);
    xfree(rows);
    int64_t count = 0;
    assert_int_equal(store_cred_count(st, o.id, &count), 0);
    assert_int_equal(count, 2);
    snprintf(a.name, sizeof a.name, "mail");
    assert_int_equal(store_cred_update(st, &a), E_CONFLICT);
    snprintf(a.name, sizeof a.name, "store");
    a.updated_at = 9;
    a.data = "{\"values\":{\"k\":\"v1:00\"}}";
    assert_int_equal(store_cred_update(st, &a), 0);
    assert_int_equal(store_cred_get(st, o.id, p.id, "store", &got), 0);
    assert_int_equal(got.updated_at, 9);
    assert_string_equal(got.data, a.data);
    cred_rec_clear(&got);
    assert_int_equal(store_cred_delete(st, o.id, p.id, a.id), 0);
    assert_int_equal(store_cred_delete(st, o.id, p.id, a.id), E_NOTFOUND);
    assert_int_equal(store_cred_count(st, o.id, &count), 0);
    assert_int_equal(count, 1);
    org_rec_clear(&o);
}

/* Vaults and items: names unique per vault; get by id or name; the update
 * compares the version; a vault's delete takes its items. */
static void vaults_and_items(void **state)
{
    struct store *st = *state;
    struct org_rec o;
    struct project_rec p;
    make_org(st, &o, &p);
    struct vault_rec v, it, got;
    memset(&v, 0, sizeof v);
    crypto_new_id(v.id);
    snprintf(v.org_id, sizeof v.org_id, "%s", o.id);
    snprintf(v.project_id, sizeof v.project_id, "%s", p.id);
    snprintf(v.name, sizeof v.name, "team");
    snprintf(v.type, sizeof v.type, "vault");
    v.data = "{}";
    assert_int_equal(store_vault_insert(st, &v, 0), 0);
    struct vault_rec dup = v;
    crypto_new_id(dup.id);
    assert_int_equal(store_vault_insert(st, &dup, 0), E_CONFLICT);
    it = v;
    crypto_new_id(it.id);
    snprintf(it.vault_id, sizeof it.vault_id, "%s", v.id);
    snprintf(it.name, sizeof it.name, "team"); /* an item may share the vault's name */
    snprintf(it.type, sizeof it.type, "credential");
    it.version = 1;
    assert_int_equal(store_vault_insert(st, &it, 1), 0);
    memset(&got, 0, sizeof got);
    assert_int_equal(store_vault_get(st, o.id, p.id, "", "team", &got), 0);
    assert_string_equal(got.id, v.id);
    vault_rec_clear(&got);
    assert_int_equal(store_vault_get(st, o.id, p.id, v.id, "team", &got), 0);
    assert_string_equal(got.id, it.id);
    vault_rec_clear(&got);
    int64_t n = 0;
    assert_int_equal(store_vault_count(st, o.id, "", &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(store_vault_count(st, o.id, v.id, &n), 0);
    assert_int_equal(n, 1);
    struct page pg = {.limit = 10};
    struct vault_rec *rows = NULL;
    size_t cnt = 0;
    assert_int_equal(store_vault_list(st, o.id, p.id, v.id, NULL, &pg, &rows, &cnt), 0);
    assert_int_equal(cnt, 1);
    vault_rec_clear(&rows[0]);
    xfree(rows);
    it.version = 2;
    it.data = "{\"values\":{}}";
    assert_int_equal(store_vault_update(st, &it, 5), E_CONFLICT);
    assert_int_equal(store_vault_update(st, &it, 1), 0);
    assert_int_equal(store_vault_update(st, &it, 1), E_CONFLICT);
    assert_int_equal(store_vault_delete(st, o.id, p.id, v.id), 0);
    assert_int_equal(store_vault_get(st, o.id, p.id, v.id, "team", &got), E_NOTFOUND);
    assert_int_equal(store_vault_update(st, &it, 2), E_NOTFOUND);
    assert_int_equal(store_vault_delete(st, o.id, p.id, v.id), E_NOTFOUND);
    org_rec_clear(&o);
}

/* Apps (issue 36): deployments and invocations by kind, per project (another
 * org's id is E_NOTFOUND); a put of an existing id replaces its status,
 * app_name and data; lists filter by app, version and status; bytes sums an
 * org's deployments. */
static void apps_objects(void **state)
{
    struct store *st = *state;
    struct org_rec o, o2;
    struct project_rec p, p2;
    make_org(st, &o, &p);
    make_org(st, &o2, &p2);
    struct appobj_rec d, got;
    memset(&d, 0, sizeof d);
    crypto_new_id(d.id);
    snprintf(d.org_id, sizeof d.org_id, "%s", o.id);
    snprintf(d.project_id, sizeof d.project_id, "%s", p.id);
    snprintf(d.kind, sizeof d.kind, "deployment");
    snprintf(d.version, sizeof d.version, "1");
    snprintf(d.status, sizeof d.status, "queued");
    d.bytes = 100;
    d.created_at = d.updated_at = 1000;
    d.data = "{}";
    assert_int_equal(store_appobj_put(st, &d), 0);
    snprintf(d.app_name, sizeof d.app_name, "title-app");
    snprintf(d.status, sizeof d.status, "running");
    d.bytes = 300;
    d.data = "{\"status\":\"running\"}";
    assert_int_equal(store_appobj_put(st, &d), 0);
    memset(&got, 0, sizeof got);
    assert_int_equal(store_appobj_get(st, o.id, p.id, "deployment", d.id, &got), 0);
    assert_string_equal(got.app_name, "title-app");
    assert_string_equal(got.status, "running");
    assert_string_equal(got.data, "{\"status\":\"running\"}");
    appobj_rec_clear(&got);
    assert_int_equal(store_appobj_get(st, o2.id, p2.id, "deployment", d.id, &got), E_NOTFOUND);
    assert_int_equal(store_appobj_get(st, o.id, p.id, "invocation", d.id, &got), E_NOTFOUND);
    struct page pg = {.limit = 10};
    struct appobj_rec *rows = NULL;
    size_t n = 0;
    assert_int_equal(store_appobj_list(st, o.id, p.id, "deployment", "title-app", "1", "running",
                                       "\"status\":\"running\"", NULL, &pg, &rows, &n),
                     0);
    assert_int_equal(n, 1);
    appobj_rec_clear(&rows[0]);
    xfree(rows);
    assert_int_equal(store_appobj_list(st, o.id, p.id, "deployment", "title-app", "2", NULL, NULL,
                                       NULL, &pg, &rows, &n),
                     0);
    assert_int_equal(n, 0);
    xfree(rows);
    assert_int_equal(store_appobj_list(st, o.id, p.id, "deployment", NULL, NULL, NULL, "running",
                                       "\"nope\"", &pg, &rows, &n),
                     0);
    assert_int_equal(n, 0);
    xfree(rows);
    int64_t bytes = 0;
    assert_int_equal(store_appobj_bytes(st, o.id, "deployment", &bytes), 0);
    assert_int_equal(bytes, 300);
    assert_int_equal(store_appobj_bytes(st, o2.id, "deployment", &bytes), 0);
    assert_int_equal(bytes, 0);
    assert_int_equal(store_appobj_delete(st, o2.id, p2.id, "deployment", d.id), E_NOTFOUND);
    assert_int_equal(store_appobj_delete(st, o.id, p.id, "deployment", d.id), 0);
    assert_int_equal(store_appobj_delete(st, o.id, p.id, "deployment", d.id), E_NOTFOUND);
    org_rec_clear(&o);
    org_rec_clear(&o2);
}

/* Records a run moves on (h9): every org's unfinished deployments and
 * invocations are listed, terminal ones and running deployments are not;
 * settle writes only while the status read is still stored (once). */
static void apps_unfinished_settle_once(void **state)
{
    struct store *st = *state;
    struct org_rec o, o2;
    struct project_rec p, p2;
    make_org(st, &o, &p);
    make_org(st, &o2, &p2);
    static const struct {
        const char *kind, *status;
        int unfinished;
    } cases[] = {
        {"invocation", "queued", 1},    {"invocation", "running", 1},
        {"invocation", "succeeded", 0}, {"invocation", "failed", 0},
        {"deployment", "queued", 1},    {"deployment", "in_progress", 1},
        {"deployment", "running", 0},   {"deployment", "failed", 0},
    };
    char ids[8][STORE_ID];
    for (size_t i = 0; i < 8; i++) {
        struct appobj_rec r;
        memset(&r, 0, sizeof r);
        crypto_new_id(r.id);
        snprintf(ids[i], sizeof ids[i], "%s", r.id);
        snprintf(r.org_id, sizeof r.org_id, "%s", i % 2 ? o2.id : o.id);
        snprintf(r.project_id, sizeof r.project_id, "%s", i % 2 ? p2.id : p.id);
        snprintf(r.kind, sizeof r.kind, "%s", cases[i].kind);
        snprintf(r.status, sizeof r.status, "%s", cases[i].status);
        r.created_at = r.updated_at = 1000 + (int64_t)i;
        r.bytes = 7;
        r.data = "{}";
        assert_int_equal(store_appobj_put(st, &r), 0);
    }
    struct page pg = {.limit = 100};
    struct appobj_rec *rows = NULL;
    size_t n = 0;
    assert_int_equal(store_appobj_unfinished(st, &pg, &rows, &n), 0);
    size_t want = 0;
    for (size_t i = 0; i < 8; i++) {
        int seen = 0;
        for (size_t k = 0; k < n; k++)
            seen |= strcmp(rows[k].id, ids[i]) == 0;
        assert_int_equal(seen, cases[i].unfinished);
        want += (size_t)cases[i].unfinished;
    }
    assert_int_equal(n, want);
    struct appobj_rec r = rows[0];
    rows[0].data = NULL;
    for (size_t k = 0; k < n; k++)
        appobj_rec_clear(&rows[k]);
    xfree(rows);
    char was[16];
    snprintf(was, sizeof was, "%s", r.status);
    snprintf(r.status, sizeof r.status, "failed");
    r.bytes = 0;
    xfree(r.data);
    r.data = xstrdup("{\"status\":\"failed\"}");
    assert_int_equal(store_appobj_settle(st, &r, was), 0);
    assert_int_equal(store_appobj_settle(st, &r, was), E_NOTFOUND); /* once */
    struct appobj_rec got;
    memset(&got, 0, sizeof got);
    assert_int_equal(store_appobj_get(st, r.org_id, r.project_id, r.kind, r.id, &got), 0);
    assert_string_equal(got.status, "failed");
    assert_string_equal(got.data, "{\"status\":\"failed\"}");
    assert_int_equal(got.bytes, 0);
    appobj_rec_clear(&got);
    appobj_rec_clear(&r);
    assert_int_equal(store_appobj_unfinished(st, &pg, &rows, &n), 0);
    assert_int_equal(n, want - 1);
    for (size_t k = 0; k < n; k++)
        appobj_rec_clear(&rows[k]);
    xfree(rows);
    org_rec_clear(&o);
    org_rec_clear(&o2);
}

/* Running analyses of every org (h9): listed with their org, all of them
 * or one node's (h11: a dead node's analyses end); the entry's settle
 * writes once. */
static void config_registry_running_settle_once(void **state)
{
    struct store *st = *state;
    struct cfgreg_entry_rec e1 = {"orgR1",         "a.com", "running", "",
                                  "{\"d\":\"a\"}", 5000,    -1,        "nodeA"};
    struct cfgreg_entry_rec e2 = {"orgR2",         "b.org", "running", "",
                                  "{\"d\":\"b\"}", 4000,    -1,        "nodeB"};
    struct cfgreg_entry_rec e3 = {"orgR2",         "c.net", "completed", "",
                                  "{\"d\":\"c\"}", 9000,    0,           "nodeA"};
    assert_int_equal(store_cfgreg_entry_put(st, &e1), 0);
    assert_int_equal(store_cfgreg_entry_put(st, &e2), 0);
    assert_int_equal(store_cfgreg_entry_put(st, &e3), 0);
    struct page pg = {.limit = 10};
    struct cfgreg_text *rows = NULL;
    size_t n = 0;
    assert_int_equal(store_cfgreg_running(st, "nodeB", &pg, &rows, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].org_id, "orgR2");
    assert_string_equal(rows[0].json, "{\"d\":\"b\"}");
    xfree(rows[0].json);
    xfree(rows);
    assert_int_equal(store_cfgreg_running(st, "nodeC", &pg, &rows, &n), 0);
    assert_int_equal(n, 0);
    xfree(rows);
    assert_int_equal(store_cfgreg_running(st, NULL, &pg, &rows, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(rows[0].org_id, "orgR1");
    assert_string_equal(rows[0].json, "{\"d\":\"a\"}");
    assert_string_equal(rows[1].org_id, "orgR2");
    for (size_t i = 0; i < n; i++)
        xfree(rows[i].json);
    xfree(rows);
    assert_int_equal(
        store_cfgreg_entry_settle(st, "orgR1", "a.com", "failed", "{\"d\":\"x\"}", "running"), 0);
    assert_int_equal(
        store_cfgreg_entry_settle(st, "orgR1", "a.com", "failed", "{\"d\":\"y\"}", "running"),
        E_NOTFOUND);
    char *got = NULL;
    assert_int_equal(store_cfgreg_entry_get(st, "orgR1", "a.com", &got), 0);
    assert_string_equal(got, "{\"d\":\"x\"}");
    xfree(got);
    assert_int_equal(store_cfgreg_running(st, NULL, &pg, &rows, &n), 0);
    assert_int_equal(n, 1);
    xfree(rows[0].json);
    xfree(rows);
}

/* Proxies: names not unique; find by id or name; update/delete by id. */
static void proxies_find_update_delete(void **state)
{
    struct store *st = *state;
    struct org_rec o;
    struct project_rec p;
    make_org(st, &o, &p);
    struct proxy_rec a, b, got;
    memset(&a, 0, sizeof a);
    crypto_new_id(a.id);
    snprintf(a.org_id, sizeof a.org_id, "%s", o.id);
    snprintf(a.project_id, sizeof a.project_id, "%s", p.id);
    snprintf(a.name, sizeof a.name, "us");
    snprintf(a.type, sizeof a.type, "custom");
    a.created_at = clock_now_ms();
    a.data = "{\"host\":\"h\"}";
    b = a;
    crypto_new_id(b.id);
    b.created_at++;
    assert_int_equal(store_proxy_insert(st, &a, 0), 0);
    assert_int_equal(store_proxy_insert(st, &b, 0), 0);
    struct proxy_rec *rows = NULL;
    size_t n = 0;
    assert_int_equal(store_proxy_find(st, o.id, "us", &rows, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(rows[0].id, a.id);
    for (size_t i = 0; i < n; i++)
        proxy_rec_clear(&rows[i]);
    xfree(rows);
    struct page pg = {.limit = 1};
    assert_int_equal(store_proxy_list(st, o.id, p.id, NULL, "u", &pg, &rows, &n), 0);
    assert_int_equal(n, 1);
    assert_true(pg.has_more);
    proxy_rec_clear(&rows[0]);
    xfree(rows);
    snprintf(a.status, sizeof a.status, "available");
    a.last_checked = 5;
    assert_int_equal(store_proxy_update(st, &a), 0);
    memset(&got, 0, sizeof got);
    assert_int_equal(store_proxy_get(st, o.id, p.id, a.id, &got), 0);
    assert_string_equal(got.status, "available");
    assert_string_equal(got.data, "{\"host\":\"h\"}");
    proxy_rec_clear(&got);
    assert_int_equal(store_proxy_delete(st, o.id, p.id, a.id), 0);
    assert_int_equal(store_proxy_delete(st, o.id, p.id, a.id), E_NOTFOUND);
    assert_int_equal(store_proxy_update(st, &a), E_NOTFOUND);
    org_rec_clear(&o);
}

/* Telemetry events: "an existing (session, seq) is kept"; list by
 * categories, bounds and direction; max seq; purge. OTLP destinations:
 * names unique per org. */
static void telemetry_events_and_destinations(void **state)
{
    struct store *st = *state;
    struct telem_event_rec ev[4] = {
        {.seq = 1, .ts = 100, .category = "console", .text = "{\"n\":1}"},
        {.seq = 2, .ts = 200, .category = "network", .text = "{\"n\":2}"},
        {.seq = 3, .ts = 300, .category = "console", .text = "{\"n\":3}"},
        {.seq = 1, .ts = 999, .category = "page", .text = "{\"dup\":1}"},
    };
    assert_int_equal(store_telem_events_insert(st, "s1", ev, 3), 0);
    assert_int_equal(store_telem_events_insert(st, "s1", &ev[3], 1), 0);
    int64_t max = 0;
    assert_int_equal(store_telem_events_max_seq(st, "s1", &max), 0);
    assert_int_equal(max, 3);
    assert_int_equal(store_telem_events_max_seq(st, "s2", &max), 0);
    assert_int_equal(max, 0);
    struct telem_query q = {.categories = {"console"}, .ncategories = 1, .desc = 1};
    struct page pg = {.limit = 10};
    struct telem_event_rec *rows = NULL;
    size_t n = 0;
    assert_int_equal(store_telem_events_list(st, "s1", &q, &pg, &rows, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(rows[0].seq, 3);
    assert_int_equal(rows[1].seq, 1);
    assert_string_equal(rows[1].text, "{\"n\":1}");
    for (size_t i = 0; i < n; i++)
        telem_event_rec_clear(&rows[i]);
    xfree(rows);
    q = (struct telem_query){.since_ms = 150, .until_ms = 300, .after_seq = 2};
    assert_int_equal(store_telem_events_list(st, "s1", &q, &pg, &rows, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(rows[0].seq, 3);
    telem_event_rec_clear(&rows[0]);
    xfree(rows);
    int64_t deleted = 0;
    assert_int_equal(store_telem_events_purge(st, 250, &deleted), 0);
    assert_int_equal(deleted, 2);

    struct otlp_dest_rec d, d2, got;
    memset(&d, 0, sizeof d);
    snprintf(d.org_id, sizeof d.org_id, "org1");
    snprintf(d.name, sizeof d.name, "honeycomb");
    snprintf(d.endpoint, sizeof d.endpoint, "https://api.example/v1");
    d.headers = "{\"x\":\"y\"}";
    assert_int_equal(store_otlp_dest_create(st, &d, 0), 0);
    d2 = d;
    assert_int_equal(store_otlp_dest_create(st, &d2, 0), E_CONFLICT);
    memset(&got, 0, sizeof got);
    assert_int_equal(store_otlp_dest_get(st, "org1", "honeycomb", &got), 0);
    assert_string_equal(got.id, d.id);
    assert_string_equal(got.headers, "{\"x\":\"y\"}");
    otlp_dest_rec_clear(&got);
    snprintf(d.endpoint, sizeof d.endpoint, "https://other/v1");
    assert_int_equal(store_otlp_dest_update(st, &d), 0);
    struct otlp_dest_rec *dr = NULL;
    assert_int_equal(store_otlp_dest_list(st, "org1", &pg, &dr, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(dr[0].endpoint, "https://other/v1");
    otlp_dest_rec_clear(&dr[0]);
    xfree(dr);
    assert_int_equal(store_otlp_dest_delete(st, "org1", d.id), 0);
    assert_int_equal(store_otlp_dest_delete(st, "org1", d.id), E_NOTFOUND);
    assert_int_equal(store_otlp_dest_update(st, &d), E_NOTFOUND);
}

/* ---- the cluster ops (PostgreSQL) ---- */

static void pg_store_open_selects_postgresql(void **state)
{
    (void)state;
    struct err e;
    err_init(&e);
    struct store *st = NULL;
    assert_int_equal(store_open(pg_url, "/nonexistent", &st, &e), 0);
    assert_string_equal(st->ops->name, "postgresql");
    assert_true(store_shared(st));
    store_close(st);
    /* postgres:// is the other spelling libpq accepts */
    char url[300];
    snprintf(url, sizeof url, "postgres://%s", pg_url + strlen("postgresql://"));
    assert_int_equal(store_open(url, "/nonexistent", &st, &e), 0);
    store_close(st);
    /* the connection defaults come before the URL: its own settings win */
    int64_t ours = pg_scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name ="
                             " 'browserd' AND datname = current_database()",
                             NULL);
    assert_true(ours >= 1); /* the case's store */
    snprintf(url, sizeof url, "%s&application_name=custom", pg_url);
    assert_int_equal(store_open(url, NULL, &st, &e), 0);
    assert_int_equal(pg_scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name ="
                               " 'custom'",
                               NULL),
                     1);
    store_close(st);
    /* no server there: refused at open, with a message */
    err_init(&e);
    assert_int_equal(store_open("postgresql:///x?host=/nonexistent", NULL, &st, &e), E_INTERNAL);
    assert_null(st);
    assert_non_null(strstr(e.message, "PostgreSQL"));
}

struct open_ctx {
    pthread_barrier_t *go;
    const char *url;
    int rc;
};

static void *open_thread(void *arg)
{
    struct open_ctx *c = arg;
    struct err e;
    err_init(&e);
    struct store *st = NULL;
    pthread_barrier_wait(c->go);
    c->rc = store_open_pg(c->url, &st, &e);
    store_close(st);
    return NULL;
}

/* store_open_pg: "applying pending migrations exactly once even when
 * several processes start together"; a database holding a migration this
 * binary does not know is refused. */
static void migrations_apply_once_and_refuse_unknown(void **state)
{
    (void)state;
    assert_int_equal(pg_admin("postgres", "CREATE DATABASE empty1 TEMPLATE template0"), 0);
    char url[256];
    pg_url_of("empty1", url, sizeof url);
    enum { OPENERS = 4 };
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, OPENERS);
    struct open_ctx c[OPENERS];
    pthread_t th[OPENERS];
    for (int i = 0; i < OPENERS; i++) {
        c[i] = (struct open_ctx){.go = &go, .url = url};
        assert_int_equal(pthread_create(&th[i], NULL, open_thread, &c[i]), 0);
    }
    for (int i = 0; i < OPENERS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(c[i].rc, 0);
    }
    pthread_barrier_destroy(&go);
    /* every migration once: the same history as a database migrated alone
     * (the case's own, a copy of the template) */
    int64_t applied = pg_scalar_on(url, "SELECT count(*) FROM schema_migrations", NULL);
    assert_true(applied >= 8);
    assert_int_equal(applied, pg_scalar("SELECT count(*) FROM schema_migrations", NULL));
    assert_int_equal(pg_admin("empty1", "INSERT INTO schema_migrations VALUES ('9999_future', 0)"),
                     0);
    struct err e;
    err_init(&e);
    struct store *st = NULL;
    assert_int_equal(store_open_pg(url, &st, &e), E_INTERNAL);
    assert_null(st);
    assert_non_null(strstr(e.message, "9999_future"));
    assert_int_equal(pg_admin("postgres", "DROP DATABASE empty1 WITH (FORCE)"), 0);
}

/* The connection pool: connections the server ended while idle (a
 * restart, pg_terminate_backend) are replaced before use, so the next
 * calls succeed. */
static void pool_replaces_connections_the_server_closed(void **state)
{
    struct store *st = *state;
    int64_t n = 0;
    assert_int_equal(store_org_count(st, &n), 0);
    char sql[200];
    snprintf(sql, sizeof sql,
             "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '%s'"
             " AND pid != pg_backend_pid()",
             pg_db);
    assert_int_equal(pg_admin(pg_db, sql), 0);
    /* Wait (up to 10 s) for the ended sessions to be gone. */
    int64_t deadline = clock_mono_ms() + 10000, left = -1;
    while (clock_mono_ms() < deadline &&
           (left = pg_scalar("SELECT count(*) FROM pg_stat_activity WHERE datname ="
                             " current_database() AND pid != pg_backend_pid()",
                             NULL)) != 0) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(left, 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(store_org_count(st, &n), 0);
}

/* "node_register inserts n as up with heartbeat_at = started_at = now ...
 * node_heartbeat moves the heartbeat to now and sets running ...
 * node_list the up nodes, oldest first." */
static void nodes_register_heartbeat_list(void **state)
{
    struct store *st = *state;
    struct node_rec a, b, got;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    snprintf(a.name, sizeof a.name, "host-a");
    snprintf(a.advertise_url, sizeof a.advertise_url, "http://10.0.0.1:8080");
    a.capacity = 3;
    assert_int_equal(store_node_register(st, &a), 0);
    assert_int_equal(strlen(a.id), 24);
    assert_string_equal(a.state, "up");
    assert_true(a.started_at > 0);
    assert_int_equal(a.heartbeat_at, a.started_at);
    /* the database's clock, not ours: close to it on one machine */
    assert_true(llabs((long long)(a.started_at - clock_now_ms())) < 60000);
    snprintf(b.name, sizeof b.name, "host-b");
    b.capacity = 5;
    assert_int_equal(store_node_register(st, &b), 0);
    assert_int_equal(store_node_heartbeat(st, a.id, 2), 0);
    memset(&got, 0, sizeof got);
    assert_int_equal(store_node_get(st, a.id, &got), 0);
    assert_string_equal(got.name, "host-a");
    assert_string_equal(got.advertise_url, "http://10.0.0.1:8080");
    assert_int_equal(got.running, 2);
    assert_int_equal(got.capacity, 3);
    assert_true(got.heartbeat_at >= a.heartbeat_at);
    assert_int_equal(store_node_heartbeat(st, "nosuchnode00000000000000", 1), E_NOTFOUND);
    assert_int_equal(store_node_get(st, "nosuchnode00000000000000", &got), E_NOTFOUND);
    struct node_rec *rows = NULL;
    size_t n = 0;
    assert_int_equal(store_node_list(st, &rows, &n), 0);
    assert_int_equal(n, 2);
    /* oldest first; registrations in the same millisecond go by id */
    int a_first =
        a.started_at < b.started_at || (a.started_at == b.started_at && strcmp(a.id, b.id) < 0);
    assert_string_equal(rows[0].id, a_first ? a.id : b.id);
    assert_string_equal(rows[1].id, a_first ? b.id : a.id);
    xfree(rows);
}

struct sweep_ctx {
    struct store *st;
    pthread_barrier_t *go;
    const char *heir;
    int rc;
    char (*dead)[STORE_ID];
    size_t n;
};

static void *sweep_thread(void *arg)
{
    struct sweep_ctx *c = arg;
    pthread_barrier_wait(c->go);
    c->rc = store_node_sweep(c->st, 10000, c->heir, &c->dead, &c->n);
    return NULL;
}

/* "node_sweep declares dead every up node whose heartbeat is older than
 * lease_ms, and in the same transaction ends their active sessions ...
 * Each dead node is returned to exactly one sweeper." Then "node_heartbeat
 * ... E_NOTFOUND once it was declared dead". */
static void node_sweep_ends_a_dead_node_once(void **state)
{
    struct store *st = *state;
    struct err e;
    err_init(&e);
    struct store *st2; /* a second process's handle */
    assert_int_equal(store_open_pg(pg_url, &st2, &e), 0);
    struct org_rec o;
    struct project_rec p;
    make_org(st, &o, &p);
    struct node_rec a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    snprintf(a.name, sizeof a.name, "a");
    snprintf(b.name, sizeof b.name, "b");
    assert_int_equal(store_node_register(st, &a), 0);
    assert_int_equal(store_node_register(st, &b), 0);
    /* a stopped beating a minute ago */
    char sql[160];
    snprintf(sql, sizeof sql,
             "UPDATE nodes SET heartbeat_at = heartbeat_at - 60000 WHERE id = '%s'", a.id);
    assert_int_equal(pg_admin(pg_db, sql), 0);
    struct node_rec a_then;
    assert_int_equal(store_node_get(st, a.id, &a_then), 0);
    int64_t hb = a_then.heartbeat_at;
    struct session_rec s_old, s_new, s_b, got;
    new_session(&s_old, &o, &p, a.id, "{}");
    s_old.created_at = hb - 5000;
    new_session(&s_new, &o, &p, a.id, "{}");
    s_new.created_at = hb + 100000; /* after the last heartbeat: uptime 0, never negative */
    new_session(&s_b, &o, &p, b.id, "{}");
    assert_int_equal(store_session_insert(st, &s_old), 0);
    assert_int_equal(store_session_insert(st, &s_new), 0);
    assert_int_equal(store_session_insert(st, &s_b), 0);
    struct pool_rec pl;
    new_pool(&pl, &o, &p, a.id, "{\"size\":2}");
    assert_int_equal(store_pool_insert(st, &pl), 0);

    enum { SWEEPERS = 8 };
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, SWEEPERS);
    struct sweep_ctx c[SWEEPERS];
    pthread_t th[SWEEPERS];
    for (int i = 0; i < SWEEPERS; i++) {
        c[i] = (struct sweep_ctx){.st = i % 2 ? st2 : st, .go = &go, .heir = b.id};
        assert_int_equal(pthread_create(&th[i], NULL, sweep_thread, &c[i]), 0);
    }
    int seen_a = 0;
    for (int i = 0; i < SWEEPERS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(c[i].rc, 0);
        for (size_t k = 0; k < c[i].n; k++) {
            assert_string_equal(c[i].dead[k], a.id);
            seen_a++;
        }
        xfree(c[i].dead);
    }
    pthread_barrier_destroy(&go);
    assert_int_equal(seen_a, 1);

    memset(&got, 0, sizeof got);
    assert_int_equal(store_session_get(st, o.id, p.id, s_old.id, 1, &got), 0);
    assert_string_equal(got.status, "deleted");
    assert_string_equal(got.end_reason, "node lost");
    assert_string_equal(got.usage_status, "ready");
    assert_int_equal(got.deleted_at, hb);
    assert_int_equal(got.uptime_ms, 5000);
    session_rec_clear(&got);
    assert_int_equal(store_session_get(st, o.id, p.id, s_new.id, 1, &got), 0);
    assert_string_equal(got.status, "deleted");
    assert_int_equal(got.uptime_ms, 0);
    session_rec_clear(&got);
    assert_int_equal(store_session_get(st, o.id, p.id, s_b.id, 0, &got), 0);
    assert_string_equal(got.status, "active");
    session_rec_clear(&got);
    /* the pool moved to the heir */
    struct pool_rec *pools = NULL;
    size_t np = 0;
    assert_int_equal(store_pool_list_node(st, b.id, &pools, &np), 0);
    assert_int_equal(np, 1);
    assert_string_equal(pools[0].id, pl.id);
    pool_rec_clear(&pools[0]);
    xfree(pools);
    /* the dead node fences itself; the live one beats on */
    assert_int_equal(store_node_heartbeat(st, a.id, 0), E_NOTFOUND);
    assert_int_equal(store_node_heartbeat(st, b.id, 1), 0);
    struct node_rec now_a;
    assert_int_equal(store_node_get(st, a.id, &now_a), 0);
    assert_string_equal(now_a.state, "dead");
    struct node_rec *nodes = NULL;
    size_t nn = 0;
    assert_int_equal(store_node_list(st, &nodes, &nn), 0);
    assert_int_equal(nn, 1);
    assert_string_equal(nodes[0].id, b.id);
    xfree(nodes);
    /* nothing is left to sweep; a session the dead node inserted late (its
     * insert raced the sweep) is ended by the next sweep all the same */
    struct session_rec late;
    new_session(&late, &o, &p, a.id, "{}");
    assert_int_equal(store_session_insert(st, &late), 0);
    char(*dead)[STORE_ID] = NULL;
    size_t nd = 9;
    assert_int_equal(store_node_sweep(st, 10000, b.id, &dead, &nd), 0);
    assert_int_equal(nd, 0);
    xfree(dead);
    assert_int_equal(store_session_get(st, o.id, p.id, late.id, 1, &got), 0);
    assert_string_equal(got.status, "deleted");
    assert_string_equal(got.end_reason, "node lost");
    assert_int_equal(got.uptime_ms, 0);
    session_rec_clear(&got);
    store_close(st2);
    org_rec_clear(&o);
}

/* "node_sweep also claims each node it declares dead for the sweeper (heir)
 * for lease_ms; node_orphans_done(id) says they were ended ...
 * node_orphans_claim gives `me` (for claim_ms) every dead node whose claim
 * ran out before that, each to one caller ... node_retire claims nothing." */
static void node_orphans_claim_takes_over_a_claim_that_ran_out(void **state)
{
    struct store *st = *state;
    struct node_rec a, b, c;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    memset(&c, 0, sizeof c);
    assert_int_equal(store_node_register(st, &a), 0);
    assert_int_equal(store_node_register(st, &b), 0);
    assert_int_equal(store_node_register(st, &c), 0);
    char sql[200];
    snprintf(sql, sizeof sql,
             "UPDATE nodes SET heartbeat_at = heartbeat_at - 60000 WHERE id = '%s'", a.id);
    assert_int_equal(pg_admin(pg_db, sql), 0);
    char(*dead)[STORE_ID] = NULL;
    size_t nd = 0;
    assert_int_equal(store_node_sweep(st, 10000, b.id, &dead, &nd), 0);
    assert_int_equal(nd, 1);
    xfree(dead);
    /* b's claim runs: nobody else is given a */
    assert_int_equal(store_node_orphans_claim(st, c.id, 10000, &dead, &nd), 0);
    assert_int_equal(nd, 0);
    xfree(dead);
    /* b died before it was done: once its claim ran out, c takes it, once */
    snprintf(sql, sizeof sql,
             "UPDATE nodes SET orphans_until = orphans_until - 20000 WHERE id = '%s'", a.id);
    assert_int_equal(pg_admin(pg_db, sql), 0);
    assert_int_equal(store_node_orphans_claim(st, c.id, 10000, &dead, &nd), 0);
    assert_int_equal(nd, 1);
    assert_string_equal(dead[0], a.id);
    xfree(dead);
    assert_int_equal(store_node_orphans_claim(st, b.id, 10000, &dead, &nd), 0);
    assert_int_equal(nd, 0);
    xfree(dead);
    /* done: never given again, however old */
    assert_int_equal(store_node_orphans_done(st, a.id), 0);
    snprintf(sql, sizeof sql, "UPDATE nodes SET heartbeat_at = heartbeat_at - 60000");
    assert_int_equal(pg_admin(pg_db, sql), 0);
    /* a retired node (a clean stop) leaves nothing to claim */
    assert_int_equal(store_node_retire(st, b.id, "server stopped", c.id), 0);
    assert_int_equal(store_node_orphans_claim(st, c.id, 0, &dead, &nd), 0);
    assert_int_equal(nd, 0);
    xfree(dead);
}

/* "node_retire does the same to one node at once, with end_reason `reason`
 * and deleted_at = now ...; E_NOTFOUND when it is not up." */
static void node_retire_ends_one_node(void **state)
{
    struct store *st = *state;
    struct org_rec o;
    struct project_rec p;
    make_org(st, &o, &p);
    struct node_rec a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    assert_int_equal(store_node_register(st, &a), 0);
    assert_int_equal(store_node_register(st, &b), 0);
    struct session_rec s, got;
    new_session(&s, &o, &p, a.id, "{}");
    s.created_at = a.started_at - 1000;
    assert_int_equal(store_session_insert(st, &s), 0);
    struct pool_rec pl;
    new_pool(&pl, &o, &p, a.id, "{\"size\":1}");
    assert_int_equal(store_pool_insert(st, &pl), 0);
    assert_int_equal(store_node_retire(st, a.id, "server stopped", b.id), 0);
    memset(&got, 0, sizeof got);
    assert_int_equal(store_session_get(st, o.id, p.id, s.id, 1, &got), 0);
    assert_string_equal(got.status, "deleted");
    assert_string_equal(got.end_reason, "server stopped");
    assert_string_equal(got.usage_status, "ready");
    assert_true(got.deleted_at >= a.started_at);
    assert_int_equal(got.uptime_ms, got.deleted_at - s.created_at);
    session_rec_clear(&got);
    struct pool_rec *pools = NULL;
    size_t np = 0;
    assert_int_equal(store_pool_list_node(st, b.id, &pools, &np), 0);
    assert_int_equal(np, 1);
    pool_rec_clear(&pools[0]);
    xfree(pools);
    assert_int_equal(store_node_retire(st, a.id, "again", b.id), E_NOTFOUND);
    assert_int_equal(store_node_heartbeat(st, a.id, 0), E_NOTFOUND);
    org_rec_clear(&o);
}

/* "org_slot_take inserts a slot of kind held by node_id only while the
 * org's live slots of that kind stay below limit ... A slot is live while
 * its node is up and for ttl_ms after the take ... E_LIMIT when full (*held
 * receives the live count). org_slot_give deletes slot id (a missing one is
 * 0). node_sweep and node_retire delete the slots of the nodes they end." */
static void org_slot_take_counts_the_orgs_live_slots(void **state)
{
    struct store *st = *state;
    struct org_rec o, o2;
    struct project_rec p, p2;
    make_org(st, &o, &p);
    make_org(st, &o2, &p2);
    struct node_rec a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    assert_int_equal(store_node_register(st, &a), 0);
    assert_int_equal(store_node_register(st, &b), 0);
    char s1[STORE_ID], s2[STORE_ID], s3[STORE_ID];
    int64_t held = -1;
    assert_int_equal(store_org_slot_take(st, "k", o.id, a.id, 2, 60000, s1, &held), 0);
    assert_int_equal(held, 0);
    assert_int_equal(store_org_slot_take(st, "k", o.id, a.id, 2, 60000, s2, NULL), 0);
    assert_string_not_equal(s1, s2);
    /* the org's 2 on node a refuse a third on node b */
    assert_int_equal(store_org_slot_take(st, "k", o.id, b.id, 2, 60000, s3, &held), E_LIMIT);
    assert_int_equal(held, 2);
    assert_string_equal(s3, "");
    /* another kind, another org: their own counts */
    assert_int_equal(store_org_slot_take(st, "j", o.id, b.id, 1, 60000, s3, NULL), 0);
    assert_int_equal(store_org_slot_take(st, "k", o2.id, b.id, 1, 60000, s3, NULL), 0);
    /* a slot given back is free on every node; a second give is 0 */
    assert_int_equal(store_org_slot_give(st, s1), 0);
    assert_int_equal(store_org_slot_give(st, s1), 0);
    assert_int_equal(store_org_slot_take(st, "k", o.id, b.id, 2, 60000, s1, NULL), 0);
    /* node a retired: its slot is gone, one of b's is left */
    assert_int_equal(store_node_retire(st, a.id, "server stopped", b.id), 0);
    assert_int_equal(store_org_slot_take(st, "k", o.id, b.id, 2, 60000, s2, &held), 0);
    assert_int_equal(held, 1);
    /* an expired slot counts no more */
    assert_int_equal(store_org_slot_take(st, "e", o.id, b.id, 1, 0, s3, NULL), 0);
    assert_int_equal(store_org_slot_take(st, "e", o.id, b.id, 1, 60000, s3, &held), 0);
    assert_int_equal(held, 0);
    assert_int_equal(store_org_slot_take(st, "k", "no-such-org", b.id, 2, 60000, s3, NULL),
                     E_NOTFOUND);
    org_rec_clear(&o);
    org_rec_clear(&o2);
}

struct admit_ctx {
    struct store *st;
    pthread_barrier_t *go;
    const struct org_rec *o;
    const struct project_rec *p;
    int rc;
};

static void *admit_thread(void *arg)
{
    struct admit_ctx *c = arg;
    struct session_rec s;
    new_session(&s, c->o, c->p, "n1", "{}");
    pthread_barrier_wait(c->go);
    c->rc = store_session_admit(c->st, &s, 3, NULL, NULL);
    return NULL;
}

/* "session_admit inserts s only while the org's active standalone sessions
 * plus the sizes of its active pools stay below limit, serialized per org
 * across every connection and process. E_LIMIT when full." */
static void session_admit_is_exact_under_concurrency(void **state)
{
    struct store *st = *state;
    struct err e;
    err_init(&e);
    struct store *st2;
    assert_int_equal(store_open_pg(pg_url, &st2, &e), 0);
    struct org_rec o;
    struct project_rec p;
    make_org(st, &o, &p);
    enum { CLIENTS = 16 };
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, CLIENTS);
    struct admit_ctx c[CLIENTS];
    pthread_t th[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        c[i] = (struct admit_ctx){.st = i % 2 ? st2 : st, .go = &go, .o = &o, .p = &p};
        assert_int_equal(pthread_create(&th[i], NULL, admit_thread, &c[i]), 0);
    }
    int ok = 0, limited = 0;
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(th[i], NULL);
        ok += c[i].rc == 0;
        limited += c[i].rc == E_LIMIT;
    }
    pthread_barrier_destroy(&go);
    assert_int_equal(ok, 3);
    assert_int_equal(limited, CLIENTS - 3);
    assert_int_equal(pg_scalar("SELECT count(*) FROM sessions WHERE org_id = $1 AND status = "
                               "'active'",
                               o.id),
                     3);
    /* a pool's sessions do not count; pool sizes do */
    struct session_rec s;
    new_session(&s, &o, &p, "n1", "{\"pool\":\"x\"}");
    assert_int_equal(store_session_insert(st, &s), 0);
    int64_t pools = -1;
    new_session(&s, &o, &p, "n1", "{}");
    assert_int_equal(store_session_admit(st, &s, 4, &pools, NULL), 0);
    assert_int_equal(pools, 0);
    struct pool_rec pl;
    new_pool(&pl, &o, &p, "n1", "{\"size\":2}");
    assert_int_equal(store_pool_insert(st, &pl), 0);
    new_session(&s, &o, &p, "n1", "{}");
    assert_int_equal(store_session_admit(st, &s, 6, &pools, NULL), E_LIMIT);
    assert_int_equal(pools, 2);
    assert_int_equal(store_session_admit(st, &s, 7, &pools, NULL), 0);
    /* no limit; a taken name is a conflict, not a limit */
    struct session_rec named;
    new_session(&named, &o, &p, "n1", "{}");
    snprintf(named.name, sizeof named.name, "dup");
    assert_int_equal(store_session_admit(st, &named, -1, NULL, NULL), 0);
    crypto_new_id(named.id);
    assert_int_equal(store_session_admit(st, &named, -1, NULL, NULL), E_CONFLICT);
    store_close(st2);
    org_rec_clear(&o);
}

/* "pool_admit: pool_insert (is_update 0) or pool_update (1) of p, only while
 * the org's pool sizes with p's new size plus its active standalone
 * sessions stay within limit: E_LIMIT when it would not (nothing written)." */
static void pool_admit_counts_sessions_and_pools(void **state)
{
    struct store *st = *state;
    struct org_rec o;
    struct project_rec p;
    make_org(st, &o, &p);
    struct session_rec s;
    for (int i = 0; i < 2; i++) {
        new_session(&s, &o, &p, "n1", "{}");
        assert_int_equal(store_session_admit(st, &s, -1, NULL, NULL), 0);
    }
    new_session(&s, &o, &p, "n1", "{\"pool\":\"x\"}");
    assert_int_equal(store_session_insert(st, &s), 0);
    int64_t pools = -1, sessions = -1;
    struct pool_rec a, b, got;
    new_pool(&a, &o, &p, "n1", "{\"size\":3}");
    assert_int_equal(store_pool_admit(st, &a, 0, 5, &pools, &sessions, NULL), 0);
    assert_int_equal(pools, 3);
    assert_int_equal(sessions, 2);
    new_pool(&b, &o, &p, "n1", "{\"size\":1}");
    assert_int_equal(store_pool_admit(st, &b, 0, 5, &pools, &sessions, NULL), E_LIMIT);
    assert_int_equal(pools, 4);
    memset(&got, 0, sizeof got);
    assert_int_equal(store_pool_get(st, o.id, p.id, b.id, &got), E_NOTFOUND);
    /* an update counts p's new size instead of its old one */
    a.config = "{\"size\":4}";
    assert_int_equal(store_pool_admit(st, &a, 1, 5, &pools, NULL, NULL), E_LIMIT);
    assert_int_equal(pools, 4);
    assert_int_equal(store_pool_get(st, o.id, p.id, a.id, &got), 0);
    assert_string_equal(got.config, "{\"size\":3}");
    pool_rec_clear(&got);
    a.config = "{\"size\":2}";
    assert_int_equal(store_pool_admit(st, &a, 1, 5, &pools, NULL, NULL), 0);
    assert_int_equal(pools, 2);
    assert_int_equal(store_pool_admit(st, &b, 0, 5, &pools, NULL, NULL), 0);
    assert_int_equal(pools, 3);
    /* full: neither a session nor a bigger pool */
    new_session(&s, &o, &p, "n1", "{}");
    assert_int_equal(store_session_admit(st, &s, 5, &pools, NULL), E_LIMIT);
    assert_int_equal(pools, 3);
    /* a pool leaving the active state is never refused */
    snprintf(a.status, sizeof a.status, "deleted");
    assert_int_equal(store_pool_admit(st, &a, 1, 0, &pools, NULL, NULL), 0);
    assert_int_equal(pools, 1);
    assert_int_equal(store_pool_admit(st, &a, 1, -1, NULL, NULL, NULL), 0);
    org_rec_clear(&o);
}

/* "session_list_node: Active sessions of one node"; "pool_list_node: Active
 * pools homed on one node." */
static void lists_by_node(void **state)
{
    struct store *st = *state;
    struct org_rec o;
    struct project_rec p;
    make_org(st, &o, &p);
    struct session_rec a, b, c;
    new_session(&a, &o, &p, "n1", "{}");
    new_session(&b, &o, &p, "n1", "{}");
    new_session(&c, &o, &p, "n2", "{}");
    assert_int_equal(store_session_insert(st, &a), 0);
    assert_int_equal(store_session_insert(st, &b), 0);
    assert_int_equal(store_session_insert(st, &c), 0);
    snprintf(b.status, sizeof b.status, "deleted");
    assert_int_equal(store_session_update(st, &b), 0);
    struct session_rec *rows = NULL;
    size_t n = 0;
    assert_int_equal(store_session_list_node(st, "n1", &rows, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].id, a.id);
    assert_string_equal(rows[0].node_id, "n1");
    session_rec_clear(&rows[0]);
    xfree(rows);
    assert_int_equal(store_session_list_node(st, "n3", &rows, &n), 0);
    assert_int_equal(n, 0);
    xfree(rows);
    struct pool_rec pa, pb;
    new_pool(&pa, &o, &p, "n1", "{}");
    new_pool(&pb, &o, &p, "n2", "{}");
    assert_int_equal(store_pool_insert(st, &pa), 0);
    assert_int_equal(store_pool_insert(st, &pb), 0);
    struct pool_rec *pools = NULL;
    assert_int_equal(store_pool_list_node(st, "n2", &pools, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(pools[0].id, pb.id);
    pool_rec_clear(&pools[0]);
    xfree(pools);
    org_rec_clear(&o);
}

/* "blob: put replaces; get returns an xmalloc'd copy (E_NOTFOUND when
 * absent); delete of a missing key is 0." Binary bytes, NULs included. */
static void blobs_round_trip_binary(void **state)
{
    struct store *st = *state;
    unsigned char bytes[4096];
    for (size_t i = 0; i < sizeof bytes; i++)
        bytes[i] = (unsigned char)(i * 7);
    bytes[0] = 0;
    bytes[1] = 0;
    void *data = NULL;
    size_t len = 0;
    assert_int_equal(store_blob_get(st, "profiles/x", &data, &len), E_NOTFOUND);
    assert_int_equal(store_blob_put(st, "profiles/x", bytes, sizeof bytes), 0);
    assert_int_equal(store_blob_get(st, "profiles/x", &data, &len), 0);
    assert_int_equal(len, sizeof bytes);
    assert_memory_equal(data, bytes, sizeof bytes);
    xfree(data);
    assert_int_equal(store_blob_put(st, "profiles/x", "\0ab", 3), 0);
    assert_int_equal(store_blob_get(st, "profiles/x", &data, &len), 0);
    assert_int_equal(len, 3);
    assert_memory_equal(data, "\0ab", 3);
    xfree(data);
    assert_int_equal(store_blob_put(st, "empty", "", 0), 0);
    assert_int_equal(store_blob_get(st, "empty", &data, &len), 0);
    assert_int_equal(len, 0);
    xfree(data);
    assert_int_equal(store_blob_delete(st, "profiles/x"), 0);
    assert_int_equal(store_blob_get(st, "profiles/x", &data, &len), E_NOTFOUND);
    assert_int_equal(store_blob_delete(st, "profiles/x"), 0);
}

/* "run_exclusive: takes a database-wide lock named by key for the life of
 * the call to fn": a second caller with the same key (another thread, its
 * own connection) waits until the first one's fn has returned; a caller
 * with another key does not wait. */
struct excl {
    struct store *st;
    pthread_t second;
    int started;
    int first_done; /* atomic: read by the second caller's thread */
    int second_saw_first_done;
    int second_rc;
    int other_ran;
    int64_t waiting;
};

static int excl_second(void *arg)
{
    struct excl *x = arg;
    x->second_saw_first_done = __atomic_load_n(&x->first_done, __ATOMIC_SEQ_CST);
    return 5;
}

static void *excl_second_thread(void *arg)
{
    struct excl *x = arg;
    x->second_rc = store_run_exclusive(x->st, "bootstrap", excl_second, x);
    return NULL;
}

static int excl_other(void *arg)
{
    ((struct excl *)arg)->other_ran = 1;
    return 0;
}

static int excl_first(void *arg)
{
    struct excl *x = arg;
    if (pthread_create(&x->second, NULL, excl_second_thread, x) != 0)
        return -1;
    x->started = 1;
    /* Wait (up to 10 s) until the second caller is queued on the lock. */
    int64_t deadline = clock_mono_ms() + 10000;
    while (clock_mono_ms() < deadline &&
           (x->waiting = pg_scalar("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                                   " AND NOT granted",
                                   NULL)) < 1) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (store_run_exclusive(x->st, "another key", excl_other, x) != 0)
        return -1;
    __atomic_store_n(&x->first_done, 1, __ATOMIC_SEQ_CST);
    return 7;
}

static void run_exclusive_serializes_by_key(void **state)
{
    struct excl x = {.st = *state};
    assert_int_equal(store_run_exclusive(x.st, "bootstrap", excl_first, &x), 7);
    assert_true(x.started);
    pthread_join(x.second, NULL);
    assert_int_equal(x.waiting, 1);
    assert_true(x.other_ran);
    assert_int_equal(x.second_rc, 5);
    assert_true(x.second_saw_first_done);
    /* both released: a third caller gets the lock at once */
    assert_int_equal(store_run_exclusive(x.st, "bootstrap", excl_other, &x), 0);
}

/* SQLite: a new session's row is the one write not synced at commit
 * (sqx_unsynced, docs/store.md). The row is visible at once, the connection
 * goes back to the pool syncing every commit (synchronous=FULL), and the
 * background syncer's pass covering the insert ends. */
static void session_insert_is_synced_in_the_background(void **state)
{
    struct store *st = *state;
    struct org_rec o;
    struct project_rec p;
    make_org(st, &o, &p);
    struct session_rec a;
    new_session(&a, &o, &p, "local", "{}");
    assert_int_equal(store_session_insert(st, &a), 0);
    struct session_rec got;
    memset(&got, 0, sizeof got);
    assert_int_equal(store_session_get(st, o.id, p.id, a.id, 0, &got), 0);
    session_rec_clear(&got);
    struct sq *s = (struct sq *)st;
    assert_non_null(s->syncer);
    assert_int_equal(sqx_sync_wait(s, 10000), 0);
    /* Every pooled connection (the insert's is among them) syncs again. */
    struct conn *held[8];
    size_t n = 0;
    pthread_mutex_lock(&s->mu);
    for (struct conn *c = s->idle; c && n < 8; c = c->next)
        held[n++] = c;
    pthread_mutex_unlock(&s->mu);
    assert_true(n > 0);
    for (size_t i = 0; i < n; i++) {
        sqlite3_stmt *q;
        assert_int_equal(sqlite3_prepare_v2(held[i]->db, "PRAGMA synchronous", -1, &q, NULL),
                         SQLITE_OK);
        assert_int_equal(sqlite3_step(q), SQLITE_ROW);
        assert_int_equal(sqlite3_column_int(q, 0), 2); /* FULL */
        sqlite3_finalize(q);
    }
    org_rec_clear(&o);
}

/* Audit log entries: "one organization's entries" (another's never
 * listed), the filters, newest first with the (ts, id) cursor of the last
 * entry, oldest first for exports, and the prune of entries older than the
 * retention, at most max per call. */
static void audit_entries_filter_page_prune(void **state)
{
    struct store *st = *state;
    struct audit_rec rows_in[5];
    memset(rows_in, 0, sizeof rows_in);
    const struct {
        const char *org, *method, *path, *user;
        int64_t ts;
    } in[5] = {
        {"o1", "POST", "/profiles", "k1", 100},    {"o1", "DELETE", "/profiles/a", "k2", 200},
        {"o1", "PATCH", "/browsers/x", "k1", 200}, {"o2", "POST", "/profiles", "k9", 150},
        {"o1", "POST", "/proxies", "k1", 300},
    };
    for (size_t i = 0; i < 5; i++) {
        snprintf(rows_in[i].org_id, sizeof rows_in[i].org_id, "%s", in[i].org);
        snprintf(rows_in[i].method, sizeof rows_in[i].method, "%s", in[i].method);
        snprintf(rows_in[i].auth_strategy, sizeof rows_in[i].auth_strategy, "api_key");
        snprintf(rows_in[i].service, sizeof rows_in[i].service, "%.8s", in[i].path + 1);
        rows_in[i].ts = in[i].ts;
        rows_in[i].status = 200;
        rows_in[i].path = (char *)in[i].path;
        rows_in[i].route = (char *)in[i].path;
        rows_in[i].user_id = (char *)in[i].user;
        rows_in[i].user_agent = "UA/1";
        rows_in[i].client_ip = "127.0.0.1";
        rows_in[i].domain = "api.example";
    }
    assert_int_equal(store_audit_insert(st, rows_in, 5), 0);
    assert_true(rows_in[1].id > rows_in[0].id);

    struct audit_query q = {.start_ms = 0, .end_ms = 1000};
    struct page pg = {.limit = 2};
    struct audit_rec *rows = NULL;
    size_t n = 0;
    assert_int_equal(store_audit_list(st, "o1", &q, &pg, &rows, &n), 0);
    assert_int_equal(n, 2);
    assert_true(pg.has_more);
    assert_string_equal(rows[0].path, "/proxies");
    assert_int_equal(rows[1].ts, 200);
    assert_int_equal(rows[1].id, rows_in[2].id); /* same ts: the later id first */
    q.after_ts = rows[1].ts;
    q.after_id = rows[1].id;
    for (size_t i = 0; i < n; i++)
        audit_rec_clear(&rows[i]);
    xfree(rows);
    assert_int_equal(store_audit_list(st, "o1", &q, &pg, &rows, &n), 0);
    assert_int_equal(n, 2);
    assert_false(pg.has_more);
    assert_string_equal(rows[0].path, "/profiles/a");
    assert_string_equal(rows[1].path, "/profiles");
    for (size_t i = 0; i < n; i++)
        audit_rec_clear(&rows[i]);
    xfree(rows);

    /* Filters: methods, excluded methods, user ids, search, bounds, and
     * oldest first. */
    pg.limit = 10;
    q = (struct audit_query){
        .start_ms = 0, .end_ms = 1000, .methods = ",POST,", .user_ids = ",k1,", .asc = 1};
    assert_int_equal(store_audit_list(st, "o1", &q, &pg, &rows, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(rows[0].path, "/profiles");
    assert_string_equal(rows[1].path, "/proxies");
    for (size_t i = 0; i < n; i++)
        audit_rec_clear(&rows[i]);
    xfree(rows);
    q = (struct audit_query){
        .start_ms = 150, .end_ms = 300, .exclude_methods = ",PATCH,", .search = "profiles/"};
    assert_int_equal(store_audit_list(st, "o1", &q, &pg, &rows, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].method, "DELETE");
    assert_string_equal(rows[0].user_agent, "UA/1");
    audit_rec_clear(&rows[0]);
    xfree(rows);
    /* search_user_id ORs user ids into the search. */
    q = (struct audit_query){
        .start_ms = 0, .end_ms = 1000, .search = "proxies", .user_ids = ",k2,", .asc = 1};
    assert_int_equal(store_audit_list(st, "o1", &q, &pg, &rows, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(rows[0].path, "/profiles/a");
    assert_string_equal(rows[0].domain, "api.example");
    assert_string_equal(rows[1].path, "/proxies");
    for (size_t i = 0; i < n; i++)
        audit_rec_clear(&rows[i]);
    xfree(rows);
    q = (struct audit_query){.start_ms = 0, .end_ms = 1000, .service = "browsers"};
    assert_int_equal(store_audit_list(st, "o2", &q, &pg, &rows, &n), 0);
    assert_int_equal(n, 0);
    xfree(rows);

    int64_t deleted = 0;
    assert_int_equal(store_audit_prune(st, 250, 2, &deleted), 0);
    assert_int_equal(deleted, 2);
    assert_int_equal(store_audit_prune(st, 250, 2, &deleted), 0);
    assert_int_equal(deleted, 2);
    assert_int_equal(store_audit_prune(st, 250, 2, &deleted), 0);
    assert_int_equal(deleted, 0);
    q = (struct audit_query){.start_ms = 0, .end_ms = 1000};
    assert_int_equal(store_audit_list(st, "o1", &q, &pg, &rows, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(rows[0].ts, 300);
    audit_rec_clear(&rows[0]);
    xfree(rows);
}

/* Issue 33.7, "never loses an entry of an acknowledged change": a spool
 * replayed after a crash inserts entries again; an entry id already stored
 * is ignored (the batch still commits), entries without one are all kept. */
static void audit_entry_id_inserted_once(void **state)
{
    struct store *st = *state;
    struct audit_rec rows[3];
    memset(rows, 0, sizeof rows);
    for (size_t i = 0; i < 3; i++) {
        snprintf(rows[i].org_id, sizeof rows[i].org_id, "oe");
        snprintf(rows[i].method, sizeof rows[i].method, "POST");
        snprintf(rows[i].auth_strategy, sizeof rows[i].auth_strategy, "api_key");
        snprintf(rows[i].service, sizeof rows[i].service, "profiles");
        rows[i].ts = 100 + (int64_t)i;
        rows[i].status = 200;
    }
    snprintf(rows[0].entry_id, sizeof rows[0].entry_id, "e1");
    snprintf(rows[1].entry_id, sizeof rows[1].entry_id, "e1"); /* the same entry again */
    assert_int_equal(store_audit_insert(st, rows, 3), 0);
    assert_true(rows[0].id > 0);
    assert_int_equal(rows[1].id, 0);                      /* ignored */
    assert_int_equal(store_audit_insert(st, rows, 1), 0); /* a replay */
    assert_int_equal(rows[0].id, 0);
    assert_int_equal(store_audit_insert(st, &rows[2], 1), 0); /* no id: another row */

    struct audit_query q = {.start_ms = 0, .end_ms = 1000};
    struct page pg = {.limit = 10};
    struct audit_rec *out = NULL;
    size_t n = 0;
    assert_int_equal(store_audit_list(st, "oe", &q, &pg, &out, &n), 0);
    assert_int_equal(n, 3);
    for (size_t i = 0; i < n; i++)
        audit_rec_clear(&out[i]);
    xfree(out);
}

/* Search records (docs/search.md): read back by their organization only,
 * until they expire; pruned after. */
static void searches_per_org_until_expiry(void **state)
{
    struct store *st = *state;
    const char *rec = "{\"id\":\"srch_a\",\"query\":\"q \u00e9\"}";
    assert_int_equal(store_search_put(st, "srch_a", "org1", 1000, 5000, rec), 0);
    assert_int_equal(store_search_put(st, "srch_b", "org1", 1000, 9000, "{}"), 0);
    char *got = NULL;
    assert_int_equal(store_search_get(st, "org1", "srch_a", 4999, &got), 0);
    assert_string_equal(got, rec);
    xfree(got);
    assert_int_equal(store_search_get(st, "org2", "srch_a", 2000, &got), E_NOTFOUND);
    assert_int_equal(store_search_get(st, "org1", "srch_a", 5000, &got), E_NOTFOUND);
    assert_int_equal(store_search_get(st, "org1", "srch_none", 2000, &got), E_NOTFOUND);
    assert_int_equal(store_search_prune(st, 5000), 0);
    assert_int_equal(store_search_get(st, "org1", "srch_a", 0, &got), E_NOTFOUND);
    assert_int_equal(store_search_get(st, "org1", "srch_b", 0, &got), 0);
    xfree(got);
}

/* The config registry (docs/config-registry.md): analyses and entries per
 * organization, replaced by id / domain, listed with search and each sort,
 * pruned to the newest. */
static void config_registry_per_org(void **state)
{
    struct store *st = *state;
    assert_int_equal(store_cfgreg_analysis_put(st, "org1", "cra_a", "a.com", 1000, "{\"v\":1}"), 0);
    assert_int_equal(store_cfgreg_analysis_put(st, "org1", "cra_a", "a.com", 1000, "{\"v\":2}"), 0);
    assert_int_equal(store_cfgreg_analysis_put(st, "org1", "cra_b", "b.org", 2000, "{\"v\":3}"), 0);
    char *got = NULL;
    assert_int_equal(store_cfgreg_analysis_get(st, "org1", "cra_a", &got), 0);
    assert_string_equal(got, "{\"v\":2}");
    xfree(got);
    assert_int_equal(store_cfgreg_analysis_get(st, "org2", "cra_a", &got), E_NOTFOUND);
    struct page pg = {.limit = 10};
    struct cfgreg_text *rows = NULL;
    size_t n = 0;
    assert_int_equal(store_cfgreg_analysis_list(st, "org1", NULL, &pg, &rows, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(rows[0].json, "{\"v\":3}"); /* newest first */
    for (size_t i = 0; i < n; i++)
        xfree(rows[i].json);
    xfree(rows);
    assert_int_equal(store_cfgreg_analysis_list(st, "org1", "a.c", &pg, &rows, &n), 0);
    assert_int_equal(n, 1);
    xfree(rows[0].json);
    xfree(rows);
    struct cfgreg_entry_rec e1 = {"org1",          "a.com", "completed", "headless stealth direct",
                                  "{\"d\":\"a\"}", 5000,    500,         NULL};
    struct cfgreg_entry_rec e2 = {"org1", "b.org", "running", "", "{\"d\":\"b\"}", 4000, -1, NULL};
    struct cfgreg_entry_rec e3 = {"org2", "c.net", "completed", "", "{\"d\":\"c\"}", 9000, 0, NULL};
    assert_int_equal(store_cfgreg_entry_put(st, &e1), 0);
    assert_int_equal(store_cfgreg_entry_put(st, &e2), 0);
    assert_int_equal(store_cfgreg_entry_put(st, &e3), 0);
    e1.success_permille = 1000;
    assert_int_equal(store_cfgreg_entry_put(st, &e1), 0); /* replaced */
    assert_int_equal(store_cfgreg_entry_get(st, "org1", "a.com", &got), 0);
    assert_string_equal(got, "{\"d\":\"a\"}");
    xfree(got);
    assert_int_equal(store_cfgreg_entry_get(st, "org2", "a.com", &got), E_NOTFOUND);
    static const struct {
        enum cfgreg_sort sort;
        int desc;
        const char *first;
    } sorts[] = {
        {CFGREG_SORT_TARGET, 0, "{\"d\":\"a\"}"},    {CFGREG_SORT_TARGET, 1, "{\"d\":\"b\"}"},
        {CFGREG_SORT_RATE, 1, "{\"d\":\"a\"}"},      {CFGREG_SORT_RATE, 0, "{\"d\":\"b\"}"},
        {CFGREG_SORT_REQUESTED, 0, "{\"d\":\"b\"}"}, {CFGREG_SORT_STATUS, 1, "{\"d\":\"b\"}"},
        {CFGREG_SORT_CONFIG, 0, "{\"d\":\"b\"}"},
    };
    for (size_t k = 0; k < sizeof sorts / sizeof *sorts; k++) {
        assert_int_equal(
            store_cfgreg_entry_list(st, "org1", NULL, sorts[k].sort, sorts[k].desc, &pg, &rows, &n),
            0);
        assert_int_equal(n, 2);
        assert_string_equal(rows[0].json, sorts[k].first);
        for (size_t i = 0; i < n; i++)
            xfree(rows[i].json);
        xfree(rows);
    }
    assert_int_equal(
        store_cfgreg_entry_list(st, "org1", ".org", CFGREG_SORT_TARGET, 0, &pg, &rows, &n), 0);
    assert_int_equal(n, 1);
    xfree(rows[0].json);
    xfree(rows);
    assert_int_equal(store_cfgreg_prune(st, "org1", 1, 1), 0);
    assert_int_equal(store_cfgreg_analysis_get(st, "org1", "cra_a", &got), E_NOTFOUND);
    assert_int_equal(store_cfgreg_analysis_get(st, "org1", "cra_b", &got), 0);
    xfree(got);
    assert_int_equal(store_cfgreg_entry_get(st, "org1", "b.org", &got), E_NOTFOUND);
    assert_int_equal(store_cfgreg_entry_get(st, "org1", "a.com", &got), 0);
    xfree(got);
    assert_int_equal(store_cfgreg_entry_get(st, "org2", "c.net", &got), 0);
    xfree(got);
}

/* An organization keeps its LIM_SEARCH_STORED_PER_ORG newest records:
 * storing one more deletes its oldest, never another organization's. */
static void searches_keep_the_newest_per_org(void **state)
{
    struct store *st = *state;
    assert_int_equal(store_search_put(st, "srch_other", "org2", 1, 1000000, "{}"), 0);
    for (int i = 0; i <= LIM_SEARCH_STORED_PER_ORG; i++) {
        char id[32];
        snprintf(id, sizeof id, "srch_%04d", i);
        assert_int_equal(store_search_put(st, id, "org1", 10 + i, 1000000, "{}"), 0);
    }
    char *got = NULL;
    assert_int_equal(store_search_get(st, "org1", "srch_0000", 0, &got), E_NOTFOUND);
    assert_int_equal(store_search_get(st, "org1", "srch_0001", 0, &got), 0);
    xfree(got);
    assert_int_equal(store_search_get(st, "org2", "srch_other", 0, &got), 0);
    xfree(got);
}

/* docs/telemetry.md "Audit logs", the per-organization bound
 * (LIM_AUDIT_ROWS_PER_ORG): trim deletes an organization's oldest entries
 * past its newest keep (by ts, then id), never another organization's. */
static void audit_trim_keeps_the_newest_per_org(void **state)
{
    struct store *st = *state;
    struct audit_rec rows[12];
    memset(rows, 0, sizeof rows);
    for (size_t i = 0; i < 12; i++) {
        snprintf(rows[i].org_id, sizeof rows[i].org_id, "%s", i < 10 ? "ta" : "tb");
        snprintf(rows[i].method, sizeof rows[i].method, "POST");
        snprintf(rows[i].auth_strategy, sizeof rows[i].auth_strategy, "api_key");
        snprintf(rows[i].service, sizeof rows[i].service, "profiles");
        rows[i].ts = i < 10 ? 100 + (int64_t)i / 2 : 1; /* pairs of equal ts; tb's older */
        rows[i].status = 200;
    }
    assert_int_equal(store_audit_insert(st, rows, 12), 0);
    int64_t deleted = -1;
    assert_int_equal(store_audit_trim(st, "ta", 3, &deleted), 0);
    assert_int_equal(deleted, 7);
    assert_int_equal(store_audit_trim(st, "ta", 3, &deleted), 0);
    assert_int_equal(deleted, 0);
    assert_int_equal(store_audit_trim(st, "nobody", 3, &deleted), 0);
    assert_int_equal(deleted, 0);

    struct audit_query q = {.start_ms = 0, .end_ms = 1000};
    struct page pg = {.limit = 20};
    struct audit_rec *out = NULL;
    size_t n = 0;
    assert_int_equal(store_audit_list(st, "ta", &q, &pg, &out, &n), 0);
    assert_int_equal(n, 3); /* the newest three: ts 104, 104, then 103's later id */
    assert_int_equal(out[0].id, rows[9].id);
    assert_int_equal(out[1].id, rows[8].id);
    assert_int_equal(out[2].id, rows[7].id);
    for (size_t i = 0; i < n; i++)
        audit_rec_clear(&out[i]);
    xfree(out);
    assert_int_equal(store_audit_list(st, "tb", &q, &pg, &out, &n), 0);
    assert_int_equal(n, 2); /* older than all of ta's kept, yet another organization's */
    for (size_t i = 0; i < n; i++)
        audit_rec_clear(&out[i]);
    xfree(out);
}

/* Runs one statement on st's database behind its back: sqlite_sql on the
 * SQLite store's file, pg_sql on the current case's PostgreSQL database. */
static void raw_exec(struct store *st, const char *sqlite_sql, const char *pg_sql)
{
    if (strcmp(st->ops->name, "sqlite") != 0) {
        assert_int_equal(pg_admin(pg_db, pg_sql), 0);
        return;
    }
    char path[sizeof dir + 16];
    snprintf(path, sizeof path, "%s/browserd.db", dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    char *msg = NULL;
    int rc = sqlite3_exec(db, sqlite_sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK)
        fprintf(stderr, "raw_exec %s: %s\n", sqlite_sql, msg ? msg : "?");
    sqlite3_free(msg);
    sqlite3_close(db);
    assert_int_equal(rc, SQLITE_OK);
}

/* "A prune that fails is rolled back alone: the end commits all the same,
 * and the organization's next end prunes" (session_update, both backends).
 * A trigger makes every delete of a session row fail. */
static void session_end_kept_when_its_prune_fails(void **state)
{
    struct store *st = *state;
    st->sessions_ended_kept = 1;
    struct org_rec a;
    struct project_rec pa;
    make_org(st, &a, &pa);
    struct session_rec old, end; /* data: a literal (insert_session) */
    insert_session(st, &a, &pa, "deleted", &old);
    insert_session(st, &a, &pa, "active", &end);
    raw_exec(st,
             "CREATE TRIGGER no_prune BEFORE DELETE ON sessions"
             " BEGIN SELECT RAISE(ABORT, 'no prune'); END",
             "CREATE FUNCTION no_prune() RETURNS trigger LANGUAGE plpgsql AS"
             " $$ BEGIN RAISE EXCEPTION 'no prune'; END $$;"
             " CREATE TRIGGER no_prune BEFORE DELETE ON sessions"
             " FOR EACH ROW EXECUTE FUNCTION no_prune()");
    snprintf(end.status, sizeof end.status, "deleted");
    end.deleted_at = clock_now_ms();
    end.uptime_ms = 4321;
    assert_int_equal(store_session_update(st, &end), 0);
    struct session_rec got;
    memset(&got, 0, sizeof got);
    assert_int_equal(store_session_get(st, a.id, pa.id, end.id, 1, &got), 0);
    assert_string_equal(got.status, "deleted"); /* the end is recorded */
    assert_int_equal(got.uptime_ms, 4321);
    session_rec_clear(&got);
    struct session_rec *rows = NULL;
    size_t n = ended_of(st, &a, &pa, &rows);
    assert_int_equal(n, 2); /* the prune was not: both ended rows are there */
    for (size_t i = 0; i < n; i++)
        session_rec_clear(&rows[i]);
    xfree(rows);
    /* The next end prunes once deletes work again. */
    raw_exec(st, "DROP TRIGGER no_prune", "DROP TRIGGER no_prune ON sessions");
    struct session_rec next;
    insert_session(st, &a, &pa, "active", &next);
    snprintf(next.status, sizeof next.status, "deleted");
    next.deleted_at = end.deleted_at + 1;
    assert_int_equal(store_session_update(st, &next), 0);
    n = ended_of(st, &a, &pa, &rows);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].id, next.id);
    session_rec_clear(&rows[0]);
    xfree(rows);
    org_rec_clear(&a);
}

/* The contract's cases: each runs on both backends. */
#define CONTRACT_CASES(X)                                                                          \
    X(org_create_fills_ids_and_default_project)                                                    \
    X(meta_init_keeps_the_first_value)                                                             \
    X(last_active_project_and_unique_names)                                                        \
    X(auth_lookup_finds_key_and_org)                                                               \
    X(session_names_unique_among_active)                                                           \
    X(lists_page_with_has_more)                                                                    \
    X(node_ids_round_trip)                                                                         \
    X(pool_list_filters_by_region)                                                                 \
    X(key_list_filters_and_sorts)                                                                  \
    X(plans_and_orgs)                                                                              \
    X(session_list_filters)                                                                        \
    X(profiles_list_in_creation_order)                                                             \
    X(profiles_and_extensions)                                                                     \
    X(proxies_find_update_delete)                                                                  \
    X(credentials_crud)                                                                            \
    X(tenant_records_capped_and_ended_keys_pruned)                                                 \
    X(sessions_ended_pruned_per_org)                                                               \
    X(session_end_kept_when_its_prune_fails)                                                       \
    X(telem_bytes_by_org_and_trim)                                                                 \
    X(vaults_and_items)                                                                            \
    X(apps_objects)                                                                                \
    X(apps_unfinished_settle_once)                                                                 \
    X(config_registry_running_settle_once)                                                         \
    X(telemetry_events_and_destinations)                                                           \
    X(audit_entries_filter_page_prune)                                                             \
    X(project_limits_hold_sessions_and_pools)                                                      \
    X(audit_entry_id_inserted_once)                                                                \
    X(searches_per_org_until_expiry)                                                               \
    X(config_registry_per_org)                                                                     \
    X(searches_keep_the_newest_per_org)                                                            \
    X(audit_trim_keeps_the_newest_per_org)

/* "ac_flow_admit writes c's data only while the org's other connections
 * whose flow is IN_PROGRESS and not past its flow_expires_at stay below
 * limit, and c's own stored flow is not IN_PROGRESS on another node" (h11:
 * an org's login flow cap holds across a cluster). */
static void ac_flow_admit_counts_the_orgs_flows(void **state)
{
    struct store *st = *state;
    struct org_rec o;
    struct project_rec p;
    make_org(st, &o, &p);
    char later[40], earlier[40], on_a[200], on_b[200], expired[200];
    clock_fmt_rfc3339(clock_now_ms() + 600000, later, sizeof later);
    clock_fmt_rfc3339(clock_now_ms() - 1000, earlier, sizeof earlier);
    static const char form[] =
        "{\"flow\":{\"flow_status\":\"IN_PROGRESS\",\"flow_expires_at\":\"%s\","
        "\"node_id\":\"%s\"}}";
    snprintf(on_a, sizeof on_a, form, later, "A");
    snprintf(on_b, sizeof on_b, form, later, "B");
    snprintf(expired, sizeof expired, form, earlier, "A");
    char ended[] = "{\"flow\":{\"flow_status\":\"FAILED\",\"node_id\":\"A\"}}";
    struct authconn_rec c[4];
    memset(c, 0, sizeof c);
    for (int i = 0; i < 4; i++) {
        crypto_new_id(c[i].id);
        snprintf(c[i].org_id, sizeof c[i].org_id, "%s", o.id);
        snprintf(c[i].project_id, sizeof c[i].project_id, "%s", p.id);
        snprintf(c[i].profile_name, sizeof c[i].profile_name, "p%d", i);
        snprintf(c[i].domain, sizeof c[i].domain, "d.com");
        c[i].data = "{}";
        assert_int_equal(store_ac_insert(st, &c[i], 0), 0);
    }
    int64_t running = -1;
    c[0].data = on_a;
    c[1].data = on_a;
    c[2].data = on_b;
    assert_int_equal(store_ac_flow_admit(st, &c[0], "A", 2, &running), 0);
    assert_int_equal(store_ac_flow_admit(st, &c[1], "A", 2, &running), 0);
    assert_int_equal(store_ac_flow_admit(st, &c[2], "B", 2, &running), E_LIMIT);
    assert_int_equal(running, 2);
    struct authconn_rec got;
    memset(&got, 0, sizeof got);
    assert_int_equal(store_ac_get(st, o.id, p.id, c[2].id, &got), 0);
    assert_string_equal(got.data, "{}"); /* nothing written when refused */
    authconn_rec_clear(&got);
    /* Another node may not start a flow of c[0]; its own node may. */
    c[0].data = on_b;
    assert_int_equal(store_ac_flow_admit(st, &c[0], "B", 3, NULL), E_CONFLICT);
    c[0].data = on_a;
    assert_int_equal(store_ac_flow_admit(st, &c[0], "A", 2, NULL), 0);
    /* An ended flow frees its slot, and so does one past its expiry. */
    c[1].data = ended;
    assert_int_equal(store_ac_update(st, &c[1]), 0);
    assert_int_equal(store_ac_flow_admit(st, &c[2], "B", 2, NULL), 0);
    c[0].data = expired;
    assert_int_equal(store_ac_update(st, &c[0]), 0);
    c[3].data = on_b;
    assert_int_equal(store_ac_flow_admit(st, &c[3], "B", 2, &running), 0);
    assert_int_equal(store_ac_flow_admit(st, &c[1], "A", 2, &running), E_LIMIT);
    assert_int_equal(running, 2);
    org_rec_clear(&o);
}

/* Issue h13.3: the flows of a node known to be gone (its row dead or
 * retired) no longer count against the organization, though their rows
 * read IN_PROGRESS until a sweeper ends them; the connection's own such flow
 * still refuses a second flow of that connection on another node. */
static void ac_flow_admit_leaves_out_flows_of_gone_nodes(void **state)
{
    struct store *st = *state;
    struct org_rec o;
    struct project_rec p;
    make_org(st, &o, &p);
    struct node_rec gone, live;
    memset(&gone, 0, sizeof gone);
    memset(&live, 0, sizeof live);
    snprintf(gone.name, sizeof gone.name, "n1");
    snprintf(live.name, sizeof live.name, "n1");
    assert_int_equal(store_node_register(st, &gone), 0);
    assert_int_equal(store_node_register(st, &live), 0);
    char later[40], on_gone[200], on_live[200];
    clock_fmt_rfc3339(clock_now_ms() + 600000, later, sizeof later);
    static const char form[] =
        "{\"flow\":{\"flow_status\":\"IN_PROGRESS\",\"flow_expires_at\":\"%s\","
        "\"node_id\":\"%s\"}}";
    snprintf(on_gone, sizeof on_gone, form, later, gone.id);
    snprintf(on_live, sizeof on_live, form, later, live.id);
    struct authconn_rec c[3];
    memset(c, 0, sizeof c);
    for (int i = 0; i < 3; i++) {
        crypto_new_id(c[i].id);
        snprintf(c[i].org_id, sizeof c[i].org_id, "%s", o.id);
        snprintf(c[i].project_id, sizeof c[i].project_id, "%s", p.id);
        snprintf(c[i].profile_name, sizeof c[i].profile_name, "p%d", i);
        snprintf(c[i].domain, sizeof c[i].domain, "d.com");
        c[i].data = "{}";
        assert_int_equal(store_ac_insert(st, &c[i], 0), 0);
    }
    c[0].data = on_gone;
    c[1].data = on_gone;
    assert_int_equal(store_ac_flow_admit(st, &c[0], gone.id, 2, NULL), 0);
    assert_int_equal(store_ac_flow_admit(st, &c[1], gone.id, 2, NULL), 0);
    c[2].data = on_live;
    int64_t running = -1;
    assert_int_equal(store_ac_flow_admit(st, &c[2], live.id, 2, &running), E_LIMIT);
    assert_int_equal(running, 2); /* its node is up: its flows run */
    assert_int_equal(store_node_retire(st, gone.id, "server restarted", ""), 0);
    assert_int_equal(store_ac_flow_admit(st, &c[2], live.id, 2, &running), 0);
    assert_int_equal(running, 0);
    c[0].data = on_live;
    assert_int_equal(store_ac_flow_admit(st, &c[0], live.id, 2, NULL), E_CONFLICT);
    org_rec_clear(&o);
}

/* The cluster ops: PostgreSQL only. */
#define CLUSTER_CASES(X)                                                                           \
    X(pg_store_open_selects_postgresql)                                                            \
    X(migrations_apply_once_and_refuse_unknown)                                                    \
    X(pool_replaces_connections_the_server_closed)                                                 \
    X(nodes_register_heartbeat_list)                                                               \
    X(node_sweep_ends_a_dead_node_once)                                                            \
    X(node_retire_ends_one_node)                                                                   \
    X(node_orphans_claim_takes_over_a_claim_that_ran_out)                                          \
    X(session_admit_is_exact_under_concurrency)                                                    \
    X(pool_admit_counts_sessions_and_pools)                                                        \
    X(lists_by_node)                                                                               \
    X(blobs_round_trip_binary)                                                                     \
    X(ac_flow_admit_counts_the_orgs_flows)                                                         \
    X(ac_flow_admit_leaves_out_flows_of_gone_nodes)                                                \
    X(org_slot_take_counts_the_orgs_live_slots)                                                    \
    X(run_exclusive_serializes_by_key)

#define SQLITE_CASE(f) {"sqlite: " #f, f, open_sqlite, close_sqlite, NULL},
#define PG_CASE(f)     {"postgresql: " #f, f, open_pg, close_pg, NULL},

int main(void)
{
    const struct CMUnitTest tests[] = {CONTRACT_CASES(SQLITE_CASE) SQLITE_CASE(
        store_open_selects_the_backend) SQLITE_CASE(session_insert_is_synced_in_the_background)
                                           CONTRACT_CASES(PG_CASE) CLUSTER_CASES(PG_CASE)};
    return cmocka_run_group_tests_name("store/contract (sqlite, postgresql)", tests, pg_group_setup,
                                       pg_group_teardown);
}
