// Issue 14: the README's first screen, run the way a newcomer runs it. A fresh
// clone of the repository (with ../shared beside it), `make run` with the
// default data folder (./data, a relative path) on a free port, then the
// README's tour block exactly as written there (only the port differs), then
// a clean stop by PID. The tour and this test cannot drift apart: the
// commands are read from the README between <!-- tour:begin --> and
// <!-- tour:end -->.
//
// Runs once, with the plain build (the clone links its own binary).
// NEWCOMER_REF=<commit> runs it against another commit (to show that it
// fails on the code before a fix).
//
// The clone's compilation is the plain build's: when the tree the suite runs
// from has nothing uncommitted or untracked (git status is empty, as in CI)
// and BROWSERD_BIN is that tree's plain build, the clone starts with a copy
// of build/src's objects, newer than its sources, so `make run` compiles
// nothing and links its own binary from its own file list (a source the
// clone lacks still fails the link). Otherwise (a dirty tree, another build,
// NEWCOMER_REF) the clone compiles everything, as a newcomer's does.
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { assert } from '../blackbox/lib.mjs';

const BIN = process.env.BROWSERD_BIN || 'build/browserd';

async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

// The tour block of a README: the lines of the ```sh fence between the markers.
export function tourOf(readme) {
  const m = /<!-- tour:begin -->\s*```sh\n([\s\S]*?)```\s*<!-- tour:end -->/.exec(readme);
  if (!m) throw new Error('README has no tour block between <!-- tour:begin --> and <!-- tour:end -->');
  return m[1];
}

function childrenOf(pid) {
  try {
    return execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' }).split('\n').filter(Boolean).map(Number);
  } catch { return []; }
}

// 1 when root's plain build compiled exactly what a clone of root holds.
function reusableBuild(root) {
  if (process.env.NEWCOMER_REF || resolve(BIN) !== join(root, 'build', 'browserd')) return 0;
  if (!existsSync(join(root, 'build', 'src'))) return 0;
  return execFileSync('git', ['-C', root, 'status', '--porcelain'], { encoding: 'utf8' }).trim() === '' ? 1 : 0;
}

async function newcomer() {
  const root = resolve('.');
  const work = mkdtempSync(join(tmpdir(), 'browserd-newcomer-'));
  const clone = join(work, 'browserd');
  let make;
  try {
    execFileSync('git', ['clone', '--quiet', root, clone]);
    if (process.env.NEWCOMER_REF) execFileSync('git', ['-C', clone, 'checkout', '--quiet', process.env.NEWCOMER_REF]);
    if (reusableBuild(root)) {
      mkdirSync(join(clone, 'build'));
      execFileSync('cp', ['-r', join(root, 'build', 'src'), join(clone, 'build', 'src')]);
    }
    const shared = resolve(root, '..', 'shared');
    if (existsSync(shared)) symlinkSync(shared, join(work, 'shared'));
    const port = await freePort();

    // make run, as the README says, with the listen address as the only change.
    make = spawn('make', ['run'], {
      cwd: clone,
      env: { ...process.env, BROWSERD_LISTEN: `127.0.0.1:${port}`, BROWSERD_DATA: '', MAKEFLAGS: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    make.stdout.on('data', (d) => { out += d; });
    make.stderr.on('data', (d) => { out += d; });
    await new Promise((res, rej) => {
      const t = setInterval(() => {
        if (/listening on /.test(out)) { clearInterval(t); res(); }
      }, 100);
      make.on('exit', (code) => { clearInterval(t); rej(new Error(`make run exited ${code}:\n${out.slice(-3000)}`)); });
    });

    // The tour, as written.
    const tour = tourOf(readFileSync(join(clone, 'README.md'), 'utf8')).replaceAll('localhost:8080', `localhost:${port}`);
    let tourOut;
    try {
      tourOut = execFileSync('bash', ['-e', '-o', 'pipefail', '-c', tour], { cwd: clone, encoding: 'utf8', timeout: 120000, stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (e) {
      throw new Error(`the README's tour failed (exit ${e.status}):\n${e.stdout}\n${e.stderr}\nserver:\n${out.slice(-2000)}`);
    }
    assert(/"max_concurrent_browsers"/.test(tourOut), `entitlements printed:\n${tourOut}`);
    assert(/"cdp_ws_url":"ws:\/\/127\.0\.0\.1:\d+\/browser\/cdp\?jwt=/.test(tourOut.replace(/\s/g, '')), `a browser record printed:\n${tourOut}`);
    assert(/"value":42/.test(tourOut), `the CDP call returned 42:\n${tourOut}`);
    const records = tourOut.split('\n').filter((l) => /"session_id"/.test(l));
    assert(records.length >= 2, `a browser from the pool was handed out:\n${tourOut}`);

    // What the README says make run prints.
    assert(/API key \(shown once; also in \/[^ ]*\/data\/bootstrap-api-key\)/.test(out),
      `make run prints where the key is, as an absolute path:\n${out.slice(-2000)}`);

    // A clean stop: SIGTERM to the server (make's child) by PID.
    const server = childrenOf(make.pid);
    assert(server.length === 1, `make run has one child, the server: ${server}`);
    const exited = new Promise((r) => make.once('exit', r));
    process.kill(server[0], 'SIGTERM');
    const code = await exited;
    assert(code === 0, `make run exits 0 after the server stopped (got ${code}):\n${out.slice(-2000)}`);
    assert(/stopped cleanly/.test(out), `the server says it stopped cleanly:\n${out.slice(-2000)}`);
    make = null;
  } finally {
    if (make && make.exitCode === null) {
      for (const pid of childrenOf(make.pid)) { try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } }
      try { process.kill(make.pid, 'SIGKILL'); } catch { /* gone */ }
    }
    rmSync(work, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
  }
}

export const tests = /asan/.test(BIN) ? [] : [
  { name: "issue 14: a fresh clone's `make run` then the README's tour, as written, then a clean stop", fn: newcomer, timeout: 300000 },
];
