// Issue 34: the Browser REPL, POST /browsers/{id}/repl (KERNEL_API_NEWER.md
// 1.4, docs/repl.md), with real headless Chromium: one persistent Node
// process per session inside the session's sandbox.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { withServer, startSite, createSession, request, assert, eq, isError } from '../blackbox/lib.mjs';

const repl = (s, id, body, key = s.key) => request(s.base, 'POST', `/browsers/${id}/repl`, { key, body });

// The text of one channel of an answer's content.
const text = (r, channel) => (r.json.content || []).filter((c) => c.type === 'text' && c.channel === channel).map((c) => c.text).join('');

async function ok(s, id, body) {
  const r = await repl(s, id, body);
  eq(r.status, 200, `repl ${JSON.stringify(body).slice(0, 80)}: ${r.text.slice(0, 400)}`);
  return r;
}

const sandboxed = (s) => assert(/sandbox: on/.test(s.log), `the server runs sessions sandboxed:\n${s.log}`);

export const tests = [
  {
    name: 'issue 34 REPL: top-level declarations persist across calls, output only through repl.write and the console, an exception or syntax error is success:false with the state kept; gotoUrl drives a loopback page (pageInfo title; click, typeText, pressKey, accessibilitySnapshot, tabs, repl.help) and repl.emitImage returns a screenshot',
    timeout: 90000,
    fn: async () => {
      const site = await startSite((req, res) => {
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end('<!doctype html><title>repl-page-34</title><p id=p>hello</p><input id=i>'
          + '<button id=b onclick="document.getElementById(\'p\').textContent=\'clicked:\'+document.getElementById(\'i\').value">go</button>');
      });
      try {
        await withServer({ args: site.allow }, async (s) => {
          sandboxed(s);
          const id = await createSession(s);
          let r = await ok(s, id, { code: 'const answer = 41; let list = [1]; function twice(x) { return 2 * x; } class K { v() { return 7; } }\n"ignored value"' });
          eq(r.json.success, true, r.text);
          assert(/^c[a-z0-9]{24}$/.test(r.json.repl_id), `a CUID2-like repl_id: ${r.json.repl_id}`);
          assert(!r.json.content, `an expression's value is not output: ${r.text}`);
          const first = r.json.repl_id;
          r = await ok(s, id, { code: 'repl.write(String(answer + 1)); console.log("log", twice(list.length)); console.error("err", new K().v())' });
          eq(r.json.success, true, r.text);
          eq(r.json.repl_id, first, 'the same REPL');
          eq(text(r, 'write'), '42', 'repl.write');
          eq(text(r, 'stdout'), 'log 2\n', 'console.log');
          eq(text(r, 'stderr'), 'err 7\n', 'console.error');
          assert(typeof r.json.duration_ms === 'number', 'duration_ms');
          r = await ok(s, id, { code: 'list.push(2); throw new TypeError("bad thing")' });
          eq(r.json.success, false, r.text);
          assert(/bad thing/.test(r.json.error) && /TypeError/.test(r.json.stack), `error and stack: ${r.text}`);
          assert(!r.json.repl_terminated, 'an exception does not end the REPL');
          r = await ok(s, id, { code: 'const broken = (' });
          eq(r.json.success, false, r.text);
          assert(/SyntaxError/.test(r.json.error), `a syntax error: ${r.text}`);
          r = await ok(s, id, { code: 'const { chromium } = await import("playwright-core"); repl.write(`${list.length} ${typeof chromium.connectOverCDP} ${process.env.CDP_ENDPOINT.startsWith("ws://127.0.0.1:")}`)' });
          eq(r.json.repl_id, first, 'still the same REPL');
          eq(text(r, 'write'), '2 function true', `state kept, playwright-core importable, CDP_ENDPOINT: ${r.text}`);
          r = await ok(s, id, { code: `const info = await gotoUrl(${JSON.stringify(`${site.url}/p`)}); repl.write((await pageInfo()).title, await js("document.getElementById('p').textContent"))` });
          eq(text(r, 'write'), 'repl-page-34 hello', `the page driven: ${r.text}`);
          r = await ok(s, id, { code: `await click('#i'); await typeText('abc'); await pressKey('Backspace'); await click('#b');
            const ax = await accessibilitySnapshot();
            const t0 = await currentTab(); const t1 = await newTab(${JSON.stringify(`${site.url}/second`)}); const tabs = await listTabs(); await switchTab(t0.id);
            repl.write([await js("document.getElementById('p').textContent"), ax.some((n) => n.role === 'button' && n.name === 'go' && n.backendNodeId > 0), tabs.length, t1.id !== t0.id, (await currentTab()).id === t0.id].join(','));
            repl.help('gotoUrl')` });
          eq(r.json.success, true, r.text);
          assert(text(r, 'write').startsWith('clicked:ab,true,2,true,truegotoUrl: '), `click, typeText, pressKey, the accessibility tree, tabs (then help): ${r.text}`);
          assert(/gotoUrl\(url/.test(text(r, 'write')), `repl.help: ${r.text}`);
          r = await ok(s, id, { code: 'const shot = await captureScreenshot("/tmp/shot.png"); repl.emitImage({ path: "/tmp/shot.png" }); repl.emitImage(shot)' });
          eq(r.json.success, true, r.text);
          const images = r.json.content.filter((c) => c.type === 'image');
          eq(images.length, 2, 'two images');
          for (const im of images) {
            eq(im.mime_type, 'image/png', 'a PNG');
            assert(Buffer.from(im.data_b64, 'base64').subarray(1, 4).toString() === 'PNG', 'PNG bytes');
          }
          r = await ok(s, id, { code: 'console.log("nul\\u0000 lone\\ud800 é")' });
          eq(r.json.success, true, `a NUL and a lone surrogate in output: ${r.text}`);
          eq(text(r, 'stdout'), 'nul\u0000 lone\ufffd é\n', 'kept (the surrogate replaced)');
          r = await ok(s, id, { code: 'repl.write("x".repeat(300 * 1024))' });
          eq(r.json.content_truncated, true, 'text past 256 KiB is flagged');
          eq(text(r, 'write').length, 256 * 1024, 'and cut at 256 KiB');
        });
      } finally { site.close(); }
    },
  },
  {
    name: 'issue 34 REPL: a timeout kills the process (repl_terminated, next call a new repl_id, state gone), reset:true starts afresh; bad fields are 400 naming them, a body over 8 MiB 413, a second call while one runs 409; also on the session base_url with its token; deleting the session answers a running call',
    timeout: 90000,
    fn: () => withServer({}, async (s) => {
      sandboxed(s);
      const created = await request(s.base, 'POST', '/browsers', { key: s.key, body: { headless: true } });
      eq(created.status, 200, created.text);
      const id = created.json.session_id;
      // Also on the session's base_url with its token (no API key).
      const jwt = new URL(created.json.cdp_ws_url).searchParams.get('jwt');
      let viaUrl = await request(s.base, 'POST', `${new URL(created.json.base_url).pathname}/repl?jwt=${encodeURIComponent(jwt)}`, { body: { code: 'repl.write("via base_url")' } });
      eq(viaUrl.status, 200, `base_url: ${viaUrl.text}`);
      eq(viaUrl.json.content[0].text, 'via base_url', viaUrl.text);
      viaUrl = await request(s.base, 'POST', `${new URL(created.json.base_url).pathname}/repl`, { body: { code: '1' } });
      eq(viaUrl.status, 401, `base_url without the token: ${viaUrl.text}`);
      for (const [body, field] of [[{}, 'code'], [{ code: '' }, 'code'], [{ code: 1 }, 'code'], [{ code: 'x', timeout_sec: 301 }, 'timeout_sec'],
        [{ code: 'x', timeout_sec: 0 }, 'timeout_sec'], [{ code: 'x', reset: 'yes' }, 'reset']]) {
        const r = await repl(s, id, body);
        isError(r, 400);
        assert(r.text.includes(field), `400 names ${field}: ${r.text}`);
      }
      let r = await request(s.base, 'POST', `/browsers/${id}/repl`, { key: s.key, raw: JSON.stringify({ code: `//${'a'.repeat(8 * 1024 * 1024)}` }), headers: { 'content-type': 'application/json' } });
      eq(r.status, 413, `a body over 8 MiB: ${r.text.slice(0, 200)}`);
      r = await ok(s, id, { code: 'var kept = 5' });
      const first = r.json.repl_id;
      // A second call is refused while the first runs (for 5 s): asked
      // until one is refused or the first has ended. The first may itself
      // lose the race to a probe (then it is the one refused): again.
      let busy, slow;
      for (let round = 0; round < 5 && !busy; round++) {
        let settled = false;
        slow = repl(s, id, { code: 'for (;;) {}', timeout_sec: 5 }).finally(() => { settled = true; });
        while (!busy && !settled) {
          const b = await repl(s, id, { code: 'repl.write(1)' });
          if (b.status === 409) busy = b;
        }
        if (!busy) eq((await slow).status, 409, 'the first call ended without a refused probe only when it was refused itself');
      }
      assert(busy, 'a concurrent call is 409');
      assert(/one at a time/.test(busy.text), busy.text);
      r = await slow;
      eq(r.status, 200, r.text);
      eq(r.json.success, false, r.text);
      eq(r.json.repl_terminated, true, `a timeout ends the REPL: ${r.text}`);
      assert(/timed out/i.test(r.json.error), r.json.error);
      r = await ok(s, id, { code: 'repl.write(typeof kept)' });
      assert(r.json.repl_id !== first && /^c[a-z0-9]{24}$/.test(r.json.repl_id), 'a new REPL after the timeout');
      eq(text(r, 'write'), 'undefined', 'with fresh state');
      const second = r.json.repl_id;
      r = await ok(s, id, { code: 'var again = 1' });
      r = await ok(s, id, { code: '', reset: true });
      eq(r.json.success, true, r.text);
      assert(r.json.repl_id !== second, 'reset: a new repl_id');
      r = await ok(s, id, { code: 'repl.write(typeof again)', reset: false });
      eq(text(r, 'write'), 'undefined', 'reset dropped the state');
      r = await ok(s, id, { code: 'process.exit(3)' });
      eq(r.json.repl_terminated, true, `a crash ends the REPL: ${r.text}`);
      assert(/exited \(status 3\)/.test(r.json.error), r.json.error);
      r = await ok(s, id, { code: 'process.kill(process.pid, "SIGKILL")' });
      eq(r.json.repl_terminated, true, `a killed REPL (as by the out-of-memory killer): ${r.text}`);
      assert(/killed/.test(r.json.error), r.json.error);
      r = await ok(s, id, { code: 'repl.write("alive")' });
      eq(text(r, 'write'), 'alive', 'and the next call works');
      isError(await repl(s, 'nosuchsession', { code: '1' }), 404);
      // Deleting the session ends a running execution (its timeout is 300 s,
      // past this test's own): the call is answered, the REPL terminated.
      const running = repl(s, id, { code: 'repl.write("started"); for (;;) {}', timeout_sec: 300 });
      await new Promise((res) => setTimeout(res, 500));
      const del = await request(s.base, 'DELETE', `/browsers/${id}`, { key: s.key });
      assert(del.status === 200 || del.status === 204, `delete: ${del.status}`);
      r = await running;
      assert(r.status === 200 ? r.json.repl_terminated === true : r.status === 409 || r.status === 404, `the running call is answered: ${r.status} ${r.text}`);
      isError(await repl(s, id, { code: '1' }), 409);
    }),
  },
  {
    name: 'issue 34 REPL isolation: runs as the session user in its sandbox; cannot read the server\'s data folder or environment, cannot reach the server\'s API port; reaches its own /home and DevTools',
    timeout: 90000,
    fn: () => withServer({ env: { BROWSERD_REPL_CANARY: 'server-secret-canary' } }, async (s) => {
      sandboxed(s);
      const id = await createSession(s);
      const keyPath = join(s.dir, 'bootstrap-api-key');
      assert(readFileSync(keyPath, 'utf8').length > 0, 'the probe file exists on the host');
      const code = `
        const fs = await import('node:fs');
        const net = await import('node:net');
        const out = {};
        fs.writeFileSync('/home/kernel/mine.txt', 'mine');
        out.home = fs.readFileSync('/home/kernel/mine.txt', 'utf8');
        try { out.key = fs.readFileSync(${JSON.stringify(keyPath)}, 'utf8'); } catch (e) { out.key = e.code; }
        try { out.data = fs.readdirSync(${JSON.stringify(s.dir)}).length; } catch (e) { out.data = e.code; }
        out.env = JSON.stringify(process.env);
        out.uid = process.getuid();
        const reach = (port) => new Promise((res) => { const c = net.connect(port, '127.0.0.1'); c.on('connect', () => { c.destroy(); res('connected'); }); c.on('error', (e) => res(e.code)); setTimeout(() => { c.destroy(); res('timeout'); }, 3000); });
        out.api = await reach(${s.port});
        out.own = (await pageInfo()).url;
        repl.write(JSON.stringify(out));`;
      const r = await ok(s, id, { code });
      eq(r.json.success, true, r.text);
      const out = JSON.parse(text(r, 'write'));
      eq(out.home, 'mine', 'its own home is writable');
      assert(out.key === 'ENOENT' || out.key === 'EACCES', `the server's key is not readable: ${out.key}`);
      assert(typeof out.data === 'string', `the data folder is not listable: ${out.data}`);
      assert(!/server-secret-canary|BROWSERD_/.test(out.env), `no server variable: ${out.env}`);
      assert(out.uid >= 1100000, `the session's own uid: ${out.uid}`);
      assert(out.api !== 'connected', `the API port is out of reach: ${out.api}`);
      assert(typeof out.own === 'string', 'its own DevTools answers');
      assert(!r.text.includes(s.dir), 'no host path in the answer');
    }),
  },
];
