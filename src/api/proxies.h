/*
 * proxies: the /proxies resource (custom and managed proxies of a project),
 * the server-wide egress proxy engine (proxy/egress.h) and the session module
 * that gives every browser its own egress listener (session/ext.h).
 *
 * Passwords of custom proxies are sealed with core/secretbox under the store's
 * meta key "secret_key" and never leave the server in a response or a log line
 * (records show has_password). Managed types map to upstreams the operator
 * lists in the --managed-proxies file; --default-proxy is the default stealth
 * proxy. Design note: docs/egress-proxy.md.
 */
#ifndef BD_API_PROXIES_H
#define BD_API_PROXIES_H

#include "api/api.h"
#include "domain/proxysel.h"
#include "http/http.h"
#include "proxy/egress.h"
#include "store/store.h"

/* Handlers (routes.c). */
int proxies_create(struct req *rq, struct resp *rs);
int proxies_get(struct req *rq, struct resp *rs);
int proxies_list(struct req *rq, struct resp *rs);
int proxies_update(struct req *rq, struct resp *rs);
int proxies_delete(struct req *rq, struct resp *rs);
int proxies_check(struct req *rq, struct resp *rs);

/* Loads the secret key (made once, kept in the store), the managed-proxies
 * file (app->cfg.managed_proxies) and the default proxy
 * (app->cfg.default_proxy), starts the egress engine and registers the
 * session module. Call once before sess_recover. app is borrowed for the
 * life of the process. Returns 0, or E_INVALID / E_INTERNAL with e filled
 * (the server must not start). */
int proxies_init(struct app *app, struct err *e) WUR;

/* Stops the egress engine (every listener and tunnel); after sessions ended. */
void proxies_fini(void);

/* The running engine (NULL before proxies_init). */
struct egress *proxies_egress(void);

/* For pools (proxy_id of POST/PATCH /browser_pools): checks that ref is the
 * id of a proxy of org/project and copies the id to id_out. 0, or E_NOTFOUND
 * with code proxy_not_found. */
int proxies_resolve_ref(const char *org_id, const char *project_id, const char *ref, char *id_out,
                        size_t cap, struct err *e) WUR;

/* A create served by a spare browser (docs/spares.md): the spare's egress
 * listener was opened for no organization, with the default selection and
 * rules; at hand-out it gets the owner's. Resolve before the spare is taken
 * (a refused create must not spend one), apply to the taken spare. */
struct proxies_handout {
    struct proxysel sel;       /* the create's selection */
    struct proxysel_egress eg; /* what it resolved to */
    json_t *network;           /* owned: the create's network, route targets as ids; or NULL */
};

/* Resolves the proxy selection of a create body (proxy, proxy_id,
 * disable_default_proxy; body may be NULL) and its validated network rules
 * (NULL = none) in the store of org/project, as a cold create's prepare
 * does, with the same errors: E_NOTFOUND proxy_not_found, E_INVALID (a name
 * several proxies carry, rules that do not compile), E_INTERNAL. On success
 * release h with proxies_handout_clear. */
int proxies_handout_resolve(const char *org_id, const char *project_id, const json_t *body,
                            int stealth, const json_t *network, struct proxies_handout *h,
                            struct err *e) WUR;

/* Gives the spare's egress listener (session rec->id) the owner of rec and
 * h (egress_rekey: what it carried before is closed) and writes network,
 * proxy, proxy_id and proxy_sel into the settings document doc as a cold
 * create's prepare does. 0, or the egress's error (the spare is then
 * spent). */
int proxies_handout_apply(const struct proxies_handout *h, const struct session_rec *rec,
                          json_t *doc, struct err *e) WUR;

/* Releases what h owns; accepts a cleared h. */
void proxies_handout_clear(struct proxies_handout *h);

/* Bytes a live session's pages sent and received through its egress.
 * E_NOTFOUND when the session has no listener. */
int proxies_session_bytes(const char *session_id, uint64_t *sent, uint64_t *received) WUR;

#endif
