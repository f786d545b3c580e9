// Issue h7.2: lifecycle paths of apps and managed auth on a busy host. Each
// test runs its work inside withLoad (`stress-ng --cpu 2 --vm 1 --vm-bytes
// 256M`, ended by its PID after) and asserts outcomes, never times: an app
// invocation's end deletes its browsers and revokes its API key and keeps its
// output and status; a managed-auth login's profile, saved when the flow's
// session ends, logs a new session in; runs holding the most relay
// connections they may (LIM_APP_RELAY_CONNS) leave another organization's
// invocation able to reach the API, and the server's threads return to their
// number before. The app is 36_apps' zip (its buildZip) with this file's
// code; pages are served on 127.0.0.1.
import http from 'node:http';
import { readFileSync } from 'node:fs';
import Kernel from '@onkernel/sdk';
import { withServer, startSite, request, assert, eq, waitFor, withLoad, newOrg, ok2xx, sessionPids } from '../blackbox/lib.mjs';
import { buildZip } from './36_apps.test.mjs';

const LOAD = { stressors: ['--cpu', '2', '--vm', '1', '--vm-bytes', '256M'], workers: 3, seconds: 150 };
const ADMIN = 'busy-apps-admin';
const RELAY_CONNS = 64; // LIM_APP_RELAY_CONNS (src/core/limits.h)

const APP = `
import Kernel from '@onkernel/sdk';
import http from 'node:http';

const kernel = new Kernel();
const app = kernel.app('busy-app');

// Leaves two browsers of the invocation open: the run's end must end them.
app.action('leave', async (ctx) => {
  const ids = [];
  for (let i = 0; i < 2; i++) ids.push((await kernel.browsers.create({ invocation_id: ctx.invocation_id, headless: true })).session_id);
  return { ids, key: process.env.KERNEL_API_KEY };
});

const get = (agent, path) => new Promise((res) => {
  const rq = http.get(new URL(path, process.env.KERNEL_BASE_URL), { agent, headers: { authorization: 'Bearer ' + process.env.KERNEL_API_KEY } }, (r) => {
    r.resume();
    r.on('end', () => res(r.statusCode));
    r.on('error', () => res('error'));
  });
  rq.on('error', () => res('error'));
});

// Holds payload.conns connections to the API through the run's relay, each
// asking for the profile payload.release again and again, until it exists.
app.action('flood', async (ctx, payload) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: payload.conns });
  let best = 0;
  for (;;) {
    const got = await Promise.all(Array.from({ length: payload.conns }, () => get(agent, '/profiles/' + payload.release)));
    best = Math.max(best, got.filter((x) => typeof x === 'number').length);
    if (got.includes(200)) { agent.destroy(); return { best }; }
    await new Promise((r) => setTimeout(r, 300));
  }
});

// Calls to the API through the relay, each on a connection of its own:
// their statuses.
app.action('ping', async (ctx) => {
  const statuses = [];
  for (let i = 0; i < 10; i++) statuses.push(await get(false, '/profiles'));
  return { statuses };
});
`;

const api = (s, method, path, body, key = s.key, agent) => request(s.base, method, path, { key, body, agent });

async function deploy(s, key = s.key) {
  const client = new Kernel({ baseURL: s.base, apiKey: key, maxRetries: 0, timeout: 120000 });
  const zip = buildZip(APP, 'busy-app');
  const dep = await client.deployments.create({
    file: new File([zip], 'app.zip', { type: 'application/zip' }), entrypoint_rel_path: 'index.mjs', version: '1', region: 'aws.us-east-1a',
  });
  eq(dep.status, 'running', `deployment: ${JSON.stringify(dep)}`);
  return client;
}

const invoke = (s, key, action, payload, agent, async = true) => api(s, 'POST', '/invocations',
  { app_name: 'busy-app', action_name: action, version: '1', payload: JSON.stringify(payload || {}), ...(async ? { async: true, async_timeout_seconds: 300 } : {}) }, key, agent);

async function settled(s, id, key = s.key, agent) {
  return waitFor(async () => {
    const r = await api(s, 'GET', `/invocations/${id}`, undefined, key, agent);
    return r.json && (r.json.status === 'succeeded' || r.json.status === 'failed') ? r.json : null;
  }, `invocation ${id} ends`, 100000, 250);
}

const threads = (pid) => Number(/^Threads:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);

export const tests = [
  {
    name: 'issue h7.2: on a busy host an app invocation\'s end (sync and async at once) deletes the browsers it left open, revokes its API key (401 after) and keeps its output and status',
    timeout: 150000,
    fn: () => withServer({}, async (s) => {
      await deploy(s);
      await withLoad(async () => {
        const sync = invoke(s, s.key, 'leave', {}, undefined, false);
        const queued = await invoke(s, s.key, 'leave');
        eq(queued.status, 202, queued.text);
        const ends = [(await sync).json, await settled(s, queued.json.id)];
        for (const inv of ends) {
          eq(inv.status, 'succeeded', `the invocation: ${JSON.stringify(inv)}`);
          const out = JSON.parse(inv.output);
          eq(out.ids.length, 2, `two browsers left open: ${inv.output}`);
          for (const id of out.ids) {
            await waitFor(async () => {
              const r = await api(s, 'GET', `/browsers/${id}`);
              return r.status === 404 || (r.json && r.json.deleted_at);
            }, `browser ${id} of invocation ${inv.id} deleted with its end`, 60000, 250);
            await waitFor(() => sessionPids(s.dir, id).length === 0, `no process of browser ${id}`, 60000, 250);
          }
          const keys = ok2xx(await api(s, 'GET', '/org/api_keys?include_deleted=true'), 'keys');
          const k = keys.find((x) => x.name === `invocation ${inv.id}`);
          assert(k && k.deleted_at, `the invocation's key is revoked: ${JSON.stringify(k)}`);
          eq((await api(s, 'GET', '/profiles', undefined, out.key)).status, 401, 'the revoked key is refused');
          const again = ok2xx(await api(s, 'GET', `/invocations/${inv.id}`), 'the record');
          eq([again.status, again.output], ['succeeded', inv.output], 'output and status kept');
        }
        eq((await api(s, 'GET', '/browsers')).json.length, 0, 'no browser left');
      }, LOAD);
    }),
  },
  {
    name: 'issue h7.2: on a busy host a managed-auth login flow saves its profile: after AUTHENTICATED a new session with that profile is logged in',
    timeout: 150000,
    fn: async () => {
      const valid = new Set();
      const home = [];
      let n = 0;
      const html = (res, body) => { res.writeHead(200, { 'content-type': 'text/html' }); res.end(`<!doctype html><title>t</title><body>${body}</body>`); };
      const web = await startSite(async (req, res) => {
        let b = '';
        for await (const d of req) b += d;
        const f = Object.fromEntries(new URLSearchParams(b));
        const sid = (/(?:^|; )sid=([^;]+)/.exec(req.headers.cookie || '') || [])[1];
        const login = '<form method=post action="/one"><label for=u>Email address</label><input id=u name=email type=email autocomplete=username>'
          + '<label for=p>Password</label><input id=p name=password type=password autocomplete=current-password><button type=submit>Continue</button></form>';
        const path = `${req.method} ${new URL(req.url, 'http://x').pathname}`;
        if (path === 'GET /home') { home.push(valid.has(sid)); return html(res, valid.has(sid) ? '<h1>Welcome back</h1>' : login); }
        if (path === 'GET /one') return html(res, login);
        if (path === 'POST /one' && f.email === 'ann@example.com' && f.password === 'busy-pw-1') {
          const v = `s${++n}`;
          valid.add(v);
          res.writeHead(303, { location: '/home', 'set-cookie': `sid=${v}; Path=/; Max-Age=86400` });
          return res.end();
        }
        if (path === 'POST /one') return html(res, `<p role=alert>Incorrect</p>${login}`);
        res.writeHead(404);
        return res.end();
      });
      try {
        await withServer({ args: web.allow }, async (s) => {
          const client = new Kernel({ baseURL: s.base, apiKey: s.key, maxRetries: 0 });
          ok2xx(await api(s, 'POST', '/credentials', { name: 'ann', domain: '127.0.0.1', values: { email: 'ann@example.com', password: 'busy-pw-1' } }), 'credential');
          const conn = await client.auth.connections.create({ domain: '127.0.0.1', profile_name: 'busy-login', credential: { name: 'ann' }, login_url: `${web.url}/one` });
          await withLoad(async () => {
            await client.auth.connections.login(conn.id);
            const done = await waitFor(async () => {
              const c = await client.auth.connections.retrieve(conn.id);
              return ['SUCCESS', 'FAILED', 'EXPIRED', 'CANCELED'].includes(c.flow_status) ? c : null;
            }, 'the flow ends', 100000, 250);
            eq([done.flow_status, done.status], ['SUCCESS', 'AUTHENTICATED'], `the login: ${JSON.stringify(done)}`);
            const before = home.length;
            const b = ok2xx(await api(s, 'POST', '/browsers', { headless: true, profile: { name: 'busy-login' }, start_url: `${web.url}/home` }), 'a session on the profile');
            await waitFor(() => home.length > before, 'the new session\'s visit', 60000, 250);
            eq(home[before], true, 'the new session is logged in (the profile was saved)');
            await api(s, 'DELETE', `/browsers/${b.id}`);
          }, LOAD);
        });
      } finally { web.close(); }
    },
  },
  {
    name: 'issue h7.2: on a busy host runs of one org each holding LIM_APP_RELAY_CONNS relay connections leave another org\'s invocation able to reach the API (the per-address connection cap is not one shared 127.0.0.1), and the server\'s threads return to their number before',
    timeout: 170000,
    fn: () => withServer({ args: ['--admin-token', ADMIN] }, async (s) => {
      // The test's own calls come from 127.0.0.2: the runs' connections
      // must not decide whether the test can watch them.
      const agent = new http.Agent({ localAddress: '127.0.0.2' });
      const a = await newOrg(s, ADMIN, { name: 'flooder', plan: 'enterprise' });
      const b = await newOrg(s, ADMIN, { name: 'bystander', plan: 'enterprise' });
      await deploy(s, a.key);
      await deploy(s, b.key);
      // Four at once: the transport's blocking threads (which stay once
      // started) grow here, before the baseline, rather than during the flood.
      const warm = await Promise.all([0, 1, 2, 3].map(() => invoke(s, b.key, 'ping', {}, agent)));
      for (const w of warm) {
        eq(w.status, 202, w.text);
        const end = await settled(s, w.json.id, b.key, agent);
        eq(JSON.parse(end.output || '{}').statuses, Array(10).fill(200), `the bystander's run reaches the API when idle: ${JSON.stringify(end)}`);
      }
      const baseline = threads(s.proc.pid);
      await withLoad(async () => {
        // 4 runs of 64: the server's 256 connections per client address
        // (LIM_HTTP_CONNECTIONS_PER_IP).
        const runs = [];
        for (let i = 0; i < 4; i++) {
          const r = await invoke(s, a.key, 'flood', { conns: RELAY_CONNS, release: 'release' }, agent);
          eq(r.status, 202, r.text);
          runs.push(r.json.id);
        }
        const running = async () => {
          const r = await api(s, 'GET', `/invocations?status=running`, undefined, a.key, agent);
          return (r.json.items || r.json).length;
        };
        await waitFor(async () => (await running()) === runs.length, 'the flooding runs run', 100000, 250);
        // Each run has reached its relay: it answers from its connections
        // (the threads of its pumps are up).
        await waitFor(() => threads(s.proc.pid) >= baseline + 4 * RELAY_CONNS, `the runs' relay pumps (${threads(s.proc.pid)} threads, ${baseline} before)`, 100000, 250);
        const inv = await invoke(s, b.key, 'ping', {}, agent);
        eq(inv.status, 202, inv.text);
        const got = await settled(s, inv.json.id, b.key, agent);
        eq(got.status, 'succeeded', `the other org's invocation: ${JSON.stringify(got)}`);
        eq(JSON.parse(got.output).statuses, Array(10).fill(200), 'the other org\'s run reaches the API through its relay, every call');
        ok2xx(await api(s, 'POST', '/profiles', { name: 'release' }, a.key, agent), 'release the runs');
        for (const id of runs) {
          const end = await settled(s, id, a.key, agent);
          eq(end.status, 'succeeded', `a flooding run: ${JSON.stringify(end)}`);
          eq(JSON.parse(end.output).best, RELAY_CONNS, `a flooding run held all its connections: ${end.output}`);
        }
      }, LOAD);
      await waitFor(() => threads(s.proc.pid) <= baseline, `the server's threads back to ${baseline} (now ${threads(s.proc.pid)})`, 60000, 250);
      agent.destroy();
    }),
  },
];
