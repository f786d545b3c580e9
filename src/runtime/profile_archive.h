/*
 * profile_archive: a browser's user-data folder as a .tar.gz and back.
 *
 * Archives are made by the system's GNU tar (always present on Debian),
 * spawned with an explicit argv and a minimal environment, never through a
 * shell. What a browser can rebuild on its own (caches, crash dumps, locks,
 * the DevTools port file) is left out: see PROFILE_ARCHIVE_EXCLUDES and
 * docs/profiles.md.
 *
 * Both functions block until tar is done (seconds for a large profile); call
 * them where blocking is acceptable (an HTTP thread, the session supervisor).
 */
#ifndef BD_RUNTIME_PROFILE_ARCHIVE_H
#define BD_RUNTIME_PROFILE_ARCHIVE_H

#include "core/err.h"

/* The tar --exclude patterns (NULL-terminated). Unanchored: each matches a
 * name at any depth ("Cache" also drops "Profile 1/Cache"). */
extern const char *const profile_archive_excludes[];

/* Archives the contents of src_dir into dest_path atomically: tar writes a
 * temporary file beside dest_path, which is fsynced, renamed over dest_path,
 * and the folder fsynced; readers see the old archive or the new one, never a
 * partial file. The browser using src_dir must have stopped. Fails with
 * E_NOTFOUND when src_dir does not exist, E_TOOBIG when the archive is
 * larger than max_bytes (0: no cap; checked before the rename, so the old
 * archive stays), E_INTERNAL when tar fails (its stderr in e's message) or a
 * system call fails; dest_path is then untouched. */
int profile_archive_create(const char *src_dir, const char *dest_path, long long max_bytes,
                           struct err *e) WUR;

/* Extracts archive_path into dest_dir (created with mode 0700 when missing,
 * parents included). Member names are confined to dest_dir by GNU tar's
 * defaults (no absolute names, no "..", no writing through symlinks it
 * created). Fails with E_NOTFOUND when the archive does not exist,
 * E_INTERNAL otherwise (tar's stderr in e's message). */
int profile_archive_extract(const char *archive_path, const char *dest_dir, struct err *e) WUR;

/* mkdir -p with mode 0700 for the folders it creates (a session's user-data
 * folder before launch). E_INTERNAL naming the folder that failed. */
int profile_archive_mkdir(const char *dir, struct err *e) WUR;

/* Writes the uncompressed tar of a .tar.gz archive to out_fd (gzip -dc).
 * Returns 0, or E_INTERNAL with the reason in e. */
int profile_archive_gunzip(const char *archive_path, int out_fd, struct err *e) WUR;

#endif
