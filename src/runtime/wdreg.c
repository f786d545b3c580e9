/* The sessions' ChromeDrivers; runtime/wdreg.h. */
#include "runtime/wdreg.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "core/xalloc.h"
#include "runtime/chromedriver.h"
#include "runtime/chromium.h"
#include "runtime/sandbox.h"

#define DRIVER_START_TIMEOUT_MS 20000
#define DRIVER_STOP_GRACE_MS    1000

struct wdreg_sess {
    char id[64];
    char log_path[1300];
    char pid_path[1300];
    pthread_mutex_t lock; /* serializes starting and stopping the driver */
    int dead;             /* the session ended: never start a driver again */
    int ended;            /* a client sent session.end (atomic; set on a relay thread) */
    struct chromedriver *drv;
    int refs; /* under the registry's lock */
    struct wdreg_sess *next;
};

struct wdreg {
    pthread_mutex_t lock;
    struct wdreg_sess *list;
};

struct wdreg *wdreg_new(void)
{
    struct wdreg *r = xcalloc(1, sizeof *r);
    pthread_mutex_init(&r->lock, NULL);
    return r;
}

void wdreg_free(struct wdreg *r)
{
    if (!r)
        return;
    pthread_mutex_destroy(&r->lock);
    xfree(r);
}

struct wdreg_sess *wdreg_get(struct wdreg *r, const char *id)
{
    pthread_mutex_lock(&r->lock);
    struct wdreg_sess *s = r->list;
    while (s && strcmp(s->id, id) != 0)
        s = s->next;
    if (s)
        s->refs++;
    pthread_mutex_unlock(&r->lock);
    return s;
}

void wdreg_put(struct wdreg *r, struct wdreg_sess *s)
{
    pthread_mutex_lock(&r->lock);
    int last = --s->refs == 0;
    pthread_mutex_unlock(&r->lock);
    if (!last)
        return;
    chromedriver_free(s->drv);
    pthread_mutex_destroy(&s->lock);
    xfree(s);
}

/* Removes id from the registry; returns it with the registry's reference. */
static struct wdreg_sess *reg_unlink(struct wdreg *r, const char *id)
{
    pthread_mutex_lock(&r->lock);
    struct wdreg_sess **pp = &r->list;
    while (*pp && strcmp((*pp)->id, id) != 0)
        pp = &(*pp)->next;
    struct wdreg_sess *s = *pp;
    if (s)
        *pp = s->next;
    pthread_mutex_unlock(&r->lock);
    return s;
}

/* Beside the session folder, like Chromium's log; absolute when the folder
 * exists (the data folder may be given relative). */
static void paths_for(const char *user_data_dir, char *log, char *pid, size_t cap)
{
    char *abs = realpath(user_data_dir, NULL);
    const char *dir = abs ? abs : user_data_dir;
    snprintf(log, cap, "%s.chromedriver.log", dir);
    snprintf(pid, cap, "%s.chromedriver.pid", dir);
    xfree(abs);
}

/* "pid start_ticks": lets the ending hook of a session recovered after a
 * crash kill a driver the previous run left behind. */
static void pidfile_write(const char *path, const struct chromedriver *d)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    char buf[64];
    int n = snprintf(buf, sizeof buf, "%d %llu\n", (int)chromedriver_pid(d),
                     chromedriver_start_ticks(d));
    if (n > 0 && write(fd, buf, (size_t)n) != n)
        log_warn("cannot write %s", path);
    close(fd);
}

static void pidfile_kill_stale(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    int pid = 0;
    unsigned long long ticks = 0;
    if (fscanf(f, "%d %llu", &pid, &ticks) == 2 && pid > 0 &&
        chromium_kill_stale((pid_t)pid, ticks))
        log_info("killed chromedriver %d left by a previous run", pid);
    fclose(f);
}

/* Stops the session's driver (s->lock held). */
static void driver_drop(struct wdreg_sess *s)
{
    if (!s->drv)
        return;
    chromedriver_stop(s->drv, DRIVER_STOP_GRACE_MS);
    chromedriver_free(s->drv);
    s->drv = NULL;
    unlink(s->pid_path);
}

int wdreg_ensure(struct wdreg_sess *s, const char *debugger, struct sandbox *sb, int restart,
                 struct wdreg_view *v, struct err *e)
{
    pthread_mutex_lock(&s->lock);
    int rc = 0;
    if (s->dead) {
        rc = err_set(e, E_NOTFOUND, "not_found", "browser session %s not found or ended", s->id);
        goto out;
    }
    /* A client's session.end ended the driver's WebDriver session; the
     * driver may still accept the old socket for a moment, so the flag (not a
     * failed handshake) is what makes the next client get a fresh session. */
    int ended = __atomic_exchange_n(&s->ended, 0, __ATOMIC_ACQ_REL);
    if (s->drv && (restart || ended || chromedriver_exited(s->drv) ||
                   strcmp(chromedriver_debugger_address(s->drv), debugger) != 0))
        driver_drop(s);
    if (!s->drv) {
        struct chromedriver_opts o = {
            .debugger_address = debugger, .log_path = s->log_path, .sandbox = sb};
        rc = chromedriver_start(&o, DRIVER_START_TIMEOUT_MS, &s->drv, e);
        if (rc) {
            log_error("session %s: chromedriver: %s", s->id, e->message);
            rc = err_set(e, E_UNAVAIL, "browser_unavailable",
                         "the WebDriver BiDi endpoint could not start: %s", e->message);
            goto out;
        }
        pidfile_write(s->pid_path, s->drv);
    }
    snprintf(v->url, sizeof v->url, "%s", chromedriver_bidi_url(s->drv));
    snprintf(v->session_id, sizeof v->session_id, "%s", chromedriver_session_id(s->drv));
    snprintf(v->path, sizeof v->path, "%s", chromedriver_session_path(s->drv));
    v->caps = json_deep_copy(chromedriver_capabilities(s->drv));
out:
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* ---- a session's start and end ---- */

void wdreg_session_started(struct wdreg *r, const char *id, const char *user_data_dir)
{
    struct wdreg_sess *s = xcalloc(1, sizeof *s);
    snprintf(s->id, sizeof s->id, "%s", id);
    paths_for(user_data_dir, s->log_path, s->pid_path, sizeof s->log_path);
    pthread_mutex_init(&s->lock, NULL);
    s->refs = 1; /* the registry's */
    pthread_mutex_lock(&r->lock);
    s->next = r->list;
    r->list = s;
    pthread_mutex_unlock(&r->lock);
}

void wdreg_session_ending(struct wdreg *r, const char *id, const char *user_data_dir)
{
    char log[1300], pid[1300];
    paths_for(user_data_dir, log, pid, sizeof log);
    struct wdreg_sess *s = reg_unlink(r, id);
    if (s) {
        pthread_mutex_lock(&s->lock);
        s->dead = 1;
        if (s->drv)
            log_info("session %s: stopping chromedriver %d", s->id, chromedriver_pid(s->drv));
        driver_drop(s);
        pthread_mutex_unlock(&s->lock);
        wdreg_put(r, s);
    }
    pidfile_kill_stale(pid); /* a driver of a previous run (recovery) */
    unlink(pid);
    unlink(log);
}

void wdreg_mark_ended(struct wdreg *r, const char *id)
{
    struct wdreg_sess *s = wdreg_get(r, id);
    if (s) {
        __atomic_store_n(&s->ended, 1, __ATOMIC_RELEASE);
        wdreg_put(r, s);
    }
}

void wdreg_stop_all(struct wdreg *r)
{
    for (;;) {
        pthread_mutex_lock(&r->lock);
        struct wdreg_sess *s = r->list;
        if (s)
            r->list = s->next;
        pthread_mutex_unlock(&r->lock);
        if (!s)
            break;
        pthread_mutex_lock(&s->lock);
        s->dead = 1;
        driver_drop(s);
        pthread_mutex_unlock(&s->lock);
        wdreg_put(r, s);
    }
}
