/*
 * log: one line per event to standard error, with a UTC timestamp. Lines are
 * written with a single write(2) so concurrent threads never interleave.
 *
 * A line is always one line: control characters in the message (a newline
 * in a request's path, a terminal escape) are written as \xNN, so that no
 * client can forge a line of its own. Fields taken from a request are also
 * passed through log_escape, so that they cannot forge a field either.
 */
#ifndef BD_CORE_LOG_H
#define BD_CORE_LOG_H

#include <stddef.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Lines below `min` are dropped. Default LOG_INFO. Set once at startup. */
void log_set_level(enum log_level min);
void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same line, handed to the log writer instead of written here: the
 * caller never waits for standard error (the access log: one line per
 * request). Lines keep their order among deferred lines, not against
 * log_msg's. Past LIM_LOG_BUFFER_BYTES waiting, a line is dropped and
 * counted (the writer reports the count). Without a writer running it is
 * log_msg. */
void log_deferred(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The access log's line for one request, deferred as log_deferred defers
 * it: "access METHOD PATH STATUS USus", with " (aborted)" after it when
 * aborted. method and path pass through log_escape (cut to
 * LIM_LOG_METHOD_BYTES and LIM_LOG_PATH_BYTES with their NUL). The same line
 * as log_deferred would make of them, made without printf: it is written
 * once per request. */
void log_access(enum log_level lvl, const char *method, const char *path, int status, long long us,
                int aborted);
/* Starts the writer thread of deferred lines: 0, or -1 (lines are then
 * written by their callers). */
int log_writer_start(void);
/* Writes every deferred line still waiting, then stops the writer. Lines
 * deferred afterwards are written by their callers. */
void log_writer_stop(void);
/* Writes in into out (cap bytes, NUL-terminated, cut short to fit) as one
 * log field: bytes outside printable ASCII, the space, '"' and '\' become
 * \xNN. Returns out. */
const char *log_escape(const char *in, char *out, size_t cap);

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
