// Issue 35 item 4: managed auth (auth.connections, KERNEL_API_NEWER.md 1.4
// "Managed auth", docs/managed-auth.md) through the official SDK, with real
// headless Chromium logging in to login pages served on loopback: a one-page
// form, a two-step identifier-then-password form, a TOTP step the flow
// answers itself, an emailed-code step a person finishes through submit, a
// wrong password (rejected). The saved profile is logged in for a new
// session, and no secret shows in a response, the server's log or the data
// folder.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import Kernel from '@onkernel/sdk';
import { withServer, startServer, startSite, request, assert, eq, isError, waitFor, ok2xx, newOrg, sessionPids, totp } from '../blackbox/lib.mjs';

const PASSWORD = 'ma-pw-7Qz9xK-cleartext';
const SECRET = 'KRSXG5CTMVRXEZLUKRSXG5CTMVRXEZLU';
const EMAIL_CODE = '482913';

const page = (title, body) => `<!doctype html><title>${title}</title><body>${body}</body>`;
const form = (action, inner, error = '') => page('login', `${error ? `<p role=alert>${error}</p>` : ''}`
  + `<form method=post action="${action}">${inner}<button type=submit>Continue</button></form>`);
const USER = '<label for=u>Email address</label><input id=u name=email type=email autocomplete=username>';
const PASS = '<label for=p>Password</label><input id=p name=password type=password autocomplete=current-password>';

// The site: /home is the account page (a login form when the session cookie
// is missing or expired); each flow sets its own cookie. sessions maps a
// cookie value to valid; expire() ends them all (the health check's case).
function site() {
  const valid = new Set();
  const seen = { home: [], posts: 0 };
  let n = 0;
  const read = (req) => new Promise((r) => { let b = ''; req.on('data', (d) => { b += d; }); req.on('end', () => r(Object.fromEntries(new URLSearchParams(b)))); });
  const cookie = (req) => (/(?:^|; )sid=([^;]+)/.exec(req.headers.cookie || '') || [])[1];
  const grant = (res) => {
    const v = `s${++n}`;
    valid.add(v);
    res.writeHead(303, { location: '/home', 'set-cookie': `sid=${v}; Path=/; Max-Age=86400` });
    res.end();
  };
  const html = (res, body) => { res.writeHead(200, { 'content-type': 'text/html' }); res.end(body); };
  return {
    valid, seen, expire: () => valid.clear(),
    handler: async (req, res) => {
      const u = new URL(req.url, 'http://x');
      const f = req.method === 'POST' ? await read(req) : {};
      if (req.method === 'POST') seen.posts++;
      const ok = f.email === 'ann@example.com' && f.password === PASSWORD;
      switch (`${req.method} ${u.pathname}`) {
        case 'GET /home': {
          const authed = valid.has(cookie(req));
          seen.home.push(authed);
          return authed ? html(res, page('account', '<h1>Welcome back</h1>')) : html(res, form('/one', USER + PASS));
        }
        case 'GET /one': return html(res, form('/one', USER + PASS));
        case 'POST /one': return ok ? grant(res) : html(res, form('/one', USER + PASS, 'Incorrect email or password'));
        case 'GET /two': return html(res, form('/two/next', USER));
        case 'POST /two/next': return html(res, form('/two/done', `<input type=hidden name=email value="${f.email}">${PASS}`));
        case 'POST /two/done': return ok ? grant(res) : html(res, form('/two/done', PASS, 'Wrong password'));
        case 'GET /totp': return html(res, form('/totp', USER + PASS));
        case 'POST /totp': return ok ? html(res, form('/totp/code', '<label for=c>Authenticator app code</label><input id=c name=otp inputmode=numeric autocomplete=one-time-code>')) : html(res, form('/totp', USER + PASS, 'Incorrect'));
        case 'POST /totp/code': {
          const now = Date.now() / 1000;
          return [totp(SECRET, now), totp(SECRET, now - 30)].includes(f.otp) ? grant(res) : html(res, form('/totp/code', '<input name=otp autocomplete=one-time-code>', 'Wrong code'));
        }
        case 'GET /email': return html(res, form('/email', USER + PASS));
        case 'POST /email': return ok ? html(res, form('/email/code', '<label for=e>Enter the code we sent to your email</label><input id=e name=email_code autocomplete=one-time-code>')) : html(res, form('/email', USER + PASS, 'Incorrect'));
        case 'POST /email/code': return f.email_code === EMAIL_CODE ? grant(res) : html(res, form('/email/code', '<input name=email_code autocomplete=one-time-code>', 'Wrong code'));
        default: res.writeHead(404); return res.end();
      }
    },
  };
}

// Every file under dir (the data folder) holding needle in clear.
function filesWith(dir, needle) {
  const out = [];
  const walk = (d) => {
    for (const e of readdirSync(d)) {
      const p = join(d, e);
      let st;
      try { st = statSync(p); } catch { continue; }
      if (st.isDirectory()) walk(p);
      else if (st.isFile() && st.size < 64 << 20 && readFileSync(p).includes(needle)) out.push(p);
    }
  };
  walk(dir);
  return out;
}

// Waits for a connection's flow to reach one of the statuses.
async function flowEnds(client, id, statuses = ['SUCCESS', 'FAILED', 'EXPIRED', 'CANCELED']) {
  return waitFor(async () => {
    const c = await client.auth.connections.retrieve(id);
    return statuses.includes(c.flow_status) ? c : null;
  }, `connection ${id}'s flow to end`, 60000, 200);
}

export const tests = [
  {
    name: 'issue 35.4: auth connections: create (profile made), get, list by profile/domain, update, delete through the SDK; 400 naming the field; 409 for a second of a profile and domain; another org gets 404; features.managed_auth off is 403',
    timeout: 30000,
    fn: () => withServer({ args: ['--admin-token', 'ma-admin'] }, async (s) => {
      const client = new Kernel({ baseURL: s.base, apiKey: s.key, maxRetries: 0 });
      const api = (m, p, body, key = s.key) => request(s.base, m, p, { key, body });
      ok2xx(await api('POST', '/credentials', { name: 'ann', domain: '127.0.0.1', values: { email: 'ann@example.com', password: PASSWORD } }), 'credential');
      const c = await client.auth.connections.create({ domain: '127.0.0.1', profile_name: 'ma-crud', credential: { name: 'ann' }, login_url: 'http://127.0.0.1:9/login' });
      eq([c.domain, c.profile_name, c.status, c.auto_reauth, c.health_checks, c.save_credentials, c.flow_status], ['127.0.0.1', 'ma-crud', 'NEEDS_AUTH', true, true, true, null], 'the new connection');
      eq(c.credential, { name: 'ann' }, 'credential reference');
      eq(c.can_reauth_reason, 'no_prior_successful_login', 'can_reauth_reason');
      ok2xx(await api('GET', '/profiles/ma-crud'), 'the profile was created');
      eq((await client.auth.connections.retrieve(c.id)).id, c.id, 'retrieve');
      const c2 = await client.auth.connections.create({ domain: 'other.test', profile_name: 'ma-crud' });
      const listed = [];
      for await (const x of client.auth.connections.list({ profile_name: 'ma-crud' })) listed.push(x.id);
      eq(listed.sort(), [c.id, c2.id].sort(), 'list by profile');
      // GET /org/limits counts them (auth_connections_used, KERNEL_API_NEWER 1.4 "Limits").
      eq(ok2xx(await api('GET', '/org/limits'), 'org limits').auth_connections_used, 2, 'auth_connections_used counts the connections');
      eq((await client.auth.connections.list({ domain: "other.test" })).items.map((x) => x.id), [c2.id], 'list by domain');
      const u = await client.auth.connections.update(c.id, { auto_reauth: false, health_check_interval: 600, login_url: '' });
      eq([u.auto_reauth, u.health_check_interval, u.login_url], [false, 600, undefined], 'updated');
      // 400 naming the field, 404 for a missing credential, 409 for a duplicate.
      const bad = await api('POST', '/auth/connections', { domain: 'x.test', profile_name: 'p', health_check_interval: 5, login_url: 'ftp://x', colour: 1 });
      isError(bad, 400);
      for (const f of ['health_check_interval', 'login_url', 'colour']) assert(bad.text.includes(f), `names ${f}: ${bad.text}`);
      isError(await api('POST', '/auth/connections', { profile_name: 'p' }), 400);
      isError(await api('POST', '/auth/connections', { domain: 'x.test', profile_name: 'p', credential: { name: 'nope' } }), 404, 'not_found');
      isError(await api('POST', '/auth/connections', { domain: '127.0.0.1', profile_name: 'ma-crud' }), 409, 'conflict');
      isError(await api('PATCH', `/auth/connections/${c.id}`, { health_checks: 'yes' }), 400);
      for (const body of [{ browser: { headless: false } }, { proxy: { name: 'x' } }, { record_session: 1 }]) {
        const r = await api('POST', `/auth/connections/${c.id}/login`, body);
        isError(r, 400);
        assert(r.text.includes(Object.keys(body)[0]), `names the field: ${r.text}`);
      }
      // Another org sees none of it, and cannot log in or submit.
      const other = await newOrg(s, 'ma-admin', { name: 'other', overrides: { features: { managed_auth: { enabled: true } } } });
      for (const [m, p] of [['GET', ''], ['PATCH', ''], ['DELETE', ''], ['POST', '/login'], ['GET', '/timeline'], ['GET', '/events']]) {
        isError(await api(m, `/auth/connections/${c.id}${p}`, m === 'GET' || m === 'DELETE' ? undefined : {}, other.key), 404, 'not_found');
      }
      isError(await api('POST', `/auth/connections/${c.id}/submit`, { field_values: { x: '1' } }, other.key), 404, 'not_found');
      eq((await api('GET', '/auth/connections', undefined, other.key)).json, [], 'the other org lists none');
      const off = await newOrg(s, 'ma-admin', { name: 'off', overrides: { features: { managed_auth: { enabled: false } } } });
      isError(await api('GET', '/auth/connections', undefined, off.key), 403, 'feature_not_enabled');
      isError(await api('POST', '/auth/connections', { domain: 'x', profile_name: 'y' }, off.key), 403, 'feature_not_enabled');
      await client.auth.connections.delete(c2.id);
      isError(await api('GET', `/auth/connections/${c2.id}`), 404, 'not_found');
      isError(await api('DELETE', `/auth/connections/${c2.id}`), 404, 'not_found');
    }),
  },
  {
    name: 'issue 35.4: login flows with real Chromium: one-page form, two-step identifier-then-password, a TOTP step answered by the flow, an emailed code finished through submit (AWAITING_INPUT) and through the hosted page, a wrong password (FAILED rejected), a form outside the connection\'s domains (nothing filled); SSE events and timeline; the saved profile is logged in for a new session; no secret in responses, the log or the data folder',
    timeout: 90000,
    fn: async () => {
      const sv = site();
      const web = await startSite(sv.handler);
      try {
        await withServer({ args: web.allow }, async (s) => {
          const texts = [];
          const client = new Kernel({
            baseURL: s.base, apiKey: s.key, maxRetries: 0,
            fetch: async (url, init) => { const r = await fetch(url, init); if (!String(url).endsWith('/events')) texts.push(await r.clone().text()); return r; },
          });
          const api = (m, p, body) => request(s.base, m, p, { key: s.key, body });
          const cred = await api('POST', '/credentials', { name: 'ann', domain: '127.0.0.1', values: { email: 'ann@example.com', password: PASSWORD }, totp_secret: SECRET });
          ok2xx(cred, 'credential');
          texts.push(cred.text);
          ok2xx(await api('POST', '/credentials', { name: 'wrong', domain: '127.0.0.1', values: { email: 'ann@example.com', password: 'not-the-password' } }), 'wrong credential');
          const conn = (path, profile, credName = 'ann') => client.auth.connections.create({ domain: '127.0.0.1', profile_name: profile, credential: { name: credName }, login_url: `${web.url}${path}` });

          // One-page form, followed over SSE to its end.
          const one = await conn('/one', 'ma-one');
          const lr = await client.auth.connections.login(one.id);
          eq([lr.id, lr.flow_type], [one.id, 'LOGIN'], 'login answer');
          const events = [];
          for await (const ev of await client.auth.connections.follow(one.id)) events.push(ev);
          assert(events.length >= 1 && events.every((e) => e.event === 'managed_auth_state'), JSON.stringify(events));
          eq([events.at(-1).flow_status, events.at(-1).flow_step], ['SUCCESS', 'COMPLETED'], `the last event: ${JSON.stringify(events)}`);
          let done = await flowEnds(client, one.id);
          eq([done.flow_status, done.status], ['SUCCESS', 'AUTHENTICATED'], `one-page: ${JSON.stringify(done)}`);
          assert(done.post_login_url.endsWith('/home'), done.post_login_url);
          eq(done.can_reauth, true, 'can re-authenticate after a login');
          const tl = [];
          for await (const t of client.auth.connections.timeline(one.id)) tl.push(t);
          eq([tl[0].type, tl[0].status, tl[0].step], ['login', 'SUCCESS', 'COMPLETED'], `timeline: ${JSON.stringify(tl)}`);
          assert(tl[0].browser_session_id, 'the timeline names the flow\'s browser');
          eq(tl[0].telemetry_captured, false, 'flows capture no telemetry');

          // Two-step form.
          const two = await conn('/two', 'ma-two');
          await client.auth.connections.login(two.id);
          done = await flowEnds(client, two.id);
          eq([done.flow_status, done.status], ['SUCCESS', 'AUTHENTICATED'], `two-step: ${JSON.stringify(done)}`);

          // TOTP step answered from the credential's secret.
          const t = await conn('/totp', 'ma-totp');
          await client.auth.connections.login(t.id);
          done = await flowEnds(client, t.id);
          eq([done.flow_status, done.status], ['SUCCESS', 'AUTHENTICATED'], `totp: ${JSON.stringify(done)}`);

          // Emailed code: AWAITING_INPUT with the field, finished by submit.
          const em = await conn('/email', 'ma-email');
          const emLogin = await client.auth.connections.login(em.id);
          assert(emLogin.hosted_url.startsWith(`${s.base}/auth/hosted/`), `hosted_url: ${emLogin.hosted_url}`);
          const w = await waitFor(async () => {
            const c = await client.auth.connections.retrieve(em.id);
            return c.flow_step === 'AWAITING_INPUT' || c.flow_status !== 'IN_PROGRESS' ? c : null;
          }, 'the code step', 60000, 200);
          eq([w.flow_status, w.flow_step], ['IN_PROGRESS', 'AWAITING_INPUT'], JSON.stringify(w));
          eq(w.fields.map((f) => [f.id, f.type]), [['email_code', 'code']], `pending fields: ${JSON.stringify(w.fields)}`);
          isError(await api('POST', `/auth/connections/${em.id}/submit`, { interaction_id: 'stale', field_values: { email_code: EMAIL_CODE } }), 400);
          // issue 35.4: the hosted page (no API key: the URL is the credential) shows the flow and its pending fields.
          const hp = await request(s.base, 'GET', new URL(emLogin.hosted_url).pathname);
          eq(hp.status, 200, hp.text);
          assert(/Finish signing in/.test(hp.text), 'the hosted page');
          const hs = await request(s.base, 'GET', `${new URL(emLogin.hosted_url).pathname}/state`);
          eq([hs.json.flow_step, hs.json.fields.map((f) => f.id)], ['AWAITING_INPUT', ['email_code']], hs.text);
          const shot = await waitFor(async () => {
            const r = await fetch(`${emLogin.hosted_url}/screenshot`);
            return r.status === 200 ? r : null;
          }, 'a picture of the flow\'s page');
          eq(shot.headers.get('content-type'), 'image/jpeg', 'a JPEG');
          assert((await shot.arrayBuffer()).byteLength > 1000, 'a picture');
          isError(await request(s.base, 'GET', `/auth/hosted/${em.id}.${w.interaction_id}.${'0'.repeat(32)}`), 404, 'not_found');
          // issue 35.4: two flows at once per organization: a third is 429 with Retry-After.
          const cap = await conn('/email', 'ma-cap');
          await client.auth.connections.login(cap.id);
          const third = await api('POST', `/auth/connections/${one.id}/login`, {});
          isError(third, 429, 'limit_exceeded');
          assert(Number(third.headers['retry-after']) > 0, 'Retry-After');
          isError(await api('POST', `/auth/connections/${cap.id}/login`, {}), 409, 'flow_in_progress');
          await client.auth.connections.delete(cap.id); // cancels its flow
          eq(await client.auth.connections.submit(em.id, { field_values: { email_code: EMAIL_CODE } }), { accepted: true }, 'submit');
          done = await flowEnds(client, em.id);
          eq([done.flow_status, done.status], ['SUCCESS', 'AUTHENTICATED'], `emailed code: ${JSON.stringify(done)}`);
          isError(await request(s.base, 'GET', new URL(emLogin.hosted_url).pathname), 404, 'not_found');

          // issue 35.4: a person finishes a flow on the hosted page alone.
          const em2 = await conn('/email', 'ma-email2');
          const l2 = await client.auth.connections.login(em2.id);
          await waitFor(async () => (await client.auth.connections.retrieve(em2.id)).flow_step === 'AWAITING_INPUT', 'the code step', 60000, 200);
          const hsub = await request(s.base, 'POST', `${new URL(l2.hosted_url).pathname}/submit`, { body: { field_values: { email_code: EMAIL_CODE } } });
          eq([hsub.status, hsub.json], [200, { accepted: true }], hsub.text);
          done = await flowEnds(client, em2.id);
          eq([done.flow_status, done.status], ['SUCCESS', 'AUTHENTICATED'], `hosted submit: ${JSON.stringify(done)}`);

          // A login form outside the connection's domain gets nothing.
          const posts = sv.seen.posts;
          const far = await client.auth.connections.create({ domain: 'example.test', profile_name: 'ma-far', credential: { name: 'ann' }, login_url: `${web.url}/one` });
          await client.auth.connections.login(far.id);
          done = await flowEnds(client, far.id);
          eq([done.flow_status, done.error_code], ['FAILED', 'domain_not_allowed'], `another domain: ${JSON.stringify(done)}`);
          eq(sv.seen.posts, posts, 'no form was submitted');

          // Wrong password: rejected, with the site's message.
          const bad = await conn('/one', 'ma-bad', 'wrong');
          await client.auth.connections.login(bad.id);
          done = await flowEnds(client, bad.id);
          eq([done.flow_status, done.error_code, done.status], ['FAILED', 'rejected', 'NEEDS_AUTH'], `wrong password: ${JSON.stringify(done)}`);
          eq(done.website_error, 'Incorrect email or password', 'the site\'s message');

          // The saved profile is logged in for a new session.
          const before = sv.seen.home.length;
          const b = ok2xx(await api('POST', '/browsers', { headless: true, profile: { name: 'ma-one' }, start_url: `${web.url}/home` }), 'a session on the profile');
          await waitFor(() => sv.seen.home.length > before, 'the new session\'s visit');
          eq(sv.seen.home[before], true, 'the new session is logged in');
          await api('DELETE', `/browsers/${b.id}`);

          for (const x of texts) assert(!x.includes(PASSWORD) && !x.includes(SECRET), `a response holds a secret: ${x.slice(0, 300)}`);
          assert(!s.log.includes(PASSWORD) && !s.log.includes(SECRET), 'the log holds a secret');
          eq(filesWith(s.dir, PASSWORD), [], 'files holding the password in clear');
          eq(filesWith(s.dir, SECRET), [], 'files holding the TOTP secret in clear');
        });
      } finally { web.close(); }
    },
  },
  {
    name: 'issue 35.4: a health check on the connection\'s interval finds the session expired (a login form on the page the login landed on), records it on the timeline, re-authenticates (auto_reauth) and flushes the pools using the profile',
    timeout: 90000,
    fn: async () => {
      const sv = site();
      const web = await startSite(sv.handler);
      try {
        await withServer({ args: [...web.allow, '--admin-token', 'ma-admin'] }, async (s) => {
          // A plan whose shortest health-check interval is 1 s.
          const org = await newOrg(s, 'ma-admin', { name: 'hc', overrides: { features: { managed_auth: { enabled: true, health_check_interval_min_seconds: 1, max_connections: 10 }, credentials: { enabled: true }, profiles: { enabled: true }, browser_pools: { enabled: true } } } });
          const client = new Kernel({ baseURL: s.base, apiKey: org.key, maxRetries: 0 });
          const api = (m, p, body) => request(s.base, m, p, { key: org.key, body });
          ok2xx(await api('POST', '/credentials', { name: 'ann', domain: '127.0.0.1', values: { email: 'ann@example.com', password: PASSWORD } }), 'credential');
          const c = await client.auth.connections.create({ domain: '127.0.0.1', profile_name: 'ma-hc', credential: { name: 'ann' }, login_url: `${web.url}/one`, health_check_interval: 1 });
          eq(c.health_check_interval, 1, 'the plan allows 1 s');
          await client.auth.connections.login(c.id);
          let done = await flowEnds(client, c.id);
          eq([done.flow_status, done.status], ['SUCCESS', 'AUTHENTICATED'], JSON.stringify(done));
          const pool = ok2xx(await api('POST', '/browser_pools', { name: 'hc-pool', size: 1, profile: { name: 'ma-hc' } }), 'a pool on the profile');
          // The site forgets every session: the next check finds a login form.
          sv.expire();
          const tl = await waitFor(async () => {
            const all = [];
            for await (const t of client.auth.connections.timeline(c.id)) all.push(t);
            return all.some((t) => t.type === 'reauth' && t.status === 'SUCCESS') ? all : null;
          }, 'a re-authentication after the health check', 60000, 300);
          const hc = tl.find((t) => t.type === 'health_check' && t.status === 'NEEDS_AUTH');
          assert(hc, `an expired health check on the timeline: ${JSON.stringify(tl)}`);
          eq(hc.previous_status, 'AUTHENTICATED', 'previous status');
          done = await client.auth.connections.retrieve(c.id);
          eq([done.status, done.flow_type], ['AUTHENTICATED', 'REAUTH'], JSON.stringify(done));
          await waitFor(() => s.log.includes(`pool ${pool.id}: flushed (profile ma-hc re-authenticated)`), 'the pool flushed');
          // auto_reauth false: an expired check leaves NEEDS_AUTH.
          await client.auth.connections.update(c.id, { auto_reauth: false });
          sv.expire();
          await waitFor(async () => (await client.auth.connections.retrieve(c.id)).status === 'NEEDS_AUTH', 'NEEDS_AUTH without re-auth', 60000, 300);
          await api('DELETE', `/browser_pools/${pool.id}`);
          assert(!s.log.includes(PASSWORD), 'the log holds no password');
        });
      } finally { web.close(); }
    },
  },
  {
    name: 'issue 35.4: a server stopped while a flow waits for a person ends the flow and its browser, and exits cleanly',
    timeout: 60000,
    fn: async () => {
      const sv = site();
      const web = await startSite(sv.handler);
      const s = await startServer({ args: web.allow });
      try {
        const client = new Kernel({ baseURL: s.base, apiKey: s.key, maxRetries: 0 });
        ok2xx(await request(s.base, 'POST', '/credentials', { key: s.key, body: { name: 'ann', domain: '127.0.0.1', values: { email: 'ann@example.com', password: PASSWORD } } }), 'credential');
        const c = await client.auth.connections.create({ domain: '127.0.0.1', profile_name: 'ma-stop', credential: { name: 'ann' }, login_url: `${web.url}/email` });
        await client.auth.connections.login(c.id);
        const w = await waitFor(async () => { const x = await client.auth.connections.retrieve(c.id); return x.flow_step === 'AWAITING_INPUT' ? x : null; }, 'the code step', 60000, 200);
        const sid = w.browser_session_id;
        assert(sessionPids(s.dir, sid).length > 0, 'the flow\'s browser runs');
        eq(await s.stop(), 0, 'the server exits cleanly');
        eq(sessionPids(s.dir, sid), [], 'no browser of the flow is left');
      } finally { await s.stop(); s.cleanup(); web.close(); }
    },
  },
];
