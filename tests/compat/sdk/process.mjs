// browsers.process.* and browsers.playwright.execute through the official
// client (SESSION_API.md sections 3 and 5; docs/process.md): every method's
// round trip, errors as the SDK's classes, and the retry trap: an exec that
// times out is one request (x-should-retry: false), never run twice.
export function register(t) {
  const { sdkTest, withServer, rejects, accessLines, assert, eq, request, startSite, errors } = t;
  const { BadRequestError, ConflictError, InternalServerError, NotFoundError } = errors;
  const ADMIN = 'compat-admin-token';
  const text = (b) => Buffer.from(b || '', 'base64').toString('utf8');

  async function otherClient(s) {
    const o = await request(s.base, 'POST', '/admin/orgs', { key: ADMIN, body: { name: 'process-other' } });
    const k = await request(s.base, 'POST', `/admin/orgs/${o.json.id}/api_keys`, { key: ADMIN, body: { name: 'k' } });
    return s.clientWithKey(k.json.key);
  }

  sdkTest('browsers.process.exec', 'exec -> {exit_code, stdout_b64, stderr_b64, duration_ms} as the session user; a file the browser downloaded is read with cat; a timeout is one request (InternalServerError, not retried); unknown command -> BadRequestError; another org -> NotFoundError', async () => {
    const site = await startSite((rq, rs) => {
      if (rq.url === '/file.txt') { rs.writeHead(200, { 'content-type': 'application/octet-stream', 'content-disposition': 'attachment; filename="report.txt"' }); rs.end('downloaded-report\n'); return; }
      rs.writeHead(200, { 'content-type': 'text/html' }); rs.end('<a id=d href="/file.txt" download>get</a>');
    });
    try {
      await withServer(async (s, client) => {
        const b = await client.browsers.create({ headless: true });
        const p = client.browsers.process;
        let r = await p.exec(b.session_id, { command: 'sh', args: ['-c', 'id -u; echo oops >&2; exit 7'] });
        eq(r.exit_code, 7, 'exit_code');
        assert(Number(text(r.stdout_b64)) >= 1100000, `the session's uid: ${text(r.stdout_b64)}`);
        eq(text(r.stderr_b64), 'oops\n', 'stderr');
        assert(typeof r.duration_ms === 'number', 'duration_ms');
        // A download by the browser (Playwright, connected over CDP, has the
        // browser save it in the session's /tmp), read back with exec cat.
        const pw = await client.browsers.playwright.execute(b.session_id, {
          code: `await page.goto(${JSON.stringify(site.url)}); const [d] = await Promise.all([page.waitForEvent('download'), page.click('#d')]); return [d.suggestedFilename(), await d.path()];`,
        });
        eq(pw.success, true, JSON.stringify(pw));
        eq(pw.result[0], 'report.txt', 'suggested name');
        r = await p.exec(b.session_id, { command: 'cat', args: [pw.result[1]] });
        const found = text(r.stdout_b64);
        eq(found, 'downloaded-report\n', 'exec cat reads the downloaded file');
        await rejects(() => p.exec(b.session_id, { command: 'sh', args: ['-c', 'sleep 30'], timeout_sec: 1 }), InternalServerError, 500, 'exec timeout');
        eq(await accessLines(s, `POST /browsers/${b.session_id}/process/exec 500`), 1, 'the timed-out exec was sent once');
        await rejects(() => p.exec(b.session_id, { command: 'no-such-command-here' }), BadRequestError, 400, 'unknown command');
        await rejects(() => p.exec(b.session_id, { command: 'id', as_user: 'root' }), BadRequestError, 400, 'as_user root');
        const other = await otherClient(s);
        await rejects(() => other.browsers.process.exec(b.session_id, { command: 'id' }), NotFoundError, 404, 'another org');
      }, { args: site.allow });
    } finally { site.close(); }
  }, 120000);

  sdkTest('browsers.process.spawn', 'spawn -> {process_id, pid, started_at}; stdin -> {written_bytes}; stdoutStream -> chunks then {event: exit}; status -> exited with its code; non-UUID -> BadRequestError, unknown -> NotFoundError', (ctx) =>
    withServer(async (s, client) => {
      const b = await client.browsers.create({ headless: true });
      const p = client.browsers.process;
      const sp = await p.spawn(b.session_id, { command: 'sh', args: ['-c', 'read x; echo "got $x"; echo e >&2; exit 4'] });
      assert(/^[0-9a-f-]{36}$/.test(sp.process_id) && typeof sp.pid === 'number' && sp.started_at, JSON.stringify(sp));
      const st = await p.status(sp.process_id, { id: b.session_id });
      eq(st.state, 'running', 'running');
      assert(typeof st.cpu_pct === 'number', 'cpu_pct');
      const w = await p.stdin(sp.process_id, { id: b.session_id, data_b64: Buffer.from('abc\n').toString('base64') });
      eq(w.written_bytes, 4, 'written_bytes');
      const stream = await p.stdoutStream(sp.process_id, { id: b.session_id });
      const events = [];
      for await (const ev of stream) events.push(ev);
      eq(events.filter((e) => e.stream === 'stdout').map((e) => text(e.data_b64)).join(''), 'got abc\n', 'stdout events');
      eq(events.filter((e) => e.stream === 'stderr').map((e) => text(e.data_b64)).join(''), 'e\n', 'stderr events');
      eq(events.at(-1), { event: 'exit', exit_code: 4 }, 'exit event');
      const done = await p.status(sp.process_id, { id: b.session_id });
      eq([done.state, done.exit_code], ['exited', 4], 'exited');
      await rejects(() => p.status('not-a-uuid', { id: b.session_id }), BadRequestError, 400, 'non-UUID');
      await rejects(() => p.status('00000000-0000-4000-8000-000000000000', { id: b.session_id }), NotFoundError, 404, 'unknown process');
      await rejects(() => p.stdin(sp.process_id, { id: b.session_id, data_b64: '%%%' }), BadRequestError, 400, 'invalid base64');
    }), 60000, ['browsers.process.status', 'browsers.process.stdin', 'browsers.process.stdoutStream']);

  sdkTest('browsers.process.kill', 'kill TERM -> {ok: true}, the stream ends with exit 143; again -> NotFoundError; resize a PTY -> {ok: true} and the program sees it; resize without a PTY -> BadRequestError; another org cannot kill', (ctx) =>
    withServer(async (s, client) => {
      const b = await client.browsers.create({ headless: true });
      const p = client.browsers.process;
      const sp = await p.spawn(b.session_id, { command: 'sleep', args: ['300'] });
      const other = await otherClient(s);
      await rejects(() => other.browsers.process.kill(sp.process_id, { id: b.session_id, signal: 'KILL' }), NotFoundError, 404, 'another org');
      await rejects(() => p.resize(sp.process_id, { id: b.session_id, rows: 10, cols: 10 }), BadRequestError, 400, 'not PTY-backed');
      eq(await p.kill(sp.process_id, { id: b.session_id, signal: 'TERM' }), { ok: true }, 'kill');
      const events = [];
      for await (const ev of await p.stdoutStream(sp.process_id, { id: b.session_id })) events.push(ev);
      eq(events.at(-1), { event: 'exit', exit_code: 143 }, 'exit after TERM');
      await rejects(() => p.kill(sp.process_id, { id: b.session_id, signal: 'TERM' }), NotFoundError, 404, 'kill an exited process');
      const tty = await p.spawn(b.session_id, { command: 'sh', args: ['-c', 'read x; stty size'], allocate_tty: true, rows: 24, cols: 80 });
      eq(await p.resize(tty.process_id, { id: b.session_id, rows: 33, cols: 111 }), { ok: true }, 'resize');
      await p.stdin(tty.process_id, { id: b.session_id, data_b64: Buffer.from('\r').toString('base64') });
      const out = [];
      for await (const ev of await p.stdoutStream(tty.process_id, { id: b.session_id })) if (ev.data_b64) out.push(text(ev.data_b64));
      assert(/33 111/.test(out.join('')), `the program sees the new size: ${JSON.stringify(out.join(''))}`);
    }), 60000, ['browsers.process.resize']);

  sdkTest('browsers.playwright.execute', 'execute -> {success: true, result}; a thrown error -> success false with the stack in stderr; timeout_sec stops an endless loop (200, success false); empty code -> BadRequestError', (ctx) =>
    withServer(async (s, client) => {
      const b = await client.browsers.create({ headless: true });
      const pw = client.browsers.playwright;
      let r = await pw.execute(b.session_id, { code: 'await page.setContent("<title>sdk title</title>"); return await page.title();' });
      eq([r.success, r.result], [true, 'sdk title'], JSON.stringify(r));
      r = await pw.execute(b.session_id, { code: 'throw new TypeError("bad thing")' });
      eq(r.success, false, 'failure');
      assert(/bad thing/.test(r.error) && /TypeError: bad thing/.test(r.stderr), JSON.stringify(r));
      r = await pw.execute(b.session_id, { code: 'for (;;) {}', timeout_sec: 1 });
      eq(r, { success: false, error: 'Execution timed out after 1000ms' }, 'timeout');
      await rejects(() => pw.execute(b.session_id, { code: '' }), BadRequestError, 400, 'empty code');
    }), 90000);
}
