/*
 * api/extensions: browser extensions (client.extensions.*,
 * browsers.loadExtensions; SESSION_API.md section 8; docs/extensions.md).
 *
 * An uploaded extension is a record in the store and its zip in
 * DATA/extensions/<id>.zip, scoped to a project. A session loads extensions
 * from its own files: each is unpacked (runtime/extpack) into the session's
 * home, /home/kernel/.extensions/<id> for stored ones and
 * /home/kernel/extensions/<name> for those sent with loadExtensions, and
 * Chromium starts with --load-extension naming those folders (the settings
 * document keeps the list, so a restart keeps them).
 *
 * The plan: features.browser_extensions.enabled gates upload, the Chrome
 * Web Store fetch, sessions and pools naming extensions, and loadExtensions
 * (403); max_stored_per_org bounds the org's stored count (403 naming it).
 */
#ifndef BD_API_EXTENSIONS_H
#define BD_API_EXTENSIONS_H

#include <jansson.h>

#include "api/api.h"
#include "core/err.h"

struct app;
struct sandbox;

/* The settings-document keys this module writes. */
#define EXT_DOC_DIRS  "extension_dirs"  /* folders as the browser sees them, load order */
#define EXT_DOC_IDS   "extension_ids"   /* stored extensions loaded at create */
#define EXT_DOC_NAMES "extension_names" /* names of those sent with loadExtensions */

/* Resolves selectors (an array of {id} or {name}, as the domain rules
 * accepted them; NULL or [] = none) in the org's project to stored
 * extension ids, in order: *ids is a new array of strings. ent is the org's
 * resolved entitlements: 403 feature_not_enabled when selectors are not
 * empty and features.browser_extensions is off; 404 extension_not_found
 * naming the first unknown selector; 400 for more than LIM_EXT_PER_SESSION.
 * For pools: call on create and PATCH to fill the record's extension_ids;
 * pass the selectors on to sess_spawn in the browser body's
 * `extensions`. */
int extensions_resolve(struct app *app, const char *org_id, const char *project_id,
                       const json_t *ent, const json_t *selectors, json_t **ids, struct err *e) WUR;

/* The ids the selectors name now, in order, duplicates and extensions that
 * no longer exist left out (a new array): a pool record's extension_ids.
 * No plan check (rendering). */
json_t *extensions_ids(struct app *app, const char *org_id, const char *project_id,
                       const json_t *selectors);

/* POST /browsers (the module's prepare hook), after the sandbox's files exist and before launch:
 * resolves selectors (as above), unpacks each extension into the session's
 * files and records EXT_DOC_DIRS / EXT_DOC_IDS in doc. Nothing to do for
 * NULL or []. 503 sandbox_required when sb has no files. */
int extensions_session_prepare(struct app *app, const char *org_id, const char *project_id,
                               const json_t *ent, const json_t *selectors, struct sandbox *sb,
                               json_t *doc, struct err *e) WUR;

/* The folders of doc's EXT_DOC_DIRS as a NULL-terminated array for
 * chromium_opts.extension_dirs (the array is owned, xfree it; the strings
 * are borrowed from doc), or NULL when there are none. */
const char **extensions_launch_dirs(const json_t *doc);

/* Creates DATA/extensions. Called once at start (the handlers also create it
 * when missing). */
void extensions_init(struct app *app);

int extensions_upload(struct req *rq, struct resp *rs);
int extensions_list(struct req *rq, struct resp *rs);
int extensions_metadata(struct req *rq, struct resp *rs);
int extensions_download(struct req *rq, struct resp *rs);
int extensions_delete(struct req *rq, struct resp *rs);
int extensions_from_chrome_store(struct req *rq, struct resp *rs);
int extensions_load(struct req *rq, struct resp *rs);

/* The routes of this module, spliced into api_routes (routes.c). The Chrome
 * Web Store route comes before /extensions/{id} (a name "from_chrome_store"
 * is legal, so that one name cannot be downloaded by name). */
#define EXTENSIONS_ROUTES                                                                          \
    {"POST", "/extensions", extensions_upload,                                                     \
     AUTH_KEY | HTTP_ROUTE_UPLOAD | HTTP_ROUTE_BLOCKING},                                          \
        {"GET", "/extensions", extensions_list, AUTH_KEY},                                         \
        {"GET", "/extensions/from_chrome_store", extensions_from_chrome_store,                     \
         AUTH_KEY | HTTP_ROUTE_BLOCKING},                                                          \
        {"GET", "/extensions/{id}/metadata", extensions_metadata, AUTH_KEY},                       \
        {"GET", "/extensions/{id}", extensions_download, AUTH_KEY},                                \
        {"DELETE", "/extensions/{id}", extensions_delete, AUTH_KEY},                               \
        {"POST", "/browsers/{id}/extensions", extensions_load,                                     \
         AUTH_KEY | HTTP_ROUTE_UPLOAD | HTTP_ROUTE_BLOCKING},

#endif
