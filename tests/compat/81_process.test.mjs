// Issue 20, parts 2 and 6: browsers.process.* and browsers.playwright.execute
// run inside the session's sandbox (docs/process.md), with real Chromium.
// Every escape probe is paired with the same probe on the session's own
// things succeeding, so that a broken probe cannot pass.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startServer, startSite, request, assert, eq, isError, waitFor } from '../blackbox/lib.mjs';

const api = (s, method, path, body) => request(s.base, method, path, { key: s.key, body });
const b64 = (t) => Buffer.from(t).toString('base64');
const unb64 = (t) => Buffer.from(t || '', 'base64').toString('utf8');

async function withServer(opts, fn) {
  if (typeof opts === 'function') [opts, fn] = [fn || {}, opts];
  const s = await startServer({ ...opts, env: { BROWSERD_PROC_CANARY: 'server-secret-canary', ...(opts.env || {}) } });
  try {
    assert(/sandbox: on/.test(s.log), `the server runs sessions sandboxed:\n${s.log}`);
    await fn(s);
  } finally { await s.stop(); s.cleanup(); }
}

async function create(s, body = {}) {
  const r = await api(s, 'POST', '/browsers', { headless: true, ...body });
  eq(r.status, 200, `create: ${r.text}`);
  return r.json.session_id;
}

async function exec(s, id, body) {
  const r = await api(s, 'POST', `/browsers/${id}/process/exec`, body);
  if (r.status === 200) { r.out = unb64(r.json.stdout_b64); r.err = unb64(r.json.stderr_b64); }
  return r;
}

async function spawn(s, id, body) {
  const r = await api(s, 'POST', `/browsers/${id}/process/spawn`, body);
  eq(r.status, 200, `spawn: ${r.text}`);
  return r.json;
}

// The whole SSE body of a process's output stream (the process must end),
// as [{stream, text} | {event, exit_code}].
async function stream(s, id, pid) {
  const r = await request(s.base, 'GET', `/browsers/${id}/process/${pid}/stdout/stream`, { key: s.key });
  eq(r.status, 200, `stream: ${r.text}`);
  assert(/^text\/event-stream/.test(r.headers['content-type']), 'SSE content type');
  const frames = r.text.split('\n\n').filter(Boolean);
  return frames.map((f) => {
    assert(/^data: /.test(f) && !f.includes('\n'), `one data line per frame: ${JSON.stringify(f)}`);
    const j = JSON.parse(f.slice(6));
    return j.event ? j : { stream: j.stream, text: unb64(j.data_b64) };
  });
}

function pgrep(pattern) {
  try { return execFileSync('pgrep', ['-f', '--', pattern], { encoding: 'utf8' }).split('\n').filter(Boolean).map(Number); } catch { return []; }
}

const hostUid = (pid) => Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);

function devtoolsPort(s, id) {
  const m = /DevTools listening on ws:\/\/127\.0\.0\.1:(\d+)\/devtools\/browser\/([\w-]+)/.exec(readFileSync(join(s.dir, 'sessions', `${id}.log`), 'utf8'));
  assert(m, 'the browser log names its DevTools port');
  return { port: Number(m[1]), browserId: m[2] };
}

export const tests = [
  {
    name: 'issue 20 process isolation: runs as the session uid (host view), clean environment without the server\'s variables, cwd /home/kernel, session /tmp shared with spawn; no /work, no data folder',
    timeout: 90000,
    fn: () => withServer(async (s) => {
      const id = await create(s);
      let r = await exec(s, id, { command: 'id', args: ['-u'] });
      eq(r.status, 200, r.text);
      const inside = Number(r.out.trim());
      assert(inside >= 1100000, `the session's own uid, not root nor the server's: ${inside}`);
      for (const k of ['exit_code', 'stdout_b64', 'stderr_b64', 'duration_ms']) assert(k in r.json, `exec answers ${k}`);
      r = await exec(s, id, { command: 'env' });
      assert(/^HOME=\/home\/kernel$/m.test(r.out) && /^USER=kernel$/m.test(r.out) && /^PATH=/m.test(r.out), `base environment: ${r.out}`);
      assert(!/server-secret-canary|BROWSERD_/.test(r.out), `no server variable leaks: ${r.out}`);
      r = await exec(s, id, { command: 'env', env: { FOO: 'bar', HOME: '/tmp' } });
      assert(/^FOO=bar$/m.test(r.out) && /^HOME=\/tmp$/m.test(r.out), `the client's env on top: ${r.out}`);
      r = await exec(s, id, { command: 'pwd' });
      eq(r.out, '/home/kernel\n', 'default cwd');
      r = await exec(s, id, { command: 'pwd', cwd: '/tmp' });
      eq(r.out, '/tmp\n', 'cwd');
      // A file written by a spawned process is read by exec cat (shared /tmp).
      const sp = await spawn(s, id, { command: 'sh', args: ['-c', 'echo written-by-spawn > /tmp/shared.txt; exec sleep 4242'] });
      const host = await waitFor(() => pgrep('^sleep 4242')[0], 'the spawned sleep on the host');
      eq(hostUid(host), inside, 'the host sees the same uid as id -u inside');
      r = await waitFor(async () => { const x = await exec(s, id, { command: 'cat', args: ['/tmp/shared.txt'] }); return x.json.exit_code === 0 && x; }, 'the file spawn wrote');
      eq(r.out, 'written-by-spawn\n', 'exec cat reads what spawn wrote');
      assert(!readFileSync('/tmp/shared.txt', { flag: 'a+' }).toString().includes('written-by-spawn'), 'the session\'s /tmp is not the host\'s');
      // The host's files are not there.
      r = await exec(s, id, { command: 'ls', args: ['/work'] });
      assert(r.status === 200 && r.json.exit_code !== 0, `/work is not visible: ${r.text}`);
      r = await exec(s, id, { command: 'cat', args: [join(s.dir, 'bootstrap-api-key')] });
      assert(r.json.exit_code !== 0 && !r.out.includes(s.key), 'the data folder is not visible');
      r = await exec(s, id, { command: 'cat', args: ['/proc/1/root/etc/shadow'] });
      assert(r.json.exit_code !== 0 && r.out === '', '/proc/1/root is the sandbox\'s own');
      isError(await exec(s, id, { command: '/work/main/build/proc/browserd' }), 400, 'bad_request');
      isError(await exec(s, id, { command: 'definitely-not-a-command' }), 400, 'bad_request');
      // ".." out of the system folders is not looked up on the host.
      isError(await exec(s, id, { command: '/usr/../bin/sh', args: ['-c', 'true'] }), 400, 'bad_request');
      isError(await exec(s, id, { command: '/usr/../work/main/build/proc/browserd' }), 400, 'bad_request');
      isError(await exec(s, id, { command: 'ls', cwd: '/nonexistent' }), 400, 'bad_request');
      // as_root is root of the session's user namespace: uid 0 inside, the session's uid outside.
      r = await exec(s, id, { command: 'id', args: ['-u'], as_root: true });
      eq(r.out, '0\n', 'as_root: uid 0 inside');
      const rootSp = await spawn(s, id, { command: 'sleep', args: ['4243'], as_root: true });
      const rootHost = await waitFor(() => pgrep('^sleep 4243')[0], 'the as_root sleep');
      eq(hostUid(rootHost), inside, 'as_root maps to the session uid on the host');
      r = await exec(s, id, { command: 'cat', args: ['/etc/shadow'], as_root: true });
      assert(r.json.exit_code !== 0, 'namespaced root cannot read the host\'s /etc/shadow');
      r = await exec(s, id, { command: 'id', args: ['-u'], as_user: 'kernel' });
      eq(r.out, `${inside}\n`, 'as_user kernel');
      isError(await exec(s, id, { command: 'id', as_user: 'root' }), 400, 'bad_request');
      isError(await exec(s, id, { command: 'id', as_user: '0' }), 400, 'bad_request');
      isError(await exec(s, id, { command: 'id', as_root: true, as_user: 'kernel' }), 400, 'bad_request');
      for (const p of [sp.process_id, rootSp.process_id]) {
        eq((await api(s, 'POST', `/browsers/${id}/process/${p}/kill`, { signal: 'KILL' })).status, 200, 'kill');
      }
      await waitFor(() => pgrep('^sleep 4242').length === 0 && pgrep('^sleep 4243').length === 0, 'the sleeps gone');
    }),
  },
  {
    name: 'issue 20 process tenancy: another session cannot see, signal or address a session\'s processes (other id, other org key)',
    timeout: 90000,
    fn: () => withServer({ env: { BROWSERD_ADMIN_TOKEN: 'proc-admin' } }, async (s) => {
      const a = await create(s);
      const b = await create(s);
      const sp = await spawn(s, a, { command: 'sleep', args: ['4244'] });
      const host = await waitFor(() => pgrep('^sleep 4244')[0], 'A\'s sleep');
      // Every process has a PID namespace of its own: ps lists itself (the
      // probe works) and nothing of another session.
      let r = await exec(s, b, { command: 'ps', args: ['-eo', 'args'] });
      assert(/^ps -eo args$/m.test(r.out), `ps sees itself: ${r.out}`);
      assert(!/sleep 4244/.test(r.out), `B does not see A's process: ${r.out}`);
      r = await exec(s, b, { command: 'sh', args: ['-c', 'cat /proc/[0-9]*/cmdline | tr "\\0" " "'] });
      assert(/cat/.test(r.out) && !/sleep 4244/.test(r.out), `nor through /proc: ${r.out}`);
      r = await exec(s, b, { command: 'kill', args: ['-9', String(host)] });
      assert(r.json.exit_code !== 0, `B cannot signal A's host pid: ${r.text}`);
      r = await exec(s, b, { command: 'kill', args: ['-9', String(sp.pid)] });
      eq(pgrep('^sleep 4244'), [host], 'A\'s sleep survives B\'s kill of its namespace pid');
      isError(await api(s, 'GET', `/browsers/${b}/process/${sp.process_id}/status`), 404, 'not_found');
      isError(await api(s, 'POST', `/browsers/${b}/process/${sp.process_id}/kill`, { signal: 'KILL' }), 404, 'not_found');
      // Another organization's key.
      const org = (await request(s.base, 'POST', '/admin/orgs', { key: 'proc-admin', body: { name: 'other' } })).json;
      const other = { base: s.base, key: (await request(s.base, 'POST', `/admin/orgs/${org.id}/api_keys`, { key: 'proc-admin', body: {} })).json.key };
      isError(await api(other, 'GET', `/browsers/${a}/process/${sp.process_id}/status`), 404, 'not_found');
      isError(await api(other, 'POST', `/browsers/${a}/process/exec`, { command: 'id' }), 404, 'not_found');
      isError(await api(other, 'POST', `/browsers/${a}/playwright/execute`, { code: 'return 1' }), 404, 'not_found');
      r = await api(s, 'GET', `/browsers/${a}/process/${sp.process_id}/status`);
      eq(r.json.state, 'running', 'A\'s process still runs');
      isError(await api(s, 'GET', `/browsers/${a}/process/not-a-uuid/status`), 400, 'bad_request');
      isError(await api(s, 'GET', `/browsers/${a}/process/00000000-0000-4000-8000-000000000000/status`), 404, 'not_found');
      // Ending the session ends its processes and forgets them.
      eq((await api(s, 'DELETE', `/browsers/${a}`)).status, 204, 'delete A');
      await waitFor(() => pgrep('^sleep 4244').length === 0, 'A\'s sleep gone with its session');
      const after = await api(s, 'GET', `/browsers/${a}/process/${sp.process_id}/status`);
      assert(after.status === 404 || after.status === 409, `an ended session's process: ${after.status}`);
    }),
  },
  {
    name: 'issue 20 process limits: exec timeout kills the whole tree (grandchild sleep gone, 500 not retried); a fork loop is held by the pids limit; a memory hog is OOM-killed in its cgroup; the server stays healthy',
    timeout: 150000,
    fn: () => withServer(async (s) => {
      const id = await create(s, { memory: '1GiB' });
      let r = await exec(s, id, { command: 'sh', args: ['-c', 'sleep 4245 & sleep 4246; echo never'], timeout_sec: 2 });
      isError(r, 500, 'internal');
      assert(/timed out/.test(r.json.message), r.text);
      eq(r.headers['x-should-retry'], 'false', 'exec 5xx is not retried');
      await waitFor(() => pgrep('^sleep 4245').length === 0 && pgrep('^sleep 4246').length === 0, 'the grandchild and child sleeps killed');
      isError(await exec(s, id, { command: 'id', timeout_sec: 601 }), 400, 'bad_request');
      // Output past 16 MiB per stream is dropped and said so.
      r = await exec(s, id, { command: 'sh', args: ['-c', 'head -c 17000000 /dev/zero; echo small >&2'] });
      eq([r.status, Buffer.from(r.json.stdout_b64, 'base64').length, r.json.stdout_truncated, r.err, r.json.stderr_truncated], [200, 16 * 1024 * 1024, true, 'small\n', undefined], 'stdout capped at 16 MiB');
      // Fork loop.
      const t0 = Date.now();
      r = await exec(s, id, { command: 'sh', args: ['-c', 'f() { f & f & wait; }; f'], timeout_sec: 5 });
      // Held by the pids limit (1024 tasks): the loop runs until its timeout,
      // or collapses by itself once its forks fail.
      if (r.status === 200) assert(/Cannot fork/.test(r.err), `a loop that ended by itself met the pids limit: ${r.err.slice(0, 200)}`);
      else isError(r, 500, 'internal');
      assert(Date.now() - t0 < 30000, 'the fork loop ended at its timeout');
      const ev = ['/sys/fs/cgroup/pids/browserd', '/sys/fs/cgroup/browserd'].map((d) => join(d, id, 'pids.events')).find((f) => existsSync(f));
      if (ev) assert(/^max [1-9]/m.test(readFileSync(ev, 'utf8')), `the session's pids limit was hit: ${readFileSync(ev, 'utf8')}`);
      eq((await api(s, 'GET', '/browsers')).status, 200, 'the server answers after the fork loop');
      r = await exec(s, id, { command: 'echo', args: ['alive'] });
      eq(r.out, 'alive\n', 'the session runs processes again after the fork loop');
      // Memory hog: tail keeps a line without end in memory.
      r = await exec(s, id, { command: 'sh', args: ['-c', 'head -c 4000000000 /dev/zero | tail; echo status=$?'], timeout_sec: 120 });
      eq(r.status, 200, r.text);
      assert(/status=137/.test(r.out), `the hog was killed (SIGKILL) at the session's memory limit: ${r.out} ${r.err}`);
      eq((await api(s, 'GET', '/browsers')).status, 200, 'the server answers after the hog');
      r = await exec(s, id, { command: 'echo', args: ['alive'] });
      eq(r.out, 'alive\n', 'the session still runs');
    }),
  },
  {
    name: 'issue 20 process spawn: stdin, stream with exit last and a replay for a late subscriber, status with CPU and memory, kill signals, the per-session cap, platform api_call events',
    timeout: 90000,
    fn: () => withServer(async (s) => {
      const id = await create(s, { telemetry: { browser: { platform: { enabled: true } } } });
      const busy = await spawn(s, id, { command: 'sh', args: ['-c', 'while :; do :; done'] });
      await waitFor(async () => (await api(s, 'GET', `/browsers/${id}/process/${busy.process_id}/status`)).json.cpu_pct > 5, 'a busy loop shows CPU use');
      eq((await api(s, 'POST', `/browsers/${id}/process/${busy.process_id}/kill`, { signal: 'KILL' })).json, { ok: true }, 'kill KILL');
      let sp = await spawn(s, id, { command: 'sh', args: ['-c', 'echo ready; echo err >&2; read x; echo got $x; exit 3'] });
      assert(/^[0-9a-f-]{36}$/.test(sp.process_id) && sp.pid > 0 && !Number.isNaN(Date.parse(sp.started_at)), JSON.stringify(sp));
      let st = await api(s, 'GET', `/browsers/${id}/process/${sp.process_id}/status`);
      eq(st.json.state, 'running', 'running');
      eq(st.json.exit_code, null, 'no exit code yet');
      assert(typeof st.json.cpu_pct === 'number' && st.json.mem_bytes > 0, st.text);
      isError(await api(s, 'POST', `/browsers/${id}/process/${sp.process_id}/stdin`, { data_b64: '!!!' }), 400, 'bad_request');
      const w = await api(s, 'POST', `/browsers/${id}/process/${sp.process_id}/stdin`, { data_b64: b64('hello\n') });
      eq(w.json, { written_bytes: 6 }, 'stdin');
      await waitFor(async () => (await api(s, 'GET', `/browsers/${id}/process/${sp.process_id}/status`)).json.state === 'exited', 'the exit');
      // Subscribed after the exit: everything is replayed, then the exit event.
      const ev = await stream(s, id, sp.process_id);
      const out = ev.filter((e) => e.stream === 'stdout').map((e) => e.text).join('');
      eq(out, 'ready\ngot hello\n', 'stdout replayed');
      eq(ev.filter((e) => e.stream === 'stderr').map((e) => e.text).join(''), 'err\n', 'stderr');
      eq(ev.at(-1), { event: 'exit', exit_code: 3 }, 'exit event last');
      st = await api(s, 'GET', `/browsers/${id}/process/${sp.process_id}/status`);
      eq([st.json.state, st.json.exit_code], ['exited', 3], 'exited status');
      isError(await api(s, 'POST', `/browsers/${id}/process/${sp.process_id}/kill`, { signal: 'TERM' }), 404, 'not_found');
      // A large output arrives in chunks of at most 4096 bytes, in order.
      sp = await spawn(s, id, { command: 'sh', args: ['-c', 'seq 1 20000'] });
      const big = await stream(s, id, sp.process_id);
      eq(big.filter((e) => e.stream).map((e) => e.text).join(''), Array.from({ length: 20000 }, (_, i) => `${i + 1}\n`).join(''), 'all of seq');
      // A late subscriber gets the last MiB kept, then the exit.
      sp = await spawn(s, id, { command: 'seq', args: ['1', '500000'] });
      await waitFor(async () => (await api(s, 'GET', `/browsers/${id}/process/${sp.process_id}/status`)).json.state === 'exited', 'seq done');
      const tailEv = await stream(s, id, sp.process_id);
      const tailOut = tailEv.filter((e) => e.stream).map((e) => e.text).join('');
      assert(tailOut.length <= 1024 * 1024 && tailOut.length > 512 * 1024 && tailOut.endsWith('\n499999\n500000\n'), `the replay keeps the newest MiB: ${tailOut.length} bytes`);
      eq(tailEv.at(-1), { event: 'exit', exit_code: 0 }, 'exit after the replay');
      // Signals; TERM right after spawn reaches the command.
      sp = await spawn(s, id, { command: 'sleep', args: ['4247'] });
      isError(await api(s, 'POST', `/browsers/${id}/process/${sp.process_id}/kill`, { signal: 'STOP' }), 400, 'bad_request');
      eq((await api(s, 'POST', `/browsers/${id}/process/${sp.process_id}/kill`, { signal: 'TERM' })).json, { ok: true }, 'kill TERM');
      const tev = await stream(s, id, sp.process_id);
      eq(tev.at(-1), { event: 'exit', exit_code: 143 }, 'killed by TERM: 128+15');
      isError(await api(s, 'POST', `/browsers/${id}/process/${sp.process_id}/resize`, { rows: 10, cols: 10 }), 400, 'bad_request');
      // At most 32 at once.
      const many = [];
      for (let i = 0; i < 32; i++) many.push((await spawn(s, id, { command: 'sleep', args: ['4248'] })).process_id);
      const over = await api(s, 'POST', `/browsers/${id}/process/spawn`, { command: 'sleep', args: ['4248'] });
      isError(over, 409, 'conflict');
      for (const p of many) await api(s, 'POST', `/browsers/${id}/process/${p}/kill`, { signal: 'KILL' });
      await waitFor(() => pgrep('^sleep 4248').length === 0, 'the 32 sleeps gone');
      // Every call is an api_call event of category platform.
      const calls = await waitFor(async () => {
        const r = await api(s, 'GET', `/browsers/${id}/telemetry/events?limit=100&category=platform`);
        const c = (r.json || []).map((e) => e.event).filter((e) => e.type === 'api_call');
        return c.some((e) => e.data.operation_id === 'process.stdin') && c;
      }, 'platform api_call events');
      assert(calls.every((e) => e.category === 'platform'), JSON.stringify(calls[0]));
      for (const op of ['process.spawn', 'process.status', 'process.stdout_stream', 'process.kill']) {
        assert(calls.some((e) => e.data.operation_id === op && typeof e.data.status === 'number'), `an event for ${op}`);
      }
      assert(calls.some((e) => e.data.operation_id === 'process.spawn' && e.data.status === 409), 'the refused spawn is reported with its status');
    }),
  },
  {
    name: 'issue 20 process PTY: spawn with rows/cols, output through the stream, resize seen by the program',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const id = await create(s);
      const sp = await spawn(s, id, { command: 'sh', args: ['-c', 'stty size; test -t 0 && echo tty; read x; stty size'], allocate_tty: true, rows: 24, cols: 80 });
      await waitFor(async () => {
        const st = await api(s, 'GET', `/browsers/${id}/process/${sp.process_id}/status`);
        return st.json.state === 'running';
      }, 'running');
      // The first size is printed before the resize: wait for it in the replay.
      let first = '';
      await waitFor(async () => {
        const r = await api(s, 'POST', `/browsers/${id}/process/${sp.process_id}/resize`, { rows: 40, cols: 100 });
        eq(r.json, { ok: true }, 'resize');
        return true;
      }, 'resize');
      isError(await api(s, 'POST', `/browsers/${id}/process/${sp.process_id}/resize`, { rows: 0, cols: 10 }), 400, 'bad_request');
      isError(await api(s, 'POST', `/browsers/${id}/process/${sp.process_id}/resize`, { rows: 70000, cols: 10 }), 400, 'bad_request');
      eq((await api(s, 'POST', `/browsers/${id}/process/${sp.process_id}/stdin`, { data_b64: b64('\r') })).status, 200, 'stdin');
      const ev = await stream(s, id, sp.process_id);
      first = ev.filter((e) => e.stream).map((e) => e.text).join('');
      assert(/tty/.test(first), `stdin is a terminal: ${JSON.stringify(first)}`);
      assert(/40 100/.test(first), `the resized size: ${JSON.stringify(first)}`);
      assert(/(24 80|40 100)[\s\S]*40 100/.test(first), `two sizes printed: ${JSON.stringify(first)}`);
      eq(ev.at(-1), { event: 'exit', exit_code: 0 }, 'exit');
    }),
  },
  {
    name: 'issue 20 playwright.execute: a value from a loopback page, a thrown exception with its stack, an endless loop stopped at timeout_sec (runner killed), TypeScript, no other session\'s DevTools',
    timeout: 150000,
    fn: async () => {
      const site = await startSite((rq, rs) => { rs.writeHead(200, { 'content-type': 'text/html' }); rs.end('<title>loopback title</title><p>hi'); });
      try {
        await withServer(async (s) => {
          const a = await create(s, { telemetry: { enabled: true } });
          const b = await create(s);
          const run = (id, body) => api(s, 'POST', `/browsers/${id}/playwright/execute`, body);
          let r = await run(a, { code: `await page.goto(${JSON.stringify(site.url)}); console.log('from code'); return await page.title();` });
          eq(r.status, 200, r.text);
          eq([r.json.success, r.json.result], [true, 'loopback title'], r.text);
          assert(/from code/.test(r.json.stdout || ''), 'console output in stdout');
          r = await run(a, { code: 'const n: number = 41; return { n: n + 1, list: [1, "x"] };' });
          eq(r.json, { success: true, result: { n: 42, list: [1, 'x'] } }, 'TypeScript types are stripped');
          r = await run(a, { code: 'throw new Error("boom from user code")' });
          eq([r.status, r.json.success], [200, false], r.text);
          assert(/boom from user code/.test(r.json.error) && /Error: boom from user code\n\s+at /.test(r.json.stderr), `error and stack: ${r.text}`);
          r = await run(a, { code: 'return (' });
          eq(r.json.success, false, 'syntax error');
          assert(/^TypeScript transform error: /.test(r.json.error), r.json.error);
          const t0 = Date.now();
          r = await run(a, { code: 'while (true) {}', timeout_sec: 2 });
          eq(r.json, { success: false, error: 'Execution timed out after 2000ms' }, 'timeout');
          assert(Date.now() - t0 < 15000, 'answered at the timeout');
          await waitFor(() => pgrep('runtime-js/runner.mjs').length === 0, 'the runner killed');
          // B's DevTools is on B's loopback, not A's.
          const bp = devtoolsPort(s, b);
          const ap = devtoolsPort(s, a);
          r = await run(a, { code: `try { const r = await fetch('http://127.0.0.1:${bp.port}/json/version'); return (await r.json()).webSocketDebuggerUrl; } catch (e) { return 'refused: ' + e.message; }` });
          eq(r.json.success, true, r.text);
          assert(!String(r.json.result).includes(bp.browserId), `A's code cannot reach B's DevTools: ${r.json.result}`);
          if (ap.port !== bp.port) assert(/^refused/.test(r.json.result), `nothing listens there in A's namespace: ${r.json.result}`);
          // The runner is in the sandbox: the server's files are not there, the session's are.
          r = await run(a, { code: `const fs = await import('node:fs'); const probe = (p) => { try { return fs.readFileSync(p, 'utf8'); } catch (e) { return 'denied ' + e.code; } }; fs.writeFileSync('/tmp/pw-own.txt', 'own'); return [probe(${JSON.stringify(join(s.dir, 'bootstrap-api-key'))}), probe('/tmp/pw-own.txt'), probe('/proc/1/root/etc/hostname'), process.getuid()];` });
          eq(r.json.success, true, r.text);
          eq(r.json.result.slice(0, 2), ['denied ENOENT', 'own'], 'the runner sees the session\'s files only');
          assert(!String(r.json.result[2]).includes(readFileSync('/etc/hostname', 'utf8').trim()) || readFileSync('/etc/hostname', 'utf8').trim() === 'browserd', `not the host's root: ${r.json.result[2]}`);
          assert(r.json.result[3] >= 1100000, `the runner runs as the session's uid: ${r.json.result[3]}`);
          isError(await run(a, { code: '' }), 400, 'bad_request');
          isError(await run(a, { code: 'return 1', timeout_sec: 301 }), 400, 'bad_request');
          r = await run(b, { code: 'return page.url()' });
          eq(r.json.success, true, `B runs its own code: ${r.text}`);
          const ev = await api(s, 'GET', `/browsers/${a}/telemetry/events?limit=100&category=control`);
          assert(ev.json.map((e) => e.event).some((e) => e.type === 'api_call' && e.data.operation_id === 'playwright.execute' && e.data.status === 200),
            `playwright.execute is a control api_call event: ${ev.text.slice(0, 500)}`);
        }, { args: site.allow });
      } finally { site.close(); }
    },
  },
  {
    name: 'issue 20 process display and stop: a headful session\'s process gets DISPLAY=:0 and reaches the X server; stopping the server answers a running exec and playwright.execute and exits cleanly',
    timeout: 90000,
    fn: async () => {
      const s = await startServer();
      try {
        const id = await create(s, { headless: false });
        let r = await exec(s, id, { command: 'sh', args: ['-c', 'echo $DISPLAY; ls -a /tmp/.X11-unix 2>&1; cat /proc/net/unix | grep -c X11'] });
        assert(/^:0\n/.test(r.out), `DISPLAY: ${r.out}`);
        assert(/^[1-9]/m.test(r.out.split('\n').at(-2)), `the X server's socket is in the namespace: ${r.out}`);
        const hl = await create(s);
        r = await exec(s, hl, { command: 'sh', args: ['-c', 'echo "[$DISPLAY]"'] });
        eq(r.out, '[]\n', 'no DISPLAY in a headless session');
        const pending = [
          exec(s, id, { command: 'sleep', args: ['4249'] }),
          api(s, 'POST', `/browsers/${id}/playwright/execute`, { code: 'await new Promise((r) => setTimeout(r, 60000))' }),
        ];
        await waitFor(() => pgrep('^sleep 4249').length && pgrep('runtime-js/runner.mjs').length, 'both running');
        eq(await s.stop(), 0, 'the server exits cleanly with parked requests');
        const [e, p] = await Promise.all(pending.map((x) => x.catch((err) => ({ error: err.message }))));
        eq(e.status, 200, `the exec was answered: ${JSON.stringify(e.json || e)}`);
        eq(p.status, 200, `playwright.execute was answered: ${JSON.stringify(p.json || p)}`);
        eq(pgrep('^sleep 4249'), [], 'nothing left running');
      } finally { await s.stop(); s.cleanup(); }
    },
  },
  {
    name: 'issue 20 process without a sandbox: a session of an unsandboxed server refuses exec, spawn and playwright.execute with 503 sandbox_required (nothing runs as the server\'s user)',
    timeout: 60000,
    fn: async () => {
      const s = await startServer({ env: { BROWSERD_SANDBOX: 'off' } });
      try {
        const id = await create(s);
        for (const [path, body] of [['process/exec', { command: 'id' }], ['process/spawn', { command: 'id' }], ['playwright/execute', { code: 'return 1' }]]) {
          const r = await api(s, 'POST', `/browsers/${id}/${path}`, body);
          isError(r, 503, 'sandbox_required');
          assert(/docs\/sandbox\.md/.test(r.json.message), r.text);
          eq(r.headers['x-should-retry'], 'false', `${path}: not retried`);
        }
      } finally { await s.stop(); s.cleanup(); }
    },
  },
  {
    name: 'issue 20 process activity: a running process keeps its session from idling out; once it ends, the idle timeout applies again',
    timeout: 90000,
    // A shorter idle timeout than the API's 10 s minimum
    // (BROWSERD_MIN_SESSION_TIMEOUT_SECONDS): the same rule, a third of the wait.
    fn: () => withServer({ env: { BROWSERD_MIN_SESSION_TIMEOUT_SECONDS: '4' } }, async (s) => {
      // The idle session is made after the last call to the busy one: without
      // its process, the busy session would end first.
      const busy = await create(s, { timeout_seconds: 4 });
      const sp = await spawn(s, busy, { command: 'sleep', args: ['4250'] });
      const idle = await create(s, { timeout_seconds: 4 });
      const ended = async (id) => (await api(s, 'GET', `/browsers/${id}?include_deleted=true`)).json.deleted_at;
      await waitFor(() => ended(idle), 'the idle session ended by its timeout', 30000, 250);
      assert(!(await ended(busy)), 'the session with a running process is still live');
      assert(pgrep('^sleep 4250').length === 1, 'its process runs');
      eq((await api(s, 'POST', `/browsers/${busy}/process/${sp.process_id}/kill`, { signal: 'KILL' })).status, 200, 'kill');
      await waitFor(() => ended(busy), 'the session idles out once its process ended', 30000, 250);
    }),
  },
];
