#!/bin/sh
# Bans unsafe or unbounded C library calls (curl's checksrc habit), and raw
# malloc/free outside the allocation module.
set -u
bad=0
pat='\b(sprintf|vsprintf|strcpy|strcat|strncpy|strtok|atoi|atol|gets|alloca)[[:space:]]*\('
if grep -rnE "$pat" src tests/unit fuzz bench --include='*.c' --include='*.h'; then
    echo "banned: the calls above are not allowed (use snprintf, memcpy with lengths, strtol)"
    bad=1
fi
if grep -rnE '\b(malloc|calloc|realloc|free)[[:space:]]*\(' src --include='*.c' --include='*.h' \
        | grep -v '^src/core/xalloc\.[ch]:'; then
    echo "banned: raw allocator calls outside src/core/xalloc.c (use xmalloc/xfree)"
    bad=1
fi
exit $bad
