/*
 * Handlers of /browsers/{id}/fs/... (browsers.fs.*, SESSION_API.md section
 * 2): gate (the key's live session, features.file_io, a sandbox with its own
 * files), parse, act through runtime/sessfs, render the kernel-images wire
 * format (201/200/204, bare arrays, FileInfo with Go FileMode strings).
 * What costs the session memory or CPU (writes, uploads, zips) runs in a
 * helper inside the session's cgroups (runtime/sesshelp.h); folder
 * downloads take a share of the server's zip streams (core/share.h).
 *
 * Watches are the app's engine app->fs_watches (runtime/fswatch.h): one
 * inotify descriptor per watch, read by the events stream itself when it is
 * woken by the engine's ticker. Folder downloads are the app's zip streams
 * (runtime/zipstreams.h).
 */
#include "api/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/fdio.h"
#include "core/log.h"
#include "core/multipart.h"
#include "core/path.h"
#include "core/share.h"
#include "core/xalloc.h"
#include "domain/filetype.h"
#include "runtime/fswatch.h"
#include "runtime/sandbox.h"
#include "runtime/sessfs.h"
#include "runtime/sesshelp.h"
#include "runtime/sessmgr.h"
#include "runtime/zipstreams.h"
#include "telemetry/telemetry.h"

#define FS_INLINE_BYTES (8u * 1024u * 1024u) /* read_file answers bigger files streamed */

/* ---- what every call needs ---- */

struct call {
    struct session_rec rec;
    struct live *live;
    struct sandbox *sb;
    struct sessfs fs;
    const char *op;
    int64_t started_us;
};

/* 404 for a session that is not the key's (or unknown), 409 when it has
 * ended, 403 without file_io, 503 without a sandbox with its own files. */
static void call_init(struct call *c)
{
    memset(c, 0, sizeof *c);
    c->fs.rootfd = -1;
}

/* call_open on a call_init'ed c; call_close releases either way. */
static int call_open(struct req *rq, const char *op, int mutates, struct call *c)
{
    c->op = op;
    c->started_us = clock_mono_us();
    /* A change to files is not repeated by the client's retries. */
    rq->no_retry = mutates;
    char ws[512];
    int rc = api_live_session(rq, &c->rec, &c->live, ws, sizeof ws);
    if (rc)
        return rc;
    if ((rc = api_require_feature(rq, "file_io")) != 0)
        return rc;
    c->sb = live_sandbox_ref(c->live);
    const char *root = sandbox_root(c->sb);
    if (root == NULL)
        return err_set(&rq->err, E_UNAVAIL, "sandbox_required",
                       "browsers.fs needs the session sandbox: docs/sandbox.md");
    rc = sessfs_open(&c->fs, root, sandbox_uid(c->sb));
    if (rc < 0)
        return err_set(&rq->err, E_INTERNAL, "internal", "opening the session's files: %s",
                       strerror(-rc));
    live_touch(c->live);
    return 0;
}

/* Reports the call (category platform) and releases what call_open took. */
static int call_close(struct req *rq, struct call *c, int rc)
{
    if (c->live) {
        int status = rc == 0 ? 200 : http_status_for(rc);
        json_t *d =
            json_pack("{s:s,s:i,s:I}", "operation_id", c->op, "status", status, "duration_ms",
                      (json_int_t)((clock_mono_us() - c->started_us) / 1000));
        struct telem_src src = {"kernel_api", "fs", 0};
        telemetry_emit_src(c->rec.id, TELEM_PLATFORM, "api_call", &src, d);
        sessmgr_put(c->live);
    }
    sessfs_close(&c->fs);
    sandbox_unref(c->sb);
    session_rec_clear(&c->rec);
    (void)rq;
    return rc;
}

/* The one table from sessfs's -errno to the client's Error record. what is
 * the operation's kernel-images phrase for a missing path ("file not
 * found"). */
static int fs_fail(struct req *rq, int rc, const char *path, const char *what)
{
    switch (rc) {
    case -ENOENT:
        return err_set(&rq->err, E_NOTFOUND, "not_found",
                       "%s: %s (fs sees the session's own files: /tmp and /home)", what, path);
    case -ENOTDIR:
        return err_set(&rq->err, E_INVALID, "bad_request", "path is not a directory: %s", path);
    case -EISDIR:
        return err_set(&rq->err, E_INVALID, "bad_request", "path is a directory: %s", path);
    case -EACCES:
    case -EPERM:
        return err_set(&rq->err, E_FORBIDDEN, "forbidden",
                       "permission denied: %s (operations run as the session's user)", path);
    case -EEXIST:
        return err_set(&rq->err, E_CONFLICT, "conflict", "path already exists: %s", path);
    case -ENOTEMPTY:
        return err_set(&rq->err, E_CONFLICT, "conflict", "directory not empty: %s", path);
    case -ENOSPC:
    case -EDQUOT:
        return err_set(&rq->err, E_TOOBIG, "insufficient_storage",
                       "the session's files are full (%lld MiB quota): %s",
                       LIM_SESSION_DISK_BYTES >> 20, path);
    case -EINVAL:
    case -ENXIO: /* a FIFO without a reader */
        return err_set(&rq->err, E_INVALID, "bad_request",
                       "not possible on this path (the root, or not a regular file): %s", path);
    case -ELOOP:
        return err_set(&rq->err, E_INVALID, "bad_request",
                       "too many symbolic links or folders nested too deep: %s", path);
    case -ENAMETOOLONG:
        return err_set(&rq->err, E_INVALID, "bad_request", "path too long: %s", path);
    case -E2BIG:
        return err_set(&rq->err, E_TOOBIG, "payload_too_large", "too large: %s", path);
    case -EBUSY:
        return err_set(&rq->err, E_CONFLICT, "conflict", "path is busy: %s", path);
    default:
        return err_set(&rq->err, E_INTERNAL, "internal", "%s failed: %s", path, strerror(-rc));
    }
}

/* A required absolute path (query or body field). */
static int need_path(struct req *rq, const char *field, const char *p)
{
    if (p == NULL || p[0] == '\0')
        return err_field(&rq->err, field, "%s cannot be empty", field);
    if (p[0] != '/')
        return err_field(&rq->err, field, "%s must be an absolute path", field);
    if (strlen(p) >= PATH_MAX)
        return err_field(&rq->err, field, "%s is too long", field);
    return 0;
}

static int mode_field(struct req *rq, const char *field, const char *s, mode_t dflt, mode_t *out)
{
    if (s == NULL) {
        *out = dflt;
        return 0;
    }
    if (sessfs_parse_mode(s, out) != 0)
        return err_field(&rq->err, field, "invalid mode: an octal string of 3 or 4 digits");
    *out &= 01777; /* no setuid/setgid inside a session */
    return 0;
}

/* A JSON body (required) with string fields. */
static int body_obj(struct req *rq, json_t **out)
{
    *out = NULL;
    if (rq->body_len == 0)
        return err_set(&rq->err, E_INVALID, "bad_request", "request body required");
    return req_json_object(rq, 0, out);
}

static int str_field(struct req *rq, const json_t *o, const char *k, const char **out)
{
    json_t *v = json_object_get(o, k);
    *out = NULL;
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return err_field(&rq->err, k, "must be a string");
    *out = json_string_value(v);
    return 0;
}

/* FileInfo of SESSION_API.md section 2. */
static json_t *file_info(const char *name, const char *path, const struct stat *st)
{
    char mode[32], mt[64], frac[16];
    sessfs_mode_string(st->st_mode, mode, sizeof mode);
    struct tm tm;
    gmtime_r(&st->st_mtim.tv_sec, &tm);
    strftime(mt, sizeof mt, "%Y-%m-%dT%H:%M:%S", &tm);
    /* RFC 3339 with nanoseconds, trailing zeros dropped, as Go prints it. */
    frac[0] = '\0';
    if (st->st_mtim.tv_nsec) {
        snprintf(frac, sizeof frac, ".%09ld", st->st_mtim.tv_nsec);
        size_t n = strlen(frac);
        while (frac[n - 1] == '0')
            frac[--n] = '\0';
    }
    char stamp[96];
    snprintf(stamp, sizeof stamp, "%s%sZ", mt, frac);
    return json_pack("{s:s,s:s,s:I,s:b,s:s,s:s}", "name", name, "path", path, "size_bytes",
                     (json_int_t)(S_ISDIR(st->st_mode) ? 0 : st->st_size), "is_dir",
                     S_ISDIR(st->st_mode), "mod_time", stamp, "mode", mode);
}

/* The normalized client path (no trailing slash, no "." or ".."). */
static void norm_path(const char *in, char *out, size_t cap)
{
    if (path_absolute(in, out, cap) != 0)
        snprintf(out, cap, "%s", in);
}

/* ---- read_file ---- */

struct fstream {
    int fd;
    off_t left;
};

static long fread_cb(void *ctx, char *buf, size_t cap)
{
    struct fstream *s = ctx;
    if (s->left <= 0)
        return -1;
    ssize_t n = read(s->fd, buf, cap < (size_t)s->left ? cap : (size_t)s->left);
    if (n <= 0)
        return -1; /* the file shrank: the body ends short, the client sees it */
    s->left -= n;
    return (long)n;
}

static void ffree_cb(void *ctx)
{
    struct fstream *s = ctx;
    close(s->fd);
    xfree(s);
}

int fs_read_file(struct req *rq, struct resp *rs)
{
    const char *path = req_query(rq, "path");
    int rc = need_path(rq, "path", path);
    if (rc)
        return rc;
    struct call c;
    call_init(&c);
    if ((rc = call_open(rq, "fs.read_file", 0, &c)) != 0)
        return call_close(rq, &c, rc);
    int fd;
    struct stat st;
    rc = sessfs_read_open(&c.fs, path, &fd, &st);
    if (rc < 0)
        return call_close(rq, &c, fs_fail(rq, rc, path, "file not found"));
    if (st.st_size <= (off_t)FS_INLINE_BYTES) {
        char *data = xmalloc((size_t)st.st_size + 1);
        size_t got = 0;
        (void)!fdio_read_all(fd, data, (size_t)st.st_size, &got, FDIO_NO_DEADLINE);
        close(fd);
        resp_text(rs, 200, "application/octet-stream", data, got);
    } else {
        struct fstream *s = xcalloc(1, sizeof *s);
        s->fd = fd;
        s->left = st.st_size;
        resp_stream(rs, 200, "application/octet-stream", fread_cb, ffree_cb, s, NULL);
    }
    return call_close(rq, &c, 0);
}

/* ---- write_file, create_directory, delete_*, move, set_file_permissions ---- */

/* A write_file between its steps (rq->defer_ctx). */
struct fwrite {
    char *path; /* the query's, copied: the exchange may end first */
    mode_t mode;
    char *buf; /* LIM_HTTP_STREAM_BYTES */
    struct call c;
    struct sesshelp_writer w;
    int started; /* the helper runs */
};

static int fwrite_end(struct req *rq, struct resp *rs, struct fwrite *fw, int rc)
{
    (void)rs;
    rc = call_close(rq, &fw->c, rc);
    xfree(fw->buf);
    xfree(fw->path);
    xfree(fw);
    rq->defer_ctx = NULL;
    return rc;
}

/* Takes the body as it arrives; waits for more without a thread
 * (req_defer_body). */
static int fwrite_step(struct req *rq, struct resp *rs)
{
    struct fwrite *fw = rq->defer_ctx;
    int rc = 0;
    long n;
    while ((n = rq->stopping ? err_set(&rq->err, E_UNAVAIL, "unavailable",
                                       "the server is stopping; retry the upload")
                             : req_body_take(rq, fw->buf, LIM_HTTP_STREAM_BYTES)) > 0) {
        if (!fw->started) {
            if ((rc = sesshelp_write_start(fw->c.sb, &fw->c.fs, fw->path, fw->mode, &fw->w)) != 0)
                return fwrite_end(rq, rs, fw,
                                  err_set(&rq->err, E_INTERNAL, "internal",
                                          "starting the file's writer: %s", strerror(-rc)));
            fw->started = 1;
        }
        if (sesshelp_write_chunk(&fw->w, fw->buf, (size_t)n) != 0)
            break; /* the writer failed: its end says why */
    }
    if (n == HTTP_BODY_WAIT)
        return req_defer_body(rq, rs, fwrite_step);
    if (!fw->started)
        return fwrite_end(
            rq, rs, fw,
            n < 0 ? (int)n : err_set(&rq->err, E_INVALID, "bad_request", "empty request body"));
    /* n < 0: the body was cut short (rq->err says how). */
    int cut = n < 0;
    int erc = sesshelp_write_end(&fw->w, cut);
    if (cut) {
        rc = (int)n;
        int urc = sessfs_unlink(&fw->c.fs, fw->path);
        if (urc < 0 && urc != -ENOENT)
            log_warn("fs: a write cut short left its file in session %s: %s", fw->c.rec.id,
                     strerror(-urc));
    } else if (erc < 0) {
        rc = fs_fail(rq, erc, fw->path, "directory not found");
    } else {
        resp_empty(rs, 201);
    }
    return fwrite_end(rq, rs, fw, rc);
}

/* The body is the file, streamed (HTTP_ROUTE_STREAM): the transport holds
 * at most LIM_HTTP_STREAM_BYTES of it, and each piece goes on into a helper
 * in the session's cgroups (sesshelp_write_start) as it arrives, so that the
 * session, not the server, holds the file's pages; while the client is
 * slow the call holds no thread. The file is created at the first byte; a
 * write cut short (the client left, or the body went past the cap)
 * removes it. */
int fs_write_file(struct req *rq, struct resp *rs)
{
    const char *path = req_query(rq, "path");
    int rc = need_path(rq, "path", path);
    mode_t mode;
    if (rc == 0)
        rc = mode_field(rq, "mode", req_query(rq, "mode"), 0644, &mode);
    if (rc)
        return rc;
    struct fwrite *fw = xcalloc(1, sizeof *fw);
    fw->path = xstrdup(path);
    fw->mode = mode;
    fw->buf = xmalloc(LIM_HTTP_STREAM_BYTES);
    call_init(&fw->c);
    rq->defer_ctx = fw;
    if ((rc = call_open(rq, "fs.write_file", 1, &fw->c)) != 0)
        return fwrite_end(rq, rs, fw, rc);
    return fwrite_step(rq, rs);
}

/* The PUT handlers taking {path} (and more) as JSON. */
enum put_op { PUT_MKDIR, PUT_UNLINK, PUT_RMTREE, PUT_MOVE, PUT_CHMOD };

/* owner/group: only the session's own user (its number, or "kernel"). */
static int own_ok(const char *v, uid_t uid)
{
    if (v == NULL || strcmp(v, "kernel") == 0)
        return 1;
    char *end;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    return errno == 0 && end != v && *end == '\0' && n == (unsigned long)uid;
}

static int put_call(struct req *rq, struct resp *rs, enum put_op op)
{
    static const char *const ops[] = {"fs.create_directory", "fs.delete_file",
                                      "fs.delete_directory", "fs.move", "fs.set_file_permissions"};
    json_t *b;
    int rc = body_obj(rq, &b);
    if (rc)
        return rc;
    const char *path = NULL, *dst = NULL, *mode_s = NULL, *owner = NULL, *group = NULL;
    mode_t mode = 0;
    if (op == PUT_MOVE) {
        if ((rc = str_field(rq, b, "src_path", &path)) == 0 &&
            (rc = str_field(rq, b, "dest_path", &dst)) == 0 && (!path || !dst))
            rc = err_set(&rq->err, E_INVALID, "bad_request", "src_path and dest_path required");
        if (rc == 0 && (rc = need_path(rq, "src_path", path)) == 0)
            rc = need_path(rq, "dest_path", dst);
    } else if ((rc = str_field(rq, b, "path", &path)) == 0) {
        rc = need_path(rq, "path", path);
    }
    if (rc == 0 && (op == PUT_MKDIR || op == PUT_CHMOD))
        rc = str_field(rq, b, "mode", &mode_s);
    if (rc == 0 && op == PUT_CHMOD && mode_s == NULL)
        rc = err_field(&rq->err, "mode", "mode is required");
    if (rc == 0 && (op == PUT_MKDIR || op == PUT_CHMOD))
        rc = mode_field(rq, "mode", mode_s, 0755, &mode);
    if (rc == 0 && op == PUT_CHMOD && (rc = str_field(rq, b, "owner", &owner)) == 0)
        rc = str_field(rq, b, "group", &group);
    struct call c;
    call_init(&c);
    if (rc || (rc = call_open(rq, ops[op], 1, &c)) != 0) {
        json_decref(b);
        return call_close(rq, &c, rc);
    }
    switch (op) {
    case PUT_MKDIR:
        rc = sesshelp_mkdir(c.sb, &c.fs, path, mode); /* the session pays its inodes */
        if (rc < 0)
            rc = fs_fail(rq, rc, path, "parent directory not found");
        break;
    case PUT_UNLINK:
        rc = sessfs_unlink(&c.fs, path);
        if (rc < 0)
            rc = fs_fail(rq, rc, path, "file not found");
        break;
    case PUT_RMTREE:
        rc = sessfs_rmtree(&c.fs, path);
        if (rc < 0)
            rc = fs_fail(rq, rc, path, "directory not found");
        break;
    case PUT_MOVE:
        rc = sessfs_move(&c.fs, path, dst);
        if (rc == -ENOTDIR)
            rc = err_set(&rq->err, E_NOTFOUND, "not_found", "destination directory not found: %s",
                         dst);
        else if (rc < 0)
            rc = fs_fail(rq, rc, path, "source not found");
        break;
    case PUT_CHMOD:
        if (!own_ok(owner, sandbox_uid(c.sb)) || !own_ok(group, sandbox_uid(c.sb))) {
            rc = err_field(&rq->err, owner && !own_ok(owner, sandbox_uid(c.sb)) ? "owner" : "group",
                           "may only name the session's own user: kernel (uid %u)",
                           (unsigned)sandbox_uid(c.sb));
            break;
        }
        rc = sessfs_chmod(&c.fs, path, mode);
        if (rc < 0)
            rc = fs_fail(rq, rc, path, "path not found");
        break;
    }
    json_decref(b);
    if (rc == 0)
        resp_empty(rs, op == PUT_MKDIR ? 201 : 200);
    return call_close(rq, &c, rc);
}

int fs_create_directory(struct req *rq, struct resp *rs)
{
    return put_call(rq, rs, PUT_MKDIR);
}

int fs_delete_file(struct req *rq, struct resp *rs)
{
    return put_call(rq, rs, PUT_UNLINK);
}

int fs_delete_directory(struct req *rq, struct resp *rs)
{
    return put_call(rq, rs, PUT_RMTREE);
}

int fs_move(struct req *rq, struct resp *rs)
{
    return put_call(rq, rs, PUT_MOVE);
}

int fs_set_file_permissions(struct req *rq, struct resp *rs)
{
    return put_call(rq, rs, PUT_CHMOD);
}

/* ---- list_files, file_info, download_dir_zip ---- */

int fs_list_files(struct req *rq, struct resp *rs)
{
    const char *path = req_query(rq, "path");
    int rc = need_path(rq, "path", path);
    if (rc)
        return rc;
    struct call c;
    call_init(&c);
    if ((rc = call_open(rq, "fs.list_files", 0, &c)) != 0)
        return call_close(rq, &c, rc);
    struct sessfs_entry *v;
    size_t n;
    rc = sessfs_list(&c.fs, path, &v, &n);
    if (rc < 0)
        return call_close(rq, &c, fs_fail(rq, rc, path, "directory not found"));
    char dir[PATH_MAX];
    norm_path(path, dir, sizeof dir);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        char *p = xasprintf("%s/%s", strcmp(dir, "/") ? dir : "", v[i].name);
        json_array_append_new(arr, file_info(v[i].name, p, &v[i].st));
        xfree(p);
    }
    sessfs_entries_free(v, n);
    resp_json(rs, 200, arr);
    return call_close(rq, &c, 0);
}

int fs_file_info(struct req *rq, struct resp *rs)
{
    const char *path = req_query(rq, "path");
    int rc = need_path(rq, "path", path);
    if (rc)
        return rc;
    struct call c;
    call_init(&c);
    if ((rc = call_open(rq, "fs.file_info", 0, &c)) != 0)
        return call_close(rq, &c, rc);
    struct stat st;
    rc = sessfs_stat(&c.fs, path, &st);
    if (rc < 0)
        return call_close(rq, &c, fs_fail(rq, rc, path, "path not found"));
    char p[PATH_MAX];
    norm_path(path, p, sizeof p);
    const char *base = strrchr(p, '/');
    resp_json(rs, 200, file_info(base && base[1] ? base + 1 : "/", p, &st));
    return call_close(rq, &c, 0);
}

/* ---- downloads (issue 31.11) ---- */

/* Where the session's browser downloads to by default: Chromium's
 * ~/Downloads, HOME being the session's home (runtime/chromium.c). */
#define DL_DEFAULT_DIR "/home/kernel/Downloads"
/* Folders the listing also reads: the hosted service's documented download
 * folder, and the folders Playwright's connectOverCDP names for its
 * downloads (Browser.setDownloadBehavior allowAndName with a temporary
 * folder of the client's machine, which the browser creates in its own /tmp). */
#define DL_DOCS_DIR  "/tmp/downloads"
#define DL_PW_PREFIX "playwright-artifacts-"

/* Hashes already computed, keyed by session, path, inode, size and mtime:
 * listing again does not read the files again. Round-robin replacement. */
struct dl_hash {
    ino_t ino;
    off_t size;
    struct timespec mtime;
    char sid[STORE_ID];
    char path[512]; /* a longer path is not remembered */
    char hex[CRYPTO_SHA256_HEX];
};
static pthread_mutex_t dl_mu = PTHREAD_MUTEX_INITIALIZER;
static struct dl_hash dl_cache[LIM_FS_DOWNLOAD_HASHES];
static size_t dl_next;

static int dl_cached(const char *sid, const char *path, const struct stat *st, char *hex)
{
    int hit = 0;
    pthread_mutex_lock(&dl_mu);
    for (size_t i = 0; i < LIM_FS_DOWNLOAD_HASHES && !hit; i++) {
        const struct dl_hash *h = &dl_cache[i];
        if (h->ino == st->st_ino && h->size == st->st_size &&
            h->mtime.tv_sec == st->st_mtim.tv_sec && h->mtime.tv_nsec == st->st_mtim.tv_nsec &&
            strcmp(h->sid, sid) == 0 && strcmp(h->path, path) == 0) {
            memcpy(hex, h->hex, CRYPTO_SHA256_HEX);
            hit = 1;
        }
    }
    pthread_mutex_unlock(&dl_mu);
    return hit;
}

static void dl_remember(const char *sid, const char *path, const struct stat *st, const char *hex)
{
    if (strlen(path) >= sizeof dl_cache[0].path)
        return;
    pthread_mutex_lock(&dl_mu);
    struct dl_hash *h = &dl_cache[dl_next];
    dl_next = (dl_next + 1) % LIM_FS_DOWNLOAD_HASHES;
    snprintf(h->sid, sizeof h->sid, "%s", sid);
    snprintf(h->path, sizeof h->path, "%s", path);
    h->ino = st->st_ino;
    h->size = st->st_size;
    h->mtime = st->st_mtim;
    memcpy(h->hex, hex, CRYPTO_SHA256_HEX);
    pthread_mutex_unlock(&dl_mu);
}

/* One file of a downloads folder: its entry, or NULL when it is not a
 * regular file (or vanished). A download still being written (complete
 * false) has no sha256 yet. */
static json_t *dl_entry(struct call *c, const char *dir, const struct sessfs_entry *v,
                        const struct sessfs_entry *all, size_t n)
{
    if (!S_ISREG(v->st.st_mode))
        return NULL;
    char *path = xasprintf("%s/%s", dir, v->name);
    int complete = !filetype_partial(v->name);
    for (size_t i = 0; complete && i < n; i++)
        if (filetype_partial(all[i].name) &&
            strlen(all[i].name) == strlen(v->name) + strlen(".crdownload") &&
            strncmp(all[i].name, v->name, strlen(v->name)) == 0)
            complete = 0; /* the browser's placeholder beside its temporary file */
    int fd = -1;
    struct stat st;
    json_t *e = NULL;
    if (sessfs_read_open(&c->fs, path, &fd, &st) == 0) {
        uint8_t head[FILETYPE_HEAD_BYTES];
        ssize_t got = pread(fd, head, sizeof head, 0);
        char hex[CRYPTO_SHA256_HEX] = "";
        if (complete && !dl_cached(c->rec.id, path, &st, hex)) {
            if (crypto_sha256_fd_hex(fd, hex) == 0)
                dl_remember(c->rec.id, path, &st, hex);
            else
                hex[0] = '\0';
        }
        json_t *fi = file_info(v->name, path, &st);
        e = json_pack("{s:s,s:s,s:I,s:s,s:s?,s:b,s:O}", "name", v->name, "path", path, "size",
                      (json_int_t)st.st_size, "type",
                      filetype_mime(v->name, head, got > 0 ? (size_t)got : 0), "sha256",
                      hex[0] ? hex : NULL, "complete", complete, "mod_time",
                      json_object_get(fi, "mod_time"));
        json_decref(fi);
        close(fd);
    }
    xfree(path);
    return e;
}

/* The regular files of one folder, appended to out (at most
 * LIM_FS_DOWNLOADS_LISTED in all). A missing folder adds nothing. */
static void dl_scan(struct call *c, const char *dir, json_t *out)
{
    struct sessfs_entry *v;
    size_t n;
    if (sessfs_list(&c->fs, dir, &v, &n) < 0)
        return;
    for (size_t i = 0; i < n && json_array_size(out) < LIM_FS_DOWNLOADS_LISTED; i++) {
        json_t *e = dl_entry(c, dir, &v[i], v, n);
        if (e)
            json_array_append_new(out, e);
    }
    sessfs_entries_free(v, n);
}

/* A mod_time as a key that sorts by time: Go drops trailing zeros of the
 * fraction, so the fraction is padded back to nine digits. */
static void dl_time_key(const json_t *e, char *key, size_t cap)
{
    const char *t = json_string_value(json_object_get(e, "mod_time"));
    t = t ? t : "";
    size_t sec = strcspn(t, ".Z");
    const char *frac = t[sec] == '.' ? t + sec + 1 : "";
    size_t fl = strcspn(frac, "Z");
    snprintf(key, cap, "%.*s.%.*s%.*s", (int)sec, t, (int)(fl > 9 ? 9 : fl), frac,
             (int)(fl > 9 ? 0 : 9 - fl), "000000000");
}

static int dl_by_time(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    char kx[64], ky[64];
    dl_time_key(x, kx, sizeof kx);
    dl_time_key(y, ky, sizeof ky);
    int c = strcmp(kx, ky);
    if (c)
        return c;
    const char *px = json_string_value(json_object_get(x, "path"));
    const char *py = json_string_value(json_object_get(y, "path"));
    return strcmp(px ? px : "", py ? py : "");
}

int fs_downloads(struct req *rq, struct resp *rs)
{
    struct call c;
    call_init(&c);
    int rc = call_open(rq, "fs.downloads", 0, &c);
    if (rc)
        return call_close(rq, &c, rc);
    json_t *list = json_array();
    dl_scan(&c, DL_DEFAULT_DIR, list);
    dl_scan(&c, DL_DOCS_DIR, list);
    struct sessfs_entry *v;
    size_t n;
    if (sessfs_list(&c.fs, "/tmp", &v, &n) == 0) {
        for (size_t i = 0; i < n; i++)
            if (S_ISDIR(v[i].st.st_mode) &&
                strncmp(v[i].name, DL_PW_PREFIX, strlen(DL_PW_PREFIX)) == 0) {
                char *dir = xasprintf("/tmp/%s", v[i].name);
                dl_scan(&c, dir, list);
                xfree(dir);
            }
        sessfs_entries_free(v, n);
    }
    /* Oldest first, in a stable order across calls. */
    size_t k = json_array_size(list);
    json_t **items = xcalloc(k ? k : 1, sizeof *items);
    for (size_t i = 0; i < k; i++)
        items[i] = json_incref(json_array_get(list, i));
    qsort(items, k, sizeof *items, dl_by_time);
    json_t *sorted = json_array();
    for (size_t i = 0; i < k; i++)
        json_array_append_new(sorted, items[i]);
    xfree(items);
    json_decref(list);
    resp_json(rs, 200, json_pack("{s:s,s:o}", "directory", DL_DEFAULT_DIR, "downloads", sorted));
    return call_close(rq, &c, 0);
}

/* download_dir_zip: the app's zip streams (runtime/zipstreams.h) build the
 * zip in a helper inside the session's cgroups and relay it to the response,
 * which parks until the relay's next write wakes it. */
struct zresp {
    struct zipstream *z;
    struct http_stream *hs;
};

static void zwake(void *ctx)
{
    struct zresp *r = ctx;
    if (r->hs)
        http_stream_wake(r->hs);
}

static long zread(void *ctx, char *buf, size_t cap)
{
    return zipstream_read(((struct zresp *)ctx)->z, buf, cap);
}

static void zfree(void *ctx)
{
    struct zresp *r = ctx;
    zipstream_close(r->z); /* no zwake from here on */
    xfree(r);
}

int fs_download_dir_zip(struct req *rq, struct resp *rs)
{
    const char *path = req_query(rq, "path");
    int rc = need_path(rq, "path", path);
    if (rc)
        return rc;
    struct call c;
    call_init(&c);
    if ((rc = call_open(rq, "fs.download_dir_zip", 0, &c)) != 0)
        return call_close(rq, &c, rc);
    struct stat st;
    rc = sessfs_stat(&c.fs, path, &st);
    if (rc == 0 && !S_ISDIR(st.st_mode))
        rc = -ENOTDIR;
    if (rc < 0)
        return call_close(rq, &c, fs_fail(rq, rc, path, "directory not found"));
    struct zresp *r = xcalloc(1, sizeof *r);
    if ((rc = zipstream_start(api_app(rq)->zips, c.sb, &c.fs, path, c.rec.org_id, c.rec.id, zwake,
                              r, &r->z, &rq->err)) != 0) {
        xfree(r);
        return call_close(rq, &c, rc);
    }
    resp_stream(rs, 200, "application/zip", zread, zfree, r, &r->hs);
    zipstream_relay(r->z);
    return call_close(rq, &c, 0);
}

/* ---- upload, upload_zip ---- */

/* A text part as a string (owned); NULL when it holds a NUL byte. */
static char *part_text(const struct mp_part *p)
{
    if (memchr(p->data, '\0', p->len) != NULL)
        return NULL;
    return xstrndup(p->data, p->len);
}

/* "files[3][file]", "files[3].file", "files.3.file": index and field. */
static int upload_field(const char *name, unsigned *idx, const char **field)
{
    const char *p;
    if (strncmp(name, "files[", 6) == 0)
        p = name + 6;
    else if (strncmp(name, "files.", 6) == 0)
        p = name + 6;
    else
        return -1;
    char *end;
    if (*p < '0' || *p > '9')
        return -1;
    unsigned long i = strtoul(p, &end, 10);
    if (i >= LIM_MULTIPART_PARTS)
        return -1;
    if (name[5] == '[') {
        if (*end != ']')
            return -1;
        end++;
    }
    if (strcmp(end, "[file]") == 0 || strcmp(end, ".file") == 0)
        *field = "file";
    else if (strcmp(end, "[dest_path]") == 0 || strcmp(end, ".dest_path") == 0)
        *field = "dest_path";
    else
        return -1;
    *idx = (unsigned)i;
    return 0;
}

static int parse_form(struct req *rq, struct mp_form *f)
{
    return multipart_parse(req_header(rq, "Content-Type"), rq->body, rq->body_len, f, &rq->err);
}

/* An upload between its steps (rq->defer_ctx). Each file part is written,
 * as it arrives, by a helper in the session's cgroups (as write_file's
 * body) into a staged file of the session's own, /tmp/.upload-<tag>-<i>;
 * once the whole form is read and its items check out, each staged file is
 * renamed onto its dest_path (the session's files are one filesystem). A
 * form that fails, or a client that leaves, leaves no staged file and
 * changes no dest_path. Parts come in any order (the SDK's createForm), so
 * a file may arrive before its dest_path. */
struct fupload {
    struct call c;
    struct req *rq;
    struct mp_stream *mp;
    char *buf; /* LIM_HTTP_STREAM_BYTES */
    char tag[17];
    char *dest[LIM_MULTIPART_PARTS];             /* dest_path values (owned) */
    unsigned char has_file[LIM_MULTIPART_PARTS]; /* 1: seen, 2: staged whole */
    unsigned char has_dest[LIM_MULTIPART_PARTS];
    unsigned used; /* highest index seen, plus one */
    /* The part being read: a file while `writing`, else a dest_path. */
    unsigned idx;
    char text[PATH_MAX]; /* a dest_path's bytes */
    size_t tlen;
    int writing; /* w runs */
    struct sesshelp_writer w;
};

static void staged_path(const struct fupload *u, unsigned i, char *out, size_t cap)
{
    snprintf(out, cap, "/tmp/.upload-%s-%u", u->tag, i);
}

static int up_begin(void *ctx, const struct mp_part *p, struct err *e)
{
    struct fupload *u = ctx;
    unsigned idx;
    const char *field;
    if (strcmp(p->name, "file") == 0 || strcmp(p->name, "dest_path") == 0) {
        idx = 0; /* the single-file shorthand */
        field = strcmp(p->name, "file") == 0 ? "file" : "dest_path";
    } else if (upload_field(p->name, &idx, &field) != 0) {
        return err_set(e, E_INVALID, "bad_request", "invalid form field: %.200s", p->name);
    }
    unsigned char *seen = strcmp(field, "file") == 0 ? &u->has_file[idx] : &u->has_dest[idx];
    if (*seen)
        return err_set(e, E_INVALID, "bad_request", "duplicate form field: %.200s", p->name);
    *seen = 1;
    if (idx + 1 > u->used)
        u->used = idx + 1;
    u->idx = idx;
    u->tlen = 0;
    if (strcmp(field, "file") != 0)
        return 0;
    char path[64];
    staged_path(u, idx, path, sizeof path);
    int rc = sesshelp_write_start(u->c.sb, &u->c.fs, path, 0644, &u->w);
    if (rc < 0)
        return err_set(e, E_INTERNAL, "internal", "starting the file's writer: %s", strerror(-rc));
    u->writing = 1;
    return 0;
}

static int up_data(void *ctx, const char *data, size_t len, struct err *e)
{
    struct fupload *u = ctx;
    if (u->writing) {
        if (sesshelp_write_chunk(&u->w, data, len) == 0)
            return 0;
        /* The writer failed: its end says why. */
        u->writing = 0;
        char path[64];
        staged_path(u, u->idx, path, sizeof path);
        int rc = sesshelp_write_end(&u->w, 0);
        return fs_fail(u->rq, rc < 0 ? rc : -EPIPE, path, "staging folder not found");
    }
    if (len >= sizeof u->text - u->tlen)
        return err_set(e, E_INVALID, "bad_request", "dest_path is too long (files[%u][dest_path])",
                       u->idx);
    memcpy(u->text + u->tlen, data, len);
    u->tlen += len;
    return 0;
}

static int up_end(void *ctx, struct err *e)
{
    struct fupload *u = ctx;
    unsigned i = u->idx;
    if (u->writing) {
        u->writing = 0;
        u->has_file[i] = 2;
        int rc = sesshelp_write_end(&u->w, 0);
        if (rc < 0) {
            char path[64];
            staged_path(u, i, path, sizeof path);
            return fs_fail(u->rq, rc, path, "staging folder not found");
        }
        return 0;
    }
    if (u->tlen == 0 || u->text[0] != '/' || memchr(u->text, '\0', u->tlen) != NULL)
        return err_set(e, E_INVALID, "bad_request",
                       "dest_path must be an absolute path (files[%u][dest_path])", i);
    u->dest[i] = xstrndup(u->text, u->tlen);
    return 0;
}

/* Removes what the upload staged and frees it. */
static int fupload_end(struct req *rq, struct resp *rs, struct fupload *u, int rc)
{
    (void)rs;
    if (u->writing)
        (void)sesshelp_write_end(&u->w, 1);
    for (unsigned i = 0; i < u->used; i++) {
        if (u->has_file[i]) {
            char path[64];
            staged_path(u, i, path, sizeof path);
            int urc = sessfs_unlink(&u->c.fs, path);
            if (urc < 0 && urc != -ENOENT)
                log_warn("fs: an upload left its staged file in session %s: %s", u->c.rec.id,
                         strerror(-urc));
        }
        xfree(u->dest[i]);
    }
    rc = call_close(rq, &u->c, rc);
    multipart_stream_free(u->mp);
    xfree(u->buf);
    xfree(u);
    rq->defer_ctx = NULL;
    return rc;
}

/* The staged file i onto its dest_path: the folders above it are created
 * (0755), and a file it replaces keeps its mode, as write_file does. */
static int place(struct fupload *u, unsigned i)
{
    char staged[64], dir[PATH_MAX];
    staged_path(u, i, staged, sizeof staged);
    const char *dest = u->dest[i];
    size_t dl = (size_t)(strrchr(dest, '/') - dest);
    int rc = 0;
    if (dl > 0) {
        memcpy(dir, dest, dl);
        dir[dl] = '\0';
        rc = sesshelp_mkdir(u->c.sb, &u->c.fs, dir, 0755);
    }
    struct stat st;
    if (rc == 0 && sessfs_stat(&u->c.fs, dest, &st) == 0 && S_ISREG(st.st_mode))
        rc = sessfs_chmod(&u->c.fs, staged, st.st_mode);
    if (rc == 0)
        rc = sessfs_move(&u->c.fs, staged, dest);
    return rc;
}

/* The form is read: pair its items, then place every file. */
static int fupload_finish(struct req *rq, struct fupload *u)
{
    size_t count = 0;
    for (unsigned i = 0; i < u->used; i++) {
        if (!u->has_file[i] && !u->has_dest[i])
            continue;
        if (!u->has_file[i] || !u->has_dest[i])
            return err_set(&rq->err, E_INVALID, "bad_request",
                           "each item must include file and dest_path (files[%u])", i);
        count++;
    }
    if (count == 0)
        return err_set(&rq->err, E_INVALID, "bad_request", "no files provided");
    for (unsigned i = 0; i < u->used; i++) {
        if (u->has_file[i] != 2)
            continue;
        int rc = place(u, i);
        if (rc < 0)
            return fs_fail(rq, rc, u->dest[i], "destination not found");
        u->has_file[i] = 0; /* placed: nothing to remove */
    }
    return 0;
}

/* Takes the body as it arrives into the form's parser; waits for more
 * without a thread (req_defer_body). */
static int fupload_step(struct req *rq, struct resp *rs)
{
    struct fupload *u = rq->defer_ctx;
    long n;
    int rc = 0;
    while ((n = rq->stopping ? err_set(&rq->err, E_UNAVAIL, "unavailable",
                                       "the server is stopping; retry the upload")
                             : req_body_take(rq, u->buf, LIM_HTTP_STREAM_BYTES)) > 0)
        if ((rc = multipart_stream_feed(u->mp, u->buf, (size_t)n, &rq->err)) != 0)
            return fupload_end(rq, rs, u, rc);
    if (n == HTTP_BODY_WAIT)
        return req_defer_body(rq, rs, fupload_step);
    if (n < 0)
        return fupload_end(rq, rs, u, (int)n); /* cut short: rq->err says how */
    if ((rc = multipart_stream_end(u->mp, &rq->err)) == 0 && (rc = fupload_finish(rq, u)) == 0)
        resp_empty(rs, 201);
    return fupload_end(rq, rs, u, rc);
}

/* The form streams (HTTP_ROUTE_STREAM): the transport and the parser hold
 * a few hundred KiB of it whatever the files' sizes, the files' pages are
 * the session's, and a slow client holds no thread. */
int fs_upload(struct req *rq, struct resp *rs)
{
    struct fupload *u = xcalloc(1, sizeof *u);
    u->rq = rq;
    call_init(&u->c);
    rq->defer_ctx = u;
    struct mp_sink sink = {up_begin, up_data, up_end, u};
    int rc = multipart_stream_new(req_header(rq, "Content-Type"), &sink, &u->mp, &rq->err);
    if (rc == 0)
        rc = call_open(rq, "fs.upload", 1, &u->c);
    if (rc)
        return fupload_end(rq, rs, u, rc);
    unsigned char r[8];
    crypto_random(r, sizeof r);
    for (size_t i = 0; i < sizeof r; i++)
        snprintf(u->tag + 2 * i, 3, "%02x", r[i]);
    u->buf = xmalloc(LIM_HTTP_STREAM_BYTES);
    return fupload_step(rq, rs);
}

int fs_upload_zip(struct req *rq, struct resp *rs)
{
    struct mp_form f;
    int rc = parse_form(rq, &f);
    if (rc)
        return rc;
    const struct mp_part *zip = multipart_find(&f, "zip_file");
    const struct mp_part *dp = multipart_find(&f, "dest_path");
    for (size_t i = 0; i < f.n; i++)
        if (strcmp(f.parts[i].name, "zip_file") != 0 && strcmp(f.parts[i].name, "dest_path") != 0)
            rc = err_set(&rq->err, E_INVALID, "bad_request", "invalid form field: %.200s",
                         f.parts[i].name);
    if (rc == 0 && (!zip || !dp))
        rc = err_set(&rq->err, E_INVALID, "bad_request", "zip_file and dest_path are required");
    char *dest = rc == 0 && dp ? part_text(dp) : NULL;
    if (rc == 0 && (dest == NULL || dest[0] != '/'))
        rc = err_set(&rq->err, E_INVALID, "bad_request", "dest_path must be an absolute path");
    struct call c;
    call_init(&c);
    if (rc == 0 && zip && dest && (rc = call_open(rq, "fs.upload_zip", 1, &c)) == 0) {
        rc = sesshelp_unzip(c.sb, &c.fs, dest, zip->data, zip->len, &rq->err);
        if (rc == 0)
            resp_empty(rs, 201);
    }
    xfree(dest);
    multipart_free(&f);
    return call_close(rq, &c, rc);
}

/* ---- watch: the app's watches, runtime/fswatch.h ---- */

int fs_watch_start(struct req *rq, struct resp *rs)
{
    json_t *b;
    int rc = body_obj(rq, &b);
    if (rc)
        return rc;
    const char *path = NULL;
    json_t *rec = json_object_get(b, "recursive");
    if ((rc = str_field(rq, b, "path", &path)) == 0)
        rc = need_path(rq, "path", path);
    if (rc == 0 && rec && !json_is_boolean(rec) && !json_is_null(rec))
        rc = err_field(&rq->err, "recursive", "must be a boolean");
    if (rc) {
        json_decref(b);
        return rc;
    }
    struct call c;
    call_init(&c);
    if ((rc = call_open(rq, "fs.watch", 0, &c)) != 0) {
        json_decref(b);
        return call_close(rq, &c, rc);
    }
    char id[CRYPTO_ID_LEN + 1];
    int path_rc = 0;
    rc = fswatch_add(api_app(rq)->fs_watches, api_app(rq)->sessions, &c.fs, c.sb, c.rec.id, path,
                     json_is_true(rec), id, &path_rc, &rq->err);
    if (path_rc < 0)
        rc = fs_fail(rq, path_rc, path, "path not found");
    json_decref(b); /* path pointed into it */
    if (rc)
        return call_close(rq, &c, rc);
    resp_json(rs, 201, json_pack("{s:s}", "watch_id", id));
    return call_close(rq, &c, 0);
}

/* The events stream: the watch's frames (runtime/fswatch.h reads inotify
 * when the stream is woken). */
static void wwake(void *wctx)
{
    http_stream_wake(wctx);
}

static long wread(void *ctx, char *dst, size_t cap)
{
    return fswatch_read(ctx, dst, cap);
}

static void wfree(void *ctx)
{
    fswatch_detach(ctx);
}

/* Under the watches' lock: the stream of w, and the handle its wake takes. */
static void *wattach(void *actx, struct fswatch *w)
{
    struct resp *rs = actx;
    struct http_stream *hs = NULL;
    resp_stream(rs, 200, "text/event-stream", wread, wfree, w, &hs);
    resp_header(rs, "Cache-Control", "no-cache");
    resp_header(rs, "X-Accel-Buffering", "no");
    resp_header(rs, "X-SSE-Content-Type", "application/json");
    return hs;
}

int fs_watch_events(struct req *rq, struct resp *rs)
{
    struct call c;
    call_init(&c);
    int rc = call_open(rq, "fs.watch_events", 0, &c);
    if (rc)
        return call_close(rq, &c, rc);
    rc = fswatch_attach(api_app(rq)->fs_watches, c.rec.id, rq->params[1], wwake, wattach, rs,
                        &rq->err);
    return call_close(rq, &c, rc);
}

int fs_watch_stop(struct req *rq, struct resp *rs)
{
    struct call c;
    call_init(&c);
    int rc = call_open(rq, "fs.watch_stop", 1, &c);
    if (rc)
        return call_close(rq, &c, rc);
    rc = fswatch_remove(api_app(rq)->fs_watches, c.rec.id, rq->params[1], &rq->err);
    if (rc == 0)
        resp_empty(rs, 204);
    return call_close(rq, &c, rc);
}
