/* libFuzzer target for domain/filetype: arbitrary bytes as a downloaded
 * file's name and first bytes (both come from the web). Checks: no crash, a
 * media type always, and a name's partial flag is its ".crdownload" suffix. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/xalloc.h"
#include "domain/filetype.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The first byte splits the input into a name and a head. */
    size_t cut = size ? data[0] % (size + 1) : 0;
    const uint8_t *rest = size ? data + 1 : data;
    size_t n = size ? size - 1 : 0;
    if (cut > n)
        cut = n;
    char *name = xmalloc(cut + 1);
    memcpy(name, rest, cut);
    name[cut] = '\0';
    const char *mime = filetype_mime(name, rest + cut, n - cut);
    if (!mime || !strchr(mime, '/'))
        abort();
    size_t k = strlen(name);
    int want = k > 11 && strcmp(name + k - 11, ".crdownload") == 0;
    if (filetype_partial(name) != want)
        abort();
    xfree(name);
    return 0;
}
