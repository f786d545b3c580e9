/* child: see child.h. */
#include "runtime/child.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

void child_reset_signals(void)
{
    sigset_t none;
    struct sigaction dfl;
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++)
        (void)sigaction(sig, &dfl, NULL);
}

static void oom_score_adj_write(const char *v, size_t n)
{
    int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    (void)!write(fd, v, n);
    close(fd);
}

void child_oom_score_adj(void)
{
    static const char v[] = "1000";
    _Static_assert(CHILD_OOM_SCORE_ADJ == 1000, "the text above");
    oom_score_adj_write(v, sizeof v - 1);
}

/* Set once at start, before any thread or child (child_oom_floor_held). */
static int oom_floor_held;

void child_oom_floor_held(int held)
{
    oom_floor_held = held;
}

void child_oom_score_adj_browser(void)
{
    static const char v[] = "300";
    _Static_assert(CHILD_BROWSER_OOM_SCORE_ADJ == 300, "the text above");
    if (oom_floor_held)
        child_oom_score_adj();
    else
        oom_score_adj_write(v, sizeof v - 1);
}

void child_cloexec_from(int from)
{
    if (syscall(SYS_close_range, (unsigned)from, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
        return;
    for (int fd = from; fd < 65536; fd++)
        (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
}

void child_close_from(int from)
{
    if (syscall(SYS_close_range, (unsigned)from, ~0U, 0) == 0)
        return;
    for (int fd = from; fd < 65536; fd++)
        (void)close(fd);
}
