// Issue h7.2: the audit spool when the store refuses (docs/telemetry.md
// "Audit logs", docs/operator.md BROWSERD_AUDIT_SPOOL_MB and the test switch
// BROWSERD_TEST_AUDIT_OUTAGE_FILE). While the audit log's store refuses
// batches the spool (<data>/audit-spool.*) holds their entries; it is capped,
// with a share per organization: past its share a change is refused 503
// (Retry-After, naming the audit spool) before it acts, never done and left
// unaudited; another organization still changes things; once the store is
// back the spool drains and every acknowledged change has its entry once.
// No Chromium: profiles are the changes.
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, request, assert, eq, isError, newOrg, waitFor } from './lib.mjs';

const WINDOW = () => `start=${encodeURIComponent(new Date(Date.now() - 3600e3).toISOString())}` +
  `&end=${encodeURIComponent(new Date(Date.now() + 3600e3).toISOString())}`;

// Every audit entry of key's organization (all pages).
async function allEntries(s, key) {
  const out = [];
  let token = '';
  for (;;) {
    const r = await request(s.base, 'GET', `/audit-logs?${WINDOW()}&limit=100${token ? `&page_token=${token}` : ''}`, { key });
    eq(r.status, 200, `GET /audit-logs: ${r.text}`);
    out.push(...r.json);
    token = r.headers['x-next-page-token'];
    if (!token) return out;
  }
}

// A change (a profile named name: created, or 409 when it exists) whose
// entry is large (a 900-byte User-Agent, stored whole) and tells itself
// apart (tag starts the User-Agent).
const change = (s, key, tag, name = tag) => request(s.base, 'POST', '/profiles', {
  key, body: { name }, headers: { 'user-agent': `${tag}-${'u'.repeat(900)}` },
});

export const tests = [
  {
    name: 'issue h7.2: while the audit store refuses, an organization past its share of the audit spool gets 503 naming the spool before its change acts; another organization still changes things; a flood of failed authentications grows it by at most the operator\'s share; healed, the spool drains and every acknowledged change has its entry once',
    timeout: 90000,
    fn: async () => {
      const tmp = mkdtempSync(join(tmpdir(), 'browserd-outage-'));
      const outage = join(tmp, 'outage');
      const s = await startServer({ env: { BROWSERD_ADMIN_TOKEN: 'adm', BROWSERD_AUDIT_SPOOL_MB: '1', BROWSERD_TEST_AUDIT_OUTAGE_FILE: outage } });
      try {
        const a = await newOrg(s, 'adm', { name: 'bursty' });
        const b = await newOrg(s, 'adm', { name: 'quiet' });
        writeFileSync(outage, '');
        // Org a's share is 1 MiB / 8 = 128 KiB of records of about 1.2 KB.
        const acked = [];
        let refused = null;
        for (let i = 0; i < 400 && !refused; i++) {
          // The first creates profile "kept"; the others are 409s, each an
          // acknowledged call with its entry.
          const tag = `a${i}`;
          const r = await change(s, a.key, tag, 'kept');
          if (r.status === 503) refused = { r, tag };
          else { assert(r.status < 500, `change ${tag}: ${r.status} ${r.text}`); acked.push(tag); }
        }
        assert(refused, `no 503 after ${acked.length} changes during the outage`);
        isError(refused.r, 503, 'audit_spool_full');
        assert(Number(refused.r.headers['retry-after']) >= 1, `Retry-After ${refused.r.headers['retry-after']}`);
        assert(/audit spool/.test(refused.r.json.message), refused.r.json.message);
        assert(acked.length >= 50, `the share took ${acked.length} changes`);
        // Refused before it acts: a create of a new profile is refused too,
        // and no profile of that name exists.
        isError(await change(s, a.key, 'afresh'), 503, 'audit_spool_full');
        eq((await request(s.base, 'GET', '/profiles/afresh', { key: a.key })).status, 404, 'the refused change did nothing');
        // Another organization is not held up by a's burst.
        const other = await change(s, b.key, 'b0');
        assert(other.status >= 200 && other.status < 300, `another organization's change: ${other.text}`);
        // Failed authentications (an unknown key: the operator's share) stop
        // being kept once that share is full: a flood of them grows the spool
        // by at most the share (1 MiB / 8) and a record.
        const spooled = () => ['0', '1'].reduce((n, i) => n + statSync(join(s.dir, `audit-spool.${i}`)).size, 0);
        const before = spooled();
        for (let i = 0; i < 250; i++) {
          const r = await request(s.base, 'POST', '/profiles', { key: 'sk_not_a_key', body: { name: 'x' }, headers: { 'user-agent': 'x'.repeat(1000) } });
          assert(r.status === 401 || r.status === 429, `a bad key: ${r.status} ${r.text}`);
        }
        const grew = spooled() - before;
        assert(grew <= 128 * 1024 + 16 * 1024, `the spool grew by ${grew} bytes for failed authentications`);
        // Healed: the spool drains by itself, and a may change things again.
        rmSync(outage);
        const again = await waitFor(async () => {
          const r = await change(s, a.key, 'aafter', 'kept');
          return r.status !== 503 ? r : null;
        }, 'the spool to drain once the store accepts again', 30000, 250);
        eq(again.status, 409, again.text);
        acked.push('aafter');
        const got = await waitFor(async () => {
          const es = (await allEntries(s, a.key)).filter((e) => e.method === 'POST' && e.path === '/profiles');
          return es.length >= acked.length ? es : null;
        }, 'every acknowledged entry stored', 20000, 250);
        const tags = got.map((e) => e.user_agent.split('-')[0]);
        for (const t of acked) eq(tags.filter((x) => x === t).length, 1, `entry of ${t}`);
        for (const t of [refused.tag, 'afresh']) eq(tags.filter((x) => x === t).length, 0, `no entry of the refused change ${t}`);
        const bs = (await allEntries(s, b.key)).filter((e) => e.user_agent.startsWith('b0-'));
        eq(bs.length, 1, 'the other organization\'s entry');
      } finally { await s.stop(); s.cleanup(); rmSync(tmp, { recursive: true, force: true }); }
    },
  },
];
