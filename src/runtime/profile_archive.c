/*
 * profile_archive: GNU tar, spawned with posix_spawn and an explicit argv.
 *
 * Creation streams the archive to tar's stdout, which is a temporary file we
 * opened ourselves (O_EXCL, mode 0600, beside the destination): once tar
 * exits cleanly we fsync that descriptor, rename it over the destination and
 * fsync the folder, so a crash at any point leaves either the old archive or
 * the new one. tar's stderr comes back through a pipe and becomes the error
 * message when it fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/log.h"
#include "core/xalloc.h"
#include "runtime/profile_archive.h"

/* Kept: cookies, Local Storage (LevelDB: its NNNNNN.log files are data, so
 * "*.log" is NOT excluded, only Chromium's own debug log), IndexedDB,
 * Preferences, history, sessions. Dropped: what Chromium rebuilds. */
const char *const profile_archive_excludes[] = {
    "Cache",
    "Code Cache",
    "GPUCache",
    "GPUPersistentCache",
    "Service Worker/CacheStorage",
    "ShaderCache",
    "GrShaderCache",
    "GraphiteDawnCache",
    "DawnCache",
    "DawnGraphiteCache",
    "DawnWebGPUCache",
    "component_crx_cache",
    "extensions_crx_cache",
    "Crashpad",
    "Crash Reports",
    "BrowserMetrics",
    "BrowserMetrics-spare.pma",
    "chrome_debug.log",
    "Singleton*",
    "DevToolsActivePort",
    NULL,
};

/* How much of tar's stderr ends up in an error message. */
#define TAR_STDERR_MAX 512

static const char *tar_path(void)
{
    return access("/usr/bin/tar", X_OK) == 0 ? "/usr/bin/tar" : "/bin/tar";
}

/* mkdir -p with mode 0700 for the folders it creates. */
int profile_archive_mkdir(const char *path, struct err *e)
{
    char *p = xstrdup(path);
    int rc = 0;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char saved = *s;
        *s = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST) {
            rc = err_set(e, E_INTERNAL, "internal", "cannot create folder %s: %s", p,
                         strerror(errno));
            break;
        }
        *s = saved;
        if (saved == '\0')
            break;
    }
    xfree(p);
    return rc;
}

/* Runs tar with argv, stdout on out_fd (or /dev/null when -1). Returns tar's
 * exit status (0..255), or -1 after filling e when it could not run or was
 * killed. Up to TAR_STDERR_MAX bytes of its stderr go into errbuf. */
static int run_tar(char *const argv[], int out_fd, char *errbuf, size_t errcap, struct err *e)
{
    static char *const envp[] = {"PATH=/usr/bin:/bin", "LC_ALL=C", NULL};
    errbuf[0] = '\0';
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0)
        return err_set(e, E_INTERNAL, "internal", "pipe: %s", strerror(errno)), -1;
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0) {
        close(pipefd[0]);
        close(pipefd[1]);
        return err_set(e, E_INTERNAL, "internal", "/dev/null: %s", strerror(errno)), -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, devnull, 0);
    posix_spawn_file_actions_adddup2(&fa, out_fd >= 0 ? out_fd : devnull, 1);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    /* Descriptors other threads opened without O_CLOEXEC stay out of tar. */
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
#endif
    /* The server blocks SIGTERM/SIGINT and ignores SIGPIPE: tar (and the
     * gzip it runs) get the defaults back. */
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    sigset_t none, dflt;
    sigemptyset(&none);
    sigemptyset(&dflt);
    sigaddset(&dflt, SIGPIPE);
    sigaddset(&dflt, SIGTERM);
    sigaddset(&dflt, SIGINT);
    sigaddset(&dflt, SIGCHLD);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &dflt);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid;
    int src = posix_spawn(&pid, argv[0], &fa, &at, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(devnull);
    close(pipefd[1]);
    if (src != 0) {
        close(pipefd[0]);
        return err_set(e, E_INTERNAL, "internal", "cannot run %s: %s", argv[0], strerror(src)), -1;
    }
    size_t used = 0;
    char chunk[512];
    for (;;) {
        ssize_t n = read(pipefd[0], chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        size_t take = (size_t)n < errcap - 1 - used ? (size_t)n : errcap - 1 - used;
        memcpy(errbuf + used, chunk, take);
        used += take;
    }
    errbuf[used] = '\0';
    while (used && (errbuf[used - 1] == '\n' || errbuf[used - 1] == ' '))
        errbuf[--used] = '\0';
    for (size_t i = 0; i < used; i++)
        if (errbuf[i] == '\n')
            errbuf[i] = ' ';
    close(pipefd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return err_set(e, E_INTERNAL, "internal", "waitpid tar: %s", strerror(errno)), -1;
    }
    if (!WIFEXITED(status))
        return err_set(e, E_INTERNAL, "internal", "tar was killed by signal %d",
                       WIFSIGNALED(status) ? WTERMSIG(status) : 0),
               -1;
    return WEXITSTATUS(status);
}

static int fsync_dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? xstrndup(path, slash == path ? 1 : (size_t)(slash - path)) : xstrdup(".");
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    xfree(dir);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int profile_archive_create(const char *src_dir, const char *dest_path, long long max_bytes,
                           struct err *e)
{
    static atomic_uint counter;
    struct stat st;
    if (stat(src_dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return err_set(e, E_NOTFOUND, "not_found", "no folder %s to archive", src_dir);
    char *tmp =
        xasprintf("%s.tmp.%ld.%u", dest_path, (long)getpid(), atomic_fetch_add(&counter, 1));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        int rc = err_set(e, E_INTERNAL, "internal", "cannot create %s: %s", tmp, strerror(errno));
        xfree(tmp);
        return rc;
    }
    size_t nex = 0;
    while (profile_archive_excludes[nex])
        nex++;
    /* tar, options, excludes (before the operand: GNU tar applies an
     * --exclude only to operands that follow it), ".", NULL. */
    char **argv = xcalloc(nex + 12, sizeof *argv);
    size_t a = 0;
    argv[a++] = xstrdup(tar_path());
    argv[a++] = xstrdup("--create");
    argv[a++] = xstrdup("--gzip");
    argv[a++] = xstrdup("--file=-");
    argv[a++] = xasprintf("--directory=%s", src_dir);
    argv[a++] = xstrdup("--sort=name");
    argv[a++] = xstrdup("--warning=no-file-changed");
    argv[a++] = xstrdup("--warning=no-file-removed");
    argv[a++] = xstrdup("--warning=no-file-ignored");
    for (size_t i = 0; i < nex; i++)
        argv[a++] = xasprintf("--exclude=%s", profile_archive_excludes[i]);
    argv[a++] = xstrdup(".");
    argv[a] = NULL;
    char errbuf[TAR_STDERR_MAX];
    int code = run_tar(argv, fd, errbuf, sizeof errbuf, e);
    for (size_t i = 0; i < a; i++)
        xfree(argv[i]);
    xfree(argv);
    int rc = 0;
    /* 1: "some files differ" (changed while read); the archive is complete. */
    if (code < 0)
        rc = E_INTERNAL;
    else if (code > 1)
        rc = err_set(e, E_INTERNAL, "internal", "tar could not archive %s (exit %d): %s", src_dir,
                     code, errbuf);
    else if (code == 1)
        log_warn("profile archive of %s: %s", src_dir, errbuf);
    /* The size is checked before the new archive replaces the old one: over
     * max_bytes, the old one stays. */
    struct stat ast;
    if (rc == 0 && max_bytes > 0 && fstat(fd, &ast) == 0 && ast.st_size > max_bytes)
        rc = err_set(e, E_TOOBIG, "profile_too_large",
                     "the archive is %lld bytes, over the profile size quota of %lld bytes",
                     (long long)ast.st_size, max_bytes);
    if (rc == 0 && fsync(fd) != 0)
        rc = err_set(e, E_INTERNAL, "internal", "fsync %s: %s", tmp, strerror(errno));
    if (close(fd) != 0 && rc == 0)
        rc = err_set(e, E_INTERNAL, "internal", "close %s: %s", tmp, strerror(errno));
    if (rc == 0 && rename(tmp, dest_path) != 0)
        rc = err_set(e, E_INTERNAL, "internal", "rename %s: %s", dest_path, strerror(errno));
    if (rc)
        unlink(tmp);
    else if (fsync_dir_of(dest_path) != 0)
        log_warn("fsync of the folder of %s: %s", dest_path, strerror(errno));
    xfree(tmp);
    return rc;
}

int profile_archive_extract(const char *archive_path, const char *dest_dir, struct err *e)
{
    if (access(archive_path, R_OK) != 0)
        return err_set(e, E_NOTFOUND, "not_found", "no archive %s", archive_path);
    int rc = profile_archive_mkdir(dest_dir, e);
    if (rc)
        return rc;
    char *argv[] = {
        (char *)tar_path(),
        "--extract",
        "--gzip",
        xasprintf("--file=%s", archive_path),
        xasprintf("--directory=%s", dest_dir),
        "--no-same-owner",
        "--no-overwrite-dir",
        NULL,
    };
    char errbuf[TAR_STDERR_MAX];
    int code = run_tar(argv, -1, errbuf, sizeof errbuf, e);
    xfree(argv[3]);
    xfree(argv[4]);
    if (code < 0)
        return E_INTERNAL;
    if (code != 0)
        return err_set(e, E_INTERNAL, "internal", "tar could not extract %s (exit %d): %s",
                       archive_path, code, errbuf);
    return 0;
}

int profile_archive_gunzip(const char *archive_path, int out_fd, struct err *e)
{
    char errbuf[512];
    char *const argv[] = {(char *)"/bin/gzip", (char *)"-dc", (char *)archive_path, NULL};
    int st = run_tar(argv, out_fd, errbuf, sizeof errbuf, e);
    if (st < 0)
        return E_INTERNAL;
    if (st != 0)
        return err_set(e, E_INTERNAL, "internal", "gzip -dc %s failed (%d): %s", archive_path, st,
                       errbuf);
    return 0;
}
