/* libFuzzer target for domain/computer: arbitrary bytes as a JSON body into
 * comp_parse for every operation and into comp_parse_batch, and as a keysym
 * text into comp_combo_parse, and its first bytes as a typed character into
 * comp_typed_key. Invariants: a parse either succeeds or fails with a field
 * error; accepted coordinates lie on the screen; a typed key's strings end
 * inside their fields. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "domain/computer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char text[64];
    size_t n = size < sizeof text - 1 ? size : sizeof text - 1;
    memcpy(text, data, n);
    text[n] = '\0';
    struct comp_combo c;
    if (comp_combo_parse(text, &c) == 0 && (c.n < 1 || c.n > 6))
        abort();
    if (size >= 5) {
        struct comp_key k;
        int shift;
        uint32_t cp = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16;
        size_t len = data[3] % 8;
        if (len <= n && comp_typed_key(text, len, cp, &k, &shift) == 1 &&
            (memchr(k.key, 0, sizeof k.key) == NULL || memchr(k.text, 0, sizeof k.text) == NULL))
            abort();
    }
    json_t *b = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    for (int op = COMP_CLICK; op <= COMP_SCREENSHOT; op++) {
        struct err e;
        err_init(&e);
        struct comp_action a;
        int rc = comp_parse((enum comp_op)op, b, "", 640, 480, &a, &e);
        if (rc != 0 && !e.message[0])
            abort();
        if (rc == 0) {
            if ((op == COMP_CLICK || op == COMP_MOVE || op == COMP_SCROLL) &&
                (a.x < 0 || a.y < 0 || a.x >= 640 || a.y >= 480))
                abort();
            for (int i = 0; i < a.npath; i++)
                if (a.path[i][0] < 0 || a.path[i][1] < 0 || a.path[i][0] >= 640 ||
                    a.path[i][1] >= 480)
                    abort();
            comp_action_clear(&a);
        }
    }
    struct err e;
    err_init(&e);
    struct comp_action *acts;
    size_t na;
    if (comp_parse_batch(b, 640, 480, &acts, &na, &e) == 0) {
        if (na < 1 || na > COMP_BATCH_MAX)
            abort();
        comp_batch_free(acts, na);
    }
    json_decref(b);
    return 0;
}
