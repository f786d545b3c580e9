#include "runtime/sessfs.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/fdio.h"
#include "core/limits.h"
#include "core/path.h"
#include "core/xalloc.h"

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif

#define RESOLVE_SESSION (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
/* Deepest folder nesting walked (rmtree, zip, recursive watch). */
#define SESSFS_DEPTH_MAX 64

/* ---- the session user's identity, per thread ---- */

struct fsid {
    gid_t groups[64];
    int ngroups;
};

/* Becomes the session's user for filesystem checks on this thread only: raw
 * system calls, because glibc's set*id wrappers change every thread of the
 * process. The kernel drops this thread's CAP_DAC_OVERRIDE, CAP_FOWNER and
 * friends while the fsuid is not 0 and gives them back when it is 0 again.
 * Supplementary groups (root's) are dropped too, so that a root-group file
 * is not writable through them. */
static int fsid_enter(const struct sessfs *fs, struct fsid *saved)
{
    saved->ngroups = (int)syscall(SYS_getgroups, 64, saved->groups);
    if (saved->ngroups < 0)
        return -errno;
    if (syscall(SYS_setgroups, 0, NULL) != 0)
        return -errno;
    syscall(SYS_setfsgid, fs->gid);
    syscall(SYS_setfsuid, fs->uid);
    /* setfs*id report failure only through the value they return next. */
    if ((uid_t)syscall(SYS_setfsuid, (uid_t)-1) != fs->uid ||
        (gid_t)syscall(SYS_setfsgid, (gid_t)-1) != fs->gid) {
        syscall(SYS_setfsuid, 0);
        syscall(SYS_setfsgid, 0);
        (void)syscall(SYS_setgroups, saved->ngroups, saved->groups);
        return -EPERM;
    }
    return 0;
}

static void fsid_leave(const struct fsid *saved)
{
    int er = errno;
    syscall(SYS_setfsuid, 0);
    syscall(SYS_setfsgid, 0);
    (void)syscall(SYS_setgroups, saved->ngroups, saved->groups);
    errno = er;
}

/* Runs an operation body between fsid_enter and fsid_leave; every return
 * path of the body goes through the leave. */
#define AS_SESSION(fs, body)                                                                       \
    do {                                                                                           \
        struct fsid fsid_saved_;                                                                   \
        int fsid_rc_ = fsid_enter((fs), &fsid_saved_);                                             \
        if (fsid_rc_ != 0)                                                                         \
            return fsid_rc_;                                                                       \
        fsid_rc_ = (body);                                                                         \
        fsid_leave(&fsid_saved_);                                                                  \
        return fsid_rc_;                                                                           \
    } while (0)

/* ---- resolution ---- */

int sessfs_open(struct sessfs *fs, const char *root, uid_t uid)
{
    fs->rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fs->rootfd < 0)
        return -errno;
    fs->uid = uid;
    fs->gid = (gid_t)uid;
    return 0;
}

void sessfs_close(struct sessfs *fs)
{
    if (fs->rootfd >= 0)
        close(fs->rootfd);
    fs->rootfd = -1;
}

/* The path relative to the root ("." for "/"), lexically normalized (".."
 * stops at the root, as RESOLVE_IN_ROOT does). */
static int relpath(const char *path, char *out, size_t cap)
{
    if (path == NULL || path[0] != '/')
        return -EINVAL;
    char norm[PATH_MAX];
    int rc = path_absolute(path, norm, sizeof norm);
    if (rc < 0)
        return rc;
    int n = snprintf(out, cap, "%s", norm[1] ? norm + 1 : ".");
    return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static int resolve_rel(const struct sessfs *fs, const char *rel, int flags, mode_t mode)
{
    struct open_how how;
    memset(&how, 0, sizeof how);
    /* openat2 refuses O_PATH with flags that do not apply to it. */
    how.flags = (unsigned long long)(flags | O_CLOEXEC | ((flags & O_PATH) ? 0 : O_NOCTTY));
    how.mode = (flags & O_CREAT) ? mode : 0;
    how.resolve = RESOLVE_SESSION;
    for (int tries = 0; tries < 8; tries++) {
        int fd = (int)syscall(SYS_openat2, fs->rootfd, rel, &how, sizeof how);
        if (fd >= 0)
            return fd;
        if (errno != EAGAIN) /* EAGAIN: a rename raced the resolution */
            return errno == EXDEV ? -ENOENT : -errno;
    }
    return -EAGAIN;
}

static int resolve(const struct sessfs *fs, const char *path, int flags)
{
    char rel[PATH_MAX];
    int rc = relpath(path, rel, sizeof rel);
    return rc < 0 ? rc : resolve_rel(fs, rel, flags, 0);
}

/* Splits rel into its parent's descriptor (O_PATH folder) and last name. */
static int resolve_parent_rel(const struct sessfs *fs, const char *rel, int *pfd, char *name,
                              size_t cap)
{
    if (strcmp(rel, ".") == 0)
        return -EINVAL; /* the root has no name */
    const char *slash = strrchr(rel, '/');
    const char *base = slash ? slash + 1 : rel;
    if (strlen(base) >= cap)
        return -ENAMETOOLONG;
    memcpy(name, base, strlen(base) + 1);
    char dir[PATH_MAX];
    if (slash) {
        memcpy(dir, rel, (size_t)(slash - rel));
        dir[slash - rel] = '\0';
    } else {
        memcpy(dir, ".", 2);
    }
    int fd = resolve_rel(fs, dir, O_PATH | O_DIRECTORY, 0);
    if (fd < 0)
        return fd;
    *pfd = fd;
    return 0;
}

static int resolve_parent(const struct sessfs *fs, const char *path, int *pfd, char *name,
                          size_t cap)
{
    char rel[PATH_MAX];
    int rc = relpath(path, rel, sizeof rel);
    return rc < 0 ? rc : resolve_parent_rel(fs, rel, pfd, name, cap);
}

/* chmod of the inode fd names (an O_PATH descriptor is enough): fchmodat2
 * with AT_EMPTY_PATH (Linux 6.6), else fchmod on a read-only reopen. */
static int chmod_fd(int fd, mode_t mode)
{
    if (syscall(SYS_fchmodat2, fd, "", mode & 01777, AT_EMPTY_PATH) == 0)
        return 0;
    if (errno != ENOSYS && errno != EINVAL)
        return -errno;
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    int rfd = open(proc, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (rfd < 0)
        return -errno;
    int rc = fchmod(rfd, mode & 01777) == 0 ? 0 : -errno;
    close(rfd);
    return rc;
}

/* mkdir -p of rel; *out (may be NULL) receives the folder's O_PATH
 * descriptor. Each component is resolved from the root again, so a link met
 * on the way is followed inside the root only. */
static int mkdir_p_rel(const struct sessfs *fs, const char *rel, mode_t mode, int *out)
{
    int fd = resolve_rel(fs, rel, O_PATH | O_DIRECTORY, 0);
    if (fd >= 0 || fd != -ENOENT) {
        if (fd >= 0 && out)
            *out = fd;
        else if (fd >= 0)
            close(fd);
        return fd < 0 ? fd : 0;
    }
    char prefix[PATH_MAX];
    size_t len = strlen(rel);
    if (len >= sizeof prefix)
        return -ENAMETOOLONG;
    int pfd = dup(fs->rootfd);
    if (pfd < 0)
        return -errno;
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && rel[j] != '/')
            j++;
        memcpy(prefix, rel, j);
        prefix[j] = '\0';
        char comp[NAME_MAX + 1];
        if (j - i > NAME_MAX) {
            close(pfd);
            return -ENAMETOOLONG;
        }
        memcpy(comp, rel + i, j - i);
        comp[j - i] = '\0';
        int cfd = resolve_rel(fs, prefix, O_PATH | O_DIRECTORY, 0);
        if (cfd == -ENOENT) {
            if (mkdirat(pfd, comp, 0700) != 0 && errno != EEXIST) {
                int er = -errno;
                close(pfd);
                return er;
            }
            cfd = resolve_rel(fs, prefix, O_PATH | O_DIRECTORY, 0);
            if (cfd >= 0) {
                int rc = chmod_fd(cfd, mode);
                if (rc < 0) {
                    close(cfd);
                    close(pfd);
                    return rc;
                }
            }
        }
        close(pfd);
        if (cfd < 0)
            return cfd;
        pfd = cfd;
        i = j + 1;
    }
    if (out)
        *out = pfd;
    else
        close(pfd);
    return 0;
}

/* ---- reading ---- */

static int read_open_as(struct sessfs *fs, const char *path, int *fd, struct stat *st)
{
    int f = resolve(fs, path, O_RDONLY | O_NONBLOCK);
    if (f < 0)
        return f;
    if (fstat(f, st) != 0 || !S_ISREG(st->st_mode)) {
        int rc = S_ISDIR(st->st_mode) ? -EISDIR : -EINVAL;
        close(f);
        return rc;
    }
    /* Regular files never block; reads should not see O_NONBLOCK anyway. */
    (void)fcntl(f, F_SETFL, 0);
    *fd = f;
    return 0;
}

int sessfs_read_open(struct sessfs *fs, const char *path, int *fd, struct stat *st)
{
    AS_SESSION(fs, read_open_as(fs, path, fd, st));
}

static int stat_as(struct sessfs *fs, const char *path, struct stat *st)
{
    int f = resolve(fs, path, O_PATH);
    if (f < 0)
        return f;
    int rc = fstat(f, st) == 0 ? 0 : -errno;
    close(f);
    return rc;
}

int sessfs_stat(struct sessfs *fs, const char *path, struct stat *st)
{
    AS_SESSION(fs, stat_as(fs, path, st));
}

static int entcmp(const void *a, const void *b)
{
    return strcmp(((const struct sessfs_entry *)a)->name, ((const struct sessfs_entry *)b)->name);
}

static int list_as(struct sessfs *fs, const char *path, struct sessfs_entry **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int f = resolve(fs, path, O_RDONLY | O_DIRECTORY);
    if (f < 0)
        return f;
    DIR *d = fdopendir(f);
    if (d == NULL) {
        int er = -errno;
        close(f);
        return er;
    }
    size_t cap = 0;
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (*n == LIM_FS_LIST_ENTRIES) {
            rc = -E2BIG;
            break;
        }
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue; /* removed meanwhile */
        if (*n == cap) {
            cap = cap ? cap * 2 : 32;
            *out = xrealloc(*out, cap * sizeof **out);
        }
        (*out)[*n].name = xstrdup(de->d_name);
        (*out)[*n].st = st;
        (*n)++;
    }
    closedir(d);
    if (rc < 0) {
        sessfs_entries_free(*out, *n);
        *out = NULL;
        *n = 0;
        return rc;
    }
    if (*n)
        qsort(*out, *n, sizeof **out, entcmp);
    return 0;
}

int sessfs_list(struct sessfs *fs, const char *path, struct sessfs_entry **out, size_t *n)
{
    AS_SESSION(fs, list_as(fs, path, out, n));
}

void sessfs_entries_free(struct sessfs_entry *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        xfree(v[i].name);
    xfree(v);
}

/* ---- writing ---- */

/* Opens rel for writing (truncated), creating it with mode when missing and
 * its parents when create_parents. */
static int create_rel(struct sessfs *fs, const char *rel, mode_t mode, int create_parents)
{
    if (strcmp(rel, ".") == 0)
        return -EISDIR;
    if (create_parents) {
        const char *slash = strrchr(rel, '/');
        if (slash) {
            char dir[PATH_MAX];
            memcpy(dir, rel, (size_t)(slash - rel));
            dir[slash - rel] = '\0';
            int rc = mkdir_p_rel(fs, dir, 0755, NULL);
            if (rc < 0)
                return rc;
        }
    }
    int fd = resolve_rel(fs, rel, O_WRONLY | O_CREAT | O_EXCL | O_NONBLOCK, 0600);
    int created = fd >= 0;
    if (fd == -EEXIST)
        fd = resolve_rel(fs, rel, O_WRONLY | O_NONBLOCK, 0);
    if (fd < 0)
        return fd;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -EINVAL;
    }
    if ((created && fchmod(fd, mode & 01777) != 0) || ftruncate(fd, 0) != 0) {
        int er = -errno;
        close(fd);
        return er;
    }
    (void)fcntl(fd, F_SETFL, 0);
    return fd;
}

static int write_as(struct sessfs *fs, const char *path, mode_t mode, const void *data, size_t len)
{
    char rel[PATH_MAX];
    int rc = relpath(path, rel, sizeof rel);
    if (rc < 0)
        return rc;
    int fd = create_rel(fs, rel, mode, 1);
    if (fd < 0)
        return fd;
    rc = fdio_write_all(fd, data, len, FDIO_NO_DEADLINE);
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    return rc;
}

int sessfs_write(struct sessfs *fs, const char *path, mode_t mode, const void *data, size_t len)
{
    AS_SESSION(fs, write_as(fs, path, mode, data, len));
}

/* Copies in_fd to fd until in_fd's end. */
static int copy_fd(int fd, int in_fd)
{
    char chunk[65536];
    for (;;) {
        ssize_t r = read(in_fd, chunk, sizeof chunk);
        if (r == 0)
            return 0;
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        int rc = fdio_write_all(fd, chunk, (size_t)r, FDIO_NO_DEADLINE);
        if (rc < 0)
            return rc;
    }
}

static int write_fd_as(struct sessfs *fs, const char *path, mode_t mode, int in_fd)
{
    char rel[PATH_MAX];
    int rc = relpath(path, rel, sizeof rel);
    if (rc < 0)
        return rc;
    int fd = create_rel(fs, rel, mode, 1);
    if (fd < 0)
        return fd;
    rc = copy_fd(fd, in_fd);
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    return rc;
}

int sessfs_write_fd(struct sessfs *fs, const char *path, mode_t mode, int in_fd)
{
    AS_SESSION(fs, write_fd_as(fs, path, mode, in_fd));
}

static int mkdir_as(struct sessfs *fs, const char *path, mode_t mode)
{
    char rel[PATH_MAX];
    int rc = relpath(path, rel, sizeof rel);
    return rc < 0 ? rc : mkdir_p_rel(fs, rel, mode, NULL);
}

int sessfs_mkdir(struct sessfs *fs, const char *path, mode_t mode)
{
    AS_SESSION(fs, mkdir_as(fs, path, mode));
}

static int unlink_as(struct sessfs *fs, const char *path)
{
    int pfd;
    char name[NAME_MAX + 1];
    int rc = resolve_parent(fs, path, &pfd, name, sizeof name);
    if (rc < 0)
        return rc;
    struct stat st;
    if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        rc = -errno;
    else if (S_ISDIR(st.st_mode))
        rc = -EISDIR;
    else if (unlinkat(pfd, name, 0) != 0)
        rc = -errno;
    close(pfd);
    return rc;
}

int sessfs_unlink(struct sessfs *fs, const char *path)
{
    AS_SESSION(fs, unlink_as(fs, path));
}

/* Removes everything inside folder dfd (a read descriptor), then nothing
 * else: the caller removes the folder itself. Names are single components
 * opened with O_NOFOLLOW, so the walk never leaves the tree. */
static int empty_dir(int dfd, int depth)
{
    if (depth > SESSFS_DEPTH_MAX)
        return -ELOOP;
    DIR *d = fdopendir(dfd);
    if (d == NULL) {
        int er = -errno;
        close(dfd);
        return er;
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            int cfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (cfd < 0) {
                rc = -errno;
                break;
            }
            rc = empty_dir(cfd, depth + 1);
            if (rc == 0 && unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) != 0)
                rc = -errno;
        } else if (unlinkat(dirfd(d), de->d_name, 0) != 0) {
            rc = -errno;
        }
    }
    closedir(d);
    return rc;
}

static int rmtree_as(struct sessfs *fs, const char *path)
{
    int pfd;
    char name[NAME_MAX + 1];
    int rc = resolve_parent(fs, path, &pfd, name, sizeof name);
    if (rc < 0)
        return rc;
    int dfd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) {
        rc = errno == ELOOP ? -ENOTDIR : -errno;
        close(pfd);
        return rc;
    }
    rc = empty_dir(dfd, 0);
    if (rc == 0 && unlinkat(pfd, name, AT_REMOVEDIR) != 0)
        rc = -errno;
    close(pfd);
    return rc;
}

int sessfs_rmtree(struct sessfs *fs, const char *path)
{
    AS_SESSION(fs, rmtree_as(fs, path));
}

static int move_as(struct sessfs *fs, const char *src, const char *dst)
{
    int spfd, dpfd;
    char sname[NAME_MAX + 1], dname[NAME_MAX + 1];
    int rc = resolve_parent(fs, src, &spfd, sname, sizeof sname);
    if (rc < 0)
        return rc;
    struct stat st;
    if (fstatat(spfd, sname, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        rc = -errno;
        close(spfd);
        return rc;
    }
    rc = resolve_parent(fs, dst, &dpfd, dname, sizeof dname);
    if (rc < 0) {
        close(spfd);
        return rc == -ENOENT ? -ENOTDIR : rc; /* the source exists: the destination's folder not */
    }
    if (renameat(spfd, sname, dpfd, dname) != 0)
        rc = -errno;
    close(spfd);
    close(dpfd);
    return rc;
}

int sessfs_move(struct sessfs *fs, const char *src, const char *dst)
{
    AS_SESSION(fs, move_as(fs, src, dst));
}

static int chmod_as(struct sessfs *fs, const char *path, mode_t mode)
{
    int f = resolve(fs, path, O_PATH);
    if (f < 0)
        return f;
    int rc = chmod_fd(f, mode);
    close(f);
    return rc;
}

int sessfs_chmod(struct sessfs *fs, const char *path, mode_t mode)
{
    AS_SESSION(fs, chmod_as(fs, path, mode));
}

/* ---- zip ---- */

struct zip_out {
    int (*fn)(void *ctx, const void *data, size_t n);
    void *ctx;
    int failed; /* the first -errno of fn; later bytes are dropped */
};

/* A failing reader is not reported to libarchive: its zip writer leaks the
 * deflate state of an entry whose output failed. The bytes are dropped
 * instead and the walk stops at the next check of `failed`. */
static la_ssize_t zip_write_cb(struct archive *a, void *ctx, const void *data, size_t n)
{
    (void)a;
    struct zip_out *o = ctx;
    if (o->failed == 0) {
        int rc = o->fn(o->ctx, data, n);
        if (rc < 0)
            o->failed = rc;
    }
    return (la_ssize_t)n;
}

/* Adds folder dfd (a read descriptor, consumed) as prefix/ and what it holds. */
static int zip_walk(struct archive *a, struct zip_out *o, int dfd, const char *prefix, int depth)
{
    if (depth > SESSFS_DEPTH_MAX) {
        close(dfd);
        return -ELOOP;
    }
    DIR *d = fdopendir(dfd);
    if (d == NULL) {
        int er = -errno;
        close(dfd);
        return er;
    }
    int rc = 0;
    struct dirent *de;
    struct archive_entry *en = archive_entry_new();
    while (rc == 0 && o->failed == 0 && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        /* FIFOs and sockets have nothing a zip can carry (kernel-images
         * writes a header only; libarchive's zip writer refuses them). */
        if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode))
            continue;
        char *name = xasprintf("%s%s%s", prefix, de->d_name, S_ISDIR(st.st_mode) ? "/" : "");
        archive_entry_clear(en);
        archive_entry_set_pathname(en, name);
        archive_entry_set_mode(en, st.st_mode & (S_IFMT | 0777));
        archive_entry_set_mtime(en, st.st_mtim.tv_sec, 0);
        int fd = -1;
        if (S_ISREG(st.st_mode)) {
            fd = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
            if (fd < 0)
                rc = -errno;
            else
                archive_entry_set_size(en, st.st_size);
        } else if (S_ISLNK(st.st_mode)) {
            char target[PATH_MAX];
            ssize_t tl = readlinkat(dirfd(d), de->d_name, target, sizeof target - 1);
            target[tl > 0 ? tl : 0] = '\0';
            archive_entry_set_symlink(en, target);
            archive_entry_set_size(en, 0);
        } else {
            archive_entry_set_size(en, 0);
        }
        if (rc == 0 && archive_write_header(a, en) != ARCHIVE_OK)
            rc = archive_errno(a) > 0 ? -archive_errno(a) : -EIO;
        if (rc == 0 && fd >= 0) {
            char chunk[65536];
            ssize_t r;
            off_t total = 0;
            while (rc == 0 && o->failed == 0 && total < st.st_size &&
                   (r = read(fd, chunk, sizeof chunk)) > 0) {
                if (archive_write_data(a, chunk, (size_t)r) < 0)
                    rc = archive_errno(a) > 0 ? -archive_errno(a) : -EIO;
                total += r;
            }
        }
        if (fd >= 0)
            close(fd);
        if (rc == 0 && S_ISDIR(st.st_mode)) {
            int cfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            rc = cfd < 0 ? -errno : zip_walk(a, o, cfd, name, depth + 1);
        }
        xfree(name);
    }
    archive_entry_free(en);
    closedir(d);
    return rc;
}

static int zip_dir_as(struct sessfs *fs, const char *path, struct zip_out *out)
{
    int dfd = resolve(fs, path, O_RDONLY | O_DIRECTORY);
    if (dfd < 0)
        return dfd;
    struct archive *a = archive_write_new();
    archive_write_set_format_zip(a);
    archive_write_set_bytes_in_last_block(a, 1);
    int rc = 0;
    if (archive_write_open2(a, out, NULL, zip_write_cb, NULL, NULL) != ARCHIVE_OK) {
        close(dfd);
        rc = -EIO;
    } else {
        rc = zip_walk(a, out, dfd, "", 0);
        if (archive_write_close(a) != ARCHIVE_OK && rc == 0)
            rc = archive_errno(a) > 0 ? -archive_errno(a) : -EIO;
        if (rc == 0)
            rc = out->failed;
    }
    archive_write_free(a);
    return rc;
}

int sessfs_zip_dir(struct sessfs *fs, const char *path,
                   int (*out)(void *ctx, const void *data, size_t n), void *ctx)
{
    struct zip_out o = {out, ctx, 0};
    AS_SESSION(fs, zip_dir_as(fs, path, &o));
}

/* An entry name is relative and has no ".." component. */
static int entry_name_ok(const char *n)
{
    if (n == NULL || n[0] == '\0' || n[0] == '/')
        return 0;
    for (const char *p = n; *p;) {
        const char *q = strchr(p, '/');
        size_t l = q ? (size_t)(q - p) : strlen(p);
        if (l == 2 && p[0] == '.' && p[1] == '.')
            return 0;
        p += l + (q ? 1 : 0);
    }
    return 1;
}

/* A link target that stays inside its own folder's tree: relative, and its
 * ".." never climbs above the entry's depth. */
static int link_target_ok(const char *entry, const char *target)
{
    if (target == NULL || target[0] == '\0' || target[0] == '/')
        return 0;
    int depth = 0;
    for (const char *p = entry; (p = strchr(p, '/')) != NULL; p++)
        if (p[1] != '\0')
            depth++;
    for (const char *p = target; *p;) {
        const char *q = strchr(p, '/');
        size_t l = q ? (size_t)(q - p) : strlen(p);
        if (l == 2 && p[0] == '.' && p[1] == '.') {
            if (--depth < 0)
                return 0;
        } else if (l && !(l == 1 && p[0] == '.')) {
            depth++;
        }
        p += l + (q ? 1 : 0);
    }
    return 1;
}

static int unzip_errno(int rc, const char *name, struct err *e)
{
    switch (rc) {
    case -ENOSPC:
    case -EDQUOT:
        return err_set(e, E_TOOBIG, "insufficient_storage",
                       "the session's files are full (%lld MiB): %s not written",
                       LIM_SESSION_DISK_BYTES >> 20, name);
    case -EACCES:
    case -EPERM:
        return err_set(e, E_FORBIDDEN, "forbidden", "permission denied writing %s", name);
    case -ENOENT:
    case -ENOTDIR:
        return err_set(e, E_NOTFOUND, "not_found", "destination not found for %s", name);
    default:
        return err_set(e, E_INTERNAL, "internal", "failed to extract zip: %s: %s", name,
                       strerror(-rc));
    }
}

static int unzip_as(struct sessfs *fs, const char *dest, const void *zip, size_t len, struct err *e)
{
    char drel[PATH_MAX];
    int rc = relpath(dest, drel, sizeof drel);
    if (rc < 0)
        return err_set(e, E_INVALID, "bad_request", "dest_path must be an absolute path");
    rc = mkdir_p_rel(fs, drel, 0755, NULL);
    if (rc < 0)
        return unzip_errno(rc, dest, e);
    struct archive *a = archive_read_new();
    archive_read_support_format_zip(a);
    if (archive_read_open_memory(a, zip, len) != ARCHIVE_OK) {
        archive_read_free(a);
        return err_set(e, E_INVALID, "bad_request", "invalid zip file");
    }
    size_t entries = 0;
    long long total = 0;
    struct archive_entry *en;
    int r = ARCHIVE_EOF;
    rc = 0;
    while (rc == 0 && (r = archive_read_next_header(a, &en)) == ARCHIVE_OK) {
        const char *name = archive_entry_pathname(en);
        if (++entries > LIM_FS_ZIP_ENTRIES) {
            rc = err_set(e, E_INVALID, "bad_request", "invalid zip file: more than %u entries",
                         LIM_FS_ZIP_ENTRIES);
            break;
        }
        if (!entry_name_ok(name)) {
            rc = err_set(e, E_INVALID, "bad_request",
                         "invalid zip file: entry '%.200s' is absolute or contains '..'",
                         name ? name : "");
            break;
        }
        char rel[PATH_MAX];
        int n = snprintf(rel, sizeof rel, "%s/%s", strcmp(drel, ".") ? drel : "", name);
        if (n < 0 || (size_t)n >= sizeof rel) {
            rc = err_set(e, E_INVALID, "bad_request", "invalid zip file: entry name too long");
            break;
        }
        char *relp = rel[0] == '/' ? rel + 1 : rel;
        size_t rl = strlen(relp);
        while (rl > 1 && relp[rl - 1] == '/')
            relp[--rl] = '\0';
        mode_t mode = archive_entry_perm(en) & 01777;
        mode_t type = archive_entry_filetype(en);
        if (archive_entry_hardlink(en) != NULL) {
            rc = err_set(e, E_INVALID, "bad_request",
                         "invalid zip file: entry '%.200s' is a hard link", name);
        } else if (type == AE_IFDIR) {
            rc = mkdir_p_rel(fs, relp, mode ? mode : 0755, NULL);
            if (rc < 0)
                rc = unzip_errno(rc, name, e);
        } else if (type == AE_IFLNK) {
            const char *target = archive_entry_symlink(en);
            if (!link_target_ok(name, target)) {
                rc = err_set(e, E_INVALID, "bad_request",
                             "invalid zip file: link '%.200s' points outside the folder", name);
            } else {
                int pfd = -1;
                char lname[NAME_MAX + 1];
                const char *slash = strrchr(relp, '/');
                char dir[PATH_MAX];
                snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - relp) : 1,
                         slash ? relp : ".");
                rc = mkdir_p_rel(fs, dir, 0755, &pfd);
                if (rc == 0) {
                    const char *base = slash ? slash + 1 : relp;
                    size_t bl = strlen(base);
                    if (bl >= sizeof lname) {
                        rc = -ENAMETOOLONG;
                    } else {
                        memcpy(lname, base, bl + 1);
                        if (symlinkat(target, pfd, lname) != 0)
                            rc = -errno;
                    }
                    close(pfd);
                }
                if (rc < 0)
                    rc = unzip_errno(rc, name, e);
            }
        } else if (type == AE_IFREG || type == 0) {
            int fd = create_rel(fs, relp, mode ? mode : 0644, 1);
            if (fd < 0) {
                rc = unzip_errno(fd, name, e);
                break;
            }
            const void *blk;
            size_t bl;
            la_int64_t off;
            while (rc == 0 && (r = archive_read_data_block(a, &blk, &bl, &off)) == ARCHIVE_OK) {
                total += (long long)bl;
                if (total > LIM_FS_ZIP_UNPACKED_BYTES) {
                    rc = err_set(e, E_INVALID, "bad_request",
                                 "invalid zip file: more than %lld MiB unpacked",
                                 LIM_FS_ZIP_UNPACKED_BYTES >> 20);
                    break;
                }
                if (pwrite(fd, blk, bl, off) != (ssize_t)bl)
                    rc = unzip_errno(-errno, name, e);
            }
            if (rc == 0 && r != ARCHIVE_EOF)
                rc = err_set(e, E_INVALID, "bad_request", "invalid zip file: %s",
                             archive_error_string(a) ? archive_error_string(a) : "corrupt entry");
            close(fd);
        }
        /* Other kinds (devices, FIFOs) are skipped: the tmpfs is nodev anyway. */
    }
    if (rc == 0 && r != ARCHIVE_EOF)
        rc = err_set(e, E_INVALID, "bad_request", "invalid zip file: %s",
                     archive_error_string(a) ? archive_error_string(a) : "malformed");
    archive_read_free(a);
    return rc;
}

int sessfs_unzip(struct sessfs *fs, const char *dest, const void *zip, size_t len, struct err *e)
{
    AS_SESSION(fs, unzip_as(fs, dest, zip, len, e));
}

/* ---- inotify ---- */

int sessfs_inotify_new(const struct sessfs *fs)
{
    /* The saved uid stays 0, which is what allows the way back. */
    if (syscall(SYS_setresuid, fs->uid, fs->uid, (uid_t)-1) != 0)
        return -errno;
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    int er = errno;
    if (syscall(SYS_setresuid, (uid_t)-1, (uid_t)0, (uid_t)-1) != 0 ||
        syscall(SYS_setresuid, (uid_t)0, (uid_t)-1, (uid_t)-1) != 0)
        abort(); /* the saved uid is 0: the kernel allows both; never a thread left as the user */
    return fd >= 0 ? fd : -er;
}

/* inotify_add_watch takes a path: the folder's own descriptor through
 * /proc/self/fd names exactly the inode resolved beneath the root. */
static int watch_fd(int ifd, int fd, unsigned mask)
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    int wd = inotify_add_watch(ifd, proc, mask | IN_ONLYDIR);
    return wd < 0 ? -errno : wd;
}

static int watch_tree(int ifd, int dfd, const char *path, unsigned mask, int depth, int *budget,
                      void (*add)(void *ctx, int wd, const char *path), void *ctx)
{
    if (depth > SESSFS_DEPTH_MAX || --*budget < 0)
        return -E2BIG;
    int wd = watch_fd(ifd, dfd, mask);
    if (wd < 0)
        return wd;
    add(ctx, wd, path);
    int rfd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rfd < 0)
        return 0; /* not readable: watched, but its children are not known */
    DIR *d = fdopendir(rfd);
    if (d == NULL) {
        close(rfd);
        return 0;
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
            continue;
        int cfd = openat(dirfd(d), de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (cfd < 0)
            continue;
        char *child = xasprintf("%s%s%s", path, strcmp(path, "/") ? "/" : "", de->d_name);
        rc = watch_tree(ifd, cfd, child, mask, depth + 1, budget, add, ctx);
        xfree(child);
        close(cfd);
    }
    closedir(d);
    return rc;
}

static int watch_add_as(struct sessfs *fs, int ifd, const char *path, unsigned mask, int recursive,
                        int *budget, void (*add)(void *ctx, int wd, const char *path), void *ctx)
{
    char rel[PATH_MAX];
    int rc = relpath(path, rel, sizeof rel);
    if (rc < 0)
        return rc;
    int dfd = resolve_rel(fs, rel, O_PATH | O_DIRECTORY, 0);
    if (dfd < 0)
        return dfd;
    char norm[PATH_MAX + 2];
    snprintf(norm, sizeof norm, "/%s", strcmp(rel, ".") ? rel : "");
    if (recursive) {
        rc = watch_tree(ifd, dfd, norm, mask, 0, budget, add, ctx);
    } else if (--*budget < 0) {
        rc = -E2BIG;
    } else {
        int wd = watch_fd(ifd, dfd, mask);
        if (wd < 0)
            rc = wd;
        else
            add(ctx, wd, norm);
    }
    close(dfd);
    return rc;
}

int sessfs_watch_add(struct sessfs *fs, int ifd, const char *path, unsigned mask, int recursive,
                     int *budget, void (*add)(void *ctx, int wd, const char *path), void *ctx)
{
    AS_SESSION(fs, watch_add_as(fs, ifd, path, mask, recursive, budget, add, ctx));
}

/* ---- formats ---- */

void sessfs_mode_string(mode_t mode, char *out, size_t cap)
{
    char s[32];
    size_t n = 0;
    if (S_ISDIR(mode))
        s[n++] = 'd';
    if (S_ISLNK(mode))
        s[n++] = 'L';
    if (S_ISBLK(mode) || S_ISCHR(mode))
        s[n++] = 'D';
    if (S_ISFIFO(mode))
        s[n++] = 'p';
    if (S_ISSOCK(mode))
        s[n++] = 'S';
    if (mode & S_ISUID)
        s[n++] = 'u';
    if (mode & S_ISGID)
        s[n++] = 'g';
    if (S_ISCHR(mode))
        s[n++] = 'c';
    if (mode & S_ISVTX)
        s[n++] = 't';
    if (n == 0)
        s[n++] = '-';
    static const char rwx[] = "rwxrwxrwx";
    for (int i = 0; i < 9; i++)
        s[n++] = (mode & (1u << (8 - i))) ? rwx[i] : '-';
    s[n] = '\0';
    snprintf(out, cap, "%s", s);
}

int sessfs_parse_mode(const char *s, mode_t *out)
{
    size_t n = s ? strlen(s) : 0;
    if (n < 3 || n > 4)
        return -EINVAL;
    mode_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '7')
            return -EINVAL;
        m = m * 8 + (mode_t)(s[i] - '0');
    }
    *out = m;
    return 0;
}
