/* The audit log: its entries (api_audit_completed, the transport's
 * completed hook) and GET /audit-logs, /audit-logs/export/chunk and
 * /admin/audit-logs (docs/telemetry.md "Audit logs"). */
#ifndef BD_API_AUDIT_H
#define BD_API_AUDIT_H

#include <stdint.h>

#include "http/http.h"

/* http_config.completed: queues the request's audit entry when it is one
 * (an authenticated call that changes something, or a failed
 * authentication). Never waits for the store. */
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
