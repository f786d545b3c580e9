/* Unit tests for telemetry/auditq: issue 33.7, "one org cannot fill the
 * queue for others" (a per-organization share of the audit queue), one case
 * per rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "core/xalloc.h"
#include "telemetry/auditq.h"

/* Pushes one entry of org with a path (owned strings, as the caller's). */
static int push(struct auditq *q, const char *org)
{
    struct audit_rec r = {0};
    snprintf(r.org_id, sizeof r.org_id, "%s", org);
    r.path = xstrdup("/profiles");
    r.user_id = xstrdup("k");
    int rc = auditq_push(q, &r);
    assert_null(r.path); /* taken, or freed when dropped */
    return rc;
}

static const struct {
    const char *rule;
    const char *orgs[12];
    int rc[12];
    size_t n;
} cases[] = {
    {"an organization past its share is refused", {"o1", "o1", "o1", "o1"}, {0, 0, 0, E_LIMIT}, 4},
    {"another organization is never refused for the first one's entries",
     {"o1", "o1", "o1", "o1", "o2", "o2"},
     {0, 0, 0, E_LIMIT, 0, 0},
     6},
    {"the operator's entries (no organization) have one share too",
     {"", "", "", "", "o1"},
     {0, 0, 0, E_LIMIT, 0},
     5},
    {"past the whole queue every organization is refused",
     {"a", "b", "c", "d", "e", "f", "g", "h"},
     {0, 0, 0, 0, 0, 0, E_LIMIT, E_LIMIT},
     8},
};

static void shares(void **state)
{
    (void)state;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct auditq q;
        auditq_init(&q, 6, 3);
        uint64_t refused = 0;
        for (size_t i = 0; i < cases[c].n; i++) {
            int rc = push(&q, cases[c].orgs[i]);
            if (rc != cases[c].rc[i])
                fail_msg("%s: step %zu: %d, expected %d", cases[c].rule, i, rc, cases[c].rc[i]);
            refused += rc != 0;
        }
        assert_int_equal(q.dropped, refused);
        auditq_free(&q);
    }
}

/* "The writer takes every queued entry at once, which gives every share
 * back": entries come out in arrival order, and a full organization may
 * queue again. */
static void take_gives_shares_back(void **state)
{
    (void)state;
    struct auditq q;
    auditq_init(&q, 6, 2);
    assert_int_equal(push(&q, "o1"), 0);
    assert_int_equal(push(&q, "o2"), 0);
    assert_int_equal(push(&q, "o1"), 0);
    assert_int_equal(push(&q, "o1"), E_LIMIT);
    struct audit_rec out[6];
    size_t n = auditq_take(&q, out);
    assert_int_equal(n, 3);
    assert_string_equal(out[0].org_id, "o1");
    assert_string_equal(out[1].org_id, "o2");
    assert_string_equal(out[2].path, "/profiles");
    for (size_t i = 0; i < n; i++)
        audit_rec_clear(&out[i]);
    assert_int_equal(q.n, 0);
    assert_int_equal(push(&q, "o1"), 0);
    assert_int_equal(push(&q, "o1"), 0);
    assert_int_equal(q.dropped, 1);
    assert_string_equal(q.last_dropped_org, "o1");
    auditq_free(&q); /* frees the two still queued */
}

/* Steps of a held-places case: 'h' holds a place for org (auditq_hold),
 * 'p' pushes an entry of org without one, 'H' pushes one in its held place
 * (auditq_push_held, always 0), 'u' gives a place back, 't' is the
 * writer's take (org unused). */
static const struct {
    const char *rule;
    const char *steps; /* one letter per step */
    const char *orgs[12];
    int rc[12];
} held_cases[] = {
    {"a held place counts in its organization's share",
     "hhhhp",
     {"o1", "o1", "o1", "o1", "o1"},
     {0, 0, 0, E_LIMIT, E_LIMIT}},
    {"an entry in its held place is queued when the share is full",
     "hhhHHH",
     {"o1", "o1", "o1", "o1", "o1", "o1"},
     {0, 0, 0, 0, 0, 0}},
    {"held places count in the whole queue",
     "hhhhhhh",
     {"a", "b", "c", "d", "e", "f", "g"},
     {0, 0, 0, 0, 0, 0, E_UNAVAIL}},
    {"the writer's take leaves places held; a place given back is free again",
     "hhphtphuh",
     {"o1", "o1", "o1", "o1", "", "o1", "o1", "o1", "o1"},
     {0, 0, 0, E_LIMIT, 0, 0, E_LIMIT, 0, 0}},
    {"another organization's held places do not take the first one's share",
     "hhhhhhH",
     {"o1", "o1", "o1", "o2", "o2", "o2", "o1"},
     {0, 0, 0, 0, 0, 0, 0}},
};

static void held_places(void **state)
{
    (void)state;
    for (size_t c = 0; c < sizeof held_cases / sizeof held_cases[0]; c++) {
        struct auditq q;
        auditq_init(&q, 6, 3);
        struct audit_rec out[6];
        for (size_t i = 0; held_cases[c].steps[i]; i++) {
            const char *org = held_cases[c].orgs[i];
            int rc = 0;
            switch (held_cases[c].steps[i]) {
            case 'h':
                rc = auditq_hold(&q, org);
                break;
            case 'p':
                rc = push(&q, org);
                break;
            case 'H': {
                struct audit_rec r = {0};
                snprintf(r.org_id, sizeof r.org_id, "%s", org);
                r.path = xstrdup("/profiles");
                auditq_push_held(&q, &r);
                assert_null(r.path);
                break;
            }
            case 'u':
                auditq_unhold(&q, org);
                break;
            default:
                for (size_t k = auditq_take(&q, out); k > 0; k--)
                    audit_rec_clear(&out[k - 1]);
            }
            if (rc != held_cases[c].rc[i])
                fail_msg("%s: step %zu: %d, expected %d", held_cases[c].rule, i, rc,
                         held_cases[c].rc[i]);
        }
        auditq_free(&q);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shares),
        cmocka_unit_test(take_gives_shares_back),
        cmocka_unit_test(held_places),
    };
    return cmocka_run_group_tests_name("telemetry/auditq", tests, NULL, NULL);
}
