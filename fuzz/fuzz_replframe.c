/* libFuzzer target for domain/replframe: arbitrary bytes as what a REPL
 * process (tenant code) writes on its channel, taken frame after frame as
 * runtime/repl does; every accepted frame re-encodes to a frame that parses
 * again. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/err.h"
#include "core/xalloc.h"
#include "domain/replframe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    size_t left = size;
    for (;;) {
        size_t used;
        json_t *m;
        enum replmsg_kind kind;
        struct err e;
        err_init(&e);
        int k = replframe_next(p, left, 4096, &used, &m, &kind, &e);
        if (k <= 0) {
            if (k < 0 && !e.message[0])
                __builtin_trap(); /* a violation is always said */
            break;
        }
        if (used < 5 || used > left || !m || kind < REPLMSG_TEXT || kind > REPLMSG_DONE)
            __builtin_trap();
        size_t flen;
        char *f = replframe_encode(m, &flen);
        if (f) {
            size_t u2;
            json_t *m2;
            enum replmsg_kind k2;
            struct err e2;
            err_init(&e2);
            if (replframe_next(f, flen, flen, &u2, &m2, &k2, &e2) != 1 || u2 != flen ||
                k2 != kind || !json_equal(m, m2))
                __builtin_trap();
            json_decref(m2);
            xfree(f);
        }
        json_decref(m);
        p += used;
        left -= used;
    }
    return 0;
}
