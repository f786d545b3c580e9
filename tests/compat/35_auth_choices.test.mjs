// Issue 35 item 4 (remainder): login steps that need a choice, with real
// headless Chromium on login pages served on loopback: an account picker
// (sign_in_options), an MFA method menu followed by a TOTP step the flow
// answers itself (mfa_options), a sign-in options page finished on the hosted
// page (sign_in_options, selected_choice_id) and SSO buttons
// (pending_sso_buttons, sso_button_selector); wrong ids and ids of arrays not
// pending are 400 naming the field. Then, on a two-node cluster, the hosted
// page served by the node that does not run the flow reaches it.
// docs/managed-auth.md lists the pages the heuristics recognise.
import Kernel from '@onkernel/sdk';
import { withServer, startSite, request, assert, eq, isError, waitFor, ok2xx, totp } from '../blackbox/lib.mjs';

const PASSWORD = 'ch-pw-3Kd8qL-cleartext';
const SECRET = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP';
const EMAIL_CODE = '771245';

const page = (title, body) => `<!doctype html><title>${title}</title><body>${body}</body>`;
const form = (action, inner, error = '') => page('login', `${error ? `<p role=alert>${error}</p>` : ''}`
  + `<form method=post action="${action}">${inner}<button type=submit>Continue</button></form>`);
const USER = '<label for=u>Email address</label><input id=u name=email type=email autocomplete=username>';
const PASS = '<label for=p>Password</label><input id=p name=password type=password autocomplete=current-password>';

// The site. Every page of choices has no input field; choosing the right
// option leads to a form the credential answers, choosing another one fails
// the login (so a success shows which element the flow clicked). picks
// records each choice the site saw.
function site() {
  const picks = [];
  const read = (req) => new Promise((r) => { let b = ''; req.on('data', (d) => { b += d; }); req.on('end', () => r(Object.fromEntries(new URLSearchParams(b)))); });
  const html = (res, body) => { res.writeHead(200, { 'content-type': 'text/html' }); res.end(body); };
  const grant = (res) => { res.writeHead(303, { location: '/home', 'set-cookie': 'sid=ok; Path=/' }); res.end(); };
  return {
    picks,
    handler: async (req, res) => {
      const u = new URL(req.url, 'http://x');
      const f = req.method === 'POST' ? await read(req) : {};
      const ok = f.email === 'ann@example.com' && f.password === PASSWORD;
      switch (`${req.method} ${u.pathname}`) {
        case 'GET /home': return html(res, page('account', '<h1>Welcome back</h1>'));
        // An account picker: links naming the accounts.
        case 'GET /acct': return html(res, page('accounts', '<h1>Choose an account</h1><ul>'
          + '<li><a href="/acct/pick?u=bob%40example.com">Bob Example <small>bob@example.com</small></a></li>'
          + '<li><a href="/acct/pick?u=ann%40example.com">Ann Example <small>ann@example.com</small></a></li></ul>'));
        case 'GET /acct/pick':
          picks.push(`account:${u.searchParams.get('u')}`);
          return html(res, form('/acct/done', `<input type=hidden name=email value="${u.searchParams.get('u')}">${PASS}`));
        case 'POST /acct/done': return ok ? grant(res) : html(res, form('/acct/done', PASS, 'Wrong password'));
        // An MFA method menu after the password, then the chosen method's step.
        case 'GET /mfa': return html(res, form('/mfa', USER + PASS));
        case 'POST /mfa': return ok ? html(res, page('verify', '<h1>Two-step verification</h1><p>How do you want to receive your code?</p>'
          + '<form method=post action="/mfa/method">'
          + '<button name=method value=sms>Text me at (***) ***-**92</button>'
          + '<button name=method value=totp>Use your authenticator app</button>'
          + '<button name=method value=email>Email a code to a***@example.com</button></form>'))
          : html(res, form('/mfa', USER + PASS, 'Incorrect'));
        case 'POST /mfa/method':
          picks.push(`mfa:${f.method}`);
          return f.method === 'totp'
            ? html(res, form('/mfa/code', '<label for=c>Enter the code from your authenticator app</label><input id=c name=otp inputmode=numeric autocomplete=one-time-code>'))
            : html(res, form('/mfa/code', '<label for=c>Enter the code we sent</label><input id=c name=sent_code autocomplete=one-time-code>'));
        case 'POST /mfa/code': {
          const now = Date.now() / 1000;
          return [totp(SECRET, now), totp(SECRET, now - 30)].includes(f.otp) ? grant(res) : html(res, form('/mfa/code', '<input name=otp autocomplete=one-time-code>', 'Wrong code'));
        }
        // Sign-in options: passkey, magic link, password.
        case 'GET /opts': return html(res, page('sign in', '<h1>How do you want to sign in?</h1>'
          + '<button onclick="location.href=\'/opts/passkey\'">Sign in with a passkey</button>'
          + '<button onclick="location.href=\'/opts/link\'">Email me a magic link</button>'
          + '<button onclick="location.href=\'/opts/password\'">Use your password</button>'));
        case 'GET /opts/passkey': case 'GET /opts/link': picks.push(`method:${u.pathname}`); return html(res, page('waiting', '<p>Check your device.</p>'));
        case 'GET /opts/password': picks.push('method:password'); return html(res, form('/opts/done', USER + PASS));
        case 'POST /opts/done': return ok ? grant(res) : html(res, form('/opts/done', USER + PASS, 'Incorrect'));
        // SSO buttons; the "identity provider" is a page of the same site.
        case 'GET /sso': return html(res, page('sign in', '<h1>Sign in to Acme</h1>'
          + '<div><a class=btn href="/idp/google">Continue with Google</a></div>'
          + '<div><a class=btn href="/idp/microsoft">Continue with Microsoft</a></div>'));
        case 'GET /idp/google': case 'GET /idp/microsoft': picks.push(`sso:${u.pathname.slice(5)}`); return html(res, form(`/idp/done?p=${u.pathname.slice(5)}`, USER + PASS));
        case 'POST /idp/done': return ok && u.searchParams.get('p') === 'google' ? grant(res) : html(res, form('/idp/done', USER + PASS, 'No such account'));
        // An emailed code (the cluster test's step that waits for a person).
        case 'GET /email': return html(res, form('/email', USER + PASS));
        case 'POST /email': return ok ? html(res, form('/email/code', '<label for=e>Enter the code we sent to your email</label><input id=e name=email_code autocomplete=one-time-code>')) : html(res, form('/email', USER + PASS, 'Incorrect'));
        case 'POST /email/code': return f.email_code === EMAIL_CODE ? grant(res) : html(res, form('/email/code', '<input name=email_code autocomplete=one-time-code>', 'Wrong code'));
        default: res.writeHead(404); return res.end();
      }
    },
  };
}

async function flowEnds(client, id) {
  return waitFor(async () => {
    const c = await client.auth.connections.retrieve(id);
    return ['SUCCESS', 'FAILED', 'EXPIRED', 'CANCELED'].includes(c.flow_status) ? c : null;
  }, `connection ${id}'s flow to end`, 60000, 200);
}

// The connection once its flow waits for a person (or has ended).
async function awaiting(client, id) {
  return waitFor(async () => {
    const c = await client.auth.connections.retrieve(id);
    return c.flow_step === 'AWAITING_INPUT' || c.flow_status !== 'IN_PROGRESS' ? c : null;
  }, `connection ${id}'s flow to wait for a person`, 60000, 200);
}

// Asserts a 400 whose message names field.
function names400(r, field) {
  isError(r, 400);
  assert(r.text.includes(field), `the 400 names ${field}: ${r.text}`);
}

// A server and the site, a credential "ann" and conn(path, profile): a
// connection logging in at the site's path. fn(ctx) with ctx {s, sv, web,
// client, conn, submit}.
async function withSite(fn) {
  const sv = site();
  const web = await startSite(sv.handler);
  try {
    await withServer({ args: web.allow }, async (s) => {
      const client = new Kernel({ baseURL: s.base, apiKey: s.key, maxRetries: 0 });
      const api = (m, p, body) => request(s.base, m, p, { key: s.key, body });
      ok2xx(await api('POST', '/credentials', { name: 'ann', domain: '127.0.0.1', values: { email: 'ann@example.com', password: PASSWORD }, totp_secret: SECRET }), 'credential');
      const conn = (path, profile) => client.auth.connections.create({ domain: '127.0.0.1', profile_name: profile, credential: { name: 'ann' }, login_url: `${web.url}${path}` });
      const submit = (id, body) => api('POST', `/auth/connections/${id}/submit`, body);
      await fn({ s, sv, web, client, conn, submit });
      assert(!s.log.includes(PASSWORD) && !s.log.includes(SECRET), 'the log holds a secret');
    });
  } finally { web.close(); }
}

export const tests = [
  {
    name: 'issue 35.4 choices: an account picker sets AWAITING_INPUT with sign_in_options (labels and e-mail addresses from the page, ids the server made) and choices; sign_in_option_id clicks the account and the login finishes; a wrong id, an id of an array not pending (mfa_option_id, sso_provider), field values, two choices at once or a stale interaction_id are 400 naming the field',
    timeout: 60000,
    fn: () => withSite(async ({ sv, client, conn, submit }) => {
      const acct = await conn('/acct', 'ch-acct');
      await client.auth.connections.login(acct.id);
      const w = await awaiting(client, acct.id);
      eq([w.flow_status, w.flow_step], ['IN_PROGRESS', 'AWAITING_INPUT'], `the account picker waits: ${JSON.stringify(w)}`);
      eq(w.sign_in_options.map((o) => [o.label, o.description]), [['Bob Example', 'bob@example.com'], ['Ann Example', 'ann@example.com']], `sign_in_options: ${JSON.stringify(w.sign_in_options)}`);
      eq(w.choices.map((c) => [c.id, c.type]), w.sign_in_options.map((o) => [o.id, 'account']), `choices: ${JSON.stringify(w.choices)}`);
      eq([w.mfa_options, w.pending_sso_buttons, w.fields], [null, null, null], 'only the picker is pending');
      names400(await submit(acct.id, { sign_in_option_id: 'account_99' }), 'sign_in_option_id');
      names400(await submit(acct.id, { mfa_option_id: 'totp' }), 'mfa_option_id');
      names400(await submit(acct.id, { sso_provider: 'google' }), 'sso_provider');
      names400(await submit(acct.id, { field_values: { email: 'x' } }), 'field_values');
      names400(await submit(acct.id, { selected_choice_id: w.choices[0].id, sign_in_option_id: w.choices[0].id }), 'sign_in_option_id');
      names400(await submit(acct.id, { interaction_id: 'stale', sign_in_option_id: w.sign_in_options[1].id }), 'interaction_id');
      eq(await client.auth.connections.submit(acct.id, { interaction_id: w.interaction_id, sign_in_option_id: w.sign_in_options[1].id }), { accepted: true }, 'the pick');
      const done = await flowEnds(client, acct.id);
      eq([done.flow_status, done.status], ['SUCCESS', 'AUTHENTICATED'], `account picker: ${JSON.stringify(done)}`);
      eq(sv.picks, ['account:ann@example.com'], 'the account the site saw picked');
      // No flow waits once it ended: 409.
      isError(await submit(acct.id, { sign_in_option_id: w.sign_in_options[1].id }), 409, 'no_flow_in_progress');
    }),
  },
  {
    name: 'issue 35.4 choices: an MFA method menu after the password sets AWAITING_INPUT with mfa_options (type, label, masked target); mfa_option_id "totp" clicks "authenticator app" and the TOTP step that follows is answered from the credential; an unknown type or a sign_in_option_id is 400 naming the field',
    timeout: 60000,
    fn: () => withSite(async ({ sv, client, conn, submit }) => {
      const mfa = await conn('/mfa', 'ch-mfa');
      await client.auth.connections.login(mfa.id);
      const w = await awaiting(client, mfa.id);
      eq([w.flow_status, w.flow_step], ['IN_PROGRESS', 'AWAITING_INPUT'], `the MFA menu waits: ${JSON.stringify(w)}`);
      eq(w.mfa_options.map((o) => [o.type, o.label]), [['sms', 'Text me at (***) ***-**92'], ['totp', 'Use your authenticator app'], ['email', 'Email a code to a***@example.com']], `mfa_options: ${JSON.stringify(w.mfa_options)}`);
      eq([w.mfa_options[0].target, w.mfa_options[2].target], ['(***) ***-**92', 'a***@example.com'], 'masked targets');
      eq(w.choices.map((c) => c.type), ['mfa_method', 'mfa_method', 'mfa_method'], 'canonical choices');
      eq([w.sign_in_options, w.pending_sso_buttons], [null, null], 'only the MFA menu is pending');
      names400(await submit(mfa.id, { mfa_option_id: 'push' }), 'mfa_option_id');
      names400(await submit(mfa.id, { sign_in_option_id: w.choices[1].id }), 'sign_in_option_id');
      eq(await client.auth.connections.submit(mfa.id, { interaction_id: w.interaction_id, mfa_option_id: 'totp' }), { accepted: true }, 'authenticator app');
      const done = await flowEnds(client, mfa.id);
      eq([done.flow_status, done.status], ['SUCCESS', 'AUTHENTICATED'], `MFA menu then TOTP: ${JSON.stringify(done)}`);
      eq(sv.picks, ['mfa:totp'], 'the method the site saw');
    }),
  },
  {
    name: 'issue 35.4 choices: a sign-in options page (passkey, magic link, password) sets AWAITING_INPUT with sign_in_options and a new interaction_id; the hosted page shows the choices and a person picks "password" there (selected_choice_id; an unknown id is 400 naming it); the password form that follows is filled from the credential',
    timeout: 60000,
    fn: () => withSite(async ({ s, sv, client, conn }) => {
      const opts = await conn('/opts', 'ch-opts');
      const ol = await client.auth.connections.login(opts.id);
      const w = await awaiting(client, opts.id);
      eq([w.flow_status, w.flow_step], ['IN_PROGRESS', 'AWAITING_INPUT'], `the options wait: ${JSON.stringify(w)}`);
      eq(w.sign_in_options.map((o) => o.label), ['Sign in with a passkey', 'Email me a magic link', 'Use your password'], `sign-in options: ${JSON.stringify(w)}`);
      eq(w.choices.map((c) => c.type), ['sign_in_method', 'sign_in_method', 'sign_in_method'], 'canonical choices');
      const hosted = new URL(ol.hosted_url).pathname;
      // The hosted token binds the flow's first interaction id (docs/managed-auth.md): this step has a new one.
      assert(w.interaction_id && !hosted.split('/').pop().startsWith(`${opts.id}.${w.interaction_id}`), `a new interaction_id: ${w.interaction_id} ${hosted}`);
      const hs = await request(s.base, 'GET', `${hosted}/state`);
      eq([hs.json.flow_step, (hs.json.choices || []).map((c) => c.label)], ['AWAITING_INPUT', w.choices.map((c) => c.label)], `the hosted page's state: ${hs.text}`);
      const hp = await request(s.base, 'GET', hosted);
      assert(hp.status === 200 && hp.text.includes('selected_choice_id'), 'the hosted page offers the choices');
      names400(await request(s.base, 'POST', `${hosted}/submit`, { body: { selected_choice_id: 'method_99' } }), 'selected_choice_id');
      const hsub = await request(s.base, 'POST', `${hosted}/submit`, { body: { selected_choice_id: w.choices[2].id } });
      eq([hsub.status, hsub.json], [200, { accepted: true }], hsub.text);
      const done = await flowEnds(client, opts.id);
      eq([done.flow_status, done.status], ['SUCCESS', 'AUTHENTICATED'], `sign-in options: ${JSON.stringify(done)}`);
      eq(sv.picks, ['method:password'], 'the option the site saw');
    }),
  },
  {
    name: 'issue 35.4 choices: SSO buttons ("Continue with Google/Microsoft") set AWAITING_INPUT with pending_sso_buttons (provider, label, XPath selector); sso_button_selector clicks Google and its login finishes; a selector not listed, or with sso_provider, is 400 naming the field',
    timeout: 60000,
    fn: () => withSite(async ({ sv, client, conn, submit }) => {
      const sso = await conn('/sso', 'ch-sso');
      await client.auth.connections.login(sso.id);
      const w = await awaiting(client, sso.id);
      eq([w.flow_status, w.flow_step], ['IN_PROGRESS', 'AWAITING_INPUT'], `the SSO buttons wait: ${JSON.stringify(w)}`);
      eq(w.pending_sso_buttons.map((b) => [b.provider, b.label]), [['google', 'Continue with Google'], ['microsoft', 'Continue with Microsoft']], `pending_sso_buttons: ${JSON.stringify(w)}`);
      assert(w.pending_sso_buttons.every((b) => b.selector.startsWith('/')), 'XPath selectors');
      eq(w.choices.map((c) => c.type), ['sso_provider', 'sso_provider'], 'canonical choices');
      names400(await submit(sso.id, { sso_button_selector: '//button[1]' }), 'sso_button_selector');
      names400(await submit(sso.id, { sso_button_selector: w.pending_sso_buttons[0].selector, sso_provider: 'google' }), 'sso_provider');
      eq(await client.auth.connections.submit(sso.id, { sso_button_selector: w.pending_sso_buttons[0].selector }), { accepted: true }, 'Google');
      const done = await flowEnds(client, sso.id);
      eq([done.flow_status, done.status], ['SUCCESS', 'AUTHENTICATED'], `SSO: ${JSON.stringify(done)}`);
      eq(sv.picks, ['sso:google'], 'the provider the site saw');
    }),
  },
  {
    name: 'issue 35.4 cluster: the hosted page of a flow that runs on node 1, asked of node 2, is forwarded there: the page, its state and a submit that finishes the flow; a choice submitted through node 2\'s API reaches the flow whole',
    timeout: 120000,
    fn: async () => {
      const sv = site();
      const web = await startSite(sv.handler);
      const { startCluster } = await import('../cluster/lib.mjs');
      const c = await startCluster({ nodes: 2, args: web.allow });
      let failed;
      try {
        const [n1, n2] = c.nodes;
        const api = (base, m, p, body) => request(base, m, p, { key: c.key, body });
        ok2xx(await api(c.base, 'POST', '/credentials', { name: 'ann', domain: '127.0.0.1', values: { email: 'ann@example.com', password: PASSWORD } }), 'credential');
        const conn = ok2xx(await api(c.base, 'POST', '/auth/connections', { domain: '127.0.0.1', profile_name: 'ch-cluster', credential: { name: 'ann' }, login_url: `${web.url}/email` }), 'connection');
        const login = ok2xx(await api(n1.base, 'POST', `/auth/connections/${conn.id}/login`, {}), 'login on node 1');
        await waitFor(async () => {
          const x = (await api(n1.base, 'GET', `/auth/connections/${conn.id}`)).json;
          return x.flow_step === 'AWAITING_INPUT' || x.flow_status !== 'IN_PROGRESS' ? x : null;
        }, 'the code step', 60000, 200);
        const path = new URL(login.hosted_url).pathname;
        const page = await request(n2.base, 'GET', path);
        eq(page.status, 200, `the hosted page from node 2: ${page.text}`);
        assert(/Finish signing in/.test(page.text), 'the hosted page');
        const st = await request(n2.base, 'GET', `${path}/state`);
        eq([st.status, st.json && st.json.flow_step, st.json && (st.json.fields || []).map((f) => f.id)], [200, 'AWAITING_INPUT', ['email_code']], st.text);
        const sub = await request(n2.base, 'POST', `${path}/submit`, { body: { field_values: { email_code: EMAIL_CODE } } });
        eq([sub.status, sub.json], [200, { accepted: true }], sub.text);
        const done = await waitFor(async () => {
          const x = (await api(n2.base, 'GET', `/auth/connections/${conn.id}`)).json;
          return x.flow_status !== 'IN_PROGRESS' ? x : null;
        }, 'the flow to end', 60000, 200);
        eq([done.flow_status, done.status], ['SUCCESS', 'AUTHENTICATED'], JSON.stringify(done));
        isError(await request(n2.base, 'GET', path), 404, 'not_found');
        // A choice submitted to node 2's API reaches the flow on node 1 whole (its body was
        // zeroed before the forward sent it: "malformed JSON" on the owner).
        const ac = ok2xx(await api(c.base, 'POST', '/auth/connections', { domain: '127.0.0.1', profile_name: 'ch-cluster-acct', credential: { name: 'ann' }, login_url: `${web.url}/acct` }), 'connection');
        ok2xx(await api(n1.base, 'POST', `/auth/connections/${ac.id}/login`, {}), 'login on node 1');
        const w = await waitFor(async () => {
          const x = (await api(n1.base, 'GET', `/auth/connections/${ac.id}`)).json;
          return x.flow_step === 'AWAITING_INPUT' || x.flow_status !== 'IN_PROGRESS' ? x : null;
        }, 'the account picker', 60000, 200);
        eq((w.sign_in_options || []).map((o) => o.description), ['bob@example.com', 'ann@example.com'], JSON.stringify(w));
        const pick = await api(n2.base, 'POST', `/auth/connections/${ac.id}/submit`, { interaction_id: w.interaction_id, sign_in_option_id: w.sign_in_options[1].id });
        eq([pick.status, pick.json], [200, { accepted: true }], pick.text);
        const end = await waitFor(async () => {
          const x = (await api(n2.base, 'GET', `/auth/connections/${ac.id}`)).json;
          return x.flow_status !== 'IN_PROGRESS' ? x : null;
        }, 'the flow to end', 60000, 200);
        eq([end.flow_status, end.status], ['SUCCESS', 'AUTHENTICATED'], JSON.stringify(end));
      } catch (e) { failed = e; }
      try { await c.stop(); } catch (e) { if (!failed) failed = e; }
      web.close();
      if (failed) throw failed;
    },
  },
];
