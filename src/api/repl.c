/*
 * Handler of POST /browsers/{id}/repl {code, reset?, timeout_sec?}: checks
 * the body (400 naming the field), the session (404, 409 session_ended, 503
 * sandbox_required as the process calls), then runs the execution on this
 * blocking thread (runtime/repl). Not idempotent: 5xx answers say
 * x-should-retry: false. The session's end kills its REPL (a session hook).
 */
#include "api/repl.h"

#include <stdio.h>
#include <string.h>

#include "core/limits.h"
#include "domain/launch_settings.h"
#include "runtime/repl.h"
#include "runtime/sandbox.h"
#include "runtime/sessmgr.h"
#include "session/ext.h"

/* The session's egress proxy ("http://127.0.0.1:PORT" inside its network
 * namespace, written by api/proxies at launch) into out, or "" when the
 * session has none. */
static void egress_of(const char *data, char *out, size_t cap)
{
    out[0] = '\0';
    json_t *d = data ? json_loads(data, 0, NULL) : NULL;
    const char *u = json_string_value(json_object_get(d, "egress_url"));
    if (u && strncmp(u, "http://127.0.0.1:", 17) == 0 && strlen(u) < cap)
        snprintf(out, cap, "%s", u);
    json_decref(d);
}

void repl_egress_url(const char *data, char *out, size_t cap)
{
    egress_of(data, out, cap);
}

/* The body's fields, or 400 naming the first one that is wrong. */
static int parse(struct req *rq, json_t *body, const char **code, int *reset, int *timeout_s)
{
    json_t *c = json_object_get(body, "code"), *r = json_object_get(body, "reset"),
           *t = json_object_get(body, "timeout_sec");
    *reset = 0;
    *timeout_s = LIM_REPL_TIMEOUT_S;
    if (r && !json_is_null(r)) {
        if (!json_is_boolean(r))
            return err_field(&rq->err, "reset", "must be a boolean");
        *reset = json_is_true(r);
    }
    if (c && !json_is_null(c) && !json_is_string(c))
        return err_field(&rq->err, "code", "must be a string");
    *code = c ? json_string_value(c) : NULL;
    if (!*code)
        *code = "";
    if (c && strlen(*code) != json_string_length(c))
        return err_field(&rq->err, "code", "must not contain NUL bytes");
    if (!**code && !*reset)
        return err_field(&rq->err, "code", "is required (empty only with reset: true)");
    if (t && !json_is_null(t)) {
        if (!json_is_integer(t) || json_integer_value(t) < 1 ||
            json_integer_value(t) > LIM_REPL_TIMEOUT_MAX_S)
            return err_field(&rq->err, "timeout_sec", "must be an integer between 1 and %d",
                             LIM_REPL_TIMEOUT_MAX_S);
        *timeout_s = (int)json_integer_value(t);
    }
    return 0;
}

int repl_post(struct req *rq, struct resp *rs)
{
    rq->no_retry = 1;
    json_t *body = NULL;
    struct session_rec rec;
    memset(&rec, 0, sizeof rec);
    struct live *live = NULL;
    struct sandbox *sb = NULL;
    char ws[512];
    const char *code = NULL;
    int reset = 0, timeout_s = 0;
    int rc = req_json_object(rq, 0, &body);
    if (rc == 0)
        rc = parse(rq, body, &code, &reset, &timeout_s);
    if (rc == 0)
        rc = api_live_session(rq, &rec, &live, ws, sizeof ws);
    if (rc == 0) {
        live_touch(live);
        sb = live_sandbox_ref(live);
        if (!sb || !sandbox_root(sb))
            rc = err_set(&rq->err, E_UNAVAIL, "sandbox_required",
                         "needs the session sandbox: docs/sandbox.md");
    }
    json_t *out = NULL;
    if (rc == 0) {
        struct launch_settings ls;
        launch_settings_from_text(rec.data, &ls);
        char egress[64];
        egress_of(rec.data, egress, sizeof egress);
        struct repl_req q = {
            .sb = sb,
            .session_id = rec.id,
            .org_id = rec.org_id,
            .ws = ws,
            .display = ls.headless ? NULL : ":0",
            .egress = egress[0] ? egress : NULL,
            .code = code,
            .reset = reset,
            .timeout_s = timeout_s,
        };
        rc = repl_exec(&q, &out, &rq->err);
    }
    if (rc == 0)
        resp_json(rs, 200, out);
    if (live) {
        live_touch(live);
        sessmgr_put(live);
    }
    sandbox_unref(sb);
    session_rec_clear(&rec);
    json_decref(body);
    return rc;
}

static void on_ending(struct session_ctx *sc, const char *reason)
{
    (void)reason;
    repl_session_end(sc->rec->id);
}

static const struct session_ext repl_ext = {.name = "repl", .ending = on_ending};

/* Registered at load time, as api/process does: the only hook kills the
 * session's REPL when the session ends. */
__attribute__((constructor)) static void repl_register(void)
{
    session_ext_register(&repl_ext);
}
