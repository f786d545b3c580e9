#include "domain/proxysel.h"

#include <string.h>

#include "domain/fields.h"

static void set_ref(struct proxysel *out, enum proxysel_kind kind, const char *s, size_t n)
{
    out->kind = kind;
    if (n > PROXYSEL_REF_MAX)
        n = PROXYSEL_REF_MAX;
    memcpy(out->ref, s, n);
    out->ref[n] = '\0';
}

/* id or name inside the proxy object: a string of 1-255 characters. */
static int check_ref(const char *path, const json_t *v, struct err *e)
{
    return fields_check_string(path, v, 1, PROXYSEL_REF_MAX, e);
}

/* The `proxy` object: exactly one of mode, id, name; nothing else. */
static int parse_proxy_object(const json_t *v, struct proxysel *out, struct err *e)
{
    static const char *const allowed[] = {"mode", "id", "name", NULL};
    if (!json_is_object(v))
        return err_field(e, "proxy",
                         "must be an object with exactly one of mode, id or name, not %s",
                         fields_type_name(v));
    int rc = fields_check_known("proxy", v, allowed, e);
    const json_t *mode = json_object_get(v, "mode");
    const json_t *id = json_object_get(v, "id");
    const json_t *name = json_object_get(v, "name");
    int given = (mode != NULL) + (id != NULL) + (name != NULL);
    if (given == 0)
        return err_field(e, "proxy",
                         "must give exactly one of mode, id or name (an empty proxy "
                         "object is invalid)");
    if (given > 1)
        rc = err_field(e, "proxy", "give exactly one of mode, id or name, not several");
    if (mode) {
        const char *m = json_string_value(mode);
        if (m && strcmp(m, "direct") == 0 && json_string_length(mode) == 6)
            out->kind = PROXYSEL_DIRECT;
        else if (m && strcmp(m, "default") == 0 && json_string_length(mode) == 7)
            out->kind = PROXYSEL_DEFAULT;
        else if (m)
            rc = err_field(e, "proxy.mode", "must be one of direct, default");
        else
            rc = err_field(e, "proxy.mode", "must be a string (direct or default), not %s",
                           fields_type_name(mode));
    }
    if (id && check_ref("proxy.id", id, e) < 0)
        rc = E_INVALID;
    else if (id)
        set_ref(out, PROXYSEL_ID, json_string_value(id), json_string_length(id));
    if (name && check_ref("proxy.name", name, e) < 0)
        rc = E_INVALID;
    else if (name)
        set_ref(out, PROXYSEL_NAME, json_string_value(name), json_string_length(name));
    return rc;
}

int proxysel_parse(const json_t *body, int is_update, struct proxysel *out, struct err *e)
{
    out->kind = is_update ? PROXYSEL_UNCHANGED : PROXYSEL_DEFAULT;
    out->ref[0] = '\0';
    if (!json_is_object(body))
        return err_field(e, "", "the body must be a JSON object, not %s", fields_type_name(body));
    const json_t *proxy = json_object_get(body, "proxy");
    const json_t *pid = json_object_get(body, "proxy_id");
    const json_t *ddp = json_object_get(body, "disable_default_proxy");
    int rc = 0;

    /* Deprecated fields are type-checked even when they are rejected for being
     * combined with proxy, so the client sees every problem at once. */
    struct proxysel legacy = *out;
    if (pid && !json_is_null(pid)) {
        if (!json_is_string(pid))
            rc =
                err_field(e, "proxy_id", "must be a string or null, not %s", fields_type_name(pid));
        else if (json_string_length(pid) > PROXYSEL_REF_MAX)
            rc = err_field(e, "proxy_id", "must be at most %d characters (got %zu)",
                           PROXYSEL_REF_MAX, json_string_length(pid));
        else if (json_string_length(pid) == 0)
            legacy.kind = PROXYSEL_DEFAULT;
        else
            set_ref(&legacy, PROXYSEL_ID, json_string_value(pid), json_string_length(pid));
    }
    if (ddp) {
        if (fields_check_bool("disable_default_proxy", ddp, e) < 0)
            rc = E_INVALID;
        else if (json_is_true(ddp) && legacy.kind != PROXYSEL_ID)
            legacy.kind = PROXYSEL_DIRECT;
    }

    if (proxy) {
        if (pid)
            rc = err_field(e, "proxy",
                           "cannot be combined with proxy_id (deprecated; send proxy only)");
        if (ddp)
            rc = err_field(e, "proxy",
                           "cannot be combined with disable_default_proxy (deprecated; use "
                           "proxy.mode)");
        if (parse_proxy_object(proxy, out, e) < 0)
            rc = E_INVALID;
        return rc;
    }
    if (rc == 0)
        *out = legacy;
    return rc;
}

void proxysel_merge(const struct proxysel *current, const struct proxysel *change,
                    struct proxysel *out)
{
    *out = change->kind == PROXYSEL_UNCHANGED ? *current : *change;
}

static int same_project(const char *a, const char *b)
{
    if (!a || !b)
        return a == b;
    return strcmp(a, b) == 0;
}

static void fill_egress_proxy(struct proxysel_egress *out, const char *id)
{
    size_t n = strlen(id);
    out->kind = PROXYSEL_EGRESS_PROXY;
    if (n > PROXYSEL_REF_MAX)
        n = PROXYSEL_REF_MAX;
    memcpy(out->proxy_id, id, n);
    out->proxy_id[n] = '\0';
}

int proxysel_resolve(const struct proxysel *sel, int stealth, const char *project_id,
                     const struct proxysel_candidate *cands, size_t ncands,
                     const char *default_stealth_proxy_id, struct proxysel_egress *out,
                     struct err *e)
{
    out->kind = PROXYSEL_EGRESS_DIRECT;
    out->proxy_id[0] = '\0';
    switch (sel->kind) {
    case PROXYSEL_DIRECT:
        return 0;
    case PROXYSEL_UNCHANGED:
    case PROXYSEL_DEFAULT:
        if (stealth && default_stealth_proxy_id && *default_stealth_proxy_id)
            fill_egress_proxy(out, default_stealth_proxy_id);
        return 0;
    case PROXYSEL_ID:
        for (size_t i = 0; i < ncands; i++) {
            if (!cands[i].id || strcmp(cands[i].id, sel->ref) != 0)
                continue;
            if (!same_project(cands[i].project_id, project_id))
                break;
            fill_egress_proxy(out, cands[i].id);
            return 0;
        }
        return err_set(e, E_NOTFOUND, "proxy_not_found",
                       "proxy %s not found in the browser's project", sel->ref);
    case PROXYSEL_NAME: {
        size_t here = 0, elsewhere = 0;
        const struct proxysel_candidate *hit = NULL;
        for (size_t i = 0; i < ncands; i++) {
            if (!cands[i].active || !cands[i].id || !cands[i].name ||
                strcmp(cands[i].name, sel->ref) != 0)
                continue;
            if (same_project(cands[i].project_id, project_id)) {
                here++;
                hit = &cands[i];
            } else {
                elsewhere++;
            }
        }
        if (here == 1) {
            fill_egress_proxy(out, hit->id);
            return 0;
        }
        if (here > 1)
            return err_field(e, "proxy.name",
                             "%s matches %zu active proxies; a name must match exactly one "
                             "(select the proxy by id)",
                             sel->ref, here);
        if (elsewhere > 0)
            return err_set(e, E_NOTFOUND, "proxy_not_found",
                           "proxy %s not found in the browser's project", sel->ref);
        return err_field(e, "proxy.name",
                         "%s matches no active proxy; a name must match exactly one", sel->ref);
    }
    }
    return err_set(e, E_INTERNAL, "internal", "unknown proxy selection kind %d", (int)sel->kind);
}

void proxysel_pin(const struct proxysel *sel, const struct proxysel_egress *eg,
                  struct proxysel *out)
{
    *out = *sel;
    if (sel->kind == PROXYSEL_NAME && eg && eg->kind == PROXYSEL_EGRESS_PROXY)
        set_ref(out, PROXYSEL_ID, eg->proxy_id, strlen(eg->proxy_id));
}

json_t *proxysel_to_json(const struct proxysel *sel, const struct proxysel_egress *eg)
{
    switch (sel->kind) {
    case PROXYSEL_DIRECT:
        return json_pack("{s:s}", "mode", "direct");
    case PROXYSEL_ID:
        return json_pack("{s:s}", "id", sel->ref);
    case PROXYSEL_NAME:
        if (eg && eg->kind == PROXYSEL_EGRESS_PROXY)
            return json_pack("{s:s}", "id", eg->proxy_id);
        break;
    case PROXYSEL_UNCHANGED:
    case PROXYSEL_DEFAULT:
        break;
    }
    return json_pack("{s:s}", "mode", "default");
}

const char *proxysel_legacy_id(const struct proxysel *sel)
{
    return sel->kind == PROXYSEL_ID ? sel->ref : NULL;
}
