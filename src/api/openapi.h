/* GET /openapi.yaml, /spec.yaml and /openapi.json (openapi.c): the OpenAPI 3.1 document
 * of every route served (docs/openapi.yaml, built into the binary), without
 * a key. tests/blackbox/37_openapi.test.mjs checks it against the route
 * table (`browserd --routes`) both ways. */
#ifndef BD_API_OPENAPI_H
#define BD_API_OPENAPI_H

#include "http/http.h"

/* 200 with the document's bytes as built: application/yaml, or
 * application/json at /openapi.json (the document is written in JSON,
 * which is YAML 1.2, so both are the same bytes). */
int openapi_get(struct req *rq, struct resp *rs);

#endif
