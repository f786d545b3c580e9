/*
 * mem_pressure: when a session's memory limit has turned into thrashing
 * (issue 30). A page that fills its session's limit makes the kernel reclaim
 * the session's file pages (Chromium's own code and data) and read them back
 * at once, over and over: tens of MB/s of reads, the host's load above 80 on
 * two cores, every tenant slowed, and no out-of-memory kill because something
 * is always reclaimable. The rule below says when that state has lasted long
 * enough that the session's largest task must be killed instead, as the
 * kernel's OOM killer would have done at the limit. Pure: the caller samples
 * the cgroup (runtime/sandbox.c) and acts.
 */
#ifndef BD_DOMAIN_MEM_PRESSURE_H
#define BD_DOMAIN_MEM_PRESSURE_H

#include <stdint.h>

/* Percentage of the last 10 s during which every task of the session stalled
 * on memory (PSI "full avg10", cgroup v2) from which it counts as thrashing. */
#define MEMP_PSI_FULL_PCT 10.0
/* Without PSI (cgroup v1): major faults per second (pages read back from
 * disk, 4 KiB each: 2000/s is 8 MB/s) while within MEMP_NEAR_LIMIT_PCT of the
 * limit. An idle or merely large session faults a few per second. */
#define MEMP_MAJFAULTS_PER_S 2000
#define MEMP_NEAR_LIMIT_PCT  90
/* Consecutive thrashing samples (about one a second) before the kill: a
 * burst of reads after a tab switch is not thrashing. */
#define MEMP_TICKS 3

/* One sample of a session's memory cgroup. */
struct memp_sample {
    int64_t at_ms;         /* monotonic */
    long long majfaults;   /* cumulative major faults of the cgroup; < 0 unknown */
    long long usage;       /* bytes charged now; < 0 unknown */
    long long limit;       /* bytes; <= 0 none */
    double psi_full_avg10; /* < 0: no PSI on this host */
};

/* 1 when the interval from prev to now was thrashing (rules above), else 0.
 * prev may be NULL (the first sample: 0). */
int memp_thrashing(const struct memp_sample *prev, const struct memp_sample *now);

/* Counts consecutive thrashing samples in *ticks (reset by a calm one) and
 * returns 1 when the kill is due (then *ticks restarts from 0). */
int memp_kill_due(int *ticks, int thrashing);

#endif
