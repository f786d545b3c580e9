#include "domain/htmltext.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/xalloc.h"

#define TAG_NAME_MAX 16
#define HREF_MAX     2048

struct writer {
    char *p;
    size_t len, cap;
    size_t chars, max_chars;
    int full;     /* max_chars reached: nothing more is written */
    int space;    /* white space seen since the last character */
    int newlines; /* line breaks asked for since the last character */
};

static void put_byte(struct writer *w, char c)
{
    if (w->len + 2 > w->cap) {
        w->cap = w->cap ? w->cap * 2 : 256;
        w->p = xrealloc(w->p, w->cap);
    }
    w->p[w->len++] = c;
    w->p[w->len] = '\0';
}

/* The length of the valid UTF-8 sequence at s (n bytes left), or 0 when
 * the byte there starts none (overlong forms, surrogates and code points
 * past U+10FFFF are not valid; nor is NUL, which would end the C string). */
static size_t utf8_valid(const char *s, size_t n)
{
    unsigned char c = (unsigned char)s[0];
    size_t len = c < 0x80                 ? 1
                 : c >= 0xC2 && c <= 0xDF ? 2
                 : (c >> 4) == 0xE        ? 3
                 : c >= 0xF0 && c <= 0xF4 ? 4
                                          : 0;
    if (len == 0 || len > n || c == 0)
        return 0;
    for (size_t k = 1; k < len; k++)
        if (((unsigned char)s[k] >> 6) != 2)
            return 0;
    unsigned char c1 = len > 1 ? (unsigned char)s[1] : 0;
    if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0) || (c == 0xF0 && c1 < 0x90) ||
        (c == 0xF4 && c1 >= 0x90))
        return 0;
    return len;
}

static const char REPLACEMENT[] = "\xEF\xBF\xBD";

/* Writes one character of n bytes (a UTF-8 sequence), after the space or
 * line breaks pending before it. */
static void put_char(struct writer *w, const char *s, size_t n)
{
    if (w->full)
        return;
    size_t lead = w->newlines ? (size_t)(w->newlines > 2 ? 2 : w->newlines) : w->space ? 1 : 0;
    if (w->len == 0 || (!w->newlines && (w->p[w->len - 1] == ' ' || w->p[w->len - 1] == '\n')))
        lead = 0;
    if (w->chars + lead + 1 > w->max_chars) {
        w->full = 1;
        return;
    }
    for (size_t i = 0; i < lead; i++)
        put_byte(w, w->newlines ? '\n' : ' ');
    w->chars += lead;
    w->newlines = 0;
    w->space = 0;
    for (size_t i = 0; i < n; i++)
        put_byte(w, s[i]);
    w->chars++;
}

/* Writes a literal (markup of the markdown form): every byte as is. */
static void put_lit(struct writer *w, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t len = utf8_valid(s + i, n - i);
        put_char(w, len ? s + i : REPLACEMENT, len ? len : 3);
        i += len ? len : 1;
    }
}

static void brk(struct writer *w, int n)
{
    if (w->newlines < n)
        w->newlines = n;
}

static size_t utf8_encode(uint32_t cp, char *o)
{
    if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        cp = 0xFFFD;
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes the entity at s[0] == '&' into o (up to 4 bytes): its length in
 * s, or 0 when it is not one this converter knows (the '&' is then text). */
static size_t entity(const char *s, size_t n, char *o, size_t *olen)
{
    static const struct {
        const char *name;
        uint32_t cp;
    } named[] = {{"amp", '&'},       {"lt", '<'},      {"gt", '>'},       {"quot", '"'},
                 {"apos", '\''},     {"nbsp", ' '},    {"mdash", 0x2014}, {"ndash", 0x2013},
                 {"hellip", 0x2026}, {"copy", 0xA9},   {"rsquo", 0x2019}, {"lsquo", 0x2018},
                 {"rdquo", 0x201D},  {"ldquo", 0x201C}};
    size_t end = 1;
    while (end < n && end < 12 && s[end] != ';')
        end++;
    if (end >= n || s[end] != ';')
        return 0;
    if (s[1] == '#') {
        uint32_t cp = 0;
        int hex = end > 2 && (s[2] == 'x' || s[2] == 'X');
        size_t i = hex ? 3 : 2;
        if (i >= end)
            return 0;
        for (; i < end; i++) {
            char c = s[i];
            int d = c >= '0' && c <= '9'          ? c - '0'
                    : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                  : -1;
            if (d < 0)
                return 0;
            cp = cp * (hex ? 16 : 10) + (uint32_t)d;
            if (cp > 0x10FFFF)
                cp = 0x110000;
        }
        *olen = utf8_encode(cp, o);
        return end + 1;
    }
    for (size_t k = 0; k < sizeof named / sizeof named[0]; k++)
        if (strlen(named[k].name) == end - 1 && memcmp(s + 1, named[k].name, end - 1) == 0) {
            *olen = utf8_encode(named[k].cp, o);
            return end + 1;
        }
    return 0;
}

/* Elements whose content is dropped, up to their end tag. */
static int skipped(const char *t)
{
    return !strcmp(t, "script") || !strcmp(t, "style") || !strcmp(t, "noscript") ||
           !strcmp(t, "template") || !strcmp(t, "head") || !strcmp(t, "svg") ||
           !strcmp(t, "iframe") || !strcmp(t, "object");
}

/* Line breaks around an element: 2 (a paragraph), 1 (a line), 0 (inline). */
static int block(const char *t)
{
    static const char *const para[] = {"p",     "ul", "ol", "blockquote", "pre",
                                       "table", "h1", "h2", "h3",         "h4",
                                       "h5",    "h6", "hr", "dl",         "figure"};
    static const char *const line[] = {"div", "section", "article", "header", "footer", "main",
                                       "nav", "aside",   "li",      "tr",     "br",     "form",
                                       "dt",  "dd",      "address", "body",   "title",  "caption"};
    for (size_t i = 0; i < sizeof para / sizeof para[0]; i++)
        if (!strcmp(t, para[i]))
            return 2;
    for (size_t i = 0; i < sizeof line / sizeof line[0]; i++)
        if (!strcmp(t, line[i]))
            return 1;
    return 0;
}

/* The href attribute of the tag's attributes a[0..n), entities decoded,
 * into out (cut at cap - 1). 1 when there is one. */
static int href_of(const char *a, size_t n, char *out, size_t cap)
{
    for (size_t i = 0; i + 4 < n; i++) {
        if (strncasecmp(a + i, "href", 4) != 0 ||
            (i > 0 && a[i - 1] != ' ' && a[i - 1] != '\t' && a[i - 1] != '\n'))
            continue;
        size_t j = i + 4;
        while (j < n && (a[j] == ' ' || a[j] == '\t' || a[j] == '\n'))
            j++;
        if (j >= n || a[j] != '=')
            continue;
        j++;
        while (j < n && (a[j] == ' ' || a[j] == '\t' || a[j] == '\n'))
            j++;
        char q = j < n && (a[j] == '"' || a[j] == '\'') ? a[j++] : 0;
        size_t o = 0;
        while (j < n && (q ? a[j] != q : a[j] != ' ' && a[j] != '\t' && a[j] != '\n')) {
            char dec[4];
            size_t dl = 0, el = a[j] == '&' ? entity(a + j, n - j, dec, &dl) : 0;
            const char *src = el ? dec : a + j;
            size_t sl = el ? dl : 1;
            for (size_t k = 0; k < sl && o + 1 < cap; k++)
                out[o++] = src[k] == '\n' || src[k] == '\r' ? ' ' : src[k];
            j += el ? el : 1;
        }
        out[o] = '\0';
        return o > 0;
    }
    return 0;
}

static void text_byte_run(struct writer *w, const char *s, size_t n, int pre)
{
    size_t i = 0;
    while (i < n && !w->full) {
        unsigned char c = (unsigned char)s[i];
        if (c == '&') {
            char dec[4];
            size_t dl = 0, el = entity(s + i, n - i, dec, &dl);
            if (el) {
                if (dl == 1 && dec[0] == ' ')
                    w->space = 1;
                else
                    put_char(w, dec, dl);
                i += el;
                continue;
            }
        }
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f') {
            if (pre && c == '\n')
                brk(w, 1);
            else
                w->space = 1;
            i++;
            continue;
        }
        size_t len = utf8_valid(s + i, n - i);
        put_char(w, len ? s + i : REPLACEMENT, len ? len : 3);
        i += len ? len : 1;
    }
}

void htmltext_convert(const char *html, size_t n, int markdown, size_t max_chars, char **out,
                      int *truncated)
{
    struct writer w = {0};
    w.max_chars = max_chars;
    char skip_until[TAG_NAME_MAX + 1] = "";
    char href[HREF_MAX];
    int in_link = 0, pre = 0;
    size_t i = 0;
    while (i < n && !w.full) {
        if (html[i] != '<') {
            size_t j = i;
            while (j < n && html[j] != '<')
                j++;
            if (!skip_until[0])
                text_byte_run(&w, html + i, j - i, pre);
            i = j;
            continue;
        }
        if (i + 4 <= n && memcmp(html + i, "<!--", 4) == 0) {
            const char *end = NULL;
            for (size_t k = i + 4; k + 3 <= n; k++)
                if (memcmp(html + k, "-->", 3) == 0) {
                    end = html + k + 3;
                    break;
                }
            i = end ? (size_t)(end - html) : n;
            continue;
        }
        size_t j = i + 1;
        int closing = j < n && html[j] == '/';
        if (closing)
            j++;
        char name[TAG_NAME_MAX + 1];
        size_t nl = 0;
        while (j < n && ((html[j] >= 'a' && html[j] <= 'z') || (html[j] >= 'A' && html[j] <= 'Z') ||
                         (html[j] >= '0' && html[j] <= '9'))) {
            if (nl < TAG_NAME_MAX)
                name[nl++] = (char)(html[j] | 0x20);
            j++;
        }
        name[nl] = '\0';
        if (nl == 0 && !(j < n && (html[j] == '!' || html[j] == '?'))) {
            /* a '<' that opens no tag is text */
            if (!skip_until[0])
                text_byte_run(&w, "<", 1, pre);
            i++;
            continue;
        }
        size_t attrs = j;
        char q = 0;
        while (j < n && (q || html[j] != '>')) {
            if (q && html[j] == q)
                q = 0;
            else if (!q && (html[j] == '"' || html[j] == '\''))
                q = html[j];
            j++;
        }
        size_t attrs_end = j;
        i = j < n ? j + 1 : n;
        if (skip_until[0]) {
            if (closing && !strcmp(name, skip_until))
                skip_until[0] = '\0';
            continue;
        }
        if (nl == 0)
            continue; /* <!doctype>, <?xml?> */
        if (!closing && skipped(name)) {
            int self_closed = attrs_end > attrs && html[attrs_end - 1] == '/';
            if (!self_closed)
                snprintf(skip_until, sizeof skip_until, "%s", name);
            continue;
        }
        if (!strcmp(name, "pre"))
            pre = !closing;
        int b = block(name);
        if (b)
            brk(&w, b);
        if (!markdown)
            continue;
        if (!closing && name[0] == 'h' && name[1] >= '1' && name[1] <= '6' && !name[2]) {
            static const char hashes[] = "###### ";
            put_lit(&w, hashes + 6 - (name[1] - '0'));
        } else if (!closing && !strcmp(name, "li")) {
            put_lit(&w, "- ");
        } else if (!strcmp(name, "a")) {
            if (!closing && !in_link &&
                href_of(html + attrs, attrs_end - attrs, href, sizeof href) &&
                strncasecmp(href, "javascript:", 11) != 0) {
                put_lit(&w, "[");
                in_link = 1;
            } else if (closing && in_link) {
                w.space = 0;
                put_lit(&w, "](");
                put_lit(&w, href);
                put_lit(&w, ")");
                in_link = 0;
            }
        }
    }
    if (!w.p)
        w.p = xstrdup("");
    *truncated = w.full;
    *out = w.p;
}

void htmltext_plain(const char *text, size_t n, size_t max_chars, char **out, int *truncated)
{
    struct writer w = {0};
    w.max_chars = max_chars;
    for (size_t i = 0; i < n && !w.full;) {
        size_t len = utf8_valid(text + i, n - i);
        if (!w.full && w.chars + 1 > w.max_chars) {
            w.full = 1;
            break;
        }
        const char *c = len ? text + i : REPLACEMENT;
        for (size_t k = 0; k < (len ? len : 3); k++)
            put_byte(&w, c[k]);
        w.chars++;
        i += len ? len : 1;
    }
    *truncated = w.full;
    *out = w.p ? w.p : xstrdup("");
}
