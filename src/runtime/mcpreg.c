/* The MCP sessions' table (mcpreg.h): a fixed array under one lock, and a
 * condition on which calls wait for a session another call holds. */
#include "runtime/mcpreg.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/limits.h"

struct slot {
    int used;
    int busy; /* a call holds it */
    struct mcpreg_entry e;
};

static struct slot slots[LIM_MCP_SESSIONS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t freed;
static pthread_once_t freed_once = PTHREAD_ONCE_INIT;

static void freed_init(void)
{
    clock_cond_init(&freed);
}

static struct slot *find(const char *org, const char *project, const char *id)
{
    for (size_t i = 0; i < LIM_MCP_SESSIONS; i++)
        if (slots[i].used && strcmp(slots[i].e.id, id) == 0 && strcmp(slots[i].e.org, org) == 0 &&
            strcmp(slots[i].e.project, project) == 0)
            return &slots[i];
    return NULL;
}

int mcpreg_open(const char *org, const char *project, long long room, char *id, struct err *e)
{
    pthread_once(&freed_once, freed_init);
    pthread_mutex_lock(&lock);
    size_t mine = 0;
    long long pending = 0;
    struct slot *free_slot = NULL;
    for (size_t i = 0; i < LIM_MCP_SESSIONS; i++) {
        if (!slots[i].used && !free_slot)
            free_slot = &slots[i];
        if (slots[i].used && strcmp(slots[i].e.org, org) == 0) {
            mine++;
            pending += !slots[i].e.session_id[0];
        }
    }
    if (room >= 0 && pending >= room) {
        pthread_mutex_unlock(&lock);
        e->retry_after = LIM_MCP_RETRY_AFTER_S;
        return err_set(e, E_LIMIT, "rate_limited",
                       "limits.max_concurrent_browsers reached for this organization: its "
                       "browsers and its %lld MCP sessions waiting for theirs take every one",
                       pending);
    }
    if (mine >= LIM_MCP_SESSIONS_PER_ORG || !free_slot) {
        pthread_mutex_unlock(&lock);
        e->retry_after = LIM_MCP_RETRY_AFTER_S;
        return err_set(e, E_LIMIT, "rate_limited",
                       mine >= LIM_MCP_SESSIONS_PER_ORG
                           ? "at most %d MCP sessions per organization: end one (DELETE /mcp) "
                             "or let one time out"
                           : "the server holds its most MCP sessions (%d): try again later",
                       mine >= LIM_MCP_SESSIONS_PER_ORG ? LIM_MCP_SESSIONS_PER_ORG
                                                        : LIM_MCP_SESSIONS);
    }
    memset(free_slot, 0, sizeof *free_slot);
    free_slot->used = 1;
    char raw[CRYPTO_ID_LEN + 1];
    crypto_new_id(raw);
    snprintf(free_slot->e.id, sizeof free_slot->e.id, "mcp_%s", raw);
    snprintf(free_slot->e.org, sizeof free_slot->e.org, "%s", org);
    snprintf(free_slot->e.project, sizeof free_slot->e.project, "%s", project);
    free_slot->e.last_used_ms = clock_mono_ms();
    snprintf(id, MCPREG_ID_MAX, "%s", free_slot->e.id);
    pthread_mutex_unlock(&lock);
    return 0;
}

/* Finds id of org and waits until no call holds it; with the lock held. */
static int take(const char *org, const char *project, const char *id, struct slot **out,
                struct err *e)
{
    pthread_once(&freed_once, freed_init);
    struct timespec until = clock_deadline(LIM_MCP_BUSY_WAIT_MS);
    for (;;) {
        struct slot *s = find(org, project, id);
        if (!s)
            return err_set(e, E_NOTFOUND, "not_found", "MCP session not found (ended or unknown)");
        if (!s->busy) {
            *out = s;
            return 0;
        }
        if (pthread_cond_timedwait(&freed, &lock, &until) != 0) {
            e->retry_after = LIM_MCP_RETRY_AFTER_S;
            return err_set(e, E_LIMIT, "session_busy",
                           "another call of this MCP session is still running");
        }
    }
}

int mcpreg_acquire(const char *org, const char *project, const char *id, struct mcpreg_entry *out,
                   struct err *e)
{
    pthread_mutex_lock(&lock);
    struct slot *s = NULL;
    int rc = take(org, project, id, &s, e);
    if (rc == 0 && s) {
        s->busy = 1;
        *out = s->e;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

void mcpreg_release(const struct mcpreg_entry *in)
{
    pthread_mutex_lock(&lock);
    struct slot *s = find(in->org, in->project, in->id);
    if (s) {
        snprintf(s->e.session_id, sizeof s->e.session_id, "%s", in->session_id);
        snprintf(s->e.target, sizeof s->e.target, "%s", in->target);
        s->e.last_used_ms = clock_mono_ms();
        s->busy = 0;
        pthread_cond_broadcast(&freed);
    }
    pthread_mutex_unlock(&lock);
}

int mcpreg_close(const char *org, const char *project, const char *id, struct mcpreg_entry *out,
                 struct err *e)
{
    pthread_mutex_lock(&lock);
    struct slot *s = NULL;
    int rc = take(org, project, id, &s, e);
    if (rc == 0 && s) {
        *out = s->e;
        memset(s, 0, sizeof *s);
        pthread_cond_broadcast(&freed);
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

size_t mcpreg_expire(int64_t now_ms, int64_t idle_ms, struct mcpreg_entry *out, size_t cap)
{
    size_t n = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < LIM_MCP_SESSIONS && n < cap; i++) {
        struct slot *s = &slots[i];
        if (s->used && !s->busy && now_ms - s->e.last_used_ms > idle_ms) {
            out[n++] = s->e;
            memset(s, 0, sizeof *s);
        }
    }
    pthread_mutex_unlock(&lock);
    return n;
}

int mcpreg_touch(const char *org, const char *project, const char *id)
{
    pthread_mutex_lock(&lock);
    struct slot *s = find(org, project, id);
    if (s)
        s->e.last_used_ms = clock_mono_ms();
    pthread_mutex_unlock(&lock);
    return s ? 0 : E_NOTFOUND;
}

size_t mcpreg_count(const char *org)
{
    size_t n = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < LIM_MCP_SESSIONS; i++)
        if (slots[i].used && strcmp(slots[i].e.org, org) == 0)
            n++;
    pthread_mutex_unlock(&lock);
    return n;
}
