// Replays (issue 18): one recording of a static page of text at 10 frames/s
// for BENCH_REPLAY_SECONDS (default 90: a keyframe falls every 60 s, so a
// whole number of minutes would end on a fresh one), headful (x11grab) and headless
// (DevTools screenshots): ffmpeg's CPU (from /proc of the ffmpeg process) and
// the file's size per minute. Target: under 1 MB per minute for a static page.
// Prints a Markdown section; bench/run.sh appends it to docs/BENCHMARKS.md.
//   node bench/replays.mjs
import { readFileSync, readdirSync } from 'node:fs';
import { startServer, startSite, request, waitFor } from '../tests/blackbox/lib.mjs';

const SECS = Number(process.env.BENCH_REPLAY_SECONDS || 90);
const words = 'lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor'.split(' ');
const text = Array.from({ length: 40 }, (_, i) => `<p>${Array.from({ length: 40 }, (_, j) => words[(i * 7 + j * 3) % words.length]).join(' ')}</p>`).join('');
const site = await startSite((q, r) => { r.setHeader('content-type', 'text/html'); r.end(`<body style="font:14px sans-serif;margin:20px">${text}</body>`); });
const s = await startServer({ args: site.allow });
const api = (m, p, b) => request(s.base, m, p, { key: s.key, body: b });
const ffmpegPids = () => readdirSync('/proc').filter((d) => /^\d+$/.test(d)).filter((d) => {
  try { return readFileSync(`/proc/${d}/comm`, 'utf8').trim() === 'ffmpeg'; } catch { return false; }
});
const ticks = (pid) => { const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' '); return Number(f[11]) + Number(f[12]); };
const rows = [];
try {
  for (const headless of [false, true]) {
    const b = (await api('POST', '/browsers', { headless, start_url: `${site.url}/`, viewport: { width: 1920, height: 1080 }, timeout_seconds: SECS + 120 })).json;
    const before = new Set(ffmpegPids());
    const rec = (await api('POST', `/browsers/${b.session_id}/replays`, { framerate: 10, max_duration_in_seconds: SECS + 30 })).json;
    const pid = await waitFor(() => ffmpegPids().find((p) => !before.has(p)), 'the recording\'s ffmpeg');
    const t0 = ticks(pid), w0 = Date.now();
    await new Promise((r) => setTimeout(r, SECS * 1000));
    const t1 = ticks(pid), w1 = Date.now();
    await api('POST', `/browsers/${b.session_id}/replays/${rec.replay_id}/stop`);
    const dl = await fetch(`${s.base}/browsers/${b.session_id}/replays/${rec.replay_id}`, { headers: { authorization: `Bearer ${s.key}` } });
    const bytes = (await dl.arrayBuffer()).byteLength;
    const cpu = (t1 - t0) / 100 / ((w1 - w0) / 1000);
    rows.push(`| ${headless ? 'headless (DevTools screenshots)' : 'headful (x11grab)'} | ${(cpu * 100).toFixed(1)}% of a core | ${(bytes / 1e6 / (SECS / 60)).toFixed(2)} MB/min (${(bytes / 1024).toFixed(0)} KiB in ${SECS} s) | < 1 MB/min |`);
    await api('DELETE', `/browsers/${b.session_id}`);
  }
} finally { await s.stop(); s.cleanup(); site.close(); }
console.log(['## Replays (issue 18)', '',
  `A static page of text, 1920x1080, 10 frames/s, ${SECS} s per recording (\`node bench/replays.mjs\`).`,
  'The headless path also costs the browser its screenshots (in the session\'s cgroup; not in the ffmpeg figure).', '',
  '| session | ffmpeg CPU | file | target |', '|---|---|---|---|', ...rows].join('\n'));
