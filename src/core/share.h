/*
 * share: a server-wide cap on something tenants hold for a while (a zip
 * stream, a curl call in flight), split so that no tenant fills it alone.
 *
 * A share counts what is held at once three ways: on the whole server (at
 * most `total`), per organization (at most `per_org`) and per session (at
 * most `per_session`). A caller takes one unit before the work and gives it
 * back after; a take that would pass any of the three is refused and says
 * which. With per_org below total, one organization (and so one session)
 * always leaves room for the others.
 *
 * Threading: every function may be called from any thread; a share's state
 * is guarded by its own mutex. Keys (org and session ids) are copied.
 */
#ifndef BD_CORE_SHARE_H
#define BD_CORE_SHARE_H

#include <pthread.h>
#include <stddef.h>

#include "core/err.h"

/* Longest org or session id a share keeps (longer ids are cut: the ids the
 * server makes are far shorter). */
#define SHARE_KEY_MAX 64

struct share_key {
    char org[SHARE_KEY_MAX];
    char session[SHARE_KEY_MAX];
    int n; /* units held by this (org, session) */
};

struct share {
    pthread_mutex_t mu;
    const char *what; /* for messages: "zip streams" */
    int total, per_org, per_session;
    int used;
    struct share_key *keys; /* one per (org, session) holding units */
    size_t nkeys, capkeys;
};

/* A statically initialized share: SHARE_INIT("curl calls", 32, 16, 8). */
#define SHARE_INIT(what_, total_, org_, session_)                                                  \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER, (what_), (total_), (org_), (session_), 0, NULL, 0, 0            \
    }

/* Which cap a refused take hit. */
enum share_full { SHARE_OK = 0, SHARE_FULL_SESSION, SHARE_FULL_ORG, SHARE_FULL_SERVER };

/* Takes one unit for session of org: SHARE_OK, or the cap that is full
 * (nothing taken then). */
enum share_full share_take(struct share *s, const char *org, const char *session);

/* Gives back a unit taken for (org, session). */
void share_give(struct share *s, const char *org, const char *session);

/* Units now held: by everyone (org and session NULL), by org (session NULL)
 * or by one session of org. */
int share_used(struct share *s, const char *org, const char *session);

/* share_take for a request: on a full cap, fills e with the 429 record
 * (rate_limited, naming the cap and its size, Retry-After retry_s seconds)
 * and returns E_LIMIT; 0 when a unit was taken. */
int share_take_or_err(struct share *s, const char *org, const char *session, int retry_s,
                      struct err *e) WUR;

#endif
