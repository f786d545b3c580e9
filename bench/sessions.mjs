// Session, relay and pool benchmarks (issues 4 and 5). Prints a Markdown
// section; bench/run.sh appends it to docs/BENCHMARKS.md. Every comparison is
// measured in this one run, on this machine.
//   node bench/sessions.mjs BUILD/browserd
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { startServer, request } from '../tests/blackbox/lib.mjs';
import { ms, rawLaunch } from './lib.mjs';

const require = createRequire(new URL('../tests/compat/package.json', import.meta.url));
const WebSocket = require('ws');

const RUNS = Number(process.env.BENCH_LAUNCHES || 7);
const RTTS = Number(process.env.BENCH_RTTS || 2000);
const LIVE = Number(process.env.BENCH_SESSIONS || 100);
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const p99 = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(s.length * 0.99))]; };
const cpuTicks = (pid) => { const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' '); return Number(f[11]) + Number(f[12]); };
const rssKb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
const HZ = Number(execFileSync('getconf', ['CLK_TCK']).toString());

function wsOpen(url) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false, maxPayload: 256 * 1024 * 1024 });
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}

// Sequential CDP round trips (Browser.getVersion); returns the latencies in us.
async function rtts(url, n) {
  const ws = await wsOpen(url);
  const out = [];
  for (let i = 1; i <= n; i++) {
    const t0 = process.hrtime.bigint();
    await new Promise((resolve) => {
      ws.once('message', resolve);
      ws.send(JSON.stringify({ id: i, method: 'Browser.getVersion' }));
    });
    out.push(Number(process.hrtime.bigint() - t0) / 1e3);
  }
  ws.close();
  return out;
}

// Pipelined CDP commands: `inflight` outstanding at a time, `total` in all.
async function burst(url, total, inflight) {
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

// Unsandboxed (BROWSERD_SANDBOX=off): the relay comparison connects to the
// browser's DevTools port directly, which a sandbox keeps inside the
// session's network namespace. bench/sandbox.mjs measures the sandbox.
const s = await startServer({ env: { BROWSERD_SANDBOX: 'off' } });
const api = (method, path, body) => request(s.base, method, path, { key: s.key, body });
const lines = [];
try {
  // 1. Cold create vs raw launch, interleaved so that both see the same load.
  const raw = [], create = [];
  for (let i = 0; i < RUNS; i++) {
    raw.push(await rawLaunch());
    const t0 = process.hrtime.bigint();
    const r = await api('POST', '/browsers', { headless: true });
    create.push(ms(t0));
    if (r.status !== 200) throw new Error(`create: ${r.text}`);
    await api('DELETE', `/browsers/${r.json.session_id}`);
  }

  // 2. Relay vs direct round trips on one session.
  const b = (await api('POST', '/browsers', { headless: true })).json;
  // Chromium writes DevToolsActivePort a moment after it prints "DevTools
  // listening" (which is what the server waits for), so wait for the file.
  const portFile = join(s.dir, 'sessions', b.session_id, 'DevToolsActivePort');
  for (let i = 0; i < 100 && !existsSync(portFile); i++) await new Promise((r) => setTimeout(r, 50));
  const port = readFileSync(portFile, 'utf8').split('\n');
  const direct = `ws://127.0.0.1:${port[0]}${port[1]}`;
  await rtts(direct, 200); await rtts(b.cdp_ws_url, 200); // warm up
  const d = await rtts(direct, RTTS);
  const c0 = cpuTicks(s.proc.pid);
  const rl = await rtts(b.cdp_ws_url, RTTS);
  const c1 = cpuTicks(s.proc.pid);
  const cpuPerMsgUs = ((c1 - c0) / HZ) * 1e6 / (2 * RTTS); // a round trip relays two messages
  const BURST = RTTS * 10;
  const c2 = cpuTicks(s.proc.pid);
  await burst(b.cdp_ws_url, BURST, 64);
  const c3 = cpuTicks(s.proc.pid);
  const cpuPerMsgBurstUs = ((c3 - c2) / HZ) * 1e6 / (2 * BURST);
  await api('DELETE', `/browsers/${b.session_id}`);

  // 3. Pool: warm acquire vs the cold create above; release with reuse.
  const pool = (await api('POST', '/browser_pools', { size: 1, headless: true, fill_rate_per_minute: 6000 })).json;
  for (let i = 0; i < 200; i++) { if ((await api('GET', `/browser_pools/${pool.id}`)).json.available_count === 1) break; await new Promise((r) => setTimeout(r, 100)); }
  const acq = [], rel = [];
  for (let i = 0; i < 30; i++) {
    let t0 = process.hrtime.bigint();
    const a = await api('POST', `/browser_pools/${pool.id}/acquire`, {});
    acq.push(ms(t0));
    if (a.status !== 200) throw new Error(`acquire: ${a.status} ${a.text}`);
    t0 = process.hrtime.bigint();
    await api('POST', `/browser_pools/${pool.id}/release`, { session_id: a.json.session_id, reuse: true });
    rel.push(ms(t0));
  }
  await api('DELETE', `/browser_pools/${pool.id}`, { force: true });

  // 4. Server memory (Chromium excluded: it runs in its own processes) with
  //    LIVE sessions at once.
  const rssIdle = rssKb(s.proc.pid);
  const ids = [];
  for (let i = 0; i < LIVE; i++) {
    const r = await api('POST', '/browsers', { headless: true, timeout_seconds: 600 });
    if (r.status !== 200) break;
    ids.push(r.json.session_id);
  }
  const rssLive = rssKb(s.proc.pid);
  for (const id of ids) await api('DELETE', `/browsers/${id}`);

  const f = (x) => x.toFixed(1);
  lines.push('## Sessions, CDP relay and pools (issues 4 and 5)', '',
    `Command: \`node bench/sessions.mjs\` (run by \`make bench\`, server with \`BROWSERD_SANDBOX=off\` so that the relay can be compared with a direct connection); ${RUNS} launches, ${RTTS} round trips, ${LIVE} live sessions.`, '',
    '| figure | value | target |', '|---|---|---|',
    `| raw \`chromium --headless=new\` to "DevTools listening", median | ${f(median(raw))} ms | |`,
    `| \`POST /browsers\` (headless) to a CDP-ready browser, median | ${f(median(create))} ms (${f(median(create) / median(raw))}x raw) | <= 1.2x raw |`,
    `| CDP round trip direct to the browser, median / p99 | ${f(median(d))} us / ${f(p99(d))} us | |`,
    `| CDP round trip through the relay, median / p99 | ${f(median(rl))} us / ${f(p99(rl))} us | |`,
    `| relay added latency, median | ${f(median(rl) - median(d))} us | <= 60 us |`,
    `| server CPU per relayed message, one command at a time | ${f(cpuPerMsgUs)} us | stated (issue 21's target is with 64 in flight) |`,
    `| server CPU per relayed message, 64 commands in flight | ${f(cpuPerMsgBurstUs)} us | <= 5 us |`,
    `| pool acquire of a warm browser, median / p99 | ${f(median(acq))} ms / ${f(p99(acq))} ms (cold create: ${f(median(create))} ms) | < 2 ms |`,
    `| pool release with reuse back to available, median | ${f(median(rel))} ms | < 50 ms |`,
    `| server RSS idle / with ${ids.length} live sessions | ${(rssIdle / 1024).toFixed(1)} MB / ${(rssLive / 1024).toFixed(1)} MB | < 32 MB at 100 |`, '');
} finally {
  const code = await s.stop();
  if (code !== 0) console.error(`server exit: ${code}\n${s.log.split('\n').slice(-30).join('\n')}`);
  s.cleanup();
}
console.log(lines.join('\n'));
