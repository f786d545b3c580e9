/* api/curl: browsers.curl, an HTTP request made by the session's browser
 * (SESSION_API.md section 7.1; runtime/bcurl.h says how). */
#ifndef BD_API_CURL_H
#define BD_API_CURL_H

#include "http/http.h"

int curl_post(struct req *rq, struct resp *rs);
/* browsers.fetch ({base_url}/curl/raw?url=...&jwt=...): the target's own
 * status, headers and body, relayed (SESSION_API.md section 7.2). */
int curl_raw(struct req *rq, struct resp *rs);

#endif
