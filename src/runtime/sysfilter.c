#include "runtime/sysfilter.h"

#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/netlink.h>

#include "core/log.h"
#include "core/xalloc.h"

/* System calls no session process needs and most kernel exploits start
 * from: keyrings, eBPF, perf events, userfaultfd, io_uring, loading code
 * into the kernel, mounting, handles that bypass the mount namespace, and
 * the privileged odds and ends. Names unknown to this libseccomp are
 * skipped (the kernel it knows lacks them). */
static const char *const denied[] = {
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "mount",
    "umount2",
    "pivot_root",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "mount_setattr",
    "swapon",
    "swapoff",
    "reboot",
    "acct",
    "quotactl",
    "quotactl_fd",
    "lookup_dcookie",
    "open_by_handle_at",
    "name_to_handle_at",
    "iopl",
    "ioperm",
    "syslog",
    "vhangup",
    "uselib",
    "nfsservctl",
    "_sysctl",
    "setns",
};

/* Socket families a session uses: local, IPv4, IPv6, and netlink (Chromium
 * watches the network's state through NETLINK_ROUTE and devices through
 * uevents). Every other family (packet sockets above all) is refused, and
 * so is every other netlink protocol (nf_tables, xfrm, ...). */
static int family_allowed(int f)
{
    return f == AF_UNIX || f == AF_INET || f == AF_INET6 || f == AF_NETLINK;
}

static int netlink_allowed(int p)
{
    return p == NETLINK_ROUTE || p == NETLINK_KOBJECT_UEVENT;
}

/* An int argument compared on its low 32 bits: the kernel truncates it, so
 * a plain 64-bit comparison would let a caller slip past with high bits set. */
#define LOW32 0xffffffffULL

static int rule(scmp_filter_ctx f, uint32_t action, const char *name, unsigned n,
                const struct scmp_arg_cmp *cmp)
{
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR)
        return 0;
    return seccomp_rule_add_array(f, action, nr, n, cmp);
}

static int build(enum sysfilter_kind kind, void **out, size_t *len)
{
    scmp_filter_ctx f = seccomp_init(SCMP_ACT_ALLOW);
    if (!f)
        return -ENOMEM;
    const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
    /* Another architecture's system calls (int 0x80 on x86-64) are not
     * described by these rules: refused as unknown. */
    int rc = seccomp_attr_set(f, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(ENOSYS));
    for (size_t i = 0; rc == 0 && i < sizeof denied / sizeof *denied; i++)
        rc = rule(f, eperm, denied[i], 0, NULL);
    for (int fam = 0; rc == 0 && fam < AF_MAX; fam++) {
        if (family_allowed(fam))
            continue;
        struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ, LOW32, (scmp_datum_t)fam);
        rc = rule(f, eperm, "socket", 1, &c);
    }
    if (rc == 0) {
        struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_GE, AF_MAX, 0);
        rc = rule(f, eperm, "socket", 1, &c);
    }
    for (int p = 0; rc == 0 && p < MAX_LINKS; p++) {
        if (netlink_allowed(p))
            continue;
        struct scmp_arg_cmp c[2] = {SCMP_A0(SCMP_CMP_MASKED_EQ, LOW32, AF_NETLINK),
                                    SCMP_A2(SCMP_CMP_MASKED_EQ, LOW32, (scmp_datum_t)p)};
        rc = rule(f, eperm, "socket", 2, c);
    }
    if (rc == 0) {
        struct scmp_arg_cmp c[2] = {SCMP_A0(SCMP_CMP_MASKED_EQ, LOW32, AF_NETLINK),
                                    SCMP_A2(SCMP_CMP_GE, MAX_LINKS, 0)};
        rc = rule(f, eperm, "socket", 2, c);
    }
    if (rc == 0 && kind == SYSFILTER_SESSION) {
        /* No new user namespace: clone and unshare with CLONE_NEWUSER are
         * refused; clone3 passes its flags in memory a filter cannot read,
         * so it answers ENOSYS and libc falls back to clone. */
        struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER);
        rc = rule(f, eperm, "clone", 1, &c);
        if (rc == 0)
            rc = rule(f, eperm, "unshare", 1, &c);
        if (rc == 0)
            rc = rule(f, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL);
    }
    /* The program as bytes: libseccomp 2.5 exports to a descriptor only. */
    int mfd = rc == 0 ? memfd_create("browserd-sysfilter", MFD_CLOEXEC) : -1;
    if (rc == 0 && mfd < 0)
        rc = -errno;
    if (rc == 0)
        rc = seccomp_export_bpf(f, mfd);
    seccomp_release(f);
    off_t size = rc == 0 ? lseek(mfd, 0, SEEK_END) : -1;
    if (rc == 0 && size <= 0)
        rc = -EIO;
    if (rc == 0) {
        *out = xmalloc((size_t)size);
        *len = (size_t)size;
        if (pread(mfd, *out, (size_t)size, 0) != size) {
            rc = -EIO;
            xfree(*out);
            *out = NULL;
        }
    }
    if (mfd >= 0)
        close(mfd);
    return rc;
}

static void *programs[2];
static size_t lengths[2];

int sysfilter_init(void)
{
    for (int k = 0; k < 2; k++) {
        if (programs[k])
            continue;
        int rc = build((enum sysfilter_kind)k, &programs[k], &lengths[k]);
        if (rc != 0) {
            log_error("sysfilter: building the %s program: %s",
                      k == SYSFILTER_BROWSER ? "browser's" : "session's", strerror(-rc));
            return rc;
        }
    }
    return 0;
}

const void *sysfilter_program(enum sysfilter_kind kind, size_t *len)
{
    *len = lengths[kind];
    return programs[kind];
}
