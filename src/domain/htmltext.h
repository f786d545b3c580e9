/*
 * htmltext: an HTML page as plain text or as markdown, for the content of
 * search results (docs/search.md). A single pass over the bytes, no tree:
 * scripts, styles, templates and the head are dropped, block elements
 * become line breaks, entities are decoded, runs of white space collapse.
 * Markdown adds headings ("# "), links ("[text](href)"), list items ("- ")
 * and paragraphs (a blank line). Pure; bounded: the output holds at most
 * max_chars characters (UTF-8 code points), always valid UTF-8 (a byte
 * that starts no valid sequence, and NUL, become U+FFFD), and a tag's name or an
 * href past their caps is cut.
 */
#ifndef BD_DOMAIN_HTMLTEXT_H
#define BD_DOMAIN_HTMLTEXT_H

#include <stddef.h>

/* Converts n bytes of html. *out is a NUL-terminated string the caller
 * frees; *truncated is 1 when the text was cut at max_chars. */
void htmltext_convert(const char *html, size_t n, int markdown, size_t max_chars, char **out,
                      int *truncated);

/* The first max_chars characters of n bytes of text, invalid bytes as
 * U+FFFD, as htmltext_convert's *out and *truncated. */
void htmltext_plain(const char *text, size_t n, size_t max_chars, char **out, int *truncated);

#endif
