/* api/curl: browsers.curl, an HTTP request made by the session's browser
 * (SESSION_API.md section 7.1; runtime/bcurl.h says how). */
#ifndef BD_API_CURL_H
#define BD_API_CURL_H

#include "domain/curlreq.h"
#include "http/http.h"
#include "runtime/bcurl.h"

int curl_post(struct req *rq, struct resp *rs);
/* The request behind curl_post: cr made by the browser of session_id (a
 * session of the key's project), through the session's network rules and
 * within the curl share of the server, the org and the session. 0 with
 * *res filled (a response or a transport error; bcurl_result_clear), or an
 * E_* code in rq->err (no such session, 409 ended, 429 too many in flight,
 * the browser does not answer). Counts as the session's activity. */
int curl_session_run(struct req *rq, const char *session_id, const struct curlreq *cr,
                     struct bcurl_result *res) WUR;
/* browsers.fetch ({base_url}/curl/raw?url=...&jwt=...): the target's own
 * status, headers and body, relayed (SESSION_API.md section 7.2). */
int curl_raw(struct req *rq, struct resp *rs);

#endif
