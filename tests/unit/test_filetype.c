/* Unit tests for domain/filetype (issue 31.11, docs/fs.md "Downloads"):
 * "name, size, type, sha256, complete" of each download. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "domain/filetype.h"

struct tcase {
    const char *name, *file, *head, *want;
};

static const struct tcase cases[] = {
    {"a PDF by its signature, whatever its name", "report.bin", "%PDF-1.4 x", "application/pdf"},
    {"a browser-named download (no extension) by its signature",
     "35838156-bc1e-4f5c-af59-2e684436e419", "\x89PNG\r\n\x1a\n....", "image/png"},
    {"a JPEG", "a", "\xff\xd8\xff\xe0", "image/jpeg"},
    {"a WebP (RIFF....WEBP)", "a", "RIFF\x01\x02\x03\x04WEBPVP8 ", "image/webp"},
    {"a zip", "a", "PK\x03\x04rest", "application/zip"},
    {"an xlsx is a zip named by its extension", "sheet.XLSX", "PK\x03\x04rest",
     "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
    {"text by its extension, any case", "data.CSV", "a,b,c\n", "text/csv"},
    {"no signature, no known extension", "blob.xyz", "hello", "application/octet-stream"},
    {"a dot file has no extension", ".csv", "hello", "application/octet-stream"},
    {"an empty file", "empty", "", "application/octet-stream"},
};

static void mime_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *got =
            filetype_mime(cases[i].file, (const uint8_t *)cases[i].head, strlen(cases[i].head));
        if (strcmp(got, cases[i].want) != 0)
            fail_msg("%s: %s gave %s, want %s", cases[i].name, cases[i].file, got, cases[i].want);
    }
}

static void partial_names(void **state)
{
    (void)state;
    assert_int_equal(filetype_partial("report.pdf.crdownload"), 1);
    assert_int_equal(filetype_partial("Unconfirmed 123.crdownload"), 1);
    assert_int_equal(filetype_partial(".crdownload"), 0);
    assert_int_equal(filetype_partial("report.pdf"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(mime_table),
                                       cmocka_unit_test(partial_names)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
