// Issue 31, items 6, 8, 9, 10 and 11: computer use, replays, live view and
// discovery as real clients use them.
//  6. the live view follows what the session shows: a headful session's
//     viewer shows the whole X display, so a second tab opened by the agent
//     appears in it;
//  8. an unknown replay id of any shape is a 404;
//  9. DevTools HTTP discovery (/json/version, /json/list) under the session's
//     cdp token, with Playwright's connectOverCDP('http://...');
// 10. the session's own browser reaches its own CDP relay endpoint with its
//     own token (Stagehand 4's in-browser extension), and nothing else of the
//     server;
// 11. the downloads listing beside the fs API.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chromium } from 'playwright-core';
import Kernel from '@onkernel/sdk';
import { startServer, startSite, request, assert, eq, waitFor } from '../blackbox/lib.mjs';

const api = (s, method, path, body, key = s.key) => request(s.base, method, path, { key, body });

async function create(s, body = {}) {
  const r = await api(s, 'POST', '/browsers', { headless: true, viewport: { width: 800, height: 600 }, ...body });
  eq(r.status, 200, `create: ${r.text}`);
  return r.json;
}

async function withServer(fn, handler = (req, res) => { res.writeHead(200, { 'content-type': 'text/html' }); res.end('<title>site</title>'); }) {
  const site = await startSite(handler);
  const s = await startServer({ args: [...site.allow] });
  try { await fn(s, site); } finally { await s.stop(); s.cleanup(); site.close(); }
}

// The http form of a session's cdp_ws_url (what the README says to give
// tools that discover over HTTP).
const httpOf = (u) => u.replace(/^ws/, 'http');

// The live view's pictures, read as a client of its WebSocket (read-only):
// keeps the newest frame; its size and centre pixel are decoded by ffmpeg.
async function liveFrames(url) {
  const { default: WebSocket } = await import('ws');
  const ws = new WebSocket(url.replace(/^http/, 'ws') + '/ws?readOnly=true');
  const st = { frame: null, n: 0, close: () => ws.close() };
  ws.on('message', (m, binary) => { if (binary) { st.frame = Buffer.from(m); st.n++; } });
  await new Promise((r, j) => { ws.once('open', r); ws.once('error', j); });
  return st;
}
function framePixel(frame) {
  const size = execFileSync('ffprobe', ['-v', 'error', '-show_entries', 'stream=width,height', '-of', 'csv=p=0', '-'], { input: frame }).toString().trim();
  const [w, h] = size.split(',').map(Number);
  const raw = execFileSync('ffmpeg', ['-v', 'error', '-i', '-', '-f', 'rawvideo', '-pix_fmt', 'rgb24', '-'], { input: frame, maxBuffer: 1 << 26 });
  const at = (Math.floor(h * 3 / 4) * w + Math.floor(w / 2)) * 3; // below any tab strip
  return { rgb: [...raw.subarray(at, at + 3)], size };
}
const near = (a, b) => a.every((v, i) => Math.abs(v - b[i]) < 40);
const tokenOf = (u) => new URL(u).searchParams.get('jwt');

export const tests = [
  {
    name: 'issue 31.8: a replay id that cannot exist is a 404 not_found, like an unknown one (download and stop)',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const b = await create(s);
      try {
        for (const rid of ['UPPER', 'a'.repeat(65), 'dot.dot', 'nosuchreplay0']) {
          const dl = await request(s.base, 'GET', `/browsers/${b.session_id}/replays/${rid}`, { key: s.key, headers: { accept: 'video/mp4' } });
          eq(dl.status, 404, `download of ${rid}: ${dl.text}`);
          eq(dl.json.code, 'not_found', `code for ${rid}`);
          const st = await request(s.base, 'POST', `/browsers/${b.session_id}/replays/${rid}/stop`, { key: s.key });
          eq(st.status, 404, `stop of ${rid}: ${st.text}`);
        }
      } finally { await api(s, 'DELETE', `/browsers/${b.session_id}`); }
    }),
  },
  {
    name: 'issue 31.9: /json/version and /json/list under the session\'s cdp token (query and path forms) point back through the relay; Playwright connectOverCDP(http://) drives the session; a wrong token gets 401 and no URL',
    timeout: 90000,
    fn: () => withServer(async (s, site) => {
      const b = await create(s);
      const other = await create(s);
      try {
        const h = httpOf(b.cdp_ws_url);
        const tok = tokenOf(b.cdp_ws_url);
        const u = new URL(h);
        // Query form, as Playwright builds it (path + "/json/version/", query kept).
        const v = await request(s.base, 'GET', `${u.pathname}/json/version/${u.search}`);
        eq(v.status, 200, `json/version: ${v.text}`);
        assert(/Chrome\//.test(v.json.Browser), `Browser: ${v.json.Browser}`);
        eq(v.json.webSocketDebuggerUrl, b.cdp_ws_url.replace(/jwt=.*/, `jwt=${tok}`), 'webSocketDebuggerUrl is the relay');
        // Path form: the token in a path segment, for tools that drop the query.
        const p = await request(s.base, 'GET', `/browser/cdp/${tok}/json/version`);
        eq(p.status, 200, `path form: ${p.text}`);
        eq(p.json.webSocketDebuggerUrl, v.json.webSocketDebuggerUrl, 'the same relay URL');
        // Playwright over http://: discovery, then the relay.
        const br = await chromium.connectOverCDP(h);
        try {
          const ctx = br.contexts()[0];
          const pg = ctx.pages()[0] || await ctx.newPage();
          await pg.goto(`${site.url}/`);
          eq(await pg.title(), 'site', 'the session\'s page navigated through the discovered URL');
          // /json/list names the page; its URL reaches that page alone.
          const l = await request(s.base, 'GET', `/browser/cdp/${tok}/json/list`);
          eq(l.status, 200, `json/list: ${l.text}`);
          const entry = l.json.find((e) => e.type === 'page' && e.url.startsWith(site.url));
          assert(entry && entry.webSocketDebuggerUrl.startsWith(`${b.cdp_ws_url.split('?')[0]}?`), `a page entry through the relay: ${l.text}`);
          const lq = await request(s.base, 'GET', `${u.pathname}/json/list${u.search}`);
          eq(lq.status, 200, `json/list, query form: ${lq.text}`);
          const { default: WebSocket } = await import('ws');
          const ws = new WebSocket(entry.webSocketDebuggerUrl);
          await new Promise((r, j) => { ws.once('open', r); ws.once('error', j); });
          const title = await new Promise((r) => {
            ws.once('message', (m) => r(JSON.parse(m).result.result.value));
            ws.send(JSON.stringify({ id: 1, method: 'Runtime.evaluate', params: { expression: 'document.title' } }));
          });
          ws.close();
          eq(title, 'site', 'the page\'s own DevTools socket through the relay');
        } finally { await br.close().catch(() => {}); }
        // The path form works for Playwright too (it appends "json/version/" to the path).
        const br2 = await chromium.connectOverCDP(`${s.base}/browser/cdp/${tok}`);
        try {
          eq(await br2.contexts()[0].pages()[0].title(), 'site', 'Playwright over the path form');
        } finally { await br2.close().catch(() => {}); }
        // Wrong or missing tokens: 401, no URL of anything.
        const bad = tok.slice(0, -2) + (tok.endsWith('AA') ? 'BB' : 'AA');
        for (const path of [`/browser/cdp/${bad}/json/version`, `/browser/cdp/json/version?jwt=${bad}`, '/browser/cdp/json/version', `/browser/cdp/${bad}/json/list`]) {
          const r = await request(s.base, 'GET', path);
          eq(r.status, 401, `${path}: ${r.text}`);
          assert(!/webSocketDebuggerUrl|ws:\/\//.test(r.text), `no URL for a bad token: ${r.text}`);
        }
        // Another session's token names that session only.
        const o = await request(s.base, 'GET', `/browser/cdp/${tokenOf(other.cdp_ws_url)}/json/version`);
        eq(o.json.webSocketDebuggerUrl.split('jwt=')[1], tokenOf(other.cdp_ws_url), 'each token discovers its own session');
        // An ended session's token: 404.
        await api(s, 'DELETE', `/browsers/${b.session_id}`);
        eq((await request(s.base, 'GET', `/browser/cdp/${tok}/json/version`)).status, 404, 'ended session');
      } finally {
        await api(s, 'DELETE', `/browsers/${b.session_id}`);
        await api(s, 'DELETE', `/browsers/${other.session_id}`);
      }
    }),
  },
  {
    name: 'issue 31.11: GET fs/downloads lists what the browser downloaded (its default folder and Playwright\'s), with name, size, type, sha256 and complete; the official client\'s readFile reads each',
    timeout: 90000,
    fn: () => {
      const pdf = Buffer.from('%PDF-1.4\n% a report\n' + 'x'.repeat(5000));
      const sha = createHash('sha256').update(pdf).digest('hex');
      return withServer(async (s, site) => {
        const b = await create(s);
        const kernel = new Kernel({ apiKey: s.key, baseURL: s.base });
        const read = async (path) => Buffer.from(await (await kernel.browsers.fs.readFile(b.session_id, { path })).arrayBuffer());
        try {
          // A download with the browser's own behaviour: its default folder.
          const { default: WebSocket } = await import('ws');
          const ws = new WebSocket(b.cdp_ws_url);
          await new Promise((r, j) => { ws.once('open', r); ws.once('error', j); });
          let n = 0;
          const call = (method, params, sessionId) => new Promise((r) => {
            const id = ++n;
            const h = (m) => { const j = JSON.parse(m); if (j.id === id) { ws.off('message', h); r(j.result); } };
            ws.on('message', h);
            ws.send(JSON.stringify({ id, method, params, sessionId }));
          });
          const pg = (await call('Target.getTargets')).targetInfos.find((t) => t.type === 'page');
          const { sessionId } = await call('Target.attachToTarget', { targetId: pg.targetId, flatten: true });
          await call('Page.navigate', { url: `${site.url}/file` }, sessionId);
          ws.close();
          const list = async () => { const r = await api(s, 'GET', `/browsers/${b.session_id}/fs/downloads`); eq(r.status, 200, r.text); return r.json; };
          const first = await waitFor(async () => { const l = await list(); return l.downloads.find((d) => d.name === 'report.pdf' && d.complete) && l; }, 'report.pdf listed as complete');
          eq(first.directory, '/home/kernel/Downloads', 'the default download folder');
          const d = first.downloads.find((x) => x.name === 'report.pdf');
          eq({ path: d.path, size: d.size, type: d.type, sha256: d.sha256, complete: d.complete },
            { path: '/home/kernel/Downloads/report.pdf', size: pdf.length, type: 'application/pdf', sha256: sha, complete: true }, 'the entry');
          assert(!Number.isNaN(Date.parse(d.mod_time)), `mod_time: ${d.mod_time}`);
          assert((await read(d.path)).equals(pdf), 'readFile of the listed path gives the bytes');
          // Playwright over CDP: the browser saves under a folder Playwright names
          // (in the session's /tmp), by the download's guid.
          const br = await chromium.connectOverCDP(b.cdp_ws_url);
          try {
            const p = br.contexts()[0].pages()[0];
            await p.goto(`${site.url}/page`);
            const [dl] = await Promise.all([p.waitForEvent('download'), p.click('#a')]);
            eq(dl.suggestedFilename(), 'report.pdf', 'Playwright saw the download');
            const guid = (await dl.path().catch(() => dl.url())).split('/').pop();
            const second = await waitFor(async () => (await list()).downloads.find((x) => x.name === guid && x.complete), `the Playwright download ${guid} listed`);
            assert(/^\/tmp\/playwright-artifacts-[^/]+\//.test(second.path), `in Playwright's folder: ${second.path}`);
            eq([second.size, second.type, second.sha256], [pdf.length, 'application/pdf', sha], 'typed by its signature, hashed');
            assert((await read(second.path)).equals(pdf), 'readFile of the Playwright download');
            eq((await list()).downloads.map((x) => x.path), [d.path, second.path], 'oldest first');
          } finally { await br.close().catch(() => {}); }
          // Another org's key, or no key, sees nothing.
          eq((await request(s.base, 'GET', `/browsers/${b.session_id}/fs/downloads`)).status, 401, 'no key');
        } finally { await api(s, 'DELETE', `/browsers/${b.session_id}`); }
      }, (req, res) => {
        if (req.url === '/file') { res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-disposition': 'attachment; filename="report.pdf"' }); res.end(pdf); return; }
        res.writeHead(200, { 'content-type': 'text/html' }); res.end('<title>page</title><a id=a href="/file">report</a>');
      });
    },
  },
  {
    name: 'issue 31.10: a session\'s own browser opens its own CDP relay with its own token (as Stagehand 4\'s extension does), by 127.0.0.1 and by localhost; another session\'s token, other endpoints, the API and the admin API stay refused',
    timeout: 90000,
    fn: () => withServer(async (s, site) => {
      const b = await create(s);
      const other = await create(s);
      const br = await chromium.connectOverCDP(b.cdp_ws_url);
      try {
        const pg = br.contexts()[0].pages()[0];
        await pg.goto(`${site.url}/`);
        // In the page: open a WebSocket, send Browser.getVersion, report what came back.
        const tryWs = (u) => pg.evaluate((url) => new Promise((resolve) => {
          let ws;
          try { ws = new WebSocket(url); } catch (e) { resolve(`throw ${e.message}`); return; }
          const t = setTimeout(() => resolve('timeout'), 10000);
          ws.onopen = () => ws.send(JSON.stringify({ id: 1, method: 'Browser.getVersion' }));
          ws.onmessage = (m) => { clearTimeout(t); const j = JSON.parse(m.data); resolve(j.result ? `product ${j.result.product}` : `message ${m.data}`); ws.close(); };
          ws.onerror = () => { clearTimeout(t); resolve('error'); };
        }), u);
        const own = await tryWs(b.cdp_ws_url);
        assert(/^product .*Chrom/.test(own), `the session's own relay with its own token: ${own}`);
        const byName = await tryWs(b.cdp_ws_url.replace('127.0.0.1', 'localhost'));
        assert(/^product /.test(byName), `by localhost: ${byName}`);
        const tok = tokenOf(b.cdp_ws_url);
        const base = b.cdp_ws_url.split('/browser/')[0];
        for (const [what, u] of [
          ['another session\'s token', other.cdp_ws_url],
          ['a forged token', `${base}/browser/cdp?jwt=${tok.slice(0, -2)}${tok.endsWith('AA') ? 'BB' : 'AA'}`],
          ['no token', `${base}/browser/cdp`],
          ['its own token on another endpoint (webdriver)', `${base}/browser/webdriver?jwt=${tok}`],
          ['its own token on the API', `${base}/browsers/zz31probe?jwt=${tok}`],
          ['the admin API', `${base}/admin/orgs?jwt=${tok}`],
        ]) eq(await tryWs(u), 'error', what);
        // Plain HTTP to the server (the API, with a real key; discovery with its own token): refused by the egress.
        const fetched = await pg.evaluate(async ([base, key, tok]) => {
          const out = [];
          for (const [u, h] of [[`${base}/browsers/zz31probe`, { authorization: `Bearer ${key}` }], [`${base}/admin/plans`, {}], [`${base}/browser/cdp/${tok}/json/version`, {}]]) {
            try { const r = await fetch(u, { headers: h }); out.push(r.status); } catch (e) { out.push('refused'); }
          }
          return out;
        }, [s.base, s.key, tok]);
        eq(fetched, ['refused', 'refused', 'refused'], 'the API, the admin API and discovery over plain HTTP');
        assert(!/zz31probe/.test(s.log), 'no refused request reached the API');
        assert(/session relay: session \w+'s own browser attached/.test(s.log), 'the relay attach was logged');
      } finally {
        await br.close().catch(() => {});
        await api(s, 'DELETE', `/browsers/${b.session_id}`);
        await api(s, 'DELETE', `/browsers/${other.session_id}`);
      }
    }),
  },
  {
    name: 'issue 31.6: a headful session\'s live view shows its whole display: a second tab the agent opens (and draws in) appears in the viewer\'s frames, at the screen\'s size; at most 8 viewers per session (429)',
    timeout: 90000,
    fn: () => withServer(async (s, site) => {
      const b = await create(s, { headless: false, viewport: { width: 800, height: 600 } });
      const br = await chromium.connectOverCDP(b.cdp_ws_url);
      let lv;
      try {
        const ctx = br.contexts()[0];
        const first = ctx.pages()[0];
        await first.goto(`${site.url}/green`);
        lv = await liveFrames(b.browser_live_view_url);
        await waitFor(() => lv.frame && near(framePixel(lv.frame).rgb, [0, 170, 0]), 'the viewer shows the green first tab', 30000, 200);
        eq(framePixel(lv.frame).size, '800,600', 'the frames are the whole screen (tab strip included), not the page');
        // The agent opens a second tab and draws in it: the viewer follows.
        const second = await ctx.newPage();
        await second.goto(`${site.url}/blue`);
        await waitFor(() => near(framePixel(lv.frame).rgb, [0, 0, 255]), 'the viewer shows the blue second tab', 30000, 200);
        // And back: the first tab brought to the front shows again.
        await first.bringToFront();
        await waitFor(() => near(framePixel(lv.frame).rgb, [0, 170, 0]), 'the viewer shows the first tab again', 30000, 200);
        // Each viewer holds a thread, an X connection and a screen of pixels:
        // at most 8 per session (LIM_LIVE_VIEWERS_SESSION); the next is a 429.
        const more = [];
        try {
          for (let i = 1; i < 8; i++) more.push(await liveFrames(b.browser_live_view_url));
          const { default: WebSocket } = await import('ws');
          const status = await new Promise((r) => {
            const ws = new WebSocket(b.browser_live_view_url.replace(/^http/, 'ws') + '/ws?readOnly=true');
            ws.once('unexpected-response', (_, res) => r(`${res.statusCode} ${res.headers['retry-after']}`));
            ws.once('open', () => { ws.close(); r('open'); });
            ws.once('error', () => {});
          });
          eq(status, '429 5', 'a ninth viewer of the session: 429 with Retry-After');
        } finally { for (const m of more) m.close(); }
      } finally {
        if (lv) lv.close();
        await br.close().catch(() => {});
        await api(s, 'DELETE', `/browsers/${b.session_id}`);
      }
    }, (req, res) => {
      const c = { '/green': '0,170,0', '/blue': '0,0,255' }[req.url] || '255,255,255';
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(`<!doctype html><title>${req.url}</title><body style="margin:0;height:100vh;background:rgb(${c})"></body>`);
    }),
  },
];
