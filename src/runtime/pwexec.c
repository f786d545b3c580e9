/* runtime/pwexec: see pwexec.h. */
#include "runtime/pwexec.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/limits.h"
#include "core/xalloc.h"
#include "runtime/sandbox.h"

static pthread_once_t dir_once = PTHREAD_ONCE_INIT;
static char dir_path[PATH_MAX];

/* The runner and its installed packages (scripts/deps.sh). */
static int has_runner(const char *dir)
{
    static const char *const need[] = {"runner.mjs", "node_modules/playwright-core/package.json",
                                       "node_modules/esbuild/package.json"};
    for (size_t i = 0; i < sizeof need / sizeof *need; i++) {
        char p[PATH_MAX + 64];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, need[i]);
        if (stat(p, &st) != 0 || !S_ISREG(st.st_mode))
            return 0;
    }
    return 1;
}

static void find_dir(void)
{
    const char *env = getenv("BROWSERD_RUNTIME_JS");
    char real[PATH_MAX];
    if (env && *env) {
        if (realpath(env, real) && has_runner(real))
            snprintf(dir_path, sizeof dir_path, "%s", real);
        return;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return;
    exe[n] = '\0';
    /* A build tree has it beside an ancestor (build/browserd: ./runtime-js);
     * the Debian package under one (/usr/bin/browserd:
     * /usr/lib/browserd/runtime-js, docs/packaging.md). */
    static const char *const under[] = {"runtime-js", "lib/browserd/runtime-js"};
    for (char *slash = strrchr(exe, '/'); slash && slash != exe; slash = strrchr(exe, '/')) {
        *slash = '\0';
        for (size_t i = 0; i < sizeof under / sizeof *under; i++) {
            char cand[PATH_MAX + 32];
            snprintf(cand, sizeof cand, "%s/%s", exe, under[i]);
            if (has_runner(cand) && realpath(cand, real)) {
                snprintf(dir_path, sizeof dir_path, "%s", real);
                return;
            }
        }
    }
}

const char *pwexec_dir(void)
{
    pthread_once(&dir_once, find_dir);
    return dir_path[0] ? dir_path : NULL;
}

void pwexec_local_url(const char *ws, char *out, size_t cap)
{
    /* ws://nsN@127.0.0.1:PORT/... -> ws://127.0.0.1:PORT/... */
    const char *at = strchr(ws, '@');
    const char *scheme_end = strstr(ws, "://");
    if (at && scheme_end && at > scheme_end)
        snprintf(out, cap, "%.*s%s", (int)(scheme_end + 3 - ws), ws, at + 1);
    else
        snprintf(out, cap, "%s", ws);
}

int pwexec_start(const struct sandbox *sb, struct sessmgr *sessions, const char *session_id,
                 const char *ws, const char *code, int timeout_s,
                 void (*on_exit)(void *ctx, struct proc *p), void *ctx, struct proc **out,
                 struct err *e)
{
    *out = NULL;
    const char *dir = pwexec_dir();
    if (!dir)
        return err_set(e, E_UNAVAIL, "unavailable",
                       "failed to start playwright daemon: runtime-js/ with its packages not "
                       "found (run scripts/deps.sh, or set BROWSERD_RUNTIME_JS)");
    char url[1024];
    pwexec_local_url(ws, url, sizeof url);
    const char *argv[] = {PWEXEC_NODE, SANDBOX_RUNTIME_JS "/runner.mjs", url, NULL};
    const char *ro[] = {dir, SANDBOX_RUNTIME_JS, NULL};
    const char *env[] = {"NODE_OPTIONS=", NULL};
    struct proc_spec s = {
        .session_id = session_id,
        .sb = sb,
        .sessions = sessions,
        .argv = argv,
        .env = env,
        .cwd = NULL,
        .timeout_ms = (int64_t)timeout_s * 1000,
        .collect = LIM_PW_OUTPUT_BYTES,
        .extra_ro = ro,
        .result_fd = 1,
        .stdin_data = code,
        .stdin_len = strlen(code),
        .on_exit = on_exit,
        .ctx = ctx,
    };
    int rc = proc_start(&s, out, e);
    if (rc == 0 || rc == E_CONFLICT || rc == E_UNAVAIL)
        return rc;
    char why[ERR_MSG_MAX];
    snprintf(why, sizeof why, "%s", e->message);
    return err_set(e, E_INTERNAL, "internal", "failed to start playwright daemon: %s", why);
}

/* A JSON string of the bytes (invalid UTF-8 becomes '?'). */
static json_t *text_of(const char *p, size_t n)
{
    json_t *s = json_stringn(p, n);
    if (s)
        return s;
    char *c = xmalloc(n + 1);
    for (size_t i = 0; i < n; i++)
        c[i] = (unsigned char)p[i] >= 0x80 ? '?' : p[i];
    s = json_stringn(c, n);
    xfree(c);
    return s ? s : json_string("");
}

json_t *pwexec_result(struct proc *p, int timeout_s)
{
    struct proc_status st;
    proc_status(p, &st);
    size_t olen, elen, rlen;
    const char *o = proc_out(p, PROC_STDOUT, &olen, NULL);
    const char *er = proc_out(p, PROC_STDERR, &elen, NULL);
    const char *r = proc_out(p, PROC_RESULT, &rlen, NULL);
    json_t *res = NULL;
    if (!st.timed_out && rlen) {
        json_error_t je;
        res = json_loadb(r, rlen, JSON_DECODE_ANY, &je);
        if (res && !json_is_object(res)) {
            json_decref(res);
            res = NULL;
        }
    }
    json_t *out = json_object();
    if (res && json_is_true(json_object_get(res, "success"))) {
        json_object_set_new(out, "success", json_true());
        json_t *v = json_object_get(res, "result");
        json_object_set(out, "result", v ? v : json_null());
    } else {
        json_object_set_new(out, "success", json_false());
        const char *msg = res ? json_string_value(json_object_get(res, "error")) : NULL;
        char buf[256];
        if (st.timed_out) {
            snprintf(buf, sizeof buf, "Execution timed out after %dms", timeout_s * 1000);
            msg = buf;
        } else if (!msg) {
            snprintf(buf, sizeof buf, "execution failed: the runner exited with status %d",
                     st.exit_code);
            msg = buf;
        }
        json_object_set_new(out, "error", json_string(msg));
    }
    json_decref(res);
    if (olen)
        json_object_set_new(out, "stdout", text_of(o, olen));
    if (elen)
        json_object_set_new(out, "stderr", text_of(er, elen));
    return out;
}
