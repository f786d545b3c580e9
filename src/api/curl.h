/* api/curl: browsers.curl, an HTTP request made by the session's browser
 * (SESSION_API.md section 7.1; runtime/bcurl.h says how). */
#ifndef BD_API_CURL_H
#define BD_API_CURL_H

#include "http/http.h"

int curl_post(struct req *rq, struct resp *rs);

#endif
