#include "session/ext.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for every module that takes part in sessions (profiles, proxies,
 * telemetry, webdriver, pools, computer, replays, and those to come). */
#define MAX_EXT 16

static const struct session_ext *exts[MAX_EXT + 1];
static size_t nexts;

void session_ext_register(const struct session_ext *x)
{
    if (nexts >= MAX_EXT) {
        fprintf(stderr, "browserd: too many session modules (at most %d)\n", MAX_EXT);
        abort();
    }
    exts[nexts++] = x;
}

const struct session_ext *const *session_ext_all(void)
{
    return exts;
}
