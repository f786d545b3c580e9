/*
 * audit: the audit log's writer. The request path hands an entry over
 * (audit_submit: a copy into a bounded queue under a mutex, never a wait on
 * the store); one writer thread takes the whole queue every
 * AUDIT_FLUSH_MS (sooner when it is half full) and inserts it in one
 * transaction, and deletes the entries older than the retention.
 *
 * What can be lost (docs/telemetry.md "Audit logs"): nothing on a clean stop
 * (audit_stop writes what is queued before it returns); on a crash of the
 * process, the entries of the last AUDIT_FLUSH_MS; entries past the queue's
 * share of their organization (telemetry/auditq.h), which are counted and
 * reported in the operator's log.
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

/* Starts the writer on st (borrowed until audit_stop), keeping entries for
 * retention_ms. 0, or E_INTERNAL with e filled. */
int audit_start(struct store *st, int64_t retention_ms, struct audit **out, struct err *e)
    __attribute__((warn_unused_result));
/* Queues r (its strings are taken; r's pointers are cleared). Any thread;
 * never waits for the store. An entry past its organization's share is
 * dropped and counted. */
void audit_submit(struct audit *a, struct audit_rec *r);
/* The retention the writer prunes to (entries older are never listed). */
int64_t audit_retention_ms(const struct audit *a);
/* Entries dropped since the start (the queue's shares were full, or a write
 * failed). */
uint64_t audit_dropped(struct audit *a);
/* Writes what is queued, stops and frees the writer. NULL is a no-op. */
void audit_stop(struct audit *a);

#endif
