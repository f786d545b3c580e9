#include "core/netns.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"

#define NETNS_MAX 8192

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int table[NETNS_MAX]; /* fd + 1; 0 = free */
static int next_hint = 1;
static int host_fd = -1;

int netns_init(void)
{
    if (host_fd >= 0)
        return 0;
    int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    host_fd = fd;
    return 0;
}

int netns_register(int fd)
{
    pthread_mutex_lock(&mu);
    for (int k = 0; k < NETNS_MAX - 1; k++) {
        int id = 1 + (next_hint - 1 + k) % (NETNS_MAX - 1);
        if (table[id] == 0) {
            table[id] = fd + 1;
            next_hint = id + 1;
            pthread_mutex_unlock(&mu);
            return id;
        }
    }
    pthread_mutex_unlock(&mu);
    close(fd);
    return -ENOSPC;
}

void netns_unregister(int id)
{
    if (id <= 0 || id >= NETNS_MAX)
        return;
    pthread_mutex_lock(&mu);
    int fd = table[id] - 1;
    table[id] = 0;
    pthread_mutex_unlock(&mu);
    if (fd >= 0)
        close(fd);
}

int netns_socket(int id, int domain, int type)
{
    if (id == 0) {
        int s = socket(domain, type, 0);
        return s < 0 ? -errno : s;
    }
    if (id < 0 || id >= NETNS_MAX || host_fd < 0)
        return -ENOENT;
    /* A duplicate, so that an unregister racing with us cannot close it. */
    pthread_mutex_lock(&mu);
    int fd = table[id] ? fcntl(table[id] - 1, F_DUPFD_CLOEXEC, 0) : -1;
    int dup_errno = table[id] ? errno : ENOENT;
    pthread_mutex_unlock(&mu);
    if (fd < 0)
        return -dup_errno;
    if (setns(fd, CLONE_NEWNET) != 0) {
        int er = errno;
        close(fd);
        return -er;
    }
    int s = socket(domain, type, 0);
    int er = errno;
    if (setns(host_fd, CLONE_NEWNET) != 0) {
        log_error("netns: cannot return to the host's network namespace: %s", strerror(errno));
        abort();
    }
    close(fd);
    return s < 0 ? -er : s;
}

struct mk {
    int fd;
    int err;
};

static void *create_thread(void *arg)
{
    struct mk *m = arg;
    if (unshare(CLONE_NEWNET) != 0) {
        m->err = errno;
        return NULL;
    }
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
    if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) != 0) {
        m->err = errno;
    } else {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0)
            m->err = errno;
    }
    if (s >= 0)
        close(s);
    if (m->err == 0) {
        m->fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (m->fd < 0)
            m->err = errno;
    }
    /* The thread ends here, and with it its membership of the namespace;
     * the descriptor keeps the namespace alive. */
    return NULL;
}

int netns_create(void)
{
    struct mk m = {-1, 0};
    pthread_t t;
    int rc = pthread_create(&t, NULL, create_thread, &m);
    if (rc != 0)
        return -rc;
    pthread_join(t, NULL);
    return m.fd >= 0 ? m.fd : -(m.err ? m.err : EIO);
}
