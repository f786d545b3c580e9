/* keycache: see keycache.h for the exactness rule. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/xalloc.h"
#include "store/keycache.h"

struct slot {
    int used;
    uint64_t epoch; /* the epoch the rows were stored under */
    char hash[65];
    struct apikey_rec key;
    struct org_rec org; /* overrides owned by the slot */
};

struct keycache {
    pthread_mutex_t mu;
    uint64_t epoch;
    struct slot **slots; /* KEYCACHE_SLOTS, each allocated by its first put */
};

struct keycache *keycache_new(void)
{
    struct keycache *kc = xcalloc(1, sizeof *kc);
    pthread_mutex_init(&kc->mu, NULL);
    kc->slots = xcalloc(KEYCACHE_SLOTS, sizeof *kc->slots);
    return kc;
}

static void slot_clear(struct slot *s)
{
    if (!s || !s->used)
        return;
    org_rec_clear(&s->org);
    s->used = 0;
}

void keycache_free(struct keycache *kc)
{
    if (!kc)
        return;
    for (size_t i = 0; i < KEYCACHE_SLOTS; i++) {
        slot_clear(kc->slots[i]);
        xfree(kc->slots[i]);
    }
    xfree(kc->slots);
    pthread_mutex_destroy(&kc->mu);
    xfree(kc);
}

/* The hash is a digest, so its leading characters are already uniform;
 * FNV over the whole string keeps any input (even a non-hex one) in range. */
static struct slot **slot_for(struct keycache *kc, const char *hash)
{
    uint32_t h = 2166136261u;
    for (const char *p = hash; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return &kc->slots[h % KEYCACHE_SLOTS];
}

/* Moves the cache to epoch when epoch is newer: every entry stored under an
 * older one is dead from then on (and reused by the next put to its slot;
 * nothing is swept, so a commit costs the hot path nothing but misses).
 * Called with mu held. Returns whether epoch is the cache's epoch now. */
static int advance(struct keycache *kc, uint64_t epoch)
{
    if (epoch > kc->epoch)
        kc->epoch = epoch;
    return epoch == kc->epoch;
}

int keycache_get(struct keycache *kc, uint64_t epoch, const char *hash, struct apikey_rec *key,
                 struct org_rec *org)
{
    int hit = 0;
    pthread_mutex_lock(&kc->mu);
    struct slot *s = *slot_for(kc, hash);
    if (advance(kc, epoch) && s && s->used && s->epoch == epoch && strcmp(s->hash, hash) == 0) {
        *key = s->key;
        *org = s->org;
        org->overrides = xstrdup(s->org.overrides ? s->org.overrides : "{}");
        hit = 1;
    }
    pthread_mutex_unlock(&kc->mu);
    return hit;
}

void keycache_put(struct keycache *kc, uint64_t epoch, const char *hash,
                  const struct apikey_rec *key, const struct org_rec *org)
{
    if (strlen(hash) >= sizeof((struct slot *)0)->hash)
        return;
    /* Copied outside the lock; freed outside it when not stored. */
    char *ov = xstrdup(org->overrides ? org->overrides : "{}");
    pthread_mutex_lock(&kc->mu);
    if (advance(kc, epoch)) {
        struct slot **sp = slot_for(kc, hash);
        if (*sp == NULL)
            *sp = xcalloc(1, sizeof **sp);
        struct slot *s = *sp;
        slot_clear(s);
        snprintf(s->hash, sizeof s->hash, "%s", hash);
        s->key = *key;
        s->org = *org;
        s->org.overrides = ov;
        s->epoch = epoch;
        s->used = 1;
        ov = NULL;
    }
    pthread_mutex_unlock(&kc->mu);
    xfree(ov);
}
