/* Unit tests for runtime/profile_archive: a user-data folder archived without
 * its caches and extracted again (real GNU tar, in a temporary folder). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/path.h"
#include "core/xalloc.h"
#include "runtime/profile_archive.h"

/* One file of a fake user-data folder and whether it survives the trip. */
struct file_case {
    const char *name; /* the sentence of the issue the case checks */
    const char *path; /* relative to the user-data folder */
    int kept;
};

static const struct file_case files[] = {
    {"state: cookies are kept", "Default/Cookies", 1},
    {"state: preferences are kept", "Default/Preferences", 1},
    {"state: Local State is kept", "Local State", 1},
    {"state: localStorage LevelDB log files (NNNNNN.log) are data and kept",
     "Default/Local Storage/leveldb/000003.log", 1},
    {"state: IndexedDB is kept", "Default/IndexedDB/http_127.0.0.1_1.indexeddb.leveldb/CURRENT", 1},
    {"state: service worker registrations are kept", "Default/Service Worker/Database/CURRENT", 1},
    {"state: a file with spaces in a second profile is kept", "Profile 1/Web Data", 1},
    {"without caches: Cache", "Default/Cache/Cache_Data/data_0", 0},
    {"without caches: Code Cache", "Default/Code Cache/js/index", 0},
    {"without caches: GPUCache", "Default/GPUCache/data_1", 0},
    {"without caches: Service Worker/CacheStorage", "Default/Service Worker/CacheStorage/x/index",
     0},
    {"without caches: ShaderCache", "ShaderCache/data_0", 0},
    {"without caches: GrShaderCache", "GrShaderCache/data_0", 0},
    {"without caches: Crashpad", "Crashpad/settings.dat", 0},
    {"without caches: a second profile's Cache too", "Profile 1/Cache/Cache_Data/index", 0},
    {"without caches: Chromium's debug log", "chrome_debug.log", 0},
    {"without locks: SingletonLock", "SingletonLock", 0},
    {"without locks: SingletonCookie", "SingletonCookie", 0},
    {"without the DevTools port file", "DevToolsActivePort", 0},
};

struct fixture {
    char root[256];
    char src[300], dst[300], archive[300];
};

static void write_file(const char *root, const char *rel, const char *content)
{
    char *p = xasprintf("%s/%s", root, rel);
    /* mkdir -p of the parents */
    for (char *s = p + strlen(root) + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            (void)mkdir(p, 0700);
            *s = '/';
        }
    }
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(content, f);
    fclose(f);
    xfree(p);
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return xstrdup(buf);
}

static int setup(void **state)
{
    struct fixture *fx = xcalloc(1, sizeof *fx);
    snprintf(fx->root, sizeof fx->root, "/tmp/bd-profarch-XXXXXX");
    assert_non_null(mkdtemp(fx->root));
    snprintf(fx->src, sizeof fx->src, "%s/src", fx->root);
    snprintf(fx->dst, sizeof fx->dst, "%s/out/session", fx->root);
    snprintf(fx->archive, sizeof fx->archive, "%s/p.tar.gz", fx->root);
    assert_int_equal(mkdir(fx->src, 0700), 0);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        write_file(fx->src, files[i].path, files[i].path);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    path_remove_tree(fx->root);
    xfree(fx);
    return 0;
}

/* "a saved copy of a browser's state (the user-data folder without caches)" */
static void round_trip_keeps_state_and_drops_caches(void **state)
{
    struct fixture *fx = *state;
    struct err e;
    err_init(&e);
    assert_int_equal(profile_archive_create(fx->src, fx->archive, 0, &e), 0);
    assert_int_equal(profile_archive_extract(fx->archive, fx->dst, &e), 0);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        const struct file_case *c = &files[i];
        char *p = xasprintf("%s/%s", fx->dst, c->path);
        char *got = read_all(p);
        if (c->kept && (!got || strcmp(got, c->path) != 0))
            fail_msg("%s: %s missing or changed after the round trip", c->name, c->path);
        if (!c->kept && got)
            fail_msg("%s: %s should not be in the archive", c->name, c->path);
        xfree(got);
        xfree(p);
    }
    struct stat st;
    assert_int_equal(stat(fx->dst, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700); /* "create the folder 0700" */
}

/* "stored as an archive ... written atomically: write to a temp file, fsync,
 * rename": the archive is a gzip, it replaces the old one, no temp remains. */
static void create_replaces_atomically(void **state)
{
    struct fixture *fx = *state;
    struct err e;
    err_init(&e);
    write_file(fx->root, "p.tar.gz", "old archive");
    assert_int_equal(profile_archive_create(fx->src, fx->archive, 0, &e), 0);
    unsigned char magic[2] = {0, 0};
    int fd = open(fx->archive, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(read(fd, magic, 2), 2);
    close(fd);
    assert_int_equal(magic[0], 0x1f);
    assert_int_equal(magic[1], 0x8b);
    DIR *d = opendir(fx->root);
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strstr(de->d_name, ".tmp."))
            fail_msg("temporary file %s left behind", de->d_name);
    closedir(d);
}

/* Issue 29.12: "the archive's size is checked before it replaces the old
 * one": over the cap, E_TOOBIG, the old archive stays and no temp remains. */
static void over_the_size_cap_keeps_the_old_archive(void **state)
{
    struct fixture *fx = *state;
    struct err e;
    err_init(&e);
    write_file(fx->root, "p.tar.gz", "old archive");
    assert_int_equal(profile_archive_create(fx->src, fx->archive, 16, &e), E_TOOBIG);
    assert_non_null(strstr(e.message, "quota"));
    char *got = read_all(fx->archive);
    assert_string_equal(got, "old archive");
    xfree(got);
    DIR *d = opendir(fx->root);
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strstr(de->d_name, ".tmp."))
            fail_msg("temporary file %s left behind", de->d_name);
    closedir(d);
    err_init(&e);
    assert_int_equal(profile_archive_create(fx->src, fx->archive, 1 << 20, &e), 0);
}

/* Failures name the problem and leave an existing archive untouched. */
struct fail_case {
    const char *name;
    int create; /* 1: create from src, 0: extract archive */
    const char *src_or_archive;
    int rc;
};

static void failures(void **state)
{
    struct fixture *fx = *state;
    static const struct fail_case cases[] = {
        {"create from a missing folder is E_NOTFOUND", 1, "/nonexistent/bd-profile", E_NOTFOUND},
        {"extract of a missing archive is E_NOTFOUND", 0, "/nonexistent/bd.tar.gz", E_NOTFOUND},
        {"extract of a file that is not a gzip archive is E_INTERNAL", 0, "NOTGZ", E_INTERNAL},
    };
    write_file(fx->root, "p.tar.gz", "old archive");
    write_file(fx->root, "notgz", "plain text");
    char *notgz = xasprintf("%s/notgz", fx->root);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct fail_case *c = &cases[i];
        struct err e;
        err_init(&e);
        const char *arg = strcmp(c->src_or_archive, "NOTGZ") == 0 ? notgz : c->src_or_archive;
        int rc = c->create ? profile_archive_create(arg, fx->archive, 0, &e)
                           : profile_archive_extract(arg, fx->dst, &e);
        if (rc != c->rc)
            fail_msg("%s: got %d (%s)", c->name, rc, e.message);
        if (!e.message[0])
            fail_msg("%s: no message", c->name);
    }
    xfree(notgz);
    char *old = read_all(fx->archive);
    assert_string_equal(old, "old archive");
    xfree(old);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(round_trip_keeps_state_and_drops_caches, setup, teardown),
        cmocka_unit_test_setup_teardown(create_replaces_atomically, setup, teardown),
        cmocka_unit_test_setup_teardown(failures, setup, teardown),
        cmocka_unit_test_setup_teardown(over_the_size_cap_keeps_the_old_archive, setup, teardown),
    };
    return cmocka_run_group_tests_name("runtime/profile_archive", tests, NULL, NULL);
}
