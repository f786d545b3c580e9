/* domain/procreq: see procreq.h. */
#include "domain/procreq.h"

#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "core/b64.h"
#include "core/limits.h"
#include "core/xalloc.h"

/* A JSON string without NUL bytes (execve cannot carry them), or NULL. */
static const char *plain(const json_t *v)
{
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
        return NULL;
    return json_string_value(v);
}

static int given(const json_t *v)
{
    return v && !json_is_null(v);
}

int procreq_user_ok(const char *u, unsigned uid)
{
    char num[32];
    snprintf(num, sizeof num, "%u", uid);
    const char *colon = strchr(u, ':');
    size_t nl = colon ? (size_t)(colon - u) : strlen(u);
    int name_ok = (nl == 6 && strncmp(u, "kernel", 6) == 0) ||
                  (nl == strlen(num) && strncmp(u, num, nl) == 0);
    return name_ok && (!colon || strcmp(colon + 1, num) == 0);
}

static int parse_fields(const json_t *b, int spawn, unsigned uid, struct procreq *r, struct err *e)
{
    const char *cmd = plain(json_object_get(b, "command"));
    if (!cmd || !*cmd)
        return err_field(e, "command", "command required (a non-empty string without NUL bytes)");
    strvec_push(&r->argv, xstrdup(cmd));
    json_t *args = json_object_get(b, "args");
    if (given(args)) {
        if (!json_is_array(args))
            return err_field(e, "args", "must be an array of strings");
        size_t i;
        json_t *a;
        json_array_foreach(args, i, a)
        {
            const char *s = plain(a);
            if (!s)
                return err_field(e, "args", "args[%zu] must be a string without NUL bytes", i);
            strvec_push(&r->argv, xstrdup(s));
        }
    }
    json_t *cwd = json_object_get(b, "cwd");
    if (given(cwd)) {
        r->cwd = plain(cwd);
        if (!r->cwd || r->cwd[0] != '/')
            return err_field(e, "cwd", "must be an absolute path");
    }
    json_t *env = json_object_get(b, "env");
    if (given(env)) {
        if (!json_is_object(env))
            return err_field(e, "env", "must be an object of strings");
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)env, k, v)
        {
            const char *s = plain(v);
            if (!*k || strchr(k, '='))
                return err_field(e, "env", "names must be non-empty and without '=': \"%s\"", k);
            if (!s)
                return err_field(e, "env", "env.%s must be a string without NUL bytes", k);
            strvec_push(&r->env, xasprintf("%s=%s", k, s));
        }
    }
    json_t *ar = json_object_get(b, "as_root");
    if (given(ar) && !json_is_boolean(ar))
        return err_field(e, "as_root", "must be a boolean");
    r->as_root = json_is_true(ar);
    json_t *au = json_object_get(b, "as_user");
    if (given(au)) {
        const char *u = plain(au);
        if (!u)
            return err_field(e, "as_user", "must be a string");
        if (r->as_root)
            return err_set(e, E_INVALID, "bad_request", "cannot specify both as_root and as_user");
        if (!procreq_user_ok(u, uid))
            return err_field(e, "as_user",
                             "failed to lookup user \"%s\": a session's processes run as its user "
                             "kernel (uid %u) or, with as_root, as root of its user namespace",
                             u, uid);
    }
    json_t *to = json_object_get(b, "timeout_sec");
    if (given(to)) {
        if (!json_is_integer(to))
            return err_field(e, "timeout_sec", "must be an integer");
        r->timeout_s = json_integer_value(to);
        long long max = spawn ? PROCREQ_SPAWN_TIMEOUT_MAX_S : LIM_PROC_EXEC_TIMEOUT_MAX_S;
        if (r->timeout_s < 1 || r->timeout_s > max)
            return err_field(e, "timeout_sec", "must be between 1 and %lld", max);
    }
    if (!spawn)
        return 0;
    json_t *t = json_object_get(b, "allocate_tty");
    if (given(t) && !json_is_boolean(t))
        return err_field(e, "allocate_tty", "must be a boolean");
    r->tty = json_is_true(t);
    static const char *const dims[] = {"rows", "cols"};
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(b, dims[i]);
        if (!given(v))
            continue;
        if (!json_is_integer(v) || json_integer_value(v) < 1)
            return err_field(e, dims[i], "%s must be an integer >= 1", dims[i]);
        if (json_integer_value(v) > PROCREQ_DIM_MAX)
            return err_field(e, dims[i], "%s must be <= %d", dims[i], PROCREQ_DIM_MAX);
        *(i == 0 ? &r->rows : &r->cols) = (int)json_integer_value(v);
    }
    return 0;
}

int procreq_parse(const json_t *body, int spawn, unsigned uid, struct procreq *r, struct err *e)
{
    memset(r, 0, sizeof *r);
    if (!json_is_object(body))
        return err_set(e, E_INVALID, "bad_request", "request body required (a JSON object)");
    int rc = parse_fields(body, spawn, uid, r, e);
    if (rc)
        procreq_clear(r);
    return rc;
}

void procreq_clear(struct procreq *r)
{
    strvec_free(&r->argv);
    strvec_free(&r->env);
    memset(r, 0, sizeof *r);
}

int procreq_is_uuid(const char *s)
{
    if (strlen(s) != 36)
        return 0;
    for (int i = 0; i < 36; i++) {
        int dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? s[i] != '-' : !isxdigit((unsigned char)s[i]))
            return 0;
    }
    return 1;
}

int procreq_signal(const char *name)
{
    static const struct {
        const char *name;
        int sig;
    } sigs[] = {{"TERM", SIGTERM}, {"KILL", SIGKILL}, {"INT", SIGINT}, {"HUP", SIGHUP}};
    for (size_t i = 0; name && i < sizeof sigs / sizeof *sigs; i++)
        if (strcmp(name, sigs[i].name) == 0)
            return sigs[i].sig;
    return 0;
}

int procreq_resize(const json_t *body, int *rows, int *cols, struct err *e)
{
    json_t *rv = json_object_get(body, "rows"), *cv = json_object_get(body, "cols");
    if (!json_is_integer(rv) || !json_is_integer(cv))
        return err_set(e, E_INVALID, "bad_request", "rows and cols are required integers");
    json_int_t r = json_integer_value(rv), c = json_integer_value(cv);
    if (r < 1 || c < 1)
        return err_set(e, E_INVALID, "bad_request", "rows and cols must be > 0");
    if (r > PROCREQ_DIM_MAX || c > PROCREQ_DIM_MAX)
        return err_set(e, E_INVALID, "bad_request", "rows and cols must be <= 65535");
    *rows = (int)r;
    *cols = (int)c;
    return 0;
}

int procreq_b64_decode(const char *in, size_t n, unsigned char **out, size_t *outlen)
{
    *out = NULL;
    *outlen = 0;
    /* core/b64 also takes unpadded text; stdin data must be padded. */
    if (n % 4)
        return -1;
    return b64_decode(in, n, out, outlen);
}
