/*
 * ksplice: a CONNECT tunnel's two sockets spliced in the kernel (a SOCKHASH
 * with an sk_skb stream verdict program, bpf/egress_splice.bpf.c; see
 * docs/egress-proxy.md "In the kernel").
 *
 * Bytes a joined socket receives are sent out of its peer by the kernel,
 * never reaching user space; the program counts them per socket. The caller
 * (the egress engine) still owns both sockets: it watches them for the end
 * of each direction, passes half-closes on with shutdown(2) once the kernel
 * has written everything it redirected (ksplice_written), and closes them.
 *
 * Every function is safe to call from any thread (map updates and lookups
 * are system calls on the kernel's maps; nothing here is shared in user
 * space).
 */
#ifndef BD_PROXY_KSPLICE_H
#define BD_PROXY_KSPLICE_H

#include <stdint.h>

#include "core/err.h"

struct ksplice;

/* The two sockets of one tunnel, by their kernel cookies (SO_COOKIE). */
struct ksplice_pair {
    uint64_t cookie[2];
};

/* Loads the verdict program and its maps (room for `sockets` sockets) and
 * attaches the program to the map. 0, or a negative errno with the reason
 * in e (no permission, a kernel without sockmap or the helpers, a verifier
 * refusal: the reason says which step failed). */
int ksplice_open(int sockets, struct ksplice **out, struct err *e) WUR;
/* Detaches and frees; sockets still joined are let go by the kernel as
 * the maps go away. Accepts NULL. */
void ksplice_free(struct ksplice *k);

/* Joins TCP sockets a and b: from now on what either receives is sent out
 * of the other, in the kernel. Bytes either socket had received before
 * (still in its receive queue) are redirected too. 0, or a negative errno
 * (the maps are full, a socket the kernel does not take): nothing is left
 * joined then, and the caller relays in user space. */
int ksplice_join(struct ksplice *k, int a, int b, struct ksplice_pair *p) WUR;

/* Bytes redirected so far out of each socket of p (bytes[0]: received on
 * a and sent out of b), and bytes a socket kept for itself because its
 * peer was not joined yet (passed; nonzero means the tunnel's order cannot
 * be kept: end it). 0, or a negative errno when p is not joined. */
int ksplice_counts(struct ksplice *k, const struct ksplice_pair *p, uint64_t bytes[2],
                   uint64_t passed[2]) WUR;

/* Unjoins both sockets of p and gives their final byte counts (0 when
 * unknown). Bytes the kernel still holds for a socket are dropped: call it
 * when the tunnel ends. */
void ksplice_leave(struct ksplice *k, const struct ksplice_pair *p, uint64_t bytes[2]);

/* Bytes written into socket fd's TCP stream so far (acknowledged plus still
 * queued), or -1. Reading the acknowledged count before the queue length
 * never overstates it. */
int64_t ksplice_written(int fd);

#endif
