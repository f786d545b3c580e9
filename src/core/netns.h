/* netns: sockets inside a session's network namespace.
 *
 * Each sandboxed session has its own network namespace (src/runtime/
 * sandbox.h): its browser's DevTools endpoint, its chromedriver and the
 * listener of its egress proxy live on that namespace's loopback, out of
 * reach of the host and of other sessions. The server reaches them by
 * creating the socket inside the namespace: the calling thread enters it
 * with setns(2), calls socket(2) and returns to the host's namespace at once.
 * A socket belongs to the namespace it was created in for its whole life, so
 * everything after (bind, connect, epoll) happens on the server's threads as
 * usual.
 *
 * Namespaces are registered under small integer ids so that internal
 * endpoint URLs can name them: "ws://ns7@127.0.0.1:PORT/devtools/..." is
 * port PORT on the loopback of namespace 7 (src/proxy/ws.c). These URLs never
 * leave the server.
 *
 * Thread-safe. Setting up the host side needs CAP_SYS_ADMIN (root). */
#ifndef BD_CORE_NETNS_H
#define BD_CORE_NETNS_H

/* Opens the host's own namespace (to return to). Call once at start, before
 * any other call; -errno when /proc/self/ns/net cannot be opened. */
int netns_init(void) __attribute__((warn_unused_result));

/* Registers a namespace descriptor (owned from now on). Returns an id >= 1,
 * or -ENOSPC when the table is full (fd is closed then). */
int netns_register(int fd) __attribute__((warn_unused_result));

/* Forgets id and closes its descriptor. Sockets made inside it keep working
 * (they hold the namespace). Accepts 0 (no-op). */
void netns_unregister(int id);

/* A new socket(domain, type, 0) inside namespace id (0 = the host's). Returns
 * the descriptor or -errno (-ENOENT for an unknown id). Aborts the process
 * if the thread cannot return to the host's namespace: continuing in another
 * namespace would silently misdirect every later connection of the thread. */
int netns_socket(int id, int domain, int type);

/* A new network namespace with its loopback interface up, made on a
 * short-lived thread (the calling thread never leaves the host's namespace).
 * Returns its descriptor (O_CLOEXEC) or -errno. */
int netns_create(void);

#endif
