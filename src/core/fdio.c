/*
 * fdio: whole-buffer writes and reads. A descriptor's kind is learned from
 * the first call that tells it (send's ENOTSOCK, fstat when a deadline needs
 * it), not asked up front, so that the common case (a socket, or no
 * deadline) costs no extra system call.
 */
#include "core/fdio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/xalloc.h"

/* Waits until fd is ready for events or the deadline passed (none: as long as
 * it takes). 0 (ready, or an error or hang-up the next call reports),
 * -ETIMEDOUT, or a negative errno of poll. */
static int wait_ready(int fd, short events, int64_t deadline_ms)
{
    for (;;) {
        int timeout = -1;
        if (deadline_ms != FDIO_NO_DEADLINE) {
            int64_t left = deadline_ms - clock_mono_ms();
            if (left <= 0)
                return -ETIMEDOUT;
            timeout = left > INT_MAX ? INT_MAX : (int)left;
        }
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, timeout);
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return -errno;
    }
}

/* 1 when fd is a pipe (or FIFO) without O_NONBLOCK: a write to it blocks
 * until all of it fits, so a write bounded by a deadline gives it at most
 * PIPE_BUF bytes, which fit once poll said there is room. */
static int blocking_pipe(int fd)
{
    struct stat st;
    int fl = fcntl(fd, F_GETFL);
    return fl >= 0 && !(fl & O_NONBLOCK) && fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
}

int fdio_write_all(int fd, const void *buf, size_t len, int64_t deadline_ms)
{
    const char *p = buf;
    int timed = deadline_ms != FDIO_NO_DEADLINE;
    int sock = 1;   /* until send says otherwise */
    int small = -1; /* blocking_pipe(fd), asked when a deadline needs it */
    while (len > 0) {
        if (timed) {
            int rc = wait_ready(fd, POLLOUT, deadline_ms);
            if (rc)
                return rc;
        }
        ssize_t w;
        if (sock) {
            w = send(fd, p, len, MSG_NOSIGNAL | (timed ? MSG_DONTWAIT : 0));
            if (w < 0 && errno == ENOTSOCK) {
                sock = 0;
                continue;
            }
        } else {
            size_t n = len;
            if (timed && small < 0)
                small = blocking_pipe(fd);
            if (timed && small && n > PIPE_BUF)
                n = PIPE_BUF;
            w = write(fd, p, n);
        }
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                return -errno;
            if (!timed) {
                int rc = wait_ready(fd, POLLOUT, FDIO_NO_DEADLINE);
                if (rc)
                    return rc;
            }
            continue;
        }
        if (w == 0)
            return -EIO;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int fdio_read_all(int fd, void *buf, size_t cap, size_t *got, int64_t deadline_ms)
{
    char *b = buf;
    int timed = deadline_ms != FDIO_NO_DEADLINE;
    *got = 0;
    while (*got < cap) {
        if (timed) {
            int rc = wait_ready(fd, POLLIN, deadline_ms);
            if (rc)
                return rc;
        }
        ssize_t r = read(fd, b + *got, cap - *got);
        if (r == 0)
            return 0;
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                return -errno;
            if (!timed) {
                int rc = wait_ready(fd, POLLIN, FDIO_NO_DEADLINE);
                if (rc)
                    return rc;
            }
            continue;
        }
        *got += (size_t)r;
    }
    return 0;
}

int fdio_read_file(const char *path, size_t max, char **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    int err = fstat(fd, &st) != 0 ? -errno : (size_t)st.st_size > max ? -EFBIG : 0;
    if (err) {
        close(fd);
        return err;
    }
    size_t n = (size_t)st.st_size, got = 0;
    char *buf = xmalloc(n ? n : 1);
    int rc = fdio_read_all(fd, buf, n, &got, FDIO_NO_DEADLINE);
    close(fd);
    if (rc != 0 || got != n) {
        xfree(buf);
        return -EIO;
    }
    *out = buf;
    *len = n;
    return 0;
}
