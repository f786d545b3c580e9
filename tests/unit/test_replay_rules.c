/* Unit tests for domain/replay_rules: the options of browsers.replays.start
 * (SESSION_API.md section 6: "framerate?: int (CP 1-60; >20 needs a GPU
 * session), max_duration_in_seconds?: int >= 1, record_audio?: boolean"),
 * which replay ids may name a file, and the live view token. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "core/err.h"
#include "domain/replay_rules.h"

#define NCASES(a) (sizeof(a) / sizeof((a)[0]))
#define CAP       14400

struct start_case {
    const char *name;
    const char *body; /* NULL: no body */
    int gpu;
    int ok;
    int fps, secs;     /* when ok */
    const char *field; /* substring of the message when !ok */
};

static const struct start_case start_cases[] = {
    {"no body: framerate 10, the cap's duration", NULL, 0, 1, 10, CAP, NULL},
    {"{}: the defaults", "{}", 0, 1, 10, CAP, NULL},
    {"framerate 1 accepted", "{\"framerate\":1}", 0, 1, 1, CAP, NULL},
    {"framerate 20 accepted without a GPU", "{\"framerate\":20}", 0, 1, 20, CAP, NULL},
    {"framerate 21 needs a GPU session", "{\"framerate\":21}", 0, 0, 0, 0, "GPU"},
    {"framerate 60 accepted on a GPU session", "{\"framerate\":60}", 1, 1, 60, CAP, NULL},
    {"framerate 61 rejected on a GPU session", "{\"framerate\":61}", 1, 0, 0, 0, "framerate"},
    {"framerate 0 rejected", "{\"framerate\":0}", 0, 0, 0, 0, "framerate"},
    {"framerate as a string rejected", "{\"framerate\":\"10\"}", 0, 0, 0, 0, "framerate"},
    {"framerate as a real rejected", "{\"framerate\":10.5}", 0, 0, 0, 0, "framerate"},
    {"framerate null: the default", "{\"framerate\":null}", 0, 1, 10, CAP, NULL},
    {"max_duration_in_seconds >= 1", "{\"max_duration_in_seconds\":1}", 0, 1, 10, 1, NULL},
    {"max_duration_in_seconds 0 rejected", "{\"max_duration_in_seconds\":0}", 0, 0, 0, 0,
     "max_duration_in_seconds"},
    {"max_duration_in_seconds above the server's cap rejected, not clipped",
     "{\"max_duration_in_seconds\":14401}", 0, 0, 0, 0, "cap"},
    {"record_audio false accepted", "{\"record_audio\":false}", 0, 1, 10, CAP, NULL},
    {"record_audio true: no audio device", "{\"record_audio\":true}", 0, 0, 0, 0, "audio"},
    {"record_audio as a string rejected", "{\"record_audio\":\"yes\"}", 0, 0, 0, 0, "boolean"},
    {"an unknown field rejected", "{\"fps\":10}", 0, 0, 0, 0, "fps"},
    {"every field together",
     "{\"framerate\":5,\"max_duration_in_seconds\":60,\"record_audio\":false}", 0, 1, 5, 60, NULL},
};

static void test_start(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES(start_cases); i++) {
        const struct start_case *c = &start_cases[i];
        json_t *body = c->body ? json_loads(c->body, 0, NULL) : NULL;
        struct err e;
        err_init(&e);
        struct replay_opts o;
        int rc = replay_parse_start(body, c->gpu, CAP, &o, &e);
        if (c->ok) {
            if (rc != 0 || o.framerate != c->fps || o.max_seconds != c->secs)
                fail_msg("%s: rc %d fps %d secs %d (%s)", c->name, rc, o.framerate, o.max_seconds,
                         e.message);
        } else {
            char all[4096] = "";
            size_t used = (size_t)snprintf(all, sizeof all, "%s", e.message);
            for (size_t d = 0; d < e.ndetails && used < sizeof all; d++)
                used +=
                    (size_t)snprintf(all + used, sizeof all - used, " | %s", e.details[d].message);
            if (rc != E_INVALID || !strstr(all, c->field))
                fail_msg("%s: rc %d, message \"%s\" lacks \"%s\"", c->name, rc, all, c->field);
        }
        json_decref(body);
    }
}

struct id_case {
    const char *name;
    const char *id;
    int ok;
};

static const struct id_case id_cases[] = {
    {"an id of ours", "a1b2c3d4e5f6g7h8i9j0k1l2", 1},
    {"empty", "", 0},
    {"a parent folder", "..", 0},
    {"a path", "../../bootstrap-api-key", 0},
    {"an absolute path", "/etc/passwd", 0},
    {"another file of the replay", "abc.json", 0},
    {"upper case", "ABC", 0},
    {"64 characters", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 1},
    {"65 characters", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0},
};

static void test_ids(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES(id_cases); i++)
        if (replay_valid_id(id_cases[i].id) != id_cases[i].ok)
            fail_msg("%s: %s", id_cases[i].name, id_cases[i].id);
}

/* "browser_live_view_url ... carries a signed token": bound to the session,
 * unforgeable without the key. */
static void test_token(void **state)
{
    (void)state;
    const unsigned char key[32] = {1, 2, 3}, other[32] = {9};
    char mac[LIVEVIEW_MAC_HEX + 1], tok[256], org[64], sid[64];
    liveview_token_mac(key, sizeof key, "org1", "sess1", mac);
    assert_int_equal(strlen(mac), LIVEVIEW_MAC_HEX);
    snprintf(tok, sizeof tok, "org1.sess1.%s", mac);
    assert_int_equal(liveview_token_parse(key, sizeof key, tok, org, sizeof org, sid, sizeof sid),
                     0);
    assert_string_equal(org, "org1");
    assert_string_equal(sid, "sess1");
    /* another key, another session, another org, a changed digit, cut short */
    assert_int_equal(
        liveview_token_parse(other, sizeof other, tok, org, sizeof org, sid, sizeof sid), -1);
    snprintf(tok, sizeof tok, "org1.sess2.%s", mac);
    assert_int_equal(liveview_token_parse(key, sizeof key, tok, org, sizeof org, sid, sizeof sid),
                     -1);
    snprintf(tok, sizeof tok, "org2.sess1.%s", mac);
    assert_int_equal(liveview_token_parse(key, sizeof key, tok, org, sizeof org, sid, sizeof sid),
                     -1);
    snprintf(tok, sizeof tok, "org1.sess1.%s", mac);
    tok[strlen(tok) - 1] = tok[strlen(tok) - 1] == '0' ? '1' : '0';
    assert_int_equal(liveview_token_parse(key, sizeof key, tok, org, sizeof org, sid, sizeof sid),
                     -1);
    snprintf(tok, sizeof tok, "org1.sess1.%.31s", mac);
    assert_int_equal(liveview_token_parse(key, sizeof key, tok, org, sizeof org, sid, sizeof sid),
                     -1);
    /* shapes: no dots, empty parts, parts longer than the caller's room */
    const char *bad[] = {"", "abc", "a.b", ".b.c", "a..c", "a.b.", "a.b.c.d"};
    for (size_t i = 0; i < NCASES(bad); i++)
        assert_int_equal(
            liveview_token_parse(key, sizeof key, bad[i], org, sizeof org, sid, sizeof sid), -1);
    snprintf(tok, sizeof tok, "org1.sess1.%s", mac);
    assert_int_equal(liveview_token_parse(key, sizeof key, tok, org, 4, sid, sizeof sid), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start),
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_token),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
