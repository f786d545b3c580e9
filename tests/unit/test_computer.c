/* Unit tests for domain/computer: the rules of SESSION_API.md section 1
 * (browsers.computer.*), one case per rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "domain/computer.h"

struct pcase {
    const char *rule;
    enum comp_op op;
    const char *body;
    int ok;
    const char *field; /* the start of the first detail, when !ok */
};

static const struct pcase cases[] = {
    {"click: x and y are required", COMP_CLICK, "{}", 0, "x:"},
    {"click: coordinates must be non-negative", COMP_CLICK, "{\"x\":-1,\"y\":0}", 0, "x:"},
    {"click: coordinates exceed screen bounds (max 1919x1079)", COMP_CLICK, "{\"x\":10,\"y\":1080}",
     0, "y:"},
    {"click: the last pixel is on the screen", COMP_CLICK, "{\"x\":1919,\"y\":1079}", 1, NULL},
    {"click: unsupported button", COMP_CLICK, "{\"x\":1,\"y\":1,\"button\":\"wheel\"}", 0,
     "button:"},
    {"click: back and forward are buttons", COMP_CLICK, "{\"x\":1,\"y\":1,\"button\":\"back\"}", 1,
     NULL},
    {"click: unsupported click type", COMP_CLICK, "{\"x\":1,\"y\":1,\"click_type\":\"double\"}", 0,
     "click_type:"},
    {"click: hold_keys are keysyms", COMP_CLICK, "{\"x\":1,\"y\":1,\"hold_keys\":[\"shift\"]}", 1,
     NULL},
    {"click: an unknown keysym names its index", COMP_CLICK,
     "{\"x\":1,\"y\":1,\"hold_keys\":[\"shift\",\"hyperdrive\"]}", 0, "hold_keys[1]:"},
    {"move: duration_ms must be between 50 and 5000", COMP_MOVE,
     "{\"x\":1,\"y\":1,\"duration_ms\":10}", 0, "duration_ms:"},
    {"drag: path must contain at least two points", COMP_DRAG, "{\"path\":[[1,1]]}", 0, "path:"},
    {"drag: path[i] must be [x,y]", COMP_DRAG, "{\"path\":[[1,1],[2]]}", 0, "path[1]:"},
    {"drag: only left, middle and right", COMP_DRAG, "{\"path\":[[1,1],[2,2]],\"button\":\"back\"}",
     0, "button:"},
    {"drag: duration_ms between 50 and 10000", COMP_DRAG,
     "{\"path\":[[1,1],[2,2]],\"duration_ms\":10001}", 0, "duration_ms:"},
    {"press: keys must contain at least one key symbol", COMP_PRESS, "{\"keys\":[]}", 0, "keys:"},
    {"press: duration must be >= 0", COMP_PRESS, "{\"keys\":[\"a\"],\"duration\":-1}", 0,
     "duration:"},
    {"press: combinations such as Ctrl+Shift+Tab", COMP_PRESS, "{\"keys\":[\"Ctrl+Shift+Tab\"]}", 1,
     NULL},
    {"scroll: at least one of delta_x or delta_y must be non-zero", COMP_SCROLL,
     "{\"x\":1,\"y\":1}", 0, "delta_y:"},
    {"type: text is required", COMP_TYPE, "{}", 0, "text:"},
    {"type: delay must be >= 0", COMP_TYPE, "{\"text\":\"a\",\"delay\":-5}", 0, "delay:"},
    {"cursor: hidden is required", COMP_CURSOR, "{}", 0, "hidden:"},
    {"sleep: duration_ms must be <= 30000", COMP_SLEEP, "{\"duration_ms\":30001}", 0,
     "duration_ms:"},
    {"screenshot: no options", COMP_SCREENSHOT, NULL, 1, NULL},
    {"screenshot: invalid region dimensions", COMP_SCREENSHOT,
     "{\"region\":{\"x\":0,\"y\":0,\"width\":0,\"height\":5}}", 0, "region.width:"},
    {"screenshot: region exceeds screen bounds", COMP_SCREENSHOT,
     "{\"region\":{\"x\":1900,\"y\":0,\"width\":100,\"height\":5}}", 0, "region:"},
    {"clipboard write: text is required", COMP_CLIP_WRITE, "{\"text\":5}", 0, "text:"},
    /* Issue 29.2: one call may ask for at most LIM_COMPUTER_CALL_MS of pauses. */
    {"issue 29.2: typing 61 characters at 1000 ms a key is past the call cap", COMP_TYPE,
     "{\"text\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"delay\":1000}",
     0, "delay:"},
    {"issue 29.2: typing 60 characters at 1000 ms a key is within the call cap", COMP_TYPE,
     "{\"text\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"delay\":1000}",
     1, NULL},
    {"issue 29.2: holding 7 keys for 10 s each is past the call cap", COMP_PRESS,
     "{\"keys\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\"],\"duration\":10000}", 0, "duration:"},
};

static void table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *b = cases[i].body ? json_loads(cases[i].body, 0, NULL) : NULL;
        struct err e;
        err_init(&e);
        struct comp_action a;
        int rc = comp_parse(cases[i].op, b, "", 1920, 1080, &a, &e);
        json_decref(b);
        if ((rc == 0) != cases[i].ok)
            fail_msg("%s: rc %d (%s)", cases[i].rule, rc, e.message);
        if (!cases[i].ok &&
            strncmp(e.details[0].message, cases[i].field, strlen(cases[i].field)) != 0)
            fail_msg("%s: names %s, want %s", cases[i].rule, e.details[0].message, cases[i].field);
        if (rc == 0)
            comp_action_clear(&a);
    }
}

/* "batch ... (required; CP: minItems 1, maxItems 100)", "stops at the first
 * failing action", "<field> field is required when type is <type>". */
static void batch_rules(void **state)
{
    (void)state;
    static const struct {
        const char *body, *msg;
    } bad[] = {
        {"{\"actions\":[]}", "actions: actions must contain at least one action"},
        {"{\"actions\":[{\"type\":\"fly\"}]}", "actions[0]: unsupported action type: fly"},
        {"{\"actions\":[{\"type\":\"scroll\"}]}",
         "actions[0]: scroll field is required when type is scroll"},
        /* Issue 29.2: a batch has a total duration cap, named in a 400. */
        {"{\"actions\":[{\"type\":\"sleep\",\"sleep\":{\"duration_ms\":30000}},{\"type\":"
         "\"sleep\",\"sleep\":{\"duration_ms\":30000}},{\"type\":\"sleep\",\"sleep\":{"
         "\"duration_ms\":1}}]}",
         "actions: the actions ask for 60001 ms"},
        {"{\"actions\":[{\"type\":\"sleep\",\"sleep\":{\"duration_ms\":1}},{\"type\":"
         "\"click_mouse\",\"click_mouse\":{\"x\":5000,\"y\":1}}]}",
         "actions[1].click_mouse.x:"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *b = json_loads(bad[i].body, 0, NULL);
        struct err e;
        err_init(&e);
        struct comp_action *a;
        size_t n;
        assert_int_equal(comp_parse_batch(b, 1920, 1080, &a, &n, &e), E_INVALID);
        if (strncmp(e.details[0].message, bad[i].msg, strlen(bad[i].msg)) != 0)
            fail_msg("%s: %s", bad[i].body, e.details[0].message);
        json_decref(b);
    }
    /* Issue 29.2: sleeps adding up to exactly the cap are accepted. */
    json_t *full =
        json_loads("{\"actions\":[{\"type\":\"sleep\",\"sleep\":{\"duration_ms\":30000}},"
                   "{\"type\":\"sleep\",\"sleep\":{\"duration_ms\":30000}}]}",
                   0, NULL);
    struct err fe;
    err_init(&fe);
    struct comp_action *fa;
    size_t fn;
    assert_int_equal(comp_parse_batch(full, 1920, 1080, &fa, &fn, &fe), 0);
    assert_int_equal(comp_wait_ms(&fa[0]) + comp_wait_ms(&fa[1]), 60000);
    comp_batch_free(fa, fn);
    json_decref(full);
    json_t *many = json_pack("{s:[]}", "actions");
    for (int i = 0; i < 101; i++)
        json_array_append_new(
            json_object_get(many, "actions"),
            json_pack("{s:s,s:{s:i}}", "type", "sleep", "sleep", "duration_ms", 0));
    struct err e;
    err_init(&e);
    struct comp_action *a;
    size_t n;
    assert_int_equal(comp_parse_batch(many, 1920, 1080, &a, &n, &e), E_INVALID);
    json_array_remove(json_object_get(many, "actions"), 0);
    assert_int_equal(comp_parse_batch(many, 1920, 1080, &a, &n, &e), 0);
    assert_int_equal(n, 100);
    comp_batch_free(a, n);
    json_decref(many);
}

/* "xdotool keysyms; combos like Ctrl+t, Ctrl+Shift+Tab; Ctrl+- is Ctrl+minus". */
static void keysyms(void **state)
{
    (void)state;
    struct comp_combo c;
    assert_int_equal(comp_combo_parse("Return", &c), 0);
    assert_string_equal(c.keys[0].key, "Enter");
    assert_int_equal(comp_combo_parse("ctrl+a", &c), 0);
    assert_int_equal(c.n, 2);
    assert_int_equal(c.keys[0].modifier, 2);
    assert_string_equal(c.keys[1].code, "KeyA");
    assert_int_equal(comp_combo_parse("Ctrl+Shift+Tab", &c), 0);
    assert_int_equal(c.n, 3);
    assert_string_equal(c.keys[2].key, "Tab");
    assert_int_equal(comp_combo_parse("Ctrl+-", &c), 0);
    assert_string_equal(c.keys[1].code, "Minus");
    assert_int_equal(comp_combo_parse("ctrl++", &c), 0);
    assert_string_equal(c.keys[1].key, "+");
    assert_int_equal(comp_combo_parse("F12", &c), 0);
    assert_int_equal(c.keys[0].keycode, 123);
    assert_int_equal(comp_combo_parse("ctrl+", &c), -1);
    assert_int_equal(comp_combo_parse("", &c), -1);
    assert_int_equal(comp_combo_parse("nosuchkey", &c), -1);
}

/* Issue 31.4: headless typing is a keyboard's: each character is its key. */
static const struct {
    const char *rule;
    const char *ch;
    int types;
    const char *key, *code, *text;
    int keycode, shift;
} typed[] = {
    {"a letter is its key", "a", 1, "a", "KeyA", "a", 65, 0},
    {"a capital is its letter's key with Shift", "A", 1, "A", "KeyA", "A", 65, 1},
    {"a digit is its key", "7", 1, "7", "Digit7", "7", 55, 0},
    {"a shifted sign is its key's with Shift", "!", 1, "!", "Digit1", "!", 49, 1},
    {"an unshifted sign is its key", "-", 1, "-", "Minus", "-", 189, 0},
    {"a space is Space", " ", 1, " ", "Space", " ", 32, 0},
    {"a newline is Enter", "\n", 1, "Enter", "Enter", "\r", 13, 0},
    {"a tab is Tab, which types nothing", "\t", 1, "Tab", "Tab", "", 9, 0},
    {"a character no key has carries itself", "\xc3\xa9", 1, "\xc3\xa9", "", "\xc3\xa9", 0, 0},
    {"CJK carries itself", "\xe4\xb8\xad", 1, "\xe4\xb8\xad", "", "\xe4\xb8\xad", 0, 0},
    {"another control character is no key", "\x01", 0, "", "", "", 0, 0},
};

static uint32_t first_cp(const char *s, size_t *n)
{
    const unsigned char *u = (const unsigned char *)s;
    if (u[0] < 0x80) {
        *n = 1;
        return u[0];
    }
    if ((u[0] & 0xE0) == 0xC0) {
        *n = 2;
        return ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
    }
    *n = 3;
    return ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
}

static void typed_keys(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof typed / sizeof *typed; i++) {
        struct comp_key k;
        int shift = -1;
        size_t n;
        uint32_t cp = first_cp(typed[i].ch, &n);
        int got = comp_typed_key(typed[i].ch, n, cp, &k, &shift);
        if (got != typed[i].types)
            fail_msg("%s: types %d", typed[i].rule, got);
        if (!got)
            continue;
        if (strcmp(k.key, typed[i].key) || strcmp(k.code, typed[i].code) ||
            strcmp(k.text, typed[i].text) || k.keycode != typed[i].keycode ||
            shift != typed[i].shift)
            fail_msg("%s: key %s code %s keycode %d shift %d", typed[i].rule, k.key, k.code,
                     k.keycode, shift);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table),
        cmocka_unit_test(batch_rules),
        cmocka_unit_test(keysyms),
        cmocka_unit_test(typed_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
