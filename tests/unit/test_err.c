/* Unit tests for core/err: the Error record the client sees on failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "core/err.h"

/* "Invalid input: 400 bad_request with one details entry per problem,
 * code invalid_input and a message that names the field path and the rule." */
static void field_error_names_path_and_rule(void **state)
{
    (void)state;
    struct err e;
    err_init(&e);
    assert_int_equal(err_field(&e, "viewport.width", "must be an integer >= 1"), E_INVALID);
    assert_string_equal(e.code, "bad_request");
    assert_int_equal(e.ndetails, 1);
    assert_string_equal(e.details[0].code, "invalid_input");
    assert_string_equal(e.details[0].message, "viewport.width: must be an integer >= 1");
    assert_string_equal(e.message, "viewport.width: must be an integer >= 1");
}

static void one_detail_per_problem(void **state)
{
    (void)state;
    struct err e;
    err_init(&e);
    (void)err_field(&e, "name", "must match ^[a-zA-Z0-9._-]{1,255}$");
    (void)err_field(&e, "tags", "at most 50 entries");
    assert_int_equal(e.ndetails, 2);
    assert_true(err_has_fields(&e));
    assert_non_null(strstr(e.message, "2 problems"));
}

static void details_beyond_capacity_are_counted(void **state)
{
    (void)state;
    struct err e;
    err_init(&e);
    for (int i = 0; i < 40; i++)
        (void)err_field(&e, "tags", "entry %d bad", i);
    assert_int_equal(e.ndetails, 32);
    assert_int_equal(e.nmore, 8);
}

/* "Nothing a tenant sees shows a host path": the data folder becomes <data>
 * wherever it appears, and a text that grows past its buffer is cut. */
static void hidden_folders_are_scrubbed(void **state)
{
    (void)state;
    err_hide_path("/srv/browserd-data", "<data>");
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"mkdir /srv/browserd-data/sessions/x: No space", "mkdir <data>/sessions/x: No space"},
        {"a /srv/browserd-data b /srv/browserd-data", "a <data> b <data>"},
        {"/tmp/x/app.log: file not found", "/tmp/x/app.log: file not found"},
        {"/srv/browserd-dat is another folder", "/srv/browserd-dat is another folder"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char buf[ERR_MSG_MAX];
        snprintf(buf, sizeof buf, "%s", cases[i].in);
        err_scrub_text(buf, sizeof buf);
        assert_string_equal(buf, cases[i].out);
    }
    char small[24] = "x /srv/browserd-data yz";
    err_scrub_text(small, 12);
    assert_string_equal(small, "x <data> yz");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(field_error_names_path_and_rule),
        cmocka_unit_test(one_detail_per_problem),
        cmocka_unit_test(details_beyond_capacity_are_counted),
        cmocka_unit_test(hidden_folders_are_scrubbed),
    };
    return cmocka_run_group_tests_name("core/err", tests, NULL, NULL);
}
