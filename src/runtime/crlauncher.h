/*
 * crlauncher: Debian's launcher script, resolved once instead of run per
 * launch. Debian's /usr/bin/chromium is a shell script that checks the CPU,
 * sources every file of /etc/chromium.d into CHROMIUM_FLAGS (for example
 * --enable-remote-extensions), exports a few variables and finally runs
 * `exec $LIBDIR/$APPNAME $CHROMIUM_FLAGS "$@"`. Running it costs a shell and
 * about ten helper processes (uname, grep, expr, findmnt, ls, tr) before
 * Chromium starts: 10-40 ms on an idle 2-core machine, over 100 ms under
 * load. A configured binary that is this script is replaced by the binary it
 * runs, with the flags its configuration gives, computed once by sourcing
 * every file of /etc/chromium.d the way the script does; anything else is run as it is.
 * docs/runtime.md.
 */
#ifndef BD_RUNTIME_CRLAUNCHER_H
#define BD_RUNTIME_CRLAUNCHER_H

#include <stddef.h>

struct crlauncher {
    const char *exec;          /* what to run: the script's binary, or the configured one */
    const char *const *flags;  /* NULL-terminated: the script's flags, before the caller's */
    const char *wrapper;       /* the script's path (CHROME_WRAPPER), or NULL */
    const char *version_extra; /* the script's CHROME_VERSION_EXTRA, or NULL */
};

/* The launcher for binary (an absolute path), resolved on the first call for
 * that path and kept for the process's life (thread-safe). Never fails:
 * a binary that is not Debian's script, or a script whose binary is missing,
 * resolves to itself with no flags. */
const struct crlauncher *crlauncher_get(const char *binary);

/* Pure parts, for tests. */

/* 1 when text (len bytes) is Debian's launcher script: a "#!" script that sets
 * APPNAME=<name> and LIBDIR=/usr/lib/$APPNAME and ends in
 * `exec $LIBDIR/$APPNAME $CHROMIUM_FLAGS "$@"`; then writes the binary it
 * runs (/usr/lib/<name>/<name>) into real (cap bytes). 0 otherwise. */
int crlauncher_parse_script(const char *text, size_t len, char *real, size_t cap);

/* Splits CHROMIUM_FLAGS as the script's unquoted expansion does (on blanks)
 * and applies its rule: without --enable-remote-extensions it adds
 * --disable-background-networking and --disable-extensions-except= with the
 * --load-extension values. Returns a NULL-terminated vector (free each
 * string, then the vector, with xfree). */
char **crlauncher_split_flags(const char *flags);

#endif
