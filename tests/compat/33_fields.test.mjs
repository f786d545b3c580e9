// Issue 33.5 (KERNEL_API_NEWER.md 1.3): fields newer clients send and read on
// existing resources. Pools: region, fixed at create, returned, and a list
// filter. Telemetry: the opt-in platform category holds the in-session
// management calls (computer, fs, process, replays), split from control.
// Proxies: the write-only ca_bundle (PEM) that an https proxy's certificate
// is verified against, shown as has_ca_bundle. The network category's
// proxy_error event with the service's codes for what the egress could not carry.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { startServer, startSite, request, assert, eq, isError, waitFor, createSession, deleteSession } from '../blackbox/lib.mjs';

const api = (s, method, path, body) => request(s.base, method, path, { key: s.key, body });

async function events(s, id, category) {
  const r = await api(s, 'GET', `/browsers/${id}/telemetry/events?limit=100&category=${category}`);
  eq(r.status, 200, r.text);
  return r.json.map((e) => e.event);
}

// A self-signed CA certificate for IP 127.0.0.1 (openssl CLI), its PEM and key.
function selfSigned(cn) {
  const dir = mkdtempSync(join(tmpdir(), 'browserd-ca-'));
  const key = join(dir, 'key.pem'), cert = join(dir, 'cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
    '-nodes', '-keyout', key, '-out', cert, '-days', '2', '-subj', `/CN=${cn}`,
    '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  const out = { pem: readFileSync(cert, 'utf8'), key: readFileSync(key, 'utf8') };
  rmSync(dir, { recursive: true, force: true });
  return out;
}

// An https CONNECT proxy with certificate ca; the name site.test is its
// loopback site's (sitePort). targets: the CONNECTs it received over TLS.
async function tlsProxy(ca, sitePort) {
  const targets = [];
  const srv = tls.createServer({ key: ca.key, cert: ca.pem }, (c) => {
    let buf = '';
    c.on('error', () => {});
    const onData = (d) => {
      buf += d.toString('latin1');
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      c.removeListener('data', onData);
      const target = buf.split(' ')[1];
      targets.push(target);
      const up = net.connect(sitePort, '127.0.0.1', () => {
        c.write('HTTP/1.1 200 Connection established\r\n\r\n');
        c.pipe(up); up.pipe(c);
      });
      up.on('error', () => c.destroy());
    };
    c.on('data', onData);
  });
  srv.on('tlsClientError', () => {});
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  return { port: srv.address().port, targets, close: () => srv.close() };
}

export const tests = [
  {
    name: 'issue 33.5: a pool\'s region is stored at create (us-east when omitted), returned, fixed on PATCH, a ?region= list filter; an unknown region is a 400 naming region',
    timeout: 60000,
    fn: async () => {
      const s = await startServer({ args: ['--region', 'eu-west'] });
      try {
        const body = { size: 1, headless: true, fill_rate_per_minute: 0 };
        const p = await api(s, 'POST', '/browser_pools', { ...body, name: 'eu', region: 'eu-west' });
        eq(p.status, 200, p.text);
        eq(p.json.region, 'eu-west', 'region returned');
        assert(!('region' in p.json.browser_pool_config), 'region is the record\'s field, not a browser setting');
        eq((await api(s, 'GET', '/browser_pools/eu')).json.region, 'eu-west', 'region read back');
        // The service's default is us-east, which this node does not serve.
        const dflt = await api(s, 'POST', '/browser_pools', body);
        isError(dflt, 400, 'bad_request');
        assert(/region: this server serves only region eu-west/.test(dflt.json.message), dflt.text);
        const bad = await api(s, 'POST', '/browser_pools', { ...body, region: 'mars' });
        isError(bad, 400, 'bad_request');
        assert(/region: must be one of us-east, eu-west, ap-southeast/.test(bad.json.message), bad.text);
        // Fixed at create: the same value again is no change, another is refused.
        eq((await api(s, 'PATCH', '/browser_pools/eu', { region: 'eu-west' })).status, 200, 'same region');
        const moved = await api(s, 'PATCH', '/browser_pools/eu', { region: 'us-east' });
        isError(moved, 400, 'bad_request');
        assert(/region: is fixed when the pool is created/.test(moved.json.message), moved.text);
        // The list filter.
        eq((await api(s, 'GET', '/browser_pools?region=eu-west')).json.map((x) => x.name), ['eu'], '?region=eu-west');
        eq((await api(s, 'GET', '/browser_pools?region=us-east')).json, [], '?region=us-east');
        const badq = await api(s, 'GET', '/browser_pools?region=mars');
        isError(badq, 400, 'bad_request');
        assert(/region/.test(badq.json.message), badq.text);
        eq((await api(s, 'DELETE', '/browser_pools/eu')).status, 204);
      } finally {
        await s.stop();
        s.cleanup();
      }
    },
  },
  {
    name: 'issue 33.5: computer, fs, process and replays calls are api_call events of the opt-in platform category, not control',
    timeout: 60000,
    fn: async () => {
      const s = await startServer();
      try {
        const calls = async (id) => {
          const shot = await api(s, 'POST', `/browsers/${id}/computer/screenshot`, {});
          eq(shot.status, 200, `screenshot: ${shot.text.slice(0, 200)}`);
          eq((await api(s, 'GET', `/browsers/${id}/fs/file_info?path=/tmp`)).status, 200, 'fs');
          eq((await api(s, 'POST', `/browsers/${id}/process/exec`, { command: 'true' })).status, 200, 'process');
          // A refused start is a call too (status 400), and records nothing.
          eq((await api(s, 'POST', `/browsers/${id}/replays`, { framerate: 'fast' })).status, 400, 'replays');
        };
        // Telemetry on with its defaults: control is on, platform is not.
        const off = await createSession(s, { telemetry: {} });
        await calls(off);
        const control = (await events(s, off, 'control')).filter((e) => e.type === 'api_call');
        eq(control.map((e) => e.data.operation_id), [], 'no management call in control');
        eq(await events(s, off, 'platform'), [], 'platform is opt-in');
        // platform on: each call is there.
        const on = await createSession(s, { telemetry: { browser: { platform: { enabled: true } } } });
        await calls(on);
        const got = await waitFor(async () => {
          const evs = (await events(s, on, 'platform')).filter((e) => e.type === 'api_call');
          const ops = evs.map((e) => e.data.operation_id);
          return ['takeScreenshot', 'process.exec'].every((o) => ops.includes(o)) && ops.some((o) => /^fs\./.test(o)) &&
            ops.includes('startRecording') && evs;
        }, 'platform api_call events');
        assert(got.every((e) => e.category === 'platform'), JSON.stringify(got[0]));
        for (const x of [off, on]) await deleteSession(s, x);
      } finally {
        await s.stop();
        s.cleanup();
      }
    },
  },
  {
    name: 'issue 33.5: a custom proxy\'s write-only ca_bundle (PEM) verifies its https proxy: has_ca_bundle on reads, the check and a session\'s traffic go through; a bundle of another CA fails closed; bad PEM is a 400 naming config.ca_bundle',
    timeout: 60000,
    fn: async () => {
      const site = await startSite((rq, rs) => { rs.writeHead(200, { 'content-type': 'text/plain' }); rs.end('behind the tls proxy'); });
      const ca = selfSigned('tenant-proxy-ca');
      const other = selfSigned('another-ca');
      const px = await tlsProxy(ca, Number(site.hostport.split(':')[1]));
      const s = await startServer({ args: ['--allow-loopback', `127.0.0.1:${px.port}`] });
      try {
        const cfg = { host: '127.0.0.1', port: px.port };
        const mk = (name, config) => api(s, 'POST', '/proxies', { type: 'custom', name, protocol: 'https', config: { ...cfg, ...config } });
        const good = await mk('with-ca', { ca_bundle: ca.pem });
        eq(good.status, 200, good.text);
        eq(good.json.config.has_ca_bundle, true, 'has_ca_bundle');
        assert(!('ca_bundle' in good.json.config) && !good.text.includes('BEGIN CERTIFICATE'), `write-only: ${good.text}`);
        const read = await api(s, 'GET', `/proxies/${good.json.id}`);
        eq(read.json.config.has_ca_bundle, true, 'has_ca_bundle read back');
        assert(!read.text.includes('BEGIN CERTIFICATE'), 'never returned');
        const none = await mk('no-ca', {});
        eq(none.json.config.has_ca_bundle, false, 'no bundle');
        const wrong = await mk('other-ca', { ca_bundle: other.pem });
        eq(wrong.status, 200, wrong.text);
        const url = `http://site.test:${site.hostport.split(':')[1]}/`;
        const check = async (p) => (await api(s, 'POST', `/proxies/${p.json.id}/check`, { url })).json.status;
        eq(await check(good), 'available', 'verified against its ca_bundle');
        eq(await check(none), 'unavailable', 'no bundle: the system roots do not know this CA');
        eq(await check(wrong), 'unavailable', 'a bundle of another CA');
        // A session through the proxy: curl goes through Chromium and the egress, over TLS to it.
        const id = await createSession(s, { proxy: { id: good.json.id } });
        const c = await api(s, 'POST', `/browsers/${id}/curl`, { url });
        eq(c.status, 200, c.text);
        eq(c.json.body, 'behind the tls proxy', 'the page came through the proxy');
        await deleteSession(s, id);
        assert(px.targets.length >= 2, `CONNECTs over TLS: ${px.targets}`);
        // Bad input names config.ca_bundle.
        const bad = async (bundle, rule) => {
          const r = await mk('bad', { ca_bundle: bundle });
          isError(r, 400, 'bad_request');
          assert(r.json.message.includes('config.ca_bundle') && rule.test(r.json.message), `${rule}: ${r.text}`);
        };
        await bad('not a certificate', /holds no PEM certificate/);
        await bad(ca.key, /PEM CERTIFICATE blocks only/);
        await bad(ca.pem.replace(/[A-Za-z]{8}\n/, 'AAAA\n'), /PEM CERTIFICATE blocks only/);
        await bad(ca.pem.repeat(40), /PEM CERTIFICATE blocks only \(at most 32\)/);
        await bad(`${ca.pem}\n${'x'.repeat(70000)}`, /at most 65536 bytes/);
        await bad(42, /must be a string/);
      } finally {
        await s.stop();
        s.cleanup();
        site.close();
        px.close();
      }
    },
  },
  {
    name: 'issue 33.5: what the egress cannot carry is a proxy_error event (category network) and an X-Kernel-Proxy-Error header with the service\'s codes: destination_blocked, upstream_connect_failed, upstream_dns_failure, provider_unreachable, provider_blacklisted, proxy_unavailable',
    timeout: 90000,
    fn: async () => {
      const dead = net.createServer(); // a port nothing answers on once closed
      await new Promise((r) => dead.listen(0, '127.0.0.1', r));
      const deadPort = dead.address().port;
      await new Promise((r) => dead.close(r));
      // An upstream proxy that refuses every tunnel (403): the provider's blocklist.
      const refuser = net.createServer((c) => { c.on('error', () => {}); c.once('data', () => c.end('HTTP/1.1 403 Forbidden\r\n\r\n')); });
      await new Promise((r) => refuser.listen(0, '127.0.0.1', r));
      const s = await startServer({ args: ['--allow-loopback', `127.0.0.1:${deadPort},127.0.0.1:${refuser.address().port}`] });
      try {
        const proxy = async (name, port) => {
          const r = await api(s, 'POST', '/proxies', { type: 'custom', name, config: { host: '127.0.0.1', port } });
          eq(r.status, 200, r.text);
          return r.json.id;
        };
        const pDead = await proxy('dead', deadPort);
        const pRefuser = await proxy('refuser', refuser.address().port);
        const pGone = await proxy('gone', deadPort);
        const id = await createSession(s, { telemetry: { browser: { network: { enabled: true } } } });
        const visit = async (...urls) => {
          const code = `for (const u of ${JSON.stringify(urls)}) { try { await page.goto(u, { timeout: 10000 }); } catch (e) {} } return 1;`;
          const r = await api(s, 'POST', `/browsers/${id}/playwright/execute`, { code });
          eq(r.status, 200, r.text);
        };
        const useProxy = async (pid) => eq((await api(s, 'PATCH', `/browsers/${id}`, { proxy: { id: pid } })).status, 200, 'proxy switch');
        await visit('http://127.0.0.1:81/blocked', `http://127.0.0.1:${deadPort}/dead`, 'http://no-such-host.invalid/dns');
        // The answer itself names the code too, as the service's X-Kernel-Proxy-Error does.
        const hdr = await api(s, 'POST', `/browsers/${id}/playwright/execute`, {
          code: "const r = await page.goto('http://127.0.0.1:81/header'); return [r.status(), r.headers()['x-kernel-proxy-error']];",
        });
        eq(hdr.json.result, [403, 'destination_blocked'], `X-Kernel-Proxy-Error: ${hdr.text}`);
        await useProxy(pDead);
        await visit('http://far.example/via-dead-proxy');
        await useProxy(pRefuser);
        await visit('http://far.example/via-refuser');
        await useProxy(pGone);
        eq((await api(s, 'DELETE', `/proxies/${pGone}`)).status, 204, 'proxy deleted');
        await visit('http://far.example/via-gone');
        const want = {
          destination_blocked: [403, '/blocked'], upstream_connect_failed: [502, '/dead'], upstream_dns_failure: [502, '/dns'],
          provider_unreachable: [502, '/via-dead-proxy'], provider_blacklisted: [502, '/via-refuser'], proxy_unavailable: [502, '/via-gone'],
        };
        const evs = await waitFor(async () => {
          const r = await api(s, 'GET', `/browsers/${id}/telemetry/events?limit=100&category=network`);
          const pe = (r.json || []).map((e) => e.event).filter((e) => e.type === 'proxy_error');
          return Object.keys(want).every((c) => pe.some((e) => e.data.code === c)) && pe;
        }, 'a proxy_error event of each code', 30000).catch(async (err) => {
          const r = await api(s, 'GET', `/browsers/${id}/telemetry/events?limit=100`);
          throw new Error(`${err.message}: ${JSON.stringify((r.json || []).map((e) => [e.event.type, e.event.data.code, e.event.data.url || e.event.data.url]))}`);
        });
        for (const [code, [status, path]] of Object.entries(want)) {
          const e = evs.find((x) => x.data.code === code && x.data.url && x.data.url.endsWith(path));
          assert(e, `${code} for ${path}: ${JSON.stringify(evs.map((x) => [x.data.code, x.data.url]))}`);
          eq(e.category, 'network', `${code}: category`);
          eq([e.data.status, e.data.method], [status, 'GET'], `${code}: status and method`);
        }
        await deleteSession(s, id);
      } finally {
        await s.stop();
        s.cleanup();
        refuser.close();
      }
    },
  },
];
