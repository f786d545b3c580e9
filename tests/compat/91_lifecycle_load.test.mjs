// The session lifecycle on a busy host (issue 30): the same outcomes as on an
// idle machine while stress-ng keeps both cores busy and the page cache under
// pressure (withLoad). Outcomes only (the cookie is there, the storage is
// empty, nothing is left behind), never times. Pages are served by the test
// itself on 127.0.0.1.
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
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
const spareIds = (dir) => readdirSync(`${dir}/sessions`).filter((f) => f.endsWith('.spare')).map((f) => f.slice(0, -6));

// Mounts under the server's data folder (the sessions' tmpfs).
const mountsOf = (dir) => readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter((l) => l.includes(`${dir}/`));

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
    name: 'issue 30.5: a server with sessions and spares killed with SIGKILL on a busy host: the watcher takes down its sessions\' mounts and removes every cgroup',
    timeout: 240000,
    fn: async () => {
      const s = await startServer({ env: { BROWSERD_SPARES: '2' } });
      let killed = false;
      try {
        const ids = [];
        for (let i = 0; i < 2; i++) ids.push((await create(s)).session_id);
        assert(mountsOf(s.dir).length > 0, 'the sessions have their mounts');
        await withLoad(async () => {
          ids.push(...spareIds(s.dir));
          await s.kill9();
          killed = true;
          await waitFor(() => mountsOf(s.dir).length === 0, 'the mounts gone', 60000, 250);
          await waitFor(() => ids.every((id) => sessionCgroupDirs(id).length === 0), 'the cgroups gone', 120000, 250);
        });
        await waitFor(() => browsersOf(s.dir).length === 0, 'no browser process', 60000, 250);
      } finally { if (!killed) await s.stop(); s.cleanup(); }
    },
  },
];
