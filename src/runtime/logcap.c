/* runtime/logcap: see logcap.h. One thread polls every open log pipe and a
 * wake-up eventfd (a new pipe to watch); the list is small (a few logs per
 * session) and rebuilt on each pass. */
#include "runtime/logcap.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fdio.h"
#include "core/log.h"
#include "core/xalloc.h"

struct capped {
    int rfd;  /* read end of the pipe */
    int file; /* the log, O_APPEND */
    long long cap, written;
    int full; /* the notice is written; the rest is dropped */
    struct capped *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct capped *logs;
static size_t nlogs;
static int wake_fd = -1;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int started; /* the drain thread runs */

static void append(struct capped *c, const char *p, size_t n)
{
    if (c->full)
        return;
    size_t room = c->written < c->cap ? (size_t)(c->cap - c->written) : 0;
    size_t take = n < room ? n : room;
    if (take && fdio_write_all(c->file, p, take, FDIO_NO_DEADLINE) == 0)
        c->written += (long long)take;
    if (n > room) {
        (void)!write(c->file, LOGCAP_NOTICE, sizeof LOGCAP_NOTICE - 1);
        c->full = 1;
    }
}

static void *drain(void *arg)
{
    (void)arg;
    struct pollfd *pf = NULL;
    struct capped **who = NULL;
    size_t cap = 0;
    char buf[65536];
    for (;;) {
        pthread_mutex_lock(&mu);
        if (!pf || nlogs + 1 > cap) {
            cap = (nlogs + 1) * 2;
            pf = xrealloc(pf, cap * sizeof *pf);
            who = xrealloc(who, cap * sizeof *who);
        }
        size_t n = 0;
        pf[n].fd = wake_fd;
        pf[n].events = POLLIN;
        who[n++] = NULL;
        for (struct capped *c = logs; c; c = c->next) {
            pf[n].fd = c->rfd;
            pf[n].events = POLLIN;
            who[n++] = c;
        }
        pthread_mutex_unlock(&mu);
        if (poll(pf, n, -1) < 0)
            continue;
        if (pf[0].revents & POLLIN) {
            uint64_t v;
            (void)!read(wake_fd, &v, sizeof v);
        }
        /* Only this thread reads or removes entries: `who` stays valid. */
        for (size_t i = 1; i < n; i++) {
            if (!pf[i].revents)
                continue;
            struct capped *c = who[i];
            ssize_t r = read(c->rfd, buf, sizeof buf);
            if (r > 0) {
                append(c, buf, (size_t)r);
                continue;
            }
            if (r < 0 && (errno == EINTR || errno == EAGAIN))
                continue;
            pthread_mutex_lock(&mu);
            for (struct capped **pp = &logs; *pp; pp = &(*pp)->next)
                if (*pp == c) {
                    *pp = c->next;
                    nlogs--;
                    break;
                }
            pthread_mutex_unlock(&mu);
            close(c->rfd);
            close(c->file);
            xfree(c);
        }
    }
    return NULL;
}

static void start(void)
{
    wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd < 0)
        return;
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    started = pthread_create(&t, &at, drain, NULL) == 0;
    pthread_attr_destroy(&at);
}

int logcap_drain(int rfd, const char *path, long long cap)
{
    pthread_once(&once, start);
    if (!started) {
        close(rfd);
        return -EAGAIN;
    }
    int file = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    struct stat st;
    if (file < 0 || fstat(file, &st) != 0) {
        int er = -errno;
        if (file >= 0)
            close(file);
        close(rfd);
        return er;
    }
    (void)fcntl(rfd, F_SETFL, O_NONBLOCK);
    struct capped *c = xcalloc(1, sizeof *c);
    c->rfd = rfd;
    c->file = file;
    c->cap = cap;
    c->written = st.st_size;
    c->full = st.st_size >= cap;
    pthread_mutex_lock(&mu);
    c->next = logs;
    logs = c;
    nlogs++;
    pthread_mutex_unlock(&mu);
    uint64_t one = 1;
    (void)!write(wake_fd, &one, sizeof one);
    return 0;
}

int logcap_pipe(const char *path, long long cap)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -errno;
    int rc = logcap_drain(p[0], path, cap);
    if (rc < 0) {
        close(p[1]);
        return rc;
    }
    return p[1];
}
