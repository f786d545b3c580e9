// Black-box helpers: start the real browserd binary on 127.0.0.1 with an
// ephemeral port and a temporary data folder, talk HTTP to it, kill it by PID.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import http from 'node:http';
import net from 'node:net';

export const BIN = process.env.BROWSERD_BIN || 'build/browserd';
const live = new Set();

// Starts `browserd serve`. Resolves once the "listening on" line appears.
export async function startServer({ env = {}, args = [], dataDir } = {}) {
  // BROWSERD_TEST_CLUSTER=N (N >= 2): N nodes on a throwaway PostgreSQL
  // behind a round-robin forwarder (tests/cluster/lib.mjs), in the same
  // shape, base being the forwarder. A given dataDir keeps one server.
  const cluster = Number(process.env.BROWSERD_TEST_CLUSTER || 0);
  if (cluster >= 2 && !dataDir) {
    const { startClusterServer } = await import('../cluster/lib.mjs');
    return startClusterServer({ nodes: cluster, env, args });
  }
  const dir = dataDir || mkdtempSync(join(tmpdir(), 'browserd-bb-'));
  const proc = spawn(BIN, ['serve', '--listen', '127.0.0.1:0', '--data', dir, ...args], {
    // No spare browsers unless a suite asks for them (BROWSERD_SPARES in env): the
    // spares suite and 10_sessions run their creates with spares; the other suites
    // count their own browsers and start many servers.
    env: { ...process.env, BROWSERD_LOG_LEVEL: 'info', BROWSERD_SPARES: '0', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  live.add(proc);
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${log}`)), 15000);
    proc.stderr.on('data', (d) => {
      log += d;
      const m = /listening on [^ ]*:(\d+) /.exec(log);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited ${code}:\n${log}`)); });
  });
  proc.removeAllListeners('exit');
  proc.on('exit', () => live.delete(proc));
  const srv = {
    proc, port, dir, base: `http://127.0.0.1:${port}`,
    get log() { return log; },
    key: readFileSync(join(dir, 'bootstrap-api-key'), 'utf8').trim(),
    // Ends the server by PID with SIGTERM and waits for it to exit.
    // A sanitizer's report in the log (a leak found at exit, for one) fails
    // the test that stopped the server.
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode === null && proc.signalCode === null) {
        const done = new Promise((r) => proc.once('exit', r));
        process.kill(proc.pid, signal);
        await done;
      }
      // The last of stderr (a report written at exit) may trail the exit.
      if (!proc.stderr.readableEnded) {
        await new Promise((r) => { const t = setTimeout(r, 2000); proc.stderr.once('end', () => { clearTimeout(t); r(); }); });
      }
      const m = /(ERROR: \w+Sanitizer|WARNING: ThreadSanitizer|runtime error:)/.exec(log);
      if (m) throw new Error(`the server reported a sanitizer error:\n${log.slice(m.index, m.index + 4000)}`);
      return proc.exitCode ?? proc.signalCode;
    },
    async kill9() { return srv.stop('SIGKILL'); },
    // The home folder of a session of this server.
    sessionDir(id) { return join(dir, 'sessions', id); },
    // Retries: a browser's last child may still be closing files as the server exits.
    cleanup() { rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 }); },
  };
  return srv;
}

// A site of the test's own on 127.0.0.1 (ephemeral port; host: another
// address of 127.0.0.0/8, such as 127.0.0.2 for a site of its own). Pages may
// reach it only when the server lists it in --allow-loopback (OPERATOR.md):
// pass site.allow as the server's args.
export async function startSite(handler, { host = '127.0.0.1' } = {}) {
  const srv = http.createServer(handler);
  await new Promise((r) => srv.listen(0, host, r));
  const hostport = `${host}:${srv.address().port}`;
  return { url: `http://${hostport}`, hostport, allow: ['--allow-loopback', hostport], close: () => srv.close() };
}

// Answers each held response with a 200 of type and body (one already closed
// is passed over); held is emptied.
function answerHeld(held, type, body) {
  for (const rs of held.splice(0)) {
    try { rs.writeHead(200, { 'content-type': type }); rs.end(body); } catch { /* closed */ }
  }
}

// A SearXNG-protocol search provider (docs/search.md) of the test's own: the
// query "urls:<u1> <u2>..." answers one result per URL, any other one result
// (https://example.com/). hold: a query that is held unanswered (in held)
// until release(), which answers it with no results. Name it in the server's
// BROWSERD_SEARCH_PROVIDERS as { protocol: 'searxng', endpoint: url }.
export async function startSearchProvider({ hold } = {}) {
  const held = [];
  const site = await startSite((rq, rs) => {
    const q = new URL(rq.url, 'http://x').searchParams.get('q') || '';
    if (hold !== undefined && q === hold) { held.push(rs); return; }
    const results = q.startsWith('urls:')
      ? q.slice(5).split(' ').filter(Boolean).map((url, i) => ({ url, title: `r${i}`, content: 's' }))
      : [{ url: 'https://example.com/', title: 't', content: 'c' }];
    rs.writeHead(200, { 'content-type': 'application/json' });
    rs.end(JSON.stringify({ results }));
  });
  const release = () => answerHeld(held, 'application/json', JSON.stringify({ results: [] }));
  return { ...site, held, release, close: () => { release(); site.close(); } };
}

// A site whose pages under /hold (/hold, /hold1, ...) are held unanswered (in
// held) until release(), which answers them 200 "<p>late</p>"; every other
// request goes to handler(rq, rs). close() releases first.
export async function startHeldPages(handler) {
  const held = [];
  const site = await startSite((rq, rs) => {
    if (rq.url.startsWith('/hold')) { held.push(rs); return; }
    handler(rq, rs);
  });
  const release = () => answerHeld(held, 'text/html', '<p>late</p>');
  return { ...site, held, release, close: () => { release(); site.close(); } };
}

// A site for profile tests: /set stores a persistent cookie (Set-Cookie with
// Max-Age: session cookies are not kept across browser restarts by design)
// and a localStorage entry; every other path is a page titled "read".
export function startProfileSite() {
  return startSite((rq, rs) => {
    rs.setHeader('content-type', 'text/html');
    if (rq.url.startsWith('/set')) {
      rs.setHeader('set-cookie', 'saved=cookie-value; Max-Age=86400; Path=/');
      return rs.end("<title>set</title><script>localStorage.setItem('saved', 'ls-value')</script>");
    }
    rs.end('<title>read</title>');
  });
}

// Kills every server still running (called by the runner at exit), and any
// background load (withLoad) by its process group.
export function killAll() {
  for (const p of live) { try { process.kill(p.pid, 'SIGKILL'); } catch { /* gone */ } }
  for (const p of loads) { try { process.kill(-p.pid, 'SIGKILL'); } catch { /* gone */ } }
}

const loads = new Set();

// Runs fn() while stress-ng keeps the host busy (issue 30): both cores, 768
// MiB of memory churned and files written through the page cache, the state a
// shared server is normally in. stress-ng is started in a process group of its
// own and ended by it (its workers with it) when fn settles; --timeout bounds
// it should this process die first. Resolves to fn's result.
// stressors: other stress-ng stressor arguments (e.g. ['--cpu', '2', '--vm',
// '1', '--vm-bytes', '256M']), workers: how many worker processes they fork.
export async function withLoad(fn, { seconds = 300, stressors, workers = 4 } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'browserd-load-'));
  const what = stressors || ['--cpu', '2', '--vm', '1', '--vm-bytes', '768M', '--hdd', '1',
    '--hdd-bytes', '256M', '--temp-path', dir];
  const proc = spawn('stress-ng', [...what, '--timeout', `${seconds}s`, '--quiet'],
    { stdio: 'ignore', detached: true });
  loads.add(proc);
  const exited = new Promise((r) => proc.once('exit', r));
  try {
    // Under way once its workers run (stress-ng forks one per stressor).
    await waitFor(() => {
      try { return readFileSync(`/proc/${proc.pid}/task/${proc.pid}/children`, 'utf8').trim().split(/\s+/).length >= workers; } catch { return false; }
    }, 'the background load to start', 15000);
    return await fn();
  } finally {
    try { process.kill(-proc.pid, 'SIGTERM'); } catch { /* gone */ }
    const t = setTimeout(() => { try { process.kill(-proc.pid, 'SIGKILL'); } catch { /* gone */ } }, 10000);
    await exited;
    clearTimeout(t);
    loads.delete(proc);
    rmSync(dir, { recursive: true, force: true });
  }
}

// One HTTP request over a fresh connection (or the given agent).
// Returns {status, headers, text, json}. An AbortSignal (signal) closes the
// connection and rejects, so that a test can walk away from a call.
export function request(base, method, path, { body, key, headers = {}, raw, agent, signal } = {}) {
  const url = new URL(path, base);
  const h = { ...headers };
  if (key) h.authorization = `Bearer ${key}`;
  let payload = raw;
  if (body !== undefined) { payload = JSON.stringify(body); h['content-type'] = 'application/json'; }
  if (payload !== undefined) h['content-length'] = Buffer.byteLength(payload);
  return new Promise((resolve, reject) => {
    const rq = http.request(url, { method, headers: h, agent: agent || false, signal }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json;
        try { json = text ? JSON.parse(text) : undefined; } catch { json = undefined; }
        resolve({ status: res.statusCode, headers: res.headers, text, json, socket: res.socket });
      });
    });
    rq.on('error', reject);
    if (payload !== undefined) rq.write(payload);
    rq.end();
  });
}

export function assert(cond, msg) {
  if (!cond) throw new Error(msg || 'assertion failed');
}

export function eq(actual, expected, msg) {
  const a = JSON.stringify(actual), e = JSON.stringify(expected);
  if (a !== e) throw new Error(`${msg || 'not equal'}: expected ${e}, got ${a}`);
}

// Asserts an Error record with the given status (and code, when given).
export function isError(res, status, code) {
  eq(res.status, status, `status of ${res.text}`);
  assert(/^application\/json/.test(res.headers['content-type'] || ''), `content-type ${res.headers['content-type']}`);
  assert(res.json && typeof res.json.code === 'string' && typeof res.json.message === 'string',
    `Error record expected, got ${res.text}`);
  if (code) eq(res.json.code, code, 'error code');
}

// Waits until fn() returns something truthy (polled every `every` ms) and
// returns it; throws "gave up waiting for <what>" after ms. Tests wait on a
// condition this way, never on a fixed sleep.
export async function waitFor(fn, what, ms = 15000, every = 100) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, every));
  }
}

// The cgroup folders the sandbox makes for session id that exist now
// (docs/sandbox.md): v2 browserd/ID; v1 memory and pids browserd/ID, and cpu
// browserd-ID as a child of the server's own cpu cgroup, which the server
// inherits from this process.
export function sessionCgroupDirs(id) {
  const out = [`/sys/fs/cgroup/browserd/${id}`, `/sys/fs/cgroup/pids/browserd/${id}`, `/sys/fs/cgroup/memory/browserd/${id}`];
  const cpu = cpuCgroupOfSelf();
  if (cpu) out.push(`${cpu}/browserd-${id}`);
  return out.filter((d) => existsSync(d));
}

// The processes of session id of the server whose data folder is dir: those
// in its sandbox's cgroup (a sandboxed browser sees its profile at /profile,
// so no command line names the host folder), else those whose command line
// names its folder (an unsandboxed browser's --user-data-dir).
export function sessionPids(dir, id) {
  const cg = sessionCgroupDirs(id).find((d) => existsSync(join(d, 'cgroup.procs')) && !d.includes('/cpu'));
  if (cg) {
    try { return readFileSync(join(cg, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number); } catch { /* removed meanwhile */ }
  }
  try {
    return execFileSync('pgrep', ['-f', `${dir}/sessions/${id}`]).toString().trim().split('\n').map(Number).filter(Boolean);
  } catch { return []; }
}

// The ids of the sessions of the server whose data folder is dir that have
// processes running.
export function runningSessions(dir) {
  let ids = [];
  try { ids = readdirSync(join(dir, 'sessions')).filter((n) => /^[a-z0-9]{24}$/.test(n)); } catch { /* none yet */ }
  return new Set(ids.filter((id) => sessionPids(dir, id).length > 0));
}

// This process's folder in the cgroup v1 cpu hierarchy, or '' (v2, or none).
export function cpuCgroupOfSelf() {
  const line = readFileSync('/proc/self/cgroup', 'utf8').split('\n').find((l) => (l.split(':')[1] || '').split(',').includes('cpu'));
  if (!line) return '';
  const p = line.split(':')[2];
  return `/sys/fs/cgroup/cpu${p === '/' ? '' : p}`;
}

// Creates an organization through the admin API (the server must run with
// --admin-token adminToken) and an org-scoped API key; returns {org, key}.
export async function newOrg(s, adminToken, body) {
  const admin = (method, path, b) => request(s.base, method, path, { body: b, headers: { authorization: `Bearer ${adminToken}` } });
  const o = await admin('POST', '/admin/orgs', body);
  assert(o.status === 200 || o.status === 201, `create org: ${o.status} ${o.text}`);
  const k = await admin('POST', `/admin/orgs/${o.json.id}/api_keys`, { name: 'main' });
  assert(k.status === 200 || k.status === 201, `create key: ${k.status} ${k.text}`);
  return { org: o.json, key: k.json.key };
}

// A raw TCP connection to the server, as an attacker would open it: what
// it receives accumulates in .got; .closed resolves when the server (or an
// error) ends it; .settled is true once it connected or failed to.
// localAddress picks the client's address in 127.0.0.0/8.
export function rawConn(port, { localAddress } = {}) {
  const sock = net.connect({ port, host: '127.0.0.1', localAddress });
  const c = { sock, got: '', ended: false, settled: false };
  c.connected = new Promise((resolve) => {
    sock.once('connect', () => { c.settled = true; resolve(true); });
    sock.once('error', () => { c.settled = true; resolve(false); });
  });
  c.closed = new Promise((resolve) => sock.once('close', () => { c.ended = c.settled = true; resolve(); }));
  sock.on('data', (d) => { c.got += d; });
  sock.on('error', () => {});
  return c;
}

// VmRSS and VmHWM (peak) of a process, in KiB.
export function memKiB(pid) {
  const st = readFileSync(`/proc/${pid}/status`, 'utf8');
  const get = (k) => Number((new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(st) || [])[1]);
  return { rss: get('VmRSS'), hwm: get('VmHWM') };
}

// Starts `browserd serve` on a fresh data folder once for each value of the
// environment variable name and checks that each stops the server at start
// (exit 2) naming the variable: a setting that may only lower a limit.
export function assertStartRefused(name, values) {
  for (const v of values) {
    const dir = mkdtempSync(join(tmpdir(), 'browserd-refused-'));
    try {
      const p = spawnSync(BIN, ['serve', '--listen', '127.0.0.1:0', '--data', dir], {
        env: { ...process.env, BROWSERD_SPARES: '0', [name]: v }, encoding: 'utf8', timeout: 10000,
      });
      eq(p.status, 2, `${name}=${v}: exit ${p.status} ${p.signal || ''} ${p.stderr}`);
      assert(p.stderr.includes(name), `names the variable: ${p.stderr}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
}

// Runs fn(server) on a fresh server (startServer's options), stopped and
// removed afterwards whatever fn does.
export async function withServer(opts, fn) {
  const s = await startServer(opts);
  try {
    await fn(s);
  } finally {
    await s.stop();
    s.cleanup();
  }
}

// The JSON of a 2xx answer; any other status fails, naming what was asked.
export function ok2xx(r, what) {
  assert(r.status >= 200 && r.status < 300, `${what}: ${r.status} ${r.text}`);
  return r.json;
}

// RFC 6238 with SHA-1, a 30 s step and 6 digits: the code of a base32
// secret (case, spaces, dashes and padding ignored) at unix time t (seconds).
export function totp(secret, t) {
  const abc = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = 0, acc = 0;
  const key = [];
  for (const ch of secret.toUpperCase().replace(/[\s=-]/g, '')) {
    acc = (acc << 5) | abc.indexOf(ch);
    bits += 5;
    if (bits >= 8) { key.push((acc >>> (bits - 8)) & 0xff); bits -= 8; }
  }
  const msg = Buffer.alloc(8);
  msg.writeBigUInt64BE(BigInt(Math.floor(t / 30)));
  const mac = createHmac('sha1', Buffer.from(key)).update(msg).digest();
  const off = mac[mac.length - 1] & 0x0f;
  return String((mac.readUInt32BE(off) & 0x7fffffff) % 1000000).padStart(6, '0');
}

// A headless session of server s (its key), body fields added; its id.
export async function createSession(s, extra = {}, key = s.key) {
  const r = await request(s.base, 'POST', '/browsers', { key, body: { headless: true, ...extra } });
  eq(r.status, 200, `create: ${r.text}`);
  return r.json.session_id;
}

// Deletes session id of server s (its key); 200 or 204.
export async function deleteSession(s, id, key = s.key) {
  const r = await request(s.base, 'DELETE', `/browsers/${id}`, { key });
  assert(r.status === 200 || r.status === 204, `delete ${id}: ${r.status} ${r.text}`);
}

// An app's zip for POST /deployments: files ({name: text}), a package.json
// of type module, and the pinned @onkernel/sdk of tests/compat in its
// node_modules (the app framework an entrypoint declares its actions with).
export function appZip(files) {
  const sdk = join(dirname(fileURLToPath(import.meta.url)), '..', 'compat', 'node_modules', '@onkernel', 'sdk');
  const dir = mkdtempSync(join(tmpdir(), 'browserd-app-'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'app', type: 'module', version: '1.0.0' }));
  mkdirSync(join(dir, 'node_modules', '@onkernel'), { recursive: true });
  cpSync(sdk, join(dir, 'node_modules', '@onkernel', 'sdk'), { recursive: true, dereference: true });
  execFileSync('zip', ['-qr1', join(dir, 'app.zip'), ...Object.keys(files), 'package.json', 'node_modules'], { cwd: dir });
  const zip = readFileSync(join(dir, 'app.zip'));
  rmSync(dir, { recursive: true, force: true });
  return zip;
}

// POST /deployments of zip to base (key), version, entrypoint entry: the fetch Response.
export function deployApp(base, key, zip, version, entry = 'index.mjs') {
  const form = new FormData();
  form.append('file', new Blob([zip], { type: 'application/zip' }), 'app.zip');
  form.append('entrypoint_rel_path', entry);
  form.append('version', version);
  return fetch(`${base}/deployments`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
}

// The data: events of the SSE stream at base + path (key) until it ends;
// throws when it has not ended within ms.
export async function sseEvents(base, key, path, ms = 20000) {
  const ctl = new AbortController();
  const t = setTimeout(() => ctl.abort(), ms);
  try {
    const r = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${key}` }, signal: ctl.signal });
    const text = await r.text();
    return text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)));
  } catch {
    throw new Error(`the events stream of ${path} did not end within ${ms} ms`);
  } finally {
    clearTimeout(t);
  }
}
