/*
 * computer: the rules of browsers.computer.* (SESSION_API.md section 1), as
 * pure functions: a request body in, a validated action (or a 400 naming the
 * field and the rule) out, and X keysym names mapped to the key events a
 * browser takes. No I/O; runtime/computer.c performs the actions.
 */
#ifndef BD_DOMAIN_COMPUTER_H
#define BD_DOMAIN_COMPUTER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define COMP_MAX_KEYS       16  /* keys or hold_keys in one call */
#define COMP_MAX_PATH       512 /* drag path points */
#define COMP_BATCH_MAX      100 /* CP: maxItems 100 */
#define COMP_SLEEP_MAX_MS   30000
#define COMP_TYPE_MAX_BYTES 65536
#define COMP_CLIP_MAX_BYTES (1u << 20)
#define COMP_PRESS_MAX_MS   10000 /* longest key hold (duration) */
#define COMP_DELAY_MAX_MS   1000  /* longest per-key delay or drag delay */

enum comp_op {
    COMP_CLICK,
    COMP_MOVE,
    COMP_DRAG,
    COMP_PRESS,
    COMP_SCROLL,
    COMP_TYPE,
    COMP_CURSOR,
    COMP_SLEEP,
    COMP_CLIP_WRITE,
    COMP_SCREENSHOT,
};

/* One key as the browser takes it (CDP Input.dispatchKeyEvent). */
struct comp_key {
    char key[24];  /* DOM key value ("a", "Enter", "Control") */
    char code[24]; /* DOM code ("KeyA", "Enter", "ControlLeft") */
    int keycode;   /* Windows virtual key code */
    char text[8];  /* text the key inserts ("" for none) */
    int modifier;  /* CDP modifier bit it sets (Alt 1, Ctrl 2, Meta 4, Shift 8), or 0 */
};

/* A combination ("ctrl+a", "Ctrl+Shift+Tab"): modifiers first, then the key. */
struct comp_combo {
    struct comp_key keys[6];
    int n;
};

struct comp_action {
    enum comp_op op;
    int x, y;              /* click, move, scroll */
    int button;            /* 0 left, 1 middle, 2 right, 3 back, 4 forward */
    int click_type;        /* 0 click, 1 down, 2 up */
    int num_clicks;        /* >= 1 */
    int duration_ms;       /* move/drag smooth duration; press hold; sleep */
    int smooth;            /* move, drag */
    int delay_ms;          /* drag: after press; type: per key */
    int step_delay_ms;     /* drag, smooth=false */
    int steps_per_segment; /* drag, smooth=false */
    int (*path)[2];        /* drag: owned */
    int npath;
    int delta_x, delta_y; /* scroll, wheel ticks */
    struct comp_combo hold[COMP_MAX_KEYS];
    int nhold;
    struct comp_combo keys[COMP_MAX_KEYS]; /* press */
    int nkeys;
    char *text;     /* type, clipboard write: owned */
    int hidden;     /* cursor */
    int has_region; /* screenshot */
    int rx, ry, rw, rh;
};

/* Parses the body of POST /browsers/{id}/computer/<op> for op (the single
 * endpoints; body may be NULL for screenshot). field_prefix names the body in
 * messages ("" for an endpoint, "actions[3].click_mouse" in a batch).
 * Coordinates are checked against a width x height screen. 0, or E_INVALID
 * with the field and rule in e. Clear with comp_action_clear. */
int comp_parse(enum comp_op op, const json_t *body, const char *field_prefix, int width, int height,
               struct comp_action *out, struct err *e) WUR;
void comp_action_clear(struct comp_action *a);

/* The pauses an action asks for, in ms: a sleep's duration, a smooth move's
 * or drag's duration, a drag's delays, a key hold times its keys, a typing
 * delay times the characters. One call (an action, or a whole batch) may ask
 * for at most LIM_COMPUTER_CALL_MS: comp_parse and comp_parse_batch refuse
 * more with a 400 naming the field ("actions" for a batch's sum). */
long long comp_wait_ms(const struct comp_action *a);

/* A batch body {actions: [...]}: 1..100 actions, each {type, <type>: params},
 * whose pauses add up to at most LIM_COMPUTER_CALL_MS.
 * *out is an owned array of *n actions (comp_batch_free). */
int comp_parse_batch(const json_t *body, int width, int height, struct comp_action **out, size_t *n,
                     struct err *e) WUR;
void comp_batch_free(struct comp_action *a, size_t n);

/* One key combination from an X keysym text ("Return", "ctrl+a",
 * "Ctrl+Shift+Tab", "a", "F5", "minus"). 0, or -1 for an unknown name. */
int comp_combo_parse(const char *s, struct comp_combo *out) WUR;

/* The key that types character cp (its n UTF-8 bytes at t) on a US
 * keyboard, and in *shift whether Shift is down for it: letters, digits and
 * signs their own key ('A' is KeyA with Shift, '!' Digit1 with Shift), a
 * space Space, '\n' Enter, '\t' Tab; a character no key has ('é', CJK) a
 * key event carrying the character alone, as an input method gives. 1, or
 * 0 for a character no key types (other control characters). */
int comp_typed_key(const char *t, size_t n, uint32_t cp, struct comp_key *k, int *shift);

/* The operation id reported in telemetry (KI's: clickMouse, ...). */
const char *comp_operation_id(enum comp_op op);

#endif
