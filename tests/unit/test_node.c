/* Unit tests for cluster/node: registration, heartbeat, sweep and fencing
 * of a cluster member, driven with an in-memory fake of the store's cluster
 * ops (the PostgreSQL ops themselves are checked by test_store). Each case
 * names the sentence of cluster/node.h it checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cluster/node.h"
#include "core/clock.h"
#include "core/xalloc.h"

#define MAXN 8

/* The fake cluster table, under one lock. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct node_rec rows[MAXN];
static size_t nrows;
static int db_down;         /* every op fails with E_INTERNAL */
static int sweep_dead_next; /* the next sweep reports one dead node */
static int claim_next;      /* the next orphans claim gives one dead node */
static int fences, adopts, reaped, retired_earlier, registers;
static int lost, dones;            /* lost hook calls, node_orphans_done calls */
static char lost_ids[4][STORE_ID]; /* the first lost hook calls' node ids */

static int f_register(struct store *st, struct node_rec *n)
{
    (void)st;
    pthread_mutex_lock(&mu);
    int rc = E_INTERNAL;
    if (!db_down && nrows < MAXN) {
        snprintf(n->state, sizeof n->state, "up");
        n->started_at = n->heartbeat_at = clock_now_ms();
        rows[nrows++] = *n;
        registers++;
        rc = 0;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

static struct node_rec *find(const char *id)
{
    for (size_t i = 0; i < nrows; i++)
        if (strcmp(rows[i].id, id) == 0)
            return &rows[i];
    return NULL;
}

static int f_heartbeat(struct store *st, const char *id, int64_t running)
{
    (void)st;
    (void)running;
    pthread_mutex_lock(&mu);
    struct node_rec *r = find(id);
    int rc = db_down ? E_INTERNAL : !r || strcmp(r->state, "up") != 0 ? E_NOTFOUND : 0;
    if (rc == 0)
        r->heartbeat_at = clock_now_ms();
    pthread_mutex_unlock(&mu);
    return rc;
}

static int f_list(struct store *st, struct node_rec **out, size_t *n)
{
    (void)st;
    pthread_mutex_lock(&mu);
    if (db_down) {
        pthread_mutex_unlock(&mu);
        return E_INTERNAL;
    }
    *out = xcalloc(MAXN, sizeof **out);
    *n = 0;
    for (size_t i = 0; i < nrows; i++)
        if (strcmp(rows[i].state, "up") == 0)
            (*out)[(*n)++] = rows[i];
    pthread_mutex_unlock(&mu);
    return 0;
}

static int f_sweep(struct store *st, int64_t lease, const char *heir, char (**dead)[STORE_ID],
                   size_t *n)
{
    (void)st;
    (void)lease;
    (void)heir;
    pthread_mutex_lock(&mu);
    *n = 0;
    *dead = NULL;
    if (sweep_dead_next) {
        sweep_dead_next = 0;
        *dead = xcalloc(1, sizeof **dead);
        snprintf((*dead)[0], STORE_ID, "gone");
        *n = 1;
    }
    pthread_mutex_unlock(&mu);
    return 0;
}

static int f_retire(struct store *st, const char *id, const char *reason, const char *heir)
{
    (void)st;
    (void)reason;
    (void)heir;
    pthread_mutex_lock(&mu);
    struct node_rec *r = find(id);
    int rc = r && strcmp(r->state, "up") == 0 ? 0 : E_NOTFOUND;
    if (rc == 0) {
        snprintf(r->state, sizeof r->state, "dead");
        if (strcmp(r->name, "n1") == 0)
            retired_earlier++;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

static int f_orphans_claim(struct store *st, const char *me, int64_t claim_ms,
                           char (**dead)[STORE_ID], size_t *n)
{
    (void)st;
    (void)me;
    (void)claim_ms;
    pthread_mutex_lock(&mu);
    *dead = xcalloc(1, sizeof **dead);
    *n = 0;
    if (claim_next) {
        claim_next = 0;
        snprintf((*dead)[0], STORE_ID, "late");
        *n = 1;
    }
    pthread_mutex_unlock(&mu);
    return 0;
}

static int f_orphans_done(struct store *st, const char *id)
{
    (void)st;
    (void)id;
    pthread_mutex_lock(&mu);
    dones++;
    pthread_mutex_unlock(&mu);
    return 0;
}

static const struct store_ops fake_ops = {
    .name = "fake",
    .node_register = f_register,
    .node_heartbeat = f_heartbeat,
    .node_list = f_list,
    .node_sweep = f_sweep,
    .node_retire = f_retire,
    .node_orphans_claim = f_orphans_claim,
    .node_orphans_done = f_orphans_done,
};
static struct store fake = {.ops = &fake_ops};

static void on_fence(void *ctx)
{
    (void)ctx;
    pthread_mutex_lock(&mu);
    fences++;
    pthread_mutex_unlock(&mu);
}

static void on_adopt(void *ctx)
{
    (void)ctx;
    pthread_mutex_lock(&mu);
    adopts++;
    pthread_mutex_unlock(&mu);
}

static int on_lost(void *ctx, const char *node)
{
    (void)ctx;
    pthread_mutex_lock(&mu);
    if (lost < 4)
        snprintf(lost_ids[lost], STORE_ID, "%s", node);
    lost++;
    pthread_mutex_unlock(&mu);
    return 0;
}

static void on_reap(void *ctx, const char *node)
{
    (void)ctx;
    (void)node;
    pthread_mutex_lock(&mu);
    reaped++;
    pthread_mutex_unlock(&mu);
}

static int reset(void **state)
{
    (void)state;
    pthread_mutex_lock(&mu);
    memset(rows, 0, sizeof rows);
    nrows = 0;
    db_down = sweep_dead_next = claim_next = 0;
    fences = adopts = reaped = retired_earlier = registers = lost = dones = 0;
    memset(lost_ids, 0, sizeof lost_ids);
    pthread_mutex_unlock(&mu);
    return 0;
}

static struct node *start(const char *name, int64_t lease_ms)
{
    struct node_opts o = {
        .store = &fake,
        .name = name,
        .advertise = "http://127.0.0.1:1",
        .lease_ms = lease_ms,
        .hooks = {.fence = on_fence, .adopt = on_adopt, .lost = on_lost},
    };
    struct node *n = NULL;
    struct err e;
    err_init(&e);
    assert_int_equal(node_start(&o, on_reap, NULL, &n, &e), 0);
    return n;
}

/* Polls a counter under the lock until it reaches want (10 s at most). */
static int wait_count(const int *counter, int want)
{
    int64_t end = clock_mono_ms() + 10000;
    for (;;) {
        pthread_mutex_lock(&mu);
        int v = *counter;
        pthread_mutex_unlock(&mu);
        if (v >= want)
            return v;
        if (clock_mono_ms() > end)
            return v;
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* "Registers this node, reaps its own earlier incarnations (rows with the
 * same name still up ... handed to reap ... before the rows are retired)" */
static void start_registers_and_reaps_earlier_runs_of_its_name(void **state)
{
    (void)state;
    struct node_rec old = {.id = "old1", .name = "n1", .advertise_url = "http://x:1"};
    struct node_rec other = {.id = "other", .name = "n2", .advertise_url = "http://x:2"};
    assert_int_equal(f_register(&fake, &old), 0);
    assert_int_equal(f_register(&fake, &other), 0);
    struct node *n = start("n1", 60000);
    char id[STORE_ID];
    node_id(n, id);
    assert_string_not_equal(id, "old1");
    assert_int_equal(reaped, 1);
    assert_int_equal(retired_earlier, 1);
    pthread_mutex_lock(&mu);
    assert_string_equal(find("other")->state, "up"); /* another name is never touched */
    pthread_mutex_unlock(&mu);
    assert_int_equal(node_serving(n), 1);
    node_stop(n);
}

/* "A node that finds itself declared dead ... fences itself: its browsers
 * are ended (the fence hook) and it answers 503 until it has registered
 * again as a new node." */
static void declared_dead_fences_then_registers_anew(void **state)
{
    (void)state;
    struct node *n = start("n3", 500); /* heartbeat every 100 ms */
    char first[STORE_ID];
    node_id(n, first);
    pthread_mutex_lock(&mu);
    snprintf(find(first)->state, 8, "dead");
    pthread_mutex_unlock(&mu);
    assert_int_equal(wait_count(&fences, 1), 1);
    assert_int_equal(wait_count(&registers, 2), 2);
    char second[STORE_ID];
    int64_t end = clock_mono_ms() + 10000;
    do
        node_id(n, second);
    while (strcmp(first, second) == 0 && clock_mono_ms() < end);
    assert_string_not_equal(first, second);
    assert_int_equal(node_serving(n), 1);
    node_stop(n);
}

/* "... or that cannot reach the database for a whole lease, fences itself" */
static void database_lost_for_a_lease_fences(void **state)
{
    (void)state;
    struct node *n = start("n4", 500);
    pthread_mutex_lock(&mu);
    db_down = 1;
    pthread_mutex_unlock(&mu);
    assert_int_equal(wait_count(&fences, 1), 1);
    assert_int_equal(node_serving(n), 0);
    pthread_mutex_lock(&mu);
    db_down = 0;
    pthread_mutex_unlock(&mu);
    int64_t end = clock_mono_ms() + 10000;
    while (!node_serving(n) && clock_mono_ms() < end) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(node_serving(n), 1);
    pthread_mutex_lock(&mu);
    assert_int_equal(fences, 1); /* once per loss, not once per failed heartbeat */
    pthread_mutex_unlock(&mu);
    node_stop(n);
}

/* "adopt: Pools may have been moved to this node (a sweep found a dead
 * node, a node that stopped named this one its heir) ... every tick": a heir
 * named by a clean stop learns of its pools although its own sweep finds
 * no dead node. */
static void adopt_runs_every_tick_with_or_without_a_dead_node(void **state)
{
    (void)state;
    struct node *n = start("n5", 500);
    assert_true(wait_count(&adopts, 3) >= 3); /* no dead node yet */
    pthread_mutex_lock(&mu);
    sweep_dead_next = 1;
    pthread_mutex_unlock(&mu);
    int64_t end = clock_mono_ms() + 10000;
    for (;;) {
        pthread_mutex_lock(&mu);
        int pending = sweep_dead_next;
        pthread_mutex_unlock(&mu);
        if (!pending || clock_mono_ms() > end)
            break;
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&mu);
    int before = adopts, pending = sweep_dead_next;
    pthread_mutex_unlock(&mu);
    assert_int_equal(pending, 0);
    assert_true(wait_count(&adopts, before + 1) > before);
    assert_int_equal(fences, 0);
    node_stop(n);
}

/* "lost: This node's sweep declared node_id dead, or took over the claim
 * of a sweeper that died before it was done": the hook runs for the node a
 * sweep reports and for one a claim gives, and each is recorded done after
 * it (store.h node_orphans_done). */
static void lost_hook_runs_for_swept_and_claimed_nodes_then_done(void **state)
{
    (void)state;
    struct node *n = start("n6", 500);
    pthread_mutex_lock(&mu);
    sweep_dead_next = 1;
    pthread_mutex_unlock(&mu);
    assert_int_equal(wait_count(&dones, 1), 1);
    pthread_mutex_lock(&mu);
    claim_next = 1;
    pthread_mutex_unlock(&mu);
    assert_int_equal(wait_count(&dones, 2), 2);
    node_stop(n);
    assert_int_equal(lost, 2);
    assert_string_equal(lost_ids[0], "gone");
    assert_string_equal(lost_ids[1], "late");
}

/* "node_locate: 0 this node (or n is NULL, or node_id is "" / "local");
 * 1 another live node: its advertise URL is in url; E_UNAVAIL a node that
 * is not up" */
static void locate_answers_here_there_or_unavailable(void **state)
{
    (void)state;
    struct node_rec peer = {.id = "peer", .name = "p", .advertise_url = "http://10.0.0.9:80"};
    struct node_rec dead = {.id = "dead", .name = "d", .advertise_url = "http://10.0.0.8:80"};
    assert_int_equal(f_register(&fake, &peer), 0);
    assert_int_equal(f_register(&fake, &dead), 0);
    pthread_mutex_lock(&mu);
    snprintf(find("dead")->state, 8, "dead");
    pthread_mutex_unlock(&mu);
    struct node *n = start("n6", 60000);
    char me[STORE_ID], url[512];
    node_id(n, me);
    struct err e;
    err_init(&e);
    assert_int_equal(node_locate(NULL, "peer", url, sizeof url, &e), 0);
    assert_int_equal(node_locate(n, "local", url, sizeof url, &e), 0);
    assert_int_equal(node_locate(n, me, url, sizeof url, &e), 0);
    assert_int_equal(node_locate(n, "peer", url, sizeof url, &e), 1);
    assert_string_equal(url, "http://10.0.0.9:80");
    assert_int_equal(node_locate(n, "dead", url, sizeof url, &e), E_UNAVAIL);
    assert_int_equal(node_locate(n, "never", url, sizeof url, &e), E_UNAVAIL);
    /* A node that joined after the cache was loaded is found (a miss reloads). */
    struct node_rec late = {.id = "late", .name = "l", .advertise_url = "http://10.0.0.7:80"};
    assert_int_equal(f_register(&fake, &late), 0);
    assert_int_equal(node_locate(n, "late", url, sizeof url, &e), 1);
    node_stop(n);
}

/* "node_id: This node's id; "local" when n is NULL." */
static void without_a_cluster_the_node_is_local(void **state)
{
    (void)state;
    char id[STORE_ID];
    node_id(NULL, id);
    assert_string_equal(id, "local");
    assert_int_equal(node_serving(NULL), 1);
    node_stop(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(start_registers_and_reaps_earlier_runs_of_its_name, reset),
        cmocka_unit_test_setup(declared_dead_fences_then_registers_anew, reset),
        cmocka_unit_test_setup(database_lost_for_a_lease_fences, reset),
        cmocka_unit_test_setup(adopt_runs_every_tick_with_or_without_a_dead_node, reset),
        cmocka_unit_test_setup(lost_hook_runs_for_swept_and_claimed_nodes_then_done, reset),
        cmocka_unit_test_setup(locate_answers_here_there_or_unavailable, reset),
        cmocka_unit_test_setup(without_a_cluster_the_node_is_local, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
