// Issue h7.3: the audit queue's share per organization (LIM_AUDIT_QUEUE_PER_ORG,
// 2048 entries; docs/telemetry.md "Audit logs"). A change holds its entry's
// place in the queue from admission, before it acts: with its organization's
// share queued or held the change is refused 429 (audit_queue_full,
// Retry-After) and does nothing, so no change that acted loses its entry.
// The test switch BROWSERD_TEST_AUDIT_HOLD_FILE (docs/operator.md) keeps the
// writer from taking the queue while one organization floods it, as a store
// slower than the changes would. No Chromium: profiles are the changes.
import http from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, request, assert, eq, isError, newOrg, waitFor } from './lib.mjs';

const SHARE = 2048; // LIM_AUDIT_QUEUE_PER_ORG (src/core/limits.h)
const WINDOW = () => `start=${encodeURIComponent(new Date(Date.now() - 3600e3).toISOString())}` +
  `&end=${encodeURIComponent(new Date(Date.now() + 3600e3).toISOString())}`;

// The User-Agent tags of key's organization's entries of profile creates
// answered 200 (all pages).
async function createTags(s, key) {
  const out = [];
  let token = '';
  for (;;) {
    const r = await request(s.base, 'GET', `/audit-logs?${WINDOW()}&limit=100${token ? `&page_token=${token}` : ''}`, { key });
    eq(r.status, 200, `GET /audit-logs: ${r.text}`);
    for (const e of r.json) if (e.method === 'POST' && e.path === '/profiles' && e.status === 200) out.push(e.user_agent);
    token = r.headers['x-next-page-token'];
    if (!token) return out;
  }
}

export const tests = [
  {
    name: 'issue h7.3: one organization flooding the audit queue past its share (writer held) gets 429 audit_queue_full before its change acts; every change answered 200 has its entry once, and another organization\'s changes all have theirs',
    timeout: 150000,
    fn: async () => {
      const tmp = mkdtempSync(join(tmpdir(), 'browserd-auditq-'));
      const hold = join(tmp, 'hold');
      const s = await startServer({ env: { BROWSERD_ADMIN_TOKEN: 'adm', BROWSERD_TEST_AUDIT_HOLD_FILE: hold } });
      const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
      try {
        const a = await newOrg(s, 'adm', { name: 'flooder', plan: 'enterprise' });
        const b = await newOrg(s, 'adm', { name: 'quiet', plan: 'enterprise' });
        writeFileSync(hold, '');
        const create = (key, tag) => request(s.base, 'POST', '/profiles', { key, agent, body: { name: tag }, headers: { 'user-agent': tag } });
        // More changes than the share, 32 at a time.
        const N = SHARE + 200;
        const acked = [];
        const refused = [];
        let next = 0;
        await Promise.all(Array.from({ length: 32 }, async () => {
          while (next < N) {
            const tag = `a${next++}`;
            const r = await create(a.key, tag);
            if (r.status === 200) acked.push(tag);
            else refused.push({ tag, r });
          }
        }));
        // The other organization's changes go through the while.
        const quiet = [];
        for (let i = 0; i < 20; i++) {
          const r = await create(b.key, `b${i}`);
          eq(r.status, 200, `the other organization's change ${i}: ${r.text}`);
          quiet.push(`b${i}`);
        }
        rmSync(hold);
        // Stored once the writer takes the queue again.
        let got;
        await waitFor(async () => (got = await createTags(s, a.key)).length >= acked.length, `the flooder's entries stored (${got && got.length} of ${acked.length})`, 30000, 250).catch(() => {});
        eq(got.length, acked.length, `every change answered 200 has its entry: ${got.length} entries for ${acked.length} changes`);
        eq([...got].sort(), [...acked].sort(), 'the entries are those of the changes answered 200, once each');
        eq((await createTags(s, b.key)).sort(), quiet.sort(), 'every entry of the other organization');
        // The refusals: 429 naming the queue, before the change acted.
        assert(refused.length > 0 && acked.length <= SHARE, `${acked.length} changes answered 200, ${refused.length} refused`);
        for (const { tag, r } of refused.slice(0, 20)) {
          isError(r, 429, 'audit_queue_full');
          assert(Number(r.headers['retry-after']) >= 1, `Retry-After ${r.headers['retry-after']}`);
          assert(/audit log's queue/.test(r.json.message), r.json.message);
          eq((await request(s.base, 'GET', `/profiles/${tag}`, { key: a.key })).status, 404, `the refused change ${tag} did nothing`);
        }
      } finally {
        agent.destroy();
        rmSync(tmp, { recursive: true, force: true });
        await s.stop();
        s.cleanup();
      }
    },
  },
];
