/*
 * browserd: the command line of OPERATOR.md.
 *
 *   browserd serve [flags]      run the server
 *   browserd admin ...          manage orgs and keys directly on the data folder
 *   browserd --help | version
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "runtime/admit.h"
#include "runtime/bgjobs.h"
#include "runtime/apprun.h"
#include "runtime/child.h"
#include "runtime/crlauncher.h"
#include "runtime/procjobs.h"
#include "runtime/wdreg.h"
#include "runtime/waker.h"
#include "runtime/viewers.h"
#include "runtime/zipstreams.h"
#include "runtime/fswatch.h"
#include "proxy/bidiopen.h"
#include "runtime/reaper.h"
#include "runtime/repl.h"
#include "runtime/spares.h"
#include "runtime/sandbox.h"
#include "runtime/sesshelp.h"
#include "session/recordings.h"
#include "api/api.h"
#include "api/authconn.h"
#include "api/computer.h"
#include "api/logs.h"
#include "api/webdriver.h"
#include "api/org.h"
#include "api/browsers.h"
#include "api/pools.h"
#include "cluster/forward.h"
#include "cluster/node.h"
#include "api/process.h"
#include "api/scrape.h"
#include "api/profiles.h"
#include "api/proxies.h"
#include "api/telemetry.h"
#include "api/apps.h"
#include "api/webmcp.h"
#include "api/cfgreg.h"
#include "api/audit.h"
#include "telemetry/audit.h"
#include "telemetry/telemetry.h"
#include "proxy/relay.h"
#include "proxy/selfrelay.h"
#include "runtime/sessmgr.h"
#include "domain/session_rules.h"
#include "core/limits.h"
#include "core/crypto.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/path.h"
#include "core/xalloc.h"

#ifndef BROWSERD_VERSION
#define BROWSERD_VERSION "0.0.0"
#endif

static const char usage[] =
    "usage:\n"
    "  browserd serve [--listen HOST:PORT] [--data DIR] [--public-url URL] [--admin-token TOKEN]\n"
    "                 [--chromium PATH] [--region REGION] [--allow-loopback HOST:PORT[,...]]\n"
    "                 [--allow-private CIDR[,...]] [--store URL] [--advertise URL] [--node-name "
    "NAME] [--spares N]\n"
    "  browserd admin org create --name NAME [--plan PLAN]          (prints the org as JSON)\n"
    "  browserd admin org update ORG_ID [--plan P] [--plan-status S] [--trial-plan P]\n"
    "                            [--trial-ends-at RFC3339] [--projects-enabled true|false]\n"
    "                            [--override PATH=JSON ...]\n"
    "  browserd admin key create --org ORG_ID [--project PROJECT_ID] [--name NAME]   (prints the "
    "key)\n"
    "  browserd --routes      (prints every route served, a line each: METHOD PATTERN AUTH,\n"
    "                          AUTH none, key or admin; routes answered 501 are left out)\n"
    "  browserd --help | browserd version\n"
    "\n"
    "Every serve flag has an environment variable: BROWSERD_LISTEN (default 127.0.0.1:8080),\n"
    "BROWSERD_DATA (./data), BROWSERD_PUBLIC_URL (http:// + the listen address),\n"
    "BROWSERD_ADMIN_TOKEN (unset: the admin API answers 404), BROWSERD_CHROMIUM\n"
    "(/usr/bin/chromium), BROWSERD_REGION (us-east), BROWSERD_ALLOW_LOOPBACK (empty),\n"
    "BROWSERD_ALLOW_PRIVATE (empty: sessions reach no private, shared, unique-local or\n"
    "reserved address; CIDR ranges they may reach directly, docs/operator.md).\n"
    "Also: BROWSERD_THREADS (HTTP worker threads, default one per CPU the server may run on,\n"
    "at most 16; launches and other slow calls run on threads of their own),\n"
    "BROWSERD_BOOTSTRAP_API_KEY,\n"
    "BROWSERD_LOG_LEVEL (debug|info|warn|error), BROWSERD_TOKEN_TTL_SECONDS (lifetime of the\n"
    "signed tokens in cdp_ws_url, default 86400), BROWSERD_SANDBOX (on|off: each session in\n"
    "its own sandbox, docs/sandbox.md; needs root). admin commands take --data DIR too.\n"
    "BROWSERD_MEMORY_OVERCOMMIT (default 16): the sessions' memory limits may add up to this\n"
    "times the host's memory; past it a create answers 503 (docs/sandbox.md).\n"
    "--spares N / BROWSERD_SPARES: pre-launched browsers kept for fast creates (default 2:\n"
    "one headful, one headless; 0 disables them; docs/spares.md).\n"
    "--store URL / BROWSERD_STORE: postgresql://... shares one database between nodes\n"
    "(default: SQLite in the data folder); --advertise URL / BROWSERD_ADVERTISE_URL (how other\n"
    "nodes reach this one; http:// + the listen address); --node-name NAME /\n"
    "BROWSERD_NODE_NAME (the host name); BROWSERD_NODE_LEASE_MS (node lease, default 10000;\n"
    "docs/multinode.md). admin commands read BROWSERD_STORE too.\n"
    "Relative paths in flags and variables are taken from the folder the server started in.\n"
    "Proxies: --managed-proxies FILE / BROWSERD_MANAGED_PROXIES (JSON {\"datacenter\": {\"host\",\n"
    "\"port\", \"username\"?, \"password\"?}, ...}), --default-proxy [USER:PASS@]HOST:PORT /\n"
    "BROWSERD_DEFAULT_PROXY (the default stealth proxy; unset: direct), --proxy-ca-file PEM /\n"
    "BROWSERD_PROXY_CA_FILE (roots trusted for https upstream proxies besides the system's).\n"
    "Hostile clients (docs/operator.md): BROWSERD_MAX_CONNECTIONS (default 8192),\n"
    "BROWSERD_CONNECTIONS_PER_IP (default 256; 0: no limit, behind a reverse proxy),\n"
    "BROWSERD_HEAD_TIMEOUT_SECONDS (default 10), BROWSERD_BODY_BUDGET_MB (request bodies held\n"
    "at once, default 512), BROWSERD_BODY_TENANT_MB (one organization's share, default 160),\n"
    "BROWSERD_BLOCKING_THREADS (threads for slow handlers such as launches, default 64).\n"
    "BROWSERD_METRICS_LISTEN (PORT or HOST:PORT; a bare port is on 127.0.0.1): GET /metrics\n"
    "there without the admin token (on the main address it needs the token; docs/operator.md).\n"
    "BROWSERD_AUDIT_RETENTION_SECONDS (audit log entries kept, default 7776000: 90 days).\n"
    "BROWSERD_AUDIT_SPOOL_MB (audit entries spooled while the store refuses them, 1..64, default\n"
    "64; past it changes are refused 503). BROWSERD_AUDIT_ROWS_PER_ORG (audit entries one\n"
    "organization keeps, its newest; 1..20000, default 20000).\n"
    "Shorter deadlines (docs/operator.md): BROWSERD_MIN_SESSION_TIMEOUT_SECONDS (the smallest\n"
    "timeout_seconds of a create, 1..10, default 10), BROWSERD_ZIP_IDLE_SECONDS (an unread\n"
    "download_dir_zip stream ends, 1..20, default 20). Smaller shares:\n"
    "BROWSERD_REPL_RUNNING_PER_ORG (REPL executions at once per organization, 1..8, default 8).\n"
    "BROWSERD_REPLAY_ORG_MB (finished replays one organization keeps on this host, its newest;\n"
    "1..8192, default 8192). BROWSERD_PROFILE_ORG_MB (saved profile archives one organization\n"
    "keeps on this host, 1..8192, default 8192). BROWSERD_REPLAY_ORG_COUNT (replays one\n"
    "organization keeps on this host, its newest; 1..10000, default 10000).\n"
    "BROWSERD_WEBMCP_SOURCE_MB (custom WebMCP tool "
    "sources the server\n"
    "holds, in millions of bytes, 1..160, default 160; an organization's share a fifth of it).\n"
    "BROWSERD_APPS_NPM_REGISTRY (the registry a deployment's package-lock.json may resolve\n"
    "from, default https://registry.npmjs.org/; docs/apps.md).\n"
    "Test mode only:\n"
    "BROWSERD_CHROMIUM_EXTRA_ARGS (extra Chromium flags; see docs/egress-proxy.md),\n"
    "BROWSERD_TEST_AUDIT_OUTAGE_FILE (while this file exists the audit store is taken as\n"
    "refusing every batch; docs/operator.md),\n"
    "BROWSERD_TEST_AUDIT_HOLD_FILE (while this file exists the audit writer leaves its queue\n"
    "alone; docs/operator.md),\n"
    "BROWSERD_TEST_SWEEP_STALL_NODE (a node name: after the sweep that declares it dead this\n"
    "node stops heartbeating and ending records; docs/operator.md).\n";

static int set_oom_score_adj(int adj)
{
    FILE *f = fopen("/proc/self/oom_score_adj", "we");
    if (!f)
        return -1;
    int ok = fprintf(f, "%d", adj) > 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static void copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

/* An integer setting from the environment: dflt when unset, else a number
 * in lo..hi. Returns 0, or -1 after saying what is wrong. */
static int env_long(const char *name, long dflt, long lo, long hi, long *out)
{
    const char *v = env_or(name, NULL);
    char *end = "";
    *out = v ? strtol(v, &end, 10) : dflt;
    if (*end || *out < lo || *out > hi) {
        fprintf(stderr, "browserd serve: %s must be an integer from %ld to %ld\n", name, lo, hi);
        return -1;
    }
    return 0;
}

/* Splits "HOST:PORT" or "[V6]:PORT". Returns 0 or -1. */
static int parse_listen(const char *s, char *host, size_t cap, int *port)
{
    const char *colon;
    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (!end || end[1] != ':')
            return -1;
        snprintf(host, cap, "%.*s", (int)(end - s - 1), s + 1);
        colon = end + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon)
            return -1;
        snprintf(host, cap, "%.*s", (int)(colon - s), s);
    }
    char *endp;
    long p = strtol(colon + 1, &endp, 10);
    if (*endp || colon[1] == '\0' || p < 0 || p > 65535)
        return -1;
    if (strcmp(host, "localhost") == 0)
        snprintf(host, cap, "127.0.0.1");
    *port = (int)p;
    return 0;
}

/* Resolves a path flag to an absolute path (program: a bare name is looked
 * up in PATH). Prints what is wrong and returns -1 on failure. */
static int resolve_path(const char *cmd, const char *name, const char *in, char *out, size_t cap,
                        int program)
{
    int rc = program ? path_program(in, out, cap) : path_absolute(in, out, cap);
    if (rc == 0)
        return 0;
    fprintf(stderr, "browserd %s: %s %s: %s\n", cmd, name, in,
            rc == -ENOENT ? "no such program in PATH" : strerror(-rc));
    return -1;
}

static int flag(int argc, char **argv, int *i, const char *name, const char **val)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0)
        return 0;
    if (argv[*i][n] == '=') {
        *val = argv[*i] + n + 1;
        return 1;
    }
    if (argv[*i][n] != '\0')
        return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "browserd: %s needs a value\n", name);
        exit(2);
    }
    *val = argv[++*i];
    return 1;
}

/* ---- serve ---- */

static int write_key_file(const char *dir, const char *key)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/bootstrap-api-key", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    size_t n = strlen(key);
    int ok = write(fd, key, n) == (ssize_t)n && write(fd, "\n", 1) == 1 && fchmod(fd, 0600) == 0 &&
             fsync(fd) == 0;
    close(fd);
    return ok ? 0 : -1;
}

/* First start on an empty data folder: org `default` on plan enterprise,
 * project `default`, one organization-scoped key. */
static int bootstrap(struct app *app)
{
    char done[8];
    if (store_meta_get(app->store, "bootstrapped", done, sizeof done) == 0)
        return 0;
    struct err e;
    err_init(&e);
    json_t *body = json_pack("{s:s,s:s}", "name", "default", "plan", "enterprise");
    json_t *org = NULL;
    int rc = tenancy_org_create(app->store, body, &org, &e);
    json_decref(body);
    if (rc) {
        log_error("bootstrap: %s", e.message);
        return rc;
    }
    char fresh[CRYPTO_KEY_LEN + 1];
    const char *key = getenv("BROWSERD_BOOTSTRAP_API_KEY");
    if (!key || !*key) {
        crypto_new_api_key(fresh);
        key = fresh;
    }
    struct apikey_rec rec;
    rc = tenancy_key_store(app->store, jsonx_str(org, "id"), "", "bootstrap", key, 0, 0, &rec);
    json_decref(org);
    if (rc) {
        log_error("bootstrap: the API key could not be stored (is it already in use?)");
        return rc;
    }
    if (write_key_file(app->cfg.data_dir, key) != 0)
        log_warn("bootstrap: cannot write %s/bootstrap-api-key", app->cfg.data_dir);
    char out[8];
    if (store_meta_init(app->store, "bootstrapped", "1", out, sizeof out))
        return E_INTERNAL;
    fprintf(
        stderr,
        "\nbrowserd: created organization 'default' (plan enterprise) with project "
        "'default'.\nbrowserd: API key (shown once; also in %s/bootstrap-api-key):\n\n    %s\n\n",
        app->cfg.data_dir, key);
    return 0;
}

/* The key that signs the tokens of cdp_ws_url and webdriver_ws_url: random,
 * made once, kept in the store so that URLs survive a restart. */
static int load_token_key(struct app *app)
{
    char hex[65], fresh[65];
    unsigned char raw[32];
    crypto_random(raw, sizeof raw);
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(fresh + 2 * i, 3, "%02x", raw[i]);
    if (store_meta_init(app->store, "token_key", fresh, hex, sizeof hex) != 0 ||
        strlen(hex) != 64) {
        log_error("cannot load the token key");
        return -1;
    }
    for (size_t i = 0; i < 32; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return -1;
        app->token_key[i] = (unsigned char)v;
    }
    return 0;
}

/* Every tunnel of the egress proxy holds six descriptors (two sockets, two
 * pipes), every browser a few more: lift the soft limit to the hard one. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max)
        return;
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
        log_info("open files limit raised from %llu to %llu", (unsigned long long)was,
                 (unsigned long long)rl.rlim_max);
}

/* Ends the records of background work that node (NULL: any, on one server)
 * started and no longer runs: a node restarted or died with them. */
static int end_orphans(struct app *app, const char *node, const char *code, const char *reason)
{
    int a = apps_end_orphans(app, node, reason);
    int b = authconn_end_orphans(app, node, code, reason);
    int c = cfgreg_end_orphans(app, node, code, reason);
    return a || b || c ? -1 : 0;
}

/* ---- cluster (a shared store) ---- */

static struct {
    const char *advertise; /* from argv or the environment */
    char name[256];
    long lease_ms;
    int failed;
} cluster_flags;

/* Fast (issue 30): every local browser is SIGKILLed and out of the session
 * list before this returns (their reaping follows on a thread of its own),
 * so the pools' ends find nothing left to close and the node registers again
 * at once. */
static void on_fence(void *ctx)
{
    struct app *app = ctx;
    sessmgr_kill_all(app->sessions, "node lost");
    pools_fence();
}

/* The background work of a node that died: its records end here, once
 * (the sweep gives each dead node to one sweeper). */
static int on_node_lost(void *ctx, const char *node)
{
    return end_orphans(ctx, node, "node_lost", "the node running it was lost");
}

/* An earlier run of this node's name, found at start: its sessions are
 * reaped, its background records ended. */
static void reap_node(void *ctx, const char *node)
{
    sess_reap_node(ctx, node);
    (void)end_orphans(ctx, node, "node_restarted", "the node running it restarted");
}

static int64_t on_running(void *ctx)
{
    return sessmgr_running(((struct app *)ctx)->sessions);
}

/* Registers this node once its port is known, before the first request is
 * served (node ids name the rows of the sessions it creates). */
static void join_cluster(struct app *app, int port)
{
    struct app_config *c = &app->cfg;
    char adv[512];
    if (cluster_flags.advertise)
        copy(adv, sizeof adv, cluster_flags.advertise);
    else if (strchr(c->listen_host, ':'))
        snprintf(adv, sizeof adv, "http://[%s]:%d", c->listen_host, port);
    else
        snprintf(adv, sizeof adv, "http://%s:%d", c->listen_host, port);
    struct node_opts o = {
        .store = app->store,
        .name = cluster_flags.name,
        .advertise = adv,
        .lease_ms = cluster_flags.lease_ms,
        .capacity = 0,
        .hooks = {.fence = on_fence,
                  .adopt = pools_adopt,
                  .lost = on_node_lost,
                  .running = on_running,
                  .ctx = app},
        .test_stall_after_sweep = env_or("BROWSERD_TEST_SWEEP_STALL_NODE", NULL),
    };
    if (o.test_stall_after_sweep && o.test_stall_after_sweep[0])
        log_warn("cluster: BROWSERD_TEST_SWEEP_STALL_NODE is set: a test switch; this node's "
                 "heartbeat stalls after a sweep that declares node %s dead",
                 o.test_stall_after_sweep);
    struct err e;
    err_init(&e);
    if (node_start(&o, reap_node, app, &app->node, &e) != 0) {
        log_error("%s", e.message);
        cluster_flags.failed = 1;
        return;
    }
    pools_adopt(app);
}

static int bootstrap_fn(void *ctx)
{
    return bootstrap(ctx);
}

/* The bound port is known before the first request: the public URL that
 * handlers read is set here, before the server's threads serve. */
static const char *public_url_flag;
static void on_bound(void *ctx, int port)
{
    struct app *app = ctx;
    struct app_config *c = &app->cfg;
    /* Read atomically by the egress's threads (egress_config.server_port),
     * which spares started before the daemon may already run. */
    __atomic_store_n(&c->listen_port, port, __ATOMIC_RELAXED);
    if (public_url_flag)
        copy(c->public_url, sizeof c->public_url, public_url_flag);
    else if (strchr(c->listen_host, ':'))
        snprintf(c->public_url, sizeof c->public_url, "http://[%s]:%d", c->listen_host, port);
    else
        snprintf(c->public_url, sizeof c->public_url, "http://%s:%d", c->listen_host, port);
    if (store_shared(app->store))
        join_cluster(app, port);
}

/* ---- serve: the engines' start and stop order ---- */

/* What the steps of serve share. */
struct serve {
    struct app app;
    const char *store_url;
    int nspares;
    long max_conns, per_ip, head_s, budget_mb, share_mb, blockers;
    long audit_retention_s; /* BROWSERD_AUDIT_RETENTION_SECONDS */
    long audit_spool_mb;    /* BROWSERD_AUDIT_SPOOL_MB */
    long audit_rows_org;    /* BROWSERD_AUDIT_ROWS_PER_ORG */
    long sessions_ended;    /* BROWSERD_SESSIONS_ENDED_KEPT (store.h) */
    int zip_idle_s;         /* BROWSERD_ZIP_IDLE_SECONDS (runtime/zipstreams.h) */
    double overcommit;      /* BROWSERD_MEMORY_OVERCOMMIT (runtime/admit.h) */
    sigset_t signals;       /* SIGTERM and SIGINT, taken by sigwait */
    struct sessmgr_hooks hooks;
    struct http_config hc;
    struct http_server *srv;
    /* BROWSERD_METRICS_LISTEN: GET /metrics without the admin token on an
     * address of its own (docs/operator.md "Metrics"); port -1 = none. */
    char metrics_host[256];
    int metrics_port;
    struct http_config mhc;
    struct http_server *msrv;
};

/* Reads serve's flags and variables into sv. 0, or the exit status (2) after
 * saying what is wrong. */
static int serve_flags(struct serve *sv, int argc, char **argv)
{
    struct app_config *c = &sv->app.cfg;
    const char *listen = env_or("BROWSERD_LISTEN", "127.0.0.1:8080");
    const char *data = env_or("BROWSERD_DATA", "./data");
    const char *public_url = env_or("BROWSERD_PUBLIC_URL", NULL);
    const char *admin = env_or("BROWSERD_ADMIN_TOKEN", NULL);
    const char *chromium = env_or("BROWSERD_CHROMIUM", "/usr/bin/chromium");
    const char *region = env_or("BROWSERD_REGION", "us-east");
    const char *loopback = env_or("BROWSERD_ALLOW_LOOPBACK", "");
    const char *lan = env_or("BROWSERD_ALLOW_PRIVATE", "");
    const char *managed = env_or("BROWSERD_MANAGED_PROXIES", "");
    const char *dproxy = env_or("BROWSERD_DEFAULT_PROXY", "");
    const char *proxy_ca = env_or("BROWSERD_PROXY_CA_FILE", "");
    const char *threads = env_or("BROWSERD_THREADS", NULL);
    const char *spares = env_or("BROWSERD_SPARES", NULL);
    sv->store_url = env_or("BROWSERD_STORE", "");
    const char *advertise = env_or("BROWSERD_ADVERTISE_URL", NULL);
    const char *node_name = env_or("BROWSERD_NODE_NAME", NULL);
    const char *lease = env_or("BROWSERD_NODE_LEASE_MS", NULL);
    for (int i = 0; i < argc; i++) {
        if (flag(argc, argv, &i, "--listen", &listen) || flag(argc, argv, &i, "--data", &data) ||
            flag(argc, argv, &i, "--public-url", &public_url) ||
            flag(argc, argv, &i, "--admin-token", &admin) ||
            flag(argc, argv, &i, "--chromium", &chromium) ||
            flag(argc, argv, &i, "--region", &region) ||
            flag(argc, argv, &i, "--allow-loopback", &loopback) ||
            flag(argc, argv, &i, "--allow-private", &lan) ||
            flag(argc, argv, &i, "--managed-proxies", &managed) ||
            flag(argc, argv, &i, "--default-proxy", &dproxy) ||
            flag(argc, argv, &i, "--proxy-ca-file", &proxy_ca) ||
            flag(argc, argv, &i, "--threads", &threads) ||
            flag(argc, argv, &i, "--spares", &spares) ||
            flag(argc, argv, &i, "--store", &sv->store_url) ||
            flag(argc, argv, &i, "--advertise", &advertise) ||
            flag(argc, argv, &i, "--node-name", &node_name))
            continue;
        fprintf(stderr, "browserd serve: unknown argument %s\n%s", argv[i], usage);
        return 2;
    }
    if (parse_listen(listen, c->listen_host, sizeof c->listen_host, &c->listen_port) != 0) {
        fprintf(stderr, "browserd serve: --listen must be HOST:PORT, got %s\n", listen);
        return 2;
    }
    /* A bare port is on the loopback: the metrics show the server's load to
     * whoever reaches them, so another interface is the operator's choice. */
    const char *mlisten = env_or("BROWSERD_METRICS_LISTEN", "");
    char mbuf[300];
    sv->metrics_port = -1;
    if (*mlisten) {
        snprintf(mbuf, sizeof mbuf, "%s%s", strchr(mlisten, ':') ? "" : "127.0.0.1:", mlisten);
        if (parse_listen(mbuf, sv->metrics_host, sizeof sv->metrics_host, &sv->metrics_port) != 0) {
            fprintf(stderr,
                    "browserd serve: BROWSERD_METRICS_LISTEN must be PORT or HOST:PORT, got %s\n",
                    mlisten);
            return 2;
        }
    }
    if (strcmp(region, "us-east") != 0 && strcmp(region, "eu-west") != 0 &&
        strcmp(region, "ap-southeast") != 0) {
        fprintf(stderr, "browserd serve: --region must be us-east, eu-west or ap-southeast\n");
        return 2;
    }
    char *end = "";
    long nthreads = threads ? strtol(threads, &end, 10) : (long)http_default_threads();
    if (*end || nthreads < 1 || nthreads > 256) {
        fprintf(stderr, "browserd serve: BROWSERD_THREADS must be 1..256\n");
        return 2;
    }
    c->threads = (unsigned)nthreads;
    sv->nspares = spares ? spares_parse_count(spares) : SPARES_DEFAULT;
    if (sv->nspares < 0) {
        fprintf(stderr, "browserd serve: --spares / BROWSERD_SPARES must be 0..%d\n", SPARES_MAX);
        return 2;
    }
    long lease_ms = NODE_LEASE_MS;
    if (lease &&
        ((lease_ms = strtol(lease, &end, 10)), *end || lease_ms < 500 || lease_ms > 600000)) {
        fprintf(stderr, "browserd serve: BROWSERD_NODE_LEASE_MS must be 500..600000\n");
        return 2;
    }
    if (advertise && strncmp(advertise, "http://", 7) != 0) {
        fprintf(stderr, "browserd serve: --advertise must be an http:// URL, got %s\n", advertise);
        return 2;
    }
    if (node_name)
        copy(cluster_flags.name, sizeof cluster_flags.name, node_name);
    else if (gethostname(cluster_flags.name, sizeof cluster_flags.name) != 0)
        copy(cluster_flags.name, sizeof cluster_flags.name, "browserd");
    cluster_flags.name[sizeof cluster_flags.name - 1] = '\0';
    cluster_flags.advertise = advertise;
    cluster_flags.lease_ms = lease_ms;
    const char *ttl = env_or("BROWSERD_TOKEN_TTL_SECONDS", "86400");
    long ttl_s = strtol(ttl, &end, 10);
    if (*end || ttl_s < 1 || ttl_s > 30L * 86400) {
        fprintf(stderr, "browserd serve: BROWSERD_TOKEN_TTL_SECONDS must be 1..2592000\n");
        return 2;
    }
    c->token_ttl_s = (int)ttl_s;
    /* Hostile clients (docs/operator.md): connections, head deadline, and
     * the budget of request bodies held in memory. */
    if (env_long("BROWSERD_MAX_CONNECTIONS", LIM_HTTP_CONNECTIONS, 16, 1000000, &sv->max_conns) ||
        env_long("BROWSERD_CONNECTIONS_PER_IP", LIM_HTTP_CONNECTIONS_PER_IP, 0, 1000000,
                 &sv->per_ip) ||
        env_long("BROWSERD_HEAD_TIMEOUT_SECONDS", LIM_HTTP_HEAD_SECONDS, 1, 3600, &sv->head_s) ||
        env_long("BROWSERD_BODY_BUDGET_MB", (long)(LIM_HTTP_BODY_BUDGET_BYTES >> 20), 1, 1L << 20,
                 &sv->budget_mb) ||
        env_long("BROWSERD_BODY_TENANT_MB", (long)(LIM_HTTP_BODY_TENANT_BYTES >> 20), 1,
                 sv->budget_mb, &sv->share_mb) ||
        env_long("BROWSERD_BLOCKING_THREADS", LIM_HTTP_BLOCKING_THREADS, 1,
                 LIM_HTTP_BLOCKING_THREADS, &sv->blockers) ||
        env_long("BROWSERD_AUDIT_RETENTION_SECONDS", AUDIT_RETENTION_DAYS_DEFAULT * 86400L, 1,
                 3650 * 86400L, &sv->audit_retention_s) ||
        env_long("BROWSERD_AUDIT_SPOOL_MB", (long)(LIM_AUDIT_SPOOL_BYTES >> 20), 1,
                 (long)(LIM_AUDIT_SPOOL_BYTES >> 20), &sv->audit_spool_mb) ||
        env_long("BROWSERD_AUDIT_ROWS_PER_ORG", LIM_AUDIT_ROWS_PER_ORG, 1, LIM_AUDIT_ROWS_PER_ORG,
                 &sv->audit_rows_org) ||
        env_long("BROWSERD_SESSIONS_ENDED_KEPT", LIM_SESSIONS_ENDED_KEPT, 1,
                 LIM_SESSIONS_ENDED_KEPT, &sv->sessions_ended))
        return 2;
    /* Shorter idle deadlines than the defaults (docs/operator.md), never
     * longer: a session's idle timeout and an unread zip stream's slot. */
    long min_timeout_s, zip_idle_s, repl_per_org, replay_org_mb, replay_org_count, profile_org_mb,
        webmcp_source_mb, telemetry_org_mb;
    if (env_long("BROWSERD_MIN_SESSION_TIMEOUT_SECONDS", SESSRULES_TIMEOUT_MIN,
                 SESSRULES_TIMEOUT_FLOOR, SESSRULES_TIMEOUT_MIN, &min_timeout_s) ||
        env_long("BROWSERD_ZIP_IDLE_SECONDS", LIM_FS_ZIP_IDLE_S, 1, LIM_FS_ZIP_IDLE_S,
                 &zip_idle_s) ||
        env_long("BROWSERD_REPL_RUNNING_PER_ORG", LIM_REPL_RUNNING_PER_ORG, 1,
                 LIM_REPL_RUNNING_PER_ORG, &repl_per_org) ||
        env_long("BROWSERD_REPLAY_ORG_MB", (long)(LIM_REPLAY_ORG_STORED_BYTES >> 20), 1,
                 (long)(LIM_REPLAY_ORG_STORED_BYTES >> 20), &replay_org_mb) ||
        env_long("BROWSERD_PROFILE_ORG_MB", (long)(LIM_PROFILE_ORG_BYTES >> 20), 1,
                 (long)(LIM_PROFILE_ORG_BYTES >> 20), &profile_org_mb) ||
        /* Read again by telemetry_opts_from_env; checked here so that a bad
         * value stops the server before it starts anything (exit 2). */
        env_long("BROWSERD_TELEMETRY_ORG_MB", (long)(LIM_TELEMETRY_ORG_STORED_BYTES >> 20), 1,
                 (long)(LIM_TELEMETRY_ORG_STORED_BYTES >> 20), &telemetry_org_mb) ||
        env_long("BROWSERD_REPLAY_ORG_COUNT", LIM_REPLAY_ORG_STORED_COUNT, 1,
                 LIM_REPLAY_ORG_STORED_COUNT, &replay_org_count) ||
        env_long("BROWSERD_WEBMCP_SOURCE_MB", LIM_WEBMCP_SOURCE_BYTES_ALL / 1000000, 1,
                 LIM_WEBMCP_SOURCE_BYTES_ALL / 1000000, &webmcp_source_mb))
        return 2;
    repl_set_org_cap((int)repl_per_org);
    sess_recordings_set_org_bytes((long long)replay_org_mb << 20);
    profiles_set_org_bytes((long long)profile_org_mb << 20);
    sess_recordings_set_org_count((int)replay_org_count);
    webmcp_set_source_budget((long long)webmcp_source_mb * 1000000);
    /* The registry deployments' lock files may name (docs/apps.md): an
     * http(s) origin, kept with one trailing slash. */
    const char *reg = env_or("BROWSERD_APPS_NPM_REGISTRY", "https://registry.npmjs.org/");
    size_t rl = strlen(reg);
    if ((strncmp(reg, "http://", 7) != 0 && strncmp(reg, "https://", 8) != 0) ||
        rl + 2 > sizeof c->npm_registry || strpbrk(reg, " \t\r\n\"\\") != NULL ||
        rl == (size_t)(strncmp(reg, "https://", 8) == 0 ? 8 : 7)) {
        fprintf(stderr,
                "BROWSERD_APPS_NPM_REGISTRY must be an http:// or https:// URL of at most "
                "%zu bytes\n",
                sizeof c->npm_registry - 2);
        return 2;
    }
    snprintf(c->npm_registry, sizeof c->npm_registry, "%s%s", reg, reg[rl - 1] == '/' ? "" : "/");
    c->min_timeout_s = (int)min_timeout_s;
    sv->zip_idle_s = (int)zip_idle_s;
    /* The sum of sessions' memory limits, as a multiple of the host's memory
     * (runtime/admit.h). */
    const char *oc = env_or("BROWSERD_MEMORY_OVERCOMMIT", NULL);
    sv->overcommit = oc ? strtod(oc, &end) : LIM_ADMIT_OVERCOMMIT_DEFAULT;
    if ((oc && *end) || !(sv->overcommit > 0) || sv->overcommit > LIM_ADMIT_OVERCOMMIT_MAX) {
        fprintf(stderr,
                "browserd serve: BROWSERD_MEMORY_OVERCOMMIT must be a number above 0, at "
                "most %g\n",
                LIM_ADMIT_OVERCOMMIT_MAX);
        return 2;
    }
    /* Every path once, at start (OPERATOR.md: relative to where we started). */
    if (resolve_path("serve", "--data", data, c->data_dir, sizeof c->data_dir, 0) != 0 ||
        resolve_path("serve", "--chromium", chromium, c->chromium, sizeof c->chromium, 1) != 0 ||
        resolve_path("serve", "--managed-proxies", managed, c->managed_proxies,
                     sizeof c->managed_proxies, 0) != 0 ||
        resolve_path("serve", "--proxy-ca-file", proxy_ca, c->proxy_ca_file,
                     sizeof c->proxy_ca_file, 0) != 0)
        return 2;
    /* Answers name the data folder <data>, never its host path. */
    err_hide_path(c->data_dir, "<data>");
    public_url_flag = public_url;
    copy(c->admin_token, sizeof c->admin_token, admin);
    copy(c->region, sizeof c->region, region);
    copy(c->allow_loopback, sizeof c->allow_loopback, loopback);
    copy(c->allow_private, sizeof c->allow_private, lan);
    copy(c->default_proxy, sizeof c->default_proxy, dproxy);

    return 0;
}

/* One engine of the server in the table below. Each step may be NULL.
 * init and start return 0, or the exit status (1, 2) after logging why. */
struct engine {
    const char *name;
    int (*init)(struct serve *sv);   /* in table order, before any start */
    int (*start)(struct serve *sv);  /* in table order, after every init */
    void (*drain)(struct serve *sv); /* in reverse: no new work, parked work answered */
    void (*stop)(struct serve *sv);  /* in reverse, after every drain */
};

/* Before any thread: the server's OOM score, then the watcher that ends our
 * browsers if we die. */
static int start_crash_watcher(struct serve *sv)
{
    (void)sv;
    struct err e;
    err_init(&e);
    /* Under memory pressure the kernel ends a session's process, not the
     * server (nor its watcher, forked next); sessions' processes run at
     * CHILD_OOM_SCORE_ADJ. Needs CAP_SYS_RESOURCE: a server not run as root
     * keeps its score. */
    int lowered = set_oom_score_adj(SERVER_OOM_SCORE_ADJ) == 0;
    child_oom_floor_held(lowered);
    if (!lowered && geteuid() == 0)
        log_warn("the server keeps its oom_score_adj (%s: lowering it takes CAP_SYS_RESOURCE); "
                 "its sessions' processes still run at %d, their browsers' sandboxes at %d",
                 strerror(errno), CHILD_OOM_SCORE_ADJ, CHILD_BROWSER_OOM_SCORE_ADJ);
    /* Before any thread: the watcher that ends our browsers if we die. */
    if (reaper_start(&e) != 0)
        log_warn("%s: browsers would outlive a crashed server", e.message);
    return 0;
}

/* The data folder holds the session folders whichever store is used (the
 * SQLite store also keeps its database there). */
static int open_store(struct serve *sv)
{
    struct app_config *c = &sv->app.cfg;
    if (mkdir(c->data_dir, 0700) != 0 && errno != EEXIST) {
        log_error("cannot create the data folder %s: %s", c->data_dir, strerror(errno));
        return 1;
    }
    struct err e;
    err_init(&e);
    if (store_open(sv->store_url, c->data_dir, &sv->app.store, &e) != 0) {
        log_error("%s", e.message);
        return 1;
    }
    sv->app.store->sessions_ended_kept = sv->sessions_ended;
    return 0;
}

static void close_store(struct serve *sv)
{
    store_close(sv->app.store);
}

/* The engines the handlers use through struct app (made here, started and
 * stopped by their own rows). */
static int make_handles(struct serve *sv)
{
    struct app *app = &sv->app;
    app->procjobs = procjobs_new();
    app->drivers = wdreg_new();
    app->bidi_openings = bidiopen_new();
    app->log_waker = waker_new(LOGS_POLL_MS);
    app->viewers = viewers_new();
    app->zips = zipstreams_new(sv->zip_idle_s);
    app->fs_watches = fswatches_new();
    app->cfgreg_jobs = bgjobs_new();
    return 0;
}

static void free_handles(struct serve *sv)
{
    struct app *app = &sv->app;
    procjobs_free(app->procjobs);
    bidiopen_free(app->bidi_openings);
    wdreg_free(app->drivers);
    waker_free(app->log_waker);
    viewers_free(app->viewers);
    zipstreams_free(app->zips);
    fswatches_free(app->fs_watches);
    bgjobs_free(app->cfgreg_jobs);
}

/* After the watcher (it must fork before any thread), before sessions. */
static int start_sandbox(struct serve *sv)
{
    const char *sbx = env_or("BROWSERD_SANDBOX", "on");
    if (strcmp(sbx, "on") != 0 && strcmp(sbx, "off") != 0) {
        fprintf(stderr, "browserd serve: BROWSERD_SANDBOX must be on or off\n");
        return 2;
    }
    (void)sandbox_init(strcmp(sbx, "off") == 0);
    struct admit_budget budget =
        admit_budget_for(admit_host_memory(), sv->overcommit, admit_host_pid_max());
    admit_configure(budget);
    if (sandbox_enabled())
        log_info("admission: sessions' memory limits up to %lld MiB together "
                 "(BROWSERD_MEMORY_OVERCOMMIT %g), pids limits up to %lld; one organization "
                 "at most %d%% of either",
                 budget.memory >> 20, sv->overcommit, budget.pids, LIM_ADMIT_ORG_SHARE_PCT);
    return 0;
}

/* Nodes starting together on an empty shared database bootstrap once. */
static int run_bootstrap(struct serve *sv)
{
    struct app *app = &sv->app;
    int boot = store_shared(app->store)
                   ? store_run_exclusive(app->store, "bootstrap", bootstrap_fn, app)
                   : bootstrap(app);
    return boot != 0 || load_token_key(app) != 0 ? 1 : 0;
}

/* Signals go to the main thread only: blocked before any thread starts. */
static int block_signals(struct serve *sv)
{
    sigemptyset(&sv->signals);
    sigaddset(&sv->signals, SIGTERM);
    sigaddset(&sv->signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sv->signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();
    return 0;
}

/* Modules that take part in sessions register (session/ext.h) before
 * recovery, so that their ending hooks run for recovered sessions. */
static int start_profiles(struct serve *sv)
{
    profiles_init(&sv->app);
    return 0;
}

static int start_proxies(struct serve *sv)
{
    struct err e;
    err_init(&e);
    if (proxies_init(&sv->app, &e) != 0) {
        log_error("%s", e.message);
        return 1;
    }
    return 0;
}

static void stop_proxies(struct serve *sv)
{
    (void)sv;
    proxies_fini();
}

static int start_telemetry(struct serve *sv)
{
    struct telemetry_opts topts;
    struct err e;
    err_init(&e);
    if (telemetry_opts_from_env(&topts, &e) != 0 ||
        telemetry_start(sv->app.store, &topts, &e) != 0) {
        log_error("%s", e.message);
        return 1;
    }
    session_ext_register(&telemetry_session_ext);
    return 0;
}

/* The audit log's writer: after the HTTP daemon stopped (its last
 * requests' entries queued), it writes what is queued, then stops. */
static int start_audit(struct serve *sv)
{
    struct err e;
    err_init(&e);
    /* A test switch (docs/operator.md): the audit store's outage, on while
     * the named file exists. */
    const char *outage = env_or("BROWSERD_TEST_AUDIT_OUTAGE_FILE", NULL);
    if (outage && *outage)
        log_warn("audit: BROWSERD_TEST_AUDIT_OUTAGE_FILE is set: a test switch; while %s exists "
                 "the audit log's store is taken as refusing every batch",
                 outage);
    if (audit_start(sv->app.store, (int64_t)sv->audit_retention_s * 1000, sv->audit_rows_org,
                    sv->app.cfg.data_dir, (int64_t)sv->audit_spool_mb << 20,
                    outage && *outage ? outage : NULL, &sv->app.audit, &e)) {
        log_error("%s", e.message);
        return 1;
    }
    const char *hold = env_or("BROWSERD_TEST_AUDIT_HOLD_FILE", NULL);
    if (hold && *hold) {
        log_warn("audit: BROWSERD_TEST_AUDIT_HOLD_FILE is set: a test switch; while %s exists "
                 "the audit writer leaves its queue alone",
                 hold);
        audit_test_hold(sv->app.audit, hold);
    }
    return 0;
}

static void stop_audit(struct serve *sv)
{
    audit_stop(sv->app.audit);
    sv->app.audit = NULL;
}

static void stop_telemetry(struct serve *sv)
{
    (void)sv;
    telemetry_stop();
}

/* Leaves the cluster (its pools go to another node); after sessmgr_stop. */
static void leave_cluster(struct serve *sv)
{
    node_stop(sv->app.node);
}

static int start_relay(struct serve *sv)
{
    struct err e;
    err_init(&e);
    if (relay_start(1, &sv->app.relay, &e) != 0) {
        log_error("%s", e.message);
        return 1;
    }
    api_relay_budgets_init(&sv->app);
    return 0;
}

/* Closes every relayed WebSocket (through the HTTP daemon, still running). */
static void drain_relay(struct serve *sv)
{
    api_relay_shutdown(&sv->app);
}

/* Requests and WebSockets forwarded to other nodes. */
static void drain_forwarding(struct serve *sv)
{
    (void)sv;
    forward_shutdown();
}

/* Browsers' handshakes with their own CDP relay, before the relay stops. */
static void drain_self_relay(struct serve *sv)
{
    (void)sv;
    selfrelay_fini();
}

/* Live view viewers' WebSockets. */
static void drain_live_view(struct serve *sv)
{
    viewers_stop(sv->app.viewers);
}

static int start_webdriver(struct serve *sv)
{
    webdriver_init(&sv->app);
    return 0;
}

/* BiDi connections in their opening exchange, then every driver (the
 * sessions' ending hooks then find none). */
static void drain_webdriver(struct serve *sv)
{
    bidiopen_stop(sv->app.bidi_openings);
    wdreg_stop_all(sv->app.drivers);
}

static int start_sessions(struct serve *sv)
{
    sv->hooks = (struct sessmgr_hooks){.on_end = sess_on_end,
                                       .on_oom = telemetry_on_oom_kill,
                                       .on_pressure_kill = telemetry_on_pressure_kill,
                                       .ctx = &sv->app};
    struct err e;
    err_init(&e);
    if (sessmgr_start(&sv->hooks, &sv->app.sessions, &e) != 0) {
        log_error("%s", e.message);
        return 1;
    }
    return 0;
}

/* Ends every session, recording its usage. */
static void stop_sessions(struct serve *sv)
{
    sessmgr_stop(sv->app.sessions);
}

/* No fence or adoption from here on (before sessmgr_stop). */
static void halt_cluster_node(struct serve *sv)
{
    node_halt(sv->app.node);
}

static int start_spares(struct serve *sv)
{
    struct err e;
    err_init(&e);
    if (sess_spares_start(&sv->app, sv->nspares, &e) != 0)
        log_warn("%s: creates launch cold", e.message); /* spares only make creates faster */
    return 0;
}

/* Before the modules whose ending hooks they run. */
static void stop_spares(struct serve *sv)
{
    sess_spares_stop(&sv->app);
}

static int init_pools(struct serve *sv)
{
    pools_init(&sv->app);
    return 0;
}

static int start_pools(struct serve *sv)
{
    if (pools_start(&sv->app) != 0) {
        log_error("pools: the engine cannot start");
        return 1;
    }
    return 0;
}

static void stop_pools(struct serve *sv)
{
    (void)sv;
    pools_stop();
}

static int start_authconn(struct serve *sv)
{
    if (authconn_start(&sv->app) != 0) {
        log_error("managed auth: the health checker cannot start");
        return 1;
    }
    return 0;
}

/* Before the pools and sessions its flows use. */
static void stop_authconn(struct serve *sv)
{
    (void)sv;
    authconn_stop();
}

static int init_computer(struct serve *sv)
{
    compapi_init(&sv->app);
    return 0;
}

static int start_log_waker(struct serve *sv)
{
    struct err e;
    err_init(&e);
    /* Without its thread, following log streams get no new lines. */
    (void)!waker_start(sv->app.log_waker, &e);
    return 0;
}

/* After the streams it wakes are gone. */
static void stop_log_waker(struct serve *sv)
{
    waker_stop(sv->app.log_waker);
}

/* App runs (docs/apps.md): killed at the drain, so that sync invocations
 * answer before the daemon stops; background ones are waited for before
 * the sessions and the store go. */
static void drain_app_runs(struct serve *sv)
{
    (void)sv;
    apprun_drain();
}

static void stop_app_runs(struct serve *sv)
{
    (void)sv;
    apprun_stop();
}

/* Browsers of a previous run that did not stop cleanly are ended before
 * anything new starts; Debian's launcher script is read once, before any
 * launch needs it. */
static int recover_sessions(struct serve *sv)
{
    sess_recover(&sv->app);
    if (!store_shared(sv->app.store))
        (void)end_orphans(&sv->app, NULL, "node_restarted", "the node running it restarted");
    (void)crlauncher_get(sv->app.cfg.chromium);
    return 0;
}

/* The watches' ticker, once no events stream is left (after the HTTP
 * daemon) and before the sessions end. */
static void stop_fs_watches(struct serve *sv)
{
    fswatches_stop(sv->app.fs_watches);
}

/* The config registry's analyses: asked to stop and waited for while the
 * sessions they made still run (they delete them), before the HTTP daemon
 * stops (nothing can start another then). */
static void drain_cfgreg_jobs(struct serve *sv)
{
    bgjobs_drain(sv->app.cfgreg_jobs, BGJOBS_DRAIN_MS);
}

static int start_http(struct serve *sv)
{
    struct app_config *c = &sv->app.cfg;
    sv->hc = (struct http_config){
        .host = c->listen_host,
        .port = c->listen_port,
        .threads = c->threads,
        .routes = api_routes,
        .nroutes = api_nroutes,
        .authorize = api_authorize,
        .rewrite = api_session_url_rewrite,
        .route_hook = api_route_hook,
        .answering = api_audit_answering,
        .completed = api_audit_completed,
        .cleanup = api_cleanup,
        .bound = on_bound,
        .app = &sv->app,
        .max_connections = (unsigned)sv->max_conns,
        .conns_per_ip = sv->per_ip ? (unsigned)sv->per_ip : HTTP_NO_LIMIT,
        .head_timeout_s = (unsigned)sv->head_s,
        .body_budget = (size_t)sv->budget_mb << 20,
        .body_share = (size_t)sv->share_mb << 20,
        .blocking_threads = (unsigned)sv->blockers,
        .buffer_streams = store_shared(sv->app.store),
        .metrics = 1,
    };
    struct err e;
    err_init(&e);
    if (http_start(&sv->hc, &sv->srv, &e) != 0) {
        log_error("%s", e.message);
        return 1;
    }
    return 0;
}

/* No new connections; requests in flight and upgraded connections go on. */
/* The metrics listener (BROWSERD_METRICS_LISTEN): one route, no key, one
 * thread; its requests are not counted in the metrics it serves. */
static const struct route metrics_routes[] = {
    {"GET", "/metrics", scrape_get, 0},
};

static int start_metrics_http(struct serve *sv)
{
    if (sv->metrics_port < 0)
        return 0;
    sv->mhc = (struct http_config){
        .host = sv->metrics_host,
        .port = sv->metrics_port,
        .threads = 1,
        .routes = metrics_routes,
        .nroutes = sizeof metrics_routes / sizeof metrics_routes[0],
        .app = &sv->app,
    };
    struct err e;
    err_init(&e);
    if (http_start(&sv->mhc, &sv->msrv, &e) != 0) {
        log_error("metrics listener: %s", e.message);
        return 1;
    }
    log_info("metrics listening on %s:%d", sv->metrics_host, http_port(sv->msrv));
    return 0;
}

static void stop_metrics_http(struct serve *sv)
{
    if (sv->msrv)
        http_stop(sv->msrv);
    sv->msrv = NULL;
}

static void quiesce_http(struct serve *sv)
{
    http_quiesce(sv->srv);
}

static void stop_http(struct serve *sv)
{
    http_stop(sv->srv);
}

/* The requests parked on the HTTP daemon are answered before it stops
 * taking connections: pool acquires (204), then exec and
 * playwright.execute (their processes are killed). */
static void answer_parked(struct serve *sv)
{
    pools_drain();
    procjobs_drain(sv->app.procjobs, PROCJOBS_DRAIN_MS);
}

/* The node registers once the port is bound (on_bound, inside http_start). */
static int check_cluster(struct serve *sv)
{
    (void)sv;
    return cluster_flags.failed ? 1 : 0;
}

/* The order in which serve starts its engines. Every init runs in this
 * order, then every start; at the stop (or when a step fails), the rows that
 * are up are drained in reverse, then stopped in reverse. A row is up once
 * its init ran (rows with a start: once its start ran). The order of the
 * stop is what clean stops need (60_durability, the SIGTERM tests):
 * parked requests answered, no new connections, upgraded connections closed
 * (through the still-running daemon), the daemon, then the engines, the
 * sessions (their usage recorded) and the store last. */
static const struct engine engines[] = {
    {"crash watcher", .init = start_crash_watcher},
    {"store", .init = open_store, .stop = close_store},
    {"engine handles", .init = make_handles, .stop = free_handles},
    {"sandbox", .init = start_sandbox},
    {"bootstrap", .init = run_bootstrap},
    {"signals", .init = block_signals},
    {"profiles", .init = start_profiles},
    {"proxies", .init = start_proxies, .stop = stop_proxies},
    {"telemetry", .init = start_telemetry, .stop = stop_telemetry},
    {"audit log", .init = start_audit, .stop = stop_audit},
    {"cluster node", .stop = leave_cluster},
    {"relay", .start = start_relay, .drain = drain_relay},
    {"forwarding", .drain = drain_forwarding},
    {"self relay", .drain = drain_self_relay},
    {"live view", .drain = drain_live_view},
    {"webdriver", .init = start_webdriver, .drain = drain_webdriver},
    {"sessions", .start = start_sessions, .stop = stop_sessions},
    {"cluster fence", .stop = halt_cluster_node},
    {"spares", .start = start_spares, .stop = stop_spares},
    {"pools", .init = init_pools, .start = start_pools, .stop = stop_pools},
    {"managed auth", .start = start_authconn, .stop = stop_authconn},
    {"computer", .init = init_computer},
    {"log waker", .init = start_log_waker, .stop = stop_log_waker},
    {"recovery", .init = recover_sessions},
    {"fs watches", .stop = stop_fs_watches},
    {"config registry", .drain = drain_cfgreg_jobs},
    {"app runs", .drain = drain_app_runs, .stop = stop_app_runs},
    {"http", .start = start_http, .drain = quiesce_http, .stop = stop_http},
    {"metrics listener", .start = start_metrics_http, .stop = stop_metrics_http},
    {"parked requests", .drain = answer_parked},
    {"cluster", .start = check_cluster},
};

/* Row i is up (to be drained and stopped) once its init ran, and, for a row
 * with a start, once its start ran. */
static int engine_up(size_t i, size_t inited, size_t started)
{
    return i < inited && (!engines[i].start || i < started);
}

static int cmd_serve(int argc, char **argv)
{
    static struct serve sv; /* the app outlives every thread that uses it */
    pthread_rwlock_init(&sv.app.relay_gate, NULL);
    int rc = serve_flags(&sv, argc, argv);
    if (rc)
        return rc;
    /* Nothing the server writes (the database, logs, session folders) is
     * readable by other users of the host, sessions' users included. */
    umask(077);
    /* The access log's writer (core/log.h): the last line it holds is
     * written before serve returns. */
    if (log_writer_start() != 0)
        log_warn("serve: no log writer thread: access log lines are written by the requests");
    const size_t n = sizeof engines / sizeof *engines;
    size_t inited = 0, started = 0;
    while (rc == 0 && inited < n)
        if (!engines[inited].init || (rc = engines[inited].init(&sv)) == 0)
            inited++;
    while (rc == 0 && started < n)
        if (!engines[started].start || (rc = engines[started].start(&sv)) == 0)
            started++;
    if (rc == 0) {
        struct app_config *c = &sv.app.cfg;
        log_info("browserd %s listening on %s:%d (public URL %s, data %s, %u threads)",
                 BROWSERD_VERSION, c->listen_host, http_port(sv.srv), c->public_url, c->data_dir,
                 c->threads);
        int sig = 0;
        sigwait(&sv.signals, &sig);
        __atomic_store_n(&sv.app.stopping, 1, __ATOMIC_RELAXED);
        log_info("received %s: finishing in-flight requests",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT");
    } else {
        log_debug("serve: %s did not start; stopping what did",
                  engines[inited < n ? inited : started].name);
    }
    for (size_t i = n; i-- > 0;)
        if (engine_up(i, inited, started) && engines[i].drain)
            engines[i].drain(&sv);
    for (size_t i = n; i-- > 0;)
        if (engine_up(i, inited, started) && engines[i].stop)
            engines[i].stop(&sv);
    log_writer_stop();
    if (rc == 0)
        log_info("stopped cleanly");
    return rc;
}

/* ---- admin ---- */

static struct store *admin_store(const char *data_flag)
{
    struct err e;
    err_init(&e);
    struct store *st;
    char data[PATH_MAX];
    if (resolve_path("admin", "--data", data_flag, data, sizeof data, 0) != 0)
        exit(2);
    if (store_open(getenv("BROWSERD_STORE"), data, &st, &e) != 0) {
        fprintf(stderr, "browserd admin: %s\n", e.message);
        exit(1);
    }
    return st;
}

static int admin_fail(const struct err *e)
{
    fprintf(stderr, "browserd admin: %s\n", e->message);
    for (size_t i = 0; i < e->ndetails; i++)
        fprintf(stderr, "  %s\n", e->details[i].message);
    return 1;
}

static void print_json(json_t *v)
{
    char *s = json_dumps(v, JSON_INDENT(2) | JSON_ENCODE_ANY);
    printf("%s\n", s ? s : "null");
    xfree(s);
}

/* Sets a dotted path ("limits.max_vaults") inside obj to val (stolen). */
static int set_path(json_t *obj, const char *path, json_t *val)
{
    char buf[256];
    copy(buf, sizeof buf, path);
    char *seg = buf;
    for (char *dot; (dot = strchr(seg, '.')) != NULL; seg = dot + 1) {
        *dot = '\0';
        if (!*seg)
            break;
        json_t *next = json_object_get(obj, seg);
        if (!json_is_object(next)) {
            next = json_object();
            json_object_set_new(obj, seg, next);
        }
        obj = next;
    }
    if (!*seg) {
        json_decref(val);
        return -1;
    }
    json_object_set_new(obj, seg, val);
    return 0;
}

static int cmd_admin(int argc, char **argv)
{
    const char *data = env_or("BROWSERD_DATA", "./data");
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    const char *what = argv[0], *verb = argv[1];
    const char *name = NULL, *plan = NULL, *status = NULL, *trial = NULL, *trial_end = NULL;
    const char *proj_enabled = NULL, *org = NULL, *project = NULL, *id = NULL;
    json_t *overrides = NULL;
    int rc = 0;
    for (int i = 2; i < argc; i++) {
        const char *v;
        if (flag(argc, argv, &i, "--data", &data) || flag(argc, argv, &i, "--name", &name) ||
            flag(argc, argv, &i, "--plan", &plan) ||
            flag(argc, argv, &i, "--plan-status", &status) ||
            flag(argc, argv, &i, "--trial-plan", &trial) ||
            flag(argc, argv, &i, "--trial-ends-at", &trial_end) ||
            flag(argc, argv, &i, "--projects-enabled", &proj_enabled) ||
            flag(argc, argv, &i, "--org", &org) || flag(argc, argv, &i, "--project", &project))
            continue;
        if (flag(argc, argv, &i, "--override", &v)) {
            const char *eq = strchr(v, '=');
            json_t *val =
                eq ? json_loads(eq + 1, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL) : NULL;
            char path[256];
            snprintf(path, sizeof path, "%.*s", eq ? (int)(eq - v) : 0, v);
            if (!overrides)
                overrides = json_object();
            if (!val || set_path(overrides, path, val) != 0) {
                fprintf(stderr, "browserd admin: --override takes PATH=JSON, got %s\n", v);
                json_decref(overrides);
                return 2;
            }
            continue;
        }
        if (argv[i][0] != '-' && !id) {
            id = argv[i];
            continue;
        }
        fprintf(stderr, "browserd admin: unknown argument %s\n", argv[i]);
        json_decref(overrides);
        return 2;
    }
    struct err e;
    err_init(&e);
    json_t *out = NULL;
    if (strcmp(what, "org") == 0 && strcmp(verb, "create") == 0) {
        if (!name) {
            fprintf(stderr, "browserd admin org create: --name is required\n");
            json_decref(overrides);
            return 2;
        }
        struct store *st = admin_store(data);
        json_t *body = json_pack("{s:s}", "name", name);
        if (plan)
            json_object_set_new(body, "plan", json_string(plan));
        if (overrides)
            json_object_set(body, "overrides", overrides);
        rc = tenancy_org_create(st, body, &out, &e);
        json_decref(body);
        store_close(st);
    } else if (strcmp(what, "org") == 0 && strcmp(verb, "update") == 0) {
        if (!id) {
            fprintf(stderr, "browserd admin org update: ORG_ID is required\n");
            json_decref(overrides);
            return 2;
        }
        struct store *st = admin_store(data);
        json_t *body = json_object();
        if (name)
            json_object_set_new(body, "name", json_string(name));
        if (plan)
            json_object_set_new(body, "plan", json_string(plan));
        if (status)
            json_object_set_new(body, "plan_status", json_string(status));
        if (trial)
            json_object_set_new(body, "trial_plan", *trial ? json_string(trial) : json_null());
        if (trial_end)
            json_object_set_new(body, "trial_ends_at",
                                *trial_end ? json_string(trial_end) : json_null());
        if (proj_enabled) {
            if (strcmp(proj_enabled, "true") != 0 && strcmp(proj_enabled, "false") != 0) {
                fprintf(stderr, "browserd admin: --projects-enabled takes true or false\n");
                json_decref(body);
                json_decref(overrides);
                store_close(st);
                return 2;
            }
            json_object_set_new(body, "projects_enabled",
                                json_boolean(strcmp(proj_enabled, "true") == 0));
        }
        if (overrides) {
            /* --override edits paths of the current document. */
            struct org_rec o;
            memset(&o, 0, sizeof o);
            json_t *cur = NULL;
            if (store_org_get(st, id, &o) == 0)
                cur = json_loads(o.overrides, 0, NULL);
            org_rec_clear(&o);
            if (!cur)
                cur = json_object();
            const char *k;
            json_t *v;
            json_object_foreach(overrides, k, v)
            {
                json_t *dst = json_object_get(cur, k);
                if (json_is_object(dst) && json_is_object(v) && strcmp(k, "features") == 0) {
                    const char *fk;
                    json_t *fv;
                    json_object_foreach(v, fk, fv)
                    {
                        json_t *df = json_object_get(dst, fk);
                        if (json_is_object(df) && json_is_object(fv))
                            json_object_update(df, fv);
                        else
                            json_object_set(dst, fk, fv);
                    }
                } else if (json_is_object(dst) && json_is_object(v)) {
                    json_object_update(dst, v);
                } else {
                    json_object_set(cur, k, v);
                }
            }
            json_object_set_new(body, "overrides", cur);
        }
        rc = tenancy_org_update(st, id, body, &out, &e);
        json_decref(body);
        store_close(st);
    } else if (strcmp(what, "key") == 0 && strcmp(verb, "create") == 0) {
        if (!org) {
            fprintf(stderr, "browserd admin key create: --org is required\n");
            json_decref(overrides);
            return 2;
        }
        struct store *st = admin_store(data);
        struct org_rec o;
        memset(&o, 0, sizeof o);
        rc = store_org_get(st, org, &o);
        org_rec_clear(&o);
        if (rc) {
            err_set(&e, rc, "not_found", "organization %s not found", org);
        } else {
            json_t *body = json_object();
            if (name)
                json_object_set_new(body, "name", json_string(name));
            if (project)
                json_object_set_new(body, "project_id", json_string(project));
            rc = tenancy_key_create(st, org, body, 0, &out, &e);
            json_decref(body);
        }
        store_close(st);
        if (rc == 0) {
            printf("%s\n", jsonx_str(out, "key"));
            json_decref(out);
            json_decref(overrides);
            return 0;
        }
    } else {
        fprintf(stderr, "browserd admin: unknown command %s %s\n%s", what, verb, usage);
        json_decref(overrides);
        return 2;
    }
    json_decref(overrides);
    if (rc)
        return admin_fail(&e);
    print_json(out);
    json_decref(out);
    return 0;
}

int main(int argc, char **argv)
{
    /* OpenSSL frees its global state at exit unless told not to, and a
     * detached thread still ending then (a session's background teardown,
     * which has used libpq or TLS) runs OpenSSL's per-thread cleanup
     * against a lock already freed. The process's exit frees it all
     * anyway. First, before any thread or library sets OpenSSL up. */
    (void)OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL);
    const char *lvl = getenv("BROWSERD_LOG_LEVEL");
    if (lvl)
        log_set_level(strcmp(lvl, "debug") == 0   ? LOG_DEBUG
                      : strcmp(lvl, "warn") == 0  ? LOG_WARN
                      : strcmp(lvl, "error") == 0 ? LOG_ERROR
                                                  : LOG_INFO);
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
        printf("browserd %s\n", BROWSERD_VERSION);
        return 0;
    }
    if (strcmp(argv[1], "--routes") == 0) {
        /* The route table as docs/openapi.yaml must describe it
         * (tests/blackbox/37_openapi.test.mjs compares the two). */
        for (size_t i = 0; i < api_nroutes; i++) {
            unsigned f = api_routes[i].flags;
            if (api_routes[i].fn != api_not_implemented)
                printf("%s %s %s\n", api_routes[i].method, api_routes[i].pattern,
                       (f & AUTH_ADMIN) ? "admin"
                       : (f & AUTH_KEY) ? "key"
                                        : "none");
        }
        return 0;
    }
    if (strcmp(argv[1], "serve") == 0)
        return cmd_serve(argc - 2, argv + 2);
    if (strcmp(argv[1], "admin") == 0)
        return cmd_admin(argc - 2, argv + 2);
    /* Not a user's command: the server runs it inside a session's cgroups
     * (runtime/sesshelp.h). */
    if (strcmp(argv[1], SESSHELP_COMMAND) == 0)
        return sesshelp_main(argc - 2, argv + 2);
    fprintf(stderr, "browserd: unknown command %s\n%s", argv[1], usage);
    return 2;
}
