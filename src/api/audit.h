/* The audit log: its entries (api_audit_answering, the transport's
 * answering hook) and GET /audit-logs, /audit-logs/export/chunk and
 * /admin/audit-logs (docs/telemetry.md "Audit logs"). */
#ifndef BD_API_AUDIT_H
#define BD_API_AUDIT_H

#include <stdint.h>

#include "http/http.h"

/* http_config.answering: spools and queues the request's audit entry when
 * it is one (an authenticated call that changes something, or a failed
 * authentication: not kept when the spool has no room for its
 * organization, audit_admit), before its response rs is queued; duration_us is the
 * time until the answer. One write() to the spool; never waits for the
 * store. */
void api_audit_answering(struct req *rq, const struct resp *rs, int64_t duration_us);
/* Called by the authorize hook once rq is authenticated (flags: its
 * route's), before anything acts: 0, or rq->err filled when rq is a change
 * that will need an audit entry and there is no room for it: E_UNAVAIL (503
 * naming the audit spool, Retry-After) when the spool has none
 * (telemetry/audit.h audit_admit), E_LIMIT (429 audit_queue_full,
 * Retry-After) when the organization's share of the queue is full, E_UNAVAIL
 * when the whole queue is (audit_reserve): a change is refused rather than
 * done and left unaudited. An admitted change holds its entry's place in the
 * queue (its auth's audit_held) until the entry is made, or
 * api_audit_release gives it back. */
int api_audit_admit(struct req *rq, unsigned flags) __attribute__((warn_unused_result));
/* Gives back the queue place rq holds (api_audit_admit) when no entry used
 * it (the request's cleanup; a no-op otherwise). */
void api_audit_release(struct req *rq);
/* http_config.completed: the entry of an exchange that ended without an
 * answer (status 0: the client left while a blocking handler ran). */
void api_audit_completed(struct req *rq, int64_t duration_us);
/* GET /audit-logs: the caller's organization's entries, newest first, a
 * page at a time (X-Next-Page-Token). */
int audit_list(struct req *rq, struct resp *rs);
/* GET /audit-logs/export/chunk: the same entries oldest first as JSON lines
 * (format=jsonl, or jsonl.gz: gzip), X-Next-Cursor when more follow. */
int audit_export_chunk(struct req *rq, struct resp *rs);
/* GET /admin/audit-logs: the operator's entries (org_id absent: failed
 * authentications of no known organization and admin calls), or org_id's. */
int audit_admin_list(struct req *rq, struct resp *rs);

#endif
