/* Unit tests for domain/procreq: the request rules of browsers.process.*
 * (SESSION_API.md section 3 and its multi-tenant notes 3.4). Every case names
 * the sentence it checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "core/err.h"
#include "core/xalloc.h"
#include "domain/procreq.h"

#define NCASES(a) (sizeof(a) / sizeof((a)[0]))
#define UID       1100042u

struct parse_case {
    const char *name;
    int spawn;
    const char *body;
    int ok;
    const char *msg; /* substring of the error when !ok */
};

static const struct parse_case parse_cases[] = {
    {"3.1 command (required)", 0, "{\"command\":\"ls\"}", 1, NULL},
    {"3.1 command required: missing", 0, "{}", 0, "command required"},
    {"3.1 command required: empty", 0, "{\"command\":\"\"}", 0, "command required"},
    {"3.1 command is a string", 0, "{\"command\":1}", 0, "command required"},
    {"execve cannot carry NUL: command", 0, "{\"command\":\"l\\u0000s\"}", 0, "NUL"},
    {"3.1 args?: string[]", 0, "{\"command\":\"ls\",\"args\":[\"-l\",\"/\"]}", 1, NULL},
    {"3.1 args null is the default", 0, "{\"command\":\"ls\",\"args\":null}", 1, NULL},
    {"3.1 args must be strings", 0, "{\"command\":\"ls\",\"args\":[1]}", 0, "args[0]"},
    {"execve cannot carry NUL: args", 0, "{\"command\":\"ls\",\"args\":[\"a\\u0000\"]}", 0,
     "args[0]"},
    {"3.1 cwd absolute", 0, "{\"command\":\"ls\",\"cwd\":\"/tmp\"}", 1, NULL},
    {"3.1 cwd relative rejected", 0, "{\"command\":\"ls\",\"cwd\":\"tmp\"}", 0, "absolute"},
    {"3.1 env object of strings", 0, "{\"command\":\"ls\",\"env\":{\"A\":\"1\"}}", 1, NULL},
    {"3.1 env values are strings", 0, "{\"command\":\"ls\",\"env\":{\"A\":1}}", 0, "env.A"},
    {"env names without '='", 0, "{\"command\":\"ls\",\"env\":{\"A=B\":\"1\"}}", 0, "without '='"},
    {"env names non-empty", 0, "{\"command\":\"ls\",\"env\":{\"\":\"1\"}}", 0, "non-empty"},
    {"3.1 as_root boolean", 0, "{\"command\":\"ls\",\"as_root\":true}", 1, NULL},
    {"3.1 as_root must be a boolean", 0, "{\"command\":\"ls\",\"as_root\":1}", 0, "boolean"},
    {"3.4 as_user: the session's user kernel", 0, "{\"command\":\"ls\",\"as_user\":\"kernel\"}", 1,
     NULL},
    {"3.4 as_user: root is not the session's user", 0, "{\"command\":\"ls\",\"as_user\":\"root\"}",
     0, "failed to lookup user"},
    {"3.1 cannot specify both as_root and as_user", 0,
     "{\"command\":\"ls\",\"as_root\":true,\"as_user\":\"kernel\"}", 0,
     "cannot specify both as_root and as_user"},
    {"3.4 exec timeout at most 600 s", 0, "{\"command\":\"ls\",\"timeout_sec\":600}", 1, NULL},
    {"3.4 exec timeout above 600 s rejected", 0, "{\"command\":\"ls\",\"timeout_sec\":601}", 0,
     "between 1 and 600"},
    {"exec timeout 0 rejected", 0, "{\"command\":\"ls\",\"timeout_sec\":0}", 0, "between 1"},
    {"timeout_sec is an integer", 0, "{\"command\":\"ls\",\"timeout_sec\":1.5}", 0, "integer"},
    {"spawn timeout may be long", 1, "{\"command\":\"ls\",\"timeout_sec\":86400}", 1, NULL},
    {"3.1 spawn allocate_tty with rows/cols", 1,
     "{\"command\":\"sh\",\"allocate_tty\":true,\"rows\":24,\"cols\":80}", 1, NULL},
    {"3.1 spawn TTY: rows must be <= 65535", 1, "{\"command\":\"sh\",\"rows\":65536}", 0,
     "rows must be <= 65535"},
    {"3.1 spawn TTY: cols must be <= 65535", 1, "{\"command\":\"sh\",\"cols\":70000}", 0,
     "cols must be <= 65535"},
    {"3.1 spawn rows >= 1", 1, "{\"command\":\"sh\",\"rows\":0}", 0, ">= 1"},
    {"allocate_tty is a boolean", 1, "{\"command\":\"sh\",\"allocate_tty\":\"yes\"}", 0, "boolean"},
};

static void test_parse(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES(parse_cases); i++) {
        const struct parse_case *c = &parse_cases[i];
        json_error_t je;
        json_t *b = json_loads(c->body, JSON_ALLOW_NUL, &je);
        if (!b)
            fail_msg("%s: bad fixture %s", c->name, je.text);
        struct procreq r;
        struct err e;
        err_init(&e);
        int rc = procreq_parse(b, c->spawn, UID, &r, &e);
        if ((rc == 0) != c->ok)
            fail_msg("%s: rc %d (%s)", c->name, rc, e.message);
        if (!c->ok) {
            assert_int_equal(rc, E_INVALID);
            if (c->msg && !strstr(e.message, c->msg))
                fail_msg("%s: message \"%s\" lacks \"%s\"", c->name, e.message, c->msg);
            assert_null(r.argv.v);
        }
        procreq_clear(&r);
        json_decref(b);
    }
}

static void test_parse_values(void **state)
{
    (void)state;
    json_t *b = json_loads("{\"command\":\"ls\",\"args\":[\"-l\"],\"env\":{\"A\":\"x=y\"},"
                           "\"allocate_tty\":true,\"rows\":5,\"cols\":7,\"timeout_sec\":9}",
                           0, NULL);
    struct procreq r;
    struct err e;
    err_init(&e);
    assert_int_equal(procreq_parse(b, 1, UID, &r, &e), 0);
    assert_int_equal(r.argv.n, 2);
    assert_string_equal(r.argv.v[0], "ls");
    assert_string_equal(r.argv.v[1], "-l");
    assert_null(r.argv.v[2]);
    assert_string_equal(r.env.v[0], "A=x=y");
    assert_int_equal(r.tty, 1);
    assert_int_equal(r.rows, 5);
    assert_int_equal(r.cols, 7);
    assert_int_equal(r.timeout_s, 9);
    procreq_clear(&r);
    /* exec ignores the spawn-only fields. */
    assert_int_equal(procreq_parse(b, 0, UID, &r, &e), 0);
    assert_int_equal(r.tty, 0);
    procreq_clear(&r);
    json_decref(b);
}

static void test_user(void **state)
{
    (void)state;
    static const struct {
        const char *name, *user;
        int ok;
    } cases[] = {
        {"3.4 the session's user by name", "kernel", 1},
        {"3.1 a UID: the session's", "1100042", 1},
        {"3.1 uid:gid with the session's group", "kernel:1100042", 1},
        {"3.1 uid:gid numeric", "1100042:1100042", 1},
        {"another group refused", "kernel:0", 0},
        {"root refused (as_root is the way)", "root", 0},
        {"uid 0 refused", "0", 0},
        {"another uid refused", "1100043", 0},
        {"prefix of the uid refused", "110004", 0},
        {"empty refused", "", 0},
        {"name with suffix refused", "kernelx", 0},
    };
    for (size_t i = 0; i < NCASES(cases); i++)
        if (procreq_user_ok(cases[i].user, UID) != cases[i].ok)
            fail_msg("%s", cases[i].name);
}

static void test_uuid_signal_resize(void **state)
{
    (void)state;
    assert_true(procreq_is_uuid("6b317f50-8a11-41ae-b9b5-2615bf4ca3af"));
    assert_true(procreq_is_uuid("6B317F50-8A11-41AE-B9B5-2615BF4CA3AF"));
    assert_false(procreq_is_uuid("6b317f50-8a11-41ae-b9b5-2615bf4ca3a"));
    assert_false(procreq_is_uuid("6b317f50x8a11-41ae-b9b5-2615bf4ca3af"));
    assert_false(procreq_is_uuid("../../../../etc/passwd-aaaaaaaaaaaaaa"));
    assert_false(procreq_is_uuid(""));
    assert_int_equal(procreq_signal("TERM"), SIGTERM);
    assert_int_equal(procreq_signal("KILL"), SIGKILL);
    assert_int_equal(procreq_signal("INT"), SIGINT);
    assert_int_equal(procreq_signal("HUP"), SIGHUP);
    assert_int_equal(procreq_signal("STOP"), 0);
    assert_int_equal(procreq_signal("term"), 0);
    assert_int_equal(procreq_signal(NULL), 0);
    static const struct {
        const char *name, *body, *msg;
    } rs[] = {
        {"3.1 resize ok", "{\"rows\":1,\"cols\":65535}", NULL},
        {"3.1 rows and cols must be > 0", "{\"rows\":0,\"cols\":5}", "must be > 0"},
        {"3.1 rows and cols must be <= 65535", "{\"rows\":5,\"cols\":65536}", "<= 65535"},
        {"both required", "{\"rows\":5}", "required"},
    };
    for (size_t i = 0; i < NCASES(rs); i++) {
        json_t *b = json_loads(rs[i].body, 0, NULL);
        int r = 0, c = 0;
        struct err e;
        err_init(&e);
        int rc = procreq_resize(b, &r, &c, &e);
        if ((rc == 0) != (rs[i].msg == NULL) || (rs[i].msg && !strstr(e.message, rs[i].msg)))
            fail_msg("%s: rc %d %s", rs[i].name, rc, e.message);
        json_decref(b);
    }
}

static void test_b64(void **state)
{
    (void)state;
    static const struct {
        const char *name, *in, *out;
        size_t len;
    } cases[] = {
        {"empty", "", "", 0},
        {"no padding", "aGVs", "hel", 3},
        {"one '='", "aGk=", "hi", 2},
        {"two '='", "aA==", "h", 1},
        {"bytes above 0x7f", "/w==", "\xff", 1},
        {"3.1 invalid base64: length", "aGk", NULL, 0},
        {"3.1 invalid base64: alphabet", "a-k=", NULL, 0},
        {"3.1 invalid base64: '=' inside", "a=k=", NULL, 0},
        {"3.1 invalid base64: three '='", "a===", NULL, 0},
        {"3.1 invalid base64: whitespace", "aGk=\n", NULL, 0},
        {"3.1 invalid base64: NUL", "aG\0=", NULL, 0},
    };
    for (size_t i = 0; i < NCASES(cases); i++) {
        unsigned char *o;
        size_t n;
        size_t inlen = strlen(cases[i].in);
        if (strcmp(cases[i].name, "3.1 invalid base64: NUL") == 0)
            inlen = 4;
        int rc = procreq_b64_decode(cases[i].in, inlen, &o, &n);
        if ((rc == 0) != (cases[i].out != NULL))
            fail_msg("%s: rc %d", cases[i].name, rc);
        if (cases[i].out) {
            assert_int_equal(n, cases[i].len);
            assert_memory_equal(o, cases[i].out, n);
        }
        xfree(o);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse), cmocka_unit_test(test_parse_values),
        cmocka_unit_test(test_user),  cmocka_unit_test(test_uuid_signal_resize),
        cmocka_unit_test(test_b64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
