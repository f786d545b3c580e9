// Issue 15: every session a sandboxed machine. A tenant's CDP client (real
// Chromium, driven over the session's cdp_ws_url with Playwright and raw CDP
// calls) tries to leave its sandbox: file:// on the server's data folder,
// another session's folder and /etc/shadow, DOM.setFileInputFiles with host
// paths, fetch to the server's port, another session's DevTools port and the
// metadata address, and a look at /proc. Every attempt fails, while the same
// probes on the session's own files succeed (so a broken probe cannot pass).
// Then resources: a page past a 1GiB limit is killed and reported while a
// neighbour keeps answering; a fork loop is held at the pids limit; and after
// kill -9 of the server's whole process group nothing of its sessions remains.
import { spawn, execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { release, tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { BIN, startServer, startSite, request, assert, eq, waitFor, sessionCgroupDirs, sessionPids } from '../blackbox/lib.mjs';

const api = (s, method, path, body) => request(s.base, method, path, { key: s.key, body });

async function create(s, body = {}) {
  const r = await api(s, 'POST', '/browsers', { headless: true, ...body });
  eq(r.status, 200, `create: ${r.text}`);
  return r.json;
}

const until = (fn, what, ms = 15000) => waitFor(fn, what, ms, 100);

// The sandbox is on only for a root server with bwrap (docs/sandbox.md).
function sandboxed(s) {
  return /sandbox: on/.test(s.log);
}

async function withServer(fn, opts) {
  const s = await startServer(opts);
  try {
    assert(sandboxed(s), `the server runs sessions sandboxed:\n${s.log}`);
    await fn(s);
  } finally { await s.stop(); s.cleanup(); }
}

async function page(b) {
  const br = await chromium.connectOverCDP(b.cdp_ws_url);
  const ctx = br.contexts()[0];
  const pg = ctx.pages()[0] || await ctx.newPage();
  return { br, pg };
}

// Text of a file:// URL as the page sees it (a listing, a file, or Chromium's
// error page). An empty text means the read raced the navigation: read again.
async function fileText(pg, url) {
  for (let i = 0; i < 5; i++) {
    await pg.goto(url).catch(() => {});
    await pg.waitForLoadState('load').catch(() => {});
    const t = await pg.evaluate(() => document.body ? document.body.innerText : '').catch(() => '');
    if (t) return t;
  }
  return '';
}

function devtoolsPort(s, id) {
  const m = /DevTools listening on ws:\/\/127\.0\.0\.1:(\d+)\//.exec(readFileSync(join(s.dir, 'sessions', `${id}.log`), 'utf8'));
  assert(m, 'the browser log names its DevTools port');
  return Number(m[1]);
}

const cgroupDirs = sessionCgroupDirs;

// The session's browser process (its command line names /profile, not the
// host folder: issue 29.16), found in its cgroup.
function browserPid(s, id) {
  return sessionPids(s.dir, id).filter((p) => {
    try {
      const cmd = readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0');
      return cmd[0] === '/usr/lib/chromium/chromium' && !cmd.some((a) => a.startsWith('--type='));
    } catch { return false; }
  });
}

function pids(pattern) {
  try { return execFileSync('pgrep', ['-f', '--', pattern], { encoding: 'utf8' }).split('\n').filter(Boolean).map(Number); } catch { return []; }
}

export const tests = [
  {
    name: 'issue 15 filesystem: file:// reaches the session\'s own home but not the data folder, the bootstrap key, another session\'s folder, /etc/shadow or /root',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const a = await create(s);
      const b = await create(s);
      const { br, pg } = await page(a);
      try {
        // Control: the session's own home is there, at /profile (issue 29.16), not at its host path.
        const own = await fileText(pg, 'file:///profile/');
        assert(/Default\//.test(own), `the session sees its own home:\n${own.slice(0, 300)}`);
        const ownHost = await fileText(pg, `file://${s.dir}/sessions/${a.session_id}/`);
        assert(!/Default\//.test(ownHost), `the home's host path is not listed:\n${ownHost.slice(0, 300)}`);
        const key = await fileText(pg, `file://${s.dir}/bootstrap-api-key`);
        assert(!key.includes(s.key), 'the bootstrap key is not readable');
        const data = await fileText(pg, `file://${s.dir}/`);
        assert(!/bootstrap-api-key|browserd\.db/.test(data), `the data folder is not listed:\n${data.slice(0, 300)}`);
        const other = await fileText(pg, `file://${s.dir}/sessions/${b.session_id}/`);
        assert(!/Default\//.test(other), `another session's folder is not listed:\n${other.slice(0, 300)}`);
        const shadow = await fileText(pg, 'file:///etc/shadow');
        assert(!/root:/.test(shadow), '/etc/shadow is not readable');
        const root = await fileText(pg, 'file:///root/');
        assert(!/\.bashrc|\.profile/.test(root), `/root is not listed:\n${root.slice(0, 200)}`);
        const etc = await fileText(pg, 'file:///etc/');
        assert(/fonts\//.test(etc) && !/passwd|shadow|hostname/.test(etc), `/etc holds only what the browser needs:\n${etc}`);
      } finally { await br.close(); }
    }),
  },
  {
    name: 'issue 15 filesystem: DOM.setFileInputFiles with a host path uploads nothing; a file in the session\'s home uploads',
    timeout: 60000,
    fn: async () => {
      const site = await startSite((rq, rs) => { rs.setHeader('content-type', 'text/html'); rs.end('<input type=file id=f>'); });
      try {
        await withServer(async (s) => {
          const a = await create(s);
          const home = join(s.dir, 'sessions', a.session_id);
          writeFileSync(join(home, 'probe.txt'), 'mine');
          chmodSync(join(home, 'probe.txt'), 0o644);
          const { br, pg } = await page(a);
          try {
            await pg.goto(`${site.url}/`);
            const cdp = await pg.context().newCDPSession(pg);
            const read = async (path) => {
              const { root } = await cdp.send('DOM.getDocument', {});
              const { nodeId } = await cdp.send('DOM.querySelector', { nodeId: root.nodeId, selector: '#f' });
              await cdp.send('DOM.setFileInputFiles', { nodeId, files: [path] });
              return pg.evaluate(() => document.getElementById('f').files[0].text().then((t) => `ok:${t}`, (e) => `error:${e.name}`));
            };
            eq(await read('/profile/probe.txt'), 'ok:mine', 'a file of the session uploads');
            const hostPath = await read(join(home, 'probe.txt'));
            assert(hostPath.startsWith('error:'), `the home's host path names nothing: ${hostPath}`);
            const got = await read(join(s.dir, 'bootstrap-api-key'));
            assert(!got.includes(s.key) && got.startsWith('error:'), `the server's key does not upload: ${got}`);
            const shadow = await read('/etc/shadow');
            assert(shadow.startsWith('error:'), `/etc/shadow does not upload: ${shadow}`);
          } finally { await br.close(); }
        }, { args: site.allow });
      } finally { site.close(); }
    },
  },
  {
    name: 'issue 15 filesystem: per-session chrome_policy keeps working inside the sandbox, and only for its own session (URLBlocklist)',
    timeout: 60000,
    fn: async () => {
      const site = await startSite((rq, rs) => { rs.setHeader('content-type', 'text/html'); rs.end(`<title>${rq.url}</title>ok`); });
      try {
        await withServer(async (s) => {
          const blocked = await create(s, { chrome_policy: { URLBlocklist: [`${site.hostport}/blocked`] } });
          const free = await create(s);
          const load = async (b) => {
            const { br, pg } = await page(b);
            try {
              const r = await pg.goto(`${site.url}/blocked`).then(() => 'loaded', (e) => String(e.message));
              return r;
            } finally { await br.close(); }
          };
          const got = await load(blocked);
          assert(/ERR_BLOCKED_BY_ADMINISTRATOR/.test(got), `the policy blocks the URL in its session: ${got}`);
          eq(await load(free), 'loaded', 'another session is not affected');
        }, { args: site.allow });
      } finally { site.close(); }
    },
  },
  {
    name: 'issue 15 network: a page cannot reach the server\'s port, another session\'s DevTools port or 169.254.169.254; an allowed site still loads',
    timeout: 60000,
    fn: async () => {
      const site = await startSite((rq, rs) => { rs.setHeader('content-type', 'text/html'); rs.end('<title>t</title>allowed'); });
      try {
        await withServer(async (s) => {
          const a = await create(s);
          const b = await create(s);
          const bport = devtoolsPort(s, b.session_id);
          const { br, pg } = await page(a);
          try {
            await pg.goto(`${site.url}/`);
            eq(await pg.evaluate(() => document.body.innerText), 'allowed', 'the allowed site loads (control)');
            const probe = (url) => pg.evaluate((u) => fetch(u).then(async (r) => `status:${r.status}:${(await r.text()).slice(0, 200)}`, (e) => `error:${e.message}`), url);
            for (const url of [`http://127.0.0.1:${s.port}/org/entitlements`, `http://127.0.0.1:${bport}/json/version`,
              'http://169.254.169.254/latest/meta-data/', `http://localhost:${s.port}/`]) {
              const got = await probe(url);
              assert(!/"Browser"|webSocketDebuggerUrl|"code":"unauthorized"|ami-id/.test(got), `${url} is unreachable: ${got}`);
              assert(/^error:|^status:(403|502|503)/.test(got), `${url} is refused: ${got}`);
            }
          } finally { await br.close(); }
          // The sandbox's own loopback holds only its own browser: b's port is not there.
          const pid = browserPid(s, a.session_id)[0];
          const listening = (table) => table.split('\n').slice(1).map((l) => l.trim().split(/\s+/))
            .filter((f) => f[3] === '0A').map((f) => parseInt(f[1].split(':')[1], 16));
          const inside = listening(execFileSync('nsenter', ['-t', String(pid), '-n', 'cat', '/proc/net/tcp'], { encoding: 'utf8' }));
          assert(inside.length > 0, 'the session\'s namespace has its own listeners (its DevTools port, its egress)');
          assert(!inside.includes(s.port), `the server's port is not in the session's namespace: ${inside}`);
          assert(!inside.includes(bport) || devtoolsPort(s, a.session_id) === bport, `another session's DevTools port is not in it: ${inside}`);
        }, { args: site.allow });
      } finally { site.close(); }
    },
  },
  {
    name: 'issue 15 network: a port number inside a session\'s namespace (its DevTools) does not hide the same port of an allowed host site',
    timeout: 60000,
    fn: async () => {
      const site = await startSite((rq, rs) => { rs.setHeader('content-type', 'text/html'); rs.end('<title>t</title>reachable'); });
      const port = Number(site.hostport.split(':')[1]);
      try {
        // The browser's DevTools takes the site's port number inside its own namespace.
        await withServer(async (s) => {
          const a = await create(s);
          eq(devtoolsPort(s, a.session_id), port, 'DevTools on the same number, in the namespace');
          const { br, pg } = await page(a);
          try {
            await pg.goto(`${site.url}/`);
            eq(await pg.evaluate(() => document.body.innerText), 'reachable', 'the host site is not refused as "a port of this server"');
          } finally { await br.close(); }
        }, { args: site.allow, env: { BROWSERD_CHROMIUM_EXTRA_ARGS: `--remote-debugging-port=${port}` } });
      } finally { site.close(); }
    },
  },
  {
    name: 'issue 15 identity: the browser runs as an unprivileged uid of its own, with Chromium\'s sandbox on, in its own PID namespace (/proc shows only it)',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const a = await create(s);
      const b = await create(s);
      const pa = browserPid(s, a.session_id);
      const pb = browserPid(s, b.session_id);
      assert(pa.length && pb.length, 'both browsers found');
      const uid = (pid) => Number(/Uid:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
      assert(uid(pa[0]) !== 0 && uid(pa[0]) !== process.getuid(), `not root, not the server's user: ${uid(pa[0])}`);
      assert(uid(pa[0]) !== uid(pb[0]), 'each session has its own uid');
      // Renderers run under seccomp (Chromium's sandbox), as the session's user.
      const { br, pg } = await page(a);
      try {
        const renderers = pids(`type=renderer.*`).filter((p) => { try { return uid(p) === uid(pa[0]); } catch { return false; } });
        assert(renderers.length > 0, 'a renderer of the session');
        assert(/Seccomp:\s+2/.test(readFileSync(`/proc/${renderers[0]}/status`, 'utf8')), 'the renderer is under seccomp-bpf');
        const proc = await fileText(pg, 'file:///proc/');
        const nums = proc.split('\n').map((l) => /^(\d+)\//.exec(l)).filter(Boolean).map((m) => Number(m[1]));
        assert(nums.length > 0 && nums.length < 60, `only the session's processes: ${nums}`);
        assert(!nums.includes(process.pid) || process.pid < 60, 'the test runner is not visible');
        const one = await fileText(pg, 'file:///proc/1/cmdline');
        assert(!/systemd|init|browserd serve/.test(one), `PID 1 is the sandbox's own: ${one}`);
      } finally { await br.close(); }
    }),
  },
  {
    name: 'issue 15 resources: a page past a 1GiB session\'s memory is killed and reported (system_oom_kill) while a neighbour session keeps answering',
    timeout: 90000,
    fn: () => withServer(async (s) => {
      const hog = await create(s, { memory: '1GiB', telemetry: { enabled: true } });
      const neighbour = await create(s);
      const cg = cgroupDirs(hog.session_id);
      assert(cg.length > 0, 'the session has a cgroup');
      const { br, pg } = await page(hog);
      try {
        await pg.evaluate(async () => {
          const a = [];
          for (let i = 0; i < 64; i++) { a.push(new Uint8Array(64 << 20).fill(1)); await new Promise((r) => setTimeout(r, 5)); }
          return a.length;
        }).then(() => { throw new Error('the page allocated 4 GiB inside a 1 GiB session'); }, () => {});
      } finally { await br.close().catch(() => {}); }
      const ev = await until(async () => {
        const r = await api(s, 'GET', `/browsers/${hog.session_id}/telemetry/events`);
        const list = (r.json && (r.json.events || r.json.data || r.json)) || [];
        return (Array.isArray(list) ? list : []).map((e) => e.event || e).find((e) => e.type === 'system_oom_kill');
      }, 'a system_oom_kill event');
      eq(ev.category, 'system', 'category');
      assert(ev.data && ev.data.pid > 0 || ev.data.process_name, `the event names the killed process: ${JSON.stringify(ev)}`);
      // The neighbour never noticed.
      const { br: br2, pg: pg2 } = await page(neighbour);
      try { eq(await pg2.evaluate(() => 6 * 7), 42, 'the neighbour answers'); } finally { await br2.close(); }
    }),
  },
  {
    name: 'issue 15 resources: a fork loop inside a session\'s sandbox is held at its pids limit, and ends with the session',
    timeout: 90000,
    fn: async () => {
      // A test helper starts the loop inside the sandbox: a wrapper given as
      // --chromium (bound read-only into the sandbox) forks, then execs Chromium.
      const dir = mkdtempSync(join(tmpdir(), 'browserd-forkloop-'));
      const wrapper = join(dir, 'chromium-forkloop');
      writeFileSync(wrapper, `#!/bin/sh
[ "$1" = --version ] && exec /usr/bin/chromium --version
( sleep 1; i=0; while [ $i -lt 6000 ]; do sleep 77.5 & i=$((i+1)); done ) >/dev/null 2>&1 &
exec /usr/bin/chromium "$@"
`);
      chmodSync(dir, 0o755);
      chmodSync(wrapper, 0o755);
      try {
        await withServer(async (s) => {
          const a = await create(s);
          const cg = cgroupDirs(a.session_id).find((d) => existsSync(join(d, 'pids.max')));
          assert(cg, 'a pids cgroup');
          const max = Number(readFileSync(join(cg, 'pids.max'), 'utf8'));
          assert(max > 0 && max <= 4096, `a pids limit: ${max}`);
          await until(() => Number(readFileSync(join(cg, 'pids.events'), 'utf8').split(/\s+/)[1]) > 0, 'forks refused at the limit', 60000);
          assert(Number(readFileSync(join(cg, 'pids.current'), 'utf8')) <= max, 'never above the limit');
          eq((await api(s, 'DELETE', `/browsers/${a.session_id}`)).status, 204);
          await until(() => pids('^sleep 77.5').length === 0, 'the loop\'s processes gone');
          await until(() => cgroupDirs(a.session_id).length === 0, 'the cgroup removed');
        }, { args: ['--chromium', wrapper] });
      } finally { rmSync(dir, { recursive: true, force: true }); }
    },
  },
  {
    name: 'issue 21 cold creates: on cgroup v1 (Linux 6.0+) the server holds a cgroup hierarchy with favordynmods (a session\'s migration into its cgroups skips the grace period) in a mount namespace of its own: not in the host\'s mount table, and gone once the server ends',
    timeout: 60000,
    fn: async () => {
      const major = Number(release().split('.')[0]);
      const v1 = existsSync('/sys/fs/cgroup/memory/cgroup.procs');
      const held = () => /^\d+:name=browserd:/m.test(readFileSync('/proc/self/cgroup', 'utf8'));
      await until(() => !held(), 'no earlier server (or its watcher) holds the hierarchy', 15000);
      await withServer(async (s) => {
        if (!v1 || major < 6) {
          assert(!held(), 'no hierarchy where the kernel or the cgroup version does not take it');
          return;
        }
        assert(/cgroup v1 migrations without a grace period \(favordynmods\)/.test(s.log), `the server says it holds it:\n${s.log}`);
        assert(held(), 'the named hierarchy exists while the server runs');
        assert(!/name=browserd/.test(readFileSync('/proc/self/mountinfo', 'utf8')), 'the host\'s mount table does not show it');
        const b = await create(s, { headless: true });
        eq((await request(s.base, 'DELETE', `/browsers/${b.session_id}`, { key: s.key })).status, 204, 'a session runs and ends with it');
      });
      await until(() => !held(), 'the hierarchy gone once the server (and its watcher) ended', 15000);
    },
  },
  {
    name: 'issue 15 teardown: after kill -9 of the server\'s whole process group (the watcher included), no process or cgroup of its sessions remains',
    timeout: 90000,
    fn: async () => {
      const dir = mkdtempSync(join(tmpdir(), 'browserd-bb-'));
      const proc = spawn(BIN, ['serve', '--listen', '127.0.0.1:0', '--data', dir], {
        env: { ...process.env, BROWSERD_LOG_LEVEL: 'info' }, stdio: ['ignore', 'ignore', 'pipe'], detached: true,
      });
      let log = '';
      proc.stderr.on('data', (d) => { log += d; });
      let all = [];
      const alive = (p) => { try { return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${p}/stat`, 'utf8')); } catch { return false; } };
      try {
        const port = await until(() => { const m = /listening on [^ ]*:(\d+) /.exec(log); return m && Number(m[1]); }, 'the server listening');
        const s = { base: `http://127.0.0.1:${port}`, key: readFileSync(join(dir, 'bootstrap-api-key'), 'utf8').trim() };
        const ids = [];
        for (const body of [{ headless: true }, { headless: true }, { headless: false }]) ids.push((await create(s, body)).session_id);
        all = ids.flatMap((id) => sessionPids(dir, id));
        assert(all.length > 5, 'the sessions run');
        process.kill(-proc.pid, 'SIGKILL');
        await until(() => !all.some(alive), `no process of the sessions left (${all.filter(alive)})`, 15000);
        await until(() => ids.every((id) => cgroupDirs(id).length === 0), 'no cgroup of the sessions left', 15000);
      } finally {
        try { process.kill(-proc.pid, 'SIGKILL'); } catch { /* gone */ }
        for (const p of all.filter(alive)) { try { process.kill(p, 'SIGKILL'); } catch { /* gone */ } }
        rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
      }
    },
  },
];
