#include "core/log.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/limits.h"
#include "core/xalloc.h"

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

/* Writes a line's start, its timestamp and level ("2026-01-02T03:04:05.678Z
 * info "), into line (cap bytes, at least 64); returns its length. */
static size_t format_line_start(enum log_level lvl, char *line, size_t cap)
{
    static const char *const names[] = {"debug", "info", "warn", "error"};
    /* The date and time to the second, formatted once per second per thread
     * (strftime converts through the time zone code: a visible part of an
     * access line's cost); the milliseconds and the level without printf. */
    static __thread time_t sec = -1;
    static __thread char date[24];
    static __thread size_t datelen;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (ts.tv_sec != sec) {
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        datelen = strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
        sec = ts.tv_sec;
    }
    size_t off = datelen < cap ? datelen : 0;
    memcpy(line, date, off);
    long ms = ts.tv_nsec / 1000000L;
    line[off++] = '.';
    line[off++] = (char)('0' + ms / 100);
    line[off++] = (char)('0' + ms / 10 % 10);
    line[off++] = (char)('0' + ms % 10);
    line[off++] = 'Z';
    line[off++] = ' ';
    size_t n = strlen(names[lvl]);
    memcpy(line + off, names[lvl], n);
    off += n;
    line[off++] = ' ';
    return off;
}

/* Formats one line (timestamp, level, message with its control characters
 * escaped, newline) into line (cap bytes); returns its length. */
static size_t format_line(enum log_level lvl, const char *fmt, va_list ap, char *line, size_t cap)
    __attribute__((format(printf, 2, 0)));
static size_t format_line(enum log_level lvl, const char *fmt, va_list ap, char *line, size_t cap)
{
    size_t off = format_line_start(lvl, line, cap);
    char msg[2048];
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    size_t mlen = n < 0 ? 0 : (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;
    append_escaped(line, &off, cap - 1, msg, mlen, is_control);
    line[off++] = '\n';
    return off;
}

static void write_all(const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
    if (lvl < min_level)
        return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    size_t off = format_line(lvl, fmt, ap, line, sizeof line);
    va_end(ap);
    ssize_t w = write(STDERR_FILENO, line, off);
    (void)w;
}

/*
 * The deferred lines (log_deferred): callers append to `buf` under `mu`
 * and never wait for the terminal, the pipe or the file behind standard
 * error; the writer swaps `buf` for its own and writes it with one write(2)
 * every LOG_FLUSH_MS (sooner when half full). A full buffer drops the line
 * and counts it: a stalled standard error never stalls a request.
 */
#define LOG_FLUSH_MS 20

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *buf, *spare;
    size_t len;
    uint64_t dropped;
    int running, stop;
    int idle; /* the writer waits for a first line (a caller wakes it) */
    pthread_t thread;
} W = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Hands a formatted line to the writer (or writes it when none runs). */
static void defer_line(const char *line, size_t off)
{
    pthread_mutex_lock(&W.mu);
    if (!W.running) {
        pthread_mutex_unlock(&W.mu);
        write_all(line, off);
        return;
    }
    if (W.len + off > LIM_LOG_BUFFER_BYTES) {
        W.dropped++;
    } else {
        memcpy(W.buf + W.len, line, off);
        W.len += off;
        if (W.idle ||
            (W.len >= LIM_LOG_BUFFER_BYTES / 2 && W.len - off < LIM_LOG_BUFFER_BYTES / 2)) {
            W.idle = 0;
            pthread_cond_signal(&W.cv);
        }
    }
    pthread_mutex_unlock(&W.mu);
}

void log_deferred(enum log_level lvl, const char *fmt, ...)
{
    if (lvl < min_level)
        return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    size_t off = format_line(lvl, fmt, ap, line, sizeof line);
    va_end(ap);
    defer_line(line, off);
}

/* Writes v in decimal at out (room for 20 digits and a sign); returns the
 * number of bytes written. */
static size_t put_decimal(char *out, long long v)
{
    char d[24];
    size_t n = 0, o = 0;
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do {
        d[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        out[o++] = '-';
    while (n)
        out[o++] = d[--n];
    return o;
}

/* Appends s to line at *off (the caller made room). */
static void put_str(char *line, size_t *off, const char *s)
{
    size_t n = strlen(s);
    memcpy(line + *off, s, n);
    *off += n;
}

void log_access(enum log_level lvl, const char *method, const char *path, int status, long long us,
                int aborted)
{
    if (lvl < min_level)
        return;
    /* format_line's "access %s %s %d %lldus%s" of log_escape'd fields, without
     * printf: the line is made once per request. The escaped fields hold no
     * control character, so format_line would copy them as they are. */
    char line[64 + LIM_LOG_METHOD_BYTES + LIM_LOG_PATH_BYTES + 64];
    size_t off = format_line_start(lvl, line, sizeof line);
    put_str(line, &off, "access ");
    size_t start = off;
    append_escaped(line, &off, start + LIM_LOG_METHOD_BYTES - 1, method, strlen(method),
                   is_not_field);
    line[off++] = ' ';
    start = off;
    append_escaped(line, &off, start + LIM_LOG_PATH_BYTES - 1, path, strlen(path), is_not_field);
    line[off++] = ' ';
    off += put_decimal(line + off, status);
    line[off++] = ' ';
    off += put_decimal(line + off, us);
    put_str(line, &off, aborted ? "us (aborted)\n" : "us\n");
    defer_line(line, off);
}

static void *log_writer(void *arg)
{
    (void)arg;
    uint64_t reported = 0;
    pthread_mutex_lock(&W.mu);
    for (;;) {
        /* Nothing to write: sleep until a line comes (no wake-ups while the
         * server is idle), then gather lines for LOG_FLUSH_MS. */
        while (!W.stop && W.len == 0) {
            W.idle = 1;
            pthread_cond_wait(&W.cv, &W.mu);
        }
        W.idle = 0;
        if (!W.stop && W.len < LIM_LOG_BUFFER_BYTES / 2) {
            struct timespec ts = clock_deadline(LOG_FLUSH_MS);
            pthread_cond_timedwait(&W.cv, &W.mu, &ts);
        }
        char *out = W.buf;
        size_t n = W.len;
        W.buf = W.spare;
        W.spare = out;
        W.len = 0;
        uint64_t dropped = W.dropped;
        int stop = W.stop;
        pthread_mutex_unlock(&W.mu);
        write_all(out, n);
        if (dropped != reported) {
            log_msg(LOG_WARN,
                    "log: %llu access log lines dropped (standard error was slower than"
                    " the requests)",
                    (unsigned long long)(dropped - reported));
            reported = dropped;
        }
        pthread_mutex_lock(&W.mu);
        if (stop)
            break;
    }
    /* The last lines of callers that raced with the stop. */
    write_all(W.buf, W.len);
    W.len = 0;
    W.running = 0;
    pthread_mutex_unlock(&W.mu);
    return NULL;
}

int log_writer_start(void)
{
    pthread_mutex_lock(&W.mu);
    if (W.running) {
        pthread_mutex_unlock(&W.mu);
        return 0;
    }
    clock_cond_init(&W.cv);
    W.buf = xmalloc(LIM_LOG_BUFFER_BYTES);
    W.spare = xmalloc(LIM_LOG_BUFFER_BYTES);
    W.len = 0;
    W.stop = 0;
    W.running = 1;
    /* The writer takes no signal: it may start before the server blocks
     * SIGTERM and SIGINT for its sigwait, and a signal delivered to it
     * would end the process instead of stopping it cleanly. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int created = pthread_create(&W.thread, NULL, log_writer, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (created != 0) {
        W.running = 0;
        xfree(W.buf);
        xfree(W.spare);
        W.buf = W.spare = NULL;
        pthread_cond_destroy(&W.cv);
        pthread_mutex_unlock(&W.mu);
        return -1;
    }
    pthread_mutex_unlock(&W.mu);
    return 0;
}

void log_writer_stop(void)
{
    pthread_mutex_lock(&W.mu);
    if (!W.running || W.stop) {
        pthread_mutex_unlock(&W.mu);
        return;
    }
    W.stop = 1;
    W.idle = 0;
    pthread_cond_signal(&W.cv);
    pthread_mutex_unlock(&W.mu);
    pthread_join(W.thread, NULL);
    pthread_mutex_lock(&W.mu);
    xfree(W.buf);
    xfree(W.spare);
    W.buf = W.spare = NULL;
    W.stop = 0;
    pthread_cond_destroy(&W.cv);
    pthread_mutex_unlock(&W.mu);
}
