/*
 * readiness: whether the server can take a new session now (GET /ready,
 * docs/operator.md "Health and readiness"), decided from facts the caller
 * gathered without blocking: the stop, the cluster node's state and its last
 * heartbeat, the admission books (runtime/admit.h) and the host's available
 * memory.
 *
 * Pure: no I/O, no clock. tests/unit/test_readiness.c names every reason.
 */
#ifndef BD_DOMAIN_READINESS_H
#define BD_DOMAIN_READINESS_H

#include "core/err.h"

struct ready_facts {
    int stopping;      /* the server received SIGTERM or SIGINT */
    int fenced;        /* the cluster node is not registered (cluster/node.h) */
    int store_failing; /* the store's last periodic check (a heartbeat) failed */
    /* The admission budget and what the sessions hold of it; a budget of -1
     * is unlimited (no sandbox, or a figure of the host unknown). */
    long long memory_budget, memory_held;
    long long pids_budget, pids_held;
    /* What one session with the default settings reserves. */
    long long session_memory, session_pids;
    /* The host's tasks now and its kernel.pid_max (-1: unknown, not
     * checked). */
    long long tasks_used, tasks_max;
    /* The host's MemAvailable in bytes (-1: unknown, not checked) and the
     * floor below which no new browser should start. */
    long long memory_available, memory_floor;
};

/* 0 when the server can take a new session; otherwise E_UNAVAIL with e a
 * 503 `not_ready` Error record whose message lists the reasons and which
 * has one detail per reason, its code one of "stopping", "fenced", "store",
 * "capacity" (the admission books cannot take a default session, memory or
 * pids), "memory" (the host's available memory is below the floor) and
 * "pids" (the host has fewer free task ids than a session's pids limit).
 * Counts and sizes only: no organization, no path. e->retry_after is set
 * when every reason is one that passes (capacity, memory, pids, store). */
int ready_check(const struct ready_facts *f, struct err *e) WUR;

#endif
