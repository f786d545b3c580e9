// Issue 29, items 1 and 2: a hostile tenant cannot slow or starve the others
// through process stdin or slow calls (docs/sandbox.md, "Tenant fairness:
// slow calls and stdin"). The attacker is the server's bootstrap key; the
// victim is a second organization made through the admin API. The tests
// assert outcomes (what was answered, and while what was still outstanding),
// never elapsed times.
import { setMaxListeners } from 'node:events';
import { readFileSync } from 'node:fs';
import { startServer, request, assert, eq, isError, waitFor, createSession, deleteSession } from '../blackbox/lib.mjs';

const ADMIN = 'slow-admin';
const MiB = 1024 * 1024;
const api = (s, method, path, body, extra = {}) => request(s.base, method, path, { key: s.key, body, ...extra });

async function newOrg(s, name) {
  const org = await request(s.base, 'POST', '/admin/orgs', { key: ADMIN, body: { name } });
  eq(org.status, 201, `${name} org: ${org.text}`);
  const k = await request(s.base, 'POST', `/admin/orgs/${org.json.id}/api_keys`, { key: ADMIN, body: { name } });
  eq(k.status, 201, `${name} key: ${k.text}`);
  return { base: s.base, key: k.json.key };
}

async function withServer(fn, env = {}) {
  const s = await startServer({ env: { BROWSERD_ADMIN_TOKEN: ADMIN, ...env } });
  try {
    await fn(s, await newOrg(s, 'victim'));
  } finally { await s.stop(); s.cleanup(); }
}

// The server's thread count (/proc/<pid>/status).
function threadsOf(s) {
  return Number(/^Threads:\s+(\d+)/m.exec(readFileSync(`/proc/${s.proc.pid}/status`, 'utf8'))[1]);
}

const create = (s) => createSession(s);
const remove = deleteSession;

export const tests = [
  {
    name: 'issue 29.1: stdin to a process that does not read answers at once with what the pipe took (never waits for the reader), and another org is answered meanwhile',
    timeout: 120000,
    fn: () => withServer(async (s, victim) => {
      const id = await create(s);
      try {
        // The process reads nothing for 30 s, then everything. A server
        // that waits for the reader (the old one: up to 5 s per call, one
        // call at a time) is still writing when it starts, and answers some
        // of the eight writes below in full; one that answers at once never
        // does.
        const sp = await api(s, 'POST', `/browsers/${id}/process/spawn`, { command: 'sh', args: ['-c', 'sleep 30; exec cat >/dev/null'] });
        eq(sp.status, 200, `spawn: ${sp.text}`);
        const pid = sp.json.process_id;
        const data = Buffer.alloc(MiB, 0x61).toString('base64');
        const writes = [];
        for (let i = 0; i < 8; i++) writes.push(api(s, 'POST', `/browsers/${id}/process/${pid}/stdin`, { data_b64: data }));
        const other = await request(s.base, 'GET', '/org/entitlements', { key: victim.key });
        eq(other.status, 200, `the other org's entitlements: ${other.text}`);
        const answers = await Promise.all(writes);
        let total = 0;
        for (const r of answers) {
          if (r.status === 429) {
            assert(Number(r.headers['retry-after']) > 0, `a 429 carries Retry-After: ${JSON.stringify(r.headers)}`);
            continue;
          }
          eq(r.status, 200, `stdin: ${r.text}`);
          eq(Object.keys(r.json), ['written_bytes'], 'the documented answer shape');
          assert(r.json.written_bytes < MiB, `a write to a process that is not reading took only what its pipe holds, at once: ${r.text}`);
          total += r.json.written_bytes;
        }
        assert(total > 0 && total < MiB, `the pipe took some bytes, not 1 MiB: ${total}`);
        const st = await api(s, 'GET', `/browsers/${id}/process/${pid}/status`);
        eq(st.json.state, 'running', 'the process has not read yet and still runs');
        eq((await api(s, 'POST', `/browsers/${id}/process/${pid}/kill`, { signal: 'KILL' })).status, 200, 'kill');
      } finally { await remove(s, id); }
    }),
  },
  {
    name: 'issue 29.2: 70 batch calls of sleeps on one session get 429 past the session\'s share, queued calls are not parked on its input lock, another org\'s POST /browsers is answered while the attacker\'s batch still runs; a batch whose sleeps add past the cap is a 400 naming actions',
    timeout: 150000,
    fn: () => withServer(async (s, victim) => {
      const id = await create(s);
      const ac = new AbortController();
      setMaxListeners(100, ac.signal);
      const calls = [];
      try {
        // Each batch asks for 60 s of sleeps, the most a batch may take.
        const batch = { actions: Array.from({ length: 4 }, () => ({ type: 'sleep', sleep: { duration_ms: 15000 } })) };
        const answered = [];
        for (let i = 0; i < 70; i++) {
          const p = api(s, 'POST', `/browsers/${id}/computer/batch`, batch, { signal: ac.signal });
          calls.push(p.then((r) => { answered.push(r); return r; }, () => null));
        }
        const limited = () => answered.filter((r) => r.status === 429);
        // Past the session's share the calls are refused at once, and the
        // calls queued on the session's input lock give up: all but the
        // running batch are answered while it runs.
        await waitFor(() => limited().length >= 62, 'the attacker\'s calls past its share answered 429', 30000);
        for (const r of limited()) {
          isError(r, 429);
          assert(Number(r.headers['retry-after']) > 0, `Retry-After on a 429: ${JSON.stringify(r.headers)}`);
        }
        await waitFor(() => answered.length >= 69, 'every call but the running batch answered (none parked on the input lock)', 30000);
        assert(limited().some((r) => r.json.code === 'session_busy'), `a call that waited for the session's input was answered 429 session_busy: ${answered.map((r) => r.text).join('\n')}`);
        eq(answered.filter((r) => r.status !== 429).map((r) => r.text), [], 'the only answers are 429s');

        // The other organization is served while the attacker's batch runs.
        const other = await request(s.base, 'POST', '/browsers', { key: victim.key, body: { headless: true } });
        eq(other.status, 200, `the other org's POST /browsers: ${other.text}`);
        assert(answered.length < 70, 'the attacker\'s running batch is still outstanding when the other org is answered');
        await remove(victim, other.json.session_id);

        // A batch whose sleeps add up past the cap is refused before it runs.
        const long = { actions: Array.from({ length: 4 }, () => ({ type: 'sleep', sleep: { duration_ms: 30000 } })) };
        const r = await api(s, 'POST', `/browsers/${id}/computer/batch`, long);
        isError(r, 400, 'bad_request');
        assert(/^actions: .*120000 ms.*60000 ms/.test(r.json.message), `the 400 names actions and the cap: ${r.text}`);
        assert(answered.length < 70, 'refused without waiting for the running batch');
      } finally {
        ac.abort();
        await Promise.all(calls);
        await remove(s, id);
      }
    }),
  },
  {
    name: 'issue 29.2: sleeping batches hold no thread: two orgs\' batches of sleeps (and the calls waiting for their sessions\' input) do not grow the server\'s threads past its blocking threads, and a third org\'s POST /browsers is answered while they sleep',
    timeout: 150000,
    fn: () => withServer(async (s, victim) => {
      // Two blocking threads (BROWSERD_BLOCKING_THREADS), far fewer than the
      // batches below: a server whose sleeping batches held a thread each
      // would need twelve.
      const other = await newOrg(s, 'second');
      const attackers = [s, s, other, other];
      const ids = [];
      const ac = new AbortController();
      setMaxListeners(100, ac.signal);
      const calls = [];
      try {
        for (const a of attackers) ids.push(await create(a));
        const before = threadsOf(s);
        let most = before;
        // 13.5 s of sleeps: far longer than a create takes here, and than the
        // 5 s a call waits for a busy session's input (LIM_COMPUTER_LOCK_WAIT_MS).
        const batch = { actions: Array.from({ length: 3 }, () => ({ type: 'sleep', sleep: { duration_ms: 4500 } })) };
        const answered = [];
        // Three batches per session: one runs, two wait for its input.
        for (let i = 0; i < 3; i++) {
          attackers.forEach((a, n) => {
            const p = api(a, 'POST', `/browsers/${ids[n]}/computer/batch`, batch, { signal: ac.signal });
            calls.push(p.then((r) => { answered.push(r); return r; }, () => null));
          });
        }
        const sampler = setInterval(() => { most = Math.max(most, threadsOf(s)); }, 50);
        let made;
        try {
          made = await request(s.base, 'POST', '/browsers', { key: victim.key, body: { headless: true } });
          most = Math.max(most, threadsOf(s));
        } finally { clearInterval(sampler); }
        eq(made.status, 200, `the third org's POST /browsers: ${made.text}`);
        const done = answered.filter((r) => r.status === 200);
        assert(done.length === 0, `the running batches still sleep when the third org is answered: ${done.map((r) => r.text).join('\n')}`);
        for (const r of answered) isError(r, 429);
        // Two blocking threads and the timer that wakes parked calls; one
        // blocking thread already ran the creates.
        assert(most <= before + 3, `the server's threads stayed bounded while 12 batches slept or waited: ${before} before, ${most} at most`);
        await remove(victim, made.json.session_id);
        // The running batches end with their sleeps: 200.
        await waitFor(() => answered.filter((r) => r.status === 200).length === 4, 'the four running batches answered 200', 60000);
        eq(answered.filter((r) => r.status !== 200).map((r) => r.json && r.json.code), Array(8).fill('session_busy'), 'the calls that waited for a busy session gave up with 429 session_busy');
      } finally {
        ac.abort();
        await Promise.all(calls);
        for (let n = 0; n < ids.length; n++) await remove(attackers[n], ids[n]);
      }
    }, { BROWSERD_BLOCKING_THREADS: '2' }),
  },
];
