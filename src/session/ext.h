/*
 * session/ext: how modules take part in a browser session's life without
 * editing the session's code. A module (profiles, egress proxy, telemetry,
 * WebDriver BiDi) registers one struct session_ext at start (main.c, before
 * serving); session/session.c (and api/browsers.c for render and the CDP
 * relay's hooks) calls every registered hook at the points below, in
 * registration order. All hooks are optional (NULL).
 *
 * Threading: hooks run on HTTP threads (create, update, delete, render), on
 * the session supervisor thread (ending after a timeout or a browser exit),
 * on a teardown thread (ending after a delete in the background), or on a
 * relay thread (cdp_message); a module protects its own state.
 */
#ifndef BD_SESSION_EXT_H
#define BD_SESSION_EXT_H

#include <jansson.h>
#include <stdint.h>

#include "core/err.h"
#include "runtime/chromium.h"
#include "store/store.h"

struct app;

/* What a hook sees of a session. */
struct session_ctx {
    struct app *app;
    const struct session_rec *rec; /* the store row (id, org_id, project_id, name, ...) */
    json_t *doc;                   /* the settings document stored with the session (borrowed; a
                                      prepare/update hook may add its own keys, which are persisted) */
    const json_t *body;            /* the create or PATCH body (borrowed), NULL elsewhere */
    const char *user_data_dir;     /* the browser's profile folder */
    struct chromium_opts *opts;    /* prepare only: launch options a hook may extend */
};

struct session_ext {
    const char *name;
    /* POST /browsers, after validation and before launch: resolve and check
     * the module's fields (403/404/400 via e), prepare the profile folder,
     * set launch options (opts->proxy_server, ...), store its state in doc.
     * A failure aborts the creation; modules prepared before it get ending. */
    int (*prepare)(struct session_ctx *sc, struct err *e);
    /* The browser is up (its DevTools URL). */
    void (*started)(struct session_ctx *sc, const char *browser_ws_url);
    /* PATCH /browsers, after the domain plan validated the body and before the
     * response: apply the module's fields (doc is persisted afterwards). */
    int (*update)(struct session_ctx *sc, const char *browser_ws_url, struct err *e);
    /* The session ended (reason: "deleted", "timeout", "browser exited: ...",
     * "server stopped", "launch failed"). The browser has stopped; its folder
     * still exists and is removed after every hook ran. */
    void (*ending)(struct session_ctx *sc, const char *reason);
    /* Adds the module's fields to a Browser record (live or deleted). */
    void (*render)(struct session_ctx *sc, json_t *record);
    /* One CDP (or BiDi) client message relayed to the browser (relay thread;
     * must not block). session_id identifies the session, conn the client
     * connection (an opaque identity, the same in cdp_client). */
    void (*cdp_message)(const char *session_id, const void *conn, const char *method, size_t len);
    /* A CDP client attached or detached (relay/HTTP thread). excluded: see
     * telemetry; attached=1 on attach, 0 on detach, with the number of
     * messages the browser sent this client (0 on attach). */
    void (*cdp_client)(const char *session_id, const void *conn, int attached,
                       uint64_t from_browser);
};

/* Registers x (borrowed for the life of the process). At most 16 modules. */
void session_ext_register(const struct session_ext *x);
/* The registered modules, NULL-terminated. */
const struct session_ext *const *session_ext_all(void);

#endif
