/*
 * browsers.replays.*: start, stop, list and download recordings of a
 * session's screen. The recordings themselves (the table of those running
 * on this host, their notes beside their files under DATA/replays/SESSION,
 * their retention) are session/recordings.h's; this file parses, calls it
 * and renders. Expired recordings are deleted by a sweep run at most once a
 * minute from these handlers and at every session's end.
 */
#include "api/replays.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "session/ext.h"
#include "session/recordings.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/jsonx.h"
#include "core/token.h"
#include "core/log.h"
#include "core/xalloc.h"
#include "domain/launch_settings.h"
#include "domain/replay_rules.h"
#include "runtime/chromium.h"
#include "runtime/recorder.h"
#include "runtime/sandbox.h"
#include "runtime/sessmgr.h"
#include "telemetry/telemetry.h"

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
    if (rc == 0)
        sess_recordings_tidy(app);
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
    telemetry_emit_src(sid, TELEM_PLATFORM, "api_call", &src,
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
    sess_path(app, rec.id, SESS_PATH_REPLAYS, dir, sizeof dir);
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
        json_t *note = sess_recording_note(app, rec.id, rid);
        const char *org = jsonx_str(note, "org_id");
        if (note && org && strcmp(org, rec.org_id) == 0) {
            int running = sess_recording_running(rec.id, rid);
            int64_t started = (int64_t)json_integer_value(json_object_get(note, "started_at"));
            int64_t fin = running ? 0 : sess_recording_finished_at(app, note, rec.id, rid);
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
    sess_recordings_tidy(api_app(rq));
    live_touch(l);
    struct launch_settings ls;
    launch_settings_from_text(rec.data, &ls);
    int w = ls.viewport.width, h = ls.viewport.height, gpu = ls.gpu;
    struct replay_opts o;
    json_t *record = NULL;
    char rid[CRYPTO_ID_LEN + 1];
    int64_t started = 0;
    if ((rc = parse_start(rq, gpu, &o)) == 0)
        rc = sess_recording_start(api_app(rq), l, rec.id, rec.org_id, ws, w, h, o.framerate,
                                  o.max_seconds, retention_days_of(rq), rid, sizeof rid, &started,
                                  &rq->err);
    if (rc == 0) {
        record = replay_record(api_app(rq), rec.org_id, rec.id, rid, started, 0);
        resp_json(rs, 201, record);
    }
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
    if (sess_recording_stop(rec.id, rid) != 0) {
        json_t *note = sess_recording_note(app, rec.id, rid);
        rc = note ? err_set(&rq->err, E_INVALID, "bad_request",
                            "replay %s: no active recording to stop (it has finished)", rid)
                  : err_set(&rq->err, E_NOTFOUND, "not_found",
                            "replay %s: no recording found for session %s", rid, rec.id);
        json_decref(note);
    } else {
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
        sess_recordings_tidy(app);
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
    int running = sess_recording_running(rec.id, rid);
    char dir[1200];
    sess_path(app, rec.id, SESS_PATH_REPLAYS, dir, sizeof dir);
    json_t *note = sess_recording_note(app, rec.id, rid);
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
            int64_t fin = sess_recording_finished_at(app, note, rec.id, rid);
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

/* ---- session hooks ---- */

/* The session ended: its recordings finish (the browser and its display are
 * gone: ffmpeg ends on its own or on `q`), and retention starts. */
static void replays_ending(struct session_ctx *sc, const char *reason)
{
    (void)reason;
    sess_recordings_session_ended(sc->app, sc->rec->id);
}

/* PATCH: is a recording active (the viewport rule's question)? */
static void replays_state(struct session_ctx *sc, struct sessrules_state *st)
{
    st->recording_active = sess_recording_running(sc->rec->id, NULL);
}

/* A forced resize cuts the running recording into segments: it finishes
 * here and goes on as a new replay at the new size (replays_resized). */
static void *replays_resizing(struct session_ctx *sc, int restart, int width, int height)
{
    (void)width;
    (void)height;
    if (!restart)
        return NULL;
    struct sess_recording_segment *seg = xcalloc(1, sizeof *seg);
    sess_recording_cut(sc->rec->id, seg);
    return seg;
}

static void replays_resized(struct session_ctx *sc, void *state, int width, int height)
{
    if (!state)
        return;
    sess_recording_resume(sc->app, sc->rec->id, state, width, height);
    xfree(state);
}

/* A DELETE waits for the ending hook when the session has a recording
 * running or any replay (DATA/replays/ID): the hook finishes it and applies
 * the plan's retention, read right after the DELETE. */
static int replays_needs_graceful_end(struct session_ctx *sc)
{
    if (sess_recording_running(sc->rec->id, NULL))
        return 1;
    char dir[1200];
    sess_path(sc->app, sc->rec->id, SESS_PATH_REPLAYS, dir, sizeof dir);
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
