/* Unit tests for runtime/sessfs: FileInfo.mode as Go's os.FileMode.String()
 * prints it, mode strings "^[0-7]{3,4}$" (SESSION_API.md section 2), and
 * resolution beneath a temporary root as an unprivileged user (docs/fs.md:
 * ".." and links never leave the root; new files belong to the user). The
 * resolution tests need root (setfsuid) and are skipped otherwise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/xalloc.h"
#include "runtime/sessfs.h"

#define TEST_UID 1234567

static const struct {
    const char *name;
    mode_t mode;
    const char *want;
} modes[] = {
    {"a regular file 644", S_IFREG | 0644, "-rw-r--r--"},
    {"a folder 755", S_IFDIR | 0755, "drwxr-xr-x"},
    {"a sticky folder: d then t, no dash", S_IFDIR | 01777, "dtrwxrwxrwx"},
    {"a symbolic link", S_IFLNK | 0777, "Lrwxrwxrwx"},
    {"setuid and setgid letters", S_IFREG | 06755, "ugrwxr-xr-x"},
    {"a named pipe", S_IFIFO | 0600, "prw-------"},
    {"a socket", S_IFSOCK | 0755, "Srwxr-xr-x"},
    {"a character device: D and c", S_IFCHR | 0666, "Dcrw-rw-rw-"},
    {"no permissions", S_IFREG, "----------"},
};

static void mode_strings(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
        char got[32];
        sessfs_mode_string(modes[i].mode, got, sizeof got);
        if (strcmp(got, modes[i].want) != 0)
            fail_msg("%s: got %s, want %s", modes[i].name, got, modes[i].want);
    }
}

static void mode_parsing(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int ok;
        mode_t want;
    } cases[] = {{"644", 1, 0644}, {"0755", 1, 0755}, {"4755", 1, 04755}, {"777", 1, 0777},
                 {"64", 0, 0},     {"07555", 0, 0},   {"8", 0, 0},        {"", 0, 0},
                 {"64a", 0, 0},    {"-644", 0, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        mode_t m = 0;
        int rc = sessfs_parse_mode(cases[i].in, &m);
        if (cases[i].ok ? rc != 0 || m != cases[i].want : rc != -EINVAL)
            fail_msg("mode '%s': rc %d mode %o", cases[i].in, rc, (unsigned)m);
    }
    mode_t m;
    assert_int_equal(sessfs_parse_mode(NULL, &m), -EINVAL);
}

static void count_dir(void *ctx, int wd, const char *path)
{
    (void)wd;
    (void)path;
    (*(int *)ctx)++;
}

struct root {
    char dir[64];
    struct sessfs fs;
};

static int root_setup(void **state)
{
    struct root *r = xcalloc(1, sizeof *r);
    snprintf(r->dir, sizeof r->dir, "/tmp/sessfs-test-XXXXXX");
    if (mkdtemp(r->dir) == NULL)
        return -1;
    char p[128];
    snprintf(p, sizeof p, "%s/tmp", r->dir);
    if (mkdir(p, 01777) != 0 || chmod(p, 01777) != 0 || chmod(r->dir, 0755) != 0)
        return -1;
    if (sessfs_open(&r->fs, r->dir, TEST_UID) != 0)
        return -1;
    *state = r;
    return 0;
}

static int root_teardown(void **state)
{
    struct root *r = *state;
    sessfs_close(&r->fs);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", r->dir);
    if (system(cmd) != 0)
        return -1;
    xfree(r);
    return 0;
}

static void resolution_stays_in_root(void **state)
{
    struct root *r = *state;
    if (geteuid() != 0)
        skip();
    assert_int_equal(sessfs_write(&r->fs, "/tmp/a/b.txt", 04755, "hi", 2), 0);
    char p[160];
    snprintf(p, sizeof p, "%s/tmp/a/b.txt", r->dir);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_uid, TEST_UID); /* no chown pass: the fsuid made it */
    assert_int_equal(st.st_mode & 07777, 0755);
    /* The calling thread is root again afterwards. */
    assert_int_equal(access("/etc/shadow", R_OK), 0);

    int fd;
    assert_int_equal(sessfs_read_open(&r->fs, "/tmp/../../../tmp/a/b.txt", &fd, &st), 0);
    close(fd);
    assert_int_equal(sessfs_read_open(&r->fs, "/etc/passwd", &fd, &st), -ENOENT);
    assert_int_equal(sessfs_read_open(&r->fs, "/proc/self/root/etc/passwd", &fd, &st), -ENOENT);
    snprintf(p, sizeof p, "%s/tmp/etc", r->dir);
    assert_int_equal(symlink("/etc", p), 0);
    assert_int_equal(sessfs_read_open(&r->fs, "/tmp/etc/passwd", &fd, &st), -ENOENT);
    snprintf(p, sizeof p, "%s/tmp/up", r->dir);
    assert_int_equal(symlink("../../../../..", p), 0);
    assert_int_equal(sessfs_read_open(&r->fs, "/tmp/up/tmp/a/b.txt", &fd, &st), 0);
    close(fd);
    /* The root belongs to root: the session's user may not write there. */
    assert_int_equal(sessfs_write(&r->fs, "/x", 0644, "x", 1), -EACCES);
    assert_int_equal(sessfs_mkdir(&r->fs, "/tmp/d/e", 0700), 0);
    assert_int_equal(sessfs_move(&r->fs, "/tmp/a/b.txt", "/tmp/d/e/c.txt"), 0);
    assert_int_equal(sessfs_move(&r->fs, "/tmp/d/e/c.txt", "/nowhere/c.txt"), -ENOTDIR);
    assert_int_equal(sessfs_unlink(&r->fs, "/tmp/d"), -EISDIR);
    assert_int_equal(sessfs_rmtree(&r->fs, "/tmp/d"), 0);
    assert_int_equal(sessfs_stat(&r->fs, "/tmp/d", &st), -ENOENT);
    assert_int_equal(sessfs_rmtree(&r->fs, "/"), -EINVAL);
}

/* The inotify instance is charged to the session's user, and the thread's
 * real uid is root again afterwards. */
static void inotify_charged_to_the_session(void **state)
{
    struct root *r = *state;
    if (geteuid() != 0)
        skip();
    int fd = sessfs_inotify_new(&r->fs);
    assert_true(fd >= 0);
    uid_t ru, eu, su;
    assert_int_equal(getresuid(&ru, &eu, &su), 0);
    assert_int_equal(ru, 0);
    assert_int_equal(eu, 0);
    assert_int_equal(su, 0);
    int budget = 4, n = 0;
    assert_int_equal(sessfs_watch_add(&r->fs, fd, "/tmp", IN_CREATE, 1, &budget, count_dir, &n), 0);
    assert_int_equal(n, 1);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mode_strings),
        cmocka_unit_test(mode_parsing),
        cmocka_unit_test_setup_teardown(resolution_stays_in_root, root_setup, root_teardown),
        cmocka_unit_test_setup_teardown(inotify_charged_to_the_session, root_setup, root_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
