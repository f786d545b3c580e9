/* runtime/apprun: see apprun.h. */
#include "runtime/apprun.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fdio.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/netns.h"
#include "core/xalloc.h"
#include "runtime/extpack.h"
#include "runtime/proc.h"
#include "runtime/pwexec.h"
#include "runtime/sandbox.h"

/* ---- the API relay inside the run's network namespace ---- */

struct relay {
    int listen_fd;
    int stop[2];
    int port;
    int conns; /* pump threads alive (under mu) */
    pthread_mutex_t mu;
    pthread_cond_t idle;
    pthread_t th;
};

struct pump {
    struct relay *r;
    int a, b;
};

/* Copies bytes both ways until either side closes. */
static void *pump_main(void *arg)
{
    struct pump *p = arg;
    char buf[65536];
    struct pollfd pf[2] = {{.fd = p->a, .events = POLLIN}, {.fd = p->b, .events = POLLIN}};
    for (;;) {
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        int done = 0;
        for (int i = 0; i < 2 && !done; i++) {
            if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t n = read(pf[i].fd, buf, sizeof buf);
            if (n <= 0 || fdio_write_all(pf[1 - i].fd, buf, (size_t)n, FDIO_NO_DEADLINE) != 0)
                done = 1;
        }
        if (done)
            break;
    }
    close(p->a);
    close(p->b);
    pthread_mutex_lock(&p->r->mu);
    if (--p->r->conns == 0)
        pthread_cond_broadcast(&p->r->idle);
    pthread_mutex_unlock(&p->r->mu);
    xfree(p);
    return NULL;
}

static int connect_api(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void *relay_main(void *arg)
{
    struct relay *r = arg;
    struct pollfd pf[2] = {{.fd = r->listen_fd, .events = POLLIN},
                           {.fd = r->stop[0], .events = POLLIN}};
    for (;;) {
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pf[1].revents)
            break;
        int c = accept4(r->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        pthread_mutex_lock(&r->mu);
        int full = r->conns >= LIM_APP_RELAY_CONNS;
        if (!full)
            r->conns++;
        pthread_mutex_unlock(&r->mu);
        int up = full ? -1 : connect_api(r->port);
        if (up < 0) {
            close(c);
            if (!full) {
                pthread_mutex_lock(&r->mu);
                r->conns--;
                pthread_mutex_unlock(&r->mu);
            }
            continue;
        }
        struct pump *p = xcalloc(1, sizeof *p);
        p->r = r;
        p->a = c;
        p->b = up;
        pthread_t th;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &at, pump_main, p) != 0) {
            close(c);
            close(up);
            xfree(p);
            pthread_mutex_lock(&r->mu);
            r->conns--;
            pthread_mutex_unlock(&r->mu);
        }
        pthread_attr_destroy(&at);
    }
    return NULL;
}

static int relay_start(struct relay *r, const struct sandbox *sb, int port, struct err *e)
{
    memset(r, 0, sizeof *r);
    r->listen_fd = r->stop[0] = r->stop[1] = -1;
    r->port = port;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->idle, NULL);
    int fd = netns_socket(sandbox_netns(sb), AF_INET, SOCK_STREAM | SOCK_CLOEXEC);
    if (fd < 0)
        return err_set(e, E_INTERNAL, "internal", "apps: cannot open the API relay: %s",
                       strerror(-fd));
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 16) != 0 ||
        pipe2(r->stop, O_CLOEXEC) != 0) {
        int er = errno;
        close(fd);
        return err_set(e, E_INTERNAL, "internal", "apps: cannot open the API relay: %s",
                       strerror(er));
    }
    r->listen_fd = fd;
    if (pthread_create(&r->th, NULL, relay_main, r) != 0) {
        close(fd);
        close(r->stop[0]);
        close(r->stop[1]);
        r->listen_fd = -1;
        return err_set(e, E_INTERNAL, "internal", "apps: cannot start the API relay");
    }
    return 0;
}

/* Stops accepting and waits for the pumps (their sandbox side is gone:
 * the run's processes were killed before). */
static void relay_stop(struct relay *r)
{
    if (r->listen_fd < 0)
        return;
    (void)!write(r->stop[1], "x", 1);
    pthread_join(r->th, NULL);
    close(r->listen_fd);
    close(r->stop[0]);
    close(r->stop[1]);
    pthread_mutex_lock(&r->mu);
    while (r->conns > 0)
        pthread_cond_wait(&r->idle, &r->mu);
    pthread_mutex_unlock(&r->mu);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->idle);
}

/* ---- files ---- */

static __thread long long walk_total;

static int walk_add(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)p;
    (void)f;
    if (flag == FTW_F)
        walk_total += st->st_size;
    return 0;
}

/* Unpacks the zip at zip_path into <root>/home/kernel/app (root's, read-only
 * to the app's user). */
static int unpack_app(const char *root, const char *zip_path, long long *bytes, struct err *e)
{
    char *zip = NULL;
    size_t len = 0;
    int r = fdio_read_file(zip_path, LIM_APP_ZIP_BYTES, &zip, &len);
    if (r)
        return err_set(e, E_INTERNAL, "internal", "apps: the deployment's archive cannot be read");
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/home/kernel/app", root);
    int rc = 0;
    /* chmod: the server's umask would take the app's read access away. */
    if (mkdir(dir, 0755) != 0 || chmod(dir, 0755) != 0) {
        rc = err_set(e, E_INTERNAL, "internal", "apps: cannot make the app's folder: %s",
                     strerror(errno));
    } else {
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0) {
            rc = err_set(e, E_INTERNAL, "internal", "apps: cannot open the app's folder: %s",
                         strerror(errno));
        } else {
            rc = extpack_unpack(zip, len, dfd, e);
            close(dfd);
        }
    }
    xfree(zip);
    if (rc == 0 && bytes) {
        walk_total = 0;
        (void)nftw(dir, walk_add, 16, FTW_PHYS);
        *bytes = walk_total;
    }
    return rc;
}

/* ---- the runs going (for the server's stop) ---- */

struct going {
    struct sandbox *sb;
    struct going *next;
};

static pthread_mutex_t runs_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t runs_cv = PTHREAD_COND_INITIALIZER;
static struct going *runs;
static int stopping;
static int background; /* apprun_start threads alive */

/* Registers sb as going; E_UNAVAIL once the server stops. */
static int going_add(struct going *g, struct sandbox *sb, struct err *e)
{
    pthread_mutex_lock(&runs_mu);
    int stop = stopping;
    if (!stop) {
        g->sb = sb;
        g->next = runs;
        runs = g;
    }
    pthread_mutex_unlock(&runs_mu);
    return stop ? err_set(e, E_UNAVAIL, "unavailable", "apps: the server is stopping") : 0;
}

static void going_remove(struct going *g)
{
    pthread_mutex_lock(&runs_mu);
    for (struct going **pp = &runs; *pp; pp = &(*pp)->next)
        if (*pp == g) {
            *pp = g->next;
            break;
        }
    pthread_mutex_unlock(&runs_mu);
}

void apprun_drain(void)
{
    pthread_mutex_lock(&runs_mu);
    stopping = 1;
    for (struct going *g = runs; g; g = g->next)
        (void)sandbox_kill_all(g->sb);
    pthread_mutex_unlock(&runs_mu);
}

void apprun_stop(void)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    pthread_mutex_lock(&runs_mu);
    while (background > 0 && pthread_cond_timedwait(&runs_cv, &runs_mu, &until) == 0)
        ;
    if (background > 0)
        log_error("apps: %d background runs still going at the stop", background);
    pthread_mutex_unlock(&runs_mu);
}

/* ---- the run ---- */

static char *dup_out(struct proc *p, int stream, int *trunc)
{
    size_t n = 0;
    int t = 0;
    const char *s = proc_out(p, stream, &n, &t);
    if (trunc)
        *trunc = t;
    char *o = xmalloc(n + 1);
    if (n)
        memcpy(o, s, n);
    o[n] = '\0';
    return o;
}

int apprun_run(const struct apprun_spec *s, struct apprun_result *out, struct err *e)
{
    memset(out, 0, sizeof *out);
    const char *dir = pwexec_dir();
    if (!sandbox_enabled())
        return err_set(e, E_UNAVAIL, "sandbox_required",
                       "apps run only in the session sandbox, which this server runs without "
                       "(it needs root, bwrap and network namespaces; docs/sandbox.md)");
    if (!dir)
        return err_set(e, E_UNAVAIL, "unavailable",
                       "apps: runtime-js/ with app-runner.mjs not found (run scripts/deps.sh, "
                       "or set BROWSERD_RUNTIME_JS)");
    char runner[PATH_MAX];
    snprintf(runner, sizeof runner, "%s/app-runner.mjs", dir);
    struct sandbox *sb = NULL;
    int rc = sandbox_create(s->name, s->org_id, LIM_APP_MEMORY_BYTES, &sb, e);
    if (rc)
        return rc;
    struct going g;
    if ((rc = going_add(&g, sb, e)) != 0) {
        sandbox_unref(sb);
        return rc;
    }
    (void)mkdir(s->root_dir, 0700);
    struct relay relay = {.listen_fd = -1};
    if ((rc = sandbox_root_create(sb, s->root_dir, LIM_APP_FILES_BYTES, e)) == 0 &&
        (rc = unpack_app(s->root_dir, s->zip_path, s->unpacked_bytes, e)) == 0 && s->api_port)
        rc = relay_start(&relay, sb, s->api_port, e);
    struct proc *p = NULL;
    struct proc_waiter w;
    proc_waiter_init(&w);
    if (rc == 0) {
        const char *argv[] = {PWEXEC_NODE, "--no-warnings", runner, NULL};
        const char *ro[] = {dir, NULL};
        struct proc_spec ps = {
            .session_id = s->name,
            .sb = sb,
            .argv = argv,
            .env = s->env,
            .cwd = SANDBOX_HOME "/app",
            .timeout_ms = s->timeout_ms,
            .collect = LIM_APP_LOG_BYTES,
            .extra_ro = ro,
            .result_fd = 1,
            .stdin_data = s->input,
            .stdin_len = strlen(s->input),
            .on_exit = proc_waiter_exited,
            .ctx = &w,
        };
        rc = proc_start(&ps, &p, e);
        if (rc && rc != E_UNAVAIL) {
            char why[ERR_MSG_MAX];
            snprintf(why, sizeof why, "%s", e->message);
            rc = err_set(e, E_INTERNAL, "internal", "apps: the runner could not start: %s", why);
        }
    }
    if (rc == 0) {
        proc_waiter_wait(&w);
        struct proc_status st;
        proc_status(p, &st);
        out->exit_code = st.exit_code;
        out->timed_out = st.timed_out;
        out->result = dup_out(p, PROC_RESULT, &out->result_truncated);
        char *o = dup_out(p, PROC_STDOUT, NULL), *er = dup_out(p, PROC_STDERR, NULL);
        out->log = xasprintf("%s%s", o, er);
        xfree(o);
        xfree(er);
        proc_put(p);
    }
    /* Everything the run started dies with its cgroup before the relay
     * waits for its connections to close. */
    going_remove(&g);
    (void)sandbox_kill_all(sb);
    relay_stop(&relay);
    sandbox_unref(sb);
    (void)rmdir(s->root_dir);
    proc_waiter_destroy(&w);
    return rc;
}

void apprun_result_clear(struct apprun_result *r)
{
    if (!r)
        return;
    xfree(r->result);
    xfree(r->log);
    r->result = r->log = NULL;
}

struct bg {
    const struct apprun_spec *s;
    apprun_done_fn done;
    void *ctx;
};

static void *bg_main(void *arg)
{
    struct bg *b = arg;
    struct apprun_result r;
    struct err e;
    err_init(&e);
    int rc = apprun_run(b->s, &r, &e);
    b->done(b->ctx, rc, &r, &e);
    apprun_result_clear(&r);
    xfree(b);
    pthread_mutex_lock(&runs_mu);
    if (--background == 0)
        pthread_cond_broadcast(&runs_cv);
    pthread_mutex_unlock(&runs_mu);
    return NULL;
}

int apprun_start(const struct apprun_spec *s, apprun_done_fn done, void *ctx, struct err *e)
{
    struct bg *b = xcalloc(1, sizeof *b);
    b->s = s;
    b->done = done;
    b->ctx = ctx;
    pthread_mutex_lock(&runs_mu);
    int stop = stopping;
    if (!stop)
        background++;
    pthread_mutex_unlock(&runs_mu);
    if (stop) {
        xfree(b);
        return err_set(e, E_UNAVAIL, "unavailable", "apps: the server is stopping");
    }
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&th, &at, bg_main, b);
    pthread_attr_destroy(&at);
    if (rc != 0) {
        pthread_mutex_lock(&runs_mu);
        if (--background == 0)
            pthread_cond_broadcast(&runs_cv);
        pthread_mutex_unlock(&runs_mu);
        xfree(b);
        return err_set(e, E_UNAVAIL, "unavailable", "apps: no thread for a background run: %s",
                       strerror(rc));
    }
    return 0;
}
