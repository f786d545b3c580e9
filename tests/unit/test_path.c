/* Unit tests for core/path. OPERATOR.md: "Relative paths in flags and
 * variables are taken from the directory the server was started in." */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <cmocka.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/path.h"

struct pcase {
    const char *name, *in, *want; /* want: "CWD" stands for the current directory */
};

static const struct pcase cases[] = {
    {"the default ./data is joined to the start directory", "./data", "CWD/data"},
    {"a bare relative name", "data", "CWD/data"},
    {"an absolute path stays", "/var/lib/browserd", "/var/lib/browserd"},
    {"repeated and trailing slashes go", "//var//lib/browserd/", "/var/lib/browserd"},
    {"a dot component goes", "/var/./lib", "/var/lib"},
    {"dot-dot removes the previous component", "/var/lib/../tmp", "/var/tmp"},
    {"dot-dot never climbs above the root", "/../../x", "/x"},
    {"the root stays the root", "/", "/"},
    {"empty stays empty (an unset optional flag)", "", ""},
};

static void table(void **state)
{
    (void)state;
    char cwd[PATH_MAX];
    assert_non_null(getcwd(cwd, sizeof cwd));
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char want[PATH_MAX * 2], got[PATH_MAX];
        if (strncmp(cases[i].want, "CWD", 3) == 0)
            snprintf(want, sizeof want, "%s%s", strcmp(cwd, "/") ? cwd : "", cases[i].want + 3);
        else
            snprintf(want, sizeof want, "%s", cases[i].want);
        assert_int_equal(path_absolute(cases[i].in, got, sizeof got), 0);
        if (strcmp(got, want) != 0)
            fail_msg("%s: %s gave %s, want %s", cases[i].name, cases[i].in, got, want);
    }
}

static void too_long_is_an_error(void **state)
{
    (void)state;
    char out[8];
    assert_int_equal(path_absolute("/a/very/long/path", out, sizeof out), -ENAMETOOLONG);
}

static void program_found_in_path(void **state)
{
    (void)state;
    char out[PATH_MAX];
    assert_int_equal(path_program("sh", out, sizeof out), 0);
    assert_true(out[0] == '/');
    assert_int_equal(path_program("no-such-program-browserd", out, sizeof out), -ENOENT);
    assert_int_equal(path_program("./bin/x", out, sizeof out), 0);
    assert_true(out[0] == '/');
}

/* path_remove_tree removes a folder with files, subfolders and a link,
 * without following the link out of the tree; path_read_small reads a small
 * file whole and NUL-terminated, and says -1 for a missing one. */
static void remove_tree_and_read_small(void **state)
{
    (void)state;
    char root[] = "/tmp/bd-test-path-XXXXXX", outside[] = "/tmp/bd-test-path-out-XXXXXX";
    assert_non_null(mkdtemp(root));
    assert_non_null(mkdtemp(outside));
    char p[256];
    snprintf(p, sizeof p, "%s/a", root);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/a/b", root);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/a/b/f", root);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("12345", f);
    fclose(f);
    char buf[4];
    assert_int_equal(path_read_small(p, buf, sizeof buf), 3);
    assert_string_equal(buf, "123");
    char kept[256];
    snprintf(kept, sizeof kept, "%s/kept", outside);
    f = fopen(kept, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(p, sizeof p, "%s/link", root);
    assert_int_equal(symlink(outside, p), 0);
    path_remove_tree(root);
    assert_int_equal(access(root, F_OK), -1);
    assert_int_equal(access(kept, F_OK), 0);
    assert_int_equal(path_read_small(root, buf, sizeof buf), -1);
    assert_string_equal(buf, "");
    path_remove_tree(outside);
    assert_int_equal(access(outside, F_OK), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table),
        cmocka_unit_test(too_long_is_an_error),
        cmocka_unit_test(program_found_in_path),
        cmocka_unit_test(remove_tree_and_read_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
