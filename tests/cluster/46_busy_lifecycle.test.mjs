// Issue h13: the cluster's lifecycle paths on a busy host (docs/multinode.md).
// Each test runs under withLoad (`stress-ng --cpu 2`, ended by its PID) and
// asserts outcomes only, never times: a failure loses nothing acknowledged.
// 1. A pool flush sent to node 2 for a pool homed on node 1 is forwarded to
//    the home: a 204 means every idle browser of the pool was replaced, and
//    the new ones load the saved profile (a value saved before the flush is
//    still there). A flush while the home is down (killed, not yet swept)
//    answers 503, never a 2xx for a flush that did not happen; once the
//    sweep moved the pool, a flush through the survivor works again.
// 2. DELETE of an auth connection sent to node 2 while its login flow awaits
//    input on node 1: 204, then the connection is gone on both nodes and the
//    flow's browser ended on node 1 (never a 204 that leaves the flow).
// 3. A node restarts (same name) while another node sweeps its earlier run
//    (the sweeper stalled after its commit, BROWSERD_TEST_SWEEP_STALL_NODE):
//    the restarted node serves new work at once, though the records of its
//    earlier run are not ended yet (its login flows no longer count against
//    the organization's flows: their node is dead; before, a login on the
//    restarted node was 429 until they ended); the earlier records end once,
//    failed node_lost; nothing acknowledged after the restart is ended.
//   TEST_DIR=tests/cluster BROWSERD_BIN=build/browserd node tests/blackbox/run.mjs '^46_'
import { chromium } from '../compat/node_modules/playwright-core/index.mjs';
import { request, startProfileSite, assert, eq, waitFor, withLoad } from '../blackbox/lib.mjs';
import { startCluster, startLoginSite, startOrphanWork, orphansEnded, getter, processesUnder } from './lib.mjs';

const LOAD = { stressors: ['--cpu', '2'], workers: 2, seconds: 170 };
const sqlStr = (s) => `'${String(s).replace(/'/g, "''")}'`;
const api = (n, m, p, key, body) => request(n.base, m, p, { key, body });

// The ids of a pool's browsers still active (idle or acquired).
const poolBrowsers = async (c, id) => (await c.psql(
  `SELECT id FROM sessions WHERE status = 'active' AND data::jsonb->'pool'->>'id' = ${sqlStr(id)} ORDER BY id`)).map((r) => r[0]);

// What a page of `site` reads back in the browser at cdp (cookie, localStorage).
async function savedState(cdp, site) {
  const pw = await chromium.connectOverCDP(cdp);
  try {
    const page = pw.contexts()[0].pages()[0] || await pw.contexts()[0].newPage();
    await page.goto(`${site.url}/read`);
    return await page.evaluate(() => ({ cookie: document.cookie, ls: localStorage.getItem('saved') }));
  } finally { await pw.close(); }
}

export const tests = [
  {
    name: 'issue h13.1: on a busy host, a pool flush sent to node 2 for a pool homed on node 1 replaces every idle browser, which loads the saved profile; with node 1 down the flush is 503 (never 2xx), and through the survivor once the sweep moved the pool',
    timeout: 180000,
    fn: async () => {
      const site = await startProfileSite();
      try {
        await withLoad(async () => {
          const c = await startCluster({ nodes: 2, env: { BROWSERD_NODE_LEASE_MS: '4000' }, args: site.allow });
          c.expectLoss();
          const [n1, n2] = c.nodes;
          try {
            // A pool of 2 homed on node 1, on a profile that holds nothing yet.
            eq((await api(n1, 'POST', '/profiles', c.key, { name: 'h13-prof' })).status, 200, 'profile');
            const p = await api(n1, 'POST', '/browser_pools', c.key, { size: 2, headless: true, fill_rate_per_minute: 6000, profile: { name: 'h13-prof' } });
            eq(p.status, 200, `pool: ${p.text}`);
            const id = p.json.id;
            const filled = (what, not = []) => waitFor(async () => {
              const ids = await poolBrowsers(c, id);
              return ids.length === 2 && ids.every((x) => !not.includes(x)) ? ids : null;
            }, what, 90000, 300);
            const first = await filled('the pool fills on node 1');
            // Then the profile is saved (a cookie, a localStorage value) by a
            // session on node 2, as a re-authentication would: the pool's
            // browsers hold the profile as it was.
            const b = await api(n2, 'POST', '/browsers', c.key, { headless: true, profile: { name: 'h13-prof', save_changes: true } });
            eq(b.status, 200, `session: ${b.text}`);
            const pw = await chromium.connectOverCDP(b.json.cdp_ws_url);
            try {
              const page = pw.contexts()[0].pages()[0] || await pw.contexts()[0].newPage();
              await page.goto(`${site.url}/set`);
              await page.waitForFunction(() => localStorage.getItem('saved') === 'ls-value', null, { timeout: 30000 });
            } finally { await pw.close(); }
            eq((await api(n1, 'DELETE', `/browsers/${b.json.session_id}`, c.key)).status, 204, 'the session ends and saves the profile');
            // One browser goes (released without reuse), so that the pool is
            // launching its replacement when the flush comes.
            const out = await api(n2, 'POST', `/browser_pools/${id}/acquire`, c.key, {});
            eq(out.status, 200, `acquire: ${out.text}`);
            eq((await api(n2, 'POST', `/browser_pools/${id}/release`, c.key, { session_id: out.json.session_id, reuse: false })).status, 204, 'release');
            const before = await waitFor(async () => {
              const ids = await poolBrowsers(c, id);
              return ids.length === 2 && !ids.includes(out.json.session_id) ? ids : null;
            }, 'the pool launches a replacement', 90000, 50);
            assert(before.some((x) => !first.includes(x)), `a replacement: ${first} -> ${before}`);
            const flush = await api(n2, 'POST', `/browser_pools/${id}/flush`, c.key, {});
            eq(flush.status, 204, `flush sent to node 2: ${flush.text}`);
            // Acknowledged: every browser of the pool from before the flush
            // ends "pool flushed", the one being launched at the flush too (it
            // was handed out later with what it had loaded on the old binary).
            const ends = await waitFor(async () => {
              const rows = await c.psql(`SELECT id, status, end_reason FROM sessions WHERE id IN (${before.map(sqlStr).join(',')}) ORDER BY id`);
              return rows.every((r) => r[1] !== 'active') ? rows : null;
            }, `the browsers from before the flush end (${before})`, 60000, 300).catch(async (e) => {
              e.message += `: ${JSON.stringify(await c.psql(`SELECT id, status, end_reason FROM sessions WHERE id IN (${before.map(sqlStr).join(',')})`))}`;
              throw e;
            });
            eq(ends.map((r) => r[2]), ['pool flushed', 'pool flushed'], `their end: ${JSON.stringify(ends)}`);
            const after = await filled('the pool refills', before);
            // A browser handed out after the flush loads the saved profile.
            const got = await api(n2, 'POST', `/browser_pools/${id}/acquire`, c.key, {});
            eq(got.status, 200, `acquire through node 2: ${got.text}`);
            assert(after.includes(got.json.session_id), `a browser launched after the flush: ${got.json.session_id} of ${after}`);
            const st = await savedState(got.json.cdp_ws_url, site);
            assert(st.cookie.includes('saved=cookie-value'), `the saved cookie after the flush: ${JSON.stringify(st)}`);
            eq(st.ls, 'ls-value', 'the saved localStorage value after the flush');
            eq((await api(n2, 'POST', `/browser_pools/${id}/release`, c.key, { session_id: got.json.session_id, reuse: false })).status, 204, 'release');
            // The home is down and not yet swept: the flush cannot happen, and
            // is not acknowledged (docs/multinode.md: 503 while the node is not up).
            await n1.kill9();
            const down = await api(n2, 'POST', `/browser_pools/${id}/flush`, c.key, {});
            const [row] = await c.psql(`SELECT n.name, n.state FROM pools p JOIN nodes n ON n.id = p.node_id WHERE p.id = ${sqlStr(id)}`);
            if (row.join(' ') === 'n1 up') eq(down.status, 503, `a flush while the pool's home is down: ${down.text}`);
            else assert(down.status === 204 || down.status === 503, `a flush around the sweep: ${down.status} ${down.text}`);
            // The sweep moves the pool to node 2, which fills it; a flush there
            // replaces those browsers in turn.
            await waitFor(async () => (await c.psql(`SELECT n.name FROM pools p JOIN nodes n ON n.id = p.node_id WHERE p.id = ${sqlStr(id)}`))[0][0] === 'n2',
              'the sweep moves the pool to node 2', 60000, 300);
            const moved = await filled('the pool refills on node 2', after);
            eq((await api(n2, 'POST', `/browser_pools/${id}/flush`, c.key, {})).status, 204, 'a flush on the new home');
            await waitFor(async () => (await c.psql(`SELECT status FROM sessions WHERE id IN (${moved.map(sqlStr).join(',')})`)).every((r) => r[0] !== 'active'),
              'the browsers on node 2 from before that flush end', 60000, 300);
            const again = await filled('the pool refills on node 2 again', moved);
            assert(again.every((x) => !moved.includes(x)), `new browsers: ${moved} -> ${again}`);
            eq((await api(n2, 'DELETE', `/browser_pools/${id}`, c.key)).status, 204, 'delete the pool');
          } catch (e) {
            e.message += `\n${c.log.split('\n').filter((l) => /pool|error|warn/i.test(l)).slice(-40).join('\n')}`;
            throw e;
          } finally {
            await c.stop();
          }
        }, LOAD);
      } finally {
        site.close();
      }
    },
  },
  {
    name: 'issue h13.2: on a busy host, DELETE of an auth connection sent to node 2 while its login flow awaits input on node 1: 204, then the connection is gone on both nodes and the flow\'s browser ended on node 1',
    timeout: 150000,
    fn: async () => {
      const web = await startLoginSite();
      try {
        await withLoad(async () => {
          const c = await startCluster({ nodes: 2, args: web.allow });
          const [n1, n2] = c.nodes;
          try {
            const conn = await api(n1, 'POST', '/auth/connections', c.key, { domain: '127.0.0.1', profile_name: 'h13-del', login_url: `${web.url}/` });
            assert(conn.status < 300, `auth connection: ${conn.status} ${conn.text}`);
            const id = conn.json.id;
            eq((await api(n1, 'POST', `/auth/connections/${id}/login`, c.key, {})).status, 200, 'login on node 1');
            const sid = await waitFor(async () => {
              const r = (await api(n2, 'GET', `/auth/connections/${id}`, c.key)).json;
              assert(r.flow_status === 'IN_PROGRESS', `the flow ended: ${JSON.stringify(r)}`);
              return r.flow_step === 'AWAITING_INPUT' ? r.browser_session_id : null;
            }, 'the flow awaits input', 90000, 200);
            eq(await c.ownerOf(sid), 'n1', 'the flow\'s browser runs on node 1');
            const del = await api(n2, 'DELETE', `/auth/connections/${id}`, c.key);
            eq(del.status, 204, `delete sent to node 2: ${del.text}`);
            for (const n of [n1, n2]) {
              eq((await api(n, 'GET', `/auth/connections/${id}`, c.key)).status, 404, `the connection on node ${n.name}`);
              eq((await api(n, 'POST', `/auth/connections/${id}/submit`, c.key, { field_values: { email: 'x@example.com' } })).status, 404, `a submit on node ${n.name}`);
            }
            await waitFor(async () => (await c.psql(`SELECT status FROM sessions WHERE id = ${sqlStr(sid)}`))[0][0] !== 'active',
              'the flow\'s browser ends', 60000, 300);
            await waitFor(() => processesUnder(n1.dir).length === 0, 'no browser process left on node 1', 30000, 200);
            eq((await c.psql(`SELECT count(*) FROM auth_connections WHERE id = ${sqlStr(id)}`))[0][0], '0', 'the row is gone');
          } finally {
            await c.stop();
          }
        }, LOAD);
      } finally {
        web.close();
      }
    },
  },
  {
    name: 'issue h13.3: on a busy host, node 1 restarts under its name while node 2, which swept its earlier run, stalls before ending its records: the restarted node takes a login at once (429 before: the dead run\'s flows were counted), its earlier records end once (failed node_lost), and none of its new work is ended',
    timeout: 180000,
    fn: async () => {
      const web = await startLoginSite();
      try {
        await withLoad(async () => {
          const c = await startCluster({
            nodes: 2, args: web.allow,
            env: { BROWSERD_NODE_LEASE_MS: '6000', BROWSERD_TEST_SWEEP_STALL_NODE: 'n1' },
          });
          c.expectLoss();
          const [n1, n2] = c.nodes;
          const get = getter(c, n2);
          const awaiting = (id, via) => waitFor(async () => {
            const r = await getter(c, via)(`/auth/connections/${id}`);
            assert(r.flow_status === 'IN_PROGRESS', `the flow of ${id} ended: ${JSON.stringify(r)}`);
            return r.flow_step === 'AWAITING_INPUT';
          }, `the login flow of ${id} awaits input`, 90000, 200);
          const newConn = async (n, name) => {
            const r = await api(n, 'POST', '/auth/connections', c.key, { domain: '127.0.0.1', profile_name: name, login_url: `${web.url}/` });
            assert(r.status < 300, `auth connection: ${r.status} ${r.text}`);
            return r.json.id;
          };
          try {
            // Node 1's first run: an async invocation and the organization's
            // two login flows (LIM_AUTHCONN_FLOWS_PER_ORG), awaiting input.
            const work = await startOrphanWork(c, n1, n2, web);
            const second = await newConn(n1, 'h13-second');
            eq((await api(n1, 'POST', `/auth/connections/${second}/login`, c.key, {})).status, 200, 'a second login on node 1');
            await awaiting(second, n2);
            await n1.kill9();
            await waitFor(() => /test switch: stalling after the sweep of node n1 /.test(n2.log), 'node 2 sweeps node 1 and stalls', 60000, 100);
            // The restart, while node 2 holds the claim on the earlier run's records.
            await n1.start();
            const pending = await get(`/auth/connections/${second}`);
            eq(pending.flow_status, 'IN_PROGRESS', 'the earlier run\'s flows are not ended yet (node 2 stalls)');
            // New work on the restarted node, acknowledged.
            const third = await newConn(n1, 'h13-third');
            const login = await api(n1, 'POST', `/auth/connections/${third}/login`, c.key, {});
            eq(login.status, 200, `a login on the restarted node while its earlier run's flows wait to be ended: ${login.text}`);
            await awaiting(third, n1);
            const inv = await api(n1, 'POST', '/invocations', c.key, { app_name: 'orphan-app', action_name: 'sleep', version: '1', async: true, async_timeout_seconds: 600 });
            eq(inv.status, 202, `async invoke on the restarted node: ${inv.text}`);
            await waitFor(async () => (await get(`/invocations/${inv.json.id}`)).status === 'running', 'the new invocation runs', 60000, 200);
            // The stalled sweeper dies; the restarted node takes the claim
            // once it runs out and ends the earlier run's records, once each.
            await n2.kill9();
            const problems = await orphansEnded(c, n1, work, 'node_lost', 90000);
            problems.push(...await orphansEnded(c, n1, { invocation: null, connection: second }, 'node_lost', 30000));
            assert(problems.length === 0, `${problems.join('\n')}\n${n1.log.split('\n').filter((l) => /cluster:/.test(l)).join('\n')}`);
            await waitFor(() => /its sweeper did not end the records it left/.test(n1.log), 'node 1 took the claim', 30000, 100);
            // Nothing acknowledged after the restart was ended.
            const now3 = await getter(c, n1)(`/auth/connections/${third}`);
            eq([now3.flow_status, now3.flow_step], ['IN_PROGRESS', 'AWAITING_INPUT'], 'the login flow started after the restart');
            eq((await getter(c, n1)(`/invocations/${inv.json.id}`)).status, 'running', 'the invocation started after the restart');
          } finally {
            await c.stop();
          }
        }, LOAD);
      } finally {
        web.close();
      }
    },
  },
];
