/*
 * brender: a page loaded and rendered by a session's browser, for search
 * content in render mode (docs/search.md) and the config registry's visits
 * (docs/config-registry.md).
 *
 * The page is a hidden target (Target.createTarget hidden: true, invisible
 * to the session's own CDP clients) in the default browser context: the
 * session's cookies, user agent, TLS, and its egress proxy with the
 * session's network rules, as bcurl. Unlike bcurl the page runs: its
 * scripts execute, its sub-requests are made, script redirects are
 * followed. The load is over when the main frame has fired its load event,
 * is not loading, and the page's network was quiet (no request sent,
 * answered or ended) for BRENDER_SETTLE_MS with none in flight, or for
 * four times that with some still in flight (a long poll); then the rendered DOM
 * (document.documentElement's outerHTML, at most LIM_RENDER_HTML_BYTES) and location.href are read.
 * Everything is bounded by timeout_ms: past it, a page that has answered is
 * read as it stands (loaded 0), one that has not is ERR_TIMED_OUT.
 *
 * While it loads the page's telemetry is kept: its responses (at most
 * LIM_RENDER_RESPONSES; URL, status, main-frame document or not, challenge
 * header: siteclass_challenge_header) and its console errors
 * (console.error, console.assert, uncaught exceptions; at most
 * LIM_RENDER_CONSOLE, each cut to LIM_RENDER_CONSOLE_BYTES).
 *
 * Each call opens its own DevTools connection and target and closes both;
 * it blocks the calling thread for at most timeout_ms plus a few seconds.
 * Thread-safe (no shared state). Callers bound how many run at once.
 */
#ifndef BD_RUNTIME_BRENDER_H
#define BD_RUNTIME_BRENDER_H

#include <stddef.h>

#include "core/err.h"
#include "domain/siteclass.h"

/* How long the page must be quiet (no request in flight, main frame not
 * loading) after its load event before it is read: long enough for a
 * script's redirect or fetch at load to start. */
#define BRENDER_SETTLE_MS 500

struct brender_result {
    /* A page (transport_error 0): */
    int status; /* the main document's HTTP status (the last document's) */
    int loaded; /* 1: loaded and settled within timeout_ms */
    char *html; /* the rendered DOM, UTF-8, NUL-terminated */
    size_t html_len;
    int html_cut;       /* 1: html was cut at LIM_RENDER_HTML_BYTES */
    char *final_url;    /* location.href at the end; NULL when unknown */
    char *content_type; /* document.contentType; NULL when unknown */
    /* The telemetry (owned strings; siteclass_telemetry reads them): */
    struct siteclass_response *responses;
    size_t nresponses;
    size_t responses_seen; /* all of them, the kept ones included */
    char **console_errors;
    size_t nconsole;
    /* Or a transport error: */
    int transport_error;
    int net_error;           /* Chromium's number, 0 when unknown */
    char net_error_name[64]; /* "ERR_CONNECTION_REFUSED", "" when none */
    char message[256];
    long long duration_ms;
};

/* Loads url in the browser whose DevTools browser endpoint is ws_url, for
 * at most timeout_ms. 0 with *out filled (a page or a transport error:
 * the egress proxy's refusal of the main document is ERR_ACCESS_DENIED);
 * E_UNAVAIL when the browser cannot be driven (gone, not answering). */
int brender_run(const char *ws_url, const char *url, int timeout_ms, struct brender_result *out,
                struct err *e) WUR;
/* The telemetry of res as the classifier reads it (borrowing res). */
void brender_telemetry(const struct brender_result *res, struct siteclass_telemetry *t);
void brender_result_clear(struct brender_result *res);

#endif
