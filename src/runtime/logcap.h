/*
 * logcap: the log files a session's processes write on the server's disk
 * (Xvfb's, chromedriver's, ffmpeg's), each with a byte cap.
 *
 * A process given a log file writes as much as it likes: chromedriver logs
 * every BiDi command whole (24 MiB for 24 commands of 1 MiB), so one
 * session could fill the data folder's disk, and the store with it. Here
 * the process gets the write end of a pipe instead; one drain thread of the
 * server appends what arrives to the file until the file holds cap bytes,
 * then writes one line saying so and drops the rest (reading on, so that
 * the process never blocks on a full pipe). The budget counts what the file
 * already holds: a restarted process appending to the same log does not get
 * a fresh one.
 *
 * Threading: logcap_pipe may be called from any thread.
 */
#ifndef BD_RUNTIME_LOGCAP_H
#define BD_RUNTIME_LOGCAP_H

#include "core/err.h"

/* Opens (creating 0600, appending) the log at path and returns the write end
 * of a pipe drained into it (close-on-exec; the caller gives it to the
 * child and closes its own copy; the drain ends when every copy is closed).
 * At most cap bytes of file. -errno when the file or the pipe cannot be
 * made. */
int logcap_pipe(const char *path, long long cap) WUR;

/* Drains rfd (a pipe's or a FIFO's read end; owned, closed at its end or
 * on failure) into the log at path, as logcap_pipe does. 0 or -errno. */
int logcap_drain(int rfd, const char *path, long long cap) WUR;

/* The line appended when a log reaches its cap. */
#define LOGCAP_NOTICE "[browserd: this log reached its size cap; later output is dropped]\n"

#endif
