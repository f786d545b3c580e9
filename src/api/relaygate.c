/* The relay gate: attaches to the relay engine cannot race its shutdown. */
#include "api/api.h"
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

void api_relay_shutdown(struct app *app)
{
    pthread_rwlock_wrlock(&app->relay_gate);
    app->relay_closed = 1;
    pthread_rwlock_unlock(&app->relay_gate);
    relay_stop(app->relay); /* closes every connection; on_close runs for each */
    app->relay = NULL;
}
