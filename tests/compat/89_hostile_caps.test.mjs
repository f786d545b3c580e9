// Issue 29, items 8, 9, 11 and 12: a hostile tenant cannot fill a
// server-wide cap alone, its file work is charged to its own cgroups, the
// logs its processes write on the server's disk are capped, and its profiles
// have a count and size quota (docs/sandbox.md, "Tenant fairness: caps,
// disk, quotas").
import { existsSync, readFileSync, statSync } from 'node:fs';
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { startServer, request, assert, eq, waitFor, sessionCgroupDirs } from '../blackbox/lib.mjs';

const ADMIN = 'caps-admin-token';
const q = encodeURIComponent;
const MiB = 1024 * 1024;
const api = (s, method, path, body, key) => request(s.base, method, path, { key, body });

// Limits of src/core/limits.h these tests check.
// The idle deadline of an unread stream: the default is LIM_FS_ZIP_IDLE_S
// (20 s); the test server runs with a shorter one (BROWSERD_ZIP_IDLE_SECONDS),
// the same rule in less of the suite's time.
const ZIP_PER_SESSION = 2, ZIP_PER_ORG = 4, ZIP_IDLE_S = 6;
const CURL_PER_SESSION = 4, CURL_PER_ORG = 8;
const REPLAYS_PER_ORG = 2;
const LOG_CAP = 8 * MiB;

// A loopback site: /hang never answers (its sockets are ended at close).
async function site() {
  const srv = http.createServer((rq, rs) => {
    if (rq.url.startsWith('/hang')) return;
    rs.setHeader('content-type', 'text/plain');
    rs.end('ok');
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const port = srv.address().port;
  return { url: `http://127.0.0.1:${port}`, hostport: `127.0.0.1:${port}`, close: () => { srv.closeAllConnections(); srv.close(); } };
}

async function withServer(fn, args = [], env = {}) {
  const s = await startServer({ env: { BROWSERD_ADMIN_TOKEN: ADMIN, ...env }, args });
  try {
    assert(/sandbox: on/.test(s.log), `the server runs sessions sandboxed:\n${s.log}`);
    await fn(s);
  } finally { await s.stop(); s.cleanup(); }
}

// A new organization (plan hobbyist: file_io, profiles, replays) and its key.
async function org(s, name, overrides) {
  const o = await request(s.base, 'POST', '/admin/orgs', { key: ADMIN, body: { name, plan: 'hobbyist', ...(overrides ? { overrides } : {}) } });
  eq(o.status, 201, `org: ${o.text}`);
  const k = await request(s.base, 'POST', `/admin/orgs/${o.json.id}/api_keys`, { key: ADMIN, body: {} });
  eq(k.status, 201, `key: ${k.text}`);
  return k.json.key;
}

async function create(s, key, body = {}) {
  const r = await api(s, 'POST', '/browsers', { headless: true, ...body }, key);
  eq(r.status, 200, `create: ${r.text}`);
  return r.json.session_id;
}

const write = (s, id, path, data, key) => request(s.base, 'PUT', `/browsers/${id}/fs/write_file?path=${q(path)}`,
  { key, raw: data, headers: { 'content-type': 'application/octet-stream' } });

// GET download_dir_zip, then reads nothing: {status, headers, text (non-200), end()}.
function unreadZip(s, id, path, key) {
  return new Promise((resolve, reject) => {
    const rq = http.get(`${s.base}/browsers/${id}/fs/download_dir_zip?path=${q(path)}`,
      { headers: { authorization: `Bearer ${key}` }, agent: false }, (res) => {
        const end = () => { rq.destroy(); };
        if (res.statusCode === 200) { res.pause(); return resolve({ status: 200, headers: res.headers, end }); }
        let text = '';
        res.on('data', (d) => { text += d; });
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text, end }));
      });
    rq.on('error', reject);
  });
}

// A curl through the session's browser, not awaited: resolves with the response.
const curl = (s, id, key, url) => api(s, 'POST', `/browsers/${id}/curl`, { url, timeout_ms: 60000 }, key).catch((e) => ({ status: 0, text: String(e) }));

function is429(r, what) {
  eq(r.status, 429, `${what}: ${r.text}`);
  assert(Number(r.headers['retry-after']) > 0, `${what}: Retry-After ${r.headers['retry-after']}`);
}

// The v1 memory cgroup's usage (or v2's memory.current) of session id.
function memoryUsage(id) {
  for (const d of sessionCgroupDirs(id)) {
    for (const f of ['memory.usage_in_bytes', 'memory.current']) {
      if (existsSync(`${d}/${f}`)) return Number(readFileSync(`${d}/${f}`, 'utf8'));
    }
  }
  throw new Error(`no memory cgroup for session ${id}`);
}

// CPU nanoseconds the server's own threads (utime + stime) and its reaped
// children (cutime + cstime) have used.
function processCpuNs(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
  const tick = 1e7; // clock ticks of 10 ms
  return { own: (Number(rest[11]) + Number(rest[12])) * tick, children: (Number(rest[13]) + Number(rest[14])) * tick };
}

// A minimal WebDriver BiDi client.
function bidi(url) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    let next = 1;
    const waiting = new Map();
    ws.on('message', (d) => {
      const m = JSON.parse(d.toString());
      const w = waiting.get(m.id);
      if (!w) return;
      waiting.delete(m.id);
      if (m.type === 'success') w.resolve(m.result); else w.reject(new Error(`${m.error}: ${m.message}`));
    });
    ws.on('error', reject);
    ws.on('open', () => resolve({
      send(method, params = {}) {
        const id = next++;
        ws.send(JSON.stringify({ id, method, params }));
        return new Promise((res, rej) => {
          waiting.set(id, { resolve: res, reject: rej });
          setTimeout(() => { if (waiting.delete(id)) rej(new Error(`${method}: no answer`)); }, 60000);
        });
      },
      close: () => new Promise((r) => { ws.once('close', r); ws.close(); }),
    }));
  });
}

export const tests = [
  {
    name: 'issue 29.8: download_dir_zip streams are shared per session and per organization; an unread stream ends after its deadline and frees its slot',
    timeout: 240000,
    fn: () => withServer(async (s) => {
      const ka = await org(s, 'hostile-a'), kb = await org(s, 'quiet-b');
      const a = [await create(s, ka), await create(s, ka), await create(s, ka)];
      const b = await create(s, kb);
      // More than every buffer between the zip and an idle client holds.
      const big = randomBytes(32 * MiB);
      for (const id of [...a, b]) eq((await write(s, id, '/tmp/z/big.bin', big, id === b ? kb : ka)).status, 201, 'write');
      const open = [];
      try {
        for (let i = 0; i < ZIP_PER_SESSION; i++) {
          const r = await unreadZip(s, a[0], '/tmp/z', ka); open.push(r);
          eq(r.status, 200, `stream ${i + 1} of session a0`);
        }
        const over = await unreadZip(s, a[0], '/tmp/z', ka); open.push(over);
        is429(over, `stream ${ZIP_PER_SESSION + 1} of one session`);
        assert(/session/.test(over.text), `names the session's share: ${over.text}`);
        for (let i = 0; i < ZIP_PER_ORG - ZIP_PER_SESSION; i++) {
          const r = await unreadZip(s, a[1], '/tmp/z', ka); open.push(r);
          eq(r.status, 200, `stream ${i + 1} of session a1`);
        }
        const orgOver = await unreadZip(s, a[2], '/tmp/z', ka); open.push(orgOver);
        is429(orgOver, 'a stream past the organization\'s share');
        assert(/organization/.test(orgOver.text), `names the organization's share: ${orgOver.text}`);
        const other = await unreadZip(s, b, '/tmp/z', kb); open.push(other);
        eq(other.status, 200, `another organization still gets a stream: ${other.text}`);
        // Nobody reads: after the idle deadline the slots are free again.
        await waitFor(async () => {
          const r = await unreadZip(s, a[0], '/tmp/z', ka); open.push(r);
          return r.status === 200;
        }, `a slot freed by the ${ZIP_IDLE_S} s deadline`, (ZIP_IDLE_S + 40) * 1000, 2000);
        assert(new RegExp(`read nothing for ${ZIP_IDLE_S} s`).test(s.log), 'the server logs why the stream ended');
      } finally { for (const r of open) r.end(); }
    }, [], { BROWSERD_ZIP_IDLE_SECONDS: String(ZIP_IDLE_S) }),
  },
  {
    name: 'issue 29.8: curl calls in flight and recordings are shared per session and per organization (429 with Retry-After), never the whole server for one tenant',
    timeout: 240000,
    fn: async () => {
      const w = await site();
      try {
        await withServer(async (s) => {
          const ka = await org(s, 'hostile-a'), kb = await org(s, 'quiet-b');
          const a = [await create(s, ka), await create(s, ka), await create(s, ka)];
          const b = await create(s, kb);
          // curl: calls to a host that never answers hold their slot.
          const hanging = [], settled = [];
          // A hanging call may lose its race for a slot to the test's own
          // probe below (both in flight at once on a busy host): a 429 for it
          // is the share at work, and it is sent again until it holds a slot.
          const hang = (id, path) => hanging.push(curl(s, id, ka, `${w.url}/hang/${path}`).then(async (r) => {
            if (r.status === 429 && !w.closed) {
              await new Promise((res) => setTimeout(res, 200));
              hang(id, `${path}+`);
            } else {
              settled.push(`${path}: ${r.status} ${String(r.text).slice(0, 200)}`);
            }
            return r;
          }));
          for (let i = 0; i < CURL_PER_SESSION; i++) hang(a[0], `${i}`);
          for (let i = 0; i < CURL_PER_ORG - CURL_PER_SESSION; i++) hang(a[1], `b${i}`);
          // Wait until the server holds them all (a further call of a0 is refused).
          // A hanging call must not end before the test ends it: if one does,
          // the failure says how (a slot freed early is a defect too).
          let last = '';
          const over = await waitFor(async () => {
            const r = await curl(s, a[0], ka, `${w.url}/ok`);
            last = `${r.status} ${String(r.text).slice(0, 200)}`;
            return r.status === 429 ? r : null;
          }, 'the session share of curl calls in use', 60000, 500).catch((e) => {
            throw new Error(`${e.message}; the last call of the session: ${last}; hanging calls ended early: ${JSON.stringify(settled)}`);
          });
          is429(over, `curl ${CURL_PER_SESSION + 1} of one session`);
          // The organization's share: a call of a third session is refused once
          // the other two hold their calls (one sent again above may still be
          // on its way).
          is429(await waitFor(async () => {
            const r = await curl(s, a[2], ka, `${w.url}/ok`);
            return r.status === 429 ? r : null;
          }, 'the organization share of curl calls in use', 60000, 500), 'a curl past the organization\'s share');
          const other = await curl(s, b, kb, `${w.url}/ok`);
          eq(other.status, 200, `another organization's curl goes through: ${other.text}`);
          // Recordings: an organization records at most its share of the host's.
          const started = [];
          for (let i = 0; i < REPLAYS_PER_ORG; i++) {
            const r = await api(s, 'POST', `/browsers/${a[i]}/replays`, { framerate: 5 }, ka);
            eq(r.status, 201, `recording ${i + 1}: ${r.text}`);
            started.push([a[i], r.json.replay_id]);
          }
          is429(await api(s, 'POST', `/browsers/${a[2]}/replays`, { framerate: 5 }, ka), 'a recording past the organization\'s share');
          const ob = await api(s, 'POST', `/browsers/${b}/replays`, { framerate: 5 }, kb);
          eq(ob.status, 201, `another organization still records: ${ob.text}`);
          for (const [id, rid] of started) await api(s, 'POST', `/browsers/${id}/replays/${rid}/stop`, undefined, ka);
          await api(s, 'POST', `/browsers/${b}/replays/${ob.json.replay_id}/stop`, undefined, kb);
          w.closed = true;
          w.close(); // the hanging calls end
          await Promise.all(hanging);
        }, ['--allow-loopback', w.hostport]);
      } finally { w.close(); }
    },
  },
  {
    name: 'issue 29.9: bytes written with fs write_file are charged to the session\'s memory cgroup, and zipping a sparse file is the session\'s CPU, not the server\'s',
    timeout: 180000,
    fn: () => withServer(async (s) => {
      const id = await create(s, s.key);
      // Two files of 60 MiB (a request body is at most 64 MiB). The browser's
      // own memory moves meanwhile, so the files' share is measured by what
      // deleting them gives back: a page is uncharged from the cgroup that
      // paid for it.
      for (const n of [1, 2]) eq((await write(s, id, `/tmp/charged${n}.bin`, randomBytes(60 * MiB), s.key)).status, 201, `write_file ${n} of 60 MiB`);
      const withFiles = memoryUsage(id);
      for (const n of [1, 2]) eq((await api(s, 'PUT', `/browsers/${id}/fs/delete_file`, { path: `/tmp/charged${n}.bin` }, s.key)).status, 200, 'delete_file');
      const freed = withFiles - memoryUsage(id);
      console.log(`  measured: deleting 120 MiB written by write_file gave the session's memory cgroup back ${(freed / MiB).toFixed(1)} MiB`);
      assert(freed > 100 * MiB, `the session's memory cgroup held ${(freed / MiB).toFixed(1)} MiB of 120 MiB written`);
      // The zip is built by a process inside every cgroup of the session: seen
      // while a client holds the stream unread (32 MiB of noise fills the pipes).
      eq((await write(s, id, '/tmp/z/noise.bin', randomBytes(32 * MiB), s.key)).status, 201, 'write noise');
      const held = await unreadZip(s, id, '/tmp/z', s.key);
      try {
        eq(held.status, 200, 'download_dir_zip');
        const dirs = sessionCgroupDirs(id);
        assert(dirs.length >= 2, `the session's cgroups: ${dirs}`);
        await waitFor(() => dirs.every((d) => readFileSync(`${d}/cgroup.procs`, 'utf8').split('\n').filter(Boolean)
          .some((pid) => { try { return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('sessfs-helper'); } catch { return false; } })),
        `the zipping process in every cgroup of the session (${dirs.join(', ')})`, 20000);
      } finally { held.end(); }
      // A sparse file of 1 GiB (holes only), zipped: the CPU is the helper's
      // (reaped children of the server), not the server's own threads'.
      const t = await api(s, 'POST', `/browsers/${id}/process/exec`, { command: 'sh', args: ['-c', 'mkdir -p /tmp/sp && truncate -s 1G /tmp/sp/holes'] }, s.key);
      eq(t.status, 200, `truncate: ${t.text}`);
      const c0 = processCpuNs(s.proc.pid);
      const z = await request(s.base, 'GET', `/browsers/${id}/fs/download_dir_zip?path=${q('/tmp/sp')}`, { key: s.key });
      eq(z.status, 200, 'download_dir_zip');
      const c1 = processCpuNs(s.proc.pid);
      const own = c1.own - c0.own, helpers = c1.children - c0.children;
      console.log(`  measured: zipping a 1 GiB sparse file: helper ${(helpers / 1e9).toFixed(2)} CPU-s, server's own threads ${(own / 1e9).toFixed(2)} CPU-s`);
      assert(helpers > own, `the helper paid for the zip: helper ${helpers / 1e9} s, server ${own / 1e9} s`);
    }),
  },
  {
    name: 'issue 29.11: chromedriver\'s log on the server\'s disk stays under its cap however much BiDi traffic a session sends',
    timeout: 240000,
    fn: () => withServer(async (s) => {
      const r = await api(s, 'POST', '/browsers', { headless: true }, s.key);
      eq(r.status, 200, r.text);
      const log = `${s.dir}/sessions/${r.json.session_id}.chromedriver.log`;
      const c = await bidi(r.json.webdriver_ws_url);
      try {
        await c.send('session.new', { capabilities: {} });
        const tree = await c.send('browsingContext.getTree');
        const ctx = tree.contexts[0].context;
        const mib = 'x'.repeat(MiB);
        for (let i = 0; i < 12; i++) {
          await c.send('script.evaluate', { expression: `'${mib}'.length`, target: { context: ctx }, awaitPromise: false });
        }
      } finally { await c.close(); }
      // Past the cap the log ends with the server's notice and grows no more.
      await waitFor(() => existsSync(log) && readFileSync(log).subarray(-200).toString().includes('size cap'), 'the cap notice', 60000, 500);
      const size = statSync(log).size;
      assert(size <= LOG_CAP + 200, `chromedriver.log is ${size} bytes (cap ${LOG_CAP})`);
      eq((await api(s, 'DELETE', `/browsers/${r.json.session_id}`, undefined, s.key)).status, 204);
    }),
  },
  {
    name: 'issue 29.12: profiles have a count quota (limits.max_profiles) and a size quota (limits.max_profile_bytes) checked before a save replaces the archive',
    timeout: 180000,
    fn: () => withServer(async (s) => {
      const k = await org(s, 'profiles-q', { limits: { max_profiles: 2, max_profile_bytes: 1024 } });
      const ent = await request(s.base, 'GET', '/admin/plans', { key: ADMIN });
      const hob = ent.json.find((p) => p.id === 'hobbyist');
      assert(Number.isInteger(hob.entitlements.limits.max_profiles), `plans carry limits.max_profiles: ${JSON.stringify(hob.entitlements.limits)}`);
      assert(Number.isInteger(hob.entitlements.limits.max_profile_bytes), 'plans carry limits.max_profile_bytes');
      eq((await api(s, 'POST', '/profiles', { name: 'one' }, k)).status, 200, 'profile 1');
      eq((await api(s, 'POST', '/profiles', { name: 'two' }, k)).status, 200, 'profile 2');
      const third = await api(s, 'POST', '/profiles', { name: 'three' }, k);
      eq(third.status, 403, `a third profile: ${third.text}`);
      assert(/max_profiles/.test(third.text), `names the limit: ${third.text}`);
      // Any real browser profile is far above 1024 bytes: the save is refused.
      const id = await create(s, k, { profile: { name: 'one', save_changes: true } });
      eq((await api(s, 'DELETE', `/browsers/${id}`, undefined, k)).status, 204);
      await waitFor(() => /profile .* not saved: .*quota/.test(s.log), 'the log says why the profile was not saved', 60000);
      const dl = await api(s, 'GET', '/profiles/one/download', undefined, k);
      eq(dl.status, 404, `no archive was stored: ${dl.status}`);
    }),
  },
];
