/*
 * audit: the audit log's writer. The request path hands an entry over
 * (audit_submit, before the response is queued: one write() of its record
 * to the spool, telemetry/auditspool.h, and a copy into a bounded queue,
 * under a mutex; never an fsync, never a wait on the store); one writer
 * thread takes the whole queue every AUDIT_FLUSH_MS (sooner when it is half
 * full), inserts it in one transaction, then empties the spool file those
 * entries were in; it also deletes the entries older than the retention.
 *
 * What can be lost (docs/telemetry.md "Audit logs"): nothing on a clean stop
 * (audit_stop writes what is queued before it returns), nothing submitted
 * on a crash of the process (audit_start stores what the spool holds before
 * the server serves); on a crash of the machine, the records not yet
 * committed that the kernel had not written back; entries submitted
 * without a place held (audit_reserve) past the queue's share of their
 * organization (telemetry/auditq.h), which are never spooled, counted and
 * reported in the operator's log: failed authentications, which changed
 * nothing (a change is refused before it acts when its entry has no place).
 */
#ifndef BD_TELEMETRY_AUDIT_H
#define BD_TELEMETRY_AUDIT_H

#include <stdint.h>

#include "core/err.h"
#include "store/store.h"

#define AUDIT_FLUSH_MS 100
/* Default retention of the entries: BROWSERD_AUDIT_RETENTION_DAYS (docs/operator.md). */
#define AUDIT_RETENTION_DAYS_DEFAULT 90

struct audit;

/* Error.code and Retry-After (seconds) of a change refused because the
 * spool is full. Such a refusal has no entry of its own: it changed nothing,
 * and its entry would fill the spool it was refused for. */
#define AUDIT_SPOOL_FULL_CODE "audit_spool_full"
#define AUDIT_SPOOL_RETRY_S   5
/* While batches are refused, the writer tries the spool again this often
 * even when no new entry comes (the spool drains once the store is back). */
#define AUDIT_RETRY_MS 500

/* Stores the entries the spool files spool_dir/audit-spool.{0,1} hold (a
 * crash left them), then starts the writer on st (borrowed until
 * audit_stop), keeping entries for retention_ms and, after each batch,
 * each organization's newest rows_per_org only (its older ones are
 * deleted; 0 or more than LIM_AUDIT_ROWS_PER_ORG means that limit), with
 * at most spool_cap bytes spooled (audit_admit). outage_file: NULL, or (a test switch,
 * docs/operator.md) a path whose existence makes the writer take every
 * batch as refused by the store. 0, or E_INTERNAL with e filled (a spool
 * that cannot be opened, a store that refuses its entries). */
int audit_start(struct store *st, int64_t retention_ms, int64_t rows_per_org, const char *spool_dir,
                int64_t spool_cap, const char *outage_file, struct audit **out, struct err *e)
    __attribute__((warn_unused_result));
/* Whether a change of org ("" for the operator's) may go ahead: 0 when its
 * entry will find room in the spool, else E_UNAVAIL with e filled (503,
 * naming the audit spool, Retry-After AUDIT_SPOOL_RETRY_S): the spool holds
 * spool_cap bytes, or org's share of it (spool_cap /
 * LIM_AUDIT_SPOOL_ORG_DIV), or org holds some and only the newcomer reserve
 * is left. Called before the change acts; an admitted change's entry is
 * always spooled, so the spool may pass the cap by the entries of the
 * changes admitted at once. Any thread. */
int audit_admit(struct audit *a, const char *org, struct err *e)
    __attribute__((warn_unused_result));
/* Error.code and Retry-After (seconds) of a change refused because the
 * queue has no place for its entry (audit_reserve): the writer takes the
 * queue every AUDIT_FLUSH_MS. No entry of its own either. */
#define AUDIT_QUEUE_FULL_CODE "audit_queue_full"
#define AUDIT_QUEUE_RETRY_S   1
/* audit_admit, then holds a place in the queue for the change's entry, so
 * that the entry of a change that acted is never dropped: 0 (the caller
 * then hands the entry to audit_submit_held, or gives the place back with
 * audit_unreserve), or e filled and nothing held: audit_admit's 503, 429
 * E_LIMIT (AUDIT_QUEUE_FULL_CODE, Retry-After AUDIT_QUEUE_RETRY_S) when
 * org's share of the queue is queued or held (LIM_AUDIT_QUEUE_PER_ORG),
 * 503 E_UNAVAIL when the whole queue is. Called before the change acts. */
int audit_reserve(struct audit *a, const char *org, struct err *e)
    __attribute__((warn_unused_result));
/* audit_submit for an entry whose place audit_reserve held (r->org_id the
 * org it was held for): never dropped. */
void audit_submit_held(struct audit *a, struct audit_rec *r);
/* Gives back a place audit_reserve held for org that no entry will use. */
void audit_unreserve(struct audit *a, const char *org);
/* Bytes now spooled: by everyone (org NULL) or by org. */
int64_t audit_spooled(struct audit *a, const char *org);
/* Gives r an entry id, appends its record to the spool (one write()) and
 * queues it (its strings are taken; r's pointers are cleared). Any thread;
 * never waits for the store nor syncs a file. An entry past its
 * organization's share is dropped (never spooled) and counted. */
void audit_submit(struct audit *a, struct audit_rec *r);
/* The retention the writer prunes to (entries older are never listed). */
int64_t audit_retention_ms(const struct audit *a);
/* Entries dropped since the start (the queue's shares were full), plus
 * those of batches the store refused (kept in the spool and committed with
 * a later batch or at the next start, unless their record could not be
 * written either). */
uint64_t audit_dropped(struct audit *a);
/* A test switch (docs/operator.md, BROWSERD_TEST_AUDIT_HOLD_FILE): while a
 * file exists at path the writer leaves the queue alone (it fills as it
 * would behind a slow store); NULL: off. audit_stop takes it all the same. */
void audit_test_hold(struct audit *a, const char *path);
/* Writes what is queued, stops and frees the writer. NULL is a no-op. */
void audit_stop(struct audit *a);

#endif
