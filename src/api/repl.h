/* api/repl: the Browser REPL, POST /browsers/{id_or_name}/repl
 * (KERNEL_API_NEWER.md 1.4): parse, call runtime/repl, render. docs/repl.md. */
#ifndef BD_API_REPL_H
#define BD_API_REPL_H

#include "api/api.h"
#include "http/http.h"

int repl_post(struct req *rq, struct resp *rs);

#endif
