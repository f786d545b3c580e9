/*
 * waker: one thread that calls, every period, the wake function of each
 * registered entry. It makes parked HTTP streams that follow a file (the
 * log stream of api/logs.c) look for new bytes without a thread per client.
 *
 * What it owns: the list of entries (a wake function and its context; not
 * the contexts) and its thread.
 *
 * Threading: waker_add and waker_remove are thread-safe (HTTP threads);
 * wake functions run on the waker's thread, under the waker's lock, so they
 * must be short and must not call waker_add/waker_remove. After
 * waker_remove returns, the entry's wake function is not running and never
 * runs again. waker_start and waker_stop are main.c's, once each.
 *
 * Failure: waker_start fails (E_INTERNAL) when no thread can start; entries
 * can still be added and removed, they are just never woken.
 *
 * Stop: waker_stop joins the thread (entries left stay registered: their
 * owners remove them), then waker_free.
 */
#ifndef BD_RUNTIME_WAKER_H
#define BD_RUNTIME_WAKER_H

#include "core/err.h"

struct waker;
struct waker_entry;

struct waker *waker_new(int period_ms);
/* NULL is a no-op; after waker_stop, with every entry removed. */
void waker_free(struct waker *w);

int waker_start(struct waker *w, struct err *e) WUR;
/* Ends the thread (at most one period); a no-op when it did not start. */
void waker_stop(struct waker *w);

/* Registers wake(ctx), called every period from now on. */
struct waker_entry *waker_add(struct waker *w, void (*wake)(void *ctx), void *ctx);
/* NULL is a no-op. */
void waker_remove(struct waker *w, struct waker_entry *en);

#endif
