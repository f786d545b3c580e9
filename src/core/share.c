/* core/share: see share.h. The table of holders is a small array: it holds
 * one row per (org, session) with units taken, at most `total` rows. */
#include "core/share.h"

#include <stdio.h>
#include <string.h>

#include "core/xalloc.h"

static void key_copy(char *dst, const char *src)
{
    snprintf(dst, SHARE_KEY_MAX, "%s", src ? src : "");
}

/* Units held by org (session NULL) or by (org, session). Under mu. */
static int count_locked(const struct share *s, const char *org, const char *session)
{
    char o[SHARE_KEY_MAX], k[SHARE_KEY_MAX];
    key_copy(o, org);
    key_copy(k, session);
    int n = 0;
    for (size_t i = 0; i < s->nkeys; i++)
        if (strcmp(s->keys[i].org, o) == 0 && (!session || strcmp(s->keys[i].session, k) == 0))
            n += s->keys[i].n;
    return n;
}

enum share_full share_take(struct share *s, const char *org, const char *session)
{
    pthread_mutex_lock(&s->mu);
    enum share_full r = SHARE_OK;
    int held = count_locked(s, org, NULL);
    if (count_locked(s, org, session) >= s->per_session)
        r = SHARE_FULL_SESSION;
    else if (held >= s->per_org)
        r = SHARE_FULL_ORG;
    else if (s->used >= s->total || (held > 0 && s->total - s->used - 1 < s->reserve))
        r = SHARE_FULL_SERVER;
    if (r == SHARE_OK) {
        char o[SHARE_KEY_MAX], k[SHARE_KEY_MAX];
        key_copy(o, org);
        key_copy(k, session);
        size_t i = 0;
        while (i < s->nkeys && (strcmp(s->keys[i].org, o) || strcmp(s->keys[i].session, k)))
            i++;
        if (i == s->nkeys) {
            if (s->nkeys == s->capkeys) {
                s->capkeys = s->capkeys ? s->capkeys * 2 : 8;
                s->keys = xrealloc(s->keys, s->capkeys * sizeof *s->keys);
            }
            memcpy(s->keys[i].org, o, sizeof o);
            memcpy(s->keys[i].session, k, sizeof k);
            s->keys[i].n = 0;
            s->nkeys++;
        }
        s->keys[i].n++;
        s->used++;
    }
    pthread_mutex_unlock(&s->mu);
    return r;
}

void share_give(struct share *s, const char *org, const char *session)
{
    char o[SHARE_KEY_MAX], k[SHARE_KEY_MAX];
    key_copy(o, org);
    key_copy(k, session);
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->nkeys; i++) {
        if (strcmp(s->keys[i].org, o) || strcmp(s->keys[i].session, k))
            continue;
        s->used--;
        if (--s->keys[i].n == 0)
            s->keys[i] = s->keys[--s->nkeys];
        break;
    }
    pthread_mutex_unlock(&s->mu);
}

int share_used(struct share *s, const char *org, const char *session)
{
    pthread_mutex_lock(&s->mu);
    int n = org ? count_locked(s, org, session) : s->used;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int share_take_or_err(struct share *s, const char *org, const char *session, int retry_s,
                      struct err *e)
{
    enum share_full r = share_take(s, org, session);
    if (r == SHARE_OK)
        return 0;
    e->retry_after = retry_s;
    if (r == SHARE_FULL_SESSION)
        return err_set(e, E_LIMIT, "rate_limited",
                       "this session already holds %d %s (a session's share); retry when one ends",
                       s->per_session, s->what);
    if (r == SHARE_FULL_ORG)
        return err_set(e, E_LIMIT, "rate_limited",
                       "this organization already holds %d %s (an organization's share); retry "
                       "when one ends",
                       s->per_org, s->what);
    return err_set(e, E_LIMIT, "rate_limited",
                   "this server already holds %d %s (its cap; the last %d of them are kept for "
                   "organizations holding none); retry in a moment",
                   s->total, s->what, s->reserve);
}
