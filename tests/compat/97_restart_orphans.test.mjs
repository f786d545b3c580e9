// Issue h9: nothing acknowledged is left hanging when the server restarts.
// A record the server acknowledged and then moved on in the background is
// ended at the next start on the same data folder after a kill -9: an async
// invocation that was running and a deployment being built end `failed`
// with a status_reason naming the restart, and their events streams end
// with that state; a managed auth login flow waiting for a person's input
// ends FAILED (error_code node_restarted); a config registry analysis ends
// failed (failure.code node_restarted). Before, each stayed running /
// in_progress / IN_PROGRESS forever. The invocation is not run again (its
// action may have had effects): it stays failed, never listed as running.
import { startServer, startSite, request, assert, eq, waitFor, sessionCgroupDirs, appZip, deployApp, sseEvents } from '../blackbox/lib.mjs';

// 'sleep' never ends by itself.
const APP = `
import Kernel from '@onkernel/sdk';
const kernel = new Kernel();
const app = kernel.app('orphan-app');
app.action('sleep', async (ctx) => new Promise(() => setInterval(() => {}, 1000)));
`;
// An entrypoint whose loading never ends: its deployment stays in_progress
// for as long as the server runs.
const HANG = `await new Promise(() => setInterval(() => {}, 1000));\n`;

const get = async (s, path) => {
  const r = await request(s.base, 'GET', path, { key: s.key });
  eq(r.status, 200, `GET ${path}: ${r.text}`);
  return r.json;
};

const tests = [];
const test = (name, fn, timeout = 60000) => tests.push({ name, fn, timeout });

// A login page with no credential to fill it: the flow waits for a person.
const LOGIN = '<!doctype html><title>login</title><form method=post action=/login>'
  + '<label for=u>Email address</label><input id=u name=email type=email autocomplete=username>'
  + '<label for=p>Password</label><input id=p name=password type=password autocomplete=current-password>'
  + '<button type=submit>Continue</button></form>';

test('issue h9.1: after kill -9 and a restart on the same data folder, an async invocation that was running, a deployment that was being built, a login flow awaiting input and a config registry analysis end failed ("the node running it restarted"), their events end with that state, and the invocation is not run again', async () => {
  let holds = 0;
  const web = await startSite((req, res) => {
    if (req.url.startsWith('/hold')) { holds++; return; } // never answered: the analysis visits on
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(LOGIN);
  });
  let s = await startServer({ args: web.allow });
  const dir = s.dir;
  try {
    const dep = await deployApp(s.base, s.key, appZip({ 'index.mjs': APP }), '1');
    eq(dep.status, 200, `deploy: ${await dep.clone().text()}`);
    const depj = await dep.json();
    eq(depj.status, 'running', `the app deployed: ${JSON.stringify(depj)}`);
    const inv = await request(s.base, 'POST', '/invocations', {
      key: s.key, body: { app_name: 'orphan-app', action_name: 'sleep', version: '1', async: true, async_timeout_seconds: 600 },
    });
    eq(inv.status, 202, `async invoke: ${inv.text}`);
    const id = inv.json.id;
    await waitFor(async () => (await get(s, `/invocations/${id}`)).status === 'running', 'the invocation runs', 30000, 200);
    // A deployment whose entrypoint never finishes loading: its POST waits.
    const hanging = deployApp(s.base, s.key, appZip({ 'hang.mjs': HANG }), '2', 'hang.mjs').catch(() => null);
    let depId;
    await waitFor(async () => {
      const all = await get(s, '/deployments');
      const d = (Array.isArray(all) ? all : []).find((x) => x.status === 'in_progress');
      depId = d && d.id;
      return !!depId;
    }, 'a deployment in progress', 30000, 200);

    const conn = await request(s.base, 'POST', '/auth/connections', {
      key: s.key, body: { domain: '127.0.0.1', profile_name: 'orphan-login', login_url: `${web.url}/` },
    });
    eq(conn.status < 300, true, `auth connection: ${conn.status} ${conn.text}`);
    const cid = conn.json.id;
    const login = await request(s.base, 'POST', `/auth/connections/${cid}/login`, { key: s.key, body: {} });
    eq(login.status < 300, true, `login: ${login.status} ${login.text}`);
    await waitFor(async () => (await get(s, `/auth/connections/${cid}`)).flow_step === 'AWAITING_INPUT', 'the login flow awaits input', 30000, 200);

    const an = await request(s.base, 'POST', '/config-registry/resolve', { key: s.key, body: { url: `${web.url}/hold` } });
    eq([an.status, an.json && an.json.analysis && an.json.analysis.status], [200, 'running'], `resolve: ${an.text}`);
    const aid = an.json.analysis.id;
    await waitFor(() => holds > 0, 'the analysis visits the page', 30000, 100);

    await s.kill9();
    await hanging;
    s = await startServer({ dataDir: dir, args: web.allow });

    // Each kind is checked on its own, so that a failure names every kind
    // left hanging (on the old binary: all four).
    const problems = [];
    const check = async (what, fn) => { try { await fn(); } catch (e) { problems.push(`${what}: ${e.message}`); } };
    await check('the async invocation', async () => {
      let got;
      await waitFor(async () => {
        got = await get(s, `/invocations/${id}`);
        return got.status !== 'running' && got.status !== 'queued';
      }, 'the invocation leaves running after the restart (it stays running on the old binary)', 15000, 200);
      eq(got.status, 'failed', `the invocation: ${JSON.stringify(got)}`);
      assert(/restarted/.test(got.status_reason || ''), `status_reason names the restart: ${JSON.stringify(got)}`);
      assert(got.finished_at, 'finished_at is set');
      const evs = await sseEvents(s.base, s.key, `/invocations/${id}/events`);
      const last = evs.filter((e) => e.event === 'invocation_state').pop();
      eq(last && last.invocation.status, 'failed', `the events' last state: ${JSON.stringify(evs)}`);
      const running = await get(s, '/invocations?status=running');
      eq(running.filter((x) => x.id === id).length, 0, 'not listed as running');

    });
    await check('the deployment being built', async () => {
      const d = await get(s, `/deployments/${depId}`);
      eq(d.status, 'failed', `the deployment being built: ${JSON.stringify(d)}`);
      assert(/restarted/.test(d.status_reason || ''), `status_reason names the restart: ${JSON.stringify(d)}`);
      const devs = await sseEvents(s.base, s.key, `/deployments/${depId}/events`);
      const dlast = devs.filter((e) => e.event === 'deployment_state').pop();
      eq(dlast && dlast.deployment.status, 'failed', `the deployment events' last state: ${JSON.stringify(devs)}`);
    });
    await check('the login flow', async () => {
      const c = await get(s, `/auth/connections/${cid}`);
      eq([c.flow_status, c.error_code], ['FAILED', 'node_restarted'], `the login flow: ${JSON.stringify(c)}`);
      assert(/restarted/.test(c.error_message || ''), `error_message names the restart: ${JSON.stringify(c)}`);
      const cevs = await sseEvents(s.base, s.key, `/auth/connections/${cid}/events`);
      eq(cevs.length > 0 && cevs.at(-1).flow_status, 'FAILED', `the flow's events: ${JSON.stringify(cevs)}`);
      // A new login may start.
      const again = await request(s.base, 'POST', `/auth/connections/${cid}/login`, { key: s.key, body: {} });
      eq(again.status < 300, true, `a new login: ${again.status} ${again.text}`);
    });
    await check('the config registry analysis', async () => {
      const a = await get(s, `/config-registry/analyses/${aid}`);
      eq([a.status, a.failure && a.failure.code], ['failed', 'node_restarted'], `the analysis: ${JSON.stringify(a)}`);
      assert(a.finished_at, 'finished_at is set');
      const entries = await get(s, '/config-registry');
      const entry = entries.find((x) => x.analysis && x.analysis.id === aid);
      eq(entry && entry.analysis.status, 'failed', `the registry's entry: ${JSON.stringify(entries)}`);
    });
    assert(problems.length === 0, problems.join('\n'));
    // The app deployed before the crash still runs.
    eq((await get(s, '/apps?app_name=orphan-app')).length, 1, 'the running version is kept');
    // Nothing of the killed run's invocation is left behind.
    await waitFor(() => sessionCgroupDirs(id).length === 0, 'no cgroup of the killed run', 15000, 200);
  } finally {
    await s.stop();
    s.cleanup();
    web.close();
  }
}, 120000);

export { tests };
