#include "api/search.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api.h"
#include "api/curl.h"
#include "cluster/orgslot.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/share.h"
#include "core/xalloc.h"
#include "domain/htmltext.h"
#include "domain/searchreq.h"
#include "proxy/httpc.h"
#include "runtime/brender.h"
#include "runtime/sessmgr.h"

#define PROVIDER_NAME_MAX     64
#define PROVIDER_TIMEOUT_DFLT 10000
#define CONFIG_FILE_MAX       (1u << 20)

/* ---- providers (BROWSERD_SEARCH_PROVIDERS) ---- */

enum protocol { PROTO_SEARXNG, PROTO_BRAVE };

struct provider {
    char *key; /* NULL: none */
    enum protocol proto;
    int tls;
    int timeout_ms;
    char name[PROVIDER_NAME_MAX];
    char host[256]; /* to dial (no brackets) */
    char port[8];
    char hostfield[300]; /* the Host field ("name:port" unless the default) */
    char prefix[1024];   /* the endpoint's path, no trailing '/' */
};

static struct provider providers[LIM_SEARCH_PROVIDERS];
static size_t nproviders;
static char config_error[300];
static pthread_once_t config_once = PTHREAD_ONCE_INIT;

/* Provider calls in flight: the server's, each org's and each project's
 * share (LIM_SEARCH_INFLIGHT*). */
static struct share inflight = SHARE_INIT("search provider calls in flight", LIM_SEARCH_INFLIGHT,
                                          LIM_SEARCH_INFLIGHT_PER_ORG, LIM_SEARCH_INFLIGHT_PER_ORG);
/* Searches rendering their contents: the server's, each org's and each
 * session's share (LIM_SEARCH_RENDER_INFLIGHT*). A search holds one unit
 * from before its providers are asked until its last page is read. */
static struct share renders =
    SHARE_INIT("search render fetches in flight", LIM_SEARCH_RENDER_INFLIGHT,
               LIM_SEARCH_RENDER_INFLIGHT_PER_ORG, LIM_SEARCH_RENDER_INFLIGHT_PER_SESSION);

static const char *proto_name(enum protocol p)
{
    return p == PROTO_BRAVE ? "brave" : "searxng";
}

/* Splits "http[s]://host[:port][/prefix]" into p. 0, or -1. */
static int parse_endpoint(const char *url, struct provider *p)
{
    const char *rest;
    if (strncmp(url, "https://", 8) == 0) {
        p->tls = 1;
        rest = url + 8;
    } else if (strncmp(url, "http://", 7) == 0) {
        rest = url + 7;
    } else {
        return -1;
    }
    size_t hl = strcspn(rest, "/?#");
    if (hl == 0 || hl >= sizeof p->hostfield || strchr("?#", rest[hl] ? rest[hl] : '/'))
        return -1;
    snprintf(p->hostfield, sizeof p->hostfield, "%.*s", (int)hl, rest);
    const char *h = p->hostfield, *colon;
    if (h[0] == '[') {
        const char *end = strchr(h, ']');
        if (!end)
            return -1;
        snprintf(p->host, sizeof p->host, "%.*s", (int)(end - h - 1), h + 1);
        colon = end[1] == ':' ? end + 1 : NULL;
        if (end[1] && !colon)
            return -1;
    } else {
        colon = strrchr(h, ':');
        snprintf(p->host, sizeof p->host, "%.*s", (int)(colon ? (size_t)(colon - h) : strlen(h)),
                 h);
    }
    if (colon) {
        char *end;
        long port = strtol(colon + 1, &end, 10);
        if (*end || port < 1 || port > 65535)
            return -1;
        snprintf(p->port, sizeof p->port, "%ld", port);
    } else {
        snprintf(p->port, sizeof p->port, "%s", p->tls ? "443" : "80");
    }
    const char *path = rest + hl;
    size_t pl = strlen(path);
    while (pl && path[pl - 1] == '/')
        pl--;
    if (pl >= sizeof p->prefix || strpbrk(path, " \r\n\t"))
        return -1;
    snprintf(p->prefix, sizeof p->prefix, "%.*s", (int)pl, path);
    return p->host[0] ? 0 : -1;
}

static int config_fail(size_t i, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int config_fail(size_t i, const char *fmt, ...)
{
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(config_error, sizeof config_error, "BROWSERD_SEARCH_PROVIDERS[%zu]: %s", i, what);
    return -1;
}

static int load_provider(const json_t *o, size_t i, struct provider *p)
{
    memset(p, 0, sizeof *p);
    if (!json_is_object(o))
        return config_fail(i, "%s", "must be an object");
    const char *name = jsonx_str(o, "name"), *proto = jsonx_str(o, "protocol");
    const char *ep = jsonx_str(o, "endpoint"), *key = jsonx_str(o, "key");
    const char *key_env = jsonx_str(o, "key_env");
    if (!name || !*name || strlen(name) >= sizeof p->name)
        return config_fail(i, "%s", "name must be a string of 1 to 63 bytes");
    for (size_t k = 0; k < i; k++)
        if (strcmp(providers[k].name, name) == 0)
            return config_fail(i, "name %s is used twice", name);
    snprintf(p->name, sizeof p->name, "%s", name);
    if (proto && strcmp(proto, "searxng") == 0)
        p->proto = PROTO_SEARXNG;
    else if (proto && strcmp(proto, "brave") == 0)
        p->proto = PROTO_BRAVE;
    else
        return config_fail(i, "%s", "protocol must be searxng or brave");
    if (!ep || parse_endpoint(ep, p) != 0)
        return config_fail(i, "%s", "endpoint must be an http:// or https:// URL");
    if (key_env) {
        const char *v = getenv(key_env);
        if (!v || !*v)
            return config_fail(i, "key_env names %s, which is not set", key_env);
        key = v;
    }
    if (key && strpbrk(key, "\r\n"))
        return config_fail(i, "%s", "the key holds a line break");
    if (p->proto == PROTO_BRAVE && !key)
        return config_fail(i, "%s", "protocol brave needs key or key_env");
    p->key = key ? xstrdup(key) : NULL;
    json_t *t = json_object_get(o, "timeout_ms");
    p->timeout_ms = PROVIDER_TIMEOUT_DFLT;
    if (t && (!json_is_integer(t) || json_integer_value(t) < SEARCHREQ_TIMEOUT_MIN ||
              json_integer_value(t) > SEARCHREQ_TIMEOUT_MAX))
        return config_fail(i, "%s", "timeout_ms must be an integer from 1000 to 60000");
    if (t)
        p->timeout_ms = (int)json_integer_value(t);
    return 0;
}

/* Reads BROWSERD_SEARCH_PROVIDERS once: inline JSON (it starts with '[')
 * or the path of a file holding it. A mistake leaves no provider and says
 * what in config_error (logged, and the 503 of every search). */
static void load_config(void)
{
    const char *v = getenv("BROWSERD_SEARCH_PROVIDERS");
    if (!v || !*v)
        return;
    const char *t = v;
    while (*t == ' ' || *t == '\n' || *t == '\t')
        t++;
    char *text = NULL;
    size_t len = 0;
    if (*t == '[') {
        text = xstrdup(t);
        len = strlen(text);
    } else {
        FILE *f = fopen(v, "re");
        if (!f) {
            snprintf(config_error, sizeof config_error,
                     "BROWSERD_SEARCH_PROVIDERS: the file cannot be read");
            log_error("search: %s (%s)", config_error, v);
            return;
        }
        text = xmalloc(CONFIG_FILE_MAX + 1);
        len = fread(text, 1, CONFIG_FILE_MAX + 1, f);
        fclose(f);
        text[len > CONFIG_FILE_MAX ? CONFIG_FILE_MAX : len] = '\0';
    }
    json_t *arr = NULL;
    struct err e;
    err_init(&e);
    if (len > CONFIG_FILE_MAX || jsonx_parse(text, len, CONFIG_FILE_MAX, &arr, &e) != 0 ||
        !json_is_array(arr) || json_array_size(arr) > LIM_SEARCH_PROVIDERS) {
        snprintf(config_error, sizeof config_error,
                 "BROWSERD_SEARCH_PROVIDERS: must be a JSON array of at most %d providers",
                 LIM_SEARCH_PROVIDERS);
    } else {
        size_t i;
        json_t *o;
        json_array_foreach(arr, i, o)
        {
            if (load_provider(o, i, &providers[i]) != 0)
                break;
            nproviders = i + 1;
        }
        if (config_error[0]) {
            for (size_t k = 0; k < nproviders; k++)
                xfree(providers[k].key);
            nproviders = 0;
        }
    }
    if (config_error[0])
        log_error("search: %s", config_error);
    json_decref(arr);
    xfree(text);
}

/* The providers, or 503 naming what is wrong with their configuration. */
static int providers_ready(struct req *rq)
{
    pthread_once(&config_once, load_config);
    if (config_error[0])
        return err_set(&rq->err, E_UNAVAIL, "unavailable", "search is misconfigured: %s",
                       config_error);
    if (nproviders == 0)
        return err_set(&rq->err, E_UNAVAIL, "unavailable",
                       "search: no provider is configured on this server "
                       "(BROWSERD_SEARCH_PROVIDERS)");
    return 0;
}

/* ---- the request ---- */

/* ---- one provider call ---- */

static void url_escape(struct buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char enc[3] = {'%', hex[c >> 4], hex[c & 15]};
        int plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.' || c == '~';
        if (buf_append(b, plain ? (const char *)s : enc, plain ? 1 : 3) != 0)
            return;
    }
}

static void add_param(struct buf *b, const char *name, const char *value)
{
    if (!value)
        return;
    if (buf_append(b, "&", 1) != 0 || buf_append(b, name, strlen(name)) != 0 ||
        buf_append(b, "=", 1) != 0)
        return;
    url_escape(b, value);
}

/* Results of a provider's answer as [{url, title, snippet, published_date?}]
 * (only http and https URLs), or NULL when the answer is not the protocol's. */
static json_t *normalize(enum protocol proto, const json_t *root)
{
    const json_t *list = proto == PROTO_BRAVE
                             ? json_object_get(json_object_get(root, "web"), "results")
                             : json_object_get(root, "results");
    if (proto == PROTO_BRAVE && json_is_object(root) && !json_object_get(root, "web"))
        return json_array(); /* no web results */
    if (!json_is_array(list))
        return NULL;
    json_t *out = json_array();
    size_t i;
    json_t *r;
    json_array_foreach(list, i, r)
    {
        const char *url = jsonx_str(r, "url");
        if (!url || (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) ||
            strlen(url) > CURL_URL_MAX)
            continue;
        const char *title = jsonx_str(r, "title");
        const char *snippet = jsonx_str(r, proto == PROTO_BRAVE ? "description" : "content");
        const char *date = jsonx_str(r, proto == PROTO_BRAVE ? "page_age" : "publishedDate");
        json_t *o = json_pack("{s:s,s:s,s:s}", "url", url, "title", title ? title : "", "snippet",
                              snippet ? snippet : "");
        if (date)
            json_object_set_new(o, "published_date", json_string(date));
        json_array_append_new(out, o);
    }
    return out;
}

json_t *search_normalize(int brave, const json_t *root)
{
    return normalize(brave ? PROTO_BRAVE : PROTO_SEARXNG, root);
}

/* Asks p: the outcome, with *results (SEARCH_SUCCESS) or an error code and
 * whether a retry may help (SEARCH_ERROR, SEARCH_TIMEOUT). */
static enum search_outcome call_provider(const struct provider *p, const struct searchreq *sp,
                                         json_t **results, char *code, size_t cap, int *retryable)
{
    *results = NULL;
    *retryable = 0;
    int timeout = sp->timeout_ms ? sp->timeout_ms : p->timeout_ms;
    int64_t deadline = clock_mono_ms() + timeout;
    struct buf target;
    buf_init(&target, 16384);
    char count[16];
    snprintf(count, sizeof count, "%d",
             sp->max_results > 20 && p->proto == PROTO_BRAVE ? 20 : sp->max_results);
    int ok = buf_append(&target, p->prefix, strlen(p->prefix)) == 0;
    if (p->proto == PROTO_BRAVE) {
        ok = ok && buf_append(&target, "/res/v1/web/search?q=", 21) == 0;
        url_escape(&target, sp->query);
        add_param(&target, "count", count);
        add_param(&target, "country", sp->country);
        add_param(&target, "search_lang", sp->language);
        add_param(&target, "safesearch", sp->safe_search);
    } else {
        ok = ok && buf_append(&target, "/search?q=", 10) == 0;
        url_escape(&target, sp->query);
        add_param(&target, "format", "json");
        add_param(&target, "language", sp->language);
        const char *ss = !sp->safe_search                           ? NULL
                         : strcmp(sp->safe_search, "off") == 0      ? "0"
                         : strcmp(sp->safe_search, "moderate") == 0 ? "1"
                                                                    : "2";
        add_param(&target, "safesearch", ss);
    }
    char *fields = NULL;
    if (p->key)
        fields =
            p->proto == PROTO_BRAVE
                ? xasprintf("Accept: application/json\r\nX-Subscription-Token: %s\r\n", p->key)
                : xasprintf("Accept: application/json\r\nAuthorization: Bearer %s\r\n", p->key);
    else
        fields = xstrdup("Accept: application/json\r\n");
    enum search_outcome out = SEARCH_ERROR;
    struct err e;
    err_init(&e);
    struct httpc_resp resp = {0};
    if (!ok || !target.p) {
        snprintf(code, cap, "query_too_long");
        goto done;
    }
    int fd = httpc_dial(p->host, p->port, deadline, &e);
    if (fd < 0) {
        out = clock_mono_ms() >= deadline ? SEARCH_TIMEOUT : SEARCH_ERROR;
        snprintf(code, cap, "%s", out == SEARCH_TIMEOUT ? "timeout" : "connect_failed");
        *retryable = 1;
        goto done;
    }
    struct httpc_req hr = {
        .method = "GET",
        .target = target.p,
        .host = p->hostfield,
        .fields = fields,
        .tls_host = p->tls ? p->host : NULL,
        .body_max = LIM_SEARCH_PROVIDER_BODY_BYTES,
        .deadline_ms = deadline,
    };
    if (httpc_exchange(fd, &hr, &resp, &e) != 0) {
        int timed_out = clock_mono_ms() >= deadline || strstr(e.message, "timed out") != NULL;
        out = timed_out ? SEARCH_TIMEOUT : SEARCH_ERROR;
        snprintf(code, cap, "%s",
                 timed_out          ? "timeout"
                 : e.rc == E_TOOBIG ? "answer_too_large"
                                    : "bad_answer");
        *retryable = e.rc != E_TOOBIG;
        goto done;
    }
    if (resp.status != 200) {
        snprintf(code, cap, "http_%d", resp.status);
        *retryable = resp.status == 429 || resp.status >= 500;
        goto done;
    }
    json_t *root = NULL;
    if (jsonx_parse(resp.body, resp.body_len, LIM_SEARCH_PROVIDER_BODY_BYTES, &root, &e) != 0 ||
        !(*results = search_normalize(p->proto == PROTO_BRAVE, root))) {
        snprintf(code, cap, "bad_answer");
        json_decref(root);
        goto done;
    }
    json_decref(root);
    out = json_array_size(*results) ? SEARCH_SUCCESS : SEARCH_EMPTY;
done:
    httpc_resp_free(&resp);
    buf_free(&target);
    xfree(fields);
    return out;
}

/* ---- content through the caller's browser ---- */

static const char *header_first(const json_t *headers, const char *name)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)headers, k,
                        v) if (strcasecmp(k, name) == 0) return json_is_array(v)
        ? json_string_value(json_array_get(v, 0))
        : json_string_value(v);
    return NULL;
}

/* The outcome of a fetch of url (curl or render) into its content record
 * c: a transport error's status (blocked, timeout, unavailable) and name,
 * or the answer's http_status and final_url with status blocked (401, 403,
 * 429) or unavailable (another 4xx or 5xx). 1 when the page answered with
 * content to convert: the caller sets status ok and the text. */
static int content_outcome(json_t *c, const char *url, int transport_error,
                           const char *net_error_name, int status, const char *final_url)
{
    if (transport_error) {
        const char *st = strcmp(net_error_name, "ERR_ACCESS_DENIED") == 0 ? "blocked"
                         : strcmp(net_error_name, "ERR_TIMED_OUT") == 0   ? "timeout"
                                                                          : "unavailable";
        json_object_set_new(c, "status", json_string(st));
        json_object_set_new(c, "error", json_string(net_error_name));
        return 0;
    }
    json_object_set_new(c, "http_status", json_integer(status));
    json_object_set_new(c, "final_url", json_string(final_url ? final_url : url));
    if (status == 401 || status == 403 || status == 429) {
        json_object_set_new(c, "status", json_string("blocked"));
        return 0;
    }
    if (status >= 400) {
        json_object_set_new(c, "status", json_string("unavailable"));
        return 0;
    }
    return 1;
}

/* The content record of url fetched by the browser of sp->browser_id. */
static json_t *fetch_content(struct req *rq, const struct searchreq *sp, const char *url,
                             int timeout_ms)
{
    struct curlreq cr;
    memset(&cr, 0, sizeof cr);
    cr.url = xstrdup(url);
    snprintf(cr.method, sizeof cr.method, "GET");
    cr.timeout_ms = timeout_ms;
    struct bcurl_result res;
    int rc = curl_session_run(rq, sp->browser_id, &cr, &res);
    json_t *c = json_pack("{s:s,s:s}", "method", "browser_curl", "cache_status", "miss");
    if (rc) {
        /* The search goes on: the failure is this result's only. */
        json_object_set_new(c, "status", json_string("unavailable"));
        json_object_set_new(c, "error", json_string(rq->err.message));
        err_init(&rq->err);
    } else if (content_outcome(c, url, res.transport_error, res.net_error_name, res.status,
                               res.final_url)) {
        const char *ct = header_first(res.headers, "content-type");
        char *text = NULL;
        int cut = 0;
        if (!ct || strstr(ct, "html"))
            htmltext_convert(res.body, res.body_len, sp->markdown, (size_t)sp->max_chars, &text,
                             &cut);
        else
            htmltext_plain(res.body, res.body_len, (size_t)sp->max_chars, &text, &cut);
        json_t *t = json_string(text);
        json_object_set_new(c, "status", json_string("ok"));
        json_object_set_new(c, "text", t ? t : json_string(""));
        json_object_set_new(c, "truncated", json_boolean(cut));
        json_object_set_new(c, "completeness", json_string(cut ? "partial" : "full"));
        xfree(text);
    }
    bcurl_result_clear(&res);
    curlreq_clear(&cr);
    return c;
}

/* The content record of url loaded and rendered by the browser of
 * sp->browser_id (runtime/brender): the rendered DOM converted as curl's
 * body is. The caller holds a unit of renders. */
static json_t *render_content(struct req *rq, const struct searchreq *sp, const char *url,
                              int timeout_ms)
{
    json_t *c = json_pack("{s:s,s:s}", "method", "browser_render", "cache_status", "miss");
    struct session_rec rec;
    struct live *live = NULL;
    char ws[512];
    int rc = api_live_session_id(rq, sp->browser_id, &rec, &live, ws, sizeof ws);
    if (rc) {
        json_object_set_new(c, "status", json_string("unavailable"));
        json_object_set_new(c, "error", json_string(rq->err.message));
        err_init(&rq->err);
        return c;
    }
    live_touch(live);
    struct brender_result res;
    struct err e;
    err_init(&e);
    rc = brender_run(ws, url, timeout_ms, &res, &e);
    live_touch(live);
    sessmgr_put(live);
    session_rec_clear(&rec);
    if (rc) {
        json_object_set_new(c, "status", json_string("unavailable"));
        json_object_set_new(c, "error", json_string(e.message));
    } else if (content_outcome(c, url, res.transport_error, res.net_error_name, res.status,
                               res.final_url)) {
        char *text = NULL;
        int cut = 0;
        const char *ct = res.content_type;
        if (!ct || strstr(ct, "html") || strstr(ct, "xml"))
            htmltext_convert(res.html, res.html_len, sp->markdown, (size_t)sp->max_chars, &text,
                             &cut);
        else /* a text document renders inside <pre>: its text is the page's */
            htmltext_convert(res.html, res.html_len, 0, (size_t)sp->max_chars, &text, &cut);
        json_t *t = json_string(text);
        /* Partial: cut at max_chars, the DOM read cut, or read before the
         * page finished loading (timeout_ms). */
        int partial = cut || res.html_cut || !res.loaded;
        json_object_set_new(c, "status", json_string("ok"));
        json_object_set_new(c, "text", t ? t : json_string(""));
        json_object_set_new(c, "truncated", json_boolean(cut || res.html_cut));
        json_object_set_new(c, "completeness", json_string(partial ? "partial" : "full"));
        xfree(text);
    }
    brender_result_clear(&res);
    return c;
}

/* ---- handlers ---- */

static json_t *warning(const char *code, const char *param, const char *msg)
{
    json_t *w = json_pack("{s:s,s:s}", "code", code, "message", msg);
    if (param)
        json_object_set_new(w, "param", json_string(param));
    return w;
}

int search_post(struct req *rq, struct resp *rs)
{
    int rc = api_require_feature(rq, "search");
    if (rc)
        return rc;
    json_t *body = NULL;
    if ((rc = req_json_object(rq, 0, &body)) != 0)
        return rc;
    if ((rc = providers_ready(rq)) != 0) {
        json_decref(body);
        return rc;
    }
    const char *names[LIM_SEARCH_PROVIDERS];
    for (size_t i = 0; i < nproviders; i++)
        names[i] = providers[i].name;
    struct searchreq sp;
    if ((rc = searchreq_parse(body, names, nproviders, &sp, &rq->err)) != 0) {
        json_decref(body);
        return rc;
    }
    struct auth *a = api_auth(rq);
    json_t *warnings = json_array();
    static const char *const unapplied[] = {"recency", "start_date", "end_date", "strict_params",
                                            "include_raw"};
    for (size_t i = 0; i < sizeof unapplied / sizeof unapplied[0]; i++)
        if (json_object_get(body, unapplied[i]) &&
            !json_is_null(json_object_get(body, unapplied[i])))
            json_array_append_new(warnings,
                                  warning("param_not_supported", unapplied[i],
                                          "this server's providers do not apply this parameter"));
    if (sp.content) {
        /* The session must be the caller's and running before any provider is asked. */
        struct session_rec rec;
        struct live *live = NULL;
        char ws[512];
        rc = api_live_session_id(rq, sp.browser_id, &rec, &live, ws, sizeof ws);
        if (rc == 0) {
            sessmgr_put(live);
            session_rec_clear(&rec);
        } else if (rc == E_NOTFOUND) {
            err_init(&rq->err);
            rc = err_field(&rq->err, "content.browser.browser_id",
                           "names no browser session of this project");
        } else if (rc == E_CONFLICT) {
            /* Not running here: on a cluster, the node that runs it serves
             * the whole search (its answer is this one's). */
            err_init(&rq->err);
            int fw = api_cluster_forward(rq, rs, a->org.id, sp.browser_id, 0);
            if (fw == -1)
                rc = err_set(&rq->err, E_CONFLICT, "session_ended", "browser session %s has ended",
                             sp.browser_id);
            else {
                json_decref(warnings);
                json_decref(body);
                return fw;
            }
        }
    }
    /* A render search holds its unit of renders until its last page is read. */
    int rendering = 0;
    if (rc == 0 && sp.content && sp.render) {
        rc = share_take_or_err(&renders, a->org.id, sp.browser_id, 1, &rq->err);
        rendering = rc == 0;
    }
    if (rc == 0)
        rc = share_take_or_err(&inflight, a->org.id, a->project.id, 1, &rq->err);
    /* On a cluster the org's share of provider calls is also the cluster's:
     * the providers are every node's. */
    char slot[STORE_ID] = "";
    if (rc == 0) {
        int64_t ttl = LIM_SEARCH_SLOT_GRACE_MS;
        for (size_t i = 0; i < sp.norder; i++)
            ttl += sp.timeout_ms ? sp.timeout_ms : providers[sp.order[i]].timeout_ms;
        struct app *app = api_app(rq);
        rc = orgslot_take(app->store, app->node, "search_call", a->org.id,
                          LIM_SEARCH_INFLIGHT_PER_ORG, ttl, inflight.what, slot, &rq->err);
        if (rc)
            share_give(&inflight, a->org.id, a->project.id);
    }
    if (rc) {
        if (rendering)
            share_give(&renders, a->org.id, sp.browser_id);
        json_decref(warnings);
        json_decref(body);
        return rc;
    }
    json_t *attempts = json_array(), *found = NULL;
    const struct provider *used = NULL;
    enum search_outcome last = SEARCH_ERROR;
    for (size_t i = 0; i < sp.norder; i++) {
        used = &providers[sp.order[i]];
        char code[48] = "";
        int retryable = 0;
        int64_t t0 = clock_mono_ms();
        json_decref(found);
        last = call_provider(used, &sp, &found, code, sizeof code, &retryable);
        json_t *at = json_pack("{s:s,s:s,s:I}", "provider", used->name, "outcome",
                               searchreq_outcome_names[last], "duration_ms",
                               (json_int_t)(clock_mono_ms() - t0));
        if (last == SEARCH_ERROR || last == SEARCH_TIMEOUT) {
            json_object_set_new(at, "error_code", json_string(code));
            json_object_set_new(at, "retryable", json_boolean(retryable));
        }
        json_array_append_new(attempts, at);
        if (!(sp.fallback_on & (1u << last)))
            break;
    }
    orgslot_give(api_app(rq)->store, slot);
    share_give(&inflight, a->org.id, a->project.id);
    if (rendering && (last == SEARCH_ERROR || last == SEARCH_TIMEOUT)) {
        share_give(&renders, a->org.id, sp.browser_id);
        rendering = 0;
    }
    const char *method = sp.render ? "browser_render" : "browser_curl";
    if (last == SEARCH_ERROR || last == SEARCH_TIMEOUT) {
        rs->status = last == SEARCH_TIMEOUT ? 504 : 502;
        rs->json = json_pack("{s:s,s:s,s:o}", "code", "search_failed", "message",
                             last == SEARCH_TIMEOUT ? "search: the provider did not answer in time"
                                                    : "search: no provider answered with results",
                             "attempts", attempts);
        json_decref(found);
        json_decref(warnings);
        json_decref(body);
        return 0;
    }
    char id[CRYPTO_ID_LEN + 6];
    char rid[CRYPTO_ID_LEN + 1];
    crypto_new_id(rid);
    snprintf(id, sizeof id, "srch_%s", rid);
    json_t *results = json_array();
    size_t i, fetches = 0;
    json_t *r;
    if (!found)
        found = json_array();
    int64_t content_deadline = clock_mono_ms() + LIM_SEARCH_CONTENT_TOTAL_MS;
    int out_of_time = 0;
    json_array_foreach(found, i, r)
    {
        if ((int)json_array_size(results) >= sp.max_results)
            break;
        const char *url = jsonx_str(r, "url");
        if (!searchreq_kept(&sp, url))
            continue;
        size_t rank = json_array_size(results) + 1;
        char res_id[CRYPTO_ID_LEN + 16];
        snprintf(res_id, sizeof res_id, "%s_%zu", id, rank);
        json_object_set_new(r, "id", json_string(res_id));
        json_object_set_new(r, "rank", json_integer((json_int_t)rank));
        int64_t left = content_deadline - clock_mono_ms();
        if (sp.content) {
            if (fetches < LIM_SEARCH_CONTENT_FETCHES && left >= CURL_TIMEOUT_MIN_MS) {
                int t = left < sp.content_timeout_ms ? (int)left : sp.content_timeout_ms;
                json_object_set_new(r, "content",
                                    sp.render ? render_content(rq, &sp, url, t)
                                              : fetch_content(rq, &sp, url, t));
                fetches++;
            } else if (fetches < LIM_SEARCH_CONTENT_FETCHES) {
                json_object_set_new(r, "content",
                                    json_pack("{s:s,s:s}", "status", "timeout", "method", method));
                out_of_time = 1;
            } else {
                json_object_set_new(
                    r, "content",
                    json_pack("{s:s,s:s}", "status", "unavailable", "method", method));
            }
        }
        json_array_append(results, r);
    }
    if (rendering)
        share_give(&renders, a->org.id, sp.browser_id);
    if (out_of_time) {
        char msg[128];
        snprintf(msg, sizeof msg, "content fetches of one search end after %d ms",
                 LIM_SEARCH_CONTENT_TOTAL_MS);
        json_array_append_new(warnings, warning("content_timeout", "content", msg));
    }
    if (sp.content && fetches == LIM_SEARCH_CONTENT_FETCHES &&
        json_array_size(results) > LIM_SEARCH_CONTENT_FETCHES) {
        char msg[128];
        snprintf(msg, sizeof msg, "content is fetched for the first %d results only",
                 LIM_SEARCH_CONTENT_FETCHES);
        json_array_append_new(warnings, warning("content_limit", "content", msg));
    }
    json_decref(found);
    int64_t now = clock_now_ms(), expires = now + LIM_SEARCH_TTL_MS;
    char exp[40];
    json_t *rec = json_pack("{s:s,s:s,s:s,s:o,s:o,s:o,s:{s:I,s:I},s:s}", "id", id, "provider",
                            used->name, "query", sp.query, "results", results, "attempts", attempts,
                            "warnings", warnings, "usage", "content_fetches", (json_int_t)fetches,
                            "results_count", (json_int_t)json_array_size(results), "expires_at",
                            clock_fmt_rfc3339(expires, exp, sizeof exp));
    json_decref(body);
    struct app *app = api_app(rq);
    char *text = jsonx_dump(rec);
    (void)store_search_prune(app->store, now);
    rc = store_search_put(app->store, id, a->org.id, now, expires, text);
    xfree(text);
    if (rc) {
        json_decref(rec);
        return err_set(&rq->err, E_INTERNAL, "internal", "search: the result could not be stored");
    }
    resp_json(rs, 200, rec);
    return 0;
}

int search_get(struct req *rq, struct resp *rs)
{
    int rc = api_require_feature(rq, "search");
    if (rc)
        return rc;
    char *text = NULL;
    rc = store_search_get(api_app(rq)->store, api_auth(rq)->org.id, rq->params[0], clock_now_ms(),
                          &text);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "search %s not found (or expired)",
                       rq->params[0]);
    if (rc)
        return err_set(&rq->err, E_INTERNAL, "internal", "search: the store cannot be read");
    json_t *rec = NULL;
    struct err e;
    err_init(&e);
    rc = jsonx_parse(text, strlen(text), strlen(text) + 1, &rec, &e);
    xfree(text);
    if (rc)
        return err_set(&rq->err, E_INTERNAL, "internal", "search: the stored record is unreadable");
    resp_json(rs, 200, rec);
    return 0;
}

int search_providers(struct req *rq, struct resp *rs)
{
    int rc = api_require_feature(rq, "search");
    if (rc)
        return rc;
    pthread_once(&config_once, load_config);
    if (config_error[0])
        return err_set(&rq->err, E_UNAVAIL, "unavailable", "search is misconfigured: %s",
                       config_error);
    json_t *list = json_array();
    for (size_t i = 0; i < nproviders; i++) {
        const struct provider *p = &providers[i];
        json_t *caps =
            json_pack("{s:i,s:b,s:b,s:b,s:b,s:b,s:[s],s:[s,s]}", "max_results",
                      p->proto == PROTO_BRAVE ? 20 : 100, "country", p->proto == PROTO_BRAVE,
                      "language", 1, "safe_search", 1, "include_domains", 1, "exclude_domains", 1,
                      "content_sources", "browser", "content_formats", "markdown", "text");
        json_array_append_new(list, json_pack("{s:s,s:s,s:b,s:o}", "name", p->name, "protocol",
                                              proto_name(p->proto), "available", 1, "capabilities",
                                              caps));
    }
    resp_json(rs, 200, json_pack("{s:o}", "providers", list));
    return 0;
}

int search_contents(struct req *rq, struct resp *rs)
{
    (void)rs;
    int rc = api_require_feature(rq, "search");
    if (rc)
        return rc;
    return err_set(&rq->err, E_NOTFOUND, "not_found",
                   "search contents are not available until shipped: ask for content in "
                   "POST /search");
}
