/*
 * bgjobs: work that outlives the request that asked for it (a config
 * registry analysis: docs/config-registry.md), one thread per job.
 *
 * What it owns: the count of jobs running and a "draining" flag, behind one
 * mutex. It owns no job's state: bgjobs_start hands ctx to fn, which runs
 * on a thread of its own and frees ctx itself.
 *
 * Threading: every function is thread-safe. bgjobs_start is called by
 * handlers; fn runs on its own detached thread and may call
 * bgjobs_stopping at any time; bgjobs_drain by main.c's stop, once.
 *
 * Failure: bgjobs_start fails with E_UNAVAIL once the drain has begun or
 * when no thread can be started; the caller then still owns ctx.
 *
 * Stop: bgjobs_drain (refuse, ask the running jobs to stop, wait at most
 * timeout_ms), then bgjobs_free when nothing can call start any more.
 */
#ifndef BD_RUNTIME_BGJOBS_H
#define BD_RUNTIME_BGJOBS_H

#include "core/err.h"

/* How long the server's stop waits for running jobs to end. */
#define BGJOBS_DRAIN_MS 30000

struct bgjobs;

struct bgjobs *bgjobs_new(void);
/* NULL is a no-op. */
void bgjobs_free(struct bgjobs *j);

/* Runs fn(ctx, j) on a new thread. 0, or E_UNAVAIL in e. */
int bgjobs_start(struct bgjobs *j, void (*fn)(void *ctx, struct bgjobs *j), void *ctx,
                 struct err *e) WUR;
/* 1 once the drain has begun: a job ends as soon as it can. */
int bgjobs_stopping(struct bgjobs *j);
/* Refuses new jobs, tells the running ones and waits until they ended, at
 * most timeout_ms. */
void bgjobs_drain(struct bgjobs *j, int timeout_ms);

#endif
