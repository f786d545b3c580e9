// Computer controls (issue 17): screenshot and click latency over HTTP on a
// headful session (X display capture and XTest input), next
// to CDP's own Page.captureScreenshot on the same session in the same run.
// Prints a Markdown section; bench/run.sh appends it to docs/BENCHMARKS.md.
//   node bench/computer.mjs
import { createRequire } from 'node:module';
import { startServer, request } from '../tests/blackbox/lib.mjs';

const require = createRequire(new URL('../tests/compat/package.json', import.meta.url));
const WebSocket = require('ws');
const N = Number(process.env.BENCH_COMPUTER_RUNS || 30);
const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(s.length * p))]; };
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;

// CDP's own screenshot through the session's cdp_ws_url (flattened page session).
async function cdpShots(url, n) {
  const ws = new WebSocket(url, { perMessageDeflate: false, maxPayload: 256 << 20 });
  await new Promise((r, j) => { ws.once('open', r); ws.once('error', j); });
  let id = 0;
  const send = (method, params = {}, sessionId) => new Promise((resolve) => {
    const my = ++id;
    const on = (m) => { const j = JSON.parse(m); if (j.id === my) { ws.off('message', on); resolve(j.result); } };
    ws.on('message', on);
    ws.send(JSON.stringify({ id: my, method, params, ...(sessionId ? { sessionId } : {}) }));
  });
  const { targetInfos } = await send('Target.getTargets');
  const { sessionId } = await send('Target.attachToTarget', { targetId: targetInfos.find((t) => t.type === 'page').targetId, flatten: true });
  const out = [];
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    await send('Page.captureScreenshot', { format: 'png' }, sessionId);
    out.push(ms(t0));
  }
  ws.close();
  return out;
}

const s = await startServer();
const api = (method, path, body) => request(s.base, method, path, { key: s.key, body });
const lines = [];
try {
  const b = (await api('POST', '/browsers', { headless: false, start_url: 'data:text/html,<h1>bench</h1>' })).json;
  const shots = [], clicks = [];
  for (let i = 0; i < 3; i++) await api('POST', `/browsers/${b.session_id}/computer/screenshot`, {});
  for (let i = 0; i < N; i++) {
    const t0 = process.hrtime.bigint();
    const r = await api('POST', `/browsers/${b.session_id}/computer/screenshot`, {});
    if (r.status !== 200) throw new Error(`screenshot: ${r.status}`);
    shots.push(ms(t0));
  }
  const cdp = await cdpShots(b.cdp_ws_url, N);
  for (let i = 0; i < N; i++) {
    const t0 = process.hrtime.bigint();
    const r = await api('POST', `/browsers/${b.session_id}/computer/click_mouse`, { x: 300 + i, y: 500 });
    if (r.status !== 200) throw new Error(`click: ${r.status} ${r.text}`);
    clicks.push(ms(t0));
  }
  await api('DELETE', `/browsers/${b.session_id}`);
  const f = (x) => x.toFixed(1);
  lines.push('## Computer controls (issue 17)', '',
    `Command: \`node bench/computer.mjs\` (run by \`make bench\`); a headful 1920x1080 session, ${N} calls each.`, '',
    '| figure | value | target |', '|---|---|---|',
    `| \`computer/screenshot\` over HTTP, p50 / p99 | ${f(pct(shots, 0.5))} ms / ${f(pct(shots, 0.99))} ms | p50 < 30 ms |`,
    `| CDP \`Page.captureScreenshot\` through cdp_ws_url, p50 | ${f(pct(cdp, 0.5))} ms (HTTP / CDP: ${(pct(shots, 0.5) / pct(cdp, 0.5)).toFixed(2)}x) | |`,
    `| \`computer/click_mouse\` over HTTP, p50 / p99 | ${f(pct(clicks, 0.5))} ms / ${f(pct(clicks, 0.99))} ms | p50 < 5 ms |`, '');
} finally {
  await s.stop();
  s.cleanup();
}
console.log(lines.join('\n'));
