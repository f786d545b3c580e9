// What the session sandbox costs (issue 15). Prints a Markdown section;
// bench/run.sh appends it to docs/BENCHMARKS.md. Two servers in one run, one
// with the sandbox (the default for a root server) and one with
// BROWSERD_SANDBOX=off, and a raw Chromium launch, interleaved so that all
// three see the same load:
//   - POST /browsers {"headless":true} to a CDP-ready browser (the create
//     answers once DevTools is listening), followed by DELETE each time;
//   - proportional set size of the whole process tree of an idle headless
//     session (the browser, its zygotes, renderer, GPU and utility processes,
//     and, sandboxed, bwrap's two processes), averaged over N sessions.
//   node bench/sandbox.mjs
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, request } from '../tests/blackbox/lib.mjs';
import { ms, rawLaunch } from './lib.mjs';

const RUNS = Number(process.env.BENCH_LAUNCHES || 9);
const IDLE = Number(process.env.BENCH_IDLE_SESSIONS || 10);
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

// pid -> parent pid, for every process.
function parents() {
  const m = new Map();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try { m.set(Number(d), Number(readFileSync(`/proc/${d}/stat`, 'utf8').split(') ')[1].split(' ')[1])); } catch { /* gone */ }
  }
  return m;
}

function pssKb(pid) {
  try { return Number(/Pss:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))[1]); } catch { return 0; }
}

// PSS of the tree under the session's first process (bwrap, or Chromium).
function treePss(dir, id) {
  const roots = execFileSync('pgrep', ['-f', '--', `--user-data-dir=${dir}/sessions/${id}( |$)`], { encoding: 'utf8' })
    .split('\n').filter(Boolean).map(Number);
  const pp = parents();
  const inTree = (pid) => { for (let p = pid; p > 1; p = pp.get(p)) if (roots.includes(p)) return true; return false; };
  let kb = 0;
  for (const pid of pp.keys()) if (inTree(pid)) kb += pssKb(pid);
  return kb;
}

const on = await startServer();
const off = await startServer({ env: { BROWSERD_SANDBOX: 'off' } });
const lines = [];
try {
  if (!/sandbox: on/.test(on.log)) throw new Error(`the first server is not sandboxed:\n${on.log}`);
  const api = (s, method, path, body) => request(s.base, method, path, { key: s.key, body });
  const createMs = async (s) => {
    const t0 = process.hrtime.bigint();
    const r = await api(s, 'POST', '/browsers', { headless: true });
    const t = ms(t0);
    if (r.status !== 200) throw new Error(`create: ${r.text}`);
    await api(s, 'DELETE', `/browsers/${r.json.session_id}`);
    return t;
  };
  const raw = [], rawOwn = [], sbx = [], plain = [];
  for (let i = 0; i < RUNS; i++) {
    raw.push(await rawLaunch());
    rawOwn.push(await rawLaunch(true));
    sbx.push(await createMs(on));
    plain.push(await createMs(off));
  }
  const idle = async (s) => {
    const ids = [];
    for (let i = 0; i < IDLE; i++) ids.push((await api(s, 'POST', '/browsers', { headless: true, timeout_seconds: 600 })).json.session_id);
    await new Promise((r) => setTimeout(r, 3000)); // let start-up work settle
    let kb = 0;
    for (const id of ids) kb += treePss(s.dir, id);
    for (const id of ids) await api(s, 'DELETE', `/browsers/${id}`);
    return kb / ids.length;
  };
  const pssOn = await idle(on);
  const pssOff = await idle(off);
  const f = (x) => x.toFixed(1);
  lines.push('## The session sandbox (issue 15)', '',
    `Command: \`node bench/sandbox.mjs\` (run by \`make bench\`); ${RUNS} launches of each kind, interleaved;`,
    `memory over ${IDLE} idle headless sessions per server. "Unsandboxed" is the same binary with \`BROWSERD_SANDBOX=off\`.`, '',
    '| figure | value | target |', '|---|---|---|',
    `| raw \`chromium --headless=new\` to "DevTools listening", median | ${f(median(raw))} ms | |`,
    `| raw launch with Chromium's own sandbox on (unprivileged uid, no bwrap), median | ${f(median(rawOwn))} ms (${f(median(rawOwn) / median(raw))}x raw) | |`,
    `| \`POST /browsers\` to CDP-ready, sandboxed, median | ${f(median(sbx))} ms (${f(median(sbx) / median(raw))}x raw, ${f(median(sbx) / median(rawOwn))}x the raw launch with Chromium's sandbox) | <= 1.2x raw |`,
    `| \`POST /browsers\` to CDP-ready, unsandboxed, median | ${f(median(plain))} ms (${f(median(plain) / median(raw))}x raw) | |`,
    `| sandboxed / unsandboxed create | ${f(median(sbx) / median(plain))}x | |`,
    `| PSS of an idle headless session's process tree, sandboxed | ${f(pssOn / 1024)} MB | <= 1.1x unsandboxed |`,
    `| PSS of an idle headless session's process tree, unsandboxed | ${f(pssOff / 1024)} MB (sandboxed: ${f(pssOn / pssOff)}x) | |`, '');
} finally {
  for (const s of [on, off]) { await s.stop(); s.cleanup(); }
}
console.log(lines.join('\n'));
