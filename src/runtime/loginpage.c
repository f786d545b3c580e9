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

#define STR_(x)     #x
#define STR(x)      STR_(x)
#define CHOICES_MAX STR(LIM_AUTHCONN_CHOICES)

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
    "for (const e of document.querySelectorAll('[data-bd-choice]')) "
    "e.removeAttribute('data-bd-choice');"
    "const choices = [];"
    "if (!fields.length && document.body) {"
    " const xp = e => { if (e.id && /^[A-Za-z][\\w-]*$/.test(e.id)) return '//*[@id=\"' + e.id + "
    "'\"]';"
    "  const p = []; for (; e && e.nodeType === 1; e = e.parentNode) { let n = 1;"
    "   for (let s = e.previousElementSibling; s; s = s.previousElementSibling) n += s.tagName === "
    "e.tagName;"
    "   p.unshift(e.tagName.toLowerCase() + '[' + n + ']'); } return '/' + p.join('/'); };"
    " const radio = e => e.tagName === 'INPUT' && e.type === 'radio';"
    " const ctext = e => (radio(e) ? labelOf(e) : e.innerText || e.value ||"
    "  e.getAttribute('aria-label') || e.title || '').replace(/\\s+/g, ' ').trim().slice(0, 120);"
    " let cs = [...document.querySelectorAll('button, a[href], [role=button], [role=link],"
    " [role=option], [role=radio], [role=menuitem], input[type=submit], input[type=button],"
    " input[type=radio]')].filter(e => !e.disabled &&"
    "  (vis(e) || (radio(e) && e.labels && e.labels.length && vis(e.labels[0]))));"
    " cs = cs.filter(e => !cs.some(o => o !== e && e.contains(o)));"
    " const page = document.body.innerText.slice(0, 5000).toLowerCase();"
    " const mfaPage = /two-step|2-step|two-factor|\\b2fa\\b|\\bmfa\\b|multi-factor|verify "
    "(it.?s|your"
    " identity)|verification method|security method|how (do|would) you (want|like) to (receive|get|"
    "verify)/.test(page);"
    " const acctPage = /(choose|select|pick) an? (account|organization|workspace|profile)|which"
    " account|use (another|a different) account/.test(page);"
    " const mail = /[\\w.+-]+@[\\w-]+(\\.[\\w-]+)+/, mask = /\\S*[*\\u2022].*$/;"
    " const sso = /\\b(?:continue|sign in|log in|login|sign up|connect) (?:with|using|via) (google|"
    "microsoft|apple|github|gitlab|facebook|linkedin|okta|twitter|amazon|slack|sso|saml)\\b/;"
    " const mfaOf = t => /authenticator|\\btotp\\b|code generator|verification app/.test(t) ? "
    "'totp'"
    "  : /\\b(text|sms)\\b/.test(t) ? 'sms' : /\\b(call|voice)\\b/.test(t) ? 'call'"
    "  : /e-?mail/.test(t) ? 'email' : /\\bpush\\b|notification|approve/.test(t) ? 'push'"
    "  : /password/.test(t) ? 'password' : null;"
    " const methodOf = t => /passkey|security key|face id|touch id|fingerprint|windows "
    "hello/.test(t)"
    "  ? 'passkey' : /magic link|sign-in link|login link|e-?mail me a link|send (me )?a "
    "link/.test(t)"
    "  ? 'magic_link' : /password/.test(t) ? 'password'"
    "  : /(one-time|sign-in|login) code|e-?mail (me )?a code/.test(t) ? 'code' : null;"
    " const found = [];"
    " for (const e of cs) { const label = ctext(e), t = label.toLowerCase(); if (!t) continue;"
    "  const m = sso.exec(t), em = mail.exec(label);"
    "  if (m) found.push({e, kind: 'sso', label, sub: m[1] === 'saml' ? 'sso' : m[1]});"
    "  else if (mfaPage && mfaOf(t)) found.push({e, kind: 'mfa', label, sub: mfaOf(t),"
    "   target: (em || mask.exec(label) || [''])[0]});"
    "  else if (em || (acctPage && /(another|different) account|add (an )?account/.test(t)))"
    "   found.push({e, kind: 'account', label: label.replace(em ? em[0] : '', '').trim() || label,"
    "    sub: em ? em[0] : ''});"
    "  else if (!mfaPage && methodOf(t)) found.push({e, kind: 'method', label, sub: methodOf(t)}); "
    "}"
    " const count = k => found.filter(x => x.kind === k).length;"
    " for (const x of found) {"
    "  if (!(x.kind === 'sso' || (x.kind === 'account' && (acctPage || count('account') >= 2)) ||"
    "   count(x.kind) >= 2) || choices.length >= " CHOICES_MAX ") continue;"
    "  x.e.setAttribute('data-bd-choice', String(choices.length));"
    "  choices.push({i: choices.length, kind: x.kind, label: x.label, sub: x.sub,"
    "   target: x.target || '', xpath: xp(x.e)}); } }"
    "let error = '';"
    "for (const e of document.querySelectorAll('[role=alert], [aria-live=assertive], .error,"
    " .alert-danger, .alert-error, .error-message, .errors, [data-error]')) {"
    " if (vis(e) && text(e)) { error = text(e).slice(0, 300); break; } }"
    "return {url: location.href, ready: document.readyState, fields, choices, error}; })()";

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

/* Picks choice i: a radio input is checked and its form submitted (its
 * submit button, else requestSubmit); anything else is clicked. */
static const char CHOOSE_JS[] =
    "(i => { const e = document.querySelector('[data-bd-choice=\"' + i + '\"]');"
    " if (!e) return 'gone'; e.click();"
    " if (e.tagName === 'INPUT' && e.type === 'radio' && e.form) {"
    "  const b = [...e.form.querySelectorAll('button, input[type=submit]')]"
    "   .find(b => (b.type || 'submit') === 'submit');"
    "  if (b) b.click(); else e.form.requestSubmit(); }"
    " return 'picked'; })";

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
    json_array_foreach(json_object_get(snap, "choices"), i, x) if (n < cap) n +=
        (size_t)snprintf(out + n, cap - n, "|%s:%.40s", jsonx_str(x, "kind"),
                         jsonx_str(x, "label") ? jsonx_str(x, "label") : "");
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

int loginpage_choose(struct cdp_client *cc, const char *sid, int i)
{
    char expr[sizeof CHOOSE_JS + 32];
    snprintf(expr, sizeof expr, "%s(%d)", CHOOSE_JS, i);
    json_t *res = NULL;
    int rc = eval_value(cc, sid, expr, &res);
    if (rc == 0 && strcmp(json_string_value(res) ? json_string_value(res) : "", "gone") == 0)
        rc = E_NOTFOUND;
    json_decref(res);
    return rc;
}
