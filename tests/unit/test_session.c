/*
 * Unit tests for session/session: a session's life (spawn, restart, end and
 * the background teardown) driven through the launcher interface
 * (struct sess_launcher) with a fake browser: a shell script that prints
 * Chromium's DevTools line and sleeps, so the session manager holds a real
 * process without Chromium. A test module registered as a session_ext
 * records, with the fake launcher, the order in which things happen.
 * The store is SQLite in a temporary folder; no sandbox (sandbox_init is
 * not called).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/err.h"
#include "domain/session_rules.h"
#include "runtime/sessmgr.h"
#include "session/app.h"
#include "session/ext.h"
#include "session/session.h"
#include "store/store.h"

static char dir[256];
static struct app app;

/* ---- what happened, in order ---- */

static pthread_mutex_t trace_mu = PTHREAD_MUTEX_INITIALIZER;
static char trace[512];
static int fail_launch; /* the fake launcher's next launch fails with this */

static void note(const char *what)
{
    pthread_mutex_lock(&trace_mu);
    size_t n = strlen(trace);
    snprintf(trace + n, sizeof trace - n, "%s%s", n ? "," : "", what);
    pthread_mutex_unlock(&trace_mu);
}

static void trace_get(char *out, size_t cap)
{
    pthread_mutex_lock(&trace_mu);
    snprintf(out, cap, "%s", trace);
    pthread_mutex_unlock(&trace_mu);
}

static void trace_reset(void)
{
    pthread_mutex_lock(&trace_mu);
    trace[0] = '\0';
    pthread_mutex_unlock(&trace_mu);
}

/* Waits (bounded) until the trace equals want; returns 1 if it did. */
static int trace_becomes(const char *want)
{
    char got[512];
    for (int64_t end = clock_mono_ms() + 20000; clock_mono_ms() < end; usleep(10000)) {
        trace_get(got, sizeof got);
        if (strcmp(got, want) == 0)
            return 1;
    }
    trace_get(got, sizeof got);
    fprintf(stderr, "trace: want %s, got %s\n", want, got);
    return 0;
}

/* ---- the fake launcher ---- */

static char fake_browser[300];

static int fake_launch(void *ctx, const struct chromium_opts *o, int timeout_ms,
                       struct chromium **out, struct err *e)
{
    (void)ctx;
    note("launch");
    if (fail_launch) {
        int rc = fail_launch;
        fail_launch = 0;
        return err_set(e, rc, "unavailable", "the fake browser did not start");
    }
    struct chromium_opts fake = *o;
    fake.binary = fake_browser;
    return chromium_launch(&fake, timeout_ms, out, e);
}

static void fake_discard(void *ctx, struct chromium *c)
{
    (void)ctx;
    note("discard");
    sessmgr_discard_browser(c);
}

static const struct sess_launcher fake = {fake_launch, fake_discard, NULL};

/* ---- a module that records its hooks ---- */

static int rec_prepare(struct session_ctx *sc, struct err *e)
{
    (void)sc;
    (void)e;
    note("prepare");
    return 0;
}

static void rec_started(struct session_ctx *sc, const char *ws)
{
    (void)sc;
    (void)ws;
    note("started");
}

static int folder_at_ending; /* the session's folder existed when ending ran */

static void rec_ending(struct session_ctx *sc, const char *reason)
{
    /* The contract (ext.h): the browser has stopped, its folder still
     * exists; the folder goes after every hook ran. */
    struct stat st;
    __atomic_store_n(&folder_at_ending, stat(sc->user_data_dir, &st) == 0, __ATOMIC_RELEASE);
    note("ending");
    (void)reason;
}

static const struct session_ext recorder_ext = {
    .name = "test",
    .prepare = rec_prepare,
    .started = rec_started,
    .ending = rec_ending,
};

/* ---- fixtures ---- */

static int setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    snprintf(dir, sizeof dir, "/tmp/browserd-session-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(fake_browser, sizeof fake_browser, "%s/fake-browser", dir);
    FILE *f = fopen(fake_browser, "w");
    if (!f)
        return -1;
    fprintf(f, "#!/bin/sh\n"
               "echo 'DevTools listening on ws://127.0.0.1:1/devtools/browser/fake' >&2\n"
               "exec sleep 300\n");
    fclose(f);
    chmod(fake_browser, 0700);
    struct err e;
    err_init(&e);
    memset(&app, 0, sizeof app);
    snprintf(app.cfg.data_dir, sizeof app.cfg.data_dir, "%s/data", dir);
    mkdir(app.cfg.data_dir, 0700);
    snprintf(app.cfg.chromium, sizeof app.cfg.chromium, "%s", fake_browser);
    snprintf(app.cfg.region, sizeof app.cfg.region, "%s", SESSRULES_REGION_DEFAULT);
    if (store_open_sqlite(app.cfg.data_dir, &app.store, &e) != 0)
        return -1;
    struct sessmgr_hooks hooks = {.on_end = sess_on_end, .ctx = &app};
    if (sessmgr_start(&hooks, &app.sessions, &e) != 0)
        return -1;
    sess_set_launcher(&fake);
    session_ext_register(&recorder_ext);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sess_spares_stop(&app); /* waits for the background teardowns */
    sessmgr_stop(app.sessions);
    store_close(app.store);
    sess_set_launcher(NULL);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* A fresh session of org "o" (project "p") with body {}. */
static int spawn(struct session_rec *s, struct err *e)
{
    json_t *body = json_object();
    json_t *ent = json_object();
    int rc = sess_spawn(&app, "o", "p", ent, body, NULL, 0, s, e);
    json_decref(body);
    json_decref(ent);
    return rc;
}

static void row(const char *id, struct session_rec *out)
{
    memset(out, 0, sizeof *out);
    assert_int_equal(store_session_get(app.store, "o", "p", id, 1, out), 0);
}

static int folder_exists(const char *id)
{
    char path[1200];
    sess_path(&app, id, SESS_PATH_HOME, path, sizeof path);
    struct stat st;
    return stat(path, &st) == 0;
}

/* ---- cases ---- */

/* "POST /browsers: the modules prepare, then the browser starts, then they
 * see it started; the row is active with the browser's pid and the session
 * is live". */
static void spawn_prepares_launches_then_starts(void **state)
{
    (void)state;
    trace_reset();
    struct err e;
    err_init(&e);
    struct session_rec s;
    assert_int_equal(spawn(&s, &e), 0);
    assert_true(trace_becomes("prepare,launch,started"));
    struct session_rec r;
    row(s.id, &r);
    assert_string_equal(r.status, "active");
    assert_true(r.pid > 0);
    assert_true(folder_exists(s.id));
    struct live *l = sessmgr_get(app.sessions, s.id);
    assert_non_null(l);
    sessmgr_put(l);
    assert_int_equal(sess_end(&app, s.id, "deleted"), 0);
    session_rec_clear(&r);
    session_rec_clear(&s);
}

/* "A launch failure is the server's fault: 503 when the browser did not come
 * up; the modules prepared for it see it end, and the row records the end". */
static void a_failed_launch_ends_what_was_prepared(void **state)
{
    (void)state;
    trace_reset();
    fail_launch = E_UNAVAIL;
    struct err e;
    err_init(&e);
    struct session_rec s;
    assert_int_equal(spawn(&s, &e), E_UNAVAIL);
    assert_string_equal(e.code, "browser_unavailable");
    assert_true(trace_becomes("prepare,launch,ending"));
    struct session_rec *rows = NULL;
    size_t n = 0;
    assert_int_equal(store_session_list_active(app.store, &rows, &n), 0);
    assert_int_equal(n, 0);
    free(rows);
}

/* "Restarts a live session's browser ... The session id stays valid;
 * modules see `started` again" with a new browser. */
static void restart_launches_a_new_browser_for_the_same_session(void **state)
{
    (void)state;
    struct err e;
    err_init(&e);
    struct session_rec s;
    assert_int_equal(spawn(&s, &e), 0);
    struct session_rec before;
    row(s.id, &before);
    trace_reset();
    assert_int_equal(sess_restart(&app, &before, &e), 0);
    assert_true(trace_becomes("launch,started"));
    struct session_rec after;
    row(s.id, &after);
    assert_string_equal(after.status, "active");
    assert_true(after.pid > 0);
    assert_int_not_equal(after.pid, before.pid);
    struct live *l = sessmgr_get(app.sessions, s.id);
    assert_non_null(l);
    sessmgr_put(l);
    /* An ended session has nothing to restart. */
    assert_int_equal(sess_end(&app, s.id, "deleted"), 0);
    err_init(&e);
    assert_int_equal(sess_restart(&app, &after, &e), E_CONFLICT);
    session_rec_clear(&before);
    session_rec_clear(&after);
    session_rec_clear(&s);
}

/* "Ended: the row's end and usage, then a teardown thread": the row says
 * deleted when sess_delete returns; the browser is discarded, then the
 * ending hooks run (the folder still there), then the folder goes. */
static void delete_records_the_end_then_tears_down_in_order(void **state)
{
    (void)state;
    struct err e;
    err_init(&e);
    struct session_rec s;
    assert_int_equal(spawn(&s, &e), 0);
    struct session_rec r;
    row(s.id, &r);
    trace_reset();
    sess_delete(&app, &r);
    struct session_rec ended;
    row(s.id, &ended);
    assert_string_equal(ended.status, "deleted");
    assert_string_equal(ended.end_reason, "deleted");
    assert_null(sessmgr_get(app.sessions, s.id));
    assert_true(trace_becomes("discard,ending"));
    assert_true(__atomic_load_n(&folder_at_ending, __ATOMIC_ACQUIRE));
    for (int64_t end = clock_mono_ms() + 20000; folder_exists(s.id) && clock_mono_ms() < end;)
        usleep(10000);
    assert_false(folder_exists(s.id));
    session_rec_clear(&ended);
    session_rec_clear(&r);
    session_rec_clear(&s);
}

/* "sess_end: stops its browser, runs the modules' ending hooks and records
 * the end with reason": at once, no teardown thread. */
static void end_stops_runs_the_hooks_and_records_the_reason(void **state)
{
    (void)state;
    struct err e;
    err_init(&e);
    struct session_rec s;
    assert_int_equal(spawn(&s, &e), 0);
    trace_reset();
    assert_int_equal(sess_end(&app, s.id, "timeout"), 0);
    char got[512];
    trace_get(got, sizeof got);
    assert_string_equal(got, "ending");
    assert_true(folder_at_ending);
    assert_false(folder_exists(s.id));
    struct session_rec r;
    row(s.id, &r);
    assert_string_equal(r.status, "deleted");
    assert_string_equal(r.end_reason, "timeout");
    assert_int_equal(r.pid, 0);
    session_rec_clear(&r);
    session_rec_clear(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(spawn_prepares_launches_then_starts),
        cmocka_unit_test(a_failed_launch_ends_what_was_prepared),
        cmocka_unit_test(restart_launches_a_new_browser_for_the_same_session),
        cmocka_unit_test(delete_records_the_end_then_tears_down_in_order),
        cmocka_unit_test(end_stops_runs_the_hooks_and_records_the_reason),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
