/*
 * extpack: checks and unpacks extension zips with libarchive, reading from
 * memory (the upload is buffered whole, at most LIM_EXT_ZIP_BYTES).
 *
 * The check reads every file's data, so that a corrupt or truncated archive
 * (a bad CRC) and a zip bomb are refused at upload time rather than when a
 * session loads it. The unpacked byte count is taken from the data actually
 * decompressed, never from the sizes the archive declares.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fdio.h"
#include "core/limits.h"
#include "core/xalloc.h"
#include "runtime/extpack.h"

#define EXTPACK_PATH_MAX  1024
#define EXTPACK_DEPTH_MAX 32
#define EXTPACK_CHUNK     (64u * 1024u)

int extpack_path_check(const char *path, char *why, size_t cap)
{
    size_t n = strlen(path);
#define BAD(...) (snprintf(why, cap, __VA_ARGS__), E_INVALID)
    if (n == 0)
        return BAD("an entry has an empty name");
    if (n > EXTPACK_PATH_MAX)
        return BAD("an entry name is longer than %d bytes", EXTPACK_PATH_MAX);
    if (path[0] == '/')
        return BAD("entry %.200s is an absolute path", path);
    int depth = 0;
    for (const char *p = path; *p;) {
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)p[i];
            if (c == '\\')
                return BAD("entry %.200s has a backslash in its name", path);
            if (c < 0x20 || c == 0x7f)
                return BAD("entry %.200s has a control character in its name", path);
        }
        if (len == 0)
            return BAD("entry %.200s has an empty path component", path);
        if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
            return BAD("entry %.200s has a '.' or '..' component (zip-slip)", path);
        if (len > 255)
            return BAD("entry %.200s has a component longer than 255 bytes", path);
        if (++depth > EXTPACK_DEPTH_MAX)
            return BAD("entry %.200s is nested deeper than %d levels", path, EXTPACK_DEPTH_MAX);
        if (!end)
            break;
        p = end + 1; /* a trailing '/' ends the loop here: a folder */
    }
#undef BAD
    return 0;
}

/* ---- reading ---- */

static struct archive *open_zip(const void *zip, size_t len)
{
    struct archive *a = archive_read_new();
    archive_read_support_format_zip(a);
    if (archive_read_open_memory(a, zip, len) != ARCHIVE_OK) {
        archive_read_free(a);
        return NULL;
    }
    return a;
}

/* Checks one entry header: its name and its type. */
static int entry_check(struct archive_entry *en, struct err *e)
{
    const char *path = archive_entry_pathname(en);
    char why[400];
    if (!path)
        return err_set(e, E_INVALID, "bad_request", "extension zip: an entry has no readable name");
    if (extpack_path_check(path, why, sizeof why) != 0)
        return err_set(e, E_INVALID, "bad_request", "extension zip: %s", why);
    if (archive_entry_hardlink(en))
        return err_set(e, E_INVALID, "bad_request",
                       "extension zip: entry %.200s is a hard link (only files and folders)", path);
    mode_t t = archive_entry_filetype(en);
    if (t == AE_IFLNK)
        return err_set(e, E_INVALID, "bad_request",
                       "extension zip: entry %.200s is a symbolic link (only files and folders)",
                       path);
    if (t != AE_IFREG && t != AE_IFDIR)
        return err_set(e, E_INVALID, "bad_request",
                       "extension zip: entry %.200s is not a file or a folder", path);
    return 0;
}

/* The manifest's text (data, n bytes) as a JSON object with manifest_version
 * 2 or 3. */
static int manifest_check(const char *data, size_t n, struct extpack_info *info, struct err *e)
{
    if (n >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0) { /* Chromium accepts a UTF-8 BOM */
        data += 3;
        n -= 3;
    }
    json_error_t je;
    json_t *m = json_loadb(data, n, 0, &je);
    if (!m)
        return err_set(e, E_INVALID, "bad_request",
                       "extension zip: manifest.json is not JSON (line %d: %s)", je.line, je.text);
    if (!json_is_object(m)) {
        json_decref(m);
        return err_set(e, E_INVALID, "bad_request",
                       "extension zip: manifest.json is not a JSON object");
    }
    json_t *v = json_object_get(m, "manifest_version");
    json_int_t mv = json_is_integer(v) ? json_integer_value(v) : 0;
    if (mv != 2 && mv != 3) {
        json_decref(m);
        return err_set(e, E_INVALID, "bad_request",
                       "extension zip: manifest.json's manifest_version must be 2 or 3");
    }
    info->manifest_version = (int)mv;
    const char *s = json_string_value(json_object_get(m, "name"));
    snprintf(info->name, sizeof info->name, "%s", s ? s : "");
    s = json_string_value(json_object_get(m, "version"));
    snprintf(info->version, sizeof info->version, "%s", s ? s : "");
    json_decref(m);
    return 0;
}

/* Reads the current entry's data through fn (NULL: discard), adding its size
 * to *total and refusing past the unpacked cap. */
static int read_data(struct archive *a, const char *path, unsigned long long *total,
                     int (*fn)(void *ctx, const void *buf, size_t n, struct err *e), void *ctx,
                     struct err *e)
{
    char *buf = xmalloc(EXTPACK_CHUNK);
    int rc = 0;
    for (;;) {
        la_ssize_t n = archive_read_data(a, buf, EXTPACK_CHUNK);
        if (n == 0)
            break;
        if (n < 0) {
            rc = err_set(e, E_INVALID, "bad_request",
                         "extension zip: entry %.200s cannot be decompressed: %s", path,
                         archive_error_string(a) ? archive_error_string(a) : "corrupt data");
            break;
        }
        *total += (unsigned long long)n;
        if (*total > LIM_EXT_UNPACKED_BYTES) {
            rc = err_set(e, E_INVALID, "bad_request",
                         "extension zip: unpacks to more than %llu bytes",
                         (unsigned long long)LIM_EXT_UNPACKED_BYTES);
            break;
        }
        if (fn && (rc = fn(ctx, buf, (size_t)n, e)) != 0)
            break;
    }
    xfree(buf);
    return rc;
}

struct membuf {
    char *p;
    size_t n;
};

static int to_membuf(void *ctx, const void *buf, size_t n, struct err *e)
{
    struct membuf *m = ctx;
    if (m->n + n > LIM_EXT_MANIFEST_BYTES)
        return err_set(e, E_INVALID, "bad_request",
                       "extension zip: manifest.json is larger than %u bytes",
                       LIM_EXT_MANIFEST_BYTES);
    m->p = xrealloc(m->p, m->n + n + 1);
    memcpy(m->p + m->n, buf, n);
    m->n += n;
    return 0;
}

int extpack_check(const void *zip, size_t len, struct extpack_info *info, struct err *e)
{
    struct extpack_info local;
    if (!info)
        info = &local;
    memset(info, 0, sizeof *info);
    if (len < 4 || memcmp(zip, "PK", 2) != 0)
        return err_set(e, E_INVALID, "bad_request",
                       len >= 4 && memcmp(zip, "Cr24", 4) == 0
                           ? "file: a CRX package, not a zip: upload the zip of the unpacked "
                             "extension"
                           : "file: not a zip archive (an extension is uploaded as the zip of "
                             "its unpacked folder, manifest.json at the top)");
    struct archive *a = open_zip(zip, len);
    if (!a)
        return err_set(e, E_INVALID, "bad_request", "file: not a readable zip archive");
    int rc = 0, manifest = 0;
    struct archive_entry *en;
    for (;;) {
        int r = archive_read_next_header(a, &en);
        if (r == ARCHIVE_EOF)
            break;
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
            const char *why = archive_error_string(a);
            rc = err_set(e, E_INVALID, "bad_request", "file: not a readable zip archive (%s)",
                         why ? why : "bad header");
            break;
        }
        if (++info->entries > LIM_EXT_ENTRIES) {
            rc = err_set(e, E_INVALID, "bad_request", "extension zip: more than %u entries",
                         LIM_EXT_ENTRIES);
            break;
        }
        if ((rc = entry_check(en, e)) != 0)
            break;
        const char *path = archive_entry_pathname(en);
        if (strcmp(path, "manifest.json") == 0 && archive_entry_filetype(en) == AE_IFREG) {
            struct membuf m = {NULL, 0};
            rc = read_data(a, path, &info->unpacked_bytes, to_membuf, &m, e);
            if (rc == 0)
                rc = manifest_check(m.p ? m.p : "", m.n, info, e);
            xfree(m.p);
            manifest = 1;
        } else {
            rc = read_data(a, path, &info->unpacked_bytes, NULL, NULL, e);
        }
        if (rc)
            break;
    }
    archive_read_free(a);
    if (rc == 0 && !manifest)
        rc = err_set(e, E_INVALID, "bad_request",
                     "extension zip: no manifest.json at the top of the archive (zip the "
                     "extension's folder contents, not the folder)");
    return rc;
}

/* ---- unpacking ---- */

/* Opens (creating when missing, mode 0755) the folder name beneath dfd,
 * never through a symlink. Returns a descriptor or -errno. */
static int subdir(int dfd, const char *name)
{
    if (mkdirat(dfd, name, 0755) != 0 && errno != EEXIST)
        return -errno;
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) != 0 || ((st.st_mode & 07777) != 0755 && fchmod(fd, 0755) != 0)) {
        int err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

/* The folder holding path's last component, walked from dfd one component
 * at a time; *leaf points into path at that component. */
static int parent_of(int dfd, char *path, const char **leaf)
{
    *leaf = path;
    int fd = dup(dfd);
    if (fd < 0)
        return errno ? -errno : -EBADF;
    char *p = path;
    for (char *slash; (slash = strchr(p, '/')) != NULL && slash[1]; p = slash + 1) {
        *slash = '\0';
        int next = subdir(fd, p);
        *slash = '/';
        close(fd);
        if (next < 0)
            return next;
        fd = next;
    }
    *leaf = p;
    return fd;
}

static int write_all(void *ctx, const void *buf, size_t n, struct err *e)
{
    int rc = fdio_write_all(*(int *)ctx, buf, n, FDIO_NO_DEADLINE);
    /* A full disk here is the session's own files (1 GiB): the client's
     * extensions do not fit, not a fault of the server. */
    if (rc == -ENOSPC || rc == -EDQUOT)
        return err_set(e, E_INVALID, "bad_request",
                       "the extensions do not fit in the space left for them: %s", strerror(-rc));
    if (rc)
        return err_set(e, E_INTERNAL, "internal", "cannot write an extension file: %s",
                       strerror(-rc));
    return 0;
}

int extpack_unpack(const void *zip, size_t len, int dirfd, struct err *e)
{
    struct archive *a = open_zip(zip, len);
    if (!a)
        return err_set(e, E_INVALID, "bad_request", "file: not a readable zip archive");
    int rc = 0;
    size_t entries = 0;
    unsigned long long total = 0;
    struct archive_entry *en;
    for (;;) {
        int r = archive_read_next_header(a, &en);
        if (r == ARCHIVE_EOF)
            break;
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
            rc = err_set(e, E_INVALID, "bad_request", "file: not a readable zip archive");
            break;
        }
        if (++entries > LIM_EXT_ENTRIES) {
            rc = err_set(e, E_INVALID, "bad_request", "extension zip: more than %u entries",
                         LIM_EXT_ENTRIES);
            break;
        }
        if ((rc = entry_check(en, e)) != 0)
            break;
        char *path = xstrdup(archive_entry_pathname(en));
        const char *leaf = NULL;
        int pfd = parent_of(dirfd, path, &leaf);
        if (pfd < 0) {
            rc = err_set(e, E_INTERNAL, "internal", "cannot create the folder of %.200s: %s", path,
                         strerror(-pfd));
        } else if (archive_entry_filetype(en) == AE_IFDIR) {
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)strcspn(leaf, "/"), leaf);
            int fd = subdir(pfd, name);
            if (fd < 0)
                rc = err_set(e, E_INTERNAL, "internal", "cannot create folder %.200s: %s", path,
                             strerror(-fd));
            else
                close(fd);
        } else {
            int fd = openat(pfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
            if (fd < 0 && errno == EEXIST)
                rc = err_set(e, E_INVALID, "bad_request",
                             "extension zip: entry %.200s appears twice", path);
            else if (fd < 0)
                rc = err_set(e, E_INTERNAL, "internal", "cannot create %.200s: %s", path,
                             strerror(errno));
            else {
                if (fchmod(fd, 0644) != 0)
                    rc = err_set(e, E_INTERNAL, "internal", "cannot set the mode of %.200s", path);
                if (rc == 0)
                    rc = read_data(a, path, &total, write_all, &fd, e);
                close(fd);
            }
        }
        if (pfd >= 0)
            close(pfd);
        xfree(path);
        if (rc)
            break;
    }
    archive_read_free(a);
    return rc;
}

/* ---- CRX ---- */

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int extpack_crx_payload(const void *crx, size_t len, size_t *off, struct err *e)
{
    const unsigned char *p = crx;
    *off = 0;
    if (len < 12 || memcmp(p, "Cr24", 4) != 0)
        return err_set(e, E_INVALID, "bad_request", "not a CRX package (no Cr24 magic)");
    uint32_t version = le32(p + 4);
    unsigned long long end;
    if (version == 3) {
        end = 12ull + le32(p + 8);
    } else if (version == 2) {
        if (len < 16)
            return err_set(e, E_INVALID, "bad_request", "CRX2 header is truncated");
        end = 16ull + le32(p + 8) + le32(p + 12);
    } else {
        return err_set(e, E_INVALID, "bad_request", "CRX version %u is not supported (2 or 3)",
                       (unsigned)version);
    }
    if (end > len)
        return err_set(e, E_INVALID, "bad_request",
                       "CRX header (%llu bytes) runs past the end of the file (%zu bytes)", end,
                       len);
    *off = (size_t)end;
    return 0;
}
