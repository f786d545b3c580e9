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

int cgroup_kill_tasks(const char *dir, int rounds)
{
    char p[512], buf[8192];
    if (join(p, sizeof p, dir, "cgroup.kill") != 0)
        return -1;
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)!write(fd, "1", 1);
        close(fd);
    }
    (void)join(p, sizeof p, dir, "cgroup.procs");
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
