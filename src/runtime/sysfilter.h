/*
 * sysfilter: the seccomp programs every sandboxed session process runs
 * under (docs/sandbox.md, "System calls").
 *
 * A session's processes already run as an unprivileged uid in their own
 * namespaces; what is left of the kernel is its system call surface, and
 * most recent local-root exploits start in a part of it a browser never
 * needs: a new user namespace (which hands out capabilities, AF_PACKET and
 * nf_tables sockets), keyrings, bpf, perf events, userfaultfd, io_uring,
 * module and kexec loading, mounting. The programs answer those calls EPERM
 * (the process sees a refusal, it is not killed), built once with libseccomp
 * (Debian's libseccomp-dev, the library made for building seccomp filters)
 * and handed to bwrap, which loads them just before it execs the process.
 *
 * Two programs:
 *  - SYSFILTER_SESSION, for every process but Chromium (process exec/spawn,
 *    playwright.execute's runner, Xvfb, chromedriver, the recorder): also
 *    refuses new user namespaces (clone/unshare with CLONE_NEWUSER, setns,
 *    and clone3, answered ENOSYS so that libc falls back to clone);
 *  - SYSFILTER_BROWSER, for Chromium: the same minus user namespaces, which
 *    Chromium's own sandbox makes for its zygote (Debian ships no setuid
 *    helper). Whatever a nested namespace grants, the socket rules still
 *    hold inside it: no packet sockets, no netlink but routing and uevents.
 *
 * Threading: sysfilter_init once at start (sandbox_init); the rest reads.
 */
#ifndef BD_RUNTIME_SYSFILTER_H
#define BD_RUNTIME_SYSFILTER_H

#include <stddef.h>

#include "core/err.h"

enum sysfilter_kind { SYSFILTER_SESSION, SYSFILTER_BROWSER };

/* Builds both programs for this machine's architecture. 0, or -errno
 * (libseccomp missing a system call name is not an error: the call is
 * unknown to this kernel too). */
int sysfilter_init(void) WUR;
/* The compiled program of kind (an array of struct sock_filter, what bwrap's
 * --seccomp reads), its length in *len; NULL before sysfilter_init. */
const void *sysfilter_program(enum sysfilter_kind kind, size_t *len);

#endif
