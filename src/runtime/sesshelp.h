/*
 * sesshelp: file work done for a session by a process inside the session's
 * cgroups, so that the session pays for it.
 *
 * The kernel charges a tmpfs page to the memory cgroup of the process that
 * writes it, and CPU time to the cgroup of the task that spends it. Bytes
 * the server wrote into a session's files itself (browsers.fs write_file,
 * upload, upload_zip) were the server's memory, not the session's, and a
 * zip of the session's files (download_dir_zip, a sparse file's holes
 * deflated) was the server's CPU. Here that work runs in a short-lived
 * helper: the server's own binary (/proc/self/exe), forked, moved into
 * every cgroup of the session before it execs `browserd sessfs-helper`, with
 * the session's root folder as descriptor 3. The helper runs the same
 * runtime/sessfs operation the server would have (as root, with the
 * session's user as its filesystem identity) and exits with its result.
 * It is in the session's cgroups, so ending the session kills it too; if
 * the server dies, the helper meets the end of its input or a pipe without
 * a reader and exits. (No parent-death signal: that follows the thread that
 * forked, and a download's helper outlives the request's thread.)
 *
 * Every function here blocks until the helper is done (the zip stream
 * returns at once and is read by the caller). Thread-safe.
 */
#ifndef BD_RUNTIME_SESSHELP_H
#define BD_RUNTIME_SESSHELP_H

#include <stddef.h>
#include <sys/types.h>

#include "core/err.h"
#include "runtime/sandbox.h"
#include "runtime/sessfs.h"

/* The command name main() hands to sesshelp_main. */
#define SESSHELP_COMMAND "sessfs-helper"

/* sessfs_write, done by a helper in sb's cgroups: fs gives the root and the
 * user. 0 or -errno as sessfs_write. */
int sesshelp_write(const struct sandbox *sb, const struct sessfs *fs, const char *path, mode_t mode,
                   const void *data, size_t len) WUR;

/* sessfs_mkdir (with its parents), done by a helper in sb's cgroups: the
 * kernel charges a new inode and its dentry to the memory cgroup of the task
 * that creates it, so folders a tenant makes through the API are its
 * session's memory, not the server's (red team pass 45b). 0 or -errno as
 * sessfs_mkdir. */
int sesshelp_mkdir(const struct sandbox *sb, const struct sessfs *fs, const char *path,
                   mode_t mode) WUR;

/* The same write fed as the bytes arrive (a streamed upload): start the
 * helper, give it each chunk, end it. Nothing is buffered here; a chunk
 * waits for room in the helper's pipe (1 MiB). */
struct sesshelp_writer {
    pid_t pid;
    int in; /* write end of the helper's stdin (owned) */
};
/* Starts the helper, which creates (truncates) path at once. 0 or -errno. */
int sesshelp_write_start(const struct sandbox *sb, const struct sessfs *fs, const char *path,
                         mode_t mode, struct sesshelp_writer *w) WUR;
/* Writes all of data: 0, or -EPIPE when the helper is gone (its end says
 * why). */
int sesshelp_write_chunk(struct sesshelp_writer *w, const void *data, size_t len) WUR;
/* Ends the write: the file is complete unless `abort` (the helper is then
 * killed first and the file holds part of the data: the caller removes it).
 * Reaps the helper. 0 when it wrote everything, else -errno as
 * sessfs_write. */
int sesshelp_write_end(struct sesshelp_writer *w, int abort);

/* sessfs_unzip, done by a helper in sb's cgroups (the archive's pages and
 * the unpacking's CPU are the session's). Fails as sessfs_unzip, with e
 * filled. */
int sesshelp_unzip(const struct sandbox *sb, const struct sessfs *fs, const char *dest,
                   const void *zip, size_t len, struct err *e) WUR;

/* A zip of folder path being built by a helper in sb's cgroups. */
struct sesshelp_zip {
    pid_t pid;
    int out; /* read end of the zip's bytes (owned); the end of the zip is the end of this */
};
/* Starts it. 0 or -errno (the helper could not be started). */
int sesshelp_zip_start(const struct sandbox *sb, const struct sessfs *fs, const char *path,
                       struct sesshelp_zip *z) WUR;
/* Ends it: closes out, kills the helper when `abort` (the client went
 * away), reaps it. 0 when the helper built the whole zip, else -errno. */
int sesshelp_zip_end(struct sesshelp_zip *z, int abort);

/* The helper itself (argv after the command name). Returns the process's
 * exit status: 0, or the errno of the failure. */
int sesshelp_main(int argc, char **argv);

#endif
