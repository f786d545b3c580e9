/*
 * procjobs: the count of requests parked on a session process (exec and
 * playwright.execute wait, without an HTTP thread, until their process ends;
 * docs/process.md), so that the server's stop answers every one of them
 * before the HTTP daemon stops.
 *
 * What it owns: a counter of parked requests and a "draining" flag, behind
 * one mutex. It owns neither the requests nor the processes (runtime/proc).
 *
 * Threading: every function is thread-safe. procjobs_enter and
 * procjobs_leave are called by the handlers (HTTP threads, and the thread
 * that answers a resumed request); procjobs_drain by main.c's stop, once.
 *
 * Failure: procjobs_enter fails with E_UNAVAIL once the drain has begun (the
 * server is stopping). procjobs_drain gives up waiting after timeout_ms.
 *
 * Stop: procjobs_drain (refuse, kill every process, wait), then
 * procjobs_free when nothing can call enter or leave any more.
 */
#ifndef BD_RUNTIME_PROCJOBS_H
#define BD_RUNTIME_PROCJOBS_H

#include "core/err.h"

/* How long the server's stop waits for parked requests to be answered. */
#define PROCJOBS_DRAIN_MS 10000

struct procjobs;

struct procjobs *procjobs_new(void);
/* NULL is a no-op. */
void procjobs_free(struct procjobs *j);

/* Counts a new parked request; E_UNAVAIL (in e) once draining. */
int procjobs_enter(struct procjobs *j, struct err *e) WUR;
/* The parked request was answered (or never parked): one fewer. */
void procjobs_leave(struct procjobs *j);

/* Refuses new requests, kills every session process (proc_kill_all) and
 * waits until every parked request left, at most timeout_ms. */
void procjobs_drain(struct procjobs *j, int timeout_ms);

#endif
