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
 * committed that the kernel had not written back; entries past the queue's
 * share of their organization (telemetry/auditq.h), which are never
 * spooled, counted and reported in the operator's log.
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

/* Stores the entries the spool files spool_dir/audit-spool.{0,1} hold (a
 * crash left them), then starts the writer on st (borrowed until
 * audit_stop), keeping entries for retention_ms. 0, or E_INTERNAL with e
 * filled (a spool that cannot be opened, a store that refuses its entries). */
int audit_start(struct store *st, int64_t retention_ms, const char *spool_dir, struct audit **out,
                struct err *e) __attribute__((warn_unused_result));
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
/* Writes what is queued, stops and frees the writer. NULL is a no-op. */
void audit_stop(struct audit *a);

#endif
