// Issue 34 (the rest of the Browser REPL, docs/repl.md): the REPL's own body
// cap, httpGet through the session's egress, every documented global, and
// the per-organization cap on executions running at once.
import { withServer, startSite, createSession, deleteSession, request, assert, eq, isError, newOrg, waitFor } from '../blackbox/lib.mjs';

const repl = (s, id, body, key = s.key) => request(s.base, 'POST', `/browsers/${id}/repl`, { key, body });
const rawRepl = (s, path, raw, key = s.key) => request(s.base, 'POST', path, { key, raw, headers: { 'content-type': 'application/json' } });

// The text of one channel of an answer's content.
const text = (r, channel) => (r.json.content || []).filter((c) => c.type === 'text' && c.channel === channel).map((c) => c.text).join('');

async function ok(s, id, body, key = s.key) {
  const r = await repl(s, id, body, key);
  eq(r.status, 200, `repl ${JSON.stringify(body).slice(0, 80)}: ${r.text.slice(0, 400)}`);
  return r;
}

// Every global KERNEL_API_NEWER.md 1.4 lists for the REPL (on globalThis and
// on the frozen browser object), webmcp's two included.
const DOCUMENTED = ['cdp', 'drainEvents', 'waitForEvent', 'gotoUrl', 'pageInfo', 'accessibilitySnapshot', 'click',
  'typeText', 'fillInput', 'pressKey', 'scroll', 'captureScreenshot', 'listTabs', 'currentTab', 'switchTab', 'newTab',
  'closeTab', 'ensureRealTab', 'iframeTarget', 'waitMs', 'waitForLoad', 'waitForElement', 'waitForNetworkIdle', 'js',
  'uploadFile', 'httpGet'];

const MiB = 1024 * 1024;

export const tests = [
  {
    name: 'issue 34.1 REPL body cap: POST /browsers/{id}/repl takes a body up to 8 MiB (7 MiB of code in a string literal runs, also on the base_url), 9 MiB is 413 naming the 8 MiB cap; every other JSON route keeps 6 MiB (7 MiB to POST /browsers is 413 naming 6 MiB)',
    timeout: 90000,
    fn: () => withServer({}, async (s) => {
      const created = await request(s.base, 'POST', '/browsers', { key: s.key, body: { headless: true } });
      eq(created.status, 200, created.text);
      const id = created.json.session_id;
      const code = `var big = "${'a'.repeat(7 * MiB)}"; repl.write(String(big.length))`;
      let r = await rawRepl(s, `/browsers/${id}/repl`, JSON.stringify({ code }));
      eq(r.status, 200, `7 MiB of code: ${r.text.slice(0, 300)}`);
      eq(r.json.success, true, r.text.slice(0, 300));
      eq(text(r, 'write'), String(7 * MiB), 'the code ran with its literal whole');
      const jwt = new URL(created.json.cdp_ws_url).searchParams.get('jwt');
      r = await rawRepl(s, `${new URL(created.json.base_url).pathname}/repl?jwt=${encodeURIComponent(jwt)}`, JSON.stringify({ code }), null);
      eq(r.status, 200, `7 MiB on the base_url: ${r.text.slice(0, 300)}`);
      eq(text(r, 'write'), String(7 * MiB), 'on the base_url too');
      r = await rawRepl(s, `/browsers/${id}/repl`, JSON.stringify({ code: `//${'a'.repeat(9 * MiB)}` }));
      eq(r.status, 413, `9 MiB: ${r.text.slice(0, 300)}`);
      assert(r.text.includes(String(8 * MiB)), `the 413 names the REPL's cap of ${8 * MiB} bytes: ${r.text}`);
      r = await rawRepl(s, '/browsers', JSON.stringify({ headless: true, pad: 'a'.repeat(7 * MiB) }));
      eq(r.status, 413, `7 MiB to POST /browsers: ${r.text.slice(0, 300)}`);
      assert(r.text.includes(String(6 * MiB)), `the 413 names the server-wide cap of ${6 * MiB} bytes: ${r.text}`);
    }),
  },
  {
    name: 'issue 34.2 REPL httpGet: a GET through the session\'s egress (no browser cookies): an allowed loopback page answers {status, url, headers, body} and a redirect is followed; a loopback port the operator did not allow is refused by the egress (throws, success:false, the REPL kept)',
    timeout: 90000,
    fn: async () => {
      const seen = [];
      const site = await startSite((req, res) => {
        seen.push(req.url);
        if (req.url === '/moved') { res.writeHead(302, { location: '/page?x=1' }); res.end(); return; }
        res.writeHead(201, { 'content-type': 'text/plain', 'x-site': 'yes' });
        res.end(`hello ${req.url} ${req.headers['x-probe'] ?? ''}`);
      });
      const denied = await startSite((req, res) => { res.end('must not be reached'); });
      try {
        await withServer({ args: site.allow }, async (s) => {
          const id = await createSession(s);
          let r = await ok(s, id, { code: `var got = await httpGet(${JSON.stringify(`${site.url}/moved`)}, { headers: { 'x-probe': 'p1' } });
            repl.write(JSON.stringify({ status: got.status, url: got.url, site: got.headers['x-site'], body: got.body }))` });
          eq(r.json.success, true, r.text);
          const got = JSON.parse(text(r, 'write'));
          eq(got.status, 201, r.text);
          eq(got.url, `${site.url}/page?x=1`, 'the final URL after the redirect');
          eq(got.site, 'yes', 'the response headers');
          eq(got.body, 'hello /page?x=1 p1', 'the body, the caller\'s header sent');
          r = await ok(s, id, { code: `await httpGet(${JSON.stringify(`${denied.url}/secret`)})` });
          eq(r.json.success, false, `a loopback port not allowed: ${r.text}`);
          assert(/egress refused/.test(r.json.error), `the egress's refusal is the error: ${r.json.error}`);
          assert(!r.json.repl_terminated, 'a refused GET keeps the REPL');
          r = await ok(s, id, { code: 'repl.write(String(got.status))' });
          eq(text(r, 'write'), '201', 'state kept');
          assert(!seen.includes('/secret'), 'the denied site saw nothing');
        });
      } finally { site.close(); denied.close(); }
    },
  },
  {
    name: 'issue 34.3 REPL globals: every global the document lists (ensureRealTab and httpGet included) is a function on globalThis and on the frozen browser object and has a repl.help entry; ensureRealTab leaves an internal tab for the user\'s page and opens one when there is none',
    timeout: 90000,
    fn: async () => {
      const site = await startSite((req, res) => { res.writeHead(200, { 'content-type': 'text/html' }); res.end('<title>real-34</title>real'); });
      try {
        await withServer({ args: site.allow }, async (s) => {
          const id = await createSession(s);
          let r = await ok(s, id, { code: `repl.write(JSON.stringify(${JSON.stringify(DOCUMENTED)}.filter((n) => typeof globalThis[n] !== 'function' || typeof browser[n] !== 'function')));
            repl.write('|' + [typeof webmcp.listTools, typeof webmcp.invokeTool, Object.isFrozen(browser)].join(',') + '\\n');
            repl.help()` });
          eq(r.json.success, true, r.text);
          const all = text(r, 'write');
          const missing = all.slice(0, all.indexOf('|')), rest = all.slice(all.indexOf('|') + 1);
          eq(missing, '[]', 'no documented global is missing');
          assert(rest.startsWith('function,function,true'), `webmcp and a frozen browser: ${rest}`);
          for (const n of DOCUMENTED) assert(new RegExp(`^${n}: ${n}\\(`, 'm').test(rest), `repl.help() describes ${n}`);
          r = await ok(s, id, { code: `await gotoUrl(${JSON.stringify(`${site.url}/real`)}); var realId = (await currentTab()).id;
            var blank = await newTab('about:blank');
            var t = await ensureRealTab();
            repl.write(JSON.stringify({ same: t.id === realId, current: (await currentTab()).id === realId, title: (await pageInfo()).title }))` });
          eq(r.json.success, true, r.text);
          eq(text(r, 'write'), '{"same":true,"current":true,"title":"real-34"}', 'switched from about:blank to the real page');
          r = await ok(s, id, { code: `for (const tb of await listTabs()) await closeTab(tb.id);
            var fresh = await ensureRealTab();
            repl.write(JSON.stringify({ n: (await listTabs()).length, current: fresh && fresh.current }))` });
          eq(r.json.success, true, r.text);
          eq(text(r, 'write'), '{"n":1,"current":true}', 'a tab opened when there was none');
        });
      } finally { site.close(); }
    },
  },
  {
    name: 'issue 34.4 REPL per-organization cap: with BROWSERD_REPL_RUNNING_PER_ORG=1 (an operator setting that only lowers LIM_REPL_RUNNING_PER_ORG) a second execution of the same organization in another session is 429 with Retry-After, while another organization is served; an out-of-range value stops the server',
    timeout: 90000,
    fn: async () => {
      const ADMIN = 'repl-more-admin';
      await withServer({ args: ['--admin-token', ADMIN], env: { BROWSERD_REPL_RUNNING_PER_ORG: '1' } }, async (s) => {
        const other = await newOrg(s, ADMIN, { name: 'other-34' });
        const a = await createSession(s);
        const b = await createSession(s);
        const c = await createSession(s, {}, other.key);
        await ok(s, b, { code: 'repl.write(1)' }); // b's REPL is started: its next call is refused, not slow
        // a's long execution; if one of b's probes below held the
        // organization's one slot when a's call arrived, a's call is the one
        // refused (429): send it again.
        let slow, slowDone;
        const startSlow = () => {
          slowDone = null;
          slow = repl(s, a, { code: 'repl.write("started"); for (;;) {}', timeout_sec: 300 });
          slow.then((r) => { slowDone = r; }, () => {});
        };
        startSlow();
        let refused = null;
        await waitFor(async () => {
          if (slowDone && slowDone.status === 429) startSlow();
          const r = await repl(s, b, { code: 'repl.write("b")' });
          if (r.status === 429) refused = r;
          return refused;
        }, 'the second execution of the organization refused', 30000, 200);
        isError(refused, 429);
        assert(refused.headers['retry-after'], `429 with Retry-After: ${JSON.stringify(refused.headers)}`);
        assert(/1 REPL executions at once/.test(refused.text), refused.text);
        const r = await ok(s, c, { code: 'repl.write("other org")' }, other.key);
        eq(text(r, 'write'), 'other org', 'another organization is served');
        // Deleting its session ends the running execution (its REPL killed).
        await deleteSession(s, a);
        const done = await slow;
        eq(done.status, 200, done.text);
        eq(done.json.repl_terminated, true, 'the running one ended with its session');
        const again = await ok(s, b, { code: 'repl.write("b again")' });
        eq(text(again, 'write'), 'b again', 'the organization is served again once its execution ended');
      });
      let failed = null;
      try {
        await withServer({ env: { BROWSERD_REPL_RUNNING_PER_ORG: '9' } }, async () => {});
      } catch (e) { failed = e; }
      assert(failed && /BROWSERD_REPL_RUNNING_PER_ORG must be an integer from 1 to 8/.test(failed.message), `9 (above the built-in cap) stops the server: ${failed?.message}`);
    },
  },
  {
    name: 'issue 34.5 WebMCP out-of-process iframes: a loopback page with an iframe of another site (127.0.0.2, its own process) (allow="tools") whose document registers a tool, and a third site\'s frame inside it: listed with its title, its frame and the iframe\'s own target, invocable (its output), through the API and the REPL\'s webmcp.listTools',
    timeout: 90000,
    fn: async () => {
      const deep = await startSite((req, res) => {
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end(`<!doctype html><title>deep-34</title><script>
document.modelContext.registerTool({ name: 'deep_tool', description: 'Two frames down', inputSchema: { type: 'object' }, execute: async () => ({ deep: location.origin }) });
</script>`);
      }, { host: '127.0.0.3' });
      const inner = await startSite((req, res) => {
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end(`<!doctype html><title>oop-34</title><script>
document.modelContext.registerTool({ name: 'oop_tool', title: 'Twice', description: 'In another process', inputSchema: { type: 'object', properties: { n: { type: 'number' } } },
  execute: async ({ n }) => ({ twice: 2 * n, origin: location.origin }) });
</script><iframe allow="tools" src="${deep.url}/deep"></iframe>`);
      }, { host: '127.0.0.2' });
      const outer = await startSite((req, res) => {
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end(`<!doctype html><title>outer-34</title><iframe allow="tools" src="${inner.url}/oop"></iframe>`);
      });
      try {
        await withServer({ args: ['--allow-loopback', `${outer.hostport},${inner.hostport},${deep.hostport}`] }, async (s) => {
          const id = await createSession(s);
          const nav = await ok(s, id, { code: `await gotoUrl(${JSON.stringify(`${outer.url}/outer`)}); repl.write(String((await cdp('Target.getTargets', {}, null)).targetInfos.filter((t) => t.type === 'iframe').length))` });
          eq(text(nav, 'write'), '2', `each iframe runs in a process of its own (an iframe target): ${nav.text}`);
          let last = null;
          const tool = await waitFor(async () => {
            const r = await request(s.base, 'GET', `/browsers/${id}/webmcp/tools`, { key: s.key });
            eq(r.status, 200, r.text);
            last = r.json.tools;
            return last.some((t) => t.tool.name === 'deep_tool') && last.find((t) => t.tool.name === 'oop_tool');
          }, 'the out-of-process iframe\'s tool listed', 30000, 250).catch((e) => { throw new Error(`${e.message}: ${JSON.stringify(last)}`); });
          eq(tool.tool.description, 'In another process', 'its description');
          eq(tool.tool.title, 'Twice', 'its title (read from its document: the DevTools events carry none)');
          assert(tool.source.frame && tool.source.frame.url === `${inner.url}/oop`, `listed with its frame: ${JSON.stringify(tool.source)}`);
          eq(tool.source.page_url, `${outer.url}/outer`, 'on the outer page\'s tab');
          assert(tool.source.target_id && tool.source.target_id !== tool.source.tab_id, `the iframe's own target: ${JSON.stringify(tool.source)}`);
          const inv = await request(s.base, 'POST', `/browsers/${id}/webmcp/invoke`, { key: s.key, body: { tool_ref: tool.tool_ref, input: { n: 21 } } });
          eq(inv.status, 200, inv.text);
          eq(inv.json.status, 'completed', inv.text);
          eq(JSON.stringify(inv.json.output), JSON.stringify({ twice: 42, origin: inner.url }), 'the iframe document\'s output');
          const deepTool = last.find((t) => t.tool.name === 'deep_tool');
          eq(deepTool.source.frame.url, `${deep.url}/deep`, 'a frame inside the out-of-process frame, listed with its frame');
          const dinv = await request(s.base, 'POST', `/browsers/${id}/webmcp/invoke`, { key: s.key, body: { tool_ref: deepTool.tool_ref } });
          eq(JSON.stringify(dinv.json && dinv.json.output), JSON.stringify({ deep: deep.url }), `invoked two frames down: ${dinv.text}`);
          const r = await ok(s, id, { code: `var l = await webmcp.listTools(); var t = l.find((x) => x.tool.name === 'oop_tool'); repl.write(JSON.stringify((await webmcp.invokeTool(t.tool_ref, { n: 2 })).output))` });
          eq(text(r, 'write'), JSON.stringify({ twice: 4, origin: inner.url }), `in the REPL: ${r.text}`);
        });
      } finally { deep.close(); inner.close(); outer.close(); }
    },
  },
  {
    name: 'issue 34 REPL patchright: the document\'s pinned patchright is importable beside playwright-core, and its connectOverCDP(process.env.CDP_ENDPOINT) drives the session\'s own browser (a loopback page\'s title read through it)',
    timeout: 90000,
    fn: async () => {
      const site = await startSite((req, res) => {
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end('<!doctype html><title>patchright-34</title><p>hi</p>');
      });
      try {
        await withServer({ args: site.allow }, async (s) => {
          const id = await createSession(s);
          const r = await ok(s, id, { code: `const { chromium } = await import("patchright");
            const b = await chromium.connectOverCDP(process.env.CDP_ENDPOINT);
            const p = await b.contexts()[0].newPage();
            await p.goto(${JSON.stringify(`${site.url}/p`)});
            repl.write(await p.title()); await p.close();`, timeout_sec: 60 });
          eq(r.json.success, true, `patchright ran: ${r.text.slice(0, 600)}`);
          eq(text(r, 'write'), 'patchright-34', 'the title read through patchright');
          await deleteSession(s, id);
        });
      } finally {
        await site.close();
      }
    },
  },
  {
    name: 'issue 34 no host path: the REPL, playwright.execute and a CDP-backed WebMCP tool see runtime-js at a neutral path (/opt/browserd/runtime-js): a failed import, a thrown error\'s stack and import.meta.url name no folder of the host',
    timeout: 90000,
    fn: () => withServer({}, async (s) => {
      const host = process.env.BROWSERD_RUNTIME_JS || new URL('../../runtime-js', import.meta.url).pathname.replace(/\/$/, '');
      const id = await createSession(s);
      let r = await repl(s, id, { code: 'await import("no-such-package-34")' });
      eq(r.status, 200, r.text);
      eq(r.json.success, false, r.text);
      assert(/opt\/browserd\/runtime-js/.test(r.text) && !r.text.includes(host), `the REPL's failed import names the neutral path, not ${host}: ${r.text.slice(0, 600)}`);
      r = await request(s.base, 'POST', `/browsers/${id}/playwright/execute`, { key: s.key, body: { code: 'throw new Error("boom-34")' } });
      assert(/boom-34/.test(r.text) && !r.text.includes(host), `playwright.execute's error names no host folder (${host}): ${r.text.slice(0, 600)}`);
      r = await request(s.base, 'POST', `/browsers/${id}/webmcp/custom-tools`, { key: s.key, body: { namespace: 'np34', source: `[{ kind: 'cdp', match: { url_patterns: ['*'] }, tool: { name: 'where', description: 'd' }, execute: async () => { throw new Error(new Error().stack); } }]` } });
      eq(r.status, 200, r.text);
      const list = await request(s.base, 'GET', `/browsers/${id}/webmcp/tools`, { key: s.key });
      const t = (list.json.tools || []).find((x) => x.tool.name === 'where');
      assert(t, `the cdp tool listed: ${list.text.slice(0, 400)}`);
      r = await request(s.base, 'POST', `/browsers/${id}/webmcp/invoke`, { key: s.key, body: { tool_ref: t.tool_ref, input: {} } });
      eq(r.json.status, 'error', r.text);
      assert(!r.text.includes(host), `a CDP-backed tool's error names no host folder (${host}): ${r.text.slice(0, 600)}`);
      await deleteSession(s, id);
    }),
  },
];
