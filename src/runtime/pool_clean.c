/*
 * pool_clean: resetting a released pool browser for its next lease, failing
 * closed (issue 30; docs/pools.md "Release").
 *
 * What a lease leaves behind lives in the browser's profile, per origin:
 * cookies, local and session storage, IndexedDB, Cache Storage, service
 * workers, granted permissions, the open tabs and their history. Chromium has
 * no DevTools command that lists the origins holding data, so the origins are
 * gathered from what the lease's tabs show and showed: every page's URL, its
 * frames and its navigation history. Each is cleared on a page target (on the
 * browser target Storage.clearDataForOrigin answers "Internal error" on
 * recent Chromium), and then read back:
 *
 *  - cookies: Storage.getCookies lists none;
 *  - IndexedDB, Cache Storage, service workers, file systems: the quota
 *    manager's usage for the origin (Storage.getUsageAndQuota) is 0;
 *  - localStorage: the fresh tab is navigated to the origin with the request
 *    answered by us (Fetch.fulfillRequest: an empty page, nothing sent to the
 *    network) and localStorage.length read in it;
 *  - session storage and history: they belong to a tab, and every tab of the
 *    lease is closed: the one left is new (Target.createTarget), and the
 *    target list must show only it.
 *
 * Every command's answer is checked. Any failure, or a lease that showed more
 * origins than LIM_POOL_CLEAN_ORIGINS, makes the clean fail: the pool engine
 * then ends the browser and launches another (pool_release), so a browser
 * whose cleaning was not verified is never handed out.
 */
#include "runtime/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/jsonx.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/xalloc.h"
#include "proxy/cdp_client.h"
#include "proxy/cdp_page.h"

#define CLEAN_TIMEOUT_MS 5000

/* The origin ("scheme://host[:port]") of an http(s) URL into out; 0 if none. */
static int origin_of(const char *url, char *out, size_t cap)
{
    const char *p = strstr(url, "://");
    if (!p || (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0))
        return 0;
    size_t n = strcspn(p + 3, "/?#") + (size_t)(p + 3 - url);
    if (n + 1 > cap)
        return 0;
    memcpy(out, url, n);
    out[n] = '\0';
    return 1;
}

/* Adds url's origin to the set (a JSON object used as a set). */
static void add_origin(json_t *set, const char *url)
{
    char o[512];
    if (url && origin_of(url, o, sizeof o))
        json_object_set_new(set, o, json_true());
}

/* One checked call; the result (new reference, may be NULL) into *res. */
static int call(struct cdp_client *cc, const char *sid, const char *method, json_t *params,
                json_t **res)
{
    struct err e;
    err_init(&e);
    json_t *r = NULL;
    int rc = cdp_client_call(cc, sid, method, params, 1, CLEAN_TIMEOUT_MS, &r, &e);
    json_decref(params);
    if (rc != 0)
        log_info("pool release: %s failed: %s", method, e.message);
    if (res)
        *res = r;
    else
        json_decref(r);
    return rc;
}

/* A step of proxy/cdp_page, checked as call checks each: a failure is
 * logged, naming the step. */
static int checked(int rc, const struct err *e)
{
    if (rc != 0)
        log_info("pool release: %s", e->message);
    return rc;
}

/* Attaches to target (flat sessions); the session id into out. */
static int attach(struct cdp_client *cc, const char *target, char *out, size_t cap)
{
    struct err e;
    err_init(&e);
    return checked(cdp_page_attach(cc, target, CLEAN_TIMEOUT_MS, out, cap, &e), &e);
}

static void add_frames(json_t *set, const json_t *tree)
{
    add_origin(set, jsonx_str(json_object_get(tree, "frame"), "url"));
    size_t i;
    json_t *child;
    json_array_foreach(json_object_get(tree, "childFrames"), i, child) add_frames(set, child);
}

/* The origins page target shows (its frames) and showed (its history). */
static int page_origins_once(struct cdp_client *cc, const char *target, json_t *set)
{
    char sid[128];
    int rc = attach(cc, target, sid, sizeof sid);
    json_t *r = NULL;
    if (rc == 0 && (rc = call(cc, sid, "Page.getNavigationHistory", NULL, &r)) == 0) {
        size_t i;
        json_t *entry;
        json_array_foreach(json_object_get(r, "entries"), i, entry)
            add_origin(set, jsonx_str(entry, "url"));
    }
    json_decref(r);
    r = NULL;
    if (rc == 0 && (rc = call(cc, sid, "Page.getFrameTree", NULL, &r)) == 0)
        add_frames(set, json_object_get(r, "frameTree"));
    json_decref(r);
    return rc;
}

/* page_origins_once, asked again a few times: a page in the middle of a
 * navigation (a lease released while its page loads) answers "Not attached
 * to an active page" for a moment, and failing would replace the browser. */
#define ORIGINS_TRIES 3

static int page_origins(struct cdp_client *cc, const char *target, json_t *set)
{
    int rc = page_origins_once(cc, target, set);
    for (int i = 1; rc != 0 && i < ORIGINS_TRIES; i++) {
        struct timespec ts = {0, 50L * 1000000L};
        nanosleep(&ts, NULL);
        rc = page_origins_once(cc, target, set);
    }
    return rc;
}

/* Answers one paused request (Fetch.requestPaused event ev): the one for
 * url (may be NULL) with an empty page, any other with a failure, so that
 * nothing leaves the browser while the cleaner looks at origins. */
static int answer_paused(struct cdp_client *cc, const json_t *ev, const char *url)
{
    const json_t *p = json_object_get(ev, "params");
    const char *rid = jsonx_str(p, "requestId");
    const char *rurl = jsonx_str(json_object_get(p, "request"), "url");
    if (!rid)
        return 0;
    if (url && rurl && strcmp(rurl, url) == 0)
        return call(cc, jsonx_str(ev, "sessionId"), "Fetch.fulfillRequest",
                    json_pack("{s:s,s:i,s:[{s:s,s:s}],s:s}", "requestId", rid, "responseCode", 200,
                              "responseHeaders", "name", "Content-Type", "value", "text/html",
                              "body", ""),
                    NULL);
    return call(cc, jsonx_str(ev, "sessionId"), "Fetch.failRequest",
                json_pack("{s:s,s:s}", "requestId", rid, "errorReason", "Aborted"), NULL);
}

/* Navigates the session sid's tab to url with request interception on
 * (Fetch.enable, events kept): the document's request is answered here with
 * an empty page when answer is 1, every other request failed. 0 once the
 * navigation committed. */
static int navigate_intercepted(struct cdp_client *cc, const char *sid, const char *url, int answer)
{
    struct err e;
    err_init(&e);
    json_t *np = json_pack("{s:s}", "url", url);
    int rc = cdp_client_call(cc, sid, "Page.navigate", np, 0, 0, NULL, &e) == 0 ? 0 : E_UNAVAIL;
    json_decref(np);
    json_t *nav = NULL;
    while (rc == 0 && !nav) {
        json_t *ev = NULL;
        if (cdp_client_event(cc, CLEAN_TIMEOUT_MS, &ev, &e) != 0) {
            rc = E_UNAVAIL;
            break;
        }
        const char *method = jsonx_str(ev, "method");
        if (!method) {
            nav = ev; /* the only call without waiting: Page.navigate's answer */
            break;
        }
        if (strcmp(method, "Fetch.requestPaused") == 0)
            rc = answer_paused(cc, ev, answer ? url : NULL);
        json_decref(ev);
    }
    if (rc == 0 &&
        (json_object_get(nav, "error") || jsonx_str(json_object_get(nav, "result"), "errorText")))
        rc = E_INTERNAL;
    json_decref(nav);
    return rc;
}

/* Fails the requests still paused (a favicon of the last page looked at),
 * until none came for DRAIN_MS: Fetch.disable would let them go out, and a
 * response could set a cookie. */
#define DRAIN_MS 200

static int drain_paused(struct cdp_client *cc)
{
    struct err e;
    err_init(&e);
    json_t *ev = NULL;
    int rc = 0;
    while (rc == 0 && cdp_client_event(cc, DRAIN_MS, &ev, &e) == 0) {
        const char *method = jsonx_str(ev, "method");
        if (method && strcmp(method, "Fetch.requestPaused") == 0)
            rc = answer_paused(cc, ev, NULL);
        json_decref(ev);
        ev = NULL;
    }
    return rc;
}

/* Reads localStorage.length in a document of origin shown in the session
 * sid's tab, its request answered here (an empty page: no request leaves the
 * browser). 0 when it is empty. */
static int local_storage_empty(struct cdp_client *cc, const char *sid, const char *origin)
{
    char *url = xasprintf("%s/", origin);
    int rc = navigate_intercepted(cc, sid, url, 1);
    /* The committed document is the origin's; asked a few times in case the
     * evaluation raced the commit (then it runs in the old one, which has no
     * storage or another origin). */
    const char *expr = "location.origin + ' ' + localStorage.length";
    size_t olen = strlen(origin);
    long long n = -1;
    for (int round = 0; rc == 0 && n < 0 && round < 10; round++) {
        json_t *r = NULL;
        rc = call(cc, sid, "Runtime.evaluate",
                  json_pack("{s:s,s:b}", "expression", expr, "returnByValue", 1), &r);
        const char *got = jsonx_str(json_object_get(r, "result"), "value");
        if (rc == 0 && got && strncmp(got, origin, olen) == 0 && got[olen] == ' ')
            n = strtoll(got + olen + 1, NULL, 10);
        json_decref(r);
    }
    xfree(url);
    if (rc == 0 && n != 0)
        log_info("pool release: the localStorage of %s is not empty (%lld)", origin, n);
    return rc == 0 && n == 0 ? 0 : -1;
}

/* The quota-managed storage of origin (IndexedDB, Cache Storage, service
 * workers, file systems) is empty. */
static int quota_empty(struct cdp_client *cc, const char *sid, const char *origin)
{
    json_t *r = NULL;
    int rc = call(cc, sid, "Storage.getUsageAndQuota", json_pack("{s:s}", "origin", origin), &r);
    const json_t *u = json_object_get(r, "usage");
    int empty = rc == 0 && json_is_number(u) && json_number_value(u) == 0;
    if (rc == 0 && !empty)
        log_info("pool release: %s still uses %.0f bytes of storage", origin, json_number_value(u));
    json_decref(r);
    return empty ? 0 : -1;
}

int pool_cdp_clean(const char *ws, const char *start_url)
{
    struct err e;
    err_init(&e);
    struct cdp_client *cc;
    if (cdp_client_open(ws, CLEAN_TIMEOUT_MS, &cc, &e) != 0)
        return E_UNAVAIL;
    json_t *origins = json_object(), *pages = NULL, *r = NULL;
    char keep[128] = "", ksid[128] = "";
    /* What the lease's tabs show and showed. */
    int rc = checked(cdp_page_list(cc, CLEAN_TIMEOUT_MS, &pages, &e), &e);
    size_t i;
    json_t *t;
    json_array_foreach(pages, i, t)
    {
        add_origin(origins, jsonx_str(t, "url"));
        if (rc == 0)
            rc = page_origins(cc, jsonx_str(t, "targetId"), origins);
    }
    if (rc == 0 && json_object_size(origins) > LIM_POOL_CLEAN_ORIGINS) {
        log_info("pool release: the lease showed %zu origins (more than %d are not cleaned)",
                 json_object_size(origins), LIM_POOL_CLEAN_ORIGINS);
        rc = E_INTERNAL;
    }
    /* A new tab (no session storage, no history), then every other closed:
     * waited for, since a page still open could set a cookie again. A lease
     * that showed no origin in its one tab (about:blank only) keeps that tab:
     * its history holds nothing of anyone, and a new tab's renderer was most
     * of such a release. */
    if (rc == 0 && json_object_size(origins) == 0 && json_array_size(pages) == 1) {
        snprintf(keep, sizeof keep, "%s", jsonx_str(json_array_get(pages, 0), "targetId"));
        json_array_clear(pages);
    } else if (rc == 0) {
        rc = checked(cdp_page_create(cc, "about:blank", 0, CLEAN_TIMEOUT_MS, keep, sizeof keep, &e),
                     &e);
    }
    json_array_foreach(pages, i, t)
    {
        if (rc == 0)
            rc = call(cc, NULL, "Target.closeTarget",
                      json_pack("{s:s}", "targetId", jsonx_str(t, "targetId")), NULL);
    }
    if (rc == 0)
        rc = attach(cc, keep, ksid, sizeof ksid);
    const char *origin;
    json_t *v;
    json_object_foreach(origins, origin, v)
    {
        if (rc == 0)
            rc = call(cc, ksid, "Storage.clearDataForOrigin",
                      json_pack("{s:s,s:s}", "origin", origin, "storageTypes", "all"), NULL);
    }
    /* Read back, with every request of the tab intercepted: nothing of the
     * look reaches the network (or sets a cookie). A lease that showed no
     * origin (about:blank only) has nothing to read back: the new tab never
     * loaded anything, so there is no request to intercept or drain (the
     * drain's quiet window was most of such a release). */
    int look = json_object_size(origins) > 0;
    if (rc == 0 && look) {
        cdp_client_keep_events(cc, "Fetch.");
        rc = call(cc, ksid, "Fetch.enable", json_pack("{s:[{s:s}]}", "patterns", "urlPattern", "*"),
                  NULL);
    }
    json_object_foreach(origins, origin, v)
    {
        if (rc == 0 &&
            (quota_empty(cc, ksid, origin) != 0 || local_storage_empty(cc, ksid, origin) != 0))
            rc = E_INTERNAL;
    }
    if (rc == 0 && look)
        rc = navigate_intercepted(cc, ksid, "about:blank", 0);
    if (rc == 0 && look)
        rc = drain_paused(cc);
    if (rc == 0 && look)
        rc = call(cc, ksid, "Fetch.disable", NULL, NULL);
    cdp_client_keep_events(cc, NULL);
    if (rc == 0)
        rc = call(cc, NULL, "Browser.resetPermissions", NULL, NULL);
    if (rc == 0)
        rc = call(cc, ksid, "Network.clearBrowserCache", NULL, NULL);
    /* A response already on its way when the pages closed can still set a
     * cookie: clear until none is left (a few rounds at most). */
    int no_cookies = 0;
    for (int round = 0; rc == 0 && !no_cookies && round < 3; round++) {
        rc = call(cc, NULL, "Storage.clearCookies", NULL, NULL);
        if (rc == 0 && (rc = call(cc, NULL, "Storage.getCookies", NULL, &r)) == 0)
            no_cookies = json_array_size(json_object_get(r, "cookies")) == 0;
        json_decref(r);
        r = NULL;
    }
    if (rc == 0 && !no_cookies)
        rc = E_INTERNAL;
    json_decref(pages);
    pages = NULL;
    if (rc == 0 && (rc = checked(cdp_page_list(cc, CLEAN_TIMEOUT_MS, &pages, &e), &e)) == 0 &&
        (json_array_size(pages) != 1 ||
         strcmp(jsonx_str(json_array_get(pages, 0), "targetId"), keep) != 0))
        rc = E_INTERNAL;
    json_decref(pages);
    /* The start page last: its own storage is the next lease's. The kept tab
     * shows about:blank here (new, or back from the read-back), so without a
     * start page there is nothing to load (a navigation still committing when
     * the next lease is released made its history unreadable). */
    if (rc == 0 && start_url && *start_url && strcmp(start_url, "about:blank") != 0)
        rc = call(cc, ksid, "Page.navigate", json_pack("{s:s}", "url", start_url), NULL);
    json_decref(origins);
    cdp_client_close(cc);
    if (rc != 0)
        log_info("pool release: the browser could not be verified clean; it is replaced");
    return rc;
}
