/*
 * profiles: saved browser states (/profiles) and their part in sessions.
 *
 * A profile is a record in the store (project-scoped, optional unique name)
 * plus, once a session saved into it, an archive of a user-data folder
 * without caches at DATA/profiles/<id>.tar.gz (runtime/profile_archive.h).
 * A session created or updated with `profile` starts from that archive; with
 * `save_changes: true` the folder is archived back when the session ends.
 * docs/profiles.md describes the life cycle and the decisions taken.
 *
 * The session side is a struct session_ext registered by profiles_init.
 */
#ifndef BD_API_PROFILES_H
#define BD_API_PROFILES_H

#include <jansson.h>

#include "core/err.h"
#include "http/http.h"
#include "store/store.h"

struct app;

/* Registers the session hooks and prepares DATA/profiles (created 0700;
 * temporary files a crash left behind are removed). Call once at start,
 * before sess_recover, so that recovered sessions see the hooks. */
void profiles_init(struct app *app);

/* Handlers (route table in routes.c; all AUTH_KEY, all gated by
 * features.profiles). */
int profiles_create(struct req *rq, struct resp *rs);
int profiles_get(struct req *rq, struct resp *rs);
int profiles_list(struct req *rq, struct resp *rs);
int profiles_update(struct req *rq, struct resp *rs);
int profiles_delete(struct req *rq, struct resp *rs);
int profiles_download(struct req *rq, struct resp *rs);
/* The bytes of saved archives one organization keeps on this host, its
 * profiles together (LIM_PROFILE_ORG_BYTES by default; BROWSERD_PROFILE_ORG_MB
 * lowers it). A save that would take the organization past it is refused as
 * one over limits.max_profile_bytes: the profile keeps its previous state. */
void profiles_set_org_bytes(long long bytes);

/* ---- for other modules (browser pools, browsers.c) ---- */

/* Where profile id's archive lives (it may not exist yet). */
void profiles_archive_path(const struct app *app, const char *id, char *out, size_t cap);

/* Finds the profile a selector ({id} or {name}, as validated by
 * fields_check_selector) names in project_id of org_id: an id matches ids
 * only, a name names only. E_NOTFOUND with code "profile_not_found" and a
 * message naming the selector. */
int profiles_resolve(struct app *app, const char *org_id, const char *project_id,
                     const json_t *selector, struct profile_rec *out, struct err *e) WUR;

/* Fills folder dir (created 0700 if missing) from the profile's archive when
 * one was saved, and moves its last_used_at. A profile never saved leaves dir
 * empty: the browser starts fresh. E_INTERNAL when extraction fails. */
int profiles_load_into(struct app *app, struct profile_rec *p, const char *dir, struct err *e) WUR;

/* The Profile record {id, created_at, last_used_at?, name|null, updated_at}
 * (new reference). last_used_at is omitted while no session used it. */
json_t *profiles_render(const struct profile_rec *p);

/*
 * Provided by browsers.c (the lead's side of PATCH /browsers with `profile`):
 *
 *   int sess_restart_with_profile(struct app *app, const struct session_rec *s,
 *                                     const char *archive_path, struct err *e);
 *
 * Stops the session's browser (graceful, as on delete), empties its
 * user-data folder, extracts archive_path into it with
 * profile_archive_extract when archive_path is not NULL, relaunches Chromium
 * with the session's stored options on that folder, and installs the new
 * browser under the same session id (sessmgr_replace), so cdp_ws_url stays
 * valid. 0, or an E_* code with e filled (the session then has no browser:
 * E_UNAVAIL "browser_unavailable").
 *
 * profiles.c references it weakly: until browsers.c defines it, PATCH
 * /browsers with `profile` answers 501.
 */

#endif
