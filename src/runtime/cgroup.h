/* cgroup: the one operation that both the server and its crash watcher
 * (reaper) perform on a session's cgroup folder: kill every task in it. */
#ifndef BD_RUNTIME_CGROUP_H
#define BD_RUNTIME_CGROUP_H

/* Kills every task of the cgroup folder dir (v1 or v2): takes it out of the
 * background CPU class (cpu.idle 0, the default weight or shares: killed
 * tasks must run to exit), writes cgroup.kill where the kernel has it, then SIGKILLs whatever
 * cgroup.procs lists, every 10 ms, until it is empty or `rounds` rounds have passed. Uses system
 * calls only and no heap (the reaper calls it in a forked child). Returns 0 when the folder holds
 * no task (or is gone), -1 when tasks remain. */
int cgroup_kill_tasks(const char *dir, int rounds);

#endif
