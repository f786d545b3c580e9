/*
 * Integration tests for runtime/chromium: they start real Chromium (and Xvfb)
 * processes, so every test registers what it launches and the per-test
 * teardown stops it even when an assertion fails. The last case checks that
 * no process started here survives.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/err.h"
#include "core/xalloc.h"
#include "runtime/chromium.h"

#define LAUNCH_MS 25000
#define MAX_LIVE  16

static char root[64];
static struct chromium *live[MAX_LIVE];
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;

/* Every browser process group ever started here, checked at the end. */
static pid_t groups[64];
static int ngroups;

static void track(struct chromium *c)
{
    pthread_mutex_lock(&live_lock);
    if (ngroups < 64)
        groups[ngroups++] = chromium_pid(c);
    for (int i = 0; i < MAX_LIVE; i++) {
        if (!live[i]) {
            live[i] = c;
            break;
        }
    }
    pthread_mutex_unlock(&live_lock);
}

/* Stops and frees one tracked browser, removing its folder. */
static void release(struct chromium *c)
{
    pthread_mutex_lock(&live_lock);
    for (int i = 0; i < MAX_LIVE; i++)
        if (live[i] == c)
            live[i] = NULL;
    pthread_mutex_unlock(&live_lock);
    chromium_stop(c, 0, 1);
    chromium_free(c);
}

static int stop_all(void **state)
{
    (void)state;
    for (int i = 0; i < MAX_LIVE; i++)
        if (live[i])
            release(live[i]);
    return 0;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    (void)remove(path);
    return 0;
}

static int group_setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/bd_chromium_XXXXXX");
    return mkdtemp(root) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)stop_all(state);
    (void)nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

static struct chromium_opts base_opts(const char *name)
{
    struct chromium_opts o;
    memset(&o, 0, sizeof o);
    o.binary = CHROMIUM_DEFAULT_BINARY;
    o.user_data_dir = xasprintf("%s/%s", root, name); /* freed by the caller */
    o.headless = 1;
    o.width = 1024;
    o.height = 768;
    return o;
}

/* Launches and tracks, failing the test with the launch error. */
static struct chromium *launch_ok(const struct chromium_opts *o, const char *what)
{
    struct err e;
    err_init(&e);
    struct chromium *c = NULL;
    int rc = chromium_launch(o, LAUNCH_MS, &c, &e);
    if (rc != 0)
        fail_msg("%s: launch failed (%d): %s", what, rc, e.message);
    track(c);
    return c;
}

/* method path on 127.0.0.1:port; returns the owned body of a 200 answer or NULL. */
static char *http_req(int port, const char *method, const char *path)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return NULL;
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    char req[256];
    int n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n", method,
                     path, port);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 || write(fd, req, (size_t)n) != n) {
        close(fd);
        return NULL;
    }
    size_t cap = 65536, used = 0;
    char *buf = xmalloc(cap);
    for (;;) {
        ssize_t r = read(fd, buf + used, cap - 1 - used);
        if (r <= 0)
            break;
        used += (size_t)r;
        buf[used] = '\0';
        /* The DevTools server keeps the connection open: stop at Content-Length. */
        char *hend = strstr(buf, "\r\n\r\n");
        char *cl = strcasestr(buf, "\r\nContent-Length:");
        if (hend && cl && cl < hend &&
            used >= (size_t)(hend + 4 - buf) + strtoul(cl + 17, NULL, 10))
            break;
        if (used == cap - 1)
            break;
    }
    close(fd);
    buf[used] = '\0';
    char *body = strstr(buf, "\r\n\r\n");
    char *out = (strncmp(buf, "HTTP/1.1 200", 12) == 0 && body) ? xstrdup(body + 4) : NULL;
    xfree(buf);
    return out;
}

/* /json/version as JSON (owned), or NULL. */
static json_t *json_version(const struct chromium *c)
{
    char *body = http_req(chromium_port(c), "GET", "/json/version");
    if (!body)
        return NULL;
    json_t *j = json_loads(body, 0, NULL);
    xfree(body);
    return j;
}

static int gone(pid_t pid)
{
    return kill(pid, 0) != 0 && errno == ESRCH;
}

static int path_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *buf = xcalloc(1, 65536);
    size_t n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* 1 if one of pid's open descriptors points at path. */
static int has_fd_to(pid_t pid, const char *path)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int found = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        char link[300], target[4096];
        if (snprintf(link, sizeof link, "%s/%s", dir, de->d_name) >= (int)sizeof link)
            continue;
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n > 0) {
            target[n] = '\0';
            found |= strcmp(target, path) == 0;
        }
    }
    closedir(d);
    return found;
}

/* The SigBlk mask of pid's main thread, or ~0 when unreadable. */
static unsigned long long blocked_signals(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    char *st = read_text(path);
    char *p = st ? strstr(st, "\nSigBlk:") : NULL;
    unsigned long long v = p ? strtoull(p + 8, NULL, 16) : ~0ULL;
    xfree(st);
    return v;
}

/* 1 if pid's environment holds the entry kv ("DISPLAY=:3"); a prefix match
 * when kv ends with '='. */
static int env_has(pid_t pid, const char *kv)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    char *buf = xcalloc(1, 262144);
    ssize_t n = read(fd, buf, 262143);
    close(fd);
    int found = 0;
    size_t len = strlen(kv);
    for (ssize_t i = 0; n > 0 && i < n; i += (ssize_t)strlen(buf + i) + 1) {
        if (kv[len - 1] == '=' ? strncmp(buf + i, kv, len) == 0 : strcmp(buf + i, kv) == 0)
            found = 1;
    }
    xfree(buf);
    return found;
}

/* ---- launch variants ---- */

struct variant_case {
    const char *name;
    int headless, stealth, kiosk;
    int ua_has_headless; /* expected: "HeadlessChrome" in /json/version User-Agent */
};

static const struct variant_case variant_cases[] = {
    {"headless: --headless=new, DevTools on 127.0.0.1 answers GET /json/version", 1, 0, 0, 1},
    {"stealth: user agent without \"HeadlessChrome\"", 1, 1, 0, 0},
    {"headful: a private Xvfb display sized to the window (kiosk)", 0, 1, 1, 0},
};

static void launch_variants(void **state)
{
    (void)state;
    /* Like the server: SIGTERM/SIGINT blocked, and a descriptor without
     * O_CLOEXEC that the browser must not inherit. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    char *marker = xasprintf("%s/marker", root);
    int leak_fd = open(marker, O_CREAT | O_RDWR, 0600);
    assert_true(leak_fd >= 0);

    for (size_t i = 0; i < sizeof variant_cases / sizeof *variant_cases; i++) {
        const struct variant_case *vc = &variant_cases[i];
        char dirname[32];
        snprintf(dirname, sizeof dirname, "variant%zu", i);
        struct chromium_opts o = base_opts(dirname);
        o.headless = vc->headless;
        o.stealth = vc->stealth;
        o.kiosk = vc->kiosk;
        char *dir = (char *)o.user_data_dir;
        struct chromium *c = launch_ok(&o, vc->name);

        char want[64];
        snprintf(want, sizeof want, "ws://127.0.0.1:%d/devtools/browser/", chromium_port(c));
        if (strncmp(chromium_ws_url(c), want, strlen(want)) != 0)
            fail_msg("%s: ws url %s", vc->name, chromium_ws_url(c));
        json_t *v = json_version(c);
        if (!v)
            fail_msg("%s: GET /json/version failed", vc->name);
        const char *ua = json_string_value(json_object_get(v, "User-Agent"));
        if (!ua || (strstr(ua, "HeadlessChrome") != NULL) != vc->ua_has_headless)
            fail_msg("%s: User-Agent %s", vc->name, ua ? ua : "(none)");
        const char *ws = json_string_value(json_object_get(v, "webSocketDebuggerUrl"));
        if (!ws || strcmp(ws, chromium_ws_url(c)) != 0)
            fail_msg("%s: webSocketDebuggerUrl %s", vc->name, ws ? ws : "(none)");
        json_decref(v);

        pid_t pid = chromium_pid(c), xpid = chromium_xvfb_pid(c);
        if (chromium_start_ticks(c) != chromium_proc_start_ticks(pid) || !chromium_start_ticks(c))
            fail_msg("%s: start ticks", vc->name);
        if (getpgid(pid) != pid || getsid(pid) != pid)
            fail_msg("%s: browser is not its own session and group leader", vc->name);
        if (vc->headless) {
            if (xpid != 0 || chromium_display(c) != -1)
                fail_msg("%s: headless browser has a display", vc->name);
        } else {
            if (chromium_display(c) < 0 || xpid <= 0 || kill(xpid, 0) != 0)
                fail_msg("%s: display %d, Xvfb pid %d", vc->name, chromium_display(c), (int)xpid);
            if (chromium_xvfb_start_ticks(c) != chromium_proc_start_ticks(xpid))
                fail_msg("%s: Xvfb start ticks", vc->name);
        }
        if (chromium_uptime_ms(c) < 0 || chromium_exited(c, NULL) != 0)
            fail_msg("%s: browser not running", vc->name);

        /* Children start clean: no inherited descriptors, no blocked signals. */
        if (has_fd_to(pid, marker) || (xpid > 0 && has_fd_to(xpid, marker)))
            fail_msg("%s: a server descriptor leaked into the child", vc->name);
        if (blocked_signals(pid) != 0 || (xpid > 0 && blocked_signals(xpid) != 0))
            fail_msg("%s: the child inherited the server's signal mask", vc->name);
        char display[32];
        snprintf(display, sizeof display, "DISPLAY=:%d", chromium_display(c));
        if (vc->headless ? env_has(pid, "DISPLAY=") : !env_has(pid, display))
            fail_msg("%s: DISPLAY not as expected", vc->name);
        char *logpath = xasprintf("%s.log", dir);
        char *log = read_text(logpath);
        if (!log || !strstr(log, "DevTools listening on ws://127.0.0.1:"))
            fail_msg("%s: stderr log %s lacks the DevTools line", vc->name, logpath);
        xfree(log);
        if (chromium_kill_stale(pid, chromium_start_ticks(c) + 1) != 0 ||
            (xpid > 0 && chromium_kill_stale(xpid, chromium_xvfb_start_ticks(c) - 1) != 0))
            fail_msg("%s: kill_stale with wrong start ticks killed something", vc->name);

        /* chromium_stop: SIGTERM first (Chromium exits cleanly within the
         * grace), leaves no process and removes the folder and its log. */
        chromium_stop(c, 5000, 1);
        int status = 0;
        if (chromium_exited(c, &status) != 1 ||
            (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
            fail_msg("%s: browser needed SIGKILL (status %d)", vc->name, status);
        release(c);
        if (!gone(pid) || (xpid > 0 && !gone(xpid)))
            fail_msg("%s: a process survived chromium_stop", vc->name);
        if (path_exists(dir) || path_exists(logpath))
            fail_msg("%s: user-data folder or log survived chromium_stop", vc->name);
        xfree(logpath);
        xfree(dir);
    }
    close(leak_fd);
    xfree(marker);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* ---- the child's starting state, seen through a fake browser ---- */

#define FAKE_ENV         "BD_TEST_FAKE_CHROMIUM"
#define FAKE_STDERR_SIZE (1024 * 1024)

/* This test binary re-executed as a browser (FAKE_ENV set): it announces a
 * DevTools endpoint, floods stderr far beyond a pipe's capacity, marks
 * <user-data-dir>.done and waits for a signal, changing nothing it inherited. */
static int fake_browser(int argc, char **argv)
{
    const char *udd = NULL;
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "--user-data-dir=", 16) == 0)
            udd = argv[i] + 16;
    fprintf(stderr, "\nDevTools listening on ws://127.0.0.1:9/devtools/browser/fake\n");
    fflush(stderr);
    char line[1024];
    memset(line, 'x', sizeof line - 1);
    line[sizeof line - 1] = '\n';
    for (int i = 0; i < FAKE_STDERR_SIZE / (int)sizeof line; i++)
        if (write(2, line, sizeof line) != (ssize_t)sizeof line)
            return 3;
    if (udd) {
        char done[4096];
        snprintf(done, sizeof done, "%s.done", udd);
        int fd = open(done, O_CREAT | O_WRONLY, 0600);
        if (fd >= 0)
            close(fd);
    }
    for (;;)
        pause();
}

static void child_starts_clean(void **state)
{
    (void)state;
    /* The server's state: SIGTERM/SIGINT blocked, SIGPIPE ignored, and a
     * descriptor without O_CLOEXEC. */
    sigset_t block, oldmask;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, &oldmask);
    struct sigaction ign = {.sa_handler = SIG_IGN}, oldpipe;
    sigaction(SIGPIPE, &ign, &oldpipe);
    char *marker = xasprintf("%s/marker-fake", root);
    int leak_fd = open(marker, O_CREAT | O_RDWR, 0600);
    assert_true(leak_fd >= 0);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(n > 0);
    self[n] = '\0';

    struct chromium_opts o = base_opts("fake");
    o.binary = self;
    setenv(FAKE_ENV, "1", 1);
    struct chromium *c = launch_ok(&o, "fake browser");
    unsetenv(FAKE_ENV);
    pid_t pid = chromium_pid(c);

    assert_int_equal(chromium_port(c), 9);
    if (blocked_signals(pid) != 0)
        fail_msg("the child inherited the server's signal mask");
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    char *st = read_text(path);
    char *ig = st ? strstr(st, "\nSigIgn:") : NULL;
    assert_non_null(ig);
    if (strtoull(ig + 8, NULL, 16) & (1ULL << (SIGPIPE - 1)))
        fail_msg("the child inherited an ignored SIGPIPE");
    xfree(st);
    if (has_fd_to(pid, marker))
        fail_msg("a server descriptor leaked into the child");
    assert_int_equal(getsid(pid), pid);
    assert_int_equal(getpgid(pid), pid);

    /* stderr keeps being drained after the DevTools line. */
    char *done = xasprintf("%s.done", o.user_data_dir);
    for (int i = 0; i < 200 && !path_exists(done); i++) {
        struct timespec ts = {0, 25 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (!path_exists(done))
        fail_msg("the browser blocked writing its stderr");
    char *logpath = xasprintf("%s.log", o.user_data_dir);
    struct stat lst;
    for (int i = 0; i < 200; i++) {
        if (stat(logpath, &lst) == 0 && lst.st_size >= FAKE_STDERR_SIZE)
            break;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_true(stat(logpath, &lst) == 0 && lst.st_size >= FAKE_STDERR_SIZE);

    /* SIGTERM reaches it (not blocked), so the grace period is enough. */
    chromium_stop(c, 3000, 1);
    int status = 0;
    assert_int_equal(chromium_exited(c, &status), 1);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGTERM)
        fail_msg("expected death by SIGTERM, wait status %d", status);
    release(c);
    assert_true(gone(pid));
    (void)unlink(done);
    xfree(done);
    xfree(logpath);
    xfree((char *)o.user_data_dir);
    close(leak_fd);
    xfree(marker);
    sigaction(SIGPIPE, &oldpipe, NULL);
    pthread_sigmask(SIG_SETMASK, &oldmask, NULL);
}

/* ---- bad options and failed launches ---- */

struct invalid_case {
    const char *name;
    const char *dir;
    int width, height;
    const char *start_url;
    const char *policy;
    long long memory;
    int timeout_ms;
    const char *field; /* expected in the first detail */
};

static const struct invalid_case invalid_cases[] = {
    {"user_data_dir must be absolute", "rel/dir", 800, 600, NULL, NULL, 0, 1000, "user_data_dir"},
    {"user_data_dir must not be /", "/", 800, 600, NULL, NULL, 0, 1000, "user_data_dir"},
    {"user_data_dir must be normalized", "/tmp/a/../b", 800, 600, NULL, NULL, 0, 1000,
     "user_data_dir"},
    {"width must be >= 1", "/tmp/x", 0, 600, NULL, NULL, 0, 1000, "width"},
    {"height must be <= 16384", "/tmp/x", 800, 99999, NULL, NULL, 0, 1000, "height"},
    {"start_url must not look like a flag", "/tmp/x", 800, 600, "--remote-allow-origins=*", NULL, 0,
     1000, "start_url"},
    {"policy_json must be a JSON object", "/tmp/x", 800, 600, NULL, "[1,2]", 0, 1000,
     "policy_json"},
    {"policy_json must be JSON", "/tmp/x", 800, 600, NULL, "{nope", 0, 1000, "policy_json"},
    {"memory_max_bytes must be >= 0", "/tmp/x", 800, 600, NULL, NULL, -1, 1000, "memory_max_bytes"},
    {"timeout must be positive", "/tmp/x", 800, 600, NULL, NULL, 0, 0, "timeout_ms"},
};

static void invalid_options(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof invalid_cases / sizeof *invalid_cases; i++) {
        const struct invalid_case *ic = &invalid_cases[i];
        struct chromium_opts o;
        memset(&o, 0, sizeof o);
        o.user_data_dir = ic->dir;
        o.headless = 1;
        o.width = ic->width;
        o.height = ic->height;
        o.start_url = ic->start_url;
        o.policy_json = ic->policy;
        o.memory_max_bytes = ic->memory;
        struct err e;
        err_init(&e);
        struct chromium *c = (struct chromium *)&o;
        int rc = chromium_launch(&o, ic->timeout_ms, &c, &e);
        if (rc != E_INVALID || c != NULL)
            fail_msg("%s: rc %d", ic->name, rc);
        if (e.ndetails < 1 || strncmp(e.details[0].message, ic->field, strlen(ic->field)) != 0)
            fail_msg("%s: detail %s", ic->name, e.ndetails ? e.details[0].message : "(none)");
    }
}

struct failure_case {
    const char *name;
    const char *script; /* body of a fake browser; NULL = binary below */
    const char *binary;
    int timeout_ms;
    int want_rc;
    const char *want_text; /* in e.message */
};

static const struct failure_case failure_cases[] = {
    {"a missing binary fails the launch", NULL, "/nonexistent/chromium", 2000, E_INTERNAL,
     "execve"},
    {"a browser that exits early fails the launch", "echo boom >&2; exit 3", NULL, 5000, E_UNAVAIL,
     "boom"},
    {"at most timeout_ms, then nothing is left running", "exec sleep 30", NULL, 400, E_UNAVAIL,
     "within 400 ms"},
    {"a DevTools endpoint not on 127.0.0.1 is refused",
     "echo 'DevTools listening on ws://0.0.0.0:9/devtools/browser/x' >&2; exec sleep 30", NULL,
     5000, E_INTERNAL, "DevTools"},
};

static void launch_failures(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof failure_cases / sizeof *failure_cases; i++) {
        const struct failure_case *fc = &failure_cases[i];
        char *script = NULL, *pidfile = xasprintf("%s/fake%zu.pid", root, i);
        char name[32];
        snprintf(name, sizeof name, "fake%zu", i);
        struct chromium_opts o = base_opts(name);
        o.binary = fc->binary;
        if (fc->script) {
            script = xasprintf("%s/fake%zu.sh", root, i);
            FILE *f = fopen(script, "w");
            assert_non_null(f);
            fprintf(f, "#!/bin/sh\necho $$ > %s\n%s\n", pidfile, fc->script);
            fclose(f);
            chmod(script, 0755);
            o.binary = script;
        }
        struct err e;
        err_init(&e);
        struct chromium *c = NULL;
        int rc = chromium_launch(&o, fc->timeout_ms, &c, &e);
        if (c)
            track(c);
        if (rc != fc->want_rc || !strstr(e.message, fc->want_text))
            fail_msg("%s: rc %d, message %s", fc->name, rc, e.message);
        FILE *pf = fopen(pidfile, "r");
        int pid = 0;
        if (pf) {
            if (fscanf(pf, "%d", &pid) != 1)
                pid = 0;
            fclose(pf);
        }
        if (pid > 0 && !gone(pid))
            fail_msg("%s: fake browser %d still running", fc->name, pid);
        xfree(script);
        xfree(pidfile);
        xfree((char *)o.user_data_dir);
    }
}

/* ---- exits and stale processes ---- */

static void exit_is_noticed(void **state)
{
    (void)state;
    struct chromium_opts o = base_opts("exit");
    struct chromium *c = launch_ok(&o, "exit noticed");
    xfree((char *)o.user_data_dir);
    int fd = chromium_exit_fd(c);
    assert_true(fd >= 0);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 0), 0);
    int status = -1;
    assert_int_equal(chromium_exited(c, &status), 0);

    assert_int_equal(kill(chromium_pid(c), SIGKILL), 0);
    assert_int_equal(poll(&p, 1, 5000), 1);
    assert_int_equal(chromium_exited(c, &status), 1);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    long long up = chromium_uptime_ms(c);
    struct timespec ts = {0, 60 * 1000 * 1000};
    nanosleep(&ts, NULL);
    assert_int_equal(chromium_uptime_ms(c), up);
    assert_int_equal(chromium_exited(c, &status), 1);
    release(c);
}

static void kill_stale_checks_start_ticks(void **state)
{
    (void)state;
    struct chromium_opts o = base_opts("stale");
    struct chromium *c = launch_ok(&o, "kill stale");
    xfree((char *)o.user_data_dir);
    pid_t pid = chromium_pid(c);
    unsigned long long ticks = chromium_start_ticks(c);

    assert_int_equal(chromium_kill_stale(pid, ticks + 1), 0);
    assert_int_equal(kill(pid, 0), 0);
    assert_int_equal(chromium_exited(c, NULL), 0);

    assert_int_equal(chromium_kill_stale(pid, ticks), 1);
    struct pollfd p = {.fd = chromium_exit_fd(c), .events = POLLIN};
    assert_int_equal(poll(&p, 1, 5000), 1);
    int status = 0;
    assert_int_equal(chromium_exited(c, &status), 1);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    assert_int_equal(chromium_kill_stale(pid, ticks), 0);
    release(c);
}

/* ---- per-session chrome_policy ---- */

/* A listening socket on 127.0.0.1 (ephemeral port in *port). */
static int listen_loopback(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    *port = ntohs(a.sin_port);
    return fd;
}

/* 1 if, within ms, a client sends a request whose first line starts with prefix. */
static int request_arrives(int lfd, const char *prefix, int ms)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        long left = ms - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            return 0;
        int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (cfd < 0)
            continue;
        struct timeval tv = {1, 0};
        setsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        char buf[512];
        ssize_t n = read(cfd, buf, sizeof buf - 1);
        close(cfd);
        if (n > 0) {
            buf[n] = '\0';
            if (strncmp(buf, prefix, strlen(prefix)) == 0)
                return 1;
        }
    }
}

static void policy_is_per_session(void **state)
{
    (void)state;
    static const char *const policies[] = {
        "{\"URLBlocklist\": [\"127.0.0.1\"]}",
        "{\"BookmarkBarEnabled\": false}",
    };
    struct chromium *c[2];
    char *dirs[2];
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "policy%d", i);
        struct chromium_opts o = base_opts(name);
        o.policy_json = policies[i];
        dirs[i] = (char *)o.user_data_dir;
        c[i] = launch_ok(&o, policies[i]);
    }
    for (int i = 0; i < 2; i++) {
        pid_t pid = chromium_pid(c[i]);
        char *path = xasprintf("/proc/%d/root%s/policy.json", (int)pid, CHROMIUM_POLICY_DIR);
        char *got = read_text(path);
        if (!got || strcmp(got, policies[i]) != 0)
            fail_msg("browser %d sees policy %s", i, got ? got : "(none)");
        xfree(got);
        xfree(path);
        path = xasprintf("/proc/%d/mountinfo", (int)pid);
        got = read_text(path);
        if (!got || !strstr(got, " " CHROMIUM_POLICY_DIR " "))
            fail_msg("browser %d: no bind mount on %s in mountinfo", i, CHROMIUM_POLICY_DIR);
        xfree(got);
        xfree(path);
    }
    /* The host's folder is untouched. */
    assert_false(path_exists(CHROMIUM_POLICY_DIR "/policy.json"));

    /* And Chromium obeys its own file: browser 1 loads a loopback page, while
     * browser 0 (URLBlocklist 127.0.0.1) never requests it. */
    int lport = 0, lfd = listen_loopback(&lport);
    assert_true(lfd >= 0);
    for (int i = 1; i >= 0; i--) {
        char path[96], want[32];
        snprintf(path, sizeof path, "/json/new?http://127.0.0.1:%d/p%d", lport, i);
        snprintf(want, sizeof want, "GET /p%d ", i);
        char *body = http_req(chromium_port(c[i]), "PUT", path);
        if (!body)
            fail_msg("browser %d: PUT /json/new failed", i);
        xfree(body);
        int arrived = request_arrives(lfd, want, i == 1 ? 8000 : 2000);
        if (arrived != i)
            fail_msg("browser %d: page request %s", i, arrived ? "was not blocked" : "never came");
    }
    close(lfd);
    for (int i = 0; i < 2; i++) {
        char *pdir = xasprintf("%s.policy", dirs[i]);
        assert_true(path_exists(pdir));
        release(c[i]);
        assert_false(path_exists(pdir));
        xfree(pdir);
        xfree(dirs[i]);
    }
}

/* ---- memory ---- */

static void memory_limit_applied_or_reported(void **state)
{
    (void)state;
    struct chromium_opts o = base_opts("memory");
    o.memory_max_bytes = 1LL << 30;
    struct chromium *c = launch_ok(&o, "memory limit");
    xfree((char *)o.user_data_dir);
    if (chromium_memory_enforced(c)) {
        char *path = xasprintf("%s/memory.max", chromium_cgroup_path(c));
        char *got = read_text(path);
        assert_non_null(got);
        assert_int_equal(strtoll(got, NULL, 10), 1LL << 30);
        xfree(got);
        xfree(path);
        path = xasprintf("/proc/%d/cgroup", (int)chromium_pid(c));
        got = read_text(path);
        assert_non_null(got);
        assert_non_null(strstr(got, "/browserd/memory"));
        xfree(got);
        xfree(path);
    } else {
        assert_null(chromium_cgroup_path(c));
        print_message("      (host without a writable cgroup v2 memory controller: "
                      "limit reported as not enforced)\n");
    }
    release(c);
}

/* ---- several browsers ---- */

#define N_CONCURRENT 5

struct conc {
    int idx;
    struct chromium *c;
    int rc;
    char msg[ERR_MSG_MAX];
};

static void *launch_thread(void *arg)
{
    struct conc *k = arg;
    char name[16];
    snprintf(name, sizeof name, "many%d", k->idx);
    struct chromium_opts o = base_opts(name);
    struct err e;
    err_init(&e);
    k->rc = chromium_launch(&o, LAUNCH_MS, &k->c, &e);
    if (k->rc == 0)
        track(k->c);
    snprintf(k->msg, sizeof k->msg, "%s", e.message);
    xfree((char *)o.user_data_dir);
    return NULL;
}

static void five_browsers_at_once(void **state)
{
    (void)state;
    struct conc k[N_CONCURRENT];
    pthread_t t[N_CONCURRENT];
    for (int i = 0; i < N_CONCURRENT; i++) {
        memset(&k[i], 0, sizeof k[i]);
        k[i].idx = i;
        assert_int_equal(pthread_create(&t[i], NULL, launch_thread, &k[i]), 0);
    }
    for (int i = 0; i < N_CONCURRENT; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < N_CONCURRENT; i++)
        if (k[i].rc != 0)
            fail_msg("browser %d: %s", i, k[i].msg);
    for (int i = 0; i < N_CONCURRENT; i++) {
        for (int j = 0; j < i; j++)
            assert_int_not_equal(chromium_port(k[i].c), chromium_port(k[j].c));
        json_t *v = json_version(k[i].c);
        if (!v)
            fail_msg("browser %d: /json/version failed", i);
        json_decref(v);
    }
    pid_t pids[N_CONCURRENT];
    for (int i = 0; i < N_CONCURRENT; i++) {
        pids[i] = chromium_pid(k[i].c);
        release(k[i].c);
    }
    for (int i = 0; i < N_CONCURRENT; i++)
        assert_true(gone(pids[i]));
}

/* ---- nothing left behind ---- */

/* Counts live (non-zombie) processes whose command line mentions root. */
static int count_ours(void)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9')
            continue;
        char path[300];
        if (snprintf(path, sizeof path, "/proc/%s/cmdline", de->d_name) >= (int)sizeof path)
            continue;
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            continue;
        char buf[8192];
        ssize_t r = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (r <= 0)
            continue; /* zombies have an empty command line */
        for (ssize_t i = 0; i < r; i++)
            if (buf[i] == '\0')
                buf[i] = ' ';
        buf[r] = '\0';
        if (strstr(buf, root))
            n++;
    }
    closedir(d);
    return n;
}

/* Browser process groups that still have a member (zombies included). */
static int groups_alive(void)
{
    int n = 0;
    for (int i = 0; i < ngroups; i++)
        n += kill(-groups[i], 0) == 0 || errno != ESRCH;
    return n;
}

static void nothing_left_running(void **state)
{
    (void)state;
    int n = 0;
    for (int i = 0; i < 40 && (n = count_ours()) != 0; i++) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(n, 0);
    /* Orphaned helpers are zombies until PID 1 reaps them; wait for that so
     * that `pgrep -f chromium` is empty once the suite ends. */
    for (int i = 0; i < 200 && (n = groups_alive()) != 0; i++) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(n, 0);
}

int main(int argc, char **argv)
{
    if (getenv(FAKE_ENV))
        return fake_browser(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(child_starts_clean, stop_all),
        cmocka_unit_test(invalid_options),
        cmocka_unit_test_teardown(launch_failures, stop_all),
        cmocka_unit_test_teardown(launch_variants, stop_all),
        cmocka_unit_test_teardown(exit_is_noticed, stop_all),
        cmocka_unit_test_teardown(kill_stale_checks_start_ticks, stop_all),
        cmocka_unit_test_teardown(policy_is_per_session, stop_all),
        cmocka_unit_test_teardown(memory_limit_applied_or_reported, stop_all),
        cmocka_unit_test_teardown(five_browsers_at_once, stop_all),
        cmocka_unit_test(nothing_left_running),
    };
    return cmocka_run_group_tests_name("runtime/chromium", tests, group_setup, group_teardown);
}
