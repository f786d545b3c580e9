/*
 * spares: pre-launched browsers that belong to nobody yet (issue 21;
 * docs/spares.md).
 *
 * The engine keeps up to `count` spare browsers ready, split between the two
 * configurations most creates ask for (domain/spare_match.h: headful `{}`
 * first, then `{"headless": true}`; count 1 keeps a headful one only). A
 * create that matches takes one (spares_take) and turns it into an ordinary
 * session; the filler thread launches its replacement at once.
 *
 * What it owns: the list of ready spares (opaque items made by the launcher),
 * one filler thread. What it does not own: browsers. The launcher
 * (src/api/browsers.c) makes a spare in its own sandbox, says whether it is
 * still alive and ends it; the engine runs without Chromium in tests.
 *
 * Room: spares never take what sessions need. The filler launches only while
 * the host has SPARES_MIN_AVAIL_MB of memory available (MemAvailable), and a
 * create that failed for want of room ends a spare (spares_give_up) and holds
 * refilling back for SPARES_HOLDOFF_MS.
 *
 * Threading: every function is thread-safe; launcher callbacks run without
 * the engine lock (launch and alive on the filler thread, end on the thread
 * that stops, gives up, or finds a spare dead).
 */
#ifndef BD_RUNTIME_SPARES_H
#define BD_RUNTIME_SPARES_H

#include <stdint.h>

#include "core/err.h"

/* The default of --spares / BROWSERD_SPARES: one of each kind, sized for a
 * small machine (each spare holds a Chromium, and a headful one an Xvfb:
 * about 150-250 MiB of memory, no CPU once up). */
#define SPARES_DEFAULT      2
#define SPARES_MAX          64
#define SPARES_MIN_AVAIL_MB 1024
#define SPARES_HOLDOFF_MS   10000

struct spares;

struct spares_launcher {
    /* Launches a spare of kind (enum spare_kind). Filler thread. 0 with the
     * new item in *item, or an error (retried after a back-off). */
    int (*launch)(void *ctx, int kind, void **item);
    /* 1 while the item's browser runs. Filler thread, once per tick. */
    int (*alive)(void *ctx, void *item);
    /* Ends an item the engine no longer holds (dead, given up, stopping),
     * removing everything it made. reason is for the log. */
    void (*end)(void *ctx, void *item, const char *reason);
    void *ctx;
    /* The CPU priority of the launch of kind in progress (and of the next
     * one, if none is): background 1 while a cold launch runs (the two
     * would share the cores), 0 otherwise, and 0 when a create waits for
     * it. May be NULL. Called without the engine lock. */
    void (*priority)(void *ctx, int kind, int background);
};

/* Creates and starts the engine keeping `count` spares (0: none, and no
 * thread; SPARES_MAX at most). launcher is borrowed for the engine's life.
 * E_INTERNAL when the thread cannot start. */
int spares_start(const struct spares_launcher *launcher, int count, struct spares **out,
                 struct err *e) WUR;
/* Stops the filler and ends every ready spare. Accepts NULL. */
void spares_stop(struct spares *s);

/* Takes a ready spare of kind: returns its item (now the caller's), or NULL
 * when none is ready (the caller launches cold). Its replacement is launched
 * once the caller says the hand-out is over (spares_handout_done, also after
 * spares_put_back), or SPARES_HANDOUT_HOLD_MS after the take at the latest,
 * so that the launch does not compete with the rest of the create. Accepts s
 * NULL (spares off). */
void *spares_take(struct spares *s, int kind);
/* Like spares_take, and when no spare of kind is ready but one is being
 * launched, waits for it (issue 39.2: a cold launch beside it would share the
 * cores with it and be later than the spare): only when the spare's expected
 * remaining launch time (a running average of its kind's launches) is below
 * the cold-launch estimate (spares_cold_estimate_ms), and at most
 * SPARES_WAIT_FACTOR times that long (a slower launch is stuck, not late);
 * the launch is given the foreground. One create per organization
 * and kind waits at a time (the org's others launch cold), so that one
 * tenant's burst does not queue ahead of the others. NULL: launch cold. */
void *spares_take_wait(struct spares *s, int kind, const char *org_id);
/* A cold launch (a create no spare served) begins, and ends after launch_ms
 * (< 0: it failed). While one runs the filler starts no spare (for at most
 * the cold-launch estimate), and a spare's launch in progress that no create
 * waits for goes to the background: the two would share the cores. The estimate is
 * a running average of the cold launches (before the first: of the spare
 * launches, else SPARES_COLD_ESTIMATE_MS). Accept NULL. */
void spares_cold_begin(struct spares *s);
void spares_cold_end(struct spares *s, int64_t launch_ms);
int64_t spares_cold_estimate_ms(struct spares *s);
#define SPARES_COLD_ESTIMATE_MS 3000
#define SPARES_WAIT_FACTOR      3
/* Spares of kind the engine keeps (its target; 0 with s NULL). */
int spares_target(struct spares *s, int kind);
/* The hand-out of an item taken by spares_take is over (handed out, ended
 * or put back): the filler may replace it now. Accepts NULL. */
void spares_handout_done(struct spares *s);
#define SPARES_HANDOUT_HOLD_MS 1000
/* Returns an item taken by spares_take that was not handed out (the create
 * failed before it reached anyone), as ready. */
void spares_put_back(struct spares *s, int kind, void *item);
/* Ends one ready spare because a session needs the room, and holds
 * refilling back for SPARES_HOLDOFF_MS. 1 when one was ended, 0 when none was
 * ready. */
int spares_give_up(struct spares *s);

/* Ready spares of kind (-1: all), and how many were handed out so far. */
int spares_ready(struct spares *s, int kind);
uint64_t spares_handed_out(struct spares *s);
/* Spare launches begun, creates that waited for a spare being launched, and
 * of those the ones it served (all 0 with s NULL). */
void spares_counts(struct spares *s, uint64_t *launched, uint64_t *waited, uint64_t *served);

/* Parses a --spares / BROWSERD_SPARES value: 0..SPARES_MAX. -1 if invalid. */
int spares_parse_count(const char *v);

#endif
