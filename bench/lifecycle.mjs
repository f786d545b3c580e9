// The session lifecycle on an idle and on a busy host (issue 30), measured in
// one run: DELETE of a session with a saved profile (the cookie and storage
// written first), a pool release with reuse (after a lease that filled an
// origin's storage), a server stop (SIGTERM to exit) with 10 live sessions,
// and a fenced node's time from resuming to serving again (paused past its
// 3 s lease with four sessions, as tests/cluster does). Busy: stress-ng as
// the tests run it (withLoad: both cores, 768 MiB churned, files written
// through the page cache). Target: busy within 3x idle. Prints a Markdown
// section.
//   node bench/lifecycle.mjs        (BENCH_LIFECYCLE_RUNS, default 3)
import { createRequire } from 'node:module';
import { request, startServer, startSite, waitFor, withLoad } from '../tests/blackbox/lib.mjs';
import { startCluster } from '../tests/cluster/lib.mjs';

const require = createRequire(new URL('../tests/compat/package.json', import.meta.url));
const { chromium } = require('playwright-core');
const RUNS = Number(process.env.BENCH_LIFECYCLE_RUNS || 3);
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const api = (base, key, method, path, body) => request(base, method, path, { key, body });

async function ok(p, what) {
  const r = await p;
  if (r.status >= 300) throw new Error(`${what}: ${r.status} ${r.text}`);
  return r.json;
}

async function fill(wsUrl, url) {
  const b = await chromium.connectOverCDP(wsUrl);
  try {
    const ctx = b.contexts()[0];
    const page = ctx.pages()[0] || await ctx.newPage();
    await page.goto(url, { timeout: 60000 });
    await page.evaluate(async () => {
      localStorage.setItem('k', 'v');
      sessionStorage.setItem('k', 'v');
      await new Promise((res) => { const q = indexedDB.open('db', 1); q.onupgradeneeded = () => q.result.createObjectStore('s'); q.onsuccess = () => { q.result.close(); res(); }; });
    });
  } finally { await b.close(); }
}

async function deleteWithProfile(s, site) {
  const out = [];
  for (let i = 0; i < RUNS; i++) {
    const b = await ok(api(s.base, s.key, 'POST', '/browsers', { headless: true, profile: { name: 'bench', save_changes: true } }), 'create');
    await fill(b.cdp_ws_url, `${site.url}/set`);
    const t0 = process.hrtime.bigint();
    await ok(api(s.base, s.key, 'DELETE', `/browsers/${b.session_id}`), 'delete');
    out.push(ms(t0));
  }
  return median(out);
}

async function releaseReuse(s, site, pool) {
  const out = [];
  for (let i = 0; i < RUNS; i++) {
    const l = await ok(api(s.base, s.key, 'POST', `/browser_pools/${pool}/acquire`, { acquire_timeout_seconds: 120 }), 'acquire');
    await fill(l.cdp_ws_url, `${site.url}/set`);
    const t0 = process.hrtime.bigint();
    await ok(api(s.base, s.key, 'POST', `/browser_pools/${pool}/release`, { session_id: l.session_id, reuse: true }), 'release');
    out.push(ms(t0));
  }
  return median(out);
}

async function stopWith10() {
  const s = await startServer();
  try {
    for (let i = 0; i < 10; i++) await ok(api(s.base, s.key, 'POST', '/browsers', { headless: true }), 'create');
    const t0 = process.hrtime.bigint();
    await s.stop();
    return ms(t0);
  } finally { s.cleanup(); }
}

async function fenceToServing() {
  const c = await startCluster({ nodes: 3, env: { BROWSERD_NODE_LEASE_MS: '3000' } });
  c.expectLoss();
  try {
    const n1 = c.nodes[0];
    for (let i = 0; i < 4; i++) await ok(api(n1.base, c.key, 'POST', '/browsers', { headless: true }), 'create');
    const [[oldId]] = await c.psql("SELECT id FROM nodes WHERE name = 'n1' AND state = 'up'");
    process.kill(n1.pid, 'SIGSTOP');
    try {
      await waitFor(async () => (await c.psql(`SELECT state FROM nodes WHERE id = '${oldId}'`))[0][0] === 'dead', 'n1 declared dead', 120000, 100);
    } finally { process.kill(n1.pid, 'SIGCONT'); }
    const t0 = process.hrtime.bigint();
    await waitFor(async () => (await c.psql("SELECT count(*) FROM nodes WHERE name = 'n1' AND state = 'up'"))[0][0] === '1', 'n1 registered again', 180000, 50);
    await ok(api(n1.base, c.key, 'POST', '/browsers', { headless: true }), 'create on n1');
    return ms(t0);
  } finally { await c.stop(); }
}

// The four figures, with the host as it is.
async function measure() {
  const site = await startSite((rq, rs) => {
    if (rq.url.startsWith('/set')) rs.setHeader('set-cookie', 'k=v; Max-Age=86400; Path=/');
    rs.setHeader('content-type', 'text/html');
    rs.end('<title>x</title>');
  });
  const s = await startServer({ args: site.allow });
  const out = {};
  try {
    await ok(api(s.base, s.key, 'POST', '/profiles', { name: 'bench' }), 'profile');
    out.delete = await deleteWithProfile(s, site);
    const pool = (await ok(api(s.base, s.key, 'POST', '/browser_pools', { headless: true, size: 1, fill_rate_per_minute: 6000 }), 'pool')).id;
    await waitFor(async () => (await api(s.base, s.key, 'GET', `/browser_pools/${pool}`)).json.available_count === 1, 'the pool filled', 120000);
    out.release = await releaseReuse(s, site, pool);
  } finally { await s.stop(); s.cleanup(); site.close(); }
  out.stop = await stopWith10();
  out.fence = await fenceToServing();
  return out;
}

const idle = await measure();
const busy = await withLoad(measure, { seconds: 900 });
const rows = [
  ['DELETE of a session with a saved profile (median)', 'delete'],
  ['pool release with reuse (median)', 'release'],
  ['server stop with 10 live sessions', 'stop'],
  ['fenced node: resumed to serving again', 'fence'],
];
console.log('## The session lifecycle idle and under load (issue 30)\n');
console.log(`\`node bench/lifecycle.mjs\`, ${RUNS} runs of the first two; busy = stress-ng --cpu 2 --vm 1 --vm-bytes 768M --hdd 1.\n`);
console.log('| figure | idle ms | busy ms | busy / idle |');
console.log('| --- | --- | --- | --- |');
for (const [label, k] of rows) console.log(`| ${label} | ${idle[k].toFixed(0)} | ${busy[k].toFixed(0)} | ${(busy[k] / idle[k]).toFixed(2)}x |`);
process.exit(0);
