/*
 * telemetry: sessions, rings, persistence, subscribers.
 *
 * One mutex (T.mu) guards the session table, every ring and every
 * subscriber list: each critical section is a few pointer moves, so the
 * relay thread never waits long. I/O happens outside it: the persister
 * thread writes batches to the store, the exporter (otlp.c) posts, capture
 * threads (capture.c) read the browser.
 */
#include "telemetry/telemetry.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/xalloc.h"
#include "domain/telemetry_cfg.h"
#include "telemetry/capture.h"
#include "telemetry/otlp.h"

#define BUCKETS           256
#define MAX_CLIENTS       64
#define SUB_CHUNK         (64u * 1024u)
#define STORE_BATCH       500
#define PERSIST_LINGER_MS 50

struct tevent {
    atomic_int refs;
    uint64_t seq;
    int64_t ts;
    enum telem_cat cat;
    char *text;
    size_t len;
};

struct tsess {
    char id[64];
    char org[64];
    unsigned mask;
    json_t *cfg; /* the active configuration (owned copy) or NULL */
    uint64_t last_seq, persisted_seq;
    struct tevent **ring;
    size_t ring_head, ring_n; /* oldest at ring_head */
    uint64_t excluded, commands;
    struct {
        const void *conn; /* the client connection */
        uint64_t excluded, commands;
        int64_t at_ms;
    } attach[MAX_CLIENTS]; /* each attached client's own counters */
    size_t nclients;
    struct telem_sub *subs;
    struct otlp_target *exp;
    struct capture *cap;
    unsigned cap_mask;
    char *ws_url;
    struct tsess *next;
};

struct telem_sub {
    char sid[64];
    uint64_t next_seq;
    unsigned mask;
    void (*wake)(void *);
    void *wake_ctx;
    struct tsess *sess; /* NULL once the session closed (under T.mu) */
    int64_t last_write_us;
    char *buf;
    size_t len, off;
    struct telem_sub *next;
};

struct pitem {
    char sid[64];
    char org[64];
    struct tevent *ev;
};

/* The bytes of stored events' data of one organization (the persister's
 * own: read and written by that thread only). */
struct orguse {
    char org[64];
    int64_t bytes;
    int64_t logged_ms; /* when its last trim was logged (one line a minute) */
    struct orguse *next;
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t persisted; /* broadcast after each store batch */
    pthread_mutex_t cap_mu;   /* serializes capture start/stop */
    struct tsess *b[BUCKETS];
    struct store *store;
    struct telemetry_opts opts;
    int started, stopping; /* under mu (the ticker reads stopping) */
    /* persister queue */
    pthread_mutex_t pmu;
    int pstopping; /* under pmu: the persister's own stop flag */
    pthread_cond_t pcv;
    struct pitem *pq;
    size_t pn, pcap;
    struct orguse *use[BUCKETS]; /* the persister thread's */
    pthread_t persister, ticker;
} T = {.mu = PTHREAD_MUTEX_INITIALIZER,
       .persisted = PTHREAD_COND_INITIALIZER,
       .cap_mu = PTHREAD_MUTEX_INITIALIZER,
       .pmu = PTHREAD_MUTEX_INITIALIZER,
       .pcv = PTHREAD_COND_INITIALIZER,
       .opts = {4096, 7LL * 24 * 3600 * 1000, 5000, 10000, LIM_TELEMETRY_ORG_STORED_BYTES}};

/* ---- options ---- */

void telemetry_opts_defaults(struct telemetry_opts *o)
{
    o->ring_events = 4096;
    o->retention_ms = 7LL * 24 * 3600 * 1000;
    o->screenshot_interval_ms = 5000;
    o->export_queue = 10000;
    o->org_stored_bytes = LIM_TELEMETRY_ORG_STORED_BYTES;
}

static int env_num(const char *name, long long lo, long long hi, long long *out, struct err *e)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    char *end;
    long long n = strtoll(v, &end, 10);
    if (*end || n < lo || n > hi)
        return err_set(e, E_INVALID, "bad_request", "%s must be an integer from %lld to %lld", name,
                       lo, hi);
    *out = n;
    return 1;
}

int telemetry_opts_from_env(struct telemetry_opts *o, struct err *e)
{
    telemetry_opts_defaults(o);
    long long n = 0;
    int rc;
    if ((rc = env_num("BROWSERD_TELEMETRY_RING_EVENTS", 16, 1000000, &n, e)) < 0)
        return rc;
    if (rc)
        o->ring_events = (size_t)n;
    if ((rc = env_num("BROWSERD_TELEMETRY_RETENTION_HOURS", 1, 24 * 3650, &n, e)) < 0)
        return rc;
    if (rc)
        o->retention_ms = n * 3600 * 1000;
    if ((rc = env_num("BROWSERD_TELEMETRY_SCREENSHOT_MS", 100, 3600000, &n, e)) < 0)
        return rc;
    if (rc)
        o->screenshot_interval_ms = (int)n;
    if ((rc = env_num("BROWSERD_TELEMETRY_EXPORT_QUEUE", 1, 10000000, &n, e)) < 0)
        return rc;
    if (rc)
        o->export_queue = (size_t)n;
    if ((rc = env_num("BROWSERD_TELEMETRY_ORG_MB", 1, LIM_TELEMETRY_ORG_STORED_BYTES >> 20, &n,
                      e)) < 0)
        return rc;
    if (rc)
        o->org_stored_bytes = (int64_t)n << 20;
    return 0;
}

const struct telemetry_opts *telemetry_options(void)
{
    return &T.opts;
}

/* ---- events and sessions ---- */

static void tev_unref(struct tevent *ev)
{
    if (ev && atomic_fetch_sub(&ev->refs, 1) == 1) {
        xfree(ev->text);
        xfree(ev);
    }
}

static unsigned bucket(const char *id)
{
    unsigned h = 2166136261u;
    for (; *id; id++)
        h = (h ^ (unsigned char)*id) * 16777619u;
    return h % BUCKETS;
}

static struct tsess *find(const char *id) /* under T.mu */
{
    for (struct tsess *s = T.b[bucket(id)]; s; s = s->next)
        if (strcmp(s->id, id) == 0)
            return s;
    return NULL;
}

static struct tevent *ring_at(const struct tsess *s, size_t i)
{
    return s->ring[(s->ring_head + i) % T.opts.ring_events];
}

static void wake_subs(struct tsess *s) /* under T.mu */
{
    for (struct telem_sub *u = s->subs; u; u = u->next)
        u->wake(u->wake_ctx);
}

/* Records an event already built (under T.mu); returns its seq. */
static uint64_t record(struct tsess *s, enum telem_cat cat, const char *name,
                       const struct telem_src *src, json_t *data)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t ts_us = (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000;
    int64_t ts = ts_us / 1000;
    json_t *ev = telem_event_json(s->id, cat, name, ts_us, src, data);
    struct tevent *e = xcalloc(1, sizeof *e);
    atomic_init(&e->refs, 1);
    e->seq = ++s->last_seq;
    e->ts = ts;
    e->cat = cat;
    e->text = jsonx_dump(ev);
    e->len = strlen(e->text);
    json_decref(ev);
    /* ring */
    size_t cap = T.opts.ring_events;
    if (s->ring_n == cap) {
        tev_unref(s->ring[s->ring_head]);
        s->ring_head = (s->ring_head + 1) % cap;
        s->ring_n--;
    }
    s->ring[(s->ring_head + s->ring_n) % cap] = e;
    s->ring_n++;
    /* export */
    if (s->exp)
        otlp_enqueue(s->exp, s->id, e->seq, ts, telem_cat_name(cat), name, e->text);
    /* persist */
    atomic_fetch_add(&e->refs, 1);
    pthread_mutex_lock(&T.pmu);
    if (T.pn == T.pcap) {
        T.pcap = T.pcap ? T.pcap * 2 : 256;
        T.pq = xrealloc(T.pq, T.pcap * sizeof *T.pq);
    }
    snprintf(T.pq[T.pn].sid, sizeof T.pq[0].sid, "%s", s->id);
    snprintf(T.pq[T.pn].org, sizeof T.pq[0].org, "%s", s->org);
    T.pq[T.pn++].ev = e;
    pthread_cond_signal(&T.pcv);
    pthread_mutex_unlock(&T.pmu);
    wake_subs(s);
    return e->seq;
}

uint64_t telemetry_emit(const char *session_id, enum telem_cat cat, const char *type, json_t *data)
{
    return telemetry_emit_src(session_id, cat, type, NULL, data);
}

uint64_t telemetry_emit_src(const char *session_id, enum telem_cat cat, const char *type,
                            const struct telem_src *src, json_t *data)
{
    pthread_mutex_lock(&T.mu);
    struct tsess *s = T.started ? find(session_id) : NULL;
    uint64_t seq = 0;
    if (s && (s->mask >> cat) & 1u)
        seq = record(s, cat, type, src, data);
    else
        json_decref(data);
    pthread_mutex_unlock(&T.mu);
    return seq;
}

static void set_cfg(struct tsess *s, const json_t *cfg) /* under T.mu */
{
    json_decref(s->cfg);
    s->cfg = cfg ? json_deep_copy(cfg) : NULL;
    s->mask = telem_cfg_mask(s->cfg);
}
/* capture's sink: its events enter the session's telemetry like any other. */
static void capture_sink(void *ctx, const char *session_id, enum telem_cat cat, const char *type,
                         const struct telem_src *src, json_t *data)
{
    (void)ctx;
    (void)telemetry_emit_src(session_id, cat, type, src, data);
}

/* Starts or stops browser-side capture to match the session's mask. */
static void sync_capture(const char *id)
{
    pthread_mutex_lock(&T.cap_mu);
    pthread_mutex_lock(&T.mu);
    struct tsess *s = find(id);
    unsigned want = s && s->ws_url ? s->mask & TELEM_BROWSER_MASK : 0;
    struct capture *old = NULL;
    char *url = NULL;
    if (s && want != s->cap_mask) {
        old = s->cap;
        s->cap = NULL;
        s->cap_mask = 0;
        url = want ? xstrdup(s->ws_url) : NULL;
    }
    pthread_mutex_unlock(&T.mu);
    capture_stop(old);
    if (url) {
        struct capture *c =
            capture_start(id, url, want, T.opts.screenshot_interval_ms, capture_sink, NULL);
        pthread_mutex_lock(&T.mu);
        s = find(id);
        if (s) {
            s->cap = c;
            s->cap_mask = c ? want : 0;
            c = NULL;
        }
        pthread_mutex_unlock(&T.mu);
        capture_stop(c);
        xfree(url);
    }
    pthread_mutex_unlock(&T.cap_mu);
}

void telemetry_session_open(const char *session_id, const char *org_id, const json_t *cfg,
                            const struct telem_export *exp, const char *browser_ws_url)
{
    int64_t max = 0;
    if (T.store && store_telem_events_max_seq(T.store, session_id, &max) != 0)
        max = 0;
    pthread_mutex_lock(&T.mu);
    if (!T.started) {
        pthread_mutex_unlock(&T.mu);
        return;
    }
    struct tsess *s = find(session_id);
    if (!s) {
        s = xcalloc(1, sizeof *s);
        snprintf(s->id, sizeof s->id, "%s", session_id);
        snprintf(s->org, sizeof s->org, "%s", org_id ? org_id : "");
        s->ring = xcalloc(T.opts.ring_events, sizeof *s->ring);
        s->last_seq = s->persisted_seq = (uint64_t)max;
        unsigned h = bucket(session_id);
        s->next = T.b[h];
        T.b[h] = s;
    }
    set_cfg(s, cfg);
    if (exp && exp->endpoint && !s->exp)
        s->exp =
            otlp_target_new(exp->dest_id ? exp->dest_id : "", org_id, exp->endpoint, exp->headers);
    if (browser_ws_url) {
        xfree(s->ws_url);
        s->ws_url = xstrdup(browser_ws_url);
    }
    pthread_mutex_unlock(&T.mu);
    sync_capture(session_id);
}

void telemetry_session_configure(const char *session_id, const json_t *cfg)
{
    pthread_mutex_lock(&T.mu);
    struct tsess *s = find(session_id);
    if (s)
        set_cfg(s, cfg);
    pthread_mutex_unlock(&T.mu);
    if (s)
        sync_capture(session_id);
}

int telemetry_flush(const char *session_id, int timeout_ms)
{
    struct timespec dl = clock_deadline(timeout_ms);
    pthread_mutex_lock(&T.mu);
    int rc = 0;
    for (;;) {
        struct tsess *s = find(session_id);
        if (!s || s->persisted_seq >= s->last_seq || !T.started)
            break;
        if (pthread_cond_timedwait(&T.persisted, &T.mu, &dl) != 0) {
            rc = -1;
            break;
        }
    }
    pthread_mutex_unlock(&T.mu);
    return rc;
}

void telemetry_session_close(const char *session_id)
{
    pthread_mutex_lock(&T.mu);
    struct tsess *s = find(session_id);
    if (s)
        s->mask = 0; /* nothing more is recorded */
    pthread_mutex_unlock(&T.mu);
    if (!s)
        return;
    sync_capture(session_id); /* stops capture: mask is 0 */
    if (telemetry_flush(session_id, 5000) != 0)
        log_warn("telemetry %s: events not yet persisted at close", session_id);
    pthread_mutex_lock(&T.mu);
    s = find(session_id);
    struct otlp_target *exp = NULL;
    if (s) {
        for (struct tsess **p = &T.b[bucket(session_id)]; *p; p = &(*p)->next)
            if (*p == s) {
                *p = s->next;
                break;
            }
        for (struct telem_sub *u = s->subs; u; u = u->next) {
            u->sess = NULL;
            u->wake(u->wake_ctx);
        }
        s->subs = NULL;
        for (size_t i = 0; i < s->ring_n; i++)
            tev_unref(ring_at(s, i));
        exp = s->exp;
        json_decref(s->cfg);
        xfree(s->ring);
        xfree(s->ws_url);
        xfree(s);
    }
    pthread_mutex_unlock(&T.mu);
    if (exp && otlp_drain(exp, 2000) != 0)
        log_warn("telemetry %s: OTLP export still pending at close", session_id);
    otlp_target_unref(exp);
}

/* ---- CDP relay hooks ---- */

static const struct telem_src relay_src = {"kernel_api", "cdp_proxy", 0};

/* The attached client conn of s, or NULL (T.mu held). */
static size_t client_slot(struct tsess *s, const void *conn)
{
    for (size_t i = 0; i < s->nclients; i++)
        if (s->attach[i].conn == conn)
            return i;
    return (size_t)-1;
}

void telemetry_cdp_command(const char *session_id, const void *conn, const char *method, size_t len)
{
    pthread_mutex_lock(&T.mu);
    struct tsess *s = find(session_id);
    if (s) {
        size_t i = client_slot(s, conn);
        s->commands++;
        if (i != (size_t)-1)
            s->attach[i].commands++;
        if (method && telcfg_is_cdp_method(method)) {
            if (telcfg_method_excluded(s->cfg, method)) {
                s->excluded++;
                if (i != (size_t)-1)
                    s->attach[i].excluded++;
            } else if ((s->mask >> TELEM_CONTROL) & 1u) {
                record(s, TELEM_CONTROL, "cdp_command", &relay_src,
                       json_pack("{s:s,s:I}", "method", method, "size", (json_int_t)len));
            }
        }
    }
    pthread_mutex_unlock(&T.mu);
}

void telemetry_cdp_client(const char *session_id, const void *conn, int attached,
                          uint64_t from_browser)
{
    pthread_mutex_lock(&T.mu);
    struct tsess *s = find(session_id);
    if (s && attached) {
        if (s->nclients < MAX_CLIENTS) {
            s->attach[s->nclients].conn = conn;
            s->attach[s->nclients].excluded = 0;
            s->attach[s->nclients].commands = 0;
            s->attach[s->nclients].at_ms = clock_now_ms();
            s->nclients++;
        }
        if ((s->mask >> TELEM_CONNECTION) & 1u)
            record(s, TELEM_CONNECTION, "cdp_connect", &relay_src,
                   json_pack("{s:I}", "clients", (json_int_t)s->nclients));
    } else if (s) {
        /* The leaving client's own counts: telemetry_excluded is the number
         * of its commands the exclusion list left out of cdp_command. */
        uint64_t ex = 0, cmds = 0;
        int64_t at = clock_now_ms();
        size_t i = client_slot(s, conn);
        if (i != (size_t)-1) {
            ex = s->attach[i].excluded;
            cmds = s->attach[i].commands;
            at = s->attach[i].at_ms;
            memmove(s->attach + i, s->attach + i + 1, (s->nclients - i - 1) * sizeof s->attach[0]);
            s->nclients--;
        }
        if ((s->mask >> TELEM_CONNECTION) & 1u)
            record(s, TELEM_CONNECTION, "cdp_disconnect", &relay_src,
                   json_pack("{s:I,s:I,s:I,s:s,s:I}", "telemetry_excluded", (json_int_t)ex,
                             "message_count", (json_int_t)(cmds + from_browser), "duration_ms",
                             (json_int_t)(clock_now_ms() - at), "reason", "client_close", "clients",
                             (json_int_t)s->nclients));
    }
    pthread_mutex_unlock(&T.mu);
}

/* ---- persister and ticker ---- */

static struct orguse *org_use(const char *org)
{
    unsigned h = bucket(org);
    for (struct orguse *u = T.use[h]; u; u = u->next)
        if (strcmp(u->org, org) == 0)
            return u;
    struct orguse *u = xcalloc(1, sizeof *u);
    snprintf(u->org, sizeof u->org, "%s", org);
    u->next = T.use[h];
    T.use[h] = u;
    return u;
}

static void org_use_clear(void)
{
    for (size_t b = 0; b < BUCKETS; b++)
        while (T.use[b]) {
            struct orguse *u = T.use[b];
            T.use[b] = u->next;
            xfree(u);
        }
}

static void org_use_add(void *ctx, const char *org, int64_t bytes)
{
    (void)ctx;
    org_use(org)->bytes = bytes;
}

/* Reads every organization's stored bytes again (at start and after each
 * purge by age, which frees bytes of unknown organizations). */
static void org_use_load(void)
{
    org_use_clear();
    if (store_telem_bytes_by_org(T.store, org_use_add, NULL) != 0)
        log_warn("telemetry: the stored events of each organization could not be measured");
}

/* An organization past its share of stored events (opts.org_stored_bytes):
 * its oldest events are deleted until it holds nine tenths of it, so the
 * newest are always stored and one tenant's events never take the disk
 * of the others (docs/telemetry.md "Persistence and retention"). */
static void org_use_trim(struct orguse *u)
{
    if (u->bytes <= T.opts.org_stored_bytes || !u->org[0])
        return;
    int64_t want = u->bytes - T.opts.org_stored_bytes / 10 * 9, freed = 0;
    if (store_telem_events_trim_org(T.store, u->org, want, &freed) != 0) {
        log_error("telemetry: the oldest events of organization %s could not be deleted", u->org);
        return;
    }
    int64_t now = clock_now_ms();
    if (now - u->logged_ms >= 60000) {
        u->logged_ms = now;
        log_info("telemetry: organization %s holds more than its share of stored events (%lld "
                 "bytes): its oldest events are deleted (%lld bytes now)",
                 u->org, (long long)T.opts.org_stored_bytes, (long long)freed);
    }
    /* Nothing left to delete (its sessions unknown to the store): counted
     * again at the next load. */
    u->bytes = freed > 0 ? u->bytes - freed : 0;
}

static void persist(struct pitem *items, size_t n)
{
    struct telem_event_rec *rows = xcalloc(STORE_BATCH, sizeof *rows);
    for (size_t i = 0; i < n;) {
        size_t k = 0;
        const char *sid = items[i].sid;
        struct orguse *u = org_use(items[i].org);
        while (i < n && k < STORE_BATCH && strcmp(items[i].sid, sid) == 0) {
            struct tevent *e = items[i].ev;
            u->bytes += (int64_t)e->len;
            rows[k].seq = (int64_t)e->seq;
            rows[k].ts = e->ts;
            snprintf(rows[k].category, sizeof rows[k].category, "%s", telem_cat_name(e->cat));
            rows[k].text = e->text;
            k++;
            i++;
        }
        if (store_telem_events_insert(T.store, sid, rows, k) != 0)
            log_error("telemetry %s: could not persist %zu events", sid, k);
        org_use_trim(u);
        pthread_mutex_lock(&T.mu);
        struct tsess *s = find(sid);
        if (s && (uint64_t)rows[k - 1].seq > s->persisted_seq)
            s->persisted_seq = (uint64_t)rows[k - 1].seq;
        pthread_mutex_unlock(&T.mu);
    }
    xfree(rows);
}

static void *persister(void *arg)
{
    (void)arg;
    int64_t next_purge = 0;
    for (;;) {
        pthread_mutex_lock(&T.pmu);
        if (T.pn == 0 && !T.pstopping) {
            struct timespec ts = clock_deadline(1000);
            pthread_cond_timedwait(&T.pcv, &T.pmu, &ts);
        }
        if (T.pn > 0 && T.pn < STORE_BATCH && !T.pstopping) {
            /* Linger so that a burst becomes one transaction (one fsync). */
            pthread_mutex_unlock(&T.pmu);
            usleep(PERSIST_LINGER_MS * 1000);
            pthread_mutex_lock(&T.pmu);
        }
        struct pitem *items = T.pq;
        size_t n = T.pn;
        int stop = T.pstopping && n == 0;
        T.pq = NULL;
        T.pn = T.pcap = 0;
        pthread_mutex_unlock(&T.pmu);
        if (n) {
            persist(items, n);
            for (size_t i = 0; i < n; i++)
                tev_unref(items[i].ev);
        }
        xfree(items);
        pthread_mutex_lock(&T.mu);
        pthread_cond_broadcast(&T.persisted);
        pthread_mutex_unlock(&T.mu);
        int64_t now = clock_now_ms();
        if (now >= next_purge) {
            int64_t deleted = 0;
            if (store_telem_events_purge(T.store, now - T.opts.retention_ms, &deleted) == 0 &&
                deleted > 0)
                log_info("telemetry: %lld events past retention deleted", (long long)deleted);
            org_use_load();
            next_purge = now + 60000;
        }
        if (stop)
            return NULL;
    }
}

/* Wakes subscribers that may owe a keepalive. */
static void *ticker(void *arg)
{
    (void)arg;
    for (;;) {
        for (int i = 0; i < 10; i++) {
            usleep(100000);
            pthread_mutex_lock(&T.mu);
            int stop = T.stopping;
            pthread_mutex_unlock(&T.mu);
            if (stop)
                return NULL;
        }
        int64_t now = clock_mono_us();
        pthread_mutex_lock(&T.mu);
        for (size_t b = 0; b < BUCKETS; b++)
            for (struct tsess *s = T.b[b]; s; s = s->next)
                for (struct telem_sub *u = s->subs; u; u = u->next)
                    if (now - u->last_write_us >= (int64_t)TELEM_KEEPALIVE_MS * 1000)
                        u->wake(u->wake_ctx);
        pthread_mutex_unlock(&T.mu);
    }
}

int telemetry_start(struct store *st, const struct telemetry_opts *o, struct err *e)
{
    clock_cond_init(&T.persisted);
    clock_cond_init(&T.pcv);
    T.store = st;
    if (o)
        T.opts = *o;
    if (T.opts.ring_events < 16)
        T.opts.ring_events = 16;
    int rc = otlp_start(T.opts.export_queue, e);
    if (rc)
        return rc;
    T.stopping = 0;
    T.pstopping = 0;
    if (pthread_create(&T.persister, NULL, persister, NULL) != 0) {
        otlp_stop();
        return err_set(e, E_INTERNAL, "internal", "telemetry: cannot start the persister thread");
    }
    if (pthread_create(&T.ticker, NULL, ticker, NULL) != 0) {
        pthread_mutex_lock(&T.pmu);
        T.pstopping = 1;
        pthread_cond_signal(&T.pcv);
        pthread_mutex_unlock(&T.pmu);
        pthread_join(T.persister, NULL);
        otlp_stop();
        return err_set(e, E_INTERNAL, "internal", "telemetry: cannot start the keepalive thread");
    }
    pthread_mutex_lock(&T.mu);
    T.started = 1;
    pthread_mutex_unlock(&T.mu);
    return 0;
}

void telemetry_stop(void)
{
    pthread_mutex_lock(&T.mu);
    if (!T.started) {
        pthread_mutex_unlock(&T.mu);
        return;
    }
    pthread_mutex_unlock(&T.mu);
    for (;;) {
        char id[64] = "";
        pthread_mutex_lock(&T.mu);
        for (size_t b = 0; b < BUCKETS && !id[0]; b++)
            if (T.b[b])
                snprintf(id, sizeof id, "%s", T.b[b]->id);
        pthread_mutex_unlock(&T.mu);
        if (!id[0])
            break;
        telemetry_session_close(id);
    }
    pthread_mutex_lock(&T.mu);
    T.started = 0;
    T.stopping = 1;
    pthread_mutex_unlock(&T.mu);
    pthread_mutex_lock(&T.pmu);
    T.pstopping = 1;
    pthread_cond_signal(&T.pcv);
    pthread_mutex_unlock(&T.pmu);
    pthread_join(T.persister, NULL);
    org_use_clear();
    pthread_join(T.ticker, NULL);
    otlp_stop();
}

/* ---- subscribers (SSE) ---- */

uint64_t telemetry_last_seq(const char *session_id)
{
    int64_t max = 0;
    pthread_mutex_lock(&T.mu);
    struct tsess *s = find(session_id);
    uint64_t seq = s ? s->last_seq : 0;
    pthread_mutex_unlock(&T.mu);
    if (!s && T.store && store_telem_events_max_seq(T.store, session_id, &max) == 0)
        seq = (uint64_t)max;
    return seq;
}

struct telem_sub *telemetry_sub_new(const char *session_id, uint64_t after_seq, unsigned cat_mask,
                                    void (*wake)(void *), void *wake_ctx)
{
    struct telem_sub *u = xcalloc(1, sizeof *u);
    snprintf(u->sid, sizeof u->sid, "%s", session_id);
    u->next_seq = after_seq + 1;
    u->mask = cat_mask;
    u->wake = wake;
    u->wake_ctx = wake_ctx;
    u->last_write_us = clock_mono_us();
    pthread_mutex_lock(&T.mu);
    struct tsess *s = find(session_id);
    if (s) {
        u->sess = s;
        u->next = s->subs;
        s->subs = u;
    }
    pthread_mutex_unlock(&T.mu);
    return u;
}

void telemetry_sub_free(struct telem_sub *u)
{
    if (!u)
        return;
    pthread_mutex_lock(&T.mu);
    if (u->sess)
        for (struct telem_sub **p = &u->sess->subs; *p; p = &(*p)->next)
            if (*p == u) {
                *p = u->next;
                break;
            }
    pthread_mutex_unlock(&T.mu);
    xfree(u->buf);
    xfree(u);
}

static void sub_append(struct telem_sub *u, uint64_t seq, const char *text, size_t len)
{
    size_t fl;
    char *f = telem_sse_frame(seq, text, len, &fl);
    u->buf = xrealloc(u->buf, u->len + fl);
    memcpy(u->buf + u->len, f, fl);
    u->len += fl;
    xfree(f);
}

/* Loads frames from the store (events older than the ring). Returns the
 * number of rows read (-1 on a store failure). */
static long sub_from_store(struct telem_sub *u)
{
    (void)telemetry_flush(u->sid, 2000);
    struct telem_query q = {.after_seq = (int64_t)u->next_seq - 1};
    struct page pg = {.limit = 100};
    struct telem_event_rec *rows = NULL;
    size_t n = 0;
    if (store_telem_events_list(T.store, u->sid, &q, &pg, &rows, &n) != 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        int c = telem_cat_parse(rows[i].category);
        if (c >= 0 && ((u->mask >> c) & 1u))
            sub_append(u, (uint64_t)rows[i].seq, rows[i].text, strlen(rows[i].text));
        u->next_seq = (uint64_t)rows[i].seq + 1;
        telem_event_rec_clear(&rows[i]);
    }
    xfree(rows);
    return (long)n;
}

long telemetry_sub_read(struct telem_sub *u, char *buf, size_t cap)
{
    for (int round = 0; round < 3; round++) {
        if (u->off < u->len) {
            size_t n = u->len - u->off < cap ? u->len - u->off : cap;
            memcpy(buf, u->buf + u->off, n);
            u->off += n;
            if (u->off == u->len)
                u->off = u->len = 0;
            pthread_mutex_lock(&T.mu);
            u->last_write_us = clock_mono_us();
            pthread_mutex_unlock(&T.mu);
            return (long)n;
        }
        pthread_mutex_lock(&T.mu);
        struct tsess *s = u->sess;
        int need_store = 0, live = s != NULL;
        if (s) {
            uint64_t oldest = s->ring_n ? ring_at(s, 0)->seq : s->last_seq + 1;
            if (u->next_seq < oldest && u->next_seq <= s->last_seq) {
                need_store = 1;
            } else {
                for (size_t i = 0; i < s->ring_n && u->len < SUB_CHUNK; i++) {
                    struct tevent *e = ring_at(s, i);
                    if (e->seq < u->next_seq)
                        continue;
                    if ((u->mask >> e->cat) & 1u)
                        sub_append(u, e->seq, e->text, e->len);
                    u->next_seq = e->seq + 1;
                }
            }
        }
        int64_t idle = clock_mono_us() - u->last_write_us;
        pthread_mutex_unlock(&T.mu);
        if (u->len)
            continue;
        if (need_store || !live) {
            long got = sub_from_store(u);
            if (got < 0 || (got == 0 && !live))
                return u->len ? 0 : -1; /* ended: everything was sent */
            if (got == 0 && need_store) {
                /* Nothing older is stored: continue from the ring. */
                pthread_mutex_lock(&T.mu);
                if (u->sess && u->sess->ring_n)
                    u->next_seq = ring_at(u->sess, 0)->seq;
                pthread_mutex_unlock(&T.mu);
            }
            continue;
        }
        if (idle >= (int64_t)TELEM_KEEPALIVE_MS * 1000) {
            static const char ka[] = ": keepalive\n\n";
            size_t n = sizeof ka - 1 < cap ? sizeof ka - 1 : cap;
            memcpy(buf, ka, n);
            pthread_mutex_lock(&T.mu);
            u->last_write_us = clock_mono_us();
            pthread_mutex_unlock(&T.mu);
            return (long)n;
        }
        return 0;
    }
    return u->off < u->len ? telemetry_sub_read(u, buf, cap) : 0;
}
