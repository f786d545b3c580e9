/* clock: wall-clock and monotonic time, and RFC 3339 text. */
#ifndef BD_CORE_CLOCK_H
#define BD_CORE_CLOCK_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Milliseconds since the Unix epoch (wall clock). */
int64_t clock_now_ms(void);
/* Microseconds of a monotonic clock, for durations only. */
int64_t clock_mono_us(void);
/* Milliseconds of the monotonic clock: every deadline, idle time and timeout
 * is measured on it, so a step of the wall clock (NTP, an operator) neither
 * fires nor stalls one. */
int64_t clock_mono_ms(void);
/* Initializes cv so that pthread_cond_timedwait takes CLOCK_MONOTONIC times
 * (those of clock_deadline). Every timed condition variable uses it. */
void clock_cond_init(pthread_cond_t *cv);
/* The absolute CLOCK_MONOTONIC time `ms` milliseconds from now, for
 * pthread_cond_timedwait on a condition made by clock_cond_init. */
struct timespec clock_deadline(int64_t ms);
/* Writes ms-since-epoch as RFC 3339 UTC with millisecond precision
 * ("2026-11-21T22:01:02.345Z") into buf (at least 32 bytes). Returns buf. */
const char *clock_fmt_rfc3339(int64_t ms, char *buf, size_t cap);
/* Parses RFC 3339 ("2026-11-21T22:01:02Z", optional fraction, "Z" or +hh:mm offset)
 * into ms since the epoch. Returns 0, or -1 when s is not RFC 3339. */
int clock_parse_rfc3339(const char *s, int64_t *ms) __attribute__((warn_unused_result));

#endif
