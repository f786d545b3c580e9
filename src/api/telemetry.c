/* Telemetry endpoints and session hooks (see api/telemetry.h). */
#include "api/telemetry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "core/clock.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/xalloc.h"
#include "domain/telemetry_cfg.h"
#include "proxy/netguard.h"
#include "runtime/sandbox.h"
#include "telemetry/otlp.h"
#include "telemetry/telemetry.h"

#define DEST_MAX_HEADERS 32

/* ---- shared query parsing ---- */

struct qctx {
    unsigned mask;
    int bad, given;
    struct req *rq;
};

static void collect_category(void *ctx, const char *k, const char *v)
{
    struct qctx *q = ctx;
    if (strcmp(k, "category") != 0)
        return;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    for (char *p = buf, *end; p && *p; p = end) {
        end = strchr(p, ',');
        if (end)
            *end++ = '\0';
        int c = telem_cat_parse(p);
        q->given = 1;
        if (strcmp(p, "monitor") == 0)
            continue; /* the SDK's collector-health category: never produced here */
        if (c < 0) {
            q->bad = 1;
            err_field(&q->rq->err, "category", "%s is not a telemetry category", p);
        } else {
            q->mask |= 1u << c;
        }
    }
}

static int parse_categories(struct req *rq, unsigned *mask)
{
    struct qctx q = {0, 0, 0, rq};
    req_query_each(rq, collect_category, &q);
    *mask = q.given ? q.mask : (1u << TELEM_NCATS) - 1;
    return q.bad ? E_INVALID : 0;
}

static int load_session(struct req *rq, struct session_rec *s)
{
    struct auth *a = api_auth(rq);
    memset(s, 0, sizeof *s);
    int rc = store_session_get(api_app(rq)->store, a->org.id, a->project.id, rq->params[0], 1, s);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "browser session %s not found", rq->params[0]);
    return rc;
}

/* ---- events list ---- */

#define TELEM_DEFAULT_WINDOW_MS (5 * 60 * 1000)

/* An RFC 3339 time, or a duration ("90s", "5m", "2h", "1d") meaning that
 * long before now, into ms since the epoch. */
static int parse_when(const char *s, int64_t now, int64_t *out)
{
    if (clock_parse_rfc3339(s, out) == 0)
        return 0;
    size_t n = strlen(s);
    if (n < 2 || n > 12 || strspn(s, "0123456789") != n - 1)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i + 1 < n; i++)
        v = v * 10 + (s[i] - '0');
    int64_t unit = s[n - 1] == 's'   ? 1000
                   : s[n - 1] == 'm' ? 60000
                   : s[n - 1] == 'h' ? 3600000
                   : s[n - 1] == 'd' ? 86400000
                                     : 0;
    if (!unit)
        return -1;
    *out = now - v * unit;
    if (*out < 1)
        *out = 1;
    return 0;
}

int telemetry_events_get(struct req *rq, struct resp *rs)
{
    struct telem_query q;
    memset(&q, 0, sizeof q);
    struct page pg = {0};
    unsigned mask = 0;
    int bad = parse_categories(rq, &mask) != 0;
    bad |= req_page(rq, &pg.limit, &pg.offset) != 0;
    const char *order = req_query(rq, "order");
    if (order && strcmp(order, "asc") != 0 && strcmp(order, "desc") != 0)
        bad = err_field(&rq->err, "order", "must be asc or desc") != 0;
    q.desc = order && strcmp(order, "desc") == 0;
    const char *since = req_query(rq, "since"), *until = req_query(rq, "until");
    int64_t now = clock_now_ms();
    if (since && parse_when(since, now, &q.since_ms) != 0)
        bad = err_field(&rq->err, "since",
                        "must be an RFC 3339 timestamp or a duration like 5m (that long ago)") != 0;
    if (until && parse_when(until, now, &q.until_ms) != 0)
        bad = err_field(&rq->err, "until",
                        "must be an RFC 3339 timestamp or a duration like 5m (that long ago)") != 0;
    if (q.desc && since)
        bad = err_field(&rq->err, "since", "cannot be combined with order=desc") != 0;
    if (bad)
        return E_INVALID;
    /* "since ... Defaults to 5m. Ignored when offset is set." */
    if (req_query(rq, "offset"))
        q.since_ms = 0;
    else if (!since && !q.desc)
        q.since_ms = now - TELEM_DEFAULT_WINDOW_MS;
    if (q.until_ms)
        q.until_ms--; /* until is exclusive; the store's bound is inclusive */
    if (mask != (1u << TELEM_NCATS) - 1)
        for (int c = 0; c < TELEM_NCATS; c++)
            if ((mask >> c) & 1u)
                q.categories[q.ncategories++] = telem_cat_name((enum telem_cat)c);
    struct session_rec s;
    int rc = load_session(rq, &s);
    if (rc)
        return rc;
    if (mask == 0) { /* only categories this server never produces */
        session_rec_clear(&s);
        resp_json(rs, 200, json_array());
        resp_page(rs, pg.offset, 0, 0);
        return 0;
    }
    (void)telemetry_flush(s.id, 2000);
    struct telem_event_rec *rows = NULL;
    size_t n = 0;
    rc = store_telem_events_list(api_app(rq)->store, s.id, &q, &pg, &rows, &n);
    session_rec_clear(&s);
    if (rc)
        return err_set(&rq->err, rc, "internal", "telemetry events could not be read");
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *ev = json_loads(rows[i].text, 0, NULL);
        json_array_append_new(arr, json_pack("{s:I,s:o}", "seq", (json_int_t)rows[i].seq, "event",
                                             ev ? ev : json_object()));
        telem_event_rec_clear(&rows[i]);
    }
    xfree(rows);
    resp_json(rs, 200, arr);
    resp_page(rs, pg.offset, n, pg.has_more);
    return 0;
}

/* ---- SSE ---- */

struct sse {
    struct http_stream *hs;
    struct telem_sub *sub;
};

static void sse_wake(void *ctx)
{
    struct sse *x = ctx;
    if (x->hs)
        http_stream_wake(x->hs);
}

static long sse_read(void *ctx, char *buf, size_t cap)
{
    struct sse *x = ctx;
    return telemetry_sub_read(x->sub, buf, cap);
}

static void sse_free(void *ctx)
{
    struct sse *x = ctx;
    telemetry_sub_free(x->sub); /* no wake after this returns */
    xfree(x);
}

static int parse_seq(const char *s, uint64_t *out)
{
    if (!s || !*s || strlen(s) > 19)
        return -1;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return 0;
}

int telemetry_stream_get(struct req *rq, struct resp *rs)
{
    unsigned mask;
    if (parse_categories(rq, &mask) != 0)
        return E_INVALID;
    const char *replay = req_query(rq, "replay");
    if (replay && strcmp(replay, "all") != 0)
        return err_field(&rq->err, "replay", "must be all");
    const char *last = req_header(rq, "Last-Event-ID");
    uint64_t after = 0;
    if (last && parse_seq(last, &after) != 0)
        return err_field(&rq->err, "Last-Event-ID", "must be the id of an event (an integer)");
    struct session_rec s;
    int rc = load_session(rq, &s);
    if (rc)
        return rc;
    if (!last && !replay)
        after = telemetry_last_seq(s.id);
    struct sse *x = xcalloc(1, sizeof *x);
    x->sub = telemetry_sub_new(s.id, after, mask, sse_wake, x);
    session_rec_clear(&s);
    resp_stream(rs, 200, "text/event-stream", sse_read, sse_free, x, &x->hs);
    resp_header(rs, "Cache-Control", "no-cache");
    resp_header(rs, "X-Accel-Buffering", "no");
    return 0;
}

/* ---- destinations ---- */

static int name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > 255)
        return 0;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

static json_t *render_dest(const struct otlp_dest_rec *d)
{
    char c[40], u[40];
    json_t *h = json_loads(d->headers ? d->headers : "{}", 0, NULL);
    json_t *names = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(h, k, v) json_array_append_new(names, json_string(k));
    json_decref(h);
    return json_pack("{s:s,s:s,s:s,s:o,s:s,s:s,s:o}", "id", d->id, "name", d->name, "endpoint",
                     d->endpoint, "header_names", names, "created_at",
                     clock_fmt_rfc3339(d->created_at, c, sizeof c), "updated_at",
                     clock_fmt_rfc3339(d->updated_at, u, sizeof u), "stats", otlp_stats(d->id));
}

/* Validates and applies body fields onto d (create: name and endpoint
 * required). */
static int apply_dest(struct req *rq, const json_t *body, struct otlp_dest_rec *d, int create)
{
    int bad = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)body, k, v)
    {
        if (strcmp(k, "name") && strcmp(k, "endpoint") && strcmp(k, "headers"))
            bad = err_field(&rq->err, k, "unknown field");
    }
    const json_t *name = json_object_get(body, "name");
    if (name) {
        if (!json_is_string(name) || !name_ok(json_string_value(name)))
            bad = err_field(&rq->err, "name", "must match ^[a-zA-Z0-9._-]{1,255}$");
        else
            snprintf(d->name, sizeof d->name, "%s", json_string_value(name));
    } else if (create) {
        bad = err_field(&rq->err, "name", "is required");
    }
    const json_t *ep = json_object_get(body, "endpoint");
    if (ep) {
        char host[256], path[1024];
        int port;
        if (!json_is_string(ep) || strlen(json_string_value(ep)) >= sizeof d->endpoint)
            bad = err_field(&rq->err, "endpoint", "must be an http:// URL of at most 2047 bytes");
        else if (otlp_parse_endpoint(json_string_value(ep), host, sizeof host, &port, path,
                                     sizeof path, &rq->err) != 0)
            bad = E_INVALID;
        else if (netguard_check_literal(host, port) != 0)
            /* The export connects from this host: the egress's address rule
             * applies here, and again after DNS at every connect. */
            bad = err_field(&rq->err, "endpoint",
                            "must not name a loopback, link-local, private or reserved address "
                            "(this server does not send requests there)");
        else
            snprintf(d->endpoint, sizeof d->endpoint, "%s", json_string_value(ep));
    } else if (create) {
        bad = err_field(&rq->err, "endpoint", "is required");
    }
    const json_t *h = json_object_get(body, "headers");
    if (h) {
        if (!json_is_object(h) || json_object_size(h) > DEST_MAX_HEADERS) {
            bad = err_field(&rq->err, "headers", "must be an object of at most %d string values",
                            DEST_MAX_HEADERS);
        } else {
            json_object_foreach((json_t *)h, k, v)
            {
                size_t kl = strlen(k);
                if (kl == 0 || kl > 128 ||
                    strspn(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") !=
                        kl)
                    bad = err_field(&rq->err, "headers", "%.64s: not a valid header name", k);
                else if (!json_is_string(v) || strpbrk(json_string_value(v), "\r\n") ||
                         strlen(json_string_value(v)) > 4096)
                    bad = err_field(&rq->err, "headers",
                                    "%.64s: value must be a string of at most "
                                    "4096 bytes without line breaks",
                                    k);
            }
            if (!bad) {
                xfree(d->headers);
                d->headers = jsonx_dump(h);
            }
        }
    }
    return bad ? E_INVALID : 0;
}

int telemetry_dest_create(struct req *rq, struct resp *rs)
{
    json_t *body;
    int rc = req_json_object(rq, 0, &body);
    if (rc)
        return rc;
    struct otlp_dest_rec d;
    memset(&d, 0, sizeof d);
    snprintf(d.org_id, sizeof d.org_id, "%s", api_auth(rq)->org.id);
    rc = apply_dest(rq, body, &d, 1);
    json_decref(body);
    if (rc == 0) {
        /* Counted with the insert, as one step per org on every node. */
        rc = store_otlp_dest_create(api_app(rq)->store, &d, LIM_OTLP_DESTS_PER_ORG);
        if (rc == E_LIMIT)
            rc = err_set(&rq->err, E_CONFLICT, "limit_exceeded",
                         "an organization may have at most %d OTLP destinations "
                         "(LIM_OTLP_DESTS_PER_ORG); delete one first",
                         LIM_OTLP_DESTS_PER_ORG);
        else if (rc == E_CONFLICT)
            err_set(&rq->err, rc, "conflict", "an OTLP destination named %s already exists",
                    d.name);
    }
    if (rc == 0)
        resp_json(rs, 200, render_dest(&d));
    otlp_dest_rec_clear(&d);
    return rc;
}

int telemetry_dest_list(struct req *rq, struct resp *rs)
{
    struct page pg = {0};
    int rc = req_page(rq, &pg.limit, &pg.offset);
    if (rc)
        return rc;
    struct otlp_dest_rec *rows = NULL;
    size_t n = 0;
    rc = store_otlp_dest_list(api_app(rq)->store, api_auth(rq)->org.id, &pg, &rows, &n);
    if (rc)
        return err_set(&rq->err, rc, "internal", "destinations could not be read");
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(arr, render_dest(&rows[i]));
        otlp_dest_rec_clear(&rows[i]);
    }
    xfree(rows);
    resp_json(rs, 200, arr);
    resp_page(rs, pg.offset, n, pg.has_more);
    return 0;
}

static int load_dest(struct req *rq, struct otlp_dest_rec *d)
{
    memset(d, 0, sizeof *d);
    int rc = store_otlp_dest_get(api_app(rq)->store, api_auth(rq)->org.id, rq->params[0], d);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "OTLP destination %s not found", rq->params[0]);
    return rc;
}

int telemetry_dest_get(struct req *rq, struct resp *rs)
{
    struct otlp_dest_rec d;
    int rc = load_dest(rq, &d);
    if (rc == 0)
        resp_json(rs, 200, render_dest(&d));
    otlp_dest_rec_clear(&d);
    return rc;
}

int telemetry_dest_update(struct req *rq, struct resp *rs)
{
    json_t *body;
    int rc = req_json_object(rq, 0, &body);
    if (rc)
        return rc;
    struct otlp_dest_rec d;
    if ((rc = load_dest(rq, &d)) == 0 && (rc = apply_dest(rq, body, &d, 0)) == 0) {
        d.updated_at = clock_now_ms();
        rc = store_otlp_dest_update(api_app(rq)->store, &d);
        if (rc == E_CONFLICT)
            err_set(&rq->err, rc, "conflict", "an OTLP destination named %s already exists",
                    d.name);
    }
    if (rc == 0)
        resp_json(rs, 200, render_dest(&d));
    json_decref(body);
    otlp_dest_rec_clear(&d);
    return rc;
}

int telemetry_dest_delete(struct req *rq, struct resp *rs)
{
    struct otlp_dest_rec d;
    int rc = load_dest(rq, &d);
    if (rc == 0)
        rc = store_otlp_dest_delete(api_app(rq)->store, d.org_id, d.id);
    otlp_dest_rec_clear(&d);
    if (rc == 0)
        resp_empty(rs, 204);
    return rc;
}

/* ---- session hooks ---- */

static const json_t *active_cfg(const json_t *doc)
{
    const json_t *t = json_object_get(doc, "telemetry");
    return json_is_object(t) ? t : NULL;
}

static int tel_prepare(struct session_ctx *sc, struct err *e)
{
    const json_t *sel = telcfg_destination(json_object_get(sc->body, "telemetry"));
    json_t *cfg = json_object_get(sc->doc, "telemetry");
    if (!sel || !json_is_object(cfg))
        return 0;
    const char *ref = jsonx_str(sel, "id") ? jsonx_str(sel, "id") : jsonx_str(sel, "name");
    struct otlp_dest_rec d;
    memset(&d, 0, sizeof d);
    int rc = ref ? store_otlp_dest_get(sc->app->store, sc->rec->org_id, ref, &d) : E_NOTFOUND;
    /* {id} must match the id, {name} the name. */
    if (rc == 0 && ((jsonx_str(sel, "id") && strcmp(d.id, ref) != 0) ||
                    (!jsonx_str(sel, "id") && strcmp(d.name, ref) != 0)))
        rc = E_NOTFOUND;
    if (rc == E_NOTFOUND)
        rc = err_set(e, E_NOTFOUND, "not_found",
                     "telemetry.export.otlp.destination: OTLP destination %s not found in this "
                     "organization",
                     ref ? ref : "");
    else if (rc == 0)
        telcfg_set_destination(cfg, d.id);
    otlp_dest_rec_clear(&d);
    return rc;
}

static void tel_started(struct session_ctx *sc, const char *ws_url)
{
    const json_t *cfg = active_cfg(sc->doc);
    const json_t *otlp = json_object_get(json_object_get(cfg, "export"), "otlp");
    const char *dest = jsonx_str(otlp, "destination");
    struct otlp_dest_rec d;
    memset(&d, 0, sizeof d);
    struct telem_export exp = {0};
    json_t *headers = NULL;
    if (dest && jsonx_bool(otlp, "enabled", 0) &&
        store_otlp_dest_get(sc->app->store, sc->rec->org_id, dest, &d) == 0) {
        headers = json_loads(d.headers ? d.headers : "{}", 0, NULL);
        exp = (struct telem_export){d.id, d.endpoint, headers};
    } else if (dest) {
        log_warn("telemetry %s: destination %s vanished before start; not exporting", sc->rec->id,
                 dest);
    }
    telemetry_session_open(sc->rec->id, sc->rec->org_id, cfg, exp.endpoint ? &exp : NULL, ws_url);
    json_decref(headers);
    otlp_dest_rec_clear(&d);
}

void telemetry_platform(const char *session_id, const char *name, json_t *data)
{
    /* The SDK's api_call shape: operation_id names the API operation;
     * action and the changed setting say what the server did. */
    json_t *d = json_pack("{s:s,s:s}", "operation_id", "updateBrowser", "action", name);
    json_object_update(d, data);
    json_decref(data);
    struct telem_src src = {"kernel_api", name, 0};
    telemetry_emit_src(session_id, TELEM_PLATFORM, "api_call", &src, d);
}

static int tel_update(struct session_ctx *sc, const char *ws_url, struct err *e)
{
    (void)ws_url;
    (void)e;
    const json_t *cfg = active_cfg(sc->doc);
    /* A session whose telemetry starts only now (or was not opened by this
     * process) is opened here. */
    telemetry_session_open(sc->rec->id, sc->rec->org_id, cfg, NULL, ws_url);
    static const struct {
        const char *field, *event;
    } actions[] = {
        {"viewport", "viewport_resize"},   {"profile", "profile_load"},
        {"proxy", "proxy_switch"},         {"proxy_id", "proxy_switch"},
        {"telemetry", "telemetry_update"},
    };
    for (size_t i = 0; i < sizeof actions / sizeof actions[0]; i++) {
        const json_t *v = json_object_get(sc->body, actions[i].field);
        if (!v)
            continue;
        json_t *d = strcmp(actions[i].field, "telemetry") == 0
                        ? json_pack("{s:o}", "telemetry", telcfg_to_record(cfg))
                        : json_pack("{s:O}", actions[i].field, v);
        telemetry_platform(sc->rec->id, actions[i].event, d);
    }
    return 0;
}

void telemetry_on_oom_kill(void *ctx, const char *session_id, long long kills)
{
    (void)ctx;
    struct sandbox_oom o;
    int rc = sandbox_oom_report(session_id, &o);
    json_t *d = json_pack("{s:i,s:s,s:I,s:I}", "pid", rc == 0 ? o.pid : 0, "process_name",
                          rc == 0 && o.process_name[0] ? o.process_name : "unknown", "rss_kb",
                          (json_int_t)(rc == 0 ? o.rss_kb : 0), "kills", (json_int_t)kills);
    json_object_set_new(d, "constraint",
                        json_string(rc == 0 && o.constraint[0] ? o.constraint : "memcg"));
    struct telem_src src = {"local_process", "cgroup_memory", 0};
    telemetry_emit_src(session_id, TELEM_SYSTEM, "system_oom_kill", &src, d);
}

void telemetry_on_pressure_kill(void *ctx, const char *session_id, const struct sandbox_oom *v)
{
    (void)ctx;
    json_t *d =
        json_pack("{s:i,s:s,s:I,s:I,s:s}", "pid", v->pid, "process_name",
                  v->process_name[0] ? v->process_name : "unknown", "rss_kb", (json_int_t)v->rss_kb,
                  "kills", (json_int_t)1, "constraint", v->constraint);
    struct telem_src src = {"local_process", "cgroup_memory_pressure", 0};
    telemetry_emit_src(session_id, TELEM_SYSTEM, "system_oom_kill", &src, d);
}

static void tel_ending(struct session_ctx *sc, const char *reason)
{
    if (strncmp(reason, "browser exited", 14) == 0) {
        int sig = 0;
        const char *p = strstr(reason, "signal ");
        if (p)
            sig = (int)strtol(p + 7, NULL, 10);
        /* The SDK's service_crashed; a SIGKILL is what the session's memory
         * limit (cgroup OOM kill) sends, so it is flagged as a likely OOM. */
        json_t *d = json_pack("{s:s,s:s,s:i,s:s}", "phase", "running", "service_name", "chromium",
                              "pid", sc->rec->pid, "reason", reason);
        if (sig)
            json_object_set_new(d, "signal", json_integer(sig));
        if (sig == 9)
            json_object_set_new(d, "suspected_oom", json_true());
        struct telem_src src = {"local_process", "chromium_exit", 0};
        telemetry_emit_src(sc->rec->id, TELEM_SYSTEM, "service_crashed", &src, d);
    }
    telemetry_session_close(sc->rec->id);
}

static void tel_cdp_message(const char *session_id, const void *conn, const char *method,
                            size_t len)
{
    telemetry_cdp_command(session_id, conn, method, len);
}

static void tel_cdp_client(const char *session_id, const void *conn, int attached,
                           uint64_t from_browser)
{
    telemetry_cdp_client(session_id, conn, attached, from_browser);
}

const struct session_ext telemetry_session_ext = {
    .name = "telemetry",
    .prepare = tel_prepare,
    .started = tel_started,
    .update = tel_update,
    .ending = tel_ending,
    .cdp_message = tel_cdp_message,
    .cdp_client = tel_cdp_client,
};
