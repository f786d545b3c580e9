/*
 * Extensions: /extensions (upload, list, metadata, download, delete, the
 * Chrome Web Store fetch), POST /browsers/{id}/extensions, and the pieces
 * sessions and pools use to load stored extensions (api/extensions.h).
 *
 * Why --load-extension: Debian's Chromium 156 still honours it (its own
 * launcher passes it for the system's extensions; upstream Chrome builds
 * switched it off), and an unpacked extension loaded that way runs its
 * content scripts on every page, which tests/compat/82_extensions checks by
 * behaviour. Enterprise policy would need an update server and CRX files;
 * CDP's Extensions.loadUnpacked needs a pipe connection the relay does not
 * have.
 *
 * Files a session loads live in its own tmpfs (sandbox_root), which its user
 * can write into: the folders are created and filled by this server (root)
 * one component at a time from descriptors, never through a symlink and
 * never across a mount, so a session cannot turn an unpack into a write
 * outside its files.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "api/api.h"
#include "api/extensions.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/fdio.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/multipart.h"
#include "core/xalloc.h"
#include "domain/entitlements.h"
#include "domain/fields.h"
#include "runtime/extfetch.h"
#include "runtime/extpack.h"
#include "runtime/sandbox.h"
#include "runtime/sessmgr.h"
#include "session/ext.h"

#define FEATURE "browser_extensions"
/* Where a session's extensions go, relative to its files (sandbox_root),
 * and how the browser sees them. */
#define EXT_STORED_REL    "home/kernel/.extensions"
#define EXT_STORED_SEEN   "/home/kernel/.extensions"
#define EXT_UPLOADED_REL  "home/kernel/extensions"
#define EXT_UPLOADED_SEEN "/home/kernel/extensions"
/* The Chrome Web Store fetch: the operator's URL template (placeholders
 * {id}, {os}, {arch}, {prodversion}) and how long it may take. */
#define CHROME_STORE_ENV "BROWSERD_CHROME_STORE_URL"
#define CHROME_STORE_DEFAULT                                                                       \
    "https://clients2.google.com/service/update2/crx?response=redirect&os={os}&arch={arch}"        \
    "&os_arch=x86_64&nacl_arch=x86-64&prod=chromiumcrx&prodchannel=&prodversion={prodversion}"     \
    "&lang=en-US&acceptformat=crx3&x=id%3D{id}%26installsource%3Dondemand%26uc"
#define CHROME_STORE_TIMEOUT_MS 30000

/* Serializes the stored count check with the insert (max_stored_per_org),
 * and loadExtensions calls (each rewrites a session's settings document and
 * restarts its browser). */
static pthread_mutex_t upload_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- records and files ---- */

static void zip_path(const struct app *app, const char *id, char *out, size_t cap)
{
    snprintf(out, cap, "%s/extensions/%s.zip", app->cfg.data_dir, id);
}

static json_t *render(const struct ext_rec *x)
{
    char t[40];
    json_t *r = json_object();
    json_object_set_new(r, "id", json_string(x->id));
    json_object_set_new(r, "created_at",
                        json_string(clock_fmt_rfc3339(x->created_at, t, sizeof t)));
    json_object_set_new(r, "size_bytes", json_integer(x->size_bytes));
    json_object_set_new(r, "checksum", x->checksum[0] ? json_string(x->checksum) : json_null());
    json_object_set_new(r, "last_used_at",
                        x->last_used_at
                            ? json_string(clock_fmt_rfc3339(x->last_used_at, t, sizeof t))
                            : json_null());
    json_object_set_new(r, "name", x->name[0] ? json_string(x->name) : json_null());
    return r;
}

/* Writes data to path through a temporary file renamed into place. */
static int write_file(const char *path, const void *data, size_t len)
{
    char *tmp = xasprintf("%s.tmp.%d", path, (int)syscall(SYS_gettid));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int rc = fd < 0 ? -errno : fdio_write_all(fd, data, len, FDIO_NO_DEADLINE);
    if (fd >= 0 && rc == 0 && fsync(fd) != 0)
        rc = -errno;
    if (fd >= 0)
        close(fd);
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -errno;
    if (rc)
        (void)unlink(tmp);
    xfree(tmp);
    return rc;
}

void extensions_init(struct app *app)
{
    char *dir = xasprintf("%s/extensions", app->cfg.data_dir);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        log_error("extensions: cannot create %s: %s", dir, strerror(errno));
    xfree(dir);
}

/* ---- resolution (sessions and pools) ---- */

/* Appends to ids the stored extension each selector names, skipping
 * duplicates; stops at the first unknown one (E_NOTFOUND) unless skip. */
static int resolve_each(struct app *app, const char *org_id, const char *project_id,
                        const json_t *selectors, int skip, json_t *ids, struct err *e)
{
    for (size_t i = 0; i < json_array_size(selectors); i++) {
        const json_t *sel = json_array_get(selectors, i);
        const char *id = jsonx_str(sel, "id");
        const char *name = jsonx_str(sel, "name");
        const char *ref = id && *id ? id : name ? name : "";
        struct ext_rec x;
        memset(&x, 0, sizeof x);
        int rc = *ref ? store_ext_get(app->store, org_id, project_id, ref, &x) : E_NOTFOUND;
        /* The store matches an id or a name; a selector names one of the two. */
        if (rc == 0 &&
            ((id && *id && strcmp(x.id, id) != 0) || (!(id && *id) && strcmp(x.name, ref) != 0)))
            rc = E_NOTFOUND;
        if (rc == E_NOTFOUND && skip)
            continue;
        if (rc == E_NOTFOUND)
            return err_set(e, rc, "extension_not_found",
                           "extensions[%zu]: no extension with %s %s in this project", i,
                           id && *id ? "id" : "name", ref);
        if (rc)
            return err_set(e, rc, "internal", "extensions: the extension could not be read");
        /* The same extension twice would be loaded once: keep the first. */
        int dup = 0;
        for (size_t j = 0; j < json_array_size(ids); j++)
            dup |= strcmp(json_string_value(json_array_get(ids, j)), x.id) == 0;
        if (!dup)
            json_array_append_new(ids, json_string(x.id));
    }
    return 0;
}

int extensions_resolve(struct app *app, const char *org_id, const char *project_id,
                       const json_t *ent, const json_t *selectors, json_t **ids, struct err *e)
{
    *ids = json_array();
    size_t n = json_array_size(selectors);
    if (n == 0)
        return 0;
    if (!ent_feature_on(ent, FEATURE))
        return err_set(e, E_FORBIDDEN, "feature_not_enabled",
                       "extensions: features.browser_extensions is not enabled for this "
                       "organization's plan");
    if (n > LIM_EXT_PER_SESSION)
        return err_field(e, "extensions", "at most %d entries (got %zu)", LIM_EXT_PER_SESSION, n);
    return resolve_each(app, org_id, project_id, selectors, 0, *ids, e);
}

json_t *extensions_ids(struct app *app, const char *org_id, const char *project_id,
                       const json_t *selectors)
{
    json_t *ids = json_array();
    struct err e;
    err_init(&e);
    if (resolve_each(app, org_id, project_id, selectors, 1, ids, &e) != 0)
        log_warn("extensions: %s", e.message);
    return ids;
}

/* Opens the folder rel beneath the session's files (root), creating the
 * missing components (mode 0755, owned by the server). No component may be
 * a symlink or another mount: the session's user owns parts of this tree. */
static int open_beneath(const char *root, const char *rel, struct err *e)
{
    int rfd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (rfd < 0)
        return err_set(e, E_INTERNAL, "internal", "the session's files cannot be opened: %s",
                       strerror(errno));
    char *path = xstrdup(rel);
    int fd = rfd;
    char *save = NULL;
    for (char *c = path; c; c = save) {
        save = strchr(c, '/');
        if (save)
            *save++ = '\0';
        if (mkdirat(fd, c, 0755) == 0)
            (void)fchmodat(fd, c, 0755, 0);
        struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                               .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV |
                                          RESOLVE_NO_MAGICLINKS};
        int next = (int)syscall(SYS_openat2, fd, c, &how, sizeof how);
        int err = errno;
        close(fd);
        if (next < 0) {
            xfree(path);
            /* The session's user put something else there (its own files). */
            if (err == ELOOP || err == ENOTDIR || err == EXDEV || err == EAGAIN)
                return err_set(e, E_INVALID, "bad_request",
                               "/%s in the session is a symbolic link or not a folder: remove "
                               "it to load extensions",
                               rel);
            return err_set(e, E_INTERNAL, "internal",
                           "the session's folder %s cannot be opened: %s", rel, strerror(err));
        }
        fd = next;
    }
    xfree(path);
    return fd;
}

/* Unpacks zip into a new folder `name` beneath dfd. E_CONFLICT when it
 * exists already. */
static int unpack_new(int dfd, const char *name, const void *zip, size_t len, struct err *e)
{
    if (mkdirat(dfd, name, 0755) != 0) {
        if (errno == EEXIST)
            return err_set(e, E_CONFLICT, "conflict", "extension folder %s exists", name);
        return err_set(e, E_INTERNAL, "internal", "cannot create extension folder %s: %s", name,
                       strerror(errno));
    }
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fchmod(fd, 0755) != 0) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        return err_set(e, E_INTERNAL, "internal", "cannot open extension folder %s: %s", name,
                       strerror(err));
    }
    int rc = extpack_unpack(zip, len, fd, e);
    close(fd);
    return rc;
}

int extensions_session_prepare(struct app *app, const char *org_id, const char *project_id,
                               const json_t *ent, const json_t *selectors, struct sandbox *sb,
                               json_t *doc, struct err *e)
{
    json_t *ids = NULL;
    int rc = extensions_resolve(app, org_id, project_id, ent, selectors, &ids, e);
    if (rc || json_array_size(ids) == 0) {
        json_decref(ids);
        return rc;
    }
    const char *root = sandbox_root(sb);
    if (!root) {
        json_decref(ids);
        return err_set(e, E_UNAVAIL, "sandbox_required",
                       "extensions: needs the session sandbox: docs/sandbox.md");
    }
    int dfd = open_beneath(root, EXT_STORED_REL, e);
    if (dfd < 0) {
        json_decref(ids);
        return e->rc;
    }
    json_t *dirs = json_array();
    int64_t now = clock_now_ms();
    for (size_t i = 0; rc == 0 && i < json_array_size(ids); i++) {
        const char *id = json_string_value(json_array_get(ids, i));
        char path[1200];
        zip_path(app, id, path, sizeof path);
        char *zip = NULL;
        size_t len = 0;
        (void)api_shared_get(app, path);
        int r = fdio_read_file(path, LIM_EXT_ZIP_BYTES, &zip, &len);
        if (r)
            rc = err_set(e, E_INTERNAL, "internal",
                         "extensions: the zip of extension %s "
                         "cannot be read: %s",
                         id, strerror(-r));
        else if ((rc = unpack_new(dfd, id, zip, len, e)) == E_CONFLICT)
            rc = 0; /* already unpacked: ids name immutable zips */
        xfree(zip);
        if (rc == 0) {
            json_array_append_new(dirs, json_sprintf("%s/%s", EXT_STORED_SEEN, id));
            if (store_ext_touch(app->store, id, now) != 0)
                log_warn("extension %s: could not record its use", id);
        }
    }
    close(dfd);
    if (rc) {
        json_decref(dirs);
        json_decref(ids);
        return rc;
    }
    json_object_set_new(doc, EXT_DOC_DIRS, dirs);
    json_object_set_new(doc, EXT_DOC_IDS, ids);
    return 0;
}

const char **extensions_launch_dirs(const json_t *doc)
{
    const json_t *dirs = json_object_get(doc, EXT_DOC_DIRS);
    size_t n = json_array_size(dirs);
    if (n == 0)
        return NULL;
    const char **out = xcalloc(n + 1, sizeof *out);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_array_get(dirs, i));
        if (s && *s)
            out[k++] = s;
    }
    return out;
}

/* ---- handlers: the resource ---- */

static int load_ext(struct req *rq, struct ext_rec *x)
{
    struct auth *a = api_auth(rq);
    memset(x, 0, sizeof *x);
    int rc = store_ext_get(api_app(rq)->store, a->org.id, a->project.id, rq->params[0], x);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "extension %s not found in this project",
                       rq->params[0]);
    return rc;
}

/* max_stored_per_org of the caller's plan: 403 when the org is at it. */
static int check_stored_limit(struct req *rq)
{
    const json_t *ent = NULL;
    int rc = api_entitlements(rq, &ent);
    if (rc)
        return rc;
    int64_t lim;
    if (!ent_limit(ent, "features.browser_extensions.max_stored_per_org", &lim))
        return 0; /* null: unlimited */
    int64_t n = 0;
    if (store_ext_count(api_app(rq)->store, api_auth(rq)->org.id, &n) != 0)
        return err_set(&rq->err, E_INTERNAL, "internal", "extensions could not be counted");
    if (n >= lim)
        return err_set(&rq->err, E_FORBIDDEN, "limit_exceeded",
                       "features.browser_extensions.max_stored_per_org (%lld) reached: this "
                       "organization stores %lld extensions; delete one first",
                       (long long)lim, (long long)n);
    return 0;
}

int extensions_upload(struct req *rq, struct resp *rs)
{
    rq->no_retry = 1;
    int rc = api_require_feature(rq, FEATURE);
    if (rc)
        return rc;
    struct mp_form f = {0};
    if ((rc =
             multipart_parse(req_header(rq, "Content-Type"), rq->body, rq->body_len, &f, &rq->err)))
        return rc;
    struct ext_rec x;
    memset(&x, 0, sizeof x);
    const struct mp_part *file = NULL;
    for (size_t i = 0; i < f.n; i++) {
        const struct mp_part *p = &f.parts[i];
        if (strcmp(p->name, "file") == 0 && !file) {
            file = p;
        } else if (strcmp(p->name, "name") == 0) {
            if (!fields_name_ok(p->data, p->len))
                rc = err_field(&rq->err, "name", "must match ^[A-Za-z0-9._-]{1,255}$");
            else
                snprintf(x.name, sizeof x.name, "%.*s", (int)p->len, p->data);
        } else {
            rc = err_field(&rq->err, p->name, "is not a field of an extension upload (file, name)");
        }
    }
    if (!file) {
        multipart_free(&f);
        return rc ? rc
                  : err_field(&rq->err, "file", "is required (the zip of the unpacked extension)");
    }
    if (rc == 0 && file->len > LIM_EXT_ZIP_BYTES)
        rc = err_field(&rq->err, "file", "is larger than %u bytes", LIM_EXT_ZIP_BYTES);
    if (rc == 0)
        rc = extpack_check(file->data, file->len, NULL, &rq->err);
    if (rc) {
        multipart_free(&f);
        return rc;
    }
    struct app *app = api_app(rq);
    struct auth *a = api_auth(rq);
    snprintf(x.org_id, sizeof x.org_id, "%s", a->org.id);
    snprintf(x.project_id, sizeof x.project_id, "%s", a->project.id);
    x.size_bytes = (int64_t)file->len;
    crypto_sha256_hex(file->data, file->len, x.checksum);
    extensions_init(app);
    pthread_mutex_lock(&upload_mu);
    rc = check_stored_limit(rq);
    if (rc == 0) {
        rc = store_ext_create(app->store, &x);
        if (rc == E_CONFLICT)
            err_set(&rq->err, rc, "conflict",
                    "an extension named %s already exists in this project", x.name);
    }
    if (rc == 0) {
        char path[1200];
        zip_path(app, x.id, path, sizeof path);
        int w = write_file(path, file->data, file->len);
        if (w == 0 && api_shared_put(app, path) != 0)
            w = -EIO;
        if (w) {
            log_error("extension %s: cannot write %s: %s", x.id, path, strerror(-w));
            (void)store_ext_delete(app->store, x.org_id, x.project_id, x.id);
            rc = err_set(&rq->err, E_INTERNAL, "internal", "the extension could not be stored (%s)",
                         strerror(-w));
        }
    }
    pthread_mutex_unlock(&upload_mu);
    multipart_free(&f);
    if (rc)
        return rc;
    log_info("extension %s uploaded (%lld bytes)", x.id, (long long)x.size_bytes);
    resp_json(rs, 201, render(&x));
    return 0;
}

int extensions_list(struct req *rq, struct resp *rs)
{
    struct page pg = {0};
    int rc = req_page(rq, &pg.limit, &pg.offset);
    if (rc)
        return rc;
    struct auth *a = api_auth(rq);
    struct ext_rec *rows = NULL;
    size_t n = 0;
    rc = store_ext_list(api_app(rq)->store, a->org.id, a->project.id, req_query(rq, "name"),
                        req_query(rq, "query"), &pg, &rows, &n);
    if (rc)
        return rc;
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, render(&rows[i]));
    xfree(rows);
    resp_json(rs, 200, arr);
    resp_page(rs, pg.offset, n, pg.has_more);
    return 0;
}

int extensions_metadata(struct req *rq, struct resp *rs)
{
    struct ext_rec x;
    int rc = load_ext(rq, &x);
    if (rc)
        return rc;
    resp_json(rs, 200, render(&x));
    return 0;
}

int extensions_download(struct req *rq, struct resp *rs)
{
    struct ext_rec x;
    int rc = load_ext(rq, &x);
    if (rc)
        return rc;
    char path[1200];
    zip_path(api_app(rq), x.id, path, sizeof path);
    char *zip = NULL;
    size_t len = 0;
    (void)api_shared_get(api_app(rq), path);
    if ((rc = fdio_read_file(path, LIM_EXT_ZIP_BYTES, &zip, &len)) != 0)
        return err_set(&rq->err, E_INTERNAL, "internal",
                       "the zip of extension %s cannot be read: %s", x.id, strerror(-rc));
    resp_text(rs, 200, "application/octet-stream", zip, len);
    resp_header(rs, "Content-Disposition", "attachment; filename=\"%s.zip\"",
                x.name[0] ? x.name : x.id);
    return 0;
}

/* The first active pool of the project whose configuration names x (by id
 * or by name), copied into pool (cap bytes); 0 when none. */
static int used_by_pool(struct app *app, const struct ext_rec *x, char *pool, size_t cap)
{
    struct pool_rec *rows = NULL;
    size_t n = 0;
    int found = 0;
    if (store_pool_list_active(app->store, &rows, &n) != 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (!found && strcmp(rows[i].org_id, x->org_id) == 0 &&
            strcmp(rows[i].project_id, x->project_id) == 0 && rows[i].config) {
            json_t *cfg = json_loads(rows[i].config, 0, NULL);
            const json_t *sels = json_object_get(cfg, "extensions");
            for (size_t j = 0; !found && j < json_array_size(sels); j++) {
                const char *id = jsonx_str(json_array_get(sels, j), "id");
                const char *name = jsonx_str(json_array_get(sels, j), "name");
                found = (id && strcmp(id, x->id) == 0) ||
                        (name && x->name[0] && strcmp(name, x->name) == 0);
            }
            if (found)
                snprintf(pool, cap, "%s", rows[i].name[0] ? rows[i].name : rows[i].id);
            json_decref(cfg);
        }
        pool_rec_clear(&rows[i]);
    }
    xfree(rows);
    return found;
}

/* Deleting an extension a pool names is refused (409): the pool would fail
 * to fill. Sessions that loaded it keep their own unpacked copy. */
int extensions_delete(struct req *rq, struct resp *rs)
{
    struct ext_rec x;
    int rc = load_ext(rq, &x);
    if (rc)
        return rc;
    struct app *app = api_app(rq);
    char pool[STORE_NAME];
    if (used_by_pool(app, &x, pool, sizeof pool))
        return err_set(&rq->err, E_CONFLICT, "extension_in_use",
                       "extension %s is used by browser pool %s: remove it from the pool's "
                       "extensions first",
                       rq->params[0], pool);
    char path[1200];
    zip_path(app, x.id, path, sizeof path);
    rc = store_ext_delete(app->store, x.org_id, x.project_id, x.id);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "extension %s not found in this project",
                       rq->params[0]);
    if (rc)
        return rc;
    if (api_shared_delete(app, path) != 0)
        log_warn("extension %s: its shared zip could not be removed", x.id);
    if (unlink(path) != 0 && errno != ENOENT)
        log_warn("extension %s: cannot remove %s: %s", x.id, path, strerror(errno));
    resp_empty(rs, 204);
    return 0;
}

/* ---- the Chrome Web Store ---- */

/* The 32-letter [a-p] extension id in a Chrome Web Store URL (or the bare
 * id), into id (33 bytes); 0 when found. */
static int webstore_id_of(const char *url, char id[33])
{
    size_t n = strlen(url);
    const char *path = url;
    if (strncmp(url, "https://chromewebstore.google.com/", 34) == 0)
        path = url + 33;
    else if (strncmp(url, "https://chrome.google.com/webstore/", 35) == 0)
        path = url + 34;
    else if (n != 32)
        return -1;
    size_t end = strcspn(path, "?#");
    for (size_t i = 0; i < end;) {
        size_t seg = strcspn(path + i, "/?#");
        if (seg == 32 && strspn(path + i, "abcdefghijklmnop") >= 32) {
            memcpy(id, path + i, 32);
            id[32] = '\0';
            return 0;
        }
        i += seg + 1;
    }
    return -1;
}

/* The operator's template with its placeholders filled (owned). */
static char *webstore_url(const char *id, const char *os)
{
    const char *tpl = getenv(CHROME_STORE_ENV);
    if (!tpl || !*tpl)
        tpl = CHROME_STORE_DEFAULT;
    struct {
        const char *key, *val;
    } subst[] = {{"{id}", id}, {"{os}", os}, {"{arch}", "x64"}, {"{prodversion}", "156.0.0.0"}};
    char *out = xstrdup("");
    for (const char *p = tpl; *p;) {
        const char *val = NULL;
        size_t klen = 1;
        for (size_t i = 0; i < sizeof subst / sizeof *subst; i++)
            if (strncmp(p, subst[i].key, strlen(subst[i].key)) == 0) {
                val = subst[i].val;
                klen = strlen(subst[i].key);
            }
        char *next = val ? xasprintf("%s%s", out, val) : xasprintf("%s%c", out, *p);
        xfree(out);
        out = next;
        p += klen;
    }
    return out;
}

/* 502: the store is the failing party, not the client nor this server. */
static int bad_gateway(struct req *rq, const char *what, const char *id, const char *why)
{
    char *msg = xasprintf("the Chrome Web Store %s for extension %s: %s", what, id, why);
    int rc = err_set(&rq->err, E_UPSTREAM, "bad_gateway", "%s", msg);
    xfree(msg);
    return rc;
}

int extensions_from_chrome_store(struct req *rq, struct resp *rs)
{
    /* A store that is down or refuses the id stays so for the seconds of the
     * SDK's retries, each of which could wait the whole fetch timeout. */
    rq->no_retry = 1;
    int rc = api_require_feature(rq, FEATURE);
    if (rc)
        return rc;
    const char *url = req_query(rq, "url");
    const char *os = req_query(rq, "os");
    if (!os || !*os)
        os = "linux";
    if (!url || !*url)
        return err_field(&rq->err, "url", "is required (a Chrome Web Store extension URL)");
    char id[33];
    if (webstore_id_of(url, id) != 0)
        return err_field(&rq->err, "url",
                         "is not a Chrome Web Store extension URL "
                         "(https://chromewebstore.google.com/detail/<name>/<32-letter id>)");
    if (strcmp(os, "linux") != 0 && strcmp(os, "mac") != 0 && strcmp(os, "win") != 0)
        return err_field(&rq->err, "os", "must be one of win, mac, linux");
    char *src = webstore_url(id, os);
    char *body = NULL;
    size_t len = 0;
    struct err fe;
    err_init(&fe);
    rc = extfetch_get(src, LIM_EXT_ZIP_BYTES, CHROME_STORE_TIMEOUT_MS, &body, &len, &fe);
    xfree(src);
    if (rc) {
        log_warn("extensions: Chrome Web Store fetch of %s failed: %s", id, fe.message);
        return bad_gateway(rq, "could not be reached", id, fe.message);
    }
    size_t off = 0;
    if (extpack_crx_payload(body, len, &off, &fe) != 0 ||
        extpack_check(body + off, len - off, NULL, &fe) != 0) {
        xfree(body);
        return bad_gateway(rq, "sent an unusable package", id, fe.message);
    }
    char *zip = xmalloc(len - off + 1);
    memcpy(zip, body + off, len - off);
    resp_text(rs, 200, "application/octet-stream", zip, len - off);
    resp_header(rs, "Content-Disposition", "attachment; filename=\"%s.zip\"", id);
    xfree(body);
    return 0;
}

/* ---- loadExtensions ---- */

struct upload_ext {
    const struct mp_part *name, *zip;
};

/* "extensions[I][FIELD]" -> I (0..LIM_EXT_PER_SESSION-1) and the field;
 * -1 when the part name has another shape. */
static int part_index(const char *name, const char **field)
{
    if (strncmp(name, "extensions[", 11) != 0)
        return -1;
    const char *p = name + 11;
    int idx = 0, digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 4; p++, digits++)
        idx = idx * 10 + (*p - '0');
    if (!digits || *p != ']' || p[1] != '[' || (digits > 1 && name[11] == '0'))
        return -1;
    *field = p + 2;
    return idx;
}

/* Groups the parts by index (any order: SESSION_API.md 0.2). */
static int parse_uploads(struct req *rq, const struct mp_form *f, struct upload_ext *u, size_t *n)
{
    *n = 0;
    memset(u, 0, sizeof(struct upload_ext) * LIM_EXT_PER_SESSION);
    for (size_t i = 0; i < f->n; i++) {
        const struct mp_part *p = &f->parts[i];
        const char *field = NULL;
        int idx = part_index(p->name, &field);
        if (idx < 0)
            return err_field(&rq->err, p->name,
                             "invalid field: parts are extensions[i][name] and "
                             "extensions[i][zip_file]");
        if (idx >= LIM_EXT_PER_SESSION)
            return err_field(&rq->err, "extensions", "at most %d extensions per call",
                             LIM_EXT_PER_SESSION);
        const struct mp_part **slot = strcmp(field, "name]") == 0       ? &u[idx].name
                                      : strcmp(field, "zip_file]") == 0 ? &u[idx].zip
                                                                        : NULL;
        if (!slot)
            return err_field(&rq->err, p->name, "invalid field: expected name or zip_file");
        if (*slot)
            return err_field(&rq->err, p->name, "appears twice");
        *slot = p;
        if ((size_t)idx + 1 > *n)
            *n = (size_t)idx + 1;
    }
    if (*n == 0)
        return err_field(&rq->err, "extensions", "no extensions provided");
    for (size_t i = 0; i < *n; i++) {
        char path[48];
        snprintf(path, sizeof path, "extensions[%zu]", i);
        if (!u[i].name || !u[i].zip)
            return err_field(&rq->err, path, "each extension must include both name and zip_file");
        const struct mp_part *nm = u[i].name;
        if (!fields_name_ok(nm->data, nm->len) || (nm->len == 1 && nm->data[0] == '.') ||
            (nm->len == 2 && memcmp(nm->data, "..", 2) == 0))
            return err_field(&rq->err, path,
                             "invalid extension name: must match "
                             "^[A-Za-z0-9._-]{1,255}$ and not be . or ..");
        for (size_t j = 0; j < i; j++)
            if (u[j].name->len == nm->len && memcmp(u[j].name->data, nm->data, nm->len) == 0)
                return err_field(&rq->err, path, "duplicate name %.*s", (int)nm->len, nm->data);
        if (u[i].zip->len > LIM_EXT_ZIP_BYTES)
            return err_field(&rq->err, path, "zip_file is larger than %u bytes", LIM_EXT_ZIP_BYTES);
        struct err ze;
        err_init(&ze);
        if (extpack_check(u[i].zip->data, u[i].zip->len, NULL, &ze) != 0)
            return err_field(&rq->err, path, "invalid zip file: %s", ze.message);
    }
    return 0;
}

/* The zips of u unpacked into the session's files, their folders appended
 * to doc's EXT_DOC_DIRS and names to EXT_DOC_NAMES. */
static int install_uploads(struct req *rq, const char *root, const struct upload_ext *u, size_t n,
                           json_t *doc)
{
    json_t *names = json_object_get(doc, EXT_DOC_NAMES);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < json_array_size(names); j++) {
            const char *had = json_string_value(json_array_get(names, j));
            if (had && strlen(had) == u[i].name->len &&
                memcmp(had, u[i].name->data, u[i].name->len) == 0)
                return err_set(&rq->err, E_INVALID, "bad_request",
                               "extension name already exists: %s", had);
        }
    int dfd = open_beneath(root, EXT_UPLOADED_REL, &rq->err);
    if (dfd < 0)
        return rq->err.rc;
    json_t *dirs = json_object_get(doc, EXT_DOC_DIRS);
    if (!json_is_array(dirs))
        json_object_set_new(doc, EXT_DOC_DIRS, dirs = json_array());
    if (!json_is_array(names))
        json_object_set_new(doc, EXT_DOC_NAMES, names = json_array());
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)u[i].name->len, u[i].name->data);
        rc = unpack_new(dfd, name, u[i].zip->data, u[i].zip->len, &rq->err);
        if (rc == E_CONFLICT)
            rc = err_set(&rq->err, E_INVALID, "bad_request",
                         "extension name already exists: %s (a folder of that name is in "
                         "/home/kernel/extensions)",
                         name);
        if (rc == 0) {
            json_array_append_new(dirs, json_sprintf("%s/%s", EXT_UPLOADED_SEEN, name));
            json_array_append_new(names, json_string(name));
        }
    }
    close(dfd);
    if (json_array_size(dirs) > 2 * LIM_EXT_PER_SESSION && rc == 0)
        rc = err_set(&rq->err, E_INVALID, "bad_request",
                     "extensions: a session loads at most %d extensions", 2 * LIM_EXT_PER_SESSION);
    return rc;
}

int extensions_load(struct req *rq, struct resp *rs)
{
    rq->no_retry = 1;
    struct session_rec rec;
    memset(&rec, 0, sizeof rec);
    struct live *live = NULL;
    char ws[512];
    int rc = api_require_feature(rq, FEATURE);
    if (rc || (rc = api_live_session(rq, &rec, &live, ws, sizeof ws)))
        return rc;
    live_touch(live);
    struct sandbox *sb = live_sandbox_ref(live);
    struct mp_form f = {0};
    struct upload_ext u[LIM_EXT_PER_SESSION];
    size_t n = 0;
    json_t *doc = NULL;
    if (!sandbox_root(sb))
        rc = err_set(&rq->err, E_UNAVAIL, "sandbox_required",
                     "extensions: needs the session sandbox: docs/sandbox.md");
    if (rc == 0)
        rc = multipart_parse(req_header(rq, "Content-Type"), rq->body, rq->body_len, &f, &rq->err);
    if (rc == 0)
        rc = parse_uploads(rq, &f, u, &n);
    pthread_mutex_lock(&load_mu);
    if (rc == 0) {
        /* The newest settings: another call may have changed them. */
        struct session_rec cur;
        memset(&cur, 0, sizeof cur);
        struct auth *a = api_auth(rq);
        if (store_session_get(api_app(rq)->store, a->org.id, a->project.id, rec.id, 0, &cur) == 0) {
            session_rec_clear(&rec);
            rec = cur;
        }
        doc = rec.data ? json_loads(rec.data, 0, NULL) : NULL;
        if (!doc)
            rc = err_set(&rq->err, E_INTERNAL, "internal", "session %s has no settings", rec.id);
    }
    if (rc == 0)
        rc = install_uploads(rq, sandbox_root(sb), u, n, doc);
    if (rc == 0) {
        xfree(rec.data);
        rec.data = jsonx_dump(doc);
        rc = sess_restart(api_app(rq), &rec, &rq->err);
    }
    pthread_mutex_unlock(&load_mu);
    if (rc == 0)
        log_info("session %s: loaded %zu extension(s) and restarted its browser", rec.id, n);
    json_decref(doc);
    multipart_free(&f);
    sandbox_unref(sb);
    sessmgr_put(live);
    session_rec_clear(&rec);
    if (rc)
        return rc;
    resp_empty(rs, 201);
    return 0;
}

/* ---- the session's hooks (session/ext.h) ---- */

/* POST /browsers: the extensions the create names (its validated
 * `extensions`) unpack into the sandbox's files before the launch. */
static int ext_prepare(struct session_ctx *sc, struct err *e)
{
    const json_t *selectors = json_object_get(sc->body, "extensions");
    if (json_array_size(selectors) == 0)
        return 0;
    return extensions_session_prepare(sc->app, sc->rec->org_id, sc->rec->project_id, sc->ent,
                                      selectors, sc->opts->sandbox, sc->doc, e);
}

/* Every launch (create, restart) loads the folders the settings name. */
static void ext_launching(struct session_ctx *sc)
{
    sc->opts->extension_dirs = extensions_launch_dirs(sc->doc);
}

static const struct session_ext extensions_ext = {
    .name = "extensions",
    .prepare = ext_prepare,
    .launching = ext_launching,
};

/* Registered before main() runs, so that its prepare runs before every
 * module main.c registers (the extensions unpack first, as they always
 * did). */
__attribute__((constructor)) static void extensions_register(void)
{
    session_ext_register(&extensions_ext);
}
