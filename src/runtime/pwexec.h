/*
 * pwexec: playwright.execute's runner (SESSION_API.md section 5). One Node
 * process per call (Debian's /usr/bin/node), started by runtime/proc inside
 * the session's sandbox: it joins the session's network namespace, where the
 * browser's DevTools listens on 127.0.0.1, and connects to that endpoint
 * only (other sessions' DevTools are on other namespaces' loopbacks). The
 * runner and its packages (playwright-core, esbuild for TypeScript) live in
 * the repository's runtime-js/ folder, bound read-only into the sandbox.
 *
 * The runner reads the code on stdin and writes one JSON line with the
 * outcome on its descriptor 3; what the code prints goes to stdout/stderr.
 * A timeout kills the runner (and everything it started).
 */
#ifndef BD_RUNTIME_PWEXEC_H
#define BD_RUNTIME_PWEXEC_H

#include <jansson.h>
#include <stddef.h>

#include "core/err.h"
#include "runtime/proc.h"

#define PWEXEC_NODE "/usr/bin/node"

/* The runtime-js folder: $BROWSERD_RUNTIME_JS, else the first ancestor
 * folder of the server's executable holding runtime-js/runner.mjs (or
 * lib/browserd/runtime-js/runner.mjs, the Debian package's layout) with its
 * packages installed (node_modules/playwright-core and esbuild). NULL when
 * neither exists (the call then answers 503). Found once, borrowed. */
const char *pwexec_dir(void);

/* The DevTools URL as seen inside the session's namespace: ws with its
 * "nsN@" tag dropped, in out (cap bytes). */
void pwexec_local_url(const char *ws, char *out, size_t cap);

/* Starts the runner for code against the DevTools endpoint ws (the
 * browser's internal URL; a "nsN@" namespace tag is dropped: the runner is
 * inside that namespace). on_exit(ctx, p) runs when it is done. */
int pwexec_start(const struct sandbox *sb, struct sessmgr *sessions, const char *session_id,
                 const char *ws, const char *code, int timeout_s,
                 void (*on_exit)(void *ctx, struct proc *p), void *ctx, struct proc **out,
                 struct err *e) WUR;

/* The response record {success, result?, error?, stdout?, stderr?} of a
 * finished runner (new reference). */
json_t *pwexec_result(struct proc *p, int timeout_s);

#endif
