#include "domain/mem_pressure.h"

#include <stddef.h>

int memp_thrashing(const struct memp_sample *prev, const struct memp_sample *now)
{
    if (!now || now->limit <= 0)
        return 0; /* no limit: the host's own reclaim, not the session's */
    if (now->psi_full_avg10 >= 0)
        return now->psi_full_avg10 >= MEMP_PSI_FULL_PCT;
    if (!prev || prev->majfaults < 0 || now->majfaults < prev->majfaults || now->usage < 0)
        return 0;
    int64_t dt = now->at_ms - prev->at_ms;
    if (dt <= 0)
        return 0;
    if (now->usage * 100 < now->limit * MEMP_NEAR_LIMIT_PCT)
        return 0;
    long long faults = now->majfaults - prev->majfaults;
    return faults * 1000 >= (long long)MEMP_MAJFAULTS_PER_S * dt;
}

int memp_kill_due(int *ticks, int thrashing)
{
    if (!thrashing) {
        *ticks = 0;
        return 0;
    }
    if (++*ticks < MEMP_TICKS)
        return 0;
    *ticks = 0;
    return 1;
}
