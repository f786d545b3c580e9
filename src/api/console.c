/* GET /console: see console.h.
 *
 * The page is src/api/console.html, assembled into this object's read-only
 * data with .incbin, as api/openapi.c does (the Makefile makes this object
 * depend on the file). Its one <style> and one <script> are allowed by
 * their SHA-256 in the Content-Security-Policy, computed from the bytes
 * served, so an edit of the page cannot leave a stale hash. */
#include "api/console.h"

#include <stdio.h>
#include <string.h>

#include "core/b64.h"
#include "core/crypto.h"
#include "core/xalloc.h"

__asm__(".pushsection .rodata\n"
        ".balign 16\n"
        ".globl console_page\n"
        ".type console_page, @object\n"
        "console_page:\n"
        ".incbin \"src/api/console.html\"\n"
        ".globl console_page_end\n"
        "console_page_end:\n"
        ".byte 0\n"
        ".popsection\n");

extern const char console_page[], console_page_end[];

/* The value of a lowercase hex digit (crypto_sha256_hex writes only those). */
static unsigned nibble(char c)
{
    return c <= '9' ? (unsigned)(c - '0') : (unsigned)(c - 'a' + 10);
}

/* 'sha256-BASE64' of the text between the first open tag and its close tag
 * into out; an empty string when the page has no such element. */
static void element_hash(const char *open, const char *close, char *out, size_t cap)
{
    out[0] = '\0';
    const char *a = strstr(console_page, open);
    const char *b = a ? strstr(a + strlen(open), close) : NULL;
    if (!b)
        return;
    a += strlen(open);
    char hex[CRYPTO_SHA256_HEX];
    crypto_sha256_hex(a, (size_t)(b - a), hex);
    unsigned char md[32];
    for (size_t i = 0; i < sizeof md; i++)
        md[i] = (unsigned char)(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
    char *enc = b64_encode(md, sizeof md, NULL);
    snprintf(out, cap, "'sha256-%s'", enc);
    xfree(enc);
}

int console_get(struct req *rq, struct resp *rs)
{
    (void)rq;
    char style[64], script[64];
    element_hash("<style>", "</style>", style, sizeof style);
    element_hash("<script>", "</script>", script, sizeof script);
    /* Longer than a resp_header value: one of the response's more_headers. */
    char *csp = xasprintf(
        "default-src 'self'; script-src %s; style-src %s; img-src 'self' data:; "
        "media-src 'self' blob:; connect-src 'self'; frame-src 'none'; frame-ancestors 'none'; "
        "base-uri 'none'; form-action 'none'; object-src 'none'",
        script[0] ? script : "'none'", style[0] ? style : "'none'");
    if (!rs->more_headers)
        rs->more_headers = json_array();
    json_array_append_new(rs->more_headers, json_pack("[s,s]", "Content-Security-Policy", csp));
    xfree(csp);
    resp_header(rs, "X-Frame-Options", "DENY");
    resp_header(rs, "Cache-Control", "no-store");
    resp_header(rs, "Referrer-Policy", "no-referrer");
    resp_header(rs, "X-Content-Type-Options", "nosniff");
    size_t n = (size_t)(console_page_end - console_page);
    char *text = xmalloc(n + 1);
    memcpy(text, console_page, n + 1);
    resp_text(rs, 200, "text/html; charset=utf-8", text, n);
    return 0;
}
