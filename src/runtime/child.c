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
