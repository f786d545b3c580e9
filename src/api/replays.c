/*
 * browsers.replays.*: start, stop, list and download recordings of a
 * session's screen. The recordings running on this host are kept in one
 * table (at most LIM_REPLAYS_PER_HOST, LIM_REPLAYS_PER_ORG of one
 * organization); every recording, running or not, has
 * a small JSON note beside its file:
 *
 *   DATA/replays/SESSION/REPLAY.mp4   the video (fragmented MP4)
 *   DATA/replays/SESSION/REPLAY.json  {replay_id, org_id, started_at,
 *                                      finished_at, retention_days}
 *   DATA/replays/SESSION/REPLAY.log   ffmpeg's warnings
 *
 * so that the replays of ended sessions (and of a previous run of the
 * server) stay listable and downloadable. Expired ones are deleted by a
 * sweep run at most once a minute from these handlers and at every
 * session's end (no timer thread of its own).
 */
#include "api/replays.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "session/ext.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/jsonx.h"
#include "core/token.h"
#include "core/log.h"
#include "core/xalloc.h"
#include "domain/replay_rules.h"
#include "runtime/chromium.h"
#include "runtime/recorder.h"
#include "runtime/sandbox.h"
#include "runtime/sessmgr.h"
#include "telemetry/telemetry.h"

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

/* ---- files ---- */

/* DATA/replays and DATA/replays/SESSION (session/session.h, sess_path). */
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

/* ---- records ---- */

/* replay_view_url: a key-less URL of the video, signed for this one replay
 * (the token's obj claim) and valid as long as the session's CDP token
 * (BROWSERD_TOKEN_TTL_SECONDS); every list hands out a fresh one. */
static char *view_url(const struct app *app, const char *org, const char *sid, const char *rid)
{
    const char *pub = app->cfg.public_url;
    size_t n = strlen(pub);
    while (n && pub[n - 1] == '/')
        n--;
    struct token_claims c = {.exp = clock_now_ms() / 1000 +
                                    (app->cfg.token_ttl_s > 0 ? app->cfg.token_ttl_s : 86400)};
    snprintf(c.sub, sizeof c.sub, "%s", sid);
    snprintf(c.org, sizeof c.org, "%s", org);
    snprintf(c.aud, sizeof c.aud, "replay");
    snprintf(c.obj, sizeof c.obj, "%s", rid);
    char tok[TOKEN_MAX];
    if (token_sign(app->token_key, sizeof app->token_key, &c, tok, sizeof tok) != 0)
        tok[0] = '\0';
    return xasprintf("%.*s/browser/replays?jwt=%s&replay_id=%s", (int)n, pub, tok, rid);
}

static json_t *replay_record(const struct app *app, const char *org, const char *sid,
                             const char *rid, int64_t started, int64_t finished)
{
    char a[40], b[40];
    char *view = view_url(app, org, sid, rid);
    json_t *o =
        json_pack("{s:s,s:s,s:o,s:s}", "replay_id", rid, "started_at",
                  clock_fmt_rfc3339(started, a, sizeof a), "finished_at",
                  finished ? json_string(clock_fmt_rfc3339(finished, b, sizeof b)) : json_null(),
                  "replay_view_url", view);
    xfree(view);
    return o;
}

static int cmp_started(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    return strcmp(jsonx_str(x, "started_at"), jsonx_str(y, "started_at"));
}

/* ---- request helpers ---- */

/* Gate shared by every call: the feature, then the session as the key sees
 * it, live or ended (404 when it is not the key's). */
static int open_session(struct req *rq, struct session_rec *rec)
{
    memset(rec, 0, sizeof *rec);
    int rc = api_require_feature(rq, "browser_replays");
    if (rc)
        return rc;
    struct app *app = api_app(rq);
    struct auth *a = api_auth(rq);
    rc = store_session_get(app->store, a->org.id, a->project.id, rq->params[0], 1, rec);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "browser session %s not found", rq->params[0]);
    if (rc == 0) {
        reconcile();
        sweep(app, 0);
    }
    return rc;
}

/* An id that cannot be a replay's is simply not found, as an unknown one is
 * (every other unknown id answers 404). */
static int replay_param(struct req *rq, const struct session_rec *s, const char **rid)
{
    *rid = rq->params[1];
    if (!replay_valid_id(*rid))
        return err_set(&rq->err, E_NOTFOUND, "not_found",
                       "replay %.80s: no recording found for session %s", *rid, s->id);
    return 0;
}

static void emit_call(const char *sid, const char *op, int rc)
{
    int status = rc ? (rc == E_INVALID ? 400 : rc == E_CONFLICT ? 409 : 500) : 200;
    struct telem_src src = {"kernel_api", "replays", 0};
    telemetry_emit_src(sid, TELEM_CONTROL, "api_call", &src,
                       json_pack("{s:s,s:i}", "operation_id", op, "status", status));
}

/* ---- list ---- */

int replays_list(struct req *rq, struct resp *rs)
{
    struct session_rec rec;
    int rc = open_session(rq, &rec);
    if (rc) {
        session_rec_clear(&rec);
        return rc;
    }
    struct app *app = api_app(rq);
    char dir[1200];
    session_dir(app, rec.id, dir, sizeof dir);
    json_t *arr = json_array();
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n < 6 || n - 5 > REPLAY_ID_MAX || strcmp(de->d_name + n - 5, ".json") != 0)
            continue;
        char rid[REPLAY_ID_MAX + 1];
        memcpy(rid, de->d_name, n - 5);
        rid[n - 5] = '\0';
        json_t *note = read_note(dir, rid);
        const char *org = jsonx_str(note, "org_id");
        if (note && org && strcmp(org, rec.org_id) == 0) {
            pthread_mutex_lock(&table_mu);
            int running = find_locked(rec.id, rid) != NULL;
            pthread_mutex_unlock(&table_mu);
            int64_t started = (int64_t)json_integer_value(json_object_get(note, "started_at"));
            int64_t fin = running ? 0 : note_finished(note, dir, rid);
            json_array_append_new(arr, replay_record(app, rec.org_id, rec.id, rid, started, fin));
        }
        json_decref(note);
    }
    if (d)
        closedir(d);
    /* Oldest first: segments of one recording read in order. */
    size_t n = json_array_size(arr);
    json_t **v = xcalloc(n ? n : 1, sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = json_incref(json_array_get(arr, i));
    qsort(v, n, sizeof *v, cmp_started);
    json_array_clear(arr);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, v[i]);
    xfree(v);
    resp_json(rs, 200, arr);
    session_rec_clear(&rec);
    return 0;
}

/* ---- start ---- */

/* The optional body: null, {} and no body at all are "no options". */
static int parse_start(struct req *rq, int gpu, struct replay_opts *o)
{
    size_t n = rq->body_len;
    const char *b = rq->body ? rq->body : "";
    while (n && (b[n - 1] == ' ' || b[n - 1] == '\n' || b[n - 1] == '\r' || b[n - 1] == '\t'))
        n--;
    size_t lead = strspn(b, " \n\r\t");
    if (lead >= n || (n - lead == 4 && strncmp(b + lead, "null", 4) == 0))
        return replay_parse_start(NULL, gpu, LIM_REPLAY_SECONDS, o, &rq->err);
    json_t *body = NULL;
    int rc = req_json_object(rq, 1, &body);
    if (rc == 0)
        rc = replay_parse_start(body, gpu, LIM_REPLAY_SECONDS, o, &rq->err);
    json_decref(body);
    return rc;
}

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
static int ws_now(void *ctx, const char *sid, char *out, size_t cap)
{
    struct live *l = sessmgr_get(((struct app *)ctx)->sessions, sid);
    int rc = l && live_ws_url(l, out, cap) == 0 ? 0 : -1;
    sessmgr_put(l);
    return rc;
}

/* Starts one recording of a live session (table_mu NOT held). */
static int start_recording(struct app *app, struct live *l, const char *sid, const char *org_id,
                           const char *ws, int width, int height, int framerate, int max_seconds,
                           int retention_days, json_t **record, struct err *e)
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
            .ws_lookup = ws_now,
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
        if (record)
            *record = replay_record(app, r->org_id, sid, r->replay_id, r->started_at, 0);
        log_info("replay %s of session %s started (%s, %d fps, at most %d s)", r->replay_id, sid,
                 bv.display >= 0 ? "X display" : "DevTools screenshots", framerate, max_seconds);
    }
    pthread_mutex_unlock(&table_mu);
    if (rc)
        xfree(r);
    sandbox_unref(bv.sb);
    return rc;
}

static int retention_days_of(struct req *rq)
{
    const json_t *ent = NULL;
    if (api_entitlements(rq, &ent) != 0)
        return LIM_REPLAY_RETENTION_DAYS;
    const json_t *d = json_object_get(
        json_object_get(json_object_get(ent, "features"), "browser_replays"), "retention_days");
    return json_is_integer(d) && json_integer_value(d) >= 0 ? (int)json_integer_value(d)
                                                            : LIM_REPLAY_RETENTION_DAYS;
}

int replays_start(struct req *rq, struct resp *rs)
{
    rq->no_retry = 1;
    int rc = api_require_feature(rq, "browser_replays");
    if (rc)
        return rc;
    struct session_rec rec;
    struct live *l = NULL;
    char ws[512];
    if ((rc = api_live_session(rq, &rec, &l, ws, sizeof ws)) != 0)
        return rc;
    reconcile();
    sweep(api_app(rq), 0);
    live_touch(l);
    json_t *d = json_loads(rec.data ? rec.data : "{}", 0, NULL);
    json_t *vp = json_object_get(d, "viewport");
    int w = (int)json_integer_value(json_object_get(vp, "width"));
    int h = (int)json_integer_value(json_object_get(vp, "height"));
    int gpu = jsonx_bool(d, "gpu", 0);
    json_decref(d);
    if (w <= 0 || h <= 0) {
        w = 1920;
        h = 1080;
    }
    struct replay_opts o;
    json_t *record = NULL;
    if ((rc = parse_start(rq, gpu, &o)) == 0)
        rc = start_recording(api_app(rq), l, rec.id, rec.org_id, ws, w, h, o.framerate,
                             o.max_seconds, retention_days_of(rq), &record, &rq->err);
    if (rc == 0)
        resp_json(rs, 201, record);
    emit_call(rec.id, "startRecording", rc);
    sessmgr_put(l);
    session_rec_clear(&rec);
    return rc;
}

/* ---- stop ---- */

int replays_stop(struct req *rq, struct resp *rs)
{
    rq->no_retry = 1;
    struct session_rec rec;
    const char *rid = NULL;
    int rc = open_session(rq, &rec);
    if (rc == 0)
        rc = replay_param(rq, &rec, &rid);
    if (rc) {
        session_rec_clear(&rec);
        return rc;
    }
    struct app *app = api_app(rq);
    pthread_mutex_lock(&table_mu);
    struct running *r = find_locked(rec.id, rid);
    struct recorder *target = r && !recorder_done(r->rec) ? r->rec : NULL;
    if (target)
        recorder_stop(target);
    pthread_mutex_unlock(&table_mu);
    if (!target) {
        char dir[1200];
        session_dir(app, rec.id, dir, sizeof dir);
        json_t *note = read_note(dir, rid);
        rc = note ? err_set(&rq->err, E_INVALID, "bad_request",
                            "replay %s: no active recording to stop (it has finished)", rid)
                  : err_set(&rq->err, E_NOTFOUND, "not_found",
                            "replay %s: no recording found for session %s", rid, rec.id);
        json_decref(note);
    } else {
        /* The entry stays in the table until reconciled; the file is
         * complete once the recorder is done. */
        reconcile();
        pthread_mutex_lock(&table_mu);
        r = find_locked(rec.id, rid);
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
        struct live *l = sessmgr_get(app->sessions, rec.id);
        if (l) {
            live_touch(l);
            sessmgr_put(l);
        }
        resp_empty(rs, 200);
    }
    emit_call(rec.id, "stopRecording", rc);
    session_rec_clear(&rec);
    return rc;
}

/* ---- download ---- */

struct file_stream {
    int fd;
};

static long file_read(void *ctx, char *buf, size_t cap)
{
    struct file_stream *f = ctx;
    for (;;) {
        ssize_t n = read(f->fd, buf, cap);
        if (n < 0 && errno == EINTR)
            continue;
        return n > 0 ? (long)n : -1;
    }
}

static void file_free(void *ctx)
{
    struct file_stream *f = ctx;
    close(f->fd);
    xfree(f);
}

static int serve_replay(struct req *rq, struct resp *rs, struct app *app,
                        const struct session_rec *s, const char *rid);

int replays_download(struct req *rq, struct resp *rs)
{
    struct session_rec rec;
    const char *rid = NULL;
    int rc = open_session(rq, &rec);
    if (rc == 0)
        rc = replay_param(rq, &rec, &rid);
    if (rc == 0)
        rc = serve_replay(rq, rs, api_app(rq), &rec, rid);
    session_rec_clear(&rec);
    return rc;
}

int replays_view(struct req *rq, struct resp *rs)
{
    struct app *app = api_app(rq);
    struct token_claims c;
    int rc = token_verify(app->token_key, sizeof app->token_key, req_query(rq, "jwt"), "replay",
                          clock_now_ms() / 1000, &c, &rq->err);
    if (rc)
        return rc;
    const char *rid = req_query(rq, "replay_id");
    if (!rid || !c.obj[0] || strcmp(rid, c.obj) != 0)
        return err_set(&rq->err, E_UNAUTH, "unauthorized",
                       "the token is for another replay (replay_id must be the token's)");
    /* The file is where the session ran. */
    if ((rc = api_cluster_forward(rq, rs, c.org, c.sub, 0)) != -1)
        return rc;
    struct session_rec rec;
    memset(&rec, 0, sizeof rec);
    rc = store_session_get(app->store, c.org, "", c.sub, 1, &rec);
    if (rc == E_NOTFOUND)
        rc = err_set(&rq->err, rc, "not_found", "browser session %s not found", c.sub);
    if (rc == 0) {
        reconcile();
        sweep(app, 0);
        rc = serve_replay(rq, rs, app, &rec, rid);
    }
    session_rec_clear(&rec);
    return rc;
}

/* The video of replay rid of session s: 200 streamed, 202 while recording,
 * 404 when there is none (or it is another org's). */
static int serve_replay(struct req *rq, struct resp *rs, struct app *app,
                        const struct session_rec *s, const char *rid)
{
    const struct session_rec rec = *s;
    int rc = 0;
    pthread_mutex_lock(&table_mu);
    int running = find_locked(rec.id, rid) != NULL;
    pthread_mutex_unlock(&table_mu);
    char dir[1200];
    session_dir(app, rec.id, dir, sizeof dir);
    json_t *note = read_note(dir, rid);
    const char *org = jsonx_str(note, "org_id");
    if (!note || !org || strcmp(org, rec.org_id) != 0) {
        rc = err_set(&rq->err, E_NOTFOUND, "not_found",
                     "replay %s: no recording found for session %s", rid, rec.id);
    } else if (running) {
        /* "202 with Retry-After while still recording or finalising". */
        resp_header(rs, "Retry-After", "%d", 5);
        resp_json(rs, 202,
                  json_pack("{s:s,s:s}", "replay_id", rid, "message",
                            "the recording is still running; stop it, then download"));
    } else {
        char path[1400];
        snprintf(path, sizeof path, "%s/%s.mp4", dir, rid);
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) {
            rc = err_set(&rq->err, E_NOTFOUND, "not_found",
                         "replay %s: the recording's file is gone", rid);
        } else {
            struct stat st;
            if (fstat(fd, &st) == 0)
                resp_header(rs, "Content-Length", "%lld", (long long)st.st_size);
            char a[40];
            resp_header(
                rs, "X-Recording-Started-At", "%s",
                clock_fmt_rfc3339((int64_t)json_integer_value(json_object_get(note, "started_at")),
                                  a, sizeof a));
            int64_t fin = note_finished(note, dir, rid);
            if (fin)
                resp_header(rs, "X-Recording-Finished-At", "%s",
                            clock_fmt_rfc3339(fin, a, sizeof a));
            struct file_stream *f = xmalloc(sizeof *f);
            f->fd = fd;
            resp_stream(rs, 200, "video/mp4", file_read, file_free, f, NULL);
        }
    }
    json_decref(note);
    return rc;
}

/* ---- the viewport rule ---- */

int replays_recording_active(const char *session_id)
{
    pthread_mutex_lock(&table_mu);
    int a = find_locked(session_id, NULL) != NULL;
    pthread_mutex_unlock(&table_mu);
    return a;
}

void replays_resize_begin(const char *session_id, struct replays_segment *seg)
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

void replays_resize_end(struct app *app, const char *session_id, const struct replays_segment *seg,
                        int width, int height)
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
                              seg->seconds_left, seg->retention_days, NULL, &e);
    if (e.rc)
        log_error("session %s: the recording's next segment did not start: %s", session_id,
                  e.message);
    sessmgr_put(l);
}

/* ---- session hooks ---- */

/* The session ended: its recordings finish (the browser and its display are
 * gone: ffmpeg ends on its own or on `q`), and retention starts. */
static void replays_ending(struct session_ctx *sc, const char *reason)
{
    (void)reason;
    pthread_mutex_lock(&table_mu);
    struct running *mine = take_finished_locked(sc->rec->id, 1);
    pthread_mutex_unlock(&table_mu);
    finish_entries(mine, 1);
    reconcile();
    sweep(sc->app, 1);
}

/* PATCH: is a recording active (the viewport rule's question)? */
static void replays_state(struct session_ctx *sc, struct sessrules_state *st)
{
    st->recording_active = replays_recording_active(sc->rec->id);
}

/* A forced resize cuts the running recording into segments: it finishes
 * here and goes on as a new replay at the new size (replays_resized). */
static void *replays_resizing(struct session_ctx *sc, int restart, int width, int height)
{
    (void)width;
    (void)height;
    if (!restart)
        return NULL;
    struct replays_segment *seg = xcalloc(1, sizeof *seg);
    replays_resize_begin(sc->rec->id, seg);
    return seg;
}

static void replays_resized(struct session_ctx *sc, void *state, int width, int height)
{
    if (!state)
        return;
    replays_resize_end(sc->app, sc->rec->id, state, width, height);
    xfree(state);
}

/* A DELETE waits for the ending hook when the session has a recording
 * running or any replay (DATA/replays/ID): the hook finishes it and applies
 * the plan's retention, read right after the DELETE. */
static int replays_needs_graceful_end(struct session_ctx *sc)
{
    if (replays_recording_active(sc->rec->id))
        return 1;
    char dir[1200];
    session_dir(sc->app, sc->rec->id, dir, sizeof dir);
    struct stat st;
    return stat(dir, &st) == 0;
}

static const struct session_ext replays_ext = {
    .name = "replays",
    .state = replays_state,
    .resizing = replays_resizing,
    .resized = replays_resized,
    .needs_graceful_end = replays_needs_graceful_end,
    .ending = replays_ending,
};

/* Registered before main() runs: main.c is not this module's to edit; the
 * lead may move this into an init call beside computer_api_init. */
__attribute__((constructor)) static void replays_register(void)
{
    session_ext_register(&replays_ext);
}
