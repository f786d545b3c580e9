/* Deployments, apps and invocations: see api/apps.h and docs/apps.md. */
#include "api/apps.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "api/credentials.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/multipart.h"
#include "core/xalloc.h"
#include "domain/app_rules.h"
#include "domain/entitlements.h"
#include "cluster/node.h"
#include "runtime/apprun.h"
#include "runtime/extpack.h"
#include "runtime/pwexec.h"
#include "session/app.h"
#include "session/session.h"

#define KIND_DEP     "deployment"
#define KIND_INV     "invocation"
#define REGION       "aws.us-east-1a"
#define KEY_GRACE_MS 60000 /* an invocation's key outlives its deadline by this much */

/* ---- event logs (the SSE followers' source) ---- */

struct sub;

struct evlog {
    char id[STORE_ID];
    char **ev; /* "data: {...}\n\n" frames */
    size_t n;
    int ended;
    struct sub *subs;
    struct evlog *next;
};

struct sub {
    struct evlog *log;
    size_t pos;
    size_t off; /* into ev[pos] */
    struct http_stream *hs;
    struct sub *next;
};

static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static struct evlog *logs;
static size_t nlogs;

/* The log of id, made when absent (under ev_mu). Ended logs without
 * followers past LIM_APP_EVENT_LOGS are dropped, oldest first. */
static struct evlog *log_of(const char *id, int make)
{
    for (struct evlog *l = logs; l; l = l->next)
        if (strcmp(l->id, id) == 0)
            return l;
    if (!make)
        return NULL;
    struct evlog *l = xcalloc(1, sizeof *l);
    snprintf(l->id, sizeof l->id, "%s", id);
    l->next = logs;
    logs = l;
    nlogs++;
    if (nlogs > LIM_APP_EVENT_LOGS) {
        struct evlog **pp = &logs, **drop = NULL;
        for (; *pp; pp = &(*pp)->next)
            if ((*pp)->ended && !(*pp)->subs)
                drop = pp;
        if (drop) {
            struct evlog *d = *drop;
            *drop = d->next;
            for (size_t i = 0; i < d->n; i++)
                xfree(d->ev[i]);
            xfree(d->ev);
            xfree(d);
            nlogs--;
        }
    }
    return l;
}

/* Appends one event (stolen) to id's log; end marks the log complete. */
static void ev_push(const char *id, json_t *ev, int end)
{
    char t[40];
    if (ev && !json_object_get(ev, "timestamp"))
        json_object_set_new(ev, "timestamp",
                            json_string(clock_fmt_rfc3339(clock_now_ms(), t, sizeof t)));
    char *text = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
    json_decref(ev);
    pthread_mutex_lock(&ev_mu);
    struct evlog *l = log_of(id, 1);
    if (text && l->n < LIM_APP_EVENTS) {
        l->ev = xrealloc(l->ev, (l->n + 1) * sizeof *l->ev);
        l->ev[l->n++] = xasprintf("data: %s\n\n", text);
    }
    if (end)
        l->ended = 1;
    for (struct sub *s = l->subs; s; s = s->next)
        if (s->hs)
            http_stream_wake(s->hs);
    pthread_mutex_unlock(&ev_mu);
    xfree(text);
}

static long sub_read(void *ctx, char *buf, size_t cap)
{
    struct sub *s = ctx;
    pthread_mutex_lock(&ev_mu);
    long got = 0;
    struct evlog *l = s->log;
    while (s->pos < l->n && (size_t)got < cap) {
        const char *f = l->ev[s->pos] + s->off;
        size_t n = strlen(f), take = n < cap - (size_t)got ? n : cap - (size_t)got;
        memcpy(buf + got, f, take);
        got += (long)take;
        s->off += take;
        if (take == n) {
            s->pos++;
            s->off = 0;
        }
    }
    if (got == 0 && l->ended)
        got = -1;
    pthread_mutex_unlock(&ev_mu);
    return got;
}

static void sub_free(void *ctx)
{
    struct sub *s = ctx;
    pthread_mutex_lock(&ev_mu);
    for (struct sub **pp = &s->log->subs; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    pthread_mutex_unlock(&ev_mu);
    xfree(s);
}

/* Streams id's log; a record this process has no log of (made before a
 * restart) gets one state event made of its stored record, and ends. */
static void follow(struct resp *rs, const char *id, json_t *state_event)
{
    pthread_mutex_lock(&ev_mu);
    int known = log_of(id, 0) != NULL;
    pthread_mutex_unlock(&ev_mu);
    if (!known)
        ev_push(id, state_event, 1);
    else
        json_decref(state_event);
    struct sub *s = xcalloc(1, sizeof *s);
    pthread_mutex_lock(&ev_mu);
    s->log = log_of(id, 1);
    s->next = s->log->subs;
    s->log->subs = s;
    pthread_mutex_unlock(&ev_mu);
    struct http_stream *hs = NULL;
    resp_stream(rs, 200, "text/event-stream", sub_read, sub_free, s, &hs);
    pthread_mutex_lock(&ev_mu);
    s->hs = hs;
    pthread_mutex_unlock(&ev_mu);
    resp_header(rs, "Cache-Control", "no-cache");
}

/* A line of a run's log with the runner's host folder (runtime-js/, in the
 * runner's own stack frames) shown as /runtime: a tenant never sees a host
 * path. Owned. */
static char *scrub_line(const char *p, size_t n)
{
    const char *dir = pwexec_dir();
    size_t dl = dir ? strlen(dir) : 0;
    char *out = xmalloc(n + 1), *o = out;
    for (size_t i = 0; i < n;) {
        if (dl && n - i >= dl && memcmp(p + i, dir, dl) == 0 && dl >= 8) {
            memcpy(o, "/runtime", 8);
            o += 8;
            i += dl;
        } else {
            *o++ = p[i++];
        }
    }
    *o = '\0';
    return out;
}

/* Log events of a run's output, one per line (at most LIM_APP_EVENTS). */
static void push_log_lines(const char *id, const char *log)
{
    const char *p = log;
    int lines = 0;
    while (p && *p && lines < (int)LIM_APP_EVENTS) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        char *line = scrub_line(p, n);
        ev_push(id, json_pack("{s:s,s:s}", "event", "log", "message", line), 0);
        xfree(line);
        lines++;
        p = nl ? nl + 1 : NULL;
    }
}

/* ---- running invocations ---- */

struct inv_live {
    char id[STORE_ID];
    char org_id[STORE_ID];
    char project_id[STORE_ID];
    char app_name[STORE_NAME];
    char sessions[LIM_APP_INVOCATION_BROWSERS][STORE_ID];
    int nsess;
    int ended;          /* its run is over: browsers attached now end at once */
    char final[16];     /* a status PATCHed by the action, "" while none */
    char *final_output; /* with it (owned), may be NULL */
    struct inv_live *next;
};

static pthread_mutex_t inv_mu = PTHREAD_MUTEX_INITIALIZER;
static struct inv_live *live;

static struct inv_live *live_find(const char *id)
{
    for (struct inv_live *l = live; l; l = l->next)
        if (strcmp(l->id, id) == 0)
            return l;
    return NULL;
}

/* Counts the org's, the project's and the app's invocations in flight,
 * under inv_mu. */
static void live_counts(const struct appobj_rec *r, int64_t *org_n, int64_t *proj_n, int64_t *app_n)
{
    *org_n = *proj_n = *app_n = 0;
    for (struct inv_live *l = live; l; l = l->next) {
        if (l->ended || strcmp(l->org_id, r->org_id) != 0)
            continue;
        (*org_n)++;
        if (strcmp(l->project_id, r->project_id) == 0) {
            (*proj_n)++;
            if (strcmp(l->app_name, r->app_name) == 0)
                (*app_n)++;
        }
    }
}

int apps_invocation_check(const char *org_id, const char *project_id, const char *id, struct err *e)
{
    pthread_mutex_lock(&inv_mu);
    struct inv_live *l = live_find(id);
    int rc = 0;
    if (!l || l->ended || strcmp(l->org_id, org_id) != 0 || strcmp(l->project_id, project_id) != 0)
        rc = err_field(e, "invocation_id", "is not a running invocation of this project");
    else if (l->nsess >= LIM_APP_INVOCATION_BROWSERS) {
        rc = err_set(e, E_LIMIT, "rate_limited", "invocation %s already holds %d browsers", id,
                     LIM_APP_INVOCATION_BROWSERS);
        e->retry_after = 5;
    }
    pthread_mutex_unlock(&inv_mu);
    return rc;
}

void apps_invocation_attach(struct app *app, const char *id, const char *session_id)
{
    pthread_mutex_lock(&inv_mu);
    struct inv_live *l = live_find(id);
    int end_now = !l || l->ended || l->nsess >= LIM_APP_INVOCATION_BROWSERS;
    if (!end_now)
        snprintf(l->sessions[l->nsess++], STORE_ID, "%s", session_id);
    pthread_mutex_unlock(&inv_mu);
    if (end_now)
        (void)sess_end(app, session_id, "invocation ended");
}

/* Ends every browser of invocation id (they stay listed until they end). */
static void end_browsers(struct app *app, const char *id, int forget)
{
    char ids[LIM_APP_INVOCATION_BROWSERS][STORE_ID];
    int n = 0;
    pthread_mutex_lock(&inv_mu);
    struct inv_live *l = live_find(id);
    if (l) {
        n = l->nsess;
        memcpy(ids, l->sessions, sizeof ids);
        if (forget)
            l->nsess = 0;
    }
    pthread_mutex_unlock(&inv_mu);
    for (int i = 0; i < n; i++)
        (void)sess_end(app, ids[i], "invocation ended");
}

/* ---- records ---- */

static const char *fmt_time(int64_t ms, char *buf, size_t cap)
{
    return clock_fmt_rfc3339(ms, buf, cap);
}

/* The client's view of a stored record: its data without the server's own
 * "internal" member, env var values of secret-looking names redacted. */
static json_t *render(const struct appobj_rec *r)
{
    json_t *d = json_loads(r->data, 0, NULL);
    if (!json_is_object(d)) {
        json_decref(d);
        d = json_object();
    }
    json_object_del(d, "internal");
    json_t *env = json_object_get(d, "env_vars");
    if (json_is_object(env)) {
        json_t *red = app_rules_redact_env(env);
        json_object_set_new(d, "env_vars", red);
    }
    return d;
}

static json_t *internal_of(json_t *d)
{
    json_t *in = json_object_get(d, "internal");
    if (!json_is_object(in)) {
        in = json_object();
        json_object_set_new(d, "internal", in);
    }
    return in;
}

/* Names the node that runs the record (internal.node_id: "local" on one
 * server), so that its records can be ended when it dies (apps_end_orphans). */
static void mark_node(struct app *app, json_t *d)
{
    char nid[STORE_ID];
    node_id(app->node, nid);
    json_object_set_new(internal_of(d), "node_id", json_string(nid));
}

static int put_rec(struct app *app, struct appobj_rec *r, json_t *d)
{
    char t[40];
    r->updated_at = clock_now_ms();
    if (strcmp(r->kind, KIND_DEP) == 0)
        json_object_set_new(d, "updated_at", json_string(fmt_time(r->updated_at, t, sizeof t)));
    snprintf(r->status, sizeof r->status, "%s",
             jsonx_str(d, "status") ? jsonx_str(d, "status") : "");
    xfree(r->data);
    char *text = json_dumps(d, JSON_COMPACT);
    r->data = xstrdup(text);
    xfree(text);
    return store_appobj_put(app->store, r);
}

static void zip_path(const struct app *app, const char *id, char *out, size_t cap)
{
    snprintf(out, cap, "%s/apps/%s.zip", app->cfg.data_dir, id);
}

static void run_dir(const struct app *app, const char *id, char *out, size_t cap)
{
    snprintf(out, cap, "%s/apps/run-%s", app->cfg.data_dir, id);
}

static json_t *dep_state_event(const struct appobj_rec *r)
{
    return json_pack("{s:s,s:o}", "event", "deployment_state", "deployment", render(r));
}

static json_t *inv_state_event(const struct appobj_rec *r)
{
    return json_pack("{s:s,s:o}", "event", "invocation_state", "invocation", render(r));
}

/* Sets a deployment's status (and reason) and tells its followers. */
static int dep_status(struct app *app, struct appobj_rec *r, json_t *d, const char *status,
                      const char *reason, int end)
{
    json_object_set_new(d, "status", json_string(status));
    if (reason)
        json_object_set_new(d, "status_reason", json_string(reason));
    int rc = put_rec(app, r, d);
    ev_push(r->id, dep_state_event(r), end);
    return rc;
}

/* ---- running the app ---- */

/* A fresh API key of the project, valid until expires_at (ms), for a run's
 * KERNEL_API_KEY; revoked by key_revoke. */
static int key_issue(struct app *app, const struct appobj_rec *r, int64_t expires_at,
                     char plain[CRYPTO_KEY_LEN + 1], struct apikey_rec *k)
{
    crypto_new_api_key(plain);
    char name[STORE_NAME];
    snprintf(name, sizeof name, "%s %s", r->kind, r->id);
    return tenancy_key_store(app->store, r->org_id, r->project_id, name, plain, expires_at,
                             LIM_API_KEYS_PER_ORG, k);
}

static void key_revoke(struct app *app, struct apikey_rec *k)
{
    k->deleted_at = clock_now_ms();
    if (store_key_update(app->store, k) != 0)
        log_error("apps: the run key %s could not be revoked (it expires on its own)", k->id);
}

/* The environment of a run: the deployment's env_vars, then the server's
 * address and the run's key (NULL-terminated, owned: free with env_free). */
static char **env_build(const struct app *app, json_t *env_vars, const char *key)
{
    size_t n = json_object_size(env_vars), i = 0;
    char **env = xcalloc(n + 3, sizeof *env);
    const char *k;
    json_t *v;
    json_object_foreach(env_vars, k, v)
    {
        if (json_is_string(v) && i < n)
            env[i++] = xasprintf("%s=%s", k, json_string_value(v));
    }
    int port = __atomic_load_n(&app->cfg.listen_port, __ATOMIC_RELAXED);
    env[i++] = xasprintf("KERNEL_BASE_URL=http://127.0.0.1:%d", port);
    env[i++] = xasprintf("KERNEL_API_KEY=%s", key);
    env[i] = NULL;
    return env;
}

static void env_free(char **env)
{
    for (size_t i = 0; env && env[i]; i++)
        xfree(env[i]);
    xfree(env);
}

/* What one run needs while it goes (owned here, freed by run_release):
 * its key (revoked at the end), its environment, its instruction, paths. */
struct run_prep {
    struct apprun_spec spec;
    struct apikey_rec key;
    int have_key;
    char **env;
    char *input;
    char zip[1200], root[1200];
};

/* Prepares a run of record r (a deployment's discovery or an invocation)
 * of deployment dep_id with input: a key of r's project valid for
 * timeout_ms and a little more, the environment, the spec. */
static int run_prepare(struct app *app, const struct appobj_rec *r, const char *dep_id,
                       json_t *env_vars, json_t *input, int64_t timeout_ms, long long *unpacked,
                       struct run_prep *p, struct err *e)
{
    char plain[CRYPTO_KEY_LEN + 1];
    memset(p, 0, sizeof *p);
    int rc = key_issue(app, r, clock_now_ms() + timeout_ms + KEY_GRACE_MS, plain, &p->key);
    if (rc == E_LIMIT)
        return api_over_org_cap(e, "live API keys (a run needs one of its own)",
                                LIM_API_KEYS_PER_ORG, LIM_API_KEYS_PER_ORG,
                                LIM_RECORDS_RETRY_AFTER_S);
    if (rc)
        return err_set(e, E_INTERNAL, "internal", "apps: the run's API key could not be stored");
    p->have_key = 1;
    p->env = env_build(app, env_vars, plain);
    zip_path(app, dep_id, p->zip, sizeof p->zip);
    run_dir(app, r->id, p->root, sizeof p->root);
    p->input = json_dumps(input, JSON_COMPACT);
    p->spec = (struct apprun_spec){
        .name = r->id,
        .root_dir = p->root,
        .org_id = r->org_id,
        .zip_path = p->zip,
        .input = p->input,
        .env = (const char *const *)p->env,
        .api_port = __atomic_load_n(&app->cfg.listen_port, __ATOMIC_RELAXED),
        .timeout_ms = timeout_ms,
        .unpacked_bytes = unpacked,
        .npm_registry = app->cfg.npm_registry,
    };
    return 0;
}

/* Revokes the run's key and frees what run_prepare made. */
static void run_release(struct app *app, struct run_prep *p)
{
    if (p->have_key)
        key_revoke(app, &p->key);
    p->have_key = 0;
    xfree(p->input);
    env_free(p->env);
    p->input = NULL;
    p->env = NULL;
}

/* The runner's answer (NULL when there is none or it was cut). */
static json_t *run_answer(int rc, const struct apprun_result *ar)
{
    if (rc == 0 && ar->result && *ar->result && !ar->result_truncated)
        return json_loads(ar->result, 0, NULL);
    return NULL;
}

/* Runs the runner once, in this thread (see run_prepare). */
static int run(struct app *app, const struct appobj_rec *r, const char *dep_id, json_t *env_vars,
               json_t *input, int64_t timeout_ms, long long *unpacked, json_t **result,
               struct apprun_result *ar, struct err *e)
{
    struct run_prep p;
    *result = NULL;
    memset(ar, 0, sizeof *ar);
    int rc = run_prepare(app, r, dep_id, env_vars, input, timeout_ms, unpacked, &p, e);
    if (rc == 0)
        rc = apprun_run(&p.spec, ar, e);
    run_release(app, &p);
    *result = run_answer(rc, ar);
    return rc;
}

/* ---- deployments ---- */

static void dep_files_remove(struct app *app, const char *id)
{
    char path[1200];
    zip_path(app, id, path, sizeof path);
    (void)unlink(path);
}

static int write_zip(const char *path, const char *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int er = w < 0 ? errno : EIO;
            close(fd);
            unlink(path);
            return -er;
        }
        off += (size_t)w;
    }
    if (close(fd) != 0) {
        unlink(path);
        return -EIO;
    }
    return 0;
}

/* Serializes a version's conflict check with its going to running. */
static pthread_mutex_t dep_mu = PTHREAD_MUTEX_INITIALIZER;

/* Parsed multipart fields of POST /deployments. */
struct dep_form {
    const struct mp_part *file;
    char entry[1025];
    char version[STORE_NAME];
    int force;
    json_t *env;
};

static int dep_form_parse(struct req *rq, const struct mp_form *f, struct dep_form *df)
{
    struct err *e = &rq->err;
    int rc = 0;
    snprintf(df->version, sizeof df->version, "latest");
    df->env = json_object();
    int have_entry = 0;
    for (size_t i = 0; i < f->n; i++) {
        const struct mp_part *p = &f->parts[i];
        char val[1100];
        snprintf(val, sizeof val, "%.*s", (int)(p->len < 1099 ? p->len : 1099), p->data);
        if (strcmp(p->name, "file") == 0 && !df->file) {
            df->file = p;
        } else if (strcmp(p->name, "entrypoint_rel_path") == 0) {
            char why[200];
            if (p->len > 1024 || extpack_path_check(val, why, sizeof why) != 0)
                rc = err_field(e, "entrypoint_rel_path", "must be a relative path in the zip (%s)",
                               p->len > 1024 ? "at most 1024 bytes" : why);
            else if (app_rules_entrypoint_runtime(val) == NULL)
                rc = err_field(e, "entrypoint_rel_path",
                               "must be a Node entrypoint (.js, .mjs or .cjs): this server runs "
                               "Node apps only");
            snprintf(df->entry, sizeof df->entry, "%.1024s", val);
            have_entry = 1;
        } else if (strcmp(p->name, "version") == 0) {
            if (!app_rules_version_ok(p->data, p->len))
                rc = err_field(e, "version", "must match ^[A-Za-z0-9._-]{1,64}$");
            else
                snprintf(df->version, sizeof df->version, "%.64s", val);
        } else if (strcmp(p->name, "force") == 0) {
            if (strcmp(val, "true") == 0)
                df->force = 1;
            else if (strcmp(val, "false") != 0)
                rc = err_field(e, "force", "must be true or false");
        } else if (strcmp(p->name, "region") == 0) {
            if (strcmp(val, REGION) != 0)
                rc = err_field(e, "region", "must be %s", REGION);
        } else if (strncmp(p->name, "env_vars[", 9) == 0) {
            size_t nl = strlen(p->name);
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)(nl > 10 ? nl - 10 : 0), p->name + 9);
            if (p->name[nl - 1] != ']' || !app_rules_env_name_ok(name))
                rc = err_field(e, p->name,
                               "must name an environment variable ([A-Za-z_][A-Za-z0-9_]*, "
                               "not KERNEL_API_KEY or KERNEL_BASE_URL)");
            else if (p->len > LIM_APP_ENV_VALUE_BYTES || memchr(p->data, '\0', p->len))
                rc = err_field(e, p->name, "must be text of at most %u bytes",
                               LIM_APP_ENV_VALUE_BYTES);
            else if (json_object_size(df->env) >= LIM_APP_ENV_VARS)
                rc = err_field(e, "env_vars", "at most %d variables", LIM_APP_ENV_VARS);
            else
                json_object_set_new(df->env, name, json_stringn(p->data, p->len));
        } else if (strcmp(p->name, "source") == 0 || strncmp(p->name, "source[", 7) == 0) {
            rc = err_field(e, "source",
                           "is not supported by this server: upload the app as a zip (file)");
        } else {
            rc = err_field(e, p->name,
                           "is not a field of a deployment (file, entrypoint_rel_path, env_vars, "
                           "version, force, region)");
        }
    }
    if (rc)
        return rc;
    if (!have_entry)
        return err_field(e, "entrypoint_rel_path", "is required (the app's entrypoint in the zip)");
    if (!df->file)
        return err_field(e, "file", "is required (the app's zip)");
    if (df->file->len > LIM_APP_ZIP_BYTES)
        return err_field(e, "file", "is larger than %u bytes", LIM_APP_ZIP_BYTES);
    if (df->file->len < 4 || memcmp(df->file->data, "PK", 2) != 0)
        return err_field(e, "file", "is not a zip archive");
    return 0;
}

static int disk_left(struct req *rq, int64_t want)
{
    int64_t used = 0;
    if (store_appobj_bytes(api_app(rq)->store, api_auth(rq)->org.id, KIND_DEP, &used) != 0)
        return err_set(&rq->err, E_INTERNAL, "internal", "deployments could not be counted");
    if (used + want > LIM_APP_ORG_DISK_BYTES) {
        rq->err.retry_after = 60;
        return err_set(&rq->err, E_LIMIT, "rate_limited",
                       "the organization's deployments would take %lld bytes of disk, past its "
                       "quota of %lld bytes: delete a deployment first",
                       (long long)(used + want), (long long)LIM_APP_ORG_DISK_BYTES);
    }
    return 0;
}

int deployments_create(struct req *rq, struct resp *rs)
{
    rq->no_retry = 1;
    struct app *app = api_app(rq);
    struct auth *a = api_auth(rq);
    struct mp_form f = {0};
    int rc = multipart_parse(req_header(rq, "Content-Type"), rq->body, rq->body_len, &f, &rq->err);
    if (rc)
        return rc;
    struct dep_form df = {0};
    if ((rc = dep_form_parse(rq, &f, &df)) != 0 || (rc = disk_left(rq, (int64_t)df.file->len))) {
        json_decref(df.env);
        multipart_free(&f);
        return rc;
    }
    struct appobj_rec r;
    memset(&r, 0, sizeof r);
    crypto_new_id(r.id);
    snprintf(r.org_id, sizeof r.org_id, "%s", a->org.id);
    snprintf(r.project_id, sizeof r.project_id, "%s", a->project.id);
    snprintf(r.kind, sizeof r.kind, KIND_DEP);
    snprintf(r.version, sizeof r.version, "%s", df.version);
    r.created_at = clock_now_ms();
    r.bytes = (int64_t)df.file->len;
    char path[1200], t[40], sum[65];
    snprintf(path, sizeof path, "%s/apps", app->cfg.data_dir);
    (void)mkdir(path, 0700);
    zip_path(app, r.id, path, sizeof path);
    crypto_sha256_hex(df.file->data, df.file->len, sum);
    int w = write_zip(path, df.file->data, df.file->len);
    multipart_free(&f);
    if (w) {
        json_decref(df.env);
        return err_set(&rq->err, E_INTERNAL, "internal", "the app's zip could not be stored (%s)",
                       strerror(-w));
    }
    json_t *d = json_pack("{s:s,s:s,s:s,s:s,s:s,s:O,s:s,s:s}", "id", r.id, "created_at",
                          fmt_time(r.created_at, t, sizeof t), "region", REGION, "status", "queued",
                          "entrypoint_rel_path", df.entry, "env_vars", df.env, "source_type",
                          "file", "source_checksum", sum);
    json_object_set_new(internal_of(d), "version", json_string(df.version));
    mark_node(app, d);
    if (dep_status(app, &r, d, "queued", NULL, 0) != 0) {
        dep_files_remove(app, r.id);
        json_decref(d);
        json_decref(df.env);
        appobj_rec_clear(&r);
        return err_set(&rq->err, E_INTERNAL, "internal", "the deployment could not be stored");
    }
    (void)dep_status(app, &r, d, "in_progress", NULL, 0);
    ev_push(r.id, json_pack("{s:s,s:s}", "event", "log", "message", "loading the entrypoint"), 0);
    json_t *input =
        json_pack("{s:s,s:s,s:s,s:I}", "mode", "discover", "entrypoint", df.entry, "npm_registry",
                  app->cfg.npm_registry, "npm_lock_max", (json_int_t)LIM_APP_NPM_LOCK_BYTES);
    json_t *res = NULL;
    struct apprun_result ar;
    long long unpacked = 0;
    struct err re;
    err_init(&re);
    rc = run(app, &r, r.id, df.env, input, LIM_APP_DISCOVER_TIMEOUT_S * 1000LL, &unpacked, &res,
             &ar, &re);
    json_decref(input);
    push_log_lines(r.id, ar.log);
    /* What failed, for the deployment's status_reason (no host path). */
    char reason[ERR_MSG_MAX] = "";
    json_t *app0 = json_array_get(json_object_get(res, "apps"), 0);
    if (rc == E_LIMIT || rc == E_UNAVAIL) {
        /* The server's or the org's share: a 429/503 of the request. */
        dep_files_remove(app, r.id);
        (void)store_appobj_delete(app->store, r.org_id, r.project_id, KIND_DEP, r.id);
        ev_push(r.id, NULL, 1);
        rq->err = re;
        rc = re.rc;
        goto out;
    }
    if (rc)
        snprintf(reason, sizeof reason, "%s", re.message);
    else if (ar.timed_out)
        snprintf(reason, sizeof reason, "loading the entrypoint took longer than %d s",
                 LIM_APP_DISCOVER_TIMEOUT_S);
    else if (!res)
        snprintf(reason, sizeof reason,
                 "loading the entrypoint ended without an answer (exit status %d): see the "
                 "build log",
                 ar.exit_code);
    else if (!json_is_true(json_object_get(res, "ok")))
        snprintf(reason, sizeof reason, "%s",
                 jsonx_str(res, "error") ? jsonx_str(res, "error") : "loading the app failed");
    else if (!jsonx_str(app0, "name"))
        snprintf(reason, sizeof reason,
                 "the entrypoint declares no app (kernel.app(name).action(...))");
    else if (strlen(jsonx_str(app0, "name")) >= STORE_NAME)
        snprintf(reason, sizeof reason, "the app's name is longer than %d bytes", STORE_NAME - 1);
    r.bytes = (int64_t)r.bytes + unpacked;
    if (reason[0]) {
        r.bytes = 0;
        dep_files_remove(app, r.id);
        (void)dep_status(app, &r, d, "failed", reason, 1);
        rc = 0;
        resp_json(rs, 200, render(&r));
        goto out;
    }
    snprintf(r.app_name, sizeof r.app_name, "%s", jsonx_str(app0, "name"));
    json_t *actions = json_array();
    json_t *act;
    size_t i;
    json_array_foreach(json_object_get(app0, "actions"), i, act)
    {
        if (jsonx_str(act, "name"))
            json_array_append_new(actions, json_pack("{s:s}", "name", jsonx_str(act, "name")));
    }
    json_object_set_new(internal_of(d), "app_name", json_string(r.app_name));
    json_object_set_new(internal_of(d), "actions", actions);
    pthread_mutex_lock(&dep_mu);
    struct page pg = {.limit = 100};
    struct appobj_rec *rows = NULL;
    size_t n = 0;
    rc = store_appobj_list(app->store, r.org_id, r.project_id, KIND_DEP, r.app_name, r.version,
                           "running", NULL, NULL, &pg, &rows, &n);
    if (rc == 0 && n > 0 && !df.force) {
        rc = err_set(&rq->err, E_CONFLICT, "conflict",
                     "version %s of app %s is deployed (deployment %s): pass force to replace it",
                     r.version, r.app_name, rows[0].id);
    } else if (rc == 0) {
        for (size_t k = 0; k < n; k++) {
            json_t *od = json_loads(rows[k].data, 0, NULL);
            if (json_is_object(od)) {
                rows[k].bytes = 0;
                dep_files_remove(app, rows[k].id);
                (void)dep_status(app, &rows[k], od, "stopped", "replaced by a forced deployment",
                                 1);
            }
            json_decref(od);
        }
        rc = disk_left(rq, r.bytes);
        if (rc == 0)
            rc = dep_status(app, &r, d, "running", NULL, 0);
    }
    pthread_mutex_unlock(&dep_mu);
    for (size_t k = 0; k < n; k++)
        appobj_rec_clear(&rows[k]);
    xfree(rows);
    if (rc) {
        /* Refused (409, 429): the upload leaves nothing behind. */
        dep_files_remove(app, r.id);
        (void)store_appobj_delete(app->store, r.org_id, r.project_id, KIND_DEP, r.id);
        ev_push(r.id, NULL, 1);
        goto out;
    }
    ev_push(r.id,
            json_pack("{s:s,s:s,s:s,s:s,s:s,s:O,s:o}", "event", "app_version_summary", "id", r.id,
                      "app_name", r.app_name, "version", r.version, "region", REGION, "actions",
                      json_object_get(internal_of(d), "actions"), "env_vars",
                      app_rules_redact_env(df.env)),
            1);
    log_info("deployment %s: app %s version %s running", r.id, r.app_name, r.version);
    resp_json(rs, 200, render(&r));
out:
    json_decref(res);
    apprun_result_clear(&ar);
    json_decref(d);
    json_decref(df.env);
    appobj_rec_clear(&r);
    return rc;
}

static int load(struct req *rq, const char *kind, struct appobj_rec *r)
{
    struct auth *a = api_auth(rq);
    memset(r, 0, sizeof *r);
    int rc = store_appobj_get(api_app(rq)->store, a->org.id, a->project.id, kind, rq->params[0], r);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "%s %s not found", kind, rq->params[0]);
    if (rc)
        return err_set(&rq->err, E_INTERNAL, "internal", "the %s could not be read", kind);
    return 0;
}

static int list(struct req *rq, struct resp *rs, const char *kind, const char *app_name,
                const char *version, const char *status, const char *match1, const char *match2,
                int as_app)
{
    struct page pg = {0};
    int rc = req_page(rq, &pg.limit, &pg.offset);
    if (rc)
        return rc;
    struct auth *a = api_auth(rq);
    struct appobj_rec *rows = NULL;
    size_t n = 0;
    if (store_appobj_list(api_app(rq)->store, a->org.id, a->project.id, kind, app_name, version,
                          status, match1, match2, &pg, &rows, &n) != 0)
        return err_set(&rq->err, E_INTERNAL, "internal", "the %ss could not be listed", kind);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *v = render(&rows[i]);
        if (as_app) {
            json_t *d = json_loads(rows[i].data, 0, NULL);
            json_t *in = json_object_get(d, "internal");
            json_t *o = json_pack(
                "{s:s,s:s,s:s,s:s,s:s,s:O,s:O}", "id", rows[i].id, "app_name", rows[i].app_name,
                "version", rows[i].version, "deployment", rows[i].id, "region", REGION, "actions",
                json_object_get(in, "actions"), "env_vars", json_object_get(v, "env_vars"));
            json_decref(d);
            json_decref(v);
            v = o;
        }
        json_array_append_new(arr, v);
        appobj_rec_clear(&rows[i]);
    }
    xfree(rows);
    resp_json(rs, 200, arr);
    resp_page(rs, pg.offset, n, pg.has_more);
    return 0;
}

int deployments_list(struct req *rq, struct resp *rs)
{
    return list(rq, rs, KIND_DEP, req_query(rq, "app_name"), req_query(rq, "app_version"), NULL,
                NULL, NULL, 0);
}

int deployments_get(struct req *rq, struct resp *rs)
{
    struct appobj_rec r;
    int rc = load(rq, KIND_DEP, &r);
    if (rc)
        return rc;
    resp_json(rs, 200, render(&r));
    appobj_rec_clear(&r);
    return 0;
}

int deployments_delete(struct req *rq, struct resp *rs)
{
    struct app *app = api_app(rq);
    struct appobj_rec r;
    int rc = load(rq, KIND_DEP, &r);
    if (rc)
        return rc;
    if (strcmp(r.status, "running") == 0 || strcmp(r.status, "queued") == 0 ||
        strcmp(r.status, "in_progress") == 0) {
        json_t *d = json_loads(r.data, 0, NULL);
        r.bytes = 0;
        dep_files_remove(app, r.id);
        if (json_is_object(d))
            rc = dep_status(app, &r, d, "stopped", "deleted", 1);
        json_decref(d);
    }
    appobj_rec_clear(&r);
    if (rc)
        return err_set(&rq->err, E_INTERNAL, "internal", "the deployment could not be stopped");
    resp_empty(rs, 204);
    return 0;
}

int deployments_events(struct req *rq, struct resp *rs)
{
    struct appobj_rec r;
    int rc = load(rq, KIND_DEP, &r);
    if (rc)
        return rc;
    follow(rs, r.id, dep_state_event(&r));
    appobj_rec_clear(&r);
    return 0;
}

int apps_list(struct req *rq, struct resp *rs)
{
    return list(rq, rs, KIND_DEP, req_query(rq, "app_name"), req_query(rq, "version"), "running",
                NULL, NULL, 1);
}

/* ---- invocations ---- */

struct inv_job {
    struct app *app;
    struct appobj_rec r;
    json_t *d;
    char dep_id[STORE_ID];
    json_t *env;
    char entry[1025];
    int64_t timeout_ms;
    struct run_prep prep;
};

static void job_free(struct inv_job *j)
{
    appobj_rec_clear(&j->r);
    json_decref(j->d);
    json_decref(j->env);
    xfree(j);
}

/* Marks the invocation running and prepares its run (j->prep). */
static int inv_begin(struct inv_job *j, struct err *e)
{
    json_object_set_new(j->d, "status", json_string("running"));
    (void)put_rec(j->app, &j->r, j->d);
    ev_push(j->r.id, inv_state_event(&j->r), 0);
    json_t *input = json_pack("{s:s,s:s,s:s,s:s,s:s}", "mode", "invoke", "entrypoint", j->entry,
                              "app_name", j->r.app_name, "action_name",
                              jsonx_str(j->d, "action_name"), "invocation_id", j->r.id);
    if (jsonx_str(j->d, "payload"))
        json_object_set_new(input, "payload", json_string(jsonx_str(j->d, "payload")));
    int rc = run_prepare(j->app, &j->r, j->dep_id, j->env, input, j->timeout_ms, NULL, &j->prep, e);
    json_decref(input);
    return rc;
}

/* The end of an invocation's run (rc, ar, e its outcome): its key revoked,
 * its browsers ended, its record and its events. */
static void inv_finish(struct inv_job *j, int rc, struct apprun_result *ar, const struct err *e)
{
    struct app *app = j->app;
    char t[40];
    run_release(app, &j->prep);
    json_t *res = run_answer(rc, ar);
    push_log_lines(j->r.id, ar->log);
    pthread_mutex_lock(&inv_mu);
    struct inv_live *l = live_find(j->r.id);
    char final[16] = "";
    char *final_output = NULL;
    if (l) {
        l->ended = 1;
        snprintf(final, sizeof final, "%s", l->final);
        final_output = l->final_output;
        l->final_output = NULL;
    }
    pthread_mutex_unlock(&inv_mu);
    end_browsers(app, j->r.id, 1);
    const char *status = "failed";
    char reason[ERR_MSG_MAX] = "";
    char *output = NULL;
    if (final[0]) {
        status = final;
        output = final_output;
        final_output = NULL;
    } else if (rc) {
        snprintf(reason, sizeof reason, "%s", e->message);
    } else if (ar->timed_out) {
        snprintf(reason, sizeof reason,
                 "timed out after %lld s: every process of the run was "
                 "killed",
                 (long long)(j->timeout_ms / 1000));
    } else if (ar->result_truncated) {
        snprintf(reason, sizeof reason, "the action's output is larger than %u bytes",
                 LIM_APP_OUTPUT_BYTES);
    } else if (!res) {
        snprintf(reason, sizeof reason, "the run ended without an answer (exit status %d)",
                 ar->exit_code);
    } else if (!json_is_true(json_object_get(res, "ok"))) {
        snprintf(reason, sizeof reason, "%s",
                 jsonx_str(res, "error") ? jsonx_str(res, "error") : "the action failed");
    } else {
        char *text = json_dumps(json_object_get(res, "output"), JSON_COMPACT | JSON_ENCODE_ANY);
        if (text && strlen(text) > LIM_APP_OUTPUT_BYTES)
            snprintf(reason, sizeof reason, "the action's output is larger than %u bytes",
                     LIM_APP_OUTPUT_BYTES);
        else {
            status = "succeeded";
            output = xstrdup(text ? text : "null");
        }
        xfree(text);
    }
    xfree(final_output);
    json_object_set_new(j->d, "status", json_string(status));
    if (output)
        json_object_set_new(j->d, "output", json_string(output));
    if (reason[0])
        json_object_set_new(j->d, "status_reason", json_string(reason));
    json_object_set_new(j->d, "finished_at", json_string(fmt_time(clock_now_ms(), t, sizeof t)));
    xfree(output);
    if (put_rec(app, &j->r, j->d) != 0)
        log_error("invocation %s: its outcome could not be stored", j->r.id);
    ev_push(j->r.id, inv_state_event(&j->r), 1);
    json_decref(res);
    pthread_mutex_lock(&inv_mu);
    for (struct inv_live **pp = &live; *pp; pp = &(*pp)->next)
        if (*pp == l) {
            *pp = l->next;
            xfree(l->final_output);
            xfree(l);
            break;
        }
    pthread_mutex_unlock(&inv_mu);
}

/* Runs the invocation to its end in this thread. */
static void inv_execute(struct inv_job *j)
{
    struct apprun_result ar;
    struct err e;
    err_init(&e);
    memset(&ar, 0, sizeof ar);
    int rc = inv_begin(j, &e);
    if (rc == 0)
        rc = apprun_run(&j->prep.spec, &ar, &e);
    inv_finish(j, rc, &ar, &e);
    apprun_result_clear(&ar);
}

/* apprun_start's end of a background invocation (its thread). */
static void inv_done(void *ctx, int rc, struct apprun_result *ar, const struct err *e)
{
    struct inv_job *j = ctx;
    inv_finish(j, rc, ar, e);
    job_free(j);
}

/* The invocation body's fields: app_name, action_name, version, payload,
 * async, async_timeout_seconds. */
static int inv_body(struct req *rq, json_t *body, int *async, int *timeout_s)
{
    struct err *e = &rq->err;
    static const char *const known[] = {"app_name", "action_name",           "version", "payload",
                                        "async",    "async_timeout_seconds", NULL};
    int rc = 0;
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v)
    {
        int ok = 0;
        for (size_t i = 0; known[i]; i++)
            ok |= strcmp(known[i], k) == 0;
        if (!ok)
            rc = err_field(e, k, "unknown field");
    }
    static const char *const names[] = {"app_name", "action_name", "version"};
    for (size_t i = 0; i < 3; i++) {
        v = json_object_get(body, names[i]);
        if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) >= STORE_NAME)
            rc = err_field(e, names[i], "is required: a string of 1 to %d bytes", STORE_NAME - 1);
    }
    v = json_object_get(body, "payload");
    if (v && !json_is_null(v) &&
        (!json_is_string(v) || json_string_length(v) > LIM_APP_PAYLOAD_BYTES))
        rc = err_field(e, "payload", "must be a string (JSON text) of at most %u bytes",
                       LIM_APP_PAYLOAD_BYTES);
    v = json_object_get(body, "async");
    if (v && !json_is_boolean(v))
        rc = err_field(e, "async", "must be true or false");
    *async = json_is_true(v);
    v = json_object_get(body, "async_timeout_seconds");
    *timeout_s = *async ? LIM_APP_ASYNC_TIMEOUT_DEFAULT_S : LIM_APP_SYNC_TIMEOUT_S;
    if (v && (!json_is_integer(v) || json_integer_value(v) < LIM_APP_ASYNC_TIMEOUT_MIN_S ||
              json_integer_value(v) > LIM_APP_ASYNC_TIMEOUT_MAX_S))
        rc = err_field(e, "async_timeout_seconds", "must be an integer from %d to %d",
                       LIM_APP_ASYNC_TIMEOUT_MIN_S, LIM_APP_ASYNC_TIMEOUT_MAX_S);
    else if (v && *async)
        *timeout_s = (int)json_integer_value(v);
    return rc;
}

/* 429 past the org's max_concurrent_invocations, the project's own
 * max_concurrent_invocations (its limits) or the app's
 * default_max_concurrent_invocations_per_app; else registers the invocation
 * as in flight (under inv_mu, so that two creates cannot both take the
 * last place). */
static int admit(struct req *rq, const struct appobj_rec *r)
{
    const json_t *ent;
    int rc = api_entitlements(rq, &ent);
    if (rc)
        return rc;
    struct limits_rec pl;
    memset(&pl, 0, sizeof pl);
    if (r->project_id[0] &&
        store_limits_get(api_app(rq)->store, r->org_id, r->project_id, &pl) != 0)
        return err_set(&rq->err, E_INTERNAL, "internal", "the project's limits could not be read");
    int64_t org_max = 0, app_max = 0, org_n, proj_n, app_n;
    int org_lim = ent_limit(ent, "max_concurrent_invocations", &org_max);
    int app_lim = ent_limit(ent, "default_max_concurrent_invocations_per_app", &app_max);
    pthread_mutex_lock(&inv_mu);
    live_counts(r, &org_n, &proj_n, &app_n);
    if (org_lim && org_n >= org_max)
        rc = err_set(&rq->err, E_LIMIT, "rate_limited",
                     "the organization runs %lld invocations, its limit "
                     "(limits.max_concurrent_invocations)",
                     (long long)org_n);
    else if (pl.max_invocations > 0 && proj_n >= pl.max_invocations)
        rc = err_set(&rq->err, E_LIMIT, "rate_limited",
                     "the project runs %lld invocations, its limit (the project's "
                     "max_concurrent_invocations)",
                     (long long)proj_n);
    else if (app_lim && app_n >= app_max)
        rc = err_set(&rq->err, E_LIMIT, "rate_limited",
                     "app %s runs %lld invocations, its limit "
                     "(limits.default_max_concurrent_invocations_per_app)",
                     r->app_name, (long long)app_n);
    if (rc) {
        rq->err.retry_after = 5;
    } else {
        struct inv_live *l = xcalloc(1, sizeof *l);
        snprintf(l->id, sizeof l->id, "%s", r->id);
        snprintf(l->org_id, sizeof l->org_id, "%s", r->org_id);
        snprintf(l->project_id, sizeof l->project_id, "%s", r->project_id);
        snprintf(l->app_name, sizeof l->app_name, "%s", r->app_name);
        l->next = live;
        live = l;
    }
    pthread_mutex_unlock(&inv_mu);
    return rc;
}

static void live_drop(const char *id)
{
    pthread_mutex_lock(&inv_mu);
    for (struct inv_live **pp = &live; *pp; pp = &(*pp)->next)
        if (strcmp((*pp)->id, id) == 0) {
            struct inv_live *l = *pp;
            *pp = l->next;
            xfree(l->final_output);
            xfree(l);
            break;
        }
    pthread_mutex_unlock(&inv_mu);
}

int invocations_create(struct req *rq, struct resp *rs)
{
    rq->no_retry = 1;
    struct app *app = api_app(rq);
    struct auth *a = api_auth(rq);
    json_t *body;
    int rc = req_json_object(rq, 0, &body);
    if (rc)
        return rc;
    int async = 0, timeout_s = 0;
    if ((rc = inv_body(rq, body, &async, &timeout_s)) != 0) {
        json_decref(body);
        return rc;
    }
    const char *app_name = jsonx_str(body, "app_name");
    const char *version = jsonx_str(body, "version");
    const char *action = jsonx_str(body, "action_name");
    struct page pg = {.limit = 1};
    struct appobj_rec *rows = NULL;
    size_t n = 0;
    if (store_appobj_list(app->store, a->org.id, a->project.id, KIND_DEP, app_name, version,
                          "running", NULL, NULL, &pg, &rows, &n) != 0) {
        json_decref(body);
        return err_set(&rq->err, E_INTERNAL, "internal", "deployments could not be read");
    }
    json_t *dd = n ? json_loads(rows[0].data, 0, NULL) : NULL;
    json_t *in = json_object_get(dd, "internal");
    int found = 0;
    json_t *act;
    size_t i;
    json_array_foreach(json_object_get(in, "actions"), i, act)
    {
        found |= jsonx_str(act, "name") && strcmp(jsonx_str(act, "name"), action) == 0;
    }
    if (!n)
        rc = err_set(&rq->err, E_NOTFOUND, "not_found",
                     "app %s has no running version %s in this project", app_name, version);
    else if (!found)
        rc = err_field(&rq->err, "action_name", "app %s version %s has no action %s", app_name,
                       version, action);
    if (rc) {
        json_decref(dd);
        for (size_t k = 0; k < n; k++)
            appobj_rec_clear(&rows[k]);
        xfree(rows);
        json_decref(body);
        return rc;
    }
    struct inv_job *j = xcalloc(1, sizeof *j);
    j->app = app;
    j->timeout_ms = (int64_t)timeout_s * 1000;
    snprintf(j->dep_id, sizeof j->dep_id, "%s", rows[0].id);
    const char *entry = jsonx_str(dd, "entrypoint_rel_path");
    snprintf(j->entry, sizeof j->entry, "%s", entry ? entry : "");
    j->env = json_incref(json_object_get(dd, "env_vars"));
    if (!j->env)
        j->env = json_object();
    json_decref(dd);
    for (size_t k = 0; k < n; k++)
        appobj_rec_clear(&rows[k]);
    xfree(rows);
    struct appobj_rec *r = &j->r;
    crypto_new_id(r->id);
    snprintf(r->org_id, sizeof r->org_id, "%s", a->org.id);
    snprintf(r->project_id, sizeof r->project_id, "%s", a->project.id);
    snprintf(r->kind, sizeof r->kind, KIND_INV);
    snprintf(r->app_name, sizeof r->app_name, "%s", app_name);
    snprintf(r->version, sizeof r->version, "%s", version);
    r->created_at = clock_now_ms();
    char t[40];
    j->d = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "id", r->id, "action_name", action, "app_name",
                     app_name, "version", version, "started_at",
                     fmt_time(r->created_at, t, sizeof t), "status", "queued");
    if (jsonx_str(body, "payload"))
        json_object_set_new(j->d, "payload", json_string(jsonx_str(body, "payload")));
    json_object_set_new(internal_of(j->d), "deployment_id", json_string(j->dep_id));
    mark_node(app, j->d);
    json_decref(body);
    if ((rc = admit(rq, r)) != 0) {
        job_free(j);
        return rc;
    }
    if (put_rec(app, r, j->d) != 0) {
        live_drop(r->id);
        job_free(j);
        return err_set(&rq->err, E_INTERNAL, "internal", "the invocation could not be stored");
    }
    ev_push(r->id, inv_state_event(r), 0);
    if (async) {
        json_t *out = json_pack("{s:s,s:O,s:s}", "id", r->id, "action_name",
                                json_object_get(j->d, "action_name"), "status", "queued");
        struct err e;
        err_init(&e);
        rc = inv_begin(j, &e);
        if (rc == 0)
            rc = apprun_start(&j->prep.spec, inv_done, j, &e);
        if (rc) {
            struct apprun_result none = {0};
            inv_finish(j, rc, &none, &e);
            job_free(j);
        }
        resp_json(rs, 202, out);
        return 0;
    }
    inv_execute(j);
    json_t *out = render(&j->r);
    json_t *o =
        json_pack("{s:O,s:O,s:O}", "id", json_object_get(out, "id"), "action_name",
                  json_object_get(out, "action_name"), "status", json_object_get(out, "status"));
    if (json_object_get(out, "output"))
        json_object_set(o, "output", json_object_get(out, "output"));
    if (json_object_get(out, "status_reason"))
        json_object_set(o, "status_reason", json_object_get(out, "status_reason"));
    json_decref(out);
    job_free(j);
    resp_json(rs, 200, o);
    return 0;
}

int invocations_list(struct req *rq, struct resp *rs)
{
    const char *st = req_query(rq, "status");
    if (st && strcmp(st, "queued") != 0 && strcmp(st, "running") != 0 &&
        strcmp(st, "succeeded") != 0 && strcmp(st, "failed") != 0)
        return err_field(&rq->err, "status", "must be queued, running, succeeded or failed");
    /* action_name and deployment_id match the record's JSON text, where
     * each is one compact member (its value escaped as jansson writes it). */
    char *m1 = NULL, *m2 = NULL;
    const char *an = req_query(rq, "action_name"), *dep = req_query(rq, "deployment_id");
    if (an) {
        json_t *v = json_string(an);
        char *q = v ? json_dumps(v, JSON_ENCODE_ANY) : NULL;
        m1 = xasprintf("\"action_name\":%s", q ? q : "\"\"");
        xfree(q);
        json_decref(v);
    }
    if (dep) {
        json_t *v = json_string(dep);
        char *q = v ? json_dumps(v, JSON_ENCODE_ANY) : NULL;
        m2 = xasprintf("\"deployment_id\":%s", q ? q : "\"\"");
        xfree(q);
        json_decref(v);
    }
    int rc =
        list(rq, rs, KIND_INV, req_query(rq, "app_name"), req_query(rq, "version"), st, m1, m2, 0);
    xfree(m1);
    xfree(m2);
    return rc;
}

int invocations_get(struct req *rq, struct resp *rs)
{
    struct appobj_rec r;
    int rc = load(rq, KIND_INV, &r);
    if (rc)
        return rc;
    resp_json(rs, 200, render(&r));
    appobj_rec_clear(&r);
    return 0;
}

int invocations_update(struct req *rq, struct resp *rs)
{
    struct app *app = api_app(rq);
    json_t *body;
    int rc = req_json_object(rq, 0, &body);
    if (rc)
        return rc;
    static const char *const known[] = {"status", "output", NULL};
    credentials_check_fields(body, known, "an invocation update", &rq->err);
    const char *status = jsonx_str(body, "status");
    if (!status || (strcmp(status, "succeeded") != 0 && strcmp(status, "failed") != 0))
        err_field(&rq->err, "status", "is required: succeeded or failed");
    json_t *v = json_object_get(body, "output");
    if (v && (!json_is_string(v) || json_string_length(v) > LIM_APP_OUTPUT_BYTES))
        err_field(&rq->err, "output", "must be a string of at most %u bytes", LIM_APP_OUTPUT_BYTES);
    struct appobj_rec r;
    rc = err_has_fields(&rq->err) ? E_INVALID : load(rq, KIND_INV, &r);
    if (rc) {
        json_decref(body);
        return rc;
    }
    json_t *d = json_loads(r.data, 0, NULL);
    /* While it runs, the outcome waits for the run's end (the runner's own
     * answer does not override it); after, it replaces the stored one. */
    pthread_mutex_lock(&inv_mu);
    struct inv_live *l = live_find(r.id);
    int running = l && !l->ended;
    if (running) {
        snprintf(l->final, sizeof l->final, "%s", status);
        xfree(l->final_output);
        l->final_output = v ? xstrdup(json_string_value(v)) : NULL;
    }
    pthread_mutex_unlock(&inv_mu);
    if (!running && json_is_object(d)) {
        char t[40];
        json_object_set_new(d, "status", json_string(status));
        if (v)
            json_object_set(d, "output", v);
        json_object_del(d, "status_reason");
        if (!json_object_get(d, "finished_at") || json_is_null(json_object_get(d, "finished_at")))
            json_object_set_new(d, "finished_at",
                                json_string(fmt_time(clock_now_ms(), t, sizeof t)));
        rc = put_rec(app, &r, d);
    } else if (json_is_object(d)) {
        json_object_set_new(d, "status", json_string(status));
        if (v)
            json_object_set(d, "output", v);
    }
    json_decref(body);
    if (rc) {
        json_decref(d);
        appobj_rec_clear(&r);
        return err_set(&rq->err, E_INTERNAL, "internal", "the invocation could not be stored");
    }
    json_object_del(d, "internal");
    resp_json(rs, 200, d);
    appobj_rec_clear(&r);
    return 0;
}

int invocations_events(struct req *rq, struct resp *rs)
{
    struct appobj_rec r;
    int rc = load(rq, KIND_INV, &r);
    if (rc)
        return rc;
    follow(rs, r.id, inv_state_event(&r));
    appobj_rec_clear(&r);
    return 0;
}

int invocations_browsers_list(struct req *rq, struct resp *rs)
{
    struct app *app = api_app(rq);
    struct auth *a = api_auth(rq);
    struct appobj_rec r;
    int rc = load(rq, KIND_INV, &r);
    if (rc)
        return rc;
    char ids[LIM_APP_INVOCATION_BROWSERS][STORE_ID];
    int n = 0;
    pthread_mutex_lock(&inv_mu);
    struct inv_live *l = live_find(r.id);
    if (l) {
        n = l->nsess;
        memcpy(ids, l->sessions, sizeof ids);
    }
    pthread_mutex_unlock(&inv_mu);
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        struct session_rec s;
        memset(&s, 0, sizeof s);
        if (store_session_get(app->store, a->org.id, a->project.id, ids[i], 0, &s) == 0)
            json_array_append_new(arr, browsers_render(app, &s));
        session_rec_clear(&s);
    }
    appobj_rec_clear(&r);
    resp_json(rs, 200, json_pack("{s:o}", "browsers", arr));
    return 0;
}

int invocations_browsers_delete(struct req *rq, struct resp *rs)
{
    struct appobj_rec r;
    int rc = load(rq, KIND_INV, &r);
    if (rc)
        return rc;
    end_browsers(api_app(rq), r.id, 1);
    appobj_rec_clear(&r);
    resp_empty(rs, 204);
    return 0;
}

/* Ends one orphaned record r (see apps_end_orphans): 1 when this call ended it. */
static int end_orphan(struct app *app, struct appobj_rec *r, const char *reason)
{
    json_t *d = json_loads(r->data, 0, NULL);
    if (!json_is_object(d)) {
        json_decref(d);
        d = json_object();
    }
    char was[sizeof r->status], t[40];
    snprintf(was, sizeof was, "%s", r->status);
    int dep = strcmp(r->kind, KIND_DEP) == 0;
    r->updated_at = clock_now_ms();
    json_object_set_new(d, "status", json_string("failed"));
    json_object_set_new(d, "status_reason", json_string(reason));
    if (dep) {
        json_object_set_new(d, "updated_at", json_string(fmt_time(r->updated_at, t, sizeof t)));
        r->bytes = 0;
    } else {
        json_object_set_new(d, "finished_at", json_string(fmt_time(r->updated_at, t, sizeof t)));
    }
    snprintf(r->status, sizeof r->status, "failed");
    xfree(r->data);
    char *text = json_dumps(d, JSON_COMPACT);
    r->data = xstrdup(text ? text : "{}");
    xfree(text);
    json_decref(d);
    int rc = store_appobj_settle(app->store, r, was);
    if (rc == E_NOTFOUND)
        return 0;
    if (rc) {
        log_error("apps: %s %s could not be ended (%s)", r->kind, r->id, reason);
        return 0;
    }
    if (dep)
        dep_files_remove(app, r->id);
    ev_push(r->id, dep ? dep_state_event(r) : inv_state_event(r), 1);
    return 1;
}

int apps_end_orphans(struct app *app, const char *node, const char *reason)
{
    struct page pg = {.limit = 100};
    int ended = 0;
    for (;;) {
        struct appobj_rec *rows = NULL;
        size_t n = 0;
        if (store_appobj_unfinished(app->store, &pg, &rows, &n) != 0) {
            log_error("apps: the unfinished deployments and invocations could not be listed");
            return -1;
        }
        int more = pg.has_more;
        for (size_t i = 0; i < n; i++) {
            json_t *d = json_loads(rows[i].data, 0, NULL);
            const char *owner = jsonx_str(json_object_get(d, "internal"), "node_id");
            int ours = !node || (owner && strcmp(owner, node) == 0);
            json_decref(d);
            /* A record ended leaves the list: the next page starts after
             * the ones left as they were. */
            if (ours && end_orphan(app, &rows[i], reason))
                ended++;
            else
                pg.offset++;
            appobj_rec_clear(&rows[i]);
        }
        xfree(rows);
        if (!more)
            break;
    }
    if (ended)
        log_warn("apps: %d deployments and invocations ended: %s", ended, reason);
    return 0;
}
