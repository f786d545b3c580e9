/* Unit tests for telemetry/auditspool: issue 33.7, "never loses an entry of
 * an acknowledged change": the spool's records read back, and what a crash
 * can leave in the file (a torn last record, a garbled line) skipped. One
 * case per rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/limits.h"
#include "core/xalloc.h"
#include "telemetry/auditspool.h"

/* An entry numbered i, its path "/profiles/p<i>". */
static void entry(struct audit_rec *r, int i)
{
    memset(r, 0, sizeof *r);
    snprintf(r->entry_id, sizeof r->entry_id, "%032d", i);
    snprintf(r->org_id, sizeof r->org_id, "org_%d", i);
    snprintf(r->method, sizeof r->method, "POST");
    snprintf(r->auth_strategy, sizeof r->auth_strategy, "api_key");
    snprintf(r->service, sizeof r->service, "profiles");
    r->ts = 1700000000000 + i;
    r->status = 200;
    r->duration_ms = i;
    char path[64];
    snprintf(path, sizeof path, "/profiles/p%d", i);
    r->path = xstrdup(path);
    r->route = xstrdup("/profiles");
    r->client_ip = xstrdup("127.0.0.1");
    r->user_agent = xstrdup("ua \"quoted\" \\x00");
    r->user_id = xstrdup("key_1");
    r->domain = xstrdup("h:1");
}

struct seen {
    char paths[512];
    size_t n;
};

static int collect(void *ctx, struct audit_rec *r)
{
    struct seen *s = ctx;
    size_t len = strlen(s->paths);
    snprintf(s->paths + len, sizeof s->paths - len, "%s%s", len ? " " : "", r->path);
    s->n++;
    audit_rec_clear(r);
    return 0;
}

/* A temporary file holding the records of entries 1..n, then tail. */
static int spool_with(int n, const char *tail, size_t tail_len)
{
    char path[] = "/tmp/test_auditspool_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    char *buf = xmalloc(LIM_AUDIT_SPOOL_RECORD_BYTES);
    for (int i = 1; i <= n; i++) {
        struct audit_rec r;
        entry(&r, i);
        size_t len = auditspool_encode(&r, buf, LIM_AUDIT_SPOOL_RECORD_BYTES);
        assert_true(len > 0);
        assert_int_equal(write(fd, buf, len), (ssize_t)len);
        audit_rec_clear(&r);
    }
    xfree(buf);
    if (tail_len)
        assert_int_equal(write(fd, tail, tail_len), (ssize_t)tail_len);
    return fd;
}

static void round_trip(void **state)
{
    (void)state;
    struct audit_rec r, back;
    entry(&r, 7);
    char buf[LIM_AUDIT_SPOOL_RECORD_BYTES];
    size_t len = auditspool_encode(&r, buf, sizeof buf);
    assert_true(len > 1 && buf[len - 1] == '\n');
    assert_null(memchr(buf, '\n', len - 1)); /* one line */
    assert_int_equal(auditspool_parse(buf, len - 1, &back), 0);
    assert_string_equal(back.entry_id, r.entry_id);
    assert_string_equal(back.org_id, r.org_id);
    assert_true(back.ts == r.ts && back.status == 200 && back.duration_ms == 7);
    assert_string_equal(back.user_agent, r.user_agent);
    assert_string_equal(back.path, r.path);
    audit_rec_clear(&r);
    audit_rec_clear(&back);
}

static const struct {
    const char *rule;
    int whole;        /* whole records written first */
    const char *tail; /* then these bytes */
    const char *paths;
    size_t skipped;
} cases[] = {
    {"every whole record is read back, in order", 3, "", "/profiles/p1 /profiles/p2 /profiles/p3",
     0},
    {"a torn tail (a last record without its newline) is skipped", 2,
     "{\"id\":\"00000000000000000000000000000003\",\"org\":\"o", "/profiles/p1 /profiles/p2", 1},
    {"a torn tail that is a whole JSON object but no newline is skipped all the same", 1,
     "{\"id\":\"x\"}", "/profiles/p1", 1},
    {"a line that is not a record is skipped, the records after it are read", 1,
     "garbage\n{\"id\":\"\"}\n[1]\n", "/profiles/p1", 3},
    {"an empty spool reads nothing", 0, "", "", 0},
};

static void replay_torn_tail(void **state)
{
    (void)state;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int fd = spool_with(cases[c].whole, cases[c].tail, strlen(cases[c].tail));
        struct seen s = {{0}, 0};
        size_t skipped = 0;
        int rc = auditspool_read(fd, collect, &s, &skipped);
        close(fd);
        if (rc != 0 || strcmp(s.paths, cases[c].paths) != 0 || skipped != cases[c].skipped)
            fail_msg("%s: rc %d, read \"%s\", skipped %zu", cases[c].rule, rc, s.paths, skipped);
    }
}

/* A line longer than a record's cap is skipped without being held, and the
 * record after it is read. */
static void overlong_line(void **state)
{
    (void)state;
    size_t n = 3 * LIM_AUDIT_SPOOL_RECORD_BYTES;
    char *junk = xmalloc(n + 1);
    memset(junk, 'x', n);
    junk[n] = '\n';
    int fd = spool_with(0, junk, n + 1);
    xfree(junk);
    char buf[LIM_AUDIT_SPOOL_RECORD_BYTES];
    struct audit_rec r;
    entry(&r, 9);
    size_t len = auditspool_encode(&r, buf, sizeof buf);
    audit_rec_clear(&r);
    assert_int_equal(write(fd, buf, len), (ssize_t)len);
    struct seen s = {{0}, 0};
    size_t skipped = 0;
    assert_int_equal(auditspool_read(fd, collect, &s, &skipped), 0);
    close(fd);
    assert_string_equal(s.paths, "/profiles/p9");
    assert_int_equal(skipped, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip),
        cmocka_unit_test(replay_torn_tail),
        cmocka_unit_test(overlong_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
