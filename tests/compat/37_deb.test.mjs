// Issue 37 item 4: `make deb` builds a Debian package; it is installed with
// dpkg and its systemd unit's ExecStart is run the way systemd would run it,
// then the README tour's first steps run against it.
//
// Where it is installed: on this machine, with the real `dpkg -i` (its
// dependency checks against the host's installed packages, conffiles,
// postinst), but inside a private mount namespace (`unshare --mount`) whose
// /usr, /etc and /var are overlays with their upper layers on a tmpfs of that
// namespace. Every file dpkg writes (the binary, runtime-js, the unit, the
// conffile, dpkg's own database, /var/lib/browserd) lands in that tmpfs and
// vanishes with the namespace when its last process (the server, its crash
// watcher) exits: nothing is installed on the host. systemd is not PID 1 here,
// so the unit's hardening is set up by this test with the same effect (a
// read-only file system but for ReadWritePaths and RuntimeDirectory, a
// private /tmp, no /home nor /root, no_new_privs, the open-files limit, the
// umask) before ExecStart runs with the unit's EnvironmentFile. The only
// change to the installed configuration is the one an operator makes: the
// listen port (and no spare browsers, to keep the test cheap).
//
// Runs with the plain build only (`make deb` packages build/browserd).
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { join, resolve } from 'node:path';
import { assert, eq, request, waitFor } from '../blackbox/lib.mjs';

const BIN = process.env.BROWSERD_BIN || 'build/browserd';

async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

// The [Service] settings of a unit file, as name -> value.
function serviceOf(unit) {
  const out = {};
  let section = '';
  for (const raw of unit.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const sec = /^\[(\w+)\]$/.exec(line);
    if (sec) { section = sec[1]; continue; }
    const kv = /^(\w+)=(.*)$/.exec(line);
    assert(kv, `unit line: ${line}`);
    if (section === 'Service') out[kv[1]] = kv[2];
  }
  return out;
}

// What this test sets up itself (the rest of [Service] is systemd's own
// supervision: restarts, stop signals, cgroup delegation, what stays after a stop).
const EMULATED = ['Type', 'EnvironmentFile', 'WorkingDirectory', 'ExecStart', 'LimitNOFILE', 'UMask',
  'ProtectSystem', 'ReadWritePaths', 'RuntimeDirectory', 'RuntimeDirectoryMode', 'ProtectHome',
  'PrivateTmp', 'NoNewPrivileges'];
const SUPERVISION = ['Restart', 'RestartSec', 'KillMode', 'TimeoutStopSec', 'Delegate', 'RuntimeDirectoryPreserve'];

// Runs inside `unshare --mount --propagation private`: installs the package,
// sets up the unit's sandboxing, then execs ExecStart.
const SETUP = new URL('./37_deb_setup.sh', import.meta.url).pathname;

async function installAndTour() {
  // The package, as `make deb` builds it.
  let deb;
  try {
    deb = execFileSync('make', ['--no-print-directory', 'deb'], { encoding: 'utf8', env: { ...process.env, MAKEFLAGS: '' }, stdio: ['ignore', 'pipe', 'pipe'] })
      .trim().split('\n').pop();
  } catch (e) {
    throw new Error(`make deb failed (exit ${e.status}):\n${e.stdout}\n${e.stderr}`);
  }
  deb = resolve(deb);
  assert(/\/browserd_[^/_]+_[a-z0-9]+\.deb$/.test(deb) && existsSync(deb), `make deb printed the package's path: ${deb}`);
  const info = execFileSync('dpkg-deb', ['-f', deb, 'Package', 'Depends'], { encoding: 'utf8' });
  for (const p of ['chromium', 'chromium-driver', 'xvfb', 'ffmpeg', 'bubblewrap', 'nodejs', 'libc6', 'libmicrohttpd12'])
    assert(new RegExp(`[ ,]${p}( |,|$)`, 'm').test(info), `Depends names ${p}:\n${info}`);
  const files = execFileSync('dpkg-deb', ['-c', deb], { encoding: 'utf8', maxBuffer: 64 << 20 });
  for (const f of ['./usr/bin/browserd', './usr/lib/browserd/runtime-js/runner.mjs',
    './usr/lib/browserd/runtime-js/node_modules/playwright-core/package.json',
    './lib/systemd/system/browserd.service', './etc/browserd/browserd.conf'])
    assert(files.includes(` ${f}\n`), `the package holds ${f}`);
  eq(execFileSync('dpkg-deb', ['-I', deb, 'conffiles'], { encoding: 'utf8' }).trim(), '/etc/browserd/browserd.conf', 'conffiles');

  const unitText = execFileSync('sh', ['-c', 'dpkg-deb --fsys-tarfile "$1" | tar -xO ./lib/systemd/system/browserd.service', 'sh', deb], { encoding: 'utf8' });
  const u = serviceOf(unitText);
  for (const k of Object.keys(u))
    assert(EMULATED.includes(k) || SUPERVISION.includes(k), `the test knows what the unit's ${k}= does`);
  eq([u.ExecStart, u.ProtectSystem, u.PrivateTmp, u.ProtectHome, u.NoNewPrivileges],
    ['/usr/bin/browserd serve', 'strict', 'yes', 'yes', 'yes'], 'the unit runs the installed binary, hardened');

  const host = () => ({
    pkg: (() => { try { execFileSync('dpkg-query', ['-W', 'browserd'], { stdio: 'ignore' }); return true; } catch { return false; } })(),
    files: ['/usr/bin/browserd', '/usr/lib/browserd', '/etc/browserd', '/var/lib/browserd', '/lib/systemd/system/browserd.service'].filter((f) => existsSync(f)),
  });
  const before = host();
  assert(!before.pkg && before.files.length === 0, `browserd is not installed on the host before the test: ${JSON.stringify(before)}`);

  const scratch = mkdtempSync('/tmp/browserd-deb-');
  const port = await freePort();
  let server;
  let out = '';
  try {
    server = spawn('unshare', ['--mount', '--propagation', 'private', 'sh', SETUP, scratch, deb, `127.0.0.1:${port}`], {
      env: {
        PATH: process.env.PATH,
        U_EXEC: u.ExecStart, U_ENVFILE: u.EnvironmentFile.replace(/^-/, ''), U_WORKDIR: u.WorkingDirectory,
        U_NOFILE: u.LimitNOFILE, U_UMASK: u.UMask || '0022', U_PROTECT_SYSTEM: u.ProtectSystem || '',
        U_RW_PATHS: u.ReadWritePaths || '', U_RUNTIME: u.RuntimeDirectory || '', U_RUNTIME_MODE: u.RuntimeDirectoryMode || '0755',
        U_PROTECT_HOME: u.ProtectHome || '', U_PRIVATE_TMP: u.PrivateTmp || '', U_NNP: u.NoNewPrivileges || '',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    server.stdout.on('data', (d) => { out += d; });
    server.stderr.on('data', (d) => { out += d; });
    const exited = new Promise((r) => server.once('exit', (code, sig) => r({ code, sig })));
    await Promise.race([
      waitFor(() => /listening on /.test(out), 'the installed server listening', 60000),
      exited.then((r) => { throw new Error(`install or start failed (${JSON.stringify(r)}):\n${out.slice(-4000)}`); }),
    ]);
    assert(/installed: browserd \S+ install ok installed/.test(out), `dpkg installed the package:\n${out.slice(-3000)}`);
    assert(/API key \(shown once; also in \/var\/lib\/browserd\/bootstrap-api-key\)/.test(out), `the data folder is /var/lib/browserd:\n${out.slice(-3000)}`);
    assert(!host().pkg && !existsSync('/usr/bin/browserd'), 'the install is not seen from the host');

    // The key, as the operator reads it: from the server's view of the file system.
    const key = readFileSync(`/proc/${server.pid}/root/var/lib/browserd/bootstrap-api-key`, 'utf8').trim();
    const base = `http://127.0.0.1:${port}`;
    let r = await request(base, 'GET', '/org/entitlements', { key });
    eq(r.status, 200, r.text);
    r = await request(base, 'POST', '/browsers', { key, body: { headless: true } });
    eq(r.status, 200, r.text);
    const b = r.json;
    assert(/^ws:\/\/127\.0\.0\.1:\d+\/browser\/cdp\?jwt=/.test(b.cdp_ws_url), r.text);
    // The tour's CDP call, through the relay.
    const cdp = execFileSync(process.execPath, ['scripts/cdp.mjs', b.cdp_ws_url, 'Runtime.evaluate', '{"expression":"6*7"}'], { encoding: 'utf8', timeout: 60000 });
    assert(/"value":42/.test(cdp), `the CDP call returned 42: ${cdp}`);
    // runtime-js found at its installed path (/usr/lib/browserd/runtime-js).
    r = await request(base, 'POST', `/browsers/${b.session_id}/playwright/execute`, { key, body: { code: 'return 6 * 7', timeout_sec: 60 } });
    eq([r.status, r.json && r.json.success, r.json && r.json.result], [200, true, 42], `playwright.execute: ${r.text}`);
    r = await request(base, 'DELETE', `/browsers/${b.session_id}`, { key });
    assert(r.status >= 200 && r.status < 300, `delete: ${r.status} ${r.text}`);

    // A clean stop by PID, as systemd's KillMode=mixed begins one (SIGTERM to the main process).
    process.kill(server.pid, 'SIGTERM');
    const end = await exited;
    eq(end.code, 0, `the server exits 0:\n${out.slice(-2000)}`);
    assert(/stopped cleanly/.test(out), `the server says it stopped cleanly:\n${out.slice(-2000)}`);
    server = null;
  } finally {
    if (server && server.exitCode === null && server.signalCode === null) {
      try { process.kill(server.pid, 'SIGTERM'); } catch { /* gone */ }
      await waitFor(() => server.exitCode !== null || server.signalCode !== null, 'the server ended', 60000)
        .catch(() => { try { process.kill(server.pid, 'SIGKILL'); } catch { /* gone */ } });
    }
    // The namespace (and its tmpfs) ends with its last process; the folder
    // it was mounted on is then an empty folder of the host's.
    await waitFor(() => { try { rmSync(scratch, { recursive: true, force: true }); return true; } catch { return false; } },
      'the scratch folder removed', 60000);
  }
  const after = host();
  assert(!after.pkg && after.files.length === 0, `nothing of the package is left on the host: ${JSON.stringify(after)}`);
}

export const tests = /asan|tsan/.test(BIN) || BIN !== 'build/browserd' && !BIN.endsWith('/build/browserd') ? [] : [
  { name: 'issue 37.4: make deb builds a package that dpkg installs (in a private mount namespace), whose hardened unit ExecStart serves the README tour (create, CDP, playwright.execute, delete) and stops cleanly, leaving nothing on the host', fn: installAndTour, timeout: 180000 },
];
