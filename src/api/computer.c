#include "api/computer.h"

#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "session/ext.h"
#include "core/clock.h"
#include "core/xalloc.h"
#include "domain/computer.h"
#include "domain/launch_settings.h"
#include "runtime/computer.h"
#include "runtime/sandbox.h"
#include "runtime/sessmgr.h"
#include "telemetry/telemetry.h"

/* What a call needs of its session: the live browser and the screen size. */
struct target {
    struct session_rec rec;
    struct live *live;
    char ws[512];
    int width, height;
    int64_t started_us;
    const char *operation;
    struct req *rq;
    struct computer_target ct;
};

/* The browser's display, read under the entry's lock. */
static int display_of(void *ctx, struct chromium *c)
{
    struct computer_target *ct = ctx;
    ct->display = chromium_display(c);
    ct->display_id = (long)chromium_xvfb_pid(c);
    struct sandbox *sb = chromium_sandbox(c);
    ct->netns = sb ? sandbox_netns(sb) : 0;
    return 0;
}

/* A gesture stops when its client went away, its session ended, or the
 * server stops. */
static int target_cancelled(void *ctx)
{
    struct target *t = ctx;
    char ws[8];
    return t->rq->stopping || req_client_gone(t->rq) || live_ws_url(t->live, ws, sizeof ws) == -1;
}

/* 404 for a session that is not this key's, 409 for one that has ended. */
static int target_open(struct req *rq, const char *operation, struct target *t)
{
    memset(t, 0, sizeof *t);
    t->started_us = clock_mono_us();
    t->operation = operation;
    int rc = api_live_session(rq, &t->rec, &t->live, t->ws, sizeof t->ws);
    if (rc)
        return rc;
    struct launch_settings ls;
    launch_settings_from_text(t->rec.data, &ls);
    t->width = ls.viewport.width;
    t->height = ls.viewport.height;
    t->rq = rq;
    t->ct.session_id = t->rec.id;
    t->ct.ws_url = t->ws;
    t->ct.display = -1;
    if (live_with_browser(t->live, display_of, &t->ct) != 0)
        t->ct.display = -1;
    t->ct.cancelled = target_cancelled;
    t->ct.cancel_ctx = t;
    /* An agent's action is activity: the idle timeout starts again. */
    live_touch(t->live);
    return 0;
}

/* Reports the call (category platform: an in-session management call) and
 * releases the session. */
static int target_close(struct req *rq, struct target *t, int rc)
{
    if (t->live) {
        int status = rc ? http_status_for(rc) : 200;
        json_t *d =
            json_pack("{s:s,s:i,s:I}", "operation_id", t->operation, "status", status,
                      "duration_ms", (json_int_t)((clock_mono_us() - t->started_us) / 1000));
        struct telem_src src = {"kernel_api", "computer", 0};
        telemetry_emit_src(t->rec.id, TELEM_PLATFORM, "api_call", &src, d);
        live_touch(t->live);
        sessmgr_put(t->live);
    }
    session_rec_clear(&t->rec);
    /* An input action is not repeated by the client's retries. */
    rq->no_retry = 1;
    return rc;
}

/* The body as a JSON object; an empty body or a literal null when
 * none_ok (screenshot: "no options"). */
static int body_of(struct req *rq, int none_ok, json_t **out)
{
    *out = NULL;
    if (none_ok) {
        size_t n = rq->body_len;
        const char *b = rq->body ? rq->body : "";
        while (n && (b[n - 1] == ' ' || b[n - 1] == '\n' || b[n - 1] == '\r' || b[n - 1] == '\t'))
            n--;
        size_t lead = strspn(b, " \n\r\t");
        if (lead >= n || (n - lead == 4 && strncmp(b + lead, "null", 4) == 0))
            return 0;
    }
    return req_json_object(rq, 0, out);
}

/* A call between its steps (rq->defer_ctx): it holds the session's input
 * across its parked waits, but not a thread (http.h req_defer). A batch's
 * actions, or one action of a single-action endpoint (`single`: its errors
 * are not prefixed with an index, and cursor answers {ok}). */
struct batch_call {
    struct target t;
    struct comp_action *acts;
    size_t n;
    struct computer_batch *run;
    int single;
};

static int batch_step(struct req *rq, struct resp *rs);

/* Runs bc's actions, parking its waits: the wait for the session's input
 * and sleep actions (computer_batch_step). */
static int batch_run(struct req *rq, struct resp *rs, struct batch_call *bc)
{
    bc->run = computer_batch_new(&bc->t.ct, bc->acts, bc->n);
    rq->defer_ctx = bc;
    return batch_step(rq, rs);
}

/* One single-action endpoint. */
static int single(struct req *rq, struct resp *rs, enum comp_op op)
{
    struct batch_call *bc = xcalloc(1, sizeof *bc);
    int rc = target_open(rq, comp_operation_id(op), &bc->t);
    if (rc) {
        xfree(bc);
        return rc;
    }
    json_t *body = NULL;
    bc->acts = xcalloc(1, sizeof *bc->acts);
    bc->n = 1;
    bc->single = 1;
    if ((rc = body_of(rq, 0, &body)) == 0)
        rc = comp_parse(op, body, "", bc->t.width, bc->t.height, bc->acts, &rq->err);
    json_decref(body);
    if (rc == 0 && op != COMP_CLIP_WRITE)
        return batch_run(rq, rs, bc);
    if (rc == 0) {
        rc = computer_clipboard_set(&bc->t.ct, bc->acts[0].text, &rq->err);
        if (rc == 0)
            resp_empty(rs, 200);
    }
    comp_batch_free(bc->acts, bc->n);
    rc = target_close(rq, &bc->t, rc);
    xfree(bc);
    return rc;
}

int compapi_click(struct req *rq, struct resp *rs)
{
    return single(rq, rs, COMP_CLICK);
}

int compapi_drag(struct req *rq, struct resp *rs)
{
    return single(rq, rs, COMP_DRAG);
}

int compapi_move(struct req *rq, struct resp *rs)
{
    return single(rq, rs, COMP_MOVE);
}

int compapi_press(struct req *rq, struct resp *rs)
{
    return single(rq, rs, COMP_PRESS);
}

int compapi_scroll(struct req *rq, struct resp *rs)
{
    return single(rq, rs, COMP_SCROLL);
}

int compapi_cursor(struct req *rq, struct resp *rs)
{
    return single(rq, rs, COMP_CURSOR);
}

int compapi_type(struct req *rq, struct resp *rs)
{
    return single(rq, rs, COMP_TYPE);
}

int compapi_clip_write(struct req *rq, struct resp *rs)
{
    return single(rq, rs, COMP_CLIP_WRITE);
}

static int batch_step(struct req *rq, struct resp *rs)
{
    struct batch_call *bc = rq->defer_ctx;
    int pause = 0;
    size_t failed = 0;
    int rc = computer_batch_step(bc->run, &pause, &failed, &rq->err);
    if (rc == COMPUTER_PAUSE)
        return req_defer(rq, rs, (unsigned)pause, batch_step);
    if (rc != 0 && rc != E_LIMIT && !bc->single) {
        /* "actions[{i}] ({type}): {inner message}", keeping the class (a
         * session busy with another call is not an action's failure). */
        char inner[ERR_MSG_MAX], code[ERR_CODE_MAX];
        snprintf(inner, sizeof inner, "%s", rq->err.message);
        snprintf(code, sizeof code, "%s", rq->err.code);
        (void)err_set(&rq->err, rq->err.rc, code, "actions[%zu] (%s): %.400s", failed,
                      comp_operation_id(bc->acts[failed < bc->n ? failed : 0].op), inner);
    }
    computer_batch_free(bc->run);
    if (rc == 0 && bc->single && bc->acts[0].op == COMP_CURSOR)
        resp_json(rs, 200, json_pack("{s:b}", "ok", 1));
    else if (rc == 0)
        resp_empty(rs, 200);
    comp_batch_free(bc->acts, bc->n);
    rc = target_close(rq, &bc->t, rc);
    rq->defer_ctx = NULL;
    xfree(bc);
    return rc;
}

int compapi_batch(struct req *rq, struct resp *rs)
{
    struct batch_call *bc = xcalloc(1, sizeof *bc);
    int rc = target_open(rq, "batchComputerAction", &bc->t);
    if (rc) {
        xfree(bc);
        return rc;
    }
    json_t *body = NULL;
    if ((rc = body_of(rq, 0, &body)) == 0)
        rc = comp_parse_batch(body, bc->t.width, bc->t.height, &bc->acts, &bc->n, &rq->err);
    json_decref(body);
    if (rc) {
        comp_batch_free(bc->acts, bc->n);
        rc = target_close(rq, &bc->t, rc);
        xfree(bc);
        return rc;
    }
    return batch_run(rq, rs, bc);
}

int compapi_screenshot_post(struct req *rq, struct resp *rs)
{
    struct target t;
    int rc = target_open(rq, "takeScreenshot", &t);
    if (rc)
        return rc;
    json_t *body = NULL;
    struct comp_action a;
    memset(&a, 0, sizeof a);
    if ((rc = body_of(rq, 1, &body)) == 0)
        rc = comp_parse(COMP_SCREENSHOT, body, "", t.width, t.height, &a, &rq->err);
    json_decref(body);
    char *png = NULL;
    size_t len = 0;
    if (rc == 0)
        rc = computer_capture(&t.ct, &a, t.width, t.height, &png, &len, &rq->err);
    comp_action_clear(&a);
    if (rc == 0)
        resp_text(rs, 200, "image/png", png, len);
    rc = target_close(rq, &t, rc);
    rq->no_retry = 0; /* a screenshot changes nothing: retrying is safe */
    return rc;
}

int compapi_position(struct req *rq, struct resp *rs)
{
    struct target t;
    int rc = target_open(rq, "getMousePosition", &t);
    if (rc)
        return rc;
    int x, y;
    if ((rc = computer_pointer(&t.ct, &x, &y, &rq->err)) == 0)
        resp_json(rs, 200, json_pack("{s:i,s:i}", "x", x, "y", y));
    rc = target_close(rq, &t, rc);
    rq->no_retry = 0;
    return rc;
}

int compapi_clip_read(struct req *rq, struct resp *rs)
{
    struct target t;
    int rc = target_open(rq, "readClipboard", &t);
    if (rc)
        return rc;
    char *text = NULL;
    if ((rc = computer_clipboard_get(&t.ct, &text, &rq->err)) == 0)
        resp_json(rs, 200, json_pack("{s:s}", "text", text));
    xfree(text);
    rc = target_close(rq, &t, rc);
    rq->no_retry = 0;
    return rc;
}

static void on_ending(struct session_ctx *sc, const char *reason)
{
    (void)reason;
    computer_forget(sc->rec->id);
}

static const struct session_ext compapi_ext = {.name = "computer", .ending = on_ending};

void compapi_init(struct app *app)
{
    (void)app;
    session_ext_register(&compapi_ext);
}
