// Browser sessions on real Chromium (issue 4), driven by real clients through
// cdp_ws_url: Playwright connectOverCDP and Puppeteer connect. Pages are served
// by the test itself on 127.0.0.1.
import http from 'node:http';
import { existsSync, readFileSync } from 'node:fs';
import { chromium } from 'playwright-core';
import puppeteer from 'puppeteer-core';
import { startServer, startSite, request, assert, eq, isError, waitFor, sessionPids } from '../blackbox/lib.mjs';

// A loopback site: / has a button that changes the heading when clicked.
function site() {
  return startSite((rq, rs) => {
    rs.setHeader('content-type', 'text/html');
    if (rq.url.startsWith('/other')) return rs.end('<title>other</title><h1>other page</h1>');
    rs.end(`<title>home</title><h1 id="h">before</h1>
      <button id="b" onclick="document.getElementById('h').textContent='clicked'">go</button>
      <input id="i">`);
  });
}

// Spare browsers on (issue 21): every create of this suite must also pass when a
// spare serves it (and when none is ready yet, a cold launch).
async function withServer(fn, opts = {}) {
  const s = await startServer({ ...opts, env: { BROWSERD_SPARES: '2', ...(opts.env || {}) } });
  try { await fn(s); } finally { await s.stop(); s.cleanup(); }
}

// A server whose pages may reach a fresh loopback site (--allow-loopback).
async function withSite(fn, opts = {}) {
  const w = await site();
  try {
    await withServer((s) => fn(s, w), { ...opts, args: [...(opts.args || []), ...w.allow] });
  } finally { w.close(); }
}

const api = (s, method, path, body, key = s.key) => request(s.base, method, path, { key, body });

async function create(s, body = {}) {
  const r = await api(s, 'POST', '/browsers', { headless: true, ...body });
  eq(r.status, 200, `create: ${r.text}`);
  return r.json;
}

const until = (fn, what, ms = 10000) => waitFor(fn, what, ms, 100);

function alive(pid) {
  try { process.kill(pid, 0); return true; } catch { return false; }
}

// Running and not a zombie (an orphan's zombie waits for PID 1 to reap it).
function running(pid) {
  try { return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8')); } catch { return false; }
}

// Kills the process groups of the given pids (by group id), for cleanup.
function killGroups(pids) {
  for (const p of pids) {
    try {
      const pgid = Number(readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1].split(' ')[2]);
      if (pgid > 1) process.kill(-pgid, 'SIGKILL');
    } catch { /* gone */ }
  }
}

// The pids of the session's processes (lib.mjs: its cgroup, or its folder).
const browserPids = sessionPids;

export const tests = [
  {
    name: 'Browser record: every required field of the interface document, optional ones omitted when they do not apply',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const b = await create(s, { name: 'rec-1', tags: { team: 'a' } });
      for (const f of ['session_id', 'created_at', 'cdp_ws_url', 'webdriver_ws_url', 'region', 'stealth', 'headless', 'memory', 'timeout_seconds'])
        assert(f in b, `required field ${f} missing`);
      assert(/^[a-z0-9]{24}$/.test(b.session_id), `id shape ${b.session_id}`);
      assert(/^ws:\/\/127\.0\.0\.1:\d+\/browser\/cdp\?jwt=[\w-]+\.[\w-]+\.[\w-]+$/.test(b.cdp_ws_url), b.cdp_ws_url);
      assert(!Number.isNaN(Date.parse(b.created_at)), 'created_at is RFC 3339');
      eq(b.region, 'us-east'); eq(b.headless, true); eq(b.stealth, false); eq(b.timeout_seconds, 60);
      eq(b.name, 'rec-1'); eq(b.tags, { team: 'a' });
      eq(b.viewport, { width: 1920, height: 1080, refresh_rate: 25 }, 'image default viewport');
      assert(!('deleted_at' in b) && !('usage_status' in b), 'deleted_at/usage_status only on deleted sessions');
      assert(!('profile' in b) && !('profile_save_changes' in b) && !('pool' in b), 'no profile/pool fields');
      eq(b.telemetry, null);
      eq(typeof b.usage.uptime_ms, 'number');
      eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204);
    }),
  },
  {
    name: 'Playwright connectOverCDP(cdp_ws_url) opens a loopback page, clicks a button, types, reads the DOM, takes a screenshot',
    timeout: 90000,
    fn: () => withSite(async (s, w) => {
      const b = await create(s);
      const browser = await chromium.connectOverCDP(b.cdp_ws_url);
      try {
        const ctx = browser.contexts()[0];
        const page = ctx.pages()[0] || await ctx.newPage();
        await page.goto(w.url);
        await page.click('#b');
        eq(await page.textContent('#h'), 'clicked');
        await page.fill('#i', 'typed');
        eq(await page.inputValue('#i'), 'typed');
        const png = await page.screenshot();
        eq(png.subarray(1, 4).toString(), 'PNG');
      } finally {
        await browser.close();
      }
      eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204);
    }),
  },
  {
    name: 'Puppeteer connect({browserWSEndpoint}) and a second client attached to the same session at once',
    timeout: 90000,
    fn: () => withSite(async (s, w) => {
      const b = await create(s);
      const pw = await chromium.connectOverCDP(b.cdp_ws_url);
      const pp = await puppeteer.connect({ browserWSEndpoint: b.cdp_ws_url, defaultViewport: null });
      try {
        const page = await pp.newPage();
        await page.goto(`${w.url}/other`);
        eq(await page.title(), 'other');
        // The Playwright client sees the page Puppeteer opened.
        await until(() => pw.contexts()[0].pages().some((p) => p.url().endsWith('/other')), 'page seen by both clients');
      } finally {
        pp.disconnect();
        await pw.close();
      }
      eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204);
    }),
  },
  {
    name: 'CDP relay: a client reconnects after a drop and finds the same browser',
    timeout: 90000,
    fn: () => withSite(async (s, w) => {
      const b = await create(s);
      let browser = await chromium.connectOverCDP(b.cdp_ws_url);
      const page = await browser.contexts()[0].newPage();
      await page.goto(`${w.url}/other`);
      await browser.close(); // the CDP connection drops; the session stays
      browser = await chromium.connectOverCDP(b.cdp_ws_url);
      try {
        assert(browser.contexts()[0].pages().some((p) => p.url().endsWith('/other')), 'page survived the reconnect');
      } finally { await browser.close(); }
      eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204);
    }),
  },
  {
    name: 'CDP token: missing 401, tampered 401, expired 401, deleted session 404 (all as Error records)',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const b = await create(s);
      const u = new URL(b.cdp_ws_url.replace('ws://', 'http://'));
      const ws = { headers: { upgrade: 'websocket', connection: 'Upgrade', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', 'sec-websocket-version': '13' } };
      isError(await request(s.base, 'GET', '/browser/cdp', ws), 401, 'unauthorized');
      const tok = u.searchParams.get('jwt');
      const parts = tok.split('.');
      const claims = JSON.parse(Buffer.from(parts[1], 'base64url'));
      claims.sub = 'someoneelsesession00000';
      const forged = `${parts[0]}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${parts[2]}`;
      isError(await request(s.base, 'GET', `/browser/cdp?jwt=${forged}`, ws), 401, 'unauthorized');
      isError(await request(s.base, 'GET', `/browser/cdp?jwt=${tok.slice(0, -2)}xx`, ws), 401, 'unauthorized');
      eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204);
      isError(await request(s.base, 'GET', `/browser/cdp?jwt=${tok}`, ws), 404, 'not_found');
    }),
  },
  {
    name: 'CDP token: a token past its expiry is refused with 401',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const b = await create(s);
      await new Promise((r) => setTimeout(r, 2200)); // BROWSERD_TOKEN_TTL_SECONDS=1
      const tok = new URL(b.cdp_ws_url.replace('ws://', 'http://')).searchParams.get('jwt');
      const r = await request(s.base, 'GET', `/browser/cdp?jwt=${tok}`, { headers: { upgrade: 'websocket', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' } });
      isError(r, 401, 'unauthorized');
      assert(/expired/.test(r.json.message), r.json.message);
      eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204);
    }, { env: { BROWSERD_TOKEN_TTL_SECONDS: '1' } }),
  },
  {
    name: 'PATCH start_url navigates the page (observed over CDP); viewport resizes the window; tags replace; name "" clears and frees the name',
    timeout: 90000,
    fn: () => withSite(async (s, w) => {
      const b = await create(s, { name: 'patchme', tags: { a: '1' } });
      const browser = await chromium.connectOverCDP(b.cdp_ws_url);
      try {
        const page = browser.contexts()[0].pages()[0];
        let r = await api(s, 'PATCH', `/browsers/${b.session_id}`, { start_url: `${w.url}/other` });
        eq(r.status, 200, r.text);
        eq(r.json.start_url, `${w.url}/other`, 'start_url records what was requested');
        await until(() => page.url().endsWith('/other'), 'navigation by PATCH start_url');
        r = await api(s, 'PATCH', `/browsers/${b.session_id}`, { viewport: { width: 1024, height: 768 } });
        eq(r.status, 200, r.text);
        eq(r.json.viewport.width, 1024);
        await until(async () => (await page.evaluate(() => window.outerWidth)) === 1024, 'window width 1024');
        r = await api(s, 'PATCH', `/browsers/${b.session_id}`, { tags: { b: '2' } });
        eq(r.json.tags, { b: '2' }, 'a map replaces the whole tag set');
        r = await api(s, 'PATCH', `/browsers/${b.session_id}`, { tags: {} });
        assert(!r.json.tags || Object.keys(r.json.tags).length === 0, '{} clears all tags');
        r = await api(s, 'PATCH', `/browsers/${b.session_id}`, { name: '' });
        assert(!('name' in r.json), 'empty string clears the name');
        const other = await create(s, { name: 'patchme' });
        eq(other.name, 'patchme', 'the old name is free again');
        eq((await api(s, 'DELETE', `/browsers/${other.session_id}`)).status, 204);
      } finally { await browser.close(); }
      eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204);
    }),
  },
  {
    name: 'name: unique among active sessions of the project (409 with x-should-retry false), by name lookups work',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const b = await create(s, { name: 'dup' });
      const r = await api(s, 'POST', '/browsers', { headless: true, name: 'dup' });
      isError(r, 409);
      eq(r.headers['x-should-retry'], 'false');
      eq((await api(s, 'GET', '/browsers/dup')).json.session_id, b.session_id, 'GET by name');
      const p = await api(s, 'PATCH', `/browsers/${b.session_id}`, { name: 'dup2' });
      eq(p.json.name, 'dup2');
      eq((await api(s, 'DELETE', '/browsers/dup2')).status, 204, 'DELETE by name');
    }),
  },
  {
    name: 'list: pagination with X-Has-More/X-Next-Offset, tags[k]=v filter, query substring, status=deleted and include_deleted',
    timeout: 120000,
    fn: () => withServer(async (s) => {
      const ids = [];
      for (let i = 0; i < 3; i++) ids.push((await create(s, { name: `lst-${i}`, tags: { grp: i < 2 ? 'x' : 'y' } })).session_id);
      let r = await api(s, 'GET', '/browsers?limit=2');
      eq(r.json.length, 2); eq(r.headers['x-has-more'], 'true'); eq(r.headers['x-next-offset'], '2');
      r = await api(s, 'GET', '/browsers?limit=2&offset=2');
      eq(r.json.length, 1); eq(r.headers['x-has-more'], 'false'); eq(r.headers['x-next-offset'], '0');
      r = await api(s, 'GET', '/browsers?tags%5Bgrp%5D=x');
      eq(r.json.map((b) => b.session_id).sort(), ids.slice(0, 2).sort(), 'tags[grp]=x');
      r = await api(s, 'GET', '/browsers?query=lst-2');
      eq(r.json.map((b) => b.session_id), [ids[2]], 'query substring of name');
      eq((await api(s, 'DELETE', `/browsers/${ids[0]}`)).status, 204);
      r = await api(s, 'GET', '/browsers?status=deleted');
      eq(r.json.map((b) => b.session_id), [ids[0]]);
      assert(r.json[0].deleted_at && r.json[0].usage_status === 'ready', 'deleted record has deleted_at and usage_status');
      isError(await api(s, 'GET', `/browsers/${ids[0]}`), 404, 'not_found');
      eq((await api(s, 'GET', `/browsers/${ids[0]}?include_deleted=true`)).status, 200);
      isError(await api(s, 'GET', '/browsers?status=bogus'), 400, 'bad_request');
      for (const id of ids.slice(1)) eq((await api(s, 'DELETE', `/browsers/${id}`)).status, 204);
    }),
  },
  {
    name: 'create: bad input is a 400 naming the field; another region is a 400 naming the served region; gpu without a GPU is a 4xx',
    timeout: 30000,
    fn: () => withServer(async (s) => {
      let r = await api(s, 'POST', '/browsers', { viewport: { width: 0, height: 10 } });
      isError(r, 400, 'bad_request');
      assert(r.json.details.some((d) => d.message.startsWith('viewport.width')), r.text);
      r = await api(s, 'POST', '/browsers', { timeout_seconds: 5 });
      isError(r, 400); assert(/timeout_seconds/.test(r.text), r.text);
      r = await api(s, 'POST', '/browsers', { region: 'eu-west' });
      isError(r, 400); assert(/us-east/.test(r.json.message), r.json.message);
      r = await api(s, 'POST', '/browsers', { bogus: 1 });
      isError(r, 400); assert(/bogus/.test(r.text), r.text);
      r = await api(s, 'POST', '/browsers', { gpu: true, headless: false });
      assert(r.status >= 400 && r.status < 500, `gpu: ${r.status}`);
    }),
  },
  {
    name: 'timeout: a session with no CDP client for timeout_seconds is ended and its browser stopped',
    timeout: 60000,
    // A shorter timeout than the API's 10 s minimum, allowed by the server's
    // BROWSERD_MIN_SESSION_TIMEOUT_SECONDS: the same rule, less waiting.
    fn: () => withServer(async (s) => {
      const b = await create(s, { timeout_seconds: 3 });
      const pids = browserPids(s.dir, b.session_id);
      assert(pids.length > 0, 'browser running');
      const r = await until(async () => {
        const g = await api(s, 'GET', `/browsers/${b.session_id}?include_deleted=true`);
        return g.json.deleted_at ? g : null;
      }, 'session ended by timeout', 25000);
      eq(r.json.usage_status, 'ready');
      assert(r.json.usage.uptime_ms >= 2500, `uptime ${r.json.usage.uptime_ms}`);
      await until(() => pids.every((p) => !alive(p)), 'browser processes gone');
      assert(!existsSync(`${s.dir}/sessions/${b.session_id}`), 'user-data folder removed');
    }, { env: { BROWSERD_MIN_SESSION_TIMEOUT_SECONDS: '3' } }),
  },
  {
    name: 'limits.max_concurrent_browsers: one more live session is 429 rate_limited with Retry-After',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const org = (await request(s.base, 'POST', '/admin/orgs', { key: 'adm', body: { name: 'tiny', overrides: { limits: { max_concurrent_browsers: 1 } } } })).json;
      const key = (await request(s.base, 'POST', `/admin/orgs/${org.id}/api_keys`, { key: 'adm', body: {} })).json.key;
      const first = await api(s, 'POST', '/browsers', { headless: true }, key);
      eq(first.status, 200, first.text);
      const r = await api(s, 'POST', '/browsers', { headless: true }, key);
      isError(r, 429, 'rate_limited');
      assert(Number(r.headers['retry-after']) > 0, 'Retry-After');
      eq((await api(s, 'DELETE', `/browsers/${first.json.session_id}`, undefined, key)).status, 204);
      eq((await api(s, 'POST', '/browsers', { headless: true }, key)).status, 200, 'a slot frees on delete');
    }, { args: ['--admin-token', 'adm'] }),
  },
  {
    name: 'crash safety: after kill -9 of the server and a restart, no browser of the old run is left and its sessions are ended with usage',
    timeout: 90000,
    fn: async () => {
      const s = await startServer();
      let s2;
      try {
        const b = await create(s);
        const pids = browserPids(s.dir, b.session_id);
        assert(pids.length > 0, 'browser running');
        await s.kill9();
        s2 = await startServer({ dataDir: s.dir });
        await until(() => pids.every((p) => !alive(p)), 'old browser processes killed at restart');
        const r = await request(s2.base, 'GET', `/browsers/${b.session_id}?include_deleted=true`, { key: s.key });
        eq(r.status, 200, r.text);
        assert(r.json.deleted_at, 'ended');
        eq(r.json.usage_status, 'ready');
        assert(r.json.usage.uptime_ms > 0, 'usage recorded');
      } finally {
        if (s2) await s2.stop();
        await s.stop();
        s.cleanup();
      }
    },
  },
  {
    name: 'crash safety: after kill -9 of the server its browsers (headless and headful) end within seconds, without a restart',
    timeout: 90000,
    fn: async () => {
      const s = await startServer();
      let pids = [];
      try {
        const a = await create(s);
        const b = await create(s, { headless: false });
        pids = [...browserPids(s.dir, a.session_id), ...browserPids(s.dir, b.session_id)];
        assert(pids.length > 1, 'browsers running');
        await s.kill9();
        await until(() => pids.every((p) => !running(p)), 'the browsers of the killed server to end');
      } finally {
        killGroups(pids.filter(running));
        s.cleanup();
      }
    },
  },
  {
    name: '20 headless sessions at once on this machine, each answering CDP, with the default memory (admission, issue 29.10, admits them under the default BROWSERD_MEMORY_OVERCOMMIT: 20 x 8 GiB of limits on a 24 GiB host)',
    timeout: 240000,
    fn: () => withServer(async (s) => {
      const made = await Promise.all(Array.from({ length: 20 }, () => create(s)));
      eq(new Set(made.map((b) => b.session_id)).size, 20);
      for (const b of made) {
        const browser = await chromium.connectOverCDP(b.cdp_ws_url);
        eq(browser.contexts().length >= 1, true);
        await browser.close();
      }
      await Promise.all(made.map(async (b) => eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204)));
    }),
  },
  {
    name: 'A create never holds up other requests (http.md, blocking handlers): with one HTTP thread and no spares, GETs on other connections are answered while a cold launch is in flight',
    timeout: 60000,
    fn: async () => {
      const s = await startServer({ env: { BROWSERD_THREADS: '1', BROWSERD_SPARES: '0' } });
      try {
        let done = false;
        const pending = api(s, 'POST', '/browsers', { headless: true }).finally(() => { done = true; });
        // Before this change the one HTTP thread launched the browser itself and
        // every other connection waited for the launch: at most a GET that got
        // in first was answered before the create.
        let during = 0;
        while (!done) {
          const g = await api(s, 'GET', '/org/entitlements');
          eq(g.status, 200, g.text);
          if (!done) during++;
        }
        const b = await pending;
        eq(b.status, 200, b.text);
        assert(during >= 5, `only ${during} GETs were answered while the create launched its browser`);
        eq((await api(s, 'DELETE', `/browsers/${b.json.session_id}`)).status, 204);
      } finally { await s.stop(); s.cleanup(); }
    },
  },
  {
    name: 'Debian\'s launcher script resolved once (runtime/crlauncher.h) runs the browser as the script would: /usr/lib/chromium/chromium with the flags /etc/chromium.d gives and CHROME_WRAPPER set, under no shell',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const b = await create(s);
      const pids = browserPids(s.dir, b.session_id);
      const procs = pids.map((pid) => {
        try {
          return {
            pid,
            argv: readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0'),
            env: readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0'),
            ppid: Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[1]),
          };
        } catch { return null; }
      }).filter(Boolean);
      const main = procs.find((p) => p.argv[0] === '/usr/lib/chromium/chromium' && !p.argv.some((a) => a.startsWith('--type=')));
      assert(main, `no browser process runs /usr/lib/chromium/chromium: ${JSON.stringify(procs.map((p) => p.argv.slice(0, 2)))}`);
      assert(main.argv.includes('--enable-remote-extensions'), 'the flag /etc/chromium.d/extensions gives is passed');
      assert(main.env.includes('CHROME_WRAPPER=/usr/bin/chromium'), 'CHROME_WRAPPER names the script, as the script sets it');
      const parent = readFileSync(`/proc/${main.ppid}/cmdline`, 'utf8').split('\0')[0];
      assert(!/(^|\/)(sh|bash|dash)$/.test(parent), `the browser's parent is a shell: ${parent}`);
      eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204);
    }),
  },
  {
    name: 'issue 39.1: a session, headless or headful, runs no omnibox popup WebUI (chrome://omnibox-popup.top-chrome), which Chromium preloads in its own renderer',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      for (const body of [{ headless: true }, { headless: false }]) {
        const b = await create(s, body);
        const br = await chromium.connectOverCDP(b.cdp_ws_url);
        try {
          const c = await br.newBrowserCDPSession();
          const { targetInfos } = await c.send('Target.getTargets', { filter: [{}] });
          const urls = targetInfos.map((t) => `${t.type} ${t.url}`);
          assert(urls.some((u) => u === 'page about:blank'), `the session's page is listed: ${urls.join(', ')}`);
          assert(!urls.some((u) => u.includes('top-chrome')), `${JSON.stringify(body)}: a top-chrome WebUI runs: ${urls.join(', ')}`);
        } finally { await br.close(); }
        eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204);
      }
    }),
  },
];
