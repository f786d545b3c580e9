// The CDP relay alone (issue 21 item 5), for before/after comparisons:
//   BROWSERD_BIN=BUILD/browserd node bench/relay.mjs
// One headless session (BROWSERD_SANDBOX=off, as bench/sessions.mjs); the
// server's CPU (on-CPU time of all its threads) per relayed message with one
// command at a time and with 64 in flight, repeated REPS times.
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { startServer, request } from '../tests/blackbox/lib.mjs';

const require = createRequire(new URL('../tests/compat/package.json', import.meta.url));
const WebSocket = require('ws');
const N = Number(process.env.BENCH_RTTS || 2000);
const REPS = Number(process.env.BENCH_REPS || 3);
// On-CPU time of every thread of the process, in us (schedstat counts ns;
// /proc/PID/stat only ticks of 10 ms).
const cpuUs = (pid) => readdirSync(`/proc/${pid}/task`).reduce((sum, t) => {
  try { return sum + Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[0]) / 1e3; } catch { return sum; }
}, 0);
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

const wsOpen = (url) => new Promise((resolve, reject) => {
  const ws = new WebSocket(url, { perMessageDeflate: false, maxPayload: 256 * 1024 * 1024 });
  ws.once('open', () => resolve(ws));
  ws.once('error', reject);
});

// `total` Browser.getVersion commands, `inflight` outstanding at a time.
async function run(url, total, inflight) {
  const ws = await wsOpen(url);
  let sent = 0, got = 0;
  await new Promise((resolve) => {
    ws.on('message', () => {
      got++;
      if (sent < total) ws.send(JSON.stringify({ id: ++sent, method: 'Browser.getVersion' }));
      if (got === total) resolve();
    });
    for (; sent < inflight; ) ws.send(JSON.stringify({ id: ++sent, method: 'Browser.getVersion' }));
  });
  ws.close();
}

const s = await startServer({ env: { BROWSERD_SANDBOX: 'off' } });
try {
  const b = (await request(s.base, 'POST', '/browsers', { key: s.key, body: { headless: true } })).json;
  await run(b.cdp_ws_url, 500, 1); // warm up
  const one = [], many = [];
  for (let r = 0; r < REPS; r++) {
    let c0 = cpuUs(s.proc.pid);
    await run(b.cdp_ws_url, N, 1);
    one.push((cpuUs(s.proc.pid) - c0) / (2 * N));
    c0 = cpuUs(s.proc.pid);
    await run(b.cdp_ws_url, N * 10, 64);
    many.push((cpuUs(s.proc.pid) - c0) / (2 * N * 10));
  }
  await request(s.base, 'DELETE', `/browsers/${b.session_id}`, { key: s.key });
  const f = (xs) => `${median(xs).toFixed(1)} us (runs: ${xs.map((x) => x.toFixed(1)).join(', ')})`;
  console.log(`server CPU per relayed message, one at a time: ${f(one)}`);
  console.log(`server CPU per relayed message, 64 in flight:  ${f(many)}`);
} finally {
  await s.stop();
  s.cleanup();
}
