#include "session/ext.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct session_ext *exts[SESSION_EXT_MAX + 1];
static size_t nexts;

void session_ext_register(const struct session_ext *x)
{
    if (nexts >= SESSION_EXT_MAX) {
        fprintf(stderr, "browserd: too many session modules (at most %d)\n", SESSION_EXT_MAX);
        abort();
    }
    exts[nexts++] = x;
}

const struct session_ext *const *session_ext_all(void)
{
    return exts;
}
