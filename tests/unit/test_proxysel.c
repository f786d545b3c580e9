/* Unit tests for domain/proxysel: the proxy object, the deprecated proxy_id and
 * disable_default_proxy, resolution to an egress and the BrowserProxy record. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "domain/proxysel.h"

#define U     PROXYSEL_UNCHANGED
#define DIR   PROXYSEL_DIRECT
#define DEF   PROXYSEL_DEFAULT
#define PID   PROXYSEL_ID
#define PNAME PROXYSEL_NAME

#define X16  "xxxxxxxxxxxxxxxx"
#define X255 X16 X16 X16 X16 X16 X16 X16 X16 X16 X16 X16 X16 X16 X16 X16 "xxxxxxxxxxxxxxx"
#define X256 X255 "x"

struct parse_case {
    const char *name; /* the rule checked */
    const char *body;
    int is_update;
    int rc;          /* 0 or E_INVALID */
    const char *msg; /* substring of the first detail, or NULL */
    size_t ndetails; /* 0 = not checked */
    enum proxysel_kind kind;
    const char *ref;
};

static const struct parse_case parse_cases[] = {
    {"proxy: mode direct: no proxy regardless of stealth", "{\"proxy\":{\"mode\":\"direct\"}}", 1,
     0, NULL, 0, DIR, ""},
    {"proxy: mode default: the stealth-derived default", "{\"proxy\":{\"mode\":\"default\"}}", 1, 0,
     NULL, 0, DEF, ""},
    {"proxy: id (string, min 1)", "{\"proxy\":{\"id\":\"prx_1\"}}", 1, 0, NULL, 0, PID, "prx_1"},
    {"proxy: name (string, min 1)", "{\"proxy\":{\"name\":\"corp proxy\"}}", 1, 0, NULL, 0, PNAME,
     "corp proxy"},
    {"proxy on create: same rules", "{\"proxy\":{\"id\":\"prx_2\"}}", 0, 0, NULL, 0, PID, "prx_2"},
    {"Errors 4: empty proxy object (an empty object is invalid)", "{\"proxy\":{}}", 1, E_INVALID,
     "proxy: must give exactly one of mode, id or name (an empty proxy object is invalid)", 1, U,
     ""},
    {"proxy: exactly one of mode, id, name (mode and id rejected)",
     "{\"proxy\":{\"mode\":\"direct\",\"id\":\"p\"}}", 1, E_INVALID,
     "proxy: give exactly one of mode, id or name", 1, U, ""},
    {"proxy: exactly one of mode, id, name (id and name rejected)",
     "{\"proxy\":{\"id\":\"p\",\"name\":\"n\"}}", 1, E_INVALID, "exactly one", 1, U, ""},
    {"proxy: no other properties", "{\"proxy\":{\"mode\":\"direct\",\"bypass\":true}}", 1,
     E_INVALID, "proxy.bypass: unknown field", 1, U, ""},
    {"proxy: no other properties (only an unknown one: also not exactly one)",
     "{\"proxy\":{\"x\":1}}", 1, E_INVALID, NULL, 2, U, ""},
    {"proxy.mode: `direct` or `default` (other value rejected)", "{\"proxy\":{\"mode\":\"none\"}}",
     1, E_INVALID, "proxy.mode: must be one of direct, default", 1, U, ""},
    {"proxy.mode: enum values are case-sensitive", "{\"proxy\":{\"mode\":\"DIRECT\"}}", 1,
     E_INVALID, "proxy.mode", 1, U, ""},
    {"proxy.mode: a string", "{\"proxy\":{\"mode\":1}}", 1, E_INVALID,
     "proxy.mode: must be a string", 1, U, ""},
    {"proxy.id: min length 1", "{\"proxy\":{\"id\":\"\"}}", 1, E_INVALID,
     "proxy.id: must be 1-255 characters (got 0)", 1, U, ""},
    {"proxy.name: min length 1", "{\"proxy\":{\"name\":\"\"}}", 1, E_INVALID, "proxy.name", 1, U,
     ""},
    {"proxy.id: a string", "{\"proxy\":{\"id\":5}}", 1, E_INVALID, "proxy.id: must be a string", 1,
     U, ""},
    {"proxy.name: a string", "{\"proxy\":{\"name\":null}}", 1, E_INVALID, "not null", 1, U, ""},
    {"proxy: an object (null rejected; omit to leave unchanged)", "{\"proxy\":null}", 1, E_INVALID,
     "proxy: must be an object", 1, U, ""},
    {"proxy: an object (string rejected)", "{\"proxy\":\"direct\"}", 1, E_INVALID,
     "proxy: must be an object", 1, U, ""},
    {"Errors 4: proxy combined with proxy_id",
     "{\"proxy\":{\"mode\":\"direct\"},\"proxy_id\":\"prx_1\"}", 1, E_INVALID,
     "proxy: cannot be combined with proxy_id", 1, U, ""},
    {"Errors 4: proxy combined with proxy_id (null proxy_id is still combined)",
     "{\"proxy\":{\"mode\":\"direct\"},\"proxy_id\":null}", 1, E_INVALID,
     "cannot be combined with proxy_id", 1, U, ""},
    {"Errors 4: proxy combined with proxy_id (on create too)",
     "{\"proxy\":{\"id\":\"a\"},\"proxy_id\":\"b\"}", 0, E_INVALID,
     "cannot be combined with proxy_id", 1, U, ""},
    {"Errors 4: proxy combined with disable_default_proxy",
     "{\"proxy\":{\"mode\":\"default\"},\"disable_default_proxy\":true}", 1, E_INVALID,
     "proxy: cannot be combined with disable_default_proxy", 1, U, ""},
    {"Errors 4: proxy combined with disable_default_proxy (false too)",
     "{\"proxy\":{\"mode\":\"default\"},\"disable_default_proxy\":false}", 1, E_INVALID,
     "cannot be combined with disable_default_proxy", 1, U, ""},
    {"Errors 4: proxy combined with both deprecated fields: both reported",
     "{\"proxy\":{\"mode\":\"default\"},\"proxy_id\":\"p\",\"disable_default_proxy\":true}", 1,
     E_INVALID, NULL, 2, U, ""},
    {"proxy: Omit to leave unchanged", "{}", 1, 0, NULL, 0, U, ""},
    {"proxy: other body fields are not read here", "{\"name\":\"x\",\"tags\":{}}", 1, 0, NULL, 0, U,
     ""},
    {"create without proxy fields: the stealth-derived default", "{}", 0, 0, NULL, 0, DEF, ""},
    {"proxy_id (deprecated): a string selects that proxy", "{\"proxy_id\":\"prx_9\"}", 1, 0, NULL,
     0, PID, "prx_9"},
    {"proxy_id: empty string removes the proxy", "{\"proxy_id\":\"\"}", 1, 0, NULL, 0, DEF, ""},
    {"proxy_id: Omit to leave unchanged (null is read as omitted)", "{\"proxy_id\":null}", 1, 0,
     NULL, 0, U, ""},
    {"proxy_id: null on create is the default", "{\"proxy_id\":null}", 0, 0, NULL, 0, DEF, ""},
    {"proxy_id: string or null (integer rejected)", "{\"proxy_id\":5}", 1, E_INVALID,
     "proxy_id: must be a string or null, not integer", 1, U, ""},
    {"proxy_id: 256 characters rejected", "{\"proxy_id\":\"" X256 "\"}", 1, E_INVALID,
     "proxy_id: must be at most 255", 1, U, ""},
    {"proxy.id: 256 characters rejected", "{\"proxy\":{\"id\":\"" X256 "\"}}", 1, E_INVALID,
     "proxy.id: must be 1-255 characters (got 256)", 1, U, ""},
    {"proxy.name: 255 characters accepted", "{\"proxy\":{\"name\":\"" X255 "\"}}", 1, 0, NULL, 0,
     PNAME, X255},
    {"disable_default_proxy: If true, stealth browsers connect directly",
     "{\"disable_default_proxy\":true}", 1, 0, NULL, 0, DIR, ""},
    {"disable_default_proxy: true on create", "{\"disable_default_proxy\":true}", 0, 0, NULL, 0,
     DIR, ""},
    {"disable_default_proxy: false asks for nothing on update", "{\"disable_default_proxy\":false}",
     1, 0, NULL, 0, U, ""},
    {"disable_default_proxy: false on create is the default", "{\"disable_default_proxy\":false}",
     0, 0, NULL, 0, DEF, ""},
    {"disable_default_proxy: a boolean", "{\"disable_default_proxy\":\"yes\"}", 1, E_INVALID,
     "disable_default_proxy: must be a boolean", 1, U, ""},
    {"disable_default_proxy: null rejected (boolean)", "{\"disable_default_proxy\":null}", 1,
     E_INVALID, "disable_default_proxy", 1, U, ""},
    {"disable_default_proxy true with proxy_id: a selected proxy is used regardless of stealth",
     "{\"proxy_id\":\"prx_1\",\"disable_default_proxy\":true}", 1, 0, NULL, 0, PID, "prx_1"},
    {"disable_default_proxy true with proxy_id \"\": direct",
     "{\"proxy_id\":\"\",\"disable_default_proxy\":true}", 1, 0, NULL, 0, DIR, ""},
    {"the body is an object", "[]", 1, E_INVALID, "the body must be a JSON object", 1, U, ""},
};

static void parse_table(void **state)
{
    (void)state;
    int failures = 0;
    for (size_t i = 0; i < sizeof parse_cases / sizeof parse_cases[0]; i++) {
        const struct parse_case *c = &parse_cases[i];
        json_error_t je;
        json_t *v = json_loads(c->body, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
        if (!v)
            fail_msg("bad test JSON in %s: %s", c->name, je.text);
        struct err e;
        err_init(&e);
        struct proxysel sel;
        int rc = proxysel_parse(v, c->is_update, &sel, &e);
        json_decref(v);
        const char *first = e.ndetails ? e.details[0].message : "";
        int ok = rc == c->rc && (!c->msg || strstr(first, c->msg)) &&
                 (!c->ndetails || e.ndetails == c->ndetails) && (rc != 0 || e.ndetails == 0);
        if (ok && rc == 0)
            ok = sel.kind == c->kind && strcmp(sel.ref, c->ref) == 0;
        if (!ok) {
            print_error("FAIL %s: rc %d (want %d), kind %d ref \"%s\", %zu details, first \"%s\"\n",
                        c->name, rc, c->rc, (int)sel.kind, sel.ref, e.ndetails, first);
            failures++;
        }
    }
    if (failures)
        fail_msg("%d case(s) failed", failures);
}

static const struct proxysel_candidate cands[] = {
    {"prx_a", "corp", "proj1", 1},  {"prx_b", "dup", "proj1", 1},   {"prx_c", "dup", "proj1", 1},
    {"prx_d", "other", "proj2", 1}, {"prx_e", "gone", "proj1", 0},  {"prx_f", "dup2", "proj1", 1},
    {"prx_g", "dup2", "proj1", 0},  {"prx_h", "split", "proj1", 1}, {"prx_i", "split", "proj2", 1},
    {"prx_n", "noproj", NULL, 1},
};

#define EG_D PROXYSEL_EGRESS_DIRECT
#define EG_P PROXYSEL_EGRESS_PROXY

struct resolve_case {
    const char *name;
    enum proxysel_kind kind;
    const char *ref;
    int stealth;
    const char *project;
    const char *default_id;
    int rc;           /* 0, E_INVALID or E_NOTFOUND */
    const char *text; /* substring of the code (E_NOTFOUND) or first detail (E_INVALID) */
    enum proxysel_egress_kind want;
    const char *want_id;
};

static const struct resolve_case resolve_cases[] = {
    {"mode direct: no proxy regardless of stealth (stealth browser)", DIR, "", 1, "proj1",
     "prx_stealth", 0, NULL, EG_D, ""},
    {"mode default: the service's default stealth proxy for a stealth browser", DEF, "", 1, "proj1",
     "prx_stealth", 0, NULL, EG_P, "prx_stealth"},
    {"mode default: direct egress otherwise", DEF, "", 0, "proj1", "prx_stealth", 0, NULL, EG_D,
     ""},
    {"mode default: no default stealth proxy configured -> direct", DEF, "", 1, "proj1", NULL, 0,
     NULL, EG_D, ""},
    {"mode default: empty default stealth proxy id -> direct", DEF, "", 1, "proj1", "", 0, NULL,
     EG_D, ""},
    {"never-chosen selection resolves like default", U, "", 1, "proj1", "prx_stealth", 0, NULL,
     EG_P, "prx_stealth"},
    {"id: use that proxy regardless of stealth (non-stealth)", PID, "prx_a", 0, "proj1",
     "prx_stealth", 0, NULL, EG_P, "prx_a"},
    {"id: use that proxy regardless of stealth (stealth)", PID, "prx_a", 1, "proj1", "prx_stealth",
     0, NULL, EG_P, "prx_a"},
    {"id: it must be in the same project as the browser", PID, "prx_d", 0, "proj1", NULL,
     E_NOTFOUND, "proxy_not_found", EG_D, ""},
    {"id: unknown id is not found", PID, "prx_zz", 0, "proj1", NULL, E_NOTFOUND, "proxy_not_found",
     EG_D, ""},
    {"id: selection by stable id does not require a name", PID, "prx_e", 0, "proj1", NULL, 0, NULL,
     EG_P, "prx_e"},
    {"name: a name must match exactly one active proxy", PNAME, "corp", 0, "proj1", NULL, 0, NULL,
     EG_P, "prx_a"},
    {"name: matching several active proxies is rejected", PNAME, "dup", 0, "proj1", NULL, E_INVALID,
     "proxy.name: dup matches 2 active proxies", EG_D, ""},
    {"name: inactive proxies do not count", PNAME, "dup2", 0, "proj1", NULL, 0, NULL, EG_P,
     "prx_f"},
    {"name: matching only an inactive proxy is rejected", PNAME, "gone", 0, "proj1", NULL,
     E_INVALID, "proxy.name: gone matches no active proxy", EG_D, ""},
    {"name: matching no proxy is rejected", PNAME, "nobody", 1, "proj1", NULL, E_INVALID,
     "matches no active proxy", EG_D, ""},
    {"name: it must be in the same project as the browser", PNAME, "other", 0, "proj1", NULL,
     E_NOTFOUND, "proxy_not_found", EG_D, ""},
    {"name: only proxies of the browser's project count", PNAME, "split", 0, "proj1", NULL, 0, NULL,
     EG_P, "prx_h"},
    {"name: the other project's proxy of the same name", PNAME, "split", 0, "proj2", NULL, 0, NULL,
     EG_P, "prx_i"},
    {"projects disabled: no project on either side matches", PNAME, "noproj", 0, NULL, NULL, 0,
     NULL, EG_P, "prx_n"},
    {"projects: a proxy without project is not in the browser's project", PID, "prx_n", 0, "proj1",
     NULL, E_NOTFOUND, "proxy_not_found", EG_D, ""},
};

static void resolve_table(void **state)
{
    (void)state;
    int failures = 0;
    for (size_t i = 0; i < sizeof resolve_cases / sizeof resolve_cases[0]; i++) {
        const struct resolve_case *c = &resolve_cases[i];
        struct proxysel sel = {c->kind, ""};
        snprintf(sel.ref, sizeof sel.ref, "%s", c->ref);
        struct err e;
        err_init(&e);
        struct proxysel_egress eg;
        int stealth = c->stealth;
        int rc = proxysel_resolve(&sel, stealth, c->project, cands, sizeof cands / sizeof cands[0],
                                  c->default_id, &eg, &e);
        const char *got = rc == E_NOTFOUND ? e.code : (e.ndetails ? e.details[0].message : "");
        int ok = rc == c->rc && (!c->text || strstr(got, c->text));
        if (ok && rc == 0)
            ok = eg.kind == c->want && strcmp(eg.proxy_id, c->want_id) == 0;
        if (ok && rc == E_NOTFOUND)
            ok = strstr(e.message, c->ref) != NULL;
        if (!ok) {
            print_error("FAIL %s: rc %d (want %d), egress %d \"%s\", \"%s\"\n", c->name, rc, c->rc,
                        (int)eg.kind, eg.proxy_id, got);
            failures++;
        }
    }
    if (failures)
        fail_msg("%d case(s) failed", failures);
}

static char *dump(json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(v);
    return s;
}

/* BrowserProxy (resolved): exactly one of mode or id; "Selected proxies are
 * returned by stable ID". */
static void browser_proxy_record(void **state)
{
    (void)state;
    struct {
        const char *name;
        struct proxysel sel;
        struct proxysel_egress eg;
        const char *want;
    } cases[] = {
        {"mode direct", {DIR, ""}, {EG_D, ""}, "{\"mode\":\"direct\"}"},
        {"mode default (stealth browser via default proxy)",
         {DEF, ""},
         {EG_P, "prx_stealth"},
         "{\"mode\":\"default\"}"},
        {"never-chosen selection reads as mode default",
         {U, ""},
         {EG_D, ""},
         "{\"mode\":\"default\"}"},
        {"selected by id", {PID, "prx_a"}, {EG_P, "prx_a"}, "{\"id\":\"prx_a\"}"},
        {"selected by name: returned by stable ID",
         {PNAME, "corp"},
         {EG_P, "prx_a"},
         "{\"id\":\"prx_a\"}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *s = dump(proxysel_to_json(&cases[i].sel, &cases[i].eg));
        if (strcmp(s, cases[i].want) != 0)
            fail_msg("%s: got %s, want %s", cases[i].name, s, cases[i].want);
        free(s);
    }
}

static void pin_merge_legacy(void **state)
{
    (void)state;
    struct proxysel by_name = {PNAME, "corp"}, pinned;
    struct proxysel_egress eg = {EG_P, "prx_a"};
    proxysel_pin(&by_name, &eg, &pinned);
    assert_int_equal(pinned.kind, PID);
    assert_string_equal(pinned.ref, "prx_a");
    struct proxysel direct = {DIR, ""}, same;
    proxysel_pin(&direct, &eg, &same);
    assert_int_equal(same.kind, DIR);

    struct proxysel current = {PID, "prx_a"}, unchanged = {U, ""}, merged;
    proxysel_merge(&current, &unchanged, &merged);
    assert_int_equal(merged.kind, PID);
    assert_string_equal(merged.ref, "prx_a");
    proxysel_merge(&current, &direct, &merged);
    assert_int_equal(merged.kind, DIR);

    assert_string_equal(proxysel_legacy_id(&current), "prx_a");
    assert_null(proxysel_legacy_id(&direct));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_table),
        cmocka_unit_test(resolve_table),
        cmocka_unit_test(browser_proxy_record),
        cmocka_unit_test(pin_merge_legacy),
    };
    return cmocka_run_group_tests_name("domain/proxysel", tests, NULL, NULL);
}
