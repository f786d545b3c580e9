// Classic WebDriver HTTP (issue 38, docs/webdriver.md) with real clients:
// selenium-webdriver through the grid endpoint (the API key in the URL's user
// info), webdriverio with a new session and with attach() to a browser made
// through the API (its webdriver_url), a session acquired from a pool
// through browserd:options, and another organization's key refused.
import { Builder, By, until as seUntil } from 'selenium-webdriver';
import LogInspector from 'selenium-webdriver/bidi/logInspector.js';
import { remote, attach } from 'webdriverio';
import { request, assert, eq, waitFor, startSite, withServer, newOrg, createSession, deleteSession, rawConn } from '../blackbox/lib.mjs';

const PAGE = `<title>wd page</title>
<button id="btn" onclick="document.getElementById('out').textContent='clicked'">go</button>
<p id="out">waiting</p>`;

async function site() {
  return startSite((rq, rs) => { rs.setHeader('content-type', 'text/html'); rs.end(PAGE); });
}

const api = (s, method, path, body, key = s.key) => request(s.base, method, path, { key, body });
const until = (fn, what, ms = 20000) => waitFor(fn, what, ms, 100);

// A Selenium driver on server s's grid, the key in the URL's user info.
function selenium(s, key, opts = {}, path = '/wd/hub', caps = {}) {
  return new Builder()
    .usingServer(`http://${key}@127.0.0.1:${s.port}${path}`)
    .withCapabilities({ browserName: 'chrome', 'browserd:options': { headless: true, ...opts }, ...caps })
    .build();
}

// The session's state in the API: 'active', 'deleted', or 'gone' (404).
async function state(s, id, key = s.key) {
  const r = await api(s, 'GET', `/browsers/${id}?include_deleted=true`, undefined, key);
  return r.status === 404 ? 'gone' : r.json.deleted_at ? 'deleted' : 'active';
}

export const tests = [
  {
    name: 'issue 38: selenium-webdriver through /wd/hub (key in the URL user info) creates a browserd session, finds and clicks an element on a loopback page, screenshots, gets BiDi log events on webSocketUrl, quits (the session ends)',
    timeout: 90000,
    fn: async () => { const w = await site(); try { await withServer({ args: w.allow }, async (s) => {
      const st = await request(s.base, 'GET', '/wd/hub/status', {});
      eq(st.status, 200, st.text);
      eq(st.json.value.ready, true);
      const d = await selenium(s, s.key, {}, '/wd/hub', { webSocketUrl: true });
      let id;
      try {
        id = (await d.getSession()).getId();
        eq(await state(s, id), 'active', 'the WebDriver session is a browserd session');
        // BiDi beside classic: webSocketUrl is the session's webdriver_ws_url; log events.
        const rec = (await api(s, 'GET', `/browsers/${id}`)).json;
        const wsu = (await d.getCapabilities()).get('webSocketUrl');
        eq(new URL(wsu).pathname, new URL(rec.webdriver_ws_url).pathname, `webSocketUrl ${wsu}`);
        const logs = [];
        const inspector = await LogInspector(d);
        await inspector.onConsoleEntry((e) => logs.push(e.text));
        const caps = await d.getCapabilities();
        assert(/^ws:\/\/127\.0\.0\.1:\d+\/browser\/cdp\?jwt=/.test(caps.get('se:cdp')), `se:cdp ${caps.get('se:cdp')}`);
        assert(!JSON.stringify(caps).includes(s.dir), 'no host path in the capabilities');
        await d.get(w.url);
        eq(await d.getTitle(), 'wd page');
        await d.findElement(By.id('btn')).click();
        await d.wait(seUntil.elementTextIs(d.findElement(By.id('out')), 'clicked'), 10000);
        const png = Buffer.from(await d.takeScreenshot(), 'base64');
        eq(png.subarray(1, 4).toString(), 'PNG', 'a PNG screenshot');
        await d.executeScript("console.log('from the page')");
        await until(() => logs.includes('from the page'), `a BiDi log event (got ${JSON.stringify(logs)})`);
        await inspector.close();
      } finally { await d.quit(); }
      eq(await state(s, id), 'deleted', 'quit ended the browserd session');
      // Its commands are refused now, in WebDriver's error format.
      const r = await request(s.base, 'GET', `/session/${id}/url`, { key: s.key });
      eq(r.status, 404, r.text);
      eq(r.json.value.error, 'invalid session id');
    }); } finally { w.close(); } },
  },
  {
    name: 'issue 38: webdriverio remote() at /session (Basic user:key, then the key as a header) and attach() through the Browser record\'s webdriver_url to a session made by the API',
    timeout: 90000,
    fn: async () => { const w = await site(); try { await withServer({ args: w.allow }, async (s) => {
      const b = await remote({
        // webdriverio sends user/key (Basic) with POST /session only: the
        // commands after it carry the key as a header of every request.
        hostname: '127.0.0.1', port: s.port, path: '/', user: 'ci', key: s.key, logLevel: 'warn',
        headers: { authorization: `Bearer ${s.key}` },
        capabilities: { browserName: 'chrome', 'browserd:options': { headless: true } },
        connectionRetryCount: 0,
      });
      const id = b.sessionId;
      try {
        eq(await state(s, id), 'active');
        await b.url(w.url);
        await (await b.$('#btn')).click();
        await until(async () => (await (await b.$('#out')).getText()) === 'clicked', 'wdio click');
      } finally { await b.deleteSession(); }
      eq(await state(s, id), 'deleted');

      const rec = (await api(s, 'POST', '/browsers', { headless: true })).json;
      assert(/^http:\/\/127\.0\.0\.1:\d+\/browser\/wd\/[\w-]+\.[\w-]+\.[\w-]+$/.test(rec.webdriver_url), rec.webdriver_url);
      const u = new URL(rec.webdriver_url);
      const a = await attach({
        sessionId: rec.session_id,
        options: { protocol: 'http', hostname: u.hostname, port: Number(u.port), path: u.pathname, logLevel: 'warn' },
        capabilities: { browserName: 'chrome' },
      });
      await a.url(w.url);
      eq(await a.getTitle(), 'wd page');
      await (await a.$('#btn')).click();
      await until(async () => (await (await a.$('#out')).getText()) === 'clicked', 'attached click');
      await a.deleteSession();
      eq(await state(s, rec.session_id), 'active', 'a joined client leaving keeps the session');
      // Another session's id under this token is refused.
      const other = await createSession(s);
      const r = await request(s.base, 'GET', `${u.pathname}/session/${other}/url`, {});
      eq(r.status, 404, r.text);
      eq(r.json.value.error, 'invalid session id');
      await deleteSession(s, other);
      await deleteSession(s, rec.session_id);
    }); } finally { w.close(); } },
  },
  {
    name: 'issue 38: browserd:options.pool acquires the session from that pool; quit releases it back (not ended)',
    timeout: 90000,
    fn: () => withServer({}, async (s) => {
      const p = await api(s, 'POST', '/browser_pools', { name: 'wdpool', size: 1, headless: true, fill_rate_per_minute: 6000 });
      eq(p.status, 200, p.text);
      const avail = async () => (await api(s, 'GET', '/browser_pools/wdpool')).json.available_count;
      await until(async () => (await avail()) === 1, 'pool filled');
      const d = await selenium(s, s.key, { pool: 'wdpool' }, '');
      let id;
      try {
        id = (await d.getSession()).getId();
        const rec = (await api(s, 'GET', `/browsers/${id}`)).json;
        eq(rec.pool && rec.pool.id, p.json.id, `acquired from the pool: ${JSON.stringify(rec.pool)}`);
        eq(await avail(), 0, 'the pool lent its browser');
        eq(await d.executeScript('return 6 * 7'), 42);
      } finally { await d.quit(); }
      await until(async () => (await avail()) === 1, 'released back to the pool');
      eq(await state(s, id), 'active', 'the pool browser lives on');
      eq((await api(s, 'DELETE', '/browser_pools/wdpool', { force: true })).status, 204);
    }),
  },
  {
    name: 'issue 38: another organization\'s key cannot drive a WebDriver session (404 invalid session id, as for an unknown one); a bad key is 401',
    timeout: 90000,
    fn: () => withServer({ args: ['--admin-token', 'adm'] }, async (s) => {
      const { key: other } = await newOrg(s, 'adm', { name: 'other' });
      const d = await selenium(s, s.key);
      try {
        const id = (await d.getSession()).getId();
        for (const [method, path, body] of [['GET', `/session/${id}/url`], ['POST', `/session/${id}/url`, { url: 'about:blank#x' }],
          ['GET', `/wd/hub/session/${id}/title`], ['DELETE', `/session/${id}`]]) {
          const r = await request(s.base, method, path, { key: other, body });
          eq(r.status, 404, `${method} ${path}: ${r.text}`);
          eq(r.json.value.error, 'invalid session id');
          const unknown = await request(s.base, method, path.replace(id, 'nosuchsession'), { key: other, body });
          eq(r.json.value.message.replace(id, 'X'), unknown.json.value.message.replace('nosuchsession', 'X'), 'the same answer as an unknown id');
        }
        // Basic credentials of the other org (as webdriverio sends user:key) are refused the same way.
        const basic = `Basic ${Buffer.from(`u:${other}`).toString('base64')}`;
        const r = await request(s.base, 'GET', `/session/${id}/url`, { headers: { authorization: basic } });
        eq(r.status, 404, r.text);
        const bad = await request(s.base, 'GET', `/session/${id}/url`, { headers: { authorization: `Basic ${Buffer.from('u:nope').toString('base64')}` } });
        eq(bad.status, 401, bad.text);
        eq(await state(s, id), 'active', 'the session is untouched');
        eq(await d.getCurrentUrl(), 'about:blank', 'its owner still drives it');
      } finally { await d.quit(); }
    }),
  },
  {
    name: 'issue 38: hostile input on the grid: bad browserd:options are 400 invalid argument naming the field, a command path leaving the session (..) is refused, a new session past the org\'s browser limit is 429 with Retry-After',
    timeout: 60000,
    fn: () => withServer({ args: ['--admin-token', 'adm'] }, async (s) => {
      const { key } = await newOrg(s, 'adm', { name: 'tiny', overrides: { limits: { max_concurrent_browsers: 1 } } });
      const create = (caps) => request(s.base, 'POST', '/session', { key, body: { capabilities: { alwaysMatch: caps } } });
      let r = await create({ 'browserd:options': { headless: 'yes' } });
      eq(r.status, 400, r.text);
      eq(r.json.value.error, 'invalid argument');
      assert(/headless/.test(r.json.value.message), r.json.value.message);
      r = await create({ browserName: 'firefox' });
      eq(r.json.value.error, 'session not created', r.text);
      r = await create({ 'browserd:options': { headless: true } });
      eq(r.status, 200, r.text);
      const id = r.json.value.sessionId;
      for (const tail of ['/../../status', '/x/../../../session']) {
        // Sent as is (a URL object would resolve the dots first).
        const c = rawConn(s.port);
        await c.connected;
        c.sock.write(`GET /session/${id}${tail} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`);
        await c.closed;
        assert(/^HTTP\/1\.1 404 /.test(c.got), `${tail}: ${c.got}`);
        assert(c.got.includes('"error":"unknown command"'), c.got);
      }
      const more = await create({ 'browserd:options': { headless: true } });
      eq(more.status, 429, more.text);
      assert(Number(more.headers['retry-after']) > 0, 'Retry-After');
      eq(more.json.value.error, 'session not created');
      eq((await request(s.base, 'DELETE', `/session/${id}`, { key })).status, 200);
      eq(await state(s, id, key), 'deleted');
    }),
  },
];
