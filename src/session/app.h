/*
 * session/app: the server's shared state (struct app), made once by main.c
 * before serving and passed to every handler (rq->app), to the session layer
 * and to the modules' hooks. Its engines are created and stopped by main.c in
 * order; nothing here owns a thread. Fields are written before the HTTP
 * daemon starts and read-only afterwards, except where a field says how it
 * is guarded (relay_gate).
 */
#ifndef BD_SESSION_APP_H
#define BD_SESSION_APP_H

#include <pthread.h>

#include "core/limits.h"

/* Server-wide settings, read by the handlers and the session layer. */
struct app_config {
    char listen_host[64];
    int listen_port;
    char data_dir[1024];
    char public_url[512];
    char admin_token[LIM_TOKEN_BYTES];
    char chromium[1024];
    char region[32];
    char allow_loopback[1024];
    char allow_private[1024];   /* --allow-private CIDR[,CIDR...] */
    char managed_proxies[1024]; /* --managed-proxies FILE ("" = none) */
    char default_proxy[512];    /* --default-proxy [USER:PASS@]HOST:PORT ("" = none) */
    char proxy_ca_file[1024];   /* --proxy-ca-file: PEM roots for https upstreams ("" = system) */
    unsigned threads;
    int token_ttl_s; /* lifetime of the tokens in cdp_ws_url / webdriver_ws_url */
    /* The smallest timeout_seconds POST /browsers accepts
     * (BROWSERD_MIN_SESSION_TIMEOUT_SECONDS); 0 = SESSRULES_TIMEOUT_MIN. */
    int min_timeout_s;
    /* BROWSERD_APPS_NPM_REGISTRY: the only origin a deployment's
     * package-lock.json may resolve packages from (docs/apps.md). */
    char npm_registry[512];
};

struct audit;
struct bgjobs;
struct bidiopen;
struct body_budget;
struct fswatches;
struct node;
struct procjobs;
struct relay;
struct sessmgr;
struct spares;
struct viewers;
struct waker;
struct wdreg;
struct zipstreams;

struct app {
    struct store *store;
    struct app_config cfg;
    struct relay *relay; /* CDP relay engine; use through api_relay_attach */
    pthread_rwlock_t relay_gate;
    int relay_closed;
    /* Bytes of client messages the relay reassembles, per organization and
     * per session (LIM_RELAY_MSG_*; api_relay_charge). */
    struct body_budget *relay_org_bytes, *relay_session_bytes;
    struct sessmgr *sessions; /* live browsers */
    struct spares *spares;    /* pre-launched spare browsers (runtime/spares.h); NULL = none */
    struct node *node;        /* this process in a cluster (cluster/node.h); NULL = single node */
    unsigned char token_key[32];
    int stopping; /* set once the server received SIGTERM or SIGINT; __atomic */

    /* The engines of the handlers, made and stopped by main.c's table. */
    struct procjobs *procjobs;      /* parked exec/playwright requests (runtime/procjobs.h) */
    struct wdreg *drivers;          /* the sessions' ChromeDrivers (runtime/wdreg.h) */
    struct bidiopen *bidi_openings; /* BiDi connections' opening threads (proxy/bidiopen.h) */
    struct waker *log_waker;        /* wakes following log streams (runtime/waker.h) */
    struct viewers *viewers;        /* live view viewers (runtime/viewers.h) */
    struct zipstreams *zips;        /* download_dir_zip's streams (runtime/zipstreams.h) */
    struct fswatches *fs_watches;   /* the fs API's watches (runtime/fswatch.h) */
    struct audit *audit;            /* the audit log's writer (telemetry/audit.h) */
    struct bgjobs *cfgreg_jobs;     /* config registry analyses (runtime/bgjobs.h) */
};

#endif
