/* Every endpoint the server answers, and who may call it. */
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "api/org.h"

/* Answers 501 with an Error record naming the feature, so that a client
 * calling an endpoint this server does not serve yet sees that, never a 404
 * that looks like a missing object. */
int api_not_implemented(struct req *rq, struct resp *rs)
{
    (void)rs;
    static const struct {
        const char *prefix, *feature;
    } features[] = {
        {"/browsers", "browser sessions"},
        {"/browser_pools", "browser pools"},
        {"/profiles", "profiles"},
        {"/proxies", "proxies"},
        {"/extensions", "extensions"},
        {"/apps", "apps"},
        {"/deployments", "deployments"},
        {"/invocations", "invocations"},
        {"/auth", "managed auth"},
        {"/credentials", "credentials"},
        {"/credential_providers", "credential providers"},
        {"/search", "search"},
        {"/org/audit_logs", "audit logs"},
        {"/org/config", "config registry"},
    };
    const char *feature = "this endpoint";
    for (size_t i = 0; i < sizeof features / sizeof features[0]; i++)
        if (strncmp(rq->path, features[i].prefix, strlen(features[i].prefix)) == 0)
            feature = features[i].feature;
    return err_set(&rq->err, E_NOTIMPL, "not_implemented",
                   "%s: not implemented by this server yet (%s %s)", feature, rq->method, rq->path);
}

#define KEY    AUTH_KEY
#define ORG    (AUTH_KEY | AUTH_NO_PROJECT)
#define ORGADM (AUTH_KEY | AUTH_NO_PROJECT | AUTH_ORG_ADMIN)
#define NI(path)                                                                                   \
    {"GET", path, api_not_implemented, KEY}, {"POST", path, api_not_implemented, KEY},             \
        {"PATCH", path, api_not_implemented, KEY}, {"PUT", path, api_not_implemented, KEY},        \
    {                                                                                              \
        "DELETE", path, api_not_implemented, KEY                                                   \
    }

const struct route api_routes[] = {
    {"GET", "/org/entitlements", org_get_entitlements, ORG},

    {"POST", "/org/projects", org_project_create, ORGADM},
    {"GET", "/org/projects", org_project_list, ORGADM},
    {"GET", "/org/projects/{id}", org_project_get, ORGADM},
    {"PATCH", "/org/projects/{id}", org_project_update, ORGADM},
    {"DELETE", "/org/projects/{id}", org_project_delete, ORGADM},

    {"POST", "/org/api_keys", org_key_create, ORGADM},
    {"GET", "/org/api_keys", org_key_list, ORGADM},
    {"GET", "/org/api_keys/{id}", org_key_get, ORGADM},
    {"PATCH", "/org/api_keys/{id}", org_key_update, ORGADM},
    {"DELETE", "/org/api_keys/{id}", org_key_delete, ORGADM},
    {"POST", "/org/api_keys/{id}/rotate", org_key_rotate, ORGADM},

    {"POST", "/admin/orgs", admin_org_create, AUTH_ADMIN},
    {"GET", "/admin/orgs/{id}", admin_org_get, AUTH_ADMIN},
    {"PATCH", "/admin/orgs/{id}", admin_org_update, AUTH_ADMIN},
    {"POST", "/admin/orgs/{id}/api_keys", admin_key_create, AUTH_ADMIN},
    {"GET", "/admin/plans", admin_plan_list, AUTH_ADMIN},
    {"PUT", "/admin/plans/{id}", admin_plan_put, AUTH_ADMIN},

    {"POST", "/browsers", browsers_create, KEY},
    {"GET", "/browsers", browsers_list, KEY},
    {"GET", "/browsers/{id}", browsers_get, KEY},
    {"PATCH", "/browsers/{id}", browsers_update, KEY},
    {"DELETE", "/browsers/{id}", browsers_delete, KEY},
    {"GET", "/browser/cdp", browsers_cdp, AUTH_NONE},
    {"GET", "/browser/webdriver", browsers_webdriver, AUTH_NONE},
    /* routes: telemetry */
    /* routes: webdriver */
    NI("/browsers/{id}/*"),
    /* routes: pools */
    NI("/browser_pools"),
    NI("/browser_pools/*"),
    /* routes: profiles */
    NI("/profiles"),
    NI("/profiles/*"),
    /* routes: proxies */
    NI("/proxies"),
    NI("/proxies/*"),
    NI("/extensions"),
    NI("/extensions/*"),
    NI("/apps"),
    NI("/apps/*"),
    NI("/deployments"),
    NI("/deployments/*"),
    NI("/invocations"),
    NI("/invocations/*"),
    NI("/auth/*"),
    NI("/credentials"),
    NI("/credentials/*"),
    NI("/credential_providers"),
    NI("/credential_providers/*"),
    NI("/search/*"),
    NI("/org/audit_logs"),
    NI("/org/config/*"),
};

const size_t api_nroutes = sizeof api_routes / sizeof api_routes[0];
