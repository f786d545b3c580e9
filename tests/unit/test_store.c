/*
 * The store contract (store/store.h), run against the SQLite backend. A new
 * backend (PostgreSQL) runs the same cases through its own open function:
 * each case names the promise of the header it checks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/xalloc.h"
#include "store/store.h"

static char dir[256];

static int open_store(void **state)
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

static int close_store(void **state)
{
    store_close(*state);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(org_create_fills_ids_and_default_project, open_store,
                                        close_store),
        cmocka_unit_test_setup_teardown(meta_init_keeps_the_first_value, open_store, close_store),
        cmocka_unit_test_setup_teardown(last_active_project_and_unique_names, open_store,
                                        close_store),
        cmocka_unit_test_setup_teardown(auth_lookup_finds_key_and_org, open_store, close_store),
        cmocka_unit_test_setup_teardown(session_names_unique_among_active, open_store, close_store),
        cmocka_unit_test_setup_teardown(lists_page_with_has_more, open_store, close_store),
    };
    return cmocka_run_group_tests_name("store/contract (sqlite)", tests, NULL, NULL);
}
