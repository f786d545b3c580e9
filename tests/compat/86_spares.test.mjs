// Issue 21: pre-launched spare browsers (docs/spares.md). A create that
// spare_match fits is served by a spare: it must work like any create (CDP
// ready, Playwright drives it, the record's fields, the org's limit) and show
// no trace of a past (one blank page, no cookies, no storage, no history).
// A create that differs in a launch-affecting field gets a cold browser with
// that configuration; proxy and network are applied to a spare's egress at
// hand-out (the pages' traffic then takes the owner's proxy and routes). --spares 0 keeps none, and no spare outlives the server.
//
// Which browser served a create is read from the data folder: a ready spare
// is DATA/sessions/ID.spare (its marker, removed at hand-out), and the
// session created from it keeps that ID.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { startServer, startSite, request, assert, eq, isError, waitFor, sessionCgroupDirs } from '../blackbox/lib.mjs';

const api = (s, method, path, body, key = s.key) => request(s.base, method, path, { key, body });

// Ready spares: id -> {pid, xvfb}.
function spares(s) {
  const dir = join(s.dir, 'sessions');
  const out = new Map();
  if (!existsSync(dir)) return out;
  for (const f of readdirSync(dir)) {
    if (!f.endsWith('.spare')) continue;
    let txt = '';
    try { txt = readFileSync(join(dir, f), 'utf8'); } catch { continue; }
    const [pid, , xvfb] = txt.trim().split(/\s+/).map(Number);
    if (pid > 0) out.set(f.slice(0, -6), { pid, xvfb });
  }
  return out;
}

// Waits until n spares are ready (each launch takes about a second) and the
// log says which kind each is.
// n spares ready, each with its launch line in the server's log (kindOf):
// the marker file is written just before that line, which reaches s.log a
// moment later.
async function ready(s, n) {
  await waitFor(() => {
    const m = spares(s);
    return m.size >= n && [...m.keys()].every((id) => kindOf(s, id));
  }, `${n} spare(s) ready`, 60000, 100);
  return spares(s);
}

function kindOf(s, id) {
  const m = new RegExp(`spares: (headful|headless) spare ${id} launched`).exec(s.log);
  return m && m[1];
}

function alive(pid) {
  try { process.kill(pid, 0); return true; } catch { return false; }
}

async function withServer(fn, opts = {}) {
  const s = await startServer(opts);
  try { await fn(s); } finally { await s.stop(); s.cleanup(); }
}

async function connect(b) {
  const br = await chromium.connectOverCDP(b.cdp_ws_url);
  const ctx = br.contexts()[0];
  return { br, ctx, pg: ctx.pages()[0] };
}

// What a page shows of its browser's past.
async function traces(b, site) {
  const { br, ctx, pg } = await connect(b);
  try {
    const pages = ctx.pages().length;
    const url = pg.url();
    const history = await pg.evaluate(() => history.length);
    const cookies = await ctx.cookies();
    await pg.goto(site.url);
    const seen = await pg.evaluate(() => ({ cookie: document.cookie, storage: localStorage.length, session: sessionStorage.length }));
    return { pages, url, history, cookies: cookies.length, ...seen };
  } finally { await br.close().catch(() => {}); }
}

// A custom upstream proxy on loopback (HTTP CONNECT, the only way the egress
// speaks to an upstream); logs every CONNECT target and connects the test's
// names to 127.0.0.1.
async function upstream() {
  const log = [];
  const srv = net.createServer((c) => {
    let buf = '';
    const onData = (d) => {
      buf += d.toString('latin1');
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      c.removeListener('data', onData);
      const [method, target] = buf.slice(0, end).split('\r\n')[0].split(' ');
      log.push(target);
      if (method !== 'CONNECT') { c.end('HTTP/1.1 405 Method Not Allowed\r\n\r\n'); return; }
      const port = Number(target.slice(target.lastIndexOf(':') + 1));
      const up = net.connect(port, '127.0.0.1', () => {
        c.write('HTTP/1.1 200 Connection established\r\n\r\n');
        const rest = buf.slice(end + 4);
        if (rest) up.write(Buffer.from(rest, 'latin1'));
        c.pipe(up); up.pipe(c);
      });
      up.on('error', () => c.destroy());
      c.on('error', () => up.destroy());
    };
    c.on('data', onData);
    c.on('error', () => {});
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  return { port: srv.address().port, log, saw: (name) => log.some((t) => t.startsWith(`${name}:`)), close: () => srv.close() };
}

// A loopback port nothing listens on (a proxy that is down).
async function freePort() {
  const srv = net.createServer();
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const p = srv.address().port;
  await new Promise((r) => srv.close(r));
  return p;
}

// What the page of b gets for url: {status, text} or {error}.
async function visit(b, url) {
  const { br, pg } = await connect(b);
  try {
    const res = await pg.goto(url, { timeout: 15000 });
    return { status: res ? res.status() : 0, text: await pg.innerText('body').catch(() => '') };
  } catch (e) {
    return { status: 0, text: '', error: String(e.message || e) };
  } finally { await br.close().catch(() => {}); }
}

const site = () => startSite((req, res) => {
  res.writeHead(200, { 'content-type': 'text/html' });
  res.end('<!doctype html><title>spare</title><p>hello</p>');
});

export const tests = [
  {
    name: 'issue 21 spares: POST /browsers {} is served by a ready headful spare: same id, CDP ready, Playwright drives it, created_at and usage from hand-out, and the record as for a cold create',
    timeout: 120000,
    async fn() {
      const st = await site();
      try {
        await withServer(async (s) => {
          const before = await ready(s, 2);
          const headful = [...before.keys()].find((id) => kindOf(s, id) === 'headful');
          assert(headful, `a headful spare was launched:\n${s.log}`);
          const t0 = Date.now();
          const r = await api(s, 'POST', '/browsers', {});
          eq(r.status, 200, r.text);
          const b = r.json;
          eq(b.session_id, headful, 'the headful spare served {} (headless defaults to false)');
          assert(!spares(s).has(headful), 'its marker is gone: it is a session now');
          eq(b.headless, false, 'headless');
          eq(b.stealth, false, 'stealth');
          eq(b.timeout_seconds, 60, 'timeout_seconds default');
          assert(Date.parse(b.created_at) >= t0 - 1000, `created_at ${b.created_at} is the hand-out time, not the spare's launch`);
          assert(b.usage.uptime_ms < 5000, `usage counted from hand-out: ${b.usage.uptime_ms} ms`);
          assert(/^ws:\/\//.test(b.cdp_ws_url) && b.base_url, 'cdp_ws_url and base_url');
          // Playwright drives it.
          const { br, pg } = await connect(b);
          await pg.goto(st.url);
          eq(await pg.title(), 'spare', 'Playwright navigates the handed-out browser');
          await br.close();
          // GET and the list show it like any session.
          const g = await api(s, 'GET', `/browsers/${b.session_id}`);
          eq(g.status, 200, g.text);
          eq(g.json.created_at, b.created_at, 'created_at stored');
          const l = await api(s, 'GET', '/browsers');
          assert(l.json.some((x) => x.session_id === b.session_id), 'listed');
          eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204, 'delete');
          const d = await request(s.base, 'GET', `/browsers/${b.session_id}?include_deleted=true`, { key: s.key });
          assert(d.json.deleted_at && d.json.usage.uptime_ms < Date.now() - t0 + 1000, `usage ${d.json.usage.uptime_ms} ms is no more than the session's life`);
        }, { args: [...st.allow, '--spares', '2'] });
      } finally { st.close(); }
    },
  },
  {
    name: 'issue 21 spares: a waiting spare runs in the background (its cgroup\'s cpu.idle is 1, so its start-up yields the CPU to the creates being served) and hand-out puts the session at normal priority (cpu.idle 0)',
    timeout: 120000,
    async fn() {
      await withServer(async (s) => {
        const before = await ready(s, 2);
        const idleOf = (id) => {
          const d = sessionCgroupDirs(id).find((x) => existsSync(join(x, 'cpu.idle')));
          return d ? readFileSync(join(d, 'cpu.idle'), 'utf8').trim() : null;
        };
        const headful = [...before.keys()].find((id) => kindOf(s, id) === 'headful');
        assert(headful, `a headful spare was launched:\n${s.log}`);
        if (idleOf(headful) === null) {
          // A host whose kernel or cgroups lack cpu.idle (before 5.15, or no cpu controller).
          assert(!existsSync('/sys/fs/cgroup/cpu/cpu.idle'), 'this host has cpu.idle, so the spare must have a cpu cgroup');
          return;
        }
        for (const id of before.keys()) eq(idleOf(id), '1', `waiting spare ${id}: cpu.idle`);
        const r = await api(s, 'POST', '/browsers', {});
        eq(r.status, 200, r.text);
        eq(r.json.session_id, headful, 'the headful spare served the create');
        eq(idleOf(headful), '0', 'the handed-out session: cpu.idle');
        eq((await api(s, 'DELETE', `/browsers/${headful}`)).status, 204, 'delete');
      }, { args: ['--spares', '2'] });
    },
  },
  {
    name: 'issue 21 spares: settings applicable to a running browser (name, tags, timeout_seconds, start_url, headless true) are applied at hand-out of a headless spare; a replacement is launched at once',
    timeout: 120000,
    async fn() {
      const st = await site();
      try {
        await withServer(async (s) => {
          const before = await ready(s, 2);
          const headless = [...before.keys()].find((id) => kindOf(s, id) === 'headless');
          const r = await api(s, 'POST', '/browsers', { headless: true, name: 'fast-one', tags: { team: 'a' }, timeout_seconds: 30, start_url: `${st.url}/start` });
          eq(r.status, 200, r.text);
          const b = r.json;
          eq(b.session_id, headless, 'served by the headless spare');
          eq(b.headless, true, 'headless');
          eq(b.name, 'fast-one', 'name');
          eq(JSON.stringify(b.tags), JSON.stringify({ team: 'a' }), 'tags');
          eq(b.timeout_seconds, 30, 'timeout_seconds');
          eq(b.start_url, `${st.url}/start`, 'start_url');
          const { br, pg } = await connect(b);
          await waitFor(() => pg.url() === `${st.url}/start`, 'the page navigated to start_url', 15000);
          await br.close();
          // The name is unique among active sessions, spare or not.
          const dup = await api(s, 'POST', '/browsers', { headless: true, name: 'fast-one' });
          eq(dup.status, 409, `a duplicate name is refused: ${dup.text}`);
          // Replaced at once: a new headless spare becomes ready.
          await waitFor(() => [...spares(s).keys()].some((id) => id !== headless && kindOf(s, id) === 'headless'), 'a new headless spare', 60000);
        }, { args: [...st.allow, '--spares', '2'] });
      } finally { st.close(); }
    },
  },
  {
    name: 'issue 21 spares: a handed-out spare has no trace of a past: one blank page, history.length 1, no cookies, no localStorage or sessionStorage, even after the previous session of the same server set all of them',
    timeout: 120000,
    async fn() {
      const st = startSite((req, res) => {
        // Only /set sets the cookie: the blank check reads the plain page.
        res.writeHead(200, req.url === '/set' ? { 'content-type': 'text/html', 'set-cookie': 'seen=1; Max-Age=3600' } : { 'content-type': 'text/html' });
        res.end('<!doctype html><title>t</title>');
      });
      const s1 = await st;
      try {
        await withServer(async (s) => {
          await ready(s, 2);
          for (const body of [{}, { headless: true }]) {
            const before = spares(s);
            const r = await api(s, 'POST', '/browsers', body);
            eq(r.status, 200, r.text);
            assert(before.has(r.json.session_id), `served by a spare: ${JSON.stringify(body)}`);
            const t = await traces(r.json, s1);
            eq(t.pages, 1, 'one page');
            eq(t.url, 'about:blank', 'the page is blank');
            eq(t.history, 1, 'history.length');
            eq(t.cookies, 0, 'no cookies in the browser');
            eq(t.cookie, '', 'document.cookie before the site set one');
            eq(t.storage, 0, 'localStorage');
            eq(t.session, 0, 'sessionStorage');
            // Leave state behind in this session, then end it.
            const { br, pg } = await connect(r.json);
            await pg.goto(`${s1.url}/set`);
            await pg.evaluate(() => { localStorage.setItem('k', 'v'); sessionStorage.setItem('k', 'v'); });
            assert((await pg.evaluate(() => document.cookie)).includes('seen=1'), 'the site set its cookie (the probe works)');
            await br.close();
            eq((await api(s, 'DELETE', `/browsers/${r.json.session_id}`)).status, 204, 'delete');
            await ready(s, 2);
          }
          // The next spares know nothing of the sessions above.
          for (const body of [{}, { headless: true }]) {
            const before = spares(s);
            const r = await api(s, 'POST', '/browsers', body);
            assert(before.has(r.json.session_id), 'served by a spare');
            const t = await traces(r.json, s1);
            eq(`${t.pages} ${t.history} ${t.cookies} ${t.storage} ${t.session}`, '1 1 0 0 0', `blank after a previous session: ${JSON.stringify(t)}`);
          }
        }, { args: [...s1.allow, '--spares', '2'] });
      } finally { s1.close(); }
    },
  },
  {
    name: 'issue 21 spares: a spare does not let an organization pass limits.max_concurrent_browsers (429 with Retry-After while spares are ready), and the refused create keeps the spares',
    timeout: 120000,
    async fn() {
      await withServer(async (s) => {
        const org = (await api(s, 'POST', '/admin/orgs', { name: 'tiny', overrides: { limits: { max_concurrent_browsers: 1 } } }, 'adm')).json;
        const key = (await api(s, 'POST', `/admin/orgs/${org.id}/api_keys`, {}, 'adm')).json.key;
        const before = await ready(s, 2);
        const a = await api(s, 'POST', '/browsers', { headless: true }, key);
        eq(a.status, 200, a.text);
        assert(before.has(a.json.session_id), 'the first create was served by a spare');
        await ready(s, 2);
        const held = spares(s);
        const b = await api(s, 'POST', '/browsers', { headless: true }, key);
        eq(b.status, 429, `over the limit: ${b.text}`);
        eq(b.json.code, 'rate_limited', 'code');
        assert(b.headers['retry-after'], 'Retry-After');
        eq([...spares(s).keys()].sort().join(), [...held.keys()].sort().join(), 'no spare was taken by the refused create');
        const c = await api(s, 'POST', '/browsers', {}, key);
        eq(c.status, 429, 'the headful kind too');
        eq((await api(s, 'DELETE', `/browsers/${a.json.session_id}`, undefined, key)).status, 204, 'delete');
        const d = await api(s, 'POST', '/browsers', {}, key);
        eq(d.status, 200, `room again: ${d.text}`);
      }, { args: ['--admin-token', 'adm', '--spares', '2'] });
    },
  },
  {
    name: 'issue 21 spares: each launch-affecting field (stealth, kiosk_mode, a headful viewport, memory, chrome_policy) gets a cold browser with that configuration, not a spare (a headless viewport is applied at hand-out: 86_spares_churn)',
    timeout: 180000,
    async fn() {
      await withServer(async (s) => {
        await ready(s, 2);
        const cases = [
          [{ stealth: true }, (b) => eq(b.stealth, true, 'stealth')],
          [{ headless: true, kiosk_mode: true }, (b) => eq(b.kiosk_mode, true, 'kiosk_mode')],
          [{ viewport: { width: 1280, height: 800 } }, async (b) => {
            eq(b.viewport.width, 1280, 'viewport.width');
            const { br, pg } = await connect(b);
            const w = await pg.evaluate(() => screen.width);
            await br.close();
            eq(w, 1280, 'the screen is 1280 wide');
          }],
          [{ headless: true, memory: '2GiB' }, (b) => eq(b.memory, '2GiB', 'memory')],
          [{ headless: true, chrome_policy: { BookmarkBarEnabled: false } }, (b) => eq(b.chrome_policy.BookmarkBarEnabled, false, 'chrome_policy')],
        ];
        for (const [body, check] of cases) {
          const held = spares(s);
          const r = await api(s, 'POST', '/browsers', body);
          eq(r.status, 200, `${JSON.stringify(body)}: ${r.text}`);
          assert(!held.has(r.json.session_id), `${JSON.stringify(body)} was not served by a spare`);
          assert(new RegExp(`session ${r.json.session_id} started \\(pid`).test(s.log), `${JSON.stringify(body)}: a cold launch`);
          await check(r.json);
          eq((await api(s, 'DELETE', `/browsers/${r.json.session_id}`)).status, 204, 'delete');
        }
        eq(spares(s).size, 2, 'the spares are still there');
      }, { args: ['--spares', '2'] });
    },
  },
  {
    name: 'issue 21 spares: proxy and network are applied at hand-out: a ready spare serves them, its pages go through the selected custom proxy, private_hosts go direct, routes take their proxy and fail closed, and the record shows them by id',
    timeout: 180000,
    async fn() {
      const hits = [];
      const st = await startSite((req, res) => {
        hits.push(`${req.headers.host}${req.url}`);
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end(`<!doctype html><title>s</title><p>site ${req.headers.host}</p>`);
      });
      const up = await upstream();
      const dead = await freePort();
      const port = Number(st.hostport.split(':')[1]);
      const names = ['a.test', 'b.test', 'r.test', 'down.test'];
      const url = (name, path = '/') => `http://${name}:${port}${path}`;
      try {
        await withServer(async (s) => {
          const p = (await api(s, 'POST', '/proxies', { type: 'custom', name: 'up', config: { host: '127.0.0.1', port: up.port } })).json;
          const pd = (await api(s, 'POST', '/proxies', { type: 'custom', name: 'dead', config: { host: '127.0.0.1', port: dead } })).json;
          assert(p.id && pd.id, 'proxies created');

          // The top-level proxy, with a private host that goes direct.
          let before = await ready(s, 2);
          const r1 = await api(s, 'POST', '/browsers', { headless: true, proxy: { id: p.id }, network: { private_hosts: ['a.test'] } });
          eq(r1.status, 200, r1.text);
          const b1 = r1.json;
          assert(before.has(b1.session_id), `served by a ready spare: ${b1.session_id} not in ${[...before.keys()]}`);
          assert(new RegExp(`session ${b1.session_id} started from a headless spare`).test(s.log), 'the log says so');
          eq(b1.proxy, { id: p.id }, 'proxy by id');
          eq(b1.proxy_id, p.id, 'proxy_id');
          eq(b1.network.private_hosts, ['a.test'], 'network');
          const v1 = await visit(b1, url('b.test', '/via-proxy'));
          assert(v1.text.includes('site b.test'), `through the proxy: ${JSON.stringify(v1)}`);
          assert(up.saw('b.test'), `the page's traffic reached the selected proxy: ${up.log}`);
          const v2 = await visit(b1, url('a.test', '/private'));
          assert(v2.text.includes('site a.test'), `private host: ${JSON.stringify(v2)}`);
          assert(!up.saw('a.test'), 'the private host went direct, not through the proxy');
          const g = await api(s, 'GET', `/browsers/${b1.session_id}`);
          eq(g.json.proxy, { id: p.id }, 'the stored record keeps the proxy');
          eq((await api(s, 'DELETE', `/browsers/${b1.session_id}`)).status, 204, 'delete');

          // Routes: one to the proxy (named, returned by id), one to a proxy that is down.
          before = await ready(s, 2);
          const r2 = await api(s, 'POST', '/browsers', {
            network: { proxy_routes: [{ hosts: ['r.test'], proxy: { name: 'up' } }, { hosts: ['down.test'], proxy: { id: pd.id } }] },
          });
          eq(r2.status, 200, r2.text);
          const b2 = r2.json;
          assert(before.has(b2.session_id), 'the headful spare served the create with routes');
          eq(b2.network.proxy_routes[0].proxy, { id: p.id }, 'route targets are returned by id');
          eq(b2.proxy, { mode: 'default' }, 'no top-level proxy');
          const v3 = await visit(b2, url('r.test', '/routed'));
          assert(v3.text.includes('site r.test'), `routed: ${JSON.stringify(v3)}`);
          assert(up.saw('r.test'), 'the routed host went through the route\'s proxy');
          const through = up.log.length;
          const v4 = await visit(b2, url('b.test', '/direct'));
          assert(v4.text.includes('site b.test'), `an unrouted host loads: ${JSON.stringify(v4)}`);
          assert(!up.log.slice(through).some((t) => t.startsWith('b.test:')), `an unrouted host goes direct, not through the proxy: ${up.log.slice(through)}`);
          const n = hits.length;
          const v5 = await visit(b2, url('down.test', '/closed'));
          assert(!v5.text.includes('site down.test'), `a route whose proxy is down fails closed: ${JSON.stringify(v5)}`);
          assert(!hits.slice(n).some((h) => h.startsWith('down.test')), 'the site was never reached through it');
          const { br, pg } = await connect(b2);
          const got = await pg.evaluate(async (u) => { try { const r = await fetch(u); return `status ${r.status}`; } catch { return 'failed'; } }, url('down.test', '/fetch'));
          await br.close();
          assert(got === 'failed' || got === 'status 502', `the page's fetch through the dead route is refused by the egress: ${got}`);
          assert(!hits.slice(n).some((h) => h.startsWith('down.test')), 'the fetch never reached the site');
          eq((await api(s, 'DELETE', `/browsers/${b2.session_id}`)).status, 204, 'delete');
        }, {
          args: ['--allow-loopback', `${st.hostport},127.0.0.1:${up.port},127.0.0.1:${dead}`, '--spares', '2'],
          env: { BROWSERD_CHROMIUM_EXTRA_ARGS: `--host-resolver-rules=${names.map((x) => `MAP ${x} 127.0.0.1`).join(',')}` },
        });
      } finally { st.close(); up.close(); }
    },
  },
  {
    name: 'issue 21 spares: a create naming an unknown proxy (top-level or route) answers the same 404 as a cold create and keeps the spares',
    timeout: 120000,
    async fn() {
      await withServer(async (s) => {
        const held = await ready(s, 2);
        for (const [body, coldBody] of [
          [{ headless: true, proxy: { id: 'nosuchproxy' } }, { headless: true, kiosk_mode: true, proxy: { id: 'nosuchproxy' } }],
          [{ proxy: { name: 'nosuch' } }, { stealth: true, proxy: { name: 'nosuch' } }],
          [{ network: { proxy_routes: [{ hosts: ['a.test'], proxy: { name: 'nope' } }] } }, { kiosk_mode: true, network: { proxy_routes: [{ hosts: ['a.test'], proxy: { name: 'nope' } }] } }],
        ]) {
          const cold = await api(s, 'POST', '/browsers', coldBody);
          isError(cold, 404, 'proxy_not_found');
          const r = await api(s, 'POST', '/browsers', body);
          isError(r, 404, 'proxy_not_found');
          eq(r.json.message, cold.json.message, `${JSON.stringify(body)}: the message of the cold create`);
          eq([...spares(s).keys()].sort().join(), [...held.keys()].sort().join(), `${JSON.stringify(body)}: no spare was taken`);
        }
        assert(!/started from a (headful|headless) spare/.test(s.log), 'no spare was handed out');
        const ok = await api(s, 'POST', '/browsers', { headless: true });
        eq(ok.status, 200, ok.text);
        assert(held.has(ok.json.session_id), 'the next create is served by a spare that was kept');
      }, { args: ['--spares', '2'] });
    },
  },
  {
    name: 'issue 21 spares: --spares 0 and BROWSERD_SPARES=0 keep no spare (every create launches cold); a bad value is refused at start',
    timeout: 90000,
    async fn() {
      for (const opts of [{ args: ['--spares', '0'] }, { env: { BROWSERD_SPARES: '0' } }]) {
        await withServer(async (s) => {
          assert(!/spares: keeping/.test(s.log), 'no filler');
          const r = await api(s, 'POST', '/browsers', {});
          eq(r.status, 200, r.text);
          assert(new RegExp(`session ${r.json.session_id} started \\(pid`).test(s.log), 'a cold launch');
          eq((await api(s, 'DELETE', `/browsers/${r.json.session_id}`)).status, 204, 'delete');
          // Given time for a filler to act, still none (it would have started at once).
          const t = Date.now();
          await waitFor(() => Date.now() - t > 1500 || spares(s).size > 0, 'a moment', 5000);
          eq(spares(s).size, 0, 'no spare');
          assert(!/spare \S+ launched/.test(s.log), 'none launched');
        }, opts);
      }
      let failed = null;
      try { const s = await startServer({ args: ['--spares', '-1'] }); await s.stop(); s.cleanup(); } catch (e) { failed = e; }
      assert(failed && /--spares/.test(String(failed.message)), `--spares -1 is refused: ${failed}`);
    },
  },
  {
    name: 'issue 21 teardown: DELETE records the end before its 204 (deleted_at, usage, CDP 404) and the browser, its folders and its cgroup are gone soon after; the next create is served at once',
    timeout: 90000,
    async fn() {
      await withServer(async (s) => {
        const before = await ready(s, 2);
        const r = await api(s, 'POST', '/browsers', { headless: true });
        eq(r.status, 200, r.text);
        const b = r.json;
        const { pid } = before.get(b.session_id);
        assert(alive(pid), 'the browser runs');
        eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204, 'delete');
        const g = await api(s, 'GET', `/browsers/${b.session_id}?include_deleted=true`);
        assert(g.json.deleted_at, `deleted_at at once: ${g.text}`);
        eq(typeof g.json.usage.uptime_ms, 'number', 'usage at once');
        eq((await api(s, 'GET', '/browsers')).json.length, 0, 'no longer listed as active');
        const ws = await request(s.base, 'GET', new URL(b.cdp_ws_url).pathname + new URL(b.cdp_ws_url).search, { headers: { upgrade: 'websocket', connection: 'upgrade', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', 'sec-websocket-version': '13' } });
        eq(ws.status, 404, 'CDP of the deleted session');
        const next = await api(s, 'POST', '/browsers', {});
        eq(next.status, 200, `the next create: ${next.text}`);
        await waitFor(() => !alive(pid), 'the deleted browser exited', 20000);
        await waitFor(() => !existsSync(join(s.dir, 'sessions', b.session_id)) && !existsSync(join(s.dir, 'sessions', `${b.session_id}.root`)), 'its folders removed', 20000);
        await waitFor(() => sessionCgroupDirs(b.session_id).length === 0, 'its cgroups removed (memory, pids, cpu)', 20000);
        const d = await api(s, 'GET', `/browsers/${b.session_id}?include_deleted=true`);
        eq(d.json.deleted_at, g.json.deleted_at, 'deleted_at unchanged by the teardown');
        eq(d.json.usage.uptime_ms, g.json.usage.uptime_ms, 'usage unchanged by the teardown');
      }, { args: ['--spares', '2'] });
    },
  },
  {
    name: 'issue 21 spares: no spare\'s processes, cgroups or folders remain after the server stops (SIGTERM), nor after kill -9 and a restart on the same data folder',
    timeout: 120000,
    async fn() {
      // A clean stop.
      let s = await startServer({ args: ['--spares', '2'] });
      let ids;
      try {
        ids = await ready(s, 2);
        for (const { pid } of ids.values()) assert(alive(pid), 'a spare runs');
      } finally { await s.stop(); }
      for (const [id, { pid, xvfb }] of ids) {
        assert(!alive(pid), `spare ${id}'s browser ${pid} ended with the server`);
        if (xvfb > 0) assert(!alive(xvfb), `spare ${id}'s Xvfb ${xvfb} ended`);
        assert(!existsSync(join(s.dir, 'sessions', id)), `spare ${id}'s folder removed`);
        assert(!existsSync(join(s.dir, 'sessions', `${id}.root`)), `spare ${id}'s files removed`);
        eq(sessionCgroupDirs(id), [], `spare ${id}'s cgroups removed`);
      }
      eq(spares(s).size, 0, 'no marker left');
      const dir = s.dir;
      // kill -9: the watcher ends the processes; the next start removes the rest.
      s = await startServer({ dataDir: dir, args: ['--spares', '2'] });
      try {
        ids = await ready(s, 2);
        await s.kill9();
        await waitFor(() => [...ids.values()].every(({ pid }) => !alive(pid)), 'the spares ended with the killed server', 15000);
      } catch (e) { s.cleanup(); throw e; }
      s = await startServer({ dataDir: dir, args: ['--spares', '0'] });
      try {
        for (const id of ids.keys()) {
          assert(!existsSync(join(s.dir, 'sessions', id)), `spare ${id}'s folder removed by the restart`);
          assert(!existsSync(join(s.dir, 'sessions', `${id}.spare`)), `spare ${id}'s marker removed`);
        }
        assert(/recovery: removed 2 spare/.test(s.log), `the restart says so:\n${s.log}`);
        // None of them became a session of anybody.
        const l = await api(s, 'GET', '/browsers?status=all');
        assert(!l.json.some((b) => ids.has(b.session_id)), 'no spare is listed as a session');
      } finally { await s.stop(); s.cleanup(); }
    },
  },
];
