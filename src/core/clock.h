/* clock: wall-clock and monotonic time, and RFC 3339 text. */
#ifndef BD_CORE_CLOCK_H
#define BD_CORE_CLOCK_H

#include <stddef.h>
#include <stdint.h>

/* Milliseconds since the Unix epoch (wall clock). */
int64_t clock_now_ms(void);
/* Microseconds of a monotonic clock, for durations only. */
int64_t clock_mono_us(void);
/* Writes ms-since-epoch as RFC 3339 UTC with millisecond precision
 * ("2026-11-21T22:01:02.345Z") into buf (at least 32 bytes). Returns buf. */
const char *clock_fmt_rfc3339(int64_t ms, char *buf, size_t cap);
/* Parses RFC 3339 ("2026-11-21T22:01:02Z", optional fraction, "Z" or +hh:mm offset)
 * into ms since the epoch. Returns 0, or -1 when s is not RFC 3339. */
int clock_parse_rfc3339(const char *s, int64_t *ms) __attribute__((warn_unused_result));

#endif
