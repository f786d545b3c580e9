/* GET /openapi.yaml, /spec.yaml, /openapi.json: see openapi.h.
 *
 * The document is docs/openapi.yaml, assembled into this object's read-only
 * data with .incbin (no generator, no new build tool; the Makefile makes
 * this object depend on the file, and the path is relative to the
 * top folder, where make runs the compiler). A NUL follows it. */
#include "api/openapi.h"

#include <string.h>

#include "core/xalloc.h"

__asm__(".pushsection .rodata\n"
        ".balign 16\n"
        ".globl openapi_doc\n"
        ".type openapi_doc, @object\n"
        "openapi_doc:\n"
        ".incbin \"docs/openapi.yaml\"\n"
        ".globl openapi_doc_end\n"
        "openapi_doc_end:\n"
        ".byte 0\n"
        ".popsection\n");

extern const char openapi_doc[], openapi_doc_end[];

int openapi_get(struct req *rq, struct resp *rs)
{
    size_t n = (size_t)(openapi_doc_end - openapi_doc);
    char *text = xmalloc(n + 1);
    memcpy(text, openapi_doc, n + 1);
    int json = strcmp(rq->path, "/openapi.json") == 0;
    resp_text(rs, 200, json ? "application/json" : "application/yaml; charset=utf-8", text, n);
    return 0;
}
