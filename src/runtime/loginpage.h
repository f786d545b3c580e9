/*
 * loginpage: reading and filling a login form over a DevTools connection,
 * for managed auth's flows and health checks (api/authconn.c;
 * docs/managed-auth.md lists the heuristics). No language model: fields are
 * classified by autocomplete attribute, input type, name, id, label,
 * aria-label and placeholder.
 *
 * A snapshot (new reference) is {url, ready, fields: [{i, kind, label,
 * name, type, placeholder}], choices: [{i, kind, label, sub, target,
 * xpath}], error}: the visible login fields, each marked data-bd-field=<i>
 * in the page for loginpage_fill and loginpage_submit, kind one of
 * identifier, password, code, totp_code; on a page without login fields,
 * the choices a person must make, each marked data-bd-choice=<i> for
 * loginpage_choose: kind account (sub: the e-mail address shown), mfa (sub:
 * sms, call, email, totp, push or password; target: a masked destination),
 * method (a sign-in method; sub: password, passkey, magic_link or code) or
 * sso (sub: the identity provider), xpath an XPath of the element, at most
 * LIM_AUTHCONN_CHOICES; error a visible error message or "". Every call waits at most
 * LIM_AUTHCONN_STEP_MS for the page; sid is the CDP session of the page (cdp_page_attach_first).
 * Returns are the codes of cdp_client_call (E_UNAVAIL: the browser is not
 * answering) or E_INTERNAL when the page's script failed.
 */
#ifndef BD_RUNTIME_LOGINPAGE_H
#define BD_RUNTIME_LOGINPAGE_H

#include <jansson.h>
#include <stddef.h>

#include "core/err.h"

struct cdp_client;

#define LOGINPAGE_FIELD_ID_BYTES  64   /* loginpage_field_id's buffer */
#define LOGINPAGE_SIGNATURE_BYTES 1024 /* loginpage_signature's buffer */

/* A snapshot once the document is complete, after settle_ms (a navigation
 * just started replaces the document it started on); the last one taken
 * when the step time ran out first. */
int loginpage_snapshot(struct cdp_client *cc, const char *sid, int settle_ms, json_t **snap) WUR;
/* Fills field i with value as typing would (the clear value lives in the
 * call's parameters only and is zeroed before they are freed). E_NOTFOUND
 * when the field is gone. */
int loginpage_fill(struct cdp_client *cc, const char *sid, int i, const char *value) WUR;
/* Submits the form of field i: its submit button, else requestSubmit, else
 * the first visible button of the page. */
int loginpage_submit(struct cdp_client *cc, const char *sid, int i) WUR;
/* Picks choice i of the latest snapshot (clicks it; a radio input's form
 * is submitted). E_NOTFOUND when it is gone. */
int loginpage_choose(struct cdp_client *cc, const char *sid, int i) WUR;
/* Waits (the step time at most) until the page answers a submit: its
 * signature is no longer prev, or it shows an error. */
void loginpage_wait_answer(struct cdp_client *cc, const char *sid, const char *prev);
/* "url|identifier,password," : a snapshot's URL with its fields' kinds
 * (and its choices' kinds and labels), to tell one step of a form from the
 * next. */
void loginpage_signature(const json_t *snap, char *out, size_t cap);
/* The id a person answers field x of a snapshot by: its name (60 bytes at
 * most), or field_<i>. */
void loginpage_field_id(const json_t *x, char id[LOGINPAGE_FIELD_ID_BYTES]);

#endif
