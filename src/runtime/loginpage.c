/*
 * loginpage (see runtime/loginpage.h): the page side of managed auth's login
 * flows. The scripts below run in the page through Runtime.evaluate and
 * Runtime.callFunctionOn; docs/managed-auth.md lists what they handle.
 */
#include "runtime/loginpage.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/jsonx.h"
#include "core/limits.h"
#include "proxy/cdp_client.h"

/* A snapshot of the page: its URL, readiness, the visible login fields
 * (each marked data-bd-field=<i> for the fill) classified by autocomplete
 * attribute, input type, name, id, label, aria-label and placeholder, and a
 * visible error message. */
static const char DISCOVER_JS[] =
    "(() => {"
    "const vis = e => { const r = e.getBoundingClientRect(); const s = getComputedStyle(e);"
    " return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && s.display !== 'none'; };"
    "const text = e => (e ? e.textContent || '' : '').replace(/\\s+/g, ' ').trim();"
    "const labelOf = e => { let t = '';"
    " if (e.labels && e.labels.length) t = text(e.labels[0]);"
    " if (!t) t = e.getAttribute('aria-label') || '';"
    " if (!t && e.getAttribute('aria-labelledby'))"
    "  t = text(document.getElementById(e.getAttribute('aria-labelledby')));"
    " return (t || e.placeholder || e.name || e.id || '').slice(0, 120); };"
    "const skip = ['hidden','submit','button','checkbox','radio','file','image','reset','range',"
    " 'color','date','search'];"
    "const kindOf = e => {"
    " const ac = (e.getAttribute('autocomplete') || '').toLowerCase();"
    " const t = (e.getAttribute('type') || 'text').toLowerCase();"
    " if (skip.includes(t)) return null;"
    " const hay = [e.name, e.id, labelOf(e), e.placeholder, e.getAttribute('aria-label')]"
    "  .join(' ').toLowerCase();"
    " if (ac.includes('one-time-code') || /\\b(otp|totp|2fa|mfa)\\b|one[- ]time|verification|"
    "security code|\\bcode\\b/.test(hay))"
    "  return /authenticator|totp|\\bapp\\b/.test(hay) ? 'totp_code' : 'code';"
    " if (t === 'password' || ac.includes('password')) return 'password';"
    " if (ac === 'username' || ac === 'email' || ac === 'tel' || t === 'email' ||"
    "  /user|e-?mail|login|account|identifier|phone/.test(hay)) return 'identifier';"
    " return null; };"
    "const fields = []; let n = 0;"
    "for (const e of document.querySelectorAll('input, textarea')) {"
    " e.removeAttribute('data-bd-field');"
    " if (!vis(e) || e.disabled || e.readOnly) continue;"
    " const k = kindOf(e); if (!k) continue;"
    " e.setAttribute('data-bd-field', String(n));"
    " fields.push({i: n, kind: k, label: labelOf(e), name: e.name || e.id || '',"
    "  type: (e.getAttribute('type') || 'text').toLowerCase(), placeholder: e.placeholder || ''});"
    " n++; }"
    "let error = '';"
    "for (const e of document.querySelectorAll('[role=alert], [aria-live=assertive], .error,"
    " .alert-danger, .alert-error, .error-message, .errors, [data-error]')) {"
    " if (vis(e) && text(e)) { error = text(e).slice(0, 300); break; } }"
    "return {url: location.href, ready: document.readyState, fields, error}; })()";

/* Writes a value into the element it is called on as typing would. */
static const char FILL_JS[] =
    "function (v) { this.focus();"
    " const d = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(this), 'value');"
    " if (d && d.set) d.set.call(this, v); else this.value = v;"
    " this.dispatchEvent(new Event('input', {bubbles: true}));"
    " this.dispatchEvent(new Event('change', {bubbles: true})); return 'ok'; }";

/* Submits the form of field i: its submit button, else requestSubmit, else
 * the first visible button of the page. */
static const char SUBMIT_JS[] =
    "(i => { const e = document.querySelector('[data-bd-field=\"' + i + '\"]');"
    " if (!e) return 'gone'; const f = e.form;"
    " if (f) { const b = [...f.querySelectorAll('button, input[type=submit]')]"
    "  .find(b => (b.type || 'submit') === 'submit');"
    "  if (b) { b.click(); return 'clicked'; } f.requestSubmit(); return 'submitted'; }"
    " const b = [...document.querySelectorAll('button, [role=button], input[type=submit]')]"
    "  .find(b => b.getBoundingClientRect().width > 0);"
    " if (b) { b.click(); return 'clicked'; } return 'none'; })";

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Runtime.evaluate of expr by value into *val (new ref). */
static int eval_value(struct cdp_client *cc, const char *sid, const char *expr, json_t **val)
{
    struct err e;
    err_init(&e);
    json_t *res = NULL;
    json_t *p = json_pack("{s:s,s:b}", "expression", expr, "returnByValue", 1);
    int rc = cdp_client_call(cc, sid, "Runtime.evaluate", p, 1, LIM_AUTHCONN_STEP_MS, &res, &e);
    json_decref(p);
    *val = NULL;
    if (rc == 0) {
        json_t *v = json_object_get(json_object_get(res, "result"), "value");
        if (v && !json_object_get(res, "exceptionDetails"))
            *val = json_incref(v);
        else
            rc = E_INTERNAL;
    }
    json_decref(res);
    return rc;
}

int loginpage_fill(struct cdp_client *cc, const char *sid, int i, const char *value)
{
    struct err e;
    err_init(&e);
    char expr[96];
    snprintf(expr, sizeof expr, "document.querySelector('[data-bd-field=\"%d\"]')", i);
    json_t *res = NULL;
    json_t *p = json_pack("{s:s}", "expression", expr);
    int rc = cdp_client_call(cc, sid, "Runtime.evaluate", p, 1, LIM_AUTHCONN_STEP_MS, &res, &e);
    json_decref(p);
    const char *obj = rc == 0 ? jsonx_str(json_object_get(res, "result"), "objectId") : NULL;
    if (!obj) {
        json_decref(res);
        return E_NOTFOUND;
    }
    json_t *arg = json_string(value);
    p = json_pack("{s:s,s:s,s:[{s:O}],s:b}", "objectId", obj, "functionDeclaration", FILL_JS,
                  "arguments", "value", arg, "returnByValue", 1);
    json_decref(res);
    res = NULL;
    rc = cdp_client_call(cc, sid, "Runtime.callFunctionOn", p, 1, LIM_AUTHCONN_STEP_MS, &res, &e);
    OPENSSL_cleanse((char *)json_string_value(arg), json_string_length(arg));
    json_decref(arg);
    json_decref(p);
    json_decref(res);
    return rc;
}

int loginpage_snapshot(struct cdp_client *cc, const char *sid, int settle_ms, json_t **snap)
{
    if (settle_ms > 0)
        nap_ms(settle_ms);
    int64_t until = clock_mono_ms() + LIM_AUTHCONN_STEP_MS;
    for (;;) {
        int rc = eval_value(cc, sid, DISCOVER_JS, snap);
        if (rc == E_UNAVAIL)
            return rc;
        if (rc == 0 &&
            strcmp(jsonx_str(*snap, "ready") ? jsonx_str(*snap, "ready") : "", "complete") == 0)
            return 0;
        if (clock_mono_ms() >= until)
            return rc ? rc : 0;
        json_decref(*snap);
        *snap = NULL;
        nap_ms(150);
    }
}

void loginpage_signature(const json_t *snap, char *out, size_t cap)
{
    size_t n =
        (size_t)snprintf(out, cap, "%s|", jsonx_str(snap, "url") ? jsonx_str(snap, "url") : "");
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(snap, "fields"), i, x) if (n < cap) n +=
        (size_t)snprintf(out + n, cap - n, "%s,", jsonx_str(x, "kind"));
}

void loginpage_field_id(const json_t *x, char id[LOGINPAGE_FIELD_ID_BYTES])
{
    const char *name = jsonx_str(x, "name");
    if (name && *name)
        snprintf(id, LOGINPAGE_FIELD_ID_BYTES, "%.60s", name);
    else
        snprintf(id, LOGINPAGE_FIELD_ID_BYTES, "field_%d",
                 (int)json_integer_value(json_object_get(x, "i")));
}

int loginpage_submit(struct cdp_client *cc, const char *sid, int i)
{
    char expr[sizeof SUBMIT_JS + 32];
    snprintf(expr, sizeof expr, "%s(%d)", SUBMIT_JS, i);
    json_t *res = NULL;
    int rc = eval_value(cc, sid, expr, &res);
    json_decref(res);
    return rc;
}

void loginpage_wait_answer(struct cdp_client *cc, const char *sid, const char *prev)
{
    int64_t until = clock_mono_ms() + LIM_AUTHCONN_STEP_MS;
    while (clock_mono_ms() < until) {
        nap_ms(200);
        json_t *s2 = NULL;
        if (eval_value(cc, sid, DISCOVER_JS, &s2) == 0 && s2) {
            char sig2[LOGINPAGE_SIGNATURE_BYTES];
            loginpage_signature(s2, sig2, sizeof sig2);
            const char *e2 = jsonx_str(s2, "error");
            int moved = strcmp(sig2, prev) != 0 || (e2 && *e2);
            json_decref(s2);
            if (moved)
                break;
        }
    }
}
