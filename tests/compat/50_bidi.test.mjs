// WebDriver BiDi through webdriver_ws_url (issue 9): a plain WebSocket client
// speaking BiDi (session.new, browsingContext.getTree/navigate, script.evaluate)
// while Playwright is attached to the same session over cdp_ws_url; the token
// rules of the endpoint; the session's chromedriver stops with the session.
import http from 'node:http';
import { readFileSync } from 'node:fs';
import WebSocket from 'ws';
import { chromium } from 'playwright-core';
import { startServer, request, assert, eq, waitFor, sessionPids } from '../blackbox/lib.mjs';

async function site() {
  const srv = http.createServer((rq, rs) => {
    rs.setHeader('content-type', 'text/html');
    rs.end('<title>bidi page</title><h1>hello bidi</h1>');
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const hostport = `127.0.0.1:${srv.address().port}`;
  // Pages may reach a loopback site only when the server allows it (OPERATOR.md).
  return { url: `http://${hostport}/bidi`, allow: ['--allow-loopback', hostport], close: () => srv.close() };
}

async function withServer(fn, opts) {
  const s = await startServer(opts);
  try { await fn(s); } finally { await s.stop(); s.cleanup(); }
}

const api = (s, method, path, body, key = s.key) => request(s.base, method, path, { key, body });

async function create(s, body = {}) {
  const r = await api(s, 'POST', '/browsers', { headless: true, ...body });
  eq(r.status, 200, `create: ${r.text}`);
  return r.json;
}

const until = (fn, what, ms = 15000) => waitFor(fn, what, ms, 100);

// A minimal BiDi client: send(method, params) resolves with the result or
// rejects with the error message.
function bidi(url) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    let next = 1;
    const waiting = new Map();
    const events = [];
    ws.on('message', (d) => {
      const m = JSON.parse(d.toString());
      if (m.type === 'event') { events.push(m); return; }
      const w = waiting.get(m.id);
      if (!w) return;
      waiting.delete(m.id);
      if (m.type === 'success') w.resolve(m.result);
      else w.reject(new Error(`${m.error}: ${m.message}`));
    });
    ws.on('error', reject);
    ws.on('unexpected-response', (rq, rs) => reject(new Error(`HTTP ${rs.statusCode}`)));
    ws.on('open', () => resolve({
      ws, events,
      send(method, params = {}) {
        const id = next++;
        ws.send(JSON.stringify({ id, method, params }));
        return new Promise((res, rej) => {
          waiting.set(id, { resolve: res, reject: rej });
          setTimeout(() => { if (waiting.delete(id)) rej(new Error(`${method}: no answer`)); }, 30000);
        });
      },
      close() { return new Promise((r) => { ws.once('close', r); ws.close(); }); },
    }));
  });
}

// The HTTP status a WebSocket handshake to url gets (101 when it opens).
function handshakeStatus(url) {
  return new Promise((resolve) => {
    const ws = new WebSocket(url);
    ws.on('open', () => { ws.close(); resolve(101); });
    ws.on('unexpected-response', (rq, rs) => { rs.resume(); resolve(rs.statusCode); });
    ws.on('error', () => resolve(0));
  });
}

// The chromedriver of session id: a process of the session (lib.mjs) whose
// program is chromedriver (in a sandbox, bwrap's two processes carry the same
// arguments; the driver sees its log at a neutral path, issue 29.16).
function driverPids(dir, id) {
  return sessionPids(dir, id).filter((p) => {
    try { return /chromedriver$/.test(readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0')[0]); } catch { return false; }
  });
}

function alive(pid) {
  try { process.kill(pid, 0); return true; } catch { return false; }
}

export const tests = [
  {
    name: 'BiDi client through webdriver_ws_url: session.new, getTree, navigate (complete), script.evaluate; Playwright over CDP sees the navigation',
    timeout: 120000,
    fn: async () => { const w = await site(); await withServer(async (s) => {
      const b = await create(s);
      assert(/^ws:\/\/127\.0\.0\.1:\d+\/browser\/webdriver\?jwt=[\w-]+\.[\w-]+\.[\w-]+$/.test(b.webdriver_ws_url), b.webdriver_ws_url);
      const pw = await chromium.connectOverCDP(b.cdp_ws_url);
      const c = await bidi(b.webdriver_ws_url);
      try {
        // As a BiDi client opens a session (the driver's is already there).
        const sess = await c.send('session.new', { capabilities: {} });
        assert(typeof sess.sessionId === 'string' && sess.sessionId.length > 0, 'sessionId');
        eq(sess.capabilities.browserName, 'chrome');
        eq(sess.capabilities.webSocketUrl, b.webdriver_ws_url, 'webSocketUrl is the public URL');
        const st = await c.send('session.status');
        eq(typeof st.ready, 'boolean');
        const tree = await c.send('browsingContext.getTree');
        assert(tree.contexts.length >= 1, 'at least one top-level context');
        const ctx = tree.contexts[0].context;
        const nav = await c.send('browsingContext.navigate', { context: ctx, url: w.url, wait: 'complete' });
        eq(nav.url, w.url);
        const ev = await c.send('script.evaluate', { expression: 'document.title', target: { context: ctx }, awaitPromise: false });
        eq(ev.type, 'success');
        eq(ev.result, { type: 'string', value: 'bidi page' }, `title; tree ${JSON.stringify(await c.send('browsingContext.getTree'))}`);
        // A second session.new on the same connection is refused by the driver.
        let refused = null;
        try { await c.send('session.new', { capabilities: {} }); } catch (e) { refused = e.message; }
        assert(refused && /session not created/.test(refused), `second session.new: ${refused}`);
        // The CDP client attached at the same time sees the page BiDi navigated.
        await until(() => pw.contexts()[0].pages().some((p) => p.url() === w.url), 'navigation seen over CDP');
        const pages = pw.contexts()[0].pages().filter((p) => p.url() === w.url);
        eq(await pages[0].title(), 'bidi page');
      } finally {
        await c.close();
        await pw.close();
        w.close();
      }
      // A second BiDi client later reuses the same driver and session.
      const c2 = await bidi(b.webdriver_ws_url);
      try {
        await c2.send('session.new', { capabilities: {} });
        const tree = await c2.send('browsingContext.getTree');
        assert(tree.contexts.some((x) => x.url === w.url), 'second client sees the page');
      } finally { await c2.close(); }
      eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204);
    }, { args: w.allow }); },
  },
  {
    name: 'webdriver_ws_url token rules: missing 401, tampered 401, wrong audience (cdp token) 401, deleted session 404',
    timeout: 90000,
    fn: () => withServer(async (s) => {
      const b = await create(s);
      const u = new URL(b.webdriver_ws_url);
      const tok = u.searchParams.get('jwt');
      const base = `${u.protocol}//${u.host}${u.pathname}`;
      eq(await handshakeStatus(base), 401, 'missing token');
      const [h, p, sig] = tok.split('.');
      const bad = `${h}.${p}.${sig.slice(0, -2)}${sig.endsWith('AA') ? 'BB' : 'AA'}`;
      eq(await handshakeStatus(`${base}?jwt=${bad}`), 401, 'tampered token');
      const cdpTok = new URL(b.cdp_ws_url).searchParams.get('jwt');
      eq(await handshakeStatus(`${base}?jwt=${cdpTok}`), 401, 'a cdp token is not a webdriver token');
      eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204);
      eq(await handshakeStatus(b.webdriver_ws_url), 404, 'deleted session');
      // Without a WebSocket upgrade the endpoint says so.
      const plain = await request(s.base, 'GET', `/browser/webdriver?jwt=${tok}`, {});
      eq(plain.status, 404, 'plain GET for a deleted session');
    }),
  },
  {
    name: 'The session\'s chromedriver starts with the first BiDi client and is gone after DELETE /browsers/{id}',
    timeout: 90000,
    fn: () => withServer(async (s) => {
      const b = await create(s);
      eq(driverPids(s.dir, b.session_id).length, 0, 'no driver before a BiDi client');
      const c = await bidi(b.webdriver_ws_url);
      await c.send('session.new', { capabilities: {} });
      await c.send('browsingContext.getTree');
      const pids = driverPids(s.dir, b.session_id);
      eq(pids.length, 1, `one chromedriver for the session: ${pids}`);
      // The client's connection ends when the session is deleted.
      const closed = new Promise((r) => c.ws.once('close', r));
      eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204);
      await until(() => !alive(pids[0]), 'chromedriver gone', 10000);
      eq(driverPids(s.dir, b.session_id).length, 0, 'no chromedriver left');
      await closed;
    }),
  },
  {
    name: 'A client that ends the WebDriver session (session.end) leaves the browser and its tab; the next client gets a fresh driver session',
    timeout: 120000,
    fn: async () => { const w = await site(); await withServer(async (s) => {
      const b = await create(s);
      const c = await bidi(b.webdriver_ws_url);
      const first = await c.send('session.new', { capabilities: {} });
      const tree = await c.send('browsingContext.getTree');
      await c.send('browsingContext.navigate', { context: tree.contexts[0].context, url: w.url, wait: 'complete' });
      await c.send('session.end').catch(() => {});
      await c.close().catch(() => {});
      const c2 = await bidi(b.webdriver_ws_url);
      try {
        const second = await c2.send('session.new', { capabilities: {} });
        assert(second.sessionId !== first.sessionId, 'a new WebDriver session');
        const t2 = await c2.send('browsingContext.getTree');
        // Same browser, same tab. (ChromeDriver 156 navigates a page to
        // about:blank when it creates a BiDi session on a running browser:
        // docs/webdriver.md, limitations; the URL is not checked.)
        assert(t2.contexts.some((x) => x.context === tree.contexts[0].context), `same tab: ${JSON.stringify(t2)}`);
      } finally { await c2.close(); w.close(); }
      const r = await api(s, 'GET', `/browsers/${b.session_id}`);
      eq(r.status, 200);
      eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204);
    }, { args: w.allow }); },
  },
  {
    name: 'Server stop (SIGTERM) with a BiDi client attached: the server exits cleanly and the chromedriver is gone',
    timeout: 90000,
    fn: async () => {
      const s = await startServer();
      try {
        const b = await create(s);
        const c = await bidi(b.webdriver_ws_url);
        await c.send('session.new', { capabilities: {} });
        const pids = driverPids(s.dir, b.session_id);
        eq(pids.length, 1, 'one chromedriver');
        const code = await s.stop();
        eq(code, 0, 'clean exit');
        await until(() => !alive(pids[0]), 'chromedriver gone', 10000);
      } finally { await s.stop(); s.cleanup(); }
    },
  },
];
