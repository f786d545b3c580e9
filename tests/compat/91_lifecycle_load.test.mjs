// The session lifecycle on a busy host (issue 30): the same outcomes as on an
// idle machine while stress-ng keeps both cores busy and the page cache under
// pressure (withLoad). Outcomes only (the cookie is there, the storage is
// empty, nothing is left behind), never times. Pages are served by the test
// itself on 127.0.0.1.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, rmdirSync } from 'node:fs';
import { chromium } from 'playwright-core';
import { startServer, startSite, request, assert, eq, waitFor, withLoad, sessionCgroupDirs } from '../blackbox/lib.mjs';

const api = (s, method, path, body, key = s.key) => request(s.base, method, path, { key, body });

async function create(s, body = {}) {
  const r = await api(s, 'POST', '/browsers', { headless: true, ...body });
  eq(r.status, 200, `create session: ${r.text}`);
  return r.json;
}

// A loopback site: /set stores a persistent cookie and every kind of origin
// storage; other paths are an empty page.
async function site() {
  return startSite((rq, rs) => {
    rs.setHeader('content-type', 'text/html');
    if (rq.url.startsWith('/set')) rs.setHeader('set-cookie', 'saved=cookie-value; Max-Age=86400; Path=/');
    rs.end('<title>page</title>');
  });
}

// Opens url in a page of the browser and runs fn there; then disconnects.
async function inPage(wsUrl, url, fn, arg) {
  const browser = await chromium.connectOverCDP(wsUrl);
  try {
    const ctx = browser.contexts()[0];
    const page = ctx.pages()[0] || await ctx.newPage();
    await page.goto(url, { timeout: 60000 });
    return await page.evaluate(fn, arg);
  } finally { await browser.close(); }
}

// Every kind of storage an origin has, written by the page.
async function fillStorage() {
  localStorage.setItem('saved', 'ls-value');
  sessionStorage.setItem('saved', 'ss-value');
  await new Promise((res, rej) => {
    const q = indexedDB.open('db1', 1);
    q.onupgradeneeded = () => q.result.createObjectStore('st');
    q.onsuccess = () => { q.result.close(); res(); };
    q.onerror = () => rej(q.error);
  });
  await (await caches.open('cache1')).put('/x', new Response('kept'));
  return true;
}

// What of it a page of the origin sees.
async function readStorage() {
  return {
    cookie: document.cookie,
    local: localStorage.length,
    session: sessionStorage.length,
    idb: (await indexedDB.databases()).length,
    caches: (await caches.keys()).length,
  };
}

// Processes whose command line names a session folder of the server.
function browsersOf(dir) {
  try { return execFileSync('pgrep', ['-f', `${dir}/sessions/`]).toString().trim().split('\n').filter(Boolean); } catch { return []; }
}

// The spares of the server now (their marker files, sessions/ID.spare).
const spareIds = (dir) => (existsSync(`${dir}/sessions`) ? readdirSync(`${dir}/sessions`) : []).filter((f) => f.endsWith('.spare')).map((f) => f.slice(0, -6));

// Mounts under the server's data folder (the sessions' tmpfs).
const mountsOf = (dir) => readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter((l) => l.includes(`${dir}/`));

// The state letter and start time (clock ticks since boot) of a process, or
// null once it is gone.
function procStat(pid) {
  try {
    const st = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
    return { state: f[0], start: f[19] };
  } catch { return null; }
}

// The crash watcher of the server whose pid is given (runtime/reaper.c): the
// child the server's main thread forks at start, named browserd-reaper, the
// one that outlives a SIGKILL of the server. {pid, start}, or null.
function watcherOf(pid) {
  const kids = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
  for (const k of kids) {
    let comm = '';
    try { comm = readFileSync(`/proc/${k}/comm`, 'utf8').trim(); } catch { continue; }
    if (comm === 'browserd-reaper') return { pid: Number(k), start: procStat(k).start };
  }
  return null;
}

// Whether that process still runs (not exited, not a zombie, not a newcomer
// that reused its pid).
function isRunning(p) {
  const st = procStat(p.pid);
  return !!st && st.start === p.start && st.state !== 'Z' && st.state !== 'X';
}

// What a failed run left of the test's own sessions' cgroups: their tasks
// killed, the folders removed (bounded), so that no failure leaks them.
async function removeLeftCgroups(dirs) {
  const left = () => dirs.filter((d) => existsSync(d));
  await waitFor(() => {
    for (const d of left()) {
      try {
        for (const pid of readFileSync(`${d}/cgroup.procs`, 'utf8').split('\n').filter(Boolean)) {
          try { process.kill(Number(pid), 'SIGKILL'); } catch { /* gone */ }
        }
        rmdirSync(d);
      } catch { /* still busy: the next round */ }
    }
    return left().length === 0;
  }, 'the leftover cgroups of a failed run removed', 60000, 50).catch(() => {});
}

export const tests = [
  {
    name: 'issue 30.1: a session with profile save_changes deleted on a busy host saves its cookie and localStorage; the next session with the profile sees both',
    timeout: 240000,
    fn: async () => {
      const w = await site();
      const s = await startServer({ args: w.allow });
      try {
        eq((await api(s, 'POST', '/profiles', { name: 'busy' })).status, 200, 'create the profile');
        const b1 = await create(s, { profile: { name: 'busy', save_changes: true } });
        await inPage(b1.cdp_ws_url, `${w.url}/set`, () => { localStorage.setItem('saved', 'ls-value'); return true; });
        await withLoad(async () => {
          eq((await api(s, 'DELETE', `/browsers/${b1.session_id}`)).status, 204, 'delete');
        });
        const ended = await api(s, 'GET', `/browsers/${b1.session_id}?include_deleted=true`);
        assert(ended.json.deleted_at, 'the session ended');
        const b2 = await create(s, { profile: { name: 'busy' } });
        const got = await inPage(b2.cdp_ws_url, `${w.url}/read`, () => ({ cookie: document.cookie, ls: localStorage.getItem('saved') }));
        eq(got, { cookie: 'saved=cookie-value', ls: 'ls-value' }, 'the saved state');
        eq((await api(s, 'DELETE', `/browsers/${b2.session_id}`)).status, 204);
      } finally { await s.stop(); s.cleanup(); w.close(); }
    },
  },
  {
    name: 'issue 30.2: a pool browser released with reuse:true on a busy host keeps nothing of the last lease (cookies, local, session, IndexedDB and Cache Storage of every origin it showed, permissions, tabs)',
    timeout: 240000,
    fn: async () => {
      const a = await site(), b = await site();
      const s = await startServer({ args: [...a.allow, ...b.allow] });
      try {
        const p = (await api(s, 'POST', '/browser_pools', { headless: true, size: 1, fill_rate_per_minute: 6000 })).json;
        await waitFor(async () => (await api(s, 'GET', `/browser_pools/${p.id}`)).json.available_count === 1, 'the pool filled', 60000);
        let r = await api(s, 'POST', `/browser_pools/${p.id}/acquire`, {});
        eq(r.status, 200, `acquire: ${r.text}`);
        const browser = await chromium.connectOverCDP(r.json.cdp_ws_url);
        try {
          const ctx = browser.contexts()[0];
          await ctx.grantPermissions(['geolocation'], { origin: a.url });
          // Origin a in the history of a tab that moved on to b; b in a second tab.
          const page = ctx.pages()[0] || await ctx.newPage();
          await page.goto(`${a.url}/set`);
          eq(await page.evaluate(fillStorage), true, 'origin a filled');
          await page.goto(`${b.url}/set`);
          eq(await page.evaluate(fillStorage), true, 'origin b filled');
          const tab = await ctx.newPage();
          await tab.goto(`${b.url}/other`);
        } finally { await browser.close(); }
        await withLoad(async () => {
          eq((await api(s, 'POST', `/browser_pools/${p.id}/release`, { session_id: r.json.session_id, reuse: true })).status, 204, 'release');
          // The same browser, cleaned, or a new one in its place.
          r = await api(s, 'POST', `/browser_pools/${p.id}/acquire`, { acquire_timeout_seconds: 120 });
          eq(r.status, 200, `acquire again: ${r.text}`);
        });
        const next = await chromium.connectOverCDP(r.json.cdp_ws_url);
        try {
          const ctx = next.contexts()[0];
          eq(ctx.pages().length, 1, 'one tab');
          eq((await ctx.cookies()).length, 0, 'no cookies');
          const page = ctx.pages()[0];
          for (const o of [a, b]) {
            await page.goto(`${o.url}/read`);
            eq(await page.evaluate(readStorage), { cookie: '', local: 0, session: 0, idb: 0, caches: 0 }, `the storage of ${o.url}`);
          }
          await page.goto(`${a.url}/read`);
          eq(await page.evaluate(async () => (await navigator.permissions.query({ name: 'geolocation' })).state), 'prompt', 'permissions reset');
        } finally { await next.close(); }
      } finally { await s.stop(); s.cleanup(); a.close(); b.close(); }
    },
  },
  {
    name: 'issue 30.3: a server stopped on a busy host with live sessions and spares saves the profile of the one that keeps it and ends every browser: no process, no cgroup, nothing "survived the kill"',
    timeout: 240000,
    fn: async () => {
      const w = await site();
      let s = await startServer({ env: { BROWSERD_SPARES: '2' }, args: w.allow });
      const dir = s.dir;
      let stopped = false;
      try {
        eq((await api(s, 'POST', '/profiles', { name: 'at-stop' })).status, 200, 'create the profile');
        const keeper = await create(s, { profile: { name: 'at-stop', save_changes: true } });
        await inPage(keeper.cdp_ws_url, `${w.url}/set`, () => { localStorage.setItem('saved', 'ls-value'); return true; });
        const ids = [keeper.session_id];
        for (let i = 0; i < 2; i++) ids.push((await create(s)).session_id);
        await withLoad(async () => {
          ids.push(...spareIds(dir));
          await s.stop();
          stopped = true;
          await waitFor(() => browsersOf(dir).length === 0, 'no browser process of the server', 60000, 250);
          await waitFor(() => ids.every((id) => sessionCgroupDirs(id).length === 0), 'the cgroups gone', 60000, 250);
        });
        assert(!/survived the kill/.test(s.log), `a kill failed:\n${s.log.split('\n').filter((l) => /survived/.test(l)).join('\n')}`);
        s = await startServer({ dataDir: dir, args: w.allow });
        stopped = false;
        const next = await create(s, { profile: { name: 'at-stop' } });
        const got = await inPage(next.cdp_ws_url, `${w.url}/read`, () => ({ cookie: document.cookie, ls: localStorage.getItem('saved') }));
        eq(got, { cookie: 'saved=cookie-value', ls: 'ls-value' }, 'the state saved at the stop');
      } finally { if (!stopped) await s.stop(); s.cleanup(); w.close(); }
    },
  },
  {
    name: 'issue 30.5: a server with sessions and spares killed with SIGKILL on a busy host: its watcher takes down the sessions\' mounts before it removes any of their cgroups, and by the time it exits (nothing removes them after it) every mount and every cgroup folder is gone',
    timeout: 300000,
    fn: async () => {
      const s = await startServer({ env: { BROWSERD_SPARES: '2' } });
      let killed = false;
      let cgdirs = [];
      try {
        // A spare waits in the background CPU class (docs/spares.md); the
        // sessions are launched cold (a viewport no spare has), beside it.
        await waitFor(() => spareIds(s.dir).length >= 1, 'a spare ready', 120000, 100);
        const ids = [];
        const made = [];
        for (let i = 0; i < 2; i++) made.push(await create(s, { viewport: { width: 1024, height: 768 } }));
        ids.push(...made.map((b) => b.session_id));
        assert(mountsOf(s.dir).length > 0, 'the sessions have their mounts');
        // The last session holds a gigabyte: its processes take longer to
        // exit than the others', as a busy session's do.
        eq(await inPage(made[1].cdp_ws_url, 'about:blank', () => {
          window.keep = [];
          for (let i = 0; i < 128; i++) { const b = new Uint8Array(8 << 20); for (let j = 0; j < b.length; j += 4096) b[j] = 1; window.keep.push(b); }
          return window.keep.length;
        }), 128, 'the last session filled a gigabyte');
        const w = watcherOf(s.proc.pid);
        assert(w, 'the server has its watcher (browserd-reaper)');
        let early = null;
        await withLoad(async () => {
          ids.push(...spareIds(s.dir));
          cgdirs = ids.flatMap(sessionCgroupDirs);
          assert(cgdirs.length > ids.length, `the sessions have their cgroups: ${cgdirs}`);
          await s.kill9();
          killed = true;
          // Sampled until the watcher has exited: a cgroup folder removed
          // while a mount of the sessions is still up is the old order.
          await waitFor(() => {
            const alive = isRunning(w);
            if (!early) {
              const mounts = mountsOf(s.dir);
              const gone = cgdirs.filter((d) => !existsSync(d));
              if (mounts.length && gone.length) early = { gone, mounts: mounts.length };
            }
            return !alive;
          }, 'the watcher to exit', 240000, 2);
        });
        assert(!early, `cgroups were removed while ${early && early.mounts} mount(s) of the sessions were still up: ${early && early.gone.join(' ')}`);
        eq(mountsOf(s.dir), [], 'no mount of the sessions left when the watcher exited');
        eq(cgdirs.filter((d) => existsSync(d)), [], 'no cgroup folder of the sessions left when the watcher exited');
      } finally {
        if (!killed) await s.stop();
        await removeLeftCgroups(cgdirs);
        s.cleanup();
      }
    },
  },
];
