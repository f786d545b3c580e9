#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static enum log_level min_level = LOG_INFO;

void log_set_level(enum log_level min)
{
    min_level = min;
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
    static const char *const names[] = {"debug", "info", "warn", "error"};
    if (lvl < min_level)
        return;
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t off = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
    int n =
        snprintf(line + off, sizeof line - off, ".%03ldZ %s ", ts.tv_nsec / 1000000L, names[lvl]);
    if (n > 0)
        off += (size_t)n;
    va_list ap;
    va_start(ap, fmt);
    n = vsnprintf(line + off, sizeof line - off - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    off += (size_t)n < sizeof line - off - 1 ? (size_t)n : sizeof line - off - 2;
    line[off++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, off);
    (void)w;
}
