/* Unit tests for core/path. OPERATOR.md: "Relative paths in flags and
 * variables are taken from the directory the server was started in." */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table),
        cmocka_unit_test(too_long_is_an_error),
        cmocka_unit_test(program_found_in_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
