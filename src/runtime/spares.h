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

/* Parses a --spares / BROWSERD_SPARES value: 0..SPARES_MAX. -1 if invalid. */
int spares_parse_count(const char *v);

#endif
