/*
 * Profiles: /profiles (CRUD, list, download) and the session hooks that load
 * a profile into a browser and save the browser's state back.
 *
 * Archive writes (save back) and deletions of a profile are serialized by one
 * mutex, so that a profile deleted while a session saves into it leaves no
 * orphan archive behind. Reads (extract, download) need no lock: archives are
 * replaced by rename, so a reader sees the old file or the new one.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "api/profiles.h"
#include "session/ext.h"
#include "core/clock.h"
#include "core/fdio.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/xalloc.h"
#include "domain/entitlements.h"
#include "domain/fields.h"
#include "runtime/profile_archive.h"

/* The largest archive GET /download sends (it is read into memory). */
#define PROFILES_DOWNLOAD_MAX (512ll * 1024 * 1024)

static pthread_mutex_t write_mu = PTHREAD_MUTEX_INITIALIZER;
/* Serializes limits.max_profiles' count check with the insert. */
static pthread_mutex_t create_mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- shared helpers ---- */

void profiles_archive_path(const struct app *app, const char *id, char *out, size_t cap)
{
    snprintf(out, cap, "%s/profiles/%s.tar.gz", app->cfg.data_dir, id);
}

static int has_archive(const struct app *app, const char *id)
{
    char path[1200];
    profiles_archive_path(app, id, path, sizeof path);
    (void)api_shared_get(app, path);
    return access(path, R_OK) == 0;
}

json_t *profiles_render(const struct profile_rec *p)
{
    char t[40];
    json_t *r = json_object();
    json_object_set_new(r, "id", json_string(p->id));
    json_object_set_new(r, "created_at",
                        json_string(clock_fmt_rfc3339(p->created_at, t, sizeof t)));
    if (p->last_used_at)
        json_object_set_new(r, "last_used_at",
                            json_string(clock_fmt_rfc3339(p->last_used_at, t, sizeof t)));
    json_object_set_new(r, "name", p->name[0] ? json_string(p->name) : json_null());
    json_object_set_new(r, "updated_at",
                        json_string(clock_fmt_rfc3339(p->updated_at, t, sizeof t)));
    return r;
}

int profiles_resolve(struct app *app, const char *org_id, const char *project_id,
                     const json_t *selector, struct profile_rec *out, struct err *e)
{
    const char *id = jsonx_str(selector, "id");
    const char *name = jsonx_str(selector, "name");
    const char *ref = id ? id : name ? name : "";
    memset(out, 0, sizeof *out);
    int rc = *ref ? store_profile_get(app->store, org_id, project_id, ref, out) : E_NOTFOUND;
    /* The store matches an id or a name; a selector names one of the two. */
    if (rc == 0 && ((id && strcmp(out->id, id) != 0) || (!id && strcmp(out->name, ref) != 0)))
        rc = E_NOTFOUND;
    if (rc == E_NOTFOUND)
        return err_set(e, rc, "profile_not_found", "profile: no profile with %s %s in this project",
                       id ? "id" : "name", ref);
    if (rc)
        return err_set(e, rc, "internal", "profile: the profile could not be read");
    return 0;
}

int profiles_load_into(struct app *app, struct profile_rec *p, const char *dir, struct err *e)
{
    char path[1200];
    profiles_archive_path(app, p->id, path, sizeof path);
    (void)api_shared_get(app, path);
    int rc = access(path, R_OK) == 0 ? profile_archive_extract(path, dir, e)
                                     : profile_archive_mkdir(dir, e);
    if (rc) {
        /* e->message is both the cause and the destination: copy it first. */
        char *cause = xstrdup(e->message);
        rc = err_set(e, E_INTERNAL, "internal",
                     "profile: the saved state of profile %s could not be restored: %s", p->id,
                     cause);
        xfree(cause);
        return rc;
    }
    p->last_used_at = clock_now_ms();
    if (store_profile_touch(app->store, p->id, p->last_used_at, 0) != 0)
        log_warn("profile %s: could not record its use", p->id);
    return 0;
}

/* features.profiles of an org, outside a request (session hooks). */
static int feature_on(struct app *app, const char *org_id, struct err *e)
{
    struct org_rec org;
    memset(&org, 0, sizeof org);
    if (store_org_get(app->store, org_id, &org) != 0)
        return err_set(e, E_INTERNAL, "internal", "the organization could not be read");
    json_t *ent = NULL;
    int rc = api_resolve_entitlements(app->store, &org, &ent, e);
    org_rec_clear(&org);
    if (rc)
        return rc;
    int on = ent_feature_on(ent, "profiles");
    json_decref(ent);
    if (!on)
        return err_set(e, E_FORBIDDEN, "feature_not_enabled",
                       "profile: features.profiles is not enabled for this organization's plan");
    return 0;
}

/* ---- handlers ---- */

/* Rejects body keys outside allowed (the domain layer's rule). */
static int known_fields(struct req *rq, const json_t *body, const char *const *allowed)
{
    return fields_check_known("", body, allowed, &rq->err);
}

/* name: absent (untouched), null (none) or ^[a-zA-Z0-9._-]{1,255}$. */
static int read_name(struct req *rq, const json_t *v, char *out, size_t cap)
{
    if (!v)
        return 0;
    if (json_is_null(v)) {
        out[0] = '\0';
        return 0;
    }
    if (fields_check_name("name", v, 0, &rq->err) != 0)
        return E_INVALID;
    snprintf(out, cap, "%s", json_string_value(v));
    return 0;
}

static int load_profile(struct req *rq, struct profile_rec *p)
{
    struct auth *a = api_auth(rq);
    memset(p, 0, sizeof *p);
    int rc = store_profile_get(api_app(rq)->store, a->org.id, a->project.id, rq->params[0], p);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "profile %s not found in this project",
                       rq->params[0]);
    return rc;
}

/* limits.max_profiles of the caller's plan: 403 when the org is at it
 * (null: no plan limit). Under create_mu. */
static int check_profile_count(struct req *rq)
{
    const json_t *ent = NULL;
    int rc = api_entitlements(rq, &ent);
    if (rc)
        return rc;
    int64_t lim, n = 0;
    if (!ent_limit(ent, "max_profiles", &lim))
        return 0;
    if (store_profile_count(api_app(rq)->store, api_auth(rq)->org.id, &n) != 0)
        return err_set(&rq->err, E_INTERNAL, "internal", "profiles could not be counted");
    if (n >= lim)
        return err_set(&rq->err, E_FORBIDDEN, "limit_exceeded",
                       "limits.max_profiles (%lld) reached: this organization stores %lld "
                       "profiles; delete one first",
                       (long long)lim, (long long)n);
    return 0;
}

/* The largest archive a save into a profile of org_id may leave: the plan's
 * limits.max_profile_bytes, never above LIM_PROFILE_ARCHIVE_BYTES. */
static long long archive_cap(struct app *app, const char *org_id)
{
    long long cap = LIM_PROFILE_ARCHIVE_BYTES;
    struct org_rec org;
    memset(&org, 0, sizeof org);
    json_t *ent = NULL;
    struct err e;
    err_init(&e);
    int64_t lim;
    if (store_org_get(app->store, org_id, &org) == 0 &&
        api_resolve_entitlements(app->store, &org, &ent, &e) == 0 &&
        ent_limit(ent, "max_profile_bytes", &lim) && lim < cap)
        cap = lim > 0 ? lim : 1;
    json_decref(ent);
    org_rec_clear(&org);
    return cap;
}

int profiles_create(struct req *rq, struct resp *rs)
{
    static const char *const allowed[] = {"name", NULL};
    json_t *body;
    int rc = api_require_feature(rq, "profiles");
    if (rc || (rc = req_json_object(rq, 1, &body)))
        return rc;
    struct profile_rec p;
    memset(&p, 0, sizeof p);
    rc = known_fields(rq, body, allowed);
    if (read_name(rq, json_object_get(body, "name"), p.name, sizeof p.name))
        rc = E_INVALID;
    json_decref(body);
    if (rc)
        return rc;
    struct auth *a = api_auth(rq);
    snprintf(p.org_id, sizeof p.org_id, "%s", a->org.id);
    snprintf(p.project_id, sizeof p.project_id, "%s", a->project.id);
    pthread_mutex_lock(&create_mu);
    rc = check_profile_count(rq);
    if (rc == 0)
        rc = store_profile_create(api_app(rq)->store, &p);
    pthread_mutex_unlock(&create_mu);
    if (rc && rq->err.rc)
        return rc;
    if (rc == E_CONFLICT)
        return err_set(&rq->err, rc, "conflict",
                       "a profile named %s already exists in this project", p.name);
    if (rc)
        return rc;
    resp_json(rs, 200, profiles_render(&p));
    return 0;
}

int profiles_get(struct req *rq, struct resp *rs)
{
    struct profile_rec p;
    int rc = api_require_feature(rq, "profiles");
    if (rc || (rc = load_profile(rq, &p)))
        return rc;
    resp_json(rs, 200, profiles_render(&p));
    return 0;
}

int profiles_update(struct req *rq, struct resp *rs)
{
    static const char *const allowed[] = {"name", NULL};
    json_t *body;
    int rc = api_require_feature(rq, "profiles");
    if (rc || (rc = req_json_object(rq, 0, &body)))
        return rc;
    struct profile_rec p;
    if ((rc = load_profile(rq, &p))) {
        json_decref(body);
        return rc;
    }
    rc = known_fields(rq, body, allowed);
    const json_t *name = json_object_get(body, "name");
    if (!name)
        rc = err_field(&rq->err, "name", "is required (a name, or null to clear it)");
    else if (read_name(rq, name, p.name, sizeof p.name))
        rc = E_INVALID;
    json_decref(body);
    if (rc)
        return rc;
    p.updated_at = clock_now_ms();
    rc = store_profile_update(api_app(rq)->store, &p);
    if (rc == E_CONFLICT)
        return err_set(&rq->err, rc, "conflict",
                       "a profile named %s already exists in this project", p.name);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "profile %s not found in this project",
                       rq->params[0]);
    if (rc)
        return rc;
    resp_json(rs, 200, profiles_render(&p));
    return 0;
}

int profiles_list(struct req *rq, struct resp *rs)
{
    int rc = api_require_feature(rq, "profiles");
    if (rc)
        return rc;
    struct page pg = {0};
    if ((rc = req_page(rq, &pg.limit, &pg.offset)))
        return rc;
    struct profile_filter f = {req_query(rq, "name"), req_query(rq, "query")};
    struct profile_rec *rows = NULL;
    size_t n = 0;
    struct auth *a = api_auth(rq);
    rc = store_profile_list(api_app(rq)->store, a->org.id, a->project.id, &f, &pg, &rows, &n);
    if (rc)
        return rc;
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, profiles_render(&rows[i]));
    xfree(rows);
    resp_json(rs, 200, arr);
    resp_page(rs, pg.offset, n, pg.has_more);
    return 0;
}

/* Deleting a profile removes its record and archive at once. Sessions using
 * it keep running on their own copy; their Browser record keeps the last
 * known Profile record, and nothing is saved back when they end. */
int profiles_delete(struct req *rq, struct resp *rs)
{
    struct profile_rec p;
    int rc = api_require_feature(rq, "profiles");
    if (rc || (rc = load_profile(rq, &p)))
        return rc;
    struct app *app = api_app(rq);
    char path[1200];
    profiles_archive_path(app, p.id, path, sizeof path);
    pthread_mutex_lock(&write_mu);
    rc = store_profile_delete(app->store, p.org_id, p.project_id, p.id);
    if (rc == 0 && unlink(path) != 0 && errno != ENOENT)
        log_warn("profile %s: cannot remove %s: %s", p.id, path, strerror(errno));
    if (rc == 0 && api_shared_delete(app, path) != 0)
        log_warn("profile %s: its shared archive could not be removed", p.id);
    pthread_mutex_unlock(&write_mu);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "profile %s not found in this project",
                       rq->params[0]);
    if (rc)
        return rc;
    resp_empty(rs, 204);
    return 0;
}

int profiles_download(struct req *rq, struct resp *rs)
{
    struct profile_rec p;
    int rc = api_require_feature(rq, "profiles");
    /* Profiles are stored as tar.gz, the format sent by default; `format=tar`
     * decompresses on the way out. tar.zst would need a compressor this server
     * does not ship: refused by name rather than ignored. */
    const char *format = req_query(rq, "format");
    int as_tar = format && strcmp(format, "tar") == 0;
    if (rc == 0 && format && !as_tar && strcmp(format, "tar.gz") != 0)
        return err_field(&rq->err, "format",
                         "profiles are stored as tar.gz; format %s is not supported (use tar or "
                         "omit format)",
                         format);
    if (rc || (rc = load_profile(rq, &p)))
        return rc;
    char path[1200];
    profiles_archive_path(api_app(rq), p.id, path, sizeof path);
    (void)api_shared_get(api_app(rq), path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && as_tar) {
        /* The decompressed tar, in an anonymous file read back below. */
        int tfd = memfd_create("profile-tar", MFD_CLOEXEC);
        if (tfd < 0 || profile_archive_gunzip(path, tfd, &rq->err) != 0 ||
            lseek(tfd, 0, SEEK_SET) != 0) {
            if (tfd >= 0)
                close(tfd);
            close(fd);
            return err_set(&rq->err, E_INTERNAL, "internal",
                           "the archive of profile %s cannot be decompressed", p.id);
        }
        close(fd);
        fd = tfd;
    }
    if (fd < 0 && errno == ENOENT)
        return err_set(&rq->err, E_NOTFOUND, "not_found",
                       "profile %s has no saved state yet: a session with save_changes true "
                       "writes it when it ends",
                       rq->params[0]);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        rc = err_set(&rq->err, E_INTERNAL, "internal", "the archive of profile %s cannot be read",
                     p.id);
        if (fd >= 0)
            close(fd);
        return rc;
    }
    if (st.st_size > PROFILES_DOWNLOAD_MAX) {
        close(fd);
        return err_set(&rq->err, E_INTERNAL, "internal",
                       "the archive of profile %s is larger than this server sends (%lld bytes)",
                       p.id, PROFILES_DOWNLOAD_MAX);
    }
    size_t len = (size_t)st.st_size, got = 0;
    char *buf = xmalloc(len ? len : 1);
    int rrc = fdio_read_all(fd, buf, len, &got, FDIO_NO_DEADLINE);
    close(fd);
    if (rrc != 0 || got != len) {
        xfree(buf);
        return err_set(&rq->err, E_INTERNAL, "internal", "the archive of profile %s is truncated",
                       p.id);
    }
    resp_text(rs, 200, as_tar ? "application/x-tar" : "application/gzip", buf, len);
    resp_header(rs, "Content-Disposition", "attachment; filename=\"%s.tar.gz\"", p.id);
    return 0;
}

/* ---- session hooks ---- */

/* The selector of the create/PATCH body's `profile`, or NULL. */
static const json_t *body_profile(const struct session_ctx *sc)
{
    const json_t *v = sc->body ? json_object_get(sc->body, "profile") : NULL;
    return json_is_object(v) ? v : NULL;
}

static void doc_set_profile(struct session_ctx *sc, const struct profile_rec *p, int save)
{
    json_object_set_new(sc->doc, "profile", profiles_render(p));
    json_object_set_new(sc->doc, "profile_save_changes", json_boolean(save));
}

static int hook_prepare(struct session_ctx *sc, struct err *e)
{
    const json_t *sel = body_profile(sc);
    if (!sel)
        return 0;
    struct profile_rec p;
    int rc = feature_on(sc->app, sc->rec->org_id, e);
    if (rc || (rc = profiles_resolve(sc->app, sc->rec->org_id, sc->rec->project_id, sel, &p, e)))
        return rc;
    if ((rc = profiles_load_into(sc->app, &p, sc->user_data_dir, e)))
        return rc;
    doc_set_profile(sc, &p, json_is_true(json_object_get(sel, "save_changes")));
    return 0;
}

static int hook_update(struct session_ctx *sc, const char *browser_ws_url, struct err *e)
{
    (void)browser_ws_url;
    const json_t *sel = body_profile(sc);
    if (!sel)
        return 0;
    /* Also enforced by the domain plan when browsers.c reports the loaded
     * profile; checked here so that the rule holds either way. */
    if (json_object_get(sc->doc, "profile"))
        return err_set(e, E_CONFLICT, "profile_already_loaded",
                       "profile: the session already has a profile loaded; a profile can be "
                       "loaded only into a session that has none");
    struct profile_rec p;
    int rc = feature_on(sc->app, sc->rec->org_id, e);
    if (rc || (rc = profiles_resolve(sc->app, sc->rec->org_id, sc->rec->project_id, sel, &p, e)))
        return rc;
    char path[1200];
    profiles_archive_path(sc->app, p.id, path, sizeof path);
    rc = sess_restart_with_profile(sc->app, sc->rec, has_archive(sc->app, p.id) ? path : NULL, e);
    if (rc)
        return rc;
    p.last_used_at = clock_now_ms();
    if (store_profile_touch(sc->app->store, p.id, p.last_used_at, 0) != 0)
        log_warn("profile %s: could not record its use", p.id);
    doc_set_profile(sc, &p, json_is_true(json_object_get(sel, "save_changes")));
    return 0;
}

/* Ends that write the state back. A crash ("browser exited: ...", "server
 * restarted") may leave the folder half-written, and "launch failed" never
 * ran: those keep the saved state as it was. */
static int saves_on(const char *reason)
{
    return strcmp(reason, "deleted") == 0 || strcmp(reason, "timeout") == 0 ||
           strcmp(reason, "server stopped") == 0;
}

/* Bytes of saved archives one organization keeps on this host
 * (LIM_PROFILE_ORG_BYTES unless lowered: profiles_set_org_bytes). */
static long long org_bytes = LIM_PROFILE_ORG_BYTES;

void profiles_set_org_bytes(long long bytes)
{
    org_bytes = bytes;
}

/* The bytes the archives of org_id's profiles other than except hold on this
 * host's disk, or -1 when its profiles cannot be listed. */
static long long org_other_bytes(struct app *app, const char *org_id, const char *except)
{
    char(*ids)[STORE_ID] = NULL;
    size_t n = 0;
    if (store_profile_ids(app->store, org_id, &ids, &n) != 0)
        return -1;
    long long sum = 0;
    for (size_t i = 0; i < n; i++) {
        char path[1200];
        struct stat st;
        profiles_archive_path(app, ids[i], path, sizeof path);
        if (strcmp(ids[i], except) != 0 && stat(path, &st) == 0)
            sum += (long long)st.st_size;
    }
    xfree(ids);
    return sum;
}

static void hook_ending(struct session_ctx *sc, const char *reason)
{
    const char *id = jsonx_str(json_object_get(sc->doc, "profile"), "id");
    if (!id || !jsonx_bool(sc->doc, "profile_save_changes", 0) || !saves_on(reason))
        return;
    char path[1200];
    profiles_archive_path(sc->app, id, path, sizeof path);
    struct err e;
    err_init(&e);
    struct profile_rec p;
    long long cap = archive_cap(sc->app, sc->rec->org_id);
    /* Saves of this host run one at a time (write_mu): the organization's
     * other archives are summed with no save of its own in between. */
    pthread_mutex_lock(&write_mu);
    long long others = org_other_bytes(sc->app, sc->rec->org_id, id);
    int org_bound = others >= 0 && org_bytes - others < cap;
    if (org_bound)
        cap = org_bytes - others;
    int rc = 0;
    if (store_profile_get_by_id(sc->app->store, id, &p) != 0) {
        log_info("session %s: profile %s was deleted; its changes are not saved", sc->rec->id, id);
    } else if (others < 0) {
        log_error("session %s: profile %s not saved: the organization's profiles could not be "
                  "listed; the profile keeps its previous state",
                  sc->rec->id, id);
    } else if (cap <= 0) {
        log_warn("session %s: profile %s not saved: this organization's other profiles hold %lld "
                 "bytes on this host, its share (%lld bytes); the profile keeps its previous state",
                 sc->rec->id, id, others, org_bytes);
    } else if ((rc = profile_archive_create(sc->user_data_dir, path, cap, &e)) == E_TOOBIG) {
        log_warn("session %s: profile %s not saved: %s (%s); the profile keeps its previous state",
                 sc->rec->id, id, e.message,
                 org_bound ? "the organization's share of saved profiles on this host, with its "
                             "other profiles"
                           : "limits.max_profile_bytes");
    } else if (rc != 0) {
        log_error("session %s: saving into profile %s failed: %s", sc->rec->id, id, e.message);
    } else if (api_shared_put(sc->app, path) != 0) {
        log_error("session %s: its state saved into profile %s could not be shared with the "
                  "other nodes",
                  sc->rec->id, id);
    } else {
        int64_t now = clock_now_ms();
        if (store_profile_touch(sc->app->store, id, now, now) != 0)
            log_warn("profile %s: could not record the save", id);
        log_info("session %s: saved its state into profile %s (%s)", sc->rec->id, id, reason);
    }
    pthread_mutex_unlock(&write_mu);
}

static void hook_render(struct session_ctx *sc, json_t *record)
{
    json_t *snap = json_object_get(sc->doc, "profile");
    const char *id = jsonx_str(snap, "id");
    if (!id)
        return;
    struct profile_rec p;
    /* The current record while the profile exists; the one seen at load
     * time once it was deleted. */
    if (store_profile_get_by_id(sc->app->store, id, &p) == 0)
        json_object_set_new(record, "profile", profiles_render(&p));
    else
        json_object_set(record, "profile", snap);
    json_object_set_new(record, "profile_save_changes",
                        json_boolean(jsonx_bool(sc->doc, "profile_save_changes", 0)));
}

/* A DELETE waits for the ending hook of a session with a profile: the
 * profile it saves may be loaded by the next create. */
static int hook_needs_graceful_end(struct session_ctx *sc)
{
    return json_object_get(sc->doc, "profile") != NULL;
}

static const struct session_ext profiles_ext = {
    .needs_graceful_end = hook_needs_graceful_end,
    .name = "profiles",
    .prepare = hook_prepare,
    .update = hook_update,
    .ending = hook_ending,
    .render = hook_render,
};

/* Removes "<id>.tar.gz.tmp.*" files a crash left in the middle of a save. */
static void remove_stale_temps(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!strstr(de->d_name, ".tar.gz.tmp."))
            continue;
        char *p = xasprintf("%s/%s", dir, de->d_name);
        if (unlink(p) == 0)
            log_info("profiles: removed %s left by an interrupted save", p);
        xfree(p);
    }
    closedir(d);
}

void profiles_init(struct app *app)
{
    char *dir = xasprintf("%s/profiles", app->cfg.data_dir);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        log_error("profiles: cannot create %s: %s", dir, strerror(errno));
    remove_stale_temps(dir);
    xfree(dir);
    session_ext_register(&profiles_ext);
}
