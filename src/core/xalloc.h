/*
 * xalloc: the only place that calls the C allocator.
 *
 * Allocation failure is not a recoverable condition for a server of this
 * size: every function here aborts the process on failure, so callers never
 * test the result for NULL (redis zmalloc, h2o h2o_mem_alloc).
 */
#ifndef BD_CORE_XALLOC_H
#define BD_CORE_XALLOC_H

#include <stddef.h>

/* malloc(n) that never returns NULL; n == 0 allocates one byte. */
void *xmalloc(size_t n) __attribute__((malloc, returns_nonnull));
/* calloc(count, size) that never returns NULL and checks the product. */
void *xcalloc(size_t count, size_t size) __attribute__((malloc, returns_nonnull));
/* realloc(p, n) that never returns NULL; p may be NULL. */
void *xrealloc(void *p, size_t n) __attribute__((returns_nonnull));
/* Owned copy of a NUL-terminated string; s must not be NULL. */
char *xstrdup(const char *s) __attribute__((malloc, returns_nonnull));
/* Owned copy of the first n bytes of s, NUL-terminated. */
char *xstrndup(const char *s, size_t n) __attribute__((malloc, returns_nonnull));
/* Owned printf-formatted string. */
char *xasprintf(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), malloc, returns_nonnull));
/* Releases memory from any function above (or from jansson's dumps); accepts NULL. */
void xfree(void *p);

#endif
