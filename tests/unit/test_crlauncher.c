/* Unit tests for runtime/crlauncher: recognising Debian's launcher script and
 * turning its CHROMIUM_FLAGS into argv entries the way the script does. Each
 * case names the sentence of runtime/crlauncher.h it checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "core/xalloc.h"
#include "runtime/crlauncher.h"

/* The lines of Debian bookworm's /usr/bin/chromium that matter, as shipped. */
static const char debian[] =
    "#!/bin/sh\n"
    "\n"
    "# Chromium launcher\n"
    "APPNAME=chromium\n"
    "GDB=/usr/bin/gdb\n"
    "LIBDIR=/usr/lib/$APPNAME\n"
    "CHROMIUM_FLAGS=\"\"\n"
    "for file in /etc/chromium.d/*; do\n"
    "  test $file = /etc/chromium.d/README || expr $file : .*\\.dpkg > /dev/null || . $file\n"
    "done\n"
    "export CHROME_VERSION_EXTRA=\"built on Debian GNU/Linux 12 (bookworm)\"\n"
    "else\n"
    "  if [ $want_temp_profile -eq 0 ] ; then\n"
    "    exec $LIBDIR/$APPNAME $CHROMIUM_FLAGS \"$@\"\n"
    "  fi\n"
    "fi\n";

static int parse(const char *text, char *real, size_t cap)
{
    return crlauncher_parse_script(text, strlen(text), real, cap);
}

static void recognises_debian_script(void **state)
{
    (void)state;
    char real[256];
    /* "1 when text is Debian's launcher script ...; then writes the binary
     * it runs (/usr/lib/<name>/<name>)" */
    assert_int_equal(parse(debian, real, sizeof real), 1);
    assert_string_equal(real, "/usr/lib/chromium/chromium");
}

static void refuses_anything_else(void **state)
{
    (void)state;
    char real[256], buf[2048];
    /* not a script */
    assert_int_equal(parse("\x7f"
                           "ELF\x02\x01\x01",
                           real, sizeof real),
                     0);
    assert_int_equal(parse("", real, sizeof real), 0);
    /* a script that runs something else */
    snprintf(buf, sizeof buf, "%s", debian);
    char *at = strstr(buf, "exec $LIBDIR");
    memcpy(at, "echo", 4);
    assert_int_equal(parse(buf, real, sizeof real), 0);
    /* LIBDIR elsewhere: the binary would not be where the rule says */
    snprintf(buf, sizeof buf, "%s", debian);
    at = strstr(buf, "LIBDIR=/usr/lib/$APPNAME");
    memcpy(at, "LIBDIR=/opt/lib/$APPNAME", 24);
    assert_int_equal(parse(buf, real, sizeof real), 0);
    /* an APPNAME that could climb out of /usr/lib */
    snprintf(buf, sizeof buf, "%s", debian);
    at = strstr(buf, "APPNAME=chromium");
    memcpy(at, "APPNAME=../../xy", 16);
    assert_int_equal(parse(buf, real, sizeof real), 0);
    /* no room for the path */
    assert_int_equal(parse(debian, real, 8), 0);
}

static void split(const char *flags, const char *const *want)
{
    char **v = crlauncher_split_flags(flags);
    size_t i = 0;
    for (; want[i]; i++) {
        assert_non_null(v[i]);
        assert_string_equal(v[i], want[i]);
    }
    assert_null(v[i]);
    for (i = 0; v[i]; i++)
        xfree(v[i]);
    xfree(v);
}

static void splits_like_the_script(void **state)
{
    (void)state;
    /* "Splits CHROMIUM_FLAGS as the script's unquoted expansion does (on
     * blanks)": what bookworm's /etc/chromium.d gives. */
    static const char *const with_remote[] = {
        "--show-component-extension-options", "--no-default-browser-check",
        "--enable-remote-extensions", "--load-extension=", NULL};
    split("  --show-component-extension-options \t--no-default-browser-check\n"
          "--enable-remote-extensions --load-extension= ",
          with_remote);
    /* "without --enable-remote-extensions it adds
     * --disable-background-networking and --disable-extensions-except= with
     * the --load-extension values" */
    static const char *const without[] = {"--load-extension=/a,/b", "--load-extension=/c",
                                          "--disable-background-networking",
                                          "--disable-extensions-except=/a,/b,/c,", NULL};
    split("--load-extension=/a,/b --load-extension=/c", without);
    static const char *const empty[] = {"--disable-background-networking",
                                        "--disable-extensions-except=", NULL};
    split("", empty);
}

static void unknown_binary_runs_as_it_is(void **state)
{
    (void)state;
    /* "a binary that is not Debian's script ... resolves to itself with no
     * flags" (and is resolved once: the same record every time) */
    const struct crlauncher *l = crlauncher_get("/no/such/chromium-for-browserd-tests");
    assert_string_equal(l->exec, "/no/such/chromium-for-browserd-tests");
    assert_null(l->flags[0]);
    assert_null(l->wrapper);
    assert_ptr_equal(crlauncher_get("/no/such/chromium-for-browserd-tests"), l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(recognises_debian_script),
        cmocka_unit_test(refuses_anything_else),
        cmocka_unit_test(splits_like_the_script),
        cmocka_unit_test(unknown_binary_runs_as_it_is),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
