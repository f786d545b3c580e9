// The audit log's per-organization bound (docs/telemetry.md "Audit logs",
// "Deviation: the newest entries per organization"; LIM_AUDIT_ROWS_PER_ORG):
// after each batch the writer deletes an organization's oldest entries past
// its bound, never another organization's. BROWSERD_AUDIT_ROWS_PER_ORG
// lowers the bound so that a test reaches it with a few requests. No
// Chromium: the changes are deletes of profiles that do not exist (404s,
// audited all the same).
import { startServer, request, assert, eq, waitFor, withServer, newOrg } from './lib.mjs';

const ADMIN = 'admin-token-for-audit-rows-tests';
const WINDOW = () => `start=${encodeURIComponent(new Date(Date.now() - 3600e3).toISOString())}` +
  `&end=${encodeURIComponent(new Date(Date.now() + 3600e3).toISOString())}`;

// The paths of key's organization's entries, newest first (one page of 100).
async function paths(s, key) {
  const r = await request(s.base, 'GET', `/audit-logs?${WINDOW()}&limit=100`, { key });
  eq(r.status, 200, `GET /audit-logs: ${r.text}`);
  return r.json.map((e) => e.path);
}

// n changes of key's organization, one after another: DELETE /profiles/<tag>-<i>.
async function changes(s, key, tag, n) {
  for (let i = 0; i < n; i++) {
    const r = await request(s.base, 'DELETE', `/profiles/${tag}-${i}`, { key });
    eq(r.status, 404, `delete ${tag}-${i}: ${r.text}`);
  }
}

export const tests = [
  {
    name: 'audit rows per org: with BROWSERD_AUDIT_ROWS_PER_ORG=50, an organization that made 80 changes lists its newest 50 only; another organization\'s 40 older entries are all kept',
    fn: () => withServer({ args: ['--admin-token', ADMIN], env: { BROWSERD_AUDIT_ROWS_PER_ORG: '50' } }, async (s) => {
      const a = await newOrg(s, ADMIN, { name: 'audit-rows-a' });
      const b = await newOrg(s, ADMIN, { name: 'audit-rows-b' });
      await changes(s, b.key, 'b', 40);
      await waitFor(async () => (await paths(s, b.key)).length === 40 || null, 'org B\'s 40 entries stored');
      await changes(s, a.key, 'a', 80);
      const want = Array.from({ length: 50 }, (_, i) => `/profiles/a-${79 - i}`);
      let got = [];
      await waitFor(async () => {
        got = await paths(s, a.key);
        return (got[0] === want[0] && got.length === 50) || null;
      }, 'org A listing its newest 50 entries only', 15000).catch((e) => {
        throw new Error(`${e.message}: org A lists ${got.length} entries, newest ${got[0]}, oldest ${got[got.length - 1]}`);
      });
      eq(JSON.stringify(got), JSON.stringify(want), 'org A: its newest 50, newest first');
      const gotB = await paths(s, b.key);
      eq(JSON.stringify(gotB), JSON.stringify(Array.from({ length: 40 }, (_, i) => `/profiles/b-${39 - i}`)), 'org B: all 40 entries');
    }),
  },
  {
    name: 'audit rows per org: BROWSERD_AUDIT_ROWS_PER_ORG outside 1..20000 (LIM_AUDIT_ROWS_PER_ORG: it can only lower the bound) stops the server at start naming the variable',
    fn: async () => {
      for (const v of ['0', '20001', 'x']) {
        let msg = '';
        try {
          const s = await startServer({ env: { BROWSERD_AUDIT_ROWS_PER_ORG: v } });
          await s.stop(); s.cleanup();
        } catch (e) { msg = String(e.message); }
        assert(/server exited 2/.test(msg), `BROWSERD_AUDIT_ROWS_PER_ORG=${v}: exit 2: ${msg.slice(0, 300) || 'the server started'}`);
        assert(msg.includes('BROWSERD_AUDIT_ROWS_PER_ORG') && msg.includes('from 1 to 20000'), `names the variable and the range: ${msg.slice(0, 300)}`);
      }
    },
  },
];
