// Issue 31 (real clients): Stagehand 4 (@browserbasehq/stagehand 4.4.0) against a session's
// cdp_ws_url, as a user drives it without a model (no act/observe/extract: nothing here calls
// an LLM). Stagehand 4 is not Playwright: localBrowser.connect({cdpUrl}) opens the browser's
// CDP socket, finds its own extension ("Stagehand Runtime") with Extensions.getExtensions,
// attaches to the extension's service worker, and the extension itself then opens the same
// cdp_ws_url from inside the browser (the session relay, issue 31.10) and does the page work.
//
// The extension is the user's to bring, as with any remote browser: connect() otherwise asks
// the browser to Extensions.loadUnpacked a folder of the CLIENT's machine
// (node_modules/@browserbasehq/stagehand/dist/extension), which a sandboxed browser on a
// server cannot see (the relay answers that with what to do instead). Stagehand exports the
// same extension as a zip (getExtensionArchive(), made for upload to a hosted service); the
// user uploads it once with the official client (extensions.upload) and creates browsers with
// extensions: [{name}] (docs/cdp-relay.md).
//
// Stagehand 4 needs Node 22's global WebSocket; on an older Node the `ws` package stands in.
import { spawn } from 'node:child_process';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { WebSocket as WsSocket } from 'ws';
import Kernel, { toFile } from '@onkernel/sdk';
import { localBrowser, Stagehand, getExtensionArchive } from '@browserbasehq/stagehand';
import { startServer, startSite, request, assert, eq, waitFor, newOrg } from '../blackbox/lib.mjs';

globalThis.WebSocket ??= WsSocket;

const page = (title, body = '') => `<!doctype html><title>${title}</title>${body}`;

// Two origins of the test's own: A (127.0.0.1) with a form, a popup opener and a frame of B;
// B (127.0.0.2, another site: an out-of-process frame) with a form of its own.
async function withSites(fn) {
  const b = await startSite((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(page('B', '<input id=bi><button id=bb onclick="document.getElementById(\'bo\').textContent=\'B got \'+document.getElementById(\'bi\').value">send</button><p id=bo></p>'));
  }, { host: '127.0.0.2' });
  const a = await startSite((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    const path = new URL(req.url, 'http://x').pathname;
    if (path === '/two') return res.end(page('two', '<p id=t>second page</p>'));
    if (path === '/framed') return res.end(page('framed', `<p id=t>outer</p><iframe id=f src="${b.url}/" width=400 height=200></iframe>`));
    res.end(page('form', '<p id=t>hello from A</p><input id=i><button id=go onclick="document.title=\'sent \'+document.getElementById(\'i\').value">go</button><button id=pop onclick="window.open(\'/two\')">open</button>'));
  });
  try { await fn(a, b); } finally { a.close(); b.close(); }
}

// A server allowing both sites, with Stagehand's extension uploaded under the name
// 'stagehand' through the official client, as a user does once.
async function withStagehandServer(fn) {
  return withSites(async (a, b) => {
    const s = await startServer({ args: ['--allow-loopback', `${a.hostport},${b.hostport}`] });
    try {
      const kernel = new Kernel({ apiKey: s.key, baseURL: s.base });
      const ext = await kernel.extensions.upload({ name: 'stagehand', file: await toFile(await getExtensionArchive(), 'stagehand.zip') });
      eq(ext.name, 'stagehand', 'the extension is stored');
      await fn({ s, kernel, a, b });
    } finally { await s.stop(); s.cleanup(); }
  });
}

// A session with Stagehand's extension (body fields added), deleted after fn.
async function withSession(kernel, s, body, fn) {
  const sess = await kernel.browsers.create({ headless: true, extensions: [{ name: 'stagehand' }], ...body });
  try { await fn(sess); } finally { await request(s.base, 'DELETE', `/browsers/${sess.session_id}`, { key: s.key }); }
}

// Stagehand connected to cdp_ws_url (or to cdpUrl): { browser, stagehand }.
async function connect(sess, cdpUrl = sess.cdp_ws_url) {
  const browser = await localBrowser.connect({ cdpUrl });
  const stagehand = await Stagehand.create({ browser });
  return { browser, stagehand };
}

// A PNG's width and height (its IHDR).
function pngSize(bytes) {
  const b = Buffer.from(bytes);
  eq(b.subarray(1, 4).toString(), 'PNG', 'a PNG');
  return `${b.readUInt32BE(16)}x${b.readUInt32BE(20)}`;
}

// The pages of ctx once there are n of them (a popup appears after its opener's click).
async function pagesOnce(ctx, n) {
  let pages = [];
  await waitFor(async () => (pages = await ctx.pages()).length === n, `${n} pages`, 20000, 200);
  return pages;
}

// A promise settled by p, or rejected when p has not settled after ms: the bound on a hang.
function bounded(p, ms, what) {
  let timer;
  const hang = new Promise((_, rej) => { timer = setTimeout(() => rej(new Error(`${what}: no answer (hang)`)), ms); });
  return Promise.race([p, hang]).finally(() => clearTimeout(timer));
}

// One CDP command on a fresh connection to url: its answer.
async function cdpOnce(url, msg) {
  const ws = new WsSocket(url);
  try {
    await new Promise((r, j) => { ws.once('open', r); ws.once('error', j); });
    const got = new Promise((r) => ws.on('message', (m) => { const x = JSON.parse(m); if (x.id === msg.id) r(x); }));
    ws.send(JSON.stringify(msg));
    return await got;
  } finally { ws.close(); }
}

// An unpacked extension written into the session's own files with the fs API.
async function writeExtension(s, key, id, dir) {
  const r = await fetch(`${s.base}/browsers/${id}/fs/write_file?path=${encodeURIComponent(`${dir}/manifest.json`)}`, {
    method: 'PUT', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream' },
    body: JSON.stringify({ manifest_version: 3, name: 'from the session files', version: '1.0' }),
  });
  eq(r.status, 201, `write_file: ${await r.text()}`);
}

const ADMIN = 'h2-stagehand-admin-token-0123456789abcdef';
const here = dirname(fileURLToPath(import.meta.url));

export const tests = [
  {
    name: 'issue 31 (real clients): Stagehand 4 with its extension (uploaded through extensions.upload) drives a session over cdp_ws_url: about:blank and a loopback origin, title and text, fill and click through locators, context.newPage and a window.open popup, switching pages, screenshots at the session viewport (1024x700 and the default 1920x1080), page close, stagehand.close(); browser.close() ends the session',
    timeout: 90000,
    fn: () => withStagehandServer(async ({ s, kernel, a }) => {
      await withSession(kernel, s, { viewport: { width: 1024, height: 700 } }, async (sess) => {
        const { browser, stagehand } = await connect(sess);
        const ctx = browser.context;
        const [p] = await ctx.pages();
        await p.goto('about:blank');
        eq(await p.url(), 'about:blank', 'about:blank');
        eq(await p.evaluate('document.title + "|" + location.href'), '|about:blank', 'evaluate on about:blank');
        eq(pngSize(await p.screenshot()), '1024x700', 'screenshot of about:blank at the session viewport');

        await p.goto(`${a.url}/`);
        eq(await p.title(), 'form', 'title');
        eq(await p.locator('#t').innerText(), 'hello from A', 'text through a locator');
        await p.locator('#i').fill('typed by stagehand');
        eq(await p.locator('#i').inputValue(), 'typed by stagehand', 'fill');
        await p.locator('#go').click();
        eq(await p.title(), 'sent typed by stagehand', 'click ran the page\'s handler');
        eq(pngSize(await p.screenshot()), '1024x700', 'screenshot at the session viewport');

        const p2 = await ctx.newPage(`${a.url}/two`);
        eq(await p2.title(), 'two', 'context.newPage(url)');
        eq(pngSize(await p2.screenshot()), '1024x700', 'a new page has the session viewport');

        await p.locator('#pop').click();
        const pages = await pagesOnce(ctx, 3);
        const popup = pages.find((x) => x.pageId !== p.pageId && x.pageId !== p2.pageId);
        assert(popup, 'the window.open page is one of the context\'s pages');
        await popup.waitForLoadState('load');
        eq(await popup.title(), 'two', 'the popup loaded');
        eq(await popup.locator('#t').innerText(), 'second page', 'the popup\'s text');

        await ctx.setActivePage(p);
        eq((await ctx.activePage()).pageId, p.pageId, 'switched back to the first page');
        eq(await (await ctx.activePage()).title(), 'sent typed by stagehand', 'the first page kept its state');

        await p2.close();
        const left = await pagesOnce(ctx, 2);
        assert(!left.some((x) => x.pageId === p2.pageId), 'the closed page is gone');

        await stagehand.close();
        await browser.disconnect();
        eq(browser.connected, false, 'disconnected');
      });
      await withSession(kernel, s, {}, async (sess) => {
        const { browser, stagehand } = await connect(sess);
        const [p] = await browser.context.pages();
        await p.goto(`${a.url}/two`);
        eq(pngSize(await p.screenshot()), '1920x1080', 'the default viewport');
        // browser.close() (Browser.close) ends the browser, and with it the session.
        await stagehand.close();
        await browser.close();
        await waitFor(async () => (await request(s.base, 'GET', `/browsers/${sess.session_id}`, { key: s.key })).status === 404, 'the session ends with its browser', 30000, 250);
      });
    }),
  },
  {
    name: 'issue 31 (real clients): after stagehand.close() the session lives on and a second Stagehand connects again, through cdp_ws_url\'s http form (Stagehand fetches `${cdpUrl}/json/version`, the path landing in ?jwt=: redirected to the path form), and sees its pages; DELETE of the session fails a connected Stagehand\'s next call at once (an error, no hang)',
    timeout: 90000,
    fn: () => withStagehandServer(async ({ s, kernel, a }) => {
      await withSession(kernel, s, {}, async (sess) => {
        const one = await connect(sess);
        const [p] = await one.browser.context.pages();
        await p.goto(`${a.url}/`);
        await p.locator('#i').fill('kept');
        await one.stagehand.close();
        await one.browser.disconnect();

        const got = await request(s.base, 'GET', `/browsers/${sess.session_id}`, { key: s.key });
        eq(got.status, 200, `the session lives on: ${got.text}`);
        // What Stagehand asks of an http cdpUrl: a valid token is sent to the path form, a
        // forged one is a 401 that names no URL.
        const http = sess.cdp_ws_url.replace(/^ws/, 'http');
        const tok = new URL(sess.cdp_ws_url).searchParams.get('jwt');
        const v = await fetch(`${http}/json/version`, { redirect: 'manual' });
        eq(v.status, 307, 'discovery in the query is redirected');
        eq(v.headers.get('location'), `cdp/${tok}/json/version`, 'to the path form, relative');
        const bad = await fetch(`${http.replace(/.{4}$/, 'AAAA')}/json/list`, { redirect: 'manual' });
        eq(bad.status, 401, 'a forged token');
        eq(bad.headers.get('location'), null, 'no URL for a forged token');
        const two = await connect(sess, http);
        try {
          const pages = await two.browser.context.pages();
          const again = pages.find((x) => x.pageId === p.pageId) || pages[0];
          eq(await again.title(), 'form', 'the second Stagehand sees the page the first left');
          eq(await again.locator('#i').inputValue(), 'kept', 'with its state');
          eq(await again.evaluate('6 * 7'), 42, 'and drives it');

          const del = await request(s.base, 'DELETE', `/browsers/${sess.session_id}`, { key: s.key });
          assert(del.status === 200 || del.status === 204, `delete: ${del.status} ${del.text}`);
          const after = await bounded(again.evaluate('1 + 1').then(() => 'answered', (e) => e), 30000, 'a call after DELETE');
          assert(after instanceof Error, `a call after DELETE fails (got ${after})`);
          await waitFor(() => !two.browser.connected, 'the handle sees the lost connection', 10000);
        } finally {
          await bounded(two.stagehand.close().catch(() => {}), 30000, 'stagehand.close after DELETE');
          await bounded(two.browser.disconnect().catch(() => {}), 30000, 'disconnect after DELETE');
        }
      });
    }),
  },
  {
    name: 'issue 31 (real clients): Stagehand 4 in a page with a frame of another site (an out-of-process frame), across several tabs, and in a headful session: fill and click inside the frame with "iframe >> selector", one tab per origin, screenshots at the viewport',
    timeout: 90000,
    fn: () => withStagehandServer(async ({ s, kernel, a, b }) => {
      for (const headless of [true, false]) {
        await withSession(kernel, s, { headless, viewport: { width: 1024, height: 768 } }, async (sess) => {
          const { browser, stagehand } = await connect(sess);
          try {
            const ctx = browser.context;
            const [p] = await ctx.pages();
            await p.goto(`${a.url}/framed`);
            await p.waitForSelector('iframe#f >> #bb');
            await p.locator('iframe#f >> #bi').fill('through the frame');
            await p.locator('iframe#f >> #bb').click();
            eq(await p.locator('iframe#f >> #bo').innerText(), 'B got through the frame', `headless ${headless}: the frame's own handler ran`);
            eq(await p.locator('#t').innerText(), 'outer', 'the outer page is unchanged');
            const tb = await ctx.newPage(`${b.url}/`);
            const ta = await ctx.newPage(`${a.url}/two`);
            eq(await tb.title(), 'B', 'a tab of site B');
            eq(await ta.title(), 'two', 'a tab of site A');
            await tb.locator('#bi').fill('tab B');
            eq(await tb.locator('#bi').inputValue(), 'tab B', 'filled in tab B');
            eq(await p.locator('iframe#f >> #bi').inputValue(), 'through the frame', 'the frame of the first tab kept its own value');
            // The viewport is the window's size: headless, the page's; headful, the window's,
            // browser frame included (the page shows what is left inside it).
            for (const t of [p, tb, ta]) {
              const inner = await t.evaluate('`${innerWidth}x${innerHeight}`');
              if (headless) eq(inner, '1024x768', 'headless: the page has the viewport');
              eq(pngSize(await t.screenshot()), inner, `headless ${headless}: a screenshot is the page's size`);
            }
          } finally { await stagehand.close(); await browser.disconnect(); }
        });
      }
    }),
  },
  {
    name: 'issue 31 (real clients): CDP Extensions.loadUnpacked follows the plan: an organization with features.browser_extensions off cannot load an extension from its session\'s own files through the relay (a CDP error naming the feature, sessionId echoed; Stagehand\'s connect fails with it); with the feature on it can, and Stagehand without its extension uploaded is told that its node_modules folder is not on the server and what to do',
    timeout: 90000,
    fn: async () => {
      const s = await startServer({ env: { BROWSERD_ADMIN_TOKEN: ADMIN } });
      const ids = [];
      try {
        const off = await newOrg(s, ADMIN, { name: 'no-extensions', plan: 'startup', overrides: { features: { browser_extensions: { enabled: false } } } });
        for (const [key, allowed] of [[off.key, false], [s.key, true]]) {
          const c = await request(s.base, 'POST', '/browsers', { key, body: { headless: true } });
          eq(c.status, 200, `create: ${c.text}`);
          ids.push([c.json.session_id, key]);
          await writeExtension(s, key, c.json.session_id, '/tmp/ext');
          const load = await cdpOnce(c.json.cdp_ws_url, { id: 7, method: 'Extensions.loadUnpacked', params: { path: '/tmp/ext' } });
          const list = await cdpOnce(c.json.cdp_ws_url, { id: 8, method: 'Extensions.getExtensions' });
          if (allowed) {
            assert(load.result && load.result.id, `the plan allows it: ${JSON.stringify(load)}`);
            const other = await request(s.base, 'POST', '/browsers', { key, body: { headless: true } });
            ids.push([other.json.session_id, key]);
            const sh = await localBrowser.connect({ cdpUrl: other.json.cdp_ws_url }).then(() => null, (e) => e);
            assert(sh && /not a folder of this browser's files/.test(sh.message) && /POST \/extensions/.test(sh.message), `Stagehand without its extension is told what to do: ${sh}`);
            eq(list.result.extensions.length, 1, 'loaded');
            continue;
          }
          eq(load.id, 7, 'the answer has the command\'s id');
          assert(load.error && /browser_extensions/.test(load.error.message), `refused naming the feature: ${JSON.stringify(load)}`);
          eq(list.result.extensions.length, 0, 'nothing was loaded');
          const flat = await cdpOnce(c.json.cdp_ws_url, { id: 9, sessionId: 'S1', method: 'Extensions.loadUnpacked', params: { path: '/tmp/ext' } });
          eq(flat.sessionId, 'S1', 'a flat session\'s command is answered on its session');
          assert(flat.error, 'and refused');
          const sh = await localBrowser.connect({ cdpUrl: c.json.cdp_ws_url }).then(() => null, (e) => e);
          assert(sh && /browser_extensions/.test(String(sh.message)), `Stagehand says why: ${sh}`);
        }
      } finally {
        for (const [id, key] of ids) await request(s.base, 'DELETE', `/browsers/${id}`, { key });
        await s.stop(); s.cleanup();
      }
    },
  },
  {
    name: 'issue 31 (real clients): the extension\'s own relay connection does not keep a session alive: with timeout_seconds 10 the session ends after Stagehand disconnects, and after the Stagehand process is killed',
    timeout: 90000,
    fn: () => withStagehandServer(async ({ s, kernel }) => {
      const left = await kernel.browsers.create({ headless: true, extensions: [{ name: 'stagehand' }], timeout_seconds: 10 });
      const killed = await kernel.browsers.create({ headless: true, extensions: [{ name: 'stagehand' }], timeout_seconds: 10 });
      try {
        const { browser, stagehand } = await connect(left);
        await stagehand.close();
        await browser.disconnect();
        // A user's script that dies while connected: its own process, ended by PID.
        const child = spawn(process.execPath, ['--input-type=module', '-e', `
          import { WebSocket } from 'ws';
          globalThis.WebSocket ??= WebSocket;
          const { localBrowser, Stagehand } = await import('@browserbasehq/stagehand');
          const browser = await localBrowser.connect({ cdpUrl: process.argv[1] });
          await Stagehand.create({ browser });
          await (await browser.context.pages())[0].goto('about:blank#connected');
          console.log('READY');
          setInterval(() => {}, 1000);`, killed.cdp_ws_url], { cwd: here, stdio: ['ignore', 'pipe', 'ignore'] });
        try {
          const ready = new Promise((r, j) => {
            child.stdout.on('data', (d) => { if (/READY/.test(d)) r(); });
            child.once('exit', (code) => j(new Error(`the client exited (${code}) before it connected`)));
          });
          await bounded(ready, 60000, 'the client connecting');
        } finally { process.kill(child.pid, 'SIGKILL'); }
        for (const [sess, what] of [[left, 'after disconnect'], [killed, 'after the client was killed']]) {
          await waitFor(async () => (await request(s.base, 'GET', `/browsers/${sess.session_id}`, { key: s.key })).status === 404, `the session ends ${what}`, 60000, 500);
        }
      } finally {
        for (const sess of [left, killed]) await request(s.base, 'DELETE', `/browsers/${sess.session_id}`, { key: s.key });
      }
    }),
  },
];
