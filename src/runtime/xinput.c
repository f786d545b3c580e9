#include "runtime/xinput.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <xcb/shm.h>
#include <xcb/xcb.h>
#include <xcb/xcbext.h> /* xcb_poll_for_reply */
#include <xcb/xfixes.h>
#include <xcb/xtest.h>

#include "core/clock.h"
#include "core/limits.h"
#include "core/netns.h"
#include "core/xalloc.h"

#define SCRATCH_KEYS 8 /* spare keycodes bound on demand to keysyms no key has */

struct xin {
    xcb_connection_t *c;
    xcb_window_t root;
    int width, height;
    int timeout_ms;
    int dead; /* a reply timed out: the stream is out of step, reconnect */
    int hidden;
    /* The keyboard map: per keycode, keysyms_per columns. */
    uint8_t min_kc, max_kc;
    int per;
    uint32_t *map;
    uint8_t scratch[SCRATCH_KEYS]; /* spare keycodes (0: none) */
    int nscratch, next_scratch;
    /* Screen pixels: an MIT-SHM segment over a memfd, or GetImage's reply. */
    int has_shm;
    xcb_shm_seg_t seg;
    uint8_t *shm;
    size_t shm_len;
    void *image_reply;
    /* Clipboard reads: an unmapped window receives the conversions. */
    xcb_window_t clip_win;
    xcb_atom_t a_clipboard, a_utf8, a_prop, a_incr;
};

/* Waits (bounded) for the reply to request seq: the reply (owned; xcb
 * allocates replies with malloc, so xfree releases them),
 * or NULL with e set. A server that does not answer in time leaves the
 * connection marked dead (its replies would come out of step). */
static void *wait_reply(struct xin *x, unsigned int seq, const char *what, struct err *e)
{
    if (xcb_flush(x->c) <= 0) {
        (void)err_set(e, E_UNAVAIL, "unavailable", "the X display went away (%s)", what);
        return NULL;
    }
    int64_t deadline = clock_mono_ms() + x->timeout_ms;
    int fd = xcb_get_file_descriptor(x->c);
    for (;;) {
        void *reply = NULL;
        xcb_generic_error_t *xe = NULL;
        if (xcb_poll_for_reply(x->c, seq, &reply, &xe)) {
            if (xe) {
                (void)err_set(e, E_INTERNAL, "internal", "the X server refused %s (error %d)", what,
                              xe->error_code);
                xfree(xe);
                xfree(reply);
                return NULL;
            }
            if (!reply)
                (void)err_set(e, E_INTERNAL, "internal", "the X server sent no reply to %s", what);
            return reply;
        }
        if (xcb_connection_has_error(x->c)) {
            (void)err_set(e, E_UNAVAIL, "unavailable", "the X display went away (%s)", what);
            return NULL;
        }
        int64_t left = deadline - clock_mono_ms();
        if (left <= 0) {
            x->dead = 1;
            (void)err_set(e, E_UNAVAIL, "unavailable", "the X server did not answer %s in %d ms",
                          what, x->timeout_ms);
            return NULL;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        (void)poll(&p, 1, (int)left);
    }
}

static int sync_x(struct xin *x, const char *what, struct err *e)
{
    void *r = wait_reply(x, xcb_get_input_focus(x->c).sequence, what, e);
    xfree(r);
    return r ? 0 : e->rc;
}

static int load_keymap(struct xin *x, struct err *e)
{
    int count = x->max_kc - x->min_kc + 1;
    xcb_get_keyboard_mapping_reply_t *r = wait_reply(
        x, xcb_get_keyboard_mapping(x->c, x->min_kc, (uint8_t)count).sequence, "the keymap", e);
    if (!r)
        return e->rc;
    int per = r->keysyms_per_keycode;
    int n = xcb_get_keyboard_mapping_keysyms_length(r);
    if (per < 1 || per > 32 || n != per * count) {
        xfree(r);
        return err_set(e, E_INTERNAL, "internal", "the X server's keymap is malformed");
    }
    x->per = per;
    x->map = xcalloc((size_t)n, sizeof *x->map);
    memcpy(x->map, xcb_get_keyboard_mapping_keysyms(r), (size_t)n * sizeof *x->map);
    xfree(r);
    /* Spare keycodes (no keysym at all), from the top: bound on demand. */
    for (int kc = x->max_kc; kc >= x->min_kc && x->nscratch < SCRATCH_KEYS; kc--) {
        const uint32_t *row = &x->map[(kc - x->min_kc) * per];
        int empty = 1;
        for (int i = 0; i < per; i++)
            empty &= row[i] == 0;
        if (empty)
            x->scratch[x->nscratch++] = (uint8_t)kc;
    }
    return 0;
}

/* Sets up shared memory for captures: a memfd the size of the screen, handed
 * to the server (SHM 1.2 AttachFd). Leaves has_shm 0 when the server cannot. */
static void shm_setup(struct xin *x)
{
    const xcb_query_extension_reply_t *ext = xcb_get_extension_data(x->c, &xcb_shm_id);
    if (!ext || !ext->present)
        return;
    struct err ignore;
    err_init(&ignore);
    xcb_shm_query_version_reply_t *v =
        wait_reply(x, xcb_shm_query_version(x->c).sequence, "MIT-SHM", &ignore);
    int ok = v && (v->major_version > 1 || (v->major_version == 1 && v->minor_version >= 2));
    xfree(v);
    if (!ok)
        return;
    size_t len = (size_t)x->width * (size_t)x->height * 4;
    int fd = memfd_create("browserd-xshm", MFD_CLOEXEC);
    if (fd < 0)
        return;
    void *mem = MAP_FAILED;
    if (ftruncate(fd, (off_t)len) == 0)
        mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mem == MAP_FAILED) {
        close(fd);
        return;
    }
    x->seg = xcb_generate_id(x->c);
    /* xcb sends the descriptor with the request and closes it. */
    xcb_void_cookie_t ck = xcb_shm_attach_fd_checked(x->c, x->seg, fd, 0);
    xcb_generic_error_t *xe = NULL;
    /* Checked through a round trip with a time limit: an error for the
     * attach comes before the sync's reply. */
    if (sync_x(x, "MIT-SHM attach", &ignore) != 0 || (xe = xcb_request_check(x->c, ck)) != NULL) {
        xfree(xe);
        munmap(mem, len);
        return;
    }
    x->shm = mem;
    x->shm_len = len;
    x->has_shm = 1;
}

int xin_open(int netns, int display, int timeout_ms, struct xin **out, struct err *e)
{
    *out = NULL;
    int fd = netns_socket(netns, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC);
    if (fd < 0)
        return err_set(e, E_UNAVAIL, "unavailable", "X display socket: %s", strerror(-fd));
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int n = snprintf(sa.sun_path + 1, sizeof sa.sun_path - 1, "/tmp/.X11-unix/X%d", display);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    if (connect(fd, (struct sockaddr *)&sa, len) != 0) {
        int rc = err_set(e, E_UNAVAIL, "unavailable", "connect to X display :%d: %s", display,
                         strerror(errno));
        close(fd);
        return rc;
    }
    /* No authentication: the display is reachable only from inside the
     * session's namespace (Xvfb -nolisten tcp). xcb owns fd from here. */
    xcb_connection_t *c = xcb_connect_to_fd(fd, NULL);
    if (xcb_connection_has_error(c)) {
        xcb_disconnect(c);
        return err_set(e, E_UNAVAIL, "unavailable", "X display :%d refused the connection",
                       display);
    }
    struct xin *x = xcalloc(1, sizeof *x);
    x->c = c;
    x->timeout_ms = timeout_ms;
    const xcb_setup_t *setup = xcb_get_setup(c);
    xcb_screen_t *scr = xcb_setup_roots_iterator(setup).data;
    int rc = 0;
    if (!scr) {
        rc = err_set(e, E_UNAVAIL, "unavailable", "X display :%d has no screen", display);
        goto fail;
    }
    x->root = scr->root;
    x->width = scr->width_in_pixels;
    x->height = scr->height_in_pixels;
    x->min_kc = setup->min_keycode;
    x->max_kc = setup->max_keycode;
    /* Captures read 32-bit little-endian pixels (Xvfb's 24-bit depth). */
    int bpp = 0;
    xcb_format_iterator_t f = xcb_setup_pixmap_formats_iterator(setup);
    for (; f.rem; xcb_format_next(&f))
        if (f.data->depth == scr->root_depth)
            bpp = f.data->bits_per_pixel;
    if (bpp != 32 || scr->root_depth < 24 || setup->image_byte_order != XCB_IMAGE_ORDER_LSB_FIRST) {
        rc = err_set(e, E_UNAVAIL, "unavailable", "X display :%d has depth %d at %d bits per pixel",
                     display, scr->root_depth, bpp);
        goto fail;
    }
    /* The extensions' opcodes, asked at once and waited for with one
     * bounded round trip (xcb_get_extension_data would wait forever). */
    xcb_prefetch_extension_data(c, &xcb_test_id);
    xcb_prefetch_extension_data(c, &xcb_xfixes_id);
    xcb_prefetch_extension_data(c, &xcb_shm_id);
    xcb_xfixes_query_version_cookie_t xfv = xcb_xfixes_query_version(c, 4, 0);
    void *r = wait_reply(x, xfv.sequence, "XFIXES", e);
    const xcb_query_extension_reply_t *xt = xcb_get_extension_data(c, &xcb_test_id);
    if (!r || !xt || !xt->present) {
        if (r)
            rc = err_set(e, E_UNAVAIL, "unavailable", "X display :%d has no XTEST", display);
        else
            rc = e->rc;
        xfree(r);
        goto fail;
    }
    xfree(r);
    if ((rc = load_keymap(x, e)) != 0)
        goto fail;
    shm_setup(x);
    *out = x;
    return 0;
fail:
    xin_close(x);
    return rc ? rc : err_set(e, E_UNAVAIL, "unavailable", "X display :%d", display);
}

void xin_close(struct xin *x)
{
    if (!x)
        return;
    if (x->shm)
        munmap(x->shm, x->shm_len);
    xfree(x->image_reply);
    xfree(x->map);
    /* Closing the connection also ends its HideCursor and frees the SHM
     * segment on the server's side. */
    xcb_disconnect(x->c);
    xfree(x);
}

int xin_alive(struct xin *x)
{
    return x && !x->dead && !xcb_connection_has_error(x->c);
}

void xin_screen(const struct xin *x, int *width, int *height)
{
    *width = x->width;
    *height = x->height;
}

static int sent(struct xin *x, struct err *e)
{
    if (xcb_connection_has_error(x->c))
        return err_set(e, E_UNAVAIL, "unavailable", "the X display went away");
    return 0;
}

int xin_motion(struct xin *x, int px, int py, struct err *e)
{
    xcb_test_fake_input(x->c, XCB_MOTION_NOTIFY, 0, XCB_CURRENT_TIME, x->root, (int16_t)px,
                        (int16_t)py, 0);
    return sent(x, e);
}

int xin_button(struct xin *x, int button, int down, struct err *e)
{
    xcb_test_fake_input(x->c, down ? XCB_BUTTON_PRESS : XCB_BUTTON_RELEASE, (uint8_t)button,
                        XCB_CURRENT_TIME, XCB_NONE, 0, 0, 0);
    return sent(x, e);
}

/* The keycode producing keysym, and whether on the shifted level; 0 if none. */
static int keycode_of(const struct xin *x, uint32_t ks, int *shift)
{
    int count = x->max_kc - x->min_kc + 1;
    for (int level = 0; level < 2 && level < x->per; level++)
        for (int i = 0; i < count; i++) {
            const uint32_t *row = &x->map[i * x->per];
            if (row[level] == ks) {
                *shift = level;
                return x->min_kc + i;
            }
            /* X's rule: a key with one keysym, a lowercase letter, gives
             * the uppercase one with Shift. */
            if (level == 1 && (x->per < 2 || row[1] == 0) && ks >= 'A' && ks <= 'Z' &&
                row[0] == ks + 32) {
                *shift = 1;
                return x->min_kc + i;
            }
        }
    return 0;
}

/* Binds keysym to a spare keycode (the oldest binding goes when all are in
 * use), waiting for the server to take the change. */
static int bind_scratch(struct xin *x, uint32_t ks, struct err *e)
{
    if (x->nscratch == 0)
        return err_set(e, E_INVALID, "bad_request",
                       "no key produces keysym 0x%x and no spare keycode is free", ks);
    uint8_t kc = x->scratch[x->next_scratch];
    x->next_scratch = (x->next_scratch + 1) % x->nscratch;
    uint32_t *row = &x->map[(kc - x->min_kc) * x->per];
    for (int i = 0; i < x->per; i++)
        row[i] = ks;
    xcb_change_keyboard_mapping(x->c, 1, kc, (uint8_t)x->per, row);
    int rc = sync_x(x, "a keymap change", e);
    return rc ? rc : kc;
}

int xin_keycode(struct xin *x, uint32_t keysym, int *shift, struct err *e)
{
    *shift = 0;
    int kc = keycode_of(x, keysym, shift);
    return kc ? kc : bind_scratch(x, keysym, e);
}

int xin_key(struct xin *x, int keycode, int down, struct err *e)
{
    xcb_test_fake_input(x->c, down ? XCB_KEY_PRESS : XCB_KEY_RELEASE, (uint8_t)keycode,
                        XCB_CURRENT_TIME, XCB_NONE, 0, 0, 0);
    return sent(x, e);
}

int xin_sync(struct xin *x, struct err *e)
{
    return sync_x(x, "input", e);
}

int xin_pointer(struct xin *x, int *px, int *py, struct err *e)
{
    xcb_query_pointer_reply_t *r =
        wait_reply(x, xcb_query_pointer(x->c, x->root).sequence, "the pointer position", e);
    if (!r)
        return e->rc;
    *px = r->root_x;
    *py = r->root_y;
    xfree(r);
    return 0;
}

int xin_focus_under_pointer(struct xin *x, struct err *e)
{
    xcb_query_pointer_cookie_t pc = xcb_query_pointer(x->c, x->root);
    xcb_get_input_focus_cookie_t fc = xcb_get_input_focus(x->c);
    xcb_query_pointer_reply_t *p = wait_reply(x, pc.sequence, "the pointer's window", e);
    xcb_get_input_focus_reply_t *f = p ? wait_reply(x, fc.sequence, "the focus", e) : NULL;
    xcb_window_t win = p ? p->child : XCB_NONE, focus = f ? f->focus : XCB_NONE;
    int rc = p && f ? 0 : e->rc;
    xfree(p);
    xfree(f);
    if (rc || win == XCB_NONE || win == focus)
        return rc;
    xcb_get_window_attributes_reply_t *a =
        wait_reply(x, xcb_get_window_attributes(x->c, win).sequence, "the window's attributes", e);
    if (!a)
        return e->rc;
    int popup = a->override_redirect || a->map_state != XCB_MAP_STATE_VIEWABLE;
    xfree(a);
    if (popup)
        return 0;
    xcb_set_input_focus(x->c, XCB_INPUT_FOCUS_POINTER_ROOT, win, XCB_CURRENT_TIME);
    return sent(x, e);
}

/* A top-level window's geometry and attributes, asked for together. Both
 * NULL when the window went away meanwhile (the caller skips it); fails
 * only when the display did. */
static int window_info(struct xin *x, xcb_window_t win, xcb_get_geometry_reply_t **g,
                       xcb_get_window_attributes_reply_t **a, struct err *e)
{
    unsigned int gs = xcb_get_geometry(x->c, win).sequence;
    unsigned int as = xcb_get_window_attributes(x->c, win).sequence;
    struct err we;
    err_init(&we);
    *g = wait_reply(x, gs, "a window's geometry", &we);
    *a = NULL;
    if (*g)
        *a = wait_reply(x, as, "a window's attributes", &we);
    else
        xcb_discard_reply(x->c, as);
    int dead = x->dead || xcb_connection_has_error(x->c);
    if (dead || !*g || !*a) {
        xfree(*g);
        xfree(*a);
        *g = NULL;
        *a = NULL;
    }
    if (dead)
        return we.rc ? err_set(e, we.rc, we.code, "%s", we.message)
                     : err_set(e, E_UNAVAIL, "unavailable", "the X display went away");
    return 0;
}

/* 1 when win is a top-level window that can take the keyboard: mapped,
 * not override-redirect, of a real size. */
static int focusable(struct xin *x, xcb_window_t win, struct err *e)
{
    xcb_get_geometry_reply_t *g;
    xcb_get_window_attributes_reply_t *a;
    int rc = window_info(x, win, &g, &a, e);
    if (rc)
        return rc;
    int ok = g && a && a->map_state == XCB_MAP_STATE_VIEWABLE && !a->override_redirect &&
             a->_class == XCB_WINDOW_CLASS_INPUT_OUTPUT && g->width > 1 && g->height > 1;
    xfree(g);
    xfree(a);
    return ok;
}

int xin_focus_keyboard(struct xin *x, int *changed, struct err *e)
{
    *changed = 0;
    xcb_get_input_focus_reply_t *f =
        wait_reply(x, xcb_get_input_focus(x->c).sequence, "the focus", e);
    if (!f)
        return e->rc;
    xcb_window_t focus = f->focus;
    xfree(f);
    if (focus != XCB_NONE && focus != XCB_INPUT_FOCUS_POINTER_ROOT && focus != x->root)
        return 0;
    xcb_query_pointer_reply_t *p =
        wait_reply(x, xcb_query_pointer(x->c, x->root).sequence, "the pointer's window", e);
    if (!p)
        return e->rc;
    xcb_window_t win = p->child;
    xfree(p);
    int ok = win != XCB_NONE ? focusable(x, win, e) : 0;
    if (ok < 0)
        return ok;
    if (!ok) {
        /* The topmost one: the last child in stacking order. */
        xcb_query_tree_reply_t *t =
            wait_reply(x, xcb_query_tree(x->c, x->root).sequence, "the top-level windows", e);
        if (!t)
            return e->rc;
        int n = xcb_query_tree_children_length(t);
        const xcb_window_t *w = xcb_query_tree_children(t);
        for (int i = n - 1, seen = 0; i >= 0 && seen < LIM_X_FILL_WINDOWS && !ok; i--, seen++) {
            win = w[i];
            ok = focusable(x, win, e);
        }
        xfree(t);
        if (ok <= 0)
            return ok;
    }
    xcb_set_input_focus(x->c, XCB_INPUT_FOCUS_POINTER_ROOT, win, XCB_CURRENT_TIME);
    int rc = sync_x(x, "the focus", e);
    *changed = rc == 0;
    return rc;
}

int xin_fill_screen(struct xin *x, int *grown, struct err *e)
{
    *grown = 0;
    xcb_query_tree_reply_t *t =
        wait_reply(x, xcb_query_tree(x->c, x->root).sequence, "the top-level windows", e);
    if (!t)
        return e->rc;
    int n = xcb_query_tree_children_length(t);
    const xcb_window_t *w = xcb_query_tree_children(t);
    int rc = 0;
    for (int i = 0; i < n && i < LIM_X_FILL_WINDOWS && rc == 0; i++) {
        xcb_get_geometry_reply_t *g;
        xcb_get_window_attributes_reply_t *a;
        rc = window_info(x, w[i], &g, &a, e);
        if (rc == 0 && g && a && a->map_state == XCB_MAP_STATE_VIEWABLE && !a->override_redirect &&
            g->width + 1 == x->width && g->height + 1 == x->height) {
            const uint32_t v[] = {(uint32_t)x->width, (uint32_t)x->height};
            xcb_configure_window(x->c, w[i], XCB_CONFIG_WINDOW_WIDTH | XCB_CONFIG_WINDOW_HEIGHT, v);
            ++*grown;
        }
        xfree(g);
        xfree(a);
    }
    xfree(t);
    if (rc == 0 && *grown)
        rc = sync_x(x, "the windows' new size", e);
    return rc;
}

/* The atom named name, waited for (bounded). */
static int intern(struct xin *x, const char *name, xcb_atom_t *out, struct err *e)
{
    xcb_intern_atom_reply_t *r = wait_reply(
        x, xcb_intern_atom(x->c, 0, (uint16_t)strlen(name), name).sequence, "an atom", e);
    if (!r)
        return e->rc;
    *out = r->atom;
    xfree(r);
    return 0;
}

/* The clipboard's window and atoms, made on first use. */
static int clip_setup(struct xin *x, struct err *e)
{
    if (x->clip_win)
        return 0;
    int rc = intern(x, "CLIPBOARD", &x->a_clipboard, e);
    if (rc == 0)
        rc = intern(x, "UTF8_STRING", &x->a_utf8, e);
    if (rc == 0)
        rc = intern(x, "BROWSERD_CLIPBOARD", &x->a_prop, e);
    if (rc == 0)
        rc = intern(x, "INCR", &x->a_incr, e);
    if (rc)
        return rc;
    xcb_window_t w = xcb_generate_id(x->c);
    xcb_create_window(x->c, 0, w, x->root, 0, 0, 1, 1, 0, XCB_WINDOW_CLASS_INPUT_ONLY,
                      XCB_COPY_FROM_PARENT, 0, NULL);
    if ((rc = sync_x(x, "a window for the clipboard", e)) != 0)
        return rc;
    x->clip_win = w;
    return 0;
}

/* Waits (bounded) for the SelectionNotify answering our conversion; other
 * events (none are selected) are dropped. 1 with the property set, 0 when
 * the owner could not convert (or there is no owner). */
static int wait_selection_notify(struct xin *x, struct err *e)
{
    int64_t deadline = clock_mono_ms() + x->timeout_ms;
    int fd = xcb_get_file_descriptor(x->c);
    for (;;) {
        xcb_generic_event_t *ev;
        while ((ev = xcb_poll_for_event(x->c)) != NULL) {
            int hit = (ev->response_type & 0x7f) == XCB_SELECTION_NOTIFY &&
                      ((xcb_selection_notify_event_t *)ev)->requestor == x->clip_win;
            int set = hit && ((xcb_selection_notify_event_t *)ev)->property != XCB_NONE;
            xfree(ev);
            if (hit)
                return set;
        }
        if (xcb_connection_has_error(x->c))
            return err_set(e, E_UNAVAIL, "unavailable", "the X display went away (the clipboard)");
        int64_t left = deadline - clock_mono_ms();
        if (left <= 0)
            return err_set(e, E_UNAVAIL, "unavailable",
                           "the clipboard's owner did not answer in %d ms", x->timeout_ms);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        (void)poll(&p, 1, (int)left);
    }
}

int xin_clipboard_read(struct xin *x, size_t max, char **text, size_t *len, struct err *e)
{
    *text = NULL;
    *len = 0;
    int rc = clip_setup(x, e);
    if (rc)
        return rc;
    xcb_convert_selection(x->c, x->clip_win, x->a_clipboard, x->a_utf8, x->a_prop,
                          XCB_CURRENT_TIME);
    if (xcb_flush(x->c) <= 0)
        return err_set(e, E_UNAVAIL, "unavailable", "the X display went away (the clipboard)");
    int set = wait_selection_notify(x, e);
    if (set < 0)
        return set;
    if (!set) {
        *text = xstrdup(""); /* no owner, or nothing as text */
        return 0;
    }
    xcb_get_property_reply_t *r =
        wait_reply(x,
                   xcb_get_property(x->c, 1, x->clip_win, x->a_prop, XCB_GET_PROPERTY_TYPE_ANY, 0,
                                    (uint32_t)(max / 4 + 1))
                       .sequence,
                   "the clipboard's text", e);
    if (!r)
        return e->rc;
    size_t n = (size_t)xcb_get_property_value_length(r);
    if (r->type == x->a_incr || r->bytes_after > 0 || n > max) {
        xfree(r);
        return err_set(e, E_INTERNAL, "internal", "the clipboard holds more than %zu bytes", max);
    }
    if (r->format != 8 && n > 0) {
        xfree(r);
        return err_set(e, E_INTERNAL, "internal", "the clipboard's owner sent no text");
    }
    *text = xmalloc(n + 1);
    memcpy(*text, xcb_get_property_value(r), n);
    (*text)[n] = '\0';
    *len = n;
    xfree(r);
    return 0;
}

int xin_cursor(struct xin *x, int hidden, struct err *e)
{
    hidden = !!hidden;
    if (hidden == x->hidden)
        return 0; /* ShowCursor without a HideCursor is an error in XFixes */
    if (hidden)
        xcb_xfixes_hide_cursor(x->c, x->root);
    else
        xcb_xfixes_show_cursor(x->c, x->root);
    int rc = sync_x(x, "the cursor change", e);
    if (rc == 0)
        x->hidden = hidden;
    return rc;
}

int xin_grab(struct xin *x, int rx, int ry, int rw, int rh, const uint8_t **pixels, size_t *stride,
             struct err *e)
{
    if (rx < 0 || ry < 0 || rw < 1 || rh < 1 || rx + rw > x->width || ry + rh > x->height)
        return err_set(e, E_INVALID, "bad_request", "region exceeds screen bounds");
    xfree(x->image_reply);
    x->image_reply = NULL;
    size_t need = (size_t)rw * (size_t)rh * 4;
    if (x->has_shm) {
        xcb_shm_get_image_reply_t *r =
            wait_reply(x,
                       xcb_shm_get_image(x->c, x->root, (int16_t)rx, (int16_t)ry, (uint16_t)rw,
                                         (uint16_t)rh, ~0u, XCB_IMAGE_FORMAT_Z_PIXMAP, x->seg, 0)
                           .sequence,
                       "a screen capture", e);
        if (!r)
            return e->rc;
        int ok = r->size >= need && need <= x->shm_len;
        xfree(r);
        if (!ok)
            return err_set(e, E_INTERNAL, "internal", "the X server's capture has the wrong size");
        *pixels = x->shm;
        *stride = (size_t)rw * 4;
        return 0;
    }
    xcb_get_image_reply_t *r =
        wait_reply(x,
                   xcb_get_image(x->c, XCB_IMAGE_FORMAT_Z_PIXMAP, x->root, (int16_t)rx, (int16_t)ry,
                                 (uint16_t)rw, (uint16_t)rh, ~0u)
                       .sequence,
                   "a screen capture", e);
    if (!r)
        return e->rc;
    if ((size_t)xcb_get_image_data_length(r) < need) {
        xfree(r);
        return err_set(e, E_INTERNAL, "internal", "the X server's capture has the wrong size");
    }
    x->image_reply = r;
    *pixels = xcb_get_image_data(r);
    *stride = (size_t)rw * 4;
    return 0;
}
