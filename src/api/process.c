/*
 * Handlers of /browsers/{id}/process/... and /browsers/{id}/playwright/execute
 * (SESSION_API.md sections 3 and 5). Each call checks the session (404 for
 * another organization's or an unknown one, 409 for an ended one), refuses a
 * session without its sandbox (503 sandbox_required: nothing ever runs as the
 * server's user), counts as activity for the idle timeout and is reported as
 * an api_call telemetry event (platform for processes, control for
 * Playwright). exec and playwright.execute park their request (no HTTP
 * thread is held) until the process ends. Non-idempotent calls (exec, spawn,
 * stdin, kill, playwright.execute) answer 5xx with x-should-retry: false, so
 * that the official client never runs a command twice. docs/process.md.
 */
#include "api/process.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "session/ext.h"
#include "core/b64.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/limits.h"
#include "core/strvec.h"
#include "core/xalloc.h"
#include "domain/launch_settings.h"
#include "domain/procreq.h"
#include "runtime/proc.h"
#include "runtime/procjobs.h"
#include "runtime/pwexec.h"
#include "runtime/sandbox.h"
#include "runtime/sessmgr.h"
#include "telemetry/telemetry.h"

/* ---- the session a call addresses ---- */

struct call {
    struct session_rec rec;
    struct live *live;
    struct sandbox *sb;
    char ws[512];
    int headful;
    int64_t started_us;
    const char *operation;
    enum telem_cat cat;
};

static int call_open(struct req *rq, const char *operation, enum telem_cat cat, struct call *c)
{
    memset(c, 0, sizeof *c);
    c->started_us = clock_mono_us();
    c->operation = operation;
    c->cat = cat;
    int rc = api_live_session(rq, &c->rec, &c->live, c->ws, sizeof c->ws);
    if (rc)
        return rc;
    live_touch(c->live);
    c->sb = live_sandbox_ref(c->live);
    if (!c->sb || !sandbox_root(c->sb))
        return err_set(&rq->err, E_UNAVAIL, "sandbox_required",
                       "needs the session sandbox: docs/sandbox.md");
    struct launch_settings ls;
    launch_settings_from_text(c->rec.data, &ls);
    c->headful = !ls.headless;
    return 0;
}

/* Reports the call and releases the session (rc: the handler's outcome). */
static int call_close(struct req *rq, struct call *c, int rc)
{
    if (c->live) {
        int status = rc ? http_status_for(rc) : 200;
        json_t *d =
            json_pack("{s:s,s:i,s:I}", "operation_id", c->operation, "status", status,
                      "duration_ms", (json_int_t)((clock_mono_us() - c->started_us) / 1000));
        struct telem_src src = {"kernel_api", c->cat == TELEM_PLATFORM ? "process" : "playwright",
                                0};
        telemetry_emit_src(c->rec.id, c->cat, "api_call", &src, d);
        live_touch(c->live);
        sessmgr_put(c->live);
        c->live = NULL;
    }
    sandbox_unref(c->sb);
    c->sb = NULL;
    session_rec_clear(&c->rec);
    (void)rq;
    return rc;
}

/* ---- parsing (domain/procreq) ---- */

/* n bytes of p as a JSON string of their base64. */
static json_t *base64_json(const char *p, size_t n)
{
    size_t len = 0;
    char *t = b64_encode(p, n, &len);
    json_t *s = json_stringn(t, len);
    xfree(t);
    return s;
}

/* The exec or spawn body; kernel-images' "request body required" first. */
static int parse_run(struct req *rq, const struct call *c, int spawn, struct procreq *r)
{
    memset(r, 0, sizeof *r);
    if (rq->body_len == 0)
        return err_set(&rq->err, E_INVALID, "bad_request", "request body required");
    json_t *body;
    int rc = req_json_object(rq, 0, &body);
    if (rc)
        return rc;
    rc = procreq_parse(body, spawn, (unsigned)sandbox_uid(c->sb), r, &rq->err);
    /* cwd is borrowed from the body: keep it alive with the request's
     * params (freed by run_done). */
    if (rc == 0 && r->cwd)
        r->cwd = xstrdup(r->cwd);
    json_decref(body);
    return rc;
}

static void run_done(struct procreq *r)
{
    xfree((char *)r->cwd);
    r->cwd = NULL;
    procreq_clear(r);
}

static void fill_spec(const struct call *c, struct app *app, const struct procreq *r,
                      struct proc_spec *s)
{
    memset(s, 0, sizeof *s);
    s->session_id = c->rec.id;
    s->sb = c->sb;
    s->sessions = app->sessions;
    s->argv = (const char *const *)r->argv.v;
    s->env = (const char *const *)r->env.v;
    s->cwd = r->cwd;
    s->as_root = r->as_root;
    s->tty = r->tty;
    s->rows = r->rows;
    s->cols = r->cols;
    s->display = c->headful ? ":0" : NULL;
}

/* ---- exec: parked until the process ends ---- */

/* A parked request; counted by the app's procjobs (runtime/procjobs.h), so
 * that the server's stop answers it before the HTTP daemon stops. */
struct waitjob {
    struct call c;
    struct req *rq;
    struct proc *p;
    struct procjobs *jobs;
    int timeout_s;
    int playwright;
};

static void job_exited(void *ctx, struct proc *p)
{
    (void)p;
    struct waitjob *j = ctx;
    req_resume(j->rq);
}

/* A new parked job, unless the server is stopping (then 503). */
static int job_new(struct req *rq, struct waitjob **out)
{
    *out = NULL;
    struct procjobs *jobs = api_app(rq)->procjobs;
    int rc = procjobs_enter(jobs, &rq->err);
    if (rc)
        return rc;
    *out = xcalloc(1, sizeof **out);
    (*out)->jobs = jobs;
    return 0;
}

static void job_free(struct waitjob *j)
{
    if (!j)
        return;
    struct procjobs *jobs = j->jobs;
    proc_put(j->p);
    xfree(j);
    procjobs_leave(jobs);
}

static void job_done(struct req *rq, int delivered)
{
    (void)delivered;
    job_free(rq->async_ctx);
    rq->async_ctx = NULL;
}

static void exec_resume(struct req *rq, struct resp *rs)
{
    struct waitjob *j = rq->async_ctx;
    struct proc_status st;
    proc_status(j->p, &st);
    int rc = 0;
    if (st.timed_out) {
        rc = err_set(&rq->err, E_INTERNAL, "internal",
                     "process timed out (after %d s; it and everything it started were killed)",
                     j->timeout_s);
        resp_json(rs, 500, http_error_json(&rq->err));
        /* A resumed response is built here, not by the HTTP layer's error
         * path: the header that stops the client's retry is ours to add. */
        resp_header(rs, "x-should-retry", "false");
    } else {
        size_t ol, el;
        int ot, et;
        const char *o = proc_out(j->p, PROC_STDOUT, &ol, &ot);
        const char *er = proc_out(j->p, PROC_STDERR, &el, &et);
        json_t *body = json_pack("{s:i,s:o,s:o,s:I}", "exit_code", st.exit_code, "stdout_b64",
                                 base64_json(o, ol), "stderr_b64", base64_json(er, el),
                                 "duration_ms", (json_int_t)st.duration_ms);
        if (ot)
            json_object_set_new(body, "stdout_truncated", json_true());
        if (et)
            json_object_set_new(body, "stderr_truncated", json_true());
        resp_json(rs, 200, body);
    }
    rq->no_retry = 1;
    call_close(rq, &j->c, rc);
}

int process_exec(struct req *rq, struct resp *rs)
{
    (void)rs;
    rq->no_retry = 1;
    struct waitjob *j;
    int rc = job_new(rq, &j);
    if (rc)
        return rc;
    struct procreq r;
    memset(&r, 0, sizeof r);
    rc = call_open(rq, "process.exec", TELEM_PLATFORM, &j->c);
    if (rc == 0)
        rc = parse_run(rq, &j->c, 0, &r);
    if (rc == 0) {
        struct proc_spec s;
        fill_spec(&j->c, api_app(rq), &r, &s);
        j->timeout_s = r.timeout_s ? (int)r.timeout_s : LIM_PROC_EXEC_TIMEOUT_S;
        s.timeout_ms = (int64_t)j->timeout_s * 1000;
        s.collect = LIM_PROC_OUTPUT_BYTES;
        s.stdin_data = ""; /* stdin is empty (closed at once) */
        s.on_exit = job_exited;
        s.ctx = j;
        j->rq = rq;
        rc = proc_start(&s, &j->p, &rq->err);
    }
    run_done(&r);
    if (rc) {
        call_close(rq, &j->c, rc);
        job_free(j);
        return rc;
    }
    return req_suspend(rq, exec_resume, job_done, j);
}

/* ---- spawn and the calls on a process ---- */

int process_spawn(struct req *rq, struct resp *rs)
{
    rq->no_retry = 1;
    struct call c;
    struct procreq r;
    memset(&r, 0, sizeof r);
    int rc = call_open(rq, "process.spawn", TELEM_PLATFORM, &c);
    if (rc == 0)
        rc = parse_run(rq, &c, 1, &r);
    struct proc *p = NULL;
    if (rc == 0) {
        struct proc_spec s;
        fill_spec(&c, api_app(rq), &r, &s);
        s.timeout_ms = r.timeout_s * 1000;
        rc = proc_start(&s, &p, &rq->err);
    }
    run_done(&r);
    if (rc == 0) {
        char ts[40];
        clock_fmt_rfc3339(proc_started_ms(p), ts, sizeof ts);
        /* The pid inside the session's PID namespace, once the command runs. */
        int pid = 0;
        for (int i = 0; i < 100 && (pid = proc_ns_pid(p)) == 0; i++) {
            struct proc_status st;
            proc_status(p, &st);
            if (!st.running)
                break;
            struct timespec d = {0, 10 * 1000 * 1000};
            nanosleep(&d, NULL);
        }
        resp_json(
            rs, 200,
            json_pack("{s:s,s:i,s:s}", "process_id", proc_id(p), "pid", pid, "started_at", ts));
        proc_put(p);
    }
    return call_close(rq, &c, rc);
}

/* Opens the call and finds the process of params[1] in the session. */
static int open_proc(struct req *rq, const char *operation, struct call *c, struct proc **p)
{
    *p = NULL;
    if (!procreq_is_uuid(rq->params[1]))
        return err_field(&rq->err, "process_id",
                         "Invalid format for parameter process_id: not a UUID: \"%.64s\"",
                         rq->params[1]);
    int rc = call_open(rq, operation, TELEM_PLATFORM, c);
    if (rc)
        return rc;
    *p = proc_get(c->rec.id, rq->params[1]);
    if (!*p)
        return err_set(&rq->err, E_NOTFOUND, "not_found", "process not found");
    return 0;
}

int process_status_get(struct req *rq, struct resp *rs)
{
    struct call c;
    struct proc *p;
    memset(&c, 0, sizeof c);
    int rc = open_proc(rq, "process.status", &c, &p);
    if (rc == 0) {
        struct proc_status st;
        proc_status(p, &st);
        json_t *b =
            json_pack("{s:s,s:o,s:f}", "state", st.running ? "running" : "exited", "exit_code",
                      st.running ? json_null() : json_integer(st.exit_code), "cpu_pct", st.cpu_pct);
        if (st.running)
            json_object_set_new(b, "mem_bytes", json_integer(st.mem_bytes));
        resp_json(rs, 200, b);
    }
    proc_put(p);
    return call_close(rq, &c, rc);
}

int process_stdin_post(struct req *rq, struct resp *rs)
{
    rq->no_retry = 1;
    struct call c;
    struct proc *p;
    memset(&c, 0, sizeof c);
    json_t *body = NULL;
    int rc = open_proc(rq, "process.stdin", &c, &p);
    if (rc == 0)
        rc = req_json_object(rq, 0, &body);
    const char *d = rc ? NULL : json_string_value(json_object_get(body, "data_b64"));
    if (rc == 0 && !d)
        rc = err_field(&rq->err, "data_b64", "is required: base64 of the bytes to write");
    unsigned char *bytes = NULL;
    size_t n = 0;
    if (rc == 0 && procreq_b64_decode(d, json_string_length(json_object_get(body, "data_b64")),
                                      &bytes, &n) != 0)
        rc = err_field(&rq->err, "data_b64", "invalid base64");
    size_t written = 0;
    if (rc == 0)
        rc = proc_stdin(p, bytes, n, &written, &rq->err);
    if (rc == 0)
        resp_json(rs, 200, json_pack("{s:I}", "written_bytes", (json_int_t)written));
    xfree(bytes);
    json_decref(body);
    proc_put(p);
    return call_close(rq, &c, rc);
}

int process_kill(struct req *rq, struct resp *rs)
{
    rq->no_retry = 1;
    struct call c;
    struct proc *p;
    memset(&c, 0, sizeof c);
    json_t *body = NULL;
    int rc = open_proc(rq, "process.kill", &c, &p);
    if (rc == 0)
        rc = req_json_object(rq, 1, &body);
    int sig = SIGTERM;
    if (rc == 0) {
        json_t *v = json_object_get(body, "signal");
        if (v && !json_is_null(v)) {
            sig = procreq_signal(json_string_value(v));
            if (!sig)
                rc = err_field(&rq->err, "signal", "invalid signal: one of TERM, KILL, INT, HUP");
        }
    }
    if (rc == 0)
        rc = proc_signal(p, sig, &rq->err);
    if (rc == 0)
        resp_json(rs, 200, json_pack("{s:b}", "ok", 1));
    json_decref(body);
    proc_put(p);
    return call_close(rq, &c, rc);
}

int process_resize(struct req *rq, struct resp *rs)
{
    struct call c;
    struct proc *p;
    memset(&c, 0, sizeof c);
    json_t *body = NULL;
    int rc = open_proc(rq, "process.resize", &c, &p);
    if (rc == 0)
        rc = req_json_object(rq, 0, &body);
    int rows = 0, cols = 0;
    if (rc == 0)
        rc = procreq_resize(body, &rows, &cols, &rq->err);
    if (rc == 0)
        rc = proc_resize(p, rows, cols, &rq->err);
    if (rc == 0)
        resp_json(rs, 200, json_pack("{s:b}", "ok", 1));
    json_decref(body);
    proc_put(p);
    return call_close(rq, &c, rc);
}

/* ---- stdout/stream: SSE of output chunks, then the exit event ---- */

struct pstream {
    pthread_mutex_t mu; /* hs against wake */
    struct http_stream *hs;
    struct proc_sub *sub;
    struct buf out; /* encoded frames not yet sent */
    int ended;
};

static void ps_wake(void *ctx)
{
    struct pstream *s = ctx;
    pthread_mutex_lock(&s->mu);
    if (s->hs)
        http_stream_wake(s->hs);
    pthread_mutex_unlock(&s->mu);
}

static void frame(struct pstream *s, json_t *ev)
{
    char *t = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    if (!t)
        return;
    if (buf_append(&s->out, "data: ", 6) == 0 && buf_append(&s->out, t, strlen(t)) == 0)
        (void)!buf_append(&s->out, "\n\n", 2);
    xfree(t);
}

static long ps_read(void *ctx, char *dst, size_t cap)
{
    struct pstream *s = ctx;
    while (s->out.len == 0 && !s->ended) {
        char chunk[4096];
        size_t n = 0;
        int stream = 0, code = 0;
        int r = proc_sub_next(s->sub, &stream, chunk, &n, &code);
        if (r == 0)
            return 0; /* parked until the process's next output */
        if (r > 0) {
            frame(s, json_pack("{s:s,s:o}", "stream", stream == PROC_STDERR ? "stderr" : "stdout",
                               "data_b64", base64_json(chunk, n)));
        } else {
            frame(s, json_pack("{s:s,s:i}", "event", "exit", "exit_code", code));
            s->ended = 1;
        }
    }
    if (s->out.len == 0)
        return -1;
    size_t n = s->out.len < cap ? s->out.len : cap;
    memcpy(dst, s->out.p, n);
    memmove(s->out.p, s->out.p + n, s->out.len - n);
    s->out.len -= n;
    return (long)n;
}

static void ps_free(void *ctx)
{
    struct pstream *s = ctx;
    pthread_mutex_lock(&s->mu);
    s->hs = NULL;
    pthread_mutex_unlock(&s->mu);
    proc_unsubscribe(s->sub);
    buf_free(&s->out);
    pthread_mutex_destroy(&s->mu);
    xfree(s);
}

int process_stream_get(struct req *rq, struct resp *rs)
{
    struct call c;
    struct proc *p;
    memset(&c, 0, sizeof c);
    int rc = open_proc(rq, "process.stdout_stream", &c, &p);
    if (rc == 0) {
        struct pstream *s = xcalloc(1, sizeof *s);
        pthread_mutex_init(&s->mu, NULL);
        buf_init(&s->out, 1u << 20);
        struct http_stream *hs = NULL;
        resp_stream(rs, 200, "text/event-stream", ps_read, ps_free, s, &hs);
        resp_header(rs, "Cache-Control", "no-cache");
        resp_header(rs, "X-Accel-Buffering", "no");
        resp_header(rs, "X-SSE-Content-Type", "application/json");
        pthread_mutex_lock(&s->mu);
        s->hs = hs;
        pthread_mutex_unlock(&s->mu);
        s->sub = proc_subscribe(p, ps_wake, s);
    }
    proc_put(p);
    return call_close(rq, &c, rc);
}

/* ---- playwright.execute ---- */

static void pw_resume(struct req *rq, struct resp *rs)
{
    struct waitjob *j = rq->async_ctx;
    resp_json(rs, 200, pwexec_result(j->p, j->timeout_s));
    rq->no_retry = 1;
    call_close(rq, &j->c, 0);
}

int playwright_execute(struct req *rq, struct resp *rs)
{
    (void)rs;
    rq->no_retry = 1;
    struct waitjob *j;
    int rc = job_new(rq, &j);
    if (rc)
        return rc;
    json_t *body = NULL;
    rc = call_open(rq, "playwright.execute", TELEM_CONTROL, &j->c);
    if (rc == 0)
        rc = req_json_object(rq, 0, &body);
    const char *code = rc ? NULL : json_string_value(json_object_get(body, "code"));
    if (rc == 0 && (!code || !*code)) {
        err_field(&rq->err, "code", "code is required (a non-empty string)");
        rc = E_INVALID;
    } else if (rc == 0 && strlen(code) != json_string_length(json_object_get(body, "code"))) {
        err_field(&rq->err, "code", "must not contain NUL bytes");
        rc = E_INVALID;
    }
    j->timeout_s = 60;
    json_t *to = rc ? NULL : json_object_get(body, "timeout_sec");
    if (to && !json_is_null(to)) {
        if (!json_is_integer(to) || json_integer_value(to) < 1 ||
            json_integer_value(to) > LIM_PW_TIMEOUT_MAX_S)
            rc = err_field(&rq->err, "timeout_sec", "must be an integer between 1 and %d",
                           LIM_PW_TIMEOUT_MAX_S);
        else
            j->timeout_s = (int)json_integer_value(to);
    }
    if (rc == 0) {
        j->rq = rq;
        j->playwright = 1;
        rc = pwexec_start(j->c.sb, api_app(rq)->sessions, j->c.rec.id, j->c.ws, code, j->timeout_s,
                          job_exited, j, &j->p, &rq->err);
    }
    json_decref(body);
    if (rc) {
        call_close(rq, &j->c, rc);
        job_free(j);
        return rc;
    }
    return req_suspend(rq, pw_resume, job_done, j);
}

/* ---- the session's end ---- */

static void on_ending(struct session_ctx *sc, const char *reason)
{
    (void)reason;
    proc_session_end(sc->rec->id);
}

static const struct session_ext process_ext = {.name = "process", .ending = on_ending};

/* Registered at load time rather than from main.c: the module's only hook
 * frees its table entries when a session ends (its processes die with the
 * session's cgroup anyway). */
__attribute__((constructor)) static void process_register(void)
{
    session_ext_register(&process_ext);
}
