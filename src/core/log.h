/*
 * log: one line per event to standard error, with a UTC timestamp. Lines are
 * written with a single write(2) so concurrent threads never interleave.
 */
#ifndef BD_CORE_LOG_H
#define BD_CORE_LOG_H

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Lines below `min` are dropped. Default LOG_INFO. Set once at startup. */
void log_set_level(enum log_level min);
void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
