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

int auditq_room(struct auditq *q, const char *org)
{
    size_t i;
    struct auditq_slot *s = slot_of(q, org, &i);
    return q->n < q->cap && !(s->used && s->count >= q->per_org);
}

int auditq_push(struct auditq *q, struct audit_rec *r)
{
    size_t i;
    struct auditq_slot *s = slot_of(q, r->org_id, &i);
    if (q->n >= q->cap || (s->used && s->count >= q->per_org)) {
        q->dropped++;
        snprintf(q->last_dropped_org, sizeof q->last_dropped_org, "%s", r->org_id);
        audit_rec_clear(r);
        return E_LIMIT;
    }
    if (!s->used) {
        s->used = 1;
        s->count = 0;
        snprintf(s->org, sizeof s->org, "%s", r->org_id);
        q->used[q->nused++] = i;
    }
    s->count++;
    q->items[q->n++] = *r;
    clear_strings(r);
    return 0;
}

size_t auditq_take(struct auditq *q, struct audit_rec *out)
{
    size_t n = q->n;
    memcpy(out, q->items, n * sizeof *out);
    q->n = 0;
    for (size_t i = 0; i < q->nused; i++)
        q->slots[q->used[i]].used = 0;
    q->nused = 0;
    return n;
}
