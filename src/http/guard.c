/*
 * The head watch and the body budget (guard.h).
 *
 * The watch keeps the connections that wait for a request head in one list
 * ordered by deadline: every deadline is "now + the same delay" on the
 * monotonic clock, so appending keeps the order, and the thread only ever
 * looks at the first entry, sleeping until its deadline. A connection leaves
 * the list when its head arrives, so the cost per request is two short
 * critical sections. The socket is shut down, never closed, under the lock
 * that headwatch_conn_free takes: libmicrohttpd tells us a connection goes
 * away (MHD_CONNECTION_NOTIFY_CLOSED) before it closes the socket, so the
 * descriptor shut down is always still that connection's.
 */
#include "http/guard.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/limits.h"
#include "core/xalloc.h"

struct head_conn {
    struct head_watch *hw;
    int fd;
    int waiting; /* in hw's list */
    int linger;  /* answered before its body was read (headwatch_linger) */
    int64_t deadline_ms;
    struct head_conn *prev, *next;
};

/* A socket kept after its connection ended, its input read and dropped. */
struct lingering {
    int fd; /* a dup of the connection's socket; ours */
    int64_t until_ms;
};

struct head_watch {
    pthread_mutex_t mu;
    pthread_t thread;
    int wake_fd; /* eventfd: the first deadline moved, a socket lingers, or stop */
    int64_t delay_ms;
    struct head_conn *first, *last; /* waiting connections, by deadline */
    /* Appended under mu by headwatch_conn_free; only the thread removes
     * entries and closes their sockets. */
    struct lingering lingering[LIM_HTTP_LINGER_CONNS];
    size_t nlingering;
    int stop;
    unsigned long cut;
};

static void wake(struct head_watch *hw)
{
    uint64_t one = 1;
    ssize_t w = write(hw->wake_fd, &one, sizeof one);
    (void)w; /* the counter is at most saturated: the thread wakes anyway */
}

static void unlink_conn(struct head_watch *hw, struct head_conn *hc)
{
    if (!hc->waiting)
        return;
    if (hc->prev)
        hc->prev->next = hc->next;
    else
        hw->first = hc->next;
    if (hc->next)
        hc->next->prev = hc->prev;
    else
        hw->last = hc->prev;
    hc->prev = hc->next = NULL;
    hc->waiting = 0;
}

/* Appends hc with a deadline of now + the delay. Under hw->mu. */
static void append_conn(struct head_watch *hw, struct head_conn *hc)
{
    unlink_conn(hw, hc);
    hc->deadline_ms = clock_mono_ms() + hw->delay_ms;
    hc->prev = hw->last;
    hc->next = NULL;
    if (hw->last)
        hw->last->next = hc;
    else
        hw->first = hc;
    hw->last = hc;
    hc->waiting = 1;
    if (hw->first == hc)
        wake(hw); /* the thread slept without a deadline */
}

/* Reads and drops what a lingering socket holds: 0 while it stays open, -1
 * when the client closed it (or it failed). At most 1 MiB per call, so that
 * one fast client cannot keep the thread. */
static int drain(int fd)
{
    char scratch[16384];
    for (int i = 0; i < 64; i++) {
        ssize_t n = recv(fd, scratch, sizeof scratch, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            return -1;
        if (n < 0)
            return 0;
    }
    return 0;
}

static void *watch_main(void *arg)
{
    struct head_watch *hw = arg;
    struct pollfd pfd[1 + LIM_HTTP_LINGER_CONNS];
    pthread_mutex_lock(&hw->mu);
    while (!hw->stop) {
        int64_t now = clock_mono_ms();
        while (hw->first && hw->first->deadline_ms <= now) {
            struct head_conn *hc = hw->first;
            unlink_conn(hw, hc);
            (void)shutdown(hc->fd, SHUT_RDWR);
            hw->cut++;
        }
        for (size_t i = hw->nlingering; i-- > 0;)
            if (hw->lingering[i].until_ms <= now) {
                close(hw->lingering[i].fd);
                hw->lingering[i] = hw->lingering[--hw->nlingering];
            }
        int64_t next = hw->first ? hw->first->deadline_ms : INT64_MAX;
        size_t n = hw->nlingering;
        pfd[0] = (struct pollfd){.fd = hw->wake_fd, .events = POLLIN};
        for (size_t i = 0; i < n; i++) {
            pfd[1 + i] = (struct pollfd){.fd = hw->lingering[i].fd, .events = POLLIN};
            if (hw->lingering[i].until_ms < next)
                next = hw->lingering[i].until_ms;
        }
        pthread_mutex_unlock(&hw->mu);
        int timeout = next == INT64_MAX ? -1 : next - now > 60000 ? 60000 : (int)(next - now);
        if (poll(pfd, 1 + n, timeout) > 0) {
            uint64_t v;
            if ((pfd[0].revents & POLLIN) && read(hw->wake_fd, &v, sizeof v) < 0)
                v = 0;
            /* Entries 0..n-1 are the ones polled: appends go after them,
             * and only this thread removes. */
            for (size_t i = 0; i < n; i++)
                if (pfd[1 + i].revents && drain(pfd[1 + i].fd) < 0)
                    pfd[1 + i].fd = -1; /* closed below */
        }
        pthread_mutex_lock(&hw->mu);
        for (size_t i = n; i-- > 0;)
            if (pfd[1 + i].fd < 0) {
                close(hw->lingering[i].fd);
                hw->lingering[i] = hw->lingering[--hw->nlingering];
            }
    }
    for (size_t i = 0; i < hw->nlingering; i++)
        close(hw->lingering[i].fd);
    hw->nlingering = 0;
    pthread_mutex_unlock(&hw->mu);
    return NULL;
}

int headwatch_start(unsigned deadline_s, struct head_watch **out, struct err *e)
{
    *out = NULL;
    int wfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wfd < 0)
        return err_set(e, E_INTERNAL, "internal", "cannot start the request head watch: %s",
                       strerror(errno));
    struct head_watch *hw = xcalloc(1, sizeof *hw);
    pthread_mutex_init(&hw->mu, NULL);
    hw->wake_fd = wfd;
    hw->delay_ms = (int64_t)deadline_s * 1000;
    int rc = pthread_create(&hw->thread, NULL, watch_main, hw);
    if (rc != 0) {
        close(wfd);
        pthread_mutex_destroy(&hw->mu);
        xfree(hw);
        return err_set(e, E_INTERNAL, "internal", "cannot start the request head watch: %s",
                       strerror(rc));
    }
    *out = hw;
    return 0;
}

void headwatch_stop(struct head_watch *hw)
{
    if (!hw)
        return;
    pthread_mutex_lock(&hw->mu);
    hw->stop = 1;
    wake(hw);
    pthread_mutex_unlock(&hw->mu);
    pthread_join(hw->thread, NULL);
    close(hw->wake_fd);
    pthread_mutex_destroy(&hw->mu);
    xfree(hw);
}

struct head_conn *headwatch_conn_new(struct head_watch *hw, int fd)
{
    struct head_conn *hc = xcalloc(1, sizeof *hc);
    hc->hw = hw;
    hc->fd = fd;
    pthread_mutex_lock(&hw->mu);
    append_conn(hw, hc);
    pthread_mutex_unlock(&hw->mu);
    return hc;
}

void headwatch_conn_free(struct head_conn *hc)
{
    if (!hc)
        return;
    struct head_watch *hw = hc->hw;
    pthread_mutex_lock(&hw->mu);
    unlink_conn(hw, hc);
    if (hc->linger && !hw->stop && hw->nlingering < LIM_HTTP_LINGER_CONNS) {
        int fd = fcntl(hc->fd, F_DUPFD_CLOEXEC, 0);
        if (fd >= 0) {
            hw->lingering[hw->nlingering++] =
                (struct lingering){fd, clock_mono_ms() + LIM_HTTP_LINGER_MS};
            wake(hw);
        }
    }
    pthread_mutex_unlock(&hw->mu);
    xfree(hc);
}

void headwatch_linger(struct head_conn *hc)
{
    pthread_mutex_lock(&hc->hw->mu);
    hc->linger = 1;
    pthread_mutex_unlock(&hc->hw->mu);
}

void headwatch_head_done(struct head_conn *hc)
{
    pthread_mutex_lock(&hc->hw->mu);
    unlink_conn(hc->hw, hc);
    pthread_mutex_unlock(&hc->hw->mu);
}

void headwatch_head_wait(struct head_conn *hc)
{
    pthread_mutex_lock(&hc->hw->mu);
    append_conn(hc->hw, hc);
    pthread_mutex_unlock(&hc->hw->mu);
}

unsigned long headwatch_cut_count(struct head_watch *hw)
{
    pthread_mutex_lock(&hw->mu);
    unsigned long n = hw->cut;
    pthread_mutex_unlock(&hw->mu);
    return n;
}

/* ---- the body budget ---- */

#define BUDGET_SLOTS 256

/* What one tenant holds; exists only while it holds something. */
struct tenant_use {
    struct tenant_use *next;
    size_t held;
    char key[]; /* NUL-terminated */
};

struct body_budget {
    pthread_mutex_t mu;
    size_t total, share, held;
    struct tenant_use *slots[BUDGET_SLOTS];
};

static struct tenant_use **slot_of(struct body_budget *b, const char *tenant)
{
    unsigned h = 2166136261u;
    for (const char *p = tenant; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    struct tenant_use **pp = &b->slots[h % BUDGET_SLOTS];
    while (*pp && strcmp((*pp)->key, tenant) != 0)
        pp = &(*pp)->next;
    return pp; /* the tenant's entry, or the NULL link to append it at */
}

struct body_budget *budget_new(size_t total, size_t share)
{
    struct body_budget *b = xcalloc(1, sizeof *b);
    pthread_mutex_init(&b->mu, NULL);
    b->total = total;
    b->share = share;
    return b;
}

void budget_free(struct body_budget *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < BUDGET_SLOTS; i++)
        while (b->slots[i]) {
            struct tenant_use *u = b->slots[i];
            b->slots[i] = u->next;
            xfree(u);
        }
    pthread_mutex_destroy(&b->mu);
    xfree(b);
}

int budget_take(struct body_budget *b, const char *tenant, size_t n)
{
    pthread_mutex_lock(&b->mu);
    struct tenant_use **pp = slot_of(b, tenant);
    size_t mine = *pp ? (*pp)->held : 0;
    int rc = 0;
    if (n > b->share || mine > b->share - n)
        rc = E_LIMIT;
    else if (n > b->total || b->held > b->total - n)
        rc = E_UNAVAIL;
    if (rc == 0 && n) {
        if (!*pp) {
            size_t kl = strlen(tenant);
            struct tenant_use *u = xmalloc(sizeof *u + kl + 1);
            u->next = NULL;
            u->held = 0;
            memcpy(u->key, tenant, kl + 1);
            *pp = u;
        }
        (*pp)->held += n;
        b->held += n;
    }
    pthread_mutex_unlock(&b->mu);
    return rc;
}

void budget_give(struct body_budget *b, const char *tenant, size_t n)
{
    if (!n)
        return;
    pthread_mutex_lock(&b->mu);
    struct tenant_use **pp = slot_of(b, tenant);
    struct tenant_use *u = *pp;
    if (u) {
        size_t k = n < u->held ? n : u->held;
        u->held -= k;
        b->held -= k;
        if (u->held == 0) {
            *pp = u->next;
            xfree(u);
        }
    }
    pthread_mutex_unlock(&b->mu);
}

size_t budget_held(struct body_budget *b, const char *tenant)
{
    pthread_mutex_lock(&b->mu);
    size_t n = b->held;
    if (tenant) {
        struct tenant_use **pp = slot_of(b, tenant);
        n = *pp ? (*pp)->held : 0;
    }
    pthread_mutex_unlock(&b->mu);
    return n;
}
