/*
 * auditspool: the audit log's spool, an append-only file of entries not yet
 * in the store (telemetry/audit.c owns the files and the locking; this
 * module only encodes, parses and reads records, no thread, no lock).
 *
 * A record is one entry as a JSON object on one line ("{...}\n"), at most
 * LIM_AUDIT_SPOOL_RECORD_BYTES, appended with one write() on an O_APPEND
 * descriptor: a crash of the process leaves every record whose write()
 * returned in the page cache, and at most a torn last line (a machine crash
 * may tear or lose the unsynced tail). Reading skips a line that does not
 * parse, a line longer than the cap, and a last line without its newline.
 */
#ifndef BD_TELEMETRY_AUDITSPOOL_H
#define BD_TELEMETRY_AUDITSPOOL_H

#include <stddef.h>

#include "store/store.h"

/* r as one record, with its newline, into out (cap bytes; no NUL is
 * written). Returns the record's length, or 0 when it does not fit. */
size_t auditspool_encode(const struct audit_rec *r, char *out, size_t cap);
/* One record's bytes (len, without the newline; the untrusted bytes of a
 * file) into *r, whose strings are then owned by the caller. 0, or
 * E_INVALID (r is left empty) when it is not a record this module wrote. */
int auditspool_parse(const char *line, size_t len, struct audit_rec *r)
    __attribute__((warn_unused_result));
/* Reads the file fd from its start: fn(ctx, r) for each whole record, in
 * order (fn takes r's strings; a non-zero return stops the read and is
 * returned). Skipped lines (see above) are added to *skipped. 0, the
 * return of fn, or E_INTERNAL when a read() failed. */
int auditspool_read(int fd, int (*fn)(void *ctx, struct audit_rec *r), void *ctx, size_t *skipped)
    __attribute__((warn_unused_result));

#endif
