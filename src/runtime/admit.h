/*
 * admit: the server's books of what its sessions may take of the host's
 * memory and task ids (docs/sandbox.md, "Tenant fairness: memory and pids").
 *
 * Each sandbox's memory limit and pids limit is reserved here when it is
 * made, and released when its last reference goes: the sum of the memory
 * limits stays within the host's memory (MemTotal, or the server's own
 * cgroup limit when lower) times an operator's overcommit ratio
 * (BROWSERD_MEMORY_OVERCOMMIT), and the sum of the pids limits within the
 * host's pid_max less what the host keeps for itself. One organization may
 * hold at most LIM_ADMIT_ORG_SHARE_PCT percent of either, so that one tenant
 * never fills the server alone. A spare (a session of nobody) counts in the
 * totals only, until hand-out moves it to its owner.
 *
 * Failures: 429 (E_LIMIT, rate_limited) past the organization's share, 503
 * (E_UNAVAIL, server_at_capacity) past the server's total; both with a
 * Retry-After.
 *
 * Threading: every function is thread-safe (one mutex).
 */
#ifndef BD_RUNTIME_ADMIT_H
#define BD_RUNTIME_ADMIT_H

#include "core/err.h"

struct admit_budget {
    long long memory; /* bytes the sessions' memory limits may add up to */
    long long pids;   /* tasks the sessions' pids limits may add up to */
};

/* The host's memory: MemTotal, or the limit of the server's own memory
 * cgroup when it is lower (a container). 0 when unknown. */
long long admit_host_memory(void);
/* The host's MemAvailable in bytes (one read of /proc/meminfo, no lock),
 * or -1 when it cannot be read. */
long long admit_host_available(void);
/* The tasks (threads) the host runs now, from /proc/loadavg (one small read,
 * no lock), or -1 when it cannot be read. */
long long admit_host_tasks(void);
/* The host's kernel.pid_max, or 0 when unknown. */
long long admit_host_pid_max(void);
/* The budget from the host's figures: memory * overcommit, and pid_max less
 * LIM_ADMIT_HOST_PIDS. A figure of 0 (unknown) leaves that budget unlimited
 * (-1). */
struct admit_budget admit_budget_for(long long host_memory, double overcommit, long long pid_max);

/* Sets the budget (start, or a unit test); the books keep what they hold. */
void admit_configure(struct admit_budget b);
struct admit_budget admit_configured(void);

/* Reserves memory bytes and pids tasks for a session of org (NULL: a spare,
 * the server's own). 0, or E_LIMIT / E_UNAVAIL with e filled (the limit,
 * what is held and what was asked, in GiB and tasks). */
int admit_reserve(const char *org, long long memory, long long pids, struct err *e) WUR;
/* What admit_reserve would answer now, reserving nothing: a create checks
 * it before it writes anything (admit_reserve still decides, under the same
 * lock as the books). */
int admit_check(const char *org, long long memory, long long pids, struct err *e) WUR;
/* Gives back what admit_reserve took for org. */
void admit_release(const char *org, long long memory, long long pids);
/* Moves a spare's reservation (org NULL) to org at hand-out, checking org's
 * share. 0, or E_LIMIT with e filled (the spare stays the server's). */
int admit_adopt(const char *org, long long memory, long long pids, struct err *e) WUR;
/* What org holds now (NULL: the totals). */
void admit_held(const char *org, long long *memory, long long *pids);

#endif
