// Red team pass 45 (docs/sandbox.md "Tenant fairness: red team pass 45"): an
// app run reaches this server's API through a relay of its own
// (docs/apps.md), up to LIM_APP_RELAY_CONNS (64) connections per run. The
// relay connected from 127.0.0.1, so the HTTP front's per-address limit
// (BROWSERD_CONNECTIONS_PER_IP, 256) counted every run's connections as that
// address's: five runs of one tenant holding their 64 took every slot of
// 127.0.0.1, and every other client there (all of them behind a reverse proxy
// on the host) was refused. Each run now connects from its own loopback
// address (127.66.X.Y), and one organization's runs relay at most
// LIM_APP_RELAY_PUMPS_PER_ORG connections together (a pump thread each).
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Kernel from '@onkernel/sdk';
import { startServer, assert, eq, waitFor, newOrg } from '../blackbox/lib.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const ADMIN = 'redteam-91-apps';
const RUNS = 5, CONNS = 64, PER_IP = 256; // LIM_APP_RELAY_CONNS, LIM_HTTP_CONNECTIONS_PER_IP
const ORG_PUMPS = 256; // LIM_APP_RELAY_PUMPS_PER_ORG

// Keeps n connections to the API open for ms: each sends half a request head
// (the head deadline ends it after 10 s) and is opened again when it ends.
const APP = `
import Kernel from '@onkernel/sdk';
import net from 'node:net';
const kernel = new Kernel();
const app = kernel.app('hog-app');
app.action('hog', async (ctx, payload) => {
  const u = new URL(process.env.KERNEL_BASE_URL);
  const end = Date.now() + payload.ms;
  const socks = new Set();
  const open = () => {
    const s = net.connect(Number(u.port), u.hostname);
    socks.add(s);
    s.on('error', () => {});
    s.on('close', () => { socks.delete(s); if (Date.now() < end) setTimeout(open, 100); });
    s.write('GET /org/entitlements HTTP/1.1\\r\\nHost: x\\r\\n');
  };
  for (let i = 0; i < payload.n; i++) open();
  await new Promise((r) => setTimeout(r, payload.ms));
  for (const s of socks) s.destroy();
  return 'done';
});
`;

function buildZip() {
  const dir = mkdtempSync(join(tmpdir(), 'browserd-app-'));
  writeFileSync(join(dir, 'index.mjs'), APP);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'hog-app', type: 'module', version: '1.0.0' }));
  mkdirSync(join(dir, 'node_modules', '@onkernel'), { recursive: true });
  cpSync(join(here, 'node_modules', '@onkernel/sdk'), join(dir, 'node_modules', '@onkernel/sdk'), { recursive: true, dereference: true });
  execFileSync('zip', ['-qr1', join(dir, 'app.zip'), 'index.mjs', 'package.json', 'node_modules'], { cwd: dir });
  const zip = readFileSync(join(dir, 'app.zip'));
  rmSync(dir, { recursive: true, force: true });
  return zip;
}

// Established connections whose local end is the server's port (those of
// the runs' relays alone: their peers are not 127.0.0.1).
function serverConns(port, { runsOnly = false } = {}) {
  const out = execFileSync('ss', ['-Htn', 'state', 'established', `( sport = :${port} )`], { encoding: 'utf8' });
  return out.split('\n').filter((l) => l.trim() && (!runsOnly || !/\s127\.0\.0\.1:\d+\s*$/.test(l.trim()))).length;
}

// One request on a fresh connection from 127.0.0.1: its status, or the error.
function probe(s, key) {
  return new Promise((resolve) => {
    const rq = http.request({ host: '127.0.0.1', port: s.port, localAddress: '127.0.0.1', path: '/org/entitlements', agent: false,
      headers: { authorization: `Bearer ${key}` } }, (rs) => { rs.resume(); rs.on('end', () => resolve(rs.statusCode)); });
    rq.setTimeout(20000, () => rq.destroy(new Error('no answer in 20 s')));
    rq.on('error', (e) => resolve(e.code || e.message));
    rq.end();
  });
}

export const tests = [
  {
    name: `red team 45: app runs reach the API from their own loopback addresses: ${RUNS} runs of one organization holding their ${CONNS} relay connections each do not take the per-address slots (${PER_IP}) of 127.0.0.1 from another organization's client there, and relay at most LIM_APP_RELAY_PUMPS_PER_ORG (${ORG_PUMPS}) together`,
    timeout: 240000,
    fn: async () => {
      const s = await startServer({ env: { BROWSERD_ADMIN_TOKEN: ADMIN } });
      try {
        const victim = await newOrg(s, ADMIN, { name: 'victim-91-apps', plan: 'startup' });
        const client = new Kernel({ baseURL: s.base, apiKey: s.key, maxRetries: 0, timeout: 120000 });
        const zip = buildZip();
        const dep = await client.deployments.create({
          file: new File([zip], 'app.zip', { type: 'application/zip' }), entrypoint_rel_path: 'index.mjs', version: '1', region: 'aws.us-east-1a',
        });
        eq(dep.status, 'running', `deployment: ${JSON.stringify(dep)}`);
        const invs = [];
        for (let i = 0; i < RUNS; i++) {
          invs.push(await client.invocations.create({ app_name: 'hog-app', action_name: 'hog', version: '1', async: true, async_timeout_seconds: 120,
            payload: JSON.stringify({ n: CONNS, ms: 60000 }) }));
        }
        // The runs hold their connections (as many as 127.0.0.1 had slots).
        await waitFor(() => serverConns(s.port) >= PER_IP - 8, `${PER_IP - 8} connections held by the runs`, 90000, 250);
        for (let i = 0; i < 5; i++) {
          const st = await probe(s, victim.key);
          eq(st, 200, `another organization's request from 127.0.0.1 (try ${i + 1}) while the runs hold their connections`);
          // The organization's runs together relay at most LIM_APP_RELAY_PUMPS_PER_ORG (256).
          const runs = serverConns(s.port, { runsOnly: true });
          assert(runs <= ORG_PUMPS, `the organization's runs hold ${runs} connections`);
        }
        for (const inv of invs) await client.invocations.update(inv.id, { status: 'failed', output: '"stopped by the test"' }).catch(() => {});
      } finally {
        await s.stop();
        s.cleanup();
      }
    },
  },
];
