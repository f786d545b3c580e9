#include "domain/computer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/limits.h"
#include "core/xalloc.h"

/* ---- keys ---- */

struct named {
    const char *name; /* X keysym name or xdotool alias, matched without case */
    const char *key, *code;
    int keycode;
    int modifier;
    const char *text;
};

static const struct named named_keys[] = {
    {"ctrl", "Control", "ControlLeft", 17, 2, ""},
    {"control", "Control", "ControlLeft", 17, 2, ""},
    {"control_l", "Control", "ControlLeft", 17, 2, ""},
    {"control_r", "Control", "ControlRight", 17, 2, ""},
    {"shift", "Shift", "ShiftLeft", 16, 8, ""},
    {"shift_l", "Shift", "ShiftLeft", 16, 8, ""},
    {"shift_r", "Shift", "ShiftRight", 16, 8, ""},
    {"alt", "Alt", "AltLeft", 18, 1, ""},
    {"alt_l", "Alt", "AltLeft", 18, 1, ""},
    {"alt_r", "Alt", "AltRight", 18, 1, ""},
    {"meta", "Meta", "MetaLeft", 91, 4, ""},
    {"super", "Meta", "MetaLeft", 91, 4, ""},
    {"super_l", "Meta", "MetaLeft", 91, 4, ""},
    {"super_r", "Meta", "MetaRight", 92, 4, ""},
    {"cmd", "Meta", "MetaLeft", 91, 4, ""},
    {"return", "Enter", "Enter", 13, 0, "\r"},
    {"enter", "Enter", "Enter", 13, 0, "\r"},
    {"kp_enter", "Enter", "NumpadEnter", 13, 0, "\r"},
    {"tab", "Tab", "Tab", 9, 0, ""},
    {"iso_left_tab", "Tab", "Tab", 9, 0, ""},
    {"backspace", "Backspace", "Backspace", 8, 0, ""},
    {"escape", "Escape", "Escape", 27, 0, ""},
    {"esc", "Escape", "Escape", 27, 0, ""},
    {"delete", "Delete", "Delete", 46, 0, ""},
    {"insert", "Insert", "Insert", 45, 0, ""},
    {"home", "Home", "Home", 36, 0, ""},
    {"end", "End", "End", 35, 0, ""},
    {"page_up", "PageUp", "PageUp", 33, 0, ""},
    {"prior", "PageUp", "PageUp", 33, 0, ""},
    {"page_down", "PageDown", "PageDown", 34, 0, ""},
    {"next", "PageDown", "PageDown", 34, 0, ""},
    {"left", "ArrowLeft", "ArrowLeft", 37, 0, ""},
    {"up", "ArrowUp", "ArrowUp", 38, 0, ""},
    {"right", "ArrowRight", "ArrowRight", 39, 0, ""},
    {"down", "ArrowDown", "ArrowDown", 40, 0, ""},
    {"space", " ", "Space", 32, 0, " "},
    {"minus", "-", "Minus", 189, 0, "-"},
    {"plus", "+", "Equal", 187, 0, "+"},
    {"equal", "=", "Equal", 187, 0, "="},
    {"comma", ",", "Comma", 188, 0, ","},
    {"period", ".", "Period", 190, 0, "."},
    {"slash", "/", "Slash", 191, 0, "/"},
    {"backslash", "\\", "Backslash", 220, 0, "\\"},
    {"semicolon", ";", "Semicolon", 186, 0, ";"},
    {"apostrophe", "'", "Quote", 222, 0, "'"},
    {"grave", "`", "Backquote", 192, 0, "`"},
    {"bracketleft", "[", "BracketLeft", 219, 0, "["},
    {"bracketright", "]", "BracketRight", 221, 0, "]"},
    {"caps_lock", "CapsLock", "CapsLock", 20, 0, ""},
    {"menu", "ContextMenu", "ContextMenu", 93, 0, ""},
};

/* Punctuation typed with Shift on a US layout: the key and its base code. */
static const struct {
    char ch;
    const char *code;
    int keycode;
    int shifted;
} punct[] = {
    {'-', "Minus", 189, 0},       {'_', "Minus", 189, 1},        {'=', "Equal", 187, 0},
    {'+', "Equal", 187, 1},       {',', "Comma", 188, 0},        {'<', "Comma", 188, 1},
    {'.', "Period", 190, 0},      {'>', "Period", 190, 1},       {'/', "Slash", 191, 0},
    {'?', "Slash", 191, 1},       {';', "Semicolon", 186, 0},    {':', "Semicolon", 186, 1},
    {'\'', "Quote", 222, 0},      {'"', "Quote", 222, 1},        {'[', "BracketLeft", 219, 0},
    {'{', "BracketLeft", 219, 1}, {']', "BracketRight", 221, 0}, {'}', "BracketRight", 221, 1},
    {'\\', "Backslash", 220, 0},  {'|', "Backslash", 220, 1},    {'`', "Backquote", 192, 0},
    {'~', "Backquote", 192, 1},   {'!', "Digit1", 49, 1},        {'@', "Digit2", 50, 1},
    {'#', "Digit3", 51, 1},       {'$', "Digit4", 52, 1},        {'%', "Digit5", 53, 1},
    {'^', "Digit6", 54, 1},       {'&', "Digit7", 55, 1},        {'*', "Digit8", 56, 1},
    {'(', "Digit9", 57, 1},       {')', "Digit0", 48, 1},
};

static void set_key(struct comp_key *k, const char *key, const char *code, int keycode,
                    const char *text, int modifier)
{
    snprintf(k->key, sizeof k->key, "%s", key);
    snprintf(k->code, sizeof k->code, "%s", code);
    k->keycode = keycode;
    snprintf(k->text, sizeof k->text, "%s", text);
    k->modifier = modifier;
}

/* One key name (no '+'). */
static int key_parse(const char *s, size_t n, struct comp_key *k)
{
    char name[32];
    if (n == 0 || n >= sizeof name)
        return -1;
    memcpy(name, s, n);
    name[n] = '\0';
    for (size_t i = 0; i < sizeof named_keys / sizeof *named_keys; i++)
        if (strcasecmp(name, named_keys[i].name) == 0) {
            set_key(k, named_keys[i].key, named_keys[i].code, named_keys[i].keycode,
                    named_keys[i].text, named_keys[i].modifier);
            return 0;
        }
    if ((name[0] == 'F' || name[0] == 'f') && n >= 2 && n <= 3) {
        char *end;
        long f = strtol(name + 1, &end, 10);
        if (!*end && f >= 1 && f <= 24) {
            char up[8];
            snprintf(up, sizeof up, "F%ld", f);
            set_key(k, up, up, 111 + (int)f, "", 0);
            return 0;
        }
    }
    if (n != 1 || (unsigned char)name[0] < 0x21 || (unsigned char)name[0] > 0x7e)
        return -1;
    char c = name[0], txt[2] = {c, '\0'};
    if (c >= 'a' && c <= 'z') {
        char code[8];
        snprintf(code, sizeof code, "Key%c", c - 'a' + 'A');
        set_key(k, txt, code, c - 'a' + 'A', txt, 0);
        return 0;
    }
    if (c >= 'A' && c <= 'Z') {
        char code[8];
        snprintf(code, sizeof code, "Key%c", c);
        set_key(k, txt, code, c, txt, 0);
        return 0;
    }
    if (c >= '0' && c <= '9') {
        char code[8];
        snprintf(code, sizeof code, "Digit%c", c);
        set_key(k, txt, code, c, txt, 0);
        return 0;
    }
    for (size_t i = 0; i < sizeof punct / sizeof *punct; i++)
        if (punct[i].ch == c) {
            set_key(k, txt, punct[i].code, punct[i].keycode, txt, 0);
            return 0;
        }
    return -1;
}

int comp_typed_key(const char *t, size_t n, uint32_t cp, struct comp_key *k, int *shift)
{
    memset(k, 0, sizeof *k);
    *shift = 0;
    if (cp == '\n' || cp == '\t' || cp == ' ') {
        if (cp == '\n')
            set_key(k, "Enter", "Enter", 13, "\r", 0);
        else if (cp == '\t')
            set_key(k, "Tab", "Tab", 9, "", 0);
        else
            set_key(k, " ", "Space", 32, " ", 0);
        return 1;
    }
    if (cp < 0x20 || cp == 0x7f || cp == 0xFFFD || n == 0 || n >= sizeof k->text)
        return 0;
    if (cp < 0x7f) {
        char c = (char)cp;
        if (key_parse(&c, 1, k) != 0)
            return 0;
        *shift = c >= 'A' && c <= 'Z';
        for (size_t i = 0; i < sizeof punct / sizeof *punct; i++)
            if (punct[i].ch == c)
                *shift = punct[i].shifted;
        return 1;
    }
    snprintf(k->key, sizeof k->key, "%.*s", (int)n, t);
    snprintf(k->text, sizeof k->text, "%.*s", (int)n, t);
    return 1;
}

int comp_combo_parse(const char *s, struct comp_combo *out)
{
    memset(out, 0, sizeof *out);
    if (!s || !*s)
        return -1;
    /* "Ctrl+-" and "ctrl++": a '+' right after a '+' (or at the end) is the key. */
    const char *p = s;
    while (*p) {
        const char *plus = strchr(p, '+');
        if (plus == p) /* the key itself is '+' */
            plus = p[1] == '+' ? p + 1 : (p[1] ? strchr(p + 1, '+') : NULL);
        size_t n = plus ? (size_t)(plus - p) : strlen(p);
        if (out->n == (int)(sizeof out->keys / sizeof *out->keys) ||
            key_parse(p, n, &out->keys[out->n]) != 0)
            return -1;
        out->n++;
        if (!plus)
            break;
        p = plus + 1;
        if (!*p)
            return -1; /* a trailing '+' */
    }
    return out->n > 0 ? 0 : -1;
}

/* ---- fields ---- */

struct ctx {
    const char *prefix;
    struct err *e;
};

static void field_path_of(const struct ctx *c, const char *field, char *out, size_t cap)
{
    if (c->prefix[0])
        snprintf(out, cap, "%s.%s", c->prefix, field);
    else
        snprintf(out, cap, "%s", field);
}

static int bad(const struct ctx *c, const char *field, const char *rule)
{
    char p[160];
    field_path_of(c, field, p, sizeof p);
    return err_field(c->e, p, "%s", rule);
}

/* An optional integer field in [lo, hi]; *v keeps its default when absent. */
static int int_field(const struct ctx *c, const json_t *o, const char *field, int required,
                     long long lo, long long hi, int *v)
{
    json_t *j = json_object_get(o, field);
    if (!j || json_is_null(j)) {
        if (required)
            return bad(c, field, "is required");
        return 0;
    }
    if (!json_is_integer(j))
        return bad(c, field, "must be an integer");
    json_int_t n = json_integer_value(j);
    if (n < lo || n > hi) {
        char rule[96];
        snprintf(rule, sizeof rule, "must be an integer from %lld to %lld", lo, hi);
        return bad(c, field, rule);
    }
    *v = (int)n;
    return 0;
}

static int bool_field(const struct ctx *c, const json_t *o, const char *field, int required, int *v)
{
    json_t *j = json_object_get(o, field);
    if (!j || json_is_null(j))
        return required ? bad(c, field, "is required") : 0;
    if (!json_is_boolean(j))
        return bad(c, field, "must be a boolean");
    *v = json_is_true(j);
    return 0;
}

static int text_field(const struct ctx *c, const json_t *o, const char *field, size_t max, char **v)
{
    json_t *j = json_object_get(o, field);
    if (!j || json_is_null(j))
        return bad(c, field, "is required");
    if (!json_is_string(j))
        return bad(c, field, "must be a string");
    if (json_string_length(j) > max) {
        char rule[64];
        snprintf(rule, sizeof rule, "must be at most %zu bytes", max);
        return bad(c, field, rule);
    }
    *v = xstrndup(json_string_value(j), json_string_length(j));
    return 0;
}

/* Coordinates on a width x height screen: [0, W-1] x [0, H-1]. */
static int xy(const struct ctx *c, const json_t *o, int w, int h, int *x, int *y)
{
    int rc = int_field(c, o, "x", 1, 0, w - 1, x);
    int rc2 = int_field(c, o, "y", 1, 0, h - 1, y);
    return rc ? rc : rc2;
}

static int keys_field(const struct ctx *c, const json_t *o, const char *field, int required,
                      struct comp_combo *out, int *n)
{
    json_t *j = json_object_get(o, field);
    *n = 0;
    if (!j || json_is_null(j))
        return required ? bad(c, field, "is required") : 0;
    if (!json_is_array(j))
        return bad(c, field, "must be an array of X keysym names");
    if (required && json_array_size(j) == 0)
        return bad(c, field, "must contain at least one key symbol");
    if (json_array_size(j) > COMP_MAX_KEYS) {
        char rule[64];
        snprintf(rule, sizeof rule, "must hold at most %d keys", COMP_MAX_KEYS);
        return bad(c, field, rule);
    }
    size_t i;
    json_t *k;
    json_array_foreach(j, i, k)
    {
        char f[64];
        snprintf(f, sizeof f, "%s[%zu]", field, i);
        if (!json_is_string(k))
            return bad(c, f, "must be a string");
        if (comp_combo_parse(json_string_value(k), &out[i]) != 0)
            return bad(c, f, "is not a known X keysym name or combination (e.g. Return, ctrl+a)");
    }
    *n = (int)json_array_size(j);
    return 0;
}

static int button_field(const struct ctx *c, const json_t *o, int drag, int *v)
{
    static const char *const names[] = {"left", "middle", "right", "back", "forward"};
    json_t *j = json_object_get(o, "button");
    *v = 0;
    if (!j || json_is_null(j))
        return 0;
    const char *s = json_string_value(j);
    for (int i = 0; s && i < (drag ? 3 : 5); i++)
        if (strcmp(s, names[i]) == 0) {
            *v = i;
            return 0;
        }
    return bad(c, "button",
               drag ? "must be left, middle or right"
                    : "must be left, right, middle, back or forward");
}

/* ---- per operation ---- */

static int parse_one(enum comp_op op, const json_t *b, const struct ctx *c, int w, int h,
                     struct comp_action *a)
{
    int rc = 0;
    a->op = op;
    a->num_clicks = 1;
    a->smooth = 1;
    a->step_delay_ms = 50;
    a->steps_per_segment = 10;
    if (op != COMP_SCREENSHOT && !json_is_object(b))
        return bad(c, "", "request body is required (a JSON object)");
    switch (op) {
    case COMP_CLICK: {
        rc |= xy(c, b, w, h, &a->x, &a->y);
        rc |= button_field(c, b, 0, &a->button);
        json_t *ct = json_object_get(b, "click_type");
        const char *s = json_string_value(ct);
        if (ct && !json_is_null(ct)) {
            if (s && strcmp(s, "click") == 0)
                a->click_type = 0;
            else if (s && strcmp(s, "down") == 0)
                a->click_type = 1;
            else if (s && strcmp(s, "up") == 0)
                a->click_type = 2;
            else
                rc |= bad(c, "click_type", "must be click, down or up");
        }
        rc |= int_field(c, b, "num_clicks", 0, -1000, 10, &a->num_clicks);
        if (a->num_clicks <= 0)
            a->num_clicks = 1; /* as xdotool: <= 0 is one click */
        rc |= keys_field(c, b, "hold_keys", 0, a->hold, &a->nhold);
        break;
    }
    case COMP_MOVE:
        a->duration_ms = 0;
        rc |= xy(c, b, w, h, &a->x, &a->y);
        rc |= int_field(c, b, "duration_ms", 0, 50, 5000, &a->duration_ms);
        rc |= bool_field(c, b, "smooth", 0, &a->smooth);
        rc |= keys_field(c, b, "hold_keys", 0, a->hold, &a->nhold);
        break;
    case COMP_DRAG: {
        json_t *p = json_object_get(b, "path");
        if (!json_is_array(p) || json_array_size(p) < 2) {
            rc |= bad(c, "path", "must contain at least two points");
        } else if (json_array_size(p) > COMP_MAX_PATH) {
            rc |= bad(c, "path", "must contain at most 512 points");
        } else {
            a->path = xcalloc(json_array_size(p), sizeof *a->path);
            size_t i;
            json_t *pt;
            json_array_foreach(p, i, pt)
            {
                char f[32];
                snprintf(f, sizeof f, "path[%zu]", i);
                json_t *px = json_array_get(pt, 0), *py = json_array_get(pt, 1);
                if (!json_is_array(pt) || json_array_size(pt) != 2 || !json_is_integer(px) ||
                    !json_is_integer(py)) {
                    rc |= bad(c, f, "must be [x,y] (two integers)");
                    break;
                }
                json_int_t vx = json_integer_value(px), vy = json_integer_value(py);
                if (vx < 0 || vy < 0 || vx >= w || vy >= h) {
                    char rule[96];
                    snprintf(rule, sizeof rule, "coordinates exceed screen bounds (max: %dx%d)",
                             w - 1, h - 1);
                    rc |= bad(c, f, rule);
                    break;
                }
                a->path[i][0] = (int)vx;
                a->path[i][1] = (int)vy;
            }
            a->npath = (int)json_array_size(p);
        }
        rc |= button_field(c, b, 1, &a->button);
        rc |= int_field(c, b, "delay", 0, 0, COMP_DELAY_MAX_MS, &a->delay_ms);
        rc |= int_field(c, b, "duration_ms", 0, 50, 10000, &a->duration_ms);
        rc |= bool_field(c, b, "smooth", 0, &a->smooth);
        rc |= int_field(c, b, "step_delay_ms", 0, 0, COMP_DELAY_MAX_MS, &a->step_delay_ms);
        rc |= int_field(c, b, "steps_per_segment", 0, 1, 100, &a->steps_per_segment);
        rc |= keys_field(c, b, "hold_keys", 0, a->hold, &a->nhold);
        break;
    }
    case COMP_PRESS:
        rc |= keys_field(c, b, "keys", 1, a->keys, &a->nkeys);
        rc |= int_field(c, b, "duration", 0, 0, COMP_PRESS_MAX_MS, &a->duration_ms);
        rc |= keys_field(c, b, "hold_keys", 0, a->hold, &a->nhold);
        break;
    case COMP_SCROLL:
        rc |= xy(c, b, w, h, &a->x, &a->y);
        rc |= int_field(c, b, "delta_x", 0, -1000, 1000, &a->delta_x);
        rc |= int_field(c, b, "delta_y", 0, -1000, 1000, &a->delta_y);
        if (rc == 0 && a->delta_x == 0 && a->delta_y == 0)
            rc |= bad(c, "delta_y", "at least one of delta_x or delta_y must be non-zero");
        rc |= keys_field(c, b, "hold_keys", 0, a->hold, &a->nhold);
        break;
    case COMP_TYPE:
        rc |= text_field(c, b, "text", COMP_TYPE_MAX_BYTES, &a->text);
        rc |= int_field(c, b, "delay", 0, 0, COMP_DELAY_MAX_MS, &a->delay_ms);
        break;
    case COMP_CURSOR:
        rc |= bool_field(c, b, "hidden", 1, &a->hidden);
        break;
    case COMP_SLEEP:
        rc |= int_field(c, b, "duration_ms", 1, 0, COMP_SLEEP_MAX_MS, &a->duration_ms);
        break;
    case COMP_CLIP_WRITE:
        rc |= text_field(c, b, "text", COMP_CLIP_MAX_BYTES, &a->text);
        break;
    case COMP_SCREENSHOT: {
        json_t *r = json_is_object(b) ? json_object_get(b, "region") : NULL;
        if (b && !json_is_null(b) && !json_is_object(b))
            return bad(c, "", "must be a JSON object or null");
        if (r && !json_is_null(r)) {
            struct ctx rc2 = *c;
            char pre[160];
            field_path_of(c, "region", pre, sizeof pre);
            rc2.prefix = pre;
            if (!json_is_object(r))
                return bad(c, "region", "must be an object {x, y, width, height}");
            rc |= int_field(&rc2, r, "x", 1, 0, w - 1, &a->rx);
            rc |= int_field(&rc2, r, "y", 1, 0, h - 1, &a->ry);
            rc |= int_field(&rc2, r, "width", 1, 1, w, &a->rw);
            rc |= int_field(&rc2, r, "height", 1, 1, h, &a->rh);
            if (rc == 0 && (a->rx + a->rw > w || a->ry + a->rh > h))
                rc |= bad(c, "region", "region exceeds screen bounds");
            a->has_region = 1;
        }
        break;
    }
    }
    return rc ? E_INVALID : 0;
}

long long comp_wait_ms(const struct comp_action *a)
{
    switch (a->op) {
    case COMP_SLEEP:
        return a->duration_ms;
    case COMP_MOVE:
        return a->smooth ? a->duration_ms : 0;
    case COMP_DRAG:
        return a->delay_ms +
               (a->smooth ? (a->duration_ms ? a->duration_ms : 500)
                          : (long long)(a->npath - 1) * a->steps_per_segment * a->step_delay_ms);
    case COMP_PRESS:
        return (long long)a->duration_ms * a->nkeys;
    case COMP_TYPE: {
        long long chars = 0;
        for (const char *t = a->text; t && *t; t++)
            chars += ((unsigned char)*t & 0xC0) != 0x80;
        return chars * a->delay_ms;
    }
    default:
        return 0;
    }
}

int comp_parse(enum comp_op op, const json_t *body, const char *field_prefix, int width, int height,
               struct comp_action *out, struct err *e)
{
    memset(out, 0, sizeof *out);
    struct ctx c = {field_prefix ? field_prefix : "", e};
    int rc = parse_one(op, body, &c, width, height, out);
    /* A call holds its session's input and a server thread while it
     * pauses: what one call may ask for is capped. */
    long long wait = rc ? 0 : comp_wait_ms(out);
    if (wait > LIM_COMPUTER_CALL_MS) {
        char rule[160];
        snprintf(rule, sizeof rule,
                 "asks for %lld ms of pauses, more than one call may take (%d ms)", wait,
                 LIM_COMPUTER_CALL_MS);
        rc = bad(&c,
                 op == COMP_TYPE    ? "delay"
                 : op == COMP_PRESS ? "duration"
                 : op == COMP_DRAG  ? "step_delay_ms"
                                    : "",
                 rule);
    }
    if (rc)
        comp_action_clear(out);
    return rc;
}

void comp_action_clear(struct comp_action *a)
{
    xfree(a->path);
    xfree(a->text);
    a->path = NULL;
    a->text = NULL;
}

static const struct {
    const char *type;
    enum comp_op op;
} batch_types[] = {
    {"click_mouse", COMP_CLICK}, {"move_mouse", COMP_MOVE}, {"type_text", COMP_TYPE},
    {"press_key", COMP_PRESS},   {"scroll", COMP_SCROLL},   {"drag_mouse", COMP_DRAG},
    {"set_cursor", COMP_CURSOR}, {"sleep", COMP_SLEEP},
};

int comp_parse_batch(const json_t *body, int width, int height, struct comp_action **out, size_t *n,
                     struct err *e)
{
    *out = NULL;
    *n = 0;
    json_t *acts = json_is_object(body) ? json_object_get(body, "actions") : NULL;
    if (!json_is_object(body))
        return err_field(e, "", "request body is required (a JSON object)");
    if (!json_is_array(acts) || json_array_size(acts) == 0)
        return err_field(e, "actions", "actions must contain at least one action");
    if (json_array_size(acts) > COMP_BATCH_MAX)
        return err_field(e, "actions", "must contain at most %d actions", COMP_BATCH_MAX);
    struct comp_action *a = xcalloc(json_array_size(acts), sizeof *a);
    size_t i;
    json_t *act;
    int rc = 0;
    long long total = 0;
    json_array_foreach(acts, i, act)
    {
        char pre[48];
        snprintf(pre, sizeof pre, "actions[%zu]", i);
        const char *type = json_string_value(json_object_get(act, "type"));
        size_t k = 0;
        while (type && k < sizeof batch_types / sizeof *batch_types &&
               strcmp(type, batch_types[k].type) != 0)
            k++;
        if (!json_is_object(act) || !type || k == sizeof batch_types / sizeof *batch_types) {
            rc = err_field(e, pre, "unsupported action type: %s", type ? type : "(none)");
            break;
        }
        json_t *params = json_object_get(act, type);
        if (!json_is_object(params)) {
            rc = err_field(e, pre, "%s field is required when type is %s", type, type);
            break;
        }
        char full[96];
        snprintf(full, sizeof full, "%s.%s", pre, type);
        if ((rc = comp_parse(batch_types[k].op, params, full, width, height, &a[i], e)) != 0)
            break;
        *n = i + 1;
        total += comp_wait_ms(&a[i]);
    }
    if (rc == 0 && total > LIM_COMPUTER_CALL_MS)
        rc = err_field(e, "actions",
                       "the actions ask for %lld ms of sleeps and pauses in all, more than a batch "
                       "may take (%d ms)",
                       total, LIM_COMPUTER_CALL_MS);
    if (rc) {
        comp_batch_free(a, *n);
        *n = 0;
        return rc;
    }
    *out = a;
    return 0;
}

void comp_batch_free(struct comp_action *a, size_t n)
{
    for (size_t i = 0; a && i < n; i++)
        comp_action_clear(&a[i]);
    xfree(a);
}

const char *comp_operation_id(enum comp_op op)
{
    switch (op) {
    case COMP_CLICK:
        return "clickMouse";
    case COMP_MOVE:
        return "moveMouse";
    case COMP_DRAG:
        return "dragMouse";
    case COMP_PRESS:
        return "pressKey";
    case COMP_SCROLL:
        return "scroll";
    case COMP_TYPE:
        return "typeText";
    case COMP_CURSOR:
        return "setCursor";
    case COMP_SLEEP:
        return "sleep";
    case COMP_CLIP_WRITE:
        return "writeClipboard";
    case COMP_SCREENSHOT:
        return "takeScreenshot";
    }
    return "computer";
}
