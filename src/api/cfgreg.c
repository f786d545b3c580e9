#include "api/cfgreg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "cluster/node.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/share.h"
#include "core/xalloc.h"
#include "domain/htmltext.h"
#include "domain/siteclass.h"
#include "runtime/bgjobs.h"
#include "runtime/brender.h"
#include "runtime/sessmgr.h"
#include "session/app.h"
#include "store/store.h"

/* A candidate session's timeout_seconds: it ends by itself should its
 * analysis die before deleting it. */
#define CAND_TIMEOUT_S 60
/* An analysis still "running" after this long died with its server: the
 * next resolve of its domain starts another. */
#define STALE_MS ((int64_t)LIM_CFGREG_CANDIDATES * 3 * LIM_CFGREG_VISIT_MS + 60000)
/* The proxies of a project read to build candidates (the first ones). */
#define PROXIES_READ 50
/* The visible characters of a rendered page the classifier reads (enough
 * to tell an empty page), and the telemetry entries an attempt records of
 * each kind. */
#define VISIT_TEXT_CHARS   1000
#define ATTEMPT_TELEM_LIST 5

/* Analyses in flight: the server's, each org's and each project's share. */
static struct share running = SHARE_INIT("config registry analyses", LIM_CFGREG_ANALYSES,
                                         LIM_CFGREG_ANALYSES_PER_ORG, LIM_CFGREG_ANALYSES_PER_ORG);

/* One analysis, owned by its job thread once started. */
struct job {
    struct app *app;
    char org_id[STORE_ID], project_id[STORE_ID];
    char *auth, *proj_id_hdr, *proj_hdr; /* the caller's headers, copied */
    char id[CRYPTO_ID_LEN + 8];
    char url[LIM_CFGREG_URL_BYTES + 1];
    struct siteclass_target target;
    json_t *candidates; /* [{browser, proxy, label}] */
    json_t *record;     /* the analysis record */
    int64_t requested_at;
};

static void job_free(struct job *j)
{
    if (!j)
        return;
    xfree(j->auth);
    xfree(j->proj_id_hdr);
    xfree(j->proj_hdr);
    json_decref(j->candidates);
    json_decref(j->record);
    xfree(j);
}

/* ---- the request's fields ---- */

/* {url, allowed_proxy_countries?}: the target into *t, the countries into
 * *countries (a new array, or NULL when absent). 0, or E_INVALID naming
 * the field. */
static int parse_body(struct req *rq, json_t **body, struct siteclass_target *t, json_t **countries)
{
    *countries = NULL;
    int rc = req_json_object(rq, 0, body);
    if (rc)
        return rc;
    json_t *u = json_object_get(*body, "url");
    if (u && !json_is_string(u))
        return err_field(&rq->err, "url", "must be a string: an http or https URL");
    if ((rc = siteclass_target_parse(json_string_value(u), "url", t, &rq->err)) != 0)
        return rc;
    json_t *c = json_object_get(*body, "allowed_proxy_countries");
    if (!c || json_is_null(c))
        return 0;
    if (!json_is_array(c) || json_array_size(c) > LIM_CFGREG_COUNTRIES)
        return err_field(&rq->err, "allowed_proxy_countries",
                         "must be an array of at most %d ISO 3166 alpha-2 codes",
                         LIM_CFGREG_COUNTRIES);
    size_t i;
    json_t *v;
    json_array_foreach(c, i, v)
    {
        const char *s = json_string_value(v);
        if (!s || strlen(s) != 2 || s[0] < 'A' || s[0] > 'Z' || s[1] < 'A' || s[1] > 'Z')
            return err_field(&rq->err, "allowed_proxy_countries",
                             "item %zu must be an ISO 3166 alpha-2 code such as US", i);
    }
    *countries = json_incref(c);
    return 0;
}

static int country_allowed(const json_t *countries, const char *country)
{
    if (!countries)
        return 1;
    for (size_t i = 0; country && i < json_array_size(countries); i++)
        if (strcmp(json_string_value(json_array_get(countries, i)), country) == 0)
            return 1;
    return 0;
}

static json_t *target_json(const struct siteclass_target *t)
{
    return json_pack("{s:s,s:s,s:s}", "domain", t->domain, "host", t->host, "normalized",
                     t->normalized);
}

/* ---- candidates ---- */

static json_t *browser_opts(int headless, int stealth)
{
    return json_pack("{s:b,s:b,s:b,s:{s:i,s:i}}", "gpu", 0, "headless", headless, "stealth",
                     stealth, "viewport", "width", 1920, "height", 1080);
}

static void add_candidate(json_t *list, int headless, int stealth, const json_t *proxy)
{
    if (json_array_size(list) >= LIM_CFGREG_CANDIDATES)
        return;
    json_t *b = browser_opts(headless, stealth);
    const char *pid = jsonx_str(proxy, "id");
    if (pid)
        json_object_set_new(b, "proxy_id", json_string(pid));
    char label[200];
    snprintf(label, sizeof label, "%s %s %s%.100s", headless ? "headless" : "headful",
             stealth ? "stealth" : "plain", pid ? "proxy " : "direct",
             pid ? (jsonx_str(proxy, "name") ? jsonx_str(proxy, "name") : pid) : "");
    json_array_append_new(list,
                          json_pack("{s:o,s:O,s:s}", "browser", b, "proxy", proxy, "label", label));
}

/* The candidates, cheapest first: headless plain and headless stealth
 * direct, headless stealth through each usable proxy of the project, then
 * headful stealth direct; at most LIM_CFGREG_CANDIDATES. With countries,
 * only proxies of those countries (no direct egress: its country is the
 * server's, unknown). */
static json_t *build_candidates(struct req *rq, const json_t *countries)
{
    struct auth *a = api_auth(rq);
    json_t *proxies = json_array();
    struct page pg = {.limit = PROXIES_READ};
    struct proxy_rec *rows = NULL;
    size_t n = 0;
    if (store_proxy_list(api_app(rq)->store, a->org.id, a->project.id, NULL, NULL, &pg, &rows,
                         &n) == 0) {
        for (size_t i = 0; i < n; i++) {
            json_t *d = json_loads(rows[i].data ? rows[i].data : "{}", 0, NULL);
            const char *country = jsonx_str(json_object_get(d, "config"), "country");
            if (strcmp(rows[i].status, "unavailable") != 0 && country_allowed(countries, country)) {
                json_t *p = json_pack("{s:s,s:s,s:s}", "mode", "proxy", "id", rows[i].id, "type",
                                      rows[i].type);
                if (rows[i].name[0])
                    json_object_set_new(p, "name", json_string(rows[i].name));
                if (country)
                    json_object_set_new(p, "country", json_string(country));
                json_array_append_new(proxies, p);
            }
            json_decref(d);
            proxy_rec_clear(&rows[i]);
        }
        xfree(rows);
    }
    json_t *list = json_array();
    json_t *direct = json_pack("{s:s}", "mode", "direct");
    if (!countries) {
        add_candidate(list, 1, 0, direct);
        add_candidate(list, 1, 1, direct);
    }
    size_t i;
    json_t *p;
    json_array_foreach(proxies, i, p)
    {
        if (json_array_size(list) + (countries ? 0 : 1) >= LIM_CFGREG_CANDIDATES)
            break;
        add_candidate(list, 1, 1, p);
    }
    if (!countries)
        add_candidate(list, 0, 1, direct);
    json_decref(direct);
    json_decref(proxies);
    return list;
}

/* ---- the analysis job ---- */

/* Runs method path as the analysis's caller, through the server's own
 * routes on this thread (http_call). */
static int job_call(struct job *j, const char *method, const char *path, const json_t *body,
                    struct http_call_res *out)
{
    const char *hdrs[7];
    size_t k = 0;
    hdrs[k++] = "Authorization";
    hdrs[k++] = j->auth;
    if (j->proj_id_hdr) {
        hdrs[k++] = "X-Kernel-Project-Id";
        hdrs[k++] = j->proj_id_hdr;
    }
    if (j->proj_hdr) {
        hdrs[k++] = "X-Kernel-Project";
        hdrs[k++] = j->proj_hdr;
    }
    hdrs[k] = NULL;
    char *text = body ? jsonx_dump(body) : NULL;
    struct http_config hc = {
        .routes = api_routes,
        .nroutes = api_nroutes,
        .authorize = api_authorize,
        .cleanup = api_cleanup,
        .app = j->app,
        .buffer_streams = 1,
    };
    struct http_call_req in = {method, path, NULL, hdrs, text, text ? strlen(text) : 0};
    int rc = http_call(&hc, &in, out);
    xfree(text);
    return rc;
}

static const char *call_message(const struct http_call_res *r)
{
    const char *m = jsonx_str(r->json, "message");
    return m ? m : "the request failed";
}

/* The attempt's telemetry as the record shows it: how many responses,
 * the main frame's documents (redirects, script navigations), the refused
 * sub-requests and the console errors (the first ATTEMPT_TELEM_LIST). */
static json_t *telemetry_json(const struct brender_result *res)
{
    json_t *docs = json_array(), *refused = json_array(), *console = json_array();
    for (size_t i = 0; i < res->nresponses; i++) {
        const struct siteclass_response *r = &res->responses[i];
        if (r->document && json_array_size(docs) < ATTEMPT_TELEM_LIST)
            json_array_append_new(docs,
                                  json_pack("{s:s,s:i,s:b}", "url", r->url, "status", r->status,
                                            "challenge_header", r->challenge_header));
        else if (!r->document && r->status >= 400 && json_array_size(refused) < ATTEMPT_TELEM_LIST)
            json_array_append_new(refused,
                                  json_pack("{s:s,s:i,s:b}", "url", r->url, "status", r->status,
                                            "challenge_header", r->challenge_header));
    }
    for (size_t i = 0; i < res->nconsole && i < ATTEMPT_TELEM_LIST; i++)
        json_array_append_new(console, json_string(res->console_errors[i]));
    return json_pack("{s:I,s:o,s:o,s:I,s:o}", "responses", (json_int_t)res->responses_seen,
                     "documents", docs, "failed_requests", refused, "console_errors",
                     (json_int_t)res->nconsole, "console", console);
}

/* The visit of candidate session id: the target loaded and rendered by the
 * session's browser (runtime/brender: its egress, its rules), classified
 * from the main document's status, the rendered page and the page's
 * telemetry. The outcome, with the reason in reason and the visit's facts
 * in the attempt at. */
static enum siteclass_outcome visit(struct job *j, const char *id, json_t *at, char *reason,
                                    size_t cap)
{
    struct live *live = sessmgr_get(j->app->sessions, id);
    char ws[512];
    if (!live || live_ws_url(live, ws, sizeof ws) != 0) {
        sessmgr_put(live);
        snprintf(reason, cap, "visit_failed");
        json_object_set_new(at, "detail", json_string("the session is not running on this node"));
        return SITECLASS_INCONCLUSIVE;
    }
    live_touch(live);
    struct brender_result res;
    struct err e;
    err_init(&e);
    int rc = brender_run(ws, j->url, LIM_CFGREG_VISIT_MS, &res, &e);
    live_touch(live);
    sessmgr_put(live);
    enum siteclass_outcome out = SITECLASS_INCONCLUSIVE;
    if (rc) {
        snprintf(reason, cap, "visit_failed");
        json_object_set_new(at, "detail", json_string(e.message));
    } else if (res.transport_error) {
        struct siteclass_visit v = {.net_error = res.net_error_name};
        out = siteclass_classify(&v, reason, cap);
    } else {
        size_t n =
            res.html_len < LIM_CFGREG_CLASSIFY_BYTES ? res.html_len : LIM_CFGREG_CLASSIFY_BYTES;
        char *text = NULL;
        int cut = 0;
        htmltext_convert(res.html, n, 0, VISIT_TEXT_CHARS, &text, &cut);
        struct siteclass_telemetry t;
        brender_telemetry(&res, &t);
        t.text = text;
        struct siteclass_visit v = {
            .status = res.status, .body = res.html, .body_len = res.html_len, .telemetry = &t};
        out = siteclass_classify(&v, reason, cap);
        xfree(text);
        json_object_set_new(at, "http_status", json_integer(res.status));
        json_object_set_new(at, "body_bytes", json_integer((json_int_t)res.html_len));
        if (res.final_url)
            json_object_set_new(at, "final_url", json_string(res.final_url));
        json_object_set_new(at, "loaded", json_boolean(res.loaded));
        json_object_set_new(at, "telemetry", telemetry_json(&res));
    }
    brender_result_clear(&res);
    return out;
}

/* One candidate: a session made with its browser body visits the target
 * and is deleted. The attempt record. */
static json_t *run_candidate(struct job *j, const json_t *cand, size_t index)
{
    int64_t t0 = clock_mono_ms();
    json_t *at = json_pack("{s:I,s:O,s:O,s:s}", "index", (json_int_t)index, "browser",
                           json_object_get(cand, "browser"), "proxy",
                           json_object_get(cand, "proxy"), "label", jsonx_str(cand, "label"));
    json_t *body = json_deep_copy(json_object_get(cand, "browser"));
    json_object_set_new(body, "timeout_seconds", json_integer(CAND_TIMEOUT_S));
    struct http_call_res r;
    memset(&r, 0, sizeof r);
    enum siteclass_outcome out = SITECLASS_INCONCLUSIVE;
    char reason[96] = "session_not_created";
    int rc = job_call(j, "POST", "/browsers", body, &r);
    json_decref(body);
    const char *sid = rc == 0 && r.status / 100 == 2 ? jsonx_str(r.json, "session_id") : NULL;
    if (!sid) {
        json_object_set_new(at, "detail", json_string(rc == 0 ? call_message(&r) : "no answer"));
        if (rc == 0)
            json_object_set_new(at, "session_status", json_integer(r.status));
        http_call_res_clear(&r);
        goto done;
    }
    char id[STORE_ID * 2];
    snprintf(id, sizeof id, "%s", sid);
    http_call_res_clear(&r);
    json_object_set_new(at, "session_id", json_string(id));
    char path[sizeof id + 32];
    out = visit(j, id, at, reason, sizeof reason);
    snprintf(path, sizeof path, "/browsers/%s", id);
    memset(&r, 0, sizeof r);
    if (job_call(j, "DELETE", path, NULL, &r) != 0 || r.status / 100 != 2)
        log_warn("config registry: analysis %s could not delete its session %s (%d)", j->id, id,
                 r.status);
    http_call_res_clear(&r);
done:
    json_object_set_new(at, "outcome", json_string(siteclass_outcome_names[out]));
    json_object_set_new(at, "reason", json_string(reason));
    json_object_set_new(at, "duration_ms", json_integer((json_int_t)(clock_mono_ms() - t0)));
    return at;
}

static void save_analysis(struct job *j)
{
    char *text = jsonx_dump(j->record);
    if (store_cfgreg_analysis_put(j->app->store, j->org_id, j->id, j->target.domain,
                                  j->requested_at, text) != 0)
        log_error("config registry: analysis %s could not be stored", j->id);
    xfree(text);
}

/* The analysis as resolve and the registry show it. */
static json_t *analysis_summary(const json_t *record)
{
    json_t *s = json_object();
    static const char *const keys[] = {"id", "status", "created_at", "finished_at", "failure"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        json_t *v = json_object_get(record, keys[i]);
        json_object_set(s, keys[i], v ? v : json_null());
    }
    return s;
}

/* Writes the domain's registry entry: the analysis, and the recommendation
 * (borrowed; NULL keeps none). */
static void save_entry(struct app *app, const char *org_id, const struct siteclass_target *t,
                       const json_t *record, const json_t *recommendation, const char *config,
                       int permille, int64_t requested_at)
{
    char when[40];
    json_t *e = json_pack("{s:o,s:o,s:O,s:s,s:s}", "target", target_json(t), "analysis",
                          analysis_summary(record), "recommendation",
                          recommendation ? recommendation : json_null(), "last_requested_at",
                          clock_fmt_rfc3339(requested_at, when, sizeof when), "domain", t->domain);
    json_object_set_new(e, "recommended_config", config ? json_string(config) : json_null());
    json_object_set_new(e, "success_rate",
                        permille >= 0 ? json_real(permille / 1000.0) : json_null());
    char *text = jsonx_dump(e);
    const char *status = jsonx_str(record, "status");
    char nid[STORE_ID] = ""; /* the analysis runs here: on a cluster, this node */
    if (app->node)
        node_id(app->node, nid);
    struct cfgreg_entry_rec r = {
        .org_id = org_id,
        .domain = t->domain,
        .analysis_status = status ? status : "",
        .recommended_config = config ? config : "",
        .json = text,
        .last_requested_at = requested_at,
        .success_permille = permille,
        .node_id = nid,
    };
    if (store_cfgreg_entry_put(app->store, &r) != 0)
        log_error("config registry: the entry of %s could not be stored", t->domain);
    xfree(text);
    json_decref(e);
}

static void job_run(void *ctx, struct bgjobs *jobs)
{
    struct job *j = ctx;
    json_t *attempts = json_object_get(j->record, "attempts");
    int counts[3] = {0, 0, 0}, stopped = 0;
    const json_t *chosen = NULL;
    size_t i;
    json_t *cand;
    json_array_foreach(j->candidates, i, cand)
    {
        if (bgjobs_stopping(jobs)) {
            stopped = 1;
            break;
        }
        json_t *at = run_candidate(j, cand, i);
        const char *o = jsonx_str(at, "outcome");
        for (int k = 0; k < 3; k++)
            if (strcmp(o, siteclass_outcome_names[k]) == 0)
                counts[k]++;
        if (!chosen && strcmp(o, "accessed") == 0)
            chosen = cand;
        json_array_append_new(attempts, at);
        save_analysis(j);
    }
    int64_t now = clock_now_ms();
    char when[40];
    clock_fmt_rfc3339(now, when, sizeof when);
    size_t runs = json_array_size(attempts);
    int permille = runs ? (int)(counts[SITECLASS_ACCESSED] * 1000 / (int)runs) : -1;
    json_t *rec;
    if (stopped) {
        json_object_set_new(j->record, "status", json_string("failed"));
        json_object_set_new(j->record, "failure",
                            json_pack("{s:s,s:s}", "code", "server_stopping", "message",
                                      "the server stopped before the analysis ended"));
        rec = json_pack("{s:s,s:s,s:s}", "type", "no_recommendation", "code", "inconclusive",
                        "message", "the analysis did not end");
    } else if (chosen) {
        json_object_set_new(j->record, "status", json_string("completed"));
        json_t *ev = json_pack(
            "{s:i,s:i,s:i,s:I,s:I,s:f,s:s,s:s}", "accessed", counts[SITECLASS_ACCESSED], "blocked",
            counts[SITECLASS_BLOCKED], "inconclusive", counts[SITECLASS_INCONCLUSIVE], "run_count",
            (json_int_t)runs, "sample_size", (json_int_t)runs, "success_rate", permille / 1000.0,
            "last_observed_at", when, "last_verified_at", when);
        rec =
            json_pack("{s:s,s:O,s:O,s:o,s:s,s:s,s:s,s:s}", "type", "recommendation", "browser",
                      json_object_get(chosen, "browser"), "proxy", json_object_get(chosen, "proxy"),
                      "evidence", ev, "match_scope", "exact", "matched_target",
                      j->target.normalized, "verification", "verified", "analysis_id", j->id);
    } else {
        json_object_set_new(j->record, "status", json_string("completed"));
        int none_blocked = counts[SITECLASS_BLOCKED] == 0;
        rec = json_pack("{s:s,s:s,s:s}", "type", "no_recommendation", "code",
                        none_blocked ? "inconclusive" : "no_working_configuration", "message",
                        none_blocked ? "no candidate reached a conclusive answer"
                                     : "every conclusive candidate was blocked");
    }
    json_object_set_new(j->record, "finished_at", json_string(when));
    json_object_set(j->record, "recommendation", rec);
    save_analysis(j);
    save_entry(j->app, j->org_id, &j->target, j->record, rec,
               chosen ? jsonx_str(chosen, "label") : NULL, permille, j->requested_at);
    json_decref(rec);
    share_give(&running, j->org_id, j->project_id);
    job_free(j);
}

/* ---- handlers ---- */

/* The entry of t's domain (a new reference), or NULL. */
static json_t *read_entry(struct req *rq, const struct siteclass_target *t)
{
    char *text = NULL;
    if (store_cfgreg_entry_get(api_app(rq)->store, api_auth(rq)->org.id, t->domain, &text) != 0)
        return NULL;
    json_t *e = json_loads(text, 0, NULL);
    xfree(text);
    return e;
}

/* The stored recommendation for t as lookup answers it (new reference,
 * with its match_scope), or NULL: none, or its proxy is outside countries. */
static json_t *match(const json_t *entry, const struct siteclass_target *t, const json_t *countries)
{
    const json_t *rec = json_object_get(entry, "recommendation");
    const char *type = jsonx_str(rec, "type");
    if (!type || strcmp(type, "recommendation") != 0)
        return NULL;
    const json_t *proxy = json_object_get(rec, "proxy");
    if (countries &&
        !(jsonx_str(proxy, "country") && country_allowed(countries, jsonx_str(proxy, "country"))))
        return NULL;
    const json_t *et = json_object_get(entry, "target");
    const char *norm = jsonx_str(et, "normalized"), *host = jsonx_str(et, "host");
    const char *scope = norm && strcmp(norm, t->normalized) == 0 ? "exact"
                        : host && strcmp(host, t->host) == 0     ? "host"
                                                                 : "domain";
    json_t *out = json_deep_copy(rec);
    json_object_set_new(out, "match_scope", json_string(scope));
    return out;
}

int cfgreg_lookup(struct req *rq, struct resp *rs)
{
    json_t *body = NULL, *countries = NULL;
    struct siteclass_target t;
    int rc = parse_body(rq, &body, &t, &countries);
    json_decref(body);
    if (rc) {
        json_decref(countries);
        return rc;
    }
    json_t *entry = read_entry(rq, &t);
    json_t *rec = entry ? match(entry, &t, countries) : NULL;
    json_decref(entry);
    json_decref(countries);
    resp_json(rs, 200,
              json_pack("{s:o,s:o}", "target", target_json(&t), "recommendation",
                        rec ? rec : json_null()));
    return 0;
}

static char *header_copy(struct req *rq, const char *name)
{
    const char *v = req_header(rq, name);
    return v && *v ? xstrdup(v) : NULL;
}

int cfgreg_resolve(struct req *rq, struct resp *rs)
{
    struct auth *a = api_auth(rq);
    struct app *app = api_app(rq);
    json_t *body = NULL, *countries = NULL;
    struct job *j = xcalloc(1, sizeof *j);
    int rc = parse_body(rq, &body, &j->target, &countries);
    if (rc)
        goto fail;
    snprintf(j->url, sizeof j->url, "%s", jsonx_str(body, "url"));
    int64_t now = clock_now_ms();
    /* An analysis of the domain still running is the answer. */
    json_t *entry = read_entry(rq, &j->target);
    const json_t *an = json_object_get(entry, "analysis");
    int64_t started = 0;
    const char *st = jsonx_str(an, "status"), *created = jsonx_str(an, "created_at");
    if (st && strcmp(st, "running") == 0 && created &&
        clock_parse_rfc3339(created, &started) == 0 && now - started < STALE_MS) {
        json_t *rec = match(entry, &j->target, countries);
        resp_json(rs, 200,
                  json_pack("{s:O,s:o,s:o}", "analysis", an, "recommendation",
                            rec ? rec : json_null(), "target", target_json(&j->target)));
        json_decref(entry);
        goto fail; /* nothing started: release what was read */
    }
    json_decref(entry);
    j->candidates = build_candidates(rq, countries);
    if (json_array_size(j->candidates) == 0) {
        resp_json(rs, 200,
                  json_pack("{s:n,s:{s:s,s:s,s:s},s:o}", "analysis", "recommendation", "type",
                            "no_recommendation", "code", "proxy_restricted", "message",
                            "no proxy of this project is in allowed_proxy_countries", "target",
                            target_json(&j->target)));
        goto fail;
    }
    if ((rc = share_take_or_err(&running, a->org.id, a->project.id, 10, &rq->err)) != 0)
        goto fail;
    j->app = app;
    snprintf(j->org_id, sizeof j->org_id, "%s", a->org.id);
    snprintf(j->project_id, sizeof j->project_id, "%s", a->project.id);
    j->auth = header_copy(rq, "Authorization");
    j->proj_id_hdr = header_copy(rq, "X-Kernel-Project-Id");
    j->proj_hdr = header_copy(rq, "X-Kernel-Project");
    if (!j->auth)
        j->auth = xstrdup("");
    char rid[CRYPTO_ID_LEN + 1], when[40];
    crypto_new_id(rid);
    snprintf(j->id, sizeof j->id, "cra_%s", rid);
    j->requested_at = now;
    j->record =
        json_pack("{s:s,s:s,s:s,s:n,s:n,s:o,s:s,s:I,s:[],s:n}", "id", j->id, "status", "running",
                  "created_at", clock_fmt_rfc3339(now, when, sizeof when), "finished_at", "failure",
                  "target", target_json(&j->target), "url", j->url, "candidates",
                  (json_int_t)json_array_size(j->candidates), "attempts", "recommendation");
    if (store_cfgreg_prune(app->store, j->org_id, LIM_CFGREG_KEPT_ANALYSES - 1,
                           LIM_CFGREG_KEPT_ENTRIES - 1) != 0)
        log_warn("config registry: the oldest analyses of org %s could not be deleted", j->org_id);
    save_analysis(j);
    /* The entry keeps its previous recommendation until this one ends. */
    json_t *prev = read_entry(rq, &j->target);
    save_entry(app, j->org_id, &j->target, j->record,
               prev ? json_object_get(prev, "recommendation") : NULL,
               prev ? jsonx_str(prev, "recommended_config") : NULL,
               prev && json_is_number(json_object_get(prev, "success_rate"))
                   ? (int)(json_number_value(json_object_get(prev, "success_rate")) * 1000 + 0.5)
                   : -1,
               now);
    json_t *out = json_pack(
        "{s:o,s:O,s:o}", "analysis", analysis_summary(j->record), "recommendation",
        prev && json_object_get(prev, "recommendation") ? json_object_get(prev, "recommendation")
                                                        : json_null(),
        "target", target_json(&j->target));
    json_decref(prev);
    if ((rc = bgjobs_start(app->cfgreg_jobs, job_run, j, &rq->err)) != 0) {
        share_give(&running, j->org_id, j->project_id);
        json_object_set_new(j->record, "status", json_string("failed"));
        json_object_set_new(
            j->record, "failure",
            json_pack("{s:s,s:s}", "code", "unavailable", "message", rq->err.message));
        save_analysis(j);
        save_entry(app, j->org_id, &j->target, j->record, NULL, NULL, -1, now);
        json_decref(out);
        goto fail;
    }
    json_decref(body);
    json_decref(countries);
    resp_json(rs, 200, out);
    return 0;
fail:
    json_decref(body);
    json_decref(countries);
    job_free(j);
    return rc;
}

/* The search parameter, lowercased into buf (cap bytes), or NULL. */
static const char *search_param(struct req *rq, char *buf, size_t cap)
{
    const char *s = req_query(rq, "search");
    if (!s || !*s)
        return NULL;
    size_t i = 0;
    for (; s[i] && i + 1 < cap; i++)
        buf[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] - 'A' + 'a' : s[i]);
    buf[i] = '\0';
    return buf;
}

static int render_rows(struct resp *rs, struct cfgreg_text *rows, size_t n, size_t offset,
                       int has_more)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_loads(rows[i].json, 0, NULL);
        if (v)
            json_array_append_new(arr, v);
        xfree(rows[i].json);
    }
    xfree(rows);
    resp_json(rs, 200, arr);
    resp_page(rs, offset, n, has_more);
    return 0;
}

int cfgreg_list(struct req *rq, struct resp *rs)
{
    static const char *const sorts[] = {"target", "analysis_status", "recommended_config",
                                        "last_requested_at", "success_rate"};
    size_t limit, offset;
    int rc = req_page(rq, &limit, &offset);
    if (rc)
        return rc;
    const char *by = req_query(rq, "sort_by"), *order = req_query(rq, "sort_order");
    enum cfgreg_sort sort = CFGREG_SORT_TARGET;
    if (by && *by) {
        size_t i = 0;
        while (i < 5 && strcmp(by, sorts[i]) != 0)
            i++;
        if (i == 5)
            return err_field(&rq->err, "sort_by",
                             "must be target, analysis_status, recommended_config, "
                             "last_requested_at or success_rate");
        sort = (enum cfgreg_sort)i;
    }
    if (order && *order && strcmp(order, "asc") != 0 && strcmp(order, "desc") != 0)
        return err_field(&rq->err, "sort_order", "must be asc or desc");
    int desc = order && strcmp(order, "desc") == 0;
    char sbuf[256];
    struct page pg = {.limit = limit, .offset = offset};
    struct cfgreg_text *rows = NULL;
    size_t n = 0;
    rc = store_cfgreg_entry_list(api_app(rq)->store, api_auth(rq)->org.id,
                                 search_param(rq, sbuf, sizeof sbuf), sort, desc, &pg, &rows, &n);
    if (rc)
        return err_set(&rq->err, E_INTERNAL, "internal", "the config registry could not be listed");
    return render_rows(rs, rows, n, offset, pg.has_more);
}

int cfgreg_analyses_list(struct req *rq, struct resp *rs)
{
    size_t limit, offset;
    int rc = req_page(rq, &limit, &offset);
    if (rc)
        return rc;
    char sbuf[256];
    struct page pg = {.limit = limit, .offset = offset};
    struct cfgreg_text *rows = NULL;
    size_t n = 0;
    rc = store_cfgreg_analysis_list(api_app(rq)->store, api_auth(rq)->org.id,
                                    search_param(rq, sbuf, sizeof sbuf), &pg, &rows, &n);
    if (rc)
        return err_set(&rq->err, E_INTERNAL, "internal",
                       "the config registry's analyses could not be listed");
    return render_rows(rs, rows, n, offset, pg.has_more);
}

int cfgreg_analysis_get(struct req *rq, struct resp *rs)
{
    char *text = NULL;
    int rc =
        store_cfgreg_analysis_get(api_app(rq)->store, api_auth(rq)->org.id, rq->params[0], &text);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "analysis %s not found", rq->params[0]);
    if (rc)
        return err_set(&rq->err, E_INTERNAL, "internal", "the analysis could not be read");
    json_t *v = json_loads(text, 0, NULL);
    xfree(text);
    if (!v)
        return err_set(&rq->err, E_INTERNAL, "internal", "the stored analysis is unreadable");
    resp_json(rs, 200, v);
    return 0;
}

/* Ends the running analysis of one entry (see cfgreg_end_orphans): 1 when
 * this call ended it. */
static int end_orphan(struct app *app, const struct cfgreg_text *row, const json_t *failure,
                      const char *when)
{
    json_t *e = json_loads(row->json, 0, NULL);
    json_t *an = json_object_get(e, "analysis");
    const char *id = jsonx_str(an, "id"), *domain = jsonx_str(e, "domain");
    int ended = 0;
    if (json_is_object(an) && id && domain) {
        json_object_set_new(an, "status", json_string("failed"));
        json_object_set_new(an, "finished_at", json_string(when));
        json_object_set(an, "failure", (json_t *)failure);
        char *text = jsonx_dump(e);
        int rc =
            store_cfgreg_entry_settle(app->store, row->org_id, domain, "failed", text, "running");
        xfree(text);
        ended = rc == 0;
        if (rc && rc != E_NOTFOUND)
            log_error("config registry: the entry of %s could not be ended", domain);
    }
    char *rec = NULL;
    json_t *r = NULL;
    if (ended && store_cfgreg_analysis_get(app->store, row->org_id, id, &rec) == 0 &&
        (r = json_loads(rec, 0, NULL)) != NULL && jsonx_str(r, "status") &&
        strcmp(jsonx_str(r, "status"), "running") == 0) {
        json_object_set_new(r, "status", json_string("failed"));
        json_object_set_new(r, "finished_at", json_string(when));
        json_object_set(r, "failure", (json_t *)failure);
        char *text = jsonx_dump(r);
        if (store_cfgreg_analysis_put(app->store, row->org_id, id, domain, 0, text) != 0)
            log_error("config registry: analysis %s could not be ended", id);
        xfree(text);
    }
    json_decref(r);
    xfree(rec);
    json_decref(e);
    return ended;
}

int cfgreg_end_orphans(struct app *app, const char *node, const char *code, const char *reason)
{
    char when[40];
    clock_fmt_rfc3339(clock_now_ms(), when, sizeof when);
    json_t *failure = json_pack("{s:s,s:s}", "code", code, "message", reason);
    struct page pg = {.limit = 100};
    int ended = 0, rc = 0;
    for (;;) {
        struct cfgreg_text *rows = NULL;
        size_t n = 0;
        if (store_cfgreg_running(app->store, node, &pg, &rows, &n) != 0) {
            log_error("config registry: the running analyses could not be listed");
            rc = -1;
            break;
        }
        int more = pg.has_more;
        for (size_t i = 0; i < n; i++) {
            /* An entry ended leaves the list: the next page starts after
             * the ones left as they were. */
            if (end_orphan(app, &rows[i], failure, when))
                ended++;
            else
                pg.offset++;
            xfree(rows[i].json);
        }
        xfree(rows);
        if (!more)
            break;
    }
    json_decref(failure);
    if (ended)
        log_warn("config registry: %d analyses ended: %s", ended, reason);
    return rc;
}
