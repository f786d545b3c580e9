// Issue 33 item 7: "never loses an entry of an acknowledged change" — the
// audit spool (docs/telemetry.md "Audit logs"): an entry is written to
// <data>/audit-spool.* before its response is queued, and a new server
// stores what a crash left there before it serves. No Chromium: profiles
// are the changes.
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { startServer, request, assert, eq, ok2xx } from './lib.mjs';

const WINDOW = () => `start=${encodeURIComponent(new Date(Date.now() - 3600e3).toISOString())}` +
  `&end=${encodeURIComponent(new Date(Date.now() + 3600e3).toISOString())}`;

// The audit entries of key's organization, newest first (one page of 100).
async function entries(s, key) {
  const r = await request(s.base, 'GET', `/audit-logs?${WINDOW()}&limit=100`, { key });
  eq(r.status, 200, `GET /audit-logs: ${r.text}`);
  return r.json;
}

// Runs fn(s1, restart) on a server; restart() SIGKILLs nothing itself, it
// starts a second server on s1's data folder. Both end, the folder goes.
async function withRestart(fn) {
  const s1 = await startServer();
  let s2;
  try {
    await fn(s1, async () => { s2 = await startServer({ dataDir: s1.dir }); return s2; });
  } finally {
    await s1.stop();
    if (s2) await s2.stop();
    s1.cleanup();
  }
}

export const tests = [
  {
    name: 'issue 33.7: an acknowledged change\'s audit entry survives kill -9 of the server right after the response',
    timeout: 60000,
    fn: () => withRestart(async (s1, restart) => {
      const N = 50;
      const paths = [];
      for (let i = 0; i < N; i++) {
        const p = ok2xx(await request(s1.base, 'POST', '/profiles', { key: s1.key, body: { name: `dur${i}` } }), `create ${i}`);
        paths.push(p.id);
      }
      eq(await s1.kill9(), 'SIGKILL', 'killed by SIGKILL at once after the last 2xx');
      const s2 = await restart();
      const got = await entries(s2, s1.key);
      const creates = got.filter((e) => e.method === 'POST' && e.path === '/profiles' && e.status === 200);
      eq(creates.length, N, `every acknowledged create has its entry after the crash (${got.length} entries listed)`);
      const again = await entries(s2, s1.key);
      eq(again.length, got.length, 'the replay stored each entry once');
    }),
  },
  {
    name: 'issue 33.7: a torn last spool record (a crash inside its write) is skipped at start-up; the whole records before it are stored once',
    timeout: 60000,
    fn: () => withRestart(async (s1, restart) => {
      const ctx = ok2xx(await request(s1.base, 'GET', '/auth/context', { key: s1.key }), 'auth context');
      const org = ctx.organization?.id ?? ctx.org_id ?? ctx.authentication?.org_id;
      assert(typeof org === 'string' && org, `an organization id in /auth/context: ${JSON.stringify(ctx)}`);
      await s1.stop();
      const ts = Date.now() - 60e3;
      const rec = (id, path) => JSON.stringify({
        id, org, ts, method: 'DELETE', auth: 'api_key', service: 'profiles', status: 204, dur: 3,
        path, route: '/profiles/{id_or_name}', ip: '127.0.0.1', ua: 'spool-test', user: 'k', domain: 'h',
      });
      appendFileSync(join(s1.dir, 'audit-spool.1'),
        `${rec('00000000000000000000000000000001', '/profiles/a')}\n` +
        `${rec('00000000000000000000000000000001', '/profiles/a')}\n` + // the same entry twice: stored once
        'not a record\n' +
        `${rec('00000000000000000000000000000002', '/profiles/b')}\n` +
        rec('00000000000000000000000000000003', '/profiles/torn').slice(0, 40));
      const s2 = await restart();
      const got = (await entries(s2, s1.key)).filter((e) => e.user_agent === 'spool-test');
      eq(got.map((e) => e.path).sort().join(' '), '/profiles/a /profiles/b', `the whole records, once each: ${JSON.stringify(got)}`);
      assert(/2 unreadable spool records skipped/.test(s2.log), `the skipped records are reported:\n${s2.log}`);
    }),
  },
];
