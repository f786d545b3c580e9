/* b64: standard base64 (RFC 4648 section 4), for bodies and CDP payloads. */
#ifndef BD_CORE_B64_H
#define BD_CORE_B64_H

#include <stddef.h>

/* The encoding of n bytes, NUL-terminated (xmalloc'd; *out_len, when not
 * NULL, receives its length). */
char *b64_encode(const void *data, size_t n, size_t *out_len);
/* Decodes n characters of padded or unpadded base64 into a new buffer
 * (xmalloc'd, NUL-terminated after *out_len bytes). -1 on a character
 * outside the alphabet, misplaced padding or a dangling final character. */
int b64_decode(const char *in, size_t n, unsigned char **out, size_t *out_len);

#endif
