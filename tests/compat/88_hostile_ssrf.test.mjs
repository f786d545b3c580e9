// Issue 29, items 5, 6, 7 and 15: a hostile tenant cannot reach past the
// others through the requests the server makes for it. Every request the
// server makes for a tenant obeys the egress's address rule (OTLP export,
// custom proxies and their checks, store redirects); pages, POST /curl and a
// session's processes reach no private, shared or unique-local host unless
// the operator names its range (--allow-private); one hung collector delays
// no other destination; /curl/raw serves a stranger's body so that it cannot
// act on the API's origin. LAN hosts live in a network namespace this file
// makes (and removes); everything else is on 127.0.0.1.
import { execFileSync, spawn } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import { chromium } from 'playwright-core';
import { startServer, startSite, request, assert, eq, isError, waitFor } from '../blackbox/lib.mjs';

const ADMIN = 'adm-88';
const api = (s, method, path, body, key = s.key) => request(s.base, method, path, { key, body });
const admin = (s, method, path, body) => request(s.base, method, path, { body, headers: { authorization: `Bearer ${ADMIN}` } });

async function withServer(opts, fn) {
  const s = await startServer({ ...opts, env: { BROWSERD_ADMIN_TOKEN: ADMIN, ...(opts.env || {}) } });
  try { await fn(s); } finally { await s.stop(); s.cleanup(); }
}

async function create(s, body = {}, key = s.key) {
  const r = await api(s, 'POST', '/browsers', { headless: true, ...body }, key);
  eq(r.status, 200, `create: ${r.text}`);
  return r.json;
}

// A second organization with its own API key.
async function newOrg(s, name) {
  const o = await admin(s, 'POST', '/admin/orgs', { name, plan: 'startup' });
  assert(o.status < 300, `create org: ${o.text}`);
  const k = await admin(s, 'POST', `/admin/orgs/${o.json.id}/api_keys`, {});
  assert(k.status < 300, `create key: ${k.text}`);
  return k.json.key;
}

const listen = (srv) => new Promise((r) => srv.listen(0, '127.0.0.1', () => r(srv.address().port)));

// A port on 127.0.0.1 where nothing listens.
async function closedPort() {
  const srv = net.createServer();
  const port = await listen(srv);
  await new Promise((r) => srv.close(r));
  return port;
}

// ---- a LAN of the test's own: a network namespace with one HTTP server at
// 10.88.N.2, 100.64.N.2 and fd00:88:N::2 (port 8088), reached from the host
// through a veth pair. Removed by close(). ----

function sh(cmd, args) { return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }); }

async function makeLan() {
  const used = sh('ip', ['-o', 'addr']);
  let n = 0;
  for (let i = 0; i < 50 && !n; i++) {
    const c = 1 + Math.floor(Math.random() * 250);
    if (!used.includes(`10.88.${c}.`) && !used.includes(`100.64.${c}.`) && !used.includes(`fd00:88:${c}:`)) n = c;
  }
  assert(n, 'a free 10.88.N.0/24');
  const tag = `${process.pid % 100000}${n}`;
  const ns = `bd88-${tag}`, vh = `b88h${tag}`.slice(0, 15), vn = `b88n${tag}`.slice(0, 15);
  const marker = `lan-marker-${tag}`;
  let server;
  const lan = {
    ns, marker,
    v4: `10.88.${n}.2`, cgnat: `100.64.${n}.2`, v6: `fd00:88:${n}::2`,
    ranges: `10.88.${n}.0/24,100.64.${n}.0/24,fd00:88:${n}::/64`,
    hits: 0,
    urls() { return [`http://${this.v4}:8088/`, `http://${this.cgnat}:8088/`, `http://[${this.v6}]:8088/`]; },
    close() {
      if (server && server.exitCode === null) { try { process.kill(server.pid, 'SIGKILL'); } catch { /* gone */ } }
      try { sh('ip', ['link', 'del', vh]); } catch { /* gone with the namespace */ }
      try { sh('ip', ['netns', 'del', ns]); } catch { /* not made */ }
    },
  };
  try {
    sh('ip', ['netns', 'add', ns]);
    sh('ip', ['link', 'add', vh, 'type', 'veth', 'peer', 'name', vn]);
    sh('ip', ['link', 'set', vn, 'netns', ns]);
    sh('ip', ['addr', 'add', `10.88.${n}.1/24`, 'dev', vh]);
    sh('ip', ['addr', 'add', `100.64.${n}.1/24`, 'dev', vh]);
    sh('ip', ['-6', 'addr', 'add', `fd00:88:${n}::1/64`, 'dev', vh, 'nodad']);
    sh('ip', ['link', 'set', vh, 'up']);
    const inNs = (...a) => sh('ip', ['netns', 'exec', ns, ...a]);
    inNs('ip', 'link', 'set', 'lo', 'up');
    inNs('ip', 'addr', 'add', `10.88.${n}.2/24`, 'dev', vn);
    inNs('ip', 'addr', 'add', `100.64.${n}.2/24`, 'dev', vn);
    inNs('ip', '-6', 'addr', 'add', `fd00:88:${n}::2/64`, 'dev', vn, 'nodad');
    inNs('ip', 'link', 'set', vn, 'up');
    const code = `require('http').createServer((q, s) => { process.stdout.write('hit\\n');
      s.writeHead(200, { 'content-type': 'text/plain', 'access-control-allow-origin': '*', 'access-control-allow-private-network': 'true' });
      s.end(${JSON.stringify(marker)}); }).listen(8088, '::', () => process.stdout.write('ready\\n'));`;
    server = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise((resolve, reject) => {
      server.stdout.on('data', (d) => {
        const t = String(d);
        lan.hits += (t.match(/hit/g) || []).length;
        if (/ready/.test(t)) resolve();
      });
      server.once('exit', (c) => reject(new Error(`the LAN server exited ${c}`)));
    });
    // The route works from the host (the egress's namespace).
    const r = await fetch(lan.urls()[0]);
    eq(await r.text(), marker, 'the LAN answers the host');
    // Its "hit" line comes through a pipe that may be read after the answer
    // came over TCP: wait for it before counting from zero.
    await waitFor(() => lan.hits >= 1, 'the LAN server\'s line for the host\'s own request', 10000, 20);
    lan.hits = 0;
  } catch (e) { lan.close(); throw e; }
  return lan;
}

const unb64 = (t) => Buffer.from(t || '', 'base64').toString('utf8');

// What the LAN answered through each of the session's three ways out: a
// page's fetch(), POST /curl, and a process of the session asking the
// session's egress proxy (found as the listening sockets of its namespace).
async function reach(s, b, site, url) {
  const out = {};
  const br = await chromium.connectOverCDP(b.cdp_ws_url);
  try {
    const page = br.contexts()[0].pages()[0] || await br.contexts()[0].newPage();
    await page.goto(site.url);
    out.page = await page.evaluate(async (u) => {
      try { return await (await fetch(u)).text(); } catch (e) { return `failed: ${e.message}`; }
    }, url);
  } finally { await br.close(); }
  const c = await api(s, 'POST', `/browsers/${b.session_id}/curl`, { url, timeout_ms: 10000 });
  out.curl = c.status === 200 ? c.json.body : `status ${c.status}`;
  const script = `for h in $(awk 'NR>1 && $4=="0A" {split($2,a,":"); print a[2]}' /proc/net/tcp /proc/net/tcp6); do
    p=$(printf %d 0x$h); curl -s -m 10 -x http://127.0.0.1:$p '${url}'; echo; done`;
  const x = await api(s, 'POST', `/browsers/${b.session_id}/process/exec`, { command: 'sh', args: ['-c', script], timeout_sec: 60 });
  out.process = x.status === 200 ? unb64(x.json.stdout_b64) : `status ${x.status}: ${x.text}`;
  return out;
}

export const tests = [
  {
    name: 'issue 29.6: pages, POST /curl and a session process reach no 10/8, 100.64/10 or fd00::/8 host unless --allow-private names the range',
    timeout: 300000,
    fn: async () => {
      const lan = await makeLan();
      const site = await startSite((rq, rs) => { rs.writeHead(200, { 'content-type': 'text/html' }); rs.end('<title>origin</title>'); });
      try {
        await withServer({ args: site.allow }, async (s) => {
          const b = await create(s);
          for (const url of lan.urls()) {
            const got = await reach(s, b, site, url);
            for (const [way, text] of Object.entries(got))
              assert(!text.includes(lan.marker), `${way} reached ${url} without --allow-private: ${text}`);
            assert(/^status 502/.test(got.curl), `curl of ${url}: ${got.curl}`);
          }
          eq(lan.hits, 0, 'the LAN host never saw a request');
          // private_hosts selects among the allowed ranges, never beyond them.
          const p = await create(s, { network: { private_hosts: ['10.0.0.0/8'] } });
          const c = await api(s, 'POST', `/browsers/${p.session_id}/curl`, { url: lan.urls()[0], timeout_ms: 10000 });
          eq(c.status, 502, `private_hosts alone opens nothing: ${c.text}`);
          eq(lan.hits, 0, 'the LAN host never saw a request');
        });
        await withServer({ args: [...site.allow, '--allow-private', lan.ranges] }, async (s) => {
          const b = await create(s);
          for (const url of lan.urls()) {
            const got = await reach(s, b, site, url);
            for (const [way, text] of Object.entries(got))
              assert(text.includes(lan.marker), `${way} of ${url} with --allow-private: ${text}`);
          }
        });
      } finally { site.close(); lan.close(); }
      assert(!sh('ip', ['netns', 'list']).includes(lan.ns), 'the namespace is gone');
    },
  },
  {
    name: 'issue 29.5: an OTLP destination on loopback (127.0.0.1, localhost, ::ffff:127.0.0.1) is refused at creation, a name resolving there is never contacted, and the stats read like an unreachable collector',
    timeout: 120000,
    fn: async () => {
      let hits = 0;
      const rx = http.createServer((rq, rs) => { hits++; rs.end('{}'); });
      const port = await listen(rx);
      const closed = await closedPort();
      try {
        // The operator opens one closed loopback port only: the reference for "unreachable".
        await withServer({ args: ['--allow-loopback', `127.0.0.1:${closed}`] }, async (s) => {
          for (const endpoint of [`http://127.0.0.1:${port}/admin/orgs`, `http://localhost:${port}/v1/logs`,
            `http://[::ffff:127.0.0.1]:${port}/v1/logs`, `http://[::1]:${port}/`, 'http://169.254.169.254/latest',
            'http://10.0.0.1:4318/v1/logs', 'http://[fd00::1]:4318/', 'http://100.64.0.1/']) {
            const r = await api(s, 'POST', '/org/telemetry/destinations', { name: 'scan', endpoint, headers: { 'x-admin': '1' } });
            isError(r, 400);
            assert(r.json.message.includes('endpoint') || JSON.stringify(r.json).includes('endpoint'), `names the field: ${r.text}`);
          }
          // A name is checked after DNS at every connect ("vm" is 127.0.0.1 in /etc/hosts).
          const name = ['vm', 'runsc'].find((h) => /^127\./.test(sh('getent', ['hosts', h]).trim()));
          assert(name, 'a non-localhost name of 127.0.0.1 in /etc/hosts');
          const d1 = await api(s, 'POST', '/org/telemetry/destinations', { name: 'byname', endpoint: `http://${name}:${port}/v1/logs` });
          eq(d1.status, 200, d1.text);
          const d2 = await api(s, 'POST', '/org/telemetry/destinations', { name: 'closed', endpoint: `http://127.0.0.1:${closed}/v1/logs` });
          eq(d2.status, 200, d2.text);
          for (const dest of ['byname', 'closed']) {
            const b = await create(s, { telemetry: { export: { otlp: { destination: { name: dest } } } } });
            const br = await chromium.connectOverCDP(b.cdp_ws_url);
            await br.close();
          }
          const stats = async (d) => (await api(s, 'GET', `/org/telemetry/destinations/${d.json.id}`)).json.stats;
          const a = await waitFor(async () => { const st = await stats(d1); return st.failed_attempts > 0 && st; }, 'a failed export by name', 60000, 200);
          const c = await waitFor(async () => { const st = await stats(d2); return st.failed_attempts > 0 && st; }, 'a failed export to a closed port', 60000, 200);
          eq(a.last_error, `cannot connect to ${name}:${port}`, 'refused reads as unreachable');
          eq(c.last_error, `cannot connect to 127.0.0.1:${closed}`, 'the unreachable reference');
          eq(hits, 0, 'the loopback service never saw a request');
        });
      } finally { rx.close(); }
    },
  },
  {
    name: 'issue 29.5: a custom proxy on loopback, link-local or a private address is refused at creation (config.host), and a check through a proxy never targets a loopback or private URL',
    timeout: 60000,
    fn: async () => {
      const up = http.createServer((rq, rs) => rs.end('x'));
      const port = await listen(up);
      try {
        await withServer({ args: ['--allow-loopback', `127.0.0.1:${port}`] }, async (s) => {
          for (const host of ['127.0.0.2', '::1', 'localhost', '169.254.169.254', '10.1.2.3', '::ffff:192.168.1.1', '64:ff9b::a00:1']) {
            const r = await api(s, 'POST', '/proxies', { type: 'custom', name: `p-${host}`, config: { host, port: 3128 } });
            isError(r, 400);
            assert(JSON.stringify(r.json).includes('config.host'), `names config.host: ${r.text}`);
          }
          // The operator's allowance still opens one HOST:PORT.
          const ok = await api(s, 'POST', '/proxies', { type: 'custom', name: 'allowed', config: { host: '127.0.0.1', port } });
          eq(ok.status, 200, ok.text);
          for (const url of [`http://127.0.0.2:${port}/`, 'http://10.0.0.1/admin', 'https://[::1]:8443/', 'http://localhost:8080/']) {
            const r = await api(s, 'POST', `/proxies/${ok.json.id}/check`, { url });
            isError(r, 400);
            assert(JSON.stringify(r.json).includes('url'), `names url: ${r.text}`);
          }
        });
      } finally { up.close(); }
    },
  },
  {
    name: 'issue 29.7: a collector that accepts and never answers does not delay another organization\'s export',
    timeout: 180000,
    fn: async () => {
      const hungSockets = [];
      const hung = net.createServer((c) => { hungSockets.push(c); }); // accepts, never answers
      const hungPort = await listen(hung);
      const got = [];
      const good = http.createServer((rq, rs) => {
        let body = '';
        rq.on('data', (d) => { body += d; });
        rq.on('end', () => { got.push(body); rs.setHeader('content-type', 'application/json'); rs.end('{}'); });
      });
      const goodPort = await listen(good);
      try {
        await withServer({ args: ['--allow-loopback', `127.0.0.1:${hungPort},127.0.0.1:${goodPort}`] }, async (s) => {
          const other = await newOrg(s, 'victim');
          const dh = await api(s, 'POST', '/org/telemetry/destinations', { name: 'hung', endpoint: `http://127.0.0.1:${hungPort}/v1/logs` });
          eq(dh.status, 200, dh.text);
          const dg = await api(s, 'POST', '/org/telemetry/destinations', { name: 'good', endpoint: `http://127.0.0.1:${goodPort}/v1/logs` }, other);
          eq(dg.status, 200, dg.text);
          const stats = async (d, key) => (await api(s, 'GET', `/org/telemetry/destinations/${d.json.id}`, undefined, key)).json.stats;
          // The hostile org's events are queued first and its collector holds them.
          const bh = await create(s, { telemetry: { export: { otlp: { destination: { name: 'hung' } } } } });
          let br = await chromium.connectOverCDP(bh.cdp_ws_url);
          await br.close();
          await waitFor(() => hungSockets.length > 0, 'the hung collector holding an export', 30000, 100);
          const bg = await create(s, { telemetry: { export: { otlp: { destination: { name: 'good' } } } } }, other);
          br = await chromium.connectOverCDP(bg.cdp_ws_url);
          await br.close();
          await waitFor(() => got.length > 0, 'the other organization\'s export', 50000, 100);
          const h = await stats(dh);
          eq(h.dropped, 0, `the hung destination has not given up yet: ${JSON.stringify(h)}`);
          assert(h.exported === 0, `nothing went to the hung collector: ${JSON.stringify(h)}`);
          const g = await stats(dg, other);
          assert(g.exported > 0, `the good destination exported: ${JSON.stringify(g)}`);
        });
      } finally {
        for (const c of hungSockets) c.destroy();
        hung.close();
        good.closeAllConnections();
        good.close();
      }
    },
  },
  {
    name: 'issue 29.15: {base_url}/curl/raw serves a fetched body with Content-Security-Policy: sandbox and nosniff, without its Set-Cookie',
    timeout: 90000,
    fn: async () => {
      const site = await startSite((rq, rs) => {
        rs.setHeader('set-cookie', ['sid=stolen; Path=/', 'other=1; Path=/']);
        rs.writeHead(200, { 'content-type': 'text/html' });
        rs.end('<script>fetch("/org/telemetry/destinations")</script>');
      });
      try {
        await withServer({ args: site.allow }, async (s) => {
          const b = await create(s);
          const u = new URL(`${b.base_url}/curl/raw`);
          u.searchParams.set('jwt', new URL(b.cdp_ws_url).searchParams.get('jwt'));
          u.searchParams.set('url', `${site.url}/page`);
          const r = await request(u.origin, 'GET', u.pathname + u.search);
          eq(r.status, 200, r.text);
          assert(r.text.includes('<script>'), 'the body is relayed as it is');
          eq(r.headers['set-cookie'], undefined, 'no Set-Cookie on the API origin');
          assert(/(^|[;,]\s*)sandbox(\s*[;,]|$)/.test(r.headers['content-security-policy'] || ''), `CSP sandbox: ${r.headers['content-security-policy']}`);
          eq(r.headers['x-content-type-options'], 'nosniff');
        });
      } finally { site.close(); }
    },
  },
  {
    name: 'issue 29.5: a Chrome Web Store redirect to a loopback host the operator did not name is never followed and fails like an unreachable one',
    timeout: 60000,
    fn: async () => {
      let inner = 0;
      const target = http.createServer((rq, rs) => { inner++; rs.end('secret'); });
      const tport = await listen(target);
      const store = http.createServer((rq, rs) => { rs.writeHead(302, { location: `http://127.0.0.1:${tport}/admin` }); rs.end(); });
      const sport = await listen(store);
      const id = 'abcdefghijklmnopabcdefghijklmnop';
      try {
        await withServer({ env: { BROWSERD_CHROME_STORE_URL: `http://127.0.0.1:${sport}/update?x={id}` } }, async (s) => {
          const r = await api(s, 'GET', `/extensions/from_chrome_store?url=${id}`);
          isError(r, 502, 'bad_gateway');
          assert(r.json.message.endsWith(`127.0.0.1 port ${tport}: cannot connect`), r.json.message);
          eq(inner, 0, 'the redirect target never saw a request');
        });
      } finally { target.close(); store.close(); }
    },
  },
];
