// Cluster helpers for black-box tests (issue 22): a throwaway PostgreSQL
// (scripts/pgtmp.sh), N `browserd serve` nodes sharing it on loopback, and a
// round-robin TCP forwarder in front of them that plays the load balancer and
// is every node's --public-url. Every process is ended by its PID.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BIN, waitFor, sessionPids, request, assert, eq, startSite, appZip, deployApp, sseEvents } from '../blackbox/lib.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const PGTMP = join(ROOT, 'scripts', 'pgtmp.sh');
export const ADMIN_TOKEN = 'cluster-admin-token';
export const KEY = 'bd_cluster_test_bootstrap_key_0123456789';

const run = (file, args, opts = {}) => new Promise((res, rej) => {
  execFile(file, args, { maxBuffer: 64 << 20, ...opts }, (err, stdout, stderr) => {
    if (err) { err.message += `\n${stderr}`; rej(err); } else res({ stdout, stderr });
  });
});

// Everything still running when the runner exits (it calls process.exit):
// nodes are SIGKILLed by PID and the databases stopped, synchronously.
const liveNodes = new Set();
const livePgs = new Set();
process.on('exit', () => {
  for (const p of liveNodes) { try { process.kill(p.pid, 'SIGKILL'); } catch { /* gone */ } }
  for (const dir of livePgs) { try { execFileSync('sh', [PGTMP, 'stop', dir], { stdio: 'ignore' }); } catch { /* best effort */ } }
});

let bindir;
function pgBindir() {
  if (!bindir) {
    try { bindir = execFileSync('pg_config', ['--bindir']).toString().trim(); } catch { bindir = '/usr/lib/postgresql/15/bin'; }
  }
  return bindir;
}

// Runs one SQL statement with psql; resolves to its rows, each an array of
// text fields (NULL reads as '').
export async function psqlRows(url, sql) {
  const { stdout } = await run(join(pgBindir(), 'psql'),
    ['-X', '-q', '-A', '-t', '-F', '\t', '-v', 'ON_ERROR_STOP=1', '-d', url, '-c', sql]);
  return stdout.split('\n').filter((l) => l !== '').map((l) => l.split('\t'));
}

// A fresh PostgreSQL in a short folder under /tmp (its socket path must fit
// in 107 bytes). Resolves to {url, dir, psql(sql), stop()}.
export async function startPg() {
  const dir = mkdtempSync('/tmp/bdpg-');
  livePgs.add(dir);
  let url;
  try {
    url = (await run('sh', [PGTMP, 'start', dir])).stdout.trim().split('\n').pop();
  } catch (e) {
    livePgs.delete(dir);
    try { await run('sh', [PGTMP, 'stop', dir]); } catch { /* nothing started */ }
    throw e;
  }
  return {
    url, dir,
    psql: (sql) => psqlRows(url, sql),
    async stop() {
      if (!livePgs.has(dir)) return;
      livePgs.delete(dir);
      await run('sh', [PGTMP, 'stop', dir]);
    },
  };
}

// One PostgreSQL server for the whole test run (started at the first use,
// stopped at exit); each cluster gets a fresh database on it, which takes a
// fraction of the ~1-2 s a new server does (the SDK suite starts ~130).
let shared = null;
let dbSeq = 0;
export async function freshDatabase() {
  if (!shared) shared = startPg();
  let pg;
  try { pg = await shared; } catch (e) { shared = null; throw e; }
  const name = `c${process.pid}_${++dbSeq}`;
  await pg.psql(`CREATE DATABASE ${name}`);
  const url = pg.url.replace('/postgres?', `/${name}?`);
  let dropped = false;
  return {
    url, dir: pg.dir, name,
    psql: (sql) => psqlRows(url, sql),
    async stop() {
      if (dropped) return;
      dropped = true;
      await pg.psql(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

// Free loopback ports, all distinct, held open until release() (each node's
// --advertise must be known before it starts, so the ports are chosen here
// rather than by the kernel at the node's bind; the forwarder binds while
// they are held, so it cannot get one of them).
async function reservePorts(n) {
  const socks = [];
  for (let i = 0; i < n; i++) {
    const s = net.createServer();
    await new Promise((r) => s.listen(0, '127.0.0.1', r));
    socks.push(s);
  }
  return {
    ports: socks.map((s) => s.address().port),
    release: () => Promise.all(socks.map((s) => new Promise((r) => s.close(r)))),
  };
}

// The load balancer: a round-robin TCP forwarder. Each incoming connection
// goes to the next node; a node that refuses the connection (stopped or
// killed) is skipped, as an LB's health check would.
export async function startForwarder(ports) {
  let next = 0;
  const conns = new Set();
  const track = (s) => { conns.add(s); s.on('close', () => conns.delete(s)); };
  const srv = net.createServer((client) => {
    track(client);
    client.pause();
    client.on('error', () => {});
    const attempt = (left) => {
      const port = ports[next++ % ports.length];
      const up = net.connect(port, '127.0.0.1');
      track(up);
      const refused = () => { if (left > 1 && !client.destroyed) attempt(left - 1); else client.destroy(); };
      up.once('error', refused);
      up.once('connect', () => {
        up.removeListener('error', refused);
        up.on('error', () => client.destroy());
        up.on('close', () => client.destroy());
        client.on('close', () => up.destroy());
        client.pipe(up);
        up.pipe(client);
        client.resume();
      });
    };
    attempt(ports.length);
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const port = srv.address().port;
  return {
    port, base: `http://127.0.0.1:${port}`, ports,
    close() {
      for (const s of conns) s.destroy();
      return new Promise((r) => srv.close(r));
    },
  };
}

// The processes of the sessions of a node's data folder: their cgroups (a
// sandboxed browser's command line names no host folder), else processes
// whose command line names the folder (unsandboxed).
export function processesUnder(dir) {
  const out = new Set();
  for (const id of readdirSyncSafe(join(dir, 'sessions'))) for (const p of sessionPids(dir, id)) out.add(p);
  try {
    for (const p of execFileSync('pgrep', ['-f', `${dir}/sessions/`]).toString().split('\n').filter(Boolean)) out.add(Number(p));
  } catch { /* none */ }
  return [...out];
}

function readdirSyncSafe(d) {
  try { return readdirSync(d).filter((n) => /^[a-z0-9]{24}$/.test(n)); } catch { return []; }
}

// One node. start() spawns it and resolves once it listens; it may be called
// again after stop() or kill9() (a restart: same port, name and folder).
function makeNode({ name, port, dir, pgUrl, publicUrl, env, args }) {
  const node = {
    name, port, dir, base: `http://127.0.0.1:${port}`, proc: null, pid: 0, logs: [],
    get log() { return node.logs.join(''); },
    async start() {
      const proc = spawn(BIN, ['serve', '--listen', `127.0.0.1:${port}`, '--data', dir,
        '--store', pgUrl, '--advertise', node.base, '--node-name', name, '--public-url', publicUrl, ...args], {
        env: {
          ...process.env, BROWSERD_LOG_LEVEL: 'info', BROWSERD_SPARES: '0',
          BROWSERD_NODE_LEASE_MS: '10000', BROWSERD_BOOTSTRAP_API_KEY: KEY,
          BROWSERD_ADMIN_TOKEN: ADMIN_TOKEN, ...env,
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      liveNodes.add(proc);
      node.proc = proc;
      node.pid = proc.pid;
      const i = node.logs.push('') - 1;
      proc.stderr.on('data', (d) => { node.logs[i] += d; });
      proc.on('exit', () => liveNodes.delete(proc));
      await new Promise((res, rej) => {
        const timer = setTimeout(() => rej(new Error(`node ${name} did not start:\n${node.logs[i]}`)), 30000);
        const onData = () => {
          if (/listening on [^ ]*:(\d+) /.test(node.logs[i])) {
            clearTimeout(timer); proc.stderr.off('data', onData); proc.off('exit', onExit); res();
          }
        };
        const onExit = (code, sig) => { clearTimeout(timer); rej(new Error(`node ${name} exited ${code ?? sig}:\n${node.logs[i]}`)); };
        proc.stderr.on('data', onData);
        proc.once('exit', onExit);
      });
      return node;
    },
    running() { return node.proc && node.proc.exitCode === null && node.proc.signalCode === null; },
    // Ends the node by PID and waits for it to exit; a sanitizer's report in
    // its log fails the caller.
    async stop(signal = 'SIGTERM') {
      const proc = node.proc;
      if (!proc) return null;
      if (proc.exitCode === null && proc.signalCode === null) {
        const done = new Promise((r) => proc.once('exit', r));
        process.kill(proc.pid, signal);
        await done;
      }
      if (!proc.stderr.readableEnded) {
        await new Promise((r) => { const t = setTimeout(r, 2000); proc.stderr.once('end', () => { clearTimeout(t); r(); }); });
      }
      const log = node.log;
      const m = /(ERROR: \w+Sanitizer|WARNING: ThreadSanitizer|runtime error:)/.exec(log);
      if (m) throw new Error(`node ${name} reported a sanitizer error:\n${log.slice(m.index, m.index + 4000)}`);
      return proc.exitCode ?? proc.signalCode;
    },
    kill9() { return node.stop('SIGKILL'); },
    // The session's home folder when this node runs it.
    sessionDir(id) { return join(dir, 'sessions', id); },
  };
  return node;
}

// Starts `nodes` nodes named n1..nN on a fresh database (freshDatabase,
// unless `pg` is given: {url, psql}) and the forwarder. env and args go to every node; nodeEnv[i]/nodeArgs[i] to
// node i only. Resolves to
//   {base, key, adminToken, nodes, pg, pgUrl, psql(sql), lb, log, stop()}
// where base is the forwarder's URL (every node's --public-url).
export async function startCluster(opts = {}) {
  // A port chosen free may be taken by another process before the node
  // binds it: then the whole start is tried once more on new ports.
  try {
    return await startClusterOnce(opts);
  } catch (e) {
    if (!/Address already in use/.test(String(e && e.message))) throw e;
    return startClusterOnce(opts);
  }
}

async function startClusterOnce({ nodes = 3, env = {}, args = [], pg, nodeEnv = [], nodeArgs = [] } = {}) {
  const ownPg = !pg;
  if (ownPg) pg = await freshDatabase();
  let lb;
  const list = [];
  try {
    const held = await reservePorts(nodes);
    const ports = held.ports;
    try { lb = await startForwarder(ports); } finally { await held.release(); }
    for (let i = 0; i < nodes; i++) {
      list.push(makeNode({
        name: `n${i + 1}`, port: ports[i], dir: mkdtempSync(join(tmpdir(), 'browserd-bb-')),
        pgUrl: pg.url, publicUrl: lb.base,
        env: { ...env, ...(nodeEnv[i] || {}) }, args: [...args, ...(nodeArgs[i] || [])],
      }));
    }
    // Together, as a fleet starts: the migrations and the bootstrap must
    // still happen exactly once.
    const started = await Promise.allSettled(list.map((n) => n.start()));
    const bad = started.find((r) => r.status === 'rejected');
    if (bad) throw bad.reason;
  } catch (e) {
    for (const n of list) { try { await n.stop('SIGKILL'); } catch { /* reported below */ } }
    for (const n of list) rmSync(n.dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
    if (lb) await lb.close();
    if (ownPg) await pg.stop();
    throw e;
  }
  const cluster = {
    base: lb.base, key: KEY, adminToken: ADMIN_TOKEN, nodes: list, pg, pgUrl: pg.url, lb,
    psql: (sql) => pg.psql(sql),
    get log() { return list.map((n) => n.log).join(''); },
    node(name) { return list.find((n) => n.name === name); },
    // The name of the node whose row owns a session (sessions.node_id).
    async ownerOf(sessionId) {
      const rows = await pg.psql(`SELECT n.name FROM sessions s JOIN nodes n ON n.id = s.node_id WHERE s.id = '${sessionId}'`);
      return rows.length ? rows[0][0] : null;
    },
    // A test that kills or restarts nodes says so; otherwise a node declared
    // dead or fencing itself (a heartbeat that stalled for a lease) fails
    // the test at stop().
    lossExpected: false,
    expectLoss() { cluster.lossExpected = true; },
    // Stops every node (SIGTERM, by PID), checks that none left a browser
    // process behind, then the forwarder and the database.
    async stop({ keepPg = false } = {}) {
      const errors = [];
      if (!cluster.lossExpected) {
        const lost = cluster.log.split('\n').filter((l) => /fences itself|declared dead/.test(l));
        if (lost.length) errors.push(new Error(`a node was lost although none was stopped:\n${lost.slice(0, 5).join('\n')}`));
      }
      await Promise.all(list.map(async (n) => { try { await n.stop(); } catch (e) { errors.push(e); } }));
      for (const n of list) {
        try {
          await waitFor(() => processesUnder(n.dir).length === 0, `no browser of node ${n.name} left`, 10000, 100);
        } catch (e) {
          for (const pid of processesUnder(n.dir)) { try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } }
          errors.push(e);
        }
        rmSync(n.dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
      }
      await lb.close();
      if (ownPg && !keepPg) await pg.stop();
      if (errors.length) throw errors[0];
    },
  };
  return cluster;
}

// startServer's cluster form (tests/blackbox/lib.mjs, BROWSERD_TEST_CLUSTER=N):
// the same shape as one server's, with base the forwarder's URL. `dir` is the
// first node's folder; sessionDir(id) finds the node folder that holds a session.
export async function startClusterServer({ nodes = 2, env = {}, args = [] } = {}) {
  const c = await startCluster({ nodes, env, args });
  const port = c.lb.port;
  return {
    cluster: c, proc: c.nodes[0].proc, port, dir: c.nodes[0].dir, base: c.base, key: c.key,
    get log() { return c.log; },
    sessionDir(id) {
      const n = c.nodes.find((x) => existsSync(x.sessionDir(id)));
      return (n || c.nodes[0]).sessionDir(id);
    },
    async stop() { await c.stop(); return 0; },
    async kill9() { for (const n of c.nodes) await n.kill9(); await c.stop(); return 'SIGKILL'; },
    cleanup() { /* stop() removed every folder */ },
  };
}


// ---- the records a dead node leaves (40_orphans, 41_shares, 45_orphans_busy) ----

// A login page managed auth recognizes (an email and a password field).
export const LOGIN_PAGE = '<!doctype html><title>login</title><form method=post action=/login>'
  + '<label for=u>Email address</label><input id=u name=email type=email autocomplete=username>'
  + '<label for=p>Password</label><input id=p name=password type=password autocomplete=current-password>'
  + '<button type=submit>Continue</button></form>';

// A site on 127.0.0.1 serving LOGIN_PAGE at every path ({url, allow, close}).
export function startLoginSite() {
  return startSite((req, res) => { res.writeHead(200, { 'content-type': 'text/html' }); res.end(LOGIN_PAGE); });
}

// An app whose action 'sleep' never returns.
const ORPHAN_APP = `
import Kernel from '@onkernel/sdk';
const kernel = new Kernel();
const app = kernel.app('orphan-app');
app.action('sleep', async (ctx) => new Promise(() => setInterval(() => {}, 1000)));
`;

// GET path on node `via` with the cluster's key, expecting 200: its JSON.
export function getter(c, via) {
  return async (path) => {
    const r = await request(via.base, 'GET', path, { key: c.key });
    eq(r.status, 200, `GET ${path} on node ${via.name}: ${r.text}`);
    return r.json;
  };
}

// Starts background work on node `on` (read back through node `via`): an
// async invocation of a never-ending action, running, and, when `web` (a
// startLoginSite) is given, a login flow awaiting input. Resolves to
// {invocation, connection} (ids; connection null without web).
export async function startOrphanWork(c, on, via, web = null) {
  const get = getter(c, via);
  const dep = await deployApp(on.base, c.key, appZip({ 'index.mjs': ORPHAN_APP }), '1');
  const depj = await dep.json();
  eq(depj.status, 'running', `deploy on node ${on.name}: ${JSON.stringify(depj)}`);
  const inv = await request(on.base, 'POST', '/invocations', {
    key: c.key, body: { app_name: 'orphan-app', action_name: 'sleep', version: '1', async: true, async_timeout_seconds: 600 },
  });
  eq(inv.status, 202, `async invoke on node ${on.name}: ${inv.text}`);
  const invocation = inv.json.id;
  await waitFor(async () => (await get(`/invocations/${invocation}`)).status === 'running', 'the invocation runs', 60000, 200);
  if (!web) return { invocation, connection: null };
  const conn = await request(on.base, 'POST', '/auth/connections', {
    key: c.key, body: { domain: '127.0.0.1', profile_name: 'orphan-login', login_url: `${web.url}/` },
  });
  assert(conn.status < 300, `auth connection: ${conn.status} ${conn.text}`);
  const connection = conn.json.id;
  const login = await request(on.base, 'POST', `/auth/connections/${connection}/login`, { key: c.key, body: {} });
  assert(login.status < 300, `login on node ${on.name}: ${login.status} ${login.text}`);
  await waitFor(async () => (await get(`/auth/connections/${connection}`)).flow_step === 'AWAITING_INPUT', 'the login flow awaits input', 60000, 200);
  return { invocation, connection };
}

// Waits (up to ms) until the records of startOrphanWork read through node
// `via` no longer run (a null one is not checked), then checks that each
// ended once, failed with `code` (node_lost: status_reason "... lost";
// node_restarted: "... restarted"), and that every terminal state in its
// events says the same. Resolves to a list of problems (empty when all is
// well).
export async function orphansEnded(c, via, { invocation, connection }, code, ms = 30000) {
  const get = getter(c, via);
  const word = code === 'node_lost' ? /lost/ : /restarted/;
  const problems = [];
  const check = async (what, fn) => { try { await fn(); } catch (e) { problems.push(`${what}: ${e.message}`); } };
  if (invocation) await check('the invocation', async () => {
    let got;
    await waitFor(async () => {
      got = await get(`/invocations/${invocation}`);
      return got.status !== 'running';
    }, `node ${via.name} reads the invocation ended`, ms, 200);
    eq(got.status, 'failed', `the invocation: ${JSON.stringify(got)}`);
    assert(word.test(got.status_reason || ''), `status_reason names the cause (${code}): ${JSON.stringify(got)}`);
    const evs = await sseEvents(via.base, c.key, `/invocations/${invocation}/events`);
    const states = evs.filter((e) => e.event === 'invocation_state').map((e) => e.invocation);
    const ends = states.filter((s) => s.status !== 'running' && s.status !== 'queued');
    assert(ends.length > 0, `its events through node ${via.name} end: ${JSON.stringify(evs)}`);
    for (const s of ends) eq([s.status, s.status_reason ?? got.status_reason], [got.status, got.status_reason], `every end in its events: ${JSON.stringify(evs)}`);
  });
  if (connection) {
    await check('the login flow', async () => {
      let got;
      await waitFor(async () => {
        got = await get(`/auth/connections/${connection}`);
        return got.flow_status !== 'IN_PROGRESS';
      }, `node ${via.name} reads the login flow ended`, ms, 200);
      eq([got.flow_status, got.error_code], ['FAILED', code], `the flow: ${JSON.stringify(got)}`);
      const evs = await sseEvents(via.base, c.key, `/auth/connections/${connection}/events`);
      eq(evs.length > 0 && evs.at(-1).flow_status, 'FAILED', `its events through node ${via.name}: ${JSON.stringify(evs)}`);
      for (const e of evs.filter((x) => x.flow_status === 'FAILED')) eq(e.error_code ?? code, code, `every FAILED in its events: ${JSON.stringify(evs)}`);
    });
  }
  return problems;
}
