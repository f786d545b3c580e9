#include "runtime/sessmgr.h"

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/xalloc.h"
#include "proxy/cdp_client.h"
#include "runtime/sandbox.h"

#define STOP_GRACE_MS 2000

struct live {
    struct sessmgr *m;
    char id[32];
    char org_id[32];
    struct chromium *browser; /* NULL once ended */
    int remove_dir;
    int pooled;  /* a pool's browser: not counted against standalone sessions */
    int refs;    /* the manager's list holds one while listed */
    int clients; /* attached CDP clients */
    int64_t idle_since_ms;
    int timeout_s;
    long long final_uptime_ms;
    /* The browser's running time before the session began: a spare's time
     * waiting for a create is nobody's usage (live_uptime_from_now). */
    long long uptime_skip_ms;
    long long oom_seen; /* out-of-memory kills in the sandbox's cgroup seen so far */
    struct live *next;
};

struct reservation {
    char org_id[32];
    int n;
    struct reservation *next;
};

/* One pool's size, counted against its organization's limit. */
struct poolcap {
    char org_id[32];
    char pool_id[32];
    long long size;
    struct poolcap *next;
};

struct sessmgr {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct live *head;
    struct reservation *res;
    struct poolcap *pools;
    struct sessmgr_hooks hooks;
    pthread_t thread;
    int stopping;
};

/* ---- references ---- */

static void live_unref_locked(struct live *l)
{
    if (--l->refs > 0)
        return;
    chromium_free(l->browser);
    xfree(l);
}

void sessmgr_put(struct live *l)
{
    if (!l)
        return;
    struct sessmgr *m = l->m;
    pthread_mutex_lock(&m->mu);
    live_unref_locked(l);
    pthread_mutex_unlock(&m->mu);
}

struct live *sessmgr_get(struct sessmgr *m, const char *id)
{
    pthread_mutex_lock(&m->mu);
    struct live *l = m->head;
    while (l && strcmp(l->id, id) != 0)
        l = l->next;
    if (l)
        l->refs++;
    pthread_mutex_unlock(&m->mu);
    return l;
}

/* Unlinks l from the list (the caller then owns the list's reference). */
static void unlink_locked(struct sessmgr *m, struct live *l)
{
    for (struct live **pp = &m->head; *pp; pp = &(*pp)->next)
        if (*pp == l) {
            *pp = l->next;
            return;
        }
}

int live_ws_url(struct live *l, char *out, size_t cap)
{
    int rc = -1;
    pthread_mutex_lock(&l->m->mu);
    if (l->browser) {
        snprintf(out, cap, "%s", chromium_ws_url(l->browser));
        rc = 0;
    }
    pthread_mutex_unlock(&l->m->mu);
    return rc;
}

long long live_uptime_ms(struct live *l)
{
    pthread_mutex_lock(&l->m->mu);
    long long ms =
        l->browser ? chromium_uptime_ms(l->browser) - l->uptime_skip_ms : l->final_uptime_ms;
    pthread_mutex_unlock(&l->m->mu);
    return ms > 0 ? ms : 0;
}

void live_uptime_from_now(struct live *l)
{
    pthread_mutex_lock(&l->m->mu);
    l->uptime_skip_ms = l->browser ? chromium_uptime_ms(l->browser) : 0;
    pthread_mutex_unlock(&l->m->mu);
}

/* A browser's total running time less what came before its session. */
static long long session_uptime(const struct live *l, long long browser_ms)
{
    long long ms = browser_ms - l->uptime_skip_ms;
    return ms > 0 ? ms : 0;
}

void live_client_attached(struct live *l)
{
    pthread_mutex_lock(&l->m->mu);
    l->clients++;
    pthread_mutex_unlock(&l->m->mu);
}

void live_touch(struct live *l)
{
    pthread_mutex_lock(&l->m->mu);
    l->idle_since_ms = clock_mono_ms();
    pthread_mutex_unlock(&l->m->mu);
}

void live_client_detached(struct live *l)
{
    pthread_mutex_lock(&l->m->mu);
    if (l->clients > 0)
        l->clients--;
    l->idle_since_ms = clock_mono_ms();
    pthread_mutex_unlock(&l->m->mu);
}

void live_set_timeout(struct live *l, int timeout_s)
{
    pthread_mutex_lock(&l->m->mu);
    l->timeout_s = timeout_s;
    l->idle_since_ms = clock_mono_ms();
    pthread_mutex_unlock(&l->m->mu);
}

int live_with_browser(struct live *l, int (*fn)(void *, struct chromium *), void *ctx)
{
    pthread_mutex_lock(&l->m->mu);
    int rc = l->browser ? fn(ctx, l->browser) : E_NOTFOUND;
    pthread_mutex_unlock(&l->m->mu);
    return rc;
}

struct sandbox *live_sandbox_ref(struct live *l)
{
    pthread_mutex_lock(&l->m->mu);
    struct sandbox *sb = l->browser ? chromium_sandbox(l->browser) : NULL;
    if (sb)
        sandbox_ref(sb);
    pthread_mutex_unlock(&l->m->mu);
    return sb;
}

/* ---- reservations ---- */

static struct reservation *res_for(struct sessmgr *m, const char *org_id)
{
    for (struct reservation *r = m->res; r; r = r->next)
        if (strcmp(r->org_id, org_id) == 0)
            return r;
    return NULL;
}

static int count_locked(struct sessmgr *m, const char *org_id)
{
    int n = 0;
    for (struct live *l = m->head; l; l = l->next)
        n += !l->pooled && strcmp(l->org_id, org_id) == 0;
    return n;
}

/* The sum of org's pool sizes, except pool `except` (may be NULL). */
static long long poolcap_locked(struct sessmgr *m, const char *org_id, const char *except)
{
    long long n = 0;
    for (struct poolcap *p = m->pools; p; p = p->next)
        if (strcmp(p->org_id, org_id) == 0 && (!except || strcmp(p->pool_id, except) != 0))
            n += p->size;
    return n;
}

long long sessmgr_pool_capacity(struct sessmgr *m, const char *org_id)
{
    pthread_mutex_lock(&m->mu);
    long long n = poolcap_locked(m, org_id, NULL);
    pthread_mutex_unlock(&m->mu);
    return n;
}

int sessmgr_pool_set(struct sessmgr *m, const char *org_id, const char *pool_id, long long size,
                     long long limit, long long *pools, long long *sessions)
{
    pthread_mutex_lock(&m->mu);
    long long sum = poolcap_locked(m, org_id, pool_id) + size;
    struct reservation *r = res_for(m, org_id);
    long long live = count_locked(m, org_id) + (r ? r->n : 0);
    if (pools)
        *pools = sum;
    if (sessions)
        *sessions = live;
    /* Growing may not push live sessions and pools past the limit;
     * shrinking is always allowed. */
    struct poolcap *cur = m->pools;
    while (cur && strcmp(cur->pool_id, pool_id) != 0)
        cur = cur->next;
    int grows = !cur || size > cur->size;
    if (limit >= 0 && grows && sum + live > limit) {
        pthread_mutex_unlock(&m->mu);
        return E_FORBIDDEN;
    }
    struct poolcap *p = m->pools;
    while (p && strcmp(p->pool_id, pool_id) != 0)
        p = p->next;
    if (!p) {
        p = xcalloc(1, sizeof *p);
        snprintf(p->org_id, sizeof p->org_id, "%s", org_id);
        snprintf(p->pool_id, sizeof p->pool_id, "%s", pool_id);
        p->next = m->pools;
        m->pools = p;
    }
    p->size = size;
    pthread_mutex_unlock(&m->mu);
    return 0;
}

void sessmgr_pool_drop(struct sessmgr *m, const char *pool_id)
{
    pthread_mutex_lock(&m->mu);
    for (struct poolcap **pp = &m->pools; *pp; pp = &(*pp)->next)
        if (strcmp((*pp)->pool_id, pool_id) == 0) {
            struct poolcap *p = *pp;
            *pp = p->next;
            xfree(p);
            break;
        }
    pthread_mutex_unlock(&m->mu);
}

int sessmgr_reserve(struct sessmgr *m, const char *org_id, long long limit, long long *pools)
{
    pthread_mutex_lock(&m->mu);
    struct reservation *r = res_for(m, org_id);
    long long held = poolcap_locked(m, org_id, NULL);
    if (pools)
        *pools = held;
    long long used = count_locked(m, org_id) + (r ? r->n : 0) + held;
    if (limit >= 0 && used >= limit) {
        pthread_mutex_unlock(&m->mu);
        return E_LIMIT;
    }
    if (!r) {
        r = xcalloc(1, sizeof *r);
        snprintf(r->org_id, sizeof r->org_id, "%s", org_id);
        r->next = m->res;
        m->res = r;
    }
    r->n++;
    pthread_mutex_unlock(&m->mu);
    return 0;
}

static void unreserve_locked(struct sessmgr *m, const char *org_id)
{
    struct reservation *r = res_for(m, org_id);
    if (r && r->n > 0)
        r->n--;
}

void sessmgr_unreserve(struct sessmgr *m, const char *org_id)
{
    pthread_mutex_lock(&m->mu);
    unreserve_locked(m, org_id);
    pthread_mutex_unlock(&m->mu);
}

void sessmgr_add(struct sessmgr *m, const char *id, const char *org_id, struct chromium *c,
                 int timeout_s, int pooled)
{
    struct live *l = xcalloc(1, sizeof *l);
    l->m = m;
    snprintf(l->id, sizeof l->id, "%s", id);
    snprintf(l->org_id, sizeof l->org_id, "%s", org_id);
    l->browser = c;
    l->remove_dir = 0; /* browsers.c removes folders after the modules' ending hooks */
    l->pooled = pooled;
    l->refs = 1;
    l->timeout_s = timeout_s;
    l->idle_since_ms = clock_mono_ms();
    pthread_mutex_lock(&m->mu);
    if (!pooled)
        unreserve_locked(m, org_id);
    l->next = m->head;
    m->head = l;
    pthread_mutex_unlock(&m->mu);
}

int sessmgr_count(struct sessmgr *m, const char *org_id)
{
    pthread_mutex_lock(&m->mu);
    int n = count_locked(m, org_id);
    pthread_mutex_unlock(&m->mu);
    return n;
}

/* Takes the browser out of l (under the lock) so that it can be stopped
 * without holding the lock; records its final uptime. */
static struct chromium *take_browser_locked(struct live *l)
{
    struct chromium *c = l->browser;
    l->browser = NULL;
    if (c)
        l->final_uptime_ms = session_uptime(l, chromium_uptime_ms(c));
    return c;
}

/*
 * Asks Chromium to close itself over DevTools (Browser.close) and waits up to
 * grace_ms for it to exit. A clean close is what makes the browser write its
 * cookies and other state to the profile folder: signals to the process group
 * kill the process that holds them before it flushes (Chromium writes cookies
 * to disk only every 30 s otherwise). The signals of chromium_stop follow for
 * whatever did not exit.
 */
static void close_gracefully(struct chromium *c, int grace_ms)
{
    struct err e;
    err_init(&e);
    struct cdp_client *cc;
    int status;
    if (chromium_exited(c, &status) || cdp_client_open(chromium_ws_url(c), 1000, &cc, &e) != 0)
        return;
    json_t *ignored = NULL;
    int rc = cdp_client_call(cc, NULL, "Browser.close", NULL, 0, 0, &ignored, &e);
    cdp_client_close(cc);
    for (int waited = 0; rc == 0 && waited < grace_ms; waited += 20) {
        if (chromium_exited(c, &status))
            return;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* Every thread of a process (setpriority and sched_setscheduler act on
 * one thread, and Chromium's processes have dozens). */
static void idle_threads(long pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/task", pid);
    DIR *d = opendir(path);
    if (!d)
        return;
    const struct sched_param sp = {.sched_priority = 0};
    for (struct dirent *de; (de = readdir(d));) {
        long tid = strtol(de->d_name, NULL, 10);
        if (tid <= 0)
            continue;
        (void)setpriority(PRIO_PROCESS, (id_t)tid, 19);
        (void)sched_setscheduler((pid_t)tid, SCHED_IDLE, &sp);
    }
    closedir(d);
}

/*
 * A browser being stopped yields the CPU to the ones starting (issue 21:
 * teardown off the critical path). Its shutdown (flushing state, tearing down
 * renderers, the kernel freeing its memory, charged to the exiting tasks)
 * otherwise competes with the next create's launch on a small machine. Every
 * thread of its processes runs SCHED_IDLE (CPU only when nothing else wants
 * it; nice 19 too), and its cgroup is put in the background (cpu.idle, else
 * the lowest weight: sandbox_set_background). Processes it forks while
 * closing inherit the policy of the thread that forks. Best effort: an
 * unsandboxed browser's process group is found by its processes' group.
 */
static void lower_priority(struct chromium *c)
{
    struct sandbox *sb = chromium_sandbox(c);
    const char *dirs[4];
    int n = sb ? sandbox_cgroup_dirs(sb, dirs, 4) : 0;
    if (n == 0) {
        idle_threads((long)chromium_pid(c));
        (void)setpriority(PRIO_PGRP, (id_t)chromium_pid(c), 19);
        return;
    }
    (void)sandbox_set_background(sb, 1);
    char path[512];
    snprintf(path, sizeof path, "%s/cgroup.procs", dirs[0]);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    long pid;
    while (fscanf(f, "%ld", &pid) == 1)
        idle_threads(pid);
    fclose(f);
}

static long long stop_browser(struct chromium *c, int remove_dir)
{
    if (!c)
        return 0;
    lower_priority(c);
    close_gracefully(c, STOP_GRACE_MS);
    chromium_stop(c, STOP_GRACE_MS, remove_dir);
    long long up = chromium_uptime_ms(c);
    chromium_free(c);
    return up;
}

int sessmgr_end(struct sessmgr *m, const char *id, long long *uptime_ms)
{
    pthread_mutex_lock(&m->mu);
    struct live *l = m->head;
    while (l && strcmp(l->id, id) != 0)
        l = l->next;
    if (!l) {
        pthread_mutex_unlock(&m->mu);
        return E_NOTFOUND;
    }
    unlink_locked(m, l);
    struct chromium *c = take_browser_locked(l);
    int remove_dir = l->remove_dir;
    pthread_mutex_unlock(&m->mu);
    long long up = session_uptime(l, stop_browser(c, remove_dir));
    if (uptime_ms)
        *uptime_ms = up;
    sessmgr_put(l); /* the list's reference */
    return 0;
}

int sessmgr_take(struct sessmgr *m, const char *id, struct chromium **browser, long long *uptime_ms)
{
    pthread_mutex_lock(&m->mu);
    struct live *l = m->head;
    while (l && strcmp(l->id, id) != 0)
        l = l->next;
    if (!l) {
        pthread_mutex_unlock(&m->mu);
        return E_NOTFOUND;
    }
    unlink_locked(m, l);
    *browser = take_browser_locked(l);
    *uptime_ms = l->final_uptime_ms;
    pthread_mutex_unlock(&m->mu);
    sessmgr_put(l); /* the list's reference */
    return 0;
}

void sessmgr_stop_browser(struct chromium *c)
{
    (void)stop_browser(c, 0);
}

void sessmgr_discard_browser(struct chromium *c)
{
    if (!c)
        return;
    lower_priority(c);
    chromium_free(c); /* SIGKILL at once: chromium_free stops with no grace */
}

int sessmgr_replace(struct sessmgr *m, const char *id, struct chromium *c)
{
    struct live *l = sessmgr_get(m, id);
    if (!l)
        return E_NOTFOUND;
    pthread_mutex_lock(&m->mu);
    struct chromium *old = l->browser;
    l->browser = c;
    l->uptime_skip_ms = 0;
    pthread_mutex_unlock(&m->mu);
    stop_browser(old, 0);
    sessmgr_put(l);
    return 0;
}

/* ---- supervisor ---- */

struct ended {
    char id[32];
    char reason[128];
    long long uptime_ms;
    struct chromium *browser;
    int remove_dir;
    struct live *l;
};

struct oom {
    char id[32];
    long long kills;
};

static void *supervise(void *arg)
{
    struct sessmgr *m = arg;
    pthread_mutex_lock(&m->mu);
    while (!m->stopping) {
        struct timespec ts = clock_deadline(1000);
        pthread_cond_timedwait(&m->cv, &m->mu, &ts);
        if (m->stopping)
            break;
        int64_t now = clock_mono_ms();
        /* Collect what must end, then end it without holding the lock. */
        struct ended ends[64];
        size_t nend = 0;
        struct oom ooms[64];
        size_t noom = 0;
        for (struct live *l = m->head, *next; l && nend < 64; l = next) {
            next = l->next;
            int status = 0;
            const char *why = NULL;
            char buf[128];
            struct sandbox *sb = l->browser ? chromium_sandbox(l->browser) : NULL;
            long long kills = sb ? sandbox_oom_kills(sb) : 0;
            if (kills > l->oom_seen && noom < 64) {
                snprintf(ooms[noom].id, sizeof ooms[noom].id, "%s", l->id);
                ooms[noom++].kills = kills - l->oom_seen;
                l->oom_seen = kills;
            }
            if (l->browser && chromium_exited(l->browser, &status)) {
                if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && l->oom_seen > 0)
                    snprintf(buf, sizeof buf,
                             "browser exited: out of memory at the session's memory limit "
                             "(killed by signal %d)",
                             WTERMSIG(status));
                else if (WIFSIGNALED(status))
                    snprintf(buf, sizeof buf, "browser exited: killed by signal %d",
                             WTERMSIG(status));
                else
                    snprintf(buf, sizeof buf, "browser exited: status %d", WEXITSTATUS(status));
                why = buf;
            } else if (l->clients == 0 && l->timeout_s > 0 &&
                       now - l->idle_since_ms >= (int64_t)l->timeout_s * 1000) {
                why = "timeout";
            }
            if (!why)
                continue;
            struct ended *e = &ends[nend++];
            snprintf(e->id, sizeof e->id, "%s", l->id);
            snprintf(e->reason, sizeof e->reason, "%s", why);
            e->remove_dir = l->remove_dir;
            unlink_locked(m, l);
            e->browser = take_browser_locked(l);
            e->uptime_ms = l->final_uptime_ms;
            e->l = l;
        }
        pthread_mutex_unlock(&m->mu);
        for (size_t i = 0; i < noom; i++) {
            log_warn("session %s: %lld process(es) killed at the memory limit", ooms[i].id,
                     ooms[i].kills);
            if (m->hooks.on_oom)
                m->hooks.on_oom(m->hooks.ctx, ooms[i].id, ooms[i].kills);
        }
        for (size_t i = 0; i < nend; i++) {
            long long up = stop_browser(ends[i].browser, ends[i].remove_dir);
            if (up)
                ends[i].uptime_ms = session_uptime(ends[i].l, up);
            log_info("session %s ended: %s", ends[i].id, ends[i].reason);
            if (m->hooks.on_end)
                m->hooks.on_end(m->hooks.ctx, ends[i].id, ends[i].reason, ends[i].uptime_ms);
            sessmgr_put(ends[i].l);
        }
        pthread_mutex_lock(&m->mu);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

int sessmgr_start(const struct sessmgr_hooks *hooks, struct sessmgr **out, struct err *e)
{
    struct sessmgr *m = xcalloc(1, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    clock_cond_init(&m->cv);
    if (hooks)
        m->hooks = *hooks;
    if (pthread_create(&m->thread, NULL, supervise, m) != 0) {
        xfree(m);
        return err_set(e, E_INTERNAL, "internal", "cannot start the session supervisor");
    }
    *out = m;
    return 0;
}

void sessmgr_end_all(struct sessmgr *m, const char *reason)
{
    for (;;) {
        pthread_mutex_lock(&m->mu);
        struct live *l = m->head;
        if (!l) {
            pthread_mutex_unlock(&m->mu);
            break;
        }
        unlink_locked(m, l);
        struct chromium *c = take_browser_locked(l);
        int remove_dir = l->remove_dir;
        long long up = l->final_uptime_ms;
        pthread_mutex_unlock(&m->mu);
        long long total = stop_browser(c, remove_dir);
        if (m->hooks.on_end)
            m->hooks.on_end(m->hooks.ctx, l->id, reason, total ? session_uptime(l, total) : up);
        sessmgr_put(l);
    }
}

long long sessmgr_running(struct sessmgr *m)
{
    long long n = 0;
    pthread_mutex_lock(&m->mu);
    for (struct live *l = m->head; l; l = l->next)
        n++;
    pthread_mutex_unlock(&m->mu);
    return n;
}

void sessmgr_stop(struct sessmgr *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->stopping = 1;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    pthread_join(m->thread, NULL);
    sessmgr_end_all(m, "server stopped");
    while (m->pools) {
        struct poolcap *p = m->pools;
        m->pools = p->next;
        xfree(p);
    }
    while (m->res) {
        struct reservation *r = m->res;
        m->res = r->next;
        xfree(r);
    }
    pthread_mutex_destroy(&m->mu);
    pthread_cond_destroy(&m->cv);
    xfree(m);
}
