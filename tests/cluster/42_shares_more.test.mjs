// Issue h11.3: two more per-organization caps that hold across a cluster's
// nodes. Both were counted in each node's memory, so an organization whose
// requests reached N nodes held N times its share of a resource every node
// uses together:
// 1. calls to the search provider in flight (LIM_SEARCH_INFLIGHT_PER_ORG, 4):
//    the provider's rate limit and bill are shared;
// 2. audit export chunks in progress (LIM_AUDIT_EXPORTS_PER_ORG, 2): each is
//    a read of the one database.
// Each unit is now a row (org_slots) naming its node, counted under the
// org's row lock; a dead node's rows go when the sweep ends it.
//   TEST_DIR=tests/cluster BROWSERD_BIN=build/browserd node tests/blackbox/run.mjs '^42_shares_more'
import { execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import { request, assert, eq, waitFor, startSearchProvider, newOrg } from '../blackbox/lib.mjs';
import { startCluster } from './lib.mjs';

const SEARCH_PER_ORG = 4;
const EXPORTS_PER_ORG = 2;

// The answer to req, or 'waited' when held() comes true first (polled): a
// request that should have been refused at once but was let through (and is
// then held) fails the test instead of hanging it. The poll ends with req.
const refusedOrHeld = (req, held) => {
  let done = false;
  const answer = req.finally(() => { done = true; });
  const poll = (async () => {
    while (!done) {
      if (await held()) return 'waited';
      await new Promise((r) => setTimeout(r, 100));
    }
    return answer;
  })();
  return Promise.race([answer, poll]);
};

export const tests = [
  {
    name: 'issue h11.3: an organization holds at most 4 search provider calls across the cluster: with 4 held on node 1 a 5th on node 2 is 429 with Retry-After while another organization is served; the slots of node 1 come back when it dies (kill -9)',
    timeout: 120000,
    fn: async () => {
      const up = await startSearchProvider({ hold: 'hang' });
      const { held, release } = up;
      const providers = [{ name: 'slow', protocol: 'searxng', endpoint: `${up.url}/`, timeout_ms: 60000 }];
      const c = await startCluster({
        nodes: 2,
        env: { BROWSERD_SEARCH_PROVIDERS: JSON.stringify(providers), BROWSERD_NODE_LEASE_MS: '3000' },
      });
      c.expectLoss();
      const [n1, n2] = c.nodes;
      const search = (node, key, query) => request(node.base, 'POST', '/search', { key, body: { query, timeout_ms: 60000 } });
      try {
        const { key: other } = await newOrg({ base: c.base }, c.adminToken, { name: 'other' });
        const calls = [];
        for (let i = 0; i < SEARCH_PER_ORG; i++) calls.push(search(n1, c.key, 'hang').catch((e) => ({ status: 0, text: String(e) })));
        await waitFor(() => held.length === SEARCH_PER_ORG, `the ${SEARCH_PER_ORG} calls on node 1 reach the provider`, 60000, 100);
        const fifth = await refusedOrHeld(search(n2, c.key, 'hang'), () => held.length > SEARCH_PER_ORG);
        assert(fifth !== 'waited', 'a 5th call on node 2 reached the provider (the old binary counted each node\'s calls alone)');
        eq(fifth.status, 429, `a 5th call on node 2: ${fifth.text}`);
        eq(fifth.json.code, 'rate_limited', fifth.text);
        assert(Number(fifth.headers['retry-after']) >= 1, `Retry-After: ${fifth.headers['retry-after']}`);
        assert(/across the cluster/.test(fifth.json.message), `the message says the share is the cluster's: ${fifth.text}`);
        const theirs = await search(n2, other, 'x');
        eq(theirs.status, 200, `another organization searches on node 2: ${theirs.text}`);
        // Node 1 dies holding its 4: once the sweep ends it, its slots are free.
        await n1.kill9();
        release();
        let last;
        await waitFor(async () => {
          last = await search(n2, c.key, 'x');
          return last.status !== 429;
        }, 'the dead node\'s slots come back', 60000, 250);
        eq(last.status, 200, `a search on node 2 once node 1 is swept: ${last.text}`);
        const left = await c.psql('SELECT count(*) FROM org_slots');
        eq(left[0][0], '0', 'no slot row is left (the dead node\'s went, node 2\'s were given back)');
        await Promise.all(calls);
      } finally {
        release();
        await c.stop();
        up.close();
      }
    },
  },
  {
    name: 'issue h11.3: an organization builds at most 2 audit export chunks across the cluster: with 2 in progress on node 1 (their read held by a table lock) a 3rd on node 2 is 429 with Retry-After while another organization\'s is built',
    timeout: 120000,
    fn: async () => {
      const c = await startCluster({ nodes: 2 });
      const [n1, n2] = c.nodes;
      const window = () => `start=${encodeURIComponent(new Date(Date.now() - 3600e3).toISOString())}`
        + `&end=${encodeURIComponent(new Date(Date.now() + 3600e3).toISOString())}`;
      const chunk = (node, key) => request(node.base, 'GET', `/audit-logs/export/chunk?${window()}&format=jsonl`, { key });
      // Export reads waiting for the lock: counted by PostgreSQL, the same on
      // the old binary and the new.
      const waiting = async () => Number((await c.psql(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        + " AND query LIKE 'SELECT%FROM audit_logs%'"))[0][0]);
      let locker = null;
      const unlock = () => {
        if (!locker) return;
        try { locker.stdin.end('COMMIT;\n'); } catch { /* gone */ }
        locker = null;
      };
      try {
        const { key: other } = await newOrg({ base: c.base }, c.adminToken, { name: 'other' });
        eq((await chunk(n1, c.key)).status, 200, 'an export chunk while nothing holds it');
        // A transaction that holds the audit table: every read of it waits.
        let bindir;
        try { bindir = execFileSync('pg_config', ['--bindir']).toString().trim(); } catch { bindir = '/usr/lib/postgresql/15/bin'; }
        locker = spawn(join(bindir, 'psql'), ['-X', '-q', '-A', '-t', '-d', c.pgUrl], { stdio: ['pipe', 'pipe', 'pipe'] });
        let out = '';
        locker.stdout.on('data', (d) => { out += d; });
        locker.stdin.write("BEGIN; LOCK TABLE audit_logs IN ACCESS EXCLUSIVE MODE; SELECT 'locked';\n");
        await waitFor(() => out.includes('locked'), 'the audit table is locked', 30000, 50);
        const mine = [];
        for (let i = 0; i < EXPORTS_PER_ORG; i++) mine.push(chunk(n1, c.key));
        await waitFor(async () => (await waiting()) === EXPORTS_PER_ORG, `the ${EXPORTS_PER_ORG} chunks on node 1 wait for their read`, 60000, 100);
        const third = await refusedOrHeld(chunk(n2, c.key), async () => (await waiting()) > EXPORTS_PER_ORG);
        assert(third !== 'waited', 'a 3rd chunk on node 2 read the database (the old binary counted each node\'s chunks alone)');
        eq(third.status, 429, `a 3rd chunk on node 2: ${third.text}`);
        eq(third.json.code, 'rate_limited', third.text);
        assert(Number(third.headers['retry-after']) >= 1, `Retry-After: ${third.headers['retry-after']}`);
        assert(/across the cluster/.test(third.json.message), `the message says the share is the cluster's: ${third.text}`);
        // Another organization is not refused: its read waits for the lock like the others.
        const theirs = chunk(n2, other);
        await waitFor(async () => (await waiting()) === EXPORTS_PER_ORG + 1, 'another organization\'s chunk reads', 60000, 100);
        unlock();
        eq((await theirs).status, 200, 'another organization\'s chunk');
        for (const r of await Promise.all(mine)) eq(r.status, 200, `a chunk on node 1: ${r.text}`);
        const again = await chunk(n2, c.key);
        eq(again.status, 200, `a chunk on node 2 once those ended: ${again.text}`);
        const left = await c.psql('SELECT count(*) FROM org_slots');
        eq(left[0][0], '0', 'every slot was given back');
      } finally {
        unlock();
        await c.stop();
      }
    },
  },
];
