/*
 * xinput: one X connection to a headful session's own display, for the
 * agent's hands (XTest input, the pointer, the cursor) and eyes (the screen's
 * pixels). runtime/computer.c keeps one per session and closes it with the
 * session.
 *
 * The display is the session's Xvfb, which runs inside the session's network
 * namespace and listens on the abstract unix socket "@/tmp/.X11-unix/X<N>"
 * there (abstract sockets are scoped by network namespace). The socket is
 * made inside that namespace (core/netns.h netns_socket) and connected from
 * the server's thread; xcb takes the connected descriptor
 * (xcb_connect_to_fd). Why xcb and not Xlib: XOpenDisplay takes only a
 * display name, resolves it in the calling thread's namespace and, when the
 * abstract socket refuses, falls back to the filesystem path
 * /tmp/.X11-unix/X<N> of the HOST, which may be another X server. With the
 * descriptor in hand nothing else can be reached.
 *
 * The X server runs as the session's user, so what it says is untrusted:
 * every reply is awaited with a time limit (a server that stops answering
 * fails the call instead of holding the session), and reply sizes are
 * checked before use. Screen pixels arrive through MIT-SHM in a memfd passed
 * over the socket (no SysV segment shared across the sandbox's IPC
 * namespace), or with plain GetImage when the server has no SHM 1.2.
 *
 * Not thread-safe: the caller serializes calls on one connection (the
 * session's input lock).
 */
#ifndef BD_RUNTIME_XINPUT_H
#define BD_RUNTIME_XINPUT_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

struct xin;

/* Connects to display :display in core/netns namespace netns (0 = the
 * host's). Every reply awaited later is bounded by timeout_ms; the setup
 * handshake is not (xcb has no time limit there), but a display that stops
 * answering is the session's own and ends with it. On failure E_UNAVAIL
 * says why. */
int xin_open(int netns, int display, int timeout_ms, struct xin **out, struct err *e) WUR;
/* Closes the connection (shows the cursor again); accepts NULL. */
void xin_close(struct xin *x);

/* 1 while the connection works (the server may have exited). */
int xin_alive(struct xin *x);
/* The root window's size. */
void xin_screen(const struct xin *x, int *width, int *height);

/* Input through XTest. Events are queued: xin_sync sends them and waits until
 * the server has processed them. Buttons are X's (1 left, 2 middle, 3 right,
 * 4/5 wheel up/down, 6/7 left/right, 8/9 back/forward). */
int xin_motion(struct xin *x, int px, int py, struct err *e) WUR;
int xin_button(struct xin *x, int button, int down, struct err *e) WUR;
/* The keycode (> 0) that produces keysym; *shift is 1 when the keysym is on
 * the key's shifted level, so the caller holds Shift around it. A keysym no
 * key produces is bound to a spare keycode first (as xdotool does; the
 * server has taken the change on return). -errno: E_INVALID when no spare
 * keycode exists. */
int xin_keycode(struct xin *x, uint32_t keysym, int *shift, struct err *e) WUR;
/* Presses or releases a keycode. */
int xin_key(struct xin *x, int keycode, int down, struct err *e) WUR;
int xin_sync(struct xin *x, struct err *e) WUR;

/* Gives the keyboard focus to the top-level window under the pointer, as a
 * click-to-focus window manager would (no window manager runs on the
 * session's display: without this the browser's window never has the focus,
 * and a page loses its focused element when DevTools' focus emulation ends).
 * Override-redirect windows (menus, popups) are left as they are. */
int xin_focus_under_pointer(struct xin *x, struct err *e) WUR;

/* Gives the keyboard focus to a browser window when no window has it (the
 * display's focus is None, PointerRoot or the root window), as a window
 * manager focuses a window it maps: the top-level window under the
 * pointer, else the topmost one (mapped, not override-redirect). Without
 * it, keys sent before any click went wherever the pointer happened to be
 * and, while Chromium had not taken the focus itself, could reach no page.
 * A focus some window holds is left as it is. *changed: 1 when the focus
 * was given (the server has taken it on return). */
int xin_focus_keyboard(struct xin *x, int *changed, struct err *e) WUR;

/* Grows to the whole screen each top-level window (mapped, not
 * override-redirect) that is one pixel narrower and one pixel shorter than
 * the screen, as a window manager would: asked for a window of exactly the
 * screen's size, Chromium on X11 makes it 1 pixel smaller each way (so that
 * window managers do not take it for a fullscreen one), which left a strip
 * of the screen uncovered and a kiosk page 1 pixel short of the viewport.
 * *grown: how many windows were resized (the first LIM_X_FILL_WINDOWS
 * top-level windows are looked at). A window gone meanwhile is skipped. */
int xin_fill_screen(struct xin *x, int *grown, struct err *e) WUR;

/* Where the pointer is on the screen. */
int xin_pointer(struct xin *x, int *px, int *py, struct err *e) WUR;
/* Hides (XFixes HideCursor) or shows the cursor. The hiding lasts while this
 * connection is open. */
int xin_cursor(struct xin *x, int hidden, struct err *e) WUR;

/* The pixels of a rectangle of the screen (inside it), 32 bits per pixel,
 * B G R X in memory, *stride bytes per row; *pixels is borrowed until the
 * next call on x. */
int xin_grab(struct xin *x, int rx, int ry, int rw, int rh, const uint8_t **pixels, size_t *stride,
             struct err *e) WUR;

/* The text of the display's CLIPBOARD selection (as UTF8_STRING, what
 * Chromium and other X clients copy to) into *text (owned, NUL-terminated,
 * *len bytes before the NUL); "" when nobody owns it or its owner has no
 * text. Asked through an unmapped window of this connection; the owner's
 * answer is bounded by the connection's timeout. E_INTERNAL when it holds
 * more than max bytes. */
int xin_clipboard_read(struct xin *x, size_t max, char **text, size_t *len, struct err *e) WUR;

#endif
