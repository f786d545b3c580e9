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
#include "domain/session_rules.h"
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
    struct chromium_opts *opts;    /* prepare and launching: launch options a hook may extend */
    const json_t *ent;             /* prepare and handout_check: the org's entitlements */
};

struct session_ext {
    const char *name;
    /* POST /browsers, after validation and before launch: resolve and check
     * the module's fields (403/404/400 via e), prepare the profile folder,
     * set launch options (opts->proxy_server, ...), store its state in doc.
     * A failure aborts the creation; modules prepared before it get ending. */
    int (*prepare)(struct session_ctx *sc, struct err *e);
    /* Before every launch of the session's browser (create, after every
     * prepare; restart): sets launch options kept in doc. An array a hook
     * puts in opts->extension_dirs is xmalloc'd, its strings borrowed from
     * doc; the session xfrees the array after the launch. */
    void (*launching)(struct session_ctx *sc);
    /* A spare is handed out to a create (docs/spares.md): before a spare is
     * taken, check what the create asks of the module (sc->doc holds the
     * owner's settings, sc->rec the owner's org and project, sc->body the
     * create) and keep what handout needs in *state. A refusal keeps the
     * spares and answers what a cold create answers. */
    int (*handout_check)(struct session_ctx *sc, void **state, struct err *e);
    /* The taken spare becomes the owner's (sc->rec: the spare's id, the
     * owner's org), before the started hooks: apply state and release it.
     * A failure spends the spare. */
    int (*handout)(struct session_ctx *sc, void *state, struct err *e);
    /* Releases a state handout_check kept when handout is not called (no
     * spare was ready, or another module refused). */
    void (*handout_cancel)(void *state);
    /* The browser is up (its DevTools URL). */
    void (*started)(struct session_ctx *sc, const char *browser_ws_url);
    /* PATCH /browsers, after the domain plan validated the body and before the
     * response: apply the module's fields (doc is persisted afterwards). */
    int (*update)(struct session_ctx *sc, const char *browser_ws_url, struct err *e);
    /* PATCH /browsers, before the plan (domain/session_rules.h): the module's
     * part of the session's current state (an active recording, a live
     * view viewer). */
    void (*state)(struct session_ctx *sc, struct sessrules_state *st);
    /* A live browser's window is about to be resized to width x height;
     * restart: the plan asked to restart what depends on the size (a
     * recording, with force). Returns the module's state for resized (may
     * be NULL). */
    void *(*resizing)(struct session_ctx *sc, int restart, int width, int height);
    /* After the resize (whether or not it worked): state from resizing,
     * released here. */
    void (*resized)(struct session_ctx *sc, void *state, int width, int height);
    /* DELETE: 1 when what the module's ending hook writes is read right
     * after the DELETE (a profile saved at the end, a replay finished and
     * kept), so that the session ends gracefully before the 204 instead of
     * on a teardown thread. sc->doc may be NULL. */
    int (*needs_graceful_end)(struct session_ctx *sc);
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

/* Room for every module that takes part in sessions (profiles, proxies,
 * telemetry, webdriver, pools, computer, replays, extensions, and those to
 * come). */
#define SESSION_EXT_MAX 16

/* Registers x (borrowed for the life of the process). At most
 * SESSION_EXT_MAX modules; aborts past that (a build mistake). */
void session_ext_register(const struct session_ext *x);
/* The registered modules, NULL-terminated. */
const struct session_ext *const *session_ext_all(void);

#endif
