/*
 * libFuzzer target for telemetry/auditspool: the audit spool's records as a
 * crash or an editor may leave them in the data folder. Input: the bytes of
 * a spool file (auditspool_read, which parses each line), and the whole
 * input as one record (auditspool_parse); a parsed record encodes again
 * within the record's cap.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/limits.h"
#include "core/xalloc.h"
#include "telemetry/auditspool.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int check(void *ctx, struct audit_rec *r)
{
    char *buf = ctx;
    if (auditspool_encode(r, buf, LIM_AUDIT_SPOOL_RECORD_BYTES) == 0)
        abort(); /* a record the parser took must fit the cap again */
    audit_rec_clear(r);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = xmalloc(LIM_AUDIT_SPOOL_RECORD_BYTES);
    struct audit_rec r;
    if (auditspool_parse((const char *)data, size, &r) == 0)
        (void)check(buf, &r);
    FILE *f = tmpfile();
    if (f) {
        if (fwrite(data, 1, size, f) == size && fflush(f) == 0) {
            size_t skipped = 0;
            (void)auditspool_read(fileno(f), check, buf, &skipped);
        }
        fclose(f);
    }
    xfree(buf);
    return 0;
}
