// Live view (issue 18) of a 1920x1080 headful session, watched by a second
// Chromium: frames/s delivered for an animated page, latency from a change on
// the session's page to the frame drawn in the viewer (p50/p90 of 20
// changes), and CPU per viewer (the server's process and the session's own
// processes, 10 s with one viewer minus 10 s without). Targets: 20 frames/s,
// p50 under 100 ms. Prints a Markdown section for docs/BENCHMARKS.md.
//   node bench/liveview.mjs
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { chromium } from '../tests/compat/node_modules/playwright-core/index.mjs';
import { startServer, startSite, request } from '../tests/blackbox/lib.mjs';

const ANIM = '<body style="margin:0;height:100vh;background:#800"><div id=d style="position:absolute;top:0;left:0;width:300px;height:100px;background:#fff;font:60px sans-serif"></div><script>let n=0;(function f(){d.textContent=++n;d.style.left=(n*7%1500)+"px";requestAnimationFrame(f)})()</script></body>';
const site = await startSite((q, r) => { r.setHeader('content-type', 'text/html'); r.end(q.url === '/anim' ? ANIM : '<body style="margin:0;height:100vh;background:#800"><h1>live</h1></body>'); });
const s = await startServer({ args: site.allow });
const api = (m, p, b) => request(s.base, m, p, { key: s.key, body: b });
const ticks = (pid) => { try { const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' '); return Number(f[11]) + Number(f[12]); } catch { return 0; } };
// A session's processes run under the sandbox's own uids (docs/sandbox.md).
const sessionPids = () => readdirSync('/proc').filter((d) => /^\d+$/.test(d)).filter((d) => { try { return statSync(`/proc/${d}`).uid >= 1100000; } catch { return false; } });
const cpu = async (ms) => {
  const a = ticks(s.proc.pid), b = sessionPids().reduce((t, p) => t + ticks(p), 0);
  await new Promise((r) => setTimeout(r, ms));
  return { server: (ticks(s.proc.pid) - a) / (ms / 10), session: (sessionPids().reduce((t, p) => t + ticks(p), 0) - b) / (ms / 10) };
};
const viewer = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
const out = [];
try {
  const b = (await api('POST', '/browsers', { headless: false, start_url: `${site.url}/anim`, viewport: { width: 1920, height: 1080 } })).json;
  const br = await chromium.connectOverCDP(b.cdp_ws_url);
  const pg = br.contexts()[0].pages()[0];
  await pg.waitForLoadState('load');
  const alone = await cpu(10000);
  const vp = await (await viewer.newContext({ viewport: { width: 1280, height: 720 } })).newPage();
  await vp.goto(b.browser_live_view_url);
  await vp.waitForFunction(() => window.lvFrames > 0);
  const f1 = await vp.evaluate(() => window.lvFrames), t1 = Date.now();
  const watched = await cpu(10000);
  const fps = (await vp.evaluate(() => window.lvFrames) - f1) / ((Date.now() - t1) / 1000);
  await pg.goto(`${site.url}/`);
  const lat = [];
  for (let i = 0; i < 20; i++) {
    const col = i % 2 ? [0, 0, 200] : [0, 200, 0];
    const t = Date.now();
    await pg.evaluate((c) => { document.body.style.background = `rgb(${c})`; }, col);
    await vp.waitForFunction((c) => { const cv = document.getElementById('c'); const d = cv.getContext('2d').getImageData(cv.width >> 1, cv.height >> 1, 1, 1).data; return Math.abs(d[1] - c[1]) < 40 && Math.abs(d[2] - c[2]) < 40; }, col, { polling: 'raf' });
    lat.push(Date.now() - t);
  }
  lat.sort((x, y) => x - y);
  const pct = (v) => `${(v * 100).toFixed(0)}%`;
  out.push('## Live view (issue 18)', '',
    'A 1920x1080 headful session watched by a second Chromium at 1280x720 (`node bench/liveview.mjs`);',
    'CPU in percent of one core, from /proc, over 10 s.', '',
    '| figure | value | target |', '|---|---|---|',
    `| frames delivered, animated page | ${fps.toFixed(1)} frames/s | >= 20 |`,
    `| change on the page to the frame in the viewer | p50 ${lat[10]} ms, p90 ${lat[18]} ms | p50 < 100 ms |`,
    `| server CPU, animated page: with one viewer / without | ${pct(watched.server)} / ${pct(alone.server)} | stated |`,
    `| session's processes (screencast encoding), with one viewer / without | ${pct(watched.session)} / ${pct(alone.session)} | stated |`);
  await br.close();
  await api('DELETE', `/browsers/${b.session_id}`);
} finally { await viewer.close(); await s.stop(); s.cleanup(); site.close(); }
console.log(out.join('\n'));
