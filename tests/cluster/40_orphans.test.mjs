// Issue h9 on a cluster: a node that dies (kill -9) leaves background
// records behind, which only it would have finished. When its lease runs
// out, the surviving node whose sweep declares it dead ends them: an async
// invocation it was running ends `failed` ("the node running it was lost"),
// its events stream (read through the survivor) ends with that state, and a
// login flow it ran ends FAILED (error_code node_lost) instead of
// being forwarded to the dead node. Before, both stayed running /
// IN_PROGRESS. A node restarted under its name within its lease ends its
// earlier run's records itself ("the node running it restarted").
//   TEST_DIR=tests/cluster BROWSERD_BIN=build/browserd node tests/blackbox/run.mjs '^40_orphans'
import { request, assert, eq, waitFor, startSite, appZip, deployApp, sseEvents } from '../blackbox/lib.mjs';
import { startCluster } from './lib.mjs';

const APP = `
import Kernel from '@onkernel/sdk';
const kernel = new Kernel();
const app = kernel.app('orphan-app');
app.action('sleep', async (ctx) => new Promise(() => setInterval(() => {}, 1000)));
`;
const LOGIN = '<!doctype html><title>login</title><form method=post action=/login>'
  + '<label for=u>Email address</label><input id=u name=email type=email autocomplete=username>'
  + '<label for=p>Password</label><input id=p name=password type=password autocomplete=current-password>'
  + '<button type=submit>Continue</button></form>';

export const tests = [
  {
    name: 'issue h9.2: kill -9 of node 1 while it runs an async invocation and a login flow: once its lease ends, node 2 ends both (failed "the node running it was lost"; FAILED node_lost) and their events through node 2 end with that state',
    timeout: 90000,
    fn: async () => {
      const web = await startSite((req, res) => { res.writeHead(200, { 'content-type': 'text/html' }); res.end(LOGIN); });
      const c = await startCluster({ nodes: 2, env: { BROWSERD_NODE_LEASE_MS: '3000' }, args: web.allow });
      c.expectLoss();
      const [n1, n2] = c.nodes;
      const get = async (path) => {
        const r = await request(n2.base, 'GET', path, { key: c.key });
        eq(r.status, 200, `GET ${path} on node 2: ${r.text}`);
        return r.json;
      };
      try {
        const dep = await deployApp(n1.base, c.key, appZip({ 'index.mjs': APP }), '1');
        const depj = await dep.json();
        eq(depj.status, 'running', `deploy on node 1: ${JSON.stringify(depj)}`);
        const inv = await request(n1.base, 'POST', '/invocations', {
          key: c.key, body: { app_name: 'orphan-app', action_name: 'sleep', version: '1', async: true, async_timeout_seconds: 600 },
        });
        eq(inv.status, 202, `async invoke on node 1: ${inv.text}`);
        const id = inv.json.id;
        await waitFor(async () => (await get(`/invocations/${id}`)).status === 'running', 'the invocation runs', 30000, 200);
        const conn = await request(n1.base, 'POST', '/auth/connections', {
          key: c.key, body: { domain: '127.0.0.1', profile_name: 'orphan-login', login_url: `${web.url}/` },
        });
        assert(conn.status < 300, `auth connection: ${conn.status} ${conn.text}`);
        const cid = conn.json.id;
        const login = await request(n1.base, 'POST', `/auth/connections/${cid}/login`, { key: c.key, body: {} });
        assert(login.status < 300, `login on node 1: ${login.status} ${login.text}`);
        await waitFor(async () => (await get(`/auth/connections/${cid}`)).flow_step === 'AWAITING_INPUT', 'the login flow awaits input', 30000, 200);

        await n1.kill9();

        const problems = [];
        const check = async (what, fn) => { try { await fn(); } catch (e) { problems.push(`${what}: ${e.message}`); } };
        await check('the invocation', async () => {
          let got;
          await waitFor(async () => {
            got = await get(`/invocations/${id}`);
            return got.status !== 'running';
          }, 'node 2 ends the invocation (it stays running on the old binary)', 30000, 200);
          eq(got.status, 'failed', `the invocation: ${JSON.stringify(got)}`);
          assert(/lost/.test(got.status_reason || ''), `status_reason names the lost node: ${JSON.stringify(got)}`);
          const evs = await sseEvents(n2.base, c.key, `/invocations/${id}/events`);
          const last = evs.filter((e) => e.event === 'invocation_state').pop();
          eq(last && last.invocation.status, 'failed', `its events through node 2: ${JSON.stringify(evs)}`);
        });
        await check('the login flow', async () => {
          let got;
          await waitFor(async () => {
            got = await get(`/auth/connections/${cid}`);
            return got.flow_status !== 'IN_PROGRESS';
          }, 'node 2 ends the login flow (it stays IN_PROGRESS on the old binary)', 30000, 200);
          eq([got.flow_status, got.error_code], ['FAILED', 'node_lost'], `the flow: ${JSON.stringify(got)}`);
          const evs = await sseEvents(n2.base, c.key, `/auth/connections/${cid}/events`);
          eq(evs.length > 0 && evs.at(-1).flow_status, 'FAILED', `its events through node 2: ${JSON.stringify(evs)}`);
        });
        assert(problems.length === 0, problems.join('\n'));
      } finally {
        await c.stop();
        web.close();
      }
    },
  },
  {
    name: 'issue h9.2: node 1 killed (-9) while it runs an async invocation and restarted under its name within its lease ends the invocation itself as it reaps its earlier run (failed, "the node running it restarted")',
    timeout: 90000,
    fn: async () => {
      // A lease long enough that node 2's sweep never comes first.
      const c = await startCluster({ nodes: 2, env: { BROWSERD_NODE_LEASE_MS: '30000' } });
      c.expectLoss();
      const [n1, n2] = c.nodes;
      const get = async (path) => {
        const r = await request(n2.base, 'GET', path, { key: c.key });
        eq(r.status, 200, `GET ${path} on node 2: ${r.text}`);
        return r.json;
      };
      try {
        const dep = await deployApp(n1.base, c.key, appZip({ 'index.mjs': APP }), '1');
        eq((await dep.json()).status, 'running', 'deployed on node 1');
        const inv = await request(n1.base, 'POST', '/invocations', {
          key: c.key, body: { app_name: 'orphan-app', action_name: 'sleep', version: '1', async: true, async_timeout_seconds: 600 },
        });
        eq(inv.status, 202, `async invoke on node 1: ${inv.text}`);
        const id = inv.json.id;
        await waitFor(async () => (await get(`/invocations/${id}`)).status === 'running', 'the invocation runs', 30000, 200);
        await n1.kill9();
        await n1.start();
        let got;
        await waitFor(async () => {
          got = await get(`/invocations/${id}`);
          return got.status !== 'running';
        }, 'the restarted node 1 ends the invocation (it stays running on the old binary)', 20000, 200);
        eq(got.status, 'failed', `the invocation: ${JSON.stringify(got)}`);
        assert(/restarted/.test(got.status_reason || ''), `status_reason names the restart: ${JSON.stringify(got)}`);
      } finally {
        await c.stop();
      }
    },
  },
];
