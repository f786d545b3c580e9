/* Unit tests for domain/readiness: GET /ready's verdict (issue 37.1,
 * docs/operator.md "Health and readiness"). Every case names the reason it
 * checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "core/err.h"
#include "domain/readiness.h"

#define NCASES(a) (sizeof(a) / sizeof((a)[0]))
#define GIB       (1024LL * 1024 * 1024)
#define MIB       (1024LL * 1024)

/* A host with room: 384 GiB of budget, 28672 tasks, 20 GiB available. */
static struct ready_facts roomy(void)
{
    struct ready_facts f = {
        .memory_budget = 384 * GIB,
        .pids_budget = 28672,
        .session_memory = 8 * GIB,
        .session_pids = 1024,
        .tasks_used = 600,
        .tasks_max = 32768,
        .memory_available = 20 * GIB,
        .memory_floor = 1024 * MIB,
    };
    return f;
}

struct ready_case {
    const char *name;
    struct ready_facts f;
    const char *reasons; /* the details' codes, space-separated; "" = ready */
    int retry_after;     /* expected e.retry_after */
};

static struct ready_case cases[24];
static size_t ncases;

static void add(const char *name, struct ready_facts f, const char *reasons, int retry_after)
{
    cases[ncases++] = (struct ready_case){name, f, reasons, retry_after};
}

static void build_cases(void)
{
    struct ready_facts f = roomy();
    add("ready: room in the books and on the host", f, "", 0);

    f = roomy();
    f.memory_budget = f.pids_budget = -1;
    f.memory_available = f.tasks_used = f.tasks_max = -1;
    add("ready: no sandbox (no books) and MemAvailable unknown check nothing", f, "", 0);

    f = roomy();
    f.memory_held = f.memory_budget - 8 * GIB;
    add("ready: exactly one default session's memory left", f, "", 0);

    f = roomy();
    f.memory_held = f.memory_budget - 8 * GIB + 1;
    add("capacity: one byte short of a default session's memory", f, "capacity", 10);

    f = roomy();
    f.memory_budget = 241 * MIB;
    add("capacity: a budget smaller than one default session (overcommit 0.01)", f, "capacity", 10);

    f = roomy();
    f.pids_held = f.pids_budget - 1023;
    add("capacity: fewer tasks left than a session's pids limit", f, "capacity", 10);

    f = roomy();
    f.memory_held = f.memory_budget;
    f.pids_held = f.pids_budget;
    add("capacity: memory and pids both full name capacity twice (one detail each)", f,
        "capacity capacity", 10);

    f = roomy();
    f.memory_available = 1024 * MIB - 1;
    add("memory: MemAvailable below the floor", f, "memory", 10);

    f = roomy();
    f.tasks_used = f.tasks_max - 1024;
    add("ready: exactly a session's pids limit of task ids free", f, "", 0);

    f = roomy();
    f.tasks_used = f.tasks_max - 1023;
    add("pids: fewer free task ids than a session's pids limit", f, "pids", 10);

    f = roomy();
    f.stopping = 1;
    add("stopping: the server received SIGTERM; no Retry-After", f, "stopping", 0);

    f = roomy();
    f.fenced = 1;
    add("fenced: the cluster node is not registered; no Retry-After", f, "fenced", 0);

    f = roomy();
    f.store_failing = 1;
    add("store: the last heartbeat failed", f, "store", 10);

    f = roomy();
    f.stopping = f.fenced = f.store_failing = 1;
    f.memory_held = f.memory_budget;
    f.memory_available = 0;
    f.tasks_used = f.tasks_max;
    add("every reason at once, in a fixed order", f, "stopping fenced store capacity memory pids",
        0);
}

static void test_cases(void **state)
{
    (void)state;
    build_cases();
    for (size_t i = 0; i < ncases; i++) {
        const struct ready_case *tc = &cases[i];
        struct err e;
        err_init(&e);
        int rc = ready_check(&tc->f, &e);
        char got[256] = "";
        for (size_t d = 0; d < e.ndetails; d++) {
            size_t n = strlen(got);
            snprintf(got + n, sizeof got - n, "%s%s", d ? " " : "", e.details[d].code);
        }
        if (strcmp(got, tc->reasons) != 0)
            fail_msg("%s: reasons \"%s\", expected \"%s\"", tc->name, got, tc->reasons);
        if (rc != (tc->reasons[0] ? E_UNAVAIL : 0))
            fail_msg("%s: rc %d", tc->name, rc);
        if (rc && strcmp(e.code, "not_ready") != 0)
            fail_msg("%s: code %s", tc->name, e.code);
        if (rc && !strstr(e.message, e.details[0].code))
            fail_msg("%s: message \"%s\" does not name %s", tc->name, e.message, e.details[0].code);
        if (e.retry_after != tc->retry_after)
            fail_msg("%s: retry_after %d, expected %d", tc->name, e.retry_after, tc->retry_after);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
