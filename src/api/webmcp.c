/*
 * Handlers of /browsers/{id}/webmcp/... (docs/webmcp.md). Each call checks
 * its body (400 naming the field), the session (404, 409 session_ended, 503
 * sandbox_required), then runs runtime-js/webmcp-runner.mjs with one request
 * record inside the session's sandbox (started like playwright.execute's
 * runner), on this blocking thread, and answers from the runner's one
 * JSON record (bounded by LIM_PW_OUTPUT_BYTES). Custom tools live in this
 * module's memory, per session, until the session ends (a session hook); a
 * namespace's source is held once (one reference-counted string, however
 * many tools it defines and calls use it), within byte budgets per session,
 * per organization and for the server (LIM_WEBMCP_SOURCE_BYTES_*).
 */
#include "api/webmcp.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "api/repl.h"
#include "core/crypto.h"
#include "core/limits.h"
#include "core/xalloc.h"
#include "runtime/pwexec.h"
#include "runtime/sandbox.h"
#include "runtime/sessmgr.h"
#include "session/ext.h"

/* Custom tools by session id: arrays of {id, kind, namespace, match, tool};
 * their sources by session id, then namespace (one string each, shared by
 * reference: jansson's reference counts are atomic and nothing changes a
 * string in place); the source bytes held, "o:<org>" and "s:<session>" to
 * a count, and held_all for the server; the calls running, "o:<org>" and
 * "s:<session>" to a count; and the sessions that ended while a call of
 * theirs ran (forgotten when their last call ends), whose custom tools a
 * call must not store again after the session's hook forgot them. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static json_t *customs;
static json_t *sources;
static json_t *held;
static json_int_t held_all;
static json_t *running;
static json_t *ended;
/* The source budgets (LIM_WEBMCP_SOURCE_BYTES_* unless lowered). */
static long long budget_session = LIM_WEBMCP_SOURCE_BYTES_PER_SESSION;
static long long budget_org = LIM_WEBMCP_SOURCE_BYTES_PER_ORG;
static long long budget_all = LIM_WEBMCP_SOURCE_BYTES_ALL;

void webmcp_set_source_budget(long long bytes)
{
    budget_all = bytes < budget_all ? bytes : budget_all;
    budget_org = budget_all / 5 < budget_org ? budget_all / 5 : budget_org;
    budget_session = budget_org < budget_session ? budget_org : budget_session;
}

/* ---- running one request in the sandbox ---- */

struct call {
    struct session_rec rec;
    struct live *live;
    struct sandbox *sb;
    char ws[512];
    int counted;
};

/* Starts runtime-js/webmcp-runner.mjs with the request on its stdin, in the
 * session's sandbox like playwright.execute's runner (runtime/pwexec): its
 * answer on descriptor 3, everything bounded by LIM_PW_OUTPUT_BYTES. */
static int start_runner(struct req *rq, struct call *c, const char *args, int timeout_s,
                        struct proc_waiter *w, struct proc **p)
{
    const char *dir = pwexec_dir();
    if (!dir)
        return err_set(&rq->err, E_UNAVAIL, "unavailable",
                       "WebMCP needs runtime-js/ with its packages (run scripts/deps.sh, or set "
                       "BROWSERD_RUNTIME_JS)");
    char url[1024];
    pwexec_local_url(c->ws, url, sizeof url);
    const char *argv[] = {PWEXEC_NODE,
                          "--experimental-websocket",
                          "--no-warnings",
                          SANDBOX_RUNTIME_JS "/webmcp-runner.mjs",
                          url,
                          NULL};
    const char *ro[] = {dir, SANDBOX_RUNTIME_JS, NULL};
    /* The session's egress, for the REPL helpers' httpGet in CDP-backed
     * custom tools (as the REPL's own process has it). */
    char egress[64], http_env[128], https_env[128];
    repl_egress_url(c->rec.data, egress, sizeof egress);
    snprintf(http_env, sizeof http_env, "HTTP_PROXY=%s", egress);
    snprintf(https_env, sizeof https_env, "HTTPS_PROXY=%s", egress);
    const char *env[] = {"NODE_OPTIONS=", egress[0] ? http_env : NULL, https_env, NULL};
    struct proc_spec s = {
        .session_id = c->rec.id,
        .sb = c->sb,
        .sessions = api_app(rq)->sessions,
        .argv = argv,
        .env = env,
        .timeout_ms = (int64_t)timeout_s * 1000,
        .collect = LIM_PW_OUTPUT_BYTES,
        .extra_ro = ro,
        .result_fd = 1,
        .stdin_data = args,
        .stdin_len = strlen(args),
        .on_exit = proc_waiter_exited,
        .ctx = w,
    };
    int rc = proc_start(&s, p, &rq->err);
    if (rc == 0 || rc == E_CONFLICT || rc == E_UNAVAIL || rc == E_LIMIT)
        return rc;
    return err_set(&rq->err, E_INTERNAL, "internal",
                   "the WebMCP runner could not start in the session's sandbox");
}

static int count_add(const char *org, const char *sid, int delta, struct err *e)
{
    char ko[160], ks[160];
    snprintf(ko, sizeof ko, "o:%s", org);
    snprintf(ks, sizeof ks, "s:%s", sid);
    pthread_mutex_lock(&mu);
    if (!running)
        running = json_object();
    json_int_t o = json_integer_value(json_object_get(running, ko));
    json_int_t s = json_integer_value(json_object_get(running, ks));
    if (delta > 0 && (s >= LIM_WEBMCP_RUNNING_PER_SESSION || o >= LIM_WEBMCP_RUNNING_PER_ORG)) {
        pthread_mutex_unlock(&mu);
        e->retry_after = 1;
        return err_set(e, E_LIMIT, "rate_limited",
                       "too many WebMCP calls running at once (%d per session, %d per "
                       "organization)",
                       LIM_WEBMCP_RUNNING_PER_SESSION, LIM_WEBMCP_RUNNING_PER_ORG);
    }
    o += delta;
    s += delta;
    if (o > 0)
        json_object_set_new(running, ko, json_integer(o));
    else
        json_object_del(running, ko);
    if (s > 0)
        json_object_set_new(running, ks, json_integer(s));
    else {
        json_object_del(running, ks);
        if (ended)
            json_object_del(ended, sid);
    }
    pthread_mutex_unlock(&mu);
    return 0;
}

static int call_begin(struct req *rq, struct call *c)
{
    memset(c, 0, sizeof *c);
    int rc = api_live_session(rq, &c->rec, &c->live, c->ws, sizeof c->ws);
    if (rc)
        return rc;
    live_touch(c->live);
    c->sb = live_sandbox_ref(c->live);
    if (!c->sb || !sandbox_root(c->sb))
        return err_set(&rq->err, E_UNAVAIL, "sandbox_required",
                       "needs the session sandbox: docs/sandbox.md");
    return 0;
}

static void call_end(struct call *c)
{
    if (c->counted)
        (void)count_add(c->rec.org_id, c->rec.id, -1, NULL);
    if (c->live) {
        live_touch(c->live);
        sessmgr_put(c->live);
    }
    sandbox_unref(c->sb);
    session_rec_clear(&c->rec);
}

/* Runs req (consumed) in the sandbox; *res is the script's answer record.
 * *timed_out says the runner was killed at its timeout. */
static int run(struct req *rq, struct call *c, json_t *req, int timeout_s, json_t **res,
               int *timed_out)
{
    *res = NULL;
    *timed_out = 0;
    int rc = count_add(c->rec.org_id, c->rec.id, 1, &rq->err);
    if (rc) {
        json_decref(req);
        return rc;
    }
    c->counted = 1;
    char *args = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    if (!args)
        return err_set(&rq->err, E_INTERNAL, "internal", "the WebMCP request could not be encoded");
    struct proc_waiter w;
    proc_waiter_init(&w);
    struct proc *p = NULL;
    rc = start_runner(rq, c, args, timeout_s, &w, &p);
    xfree(args);
    if (rc == 0) {
        proc_waiter_wait(&w);
        struct proc_status st;
        proc_status(p, &st);
        *timed_out = st.timed_out;
        json_t *out = pwexec_result(p, timeout_s);
        json_t *v = json_object_get(out, "result");
        if (json_is_true(json_object_get(out, "success")) && json_is_object(v))
            *res = json_incref(v);
        else if (!st.timed_out)
            rc = err_set(&rq->err, E_INTERNAL, "internal",
                         "the WebMCP runner in the session's sandbox failed (the browser may "
                         "have closed a tab while it was read)");
        json_decref(out);
        proc_put(p);
    }
    proc_waiter_destroy(&w);
    return rc;
}

/* ---- custom tool sources and their byte budgets (under mu) ---- */

static json_int_t held_of(const char *prefix, const char *id)
{
    char k[160];
    snprintf(k, sizeof k, "%s:%s", prefix, id);
    return held ? json_integer_value(json_object_get(held, k)) : 0;
}

static void held_add(const char *org, const char *sid, json_int_t delta)
{
    if (!held)
        held = json_object();
    const char *ids[2][2] = {{"o", org}, {"s", sid}};
    for (int i = 0; i < 2; i++) {
        char k[160];
        snprintf(k, sizeof k, "%s:%s", ids[i][0], ids[i][1]);
        json_int_t n = json_integer_value(json_object_get(held, k)) + delta;
        if (n > 0)
            json_object_set_new(held, k, json_integer(n));
        else
            json_object_del(held, k);
    }
    held_all += delta;
}

/* The session's source of one batch (borrowed), or NULL. A batch's source
 * is held once under its key, "<namespace>/<its first tool's id>", which
 * each of its tools names as "src". */
static json_t *source_of(const char *sid, const char *key)
{
    return sources ? json_object_get(json_object_get(sources, sid), key) : NULL;
}

/* The bytes of the sources namespace ns holds in the session. */
static size_t ns_source_bytes(const char *sid, const char *ns)
{
    json_t *mine = sources ? json_object_get(sources, sid) : NULL, *src;
    const char *key;
    size_t n = strlen(ns), bytes = 0;
    json_object_foreach(mine, key, src)
    {
        if (strncmp(key, ns, n) == 0 && key[n] == '/')
            bytes += json_string_length(src);
    }
    return bytes;
}

/* Whether the session may hold add more bytes of source in place of the
 * old it holds for one namespace: within its own, its organization's and
 * the server's budgets. 429 naming source otherwise. */
static int source_budget(struct err *e, const char *org, const char *sid, size_t old, size_t add)
{
    json_int_t d = (json_int_t)add - (json_int_t)old;
    const char *who = NULL;
    long long cap = 0;
    if (held_of("s", sid) + d > (json_int_t)budget_session)
        who = "this session", cap = budget_session;
    else if (held_of("o", org) + d > (json_int_t)budget_org)
        who = "this organization's sessions", cap = budget_org;
    else if (held_all + d > (json_int_t)budget_all)
        who = "the server", cap = budget_all;
    if (!who)
        return 0;
    e->retry_after = 5;
    return err_set(e, E_LIMIT, "rate_limited",
                   "source: the custom tool sources %s hold would pass %lld bytes (delete custom "
                   "tools, or end sessions, to free them)",
                   who, cap);
}

/* Forgets the session's source of one batch when none of its tools is
 * left (a deleted tool, a replaced namespace), and its bytes. */
static void source_release(const char *org, const char *sid, const char *key)
{
    json_t *a = customs ? json_object_get(customs, sid) : NULL, *t;
    size_t i;
    json_array_foreach(a, i, t)
    {
        if (strcmp(json_string_value(json_object_get(t, "src")), key) == 0)
            return;
    }
    json_t *src = source_of(sid, key);
    if (!src)
        return;
    held_add(org, sid, -(json_int_t)json_string_length(src));
    json_object_del(json_object_get(sources, sid), key);
}

/* The session's custom tools (a copy; new reference). */
static json_t *customs_of(const char *sid)
{
    pthread_mutex_lock(&mu);
    json_t *a = customs ? json_object_get(customs, sid) : NULL;
    json_t *copy = a ? json_deep_copy(a) : json_array();
    pthread_mutex_unlock(&mu);
    return copy;
}

/* A custom tool as the API shows it (new reference). */
static json_t *custom_render(json_t *t)
{
    return json_pack("{s:O, s:O, s:O, s:O, s:O}", "id", json_object_get(t, "id"), "kind",
                     json_object_get(t, "kind"), "namespace", json_object_get(t, "namespace"),
                     "match", json_object_get(t, "match"), "tool", json_object_get(t, "tool"));
}

/* ---- GET .../webmcp/tools ---- */

int webmcp_tools_get(struct req *rq, struct resp *rs)
{
    const char *ex = req_query(rq, "exclude_custom");
    int exclude = 0;
    if (ex && strcmp(ex, "true") == 0)
        exclude = 1;
    else if (ex && strcmp(ex, "false") != 0)
        return err_field(&rq->err, "exclude_custom", "must be true or false");
    struct call c;
    int rc = call_begin(rq, &c);
    json_t *res = NULL;
    int timed_out = 0;
    if (rc == 0) {
        json_t *list = json_array(), *all = customs_of(c.rec.id);
        size_t i;
        json_t *t;
        json_array_foreach(all, i, t) json_array_append_new(
            list,
            json_pack("{s:O, s:O, s:O, s:O, s:O}", "id", json_object_get(t, "id"), "kind",
                      json_object_get(t, "kind"), "namespace", json_object_get(t, "namespace"),
                      "url_patterns", json_object_get(json_object_get(t, "match"), "url_patterns"),
                      "tool", json_object_get(t, "tool")));
        json_decref(all);
        json_t *q = json_pack("{s:s, s:o, s:b, s:i}", "op", "list", "custom", list,
                              "exclude_custom", exclude, "custom_frames", LIM_WEBMCP_CUSTOM_FRAMES);
        rc = run(rq, &c, q, LIM_WEBMCP_LIST_TIMEOUT_S, &res, &timed_out);
    }
    if (rc == 0 && (timed_out || !json_is_array(json_object_get(res, "tools"))))
        rc = err_set(&rq->err, E_INTERNAL, "internal",
                     "the session's pages did not answer within %d s", LIM_WEBMCP_LIST_TIMEOUT_S);
    if (rc == 0)
        resp_json(rs, 200, json_pack("{s:O}", "tools", json_object_get(res, "tools")));
    json_decref(res);
    call_end(&c);
    return rc;
}

/* ---- POST .../webmcp/invoke ---- */

static int parse_invoke(struct req *rq, json_t *body, const char **ref, json_t **input,
                        int *timeout_s)
{
    json_t *r = json_object_get(body, "tool_ref"), *in = json_object_get(body, "input"),
           *t = json_object_get(body, "timeout_sec");
    if (!json_is_string(r) || json_string_length(r) == 0)
        return err_field(&rq->err, "tool_ref", "is required (a string from GET webmcp/tools)");
    if (json_string_length(r) > LIM_WEBMCP_REF_BYTES)
        return err_set(&rq->err, E_NOTFOUND, "not_found", "no such tool_ref");
    *ref = json_string_value(r);
    if (in && !json_is_null(in) && !json_is_object(in))
        return err_field(&rq->err, "input", "must be an object");
    *input = in && json_is_object(in) ? in : NULL;
    if (*input) {
        char *s = json_dumps(*input, JSON_COMPACT);
        size_t n = s ? strlen(s) : 0;
        xfree(s);
        if (n > LIM_WEBMCP_INPUT_BYTES)
            return err_field(&rq->err, "input", "must be at most %u bytes as JSON",
                             LIM_WEBMCP_INPUT_BYTES);
    }
    *timeout_s = LIM_WEBMCP_TIMEOUT_S;
    if (t && !json_is_null(t)) {
        if (!json_is_integer(t) || json_integer_value(t) < 1 ||
            json_integer_value(t) > LIM_WEBMCP_TIMEOUT_MAX_S)
            return err_field(&rq->err, "timeout_sec", "must be an integer between 1 and %d",
                             LIM_WEBMCP_TIMEOUT_MAX_S);
        *timeout_s = (int)json_integer_value(t);
    }
    return 0;
}

/* A custom tool's id in the hosted service's shape, which its MCP server's
 * webmcp tool checks: "ct_", a letter, then 23 of [a-z0-9] (about 124 bits
 * of the random source; bytes past the largest multiple of the alphabet's
 * size are drawn again so that every character is equally likely). */
static void custom_tool_id(char id[32])
{
    static const char alnum[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    memcpy(id, "ct_", 3);
    for (size_t k = 0; k < 24;) {
        unsigned char b;
        size_t n = k == 0 ? 26 : 36;
        crypto_random(&b, 1);
        if (b >= 256 / n * n)
            continue;
        id[3 + k++] = alnum[b % n];
    }
    id[27] = 0;
}

/* The custom tool a "ct_<id>.<...>" tool_ref names (a copy with its
 * batch's source: a reference to the one string held, not a copy), or
 * NULL. */
static json_t *custom_for_ref(const char *sid, const char *ref)
{
    const char *dot = ref ? strchr(ref, '.') : NULL;
    if (!dot || strncmp(ref, "ct_", 3) != 0)
        return NULL;
    json_t *all = customs_of(sid), *hit = NULL, *t;
    char key[LIM_WEBMCP_NAMESPACE_LEN + 40] = "";
    size_t i;
    json_array_foreach(all, i, t)
    {
        const char *id = json_string_value(json_object_get(t, "id"));
        if (id && strlen(id) == (size_t)(dot - ref) && strncmp(id, ref, dot - ref) == 0) {
            hit = json_pack("{s:O, s:O, s:O, s:O, s:O}", "id", json_object_get(t, "id"), "kind",
                            json_object_get(t, "kind"), "namespace",
                            json_object_get(t, "namespace"), "url_patterns",
                            json_object_get(json_object_get(t, "match"), "url_patterns"), "tool",
                            json_object_get(t, "tool"));
            snprintf(key, sizeof key, "%s", json_string_value(json_object_get(t, "src")));
        }
    }
    json_decref(all);
    if (hit) {
        pthread_mutex_lock(&mu);
        json_t *src = source_of(sid, key);
        if (src)
            json_object_set(hit, "source", src);
        pthread_mutex_unlock(&mu);
        if (!src) {
            json_decref(hit);
            hit = NULL;
        }
    }
    return hit;
}

int webmcp_invoke(struct req *rq, struct resp *rs)
{
    rq->no_retry = 1;
    json_t *body = NULL, *input = NULL, *res = NULL;
    const char *ref = ""; /* set by parse_invoke */
    int timeout_s = 0, timed_out = 0;
    struct call c;
    memset(&c, 0, sizeof c);
    int rc = req_json_object(rq, 0, &body);
    if (rc == 0)
        rc = parse_invoke(rq, body, &ref, &input, &timeout_s);
    if (rc == 0)
        rc = call_begin(rq, &c);
    if (rc == 0) {
        json_t *q = json_pack("{s:s, s:s, s:o, s:I}", "op", "invoke", "ref", ref, "input",
                              input ? json_incref(input) : json_object(), "timeout_ms",
                              (json_int_t)timeout_s * 1000);
        json_t *ct = custom_for_ref(c.rec.id, ref);
        if (ct)
            json_object_set_new(q, "custom", ct);
        else if (strncmp(ref, "ct_", 3) == 0)
            rc = err_set(&rq->err, E_NOTFOUND, "not_found",
                         "no such tool_ref (its custom tool was deleted)");
        if (rc == 0)
            rc = run(rq, &c, q, timeout_s + 15, &res, &timed_out);
        else
            json_decref(q);
    }
    if (rc == 0 && (timed_out || json_is_true(json_object_get(res, "outcome_unknown")))) {
        json_t *e = json_pack("{s:s, s:s}", "code", "outcome_unknown", "message",
                              "the tool did not answer within timeout_sec after it was started; "
                              "whether it acted is unknown (not retried)");
        json_t *id = json_object_get(res, "invocation_id");
        if (json_is_string(id))
            json_object_set(e, "invocation_id", id);
        resp_json(rs, 504, e);
    } else if (rc == 0 && json_is_true(json_object_get(res, "not_found"))) {
        rc = err_set(&rq->err, E_NOTFOUND, "not_found",
                     "no such tool_ref (tools die with their document: list them again)");
    } else if (rc == 0 && !json_is_string(json_object_get(res, "status"))) {
        rc = err_set(&rq->err, E_INTERNAL, "internal", "the WebMCP runner gave no status");
    } else if (rc == 0) {
        resp_json(rs, 200, json_incref(res));
    }
    json_decref(res);
    json_decref(body);
    call_end(&c);
    return rc;
}

/* ---- custom tools ---- */

int webmcp_custom_list(struct req *rq, struct resp *rs)
{
    struct call c;
    int rc = call_begin(rq, &c);
    if (rc == 0) {
        json_t *all = customs_of(c.rec.id), *out = json_array(), *t;
        size_t i;
        json_array_foreach(all, i, t) json_array_append_new(out, custom_render(t));
        json_decref(all);
        resp_json(rs, 200, json_pack("{s:o}", "tools", out));
    }
    call_end(&c);
    return rc;
}

static int valid_namespace(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > LIM_WEBMCP_NAMESPACE_LEN)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-' || s[i] == '.'))
            return 0;
    return 1;
}

/* Stores the batch (all or nothing) in namespace ns, its source (a string;
 * a reference is kept) held once for the batch. Without force the batch
 * joins the namespace's tools, and a name the namespace has already is 409;
 * with force it replaces them all. */
static int store_batch(struct req *rq, const char *org, const char *sid, const char *ns, int force,
                       json_t *defs, json_t *source, json_t **out)
{
    pthread_mutex_lock(&mu);
    if (ended && json_object_get(ended, sid)) {
        pthread_mutex_unlock(&mu);
        return err_set(&rq->err, E_CONFLICT, "session_ended", "browser session %s has ended", sid);
    }
    if (!customs)
        customs = json_object();
    json_t *a = json_object_get(customs, sid);
    if (!a) {
        a = json_array();
        json_object_set_new(customs, sid, a);
    }
    size_t keep = 0, i, j;
    const char *taken = NULL;
    json_t *t, *d, *namespaces = json_object();
    json_array_foreach(a, i, t)
    {
        const char *tns = json_string_value(json_object_get(t, "namespace"));
        if (strcmp(tns, ns) != 0 || !force)
            keep++;
        json_object_set_new(namespaces, tns, json_true());
        if (strcmp(tns, ns) == 0 && !force)
            json_array_foreach(defs, j, d)
            {
                json_t *name = json_object_get(json_object_get(d, "tool"), "name");
                if (json_equal(name, json_object_get(json_object_get(t, "tool"), "name")))
                    taken = json_string_value(name);
            }
    }
    json_object_set_new(namespaces, ns, json_true());
    size_t nns = json_object_size(namespaces);
    json_decref(namespaces);
    int rc = 0;
    if (taken)
        rc = err_set(&rq->err, E_CONFLICT, "conflict",
                     "namespace %s has a custom tool named %s already "
                     "(force_overwrite_namespace: true replaces the namespace's tools)",
                     ns, taken);
    else if (nns > LIM_WEBMCP_NAMESPACES)
        rc = err_field(&rq->err, "namespace", "a session may have at most %d namespaces",
                       LIM_WEBMCP_NAMESPACES);
    else if (keep + json_array_size(defs) > LIM_WEBMCP_CUSTOM_TOOLS)
        rc = err_field(&rq->err, "source", "a session may have at most %d custom tools",
                       LIM_WEBMCP_CUSTOM_TOOLS);
    if (rc == 0)
        rc = source_budget(&rq->err, org, sid, force ? ns_source_bytes(sid, ns) : 0,
                           json_string_length(source));
    if (rc == 0) {
        for (i = json_array_size(a); force && i-- > 0;) {
            t = json_array_get(a, i);
            if (strcmp(json_string_value(json_object_get(t, "namespace")), ns) == 0) {
                char key[LIM_WEBMCP_NAMESPACE_LEN + 40];
                snprintf(key, sizeof key, "%s", json_string_value(json_object_get(t, "src")));
                json_array_remove(a, i);
                source_release(org, sid, key);
            }
        }
        if (!sources)
            sources = json_object();
        if (!json_object_get(sources, sid))
            json_object_set_new(sources, sid, json_object());
        char key[LIM_WEBMCP_NAMESPACE_LEN + 40] = "";
        *out = json_array();
        json_array_foreach(defs, i, t)
        {
            char id[32];
            custom_tool_id(id);
            if (i == 0)
                snprintf(key, sizeof key, "%s/%s", ns, id);
            json_t *rec = json_pack("{s:s, s:O, s:s, s:{s:O}, s:O, s:s}", "id", id, "kind",
                                    json_object_get(t, "kind"), "namespace", ns, "match",
                                    "url_patterns", json_object_get(t, "url_patterns"), "tool",
                                    json_object_get(t, "tool"), "src", key);
            json_array_append_new(*out, custom_render(rec));
            json_array_append_new(a, rec);
        }
        json_object_set(json_object_get(sources, sid), key, source);
        held_add(org, sid, (json_int_t)json_string_length(source));
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

int webmcp_custom_post(struct req *rq, struct resp *rs)
{
    json_t *body = NULL, *res = NULL;
    struct call c;
    memset(&c, 0, sizeof c);
    int rc = req_json_object(rq, 0, &body), force = 0, timed_out = 0;
    json_t *ns = json_object_get(body, "namespace"), *src = json_object_get(body, "source"),
           *f = json_object_get(body, "force_overwrite_namespace");
    if (rc == 0 && (!json_is_string(ns) || !valid_namespace(json_string_value(ns))))
        rc = err_field(&rq->err, "namespace", "is required: 1..%d of [A-Za-z0-9_.-]",
                       LIM_WEBMCP_NAMESPACE_LEN);
    if (rc == 0 && (!json_is_string(src) || json_string_length(src) == 0 ||
                    strlen(json_string_value(src)) != json_string_length(src)))
        rc = err_field(&rq->err, "source",
                       "is required: a JavaScript expression giving an array of tool "
                       "definitions (no NUL bytes)");
    if (rc == 0 && json_string_length(src) > LIM_WEBMCP_CUSTOM_SOURCE_BYTES)
        rc = err_field(&rq->err, "source", "must be at most %u bytes",
                       LIM_WEBMCP_CUSTOM_SOURCE_BYTES);
    if (rc == 0 && f && !json_is_null(f) && !json_is_boolean(f))
        rc = err_field(&rq->err, "force_overwrite_namespace", "must be a boolean");
    force = json_is_true(f);
    if (rc == 0)
        rc = call_begin(rq, &c);
    if (rc == 0) {
        /* Checked again when the batch is stored: refused here before the
         * source is sent to the sandbox to be evaluated. */
        pthread_mutex_lock(&mu);
        rc = source_budget(&rq->err, c.rec.org_id, c.rec.id,
                           force ? ns_source_bytes(c.rec.id, json_string_value(ns)) : 0,
                           json_string_length(src));
        pthread_mutex_unlock(&mu);
    }
    if (rc == 0)
        rc = run(rq, &c, json_pack("{s:s, s:O}", "op", "define", "source", src),
                 LIM_WEBMCP_LIST_TIMEOUT_S, &res, &timed_out);
    if (rc == 0 && timed_out)
        rc = err_field(&rq->err, "source", "did not evaluate within %d s",
                       LIM_WEBMCP_LIST_TIMEOUT_S);
    if (rc == 0 && json_is_string(json_object_get(res, "invalid")))
        rc =
            err_field(&rq->err, "source", "%s", json_string_value(json_object_get(res, "invalid")));
    json_t *defs = rc ? NULL : json_object_get(res, "tools");
    if (rc == 0 && !json_is_array(defs))
        rc = err_set(&rq->err, E_INTERNAL, "internal", "the WebMCP runner gave no definitions");
    json_t *out = NULL;
    if (rc == 0)
        rc = store_batch(rq, c.rec.org_id, c.rec.id, json_string_value(ns), force, defs, src, &out);
    if (rc == 0)
        resp_json(rs, 200, json_pack("{s:o}", "tools", out));
    json_decref(res);
    json_decref(body);
    call_end(&c);
    return rc;
}

int webmcp_custom_delete(struct req *rq, struct resp *rs)
{
    struct call c;
    int rc = call_begin(rq, &c), found = 0;
    if (rc == 0) {
        const char *id = rq->nparams > 1 ? rq->params[1] : "";
        pthread_mutex_lock(&mu);
        json_t *a = customs ? json_object_get(customs, c.rec.id) : NULL;
        for (size_t i = a ? json_array_size(a) : 0; i-- > 0;) {
            json_t *t = json_array_get(a, i);
            if (strcmp(json_string_value(json_object_get(t, "id")), id) == 0) {
                char key[LIM_WEBMCP_NAMESPACE_LEN + 40];
                snprintf(key, sizeof key, "%s", json_string_value(json_object_get(t, "src")));
                json_array_remove(a, i);
                source_release(c.rec.org_id, c.rec.id, key);
                found = 1;
            }
        }
        pthread_mutex_unlock(&mu);
        if (!found)
            rc = err_set(&rq->err, E_NOTFOUND, "not_found", "no custom tool with this id");
    }
    if (rc == 0)
        resp_empty(rs, 204);
    call_end(&c);
    return rc;
}

/* ---- the session's end ---- */

static void on_ending(struct session_ctx *sc, const char *reason)
{
    (void)reason;
    pthread_mutex_lock(&mu);
    if (customs)
        json_object_del(customs, sc->rec->id);
    json_t *mine = sources ? json_object_get(sources, sc->rec->id) : NULL, *src;
    const char *ns;
    json_object_foreach(mine, ns, src)
        held_add(sc->rec->org_id, sc->rec->id, -(json_int_t)json_string_length(src));
    if (mine)
        json_object_del(sources, sc->rec->id);
    char ks[160];
    snprintf(ks, sizeof ks, "s:%s", sc->rec->id);
    if (running && json_object_get(running, ks)) {
        if (!ended)
            ended = json_object();
        json_object_set_new(ended, sc->rec->id, json_true());
    }
    pthread_mutex_unlock(&mu);
}

static const struct session_ext webmcp_ext = {.name = "webmcp", .ending = on_ending};

/* Registered at load time, as api/repl does: the only hook forgets the
 * session's custom tools when it ends. */
__attribute__((constructor)) static void webmcp_register(void)
{
    session_ext_register(&webmcp_ext);
}
