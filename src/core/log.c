#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static enum log_level min_level = LOG_INFO;

void log_set_level(enum log_level min)
{
    min_level = min;
}

/* Appends the bytes of in to out[*off..cap), each byte for which esc(c) is
 * true as \xNN; stops before a byte that does not fit whole. */
static void append_escaped(char *out, size_t *off, size_t cap, const char *in, size_t n,
                           int (*esc)(unsigned char))
{
    static const char hex[] = "0123456789abcdef";
    size_t o = *off;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)in[i];
        if (!esc(c)) {
            if (o + 1 > cap)
                break;
            out[o++] = (char)c;
        } else {
            if (o + 4 > cap)
                break;
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    *off = o;
}

static int is_control(unsigned char c)
{
    return c < 0x20 || c == 0x7f;
}

static int is_not_field(unsigned char c)
{
    return c <= 0x20 || c >= 0x7f || c == '"' || c == '\\';
}

const char *log_escape(const char *in, char *out, size_t cap)
{
    size_t off = 0;
    if (cap == 0)
        return out;
    append_escaped(out, &off, cap - 1, in, strlen(in), is_not_field);
    out[off] = '\0';
    return out;
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
    static const char *const names[] = {"debug", "info", "warn", "error"};
    if (lvl < min_level)
        return;
    char line[2048], msg[2048];
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
    n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t mlen = n < 0 ? 0 : (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;
    append_escaped(line, &off, sizeof line - 1, msg, mlen, is_control);
    line[off++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, off);
    (void)w;
}
