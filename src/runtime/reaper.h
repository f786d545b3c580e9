/*
 * reaper: ends the browsers of a server that died without stopping them.
 *
 * Browsers run in their own sessions and process groups (setsid), so a
 * server killed with SIGKILL, or one that crashed, would leave them running.
 * `browserd serve` forks a small watcher at start, before any thread: the
 * server tells it, through a pipe, each process group it starts ("+PGID")
 * and each it has reaped ("-PGID"). When the pipe reaches end of file (every
 * copy of the server's end closed: the server is gone), the watcher sends
 * SIGKILL to the groups still listed, detaches the sessions' mounts still
 * listed, then empties and removes the sandboxes' cgroups still listed (round
 * after round, up to 2 minutes), and only then exits: nothing removes them
 * after it. The watcher runs in its own session, so a
 * kill of the server's whole process group does not end it first. A server that stops cleanly
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

/* Lists / unlists a sandbox's cgroup folder: at the server's end the watcher
 * kills every task in it and removes it (this reaches processes that left
 * their process group, and every process of a PID namespace). Paths longer
 * than 199 bytes are not listed. Same guarantees as reaper_watch. */
void reaper_watch_cgroup(const char *dir);
void reaper_forget_cgroup(const char *dir);

/* Lists / unlists a mount (a session's files, sandbox_root_create): at the
 * server's end the watcher detaches it (before it empties any cgroup) and
 * removes the folder. Same guarantees as reaper_watch. */
void reaper_watch_mount(const char *dir);
void reaper_forget_mount(const char *dir);

#endif
