/*
 * The audit log's entries and its endpoints (KERNEL_API_NEWER.md 1.4 "Audit
 * logs"). An entry is made just before its response is queued (the
 * transport's answering hook) and handed to the audit writer
 * (telemetry/audit.h), which spools it (one write(), so that a client never
 * sees 2xx for a change whose entry a crash could lose) and stores it in
 * batches: the request path never waits for the store. An exchange that
 * ended without an answer (its client left while a blocking handler ran)
 * gets its entry from the completed hook.
 */
#include "api/audit.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "api/api.h"
#include "cluster/orgslot.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/jsonx.h"
#include "core/share.h"
#include "core/xalloc.h"
#include "telemetry/audit.h"

static int mutating(const char *method)
{
    return strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0 &&
           strcmp(method, "OPTIONS") != 0;
}

/* A copy of the client's bytes s, cut to LIM_AUDIT_FIELD_BYTES, with every
 * byte outside printable ASCII as \xNN: a stored entry is always valid
 * UTF-8 and one line of an export. */
static char *field(const char *s)
{
    static const char hex[] = "0123456789abcdef";
    char *out = xmalloc(LIM_AUDIT_FIELD_BYTES + 1);
    size_t o = 0;
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        int esc = c < 0x20 || c >= 0x7f;
        if (o + (esc ? 4 : 1) > LIM_AUDIT_FIELD_BYTES)
            break;
        if (!esc) {
            out[o++] = (char)c;
            continue;
        }
        out[o++] = '\\';
        out[o++] = 'x';
        out[o++] = hex[c >> 4];
        out[o++] = hex[c & 15];
    }
    out[o] = '\0';
    return out;
}

static void make_entry(struct req *rq, int64_t duration_us)
{
    struct app *app = api_app(rq);
    if (!app || !app->audit || !rq->route || !rq->orig_path)
        return;
    unsigned flags = rq->route->flags;
    struct auth *a = rq->auth;
    const char *strategy, *org = "", *user = "";
    if (rq->via_session_url) {
        strategy = "session_token";
        user = rq->nparams ? rq->params[0] : "";
    } else if (flags & AUTH_ADMIN) {
        if (!app->cfg.admin_token[0])
            return; /* no admin API: the call was a 404 */
        strategy = "admin_token";
        user = "admin";
    } else if (flags & AUTH_KEY) {
        strategy = "api_key";
        if (a && a->key.id[0])
            user = a->key.id;
    } else {
        return; /* an unauthenticated route */
    }
    if (a && a->forwarded)
        return; /* the node that served it writes the entry (a hop is never skipped: a
                   client could send the hop header itself) */
    if (a && a->org.id[0])
        org = a->org.id;
    if ((rq->status == 503 || rq->status == 429) &&
        (strcmp(rq->err.code, AUDIT_SPOOL_FULL_CODE) == 0 ||
         strcmp(rq->err.code, AUDIT_QUEUE_FULL_CODE) == 0))
        return; /* refused before it acted, for want of room for this very entry */
    int failed = rq->status == 401;
    if (!failed && !mutating(rq->method))
        return;
    if (!failed && !org[0] && !(flags & AUTH_ADMIN))
        return; /* refused before authentication (404, 405, 413 on the header pass) */
    struct err full;
    err_init(&full);
    if (failed && audit_admit(app->audit, org, &full) != 0)
        return; /* a failed authentication changed nothing: with the spool full (the store
                   refusing) its entry is not kept, so that a flood of them cannot grow the
                   spool past its cap */
    struct audit_rec r = {0};
    int64_t ms = duration_us / 1000;
    r.ts = clock_now_ms() - ms;
    snprintf(r.org_id, sizeof r.org_id, "%s", org);
    snprintf(r.method, sizeof r.method, "%s", rq->method);
    snprintf(r.auth_strategy, sizeof r.auth_strategy, "%s", strategy);
    const char *pat = rq->route->pattern + (rq->route->pattern[0] == '/');
    snprintf(r.service, sizeof r.service, "%.*s", (int)strcspn(pat, "/"), pat);
    r.status = rq->status;
    r.duration_ms = ms;
    /* The path without its query: a session URL's token (jwt) never
     * reaches the log. */
    r.path = field(rq->orig_path);
    r.route = field(rq->route->pattern);
    char ip[64];
    r.client_ip = field(req_client_ip(rq, ip, sizeof ip));
    r.user_agent = field(req_header(rq, "User-Agent"));
    r.user_id = field(user);
    r.domain = field(req_header(rq, "Host"));
    if (a && a->audit_held) {
        a->audit_held = 0;
        audit_submit_held(app->audit, &r);
    } else {
        audit_submit(app->audit, &r);
    }
}

int api_audit_admit(struct req *rq, unsigned flags)
{
    struct app *app = api_app(rq);
    struct auth *a = rq->auth;
    if (!app || !app->audit || !mutating(rq->method) || (a && a->forwarded))
        return 0;
    const char *org = a && a->org.id[0] ? a->org.id : "";
    if (!org[0] && !(flags & AUTH_ADMIN))
        return 0; /* no entry: make_entry skips it */
    if (!a)
        return audit_admit(app->audit, org, &rq->err); /* no auth to hold a place with */
    if (a->audit_held)
        return 0;
    int rc = audit_reserve(app->audit, org, &rq->err);
    a->audit_held = rc == 0;
    return rc;
}

void api_audit_release(struct req *rq)
{
    struct app *app = api_app(rq);
    struct auth *a = rq->auth;
    if (!app || !a || !a->audit_held)
        return;
    a->audit_held = 0;
    audit_unreserve(app->audit, a->org.id);
}

void api_audit_answering(struct req *rq, const struct resp *rs, int64_t duration_us)
{
    (void)rs; /* rq->status is its status */
    make_entry(rq, duration_us);
}

void api_audit_completed(struct req *rq, int64_t duration_us)
{
    if (rq->status == 0)
        make_entry(rq, duration_us);
}

/* ---- queries ---- */

static const char *const methods[] = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"};

struct qargs {
    struct req *rq;
    char methods[64], excluded[64], users[1024];
    int bad; /* an argument failed (rq->err filled) */
};

/* Adds each comma-separated method of v to the set ",A,B," in set. */
static void add_methods(struct qargs *qa, const char *name, const char *v, char *set, size_t cap)
{
    while (*v && !qa->bad) {
        size_t n = strcspn(v, ",");
        char m[16] = "";
        if (n < sizeof m)
            for (size_t i = 0; i < n; i++)
                m[i] = (char)toupper((unsigned char)v[i]);
        int known = 0;
        for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
            known |= n < sizeof m && strcmp(m, methods[i]) == 0;
        if (!known) {
            qa->bad = err_set(&qa->rq->err, E_INVALID, "bad_request",
                              "%s: each method must be one of GET, POST, PUT, PATCH, DELETE, HEAD,"
                              " OPTIONS",
                              name);
            return;
        }
        size_t len = strlen(set);
        if (strstr(set, m) == NULL || len == 0)
            snprintf(set + len, cap - len, "%s%s,", len ? "" : ",", m);
        v += n + (v[n] == ',');
    }
}

/* Adds each comma-separated user id of v to the set ",a,b,". */
static void add_users(struct qargs *qa, const char *v)
{
    while (*v && !qa->bad) {
        size_t n = strcspn(v, ","), len = strlen(qa->users);
        if (n && len + n + 3 > sizeof qa->users) {
            qa->bad =
                err_set(&qa->rq->err, E_INVALID, "bad_request",
                        "search_user_id: at most %zu bytes of user ids", sizeof qa->users - 3);
            return;
        }
        if (n)
            snprintf(qa->users + len, sizeof qa->users - len, "%s%.*s,", len ? "" : ",", (int)n, v);
        v += n + (v[n] == ',');
    }
}

static void each_arg(void *ctx, const char *k, const char *v)
{
    struct qargs *qa = ctx;
    if (strcmp(k, "method") == 0 || strcmp(k, "method[]") == 0)
        add_methods(qa, "method", v, qa->methods, sizeof qa->methods);
    else if (strcmp(k, "exclude_method") == 0 || strcmp(k, "exclude_method[]") == 0)
        add_methods(qa, "exclude_method", v, qa->excluded, sizeof qa->excluded);
    else if (strcmp(k, "search_user_id") == 0 || strcmp(k, "search_user_id[]") == 0)
        add_users(qa, v);
}

/* The time argument name (RFC 3339) into *ms. */
static int time_arg(struct req *rq, const char *name, int64_t *ms)
{
    const char *v = req_query(rq, name);
    if (!v || !*v)
        return err_set(&rq->err, E_INVALID, "bad_request",
                       "%s is required: an RFC 3339 time (2026-11-26T00:00:00Z)", name);
    if (clock_parse_rfc3339(v, ms) != 0)
        return err_set(&rq->err, E_INVALID, "bad_request",
                       "%s must be an RFC 3339 time (2026-11-26T00:00:00Z)", name);
    return 0;
}

/* A cursor or page token: "<ts>.<id>", both positive decimal. */
static int cursor_arg(struct req *rq, const char *name, int64_t *ts, int64_t *id)
{
    const char *v = req_query(rq, name);
    *ts = *id = 0;
    if (!v || !*v)
        return 0;
    char *end;
    long long t = strtoll(v, &end, 10);
    long long i = *end == '.' && isdigit((unsigned char)end[1]) ? strtoll(end + 1, &end, 10) : 0;
    if (!isdigit((unsigned char)v[0]) || *end || t <= 0 || i <= 0)
        return err_set(&rq->err, E_INVALID, "bad_request",
                       "%s is not one this server gave (take it from the previous page)", name);
    *ts = t;
    *id = i;
    return 0;
}

/* The filters of both endpoints into q (whose strings live in qa, search and
 * the rest in rq), and the page size. */
static int parse_query(struct req *rq, struct qargs *qa, struct audit_query *q, char *search,
                       size_t search_cap, size_t *limit, size_t max_limit, size_t dflt)
{
    memset(q, 0, sizeof *q);
    memset(qa, 0, sizeof *qa);
    qa->rq = rq;
    int rc;
    if ((rc = time_arg(rq, "start", &q->start_ms)) || (rc = time_arg(rq, "end", &q->end_ms)))
        return rc;
    if (q->end_ms <= q->start_ms)
        return err_set(&rq->err, E_INVALID, "bad_request", "end must be after start");
    int64_t oldest = clock_now_ms() - audit_retention_ms(api_app(rq)->audit);
    if (q->start_ms < oldest)
        q->start_ms = oldest; /* entries past the retention are gone, pruned or not */
    req_query_each(rq, each_arg, qa);
    if (qa->bad)
        return qa->bad;
    q->methods = qa->methods;
    q->exclude_methods = qa->excluded;
    q->user_ids = qa->users;
    const char *svc = req_query(rq, "service");
    q->service = svc ? svc : "";
    if (strlen(q->service) > 31)
        return err_set(&rq->err, E_INVALID, "bad_request",
                       "service: at most 31 bytes (a path's first segment: browsers, profiles)");
    const char *st = req_query(rq, "auth_strategy");
    q->auth_strategy = st ? st : "";
    if (*q->auth_strategy && strcmp(q->auth_strategy, "api_key") != 0 &&
        strcmp(q->auth_strategy, "session_token") != 0 &&
        strcmp(q->auth_strategy, "admin_token") != 0)
        return err_set(&rq->err, E_INVALID, "bad_request",
                       "auth_strategy must be api_key, session_token or admin_token");
    const char *s = req_query(rq, "search");
    s = s ? s : "";
    if (strlen(s) >= search_cap)
        return err_set(&rq->err, E_INVALID, "bad_request", "search: at most %zu bytes",
                       search_cap - 1);
    for (size_t i = 0;; i++) {
        search[i] = (char)tolower((unsigned char)s[i]);
        if (!s[i])
            break;
    }
    q->search = search;
    const char *l = req_query(rq, "limit");
    *limit = dflt;
    if (l) {
        char *end;
        long v = strtol(l, &end, 10);
        if (!*l || *end || v < 1 || (size_t)v > max_limit)
            return err_set(&rq->err, E_INVALID, "bad_request",
                           "limit must be an integer from 1 to %zu", max_limit);
        *limit = (size_t)v;
    }
    return 0;
}

static json_t *entry_json(const struct audit_rec *r)
{
    char ts[40];
    json_t *o = json_object();
    json_object_set_new(o, "timestamp", json_string(clock_fmt_rfc3339(r->ts, ts, sizeof ts)));
    json_object_set_new(o, "method", json_string(r->method));
    json_object_set_new(o, "path", json_string(r->path));
    json_object_set_new(o, "route", json_string(r->route));
    json_object_set_new(o, "status", json_integer(r->status));
    json_object_set_new(o, "duration_ms", json_integer(r->duration_ms));
    json_object_set_new(o, "client_ip", json_string(r->client_ip));
    json_object_set_new(o, "user_agent", json_string(r->user_agent));
    json_object_set_new(o, "user_id", json_string(r->user_id));
    json_object_set_new(o, "email", json_string("")); /* no users, keys only */
    json_object_set_new(o, "domain", json_string(r->domain ? r->domain : ""));
    json_object_set_new(o, "auth_strategy", json_string(r->auth_strategy));
    json_object_set_new(o, "service", json_string(r->service));
    return o;
}

static void free_rows(struct audit_rec *rows, size_t n)
{
    for (size_t i = 0; i < n; i++)
        audit_rec_clear(&rows[i]);
    xfree(rows);
}

static int list_org(struct req *rq, struct resp *rs, const char *org)
{
    struct qargs qa;
    struct audit_query q;
    char search[257];
    size_t limit;
    int rc = parse_query(rq, &qa, &q, search, sizeof search, &limit, LIM_AUDIT_PAGE, 100);
    if (rc || (rc = cursor_arg(rq, "page_token", &q.after_ts, &q.after_id)))
        return rc;
    struct page pg = {.limit = limit};
    struct audit_rec *rows = NULL;
    size_t n = 0;
    if ((rc = store_audit_list(api_app(rq)->store, org, &q, &pg, &rows, &n)))
        return err_set(&rq->err, rc, "internal", "the audit log could not be read");
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, entry_json(&rows[i]));
    if (pg.has_more && n)
        resp_header(rs, "X-Next-Page-Token", "%lld.%lld", (long long)rows[n - 1].ts,
                    (long long)rows[n - 1].id);
    resp_header(rs, "X-Has-More", "%s", pg.has_more ? "true" : "false");
    free_rows(rows, n);
    resp_json(rs, 200, arr);
    return 0;
}

int audit_list(struct req *rq, struct resp *rs)
{
    int64_t start = 0, end = 0;
    if (time_arg(rq, "start", &start) == 0 && time_arg(rq, "end", &end) == 0 &&
        end - start > LIM_AUDIT_LIST_WINDOW_MS)
        return err_set(&rq->err, E_INVALID, "bad_request",
                       "end - start: at most 30 days (export longer ranges with"
                       " /audit-logs/export/chunk)");
    return list_org(rq, rs, api_auth(rq)->org.id);
}

int audit_admin_list(struct req *rq, struct resp *rs)
{
    const char *org = req_query(rq, "org_id");
    if (org && strlen(org) >= STORE_ID)
        return err_set(&rq->err, E_INVALID, "bad_request", "org_id: at most %d bytes",
                       STORE_ID - 1);
    return list_org(rq, rs, org ? org : "");
}

/* text (len bytes) as a gzip member into *out (xmalloc'd). */
static int gzip_bytes(const char *text, size_t len, char **out, size_t *outlen)
{
    z_stream z = {0};
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -1;
    size_t cap = deflateBound(&z, (uLong)len);
    char *buf = xmalloc(cap);
    z.next_in = (Bytef *)(uintptr_t)text;
    z.avail_in = (uInt)len;
    z.next_out = (Bytef *)buf;
    z.avail_out = (uInt)cap;
    int rc = deflate(&z, Z_FINISH);
    *outlen = z.total_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END) {
        xfree(buf);
        return -1;
    }
    *out = buf;
    return 0;
}

/* Export chunks being built: the server's and each organization's share
 * (LIM_AUDIT_EXPORTS*). An export belongs to no session: its session share
 * is the server's cap, so the organization's is the one that binds. */
static struct share exports = SHARE_INIT("audit export chunks in progress", LIM_AUDIT_EXPORTS,
                                         LIM_AUDIT_EXPORTS_PER_ORG, LIM_AUDIT_EXPORTS);

static int export_chunk(struct req *rq, struct resp *rs);

/* GET /audit-logs/export/chunk, on a blocking thread within the
 * organization's share of export chunks: this node's, and on a cluster the
 * cluster's (every node's chunks read the one database). */
int audit_export_chunk(struct req *rq, struct resp *rs)
{
    const char *org = api_auth(rq)->org.id;
    struct app *app = api_app(rq);
    int rc = share_take_or_err(&exports, org, "", 1, &rq->err);
    if (rc)
        return rc;
    char slot[STORE_ID];
    rc = orgslot_take(app->store, app->node, "audit_export", org, LIM_AUDIT_EXPORTS_PER_ORG,
                      LIM_AUDIT_EXPORT_SLOT_TTL_MS, exports.what, slot, &rq->err);
    if (rc == 0) {
        rc = export_chunk(rq, rs);
        orgslot_give(app->store, slot);
    }
    share_give(&exports, org, "");
    return rc;
}

static int export_chunk(struct req *rq, struct resp *rs)
{
    const char *fmt = req_query(rq, "format");
    int gz = !fmt || strcmp(fmt, "jsonl.gz") == 0;
    if (!gz && strcmp(fmt, "jsonl") != 0)
        return err_set(&rq->err, E_INVALID, "bad_request", "format must be jsonl or jsonl.gz");
    struct qargs qa;
    struct audit_query q;
    char search[257];
    size_t limit;
    int rc = parse_query(rq, &qa, &q, search, sizeof search, &limit, LIM_AUDIT_CHUNK, 1000);
    if (rc || (rc = cursor_arg(rq, "cursor", &q.after_ts, &q.after_id)))
        return rc;
    struct page pg = {.limit = limit};
    struct audit_rec *rows = NULL;
    size_t n = 0;
    if ((rc = store_audit_list(api_app(rq)->store, api_auth(rq)->org.id, &q, &pg, &rows, &n)))
        return err_set(&rq->err, rc, "internal", "the audit log could not be read");
    /* The chunk ends at the last whole entry under LIM_AUDIT_CHUNK_BYTES (the
     * first always fits: an entry is at most LIM_AUDIT_SPOOL_RECORD_BYTES);
     * the rows left out are the next chunk's, as rows past limit are. */
    struct buf b;
    buf_init(&b, LIM_AUDIT_CHUNK_BYTES);
    size_t kept = 0;
    for (; kept < n && rc == 0; kept++) {
        json_t *o = entry_json(&rows[kept]);
        char *line = jsonx_dump(o);
        json_decref(o);
        size_t len = strlen(line);
        if (b.len + len + 1 > LIM_AUDIT_CHUNK_BYTES && kept > 0) {
            xfree(line);
            break;
        }
        rc = buf_append(&b, line, len);
        if (rc == 0)
            rc = buf_append(&b, "\n", 1);
        xfree(line);
    }
    int more = pg.has_more || kept < n;
    if (more && kept)
        resp_header(rs, "X-Next-Cursor", "%lld.%lld", (long long)rows[kept - 1].ts,
                    (long long)rows[kept - 1].id);
    resp_header(rs, "X-Has-More", "%s", more ? "true" : "false");
    resp_header(rs, "X-Row-Count", "%zu", kept);
    free_rows(rows, n);
    if (rc) {
        buf_free(&b);
        return err_set(&rq->err, E_INTERNAL, "internal", "the export chunk is too large");
    }
    char *body = NULL;
    size_t len = b.len;
    if (gz) {
        rc = gzip_bytes(b.p ? b.p : "", b.len, &body, &len);
        buf_free(&b);
        if (rc)
            return err_set(&rq->err, E_INTERNAL, "internal", "gzip compression failed");
    } else {
        body = b.p ? b.p : xstrdup(""); /* b's bytes, taken */
    }
    /* The official client's download checks every chunk against it. */
    char sum[CRYPTO_SHA256_HEX];
    crypto_sha256_hex(body, len, sum);
    resp_header(rs, "X-Content-Sha256", "%s", sum);
    resp_text(rs, 200, gz ? "application/gzip" : "application/x-ndjson", body, len);
    return 0;
}
