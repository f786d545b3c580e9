/*
 * fdio: writing and reading a whole buffer on a file descriptor, with an
 * optional deadline. The loops every caller used to write out by hand: short
 * writes and reads, EINTR, EAGAIN on a non-blocking descriptor, SIGPIPE on a
 * socket whose peer left.
 *
 * For code that blocks on one descriptor (a helper's pipe, a file, a client
 * socket handed over by the HTTP daemon). Not for event loops, which must
 * return on EAGAIN instead of waiting.
 */
#ifndef BD_CORE_FDIO_H
#define BD_CORE_FDIO_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

/* The deadline of a call that may wait as long as the peer makes it. */
#define FDIO_NO_DEADLINE 0

/* Writes all len bytes of buf to fd. Retries short writes and EINTR; on a
 * non-blocking descriptor waits (poll) until it is writable again. A socket
 * is written with MSG_NOSIGNAL: a peer that left gives -EPIPE, never
 * SIGPIPE. deadline_ms is a time of clock_mono_ms(), or FDIO_NO_DEADLINE:
 * with a deadline, the call never blocks past it, whether fd is blocking or
 * not (a blocking pipe is written at most PIPE_BUF bytes per write once poll
 * said it has room). Returns 0, -ETIMEDOUT when the deadline passed first
 * (some bytes may have been written), or another negative errno. */
int fdio_write_all(int fd, const void *buf, size_t len, int64_t deadline_ms) WUR;

/* Reads from fd into buf until its end (EOF) or until cap bytes are in buf,
 * whichever comes first; *got receives the bytes read, also on failure.
 * Retries EINTR; on a non-blocking descriptor, or with a deadline, waits
 * (poll) for data. deadline_ms as for fdio_write_all. Returns 0 (EOF or
 * full: compare *got with cap), -ETIMEDOUT, or another negative errno. */
int fdio_read_all(int fd, void *buf, size_t cap, size_t *got, int64_t deadline_ms) WUR;

/* Reads the whole file at path, of at most max bytes, into *out (owned,
 * xfree; no NUL added) and its size into *len. Returns 0, -EFBIG when the
 * file is larger than max, -EIO when it could not be read whole, or the
 * negative errno of open or fstat (-ENOENT: no such file). */
int fdio_read_file(const char *path, size_t max, char **out, size_t *len) WUR;

#endif
