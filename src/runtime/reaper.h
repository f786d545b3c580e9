/*
 * reaper: ends the browsers of a server that died without stopping them.
 *
 * Browsers run in their own sessions and process groups (setsid), so a
 * server killed with SIGKILL, or one that crashed, would leave them running.
 * `browserd serve` forks a small watcher at start, before any thread: the
 * server tells it, through a pipe, each process group it starts ("+PGID")
 * and each it has reaped ("-PGID"). When the pipe reaches end of file (every
 * copy of the server's end closed: the server is gone), the watcher sends
 * SIGKILL to the groups still listed and exits. A server that stops cleanly
 * has reaped its groups already, so the watcher has nothing left to do.
 *
 * The restart path (chromium_kill_stale) stays: it covers a watcher that was
 * itself killed, for example with the server's whole process group.
 */
#ifndef BD_RUNTIME_REAPER_H
#define BD_RUNTIME_REAPER_H

#include <sys/types.h>

#include "core/err.h"

/* Forks the watcher. Call once, before any thread starts. E_INTERNAL when
 * the pipe or the fork fails (the server then runs without one). */
int reaper_start(struct err *e) WUR;

/* Lists / unlists a process group (its leader's pid). No-ops when no watcher
 * runs (unit tests) or it is gone; never blocks. Thread-safe. */
void reaper_watch(pid_t pgid);
void reaper_forget(pid_t pgid);

#endif
