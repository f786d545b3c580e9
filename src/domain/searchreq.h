/*
 * searchreq: the rules of a POST /search body (KERNEL_API_NEWER.md 1.4
 * "Search"; docs/search.md) as pure functions: a body and the names of the
 * configured providers in, a validated request (or a 400 naming each field
 * and its rule) out; and the domain filters of its results. No I/O:
 * api/search.c asks the providers and fetches content.
 */
#ifndef BD_DOMAIN_SEARCHREQ_H
#define BD_DOMAIN_SEARCHREQ_H

#include <jansson.h>
#include <stddef.h>

#include "core/err.h"
#include "core/limits.h"

#define SEARCHREQ_PROVIDERS_MAX           LIM_SEARCH_PROVIDERS
#define SEARCHREQ_TIMEOUT_MIN             1000
#define SEARCHREQ_TIMEOUT_MAX             60000
#define SEARCHREQ_CHARS_DEFAULT           10000
#define SEARCHREQ_CONTENT_TIMEOUT_DEFAULT 15000

/* An attempt's outcome, as the record names it (searchreq_outcome_names). */
enum search_outcome { SEARCH_SUCCESS, SEARCH_EMPTY, SEARCH_ERROR, SEARCH_TIMEOUT };
extern const char *const searchreq_outcome_names[];

/* A validated request. Strings and arrays are borrowed from the body. */
struct searchreq {
    const char *query;
    int max_results;                                 /* 1..100, default 10 */
    const char *country, *language, *safe_search;    /* NULL when absent */
    const json_t *include_domains, *exclude_domains; /* arrays of names, or NULL */
    int timeout_ms;                                  /* 0: each provider's own */
    size_t order[SEARCHREQ_PROVIDERS_MAX];           /* providers to ask, as indices into names */
    size_t norder;
    unsigned fallback_on; /* bits 1 << enum search_outcome: ask the next provider */
    /* content: */
    int content;  /* 1 when asked for */
    int markdown; /* else text */
    int max_chars, content_timeout_ms;
    int render; /* mode render was asked (served as curl) */
    const char *browser_id;
};

/* Validates body (a JSON object) against the nnames configured providers
 * names[]. E_INVALID with one field detail per problem: query (required,
 * 1..LIM_SEARCH_QUERY_BYTES), max_results (1..100), country and language
 * (strings of at most 16 bytes), safe_search (off|moderate|strict),
 * include_domains/exclude_domains (at most 100 names of 1..253 bytes),
 * timeout_ms (1000..60000), strategy (type auto|pinned|fallback; providers
 * known names, required but with auto, exactly one with pinned; fallback_on
 * of error|timeout|empty, default [error, timeout], none with pinned), and
 * content (true or {source auto|browser (provider is refused), browser
 * {browser_id required, mode curl|render}, format markdown|text, max_chars
 * 1..LIM_SEARCH_CONTENT_CHARS, timeout_ms 1000..60000, max_age_hours an
 * integer}). Other fields are ignored. */
int searchreq_parse(const json_t *body, const char *const *names, size_t nnames,
                    struct searchreq *sp, struct err *e) WUR;

/* 1 when url passes the request's domain filters: its host is not any
 * exclude_domains name nor under one, and (when include_domains is given)
 * is one of them or under one. */
int searchreq_kept(const struct searchreq *sp, const char *url);

#endif
