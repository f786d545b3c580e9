// Issue 33.4 across nodes: a project's max_concurrent_sessions, set through
// one node, holds the project's sessions and pool browsers on every node of
// a cluster sharing one PostgreSQL (the store admits them under the org's row
// lock, as the organization's own limit).
//   TEST_DIR=tests/cluster BROWSERD_BIN=build/browserd node tests/blackbox/run.mjs '^issue 33.4'
import { request, assert, eq, isError } from '../blackbox/lib.mjs';
import { startCluster } from './lib.mjs';

const api = (base, method, path, body, key, headers) => request(base, method, path, { key, body, headers });
const P = { 'X-Kernel-Project': 'capped' };

export const tests = [
  {
    name: 'issue 33.4: a project\'s max_concurrent_sessions 2 set on node 1 holds 6 concurrent creates over 2 nodes to exactly 2 x 200 and 4 x 429, and counts a pool made on node 2 with the sessions of node 1',
    timeout: 120000,
    fn: async () => {
      const c = await startCluster({ nodes: 2 });
      const [n1, n2] = c.nodes;
      let failed;
      try {
        const o = await api(c.base, 'POST', '/admin/orgs', { name: 'proj-limits', plan: 'enterprise' }, c.adminToken);
        eq(o.status, 201, `create org: ${o.text}`);
        const k = await api(c.base, 'POST', `/admin/orgs/${o.json.id}/api_keys`, { name: 'k' }, c.adminToken);
        eq(k.status, 201, `create key: ${k.text}`);
        const key = k.json.key;
        eq((await api(n2.base, 'POST', '/org/projects', { name: 'capped' }, key)).status, 200, 'create project');
        const set = await api(n1.base, 'PATCH', '/org/projects/capped/limits', { max_concurrent_sessions: 2 }, key);
        eq(set.status, 200, `set the cap on node 1: ${set.text}`);
        eq((await api(n2.base, 'GET', '/org/projects/capped/limits', undefined, key)).json.max_concurrent_sessions, 2, 'node 2 reads it');

        const rs = await Promise.all(Array.from({ length: 6 }, (_, i) =>
          api([n1, n2][i % 2].base, 'POST', '/browsers', { headless: true }, key, P)));
        const ok = rs.filter((r) => r.status === 200);
        const limited = rs.filter((r) => r.status === 429);
        eq([ok.length, limited.length], [2, 4], `statuses ${JSON.stringify(rs.map((r) => r.status))}`);
        for (const r of limited) {
          isError(r, 429, 'rate_limited');
          assert(r.headers['retry-after'], '429 carries Retry-After');
        }
        // A pool on node 2 does not fit beside the 2 sessions.
        isError(await api(n2.base, 'POST', '/browser_pools', { size: 1, headless: true, fill_rate_per_minute: 0 }, key, P), 403, 'pool_limit_exceeded');
        eq((await api(n1.base, 'DELETE', `/browsers/${ok[0].json.session_id}`, undefined, key, P)).status, 204, 'free one slot');
        const pool = await api(n2.base, 'POST', '/browser_pools', { size: 1, headless: true, fill_rate_per_minute: 0 }, key, P);
        eq(pool.status, 200, `the pool takes the freed slot: ${pool.text}`);
        // 1 session + a pool of 1 = 2: node 1 refuses the next create.
        isError(await api(n1.base, 'POST', '/browsers', { headless: true }, key, P), 429, 'rate_limited');
        eq((await api(n1.base, 'DELETE', `/browser_pools/${pool.json.id}`, { force: true }, key, P)).status, 204, 'delete the pool');
        eq((await api(n2.base, 'DELETE', `/browsers/${ok[1].json.session_id}`, undefined, key, P)).status, 204, 'delete the session');
      } catch (e) { failed = e; }
      try { await c.stop(); } catch (e) { if (!failed) failed = e; }
      if (failed) throw failed;
    },
  },
];
