/*
 * session/recordings: the recordings running on this host, their notes and
 * their retention (recordings.h; the handlers are api/replays.c).
 */
#include "session/recordings.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/share.h"
#include "core/xalloc.h"
#include "domain/replay_rules.h"
#include "runtime/chromium.h"
#include "runtime/recorder.h"
#include "runtime/sandbox.h"
#include "runtime/sessmgr.h"
#include "session/session.h"
#include "store/store.h"

#define SWEEP_EVERY_MS 60000
#define DAY_MS         (86400LL * 1000)

/* A recording running (or finishing) on this host. */
struct running {
    char replay_id[CRYPTO_ID_LEN + 1];
    char session_id[STORE_ID];
    char org_id[STORE_ID];
    char dir[1200]; /* DATA/replays/SESSION */
    int64_t started_at;
    int64_t started_mono_ms;
    int framerate, max_seconds, retention_days;
    struct recorder *rec;
    struct running *next;
};

static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static struct running *table;
static int64_t last_sweep_ms;
static long long org_stored_bytes = LIM_REPLAY_ORG_STORED_BYTES;
static int org_stored_count = LIM_REPLAY_ORG_STORED_COUNT;

void sess_recordings_set_org_bytes(long long bytes)
{
    org_stored_bytes = bytes;
}

void sess_recordings_set_org_count(int count)
{
    org_stored_count = count;
}

/* ---- files ---- */

/* DATA/replays and DATA/replays/SESSION (session.h, sess_path). */
static void replays_root(const struct app *app, char *out, size_t cap)
{
    sess_path(app, NULL, SESS_PATH_REPLAYS_ALL, out, cap);
}

static void session_dir(const struct app *app, const char *sid, char *out, size_t cap)
{
    sess_path(app, sid, SESS_PATH_REPLAYS, out, cap);
}

static void write_note(const char *dir, const char *rid, const char *org_id, int64_t started_at,
                       int64_t finished_at, int retention_days)
{
    char path[1400], tmp[1410];
    snprintf(path, sizeof path, "%s/%s.json", dir, rid);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    json_t *n = json_pack("{s:s,s:s,s:I,s:o,s:i}", "replay_id", rid, "org_id", org_id, "started_at",
                          (json_int_t)started_at, "finished_at",
                          finished_at ? json_integer(finished_at) : json_null(), "retention_days",
                          retention_days);
    if (json_dump_file(n, tmp, JSON_COMPACT) != 0 || rename(tmp, path) != 0)
        log_error("replay %s: cannot write %s: %s", rid, path, strerror(errno));
    json_decref(n);
}

static json_t *read_note(const char *dir, const char *rid)
{
    char path[1400];
    snprintf(path, sizeof path, "%s/%s.json", dir, rid);
    return json_load_file(path, 0, NULL);
}

static void remove_replay(const char *dir, const char *rid)
{
    static const char *const ext[] = {"mp4", "json", "log"};
    for (size_t i = 0; i < 3; i++) {
        char path[1400];
        snprintf(path, sizeof path, "%s/%s.%s", dir, rid, ext[i]);
        (void)unlink(path);
    }
    (void)rmdir(dir); /* only once empty */
}

/* The finish time of a note, or of its file when the recording was cut by
 * a server that died (the note still says null then). 0 while unknown. */
static int64_t note_finished(const json_t *n, const char *dir, const char *rid)
{
    const json_t *f = json_object_get(n, "finished_at");
    if (json_is_integer(f))
        return (int64_t)json_integer_value(f);
    char path[1400];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s.mp4", dir, rid);
    if (stat(path, &st) == 0)
        return (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
    return 0;
}

/* ---- the table (table_mu held) ---- */

static struct running *find_locked(const char *sid, const char *rid)
{
    for (struct running *r = table; r; r = r->next)
        if (strcmp(r->session_id, sid) == 0 && (!rid || strcmp(r->replay_id, rid) == 0))
            if (rid || !recorder_done(r->rec))
                return r;
    return NULL;
}

/* Moves finished recordings out of the table: their notes get the finish
 * time. Returns the unlinked entries (recorders joined and freed by the
 * caller outside the lock: a join waits for the thread's last steps). */
static struct running *take_finished_locked(const char *sid_or_null, int all)
{
    struct running *out = NULL, **pp = &table;
    while (*pp) {
        struct running *r = *pp;
        int match = !sid_or_null || strcmp(r->session_id, sid_or_null) == 0;
        if (match && (all || recorder_done(r->rec))) {
            *pp = r->next;
            r->next = out;
            out = r;
        } else {
            pp = &r->next;
        }
    }
    return out;
}

/* Frees taken entries: waits for each file (stopping first when asked) and
 * writes its note. */
static void finish_entries(struct running *list, int stop)
{
    while (list) {
        struct running *r = list;
        list = r->next;
        if (stop)
            recorder_stop(r->rec);
        (void)recorder_wait(r->rec, RECORDER_FINISH_MS + 5000);
        int64_t fin = recorder_finished_at(r->rec);
        recorder_free(r->rec);
        write_note(r->dir, r->replay_id, r->org_id, r->started_at, fin ? fin : clock_now_ms(),
                   r->retention_days);
        xfree(r);
    }
}

static void reconcile(void)
{
    pthread_mutex_lock(&table_mu);
    struct running *done = take_finished_locked(NULL, 0);
    pthread_mutex_unlock(&table_mu);
    finish_entries(done, 0);
}

/* Deletes the recordings whose retention has passed (all sessions). */
static void sweep(const struct app *app, int force)
{
    int64_t now = clock_now_ms();
    pthread_mutex_lock(&table_mu);
    int due = force || now - last_sweep_ms >= SWEEP_EVERY_MS;
    if (due)
        last_sweep_ms = now;
    pthread_mutex_unlock(&table_mu);
    if (!due)
        return;
    char root[1100];
    replays_root(app, root, sizeof root);
    DIR *d = opendir(root);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char dir[1200];
        if (snprintf(dir, sizeof dir, "%s/%s", root, de->d_name) >= (int)sizeof dir)
            continue;
        DIR *s = opendir(dir);
        if (!s)
            continue;
        struct dirent *fe;
        while ((fe = readdir(s))) {
            size_t n = strlen(fe->d_name);
            if (n < 6 || strcmp(fe->d_name + n - 5, ".json") != 0)
                continue;
            char rid[REPLAY_ID_MAX + 1];
            if (n - 5 > REPLAY_ID_MAX)
                continue;
            memcpy(rid, fe->d_name, n - 5);
            rid[n - 5] = '\0';
            json_t *note = read_note(dir, rid);
            pthread_mutex_lock(&table_mu);
            int running = find_locked(de->d_name, rid) != NULL;
            pthread_mutex_unlock(&table_mu);
            int64_t fin = note ? note_finished(note, dir, rid) : 0;
            json_int_t days = json_integer_value(json_object_get(note, "retention_days"));
            if (!running && note && fin && now - fin > (int64_t)days * DAY_MS) {
                log_info("replay %s of session %s: retention of %lld days passed, deleted", rid,
                         de->d_name, (long long)days);
                remove_replay(dir, rid);
            }
            json_decref(note);
        }
        closedir(s);
        (void)rmdir(dir);
    }
    closedir(d);
}

/* A finished recording of one organization, for trim_org. */
struct stored {
    int64_t finished;
    long long bytes;
    char dir[1200];
    char rid[REPLAY_ID_MAX + 1];
};

/* Keeps the finished recordings of org_id on this host within
 * org_stored_bytes, and leaves room for one more within org_stored_count:
 * deletes its oldest ones until the rest fit (the recordings still running
 * count, and are never deleted). Walks every
 * session's folder of DATA/replays, so a start costs a read of each note on
 * the host. */
static void trim_org(const struct app *app, const char *org_id)
{
    char root[1100];
    replays_root(app, root, sizeof root);
    DIR *d = opendir(root);
    if (!d)
        return;
    struct stored *v = NULL;
    size_t n = 0, cap = 0;
    long long total = 0, held = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        char dir[1200];
        if (de->d_name[0] == '.' ||
            snprintf(dir, sizeof dir, "%s/%s", root, de->d_name) >= (int)sizeof dir)
            continue;
        DIR *s = opendir(dir);
        if (!s)
            continue;
        struct dirent *fe;
        while ((fe = readdir(s))) {
            size_t len = strlen(fe->d_name);
            if (len < 6 || len - 5 > REPLAY_ID_MAX || strcmp(fe->d_name + len - 5, ".json") != 0)
                continue;
            char rid[REPLAY_ID_MAX + 1], mp4[1400];
            memcpy(rid, fe->d_name, len - 5);
            rid[len - 5] = '\0';
            json_t *note = read_note(dir, rid);
            const char *org = json_string_value(json_object_get(note, "org_id"));
            struct stat st;
            snprintf(mp4, sizeof mp4, "%s/%s.mp4", dir, rid);
            if (note && org && strcmp(org, org_id) == 0 && stat(mp4, &st) == 0) {
                total += (long long)st.st_size;
                held++;
                pthread_mutex_lock(&table_mu);
                int running = find_locked(de->d_name, rid) != NULL;
                pthread_mutex_unlock(&table_mu);
                int64_t fin = running ? 0 : note_finished(note, dir, rid);
                if (fin) {
                    if (n == cap) {
                        cap = cap ? cap * 2 : 16;
                        v = xrealloc(v, cap * sizeof *v);
                    }
                    v[n].finished = fin;
                    v[n].bytes = (long long)st.st_size;
                    snprintf(v[n].dir, sizeof v[n].dir, "%s", dir);
                    snprintf(v[n].rid, sizeof v[n].rid, "%s", rid);
                    n++;
                }
            }
            json_decref(note);
        }
        closedir(s);
    }
    closedir(d);
    while ((total > org_stored_bytes || held >= org_stored_count) && n > 0) {
        size_t oldest = 0;
        for (size_t i = 1; i < n; i++)
            if (v[i].finished < v[oldest].finished)
                oldest = i;
        log_info("replay %s: its organization keeps at most %lld MiB and %d recordings; the "
                 "oldest is deleted",
                 v[oldest].rid, org_stored_bytes >> 20, org_stored_count);
        remove_replay(v[oldest].dir, v[oldest].rid);
        total -= v[oldest].bytes;
        held--;
        v[oldest] = v[--n];
    }
    xfree(v);
}

/* ---- start ---- */

struct browser_view {
    int display;
    struct sandbox *sb;
};

static int view_of(void *ctx, struct chromium *c)
{
    struct browser_view *v = ctx;
    v->display = chromium_xvfb_pid(c) > 0 ? chromium_display(c) : -1;
    struct sandbox *sb = chromium_sandbox(c);
    v->sb = sb ? sandbox_ref(sb) : NULL;
    return 0;
}

/* recorder_opts.ws_lookup: the session's DevTools URL now. */
static int recording_ws_now(void *ctx, const char *sid, char *out, size_t cap)
{
    struct live *l = sessmgr_get(((struct app *)ctx)->sessions, sid);
    int rc = l && live_ws_url(l, out, cap) == 0 ? 0 : -1;
    sessmgr_put(l);
    return rc;
}

/* Starts one recording of a live session (table_mu NOT held). */
static int start_recording(struct app *app, struct live *l, const char *sid, const char *org_id,
                           const char *ws, int width, int height, int framerate, int max_seconds,
                           int retention_days, char *rid, size_t rid_cap, int64_t *started_at,
                           struct err *e)
{
    struct browser_view bv = {-1, NULL};
    int rc = live_with_browser(l, view_of, &bv);
    if (rc == 0 && (!bv.sb || !sandbox_root(bv.sb)))
        rc = err_set(e, E_UNAVAIL, "sandbox_required",
                     "replays need the session sandbox: docs/sandbox.md");
    if (rc) {
        sandbox_unref(bv.sb);
        return rc;
    }
    trim_org(app, org_id);
    struct running *r = xcalloc(1, sizeof *r);
    crypto_new_id(r->replay_id);
    snprintf(r->session_id, sizeof r->session_id, "%s", sid);
    snprintf(r->org_id, sizeof r->org_id, "%s", org_id);
    session_dir(app, sid, r->dir, sizeof r->dir);
    r->framerate = framerate;
    r->max_seconds = max_seconds;
    r->retention_days = retention_days;
    r->started_at = clock_now_ms();
    r->started_mono_ms = clock_mono_ms();

    pthread_mutex_lock(&table_mu);
    int count = 0, org_count = 0;
    for (struct running *x = table; x; x = x->next)
        if (!recorder_done(x->rec)) {
            count++;
            org_count += strcmp(x->org_id, r->org_id) == 0;
        }
    /* A session records once at a time; an organization holds at most its
     * share of the host's recordings, so that it never takes them all. */
    if (find_locked(sid, NULL)) {
        rc = err_set(e, E_CONFLICT, "recording_in_progress",
                     "a recording of session %s is already in progress; stop it first", sid);
    } else if (org_count >= LIM_REPLAYS_PER_ORG) {
        e->retry_after = 30;
        rc = err_set(e, E_LIMIT, "too_many_recordings",
                     "this organization already records %d sessions (its share of the host's "
                     "%d); stop one first",
                     org_count, LIM_REPLAYS_PER_HOST);
    } else if (count >= LIM_REPLAYS_PER_HOST) {
        e->retry_after = 30;
        rc = err_set(e, E_LIMIT, "too_many_recordings",
                     "this host already records %d sessions (its cap); try again later", count);
    } else if (org_count > 0 &&
               count + 1 > LIM_REPLAYS_PER_HOST - SHARE_RESERVE(LIM_REPLAYS_PER_HOST)) {
        /* The newcomer reserve of core/share: organizations already
         * recording cannot fill the host together. */
        e->retry_after = 30;
        rc = err_set(e, E_LIMIT, "too_many_recordings",
                     "this host records %d sessions of %d; the last %d are kept for "
                     "organizations recording none, and this organization records %d: stop "
                     "one first or try again later",
                     count, LIM_REPLAYS_PER_HOST, SHARE_RESERVE(LIM_REPLAYS_PER_HOST), org_count);
    }
    char root[1100];
    replays_root(app, root, sizeof root);
    if (rc == 0 && ((mkdir(root, 0700) != 0 && errno != EEXIST) ||
                    (mkdir(r->dir, 0700) != 0 && errno != EEXIST)))
        rc = err_set(e, E_INTERNAL, "internal", "create %s: %s", r->dir, strerror(errno));
    if (rc == 0) {
        char out[1400], logp[1400];
        snprintf(out, sizeof out, "%s/%s.mp4", r->dir, r->replay_id);
        snprintf(logp, sizeof logp, "%s/%s.log", r->dir, r->replay_id);
        struct recorder_opts o = {
            .sb = bv.sb,
            .display = bv.display,
            .ws_url = ws,
            .ws_lookup = recording_ws_now,
            .ws_ctx = app,
            .session_id = sid,
            .width = width,
            .height = height,
            .framerate = framerate,
            .max_seconds = max_seconds,
            .max_bytes = LIM_REPLAY_BYTES,
            .out_path = out,
            .log_path = logp,
        };
        rc = recorder_start(&o, &r->rec, e);
    }
    if (rc == 0) {
        write_note(r->dir, r->replay_id, r->org_id, r->started_at, 0, retention_days);
        r->next = table;
        table = r;
        if (rid)
            snprintf(rid, rid_cap, "%s", r->replay_id);
        if (started_at)
            *started_at = r->started_at;
        log_info("replay %s of session %s started (%s, %d fps, at most %d s)", r->replay_id, sid,
                 bv.display >= 0 ? "X display" : "DevTools screenshots", framerate, max_seconds);
    }
    pthread_mutex_unlock(&table_mu);
    if (rc)
        xfree(r);
    sandbox_unref(bv.sb);
    return rc;
}

/* ---- stop, segments, the session's end ---- */

int sess_recording_running(const char *sid, const char *rid)
{
    pthread_mutex_lock(&table_mu);
    int a = find_locked(sid, rid) != NULL;
    pthread_mutex_unlock(&table_mu);
    return a;
}

void sess_recording_cut(const char *session_id, struct sess_recording_segment *seg)
{
    memset(seg, 0, sizeof *seg);
    pthread_mutex_lock(&table_mu);
    struct running *r = find_locked(session_id, NULL), *mine = NULL;
    if (r) {
        seg->active = 1;
        seg->framerate = r->framerate;
        long long used = (clock_mono_ms() - r->started_mono_ms) / 1000;
        seg->seconds_left = r->max_seconds - (int)used > 1 ? r->max_seconds - (int)used : 1;
        seg->retention_days = r->retention_days;
        snprintf(seg->org_id, sizeof seg->org_id, "%s", r->org_id);
        struct running **pp = &table;
        while (*pp != r)
            pp = &(*pp)->next;
        *pp = r->next;
        r->next = NULL;
        mine = r;
    }
    pthread_mutex_unlock(&table_mu);
    finish_entries(mine, 1);
}

void sess_recording_resume(struct app *app, const char *session_id,
                           const struct sess_recording_segment *seg, int width, int height)
{
    if (!seg->active)
        return;
    struct live *l = sessmgr_get(app->sessions, session_id);
    char ws[512];
    struct err e;
    err_init(&e);
    if (!l || live_ws_url(l, ws, sizeof ws) != 0)
        (void)err_set(&e, E_CONFLICT, "session_ended", "the session has ended");
    else
        (void)start_recording(app, l, session_id, seg->org_id, ws, width, height, seg->framerate,
                              seg->seconds_left, seg->retention_days, NULL, 0, NULL, &e);
    if (e.rc)
        log_error("session %s: the recording's next segment did not start: %s", session_id,
                  e.message);
    sessmgr_put(l);
}

int sess_recording_start(struct app *app, struct live *l, const char *sid, const char *org_id,
                         const char *ws, int width, int height, int framerate, int max_seconds,
                         int retention_days, char *rid, size_t rid_cap, int64_t *started_at,
                         struct err *e)
{
    return start_recording(app, l, sid, org_id, ws, width, height, framerate, max_seconds,
                           retention_days, rid, rid_cap, started_at, e);
}

int sess_recording_stop(const char *sid, const char *rid)
{
    pthread_mutex_lock(&table_mu);
    struct running *r = find_locked(sid, rid);
    struct recorder *target = r && !recorder_done(r->rec) ? r->rec : NULL;
    if (target)
        recorder_stop(target);
    pthread_mutex_unlock(&table_mu);
    if (!target)
        return E_NOTFOUND;
    /* The entry stays in the table until reconciled; the file is complete
     * once the recorder is done. */
    reconcile();
    pthread_mutex_lock(&table_mu);
    r = find_locked(sid, rid);
    struct running *mine = NULL;
    if (r) {
        /* Still finishing: take it out and wait for it here, so that a
         * download right after the stop gets the whole file. */
        struct running **pp = &table;
        while (*pp && *pp != r)
            pp = &(*pp)->next;
        if (*pp) {
            *pp = r->next;
            r->next = NULL;
            mine = r;
        }
    }
    pthread_mutex_unlock(&table_mu);
    finish_entries(mine, 1);
    return 0;
}

void sess_recordings_tidy(const struct app *app)
{
    reconcile();
    sweep(app, 0);
}

json_t *sess_recording_note(const struct app *app, const char *sid, const char *rid)
{
    char dir[1200];
    session_dir(app, sid, dir, sizeof dir);
    return read_note(dir, rid);
}

int64_t sess_recording_finished_at(const struct app *app, const json_t *note, const char *sid,
                                   const char *rid)
{
    char dir[1200];
    session_dir(app, sid, dir, sizeof dir);
    return note_finished(note, dir, rid);
}

void sess_recordings_session_ended(const struct app *app, const char *sid)
{
    pthread_mutex_lock(&table_mu);
    struct running *mine = take_finished_locked(sid, 1);
    pthread_mutex_unlock(&table_mu);
    finish_entries(mine, 1);
    reconcile();
    sweep(app, 1);
}
