/*
 * xvfb: a private virtual X display for one headful browser.
 *
 * Each headful Chromium gets its own Xvfb server so that browsers never see
 * each other's windows. Xvfb picks a free display number itself (-displayfd)
 * and runs in its own session and process group, like the browser.
 *
 * The screen size is fixed when Xvfb starts: Xvfb's RandR support can only
 * switch between sizes it was started with, and no RandR client (xrandr,
 * libXrandr, xcb-randr) is installed, so the screen cannot grow at runtime.
 * See docs/runtime.md.
 */
#ifndef BD_RUNTIME_XVFB_H
#define BD_RUNTIME_XVFB_H

#include <sys/types.h>

#include "core/err.h"

/* Plain data; a zeroed struct (pid 0) means "not running". */
struct xvfb {
    pid_t pid;   /* Xvfb process (a session and process group leader) */
    int display; /* X display number (":N"), or -1 */
    int width, height;
};

/* Starts `binary` (NULL = /usr/bin/Xvfb) as
 *   Xvfb -displayfd FD -screen 0 WxHx24 -nolisten tcp -noreset
 * with its stdout and stderr appended to log_path (NULL = /dev/null), and waits
 * at most timeout_ms until it reports its display number. On success fills *x
 * and returns 0; on failure nothing is left running and e says why (E_INVALID
 * for a bad size, E_UNAVAIL when Xvfb did not come up in time or exited,
 * E_INTERNAL for system call failures). */
struct sandbox;
int xvfb_start(const char *binary, const struct sandbox *sb, int width, int height,
               const char *log_path, int timeout_ms, struct xvfb *x, struct err *e) WUR;

/* SIGTERM to Xvfb's process group, up to grace_ms for it to exit, then SIGKILL;
 * reaps it and zeroes *x. Safe on a zeroed or already stopped struct. */
void xvfb_stop(struct xvfb *x, int grace_ms);

#endif
