/* GET /openapi.yaml and GET /spec.yaml (openapi.c): the OpenAPI 3.1 document
 * of every route served (docs/openapi.yaml, built into the binary), without
 * a key. tests/blackbox/37_openapi.test.mjs checks it against the route
 * table (`browserd --routes`) both ways. */
#ifndef BD_API_OPENAPI_H
#define BD_API_OPENAPI_H

#include "http/http.h"

/* 200 application/yaml with the document's bytes as built. */
int openapi_get(struct req *rq, struct resp *rs);

#endif
