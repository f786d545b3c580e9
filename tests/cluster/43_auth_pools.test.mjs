// Issue h2: managed auth on a cluster. A health check that finds a
// connection's session expired re-authenticates it (auto_reauth) on the node
// that ran the check, and a re-authentication flushes the pools whose
// browsers load the connection's profile. Pools run on their home node
// (docs/multinode.md "Pools"): the node running the flow flushed only the
// pools of its own engine, so a pool homed on the other node kept browsers
// on the expired state. One pool is homed on each node here, so whichever
// node runs the re-authentication, the other's pool is the remote one.
// A health check skips a connection whose flow runs on another node, as it
// skips one whose flow runs on its own (before, the other node probed it
// and wrote its row under the running flow).
// A connection deleted through a node that does not run its flow cancels
// the flow on its node (before, the row went and the flow waited for input
// until it expired, its browser running).
//   TEST_DIR=tests/cluster BROWSERD_BIN=build/browserd node tests/blackbox/run.mjs '^43_auth_pools'
import { request, assert, eq, waitFor, startSite, newOrg } from '../blackbox/lib.mjs';
import { startCluster, ADMIN_TOKEN } from './lib.mjs';

const PASSWORD = 'h2-pw-cleartext-Lq3';
const page = (title, body) => `<!doctype html><title>${title}</title><body>${body}</body>`;
const FORM = page('login', '<form method=post action=/login>'
  + '<label for=u>Email address</label><input id=u name=email type=email autocomplete=username>'
  + '<label for=p>Password</label><input id=p name=password type=password autocomplete=current-password>'
  + '<button type=submit>Continue</button></form>');

// A site whose login grants a cookie; expire() forgets every session, so the
// next health check finds the login form again. With askCode set, a login
// asks for an emailed code instead (a flow waits for a person).
const CODE = page('code', '<form method=post action=/code><label for=e>Enter the code we sent to your email</label>'
  + '<input id=e name=email_code autocomplete=one-time-code><button type=submit>Verify</button></form>');
function site() {
  const valid = new Set();
  let n = 0;
  const sv = { askCode: false };
  const html = (res, body) => { res.writeHead(200, { 'content-type': 'text/html' }); res.end(body); };
  const cookie = (req) => (/(?:^|; )sid=([^;]+)/.exec(req.headers.cookie || '') || [])[1];
  return Object.assign(sv, {
    expire: () => valid.clear(),
    handler: (req, res) => {
      let b = '';
      req.on('data', (d) => { b += d; });
      req.on('end', () => {
        const u = new URL(req.url, 'http://x');
        const f = Object.fromEntries(new URLSearchParams(b));
        if (req.method === 'POST' && u.pathname === '/login') {
          if (f.email !== 'ann@example.com' || f.password !== PASSWORD) return html(res, FORM);
          if (sv.askCode) return html(res, CODE);
          const v = `s${++n}`;
          valid.add(v);
          res.writeHead(303, { location: '/home', 'set-cookie': `sid=${v}; Path=/; Max-Age=86400` });
          return res.end();
        }
        if (u.pathname === '/home' && valid.has(cookie(req))) return html(res, page('account', '<h1>Welcome back</h1>'));
        return html(res, FORM);
      });
    },
  });
}

const sqlStr = (s) => `'${String(s).replace(/'/g, "''")}'`;
const FEATURES = { features: { managed_auth: { enabled: true, health_check_interval_min_seconds: 1, max_connections: 10 }, credentials: { enabled: true }, profiles: { enabled: true }, browser_pools: { enabled: true } } };
const timelineOf = async (n, key, id) => {
  const r = await request(n.base, 'GET', `/auth/connections/${id}/timeline`, { key });
  return Array.isArray(r.json) ? r.json : (r.json && r.json.data) || [];
};

// An organization with a credential and a connection (health checks every
// second) logged in through node n: {key, id}.
async function loggedIn(c, n, web, name) {
  const org = await newOrg({ base: n.base }, ADMIN_TOKEN, { name, overrides: FEATURES });
  const api = (m, p, body) => request(n.base, m, p, { key: org.key, body });
  const cred = await api('POST', '/credentials', { name: 'ann', domain: '127.0.0.1', values: { email: 'ann@example.com', password: PASSWORD } });
  assert(cred.status < 300, `credential: ${cred.status} ${cred.text}`);
  const conn = await api('POST', '/auth/connections', { domain: '127.0.0.1', profile_name: `${name}-prof`, credential: { name: 'ann' }, login_url: `${web.url}/login`, health_check_interval: 1 });
  assert(conn.status < 300, `auth connection: ${conn.status} ${conn.text}`);
  eq((await api('POST', `/auth/connections/${conn.json.id}/login`, {})).status, 200, 'login');
  await waitFor(async () => {
    const r = (await api('GET', `/auth/connections/${conn.json.id}`)).json;
    assert(!['FAILED', 'EXPIRED', 'CANCELED'].includes(r.flow_status), `the login failed: ${JSON.stringify(r)}`);
    return r.flow_status === 'SUCCESS' && r.status === 'AUTHENTICATED';
  }, `the login of ${name} succeeds`, 90000, 300);
  return { key: org.key, id: conn.json.id };
}

export const tests = [
  {
    name: 'issue h2: a re-authentication (health check, auto_reauth) on one node flushes the pools using the profile on every node: the idle browser of the pool homed on the other node ends "pool flushed" too',
    timeout: 180000,
    fn: async () => {
      const sv = site();
      const web = await startSite(sv.handler);
      const c = await startCluster({ nodes: 2, args: web.allow });
      const [n1, n2] = c.nodes;
      try {
        const org = await newOrg({ base: n1.base }, ADMIN_TOKEN, {
          name: 'h2-pools',
          overrides: { features: { managed_auth: { enabled: true, health_check_interval_min_seconds: 1, max_connections: 10 }, credentials: { enabled: true }, profiles: { enabled: true }, browser_pools: { enabled: true } } },
        });
        const api = (n, m, p, body) => request(n.base, m, p, { key: org.key, body });
        const ok = (r, what) => { assert(r.status < 300, `${what}: ${r.status} ${r.text}`); return r.json; };
        ok(await api(n1, 'POST', '/credentials', { name: 'ann', domain: '127.0.0.1', values: { email: 'ann@example.com', password: PASSWORD } }), 'credential');
        const conn = ok(await api(n1, 'POST', '/auth/connections', {
          domain: '127.0.0.1', profile_name: 'h2-prof', credential: { name: 'ann' }, login_url: `${web.url}/login`, health_check_interval: 1,
        }), 'auth connection');
        ok(await api(n1, 'POST', `/auth/connections/${conn.id}/login`, {}), 'login');
        await waitFor(async () => {
          const r = (await api(n2, 'GET', `/auth/connections/${conn.id}`)).json;
          assert(!['FAILED', 'EXPIRED', 'CANCELED'].includes(r.flow_status), `the login failed: ${JSON.stringify(r)}`);
          return r.flow_status === 'SUCCESS' && r.status === 'AUTHENTICATED';
        }, 'the login succeeds', 90000, 300);
        // One pool on the profile homed on each node (the node that receives
        // the create is the pool's home).
        const pools = [];
        for (const n of [n1, n2]) {
          const p = ok(await api(n, 'POST', '/browser_pools', { size: 1, headless: true, profile: { name: 'h2-prof' } }), `a pool created on ${n.name}`);
          pools.push({ id: p.id, home: n.name });
        }
        const homes = await c.psql(`SELECT p.id, n.name FROM pools p JOIN nodes n ON n.id = p.node_id WHERE p.id IN (${pools.map((p) => sqlStr(p.id)).join(',')})`);
        eq(homes.map((r) => r.join(' ')).sort(), pools.map((p) => `${p.id} ${p.home}`).sort(), 'each pool is homed on the node that created it');
        // Each pool's idle browser before the re-authentication.
        const idleOf = async (id) => (await c.psql(
          `SELECT id FROM sessions WHERE status = 'active' AND data::jsonb->'pool'->>'id' = ${sqlStr(id)}`)).map((r) => r[0]);
        for (const p of pools) {
          p.idle = await waitFor(async () => { const ids = await idleOf(p.id); return ids.length === 1 ? ids[0] : null; }, `pool ${p.id} filled`, 90000, 300);
        }
        // The site forgets the session: a health check finds the login form,
        // and auto_reauth logs in again on the node that ran the check.
        sv.expire();
        await waitFor(async () => {
          const r = await api(n1, 'GET', `/auth/connections/${conn.id}/timeline`);
          const all = Array.isArray(r.json) ? r.json : (r.json && r.json.data) || [];
          return all.some((t) => t.type === 'reauth' && t.status === 'SUCCESS');
        }, 'a re-authentication after the health check', 90000, 300);
        const reauthOn = [n1, n2].filter((n) => /health check: NEEDS_AUTH/.test(n.log)).map((n) => n.name);
        assert(reauthOn.length >= 1, 'a node logged the expired health check');
        // Both pools' browsers from before end "pool flushed" (the old binary
        // flushed only the pool homed on the node running the flow; the
        // other's browser stayed active).
        for (const p of pools) {
          await waitFor(async () => {
            const [row] = await c.psql(`SELECT status, end_reason FROM sessions WHERE id = ${sqlStr(p.idle)}`);
            return row && row[0] !== 'active' ? row : null;
          }, `the idle browser of pool ${p.id} (home ${p.home}; the re-authentication ran on ${reauthOn.join(', ')}) flushed`, 30000, 300)
            .then((row) => eq(row[1], 'pool flushed', `end reason of pool ${p.id}'s browser`));
        }
        for (const p of pools) ok(await api(n2, 'DELETE', `/browser_pools/${p.id}`), `delete pool ${p.id}`);
      } finally {
        await c.stop();
        web.close();
      }
    },
  },
  {
    name: 'issue h2: no node health-checks a connection while its login flow runs on another node (the nodes check another organization\'s connection meanwhile, and not this one)',
    timeout: 180000,
    fn: async () => {
      const sv = site();
      const web = await startSite(sv.handler);
      const c = await startCluster({ nodes: 2, args: web.allow });
      const [n1, n2] = c.nodes;
      try {
        const ctl = await loggedIn(c, n2, web, 'h2-ctl');
        const main = await loggedIn(c, n1, web, 'h2-main');
        // A login of the authenticated connection on node 1 now waits for
        // an emailed code; its status stays AUTHENTICATED meanwhile.
        sv.askCode = true;
        eq((await request(n1.base, 'POST', `/auth/connections/${main.id}/login`, { key: main.key, body: {} })).status, 200, 'a second login on node 1');
        await waitFor(async () => {
          const r = (await request(n2.base, 'GET', `/auth/connections/${main.id}`, { key: main.key })).json;
          assert(r.flow_status === 'IN_PROGRESS' || r.flow_status === 'SUCCESS', `the flow ended: ${JSON.stringify(r)}`);
          return r.flow_status === 'IN_PROGRESS' && r.flow_step === 'AWAITING_INPUT';
        }, 'the second login awaits the code', 60000, 200);
        // The nodes make passes meanwhile (each node ticks every second and
        // takes the pass lock in turn): the checks of the other
        // organization's connection, one a second, show them.
        const ctlChecks = () => [n1, n2].reduce((k, n) => k + n.log.split(`auth connection ${ctl.id}: health check:`).length - 1, 0);
        // A check of this connection that began before the flow may still
        // be writing its entry: two passes later it has, and counting starts.
        const settle = ctlChecks();
        await waitFor(() => ctlChecks() >= settle + 2, 'two checks of the other connection', 60000, 200);
        const before = (await timelineOf(n2, main.key, main.id)).filter((t) => t.type === 'health_check').length;
        const start = ctlChecks();
        await waitFor(() => ctlChecks() >= start + 4, 'four more checks of the other connection', 60000, 200);
        const after = (await timelineOf(n2, main.key, main.id)).filter((t) => t.type === 'health_check').length;
        eq(after - before, 0, 'health checks of the connection while its flow ran on node 1 (node 2 checked it on the old binary)');
        const r = (await request(n2.base, 'GET', `/auth/connections/${main.id}`, { key: main.key })).json;
        eq([r.flow_status, r.status], ['IN_PROGRESS', 'AUTHENTICATED'], 'the flow still waits and the connection is untouched');
      } finally {
        await c.stop();
        web.close();
      }
    },
  },
  {
    name: 'issue h2: DELETE of an auth connection sent to node 2 while its login flow awaits input on node 1 cancels the flow there: its browser ends at once, not when the flow expires',
    timeout: 150000,
    fn: async () => {
      const web = await startSite((req, res) => { res.writeHead(200, { 'content-type': 'text/html' }); res.end(FORM); });
      const c = await startCluster({ nodes: 2, args: web.allow });
      const [n1, n2] = c.nodes;
      try {
        const api = (n, m, p, body) => request(n.base, m, p, { key: c.key, body });
        // No credential: the flow waits for a person to submit the fields.
        const conn = await api(n1, 'POST', '/auth/connections', { domain: '127.0.0.1', profile_name: 'h2-del', login_url: `${web.url}/` });
        assert(conn.status < 300, `auth connection: ${conn.status} ${conn.text}`);
        const id = conn.json.id;
        eq((await api(n1, 'POST', `/auth/connections/${id}/login`, {})).status, 200, 'login on node 1');
        const sid = await waitFor(async () => {
          const r = (await api(n2, 'GET', `/auth/connections/${id}`)).json;
          assert(r.flow_status === 'IN_PROGRESS', `the flow ended: ${JSON.stringify(r)}`);
          return r.flow_step === 'AWAITING_INPUT' ? r.browser_session_id : null;
        }, 'the flow awaits input', 60000, 200);
        assert(sid, 'the flow names its browser session');
        const row = async () => (await c.psql(`SELECT status, n.name FROM sessions s JOIN nodes n ON n.id = s.node_id WHERE s.id = ${sqlStr(sid)}`))[0];
        eq(await row(), ['active', 'n1'], 'the flow\'s browser runs on node 1');
        eq((await api(n2, 'DELETE', `/auth/connections/${id}`)).status, 204, 'delete on node 2');
        eq((await api(n1, 'GET', `/auth/connections/${id}`)).status, 404, 'the connection is gone');
        await waitFor(async () => (await row())[0] !== 'active', 'the flow\'s browser on node 1 ended (it ran on until the flow expired on the old binary)', 30000, 300);
      } finally {
        await c.stop();
        web.close();
      }
    },
  },
];
