/* Every endpoint the server answers, and who may call it. */
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "api/apps.h"
#include "api/computer.h"
#include "api/credentials.h"
#include "api/credprov.h"
#include "api/curl.h"
#include "api/extensions.h"
#include "api/fs.h"
#include "api/process.h"
#include "api/repl.h"
#include "api/replays.h"
#include "api/webmcp.h"
#include "api/logs.h"
#include "api/org.h"
#include "api/admin.h"
#include "api/audit.h"
#include "api/browsers.h"
#include "api/pools.h"
#include "api/telemetry.h"
#include "api/vaults.h"
#include "api/webdriver.h"
#include "api/wdclassic.h"
#include "api/profiles.h"
#include "api/proxies.h"
#include "api/health.h"
#include "api/mcp.h"
#include "api/authconn.h"
#include "api/console.h"
#include "api/openapi.h"
#include "api/scrape.h"
#include "api/search.h"
#include "api/cfgreg.h"

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
        {"/org/credential_providers", "credential providers"},
        {"/search", "search"},
        {"/audit-logs", "audit logs"},
        {"/config-registry", "config registry"},
        {"/vaults", "vaults"},
        {"/vault-provider-configs", "vault provider configs"},
        {"/org/limits", "organization limits"},
        {"/org/projects", "project limits"},
    };
    /* Sub-resources of a session: /browsers/{id}/<area>/... */
    static const struct {
        const char *area, *feature;
    } areas[] = {
        {"fs", "browser filesystem"},       {"computer", "browser computer controls"},
        {"process", "browser processes"},   {"replays", "browser replays"},
        {"logs", "browser logs"},           {"playwright", "browser playwright"},
        {"curl", "browser curl"},           {"extensions", "browser extensions"},
        {"repl", "browser repl"},           {"webmcp", "browser webmcp"},
        {"telemetry", "browser telemetry"},
    };
    const char *feature = "this endpoint";
    for (size_t i = 0; i < sizeof features / sizeof features[0]; i++)
        if (strncmp(rq->path, features[i].prefix, strlen(features[i].prefix)) == 0)
            feature = features[i].feature;
    if (strncmp(rq->path, "/browsers/", 10) == 0) {
        const char *sub = strchr(rq->path + 10, '/');
        for (size_t i = 0; sub && i < sizeof areas / sizeof areas[0]; i++) {
            size_t n = strlen(areas[i].area);
            if (strncmp(sub + 1, areas[i].area, n) == 0 && (sub[1 + n] == '/' || !sub[1 + n]))
                feature = areas[i].feature;
        }
    }
    return err_set(&rq->err, E_NOTIMPL, "not_implemented",
                   "%s: not implemented by this server yet (%s %s)", feature, rq->method, rq->path);
}

#define KEY    AUTH_KEY
#define ORG    (AUTH_KEY | AUTH_NO_PROJECT)
#define ORGADM (AUTH_KEY | AUTH_NO_PROJECT | AUTH_ORG_ADMIN)
/* Handlers that launch, restart or act on a browser, or wait on the network:
 * run on the transport's blocking threads (http.h). */
#define SLOW (AUTH_KEY | HTTP_ROUTE_BLOCKING)
#define NI(path)                                                                                   \
    {"GET", path, api_not_implemented, KEY}, {"POST", path, api_not_implemented, KEY},             \
        {"PATCH", path, api_not_implemented, KEY}, {"PUT", path, api_not_implemented, KEY},        \
    {                                                                                              \
        "DELETE", path, api_not_implemented, KEY                                                   \
    }

const struct route api_routes[] = {
    {"GET", "/org/entitlements", org_get_entitlements, ORG},
    {"GET", "/auth/context", org_auth_context, KEY},

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
    {"GET", "/admin/audit-logs", audit_admin_list, AUTH_ADMIN},

    {"POST", "/browsers", browsers_create, SLOW},
    {"GET", "/browsers", browsers_list, KEY},
    {"GET", "/browsers/{id}", browsers_get, KEY},
    {"PATCH", "/browsers/{id}", browsers_update, SLOW},
    {"DELETE", "/browsers/{id}", browsers_delete, SLOW},
    {"GET", "/browser/cdp", browsers_cdp, AUTH_NONE},
    {"GET", "/browser/cdp/json/version", cdp_disc_version_q, AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"GET", "/browser/cdp/json/list", cdp_disc_list_q, AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"GET", "/browser/cdp/json", cdp_disc_list_q, AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"GET", "/browser/cdp/{token}/json/version", cdp_disc_version_p,
     AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"GET", "/browser/cdp/{token}/json/list", cdp_disc_list_p, AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"GET", "/browser/cdp/{token}/json", cdp_disc_list_p, AUTH_NONE | HTTP_ROUTE_BLOCKING},
    /* Chromium checks the method of /json/new only; chrome-remote-interface's
     * New leaves method PUT in the options its caller passes on to the next
     * calls. */
    {"PUT", "/browser/cdp/json/version", cdp_disc_version_q, AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"PUT", "/browser/cdp/json/list", cdp_disc_list_q, AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"PUT", "/browser/cdp/json", cdp_disc_list_q, AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"PUT", "/browser/cdp/{token}/json/version", cdp_disc_version_p,
     AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"PUT", "/browser/cdp/{token}/json/list", cdp_disc_list_p, AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"PUT", "/browser/cdp/{token}/json", cdp_disc_list_p, AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"PUT", "/browser/cdp/json/protocol", cdp_disc_protocol_q, AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"PUT", "/browser/cdp/{token}/json/protocol", cdp_disc_protocol_p,
     AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"GET", "/browser/cdp/json/protocol", cdp_disc_protocol_q, AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"PUT", "/browser/cdp/json/new", cdp_disc_new_q, AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"GET", "/browser/cdp/json/new", cdp_disc_new_get, AUTH_NONE},
    {"GET", "/browser/cdp/json/activate/{id}", cdp_disc_activate_q,
     AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"PUT", "/browser/cdp/json/activate/{id}", cdp_disc_activate_q,
     AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"GET", "/browser/cdp/json/close/{id}", cdp_disc_close_q, AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"PUT", "/browser/cdp/json/close/{id}", cdp_disc_close_q, AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"GET", "/browser/cdp/{token}/json/protocol", cdp_disc_protocol_p,
     AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"PUT", "/browser/cdp/{token}/json/new", cdp_disc_new_p, AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"GET", "/browser/cdp/{token}/json/new", cdp_disc_new_get, AUTH_NONE},
    {"GET", "/browser/cdp/{token}/json/activate/{id}", cdp_disc_activate_p,
     AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"PUT", "/browser/cdp/{token}/json/activate/{id}", cdp_disc_activate_p,
     AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"GET", "/browser/cdp/{token}/json/close/{id}", cdp_disc_close_p,
     AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"PUT", "/browser/cdp/{token}/json/close/{id}", cdp_disc_close_p,
     AUTH_NONE | HTTP_ROUTE_BLOCKING},
    /* The relay under the token's path segment: what clients that prefix
     * every path (chrome-remote-interface's alterPath) make of cdp_ws_url. */
    {"GET", "/browser/cdp/{token}/browser/cdp", browsers_cdp, AUTH_NONE},
    /* And the path form of discovery with a ws scheme (after every
     * /browser/cdp/LITERAL route: a token is never "json"). */
    {"GET", "/browser/cdp/{token}", browsers_cdp, AUTH_NONE},
    /* Chromium's discovery paths at the root name no session. */
    {"GET", "/json/version", cdp_disc_no_token, AUTH_NONE},
    {"GET", "/json/list", cdp_disc_no_token, AUTH_NONE},
    {"GET", "/json", cdp_disc_no_token, AUTH_NONE},
    {"GET", "/json/protocol", cdp_disc_no_token, AUTH_NONE},
    {"PUT", "/json/new", cdp_disc_no_token, AUTH_NONE},
    {"GET", "/json/activate/{id}", cdp_disc_no_token, AUTH_NONE},
    {"GET", "/json/close/{id}", cdp_disc_no_token, AUTH_NONE},
    {"GET", "/browsers/{id}/telemetry/events", telemetry_events_get, KEY},
    {"GET", "/browsers/{id}/telemetry/stream", telemetry_stream_get, KEY},
    {"POST", "/org/telemetry/destinations", telemetry_dest_create, ORGADM},
    {"GET", "/org/telemetry/destinations", telemetry_dest_list, ORG},
    {"GET", "/org/telemetry/destinations/{id}", telemetry_dest_get, ORG},
    {"PATCH", "/org/telemetry/destinations/{id}", telemetry_dest_update, ORGADM},
    {"DELETE", "/org/telemetry/destinations/{id}", telemetry_dest_delete, ORGADM},
    /* The service's own paths (SDK 0.91+), same handlers; {id} is an id or a name. */
    {"POST", "/telemetry/destinations", telemetry_dest_create, ORGADM},
    {"GET", "/telemetry/destinations", telemetry_dest_list, ORG},
    {"GET", "/telemetry/destinations/{id}", telemetry_dest_get, ORG},
    {"PATCH", "/telemetry/destinations/{id}", telemetry_dest_update, ORGADM},
    {"DELETE", "/telemetry/destinations/{id}", telemetry_dest_delete, ORGADM},
    /* routes: telemetry */
    {"POST", "/browsers/{id}/computer/batch", compapi_batch, SLOW},
    {"POST", "/browsers/{id}/computer/screenshot", compapi_screenshot_post, SLOW},
    {"POST", "/browsers/{id}/computer/click_mouse", compapi_click, SLOW},
    {"POST", "/browsers/{id}/computer/drag_mouse", compapi_drag, SLOW},
    {"POST", "/browsers/{id}/computer/move_mouse", compapi_move, SLOW},
    {"POST", "/browsers/{id}/computer/get_mouse_position", compapi_position, SLOW},
    {"POST", "/browsers/{id}/computer/press_key", compapi_press, SLOW},
    {"POST", "/browsers/{id}/computer/scroll", compapi_scroll, SLOW},
    {"POST", "/browsers/{id}/computer/cursor", compapi_cursor, SLOW},
    {"POST", "/browsers/{id}/computer/type", compapi_type, SLOW},
    {"POST", "/browsers/{id}/computer/clipboard/read", compapi_clip_read, SLOW},
    {"POST", "/browsers/{id}/computer/clipboard/write", compapi_clip_write, SLOW},
    /* routes: computer */
    {"POST", "/browsers/{id}/repl", repl_post, SLOW | HTTP_ROUTE_LARGE_BODY},
    {"GET", "/browsers/{id}/webmcp/tools", webmcp_tools_get, SLOW},
    {"POST", "/browsers/{id}/webmcp/invoke", webmcp_invoke, SLOW},
    {"GET", "/browsers/{id}/webmcp/custom-tools", webmcp_custom_list, SLOW},
    {"POST", "/browsers/{id}/webmcp/custom-tools", webmcp_custom_post,
     SLOW | HTTP_ROUTE_LARGE_BODY},
    {"DELETE", "/browsers/{id}/webmcp/custom-tools/{tool_id}", webmcp_custom_delete, SLOW},
    FS_ROUTES PROCESS_ROUTES REPLAYS_ROUTES EXTENSIONS_ROUTES{"GET", "/browsers/{id}/logs/stream",
                                                              logs_stream_get, KEY},
    {"POST", "/browsers/{id}/curl", curl_post, SLOW},
    {"GET", "/browsers/{id}/curl/raw", curl_raw, SLOW},
    {"POST", "/browsers/{id}/curl/raw", curl_raw, SLOW},
    {"PUT", "/browsers/{id}/curl/raw", curl_raw, SLOW},
    {"PATCH", "/browsers/{id}/curl/raw", curl_raw, SLOW},
    {"DELETE", "/browsers/{id}/curl/raw", curl_raw, SLOW},
    {"GET", "/browser/webdriver", webdriver_upgrade, AUTH_NONE},
#define WD  (SLOW | AUTH_BASIC)
#define WDT (AUTH_NONE | HTTP_ROUTE_BLOCKING)
    {"GET", "/status", wdc_status, AUTH_NONE},
    {"GET", "/wd/hub/status", wdc_status, AUTH_NONE},
    {"POST", "/session", wdc_new_session, WD},
    {"POST", "/wd/hub/session", wdc_new_session, WD},
    {"DELETE", "/session/{id}", wdc_command, WD},
    {"DELETE", "/wd/hub/session/{id}", wdc_command, WD},
    {"GET", "/session/{id}/*", wdc_command, WD},
    {"POST", "/session/{id}/*", wdc_command, WD},
    {"DELETE", "/session/{id}/*", wdc_command, WD},
    {"GET", "/wd/hub/session/{id}/*", wdc_command, WD},
    {"POST", "/wd/hub/session/{id}/*", wdc_command, WD},
    {"DELETE", "/wd/hub/session/{id}/*", wdc_command, WD},
    {"GET", "/browser/wd/{token}/status", wdc_status, AUTH_NONE},
    {"POST", "/browser/wd/{token}/session", wdc_token_new_session, WDT},
    {"DELETE", "/browser/wd/{token}/session/{id}", wdc_token_command, WDT},
    {"GET", "/browser/wd/{token}/session/{id}/*", wdc_token_command, WDT},
    {"POST", "/browser/wd/{token}/session/{id}/*", wdc_token_command, WDT},
    {"DELETE", "/browser/wd/{token}/session/{id}/*", wdc_token_command, WDT},
    /* routes: webdriver */
    NI("/browsers/{id}/*"),
    {"POST", "/browser_pools", pools_create, KEY},
    {"GET", "/browser_pools", pools_list, KEY},
    {"GET", "/browser_pools/{id}", pools_get, KEY},
    {"PATCH", "/browser_pools/{id}", pools_update, KEY},
    {"DELETE", "/browser_pools/{id}", pools_delete, KEY},
    {"POST", "/browser_pools/{id}/acquire", pools_acquire, KEY},
    {"POST", "/browser_pools/{id}/release", pools_release, KEY},
    {"POST", "/browser_pools/{id}/flush", pools_flush, KEY},
    {"POST", "/internal/pools/{token}/flush", pools_flush_from_node, AUTH_NONE},
    /* routes: pools */
    {"POST", "/profiles", profiles_create, KEY},
    {"GET", "/profiles", profiles_list, KEY},
    {"GET", "/profiles/{id}", profiles_get, KEY},
    {"PATCH", "/profiles/{id}", profiles_update, KEY},
    {"DELETE", "/profiles/{id}", profiles_delete, KEY},
    {"GET", "/profiles/{id}/download", profiles_download, KEY},
    /* routes: profiles */
    {"POST", "/proxies", proxies_create, KEY},
    {"GET", "/proxies", proxies_list, KEY},
    {"GET", "/proxies/{id}", proxies_get, KEY},
    {"PATCH", "/proxies/{id}", proxies_update, KEY},
    {"DELETE", "/proxies/{id}", proxies_delete, KEY},
    {"POST", "/proxies/{id}/check", proxies_check, SLOW},
    /* routes: proxies */
    NI("/extensions"),
    NI("/extensions/*"),
    /* routes: managed auth (issue 35.4, docs/managed-auth.md) */
    {"POST", "/auth/connections", authconn_create, KEY},
    {"GET", "/auth/connections", authconn_list, KEY},
    {"GET", "/auth/connections/{id}", authconn_get, KEY},
    {"PATCH", "/auth/connections/{id}", authconn_update, KEY},
    {"DELETE", "/auth/connections/{id}", authconn_delete, KEY},
    {"POST", "/auth/connections/{id}/login", authconn_login, KEY},
    {"POST", "/auth/connections/{id}/submit", authconn_submit, KEY},
    {"GET", "/auth/connections/{id}/events", authconn_events, KEY},
    {"GET", "/auth/connections/{id}/timeline", authconn_timeline, KEY},
    {"GET", "/auth/hosted/{token}", authconn_hosted_page, AUTH_NONE},
    {"GET", "/auth/hosted/{token}/state", authconn_hosted_state, AUTH_NONE},
    {"GET", "/auth/hosted/{token}/screenshot", authconn_hosted_screenshot,
     AUTH_NONE | HTTP_ROUTE_BLOCKING},
    {"POST", "/auth/hosted/{token}/submit", authconn_hosted_submit, AUTH_NONE},
    /* routes: apps, deployments, invocations (issue 36, docs/apps.md) */
    {"POST", "/deployments", deployments_create, SLOW},
    {"GET", "/deployments", deployments_list, KEY},
    {"GET", "/deployments/{id}", deployments_get, KEY},
    {"DELETE", "/deployments/{id}", deployments_delete, KEY},
    {"GET", "/deployments/{id}/events", deployments_events, KEY},
    {"GET", "/apps", apps_list, KEY},
    {"POST", "/invocations", invocations_create, SLOW},
    {"GET", "/invocations", invocations_list, KEY},
    {"GET", "/invocations/{id}", invocations_get, KEY},
    {"PATCH", "/invocations/{id}", invocations_update, KEY},
    {"GET", "/invocations/{id}/events", invocations_events, KEY},
    {"GET", "/invocations/{id}/browsers", invocations_browsers_list, KEY},
    {"DELETE", "/invocations/{id}/browsers", invocations_browsers_delete, SLOW},
    NI("/auth/*"),
    /* routes: credentials (issue 35.1, docs/credentials.md) */
    {"POST", "/credentials", credentials_create, KEY},
    {"GET", "/credentials", credentials_list, KEY},
    {"GET", "/credentials/{id}", credentials_get, KEY},
    {"PATCH", "/credentials/{id}", credentials_update, KEY},
    {"DELETE", "/credentials/{id}", credentials_delete, KEY},
    {"GET", "/credentials/{id}/totp-code", credentials_totp_code, KEY},
    NI("/credential_providers"),
    NI("/credential_providers/*"),
    /* routes: search (docs/search.md) */
    {"POST", "/search", search_post, SLOW},
    {"GET", "/search/providers", search_providers, KEY},
    {"GET", "/search/{id}", search_get, KEY},
    {"POST", "/search/{id}/contents", search_contents, KEY},
    {"GET", "/audit-logs", audit_list, ORGADM},
    {"GET", "/audit-logs/export/chunk", audit_export_chunk, ORGADM | HTTP_ROUTE_BLOCKING},
    NI("/audit-logs/export/destinations"),
    NI("/audit-logs/export/destinations/*"),
    /* routes: credential providers (issue 35.3, docs/credentials.md) */
    {"POST", "/org/credential_providers", credprov_create, ORG},
    {"GET", "/org/credential_providers", credprov_list, ORG},
    {"GET", "/org/credential_providers/{id}", credprov_get, ORG},
    {"PATCH", "/org/credential_providers/{id}", credprov_update, ORG},
    {"DELETE", "/org/credential_providers/{id}", credprov_delete, ORG},
    {"GET", "/org/credential_providers/{id}/items", credprov_items, ORG | HTTP_ROUTE_BLOCKING},
    {"POST", "/org/credential_providers/{id}/test", credprov_test, ORG | HTTP_ROUTE_BLOCKING},
    NI("/org/credential_providers/*"),
    {"GET", "/org/limits", org_limits_get, ORG},
    {"PATCH", "/org/limits", org_limits_update, ORGADM},
    {"GET", "/org/projects/{id}/limits", org_project_limits_get, ORGADM},
    {"PATCH", "/org/projects/{id}/limits", org_project_limits_update, ORGADM},
    /* routes: config registry (issue 40.2, docs/config-registry.md) */
    {"GET", "/config-registry", cfgreg_list, KEY},
    {"POST", "/config-registry/lookup", cfgreg_lookup, KEY},
    {"POST", "/config-registry/resolve", cfgreg_resolve, KEY},
    {"GET", "/config-registry/analyses", cfgreg_analyses_list, KEY},
    {"GET", "/config-registry/analyses/{id}", cfgreg_analysis_get, KEY},
    /* routes: vaults (issue 35.2, docs/credentials.md); other paths 501 */
    {"POST", "/vaults", vaults_upsert, KEY},
    {"GET", "/vaults", vaults_list, KEY},
    {"GET", "/vaults/{id}", vaults_get, KEY},
    {"DELETE", "/vaults/{id}", vaults_delete, KEY},
    {"GET", "/vaults/{id}/items", vault_items_list, KEY},
    {"PUT", "/vaults/{id}/items/{key}", vault_item_put, KEY},
    {"GET", "/vaults/{id}/items/{key}", vault_item_get, KEY},
    {"PATCH", "/vaults/{id}/items/{key}", vault_item_patch, KEY},
    {"DELETE", "/vaults/{id}/items/{key}", vault_item_delete, KEY},
    {"GET", "/vaults/{id}/items/{key}/events", vault_item_events, KEY},
    {"POST", "/vaults/{id}/items/{key}/operations", vault_item_operation, SLOW},
    NI("/vaults"),
    NI("/vaults/*"),
    NI("/vault-provider-configs"),
    NI("/vault-provider-configs/*"),
    /* routes: mcp (the MCP endpoint, docs/mcp.md; its tools act on browsers) */
    {"POST", "/mcp", mcp_post, SLOW},
    {"DELETE", "/mcp", mcp_delete, SLOW},
    {"GET", "/mcp", mcp_get, KEY},
    /* routes: console (no key to load the page; it calls the API with the
     * key it asks for: docs/console.md) */
    {"GET", "/console", console_get, AUTH_NONE},
    /* routes: health (no key; docs/operator.md "Health and readiness") */
    {"GET", "/health", health_get, AUTH_NONE | HTTP_ROUTE_PROBE},
    {"GET", "/ready", ready_get, AUTH_NONE | HTTP_ROUTE_PROBE},
    /* routes: metrics and the OpenAPI document (docs/operator.md "Metrics";
     * docs/openapi.yaml, checked against this table by
     * tests/blackbox/37_openapi.test.mjs) */
    {"GET", "/metrics", scrape_get, AUTH_ADMIN},
    {"GET", "/openapi.yaml", openapi_get, AUTH_NONE},
    {"GET", "/spec.yaml", openapi_get, AUTH_NONE},
    {"GET", "/openapi.json", openapi_get, AUTH_NONE},
};

const size_t api_nroutes = sizeof api_routes / sizeof api_routes[0];
