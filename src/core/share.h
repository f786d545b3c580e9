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
 * Several organizations together could still fill the cap (eight at a
 * per_org of total/8, two at total/2) and refuse every other organization
 * for as long as they hold it. So the last `reserve` units are kept for
 * newcomers (SHARE_RESERVE(total): total / LIM_SHARE_RESERVE_DIV, an eighth,
 * at least one): an organization that already holds a unit is refused
 * (SHARE_FULL_SERVER) when its take would leave fewer than `reserve` units
 * free; an organization holding none may take from the reserve, up to the
 * total. A share of total 1 is all reserve: whoever holds nothing may take
 * it. With a total of 2 or 3 the reserve is 1, so an organization holds at
 * most total - 1 units however large its per_org (a total-2 share is one
 * unit per organization while another waits): such a share's per_org should
 * be at most total - 1.
 *
 * Threading: every function may be called from any thread; a share's state
 * is guarded by its own mutex. Keys (org and session ids) are copied.
 */
#ifndef BD_CORE_SHARE_H
#define BD_CORE_SHARE_H

#include <pthread.h>
#include <stddef.h>

#include "core/err.h"
#include "core/limits.h"

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
    int reserve; /* units only an org holding none may take */
    int used;
    struct share_key *keys; /* one per (org, session) holding units */
    size_t nkeys, capkeys;
};

/* The newcomer reserve of a share of total units: total /
 * LIM_SHARE_RESERVE_DIV (an eighth), at least 1. */
#define SHARE_RESERVE(total_)                                                                      \
    ((total_) / LIM_SHARE_RESERVE_DIV > 0 ? (total_) / LIM_SHARE_RESERVE_DIV : 1)

/* A statically initialized share: SHARE_INIT("curl calls", 32, 16, 8); its
 * reserve is SHARE_RESERVE(total). */
#define SHARE_INIT(what_, total_, org_, session_)                                                  \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER, (what_), (total_), (org_), (session_), SHARE_RESERVE(total_),   \
            0, NULL, 0, 0                                                                          \
    }

/* Which cap a refused take hit. */
enum share_full { SHARE_OK = 0, SHARE_FULL_SESSION, SHARE_FULL_ORG, SHARE_FULL_SERVER };

/* Takes one unit for session of org: SHARE_OK, or the cap that is full
 * (nothing taken then). SHARE_FULL_SERVER also when org already holds units
 * and the take would eat into the newcomer reserve. */
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
