/* runtime/sesshelp: see sesshelp.h. */
#include "runtime/sesshelp.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fdio.h"
#include "core/limits.h"
#include "core/xalloc.h"
#include "runtime/child.h"

/* Exit status of a helper that could not join the session's cgroups or
 * exec (above every errno value). */
#define SESSHELP_EXIT_SETUP 250
/* What an unzip helper reports of its failure: "rc\ncode\nmessage". */
#define SESSHELP_REPORT_BYTES 1024

/* ---- the server's side ---- */

/* Forks and execs `/proc/self/exe sessfs-helper op uid arg1 [arg2]` in sb's
 * cgroups with fs's root as descriptor 3. *in (when in) receives the write
 * end of its stdin, *out (when out) the read end of its stdout; the other
 * streams are /dev/null (stderr stays the server's, for its log lines).
 * Returns the pid, or -errno. */
static pid_t spawn(const struct sandbox *sb, const struct sessfs *fs, const char *op,
                   const char *arg1, const char *arg2, int *in, int *out)
{
    struct sandbox_exec x;
    struct err e;
    err_init(&e);
    if (sandbox_exec_open(sb, NULL, NULL, &x, &e) != 0)
        return -EIO;
    char uid[24];
    snprintf(uid, sizeof uid, "%u", (unsigned)fs->uid);
    char *argv[] = {"browserd",   SESSHELP_COMMAND, (char *)op, uid,
                    (char *)arg1, (char *)arg2,     NULL};
    int inp[2] = {-1, -1}, outp[2] = {-1, -1};
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0 || (in && pipe2(inp, O_CLOEXEC) != 0) || (out && pipe2(outp, O_CLOEXEC) != 0)) {
        int er = errno;
        if (devnull >= 0)
            close(devnull);
        if (inp[0] >= 0) {
            close(inp[0]);
            close(inp[1]);
        }
        sandbox_exec_close(&x);
        return -er;
    }
    pid_t pid = fork();
    if (pid == 0) {
        /* Async-signal-safe calls only until execv (the server has threads).
         * Every source descriptor moves above 10 first, so that placing one
         * on 0, 1 or 3 never closes another still to be placed. */
        child_reset_signals();
        for (int i = 0; i < x.ncg; i++)
            if (write(x.cg_fds[i], "0", 1) != 1)
                _exit(SESSHELP_EXIT_SETUP);
        int fin = fcntl(in ? inp[0] : devnull, F_DUPFD, 10);
        int fout = fcntl(out ? outp[1] : devnull, F_DUPFD, 10);
        int froot = fcntl(fs->rootfd, F_DUPFD, 10);
        if (fin < 0 || fout < 0 || froot < 0 || dup2(fin, 0) != 0 || dup2(fout, 1) != 1 ||
            dup2(froot, 3) != 3)
            _exit(SESSHELP_EXIT_SETUP);
        child_close_from(4);
        execv("/proc/self/exe", argv);
        _exit(SESSHELP_EXIT_SETUP);
    }
    int er = errno;
    sandbox_exec_close(&x);
    close(devnull);
    if (in)
        close(inp[0]);
    if (out)
        close(outp[1]);
    if (pid < 0) {
        if (in)
            close(inp[1]);
        if (out)
            close(outp[0]);
        return -er;
    }
    if (in) {
        /* Fewer wake-ups for a large write: a 1 MiB pipe (best effort). */
        (void)fcntl(inp[1], F_SETPIPE_SZ, 1 << 20);
        *in = inp[1];
    }
    if (out)
        *out = outp[0];
    return pid;
}

/* Reaps pid: 0 when it exited 0, -status for an errno exit, -EIO for a
 * setup failure or a signal. */
static int reap(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -EIO;
    if (!WIFEXITED(st))
        return -EIO;
    int code = WEXITSTATUS(st);
    return code == 0 ? 0 : code == SESSHELP_EXIT_SETUP ? -EIO : -code;
}

/* Writes all of data to fd; stops quietly when the reader is gone (the
 * helper failed: its exit status says why). */
static void feed(int fd, const void *data, size_t len)
{
    (void)!fdio_write_all(fd, data, len, FDIO_NO_DEADLINE);
}

int sesshelp_write(const struct sandbox *sb, const struct sessfs *fs, const char *path, mode_t mode,
                   const void *data, size_t len)
{
    char m[8];
    snprintf(m, sizeof m, "%04o", (unsigned)(mode & 01777));
    int in = -1;
    pid_t pid = spawn(sb, fs, "write", path, m, &in, NULL);
    if (pid < 0)
        return (int)pid;
    feed(in, data, len);
    close(in);
    return reap(pid);
}

int sesshelp_mkdir(const struct sandbox *sb, const struct sessfs *fs, const char *path, mode_t mode)
{
    char m[8];
    snprintf(m, sizeof m, "%04o", (unsigned)(mode & 01777));
    pid_t pid = spawn(sb, fs, "mkdir", path, m, NULL, NULL);
    return pid < 0 ? (int)pid : reap(pid);
}

int sesshelp_write_start(const struct sandbox *sb, const struct sessfs *fs, const char *path,
                         mode_t mode, struct sesshelp_writer *w)
{
    char m[8];
    snprintf(m, sizeof m, "%04o", (unsigned)(mode & 01777));
    w->in = -1;
    w->pid = spawn(sb, fs, "write", path, m, &w->in, NULL);
    return w->pid < 0 ? (int)w->pid : 0;
}

int sesshelp_write_chunk(struct sesshelp_writer *w, const void *data, size_t len)
{
    return fdio_write_all(w->in, data, len, FDIO_NO_DEADLINE) == 0 ? 0 : -EPIPE;
}

int sesshelp_write_end(struct sesshelp_writer *w, int abort)
{
    if (w->pid <= 0)
        return -ECHILD;
    if (abort)
        (void)kill(w->pid, SIGKILL);
    if (w->in >= 0)
        close(w->in);
    w->in = -1;
    int rc = reap(w->pid);
    w->pid = 0;
    return abort && rc == 0 ? -EPIPE : rc;
}

int sesshelp_unzip(const struct sandbox *sb, const struct sessfs *fs, const char *dest,
                   const void *zip, size_t len, struct err *e)
{
    int in = -1, out = -1;
    pid_t pid = spawn(sb, fs, "unzip", dest, NULL, &in, &out);
    if (pid < 0)
        return err_set(e, E_INTERNAL, "internal", "starting the unzip: %s", strerror((int)-pid));
    feed(in, zip, len);
    close(in);
    char rep[SESSHELP_REPORT_BYTES + 1];
    size_t got = 0;
    (void)!fdio_read_all(out, rep, SESSHELP_REPORT_BYTES, &got, FDIO_NO_DEADLINE);
    rep[got] = '\0';
    close(out);
    int rc = reap(pid);
    if (rc == 0)
        return 0;
    /* The helper's report: "rc\ncode\nmessage". */
    char *code = strchr(rep, '\n'), *msg = code ? strchr(code + 1, '\n') : NULL;
    if (rc == -1 && msg) {
        *code++ = '\0';
        *msg++ = '\0';
        long r = strtol(rep, NULL, 10);
        if (r < 0 && r > -4096)
            return err_set(e, (int)r, code, "%s", msg);
    }
    return err_set(e, E_INTERNAL, "internal", "unzip failed: %s", strerror(-rc));
}

int sesshelp_zip_start(const struct sandbox *sb, const struct sessfs *fs, const char *path,
                       struct sesshelp_zip *z)
{
    z->out = -1;
    z->pid = spawn(sb, fs, "zip", path, NULL, NULL, &z->out);
    return z->pid < 0 ? (int)z->pid : 0;
}

int sesshelp_zip_end(struct sesshelp_zip *z, int abort)
{
    if (z->out >= 0)
        close(z->out);
    z->out = -1;
    if (z->pid <= 0)
        return -ECHILD;
    if (abort)
        (void)kill(z->pid, SIGKILL);
    int rc = reap(z->pid);
    z->pid = 0;
    return rc;
}

/* ---- the helper's side (a process of its own, single-threaded) ---- */

static int out_stdout(void *ctx, const void *data, size_t n)
{
    (void)ctx;
    return fdio_write_all(1, data, n, FDIO_NO_DEADLINE);
}

/* Reads stdin whole, at most cap bytes (-E2BIG beyond). */
static int slurp(char **out, size_t *len, size_t cap)
{
    size_t have = 0, sz = 1 << 20;
    char *b = xmalloc(sz);
    for (;;) {
        if (have == sz) {
            if (sz > cap) {
                xfree(b);
                return -E2BIG;
            }
            sz *= 2;
            b = xrealloc(b, sz);
        }
        size_t n = 0;
        int er = fdio_read_all(0, b + have, sz - have, &n, FDIO_NO_DEADLINE);
        if (er < 0) {
            xfree(b);
            return er;
        }
        have += n;
        if (have < sz)
            break; /* the end of stdin */
    }
    if (have > cap) {
        xfree(b);
        return -E2BIG;
    }
    *out = b;
    *len = have;
    return 0;
}

int sesshelp_main(int argc, char **argv)
{
    /* EPIPE (the server stopped reading) is an error to return, not a
     * signal to die of. */
    signal(SIGPIPE, SIG_IGN);
    if (argc < 3)
        return EINVAL;
    const char *op = argv[0];
    char *end;
    unsigned long uid = strtoul(argv[1], &end, 10);
    if (*end != '\0')
        return EINVAL;
    struct sessfs fs = {.rootfd = 3, .uid = (uid_t)uid, .gid = (gid_t)uid};
    int rc;
    if (strcmp(op, "write") == 0 && argc == 4) {
        mode_t mode;
        rc = sessfs_parse_mode(argv[3], &mode);
        if (rc == 0)
            rc = sessfs_write_fd(&fs, argv[2], mode, 0);
    } else if (strcmp(op, "mkdir") == 0 && argc == 4) {
        mode_t mode;
        rc = sessfs_parse_mode(argv[3], &mode);
        if (rc == 0)
            rc = sessfs_mkdir(&fs, argv[2], mode);
    } else if (strcmp(op, "zip") == 0) {
        rc = sessfs_zip_dir(&fs, argv[2], out_stdout, NULL);
    } else if (strcmp(op, "unzip") == 0) {
        char *zip = NULL;
        size_t len = 0;
        struct err e;
        err_init(&e);
        rc = slurp(&zip, &len, LIM_UPLOAD_BYTES);
        if (rc == 0)
            rc = sessfs_unzip(&fs, argv[2], zip, len, &e);
        else
            (void)err_set(&e, E_TOOBIG, "payload_too_large", "the archive is too large");
        xfree(zip);
        if (rc != 0) {
            dprintf(1, "%d\n%s\n%s", rc, e.code, e.message);
            return 1;
        }
    } else {
        return EINVAL;
    }
    return rc < 0 ? -rc : 0;
}
