#include "telemetry/auditq.h"

#include <stdio.h>
#include <string.h>

#include "core/err.h"
#include "core/xalloc.h"

void auditq_init(struct auditq *q, size_t cap, size_t per_org)
{
    memset(q, 0, sizeof *q);
    q->cap = cap ? cap : 1;
    q->per_org = per_org ? per_org : 1;
    q->items = xcalloc(q->cap, sizeof *q->items);
    q->nslots = 16;
    while (q->nslots < 2 * q->cap)
        q->nslots *= 2;
    q->slots = xcalloc(q->nslots, sizeof *q->slots);
    q->used = xcalloc(q->cap, sizeof *q->used);
}

void auditq_free(struct auditq *q)
{
    for (size_t i = 0; i < q->n; i++)
        audit_rec_clear(&q->items[i]);
    xfree(q->items);
    xfree(q->slots);
    xfree(q->used);
    memset(q, 0, sizeof *q);
}

/* The slot of org: its own, or the free one where it goes. Never full: at
 * most cap organizations are queued and there are 2 * cap slots. */
static struct auditq_slot *slot_of(struct auditq *q, const char *org, size_t *index)
{
    uint32_t h = 2166136261u;
    for (const char *p = org; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    size_t i = h & (q->nslots - 1);
    while (q->slots[i].used && strcmp(q->slots[i].org, org) != 0)
        i = (i + 1) & (q->nslots - 1);
    *index = i;
    return &q->slots[i];
}

static void clear_strings(struct audit_rec *r)
{
    r->path = r->route = r->client_ip = r->user_agent = r->user_id = r->domain = NULL;
}

/* 0 when one more entry of s's organization fits (queued and held count),
 * E_LIMIT past its share, E_UNAVAIL past the whole queue. */
static int fits(const struct auditq *q, const struct auditq_slot *s)
{
    if (s->used && s->count + s->held >= q->per_org)
        return E_LIMIT;
    return q->n + q->held < q->cap ? 0 : E_UNAVAIL;
}

/* s, slot i, in use for org. */
static void slot_use(struct auditq *q, struct auditq_slot *s, size_t i, const char *org)
{
    if (s->used)
        return;
    s->used = 1;
    s->count = s->held = 0;
    snprintf(s->org, sizeof s->org, "%s", org);
    q->used[q->nused++] = i;
}

static void queue(struct auditq *q, struct auditq_slot *s, struct audit_rec *r)
{
    s->count++;
    q->items[q->n++] = *r;
    clear_strings(r);
}

int auditq_room(struct auditq *q, const char *org)
{
    size_t i;
    return fits(q, slot_of(q, org, &i)) == 0;
}

int auditq_push(struct auditq *q, struct audit_rec *r)
{
    size_t i;
    struct auditq_slot *s = slot_of(q, r->org_id, &i);
    if (fits(q, s) != 0) {
        q->dropped++;
        snprintf(q->last_dropped_org, sizeof q->last_dropped_org, "%s", r->org_id);
        audit_rec_clear(r);
        return E_LIMIT;
    }
    slot_use(q, s, i, r->org_id);
    queue(q, s, r);
    return 0;
}

int auditq_hold(struct auditq *q, const char *org)
{
    size_t i;
    struct auditq_slot *s = slot_of(q, org, &i);
    int rc = fits(q, s);
    if (rc)
        return rc;
    slot_use(q, s, i, org);
    s->held++;
    q->held++;
    return 0;
}

void auditq_push_held(struct auditq *q, struct audit_rec *r)
{
    size_t i;
    struct auditq_slot *s = slot_of(q, r->org_id, &i);
    if (!s->used || !s->held) {
        (void)auditq_push(q, r); /* no place held: as any entry */
        return;
    }
    /* The hold kept this place: n + held stayed within cap. */
    s->held--;
    q->held--;
    queue(q, s, r);
}

void auditq_unhold(struct auditq *q, const char *org)
{
    size_t i;
    struct auditq_slot *s = slot_of(q, org, &i);
    if (!s->used || !s->held)
        return;
    s->held--;
    q->held--;
}

size_t auditq_take(struct auditq *q, struct audit_rec *out)
{
    size_t n = q->n;
    memcpy(out, q->items, n * sizeof *out);
    q->n = 0;
    /* Organizations with places held keep them (count 0), put back after
     * every slot is emptied so that no probe chain has a hole. */
    size_t nkept = 0;
    struct auditq_slot *kept = q->held ? xcalloc(q->nused, sizeof *kept) : NULL;
    for (size_t i = 0; i < q->nused; i++) {
        struct auditq_slot *s = &q->slots[q->used[i]];
        if (s->held && kept) /* q->held is the sum of the slots' held */
            kept[nkept++] = *s;
        s->used = 0;
    }
    q->nused = 0;
    for (size_t k = 0; k < nkept; k++) {
        size_t i;
        struct auditq_slot *s = slot_of(q, kept[k].org, &i);
        slot_use(q, s, i, kept[k].org);
        s->held = kept[k].held;
    }
    xfree(kept);
    return n;
}
