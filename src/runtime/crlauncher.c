#include "runtime/crlauncher.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fdio.h"
#include "core/log.h"
#include "core/xalloc.h"

/* The launcher script is small (about 6 KB); a bigger file is not it. */
#define SCRIPT_MAX (64 * 1024)
/* What sourcing /etc/chromium.d may print: flags, not a novel. */
#define FLAGS_MAX (16 * 1024)

/* The value of the first `NAME=value` assignment at the start of a line,
 * without quotes, into out; 0 when there is none. */
static int assignment(const char *text, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, name, nl) != 0 || p[nl] != '=')
            continue;
        const char *v = p + nl + 1, *e = v + strcspn(v, "\n");
        if (e > v && (*v == '"' || *v == '\'') && e[-1] == *v) {
            v++;
            e--;
        }
        size_t n = (size_t)(e - v);
        if (n == 0 || n >= cap)
            return 0;
        memcpy(out, v, n);
        out[n] = '\0';
        return 1;
    }
    return 0;
}

int crlauncher_parse_script(const char *text, size_t len, char *real, size_t cap)
{
    if (len < 2 || len > SCRIPT_MAX || memcmp(text, "#!", 2) != 0 || memchr(text, '\0', len))
        return 0;
    char *t = xmalloc(len + 1);
    memcpy(t, text, len);
    t[len] = '\0';
    char app[64], libdir[128];
    int ok = assignment(t, "APPNAME", app, sizeof app) &&
             assignment(t, "LIBDIR", libdir, sizeof libdir) &&
             strcmp(libdir, "/usr/lib/$APPNAME") == 0 &&
             strstr(t, "exec $LIBDIR/$APPNAME $CHROMIUM_FLAGS \"$@\"") != NULL &&
             strspn(app, "abcdefghijklmnopqrstuvwxyz0123456789-_") == strlen(app);
    xfree(t);
    if (!ok)
        return 0;
    int n = snprintf(real, cap, "/usr/lib/%s/%s", app, app);
    return n > 0 && (size_t)n < cap;
}

char **crlauncher_split_flags(const char *flags)
{
    size_t cap = 8, n = 0;
    char **v = xmalloc(cap * sizeof *v);
    int remote = 0;
    for (const char *p = flags;;) {
        p += strspn(p, " \t\n");
        if (!*p)
            break;
        size_t w = strcspn(p, " \t\n");
        if (n + 3 >= cap) {
            cap *= 2;
            v = xrealloc(v, cap * sizeof *v);
        }
        v[n] = xmalloc(w + 1);
        memcpy(v[n], p, w);
        v[n][w] = '\0';
        if (strcmp(v[n], "--enable-remote-extensions") == 0)
            remote = 1;
        n++;
        p += w;
    }
    if (!remote) {
        /* The script's rule: extensions other than the system's are off. */
        size_t len = 1;
        for (size_t i = 0; i < n; i++)
            if (strncmp(v[i], "--load-extension=", 17) == 0)
                len += strlen(v[i] + 17) + 1;
        char *keep = xmalloc(len);
        size_t at = 0;
        for (size_t i = 0; i < n; i++)
            if (strncmp(v[i], "--load-extension=", 17) == 0) {
                size_t l = strlen(v[i] + 17);
                memcpy(keep + at, v[i] + 17, l);
                keep[at + l] = ',';
                at += l + 1;
            }
        keep[at] = '\0';
        v[n++] = xstrdup("--disable-background-networking");
        v[n++] = xasprintf("--disable-extensions-except=%s", keep);
        xfree(keep);
    }
    v[n] = NULL;
    return v;
}

/* Reads at most cap - 1 bytes of path; -1 on failure. */
static long read_file(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t used = 0;
    (void)!fdio_read_all(fd, buf, cap - 1, &used, FDIO_NO_DEADLINE);
    close(fd);
    buf[used] = '\0';
    return (long)used;
}

/* CHROMIUM_FLAGS as the script builds it: every file of /etc/chromium.d but
 * README and dpkg leftovers, sourced in order by /bin/sh. NULL on failure. */
static char *source_config(void)
{
    static const char script[] =
        "CHROMIUM_FLAGS=''\n"
        "for file in /etc/chromium.d/*; do\n"
        "  test \"$file\" = /etc/chromium.d/README || expr \"$file\" : '.*\\.dpkg' >/dev/null || "
        ". \"$file\"\n"
        "done\n"
        "printf '%s' \"$CHROMIUM_FLAGS\"\n";
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
    /* The environment given to a session's browser (chromium.c), where the
     * script ran before; never the server's own (its admin token, keys). */
    char *envp[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, "/bin/sh", &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (rc != 0) {
        close(p[0]);
        return NULL;
    }
    char *out = xmalloc(FLAGS_MAX);
    size_t used = 0;
    (void)!fdio_read_all(p[0], out, FLAGS_MAX - 1, &used, FDIO_NO_DEADLINE);
    close(p[0]);
    out[used] = '\0';
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || used == FLAGS_MAX - 1) {
        xfree(out);
        return NULL;
    }
    return out;
}

struct entry {
    char *binary;
    struct crlauncher l;
    struct entry *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct entry *cache;

static const char *const no_flags[] = {NULL};

static void resolve(struct entry *en)
{
    en->l.exec = en->binary;
    en->l.flags = no_flags;
    char *text = xmalloc(SCRIPT_MAX + 1);
    long n = read_file(en->binary, text, SCRIPT_MAX + 1);
    char real[256];
    struct stat st;
    int script = n > 0 && crlauncher_parse_script(text, (size_t)n, real, sizeof real);
    char extra[160];
    if (!script || !assignment(text, "export CHROME_VERSION_EXTRA", extra, sizeof extra))
        extra[0] = '\0';
    xfree(text);
    if (!script)
        return;
    if (stat(real, &st) != 0 || !S_ISREG(st.st_mode) || access(real, X_OK) != 0) {
        log_warn("chromium: %s is Debian's launcher script but %s is not an executable file; "
                 "running the script",
                 en->binary, real);
        return;
    }
    char *flags = source_config();
    if (!flags) {
        log_warn("chromium: sourcing /etc/chromium.d for %s failed; running the script",
                 en->binary);
        return;
    }
    en->l.exec = xstrdup(real);
    en->l.flags = (const char *const *)crlauncher_split_flags(flags);
    en->l.wrapper = en->binary;
    en->l.version_extra = extra[0] ? xstrdup(extra) : NULL;
    log_info("chromium: %s is Debian's launcher script: running %s directly with its flags (%s)",
             en->binary, real, flags);
    xfree(flags);
}

const struct crlauncher *crlauncher_get(const char *binary)
{
    pthread_mutex_lock(&mu);
    struct entry *en = cache;
    while (en && strcmp(en->binary, binary) != 0)
        en = en->next;
    if (!en) {
        en = xcalloc(1, sizeof *en);
        en->binary = xstrdup(binary);
        resolve(en);
        en->next = cache;
        cache = en;
    }
    pthread_mutex_unlock(&mu);
    return &en->l;
}
