/* child: what every process the server starts does between fork and exec.
 *
 * The server is multithreaded, so a forked child may only make
 * async-signal-safe calls until it execs: these helpers make system calls
 * only (no heap, no locks, no errno-dependent library state). */
#ifndef BD_RUNTIME_CHILD_H
#define BD_RUNTIME_CHILD_H

/* Empties the signal mask and sets every disposition back to the default.
 * The server blocks SIGTERM and SIGINT and ignores SIGPIPE; a mask and an
 * ignored disposition survive exec, and the program would inherit them. */
void child_reset_signals(void);

/* Marks every descriptor from `from` up close-on-exec: the child keeps using
 * them (a pipe that reports a failure before exec), the program never sees
 * them. close_range(2), or one fcntl per descriptor below 65536 on a kernel
 * without it. */
void child_cloexec_from(int from);

/* Sets the child's /proc/self/oom_score_adj to CHILD_OOM_SCORE_ADJ (the
 * server runs at SERVER_OOM_SCORE_ADJ, which a child would inherit): under
 * memory pressure the kernel ends a session's process, never the server.
 * Written while the child is still root, it is also the lowest value the
 * child may set itself. Best effort. */
#define SERVER_OOM_SCORE_ADJ (-900)
#define CHILD_OOM_SCORE_ADJ  1000
void child_oom_score_adj(void);

/* The same for a sandboxed browser's launch (bwrap, then Chromium). Where the
 * server holds CAP_SYS_RESOURCE (child_oom_floor_held(1)), 1000 is also a
 * floor: every process of the session stays at 1000 and the kernel's OOM
 * killer takes the largest, the page that filled the session. Without it,
 * Chromium lowers its own processes (browser 0, services 200, renderers 300
 * and up) while what it does not set (the sandbox's bwrap, the crash handler)
 * kept 1000 and outranked a renderer that filled the session's memory: the
 * kernel took bwrap first, and the whole session with it (issue 30.6). There
 * the launch starts at CHILD_BROWSER_OOM_SCORE_ADJ, the renderers' score: the
 * largest of them goes first, and session processes still go before the
 * host's (0). */
#define CHILD_BROWSER_OOM_SCORE_ADJ 300
void child_oom_score_adj_browser(void);

/* Says whether the server could lower its own score (it holds
 * CAP_SYS_RESOURCE, so a child's score written while root is a floor). Call
 * once at start, before any thread. */
void child_oom_floor_held(int held);

/* Closes every descriptor from `from` up, now (for a child that must not
 * hold the server's descriptors even before exec). */
void child_close_from(int from);

#endif
