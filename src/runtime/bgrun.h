/*
 * bgrun: background work of an API module that has no engine of its own
 * (managed auth's login flows and health checks, api/authconn.c): a ticker
 * thread calling tick(ctx) every period, and detached tasks counted so that
 * stop waits for the last one. The module cancels its tasks itself before
 * bgrun_stop (the tasks must end in bounded time).
 */
#ifndef BD_RUNTIME_BGRUN_H
#define BD_RUNTIME_BGRUN_H

#include "core/err.h"

struct bgrun;

/* Starts the ticker: tick(ctx) every period_ms (the first after one
 * period), never two at once. 0 and *out, or E_INTERNAL. */
int bgrun_start(void (*tick)(void *ctx), void *ctx, int period_ms, struct bgrun **out) WUR;
/* Runs fn(arg) on a detached thread of its own. E_UNAVAIL once stopping,
 * E_INTERNAL when no thread can start (fn is then not run). */
int bgrun_spawn(struct bgrun *r, void (*fn)(void *arg), void *arg) WUR;
/* Stops the ticker, waits for the running tasks and frees; accepts NULL. */
void bgrun_stop(struct bgrun *r);

#endif
