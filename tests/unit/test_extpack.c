/* Unit tests for runtime/extpack: entry names, extension archives (built
 * here with libarchive's zip writer), unpacking beneath a folder that holds
 * a planted symlink, and CRX headers. Each case is named after the rule of
 * issue 19 / SESSION_API.md section 8 it checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/xalloc.h"
#include "runtime/extpack.h"

/* ---- entry names ---- */

struct path_case {
    const char *name;
    const char *path;
    int ok;
    const char *why; /* a word the refusal contains */
};

static const struct path_case paths[] = {
    {"a file at the top", "manifest.json", 1, NULL},
    {"a nested file", "js/lib/a.js", 1, NULL},
    {"a folder entry ends with /", "icons/", 1, NULL},
    {"names may start with a dot", ".well-known/x", 1, NULL},
    {"zip-slip: a leading ..", "../evil", 0, "zip-slip"},
    {"zip-slip: .. in the middle", "a/../../evil", 0, "zip-slip"},
    {"zip-slip: a . component", "a/./b", 0, "zip-slip"},
    {"absolute paths are refused", "/etc/passwd", 0, "absolute"},
    {"backslashes are refused (Windows separators)", "a\\..\\b", 0, "backslash"},
    {"empty components are refused", "a//b", 0, "empty"},
    {"an empty name is refused", "", 0, "empty"},
    {"control characters are refused", "a\nb", 0, "control"},
};

static void test_paths(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        char why[400] = "";
        int rc = extpack_path_check(paths[i].path, why, sizeof why);
        if ((rc == 0) != paths[i].ok || (paths[i].why && !strstr(why, paths[i].why)))
            fail_msg("%s: %s -> rc %d (%s)", paths[i].name, paths[i].path, rc, why);
    }
    char deep[200];
    for (int i = 0; i < 40; i++)
        memcpy(deep + 2 * i, "d/", 2);
    memcpy(deep + 80, "f", 2);
    char why[400];
    assert_int_equal(extpack_path_check(deep, why, sizeof why), E_INVALID);
}

/* ---- archives ---- */

struct entry {
    const char *name;
    const char *data; /* NULL: a folder */
    int symlink;
};

/* A zip of entries (owned, xfree). */
static char *zip_of(const struct entry *en, size_t n, size_t *len)
{
    size_t cap = 1 << 20;
    char *buf = xmalloc(cap);
    struct archive *a = archive_write_new();
    archive_write_set_format_zip(a);
    assert_int_equal(archive_write_open_memory(a, buf, cap, len), ARCHIVE_OK);
    for (size_t i = 0; i < n; i++) {
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, en[i].name);
        if (en[i].symlink) {
            archive_entry_set_filetype(e, AE_IFLNK);
            archive_entry_set_symlink(e, en[i].data);
            archive_entry_set_perm(e, 0777);
        } else if (en[i].data) {
            archive_entry_set_filetype(e, AE_IFREG);
            archive_entry_set_perm(e, 0644);
            archive_entry_set_size(e, (la_int64_t)strlen(en[i].data));
        } else {
            archive_entry_set_filetype(e, AE_IFDIR);
            archive_entry_set_perm(e, 0755);
        }
        assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
        if (en[i].data && !en[i].symlink)
            archive_write_data(a, en[i].data, strlen(en[i].data));
        archive_entry_free(e);
    }
    archive_write_close(a);
    archive_write_free(a);
    return buf;
}

#define MANIFEST3 "{\"manifest_version\": 3, \"name\": \"mark\", \"version\": \"1.2\"}"

struct zip_case {
    const char *name;
    struct entry entries[4];
    size_t n;
    int ok;
    const char *why;
};

static const struct zip_case zips[] = {
    {"an unpacked extension: manifest.json at the top, v3",
     {{"manifest.json", MANIFEST3, 0}, {"js/", NULL, 0}, {"js/a.js", "1", 0}},
     3,
     1,
     NULL},
    {"manifest_version 2 is accepted",
     {{"manifest.json", "{\"manifest_version\": 2, \"name\": \"x\", \"version\": \"1\"}", 0}},
     1,
     1,
     NULL},
    {"a UTF-8 BOM before the manifest is accepted (Chromium does)",
     {{"manifest.json", "\xEF\xBB\xBF{\"manifest_version\": 3}", 0}},
     1,
     1,
     NULL},
    {"no manifest.json -> refused", {{"a.js", "1", 0}}, 1, 0, "no manifest.json"},
    {"manifest.json in a folder (the folder was zipped) -> refused",
     {{"ext/manifest.json", MANIFEST3, 0}},
     1,
     0,
     "no manifest.json at the top"},
    {"a manifest that is not JSON -> refused", {{"manifest.json", "{nope", 0}}, 1, 0, "not JSON"},
    {"a manifest that is an array -> refused",
     {{"manifest.json", "[3]", 0}},
     1,
     0,
     "not a JSON object"},
    {"manifest_version 4 -> refused",
     {{"manifest.json", "{\"manifest_version\": 4}", 0}},
     1,
     0,
     "2 or 3"},
    {"manifest_version as a string -> refused",
     {{"manifest.json", "{\"manifest_version\": \"3\"}", 0}},
     1,
     0,
     "2 or 3"},
    {"a symlink entry -> refused",
     {{"manifest.json", MANIFEST3, 0}, {"etc", "/etc", 1}},
     2,
     0,
     "symbolic link"},
    {"zip-slip entry -> refused",
     {{"manifest.json", MANIFEST3, 0}, {"../x", "1", 0}},
     2,
     0,
     "zip-slip"},
};

static void test_check(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof zips / sizeof *zips; i++) {
        size_t len = 0;
        char *zip = zip_of(zips[i].entries, zips[i].n, &len);
        struct err e;
        err_init(&e);
        struct extpack_info info;
        int rc = extpack_check(zip, len, &info, &e);
        if ((rc == 0) != zips[i].ok || (zips[i].why && !strstr(e.message, zips[i].why)))
            fail_msg("%s: rc %d (%s)", zips[i].name, rc, e.message);
        if (rc == 0 && i == 0) {
            assert_int_equal(info.manifest_version, 3);
            assert_string_equal(info.name, "mark");
            assert_string_equal(info.version, "1.2");
            assert_int_equal(info.entries, 3);
        }
        xfree(zip);
    }
    struct err e;
    err_init(&e);
    assert_int_equal(extpack_check("hello world", 11, NULL, &e), E_INVALID);
    assert_non_null(strstr(e.message, "not a zip"));
    err_init(&e);
    assert_int_equal(extpack_check("Cr24\3\0\0\0", 8, NULL, &e), E_INVALID);
    assert_non_null(strstr(e.message, "CRX"));
    /* A truncated archive (its central directory cut off). */
    size_t len = 0;
    char *zip = zip_of(zips[0].entries, zips[0].n, &len);
    err_init(&e);
    assert_int_equal(extpack_check(zip, len / 2, NULL, &e), E_INVALID);
    xfree(zip);
}

/* ---- unpacking ---- */

static int is_file(const char *path, mode_t mode)
{
    struct stat st;
    return lstat(path, &st) == 0 && (st.st_mode & 07777) == mode;
}

static void test_unpack(void **state)
{
    (void)state;
    char root[] = "/tmp/extpack-XXXXXX";
    assert_non_null(mkdtemp(root));
    char *dst = xasprintf("%s/dst", root), *outside = xasprintf("%s/outside", root);
    assert_int_equal(mkdir(dst, 0700), 0);
    assert_int_equal(mkdir(outside, 0700), 0);
    int dfd = open(dst, O_RDONLY | O_DIRECTORY);
    mode_t old = umask(077); /* the server's umask: modes are set explicitly anyway */

    struct entry good[] = {{"manifest.json", MANIFEST3, 0}, {"js/a.js", "1", 0}};
    size_t len = 0;
    char *zip = zip_of(good, 2, &len);
    struct err e;
    err_init(&e);
    assert_int_equal(extpack_unpack(zip, len, dfd, &e), 0);
    char *p = xasprintf("%s/js/a.js", dst);
    assert_true(is_file(p, 0644));
    xfree(p);
    p = xasprintf("%s/js", dst);
    assert_true(is_file(p, 0755));
    xfree(p);
    /* Unpacking again over existing files is refused (O_EXCL). */
    err_init(&e);
    assert_int_equal(extpack_unpack(zip, len, dfd, &e), E_INVALID);
    xfree(zip);

    /* A symlink planted in the destination (the session's user owns the
     * tree) is never followed: nothing lands outside. */
    char *link = xasprintf("%s/lib", dst);
    assert_int_equal(symlink(outside, link), 0);
    struct entry through[] = {{"manifest2.json", "{}", 0}, {"lib/evil.js", "x", 0}};
    zip = zip_of(through, 2, &len);
    err_init(&e);
    assert_int_not_equal(extpack_unpack(zip, len, dfd, &e), 0);
    p = xasprintf("%s/evil.js", outside);
    assert_int_equal(access(p, F_OK), -1);
    xfree(p);
    xfree(zip);
    struct entry leaf[] = {{"lib", "x", 0}};
    zip = zip_of(leaf, 1, &len);
    err_init(&e);
    assert_int_not_equal(extpack_unpack(zip, len, dfd, &e), 0);
    xfree(zip);
    umask(old);
    close(dfd);
    char *rm = xasprintf("rm -rf %s", root);
    assert_int_equal(system(rm), 0);
    xfree(rm);
    xfree(link);
    xfree(dst);
    xfree(outside);
}

/* ---- CRX ---- */

struct crx_case {
    const char *name;
    const char *bytes;
    size_t len;
    int ok;
    size_t off;
};

static const struct crx_case crxs[] = {
    {"CRX3: magic, version 3, header length, header, then the zip", "Cr24\3\0\0\0\2\0\0\0abPK", 16,
     1, 14},
    {"CRX3 with an empty header", "Cr24\3\0\0\0\0\0\0\0PK", 14, 1, 12},
    {"CRX2: key and signature lengths", "Cr24\2\0\0\0\1\0\0\0\2\0\0\0kssPK", 21, 1, 19},
    {"not Cr24 -> refused", "PK\3\4\3\0\0\0\0\0\0\0", 12, 0, 0},
    {"version 4 -> refused", "Cr24\4\0\0\0\0\0\0\0", 12, 0, 0},
    {"a header running past the end -> refused", "Cr24\3\0\0\0\xff\xff\xff\xffPK", 14, 0, 0},
    {"truncated before the header length -> refused", "Cr24\3\0\0", 7, 0, 0},
};

static void test_crx(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof crxs / sizeof *crxs; i++) {
        struct err e;
        err_init(&e);
        size_t off = 99;
        int rc = extpack_crx_payload(crxs[i].bytes, crxs[i].len, &off, &e);
        if ((rc == 0) != crxs[i].ok || (rc == 0 && off != crxs[i].off))
            fail_msg("%s: rc %d off %zu (%s)", crxs[i].name, rc, off, e.message);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_unpack),
        cmocka_unit_test(test_crx),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
