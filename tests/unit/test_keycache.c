/*
 * The auth_lookup cache (store/keycache.h and its SQLite change watch).
 *
 * The promise checked: auth_lookup stays exact with the cache on. A key or
 * org changed by ANOTHER connection (a second store on the same folder, or
 * another process, as `browserd admin` is) is seen on the very next lookup;
 * so is a change made through another pooled connection of the same store.
 * Then the module's own rules: entries live only under the epoch they were
 * stored with, a put from an older epoch is dropped, colliding keys evict.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/xalloc.h"
#include "store/keycache.h"
#include "store/store.h"

struct fixture {
    char dir[64];
    struct store *st;    /* the server's store */
    struct store *admin; /* a second store on the same folder */
    struct org_rec org;
    struct project_rec proj;
    struct apikey_rec key;
};

static struct store *open_at(const char *dir)
{
    struct err e;
    err_init(&e);
    struct store *st = NULL;
    assert_int_equal(store_open_sqlite(dir, &st, &e), 0);
    return st;
}

static void new_key(struct fixture *f, struct apikey_rec *k, const char *name)
{
    memset(k, 0, sizeof *k);
    snprintf(k->org_id, sizeof k->org_id, "%s", f->org.id);
    snprintf(k->name, sizeof k->name, "%s", name);
    char plain[64];
    snprintf(plain, sizeof plain, "bd_test_%s_%d", name, rand());
    crypto_sha256_hex(plain, strlen(plain), k->key_hash);
    snprintf(k->masked_key, sizeof k->masked_key, "bd_te...%s", name);
    assert_int_equal(store_key_create(f->st, k, 0), 0);
}

static int setup(void **state)
{
    struct fixture *f = xcalloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/browserd-keycache-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    f->st = open_at(f->dir);
    f->admin = open_at(f->dir);
    snprintf(f->org.name, sizeof f->org.name, "acme");
    snprintf(f->org.plan, sizeof f->org.plan, "developer");
    snprintf(f->org.plan_status, sizeof f->org.plan_status, "active");
    f->org.projects_enabled = 1;
    f->org.overrides = xstrdup("{}");
    snprintf(f->proj.name, sizeof f->proj.name, "default");
    assert_int_equal(store_org_create(f->st, &f->org, &f->proj), 0);
    new_key(f, &f->key, "k1");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    store_close(f->st);
    store_close(f->admin);
    org_rec_clear(&f->org);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    int rc = system(cmd);
    xfree(f);
    return rc == 0 ? 0 : -1;
}

/* Looks the key up twice (the second read is the one a cache would serve)
 * and returns the second answer. */
static int lookup(struct store *st, const char *hash, struct apikey_rec *k, struct org_rec *o)
{
    struct apikey_rec k0;
    struct org_rec o0 = {0};
    if (store_auth_lookup(st, hash, &k0, &o0) == 0)
        org_rec_clear(&o0);
    memset(o, 0, sizeof *o);
    return store_auth_lookup(st, hash, k, o);
}

/* Deleted by another connection: refused on the very next lookup. */
static void delete_by_another_connection_is_seen_next(void **state)
{
    struct fixture *f = *state;
    struct apikey_rec k;
    struct org_rec o;
    assert_int_equal(lookup(f->st, f->key.key_hash, &k, &o), 0);
    assert_int_equal(k.deleted_at, 0);
    org_rec_clear(&o);
    struct apikey_rec del = f->key;
    del.deleted_at = clock_now_ms();
    assert_int_equal(store_key_update(f->admin, &del), 0);
    assert_int_equal(store_auth_lookup(f->st, f->key.key_hash, &k, &o), 0);
    assert_int_equal(k.deleted_at, del.deleted_at);
    org_rec_clear(&o);
}

/* Rotated by another connection: the old key's new expiry and the fresh key
 * are both seen on the very next lookups. */
static void rotate_by_another_connection_is_seen_next(void **state)
{
    struct fixture *f = *state;
    struct apikey_rec k;
    struct org_rec o;
    assert_int_equal(lookup(f->st, f->key.key_hash, &k, &o), 0);
    assert_int_equal(k.expires_at, 0);
    org_rec_clear(&o);
    struct apikey_rec fresh = {0};
    snprintf(fresh.org_id, sizeof fresh.org_id, "%s", f->org.id);
    snprintf(fresh.name, sizeof fresh.name, "rotated");
    crypto_sha256_hex("bd_rotated", 10, fresh.key_hash);
    snprintf(fresh.masked_key, sizeof fresh.masked_key, "bd_ro...ated");
    /* The fresh key was looked up (and missed) before it existed. */
    assert_int_equal(store_auth_lookup(f->st, fresh.key_hash, &k, &o), E_NOTFOUND);
    int64_t exp = clock_now_ms() - 1;
    assert_int_equal(store_key_rotate(f->admin, f->org.id, f->key.id, exp, &fresh, 0), 0);
    assert_int_equal(store_auth_lookup(f->st, f->key.key_hash, &k, &o), 0);
    assert_int_equal(k.expires_at, exp);
    org_rec_clear(&o);
    assert_int_equal(store_auth_lookup(f->st, fresh.key_hash, &k, &o), 0);
    assert_string_equal(k.id, fresh.id);
    org_rec_clear(&o);
}

/* The org row travels with the key: an org change by another connection
 * (`admin org update`) is seen on the very next lookup too. */
static void org_change_by_another_connection_is_seen_next(void **state)
{
    struct fixture *f = *state;
    struct apikey_rec k;
    struct org_rec o;
    assert_int_equal(lookup(f->st, f->key.key_hash, &k, &o), 0);
    assert_string_equal(o.plan, "developer");
    org_rec_clear(&o);
    struct org_rec up = f->org;
    snprintf(up.plan, sizeof up.plan, "startup");
    up.overrides = "{\"max_concurrent_sessions\":7}";
    assert_int_equal(store_org_update(f->admin, &up), 0);
    assert_int_equal(store_auth_lookup(f->st, f->key.key_hash, &k, &o), 0);
    assert_string_equal(o.plan, "startup");
    assert_string_equal(o.overrides, "{\"max_concurrent_sessions\":7}");
    org_rec_clear(&o);
}

/* This process's own writes go through other pooled connections than the
 * watch: they are seen next as well. */
static void change_by_the_same_store_is_seen_next(void **state)
{
    struct fixture *f = *state;
    struct apikey_rec k;
    struct org_rec o;
    assert_int_equal(lookup(f->st, f->key.key_hash, &k, &o), 0);
    org_rec_clear(&o);
    struct apikey_rec del = f->key;
    del.deleted_at = clock_now_ms();
    assert_int_equal(store_key_update(f->st, &del), 0);
    assert_int_equal(store_auth_lookup(f->st, f->key.key_hash, &k, &o), 0);
    assert_int_equal(k.deleted_at, del.deleted_at);
    org_rec_clear(&o);
    /* A project deletion revokes the project's keys in the same commit. */
    struct project_rec p = {0};
    snprintf(p.org_id, sizeof p.org_id, "%s", f->org.id);
    snprintf(p.name, sizeof p.name, "second");
    assert_int_equal(store_project_create(f->st, &p, 0), 0);
    struct apikey_rec scoped = {0};
    snprintf(scoped.org_id, sizeof scoped.org_id, "%s", f->org.id);
    snprintf(scoped.project_id, sizeof scoped.project_id, "%s", p.id);
    snprintf(scoped.name, sizeof scoped.name, "scoped");
    crypto_sha256_hex("bd_scoped", 9, scoped.key_hash);
    snprintf(scoped.masked_key, sizeof scoped.masked_key, "bd_sc...oped");
    assert_int_equal(store_key_create(f->st, &scoped, 0), 0);
    assert_int_equal(lookup(f->st, scoped.key_hash, &k, &o), 0);
    assert_int_equal(k.deleted_at, 0);
    org_rec_clear(&o);
    assert_int_equal(store_project_delete(f->admin, f->org.id, p.id), 0);
    assert_int_equal(store_auth_lookup(f->st, scoped.key_hash, &k, &o), 0);
    assert_true(k.deleted_at != 0);
    org_rec_clear(&o);
}

/* Another PROCESS (as `browserd admin` is) deletes the key. */
static void delete_by_another_process_is_seen_next(void **state)
{
    struct fixture *f = *state;
    struct apikey_rec k;
    struct org_rec o;
    assert_int_equal(lookup(f->st, f->key.key_hash, &k, &o), 0);
    assert_int_equal(k.deleted_at, 0);
    org_rec_clear(&o);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* Only fresh connections in the child: the parent's are not forked safely. */
        struct err e;
        err_init(&e);
        struct store *st = NULL;
        struct apikey_rec del = f->key;
        del.deleted_at = 12345;
        int ok = store_open_sqlite(f->dir, &st, &e) == 0 && store_key_update(st, &del) == 0;
        store_close(st);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(store_auth_lookup(f->st, f->key.key_hash, &k, &o), 0);
    assert_int_equal(k.deleted_at, 12345);
    org_rec_clear(&o);
}

/* Under concurrency: a thread looks the key up without pause while another
 * connection deletes it. Any lookup that STARTS after the delete returned
 * must see the deletion. */
struct race {
    struct fixture *f;
    atomic_int committed;
    atomic_int stop;
    int stale; /* lookups started after the commit that saw a live key */
    atomic_long lookups;
};

static void *race_reader(void *arg)
{
    struct race *r = arg;
    while (!atomic_load(&r->stop)) {
        int after = atomic_load(&r->committed);
        struct apikey_rec k;
        struct org_rec o = {0};
        if (store_auth_lookup(r->f->st, r->f->key.key_hash, &k, &o) == 0) {
            if (after && k.deleted_at == 0)
                r->stale++;
            org_rec_clear(&o);
        }
        atomic_fetch_add(&r->lookups, 1);
        if (after)
            break;
    }
    return NULL;
}

static void delete_during_lookups_is_never_missed(void **state)
{
    struct fixture *f = *state;
    for (int round = 0; round < 50; round++) {
        struct race r = {.f = f};
        struct apikey_rec k = f->key;
        k.deleted_at = 0;
        assert_int_equal(store_key_update(f->admin, &k), 0);
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, race_reader, &r), 0);
        /* Let the reader fill the cache before the deletion. */
        while (atomic_load(&r.lookups) < 3)
            sched_yield();
        k.deleted_at = clock_now_ms();
        assert_int_equal(store_key_update(f->admin, &k), 0);
        atomic_store(&r.committed, 1);
        pthread_join(t, NULL);
        assert_int_equal(r.stale, 0);
    }
}

/* ---- the module's own rules ---- */

static void fill(struct apikey_rec *k, struct org_rec *o, const char *id, const char *ov)
{
    memset(k, 0, sizeof *k);
    memset(o, 0, sizeof *o);
    snprintf(k->id, sizeof k->id, "%s", id);
    snprintf(o->id, sizeof o->id, "org-%s", id);
    o->overrides = (char *)ov;
}

/* "An entry is only returned under the epoch it was stored with; once a
 * newer epoch has been seen, every older entry is dead." */
static void entries_live_in_their_epoch_only(void **state)
{
    (void)state;
    struct keycache *kc = keycache_new();
    struct apikey_rec k, got;
    struct org_rec o, go;
    fill(&k, &o, "a", "{\"x\":1}");
    assert_int_equal(keycache_get(kc, 1, "h1", &got, &go), 0);
    keycache_put(kc, 1, "h1", &k, &o);
    assert_int_equal(keycache_get(kc, 1, "h1", &got, &go), 1);
    assert_string_equal(got.id, "a");
    assert_string_equal(go.id, "org-a");
    assert_string_equal(go.overrides, "{\"x\":1}");
    assert_ptr_not_equal(go.overrides, o.overrides); /* an owned copy */
    org_rec_clear(&go);
    assert_int_equal(keycache_get(kc, 1, "h2", &got, &go), 0);
    /* Epoch 2 kills it, and an old epoch never brings it back. */
    assert_int_equal(keycache_get(kc, 2, "h1", &got, &go), 0);
    assert_int_equal(keycache_get(kc, 1, "h1", &got, &go), 0);
    keycache_free(kc);
}

/* "Stores copies ... read after the epoch was taken; ignored when the cache
 * has moved to a newer epoch meanwhile." */
static void put_from_an_older_epoch_is_dropped(void **state)
{
    (void)state;
    struct keycache *kc = keycache_new();
    struct apikey_rec k, got;
    struct org_rec o, go;
    fill(&k, &o, "a", "{}");
    assert_int_equal(keycache_get(kc, 5, "h1", &got, &go), 0); /* epoch 5 seen */
    keycache_put(kc, 4, "h1", &k, &o);                         /* read under 4: possibly stale */
    assert_int_equal(keycache_get(kc, 5, "h1", &got, &go), 0);
    assert_int_equal(keycache_get(kc, 4, "h1", &got, &go), 0);
    keycache_put(kc, 5, "h1", &k, &o);
    assert_int_equal(keycache_get(kc, 5, "h1", &got, &go), 1);
    org_rec_clear(&go);
    keycache_free(kc);
}

/* "Bounded: a fixed number of direct-mapped slots; a colliding key evicts."
 * More keys than slots: every lookup answers its own key or misses. */
static void bounded_and_never_confused(void **state)
{
    (void)state;
    struct keycache *kc = keycache_new();
    char hash[65];
    int hits = 0;
    for (int i = 0; i < 3 * KEYCACHE_SLOTS; i++) {
        struct apikey_rec k;
        struct org_rec o;
        char id[16];
        snprintf(id, sizeof id, "%d", i);
        fill(&k, &o, id, "{}");
        crypto_sha256_hex(id, strlen(id), hash);
        keycache_put(kc, 1, hash, &k, &o);
    }
    for (int i = 0; i < 3 * KEYCACHE_SLOTS; i++) {
        struct apikey_rec got;
        struct org_rec go;
        char id[16];
        snprintf(id, sizeof id, "%d", i);
        crypto_sha256_hex(id, strlen(id), hash);
        if (keycache_get(kc, 1, hash, &got, &go)) {
            assert_string_equal(got.id, id);
            org_rec_clear(&go);
            hits++;
        }
    }
    assert_true(hits > 0 && hits <= KEYCACHE_SLOTS);
    keycache_free(kc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(delete_by_another_connection_is_seen_next, setup, teardown),
        cmocka_unit_test_setup_teardown(rotate_by_another_connection_is_seen_next, setup, teardown),
        cmocka_unit_test_setup_teardown(org_change_by_another_connection_is_seen_next, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(change_by_the_same_store_is_seen_next, setup, teardown),
        cmocka_unit_test_setup_teardown(delete_by_another_process_is_seen_next, setup, teardown),
        cmocka_unit_test_setup_teardown(delete_during_lookups_is_never_missed, setup, teardown),
        cmocka_unit_test(entries_live_in_their_epoch_only),
        cmocka_unit_test(put_from_an_older_epoch_is_dropped),
        cmocka_unit_test(bounded_and_never_confused),
    };
    return cmocka_run_group_tests_name("store/keycache", tests, NULL, NULL);
}
