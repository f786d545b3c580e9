#include "runtime/cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* dir + "/" + file into p (cap bytes); 0, or -1 when it does not fit. */
static int join(char *p, size_t cap, const char *dir, const char *file)
{
    size_t dl = strlen(dir), fl = strlen(file);
    if (dl + 1 + fl + 1 > cap)
        return -1;
    memcpy(p, dir, dl);
    p[dl] = '/';
    memcpy(p + dl + 1, file, fl + 1);
    return 0;
}

/* Writes val to dir/file; quietly nothing where the file is absent. */
static void put(const char *dir, const char *file, const char *val)
{
    char p[512];
    if (join(p, sizeof p, dir, file) != 0)
        return;
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)!write(fd, val, strlen(val));
        close(fd);
    }
}

int cgroup_kill_tasks(const char *dir, int rounds)
{
    char p[512], buf[8192];
    if (join(p, sizeof p, dir, "cgroup.procs") != 0)
        return -1;
    /* Out of the background CPU class first (sandbox_set_background): a
     * killed task must run to exit, which from cpu.idle on a busy host it
     * may not do for many seconds. */
    put(dir, "cpu.idle", "0");
    put(dir, "cpu.weight", "100");
    put(dir, "cpu.shares", "1024");
    put(dir, "cgroup.kill", "1");
    int fd;
    for (int round = 0; round < rounds; round++) {
        fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return 0; /* the folder is gone */
        ssize_t got = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (got <= 0)
            return 0;
        buf[got] = '\0';
        for (char *q = buf; *q;) {
            char *end;
            long pid = strtol(q, &end, 10);
            if (end == q)
                break;
            if (pid > 1)
                (void)kill((pid_t)pid, SIGKILL);
            q = *end ? end + 1 : end;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return -1;
}
