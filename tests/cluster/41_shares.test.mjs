// Issue h11: per-tenant shares that hold across a cluster's nodes, and the
// records a dead node leaves.
// 1. An organization's login flows (LIM_AUTHCONN_FLOWS_PER_ORG, 2) were
//    counted in each node's memory, so two nodes ran four: the cap is now
//    counted over the shared rows (flows IN_PROGRESS), under the org's lock.
// 2. A config registry analysis named no node, so one whose node died read
//    `running` forever: entries now store their node (never shown), and the
//    node that sweeps a dead one ends its analyses `failed` `node_lost`.
//   TEST_DIR=tests/cluster BROWSERD_BIN=build/browserd node tests/blackbox/run.mjs '^41_shares'
import { request, assert, eq, waitFor, startSite } from '../blackbox/lib.mjs';
import { startCluster, startLoginSite, getter } from './lib.mjs';

export const tests = [
  {
    name: 'issue h11.1: an organization runs at most 2 login flows across the cluster: with 2 running on node 1 a third login on node 2 is 429 with Retry-After, and 200 once one of them is gone',
    timeout: 120000,
    fn: async () => {
      const web = await startLoginSite();
      const c = await startCluster({ nodes: 2, args: web.allow });
      const [n1, n2] = c.nodes;
      try {
        const ids = [];
        for (let i = 0; i < 3; i++) {
          const conn = await request(n1.base, 'POST', '/auth/connections', {
            key: c.key, body: { domain: '127.0.0.1', profile_name: `share-${i}`, login_url: `${web.url}/` },
          });
          assert(conn.status < 300, `auth connection ${i}: ${conn.status} ${conn.text}`);
          ids.push(conn.json.id);
        }
        for (const id of ids.slice(0, 2)) {
          const login = await request(n1.base, 'POST', `/auth/connections/${id}/login`, { key: c.key, body: {} });
          eq(login.status, 200, `login of ${id} on node 1: ${login.text}`);
        }
        for (const id of ids.slice(0, 2)) {
          await waitFor(async () => {
            const r = await request(n2.base, 'GET', `/auth/connections/${id}`, { key: c.key });
            assert(r.json.flow_status === 'IN_PROGRESS', `the flow of ${id} ended: ${r.text}`);
            return r.json.flow_step === 'AWAITING_INPUT';
          }, `the flow of ${id} awaits input`, 60000, 200);
        }
        const third = await request(n2.base, 'POST', `/auth/connections/${ids[2]}/login`, { key: c.key, body: {} });
        eq(third.status, 429, `a third login on node 2 (200 on the old binary: each node counted its own): ${third.text}`);
        assert(Number(third.headers['retry-after']) > 0, `Retry-After: ${third.headers['retry-after']}`);
        assert(/across the cluster/.test(third.json.message), `the message says the cap is the cluster's: ${third.text}`);
        // A second login of a connection whose flow runs on node 1, sent to node 2: that one flow.
        const again = await request(n2.base, 'POST', `/auth/connections/${ids[0]}/login`, { key: c.key, body: {} });
        eq(again.status, 409, `a second login of a running flow through node 2: ${again.text}`);
        // A connection deleted ends its flow and frees its slot on every node.
        const del = await request(n1.base, 'DELETE', `/auth/connections/${ids[0]}`, { key: c.key });
        eq(del.status, 204, `delete: ${del.text}`);
        let last;
        await waitFor(async () => {
          last = await request(n2.base, 'POST', `/auth/connections/${ids[2]}/login`, { key: c.key, body: {} });
          return last.status !== 429;
        }, 'the third login is taken once a slot is free', 30000, 250);
        eq(last.status, 200, `the third login on node 2: ${last.text}`);
      } finally {
        await c.stop();
        web.close();
      }
    },
  },
  {
    name: 'issue h11.2: kill -9 of node 1 while it runs a config registry analysis: once its lease ends, node 2 ends it (failed, failure.code node_lost) in the analysis and its domain entry, which name no node',
    timeout: 120000,
    fn: async () => {
      // A target that never answers: each candidate's visit waits its whole
      // time, so the analysis is still running when its node dies.
      const held = [];
      const web = await startSite((req, res) => { held.push(res); });
      const c = await startCluster({ nodes: 2, env: { BROWSERD_NODE_LEASE_MS: '3000' }, args: web.allow });
      c.expectLoss();
      const [n1, n2] = c.nodes;
      const get = getter(c, n2);
      try {
        const res = await request(n1.base, 'POST', '/config-registry/resolve', { key: c.key, body: { url: `${web.url}/` } });
        eq(res.status, 200, `resolve on node 1: ${res.text}`);
        const id = res.json.analysis && res.json.analysis.id;
        eq(res.json.analysis && res.json.analysis.status, 'running', `the analysis runs: ${res.text}`);
        await waitFor(() => held.length > 0, 'a candidate browser of node 1 visits the target', 60000, 200);

        await n1.kill9();

        let got;
        await waitFor(async () => {
          got = await get(`/config-registry/analyses/${id}`);
          return got.status !== 'running';
        }, 'node 2 ends the analysis (it stays running on the old binary)', 30000, 250);
        eq([got.status, got.failure && got.failure.code], ['failed', 'node_lost'], `the analysis: ${JSON.stringify(got)}`);
        assert(got.finished_at, `finished_at is set: ${JSON.stringify(got)}`);
        const entries = await get('/config-registry');
        const entry = entries.find((e) => e.analysis && e.analysis.id === id);
        assert(entry, `the domain's entry: ${JSON.stringify(entries)}`);
        eq([entry.analysis.status, entry.analysis.failure && entry.analysis.failure.code], ['failed', 'node_lost'], `the entry: ${JSON.stringify(entry)}`);
        const text = JSON.stringify([got, entries]);
        assert(!/node_id|"node"/.test(text), `no node is shown: ${text}`);
      } finally {
        for (const r of held) r.destroy();
        await c.stop();
        web.close();
      }
    },
  },
];
