/*
 * computer: performs browsers.computer.* actions on a session's browser.
 *
 * Input, screenshots and the clipboard go through the browser's DevTools
 * protocol on its first page (Input.dispatchMouseEvent/dispatchKeyEvent/
 * insertText, Page.captureScreenshot, the async Clipboard API with the
 * clipboard permissions granted), so headless and headful sessions behave the
 * same and nothing runs outside the session's sandbox. docs/computer.md says
 * what this covers and what it does not (the browser's own UI is not part of
 * the picture).
 *
 * Each session has its own state (pointer position, cursor flag) and its own
 * lock: calls on one session run one at a time, different sessions never
 * wait on each other. Thread-safe.
 */
#ifndef BD_RUNTIME_COMPUTER_H
#define BD_RUNTIME_COMPUTER_H

#include <stddef.h>

#include "core/err.h"
#include "domain/computer.h"

/* Longest a batch may take in all (sleeps and gestures included). */
#define COMPUTER_BATCH_MAX_MS 60000

/* Runs n actions in order on the session's browser (DevTools URL ws_url),
 * stopping at the first failure: *failed (may be NULL) is its index, and e
 * says why (E_INTERNAL for a browser that refused, E_UNAVAIL when it cannot
 * be reached). Screenshot and clipboard-write actions are not taken here. */
int computer_run(const char *session_id, const char *ws_url, const struct comp_action *acts,
                 size_t n, size_t *failed, struct err *e) WUR;

/* A PNG of the page laid out on a width x height screen (the region only,
 * when a->has_region): *png is owned (xmalloc'd), *len bytes. */
int computer_screenshot(const char *session_id, const char *ws_url, const struct comp_action *a,
                        int width, int height, char **png, size_t *len, struct err *e) WUR;

/* Where the pointer is (the last position the session's actions left it). */
void computer_mouse_position(const char *session_id, int *x, int *y);

/* The browser's clipboard: read into *text (owned) / write text. */
int computer_clipboard_read(const char *session_id, const char *ws_url, char **text,
                            struct err *e) WUR;
int computer_clipboard_write(const char *session_id, const char *ws_url, const char *text,
                             struct err *e) WUR;

/* Forgets a session's state (it ended). */
void computer_forget(const char *session_id);

#endif
