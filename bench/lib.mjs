// Helpers shared by the benchmark scripts.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;

// Raw Chromium to "DevTools listening": as root with --no-sandbox, or (own)
// with Chromium's own sandbox on, as an unprivileged uid (what a sandboxed
// session runs, without bwrap and the server). bin: Debian's launcher script
// by default, as a user types `chromium`; /usr/lib/chromium/chromium is the
// binary it runs (what the server runs, runtime/crlauncher.h).
export const RAW_UID = 1099999;
const RAW_FLAGS = ['--remote-debugging-port=0', '--remote-debugging-address=127.0.0.1', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--password-store=basic', '--use-mock-keychain'];

// Milliseconds from t0 until p prints "DevTools listening"; then p's group
// is killed by its PID and awaited.
async function untilDevTools(p, t0) {
  const t = await new Promise((resolve, reject) => {
    let buf = '';
    p.stderr.on('data', (d) => { buf += d; if (/DevTools listening on/.test(buf)) resolve(ms(t0)); });
    p.on('exit', () => reject(new Error('raw chromium exited')));
  });
  await killGroup(p);
  return t;
}

async function killGroup(p) {
  process.kill(-p.pid, 'SIGKILL');
  await new Promise((r) => p.once('exit', r));
}

export async function rawLaunch(own = false, bin = '/usr/bin/chromium') {
  const dir = mkdtempSync(join(tmpdir(), 'bench-raw-'));
  if (own) execFileSync('chown', [`${RAW_UID}:${RAW_UID}`, dir]);
  const t0 = process.hrtime.bigint();
  const pre = own ? ['setpriv', '--reuid', String(RAW_UID), '--regid', String(RAW_UID), '--clear-groups', bin] : [bin, '--no-sandbox'];
  const p = spawn(pre[0], [...pre.slice(1), '--headless=new', ...RAW_FLAGS, `--user-data-dir=${dir}`, 'about:blank'],
    { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  const t = await untilDevTools(p, t0);
  rmSync(dir, { recursive: true, force: true });
  return t;
}

// A raw `chromium --headless=new` on about:blank left running, started as
// rawLaunch starts it (root, --no-sandbox): issue 39.1's reference for an idle
// session's memory. Returns once DevTools listens; pids() lists its processes
// (the tree under the browser, and the crashpad handler, which daemonizes
// out of it but names the profile folder); stop() kills them by PID.
export async function rawIdle() {
  const dir = mkdtempSync(join(tmpdir(), 'bench-raw-'));
  const p = spawn('/usr/bin/chromium', ['--no-sandbox', '--headless=new', ...RAW_FLAGS, `--user-data-dir=${dir}`, 'about:blank'],
    { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  await new Promise((resolve, reject) => {
    let buf = '';
    p.stderr.on('data', (d) => { buf += d; if (/DevTools listening on/.test(buf)) resolve(); });
    p.on('exit', () => reject(new Error('raw chromium exited')));
  });
  p.stderr.resume();
  const pids = () => {
    let named = [];
    try { named = execFileSync('pgrep', ['-f', '--', dir], { encoding: 'utf8' }).split('\n').filter(Boolean).map(Number); } catch { /* none */ }
    const pp = new Map();
    for (const d of readdirSync('/proc')) {
      if (!/^\d+$/.test(d)) continue;
      try { pp.set(Number(d), Number(readFileSync(`/proc/${d}/stat`, 'utf8').split(') ')[1].split(' ')[1])); } catch { /* gone */ }
    }
    const inTree = (pid) => { for (let q = pid; q > 1; q = pp.get(q)) if (q === p.pid) return true; return false; };
    return [...new Set([...[...pp.keys()].filter(inTree), ...named])];
  };
  const stop = async () => {
    for (const pid of pids()) if (pid !== p.pid) try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
    await killGroup(p);
    rmSync(dir, { recursive: true, force: true });
  };
  return { pid: p.pid, pids, stop };
}

// A raw headful launch, what a headful session needs without the server:
// Xvfb at the session's default screen (1920x1080) until it accepts
// connections (-displayfd), then Chromium on that display, as root with
// --no-sandbox, to "DevTools listening". Both are killed by PID afterwards.
export async function rawHeadfulLaunch() {
  const dir = mkdtempSync(join(tmpdir(), 'bench-raw-'));
  const t0 = process.hrtime.bigint();
  const x = spawn('Xvfb', ['-displayfd', '3', '-screen', '0', '1920x1080x24', '-nolisten', 'tcp', '-noreset'],
    { stdio: ['ignore', 'ignore', 'ignore', 'pipe'], detached: true });
  const display = await new Promise((resolve, reject) => {
    let buf = '';
    x.stdio[3].on('data', (d) => { buf += d; if (/\n/.test(buf)) resolve(buf.trim()); });
    x.on('exit', () => reject(new Error('raw Xvfb exited')));
  });
  const p = spawn('/usr/bin/chromium', ['--no-sandbox', ...RAW_FLAGS, `--user-data-dir=${dir}`, '--window-size=1920,1080', 'about:blank'],
    { stdio: ['ignore', 'ignore', 'pipe'], detached: true, env: { ...process.env, DISPLAY: `:${display}` } });
  const t = await untilDevTools(p, t0);
  await killGroup(x);
  rmSync(dir, { recursive: true, force: true });
  return t;
}

