/*
 * api/search: web search through operator-configured providers
 * (KERNEL_API_NEWER.md 1.4 "Search"; docs/search.md).
 *
 * Providers come from BROWSERD_SEARCH_PROVIDERS (inline JSON or a file
 * naming [{name, protocol, endpoint, key | key_env, timeout_ms?}];
 * docs/operator.md), read once on first use. Protocols: "searxng" (GET
 * {endpoint}/search?q=&format=json) and "brave" (GET
 * {endpoint}/res/v1/web/search?q= with X-Subscription-Token). The server
 * calls them itself (proxy/httpc, the operator's hosts: no address rule),
 * within a per-org share of calls in flight (LIM_SEARCH_INFLIGHT*), a
 * deadline per attempt and a cap on the answer's size.
 *
 * POST /search tries providers by its strategy (auto, pinned, fallback with
 * fallback_on), records each attempt, optionally fetches each result's page
 * through one of the caller's sessions (api/curl's curl_session_run, so the
 * session's egress rules apply) and converts it (domain/htmltext), and
 * stores the Search record for 24 h: GET /search/{id} replays it to the
 * same organization only. GET /search/providers lists the providers.
 * Gated by features.search.
 */
#ifndef BD_API_SEARCH_H
#define BD_API_SEARCH_H

#include <jansson.h>

#include "http/http.h"

int search_post(struct req *rq, struct resp *rs);
int search_get(struct req *rq, struct resp *rs);
int search_providers(struct req *rq, struct resp *rs);
/* Results of a provider's answer (untrusted bytes parsed by jsonx_parse;
 * a Brave answer when brave, else SearXNG's) as a new array of [{url, title,
 * snippet, published_date?}] (only http and https URLs), or NULL when the
 * answer is not the protocol's. Pure: a fuzz target calls it. */
json_t *search_normalize(int brave, const json_t *root);
/* POST /search/{id}/contents: 404 until shipped, as the service answers. */
int search_contents(struct req *rq, struct resp *rs);

#endif
