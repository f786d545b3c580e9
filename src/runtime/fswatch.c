/* The watches of the fs API; runtime/fswatch.h. */
#include "runtime/fswatch.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/xalloc.h"
#include "runtime/sandbox.h"
#include "runtime/sessfs.h"
#include "runtime/sessmgr.h"

#define FS_WATCH_MASK                                                                              \
    (IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF |            \
     IN_MOVE_SELF)

struct wdir {
    int wd;
    char *path;
};

struct fswatch {
    char id[CRYPTO_ID_LEN + 1];
    char session_id[64];
    struct live *live; /* a reference, for "has the session ended" */
    char *root;        /* the session's files (host path), to watch new folders */
    uid_t uid;
    int ifd;
    int recursive;
    int budget; /* folders this watch may still add */
    struct wdir *dirs;
    size_t ndirs, capdirs;
    struct fswatches *set;
    void (*wake)(void *wctx); /* the events stream's, NULL when none */
    void *wctx;
    struct buf out; /* encoded frames not yet sent */
    int ended;      /* stopped, or its session ended: the stream ends */
    int refs;       /* the registry's, and the stream's */
    struct fswatch *next;
};

struct fswatches {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* the ticker's sleep (monotonic clock) */
    struct fswatch *list;
    pthread_t ticker;
    int ticking, stop;
};

struct fswatches *fswatches_new(void)
{
    struct fswatches *set = xcalloc(1, sizeof *set);
    pthread_mutex_init(&set->mu, NULL);
    clock_cond_init(&set->cv);
    return set;
}

static void watch_release(struct fswatch *w) /* under the set's lock */
{
    if (--w->refs > 0)
        return;
    close(w->ifd);
    for (size_t i = 0; i < w->ndirs; i++)
        xfree(w->dirs[i].path);
    xfree(w->dirs);
    xfree(w->root);
    buf_free(&w->out);
    sessmgr_put(w->live);
    xfree(w);
}

/* Takes w out of the set and ends its stream. Under the set's lock. */
static void watch_end(struct fswatch *w)
{
    for (struct fswatch **pp = &w->set->list; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            w->ended = 1;
            if (w->wake)
                w->wake(w->wctx);
            watch_release(w);
            return;
        }
}

void fswatches_free(struct fswatches *set)
{
    if (!set || set->list)
        return; /* watches left hold session references: the set stays (the process is ending) */
    pthread_cond_destroy(&set->cv);
    pthread_mutex_destroy(&set->mu);
    xfree(set);
}

static void *ticker(void *arg)
{
    struct fswatches *set = arg;
    pthread_mutex_lock(&set->mu);
    while (!set->stop) {
        struct timespec ts = clock_deadline(FSWATCH_TICK_MS);
        pthread_cond_timedwait(&set->cv, &set->mu, &ts);
        for (struct fswatch *w = set->list, *next; w; w = next) {
            next = w->next;
            char ws[512];
            if (live_ws_url(w->live, ws, sizeof ws) != 0)
                watch_end(w); /* watches die with their session */
            else if (w->wake)
                w->wake(w->wctx);
        }
    }
    pthread_mutex_unlock(&set->mu);
    return NULL;
}

/* Starts the ticker with the first watch. Under the set's lock. */
static void ticker_start(struct fswatches *set)
{
    if (set->ticking || set->stop)
        return;
    if (pthread_create(&set->ticker, NULL, ticker, set) != 0) {
        log_warn("fs: no watch ticker thread: events wait for the next call");
        set->stop = 1; /* tried once */
        return;
    }
    set->ticking = 1;
}

void fswatches_stop(struct fswatches *set)
{
    pthread_mutex_lock(&set->mu);
    set->stop = 1;
    int ticking = set->ticking;
    set->ticking = 0;
    pthread_cond_signal(&set->cv);
    pthread_mutex_unlock(&set->mu);
    if (ticking)
        pthread_join(set->ticker, NULL);
}

static void wdir_add(void *ctx, int wd, const char *path)
{
    struct fswatch *w = ctx;
    for (size_t i = 0; i < w->ndirs; i++)
        if (w->dirs[i].wd == wd) {
            xfree(w->dirs[i].path);
            w->dirs[i].path = xstrdup(path);
            return;
        }
    if (w->ndirs == w->capdirs) {
        w->capdirs = w->capdirs ? w->capdirs * 2 : 8;
        w->dirs = xrealloc(w->dirs, w->capdirs * sizeof *w->dirs);
    }
    w->dirs[w->ndirs].wd = wd;
    w->dirs[w->ndirs].path = xstrdup(path);
    w->ndirs++;
}

static const char *wdir_path(const struct fswatch *w, int wd)
{
    for (size_t i = 0; i < w->ndirs; i++)
        if (w->dirs[i].wd == wd)
            return w->dirs[i].path;
    return NULL;
}

static struct fswatch *watch_find(struct fswatches *set, const char *session_id,
                                  const char *id) /* under set->mu */
{
    for (struct fswatch *w = set->list; w; w = w->next)
        if (strcmp(w->id, id) == 0 && strcmp(w->session_id, session_id) == 0)
            return w;
    return NULL;
}

int fswatch_add(struct fswatches *set, struct sessmgr *sessions, struct sessfs *fs,
                const struct sandbox *sb, const char *session_id, const char *path, int recursive,
                char id[CRYPTO_ID_LEN + 1], int *path_rc, struct err *e)
{
    *path_rc = 0;
    int mine = 0;
    pthread_mutex_lock(&set->mu);
    ticker_start(set);
    for (struct fswatch *w = set->list; w; w = w->next)
        mine += strcmp(w->session_id, session_id) == 0;
    pthread_mutex_unlock(&set->mu);
    if (mine >= LIM_FS_WATCHES)
        return err_set(e, E_LIMIT, "rate_limited",
                       "a session has at most %d watches: stop one first", LIM_FS_WATCHES);
    struct fswatch *w = xcalloc(1, sizeof *w);
    w->set = set;
    w->ifd = sessfs_inotify_new(fs);
    if (w->ifd < 0) {
        int er = -w->ifd;
        xfree(w);
        return err_set(e, E_LIMIT, "rate_limited",
                       "no inotify instance left for this session's user: %s", strerror(er));
    }
    crypto_new_id(w->id);
    snprintf(w->session_id, sizeof w->session_id, "%s", session_id);
    w->root = xstrdup(sandbox_root(sb));
    w->uid = sandbox_uid(sb);
    w->recursive = recursive;
    w->budget = LIM_FS_WATCH_DIRS;
    buf_init(&w->out, FSWATCH_EVENTS_QUEUED);
    int rc =
        sessfs_watch_add(fs, w->ifd, path, FS_WATCH_MASK, w->recursive, &w->budget, wdir_add, w);
    if (rc == -E2BIG) {
        rc = err_set(e, E_INVALID, "bad_request",
                     "a recursive watch covers at most %d folders: %s has more", LIM_FS_WATCH_DIRS,
                     path);
    } else if (rc < 0) {
        *path_rc = rc;
    }
    if (rc) {
        close(w->ifd);
        for (size_t i = 0; i < w->ndirs; i++)
            xfree(w->dirs[i].path);
        xfree(w->dirs);
        xfree(w->root);
        buf_free(&w->out);
        xfree(w);
        return rc;
    }
    /* The watch keeps its own reference to the session. */
    w->live = sessmgr_get(sessions, session_id);
    if (w->live == NULL) {
        pthread_mutex_lock(&set->mu);
        w->refs = 1;
        watch_release(w);
        pthread_mutex_unlock(&set->mu);
        return err_set(e, E_CONFLICT, "session_ended", "the session ended");
    }
    snprintf(id, CRYPTO_ID_LEN + 1, "%s", w->id);
    pthread_mutex_lock(&set->mu);
    w->refs = 1;
    w->next = set->list;
    set->list = w;
    pthread_mutex_unlock(&set->mu);
    return 0;
}

int fswatch_remove(struct fswatches *set, const char *session_id, const char *id, struct err *e)
{
    pthread_mutex_lock(&set->mu);
    struct fswatch *w = watch_find(set, session_id, id);
    int rc = 0;
    if (w == NULL)
        rc = err_set(e, E_NOTFOUND, "not_found", "watch not found: %s", id);
    else
        watch_end(w);
    pthread_mutex_unlock(&set->mu);
    return rc;
}

int fswatch_attach(struct fswatches *set, const char *session_id, const char *id,
                   void (*wake)(void *wctx), void *(*attach)(void *actx, struct fswatch *w),
                   void *actx, struct err *e)
{
    pthread_mutex_lock(&set->mu);
    struct fswatch *w = watch_find(set, session_id, id);
    int rc = 0;
    if (w == NULL) {
        rc = err_set(e, E_NOTFOUND, "not_found", "watch not found: %s", id);
    } else if (w->wake != NULL) {
        rc = err_set(e, E_CONFLICT, "conflict", "watch %s already has an events stream", w->id);
    } else {
        w->refs++;
        w->wctx = attach(actx, w);
        w->wake = wake;
    }
    pthread_mutex_unlock(&set->mu);
    return rc;
}

/* Appends one FileSystemEvent frame. */
static void emit(struct fswatch *w, const char *type, const char *dir, const char *name, int is_dir)
{
    char *path =
        name && *name ? xasprintf("%s/%s", strcmp(dir, "/") ? dir : "", name) : xstrdup(dir);
    const char *base = strrchr(path, '/');
    json_t *ev = json_pack("{s:s,s:s,s:s,s:b}", "type", type, "name", base ? base + 1 : path,
                           "path", path, "is_dir", is_dir);
    char *text = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    xfree(path);
    if (!text)
        return;
    /* A client that does not read loses events past the queue's limit, as
     * kernel-images drops events past its channel's 100 slots. */
    if (buf_reserve(&w->out, strlen(text) + 8) == 0 && buf_append(&w->out, "data: ", 6) == 0 &&
        buf_append(&w->out, text, strlen(text)) == 0)
        (void)!buf_append(&w->out, "\n\n", 2);
    xfree(text);
}

/* A folder created under a recursive watch is watched too, resolved again
 * beneath the session's root as its user. */
static void watch_new_dir(struct fswatch *w, const char *path)
{
    struct sessfs fs;
    if (sessfs_open(&fs, w->root, w->uid) != 0)
        return;
    (void)!sessfs_watch_add(&fs, w->ifd, path, FS_WATCH_MASK, 1, &w->budget, wdir_add, w);
    sessfs_close(&fs);
}

/* Turns what inotify has queued into frames. Under the set's lock. */
static void drain(struct fswatch *w)
{
    char ebuf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n;
    while ((n = read(w->ifd, ebuf, sizeof ebuf)) > 0) {
        for (char *p = ebuf; p < ebuf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            p += sizeof *ev + ev->len;
            const char *dir = wdir_path(w, ev->wd);
            if (dir == NULL)
                continue;
            const char *name = ev->len ? ev->name : NULL;
            int is_dir = (ev->mask & IN_ISDIR) != 0;
            if (ev->mask & (IN_CREATE | IN_MOVED_TO)) {
                emit(w, "CREATE", dir, name, is_dir);
                if (is_dir && w->recursive && name) {
                    char *child = xasprintf("%s/%s", strcmp(dir, "/") ? dir : "", name);
                    watch_new_dir(w, child);
                    xfree(child);
                }
            } else if (ev->mask & IN_MODIFY) {
                emit(w, "WRITE", dir, name, is_dir);
            } else if (ev->mask & IN_DELETE) {
                emit(w, "DELETE", dir, name, is_dir);
            } else if (ev->mask & IN_MOVED_FROM) {
                emit(w, "RENAME", dir, name, is_dir);
            } else if (ev->mask & IN_DELETE_SELF) {
                emit(w, "DELETE", dir, NULL, 1);
            } else if (ev->mask & IN_MOVE_SELF) {
                emit(w, "RENAME", dir, NULL, 1);
            }
        }
    }
}

long fswatch_read(struct fswatch *w, char *dst, size_t cap)
{
    pthread_mutex_lock(&w->set->mu);
    if (!w->ended)
        drain(w);
    long r;
    if (w->out.len == 0) {
        r = w->ended ? -1 : 0;
    } else {
        size_t n = w->out.len < cap ? w->out.len : cap;
        memcpy(dst, w->out.p, n);
        memmove(w->out.p, w->out.p + n, w->out.len - n);
        w->out.len -= n;
        r = (long)n;
    }
    pthread_mutex_unlock(&w->set->mu);
    return r;
}

void fswatch_detach(struct fswatch *w)
{
    struct fswatches *set = w->set;
    pthread_mutex_lock(&set->mu);
    w->wake = NULL;
    w->wctx = NULL;
    watch_release(w);
    pthread_mutex_unlock(&set->mu);
}
