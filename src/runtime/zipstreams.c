/* download_dir_zip's streams; runtime/zipstreams.h. */
#include "runtime/zipstreams.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/limits.h"
#include "core/log.h"
#include "core/share.h"
#include "core/xalloc.h"
#include "runtime/sesshelp.h"

struct zipstreams {
    struct share share; /* streams being zipped, with each organization's and session's share */
    int streams;        /* not freed yet (atomic) */
    int idle_s;         /* an unread stream ends after this long */
};

struct zipstream {
    struct zipstreams *zs;
    pthread_mutex_t mu;
    int rfd, wfd;
    void (*wake)(void *ctx); /* NULL once the response is over */
    void *ctx;
    int refs; /* the response's and the relay's */
    struct sesshelp_zip helper;
    char org_id[64], session_id[64]; /* the share the stream holds */
    char path[PATH_MAX];
};

struct zipstreams *zipstreams_new(int idle_s)
{
    struct zipstreams *zs = xcalloc(1, sizeof *zs);
    zs->idle_s = idle_s > 0 && idle_s <= LIM_FS_ZIP_IDLE_S ? idle_s : LIM_FS_ZIP_IDLE_S;
    struct share s = SHARE_INIT("folder downloads being zipped", LIM_FS_ZIP_STREAMS,
                                LIM_FS_ZIP_STREAMS_PER_ORG, LIM_FS_ZIP_STREAMS_PER_SESSION);
    zs->share = s;
    return zs;
}

void zipstreams_free(struct zipstreams *zs)
{
    if (!zs || __atomic_load_n(&zs->streams, __ATOMIC_ACQUIRE) > 0)
        return; /* a relay still ends: the set stays (the process is ending) */
    xfree(zs->share.keys);
    pthread_mutex_destroy(&zs->share.mu);
    xfree(zs);
}

static void zstream_release(struct zipstream *z) /* under z->mu; unlocks */
{
    int last = --z->refs == 0;
    pthread_mutex_unlock(&z->mu);
    if (last) {
        __atomic_sub_fetch(&z->zs->streams, 1, __ATOMIC_ACQ_REL);
        pthread_mutex_destroy(&z->mu);
        xfree(z);
    }
}

/* Writes to the response's pipe (non-blocking), waiting for the client to
 * read at most the set's idle_s at a time: -ETIMEDOUT past it, -EPIPE when
 * the response ended. */
static int zwrite(struct zipstream *z, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(z->wfd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                return -errno;
            struct pollfd pf = {z->wfd, POLLOUT, 0};
            int r = poll(&pf, 1, z->zs->idle_s * 1000);
            if (r == 0)
                return -ETIMEDOUT;
            if (r < 0 && errno != EINTR)
                return -errno;
            continue;
        }
        p += w;
        n -= (size_t)w;
        pthread_mutex_lock(&z->mu);
        if (z->wake)
            z->wake(z->ctx);
        pthread_mutex_unlock(&z->mu);
    }
    return 0;
}

static void *zrelay(void *arg)
{
    struct zipstream *z = arg;
    char chunk[65536];
    int rc = 0;
    for (;;) {
        ssize_t n = read(z->helper.out, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if ((rc = zwrite(z, chunk, (size_t)n)) < 0)
            break;
    }
    int hrc = sesshelp_zip_end(&z->helper, rc < 0);
    if (rc == -ETIMEDOUT)
        log_warn("fs: download_dir_zip of %s in session %s ended: the client read nothing for %d s",
                 z->path, z->session_id, z->zs->idle_s);
    else if (rc == 0 && hrc < 0)
        log_warn("fs: download_dir_zip of %s stopped: %s (the client gets a truncated zip)",
                 z->path, strerror(-hrc));
    share_give(&z->zs->share, z->org_id, z->session_id);
    pthread_mutex_lock(&z->mu);
    close(z->wfd); /* the reader sees the end */
    if (z->wake)
        z->wake(z->ctx);
    zstream_release(z);
    return NULL;
}

long zipstream_read(struct zipstream *z, char *buf, size_t cap)
{
    ssize_t n = read(z->rfd, buf, cap);
    if (n > 0)
        return (long)n;
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0; /* parked until the relay's next write */
    return -1;
}

void zipstream_close(struct zipstream *z)
{
    pthread_mutex_lock(&z->mu);
    z->wake = NULL;
    close(z->rfd); /* a relay still writing gets EPIPE and stops */
    zstream_release(z);
}

int zipstream_start(struct zipstreams *zs, const struct sandbox *sb, const struct sessfs *fs,
                    const char *path, const char *org_id, const char *session_id,
                    void (*wake)(void *ctx), void *ctx, struct zipstream **out, struct err *e)
{
    *out = NULL;
    int rc = share_take_or_err(&zs->share, org_id, session_id, zs->idle_s, e);
    if (rc)
        return rc;
    struct zipstream *z = xcalloc(1, sizeof *z);
    z->zs = zs;
    snprintf(z->org_id, sizeof z->org_id, "%s", org_id);
    snprintf(z->session_id, sizeof z->session_id, "%s", session_id);
    snprintf(z->path, sizeof z->path, "%s", path);
    int p[2] = {-1, -1};
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0 ||
        (rc = sesshelp_zip_start(sb, fs, path, &z->helper)) != 0) {
        int er = rc ? -rc : errno;
        if (p[0] >= 0) {
            close(p[0]);
            close(p[1]);
        }
        share_give(&zs->share, z->org_id, z->session_id);
        xfree(z);
        return err_set(e, E_INTERNAL, "internal", "failed to create zip: %s", strerror(er));
    }
    pthread_mutex_init(&z->mu, NULL);
    __atomic_add_fetch(&zs->streams, 1, __ATOMIC_ACQ_REL);
    z->rfd = p[0];
    z->wfd = p[1];
    z->refs = 2;
    z->wake = wake;
    z->ctx = ctx;
    *out = z;
    return 0;
}

void zipstream_relay(struct zipstream *z)
{
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &at, zrelay, z) != 0) {
        /* No relay: the response reads an immediate end (an empty body). */
        (void)sesshelp_zip_end(&z->helper, 1);
        share_give(&z->zs->share, z->org_id, z->session_id);
        close(z->wfd);
        pthread_mutex_lock(&z->mu);
        zstream_release(z);
    }
    pthread_attr_destroy(&at);
}
