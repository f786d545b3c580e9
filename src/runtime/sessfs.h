/*
 * sessfs: a session's own files (sandbox_root: a tmpfs holding /tmp and
 * /home), as the fs API reads and changes them. No HTTP here; docs/fs.md.
 *
 * A client path is absolute, as the session's processes see it. It is
 * resolved beneath the session's root with openat2(RESOLVE_IN_ROOT |
 * RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV) from a descriptor of the root, so
 * "..", absolute or relative symbolic links and /proc magic links cannot
 * leave it: a path that names something outside (/etc/passwd,
 * /proc/1/root/...) is simply not found. Operations on a name (create,
 * delete, rename) are made relative to the descriptor of its resolved parent.
 *
 * Every operation runs with the calling thread's filesystem identity set to
 * the session's user (setfsuid/setfsgid, per thread, and no supplementary
 * groups), restored before returning: permissions are checked as that user
 * and new files belong to it.
 *
 * Functions return 0 or -errno: -ENOENT (not found, or outside), -EACCES or
 * -EPERM (the session's user may not), -ENOTDIR, -EISDIR, -EEXIST,
 * -ENOTEMPTY, -ENOSPC (the quota is full), -EINVAL (a path that is not
 * absolute, or the root where a name is needed), -ELOOP, -ENAMETOOLONG,
 * -E2BIG (a cap below). Threading: a struct sessfs is used by one thread.
 */
#ifndef BD_RUNTIME_SESSFS_H
#define BD_RUNTIME_SESSFS_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "core/err.h"

struct sessfs {
    int rootfd; /* O_PATH descriptor of the session's root */
    uid_t uid;
    gid_t gid;
};

/* Opens the root (host path root, as the server) for the session user uid
 * (its group has the same number). 0 or -errno. */
int sessfs_open(struct sessfs *fs, const char *root, uid_t uid) WUR;
void sessfs_close(struct sessfs *fs);

/* A regular file opened for reading (*fd, owned) with its stat. -EISDIR for
 * a folder, -EINVAL for other kinds (a FIFO, a socket). */
int sessfs_read_open(struct sessfs *fs, const char *path, int *fd, struct stat *st) WUR;

/* Writes len bytes as the whole content of path, creating missing parent
 * folders (0755) and the file with mode (& 01777: no setuid/setgid); an
 * existing file is truncated and keeps its mode. */
int sessfs_write(struct sessfs *fs, const char *path, mode_t mode, const void *data,
                 size_t len) WUR;

/* sessfs_write with the content read from in_fd until its end (a pipe). */
int sessfs_write_fd(struct sessfs *fs, const char *path, mode_t mode, int in_fd) WUR;

/* stat of path, following a final symbolic link inside the root. */
int sessfs_stat(struct sessfs *fs, const char *path, struct stat *st) WUR;

struct sessfs_entry {
    char *name;     /* owned */
    struct stat st; /* lstat: a symbolic link is itself */
};
/* The entries of folder path (without "." and ".."), at most
 * LIM_FS_LIST_ENTRIES (-E2BIG beyond). Free with sessfs_entries_free. */
int sessfs_list(struct sessfs *fs, const char *path, struct sessfs_entry **out, size_t *n) WUR;
void sessfs_entries_free(struct sessfs_entry *v, size_t n);

/* mkdir -p with mode (& 01777) for the folders it creates. */
int sessfs_mkdir(struct sessfs *fs, const char *path, mode_t mode) WUR;
/* Removes a file or a symbolic link (-EISDIR for a folder). */
int sessfs_unlink(struct sessfs *fs, const char *path) WUR;
/* Removes a folder and everything under it, walking by descriptors without
 * following links (-ENOTDIR for a file). */
int sessfs_rmtree(struct sessfs *fs, const char *path) WUR;
/* Renames src to dst (both inside; dst's parent must exist). */
int sessfs_move(struct sessfs *fs, const char *src, const char *dst) WUR;
/* chmod (& 01777) of path, following a final link inside the root. */
int sessfs_chmod(struct sessfs *fs, const char *path, mode_t mode) WUR;

/* Writes a zip of folder path through out(ctx, bytes, n) as it is built
 * (out returns 0, or -errno to abort: the client went away): folders as
 * entries ending in '/', regular files with their content, symbolic links as
 * links; nothing is followed; FIFOs and sockets are left out. Blocks while
 * out blocks, so it belongs on a thread of its own. */
int sessfs_zip_dir(struct sessfs *fs, const char *path,
                   int (*out)(void *ctx, const void *data, size_t n), void *ctx) WUR;
/* Extracts the zip (len bytes) under folder dest (created when missing):
 * E_INVALID with a message for an absolute or ".." entry, a link leaving
 * the root, a hard link, a malformed archive, more than LIM_FS_ZIP_ENTRIES
 * entries or LIM_FS_ZIP_UNPACKED_BYTES bytes; modes lose setuid/setgid.
 * Other failures: E_NOTFOUND, E_FORBIDDEN, E_TOOBIG (quota), E_INTERNAL. */
int sessfs_unzip(struct sessfs *fs, const char *dest, const void *zip, size_t len,
                 struct err *e) WUR;

/* A new inotify descriptor (non-blocking, close-on-exec) charged to the
 * session's user. The kernel counts instances and watches per real uid
 * (fs.inotify.max_user_instances, 128 by default): made as the server's root,
 * a few sessions' watches would exhaust the host's budget for everyone. So it
 * is made with this thread's real and effective uids set to the session's
 * user (a raw setresuid: this thread only; the saved uid stays 0) and both
 * restored at once, which gives the thread its capabilities back. -errno
 * (-EMFILE: the user's budget is spent). */
int sessfs_inotify_new(const struct sessfs *fs) WUR;

/* Adds an inotify watch (mask) on folder path to the inotify descriptor ifd;
 * *wd receives the watch descriptor. With recursive, every folder below is
 * watched too, up to *budget folders in all (decremented; -E2BIG when it
 * runs out); add(ctx, wd, path) is called for each folder watched, with its
 * client path. */
int sessfs_watch_add(struct sessfs *fs, int ifd, const char *path, unsigned mask, int recursive,
                     int *budget, void (*add)(void *ctx, int wd, const char *path), void *ctx) WUR;

/* Go's os.FileMode.String() of a stat mode ("-rw-r--r--", "drwxrwxrwt"
 * becomes "dtrwxrwxrwx", "Lrwxrwxrwx"), into out (at least 16 bytes). */
void sessfs_mode_string(mode_t mode, char *out, size_t cap);

/* Parses a mode string "^[0-7]{3,4}$"; 0 or -EINVAL. */
int sessfs_parse_mode(const char *s, mode_t *out) WUR;

#endif
