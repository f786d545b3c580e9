/*
 * computer: performs browsers.computer.* actions on a session's browser.
 *
 * Headful sessions are driven on their own X display, as the hosted service
 * does: XTest input, the pointer and cursor of the display, and screenshots
 * of the whole screen (the browser's tab strip and dialogs included), through
 * one X connection per session (runtime/xinput.h), kept between calls and
 * closed with the session. Headless sessions have no display: input,
 * screenshots (the page laid out at the screen size), the pointer (where
 * the actions left it) and the cursor flag go through the browser's DevTools
 * protocol on its first page. The clipboard is the session's: the display's
 * CLIPBOARD selection (headful) or the browser's own (headless). docs/computer.md says what
 * differs.
 *
 * Each session has its own state and its own lock: calls on one session run
 * one at a time (a call waits at most LIM_COMPUTER_LOCK_WAIT_MS for the one
 * before it, then fails with E_LIMIT), different sessions never wait on each
 * other. Long gestures
 * stop between steps when the caller's cancel hook says so. Thread-safe.
 */
#ifndef BD_RUNTIME_COMPUTER_H
#define BD_RUNTIME_COMPUTER_H

#include <stddef.h>

#include "core/err.h"
#include "core/limits.h"
#include "domain/computer.h"

/* Longest a call (a batch included) may take in all, sleeps and gestures
 * included: a pause that would end past it stops the call. The pauses it
 * asks for are at most LIM_COMPUTER_CALL_MS (domain/computer.h checks that
 * before it runs); the grace is for the work between them (DevTools round
 * trips, X syncs), so that a batch asking for exactly the cap completes. */
#define COMPUTER_BATCH_GRACE_MS 15000
#define COMPUTER_BATCH_MAX_MS   (LIM_COMPUTER_CALL_MS + COMPUTER_BATCH_GRACE_MS)

/* Where a call acts. */
struct computer_target {
    const char *session_id;
    const char *ws_url; /* the browser's DevTools */
    int display;        /* headful: the X display number; -1: act through DevTools */
    int netns;          /* the core/netns id the display listens in (0: the host's) */
    long display_id;    /* identifies the display (Xvfb's pid): a relaunched browser's
                         * new display gets a new connection */
    /* May be NULL: returns 1 when the call should stop (its client went
     * away); asked between the steps of a gesture and during pauses. */
    int (*cancelled)(void *ctx);
    void *cancel_ctx;
};

/* Runs n actions in order (see computer_run), on the X display when the
 * target has one. Pauses (sleep actions, key holds, waits for the session's
 * input) are taken on the calling thread: see computer_batch_step for a
 * call that does not hold its thread through them. */
int computer_act(const struct computer_target *t, const struct comp_action *acts, size_t n,
                 size_t *failed, struct err *e) WUR;

/* computer_batch_step's answer: the batch waits *pause_ms before its next
 * step (positive, unlike every error). */
#define COMPUTER_PAUSE 1
/* A sleep action is waited in pauses of at most this long, each followed
 * by a look at the cancel hook. */
#define COMPUTER_PAUSE_SLICE_MS 1000

/* The same run as computer_act, in steps between which the caller may
 * release its thread (http.h req_defer): t and acts are borrowed until
 * computer_batch_free. The batch waits for the session's input (at most
 * LIM_COMPUTER_LOCK_WAIT_MS, then E_LIMIT session_busy) and, once it has
 * it, holds it across its pauses until it ends or is freed: other calls on
 * the session wait for it as for any call. */
struct computer_batch;
struct computer_batch *computer_batch_new(const struct computer_target *t,
                                          const struct comp_action *acts, size_t n);
/* Runs the batch on from where it stopped: 0 once every action ran,
 * COMPUTER_PAUSE when it waits (*pause_ms, then call again: for the
 * session's input, in a sleep action, or while a press holds a key longer
 * than a slice), or an error as computer_act's with *failed the action's
 * index. After 0 or an error the session's input is released, and no key
 * of a press stays down. Other pauses within a gesture (smooth moves, drag
 * and typing delays) are taken within the step. */
int computer_batch_step(struct computer_batch *b, int *pause_ms, size_t *failed, struct err *e) WUR;
/* Releases the session's input if the batch still holds it (it was
 * abandoned mid-way) and frees it. NULL is a no-op. */
void computer_batch_free(struct computer_batch *b);

/* A PNG of the screen (headful: the X display's width x height top-left
 * rectangle; headless: the page laid out at width x height), or of the
 * region when a->has_region: *png is owned (xmalloc'd), *len bytes. */
int computer_capture(const struct computer_target *t, const struct comp_action *a, int width,
                     int height, char **png, size_t *len, struct err *e) WUR;

/* Where the pointer is: the display's own pointer (headful), or where the
 * session's actions left it (headless). */
int computer_pointer(const struct computer_target *t, int *x, int *y, struct err *e) WUR;

/* Runs n actions in order on the session's browser through DevTools, in the
 * page's coordinates, whether headful or not (the live view, which shows the
 * page, sends these), stopping at the first failure: *failed (may be NULL)
 * is its index, and e says why (E_INTERNAL for a browser or display that
 * refused, E_UNAVAIL when it cannot be reached). Screenshot and
 * clipboard-write actions are not taken here. */
int computer_run(const char *session_id, const char *ws_url, const struct comp_action *acts,
                 size_t n, size_t *failed, struct err *e) WUR;

/* The session's clipboard: read into *text (owned, valid UTF-8) / write
 * text. Headful: the display's CLIPBOARD selection (Ctrl+V through the
 * display pastes it in any page or program); headless: the browser's own
 * clipboard (docs/computer.md). Written through the first page's copy
 * command, so any page works, about:blank and plain http:// included;
 * E_CONFLICT no_page when the browser has no page. */
int computer_clipboard_get(const struct computer_target *t, char **text, struct err *e) WUR;
int computer_clipboard_set(const struct computer_target *t, const char *text, struct err *e) WUR;

/* The same through the page alone, as the live view (which acts through
 * DevTools) uses them: the write as above; the read as headless. */
int computer_clipboard_read(const char *session_id, const char *ws_url, char **text,
                            struct err *e) WUR;
int computer_clipboard_write(const char *session_id, const char *ws_url, const char *text,
                             struct err *e) WUR;

/* Forgets a session's state (it ended) and closes its X connection. */
void computer_forget(const char *session_id);

#endif
