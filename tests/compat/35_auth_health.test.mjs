// Issue h12.2: a managed auth health check counts a page of choices at the
// page the login landed on (here an account picker the site shows when its
// session expired: no login field) as expired, as a login form is
// (docs/managed-auth.md "Health checks"). Real headless Chromium, a loopback
// site.
import Kernel from '@onkernel/sdk';
import { withServer, startSite, request, assert, eq, waitFor, ok2xx, newOrg } from '../blackbox/lib.mjs';

const PASSWORD = 'hc-pw-8Vt2mR-cleartext';

const page = (title, body) => `<!doctype html><title>${title}</title><body>${body}</body>`;
const form = (action, inner, error = '') => page('login', `${error ? `<p role=alert>${error}</p>` : ''}`
  + `<form method=post action="${action}">${inner}<button type=submit>Continue</button></form>`);
const USER = '<label for=u>Email address</label><input id=u name=email type=email autocomplete=username>';
const PASS = '<label for=p>Password</label><input id=p name=password type=password autocomplete=current-password>';

// /one is the login form; /home the account page while the session cookie
// is valid, else the account picker (links naming the accounts, no field);
// expire() forgets every session.
function site() {
  const valid = new Set();
  let n = 0;
  const read = (req) => new Promise((r) => { let b = ''; req.on('data', (d) => { b += d; }); req.on('end', () => r(Object.fromEntries(new URLSearchParams(b)))); });
  const cookie = (req) => (/(?:^|; )sid=([^;]+)/.exec(req.headers.cookie || '') || [])[1];
  const html = (res, body) => { res.writeHead(200, { 'content-type': 'text/html' }); res.end(body); };
  return {
    expire: () => valid.clear(),
    handler: async (req, res) => {
      const u = new URL(req.url, 'http://x');
      const f = req.method === 'POST' ? await read(req) : {};
      switch (`${req.method} ${u.pathname}`) {
        case 'GET /home':
          return valid.has(cookie(req)) ? html(res, page('account', '<h1>Welcome back</h1><p>Your orders</p>'))
            : html(res, page('accounts', '<h1>Choose an account</h1><ul>'
              + '<li><a href="/one?u=ann%40example.com">Ann Example <small>ann@example.com</small></a></li>'
              + '<li><a href="/one?u=bob%40example.com">Bob Example <small>bob@example.com</small></a></li></ul>'));
        case 'GET /one': return html(res, form('/one', USER + PASS));
        case 'POST /one': {
          if (f.email !== 'ann@example.com' || f.password !== PASSWORD) return html(res, form('/one', USER + PASS, 'Incorrect email or password'));
          const v = `s${++n}`;
          valid.add(v);
          res.writeHead(303, { location: '/home', 'set-cookie': `sid=${v}; Path=/; Max-Age=86400` });
          return res.end();
        }
        default: res.writeHead(404); return res.end();
      }
    },
  };
}

async function timeline(client, id) {
  const all = [];
  for await (const t of client.auth.connections.timeline(id)) all.push(t);
  return all;
}

export const tests = [
  {
    name: 'issue h12.2: a health check landing on an account picker (the site\'s expired session, no login field) counts as expired: NEEDS_AUTH on the timeline and a re-authentication (auto_reauth); without auto_reauth the connection stays NEEDS_AUTH; a logged-in page counts as logged in',
    timeout: 120000,
    fn: async () => {
      const sv = site();
      const web = await startSite(sv.handler);
      try {
        await withServer({ args: [...web.allow, '--admin-token', 'hc-admin'] }, async (s) => {
          // A plan whose shortest health-check interval is 1 s.
          const org = await newOrg(s, 'hc-admin', { name: 'hc-picker', overrides: { features: { managed_auth: { enabled: true, health_check_interval_min_seconds: 1, max_connections: 10 }, credentials: { enabled: true }, profiles: { enabled: true } } } });
          const client = new Kernel({ baseURL: s.base, apiKey: org.key, maxRetries: 0 });
          const api = (m, p, body) => request(s.base, m, p, { key: org.key, body });
          ok2xx(await api('POST', '/credentials', { name: 'ann', domain: '127.0.0.1', values: { email: 'ann@example.com', password: PASSWORD } }), 'credential');
          const c = await client.auth.connections.create({ domain: '127.0.0.1', profile_name: 'hc-picker', credential: { name: 'ann' }, login_url: `${web.url}/one`, health_check_interval: 1 });
          await client.auth.connections.login(c.id);
          const done = await waitFor(async () => {
            const x = await client.auth.connections.retrieve(c.id);
            return ['SUCCESS', 'FAILED', 'EXPIRED', 'CANCELED'].includes(x.flow_status) ? x : null;
          }, 'the login flow to end', 60000, 200);
          eq([done.flow_status, done.status], ['SUCCESS', 'AUTHENTICATED'], JSON.stringify(done));
          // While the session is valid, a check finds the account page: logged in.
          let tl = await waitFor(async () => {
            const all = await timeline(client, c.id);
            return all.some((t) => t.type === 'health_check') ? all : null;
          }, 'a first health check', 30000, 300);
          eq(tl.find((t) => t.type === 'health_check').status, 'AUTHENTICATED', `the account page is logged in: ${JSON.stringify(tl)}`);
          // The site forgets its sessions: /home shows the account picker.
          sv.expire();
          tl = await waitFor(async () => {
            const all = await timeline(client, c.id);
            return all.some((t) => t.type === 'reauth' && t.status === 'SUCCESS') ? all : null;
          }, 'a re-authentication after the account picker', 40000, 300)
            .catch(async (e) => { throw new Error(`${e.message}: ${JSON.stringify(await timeline(client, c.id))}`); });
          const hc = tl.find((t) => t.type === 'health_check' && t.status === 'NEEDS_AUTH');
          assert(hc, `an expired health check on the timeline: ${JSON.stringify(tl)}`);
          eq(hc.previous_status, 'AUTHENTICATED', 'previous status');
          // Without auto_reauth the account picker leaves the connection NEEDS_AUTH.
          await client.auth.connections.update(c.id, { auto_reauth: false });
          sv.expire();
          await waitFor(async () => (await client.auth.connections.retrieve(c.id)).status === 'NEEDS_AUTH', 'NEEDS_AUTH without re-authentication', 40000, 300);
        });
      } finally { web.close(); }
    },
  },
];
