#include "http/fairshare.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "core/xalloc.h"

#define FS_BUCKETS 256

/* One tenant with calls in flight; freed when its count drops to 0, so the
 * table holds at most two entries per call in flight. The key is the org id,
 * or the org id, a newline and the session's id or name. */
struct share {
    struct share *next;
    unsigned n;
    char key[];
};

struct fairshare {
    pthread_mutex_t mu;
    unsigned per_org, per_session;
    struct share *b[FS_BUCKETS];
};

struct fairshare *fairshare_new(unsigned per_org, unsigned per_session)
{
    struct fairshare *fs = xcalloc(1, sizeof *fs);
    pthread_mutex_init(&fs->mu, NULL);
    fs->per_org = per_org;
    fs->per_session = per_session;
    return fs;
}

void fairshare_free(struct fairshare *fs)
{
    if (!fs)
        return;
    for (size_t i = 0; i < FS_BUCKETS; i++)
        for (struct share *s = fs->b[i], *next; s; s = next) {
            next = s->next;
            xfree(s);
        }
    pthread_mutex_destroy(&fs->mu);
    xfree(fs);
}

/* FNV-1a of org, then (when session) a newline and session. */
static uint32_t hash(const char *org, const char *session)
{
    uint32_t h = 2166136261u;
    for (const char *p = org; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    if (session) {
        h = (h ^ '\n') * 16777619u;
        for (const char *p = session; *p; p++)
            h = (h ^ (unsigned char)*p) * 16777619u;
    }
    return h;
}

static int key_is(const struct share *s, const char *org, const char *session)
{
    size_t n = strlen(org);
    if (strncmp(s->key, org, n) != 0)
        return 0;
    if (!session)
        return s->key[n] == '\0';
    return s->key[n] == '\n' && strcmp(s->key + n + 1, session) == 0;
}

/* Where the entry of (org, session) is linked, or would be (fs->mu held). */
static struct share **find(struct fairshare *fs, const char *org, const char *session)
{
    struct share **pp = &fs->b[hash(org, session) % FS_BUCKETS];
    while (*pp && !key_is(*pp, org, session))
        pp = &(*pp)->next;
    return pp;
}

/* The entry of (org, session), created with n = 0 when missing. */
static struct share *get(struct fairshare *fs, const char *org, const char *session)
{
    struct share **pp = find(fs, org, session);
    if (!*pp) {
        size_t no = strlen(org), ns = session ? strlen(session) + 1 : 0;
        struct share *s = xcalloc(1, sizeof *s + no + ns + 1);
        memcpy(s->key, org, no);
        if (session) {
            s->key[no] = '\n';
            memcpy(s->key + no + 1, session, ns - 1);
        }
        *pp = s;
    }
    return *pp;
}

/* Takes one call off (org, session) when take, and unlinks the entry once it
 * counts none. */
static void drop(struct fairshare *fs, const char *org, const char *session, int take)
{
    struct share **pp = find(fs, org, session);
    struct share *s = *pp;
    if (!s)
        return;
    if (take && s->n > 0)
        s->n--;
    if (s->n > 0)
        return;
    *pp = s->next;
    xfree(s);
}

static const char *nonempty(const char *s)
{
    return s && *s ? s : NULL;
}

int fairshare_take(struct fairshare *fs, const char *org, const char *session, struct err *e)
{
    org = nonempty(org);
    session = nonempty(session);
    if (!org)
        return 0;
    pthread_mutex_lock(&fs->mu);
    struct share *o = get(fs, org, NULL);
    struct share *s = session ? get(fs, org, session) : NULL;
    int full_org = fs->per_org && o->n >= fs->per_org;
    int full_sess = s && fs->per_session && s->n >= fs->per_session;
    if (!full_org && !full_sess) {
        o->n++;
        if (s)
            s->n++;
        pthread_mutex_unlock(&fs->mu);
        return 0;
    }
    /* Entries just created for this call (n still 0) go again. */
    drop(fs, org, NULL, 0);
    if (s)
        drop(fs, org, session, 0);
    pthread_mutex_unlock(&fs->mu);
    int rc = full_sess ? err_set(e, E_LIMIT, "rate_limited",
                                 "this session already has %u slow calls (browser actions, "
                                 "launches, file transfers) queued or running, its share of the "
                                 "server; retry when one ends",
                                 fs->per_session)
                       : err_set(e, E_LIMIT, "rate_limited",
                                 "this organization already has %u slow calls (browser actions, "
                                 "launches, file transfers) queued or running, its share of the "
                                 "server; retry when one ends",
                                 fs->per_org);
    e->retry_after = FAIRSHARE_RETRY_AFTER_S;
    return rc;
}

void fairshare_give(struct fairshare *fs, const char *org, const char *session)
{
    org = nonempty(org);
    session = nonempty(session);
    if (!org)
        return;
    pthread_mutex_lock(&fs->mu);
    drop(fs, org, NULL, 1);
    if (session)
        drop(fs, org, session, 1);
    pthread_mutex_unlock(&fs->mu);
}

unsigned fairshare_count(struct fairshare *fs, const char *org, const char *session)
{
    org = nonempty(org);
    session = nonempty(session);
    if (!org)
        return 0;
    pthread_mutex_lock(&fs->mu);
    struct share *s = *find(fs, org, session);
    unsigned n = s ? s->n : 0;
    pthread_mutex_unlock(&fs->mu);
    return n;
}
