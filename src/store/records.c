/*
 * store/records: releasing what a record owns (store.h's *_clear), the same
 * for every backend. Here rather than in one backend's file so that neither
 * backend nor the key cache (keycache.c) depends on the SQLite backend to
 * free a record: the store's files include each other without a circle.
 */
#include "core/xalloc.h"
#include "store/store.h"

void pool_rec_clear(struct pool_rec *p)
{
    xfree(p->config);
    p->config = NULL;
}

void vault_rec_clear(struct vault_rec *v)
{
    if (!v)
        return;
    xfree(v->data);
    v->data = NULL;
}

void cred_rec_clear(struct cred_rec *c)
{
    if (!c)
        return;
    xfree(c->data);
    c->data = NULL;
}

void proxy_rec_clear(struct proxy_rec *p)
{
    if (!p)
        return;
    xfree(p->data);
    p->data = NULL;
}

void session_rec_clear(struct session_rec *s)
{
    xfree(s->data);
    s->data = NULL;
}

void telem_event_rec_clear(struct telem_event_rec *r)
{
    xfree(r->text);
    r->text = NULL;
}

void audit_rec_clear(struct audit_rec *r)
{
    xfree(r->path);
    xfree(r->route);
    xfree(r->client_ip);
    xfree(r->user_agent);
    xfree(r->user_id);
    xfree(r->domain);
    r->path = r->route = r->client_ip = r->user_agent = r->user_id = r->domain = NULL;
}

void otlp_dest_rec_clear(struct otlp_dest_rec *d)
{
    xfree(d->headers);
    d->headers = NULL;
}

void org_rec_clear(struct org_rec *o)
{
    xfree(o->overrides);
    o->overrides = NULL;
}

void authconn_rec_clear(struct authconn_rec *c)
{
    if (!c)
        return;
    xfree(c->data);
    c->data = NULL;
}

void appobj_rec_clear(struct appobj_rec *r)
{
    if (!r)
        return;
    xfree(r->data);
    r->data = NULL;
}
