/* Handlers run in process (http_call): the real route table, authorization
 * and handlers over a real SQLite store in a temporary folder, without
 * sockets and without Chromium. Covers the rules that need state: session
 * list filters and pagination, the tag-filter limit, tenancy isolation, and
 * a session's own URL (base_url) authorized by its token. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/api.h"
#include "core/clock.h"
#include "core/jsonx.h"
#include "core/token.h"
#include "core/xalloc.h"
#include "http/http.h"
#include "runtime/sessmgr.h"

#define KEY_A "sk_test_handlers_org_a_0123456789"
#define KEY_B "sk_test_handlers_org_b_0123456789"

struct fixture {
    char dir[64];
    struct app app;
    struct http_config cfg;
    char org_a[STORE_ID], project_a[STORE_ID], org_b[STORE_ID];
};

static void make_org(struct fixture *fx, const char *name, const char *key, char *org_id,
                     char *project_id)
{
    struct err e;
    err_init(&e);
    json_t *body = json_pack("{s:s,s:s}", "name", name, "plan", "enterprise");
    json_t *org = NULL;
    assert_int_equal(tenancy_org_create(fx->app.store, body, &org, &e), 0);
    json_decref(body);
    snprintf(org_id, STORE_ID, "%s", jsonx_str(org, "id"));
    struct org_rec o;
    assert_int_equal(store_org_get(fx->app.store, org_id, &o), 0);
    if (project_id)
        snprintf(project_id, STORE_ID, "%s", o.default_project_id);
    org_rec_clear(&o);
    struct apikey_rec rec;
    assert_int_equal(tenancy_key_store(fx->app.store, org_id, "", "k", key, 0, 0, &rec), 0);
    json_decref(org);
}

static void add_session(struct fixture *fx, const char *id, const char *name, const char *status,
                        const char *tags)
{
    struct session_rec s;
    memset(&s, 0, sizeof s);
    snprintf(s.id, sizeof s.id, "%s", id);
    snprintf(s.org_id, sizeof s.org_id, "%s", fx->org_a);
    snprintf(s.project_id, sizeof s.project_id, "%s", fx->project_a);
    snprintf(s.name, sizeof s.name, "%s", name);
    snprintf(s.status, sizeof s.status, "active");
    s.created_at = clock_now_ms();
    char data[256];
    snprintf(data, sizeof data, "{\"headless\":true,\"tags\":%s}", tags);
    s.data = data;
    assert_int_equal(store_session_insert(fx->app.store, &s), 0);
    if (strcmp(status, "deleted") == 0) {
        snprintf(s.status, sizeof s.status, "deleted");
        s.deleted_at = clock_now_ms();
        snprintf(s.usage_status, sizeof s.usage_status, "ready");
        assert_int_equal(store_session_update(fx->app.store, &s), 0);
    }
}

static int setup(void **state)
{
    struct fixture *fx = xcalloc(1, sizeof *fx);
    snprintf(fx->dir, sizeof fx->dir, "/tmp/browserd-handlers-XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    struct err e;
    err_init(&e);
    assert_int_equal(store_open_sqlite(fx->dir, &fx->app.store, &e), 0);
    struct sessmgr_hooks hooks = {0};
    assert_int_equal(sessmgr_start(&hooks, &fx->app.sessions, &e), 0);
    snprintf(fx->app.cfg.data_dir, sizeof fx->app.cfg.data_dir, "%s", fx->dir);
    snprintf(fx->app.cfg.public_url, sizeof fx->app.cfg.public_url, "http://127.0.0.1:1");
    memset(fx->app.token_key, 7, sizeof fx->app.token_key);
    fx->cfg = (struct http_config){.routes = api_routes,
                                   .nroutes = api_nroutes,
                                   .authorize = api_authorize,
                                   .cleanup = api_cleanup,
                                   .rewrite = api_session_url_rewrite,
                                   .app = &fx->app};
    make_org(fx, "a", KEY_A, fx->org_a, fx->project_a);
    make_org(fx, "b", KEY_B, fx->org_b, NULL);
    add_session(fx, "s1aaaaaaaaaaaaaaaaaaaaaa", "one", "active",
                "{\"team\":\"red\",\"env\":\"ci\"}");
    add_session(fx, "s2aaaaaaaaaaaaaaaaaaaaaa", "two", "active", "{\"team\":\"blue\"}");
    add_session(fx, "s3aaaaaaaaaaaaaaaaaaaaaa", "three", "active", "{\"team\":\"red\"}");
    add_session(fx, "s4aaaaaaaaaaaaaaaaaaaaaa", "gone", "deleted", "{\"team\":\"red\"}");
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    sessmgr_stop(fx->app.sessions);
    store_close(fx->app.store);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", fx->dir);
    assert_int_equal(system(cmd), 0);
    xfree(fx);
    return 0;
}

/* One request; query and headers are NULL-terminated name/value lists. */
static struct http_call_res call(struct fixture *fx, const char *method, const char *path,
                                 const char *const *query, const char *key, const char *body)
{
    const char *auth[3] = {NULL, NULL, NULL};
    char bearer[128];
    if (key) {
        snprintf(bearer, sizeof bearer, "Bearer %s", key);
        auth[0] = "Authorization";
        auth[1] = bearer;
    }
    struct http_call_req in = {method, path, query, auth, body, body ? strlen(body) : 0};
    struct http_call_res out;
    assert_int_equal(http_call(&fx->cfg, &in, &out), 0);
    return out;
}

/* The session ids of a list answer, in order, joined with ','. */
static void ids_of(const json_t *arr, char *out, size_t cap)
{
    out[0] = '\0';
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v)
    {
        size_t n = strlen(out);
        snprintf(out + n, cap - n, "%s%.2s", n ? "," : "", jsonx_str(v, "session_id"));
    }
}

static void test_list_filters(void **state)
{
    struct fixture *fx = *state;
    static const struct {
        const char *const query[7];
        const char *ids;
    } cases[] = {
        {{NULL}, "s1,s2,s3"},
        {{"tags[team]", "red", NULL}, "s1,s3"},
        {{"tags[team]", "red", "tags[env]", "ci", NULL}, "s1"},
        {{"tags[team]", "green", NULL}, ""},
        {{"query", "thr", NULL}, "s3"},
        {{"status", "deleted", NULL}, "s4"},
        {{"status", "all", "tags[team]", "red", NULL}, "s1,s3,s4"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct http_call_res r = call(fx, "GET", "/browsers", cases[i].query, KEY_A, NULL);
        assert_int_equal(r.status, 200);
        char ids[128];
        ids_of(r.json, ids, sizeof ids);
        if (strcmp(ids, cases[i].ids) != 0)
            fail_msg("case %zu: listed \"%s\", want \"%s\"", i, ids, cases[i].ids);
        http_call_res_clear(&r);
    }
}

static void test_list_pagination(void **state)
{
    struct fixture *fx = *state;
    const char *const q1[] = {"limit", "2", NULL};
    struct http_call_res r = call(fx, "GET", "/browsers", q1, KEY_A, NULL);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(r.json), 2);
    assert_string_equal(jsonx_str(r.headers, "X-Has-More"), "true");
    assert_string_equal(jsonx_str(r.headers, "X-Next-Offset"), "2");
    http_call_res_clear(&r);
    const char *const q2[] = {"limit", "2", "offset", "2", NULL};
    r = call(fx, "GET", "/browsers", q2, KEY_A, NULL);
    assert_int_equal(json_array_size(r.json), 1);
    assert_string_equal(jsonx_str(r.headers, "X-Has-More"), "false");
    http_call_res_clear(&r);
}

/* At most 16 tag filters; a 17th is a 400 naming "tags". */
static void test_tag_filter_limit(void **state)
{
    struct fixture *fx = *state;
    const char *q[2 * 17 + 1];
    char keys[17][24];
    for (int i = 0; i < 17; i++) {
        snprintf(keys[i], sizeof keys[i], "tags[k%d]", i);
        q[2 * i] = keys[i];
        q[2 * i + 1] = "v";
    }
    q[34] = NULL;
    struct http_call_res r = call(fx, "GET", "/browsers", q, KEY_A, NULL);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(jsonx_str(r.json, "message"), "tags: at most 16 tag filters"));
    http_call_res_clear(&r);
    q[32] = NULL; /* 16 filters: accepted, nothing matches */
    r = call(fx, "GET", "/browsers", q, KEY_A, NULL);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(r.json), 0);
    http_call_res_clear(&r);
}

static void test_tenancy(void **state)
{
    struct fixture *fx = *state;
    struct http_call_res r = call(fx, "GET", "/browsers", NULL, NULL, NULL);
    assert_int_equal(r.status, 401);
    http_call_res_clear(&r);
    r = call(fx, "GET", "/browsers", NULL, "sk_not_a_key", NULL);
    assert_int_equal(r.status, 401);
    http_call_res_clear(&r);
    r = call(fx, "GET", "/browsers/s1aaaaaaaaaaaaaaaaaaaaaa", NULL, KEY_A, NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(jsonx_str(r.json, "name"), "one");
    http_call_res_clear(&r);
    /* Another organization's key: the session does not exist for it. */
    r = call(fx, "GET", "/browsers/s1aaaaaaaaaaaaaaaaaaaaaa", NULL, KEY_B, NULL);
    assert_int_equal(r.status, 404);
    http_call_res_clear(&r);
    r = call(fx, "GET", "/browsers", NULL, KEY_B, NULL);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(r.json), 0);
    http_call_res_clear(&r);
}

/* A session's own URL: its token, for its own session only, never a key. */
static void test_session_url(void **state)
{
    struct fixture *fx = *state;
    struct token_claims c = {.exp = clock_now_ms() / 1000 + 600};
    snprintf(c.sub, sizeof c.sub, "s1aaaaaaaaaaaaaaaaaaaaaa");
    snprintf(c.org, sizeof c.org, "%s", fx->org_a);
    snprintf(c.aud, sizeof c.aud, "cdp");
    char tok[1024], other[1024];
    assert_int_equal(token_sign(fx->app.token_key, sizeof fx->app.token_key, &c, tok, sizeof tok),
                     0);
    snprintf(c.sub, sizeof c.sub, "s2aaaaaaaaaaaaaaaaaaaaaa");
    assert_int_equal(
        token_sign(fx->app.token_key, sizeof fx->app.token_key, &c, other, sizeof other), 0);
    const char *path = "/browser/sessions/s1aaaaaaaaaaaaaaaaaaaaaa/curl";
    /* Authorized: the body is checked (a 400 naming url), not the caller. */
    const char *const good[] = {"jwt", tok, NULL};
    struct http_call_res r = call(fx, "POST", path, good, NULL, "{}");
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(jsonx_str(r.json, "message"), "url"));
    http_call_res_clear(&r);
    const char *const wrong[] = {"jwt", other, NULL};
    r = call(fx, "POST", path, wrong, NULL, "{}");
    assert_int_equal(r.status, 401);
    http_call_res_clear(&r);
    r = call(fx, "POST", path, NULL, KEY_A, "{}");
    assert_int_equal(r.status, 401);
    http_call_res_clear(&r);
    /* The record itself and other resources are not below a session URL. */
    r = call(fx, "GET", "/browser/sessions/s1aaaaaaaaaaaaaaaaaaaaaa", good, NULL, NULL);
    assert_int_equal(r.status, 404);
    http_call_res_clear(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_list_filters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_pagination, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tag_filter_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tenancy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_url, setup, teardown),
    };
    return cmocka_run_group_tests_name("api/handlers (in process)", tests, NULL, NULL);
}
