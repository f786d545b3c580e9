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
// Both servers run with --spares 0 (every create launches cold). A third
// server keeps its spares (issue 21, docs/spares.md) and measures, in the
// same run: POST /browsers {} (headful) and {"headless": true} served by a
// spare, each after its replacement became ready, beside the cold {} create
// measured back to back with deletes (the next create right after the
// previous DELETE answered) and the raw launch. Then an idle session's PSS
// beside raw browsers running at the same time (issue 39.1, BENCH_ONLY=pss)
// and creates under churn (issue 39.2, BENCH_ONLY=churn).
//   node bench/sandbox.mjs
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statfsSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, request } from '../tests/blackbox/lib.mjs';
import { ms, rawIdle, rawLaunch, rawHeadfulLaunch } from './lib.mjs';

const RUNS = Number(process.env.BENCH_LAUNCHES || 9);
const SPARE_RUNS = Number(process.env.BENCH_SPARE_CREATES || 30);
const p99 = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(s.length * 0.99))]; };

// Ready spares of a server (their marker files, runtime/spares.h).
const sparesOf = (s) => { try { return new Set(readdirSync(join(s.dir, 'sessions')).filter((f) => f.endsWith('.spare')).map((f) => f.slice(0, -6))); } catch { return new Set(); } };
async function sparesReady(s, n) {
  for (let i = 0; i < 600 && sparesOf(s).size < n; i++) await new Promise((r) => setTimeout(r, 100));
  if (sparesOf(s).size < n) throw new Error(`spares not ready:\n${s.log}`);
}
// Waits (at most 5 s) until the machine is at rest: under 10% of one CPU
// busy over 200 ms (/proc/stat, this machine's CPUs only). A spare's
// DevTools endpoint answers about a second before Chromium's start-up work
// ends; a create served then shares the CPU with that work (its own spare's,
// now at normal priority, and the replacement's).
const busyJiffies = () => { const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number); return { busy: f[0] + f[1] + f[2] + f[5] + f[6], all: f.slice(0, 8).reduce((a, b) => a + b, 0) }; };
async function atRest() {
  for (let i = 0; i < 25; i++) {
    const a = busyJiffies();
    await new Promise((r) => setTimeout(r, 200));
    const b = busyJiffies();
    if ((b.busy - a.busy) / Math.max(1, b.all - a.all) * availableParallelism() < 0.1) return;
  }
}
const IDLE = Number(process.env.BENCH_IDLE_SESSIONS || 10);
// Waits (at most 60 s) until no process of s's sessions remains: deleted
// sessions end in the background, and the next section starts on a quiet
// machine.
async function settled(s) {
  for (let i = 0; i < 600; i++) {
    try { execFileSync('pgrep', ['-f', `${s.dir}/sessions/`]); } catch { return; }
    await new Promise((r) => setTimeout(r, 100));
  }
}
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

// The session's processes: a sandboxed session's are the tasks of its cgroup
// (its command lines name only neutral paths since issue 29.16); an
// unsandboxed one's are the tree under the Chromium that names its folder.
function sessionPids(dir, id) {
  for (const cg of [`/sys/fs/cgroup/pids/browserd/${id}`, `/sys/fs/cgroup/memory/browserd/${id}`, `/sys/fs/cgroup/browserd/${id}`]) {
    try { return readFileSync(`${cg}/cgroup.procs`, 'utf8').split('\n').filter(Boolean).map(Number); } catch { /* not this hierarchy */ }
  }
  let roots = [];
  try {
    roots = execFileSync('pgrep', ['-f', '--', `--user-data-dir=${dir}/sessions/${id}( |$)`], { encoding: 'utf8' })
      .split('\n').filter(Boolean).map(Number);
  } catch { return []; }
  const pp = parents();
  const inTree = (pid) => { for (let p = pid; p > 1; p = pp.get(p)) if (roots.includes(p)) return true; return false; };
  return [...pp.keys()].filter(inTree);
}

// PSS of the session's processes.
function treePss(dir, id) {
  const pids = sessionPids(dir, id);
  if (pids.length === 0) throw new Error(`no process of session ${id} found`);
  let kb = 0;
  for (const pid of pids) kb += pssKb(pid);
  return kb;
}

// A sandboxed session's profile and files are tmpfs mounts (memory, not in
// any process's PSS): their used size counts with its processes' PSS.
const tmpfsKb = (path) => { try { const st = statfsSync(path); return st.type === 0x01021994 ? ((st.blocks - st.bfree) * st.bsize) / 1024 : 0; } catch { return 0; } };
const sessionKb = (s, id) => treePss(s.dir, id) + tmpfsKb(`${s.dir}/sessions/${id}`) + tmpfsKb(`${s.dir}/sessions/${id}.root`);

// Issue 39.1: an idle session beside a bare browser, at the same time. A
// sandboxed server with --spares 0 runs N idle headless and M idle headful
// sessions while N raw `chromium --headless=new about:blank` (bench/lib.mjs
// rawIdle) run beside them, started interleaved; PSS is read once the start-up
// work settled, so every browser shares its library pages with the same
// others. BENCH_ONLY=pss prints this section alone.
const PSS_N = Number(process.env.BENCH_PSS_SESSIONS || 5);
const PSS_HEADFUL = Number(process.env.BENCH_PSS_HEADFUL || 3);
async function idleVsRaw() {
  const s = await startServer({ args: ['--spares', '0'] });
  const raws = [], headless = [], headful = [];
  const create = async (body) => {
    const r = await request(s.base, 'POST', '/browsers', { key: s.key, body: { ...body, timeout_seconds: 600 } });
    if (r.status !== 200) throw new Error(`create: ${r.text}`);
    return r.json.session_id;
  };
  let kbHl = 0, kbHf = 0, kbRaw = 0;
  try {
    if (!/sandbox: on/.test(s.log)) throw new Error(`the server is not sandboxed:\n${s.log}`);
    for (let i = 0; i < PSS_N; i++) {
      headless.push(await create({ headless: true }));
      raws.push(await rawIdle());
      if (i < PSS_HEADFUL) headful.push(await create({}));
    }
    await new Promise((r) => setTimeout(r, 5000)); // let start-up work settle
    await atRest();
    for (const id of headless) kbHl += sessionKb(s, id);
    for (const id of headful) kbHf += sessionKb(s, id);
    for (const r of raws) for (const pid of r.pids()) kbRaw += pssKb(pid);
    for (const id of [...headless, ...headful]) await request(s.base, 'DELETE', `/browsers/${id}`, { key: s.key });
    await settled(s);
  } finally {
    for (const r of raws) await r.stop();
    await s.stop(); s.cleanup();
  }
  const hl = kbHl / 1024 / PSS_N, hf = kbHf / 1024 / Math.max(1, PSS_HEADFUL), raw = kbRaw / 1024 / PSS_N;
  const memGiB = Number(/MemTotal:\s+(\d+)/.exec(readFileSync('/proc/meminfo', 'utf8'))[1]) / 1048576;
  const fit = (mb) => Math.floor((memGiB - 2) * 1024 / mb);
  const f = (x) => x.toFixed(1);
  return ['## An idle session beside a bare browser (issue 39.1)', '',
    `Command: \`BENCH_ONLY=pss node bench/sandbox.mjs\` (also run by \`make bench\`). A sandboxed server with \`--spares 0\` runs ${PSS_N} idle headless`,
    `and ${PSS_HEADFUL} idle headful sessions while ${PSS_N} raw \`chromium --headless=new about:blank\` (root, \`--no-sandbox\`, the flags of bench/lib.mjs) run beside them,`,
    'all started interleaved; PSS (`/proc/PID/smaps_rollup`) is read 5 s after the last start, once the machine is at rest. A session counts the tasks of its',
    'cgroup (bwrap, Chromium and its helpers, Xvfb when headful) and the used size of its tmpfs folders; a raw browser its process tree and its crashpad handler.', '',
    '| figure | value | target |', '|---|---|---|',
    `| PSS of an idle headless session | ${f(hl)} MB (${(hl / raw).toFixed(2)}x raw) | <= 0.7x raw |`,
    `| PSS of an idle headful session (Xvfb included) | ${f(hf)} MB (${(hf / raw).toFixed(2)}x raw) | |`,
    `| PSS of a raw \`chromium --headless=new\` with one blank page (same run) | ${f(raw)} MB | |`,
    `| idle sessions in this host's memory (MemTotal ${f(memGiB)} GiB less 2 GiB) at these figures, headless / headful | ${fit(hl)} / ${fit(hf)} | |`, ''];
}
if (process.env.BENCH_ONLY === 'pss') {
  console.log((await idleVsRaw()).join('\n'));
  process.exit(0);
}

// Issue 39.2: creates under churn. The default server (its default spares:
// one headful, one headless) serves POST /browsers {"headless":true} back to
// back with deletes (the next create as soon as the previous DELETE
// answered), beside raw `chromium --headless=new` launches in the same run
// (a block before and a block after). BENCH_ONLY=churn prints this section
// alone.
const CHURN = Number(process.env.BENCH_CHURN_CREATES || 20);
const BLOCK_N = 5;
async function churn() {
  const s = await startServer({ env: { BROWSERD_SPARES: undefined } });
  const raw = [], creates = [];
  let fromSpare = 0;
  try {
    // The headless spare (the one these creates can take); on a busy host a
    // spare's launch in the background may take a few tries.
    for (let i = 0; i < 600 && !/spares: headless spare \S+ launched/.test(s.log); i++) await new Promise((r) => setTimeout(r, 100));
    // (Measured all the same if none became ready: the default server as it is.)
    await atRest();
    // Blocks, so that the raw launches and the creates see the same load on
    // a busy host: raw launches, then back-to-back creates; the first create
    // of a block (its spare had the raw launches' time to get ready) is not
    // timed: churn is the creates that come right after a delete.
    const BLOCK = BLOCK_N;
    for (let b = 0; b < CHURN / BLOCK; b++) {
      for (let i = 0; i < Math.ceil(RUNS / 2); i++) raw.push(await rawLaunch());
      for (let i = 0; i <= BLOCK; i++) {
        const t0 = process.hrtime.bigint();
        const r = await request(s.base, 'POST', '/browsers', { key: s.key, body: { headless: true } });
        const t = ms(t0);
        if (r.status !== 200) throw new Error(`create: ${r.text}`);
        if (i > 0) {
          creates.push(t);
          if (new RegExp(`session ${r.json.session_id} started from a`).test(s.log)) fromSpare++;
        }
        await request(s.base, 'DELETE', `/browsers/${r.json.session_id}`, { key: s.key });
      }
    }
  } finally { await s.stop(); s.cleanup(); }
  // The same loop with no replacement under way when the next create comes
  // (--spares 0: each create launches its own browser): what replenishing
  // right after a hand-out is compared with.
  const none = await startServer({ args: ['--spares', '0'] });
  const coldOnly = [];
  try {
    for (let i = 0; i < CHURN; i++) {
      const t0 = process.hrtime.bigint();
      const r = await request(none.base, 'POST', '/browsers', { key: none.key, body: { headless: true } });
      coldOnly.push(ms(t0));
      if (r.status !== 200) throw new Error(`create: ${r.text}`);
      await request(none.base, 'DELETE', `/browsers/${r.json.session_id}`, { key: none.key });
    }
  } finally { await none.stop(); none.cleanup(); }
  const f = (x) => x.toFixed(1);
  return ['## Creates under churn (issue 39.2)', '',
    `Command: \`BENCH_ONLY=churn node bench/sandbox.mjs\` (also run by \`make bench\`). The default server (its default spares: one headful, one headless),`,
    `${CHURN} timed \`POST /browsers {"headless":true}\` back to back with deletes (the next create as soon as the previous DELETE answered), to CDP-ready`,
    `(the create answers once DevTools listens), in blocks of ${BLOCK_N} after ${Math.ceil(RUNS / 2)} raw \`chromium --headless=new\` launches to "DevTools listening" each (the same load`,
    'for both on a busy host); the first create of a block, whose spare had the raw launches\' time to get ready, is not timed.', '',
    '| figure | value | target |', '|---|---|---|',
    `| \`POST /browsers {"headless":true}\` back to back with deletes, default server, median / p90 | ${f(median(creates))} / ${f(creates.slice().sort((a, b) => a - b)[Math.floor(creates.length * 0.9)])} ms (${fromSpare} of ${creates.length} served by a spare) | |`,
    `| the same loop on a \`--spares 0\` server (each create launches cold; no replacement under way), median | ${f(median(coldOnly))} ms (${(median(coldOnly) / median(raw)).toFixed(2)}x raw) | |`,
    `| raw \`chromium --headless=new\` to "DevTools listening", median (same run) | ${f(median(raw))} ms | |`,
    `| churn create / raw launch | ${(median(creates) / median(raw)).toFixed(2)}x | <= 1.2x |`,
    `| load average during the run (1 min, at its end) | ${readFileSync('/proc/loadavg', 'utf8').split(' ')[0]} on ${availableParallelism()} CPUs | |`, ''];
}
if (process.env.BENCH_ONLY === 'churn') {
  console.log((await churn()).join('\n'));
  process.exit(0);
}

const on = await startServer({ args: ['--spares', '0'] });
const off = await startServer({ args: ['--spares', '0'], env: { BROWSERD_SANDBOX: 'off' } });
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
    for (const id of ids) kb += sessionKb(s, id);
    for (const id of ids) await api(s, 'DELETE', `/browsers/${id}`);
    await settled(s);
    return kb / ids.length;
  };
  const pssOn = await idle(on);
  const pssOff = await idle(off);
  const f = (x) => x.toFixed(1);

  // Issue 21: a spare's create beside a cold one and a raw launch. The cold
  // server is `on` (--spares 0); the spare server keeps the default spares.
  const spare = await startServer({ args: ['--spares', '2'] });
  const fromSpare = { '{}': [], '{"headless":true}': [] };
  const fromRested = { '{}': [], '{"headless":true}': [] };
  let served = 0, asked = 0;
  const coldBtb = [], coldBtbHl = [], raw2 = [], rawHf = [], rawElf = [];
  try {
    for (let i = 0; i < 2 * SPARE_RUNS; i++) {
      // Interleaved: creates as soon as both spares are ready, and creates
      // once they are ready and the machine is at rest.
      const rested = i % 2 === 1;
      for (const body of [{}, { headless: true }]) {
        await sparesReady(spare, 2);
        if (rested) await atRest();
        const before = sparesOf(spare);
        const t0 = process.hrtime.bigint();
        const r = await api(spare, 'POST', '/browsers', body);
        const t = ms(t0);
        if (r.status !== 200) throw new Error(`create: ${r.text}`);
        asked++;
        if (before.has(r.json.session_id)) { served++; (rested ? fromRested : fromSpare)[JSON.stringify(body)].push(t); }
        await api(spare, 'DELETE', `/browsers/${r.json.session_id}`);
      }
    }
    // Cold {} back to back with deletes: no pause between a DELETE's answer
    // and the next create, so the previous browser's teardown overlaps it.
    for (let i = 0; i < RUNS; i++) { raw2.push(await rawLaunch()); rawHf.push(await rawHeadfulLaunch()); rawElf.push(await rawLaunch(false, '/usr/lib/chromium/chromium')); }
    for (const body of [{}, { headless: true }]) {
      for (let i = 0; i < RUNS; i++) {
        const t0 = process.hrtime.bigint();
        const r = await api(on, 'POST', '/browsers', body);
        (body.headless ? coldBtbHl : coldBtb).push(ms(t0));
        if (r.status !== 200) throw new Error(`create: ${r.text}`);
        await api(on, 'DELETE', `/browsers/${r.json.session_id}`);
      }
    }
  } finally { await spare.stop(); spare.cleanup(); }
  const hf = fromSpare['{}'], hl = fromSpare['{"headless":true}'];
  const hfR = fromRested['{}'], hlR = fromRested['{"headless":true}'];
  lines.push('## Creates from pre-launched spares (issue 21)', '',
    `Command: \`node bench/sandbox.mjs\` (run by \`make bench\`). A server with \`--spares 2\` (one headful, one headless spare):`,
    `${2 * SPARE_RUNS} creates of each body, each after the previous one's spare was replaced (${served} of ${asked} served by a spare; only those are timed),`,
    `each followed by its DELETE; every other one also waits until the machine is at rest (under 10% of a CPU busy over 200 ms), because a spare's`,
    `DevTools endpoint answers about a second before Chromium's start-up work ends (docs/spares.md). The cold create is \`POST /browsers {}\` on a \`--spares 0\` server, the next create sent as soon as`,
    `the previous DELETE answered (${RUNS} of each body), after ${RUNS} raw launches of each kind. The headful create is compared with a raw`,
    '`Xvfb` + `chromium` launch, the headless one with a raw `chromium --headless=new`.', '',
    '| figure | value | target |', '|---|---|---|',
    `| \`POST /browsers {}\` to CDP-ready from a ready headful spare, machine at rest, p50 / p99 | ${f(median(hfR))} / ${f(p99(hfR))} ms | p50 < 10 ms, p99 < 30 ms |`,
    `| \`POST /browsers {"headless":true}\` from a ready headless spare, machine at rest, p50 / p99 | ${f(median(hlR))} / ${f(p99(hlR))} ms | |`,
    `| \`POST /browsers {}\` as soon as both spares answer (their start-up work may still run), p50 / p99 | ${f(median(hf))} / ${f(p99(hf))} ms | stated |`,
    `| \`POST /browsers {"headless":true}\`, the same, p50 / p99 | ${f(median(hl))} / ${f(p99(hl))} ms | |`,
    `| cold \`POST /browsers {}\` (headful), back to back with deletes, median | ${f(median(coldBtb))} ms (${(median(coldBtb) / median(rawHf)).toFixed(2)}x the raw headful launch) | <= 1.2x raw |`,
    `| cold \`POST /browsers {"headless":true}\`, back to back with deletes, median | ${f(median(coldBtbHl))} ms (${(median(coldBtbHl) / median(raw2)).toFixed(2)}x raw) | <= 1.2x raw |`,
    `| raw \`chromium --headless=new\` to "DevTools listening", median (same run) | ${f(median(raw2))} ms | |`,
    `| raw \`/usr/lib/chromium/chromium --headless=new\` (the binary Debian's script runs, as the server does) to "DevTools listening", median (same run) | ${f(median(rawElf))} ms (cold headless create: ${f(median(coldBtbHl) / median(rawElf))}x) | |`,
    `| raw headful launch (Xvfb 1920x1080 until it accepts connections, then \`chromium\` on it) to "DevTools listening", median (same run) | ${f(median(rawHf))} ms | |`,
    `| cold \`{}\` create / spare \`{}\` create (at rest) | ${f(median(coldBtb) / median(hfR))}x | |`,
    `| load average during the run (1 min, at its end) | ${readFileSync('/proc/loadavg', 'utf8').split(' ')[0]} on ${availableParallelism()} CPUs | |`, '');
  lines.push('## The session sandbox (issue 15)', '',
    `Command: \`node bench/sandbox.mjs\` (run by \`make bench\`); ${RUNS} launches of each kind, interleaved;`,
    `memory over ${IDLE} idle headless sessions per server. "Unsandboxed" is the same binary with \`BROWSERD_SANDBOX=off\`.`, '',
    '| figure | value | target |', '|---|---|---|',
    `| raw \`chromium --headless=new\` to "DevTools listening", median | ${f(median(raw))} ms | |`,
    `| raw launch with Chromium's own sandbox on (unprivileged uid, no bwrap), median | ${f(median(rawOwn))} ms (${f(median(rawOwn) / median(raw))}x raw) | |`,
    `| \`POST /browsers\` to CDP-ready, sandboxed, median | ${f(median(sbx))} ms (${f(median(sbx) / median(raw))}x raw, ${f(median(sbx) / median(rawOwn))}x the raw launch with Chromium's sandbox) | <= 1.2x raw |`,
    `| \`POST /browsers\` to CDP-ready, unsandboxed, median | ${f(median(plain))} ms (${f(median(plain) / median(raw))}x raw) | |`,
    `| sandboxed / unsandboxed create | ${f(median(sbx) / median(plain))}x | |`,
    `| PSS of an idle headless session's process tree, sandboxed, plus its tmpfs folders (profile and files) | ${f(pssOn / 1024)} MB | <= 1.1x unsandboxed |`,
    `| PSS of an idle headless session's process tree, unsandboxed | ${f(pssOff / 1024)} MB (sandboxed: ${f(pssOn / pssOff)}x) | |`, '');
} finally {
  for (const s of [on, off]) { await s.stop(); s.cleanup(); }
}
lines.push(...await idleVsRaw());
lines.push(...await churn());
console.log(lines.join('\n'));
