// Issue 37.1: GET /health (liveness) and GET /ready (readiness), the probes of
// load balancers and supervisors (docs/operator.md, "Health and readiness").
// Neither needs a key; /ready answers 503 naming each reason the server
// cannot take a new session. No Chromium: BROWSERD_SPARES=0 (lib.mjs).
import http from 'node:http';
import net from 'node:net';
import { startServer, request, assert, eq, isError, waitFor, withServer } from './lib.mjs';

// The reasons a 503 of /ready names: its details' codes.
const reasons = (res) => (res.json && Array.isArray(res.json.details) ? res.json.details.map((d) => d.code) : []);

export const tests = [
  {
    name: 'issue 37.1: GET /health answers 200 {"status":"ok"} without a key, and with a wrong one',
    fn: () => withServer({}, async (s) => {
      const res = await request(s.base, 'GET', '/health');
      eq(res.status, 200, `status of ${res.text}`);
      assert(/^application\/json/.test(res.headers['content-type'] || ''), `content-type ${res.headers['content-type']}`);
      eq(res.json, { status: 'ok' }, 'body');
      const bad = await request(s.base, 'GET', '/health', { key: 'bd_not_a_key' });
      eq(bad.status, 200, 'a wrong key changes nothing');
      eq((await request(s.base, 'POST', '/health')).status, 405, 'POST /health');
    }),
  },
  {
    name: 'issue 37.1: GET /ready answers 200 {"status":"ready"} without a key on a fresh server',
    fn: () => withServer({}, async (s) => {
      const res = await request(s.base, 'GET', '/ready');
      eq(res.status, 200, `status of ${res.text}`);
      eq(res.json, { status: 'ready' }, 'body');
    }),
  },
  {
    name: 'issue 37.1: GET /ready answers 503 not_ready naming "capacity" when not even one default session fits the admission budget, without a tenant name or a host path',
    // 24 GiB * 0.01 is a budget of a few hundred MiB: a default session
    // (8 GiB of memory limit, runtime/admit.c) does not fit.
    fn: () => withServer({ env: { BROWSERD_MEMORY_OVERCOMMIT: '0.01' } }, async (s) => {
      const res = await request(s.base, 'GET', '/ready');
      isError(res, 503, 'not_ready');
      assert(reasons(res).includes('capacity'), `reasons ${JSON.stringify(reasons(res))}: ${res.text}`);
      assert(/capacity/.test(res.json.message), `message names the reason: ${res.json.message}`);
      eq(res.headers['retry-after'], '10', 'Retry-After of a reason that passes');
      assert(!res.text.includes(s.dir), `no data folder in ${res.text}`);
      assert(!/"default"|\/tmp\/|\/root\//.test(res.text), `no tenant name or host path in ${res.text}`);
      // The same verdict a create gets: a default session is refused (the
      // organization's share, 75% of the budget, is checked first: 429).
      const create = await request(s.base, 'POST', '/browsers', { key: s.key, body: {} });
      assert([429, 503].includes(create.status), `a default create is refused: ${create.status} ${create.text}`);
      // /health is about liveness only.
      eq((await request(s.base, 'GET', '/health')).status, 200, '/health stays 200');
    }),
  },
  {
    name: 'issue 37.1: /health and /ready are left out of the access log (logged at debug level), other requests stay in it',
    fn: () => withServer({}, async (s) => {
      eq((await request(s.base, 'GET', '/health')).status, 200, '/health');
      eq((await request(s.base, 'GET', '/ready')).status, 200, '/ready');
      eq((await request(s.base, 'GET', '/org/entitlements', { key: s.key })).status, 200, 'entitlements');
      await waitFor(() => /access GET \/org\/entitlements 200/.test(s.log), 'the access line of a request');
      assert(!/access GET \/(health|ready) /.test(s.log), `probes in the access log:\n${s.log}`);
    }),
  },
];

tests.push({
  name: 'issue 37.1: on a shared PostgreSQL store, GET /ready answers 503 naming "store" once the database is gone (the last heartbeat failed), then "fenced"',
  fn: async () => {
    const { startCluster, startPg } = await import('../cluster/lib.mjs');
    const pg = await startPg();
    let c;
    try {
      // A short lease: a heartbeat every 200 ms, fenced after 1 s without the database.
      c = await startCluster({ nodes: 1, pg, env: { BROWSERD_NODE_LEASE_MS: '1000' } });
      c.expectLoss();
      const node = c.nodes[0];
      const ok = await request(node.base, 'GET', '/ready');
      eq(ok.status, 200, `ready with its database: ${ok.text}`);
      await pg.stop();
      const seen = new Set();
      await waitFor(async () => {
        const res = await request(node.base, 'GET', '/ready');
        if (res.status === 503) {
          isError(res, 503, 'not_ready');
          for (const r of reasons(res)) seen.add(r);
        }
        return seen.has('store') && seen.has('fenced');
      }, 'GET /ready to name the store, then the fence', 30000, 50);
      eq((await request(node.base, 'GET', '/health')).status, 200, '/health stays 200 without the database');
    } finally {
      if (c) await c.stop({ keepPg: true });
      await pg.stop();
    }
  },
});

tests.push({
  name: 'issue 37.1: once the server received SIGTERM, GET /ready on a kept-alive connection answers 503 naming "stopping" while a request in flight holds the stop',
  fn: async () => {
    // A proxy that takes the connection and never answers: POST
    // /proxies/{id}/check stays in flight (up to its 10 s timeout), and the
    // stop waits for it before the HTTP daemon closes.
    const held = new Set();
    let got = false;
    const hang = net.createServer((sock) => { held.add(sock); sock.on('data', () => { got = true; }); sock.on('error', () => {}); });
    await new Promise((r) => hang.listen(0, '127.0.0.1', r));
    const hp = `127.0.0.1:${hang.address().port}`;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const s = await startServer({ args: ['--allow-loopback', hp] });
    try {
      const p = await request(s.base, 'POST', '/proxies', { key: s.key, body: { type: 'custom', config: { host: '127.0.0.1', port: hang.address().port } } });
      eq(p.status, 200, `create proxy: ${p.text}`);
      eq((await request(s.base, 'GET', '/ready', { agent })).status, 200, 'ready before the signal');
      const check = request(s.base, 'POST', `/proxies/${p.json.id}/check`, { key: s.key, body: { url: 'http://example.test/' } }).catch((e) => e);
      await waitFor(() => got, 'the check to reach the proxy');
      const exited = new Promise((r) => s.proc.once('exit', r));
      process.kill(s.proc.pid, 'SIGTERM');
      const res = await waitFor(async () => {
        const r = await request(s.base, 'GET', '/ready', { agent });
        return r.status === 503 ? r : null;
      }, '/ready to answer 503 on the kept-alive connection', 8000, 20);
      isError(res, 503, 'not_ready');
      assert(reasons(res).includes('stopping'), `reasons ${JSON.stringify(reasons(res))}: ${res.text}`);
      eq(res.headers['retry-after'], undefined, 'no Retry-After: a stopping server does not come back by itself');
      for (const sock of held) sock.destroy();
      await check;
      await exited;
    } finally {
      agent.destroy();
      for (const sock of held) sock.destroy();
      hang.close();
      await s.stop();
      s.cleanup();
    }
  },
});
