/* The relay gate: attaches to the relay engine cannot race its shutdown. */
#include "api/api.h"
#include "core/limits.h"
#include "core/share.h"
#include "http/guard.h"
#include "proxy/relay.h"

int api_relay_attach(struct app *app, int client_fd, const char *client_extra,
                     size_t client_extra_len, int upstream_fd, const char *upstream_extra,
                     size_t upstream_extra_len, const struct relay_hooks *hooks, struct err *e)
{
    pthread_rwlock_rdlock(&app->relay_gate);
    int rc = app->relay_closed
                 ? err_set(e, E_UNAVAIL, "unavailable", "the server is stopping")
                 : relay_attach(app->relay, client_fd, client_extra, client_extra_len, upstream_fd,
                                upstream_extra, upstream_extra_len, hooks, e);
    pthread_rwlock_unlock(&app->relay_gate);
    return rc;
}

/* CDP WebSockets relayed at once, with each organization's and each
 * session's share (LIM_RELAY_CONNS*). */
static struct share conns = SHARE_INIT("CDP WebSockets", LIM_RELAY_CONNS, LIM_RELAY_CONNS_PER_ORG,
                                       LIM_RELAY_CONNS_PER_SESSION);

int api_relay_conn_take(const char *org, const char *session, struct err *e)
{
    return share_take_or_err(&conns, org, session, 1, e);
}

void api_relay_conn_give(const char *org, const char *session)
{
    share_give(&conns, org, session);
}

/* BiDi WebSockets relayed at once, shared the same way (LIM_BIDI_CONNS*). */
static struct share bidi_conns = SHARE_INIT("BiDi WebSockets", LIM_BIDI_CONNS,
                                            LIM_BIDI_CONNS_PER_ORG, LIM_BIDI_CONNS_PER_SESSION);

int api_bidi_conn_take(const char *org, const char *session, struct err *e)
{
    return share_take_or_err(&bidi_conns, org, session, 1, e);
}

void api_bidi_conn_give(const char *org, const char *session)
{
    share_give(&bidi_conns, org, session);
}

void api_relay_budgets_init(struct app *app)
{
    app->relay_org_bytes = budget_new(LIM_RELAY_MSG_BUDGET_BYTES, LIM_RELAY_MSG_ORG_BYTES);
    app->relay_session_bytes = budget_new(LIM_RELAY_MSG_BUDGET_BYTES, LIM_RELAY_MSG_SESSION_BYTES);
}

/* Two books: the organizations' (with the server's total) and the sessions'. */
int api_relay_charge(struct app *app, const char *org, const char *session, long long delta)
{
    if (!app->relay_org_bytes)
        return 0;
    if (delta < 0) {
        budget_give(app->relay_org_bytes, org, (size_t)-delta);
        budget_give(app->relay_session_bytes, session, (size_t)-delta);
        return 0;
    }
    if (budget_take(app->relay_org_bytes, org, (size_t)delta) != 0)
        return -1;
    if (budget_take(app->relay_session_bytes, session, (size_t)delta) != 0) {
        budget_give(app->relay_org_bytes, org, (size_t)delta);
        return -1;
    }
    return 0;
}

void api_relay_shutdown(struct app *app)
{
    pthread_rwlock_wrlock(&app->relay_gate);
    app->relay_closed = 1;
    pthread_rwlock_unlock(&app->relay_gate);
    relay_stop(app->relay); /* closes every connection; on_close runs for each */
    app->relay = NULL;
    budget_free(app->relay_org_bytes); /* every charge was given back by then */
    budget_free(app->relay_session_bytes);
    app->relay_org_bytes = app->relay_session_bytes = NULL;
}
