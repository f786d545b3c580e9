/* strvec: a NULL-terminated, growable vector of owned strings (an argv or
 * an environment being built for execve). */
#ifndef BD_CORE_STRVEC_H
#define BD_CORE_STRVEC_H

#include <stddef.h>

struct strvec {
    char **v; /* NULL-terminated once anything was pushed; owned */
    size_t n, cap;
};

/* Appends owned (xmalloc'd; freed by strvec_free). */
void strvec_push(struct strvec *s, char *owned);
/* strvec_push with a void * context, for callbacks (sandbox_bwrap_argv). */
void strvec_push_cb(void *ctx, char *owned);
/* Frees every string and the vector; s is empty again. */
void strvec_free(struct strvec *s);

#endif
