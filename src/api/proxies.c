/*
 * /proxies and the egress session module (see api/proxies.h).
 *
 * Stored data document of a proxy: {"protocol", "bypass_hosts": [...],
 * "config": {...public fields...}, "password": "<sealed>"?}. The record the
 * API shows is rendered from it; the sealed password never is.
 *
 * Session settings document keys written here: "proxy" (the BrowserProxy
 * record), "proxy_id" (when a proxy is selected), "network" (route targets
 * rewritten to ids), and two private keys that are never rendered:
 * "proxy_sel" (the stored selection, {kind, ref}) and "egress_url".
 */
#include "api/proxies.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/browsers.h"
#include "session/ext.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/secretbox.h"
#include "core/token.h"
#include "core/xalloc.h"
#include "domain/addrclass.h"
#include "domain/launch_settings.h"
#include "domain/netcfg.h"
#include "domain/proxysel.h"
#include "proxy/netguard.h"
#include "proxy/tls_client.h"
#include "proxy/selfrelay.h"
#include "runtime/sandbox.h"
#include "telemetry/telemetry.h"

#define DEFAULT_REF       "__default__" /* the operator's default stealth proxy */
#define CHECK_URL_DEFAULT "http://connectivitycheck.gstatic.com/generate_204"
#define CHECK_TIMEOUT_MS  10000
#define NAME_MAX_LEN      255
#define BYPASS_MAX        100
#define EXTRA_ARGS_MAX    32

static const char *const managed_types[] = {"datacenter", "isp", "residential", "mobile", NULL};

static struct {
    struct app *app;
    struct egress *eg;
    unsigned char key[SECRETBOX_KEY_LEN];
    json_t *managed; /* {"datacenter": {host, port, username?, password?}, ...} */
    struct egress_upstream dflt;
    int has_default;
    char *extra_buf;
    const char *extra_args[EXTRA_ARGS_MAX + 1];
    char *host_rules;
    int self_port; /* the session relay's (proxy/selfrelay), read by the egress */
} M;

/* ------------------------------------------------------------ upstreams */

static int is_managed(const char *type)
{
    for (size_t i = 0; managed_types[i]; i++)
        if (strcmp(type, managed_types[i]) == 0)
            return 1;
    return 0;
}

/* An operator upstream {host, port, username?, password?} -> up. */
static int upstream_from_operator(const json_t *o, struct egress_upstream *up)
{
    const char *h = jsonx_str(o, "host");
    json_t *p = json_object_get(o, "port");
    if (!h || !*h || !json_is_integer(p) || json_integer_value(p) < 1 ||
        json_integer_value(p) > 65535 || strlen(h) >= sizeof up->host)
        return E_INVALID;
    memset(up, 0, sizeof *up);
    snprintf(up->host, sizeof up->host, "%s", h);
    up->port = (int)json_integer_value(p);
    json_t *pr = json_object_get(o, "protocol");
    if (pr && (!json_is_string(pr) || (strcmp(json_string_value(pr), "http") != 0 &&
                                       strcmp(json_string_value(pr), "https") != 0)))
        return E_INVALID;
    up->tls = pr && strcmp(json_string_value(pr), "https") == 0;
    const char *u = jsonx_str(o, "username"), *pw = jsonx_str(o, "password");
    if (u && *u)
        up->userpass = xasprintf("%s:%s", u, pw ? pw : "");
    return 0;
}

/* The upstream of a stored proxy. Managed types use the operator's upstream
 * (check_address 0: the operator's own machine list is trusted); custom
 * proxies are held to the isolation rules. */
static int upstream_of(const struct proxy_rec *p, struct egress_upstream *up)
{
    memset(up, 0, sizeof *up);
    json_t *d = json_loads(p->data ? p->data : "{}", 0, NULL);
    if (!d)
        return E_INTERNAL;
    int rc = 0;
    if (is_managed(p->type)) {
        json_t *m = json_object_get(M.managed, p->type);
        rc = m ? upstream_from_operator(m, up) : E_NOTFOUND;
    } else {
        json_t *cfg = json_object_get(d, "config");
        const char *h = jsonx_str(cfg, "host");
        snprintf(up->host, sizeof up->host, "%s", h ? h : "");
        up->port = (int)json_integer_value(json_object_get(cfg, "port"));
        up->check_address = 1;
        const char *user = jsonx_str(cfg, "username"), *sealed = jsonx_str(d, "password");
        char *pw = NULL;
        struct err e;
        err_init(&e);
        if (sealed && secretbox_open(M.key, sealed, &pw, &e) != 0) {
            log_error("proxy %s: the stored password cannot be opened (%s)", p->id, e.message);
            rc = E_INTERNAL;
        } else if ((user && *user) || pw) {
            up->userpass = xasprintf("%s:%s", user ? user : "", pw ? pw : "");
        }
        secretbox_wipe(pw);
    }
    /* A custom proxy is spoken to as its record says; a managed one as the
     * operator's entry says (the operator knows what the upstream speaks). */
    const char *proto = jsonx_str(d, "protocol");
    if (!is_managed(p->type)) {
        up->tls = proto && strcmp(proto, "https") == 0;
        const char *ca = jsonx_str(d, "ca_bundle");
        up->ca_pem = ca ? xstrdup(ca) : NULL;
    }
    json_t *b = json_object_get(d, "bypass_hosts");
    if (json_is_array(b) && json_array_size(b))
        up->bypass = json_incref(b);
    json_decref(d);
    if (rc)
        egress_upstream_clear(up);
    return rc;
}

/* egress failed hook: a proxy_error event (category network) of the session,
 * as the service reports its egress's failures (issue 33.5). The url is the
 * plain request's; a tunnel (CONNECT) has only its host and port. */
static void failed_hook(void *ctx, const char *session_id, const struct egress_failure *f)
{
    (void)ctx;
    json_t *d =
        json_pack("{s:s,s:i,s:s,s:s,s:i,s:s}", "code", f->code, "status", f->status, "method",
                  f->method, "host", f->host, "port", f->port, "message", f->message);
    if (d && f->path && *f->path) {
        int v6 = strchr(f->host, ':') != NULL;
        char *url = xasprintf("http://%s%s%s:%d%s", v6 ? "[" : "", f->host, v6 ? "]" : "", f->port,
                              f->path);
        json_object_set_new(d, "url", json_string(url));
        xfree(url);
    }
    struct telem_src src = {"kernel_api", "egress", 0};
    telemetry_emit_src(session_id, TELEM_NETWORK, "proxy_error", &src, d);
}

/* egress resolve hook: a proxy ref of a session. */
static int resolve_hook(void *ctx, const char *org_id, const char *project_id, const char *ref,
                        struct egress_upstream *out)
{
    (void)ctx;
    memset(out, 0, sizeof *out);
    if (strcmp(ref, DEFAULT_REF) == 0) {
        if (!M.has_default)
            return E_NOTFOUND;
        *out = M.dflt;
        out->userpass = M.dflt.userpass ? xstrdup(M.dflt.userpass) : NULL;
        out->ca_pem = NULL;
        out->bypass = NULL;
        return 0;
    }
    struct proxy_rec p;
    memset(&p, 0, sizeof p);
    int rc = store_proxy_get(M.app->store, org_id, project_id, ref, &p);
    if (rc == 0)
        rc = upstream_of(&p, out);
    proxy_rec_clear(&p);
    return rc;
}

/* ------------------------------------------------------------ records */

static json_t *render_proxy(const struct proxy_rec *p)
{
    char t[40];
    json_t *d = json_loads(p->data ? p->data : "{}", 0, NULL);
    if (!d)
        d = json_object();
    json_t *r = json_object();
    json_object_set_new(r, "id", json_string(p->id));
    json_object_set_new(r, "type", json_string(p->type));
    if (p->name[0])
        json_object_set_new(r, "name", json_string(p->name));
    const char *proto = jsonx_str(d, "protocol");
    json_object_set_new(r, "protocol", json_string(proto ? proto : "http"));
    json_t *b = json_object_get(d, "bypass_hosts");
    json_object_set_new(r, "bypass_hosts", json_is_array(b) ? json_incref(b) : json_array());
    json_t *cfg = json_object_get(d, "config");
    json_t *c = json_is_object(cfg) ? json_deep_copy(cfg) : json_object();
    if (strcmp(p->type, "custom") == 0) {
        json_object_del(c, "password");
        json_object_set_new(c, "has_password",
                            json_boolean(json_object_get(d, "password") != NULL));
        /* ca_bundle is write-only, as the service has it (issue 33.5). */
        json_object_set_new(c, "has_ca_bundle",
                            json_boolean(json_object_get(d, "ca_bundle") != NULL));
    }
    json_object_set_new(r, "config", c);
    if (p->status[0])
        json_object_set_new(r, "status", json_string(p->status));
    if (p->last_checked)
        json_object_set_new(r, "last_checked",
                            json_string(clock_fmt_rfc3339(p->last_checked, t, sizeof t)));
    json_object_set_new(r, "created_at",
                        json_string(clock_fmt_rfc3339(p->created_at, t, sizeof t)));
    json_decref(d);
    return r;
}

/* ------------------------------------------------------------ validation */

static int str_field(const json_t *body, const char *key, const char *path, size_t max,
                     int required, const char **out, struct err *e)
{
    json_t *v = json_object_get(body, key);
    *out = NULL;
    if (!v) {
        if (required)
            return err_field(e, path, "is required");
        return 0;
    }
    if (!json_is_string(v))
        return err_field(e, path, "must be a string");
    size_t n = json_string_length(v);
    if (n < 1 || n > max)
        return err_field(e, path, "must be 1-%zu characters", max);
    *out = json_string_value(v);
    return 0;
}

static int valid_hostname(const char *h)
{
    if (!h)
        return 0;
    size_t n = strlen(h);
    if (n == 0 || n > 253)
        return 0;
    for (const char *c = h; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '-' || *c == '.' || *c == '_' || *c == ':' || *c == '[' || *c == ']'))
            return 0;
    return 1;
}

static int check_bypass(const json_t *b, struct err *e)
{
    if (!json_is_array(b))
        return err_field(e, "bypass_hosts", "must be an array of host patterns");
    if (json_array_size(b) > BYPASS_MAX)
        err_field(e, "bypass_hosts", "at most %d entries", BYPASS_MAX);
    size_t i;
    json_t *v;
    json_array_foreach(b, i, v)
    {
        char path[48];
        snprintf(path, sizeof path, "bypass_hosts[%zu]", i);
        if (!json_is_string(v) || egress_bypass_valid(json_string_value(v)) != 0)
            err_field(e, path,
                      "must be a hostname, *.suffix, an IP address or *, optionally with :PORT");
    }
    return err_has_fields(e) ? E_INVALID : 0;
}

/* The config of a custom proxy: host, port, username?, password?. */
static void check_custom_config(const json_t *cfg, struct err *e)
{
    if (!json_is_object(cfg)) {
        err_field(e, "config", "custom proxies need config {host, port, username?, password?}");
        return;
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)cfg, k, v)
    {
        if (strcmp(k, "host") && strcmp(k, "port") && strcmp(k, "username") &&
            strcmp(k, "password") && strcmp(k, "ca_bundle")) {
            char path[300];
            snprintf(path, sizeof path, "config.%.200s", k);
            err_field(e, path, "is not a field of a custom proxy config");
        }
    }
    const char *host, *s;
    if (str_field(cfg, "host", "config.host", 253, 1, &host, e) == 0 && !valid_hostname(host))
        err_field(e, "config.host", "must be a hostname or IP address");
    json_t *port = json_object_get(cfg, "port");
    if (!port)
        err_field(e, "config.port", "is required");
    else if (!json_is_integer(port) || json_integer_value(port) < 1 ||
             json_integer_value(port) > 65535)
        err_field(e, "config.port", "must be an integer 1-65535");
    (void)str_field(cfg, "username", "config.username", 255, 0, &s, e);
    (void)str_field(cfg, "password", "config.password", 255, 0, &s, e);
    /* ca_bundle: the CA of a proxy that presents its own certificates (a
     * MITM proxy, or an https proxy with a private CA), PEM. */
    json_t *ca = json_object_get(cfg, "ca_bundle");
    if (ca && !json_is_string(ca))
        err_field(e, "config.ca_bundle", "must be a string of PEM certificates");
    else if (ca)
        (void)tls_ca_bundle_check(json_string_value(ca), "config.ca_bundle", e);
    /* A custom proxy is the tenant's chosen upstream, but its own address is
     * reached from this host: it is held to the pages' address rule (a
     * loopback, link-local, metadata, private or reserved literal, or a
     * localhost name, unless the operator opened it). Names are checked
     * again after DNS at every connect. */
    host = jsonx_str(cfg, "host");
    if (host && valid_hostname(host) && json_is_integer(port)) {
        uint8_t a[16];
        int fam = addrclass_literal(host, a);
        size_t hn = strlen(host);
        if ((fam && !egress_addr_allowed(M.eg, fam, a, (int)json_integer_value(port))) ||
            strcasecmp(host, "localhost") == 0 ||
            (hn > 10 && strcasecmp(host + hn - 10, ".localhost") == 0))
            err_field(e, "config.host",
                      "must not be a loopback, link-local, private or reserved address "
                      "(this server does not connect there)");
    }
}

static int check_managed_config(const json_t *cfg, struct err *e)
{
    if (!cfg)
        return 0;
    if (!json_is_object(cfg))
        return err_field(e, "config", "must be an object");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)cfg, k, v)
    {
        char path[300];
        snprintf(path, sizeof path, "config.%.200s", k);
        if (!json_is_string(v) || json_string_length(v) > 255)
            err_field(e, path, "must be a string of at most 255 characters");
    }
    const char *country = jsonx_str(cfg, "country");
    if (country && (strlen(country) != 2 || country[0] < 'A' || country[0] > 'Z' ||
                    country[1] < 'A' || country[1] > 'Z'))
        err_field(e, "config.country", "must be an ISO 3166 alpha-2 code such as US");
    return err_has_fields(e) ? E_INVALID : 0;
}

/* ------------------------------------------------------------ handlers */

static int load_proxy(struct req *rq, struct proxy_rec *p)
{
    struct auth *a = api_auth(rq);
    memset(p, 0, sizeof *p);
    int rc = store_proxy_get(api_app(rq)->store, a->org.id, a->project.id, rq->params[0], p);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "proxy %s not found", rq->params[0]);
    return rc;
}

int proxies_create(struct req *rq, struct resp *rs)
{
    struct auth *a = api_auth(rq);
    struct err *e = &rq->err;
    json_t *body;
    int rc = req_json_object(rq, 0, &body);
    if (rc)
        return rc;
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v)
    {
        if (strcmp(k, "type") && strcmp(k, "name") && strcmp(k, "protocol") &&
            strcmp(k, "bypass_hosts") && strcmp(k, "config")) {
            char path[300];
            snprintf(path, sizeof path, "%.250s", k);
            err_field(e, path, "is not a field of a proxy");
        }
    }
    const char *type = jsonx_str(body, "type");
    if (!type || (strcmp(type, "custom") != 0 && !is_managed(type))) {
        err_field(e, "type", "must be one of datacenter, isp, residential, mobile, custom");
        type = NULL;
    }
    const char *name = NULL, *proto = NULL;
    (void)str_field(body, "name", "name", NAME_MAX_LEN, 0, &name, e);
    if (str_field(body, "protocol", "protocol", 5, 0, &proto, e) == 0 && proto &&
        strcmp(proto, "http") != 0 && strcmp(proto, "https") != 0)
        err_field(e, "protocol", "must be http or https");
    json_t *bypass = json_object_get(body, "bypass_hosts");
    if (bypass)
        (void)check_bypass(bypass, e);
    json_t *cfg = json_object_get(body, "config");
    if (type && strcmp(type, "custom") == 0)
        check_custom_config(cfg, e);
    else if (type)
        (void)check_managed_config(cfg, e);
    if (err_has_fields(e)) {
        json_decref(body);
        return E_INVALID;
    }
    /* Gates: the plan's features, then what this server can offer. */
    rc = api_require_feature(rq, type && strcmp(type, "custom") == 0 ? "custom_proxies"
                                                                     : "managed_proxies");
    if (rc == 0 && bypass && json_array_size(bypass))
        rc = api_require_feature(rq, "proxy_bypass_hosts");
    if (rc == 0 && is_managed(type) && !json_object_get(M.managed, type))
        rc = err_set(e, E_INVALID, "managed_proxy_unavailable",
                     "type %s: this server has no %s upstream configured (operator: "
                     "--managed-proxies FILE)",
                     type, type);
    if (rc) {
        json_decref(body);
        return rc;
    }
    json_t *d = json_object();
    json_object_set_new(d, "protocol", json_string(proto ? proto : "http"));
    json_object_set_new(d, "bypass_hosts", bypass ? json_incref(bypass) : json_array());
    json_t *pub = json_is_object(cfg) ? json_deep_copy(cfg) : json_object();
    const char *pw = jsonx_str(cfg, "password");
    if (type && strcmp(type, "custom") == 0 && pw) {
        char *sealed = NULL;
        rc = secretbox_seal(M.key, pw, &sealed, e);
        if (rc == 0)
            json_object_set_new(d, "password", json_string(sealed));
        xfree(sealed);
    }
    json_object_del(pub, "password");
    const char *ca = jsonx_str(cfg, "ca_bundle");
    if (type && strcmp(type, "custom") == 0 && ca)
        json_object_set_new(d, "ca_bundle", json_string(ca));
    json_object_del(pub, "ca_bundle");
    json_object_set_new(d, "config", pub);
    struct proxy_rec p;
    memset(&p, 0, sizeof p);
    crypto_new_id(p.id);
    snprintf(p.org_id, sizeof p.org_id, "%s", a->org.id);
    snprintf(p.project_id, sizeof p.project_id, "%s", a->project.id);
    snprintf(p.name, sizeof p.name, "%s", name ? name : "");
    snprintf(p.type, sizeof p.type, "%s", type);
    p.created_at = clock_now_ms();
    p.data = jsonx_dump(d);
    json_decref(d);
    if (rc == 0)
        rc = store_proxy_insert(api_app(rq)->store, &p, LIM_PROXIES_PER_ORG);
    if (rc == 0)
        resp_json(rs, 200, render_proxy(&p));
    else if (rc == E_LIMIT && !e->rc)
        api_over_org_cap(e, "proxies", LIM_PROXIES_PER_ORG, LIM_PROXIES_PER_ORG,
                         LIM_RECORDS_RETRY_AFTER_S);
    else if (!e->rc)
        err_set(e, rc, "internal", "the proxy could not be stored");
    proxy_rec_clear(&p);
    json_decref(body);
    return rc;
}

int proxies_get(struct req *rq, struct resp *rs)
{
    struct proxy_rec p;
    int rc = load_proxy(rq, &p);
    if (rc == 0)
        resp_json(rs, 200, render_proxy(&p));
    proxy_rec_clear(&p);
    return rc;
}

int proxies_list(struct req *rq, struct resp *rs)
{
    struct auth *a = api_auth(rq);
    size_t limit, offset;
    int rc = req_page(rq, &limit, &offset);
    if (rc)
        return rc;
    struct page pg = {.limit = limit, .offset = offset};
    struct proxy_rec *rows = NULL;
    size_t n = 0;
    const char *name = req_query(rq, "name"), *query = req_query(rq, "query");
    rc = store_proxy_list(api_app(rq)->store, a->org.id, a->project.id, name && *name ? name : NULL,
                          query && *query ? query : NULL, &pg, &rows, &n);
    if (rc)
        return err_set(&rq->err, rc, "internal", "proxies could not be listed");
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(arr, render_proxy(&rows[i]));
        proxy_rec_clear(&rows[i]);
    }
    xfree(rows);
    resp_json(rs, 200, arr);
    resp_page(rs, offset, n, pg.has_more);
    return 0;
}

int proxies_update(struct req *rq, struct resp *rs)
{
    json_t *body;
    int rc = req_json_object(rq, 0, &body);
    if (rc)
        return rc;
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v)
    {
        if (strcmp(k, "name") != 0) {
            char path[300];
            snprintf(path, sizeof path, "%.250s", k);
            err_field(&rq->err, path, "cannot be changed (PATCH /proxies/{id} takes name)");
        }
    }
    json_t *nm = json_object_get(body, "name");
    if (nm && !json_is_null(nm) && (!json_is_string(nm) || json_string_length(nm) > NAME_MAX_LEN))
        err_field(&rq->err, "name", "must be a string of at most %d characters (\"\" clears it)",
                  NAME_MAX_LEN);
    struct proxy_rec p;
    memset(&p, 0, sizeof p);
    if (err_has_fields(&rq->err))
        rc = E_INVALID;
    if (rc == 0)
        rc = load_proxy(rq, &p);
    if (rc == 0 && nm) {
        snprintf(p.name, sizeof p.name, "%s", json_is_string(nm) ? json_string_value(nm) : "");
        rc = store_proxy_update(api_app(rq)->store, &p);
        if (rc)
            err_set(&rq->err, rc, rc == E_NOTFOUND ? "not_found" : "internal",
                    "proxy %s could not be updated", p.id);
    }
    if (rc == 0)
        resp_json(rs, 200, render_proxy(&p));
    proxy_rec_clear(&p);
    json_decref(body);
    return rc;
}

int proxies_delete(struct req *rq, struct resp *rs)
{
    struct auth *a = api_auth(rq);
    int rc = store_proxy_delete(api_app(rq)->store, a->org.id, a->project.id, rq->params[0]);
    if (rc == E_NOTFOUND)
        return err_set(&rq->err, rc, "not_found", "proxy %s not found", rq->params[0]);
    if (rc)
        return err_set(&rq->err, rc, "internal", "proxy %s could not be deleted", rq->params[0]);
    resp_empty(rs, 204);
    return 0;
}

int proxies_check(struct req *rq, struct resp *rs)
{
    json_t *body;
    int rc = req_json_object(rq, 1, &body);
    if (rc)
        return rc;
    const char *url = CHECK_URL_DEFAULT;
    json_t *u = json_object_get(body, "url");
    if (u && !json_is_null(u)) {
        if (!json_is_string(u) || json_string_length(u) < 1 || json_string_length(u) > 2048)
            rc = err_field(&rq->err, "url", "must be an http:// or https:// URL (max 2048)");
        else
            url = json_string_value(u);
    }
    struct proxy_rec p;
    memset(&p, 0, sizeof p);
    if (rc == 0)
        rc = load_proxy(rq, &p);
    if (rc == 0) {
        struct egress_upstream up;
        struct err pe;
        err_init(&pe);
        int urc = upstream_of(&p, &up);
        int prc = urc ? E_UNAVAIL : egress_probe(M.eg, &up, url, CHECK_TIMEOUT_MS, &pe);
        egress_upstream_clear(&up);
        if (prc == E_INVALID) {
            rc = prc;
            memcpy(&rq->err, &pe, sizeof pe);
        } else {
            snprintf(p.status, sizeof p.status, "%s", prc == 0 ? "available" : "unavailable");
            p.last_checked = clock_now_ms();
            log_info("proxy %s check via %s: %s%s%s", p.id, url, p.status, prc ? ": " : "",
                     prc ? (urc ? "no upstream configured" : pe.message) : "");
            rc = store_proxy_update(api_app(rq)->store, &p);
            if (rc)
                err_set(&rq->err, rc, "internal", "the check result could not be stored");
        }
    }
    if (rc == 0)
        resp_json(rs, 200, render_proxy(&p));
    proxy_rec_clear(&p);
    json_decref(body);
    return rc;
}

/* ------------------------------------------------------------ sessions */

static const char *kind_name(enum proxysel_kind k)
{
    switch (k) {
    case PROXYSEL_DIRECT:
        return "direct";
    case PROXYSEL_ID:
        return "id";
    case PROXYSEL_NAME:
        return "name";
    default:
        return "default";
    }
}

static void sel_read(const json_t *doc, struct proxysel *sel)
{
    memset(sel, 0, sizeof *sel);
    sel->kind = PROXYSEL_DEFAULT;
    json_t *ps = json_object_get(doc, "proxy_sel");
    const char *k = jsonx_str(ps, "kind"), *ref = jsonx_str(ps, "ref");
    if (!k) {
        const char *mode = jsonx_str(json_object_get(doc, "proxy"), "mode");
        const char *id = jsonx_str(json_object_get(doc, "proxy"), "id");
        if (id) {
            sel->kind = PROXYSEL_ID;
            snprintf(sel->ref, sizeof sel->ref, "%s", id);
        } else if (mode && strcmp(mode, "direct") == 0) {
            sel->kind = PROXYSEL_DIRECT;
        }
        return;
    }
    if (strcmp(k, "direct") == 0)
        sel->kind = PROXYSEL_DIRECT;
    else if (strcmp(k, "id") == 0 && ref) {
        sel->kind = PROXYSEL_ID;
        snprintf(sel->ref, sizeof sel->ref, "%s", ref);
    }
}

/* Resolves a selection for a session of org/project. */
static int sel_resolve(const struct session_rec *rec, const struct proxysel *sel, int stealth,
                       struct proxysel_egress *out, struct err *e)
{
    struct proxy_rec *rows = NULL;
    size_t n = 0;
    if ((sel->kind == PROXYSEL_ID || sel->kind == PROXYSEL_NAME) &&
        store_proxy_find(M.app->store, rec->org_id, sel->ref, &rows, &n) != 0)
        return err_set(e, E_INTERNAL, "internal", "proxies could not be read");
    struct proxysel_candidate *c = xcalloc(n + 1, sizeof *c);
    size_t in_project = 0;
    for (size_t i = 0; i < n; i++) {
        c[i] = (struct proxysel_candidate){rows[i].id, rows[i].name, rows[i].project_id, 1};
        in_project += strcmp(rows[i].project_id, rec->project_id) == 0;
    }
    int rc;
    /* A name no proxy of the project carries is a missing proxy (404), as an
     * unknown id is; several matches stay a 400 (select it by id). */
    if (sel->kind == PROXYSEL_NAME && in_project == 0)
        rc = err_set(e, E_NOTFOUND, "proxy_not_found", "proxy %s not found in this project",
                     sel->ref);
    else
        rc = proxysel_resolve(sel, stealth, rec->project_id, c, n,
                              M.has_default ? DEFAULT_REF : NULL, out, e);
    xfree(c);
    for (size_t i = 0; i < n; i++)
        proxy_rec_clear(&rows[i]);
    xfree(rows);
    return rc;
}

/* Rule 9 targets: every route's proxy must be a proxy of the session's
 * project; names become ids ("responses always use ID"). */
static int resolve_routes(const struct session_rec *rec, json_t *network, struct err *e)
{
    json_t *routes = json_object_get(network, "proxy_routes");
    size_t i;
    json_t *r;
    int rc = 0;
    json_array_foreach(routes, i, r)
    {
        json_t *t = json_object_get(r, "proxy");
        struct proxysel sel = {.kind = jsonx_str(t, "id") ? PROXYSEL_ID : PROXYSEL_NAME};
        const char *ref = jsonx_str(t, "id") ? jsonx_str(t, "id") : jsonx_str(t, "name");
        snprintf(sel.ref, sizeof sel.ref, "%s", ref ? ref : "");
        struct proxysel_egress eg;
        struct err re;
        err_init(&re);
        int one = sel_resolve(rec, &sel, 0, &eg, &re);
        if (one == E_INVALID) {
            char path[64];
            snprintf(path, sizeof path, "network.proxy_routes[%zu].proxy.name", i);
            rc = err_field(e, path, "%s names several proxies of this project; select it by id",
                           sel.ref);
        } else if (one) {
            rc = err_set(e, one, one == E_NOTFOUND ? "proxy_not_found" : "internal",
                         "network.proxy_routes[%zu].proxy: proxy %s not found in this project", i,
                         sel.ref);
            break;
        } else {
            json_object_set_new(r, "proxy", json_pack("{s:s}", "id", eg.proxy_id));
        }
    }
    return rc;
}

static void top_of(const struct proxysel_egress *eg, struct egress_top *top)
{
    memset(top, 0, sizeof *top);
    top->kind = eg->kind == PROXYSEL_EGRESS_PROXY ? EGRESS_PROXY : EGRESS_DIRECT;
    if (top->kind == EGRESS_PROXY)
        snprintf(top->proxy_ref, sizeof top->proxy_ref, "%s", eg->proxy_id);
}

/* Writes proxy, proxy_id and proxy_sel of the settings document. */
static void doc_write_sel(json_t *doc, const struct proxysel *sel, const struct proxysel_egress *eg)
{
    struct proxysel pinned = *sel;
    if (eg)
        proxysel_pin(sel, eg, &pinned);
    json_object_set_new(doc, "proxy", proxysel_to_json(&pinned, eg));
    const char *legacy = proxysel_legacy_id(&pinned);
    if (legacy)
        json_object_set_new(doc, "proxy_id", json_string(legacy));
    else
        json_object_del(doc, "proxy_id");
    json_object_set_new(doc, "proxy_sel",
                        json_pack("{s:s,s:s}", "kind", kind_name(pinned.kind), "ref", pinned.ref));
}

/* What a session's egress is made of, resolved in its owner's store
 * (proxies_handout in proxies.h is this, for a spare's hand-out). */
static int plan_resolve(const char *org_id, const char *project_id, const json_t *body, int stealth,
                        const json_t *network, struct proxies_handout *h, struct err *e)
{
    memset(h, 0, sizeof *h);
    h->sel.kind = PROXYSEL_DEFAULT;
    int rc = body ? proxysel_parse(body, 0, &h->sel, e) : 0;
    if (rc)
        return rc;
    struct session_rec owner;
    memset(&owner, 0, sizeof owner);
    snprintf(owner.org_id, sizeof owner.org_id, "%s", org_id);
    snprintf(owner.project_id, sizeof owner.project_id, "%s", project_id);
    if ((rc = sel_resolve(&owner, &h->sel, stealth, &h->eg, e)))
        return rc;
    h->network = json_is_object(network) ? json_deep_copy(network) : NULL;
    if (h->network && (rc = resolve_routes(&owner, h->network, e))) {
        proxies_handout_clear(h);
        return rc;
    }
    return 0;
}

/* Writes network, proxy, proxy_id and proxy_sel of the settings document. */
static void plan_write(json_t *doc, const struct proxies_handout *h)
{
    if (h->network)
        json_object_set(doc, "network", h->network);
    doc_write_sel(doc, &h->sel, &h->eg);
}

static int ext_prepare(struct session_ctx *sc, struct err *e)
{
    const struct session_rec *rec = sc->rec;
    struct proxies_handout h;
    struct launch_settings ls;
    launch_settings_from_json(sc->doc, &ls);
    int rc = plan_resolve(rec->org_id, rec->project_id, sc->body, ls.stealth, ls.network, &h, e);
    if (rc)
        return rc;
    struct egress_top top;
    top_of(&h.eg, &top);
    int port = 0;
    int netns = sc->opts && sc->opts->sandbox ? sandbox_netns(sc->opts->sandbox) : 0;
    rc = egress_open(M.eg, rec->id, rec->org_id, rec->project_id, h.network, &top, 1, netns, &port,
                     e);
    if (rc) {
        proxies_handout_clear(&h);
        return rc;
    }
    plan_write(sc->doc, &h);
    proxies_handout_clear(&h);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    json_object_set_new(sc->doc, "egress_url", json_string(url));
    if (sc->opts) {
        /* Borrowed from doc, which outlives the launch. */
        sc->opts->proxy_server = jsonx_str(sc->doc, "egress_url");
        if (M.extra_args[0])
            sc->opts->extra_args = M.extra_args;
    }
    return 0;
}

int proxies_handout_resolve(const char *org_id, const char *project_id, const json_t *body,
                            int stealth, const json_t *network, struct proxies_handout *h,
                            struct err *e)
{
    int rc = plan_resolve(org_id, project_id, body, stealth, network, h, e);
    if (rc)
        return rc;
    /* What egress_open would refuse, refused before a spare is taken. */
    struct netcfg *nc = netcfg_compile(h->network);
    if (!nc) {
        proxies_handout_clear(h);
        return err_field(e, "network", "the network configuration does not compile");
    }
    netcfg_free(nc);
    return 0;
}

int proxies_handout_apply(const struct proxies_handout *h, const struct session_rec *rec,
                          json_t *doc, struct err *e)
{
    struct egress_top top;
    top_of(&h->eg, &top);
    int rc = egress_rekey(M.eg, rec->id, rec->org_id, rec->project_id, h->network, &top, e);
    if (rc)
        return rc;
    plan_write(doc, h);
    log_info("session %s: egress given to its owner (%s)", rec->id,
             top.kind == EGRESS_DIRECT ? "direct" : top.proxy_ref);
    return 0;
}

void proxies_handout_clear(struct proxies_handout *h)
{
    json_decref(h->network);
    h->network = NULL;
}

static void ext_started(struct session_ctx *sc, const char *ws)
{
    /* ws://127.0.0.1:PORT/devtools/browser/... */
    const char *p = ws ? strstr(ws, "://") : NULL;
    p = p ? strchr(p + 3, ':') : NULL;
    if (!p)
        return;
    int port = (int)strtol(p + 1, NULL, 10);
    /* A sandboxed browser's DevTools port ("ws://nsN@...") is on its own
     * namespace's loopback, not the host's: nothing to protect there, and
     * the same number on the host belongs to somebody else. */
    int on_host = !strstr(ws, "://ns");
    if (on_host)
        egress_protect_port(M.eg, port);
    /* Rule 9: routes take effect once the session is created. */
    if (egress_routes_on(M.eg, sc->rec->id) != 0)
        log_warn("session %s: no egress listener", sc->rec->id);
    if (on_host) /* the protection to undo at the end */
        json_object_set_new(sc->doc, "devtools_port", json_integer(port));
    else
        json_object_del(sc->doc, "devtools_port");
}

static int ext_update(struct session_ctx *sc, const char *ws, struct err *e)
{
    (void)ws;
    struct proxysel cur, chg, next;
    sel_read(sc->doc, &cur);
    chg.kind = PROXYSEL_UNCHANGED;
    chg.ref[0] = '\0';
    int rc = sc->body ? proxysel_parse(sc->body, 1, &chg, e) : 0;
    if (rc)
        return rc;
    proxysel_merge(&cur, &chg, &next);
    struct proxysel_egress eg;
    memset(&eg, 0, sizeof eg);
    if (chg.kind == PROXYSEL_UNCHANGED) {
        /* Nothing asked: keep the stored (already pinned) selection, even if
         * its proxy was deleted since (its connections fail closed). */
        doc_write_sel(sc->doc, &cur, NULL);
        return 0;
    }
    struct launch_settings ls;
    launch_settings_from_json(sc->doc, &ls);
    if ((rc = sel_resolve(sc->rec, &next, ls.stealth, &eg, e)))
        return rc;
    {
        struct egress_top top;
        top_of(&eg, &top);
        if (egress_set_top(M.eg, sc->rec->id, &top) != 0)
            log_warn("session %s: no egress listener to switch", sc->rec->id);
        else
            log_info("session %s: egress switched to %s", sc->rec->id,
                     top.kind == EGRESS_DIRECT ? "direct" : top.proxy_ref);
    }
    doc_write_sel(sc->doc, &next, &eg);
    return 0;
}

static void ext_ending(struct session_ctx *sc, const char *reason)
{
    (void)reason;
    /* The session's egress traffic, for usage accounting (not yet part of
     * BrowserUsage, which has uptime_ms only). */
    uint64_t sent = 0, received = 0;
    if (egress_bytes(M.eg, sc->rec->id, &sent, &received) == 0)
        log_info("session %s: egress sent %llu bytes, received %llu bytes", sc->rec->id,
                 (unsigned long long)sent, (unsigned long long)received);
    egress_close(M.eg, sc->rec->id);
    json_t *dp = json_object_get(sc->doc, "devtools_port");
    if (json_is_integer(dp))
        egress_unprotect_port(M.eg, (int)json_integer_value(dp));
}

/* A spare handed out: the proxy and network rules of the owner's create
 * resolve in the owner's store before a spare is taken (sc->doc: the
 * owner's settings, with stealth and network as validated). */
static int ext_handout_check(struct session_ctx *sc, void **state, struct err *e)
{
    struct proxies_handout *h = xcalloc(1, sizeof *h);
    struct launch_settings ls;
    launch_settings_from_json(sc->doc, &ls);
    int rc = proxies_handout_resolve(sc->rec->org_id, sc->rec->project_id, sc->body, ls.stealth,
                                     ls.network, h, e);
    if (rc) {
        proxies_handout_clear(h);
        xfree(h);
        return rc;
    }
    *state = h;
    return 0;
}

static void ext_handout_cancel(void *state)
{
    proxies_handout_clear(state);
    xfree(state);
}

/* The spare's egress listener becomes the owner's. */
static int ext_handout(struct session_ctx *sc, void *state, struct err *e)
{
    int rc = proxies_handout_apply(state, sc->rec, sc->doc, e);
    ext_handout_cancel(state);
    return rc;
}

static const struct session_ext proxies_ext = {
    .name = "proxies",
    .prepare = ext_prepare,
    .handout_check = ext_handout_check,
    .handout = ext_handout,
    .handout_cancel = ext_handout_cancel,
    .started = ext_started,
    .update = ext_update,
    .ending = ext_ending,
};

/* ------------------------------------------------------------ init */

static int load_key(struct app *app, struct err *e)
{
    unsigned char raw[SECRETBOX_KEY_LEN];
    char fresh[2 * SECRETBOX_KEY_LEN + 1], hex[2 * SECRETBOX_KEY_LEN + 8];
    crypto_random(raw, sizeof raw);
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(fresh + 2 * i, 3, "%02x", raw[i]);
    if (store_meta_init(app->store, "secret_key", fresh, hex, sizeof hex) != 0 ||
        secretbox_key_from_hex(hex, M.key) != 0)
        return err_set(e, E_INTERNAL, "internal", "cannot load the secret key (meta secret_key)");
    return 0;
}

static int load_managed(const char *path, struct err *e)
{
    M.managed = json_object();
    if (!path || !*path)
        return 0;
    json_error_t je;
    json_t *v = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(v)) {
        json_decref(v);
        return err_set(e, E_INVALID, "bad_request", "--managed-proxies %s: %s", path,
                       v ? "must be a JSON object" : je.text);
    }
    const char *k;
    json_t *o;
    json_object_foreach(v, k, o)
    {
        struct egress_upstream up;
        if (!is_managed(k) || upstream_from_operator(o, &up) != 0) {
            /* k belongs to v: the message is made before v goes. */
            (void)err_set(e, E_INVALID, "bad_request",
                          "--managed-proxies %s: \"%s\" must be one of datacenter, isp, "
                          "residential, mobile with {host, port, username?, password?, "
                          "protocol?: http|https}",
                          path, k);
            json_decref(v);
            return E_INVALID;
        }
        egress_upstream_clear(&up);
    }
    json_decref(M.managed);
    M.managed = v;
    return 0;
}

/* [user:password@]HOST:PORT */
static int load_default(const char *spec, struct err *e)
{
    if (!spec || !*spec)
        return 0;
    const char *at = strrchr(spec, '@');
    const char *hp = at ? at + 1 : spec;
    const char *colon = strrchr(hp, ':');
    char *end;
    long port = colon ? strtol(colon + 1, &end, 10) : 0;
    if (!colon || colon == hp || *end || port < 1 || port > 65535 ||
        (size_t)(colon - hp) >= sizeof M.dflt.host)
        return err_set(e, E_INVALID, "bad_request",
                       "--default-proxy must be [USER:PASSWORD@]HOST:PORT");
    memset(&M.dflt, 0, sizeof M.dflt);
    size_t hl = (size_t)(colon - hp);
    if (hp[0] == '[' && hl >= 2 && hp[hl - 1] == ']')
        snprintf(M.dflt.host, sizeof M.dflt.host, "%.*s", (int)(hl - 2), hp + 1);
    else
        snprintf(M.dflt.host, sizeof M.dflt.host, "%.*s", (int)hl, hp);
    M.dflt.port = (int)port;
    if (at)
        M.dflt.userpass = xstrndup(spec, (size_t)(at - spec));
    M.has_default = 1;
    return 0;
}

/* BROWSERD_CHROMIUM_EXTRA_ARGS (test mode): arguments start at each "--"
 * that follows whitespace, so a value may contain spaces
 * ("--host-resolver-rules=MAP a.test 127.0.0.2,MAP b.test 127.0.0.3"). */
static void load_extra_args(void)
{
    const char *env = getenv("BROWSERD_CHROMIUM_EXTRA_ARGS");
    if (!env || !*env)
        return;
    M.extra_buf = xstrdup(env);
    size_t n = 0;
    char *p = M.extra_buf;
    while (*p == ' ')
        p++;
    while (*p && n < EXTRA_ARGS_MAX) {
        M.extra_args[n++] = p;
        char *next = strstr(p, " --");
        if (!next)
            break;
        *next = '\0';
        for (char *t = next - 1; t >= p && *t == ' '; t--)
            *t = '\0';
        p = next + 1;
    }
    for (size_t i = 0; i < n; i++) {
        static const char flag[] = "--host-resolver-rules=";
        if (strncmp(M.extra_args[i], flag, sizeof flag - 1) == 0)
            M.host_rules = xstrdup(M.extra_args[i] + sizeof flag - 1);
    }
    log_warn("test mode: BROWSERD_CHROMIUM_EXTRA_ARGS passes %zu extra argument(s) to Chromium", n);
}

/* The egress's address rule for the server's own requests for tenants
 * (OTLP export, store redirects: proxy/netguard.h). */
static int guard_check(void *ctx, int fam, const uint8_t *addr, int port)
{
    return egress_addr_allowed(ctx, fam, addr, port);
}

/* The session relay's hooks (proxy/selfrelay.h): a browser reaches only
 * its own session's CDP relay, with that session's own cdp token. */
static int self_verify(void *ctx, const char *jwt, const char *sid, const char *org)
{
    struct app *app = ctx;
    struct token_claims c;
    struct err e;
    err_init(&e);
    if (token_verify(app->token_key, sizeof app->token_key, jwt, "cdp", clock_now_ms() / 1000, &c,
                     &e) != 0)
        return -1;
    return strcmp(c.sub, sid) == 0 && strcmp(c.org, org) == 0 ? 0 : -1;
}

static int self_attach(void *ctx, const char *org, const char *sid, const char *target, int fd,
                       const char *accept, struct err *e)
{
    if (target && !cdp_target_id_ok(target))
        return err_set(e, E_INVALID, "bad_request",
                       "target: must be 1 to 64 hex digits (an id of /json/list)");
    return browsers_cdp_fd(ctx, org, sid, target, fd, accept, e);
}

/* BROWSERD_EGRESS_SOCKMAP (docs/operator.md): "on" or "1" splices CONNECT
 * tunnels in the kernel when it allows; anything else, or unset (the
 * default), relays every tunnel in user space. Off by default: on the
 * kernel measured (6.18) the in-kernel path moved bulk bytes no faster
 * than the user-space relay (docs/egress-proxy.md, "In the kernel"). */
static int sockmap_on(void)
{
    const char *v = getenv("BROWSERD_EGRESS_SOCKMAP");
    return v && (strcmp(v, "on") == 0 || strcmp(v, "1") == 0);
}

int proxies_init(struct app *app, struct err *e)
{
    M.app = app;
    int rc = load_key(app, e);
    if (rc == 0)
        rc = load_managed(app->cfg.managed_proxies, e);
    if (rc == 0)
        rc = load_default(app->cfg.default_proxy, e);
    if (rc)
        return rc;
    load_extra_args();
    struct selfrelay_hooks sh = {.verify = self_verify, .attach = self_attach, .ctx = app};
    if ((rc = selfrelay_start(&sh, &M.self_port, e)) != 0)
        return rc;
    struct egress_config cfg = {
        .allow_loopback = app->cfg.allow_loopback,
        .allow_private = app->cfg.allow_private,
        .host_rules = M.host_rules,
        .proxy_ca_file = app->cfg.proxy_ca_file,
        .server_port = &app->cfg.listen_port,
        .self_port = &M.self_port,
        .resolve = resolve_hook,
        .failed = failed_hook,
        .ctx = NULL,
        .sockmap = sockmap_on(),
    };
    if ((rc = egress_start(&cfg, &M.eg, e)))
        return rc;
    netguard_set(guard_check, M.eg);
    /* Pages reach the session relay only through the egress's redirect. */
    egress_protect_port(M.eg, M.self_port);
    session_ext_register(&proxies_ext);
    return 0;
}

void proxies_fini(void)
{
    netguard_set(NULL, NULL);
    selfrelay_fini(); /* a no-op when main.c stopped it already */
    egress_stop(M.eg);
    M.eg = NULL;
    json_decref(M.managed);
    M.managed = NULL;
    egress_upstream_clear(&M.dflt);
    xfree(M.host_rules);
    xfree(M.extra_buf);
}

struct egress *proxies_egress(void)
{
    return M.eg;
}

int proxies_resolve_ref(const char *org_id, const char *project_id, const char *ref, char *id_out,
                        size_t cap, struct err *e)
{
    struct session_rec rec;
    memset(&rec, 0, sizeof rec);
    snprintf(rec.org_id, sizeof rec.org_id, "%s", org_id);
    snprintf(rec.project_id, sizeof rec.project_id, "%s", project_id);
    struct proxysel sel = {.kind = PROXYSEL_ID};
    snprintf(sel.ref, sizeof sel.ref, "%s", ref);
    struct proxysel_egress eg;
    int rc = M.app ? sel_resolve(&rec, &sel, 0, &eg, e)
                   : err_set(e, E_NOTFOUND, "proxy_not_found", "proxy %s not found", ref);
    if (rc == 0)
        snprintf(id_out, cap, "%s", eg.proxy_id);
    return rc;
}

int proxies_session_bytes(const char *session_id, uint64_t *sent, uint64_t *received)
{
    return M.eg ? egress_bytes(M.eg, session_id, sent, received) : E_NOTFOUND;
}
