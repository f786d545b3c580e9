/* runtime/apprun: see apprun.h. */
#include "runtime/apprun.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/fdio.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/netns.h"
#include "core/share.h"
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
    /* The registry relay (npm ci): every connection goes to the registry's
     * address `to`, whatever it asks for; with https a connection must
     * first ask CONNECT <connect_to> (npm's https-proxy), answered 200. */
    struct sockaddr_storage to;
    socklen_t tolen;
    char connect_to[320];
    /* The API relay's own source address (127.66.X.Y, one per run), so that
     * the HTTP front counts a run's connections apart from every other
     * client on 127.0.0.1; sin_family 0 for the registry relay. */
    struct sockaddr_in from;
    char org[64], run[64]; /* whose share of the pumps (app_pumps) it takes */
    int conns;             /* pump threads alive (under mu) */
    pthread_mutex_t mu;
    pthread_cond_t idle;
    pthread_t th;
};

struct pump {
    struct relay *r;
    int a, b;
};

/* Every run's relayed connections, with each organization's part and each
 * run's (LIM_APP_RELAY_PUMPS*). */
static struct share app_pumps = SHARE_INIT("app relay connections", LIM_APP_RELAY_PUMPS,
                                           LIM_APP_RELAY_PUMPS_PER_ORG, 2 * LIM_APP_RELAY_CONNS);

/* A relayed connection ended (or was never made): its count and share. */
static void conn_release(struct relay *r)
{
    share_give(&app_pumps, r->org, r->run);
    pthread_mutex_lock(&r->mu);
    if (--r->conns == 0)
        pthread_cond_broadcast(&r->idle);
    pthread_mutex_unlock(&r->mu);
}

/* The registry relay's https gate: reads the request head (at most
 * LIM_APP_NPM_HEAD_BYTES, within LIM_APP_NPM_HEAD_S) and admits only
 * "CONNECT <connect_to> ..."; the tunnel goes to the registry's address
 * either way, so the gate only refuses what could not be the registry. */
static int connect_gate(struct pump *p)
{
    char head[LIM_APP_NPM_HEAD_BYTES + 1];
    size_t n = 0;
    int64_t until = clock_mono_ms() + LIM_APP_NPM_HEAD_S * 1000LL;
    for (;;) {
        struct pollfd pf = {.fd = p->a, .events = POLLIN};
        int64_t left = until - clock_mono_ms();
        if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
            return -1;
        ssize_t got = read(p->a, head + n, LIM_APP_NPM_HEAD_BYTES - n);
        if (got <= 0)
            return -1;
        n += (size_t)got;
        head[n] = '\0';
        if (strstr(head, "\r\n\r\n"))
            break;
        if (n == LIM_APP_NPM_HEAD_BYTES)
            return -1;
    }
    char want[340];
    snprintf(want, sizeof want, "CONNECT %s ", p->r->connect_to);
    const char *ans = strncmp(head, want, strlen(want)) == 0
                          ? "HTTP/1.1 200 Connection established\r\n\r\n"
                          : "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n";
    if (fdio_write_all(p->a, ans, strlen(ans), FDIO_NO_DEADLINE) != 0 || ans[9] != '2')
        return -1;
    /* Bytes past the head would be the client's TLS hello, sent before
     * the answer: a client does not, so they are refused. */
    return strlen(strstr(head, "\r\n\r\n")) == 4 ? 0 : -1;
}

/* Copies bytes both ways until either side closes. */
static void *pump_main(void *arg)
{
    struct pump *p = arg;
    if (p->r->connect_to[0] && connect_gate(p) != 0)
        goto out;
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
out:
    close(p->a);
    close(p->b);
    conn_release(p->r);
    xfree(p);
    return NULL;
}

static int connect_api(const struct relay *r)
{
    int fd = socket(r->to.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    if (r->from.sin_family == AF_INET &&
        (setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one) != 0 ||
         bind(fd, (const struct sockaddr *)&r->from, sizeof r->from) != 0)) {
        close(fd);
        return -1;
    }
    if (connect(fd, (const struct sockaddr *)&r->to, r->tolen) != 0) {
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
        if (!full && share_take(&app_pumps, r->org, r->run) != SHARE_OK) {
            pthread_mutex_lock(&r->mu);
            if (--r->conns == 0)
                pthread_cond_broadcast(&r->idle);
            pthread_mutex_unlock(&r->mu);
            full = 1;
        }
        int up = full ? -1 : connect_api(r);
        if (up < 0) {
            close(c);
            if (!full)
                conn_release(r);
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
            conn_release(r);
        }
        pthread_attr_destroy(&at);
    }
    return NULL;
}

/* Listens on 127.0.0.1:port inside sb's network namespace (port 0: any,
 * r->port tells which) and relays each connection to r->to, which the
 * caller set (with r->connect_to and r->from) before; r is cleared of
 * everything else. */
static int relay_start(struct relay *r, const struct sandbox *sb, int port, struct err *e)
{
    r->listen_fd = r->stop[0] = r->stop[1] = -1;
    r->conns = 0;
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
    socklen_t sl = sizeof sa;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0 || pipe2(r->stop, O_CLOEXEC) != 0) {
        int er = errno;
        close(fd);
        return err_set(e, E_INTERNAL, "internal", "apps: cannot open the API relay: %s",
                       strerror(er));
    }
    r->listen_fd = fd;
    r->port = ntohs(sa.sin_port);
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

/* ---- dependencies (npm ci, docs/apps.md "Dependencies") ---- */

static long long tree_bytes(const char *root)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/home/kernel/app", root);
    walk_total = 0;
    (void)nftw(dir, walk_add, 16, FTW_PHYS);
    return walk_total;
}

/* A lock file at the app's top and no node_modules/ there. */
static int needs_install(const char *root)
{
    char p[PATH_MAX];
    struct stat st;
    snprintf(p, sizeof p, "%s/home/kernel/app/package-lock.json", root);
    if (lstat(p, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    snprintf(p, sizeof p, "%s/home/kernel/app/node_modules", root);
    return lstat(p, &st) != 0 && errno == ENOENT;
}

/* Runs one process of the install in sb and waits for it: its stdout and
 * stderr appended to *log, its descriptor 3 (when result) into *result. */
static int install_step(const struct apprun_spec *s, const struct sandbox *sb, const char *ro,
                        const char *const *argv, const char *const *env, const char *input,
                        int64_t timeout_ms, struct proc_status *st, char **result, char **log,
                        struct err *e)
{
    struct proc_waiter w;
    proc_waiter_init(&w);
    const char *ros[] = {ro, SANDBOX_RUNTIME_JS, NULL};
    struct proc_spec ps = {
        .session_id = s->name,
        .sb = sb,
        .argv = argv,
        .env = env,
        .cwd = SANDBOX_HOME "/app",
        .timeout_ms = timeout_ms,
        .collect = LIM_APP_LOG_BYTES,
        .extra_ro = ros,
        .result_fd = result != NULL,
        .stdin_data = input ? input : "",
        .stdin_len = input ? strlen(input) : 0,
        .on_exit = proc_waiter_exited,
        .ctx = &w,
    };
    struct proc *p = NULL;
    int rc = proc_start(&ps, &p, e);
    if (rc == 0) {
        proc_waiter_wait(&w);
        proc_status(p, st);
        if (result)
            *result = dup_out(p, PROC_RESULT, NULL);
        char *o = dup_out(p, PROC_STDOUT, NULL), *er = dup_out(p, PROC_STDERR, NULL);
        char *l = xasprintf("%s%s%s", *log ? *log : "", o, er);
        xfree(*log);
        *log = l;
        xfree(o);
        xfree(er);
        proc_put(p);
    } else if (rc != E_UNAVAIL) {
        char why[ERR_MSG_MAX];
        snprintf(why, sizeof why, "%s", e->message);
        rc = err_set(e, E_INTERNAL, "internal", "apps: the install could not start: %s", why);
    }
    proc_waiter_destroy(&w);
    return rc;
}

/* The registry's address for the registry relay: scheme, host and port of
 * the URL (checked at the server's start), resolved here. */
static int registry_addr(const char *url, struct relay *r, int *https, struct err *e)
{
    *https = strncmp(url, "https://", 8) == 0;
    const char *h = url + (*https ? 8 : 7);
    size_t hl = strcspn(h, "/?#");
    char hostport[300], host[300], port[8];
    snprintf(hostport, sizeof hostport, "%.*s", (int)(hl < 299 ? hl : 299), h);
    const char *colon = hostport[0] == '[' ? strstr(hostport, "]:") : strrchr(hostport, ':');
    if (colon && hostport[0] == '[')
        colon++;
    if (colon) {
        snprintf(host, sizeof host, "%.*s", (int)(colon - hostport), hostport);
        snprintf(port, sizeof port, "%.6s", colon + 1);
    } else {
        snprintf(host, sizeof host, "%s", hostport);
        snprintf(port, sizeof port, "%s", *https ? "443" : "80");
    }
    size_t n = strlen(host);
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        memmove(host, host + 1, n - 2);
        host[n - 2] = '\0';
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    int g = getaddrinfo(host, port, &hints, &ai);
    if (g != 0 || !ai || ai->ai_addrlen > sizeof r->to) {
        if (ai)
            freeaddrinfo(ai);
        return err_set(e, E_INTERNAL, "internal",
                       "apps: the npm registry's host %s cannot be resolved: %s", host,
                       g ? gai_strerror(g) : "no address");
    }
    memcpy(&r->to, ai->ai_addr, ai->ai_addrlen);
    r->tolen = ai->ai_addrlen;
    freeaddrinfo(ai);
    if (*https && colon)
        snprintf(r->connect_to, sizeof r->connect_to, "%s", hostport);
    else if (*https)
        snprintf(r->connect_to, sizeof r->connect_to, "%.299s:%.7s", hostport, port);
    return 0;
}

/* Installs the app's dependencies into its node_modules/: first the
 * runner checks the lock file (mode "checklock": nothing is fetched from a
 * URL outside the registry), then `npm ci` runs as the app's user with the
 * registry relay as its only way out (--proxy/--https-proxy), within
 * LIM_APP_NPM_TIMEOUT_S. A refusal or a failed install fills out->result
 * with the runner's kind of answer ({ok: false, error}); *log gets the
 * output of both steps. */
static int install(const struct apprun_spec *s, struct sandbox *sb, const char *runner,
                   const char *dir, struct apprun_result *out, char **log, struct err *e)
{
    char input[1200];
    snprintf(input, sizeof input,
             "{\"mode\":\"checklock\",\"entrypoint\":\"package.json\",\"npm_registry\":\"%s\","
             "\"npm_lock_max\":%u}",
             s->npm_registry, LIM_APP_NPM_LOCK_BYTES);
    const char *check[] = {PWEXEC_NODE, "--no-warnings", runner, NULL};
    struct proc_status st = {0};
    char *res = NULL;
    int rc = install_step(s, sb, dir, check, NULL, input, LIM_APP_DISCOVER_TIMEOUT_S * 1000LL, &st,
                          &res, log, e);
    if (rc)
        return rc;
    if (!res)
        res = xstrdup("");
    if (strncmp(res, "{\"ok\":true", 10) != 0) {
        out->result = res[0] ? res
                             : xstrdup("{\"ok\":false,\"error\":\"checking package-lock.json "
                                       "failed: see the build log\"}");
        if (!res[0])
            xfree(res);
        return 0;
    }
    xfree(res);
    char nm[PATH_MAX];
    snprintf(nm, sizeof nm, "%s/home/kernel/app/node_modules", s->root_dir);
    if (mkdir(nm, 0755) != 0 || sandbox_chown_tree(sb, nm) != 0)
        return err_set(e, E_INTERNAL, "internal", "apps: cannot make the app's node_modules: %s",
                       strerror(errno));
    struct relay reg = {.listen_fd = -1};
    snprintf(reg.org, sizeof reg.org, "%s", s->org_id);
    snprintf(reg.run, sizeof reg.run, "%s", s->name);
    int https = 0;
    if ((rc = registry_addr(s->npm_registry, &reg, &https, e)) != 0 ||
        (rc = relay_start(&reg, sb, 0, e)) != 0)
        return rc;
    char proxy[64];
    snprintf(proxy, sizeof proxy, "http://127.0.0.1:%d/", reg.port);
    const char *npm[] = {PWEXEC_NODE,
                         APPRUN_NPM_CLI,
                         "ci",
                         "--ignore-scripts",
                         "--no-audit",
                         "--no-fund",
                         "--no-update-notifier",
                         "--registry",
                         s->npm_registry,
                         "--proxy",
                         proxy,
                         "--https-proxy",
                         proxy,
                         NULL};
    const char *env[] = {"npm_config_cache=" SANDBOX_HOME "/.npm", NULL};
    rc =
        install_step(s, sb, dir, npm, env, NULL, LIM_APP_NPM_TIMEOUT_S * 1000LL, &st, NULL, log, e);
    /* npm's children die with it; the relay then has no client left. */
    relay_stop(&reg);
    if (rc == 0 && (st.timed_out || st.exit_code != 0))
        out->result = st.timed_out
                          ? xasprintf("{\"ok\":false,\"error\":\"npm ci took longer than %d s\"}",
                                      LIM_APP_NPM_TIMEOUT_S)
                          : xasprintf("{\"ok\":false,\"error\":\"npm ci failed (exit status %d): "
                                      "see the build log\"}",
                                      st.exit_code);
    return rc;
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
    const char *runner = SANDBOX_RUNTIME_JS "/app-runner.mjs";
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
    snprintf(relay.org, sizeof relay.org, "%s", s->org_id);
    snprintf(relay.run, sizeof relay.run, "%s", s->name);
    struct sockaddr_in *api = (struct sockaddr_in *)&relay.to;
    api->sin_family = AF_INET;
    api->sin_port = htons((uint16_t)s->api_port);
    api->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    relay.tolen = sizeof *api;
    /* Its own loopback address per run (red team pass 45): the HTTP front's
     * per-address limit (BROWSERD_CONNECTIONS_PER_IP, 256) counts a run's
     * LIM_APP_RELAY_CONNS apart; on 127.0.0.1, four runs of one tenant held
     * every slot of that address, and with it every other client there (a
     * reverse proxy on the host: all of them). 65534 addresses in turn. */
    static atomic_uint run_seq;
    unsigned seq = atomic_fetch_add(&run_seq, 1) % 65534u + 1u;
    relay.from.sin_family = AF_INET;
    relay.from.sin_addr.s_addr = htonl((127u << 24) | (66u << 16) | (seq & 0xffffu));
    char *install_log = NULL;
    int installed = 0;
    if ((rc = sandbox_root_create(sb, s->root_dir, LIM_APP_FILES_BYTES, e)) == 0 &&
        (rc = unpack_app(s->root_dir, s->zip_path, s->unpacked_bytes, e)) == 0 && s->npm_registry &&
        needs_install(s->root_dir)) {
        rc = install(s, sb, runner, dir, out, &install_log, e);
        installed = rc == 0 && !out->result;
        if (installed && s->unpacked_bytes)
            *s->unpacked_bytes = tree_bytes(s->root_dir);
    }
    if (rc == 0 && !out->result && s->api_port)
        rc = relay_start(&relay, sb, s->api_port, e);
    struct proc *p = NULL;
    struct proc_waiter w;
    proc_waiter_init(&w);
    if (rc == 0 && !out->result) {
        const char *argv[] = {PWEXEC_NODE, "--no-warnings", runner, NULL};
        const char *ro[] = {dir, SANDBOX_RUNTIME_JS, NULL};
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
    if (rc == 0 && p) {
        proc_waiter_wait(&w);
        struct proc_status st;
        proc_status(p, &st);
        out->exit_code = st.exit_code;
        out->timed_out = st.timed_out;
        out->result = dup_out(p, PROC_RESULT, &out->result_truncated);
        char *o = dup_out(p, PROC_STDOUT, NULL), *er = dup_out(p, PROC_STDERR, NULL);
        out->log = xasprintf("%s%s%s", install_log ? install_log : "", o, er);
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
    if (rc == 0 && !out->log)
        out->log = install_log;
    else
        xfree(install_log);
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
