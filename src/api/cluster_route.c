/*
 * Requests that need a live browser, on a cluster: any node answers any
 * request, and a request whose browser (or pool) runs on another node is
 * forwarded there through one hop (cluster/forward.h), with its original
 * headers: the owner authenticates it again. Reads (GET /browsers/{id},
 * lists, telemetry events) are answered from the shared store by whichever
 * node receives them. docs/multinode.md.
 */
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "cluster/forward.h"
#include "cluster/node.h"
#include "core/log.h"

/* How long a hop may take to connect to the owner. */
#define HOP_CONNECT_MS 2000

/* Routes served where the session's browser runs: everything under
 * /browsers/{id} except the record itself (GET) and its stored telemetry. */
static int session_owned(const struct req *rq)
{
    const char *pat = rq->route->pattern;
    if (strncmp(pat, "/browsers/{id}", 14) != 0)
        return 0;
    if (strcmp(pat, "/browsers/{id}") == 0)
        return strcmp(rq->method, "GET") != 0;
    return strcmp(pat, "/browsers/{id}/telemetry/events") != 0;
}

/* Routes served by the node whose engine runs the pool. */
static int route_pool_owned(const struct req *rq)
{
    return strncmp(rq->route->pattern, "/browser_pools/{id}", 19) == 0;
}

static int forward_to(struct req *rq, struct resp *rs, const char *node, int ended, int upgrade)
{
    struct app *app = api_app(rq);
    char url[512];
    int rc = node_locate(app->node, node, url, sizeof url, &rq->err);
    if (rc == 0)
        return -1;
    if (rc != 1)
        return ended ? -1 : rc; /* an ended row is answered from the store here */
    if (forward_is_hop(rq))     /* the sender thought we own it: we do not */
        return err_set(&rq->err, E_UNAVAIL, "node_unavailable",
                       "this request was forwarded to a node that does not run its browser "
                       "(node %s does); retry",
                       node);
    if (rq->auth)
        api_auth(rq)->forwarded = 1;
    return upgrade ? forward_upgrade(rq, rs, url, HOP_CONNECT_MS)
                   : forward_http(rq, rs, url, HOP_CONNECT_MS);
}

int api_route_hook(struct req *rq, struct resp *rs, unsigned flags)
{
    struct app *app = api_app(rq);
    if (!store_shared(app->store) || (flags & HTTP_ROUTE_PROBE))
        return -1;
    if (!app->node || !node_serving(app->node))
        return err_set(&rq->err, E_UNAVAIL, "node_unavailable",
                       "this node is not a member of the cluster right now (it lost the "
                       "database or was declared dead); retry on another node");
    int sess = session_owned(rq), pool = !sess && route_pool_owned(rq);
    if ((!sess && !pool) || !rq->auth)
        return -1;
    struct auth *a = api_auth(rq);
    if (sess) {
        struct session_rec s;
        memset(&s, 0, sizeof s);
        if (store_session_get(app->store, a->org.id, a->project.id, rq->params[0], 1, &s) != 0)
            return -1; /* the handler answers 404 */
        char node[STORE_ID];
        memcpy(node, s.node_id, sizeof node);
        int ended = strcmp(s.status, "active") != 0;
        session_rec_clear(&s);
        return forward_to(rq, rs, node, ended, 0);
    }
    struct pool_rec p;
    memset(&p, 0, sizeof p);
    if (store_pool_get(app->store, a->org.id, a->project.id, rq->params[0], &p) != 0)
        return -1;
    char node[STORE_ID];
    memcpy(node, p.node_id, sizeof node);
    pool_rec_clear(&p);
    return forward_to(rq, rs, node, 0, 0);
}

int api_cluster_forward(struct req *rq, struct resp *rs, const char *org, const char *session_id,
                        int upgrade)
{
    struct app *app = api_app(rq);
    if (!store_shared(app->store) || !app->node)
        return -1;
    struct session_rec s;
    memset(&s, 0, sizeof s);
    if (store_session_get(app->store, org, "", session_id, 1, &s) != 0)
        return -1;
    char node[STORE_ID];
    memcpy(node, s.node_id, sizeof node);
    int ended = strcmp(s.status, "active") != 0;
    session_rec_clear(&s);
    return forward_to(rq, rs, node, ended, upgrade);
}

int api_cluster_forward_node(struct req *rq, struct resp *rs, const char *node)
{
    struct app *app = api_app(rq);
    if (!store_shared(app->store) || !app->node || !node || !*node)
        return -1;
    return forward_to(rq, rs, node, 1, 0);
}
