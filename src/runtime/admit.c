#include "runtime/admit.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/limits.h"
#include "core/path.h"
#include "core/xalloc.h"

#define GIB (1024.0 * 1024 * 1024)

/* One organization's reservations; removed when it holds nothing. */
struct held {
    char org[64];
    long long memory, pids;
    struct held *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct admit_budget budget = {-1, -1};
static long long total_memory, total_pids;
static struct held *orgs;

/* The memory limit of this process's own cgroup (v2 memory.max, or v1
 * memory.limit_in_bytes), 0 when there is none or it cannot be read. */
static long long own_cgroup_memory(void)
{
    char buf[4096];
    if (path_read_small("/proc/self/cgroup", buf, sizeof buf) <= 0)
        return 0;
    for (char *line = buf, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char *ctl = strchr(line, ':');
        char *path = ctl ? strchr(ctl + 1, ':') : NULL;
        if (!path)
            continue;
        *path++ = '\0';
        char file[1024], val[64];
        if (strcmp(ctl + 1, "") == 0 && strcmp(line, "0") == 0)
            snprintf(file, sizeof file, "/sys/fs/cgroup%s/memory.max", path);
        else if (strstr(ctl + 1, "memory"))
            snprintf(file, sizeof file, "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", path);
        else
            continue;
        if (path_read_small(file, val, sizeof val) <= 0 || val[0] < '0' || val[0] > '9')
            return 0; /* "max": no limit */
        return strtoll(val, NULL, 10);
    }
    return 0;
}

long long admit_host_memory(void)
{
    char buf[4096];
    long long total = 0;
    if (path_read_small("/proc/meminfo", buf, sizeof buf) > 0) {
        const char *p = strstr(buf, "MemTotal:");
        if (p)
            total = strtoll(p + 9, NULL, 10) * 1024;
    }
    long long own = own_cgroup_memory();
    if (own > 0 && (total == 0 || own < total))
        total = own;
    return total;
}

long long admit_host_available(void)
{
    char buf[4096];
    if (path_read_small("/proc/meminfo", buf, sizeof buf) <= 0)
        return -1;
    const char *p = strstr(buf, "MemAvailable:");
    return p ? strtoll(p + 13, NULL, 10) * 1024 : -1;
}

long long admit_host_tasks(void)
{
    char buf[128];
    if (path_read_small("/proc/loadavg", buf, sizeof buf) <= 0)
        return -1;
    const char *slash = strchr(buf, '/'); /* "0.00 0.01 0.05 1/234 5678" */
    return slash ? strtoll(slash + 1, NULL, 10) : -1;
}

long long admit_host_pid_max(void)
{
    char buf[64];
    if (path_read_small("/proc/sys/kernel/pid_max", buf, sizeof buf) <= 0)
        return 0;
    return strtoll(buf, NULL, 10);
}

struct admit_budget admit_budget_for(long long host_memory, double overcommit, long long pid_max)
{
    struct admit_budget b = {-1, -1};
    if (host_memory > 0 && overcommit > 0)
        b.memory = (long long)((double)host_memory * overcommit);
    if (pid_max > 0)
        b.pids = pid_max > LIM_ADMIT_HOST_PIDS ? pid_max - LIM_ADMIT_HOST_PIDS : 0;
    return b;
}

void admit_configure(struct admit_budget b)
{
    pthread_mutex_lock(&mu);
    budget = b;
    pthread_mutex_unlock(&mu);
}

struct admit_budget admit_configured(void)
{
    pthread_mutex_lock(&mu);
    struct admit_budget b = budget;
    pthread_mutex_unlock(&mu);
    return b;
}

static struct held *find_locked(const char *org, int create)
{
    for (struct held *h = orgs; h; h = h->next)
        if (strcmp(h->org, org) == 0)
            return h;
    if (!create)
        return NULL;
    struct held *h = xcalloc(1, sizeof *h);
    snprintf(h->org, sizeof h->org, "%s", org);
    h->next = orgs;
    orgs = h;
    return h;
}

static void drop_if_empty_locked(struct held *h)
{
    if (h->memory > 0 || h->pids > 0)
        return;
    for (struct held **pp = &orgs; *pp; pp = &(*pp)->next)
        if (*pp == h) {
            *pp = h->next;
            xfree(h);
            return;
        }
}

/* An organization's share of a budget figure (-1: unlimited). */
static long long share(long long of)
{
    return of < 0 ? -1 : of / 100 * LIM_ADMIT_ORG_SHARE_PCT;
}

/* The organization's share, checked for org already holding h_mem/h_pids. */
static int check_org_locked(long long h_mem, long long h_pids, long long memory, long long pids,
                            struct err *e)
{
    long long sm = share(budget.memory), sp = share(budget.pids);
    if (sm >= 0 && h_mem + memory > sm) {
        e->retry_after = LIM_ADMIT_RETRY_AFTER_S;
        return err_set(e, E_LIMIT, "rate_limited",
                       "memory: this organization's sessions hold %.1f GiB of memory limits and "
                       "this one asks %.1f GiB; one organization may hold at most %d%% of the "
                       "server's %.1f GiB",
                       (double)h_mem / GIB, (double)memory / GIB, LIM_ADMIT_ORG_SHARE_PCT,
                       (double)budget.memory / GIB);
    }
    if (sp >= 0 && h_pids + pids > sp) {
        e->retry_after = LIM_ADMIT_RETRY_AFTER_S;
        return err_set(e, E_LIMIT, "rate_limited",
                       "pids: this organization's sessions hold %lld tasks of pids limits and "
                       "this one asks %lld; one organization may hold at most %d%% of the "
                       "server's %lld",
                       h_pids, pids, LIM_ADMIT_ORG_SHARE_PCT, budget.pids);
    }
    return 0;
}

/* Whether org may reserve memory and pids now: 0, or the refusal in e. */
static int check_locked(const char *org, long long memory, long long pids, struct err *e)
{
    int rc = 0;
    if (org) {
        struct held *h = find_locked(org, 0);
        rc = check_org_locked(h ? h->memory : 0, h ? h->pids : 0, memory, pids, e);
    }
    if (rc == 0 && budget.memory >= 0 && total_memory + memory > budget.memory) {
        e->retry_after = LIM_ADMIT_RETRY_AFTER_S;
        rc = err_set(e, E_UNAVAIL, "server_at_capacity",
                     "memory: the server's sessions hold %.1f GiB of memory limits and this one "
                     "asks %.1f GiB, past the server's %.1f GiB (its memory times "
                     "BROWSERD_MEMORY_OVERCOMMIT); retry later or ask for less memory",
                     (double)total_memory / GIB, (double)memory / GIB, (double)budget.memory / GIB);
    }
    if (rc == 0 && budget.pids >= 0 && total_pids + pids > budget.pids) {
        e->retry_after = LIM_ADMIT_RETRY_AFTER_S;
        rc = err_set(e, E_UNAVAIL, "server_at_capacity",
                     "pids: the server's sessions hold %lld tasks of pids limits and this one "
                     "asks %lld, past the server's %lld (the host's pid_max less %d); retry later",
                     total_pids, pids, budget.pids, LIM_ADMIT_HOST_PIDS);
    }
    return rc;
}

int admit_check(const char *org, long long memory, long long pids, struct err *e)
{
    pthread_mutex_lock(&mu);
    int rc = check_locked(org, memory < 0 ? 0 : memory, pids, e);
    pthread_mutex_unlock(&mu);
    return rc;
}

int admit_reserve(const char *org, long long memory, long long pids, struct err *e)
{
    if (memory < 0)
        memory = 0;
    pthread_mutex_lock(&mu);
    int rc = check_locked(org, memory, pids, e);
    if (rc == 0) {
        total_memory += memory;
        total_pids += pids;
        if (org) {
            struct held *h = find_locked(org, 1);
            h->memory += memory;
            h->pids += pids;
        }
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

void admit_release(const char *org, long long memory, long long pids)
{
    if (memory < 0)
        memory = 0;
    pthread_mutex_lock(&mu);
    total_memory -= memory;
    total_pids -= pids;
    struct held *h = org ? find_locked(org, 0) : NULL;
    if (h) {
        h->memory -= memory;
        h->pids -= pids;
        drop_if_empty_locked(h);
    }
    pthread_mutex_unlock(&mu);
}

int admit_adopt(const char *org, long long memory, long long pids, struct err *e)
{
    if (memory < 0)
        memory = 0;
    pthread_mutex_lock(&mu);
    struct held *h = find_locked(org, 0);
    int rc = check_org_locked(h ? h->memory : 0, h ? h->pids : 0, memory, pids, e);
    if (rc == 0) {
        h = find_locked(org, 1);
        h->memory += memory;
        h->pids += pids;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

void admit_held(const char *org, long long *memory, long long *pids)
{
    pthread_mutex_lock(&mu);
    struct held *h = org ? find_locked(org, 0) : NULL;
    *memory = org ? (h ? h->memory : 0) : total_memory;
    *pids = org ? (h ? h->pids : 0) : total_pids;
    pthread_mutex_unlock(&mu);
}
