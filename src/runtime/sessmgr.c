#include "runtime/sessmgr.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/xalloc.h"
#include "domain/mem_pressure.h"
#include "proxy/cdp_client.h"
#include "runtime/sandbox.h"

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
    int spare_kind;              /* served by a spare of this kind (spares.h), plus one; 0: not */
    long long oom_seen;          /* out-of-memory kills in the sandbox's cgroup seen so far */
    struct memp_sample mem_last; /* the previous memory sample (mem_pressure) */
    int mem_ticks;               /* consecutive thrashing samples */
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
    int killings; /* sessmgr_kill_all threads still running */
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

void live_mark_spare(struct live *l, int kind)
{
    pthread_mutex_lock(&l->m->mu);
    l->spare_kind = kind + 1;
    pthread_mutex_unlock(&l->m->mu);
}

int sessmgr_count_spare(struct sessmgr *m, const char *org_id, int kind)
{
    int n = 0;
    pthread_mutex_lock(&m->mu);
    for (struct live *l = m->head; l; l = l->next)
        n += l->browser && l->spare_kind == kind + 1 && strcmp(l->org_id, org_id) == 0;
    pthread_mutex_unlock(&m->mu);
    return n;
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
 * Ending a browser (issue 30): save first, then kill fast.
 *
 * Browser.close over DevTools is what makes Chromium write its cookies and
 * other state to the profile folder (signals kill the process that holds
 * them before it flushes; it writes cookies only every 30 s otherwise), so a
 * browser is first asked to close and given CLOSE_GRACE_MS to exit by
 * itself, at the priority it ran at: on a busy host a browser lowered to the
 * idle CPU class before its close was killed before it had written anything,
 * and the next session with the profile found neither cookie nor storage.
 * Its own exit is the signal that the state is on disk (*closed). Whatever did
 * not exit by then is killed with SIGKILL, never from the idle class: a
 * killed process must still run to exit (the kernel frees its memory in its
 * context), and from SCHED_IDLE or cpu.idle it could not on a busy host.
 * A spare or pool browser waiting in the background (sandbox_set_background)
 * is lifted first for the same reason. What follows the exit (archiving the
 * profile, removing folders) is the caller's and may run at a lower
 * priority then.
 */
#define CLOSE_GRACE_MS 30000

/* Lifts c out of the background CPU class (a spare's, a pool's) so that its
 * close and its kill run. */
static void normal_priority(struct chromium *c)
{
    struct sandbox *sb = chromium_sandbox(c);
    if (sb)
        (void)sandbox_set_background(sb, 0);
}

/* Sends Browser.close to c without waiting for the answer; 0 when sent. */
static int ask_close(struct chromium *c)
{
    struct err e;
    err_init(&e);
    struct cdp_client *cc;
    int status;
    if (chromium_exited(c, &status) || cdp_client_open(chromium_ws_url(c), 1000, &cc, &e) != 0)
        return -1;
    int rc = cdp_client_call(cc, NULL, "Browser.close", NULL, 0, 0, NULL, &e);
    cdp_client_close(cc);
    return rc;
}

/* Ends n browsers together: each is asked to close (ask_close), all are
 * waited for until the grace runs out, the rest is killed. closed[i] (may be
 * NULL) says whether browser i exited by itself after the request, its state
 * written. grace_ms 0: killed at once. Frees the browsers; uptimes[i]
 * receives each one's running time. */
static void stop_browsers(struct chromium **cs, size_t n, const int *remove_dir, int grace_ms,
                          int *closed, long long *uptimes)
{
    int asked[64];
    int status;
    for (size_t done = 0; done < n; done += 64) {
        size_t k = n - done < 64 ? n - done : 64;
        struct chromium **c = cs + done;
        for (size_t i = 0; i < k; i++) {
            asked[i] = 0;
            if (!c[i])
                continue;
            normal_priority(c[i]);
            asked[i] = grace_ms > 0 && ask_close(c[i]) == 0;
        }
        int64_t deadline = clock_mono_ms() + grace_ms;
        for (;;) {
            int waiting = 0;
            for (size_t i = 0; i < k; i++)
                waiting |= asked[i] && !chromium_exited(c[i], &status);
            if (!waiting || clock_mono_ms() >= deadline)
                break;
            struct timespec ts = {0, 20 * 1000000L};
            nanosleep(&ts, NULL);
        }
        for (size_t i = 0; i < k; i++) {
            if (closed)
                closed[done + i] = !c[i] || (asked[i] && chromium_exited(c[i], &status));
            if (!c[i]) {
                uptimes[done + i] = 0;
                continue;
            }
            /* Grace 0: SIGKILL to the group at once if it still runs. */
            chromium_stop(c[i], 0, remove_dir[done + i]);
            uptimes[done + i] = chromium_uptime_ms(c[i]);
            chromium_free(c[i]);
        }
    }
}

/* One browser (stop_browsers); the uptime. */
static long long stop_browser(struct chromium *c, int remove_dir, int *closed)
{
    long long up = 0;
    stop_browsers(&c, 1, &remove_dir, CLOSE_GRACE_MS, closed, &up);
    return up;
}

/* The end reason of a session whose browser did not close by itself: its
 * state was not written, so nothing of it is saved (the profile hook saves
 * only on the plain reasons) and the record says why. */
static const char *unsaved_reason(const char *reason, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s; the browser did not close cleanly, its state was not saved", reason);
    return buf;
}

int sessmgr_end(struct sessmgr *m, const char *id, long long *uptime_ms, int *closed)
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
    int shut = 0;
    long long up = session_uptime(l, stop_browser(c, remove_dir, &shut));
    if (closed)
        *closed = shut;
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
    (void)stop_browser(c, 0, NULL);
}

void sessmgr_discard_browser(struct chromium *c)
{
    if (!c)
        return;
    normal_priority(c);
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
    (void)stop_browser(old, 0, NULL);
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

struct pressed {
    char id[32];
    struct sandbox_oom victim;
};

/* Samples l's memory cgroup and kills its largest task once thrashing has
 * lasted (domain/mem_pressure.h); 1 with *victim filled when it did. */
static int relieve_pressure(struct live *l, struct sandbox *sb, struct sandbox_oom *victim)
{
    struct memp_sample now;
    if (!sb || sandbox_memory_sample(sb, &now) != 0)
        return 0;
    int thrashing = memp_thrashing(l->mem_last.at_ms ? &l->mem_last : NULL, &now);
    l->mem_last = now;
    return memp_kill_due(&l->mem_ticks, thrashing) && sandbox_kill_largest(sb, victim) == 0;
}

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
        struct pressed press[16];
        size_t npress = 0;
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
                metrics_add(METRICS_OOM_KILLS, (uint64_t)(kills - l->oom_seen));
                l->oom_seen = kills;
            }
            if (npress < 16 && relieve_pressure(l, sb, &press[npress].victim))
                snprintf(press[npress++].id, sizeof press[0].id, "%s", l->id);
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
        for (size_t i = 0; i < npress; i++) {
            log_warn("session %s: thrashing at its memory limit: killed %s (pid %d, %lld kB)",
                     press[i].id, press[i].victim.process_name, press[i].victim.pid,
                     press[i].victim.rss_kb);
            if (m->hooks.on_pressure_kill)
                m->hooks.on_pressure_kill(m->hooks.ctx, press[i].id, &press[i].victim);
        }
        for (size_t i = 0; i < noom; i++) {
            log_warn("session %s: %lld process(es) killed at the memory limit", ooms[i].id,
                     ooms[i].kills);
            if (m->hooks.on_oom)
                m->hooks.on_oom(m->hooks.ctx, ooms[i].id, ooms[i].kills);
        }
        /* Closed together: one session's 30 s close does not hold the next. */
        struct chromium *cs[64];
        int rd[64], closed[64];
        long long ups[64];
        for (size_t i = 0; i < nend; i++) {
            cs[i] = ends[i].browser;
            rd[i] = ends[i].remove_dir;
        }
        stop_browsers(cs, nend, rd, CLOSE_GRACE_MS, closed, ups);
        for (size_t i = 0; i < nend; i++) {
            if (ups[i])
                ends[i].uptime_ms = session_uptime(ends[i].l, ups[i]);
            /* A browser that exited on its own (the reason says so) had
             * nothing left to close. */
            char why[sizeof ends[i].reason];
            if (!closed[i] && strcmp(ends[i].reason, "timeout") == 0)
                snprintf(ends[i].reason, sizeof ends[i].reason, "%s",
                         unsaved_reason("timeout", why, sizeof why));
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

/* Takes every live session out of the list at once (each with the list's
 * reference), so that nothing is live here from now on; the count. */
static size_t take_all(struct sessmgr *m, struct live ***out, struct chromium ***browsers,
                       int **remove_dir)
{
    pthread_mutex_lock(&m->mu);
    size_t n = 0;
    for (struct live *l = m->head; l; l = l->next)
        n++;
    struct live **ls = xcalloc(n ? n : 1, sizeof *ls);
    struct chromium **cs = xcalloc(n ? n : 1, sizeof *cs);
    int *rd = xcalloc(n ? n : 1, sizeof *rd);
    for (size_t i = 0; i < n; i++) {
        struct live *l = m->head;
        unlink_locked(m, l);
        ls[i] = l;
        cs[i] = take_browser_locked(l);
        rd[i] = l->remove_dir;
    }
    pthread_mutex_unlock(&m->mu);
    *out = ls;
    *browsers = cs;
    *remove_dir = rd;
    return n;
}

/* Ends the n sessions taken with take_all (stop_browsers with grace_ms),
 * then calls on_end for each; frees the arrays. */
static void finish_all(struct sessmgr *m, struct live **ls, struct chromium **cs, int *rd, size_t n,
                       const char *reason, int grace_ms)
{
    int *closed = xcalloc(n ? n : 1, sizeof *closed);
    long long *ups = xcalloc(n ? n : 1, sizeof *ups);
    stop_browsers(cs, n, rd, grace_ms, closed, ups);
    for (size_t i = 0; i < n; i++) {
        char buf[160];
        const char *why =
            closed[i] || grace_ms == 0 ? reason : unsaved_reason(reason, buf, sizeof buf);
        long long up = ups[i] ? session_uptime(ls[i], ups[i]) : ls[i]->final_uptime_ms;
        if (m->hooks.on_end)
            m->hooks.on_end(m->hooks.ctx, ls[i]->id, why, up);
        sessmgr_put(ls[i]);
    }
    xfree(ups);
    xfree(closed);
    xfree(rd);
    xfree(cs);
    xfree(ls);
}

void sessmgr_end_all(struct sessmgr *m, const char *reason)
{
    struct live **ls;
    struct chromium **cs;
    int *rd;
    size_t n = take_all(m, &ls, &cs, &rd);
    finish_all(m, ls, cs, rd, n, reason, CLOSE_GRACE_MS);
}

struct killing {
    struct sessmgr *m;
    struct live **ls;
    struct chromium **cs;
    int *rd;
    size_t n;
    char reason[128];
};

static void *killing_main(void *arg)
{
    struct killing *k = arg;
    struct sessmgr *m = k->m;
    finish_all(m, k->ls, k->cs, k->rd, k->n, k->reason, 0);
    xfree(k);
    pthread_mutex_lock(&m->mu);
    if (--m->killings == 0)
        pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

/* The kills are sent on the calling thread (a fence must not wait for
 * them: the node serves again at once); the reaping and the ending hooks
 * follow on a thread of their own, which sessmgr_stop waits for. */
void sessmgr_kill_all(struct sessmgr *m, const char *reason)
{
    struct killing *k = xcalloc(1, sizeof *k);
    k->m = m;
    k->n = take_all(m, &k->ls, &k->cs, &k->rd);
    snprintf(k->reason, sizeof k->reason, "%s", reason);
    for (size_t i = 0; i < k->n; i++)
        chromium_kill(k->cs[i]);
    pthread_mutex_lock(&m->mu);
    m->killings++;
    pthread_mutex_unlock(&m->mu);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t th;
    if (pthread_create(&th, &attr, killing_main, k) != 0)
        (void)killing_main(k);
    pthread_attr_destroy(&attr);
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
    pthread_mutex_lock(&m->mu);
    while (m->killings > 0)
        pthread_cond_wait(&m->cv, &m->mu);
    pthread_mutex_unlock(&m->mu);
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
