/* path: turning the paths an operator gives into absolute, normalized ones.
 *
 * OPERATOR.md: "Relative paths in flags and variables are taken from the
 * directory the server was started in." The server resolves every path flag
 * once at start, so nothing later (a session's folder, Chromium's
 * --user-data-dir, a mount source) ever sees a relative path. */
#ifndef BD_CORE_PATH_H
#define BD_CORE_PATH_H

#include <stddef.h>
#include <sys/types.h>

/* Writes the absolute, lexically normalized form of `in` into out: relative
 * paths are joined to the current directory; "." components, repeated and
 * trailing slashes are removed; ".." removes the previous component (never
 * above "/"). Symbolic links are not resolved, and the path need not exist.
 * An empty `in` gives an empty out. Returns 0, or -ENAMETOOLONG when the
 * result does not fit in cap, or -errno when the current directory cannot be
 * read. */
int path_absolute(const char *in, char *out, size_t cap) __attribute__((warn_unused_result));

/* Like path_absolute for a program: a name without '/' is looked up in PATH
 * (the first executable match); a name with '/' is made absolute. Returns 0,
 * -ENOENT when no executable of that name is found in PATH, or as
 * path_absolute. */
int path_program(const char *in, char *out, size_t cap) __attribute__((warn_unused_result));

/* Reads at most cap - 1 bytes of a small file (a /proc or cgroup file) into
 * buf and NUL-terminates it. Returns the bytes read, or -1 when the file
 * cannot be opened (buf is then ""; a failed read leaves buf "" too). */
ssize_t path_read_small(const char *path, char *buf, size_t cap);

/* Removes path and, when it is a folder, everything below it, without
 * following symbolic links (a link is removed, not its target). Best effort:
 * what cannot be removed stays, and nothing is reported. */
void path_remove_tree(const char *path);

#endif
