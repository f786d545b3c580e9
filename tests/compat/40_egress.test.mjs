// The egress proxy (issue 6): /proxies, per-session egress listeners, proxy
// selection (direct / default / selected), private_hosts and proxy_routes
// (Network rules 1-9), PATCH switching without a restart, fail-closed routes
// and the isolation boundary of OPERATOR.md, observed from real pages.
//
// Everything runs on loopback: sites on several 127.0.0.x addresses, named
// with Chromium's --host-resolver-rules through BROWSERD_CHROMIUM_EXTRA_ARGS
// (the egress applies the same rules to its own resolution), and upstream
// proxies written here (one demanding Basic auth, one without, one whose
// port is closed) that log every CONNECT target.
import http from 'node:http';
import net from 'node:net';
import tls from 'node:tls';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { startServer, request, assert, eq, isError } from '../blackbox/lib.mjs';

const ADMIN = 'admin-token-egress-tests';
const PASSWORD = 'pw-s3cr3t-never-shown-4711';
const NAMES = {
  'a.test': '127.0.0.2',
  'x.corp.test': '127.0.0.3',
  'exact.w.test': '127.0.0.4',
  'other.w.test': '127.0.0.4',
  'a.deep.w.test': '127.0.0.5',
  'byp.deep.w.test': '127.0.0.5',
  'down.test': '127.0.0.6',
};

// A site on one loopback address; counts hits per Host header. /big/N
// answers N bytes of a known pattern.
async function site(addr) {
  const hits = [];
  const srv = http.createServer((rq, rs) => {
    hits.push(rq.headers.host);
    const big = /^\/big\/(\d+)$/.exec(rq.url);
    if (big) {
      rs.setHeader('content-type', 'text/plain');
      rs.setHeader('access-control-allow-origin', '*');
      rs.end(pattern(Number(big[1])));
      return;
    }
    rs.setHeader('content-type', 'text/html');
    rs.end(`<title>site</title><p id="p">site ${addr} host=${rq.headers.host}</p>`);
  });
  await new Promise((r) => srv.listen(0, addr, r));
  return { addr, port: srv.address().port, hits, close: () => srv.close() };
}

// n bytes of a pattern that shows a lost, doubled or reordered chunk.
function pattern(n) {
  let out = '';
  for (let i = 0; out.length < n; i++) out += `${i.toString(36)},`;
  return out.slice(0, n);
}

// A self-signed certificate for IP 127.0.0.1, made with the openssl CLI.
function selfSigned(cn) {
  const dir = mkdtempSync(join(tmpdir(), 'browserd-tls-'));
  const key = join(dir, 'key.pem'), cert = join(dir, 'cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
    '-nodes', '-keyout', key, '-out', cert, '-days', '2', '-subj', `/CN=${cn}`,
    '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  return { dir, certFile: cert, opts: { key: readFileSync(key), cert: readFileSync(cert) } };
}

// An upstream HTTP CONNECT proxy; resolves the test names itself. With
// tlsOpts it speaks TLS (an https proxy): its log then only holds requests
// that arrived over TLS.
async function upstream({ user, pass, tlsOpts } = {}) {
  const log = [];
  const handler = (c) => {
    let buf = '';
    const onData = (d) => {
      buf += d.toString('latin1');
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      c.removeListener('data', onData);
      const [line, ...hdrs] = buf.slice(0, end).split('\r\n');
      const [method, target] = line.split(' ');
      const auth = hdrs.find((h) => /^proxy-authorization:/i.test(h));
      log.push({ method, target, auth: auth ? auth.split(':').slice(1).join(':').trim() : null });
      if (user && auth !== `Proxy-Authorization: Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`) {
        c.end('HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n\r\n');
        return;
      }
      if (method !== 'CONNECT') { c.end('HTTP/1.1 405 Method Not Allowed\r\n\r\n'); return; }
      const i = target.lastIndexOf(':');
      const host = target.slice(0, i), port = Number(target.slice(i + 1));
      const up = net.connect(port, NAMES[host] || host, () => {
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
  };
  const srv = tlsOpts ? tls.createServer(tlsOpts, handler) : net.createServer(handler);
  srv.on('tlsClientError', () => {});
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  return { port: srv.address().port, log, close: () => srv.close(), targets: () => log.map((l) => l.target) };
}

async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const p = s.address().port;
  await new Promise((r) => s.close(r));
  return p;
}

const api = (s, method, path, body, key = s.key) => request(s.base, method, path, { key, body });

async function create(s, body = {}) {
  const r = await api(s, 'POST', '/browsers', { headless: true, ...body });
  eq(r.status, 200, `create: ${r.text}`);
  return r.json;
}

// Loads url in the session's page; returns the page text (or the error).
async function visit(b, url) {
  const br = await chromium.connectOverCDP(b.cdp_ws_url);
  try {
    const ctx = br.contexts()[0] || await br.newContext();
    const page = ctx.pages()[0] || await ctx.newPage();
    try {
      const res = await page.goto(url, { timeout: 15000 });
      return { status: res ? res.status() : 0, text: await page.innerText('body').catch(() => '') };
    } catch (e) {
      return { status: 0, text: '', error: String(e.message || e) };
    }
  } finally {
    await br.close().catch(() => {});
  }
}

// One fixture for every test: three sites, two working upstreams and a dead
// one, and a server that may reach the sites and the upstreams on loopback.
// With tls: an https upstream whose certificate --proxy-ca-file trusts (ut,
// Basic auth) and one whose certificate nothing trusts (uu).
async function fixture(fn, { extraArgs = [], tls: withTls = false } = {}) {
  const sites = {};
  for (const addr of new Set(Object.values(NAMES))) sites[addr] = await site(addr);
  const forbidden = await site('127.0.0.1'); // never listed
  const u1 = await upstream({ user: 'alice', pass: PASSWORD });
  const u2 = await upstream();
  const ud = await upstream(); // the operator's default stealth proxy
  const deadPort = await freePort();
  const apiPort = await freePort();
  const certs = withTls ? [selfSigned('trusted-proxy'), selfSigned('untrusted-proxy')] : [];
  const ut = withTls ? await upstream({ user: 'alice', pass: PASSWORD, tlsOpts: certs[0].opts }) : null;
  const uu = withTls ? await upstream({ tlsOpts: certs[1].opts }) : null;
  if (withTls) {
    // The operator's managed upstreams: datacenter plain, residential over TLS.
    const managed = join(certs[0].dir, 'managed.json');
    writeFileSync(managed, JSON.stringify({
      datacenter: { host: '127.0.0.1', port: u2.port },
      residential: { host: '127.0.0.1', port: ut.port, username: 'alice', password: PASSWORD, protocol: 'https' },
    }));
    extraArgs = [...extraArgs, '--proxy-ca-file', certs[0].certFile, '--managed-proxies', managed];
  }
  const allow = [
    ...(withTls ? [`127.0.0.1:${ut.port}`, `127.0.0.1:${uu.port}`] : []),
    ...Object.values(sites).map((x) => `${x.addr}:${x.port}`),
    `127.0.0.1:${u1.port}`, `127.0.0.1:${u2.port}`, `127.0.0.1:${deadPort}`,
    `127.0.0.1:${apiPort}`, // listed, yet the server's own port stays unreachable
  ].join(',');
  const rules = Object.entries(NAMES).map(([n, a]) => `MAP ${n} ${a}`).join(',');
  const s = await startServer({
    args: ['--listen', `127.0.0.1:${apiPort}`, '--allow-loopback', allow, '--admin-token', ADMIN,
      '--default-proxy', `127.0.0.1:${ud.port}`, ...extraArgs],
    env: { BROWSERD_CHROMIUM_EXTRA_ARGS: `--host-resolver-rules=${rules}` },
  });
  const url = (name, path = '/') => `http://${name}:${sites[NAMES[name]].port}${path}`;
  const fx = { s, sites, forbidden, u1, u2, ud, ut, uu, deadPort, url };
  try {
    await fn(fx);
  } finally {
    await s.stop();
    assert(!s.log.includes(PASSWORD), 'the password appears in the server log');
    s.cleanup();
    for (const x of [...Object.values(sites), forbidden, u1, u2, ud, ut, uu]) if (x) x.close();
    for (const c of certs) rmSync(c.dir, { recursive: true, force: true });
  }
}

async function proxy(s, body) {
  const r = await api(s, 'POST', '/proxies', body);
  eq(r.status, 200, `create proxy: ${r.text}`);
  assert(!r.text.includes(PASSWORD), 'password echoed');
  return r.json;
}

function saw(u, name) {
  return u.targets().some((t) => t.startsWith(`${name}:`));
}

export const tests = [
  {
    name: '/proxies: create, get, rename, list, check, delete; has_password only, never the password',
    timeout: 90000,
    fn: () => fixture(async ({ s, u1, deadPort, url }) => {
      const p = await proxy(s, { type: 'custom', name: 'auth-1', config: { host: '127.0.0.1', port: u1.port, username: 'alice', password: PASSWORD } });
      assert(/^[a-z0-9]{24}$/.test(p.id), p.id);
      eq(p.type, 'custom'); eq(p.name, 'auth-1'); eq(p.protocol, 'http'); eq(p.bypass_hosts, []);
      eq(p.config, { host: '127.0.0.1', port: u1.port, username: 'alice', has_password: true, has_ca_bundle: false });
      const g = await api(s, 'GET', `/proxies/${p.id}`);
      eq(g.status, 200); eq(g.json.config.has_password, true); assert(!g.text.includes(PASSWORD));
      const r = await api(s, 'PATCH', `/proxies/${p.id}`, { name: 'auth-renamed' });
      eq(r.status, 200, r.text); eq(r.json.name, 'auth-renamed');
      const l = await api(s, 'GET', '/proxies?name=auth-renamed');
      eq(l.status, 200); eq(l.json.map((x) => x.id), [p.id]); eq(l.headers['x-has-more'], 'false');
      assert(!l.text.includes(PASSWORD));
      // check connects through the proxy (with Basic auth) to the given URL.
      const c = await api(s, 'POST', `/proxies/${p.id}/check`, { url: url('a.test', '/probe') });
      eq(c.status, 200, c.text); eq(c.json.status, 'available');
      assert(!Number.isNaN(Date.parse(c.json.last_checked)), 'last_checked');
      assert(u1.log.some((x) => x.target.startsWith('a.test:') && x.auth), 'the check went through the proxy with credentials');
      const bad = await proxy(s, { type: 'custom', config: { host: '127.0.0.1', port: u1.port, username: 'alice', password: 'wrong' } });
      eq((await api(s, 'POST', `/proxies/${bad.id}/check`, { url: url('a.test') })).json.status, 'unavailable', 'wrong password');
      const dead = await proxy(s, { type: 'custom', config: { host: '127.0.0.1', port: deadPort } });
      eq(dead.config.has_password, false);
      eq((await api(s, 'POST', `/proxies/${dead.id}/check`, { url: url('a.test') })).json.status, 'unavailable', 'dead proxy');
      isError(await api(s, 'POST', '/proxies', { type: 'custom', config: { host: 'h', port: 0 }, extra: 1 }), 400, 'bad_request');
      // Managed types need an upstream the operator configured.
      const m = await api(s, 'POST', '/proxies', { type: 'residential', config: { country: 'US' } });
      assert(m.status >= 400 && m.status < 500, `managed without upstream: ${m.status}`);
      eq((await api(s, 'DELETE', `/proxies/${p.id}`)).status, 204);
      isError(await api(s, 'GET', `/proxies/${p.id}`), 404);
    }),
  },
  {
    name: 'Feature gates: custom_proxies, managed_proxies, proxy_bypass_hosts answer 403 when off',
    timeout: 60000,
    fn: () => fixture(async ({ s, deadPort }) => {
      const h = { authorization: `Bearer ${ADMIN}` };
      const org = await request(s.base, 'POST', '/admin/orgs', { headers: h, body: { name: 'dev', plan: 'developer' } });
      eq(org.status, 201, org.text);
      const k = await request(s.base, 'POST', `/admin/orgs/${org.json.id}/api_keys`, { headers: h, body: {} });
      const key = k.json.key;
      const cfg = { host: '127.0.0.1', port: deadPort }; // a proxy address the operator opened
      eq((await api(s, 'POST', '/proxies', { type: 'custom', config: cfg }, key)).status, 200, 'developer has custom_proxies');
      isError(await api(s, 'POST', '/proxies', { type: 'custom', config: cfg, bypass_hosts: ['a.test'] }, key), 403);
      isError(await api(s, 'POST', '/proxies', { type: 'datacenter' }, key), 403);
      const o2 = await request(s.base, 'PATCH', `/admin/orgs/${org.json.id}`, { headers: h, body: { overrides: { features: { custom_proxies: { enabled: false } } } } });
      eq(o2.status, 200, o2.text);
      isError(await api(s, 'POST', '/proxies', { type: 'custom', config: cfg }, key), 403);
    }),
  },
  {
    name: 'Selection: direct by default, the default stealth proxy for stealth browsers, a selected proxy by id (Basic auth upstream); records use ids',
    timeout: 120000,
    fn: () => fixture(async ({ s, u1, ud, url }) => {
      const p = await proxy(s, { type: 'custom', name: 'sel', config: { host: '127.0.0.1', port: u1.port, username: 'alice', password: PASSWORD } });
      const plain = await create(s);
      eq(plain.proxy, { mode: 'default' });
      const v1 = await visit(plain, url('a.test', '/plain'));
      assert(v1.text.includes('site 127.0.0.2'), `direct load: ${JSON.stringify(v1)}`);
      assert(!saw(u1, 'a.test') && !saw(ud, 'a.test'), 'a non-stealth default browser goes direct');
      const st = await create(s, { stealth: true });
      const v2 = await visit(st, url('a.test', '/stealth'));
      assert(v2.text.includes('site 127.0.0.2'), `stealth load: ${JSON.stringify(v2)}`);
      assert(saw(ud, 'a.test'), 'a stealth browser uses the default stealth proxy');
      const stDirect = await create(s, { stealth: true, proxy: { mode: 'direct' } });
      eq(stDirect.proxy, { mode: 'direct' }); eq(stDirect.stealth, true);
      const before = ud.log.length;
      await visit(stDirect, url('a.test', '/stealth-direct'));
      eq(ud.log.filter((x) => x.target.startsWith('a.test:')).length, ud.log.slice(0, before).filter((x) => x.target.startsWith('a.test:')).length, 'mode direct: no default proxy');
      const sel = await create(s, { proxy: { name: 'sel' } });
      eq(sel.proxy, { id: p.id }, 'selected proxies are returned by stable ID'); eq(sel.proxy_id, p.id);
      const v3 = await visit(sel, url('a.test', '/selected'));
      assert(v3.text.includes('site 127.0.0.2'), `selected load: ${JSON.stringify(v3)}`);
      assert(u1.log.some((x) => x.target.startsWith('a.test:') && x.auth && x.auth.startsWith('Basic ')), 'through the selected proxy, with Basic auth');
      isError(await api(s, 'POST', '/browsers', { headless: true, proxy: { id: 'nosuchproxy' } }), 404, 'proxy_not_found');
      for (const b of [plain, st, stDirect, sel]) await api(s, 'DELETE', `/browsers/${b.session_id}`);
      // item 6: bytes sent and received are counted per session (logged when it ends).
      let m = null;
      for (let i = 0; i < 50 && !m; i++) {
        m = new RegExp(`session ${plain.session_id}: egress sent (\\d+) bytes, received (\\d+) bytes`).exec(s.log);
        if (!m) await new Promise((r) => setTimeout(r, 100));
      }
      assert(m, 'the ended session logs its egress byte counts');
      assert(Number(m[1]) > 0 && Number(m[2]) > 0, `the page's request and answer were counted: ${m[0]}`);
    }),
  },
  {
    name: 'https upstream proxies: TLS to the proxy (Basic auth inside it), its certificate verified with --proxy-ca-file; untrusted or plain proxies fail closed',
    timeout: 150000,
    fn: () => fixture(async ({ s, ut, uu, u2, url }) => {
      const p = await proxy(s, { type: 'custom', name: 'tls-ok', protocol: 'https', config: { host: '127.0.0.1', port: ut.port, username: 'alice', password: PASSWORD } });
      eq(p.protocol, 'https');
      const c = await api(s, 'POST', `/proxies/${p.id}/check`, { url: url('a.test', '/tls-check') });
      eq(c.status, 200, c.text); eq(c.json.status, 'available', c.text);
      assert(ut.log.some((x) => x.target.startsWith('a.test:') && x.auth), 'the check went through the TLS proxy with credentials');
      const b = await create(s, { proxy: { id: p.id } });
      const br = await chromium.connectOverCDP(b.cdp_ws_url);
      try {
        const ctx = br.contexts()[0] || await br.newContext();
        const page = ctx.pages()[0] || await ctx.newPage();
        await page.goto(url('a.test', '/via-tls'), { timeout: 15000 });
        assert((await page.innerText('body')).includes('site 127.0.0.2'), 'the page loaded through the TLS proxy');
        // 3 MB through the TLS tunnel (user-space copies, not splice): whole and in order.
        const n = 3 * 1024 * 1024;
        const body = await page.evaluate(async (u) => (await fetch(u)).text(), url('a.test', `/big/${n}`));
        eq(body.length, n, 'bytes through the TLS tunnel');
        assert(body === pattern(n), 'the TLS tunnel delivered the bytes in order');
      } finally {
        await br.close().catch(() => {});
      }
      assert(ut.log.filter((x) => x.target.startsWith('a.test:')).length >= 2, 'the page went through the TLS proxy');
      // A certificate nothing trusts: no CONNECT is ever sent, the page fails closed.
      const q = await proxy(s, { type: 'custom', name: 'tls-untrusted', protocol: 'https', config: { host: '127.0.0.1', port: uu.port } });
      eq((await api(s, 'POST', `/proxies/${q.id}/check`, { url: url('a.test') })).json.status, 'unavailable', 'untrusted certificate');
      const bq = await create(s, { proxy: { id: q.id } });
      const vq = await visit(bq, url('a.test', '/untrusted'));
      assert(!vq.text.includes('site 127.0.0.2'), `fails closed: ${JSON.stringify(vq)}`);
      eq(uu.log.length, 0, 'nothing was sent to a proxy whose certificate did not verify');
      // protocol https against a proxy that speaks plain HTTP: the handshake fails, closed.
      const pl = await proxy(s, { type: 'custom', name: 'tls-plain', protocol: 'https', config: { host: '127.0.0.1', port: u2.port } });
      eq((await api(s, 'POST', `/proxies/${pl.id}/check`, { url: url('a.test') })).json.status, 'unavailable', 'plain proxy spoken to with TLS');
      for (const x of [b, bq]) await api(s, 'DELETE', `/browsers/${x.session_id}`);
    }, { tls: true }),
  },
  {
    name: 'Managed proxies use the operator\'s upstreams from --managed-proxies (one plain, one https with credentials); a bad file stops the server at start',
    timeout: 120000,
    fn: async () => {
      await fixture(async ({ s, ut, u2, url }) => {
        const dc = await proxy(s, { type: 'datacenter', name: 'dc', config: { country: 'US' } });
        const res = await proxy(s, { type: 'residential', name: 'res' });
        eq(dc.config, { country: 'US' });
        const bd = await create(s, { proxy: { id: dc.id } });
        const vd = await visit(bd, url('a.test', '/managed-dc'));
        assert(vd.text.includes('site 127.0.0.2'), `datacenter load: ${JSON.stringify(vd)}`);
        assert(saw(u2, 'a.test'), 'datacenter went through its operator upstream');
        const br = await create(s, { proxy: { id: res.id } });
        const vr = await visit(br, url('x.corp.test', '/managed-res'));
        assert(vr.text.includes('site 127.0.0.3'), `residential load: ${JSON.stringify(vr)}`);
        assert(ut.log.some((x) => x.target.startsWith('x.corp.test:') && x.auth), 'residential went over TLS with the operator\'s credentials');
        eq((await api(s, 'POST', `/proxies/${res.id}/check`, { url: url('a.test') })).json.status, 'available');
        for (const x of [bd, br]) await api(s, 'DELETE', `/browsers/${x.session_id}`);
      }, { tls: true });
      const dir = mkdtempSync(join(tmpdir(), 'browserd-managed-'));
      try {
        const f = join(dir, 'managed.json');
        writeFileSync(f, JSON.stringify({ datacenter: { host: '127.0.0.1', port: 3128, protocol: 'ftp' } }));
        let err = null;
        try { const s = await startServer({ dataDir: join(dir, 'd1'), args: ['--managed-proxies', f] }); await s.stop(); s.cleanup(); } catch (e) { err = String(e.message); }
        assert(err && err.includes('--managed-proxies') && err.includes('protocol'), `a bad managed file is refused at start: ${err}`);
        err = null;
        try { const s = await startServer({ dataDir: join(dir, 'd2'), args: ['--proxy-ca-file', join(dir, 'missing.pem')] }); await s.stop(); s.cleanup(); } catch (e) { err = String(e.message); }
        assert(err && err.includes('--proxy-ca-file'), `a missing CA file is refused at start: ${err}`);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  },
  {
    name: 'Network rules 1-9 from a page: private_hosts direct, exact beats wildcard, longer suffix wins, route proxy bypass_hosts, fail closed',
    timeout: 150000,
    fn: () => fixture(async ({ s, sites, u1, u2, deadPort, url }) => {
      const p1 = await proxy(s, { type: 'custom', name: 'p1', config: { host: '127.0.0.1', port: u1.port, username: 'alice', password: PASSWORD } });
      const p2 = await proxy(s, { type: 'custom', name: 'p2', bypass_hosts: ['byp.deep.w.test'], config: { host: '127.0.0.1', port: u2.port } });
      const pd = await proxy(s, { type: 'custom', name: 'pd', config: { host: '127.0.0.1', port: deadPort } });
      const b = await create(s, {
        proxy: { id: p1.id },
        network: {
          private_hosts: ['x.corp.test'],
          proxy_routes: [
            { hosts: ['*.w.test'], proxy: { id: p1.id } },
            { hosts: ['exact.w.test', '*.deep.w.test'], proxy: { name: 'p2' } },
            { hosts: ['down.test'], proxy: { id: pd.id } },
          ],
        },
      });
      eq(b.network.proxy_routes[1].proxy, { id: p2.id }, 'route targets are returned by id');
      // rule 1: private_hosts go direct (not through the top-level proxy).
      const v1 = await visit(b, url('x.corp.test'));
      assert(v1.text.includes('site 127.0.0.3'), JSON.stringify(v1));
      assert(!saw(u1, 'x.corp.test') && !saw(u2, 'x.corp.test'), 'private host went direct');
      // unmatched: top-level proxy.
      await visit(b, url('a.test'));
      assert(saw(u1, 'a.test'), 'unmatched host uses the top-level proxy');
      // rule 9: exact beats wildcard; longer suffix beats shorter.
      await visit(b, url('exact.w.test'));
      assert(saw(u2, 'exact.w.test') && !saw(u1, 'exact.w.test'), 'exact.w.test via p2');
      await visit(b, url('other.w.test'));
      assert(saw(u1, 'other.w.test') && !saw(u2, 'other.w.test'), 'other.w.test via p1 (wildcard)');
      await visit(b, url('a.deep.w.test'));
      assert(saw(u2, 'a.deep.w.test') && !saw(u1, 'a.deep.w.test'), '*.deep.w.test beats *.w.test');
      // that proxy's own bypass_hosts still apply.
      const v2 = await visit(b, url('byp.deep.w.test'));
      assert(v2.text.includes('site 127.0.0.5'), JSON.stringify(v2));
      assert(!saw(u2, 'byp.deep.w.test') && !saw(u1, 'byp.deep.w.test'), 'bypassed host went direct');
      // fail closed: the route proxy is down; no fallback.
      const hits = sites['127.0.0.6'].hits.length;
      const v3 = await visit(b, url('down.test'));
      assert(!v3.text.includes('site 127.0.0.6'), `fail closed: ${JSON.stringify(v3)}`);
      eq(sites['127.0.0.6'].hits.length, hits, 'the destination was never reached');
      // Deleting a route's proxy: matched requests keep failing closed.
      await api(s, 'DELETE', `/proxies/${p2.id}`);
      const v4 = await visit(b, url('exact.w.test', '/after-delete'));
      assert(!v4.text.includes('site 127.0.0.4'), `deleted route proxy: ${JSON.stringify(v4)}`);
      // Unknown route proxies are refused at creation.
      isError(await api(s, 'POST', '/browsers', { headless: true, network: { proxy_routes: [{ hosts: ['a.test'], proxy: { name: 'nope' } }] } }), 404, 'proxy_not_found');
      await api(s, 'DELETE', `/browsers/${b.session_id}`);
    }),
  },
  {
    name: 'PATCH proxy switches where new connections go at once, without a restart',
    timeout: 120000,
    fn: () => fixture(async ({ s, u1, url }) => {
      const p1 = await proxy(s, { type: 'custom', config: { host: '127.0.0.1', port: u1.port, username: 'alice', password: PASSWORD } });
      const b = await create(s);
      const n = () => u1.targets().filter((t) => t.startsWith('a.test:')).length;
      await visit(b, url('a.test', '/1'));
      eq(n(), 0, 'direct first');
      const r = await api(s, 'PATCH', `/browsers/${b.session_id}`, { proxy: { id: p1.id } });
      eq(r.status, 200, r.text); eq(r.json.proxy, { id: p1.id }); eq(r.json.proxy_id, p1.id);
      const g = await api(s, 'GET', `/browsers/${b.session_id}`);
      eq(g.json.proxy, { id: p1.id }, 'persisted');
      const v = await visit(b, url('a.test', '/2'));
      assert(v.text.includes('site 127.0.0.2'), JSON.stringify(v));
      assert(n() >= 1, 'after the PATCH the page goes through the proxy');
      const t = await api(s, 'PATCH', `/browsers/${b.session_id}`, { tags: { k: 'v' } });
      eq(t.json.proxy, { id: p1.id }, 'an unrelated PATCH keeps the selection');
      // The selected proxy is deleted: pages fail closed, unrelated PATCHes still work.
      eq((await api(s, 'DELETE', `/proxies/${p1.id}`)).status, 204);
      const gone = await visit(b, url('a.test', '/gone'));
      assert(!gone.text.includes('site 127.0.0.2'), `deleted proxy fails closed: ${JSON.stringify(gone)}`);
      const t2 = await api(s, 'PATCH', `/browsers/${b.session_id}`, { tags: { k: 'w' } });
      eq(t2.status, 200, t2.text); eq(t2.json.proxy, { id: p1.id });
      const d = await api(s, 'PATCH', `/browsers/${b.session_id}`, { proxy: { mode: 'direct' } });
      eq(d.json.proxy, { mode: 'direct' }); assert(!('proxy_id' in d.json));
      const before = n();
      await visit(b, url('a.test', '/3'));
      eq(n(), before, 'direct again');
      await api(s, 'DELETE', `/browsers/${b.session_id}`);
    }),
  },
  {
    name: 'Isolation: a page cannot reach the API port (even listed), another session\'s DevTools port, unlisted loopback or 169.254.169.254; a listed site loads',
    timeout: 120000,
    fn: () => fixture(async ({ s, sites, forbidden, url }) => {
      const other = await create(s);
      const b = await create(s);
      const log = readFileSync(join(s.dir, 'sessions', `${other.session_id}.log`), 'utf8');
      const dev = /DevTools listening on ws:\/\/127\.0\.0\.1:(\d+)/.exec(log);
      assert(dev, 'DevTools port of the other session');
      const ok = await visit(b, url('a.test'));
      assert(ok.text.includes('site 127.0.0.2'), `listed site: ${JSON.stringify(ok)}`);
      const ok2 = await visit(b, `http://127.0.0.2:${sites['127.0.0.2'].port}/literal`);
      assert(ok2.text.includes('site 127.0.0.2'), `listed literal address: ${JSON.stringify(ok2)}`);
      for (const target of [
        `http://127.0.0.1:${s.port}/org/entitlements`,
        `http://localhost:${s.port}/org/entitlements`,
        `http://127.0.0.1:${dev[1]}/json/version`,
        `http://127.0.0.1:${forbidden.port}/`,
        `http://[::1]:${forbidden.port}/`,
        'http://169.254.169.254/latest/meta-data/',
        `http://0.0.0.0:${s.port}/`,
      ]) {
        const v = await visit(b, target);
        assert(!/site 127\.0\.0\.1|features|Browser|webSocketDebuggerUrl/.test(v.text), `${target} reached: ${JSON.stringify(v)}`);
        assert(v.status === 403 || v.status === 0, `${target}: ${JSON.stringify(v)}`);
      }
      eq(forbidden.hits.length, 0, 'the unlisted loopback site was never hit');
      // fetch() from the page (same result, from script).
      const br = await chromium.connectOverCDP(b.cdp_ws_url);
      const page = br.contexts()[0].pages()[0];
      const got = await page.evaluate(async (u) => { try { const r = await fetch(u); return `status ${r.status}`; } catch (e) { return 'failed'; } }, `http://127.0.0.1:${s.port}/org/entitlements`);
      assert(got === 'failed' || got === 'status 403', got);
      const ws = await page.evaluate((u) => new Promise((res) => { const w = new WebSocket(u); w.onopen = () => res('open'); w.onerror = () => res('error'); }), `ws://127.0.0.1:${dev[1]}/devtools/browser`);
      eq(ws, 'error', 'WebSocket to a DevTools port');
      await br.close();
      for (const x of [other, b]) await api(s, 'DELETE', `/browsers/${x.session_id}`);
    }),
  },
];
