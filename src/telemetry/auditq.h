/*
 * auditq: the audit log's bounded queue with a share per organization (no
 * lock, no thread: telemetry/audit.c holds it under its mutex).
 *
 * The queue holds at most `cap` entries, and at most `per_org` of one
 * organization ("" , the operator's entries, counts as one). An entry past
 * either bound is dropped and counted. The writer takes every queued entry
 * at once, which gives every share back. A place may be held for an entry
 * before it exists (auditq_hold, when its change is admitted, before the
 * change acts): held places count in both bounds until the entry comes
 * (auditq_push_held) or the hold is given back (auditq_unhold), and the
 * writer's take leaves them held.
 */
#ifndef BD_TELEMETRY_AUDITQ_H
#define BD_TELEMETRY_AUDITQ_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

struct auditq_slot {
    char org[STORE_ID];
    uint32_t count; /* queued */
    uint32_t held;  /* held for entries to come (auditq_hold) */
    int used;
};

struct auditq {
    struct audit_rec *items;
    size_t n, cap, per_org;
    size_t held;               /* places held, every organization's */
    struct auditq_slot *slots; /* open addressing, nslots a power of two >= 2 * cap */
    size_t nslots;
    size_t *used; /* the slots in use, to reset them in O(used) */
    size_t nused;
    uint64_t dropped; /* entries refused since init */
    char last_dropped_org[STORE_ID];
};

/* An empty queue of cap entries, per_org of them for one organization. */
void auditq_init(struct auditq *q, size_t cap, size_t per_org);
/* Releases the queue and the entries still in it. */
void auditq_free(struct auditq *q);
/* Queues r, whose strings the queue takes (r's pointers are cleared either
 * way). 0, or E_LIMIT when the queue or r's organization's share is full
 * (the entry is dropped and counted). */
int auditq_push(struct auditq *q, struct audit_rec *r);
/* 1 when an entry of org would be queued now (auditq_push would take it). */
int auditq_room(struct auditq *q, const char *org);
/* Holds a place for an entry of org to come: 0; E_LIMIT when org's share
 * is full (queued and held), E_UNAVAIL when the whole queue is. Nothing is
 * counted as dropped: the caller refuses the change instead. */
int auditq_hold(struct auditq *q, const char *org);
/* Queues r in the place held for its organization (auditq_hold; one hold
 * is used): never dropped. Strings taken as auditq_push. */
void auditq_push_held(struct auditq *q, struct audit_rec *r);
/* Gives back a place held for org that no entry will use. */
void auditq_unhold(struct auditq *q, const char *org);
/* Moves every queued entry into out (room for q->cap entries; the caller
 * owns them) and gives every share back but the places held. Returns how
 * many. */
size_t auditq_take(struct auditq *q, struct audit_rec *out);

#endif
